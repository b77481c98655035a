/** Lint findings as diagnostics, published for the document version they were computed on. */
import * as vscode from 'vscode';
import { ruleAnchor } from '../core/lint/docs';
import { ruleById } from '../core/lint/registry';
import type { Finding, Severity } from '../core/lint/types';
import { plainText } from '../core/vocabulary/words';
import type { DocumentAnalyses, DocumentAnalysis } from './analyses';
import { toRange } from './convert';

export const SOURCE = 'fsdp-lens';

const SEVERITY: Record<Severity, vscode.DiagnosticSeverity> = {
  error: vscode.DiagnosticSeverity.Error,
  warning: vscode.DiagnosticSeverity.Warning,
  info: vscode.DiagnosticSeverity.Information,
  hint: vscode.DiagnosticSeverity.Hint,
};

/** Lint findings as diagnostics: published only for the document version they were computed on. */
export class Diagnostics implements vscode.Disposable {
  private readonly collection = vscode.languages.createDiagnosticCollection(SOURCE);
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly analyses: DocumentAnalyses,
    private readonly extensionUri: vscode.Uri,
  ) {
    this.disposables.push(
      this.collection,
      analyses.onDidAnalyze((a) => this.publish(a)),
      vscode.workspace.onDidCloseTextDocument((d) => this.collection.delete(d.uri)),
      // Closing the last editor tab of a file closes it for the user, though VS Code keeps the document a while.
      vscode.window.tabGroups.onDidChangeTabs((e) => {
        // An analysis that finished as the document opened, before its tab showed, is published now.
        for (const tab of e.opened) {
          const uri = tab.input instanceof vscode.TabInputText ? tab.input.uri : undefined;
          const a = uri && this.analyses.latest(uri);
          if (a) this.publish(a);
        }
        for (const tab of e.closed) {
          const uri = tab.input instanceof vscode.TabInputText ? tab.input.uri : undefined;
          if (uri && !isShown(uri)) this.collection.delete(uri);
        }
      }),
    );
  }

  private publish(a: DocumentAnalysis): void {
    const uri = vscode.Uri.parse(a.uri);
    const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === a.uri);
    if (!doc || doc.isClosed || !isShown(uri)) return;
    if (doc.version !== a.version) return; // a newer edit is pending: its analysis publishes
    this.collection.set(
      uri,
      a.findings.map((f) => this.toDiagnostic(f, uri)),
    );
  }

  toDiagnostic(f: Finding, uri: vscode.Uri): vscode.Diagnostic {
    // The finding in a line, verdict first (plain text, as a diagnostic's message is); the whole explanation is
    // in the hover over its range (`FindingHoverProvider`).
    const d = new vscode.Diagnostic(toRange(f.range), f.summary, SEVERITY[f.severity]);
    d.source = SOURCE;
    const rule = ruleById(f.rule);
    d.code = rule
      ? {
          value: f.rule,
          target: vscode.Uri.joinPath(this.extensionUri, 'docs', 'rules.md').with({
            fragment: ruleAnchor(rule),
          }),
        }
      : f.rule;
    if (f.related?.length) {
      d.relatedInformation = f.related.map(
        (r) =>
          new vscode.DiagnosticRelatedInformation(
            new vscode.Location(uri, toRange(r.range)),
            plainText(r.message),
          ),
      );
    }
    return d;
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }
}

/** Whether any editor tab shows the file. */
function isShown(uri: vscode.Uri): boolean {
  const key = uri.toString();
  return vscode.window.tabGroups.all.some((g) =>
    g.tabs.some((t) => t.input instanceof vscode.TabInputText && t.input.uri.toString() === key),
  );
}
