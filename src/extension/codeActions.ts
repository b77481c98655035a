/** Quick fixes for the extension's diagnostics, from the findings of the same document version. */
import * as vscode from 'vscode';
import type { DocumentAnalyses } from './analyses';
import { toRange } from './convert';
import { SOURCE } from './diagnostics';
import { COMMANDS } from './commands';

/** Quick fixes for fsdp-lens diagnostics, from the findings of the analysis of the same document version. */
export class FixProvider implements vscode.CodeActionProvider {
  static readonly metadata: vscode.CodeActionProviderMetadata = {
    providedCodeActionKinds: [vscode.CodeActionKind.QuickFix, vscode.CodeActionKind.RefactorRewrite],
  };

  constructor(private readonly analyses: DocumentAnalyses) {}

  provideCodeActions(
    document: vscode.TextDocument,
    range: vscode.Range,
    context: vscode.CodeActionContext,
  ): vscode.CodeAction[] {
    const analysis = this.analyses.latest(document.uri);
    if (!analysis || analysis.version !== document.version) return [];
    const actions: vscode.CodeAction[] = [];
    // On an FSDP1 wrap: the file's FSDP1 wraps rewritten as FSDP2 fully_shard calls (`migrateToFsdp2`).
    const m = analysis.migration;
    const onFsdp1 = analysis.facts.calls.some(
      (c) => c.api === 'FSDP' && toRange(c.range).intersection(range),
    );
    if (m && onFsdp1) {
      const action = new vscode.CodeAction(
        `Migrate to FSDP2 (fully_shard)${m.notes.length ? `: ${m.notes.length} note${m.notes.length > 1 ? 's' : ''} in the log` : ''}`,
        vscode.CodeActionKind.RefactorRewrite,
      );
      if (m.edits.length) {
        action.edit = new vscode.WorkspaceEdit();
        for (const e of m.edits) action.edit.replace(document.uri, toRange(e.range), e.newText);
        if (m.notes.length)
          action.command = {
            title: 'Show the notes',
            command: COMMANDS.showLog,
            arguments: [[`Migrated ${document.uri.fsPath} to FSDP2:`, ...m.notes.map((n) => `  ${n}`)]],
          };
      } else action.disabled = { reason: m.skipped.join('; ') };
      actions.push(action);
    }
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
