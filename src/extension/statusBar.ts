/** The status bar entry: the active file's peak per GPU and whether it fits. */
import * as vscode from 'vscode';
import { fmtBytes } from '../core/vocabulary/bytes';
import { peakWhere, spaced } from '../core/vocabulary/words';
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
    const e = r.estimate;
    const b = (n: number) => fmtBytes(n, a.units);
    const fit = e.targetFit;
    const ok = !!fit?.fits;
    this.item.text = `${ok ? '$(check)' : '$(warning)'} FSDP ${b(e.perGpu.peakBytes)}/GPU`;
    const md = new vscode.MarkdownString();
    md.appendMarkdown(
      `**FSDP peak per GPU: ${b(e.perGpu.peakBytes)}**${spaced(peakWhere(e.perGpu.peakAt))}\n\n`,
    );
    if (fit)
      md.appendMarkdown(
        ok
          ? `Fits ${e.mesh.worldSize} x ${e.gpu.name} with ${b(fit.headroomBytes)} to spare.\n\n`
          : `Does not fit ${e.mesh.worldSize} x ${e.gpu.name}: ${b(-fit.headroomBytes)} short.\n\n`,
      );
    md.appendMarkdown(
      `Persistent ${b(e.perGpu.persistentBytes)} per GPU. Click to open the footprint panel.`,
    );
    this.item.tooltip = md;
    this.item.backgroundColor = ok ? undefined : new vscode.ThemeColor('statusBarItem.warningBackground');
    this.item.command = {
      title: 'Estimate FSDP footprint',
      command: COMMANDS.estimateFootprint,
      arguments: [vscode.Uri.parse(a.uri)],
    };
    this.item.accessibilityInformation = {
      label: `FSDP peak ${b(e.perGpu.peakBytes)} per GPU, ${ok ? 'fits' : 'does not fit'} ${e.gpu.name}`,
    };
    this.item.show();
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }
}
