/**
 * Analyses of open documents, cached per version: the edits since the last analysis and the text go to the
 * analysis worker after a pause in typing; a newer edit cancels a run that has not finished; providers wait for
 * the version they show. Nothing here analyses on the extension host's thread.
 */
import * as path from 'node:path';
import * as vscode from 'vscode';
import { emptyFacts } from '../core/analysis/facts';
import { isConfigPath } from '../core/vocabulary/files';
import { isModelId } from '../core/inputs/model';
import type { TextChange } from '../core/parsing/document';
import type { AnalyzeRequest, DocumentAnalysis } from '../worker/protocol';
import type { WorkspaceProjects } from './projects';
import { readSettings } from './settings';
import { AnalysisWorker, WorkerStopped } from './worker';

export type { DocumentAnalysis };

/** How long one analysis may take before its worker is replaced (the analysis budget ends it long before). */
const ANALYSIS_TIMEOUT_MS = 20_000;

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
  result?: DocumentAnalysis;
  /** The version the worker last received, and the worker it went to; the edits made since. */
  sent?: { version: number; generation: number };
  edits: TextChange[];
  pending?: { version: number; promise: Promise<DocumentAnalysis | undefined>; id?: number };
  timer?: ReturnType<typeof setTimeout>;
  /** The analysis the timer will start, for requests that arrive while edits are still coming in. */
  waiting?: {
    version: number;
    promise: Promise<DocumentAnalysis | undefined>;
    resolve: (a: DocumentAnalysis | undefined) => void;
  };
}

/**
 * Analyses of open documents, cached per document version. Edits are collected as they arrive and sent with the
 * next analysis (so the worker re-parses incrementally); the analysis runs after a short pause in typing, and a
 * newer edit cancels a run that has not finished. Providers ask for a version and get the cached result or wait
 * for the run in flight.
 */
export class DocumentAnalyses implements vscode.Disposable {
  private readonly entries = new Map<string, Entry>();
  private readonly changed = new vscode.EventEmitter<DocumentAnalysis>();
  private readonly disposables: vscode.Disposable[] = [];
  readonly worker: AnalysisWorker;

  /** Fires when a newer analysis of a document is available. */
  readonly onDidAnalyze = this.changed.event;

  /** The model choices the user made (set once the projects exist). */
  projects?: WorkspaceProjects;

  /** When each open document was opened (for the log's "ready N ms after opening"). */
  private readonly openedAt = new Map<string, number>();

  constructor(
    distDir: string,
    private readonly log?: vscode.LogOutputChannel,
  ) {
    this.worker = new AnalysisWorker(distDir, log);
    this.disposables.push(
      // Analysis starts as a document opens: its lenses, hover and problems are ready when the editor asks.
      vscode.workspace.onDidOpenTextDocument((d) => {
        if (!isAnalysable(d)) return;
        this.openedAt.set(d.uri.toString(), performance.now());
        void this.analyze(d);
      }),
      vscode.workspace.onDidChangeTextDocument((e) => this.onChange(e)),
      vscode.workspace.onDidCloseTextDocument((d) => this.forget(d)),
      this.changed,
    );
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
    const entry = this.entry(document.uri.toString());
    if (entry.result?.version === document.version) return entry.result;
    if (entry.pending?.version === document.version) return race(entry.pending.promise, token);
    // Typing: the lens or hover asking for this version waits for the pause the timer marks, not a run per key.
    if (entry.timer && entry.waiting?.version === document.version) return race(entry.waiting.promise, token);
    return race(this.start(entry, document), token);
  }

  private entry(key: string): Entry {
    let e = this.entries.get(key);
    if (!e) this.entries.set(key, (e = { edits: [] }));
    return e;
  }

  private start(entry: Entry, document: vscode.TextDocument): Promise<DocumentAnalysis | undefined> {
    this.cancel(entry);
    const version = document.version;
    const started = performance.now();
    const pending: NonNullable<Entry['pending']> = { version, promise: Promise.resolve(undefined) };
    pending.promise = this.request(entry, document, (id) => (pending.id = id)).then((result) => {
      if (entry.pending === pending) entry.pending = undefined;
      // A run a newer edit cancelled says so, and is no result.
      if (!result || result.incomplete?.includes('cancelled')) return undefined;
      this.logRun(document, result, started, !entry.result);
      if (!entry.result || entry.result.version <= result.version) {
        entry.result = result;
        this.changed.fire(result);
      }
      return result;
    });
    entry.pending = pending;
    return pending.promise;
  }

  private async request(
    entry: Entry,
    document: vscode.TextDocument,
    onId: (id: number) => void,
  ): Promise<DocumentAnalysis | undefined> {
    // Yield once so that a burst of requests for the same version shares one run.
    await new Promise((r) => setImmediate(r));
    if (document.isClosed) return undefined;
    const version = document.version;
    const settings = readSettings(document.uri);
    const python = document.uri.scheme === 'file' ? this.projects?.pythonOf(document.uri) : undefined;
    const incremental = entry.sent?.generation === this.worker.generation && entry.edits.length > 0;
    const req: AnalyzeRequest = {
      kind: 'analyze',
      uri: document.uri.toString(),
      file: document.uri.scheme === 'file' ? document.uri.fsPath : document.uri.toString(),
      onDisk: document.uri.scheme === 'file',
      version,
      text: document.getText(),
      ...(incremental ? { edits: { from: entry.sent!.version, changes: entry.edits } } : {}),
      config: isConfigDocument(document),
      folder: folderOf(document.uri),
      ...(python ? { python } : {}),
      settings: {
        lint: settings.lint.enabled ? settings.lint : null,
        estimate: settings.estimate,
        model: settings.model,
        // A path the user's own settings name may lie outside the workspace; a workspace's may not.
        usersPaths:
          settings.model &&
          settings.modelIsUsers &&
          !isModelId(settings.model) &&
          path.isAbsolute(settings.model)
            ? [settings.model]
            : [],
        maxBytes: settings.maxFileSizeKB * 1024,
        units: settings.units,
      },
      ...(this.projects?.modelChoice(document.uri)
        ? { choice: this.projects.modelChoice(document.uri)! }
        : {}),
    };
    entry.edits = [];
    try {
      const p = this.worker.request<DocumentAnalysis>(req, ANALYSIS_TIMEOUT_MS, onId);
      entry.sent = { version, generation: this.worker.generation };
      const result = await p;
      this.logGaps(document, result);
      return result;
    } catch (e) {
      entry.sent = undefined;
      const why = e instanceof WorkerStopped ? e.message : String(e);
      this.log?.error(`${label(document)} v${version}: ${why}`);
      return {
        uri: req.uri,
        version,
        facts: emptyFacts(req.file),
        findings: [],
        units: settings.units,
        notice: `fsdp-lens: not analysed: ${why.split('\n')[0]}`,
        faults: [],
      };
    }
  }

  /** What an analysis left out, in the log: its budget stop, and each stage that failed with its stack. */
  private logGaps(document: vscode.TextDocument, a: DocumentAnalysis): void {
    if (a.incomplete && !a.incomplete.includes('cancelled'))
      this.log?.warn(`${label(document)}: partial result: ${a.incomplete}`);
    for (const f of a.faults)
      this.log?.error(`${label(document)}: ${f.stage} failed: ${f.message}${f.stack ? `\n${f.stack}` : ''}`);
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
    const line = `${label(document)} v${a.version}: analysed in ${elapsed(start)} (${what})`;
    if (first && opened !== undefined) {
      this.log.info(`${line}; ready ${elapsed(opened)} after the document opened`);
      this.openedAt.delete(key);
    } else if (first) this.log.info(line);
    else this.log.debug(line);
  }

  private cancel(entry: Entry): void {
    const p = entry.pending;
    if (p?.id !== undefined) this.worker.cancel(p.id);
    entry.pending = undefined;
  }

  private onChange(e: vscode.TextDocumentChangeEvent): void {
    if (!isAnalysable(e.document) || e.contentChanges.length === 0) return;
    const key = e.document.uri.toString();
    const entry = this.entries.get(key);
    if (!entry) return;
    for (const c of e.contentChanges)
      entry.edits.push({
        offset: c.rangeOffset,
        length: c.rangeLength,
        start: c.range.start,
        end: c.range.end,
        text: c.text,
      });
    this.cancel(entry);
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

  /** Drops cached results (settings or project files changed): the next request re-analyses. */
  invalidate(): void {
    for (const e of this.entries.values()) e.result = undefined;
  }

  private forget(document: vscode.TextDocument): void {
    const key = document.uri.toString();
    this.openedAt.delete(key);
    const e = this.entries.get(key);
    if (!e) return;
    if (e.timer) clearTimeout(e.timer);
    e.waiting?.resolve(undefined);
    this.cancel(e);
    this.entries.delete(key);
    this.worker.notify({
      kind: 'close',
      uri: key,
      file: document.uri.scheme === 'file' ? document.uri.fsPath : key,
    });
  }

  dispose(): void {
    for (const e of this.entries.values()) if (e.timer) clearTimeout(e.timer);
    this.entries.clear();
    for (const d of this.disposables) d.dispose();
    this.worker.dispose();
  }
}

/** A document's workspace folder, or its own folder outside any (documents on disk only). */
export function folderOf(uri: vscode.Uri): string | null {
  if (uri.scheme !== 'file') return null;
  const folder = vscode.workspace.getWorkspaceFolder(uri);
  return folder?.uri.scheme === 'file' ? folder.uri.fsPath : path.dirname(uri.fsPath);
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
