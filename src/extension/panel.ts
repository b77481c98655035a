import * as crypto from 'node:crypto';
import * as vscode from 'vscode';
import { describeCall } from '../core/analysis/describe';
import { estimateJson } from '../core/report/json';
import type { PanelData } from '../core/report/panelData';
import { lensTitle } from '../core/report/summary';
import type { DocumentAnalysis } from './analyses';

export const PANEL_VIEW_TYPE = 'fsdpLens.footprint';

/** The "Estimate FSDP footprint" panel: one per window, reused and revealed. */
export class FootprintPanel implements vscode.Disposable {
  private static current?: FootprintPanel;
  private readonly disposables: vscode.Disposable[] = [];

  private constructor(
    private readonly panel: vscode.WebviewPanel,
    private readonly extensionUri: vscode.Uri,
  ) {
    panel.onDidDispose(() => this.dispose(), null, this.disposables);
    panel.webview.html = this.html();
  }

  /** Opens (or reveals) the panel and shows an analysis. */
  static show(extensionUri: vscode.Uri, data: PanelData): FootprintPanel {
    let p = FootprintPanel.current;
    if (!p) {
      const panel = vscode.window.createWebviewPanel(
        PANEL_VIEW_TYPE,
        'FSDP footprint',
        { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
        panelOptions(extensionUri),
      );
      p = new FootprintPanel(panel, extensionUri);
      FootprintPanel.current = p;
    } else p.panel.reveal(vscode.ViewColumn.Beside, true);
    p.update(data);
    return p;
  }

  /** Restores a panel VS Code kept across a reload; its last state comes from the webview's own `setState`. */
  static revive(panel: vscode.WebviewPanel, extensionUri: vscode.Uri): FootprintPanel {
    panel.webview.options = panelOptions(extensionUri);
    const p = new FootprintPanel(panel, extensionUri);
    FootprintPanel.current = p;
    return p;
  }

  static get active(): FootprintPanel | undefined {
    return FootprintPanel.current;
  }

  /** The document the panel shows. */
  uri: string | undefined;

  update(data: PanelData): void {
    this.uri = data.uri;
    this.panel.title = `FSDP footprint: ${data.file.split(/[\\/]/).pop() ?? data.file}`;
    void this.panel.webview.postMessage({ type: 'update', data });
  }

  private html(): string {
    const webview = this.panel.webview;
    const nonce = crypto.randomBytes(16).toString('base64');
    const script = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, 'dist', 'panel.js'));
    const style = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, 'media', 'panel.css'));
    const csp = [
      "default-src 'none'",
      `style-src ${webview.cspSource}`,
      `img-src ${webview.cspSource} data:`,
      `script-src 'nonce-${nonce}'`,
      `font-src ${webview.cspSource}`,
    ].join('; ');
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${style.toString()}">
<title>FSDP footprint</title>
</head>
<body>
<main id="app" aria-live="polite"><p class="muted">Analysing…</p></main>
<script nonce="${nonce}" src="${script.toString()}"></script>
</body>
</html>`;
  }

  dispose(): void {
    if (FootprintPanel.current === this) FootprintPanel.current = undefined;
    this.panel.dispose();
    for (const d of this.disposables) d.dispose();
  }
}

function panelOptions(extensionUri: vscode.Uri): vscode.WebviewPanelOptions & vscode.WebviewOptions {
  return {
    enableScripts: true,
    localResourceRoots: [
      vscode.Uri.joinPath(extensionUri, 'dist'),
      vscode.Uri.joinPath(extensionUri, 'media'),
    ],
  };
}

/** The panel's data for an analysis. */
export function panelData(analysis: DocumentAnalysis, focusUnit: number | null): PanelData {
  const r = analysis.estimate;
  const e = r?.ok ? r.estimate : undefined;
  const data: PanelData = {
    file: analysis.facts.path,
    uri: analysis.uri,
    focusUnit,
    units: analysis.units,
    calls: analysis.facts.calls.map((c) => ({
      line: c.line,
      api: c.api,
      target: c.target,
      description: describeCall(c),
      lens: lensTitle(c, e, analysis.units),
    })),
  };
  if (r?.ok) data.estimate = estimateJson(r.estimate, r.model);
  else if (r) data.noEstimate = { reason: r.reason, ...(r.hint ? { hint: r.hint } : {}) };
  if (analysis.notice) data.notice = analysis.notice;
  return data;
}
