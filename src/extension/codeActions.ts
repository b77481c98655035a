/** Quick fixes for the extension's diagnostics, from the findings of the same document version. */
import * as vscode from 'vscode';
import type { DocumentAnalyses } from './analyses';
import { toRange } from './convert';
import { SOURCE } from './diagnostics';

/** Quick fixes for fsdp-lens diagnostics, from the findings of the analysis of the same document version. */
export class FixProvider implements vscode.CodeActionProvider {
  static readonly metadata: vscode.CodeActionProviderMetadata = {
    providedCodeActionKinds: [vscode.CodeActionKind.QuickFix],
  };

  constructor(private readonly analyses: DocumentAnalyses) {}

  provideCodeActions(
    document: vscode.TextDocument,
    _range: vscode.Range,
    context: vscode.CodeActionContext,
  ): vscode.CodeAction[] {
    const analysis = this.analyses.latest(document.uri);
    if (!analysis || analysis.version !== document.version) return [];
    const actions: vscode.CodeAction[] = [];
    for (const diagnostic of context.diagnostics) {
      if (diagnostic.source !== SOURCE) continue;
      const code =
        typeof diagnostic.code === 'object' ? String(diagnostic.code.value) : String(diagnostic.code);
      const finding = analysis.findings.find(
        (f) => f.rule === code && toRange(f.range).isEqual(diagnostic.range),
      );
      if (!finding) continue;
      for (const fix of finding.fixes) {
        const action = new vscode.CodeAction(fix.title, vscode.CodeActionKind.QuickFix);
        action.diagnostics = [diagnostic];
        action.isPreferred = !!fix.preferred;
        action.edit = new vscode.WorkspaceEdit();
        for (const e of fix.edits) action.edit.replace(document.uri, toRange(e.range), e.newText);
        actions.push(action);
      }
    }
    return actions;
  }
}
