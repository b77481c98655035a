import type { ByteUnits } from '../estimator/format';
import type { estimateJson } from './json';

/** What the webview receives: plain data, rendered by media/panel.ts. */
export interface PanelData {
  file: string;
  uri: string;
  focusUnit: number | null;
  units: ByteUnits;
  calls: { line: number; api: string; target: string; description: string; lens: string }[];
  estimate?: ReturnType<typeof estimateJson>;
  noEstimate?: { reason: string; hint?: string };
  notice?: string;
}
