/** The status bar entry: the active file's peak per GPU and whether it fits. */
import * as vscode from 'vscode';
import { statusSummary } from '../core/report/status';
import type { DocumentAnalyses, DocumentAnalysis } from './analyses';
import { COMMANDS } from './commands';
import { readSettings } from './settings';

/** The active file's per-GPU peak and whether it fits, in the status bar; a click opens the panel. */
export class FitStatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem(
    'fsdpLens.fit',
    vscode.StatusBarAlignment.Right,
    100,
  );
  private readonly disposables: vscode.Disposable[] = [];
  /** The document whose estimate the entry shows. */
  private shown: string | undefined;

  constructor(private readonly analyses: DocumentAnalyses) {
    this.item.name = 'FSDP fit';
    this.disposables.push(
      this.item,
      analyses.onDidAnalyze((a) => {
        if (vscode.window.activeTextEditor?.document.uri.toString() === a.uri) this.show(a);
      }),
      // No text editor is active while a webview (the footprint panel) or another view has focus: the entry keeps
      // the last file's estimate then, rather than vanish beside the panel that explains it.
      vscode.window.onDidChangeActiveTextEditor((editor) => {
        const shown = this.shown;
        if (editor || !shown || !vscode.workspace.textDocuments.some((d) => d.uri.toString() === shown))
          this.refresh();
      }),
    );
    this.refresh();
  }

  refresh(): void {
    const doc = vscode.window.activeTextEditor?.document;
    const a = doc && this.analyses.latest(doc.uri);
    if (a) this.show(a);
    else {
      this.shown = undefined;
      this.item.hide();
    }
  }

  private show(a: DocumentAnalysis): void {
    const r = a.estimate;
    // A script's own wraps, or a helper's it calls (placed at its calls of it).
    const wraps = a.facts.calls.length + (r?.helperCalls?.length ?? 0);
    if (!readSettings(vscode.Uri.parse(a.uri)).statusBarEnabled || !r?.ok || !wraps) {
      this.shown = undefined;
      this.item.hide();
      return;
    }
    this.shown = a.uri;
    const st = statusSummary(r.estimate, a.units);
    this.item.text = st.text;
    this.item.tooltip = new vscode.MarkdownString(st.tooltip.join('\n\n'));
    this.item.backgroundColor =
      st.verdict === 'short' ? new vscode.ThemeColor('statusBarItem.warningBackground') : undefined;
    this.item.command = {
      title: 'Estimate FSDP footprint',
      command: COMMANDS.estimateFootprint,
      arguments: [vscode.Uri.parse(a.uri)],
    };
    this.item.accessibilityInformation = { label: st.accessibilityLabel };
    this.item.show();
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }
}
