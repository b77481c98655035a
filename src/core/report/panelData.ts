/** What the webview receives: plain data, rendered by media/panel.ts. */
export interface PanelData {
  file: string;
  uri: string;
  focusUnit: number | null;
  calls: { line: number; api: string; target: string; description: string }[];
  notice?: string;
}
