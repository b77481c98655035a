/**
 * Analyses of open documents, cached per version: edits applied to the tree as they arrive, the analysis after a
 * pause, through the core entry.
 */
import * as path from 'node:path';
import * as vscode from 'vscode';
import { emptyFacts, type FileFacts } from '../core/analysis/facts';
import { analyzeDocument, isConfigPath, type DocumentAnalysis as CoreAnalysis } from '../core/entry/analyze';
import { diskFS, nodeHost } from '../host/disk';
import { confine, huggingFaceRoots } from '../core/project/boundary';
import type { ConfigReading } from '../core/frameworks/read';
import type { WorkspaceProjects } from './projects';
import type { Finding } from '../core/lint/types';
import type { ByteUnit } from '../core/vocabulary/bytes';
import type { EstimateResult } from '../core/resolve/analyze';
import type { ModelChoice } from '../core/inputs/model';
import { checkTextSize } from '../core/analysis/input';
import { ParsedDocument } from '../core/parsing/document';
import { loadPython } from '../host/grammar';
import { type PythonGrammar } from '../core/parsing/python';
import { readSettings, type Settings } from './settings';

/** The analysis of one document version. */
export interface DocumentAnalysis {
  uri: string;
  version: number;
  facts: FileFacts;
  /** Lint findings under the settings in force for the document. */
  findings: Finding[];
  /** The estimate, or why there is none (no model known, a bad config). */
  estimate?: EstimateResult;
  units: ByteUnit;
  /** Set when the document was not analysed (too large, grammar unavailable): why, in words. */
  notice?: string;
  /** A framework configuration (Accelerate, torchtune, torchtitan, DeepSpeed, a launch script): what it is. */
  config?: ConfigReading;
  /** Set when the analysis stopped at its budget: why (the result is partial). */
  incomplete?: string;
}

/** Whether the document is one fsdp-lens reads: Python, or a configuration file that may configure FSDP. */
export function isAnalysable(document: vscode.TextDocument): boolean {
  return document.languageId === 'python' || isConfigDocument(document);
}

function elapsed(since: number): string {
  const ms = performance.now() - since;
  return ms >= 10 ? `${ms.toFixed(0)} ms` : `${ms.toFixed(1)} ms`;
}

function label(document: vscode.TextDocument): string {
  return vscode.workspace.asRelativePath(document.uri, false);
}

export function isConfigDocument(document: vscode.TextDocument): boolean {
  const name = document.uri.path;
  return isConfigPath(name) && !/(^|\/)(package(-lock)?|tsconfig|\.vscode\/\w+)\.json$/.test(name);
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
  /** The analysis the timer will start, for requests that arrive while edits are still coming in. */
  waiting?: {
    version: number;
    promise: Promise<DocumentAnalysis | undefined>;
    resolve: (a: DocumentAnalysis | undefined) => void;
  };
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

  /** When each open document was opened (for the log's "ready N ms after opening"). */
  private readonly openedAt = new Map<string, number>();

  constructor(
    private readonly wasmDir: string,
    private readonly log?: vscode.LogOutputChannel,
  ) {
    this.disposables.push(
      // Analysis starts as a document opens: its lenses, hover and problems are ready when the editor asks.
      vscode.workspace.onDidOpenTextDocument((d) => {
        if (!isAnalysable(d)) return;
        this.openedAt.set(d.uri.toString(), performance.now());
        void this.analyze(d);
      }),
      vscode.workspace.onDidChangeTextDocument((e) => this.onChange(e)),
      vscode.workspace.onDidCloseTextDocument((d) => this.forget(d.uri)),
      this.changed,
    );
  }

  private loadGrammar(): Promise<PythonGrammar> {
    const t = performance.now();
    this.grammar ??= loadPython(this.wasmDir).then(
      (g) => {
        this.log?.info(`Python grammar loaded in ${elapsed(t)}`);
        return (this.grammarLoaded = g);
      },
      (e: unknown) => {
        this.log?.error(`Python grammar failed to load: ${String(e)}`);
        throw e;
      },
    );
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
    if (!isAnalysable(document)) return undefined;
    const key = document.uri.toString();
    const entry = await this.entry(key);
    if (entry.result?.version === document.version) return entry.result;
    if (entry.pending?.version === document.version) return race(entry.pending.promise, token);
    // Typing: the lens or hover asking for this version waits for the pause the timer marks, not a run per key.
    if (entry.timer && entry.waiting?.version === document.version) return race(entry.waiting.promise, token);
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
          const t = performance.now();
          const result = this.run(entry, document);
          this.logRun(document, result, t, !entry.result);
          resolve(result);
        } catch (e) {
          this.log?.error(`${label(document)}: analysis failed:`, e instanceof Error ? e : String(e));
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
    if (isConfigDocument(document)) return this.runConfig(document, text, settings);
    const tree = entry.doc.parse(text, document.version);
    const project = this.projects?.forDocument(document.uri);
    const fallback = fallbackModel(settings);
    const choice = this.projects?.modelChoice(document.uri);
    const exactModel = this.projects?.exactModel(document.uri);
    const a = analyzeDocument(
      entry.doc.grammar,
      { file: document.uri.fsPath || uri, text, tree },
      {
        lint: settings.lint.enabled ? settings.lint : null,
        estimate: {
          settings: settings.estimate,
          host: this.host(document, settings),
          ...(fallback ? { fallbackModel: fallback } : {}),
          ...(project ? { project } : {}),
          ...(choice ? { modelChoice: choice } : {}),
          ...(exactModel ? { exactModel } : {}),
        },
      },
    );
    this.logGaps(document, a);
    return {
      uri,
      version: document.version,
      facts: a.facts,
      findings: a.findings,
      units: settings.units,
      ...(a.estimate ? { estimate: a.estimate } : {}),
      ...(a.incomplete ? { incomplete: a.incomplete } : {}),
    };
  }

  /** What an analysis left out, in the log: its budget stop, and each stage that failed with its stack. */
  private logGaps(document: vscode.TextDocument, a: CoreAnalysis): void {
    if (a.incomplete) this.log?.warn(`${label(document)}: partial result: ${a.incomplete}`);
    for (const f of a.faults)
      this.log?.error(`${label(document)}: ${f.stage} failed: ${f.message}${f.stack ? `\n${f.stack}` : ''}`);
  }

  /** The machine as the analysis sees it: the project's file system (open documents first) over the disk. */
  private host(document: vscode.TextDocument, settings: Settings) {
    const m = settings.model;
    // A relative path resolves inside the workspace, which the host serves anyway.
    const usersPaths = m && settings.modelIsUsers && isModelPath(m) && path.isAbsolute(m) ? [m] : [];
    return (
      this.projects?.hostFor(document.uri, usersPaths) ??
      nodeHost(confine(diskFS, huggingFaceRoots(nodeHost())))
    );
  }

  /** One line per analysis: the first of a document at info level (with the time since it opened), later ones at debug. */
  private logRun(document: vscode.TextDocument, a: DocumentAnalysis, start: number, first: boolean): void {
    if (!this.log) return;
    const key = document.uri.toString();
    const opened = this.openedAt.get(key);
    const what = a.notice
      ? a.notice
      : `${a.facts.calls.length} wrap call${a.facts.calls.length === 1 ? '' : 's'}, ${a.findings.length} finding${a.findings.length === 1 ? '' : 's'}` +
        (a.estimate ? (a.estimate.ok ? ', estimated' : `, no estimate: ${a.estimate.reason}`) : '');
    const line = `${label(document)} v${document.version}: analysed in ${elapsed(start)} (${what})`;
    if (first && opened !== undefined) {
      this.log.info(`${line}; ready ${elapsed(opened)} after the document opened`);
      this.openedAt.delete(key);
    } else if (first) this.log.info(line);
    else this.log.debug(line);
  }

  /** A configuration file: read as a framework's FSDP plan, estimated and linted like a script's own. */
  private runConfig(document: vscode.TextDocument, text: string, settings: Settings): DocumentAnalysis {
    const uri = document.uri.toString();
    const file = document.uri.fsPath || document.uri.path;
    const project = this.projects?.forDocument(document.uri);
    const grammar = this.grammarLoaded!;
    const a = analyzeDocument(
      grammar,
      { file, text },
      {
        lint: settings.lint.enabled ? settings.lint : null,
        estimate: {
          settings: settings.estimate,
          host: this.host(document, settings),
          ...(project ? { project } : {}),
          ...(fallbackModel(settings) ? { fallbackModel: fallbackModel(settings)! } : {}),
        },
      },
    );
    this.logGaps(document, a);
    return {
      uri,
      version: document.version,
      facts: a.facts,
      findings: a.findings,
      units: settings.units,
      ...(a.incomplete ? { incomplete: a.incomplete } : {}),
      ...(a.reading ? { config: a.reading } : {}),
      ...(a.estimate ? { estimate: a.estimate } : {}),
    };
  }

  private onChange(e: vscode.TextDocumentChangeEvent): void {
    if (!isAnalysable(e.document) || e.contentChanges.length === 0) return;
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
    // Whoever waited for the version before this edit gets nothing new: they keep showing the latest result.
    entry.waiting?.resolve(undefined);
    let resolve: (a: DocumentAnalysis | undefined) => void = () => undefined;
    const promise = new Promise<DocumentAnalysis | undefined>((r) => (resolve = r));
    const waiting = { version: e.document.version, promise, resolve };
    entry.waiting = waiting;
    const delay = readSettings(e.document.uri).analysisDelayMs;
    entry.timer = setTimeout(() => {
      entry.timer = undefined;
      if (entry.waiting === waiting) entry.waiting = undefined;
      void this.analyze(e.document).then(waiting.resolve, () => waiting.resolve(undefined));
    }, delay);
  }

  /** Drops cached results (settings changed): the next request re-analyses; the trees stay. */
  invalidate(): void {
    for (const e of this.entries.values()) e.result = undefined;
  }

  private forget(uri: vscode.Uri): void {
    const key = uri.toString();
    this.openedAt.delete(key);
    const e = this.entries.get(key);
    if (!e) return;
    if (e.timer) clearTimeout(e.timer);
    e.waiting?.resolve(undefined);
    e.pending?.cancel.cancel();
    e.doc.dispose();
    this.entries.delete(key);
  }

  dispose(): void {
    for (const key of [...this.entries.keys()]) this.forget(vscode.Uri.parse(key));
    for (const d of this.disposables) d.dispose();
  }
}

/** The model setting (`fsdpLens.model`): a Hugging Face id, or a path to a config.json. */
function fallbackModel(settings: Settings): ModelChoice | undefined {
  const m = settings.model;
  return m
    ? {
        ...(isModelPath(m) ? { config: m } : { id: m }),
        source: { kind: 'setting', detail: 'fsdpLens.model' },
      }
    : undefined;
}

/** Whether the model setting names a config.json path rather than a Hugging Face id. */
function isModelPath(m: string): boolean {
  return m.endsWith('.json') || m.includes(path.sep);
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
