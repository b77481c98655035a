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

  constructor(private readonly analyses: DocumentAnalyses) {
    this.item.name = 'FSDP fit';
    this.disposables.push(
      this.item,
      analyses.onDidAnalyze((a) => {
        if (vscode.window.activeTextEditor?.document.uri.toString() === a.uri) this.show(a);
      }),
      vscode.window.onDidChangeActiveTextEditor(() => this.refresh()),
    );
    this.refresh();
  }

  refresh(): void {
    const doc = vscode.window.activeTextEditor?.document;
    const a = doc && this.analyses.latest(doc.uri);
    if (a) this.show(a);
    else this.item.hide();
  }

  private show(a: DocumentAnalysis): void {
    const r = a.estimate;
    if (!readSettings(vscode.Uri.parse(a.uri)).statusBarEnabled || !r?.ok || !a.facts.calls.length) {
      this.item.hide();
      return;
    }
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
