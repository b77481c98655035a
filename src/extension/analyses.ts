import * as path from 'node:path';
import * as vscode from 'vscode';
import { emptyFacts, type FileFacts } from '../core/analysis/facts';
import { analyzeFacts } from '../core/pipeline';
import type { WorkspaceProjects } from './projects';
import type { Finding } from '../core/lint/types';
import type { ByteUnits } from '../core/estimator/format';
import type { EstimateResult, ModelChoice } from '../core/resolve/analyze';
import { checkTextSize } from '../core/analysis/input';
import { scanFile } from '../core/analysis/scan';
import { ParsedDocument } from '../core/parsing/document';
import { loadPython, type PythonGrammar } from '../core/parsing/python';
import { SourceFile } from '../core/parsing/source';
import { readSettings } from './settings';

/** The analysis of one document version. */
export interface DocumentAnalysis {
  uri: string;
  version: number;
  facts: FileFacts;
  /** Lint findings under the settings in force for the document. */
  findings: Finding[];
  /** The estimate, or why there is none (no model known, a bad config). */
  estimate?: EstimateResult;
  units: ByteUnits;
  /** Set when the document was not analysed (too large, grammar unavailable): why, in words. */
  notice?: string;
}

interface Entry {
  doc: ParsedDocument;
  result?: DocumentAnalysis;
  pending?: {
    version: number;
    promise: Promise<DocumentAnalysis | undefined>;
    cancel: vscode.CancellationTokenSource;
  };
  timer?: ReturnType<typeof setTimeout>;
}

/**
 * Analyses of open Python documents, cached per document version. Edits are applied to the cached syntax tree
 * as they arrive (so the next parse is incremental); the analysis itself runs after a short pause in typing, and
 * a newer edit cancels a run that has not finished. Providers ask for a version and get the cached result or
 * wait for the run in flight; nothing here blocks the editor.
 */
export class DocumentAnalyses implements vscode.Disposable {
  private readonly entries = new Map<string, Entry>();
  private readonly changed = new vscode.EventEmitter<DocumentAnalysis>();
  private readonly disposables: vscode.Disposable[] = [];
  private grammar?: Promise<PythonGrammar>;

  /** Fires when a newer analysis of a document is available. */
  readonly onDidAnalyze = this.changed.event;

  /** Projects of the workspace (set once the grammar is loaded). */
  projects?: WorkspaceProjects;
  private grammarLoaded?: PythonGrammar;

  /** The grammar, once loaded (projects parse imported files with it). */
  loadedGrammar(): PythonGrammar | undefined {
    return this.grammarLoaded;
  }

  constructor(private readonly wasmDir: string) {
    this.disposables.push(
      vscode.workspace.onDidChangeTextDocument((e) => this.onChange(e)),
      vscode.workspace.onDidCloseTextDocument((d) => this.forget(d.uri)),
      this.changed,
    );
  }

  private loadGrammar(): Promise<PythonGrammar> {
    this.grammar ??= loadPython(this.wasmDir).then((g) => (this.grammarLoaded = g));
    return this.grammar;
  }

  /** The latest finished analysis of a document, whatever its version (for stable display while typing). */
  latest(uri: vscode.Uri): DocumentAnalysis | undefined {
    return this.entries.get(uri.toString())?.result;
  }

  /** The analysis of the document's current version: cached, in flight, or started now. */
  async analyze(
    document: vscode.TextDocument,
    token?: vscode.CancellationToken,
  ): Promise<DocumentAnalysis | undefined> {
    if (document.languageId !== 'python') return undefined;
    const key = document.uri.toString();
    const entry = await this.entry(key);
    if (entry.result?.version === document.version) return entry.result;
    if (entry.pending?.version === document.version) return race(entry.pending.promise, token);
    return race(this.start(entry, document), token);
  }

  private async entry(key: string): Promise<Entry> {
    let e = this.entries.get(key);
    if (!e) {
      const grammar = await this.loadGrammar();
      e = this.entries.get(key);
      if (!e) {
        e = { doc: new ParsedDocument(grammar) };
        this.entries.set(key, e);
      }
    }
    return e;
  }

  private start(entry: Entry, document: vscode.TextDocument): Promise<DocumentAnalysis | undefined> {
    entry.pending?.cancel.cancel();
    const cancel = new vscode.CancellationTokenSource();
    const version = document.version;
    const promise = new Promise<DocumentAnalysis | undefined>((resolve) => {
      // Yield once so that a burst of requests for the same version shares one run.
      setImmediate(() => {
        if (cancel.token.isCancellationRequested || document.version !== version) return resolve(undefined);
        try {
          resolve(this.run(entry, document));
        } catch (e) {
          resolve({
            uri: document.uri.toString(),
            version,
            facts: emptyFacts(document.uri.fsPath),
            findings: [],
            units: 'GB',
            notice: `analysis failed: ${String(e)}`,
          });
        }
      });
    }).then((result) => {
      if (entry.pending?.promise === promise) entry.pending = undefined;
      if (result && (!entry.result || entry.result.version <= result.version)) {
        entry.result = result;
        this.changed.fire(result);
      }
      return result;
    });
    entry.pending = { version, promise, cancel };
    return promise;
  }

  private run(entry: Entry, document: vscode.TextDocument): DocumentAnalysis {
    const text = document.getText();
    const uri = document.uri.toString();
    const settings = readSettings(document.uri);
    const tooLarge = checkTextSize(text, settings.maxFileSizeKB * 1024);
    if (tooLarge) {
      entry.doc.reset();
      return {
        uri,
        version: document.version,
        facts: emptyFacts(document.uri.fsPath),
        findings: [],
        units: settings.units,
        notice: `fsdp-lens: not analysed: ${tooLarge} (setting fsdpLens.maxFileSizeKB)`,
      };
    }
    const tree = entry.doc.parse(text, document.version);
    const facts = scanFile(entry.doc.grammar, new SourceFile(document.uri.fsPath || uri, text, tree));
    const project = this.projects?.forDocument(document.uri);
    const m = settings.model;
    const fallbackModel: ModelChoice | undefined = m
      ? {
          ...(m.endsWith('.json') || m.includes(path.sep) ? { config: m } : { id: m }),
          source: { kind: 'setting', detail: 'fsdpLens.model' },
        }
      : undefined;
    const choice = this.projects?.modelChoice(document.uri);
    const exactModel = this.projects?.exactModel(document.uri);
    const a = analyzeFacts(facts, text, {
      lint: settings.lint.enabled ? settings.lint : null,
      estimate: {
        settings: settings.estimate,
        ...(fallbackModel ? { fallbackModel } : {}),
        ...(project ? { project } : {}),
        ...(choice ? { modelChoice: choice } : {}),
        ...(exactModel ? { exactModel } : {}),
      },
    });
    return {
      uri,
      version: document.version,
      facts,
      findings: a.findings,
      units: settings.units,
      ...(a.estimate ? { estimate: a.estimate } : {}),
    };
  }

  private onChange(e: vscode.TextDocumentChangeEvent): void {
    if (e.document.languageId !== 'python' || e.contentChanges.length === 0) return;
    const key = e.document.uri.toString();
    const entry = this.entries.get(key);
    if (!entry) return;
    entry.doc.applyChanges(
      e.contentChanges.map((c) => ({
        offset: c.rangeOffset,
        length: c.rangeLength,
        start: c.range.start,
        end: c.range.end,
        text: c.text,
      })),
    );
    entry.pending?.cancel.cancel();
    entry.pending = undefined;
    if (entry.timer) clearTimeout(entry.timer);
    const delay = readSettings(e.document.uri).analysisDelayMs;
    entry.timer = setTimeout(() => {
      entry.timer = undefined;
      void this.analyze(e.document);
    }, delay);
  }

  /** Drops cached results (settings changed): the next request re-analyses; the trees stay. */
  invalidate(): void {
    for (const e of this.entries.values()) e.result = undefined;
  }

  private forget(uri: vscode.Uri): void {
    const key = uri.toString();
    const e = this.entries.get(key);
    if (!e) return;
    if (e.timer) clearTimeout(e.timer);
    e.pending?.cancel.cancel();
    e.doc.dispose();
    this.entries.delete(key);
  }

  dispose(): void {
    for (const key of [...this.entries.keys()]) this.forget(vscode.Uri.parse(key));
    for (const d of this.disposables) d.dispose();
  }
}

function race<T>(p: Promise<T>, token?: vscode.CancellationToken): Promise<T | undefined> {
  if (!token) return p;
  if (token.isCancellationRequested) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const sub = token.onCancellationRequested(() => {
      sub.dispose();
      resolve(undefined);
    });
    p.then(
      (v) => {
        sub.dispose();
        resolve(v);
      },
      () => {
        sub.dispose();
        resolve(undefined);
      },
    );
  });
}
