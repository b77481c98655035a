/**
 * The analysis service the editor's worker runs: the open documents' syntax trees, kept in step with their edits,
 * one project per workspace folder over the documents' unsaved text and the disk, and the last analysis of each
 * document (for the panel's what-if values). Every answer is plain data.
 */
import { migrateToFsdp2 } from '../core/lint/migrate';
import { checkTextSize } from '../core/analysis/input';
import { fileAtRevision } from '../host/gitRevision';
import { emptyFacts, type WrapCall } from '../core/analysis/facts';
import { analyzeDocument, type DocumentAnalysis as CoreAnalysis } from '../core/entry/analyze';
import { exactForScript, type ExactModel } from '../core/exact/exact';
import { settingModel, type ModelChoice } from '../core/inputs/model';
import { countParams } from '../core/model/tree';
import { modelFromScript, moduleClasses } from '../core/modules/resolveModel';
import { ParsedDocument } from '../core/parsing/document';
import type { PythonGrammar } from '../core/parsing/python';
import { confine, huggingFaceRoots } from '../core/project/boundary';
import { Project } from '../core/project/project';
import { sitePackages } from '../core/project/environments';
import { buildPanelData, type PanelInput } from '../core/report/panelData';
import type { EstimateResult } from '../core/resolve/analyze';
import type { FileSystem, Host } from '../core/vocabulary/host';
import { diskFS, nodeHost } from '../host/disk';
import { runExactHelper } from '../host/exact';
import { MeasuredRuns } from '../host/measuredRun';
import {
  EDITOR_CALLS,
  type AnalyzeRequest,
  type CompareSource,
  type CallsLeftOut,
  type DocumentAnalysis,
  type ExactReply,
  type ExactRequest,
  type ModelsReply,
  type PanelData,
  type PanelRequestMessage,
  type PlainEstimate,
} from './protocol';

interface OpenDocument {
  doc: ParsedDocument;
  file: string;
  onDisk: boolean;
  /** The last request's text and version (what the project serves for this file). */
  text: string;
  version: number;
  /** The analysis of that version, with the what-if engine the panel explores. */
  analysis?: CoreAnalysis;
  units: DocumentAnalysis['units'];
  folder: string | null;
  /** The interpreter the editor named for the folder, if any. */
  python?: string;
  /** The settings of the last analysis (a comparison analyses the other version with the same). */
  settings?: AnalyzeRequest['settings'];
}

/** How long the panel's data waits for a measured run's file to be read before it says the read goes on. */
const PANEL_RUN_WAIT_MS = 2_000;

/** The estimate as the editor receives it: without the model tree and the what-if engine. */
export function plainEstimate(r: EstimateResult): PlainEstimate {
  const helpers = {
    ...(r.helperCalls?.length ? { helperCalls: r.helperCalls } : {}),
    ...(r.plans ? { plans: r.plans } : {}),
    ...(r.jobCallers ? { jobCallers: r.jobCallers } : {}),
  };
  if (!r.ok) return { ok: false, reason: r.reason, ...(r.hint ? { hint: r.hint } : {}), ...helpers };
  const framework = r.framework ? (({ builtModel: _, ...rest }) => rest)(r.framework) : undefined;
  return {
    ok: true,
    estimate: r.estimate,
    minGpus: r.minGpus,
    ...(framework ? { framework } : {}),
    ...helpers,
  };
}

/** What cutting the wrap calls at EDITOR_CALLS leaves out, if anything. */
function callsLeftOut(calls: readonly WrapCall[]): CallsLeftOut | undefined {
  const rest = calls.slice(EDITOR_CALLS);
  if (!rest.length) return undefined;
  return { count: rest.length, range: rest[0]!.range, root: rest.some((c) => c.isRoot) };
}

export class AnalysisService {
  private readonly docs = new Map<string, OpenDocument>();
  private readonly projects = new Map<string, Project>();
  private readonly exact = new Map<string, ExactModel>();
  private readonly machine = nodeHost();
  /** The measured runs the panel compares with, each read once per version of its file. */
  private readonly runs = new MeasuredRuns();

  constructor(private readonly grammar: PythonGrammar) {}

  /** The disk, with the open documents' text served first. */
  private readonly files: FileSystem = {
    readFile: (f) => this.openText(f) ?? diskFS.readFile(f),
    refusal: (f) => (this.openText(f) !== undefined ? undefined : diskFS.refusal(f)),
    version: (f) => {
      const d = this.openDoc(f);
      return d ? `doc:${d.version}` : diskFS.version(f);
    },
    isDirectory: diskFS.isDirectory,
    entries: diskFS.entries,
    realPath: diskFS.realPath,
  };

  private openDoc(file: string): OpenDocument | undefined {
    for (const d of this.docs.values()) if (d.onDisk && d.file === file) return d;
    return undefined;
  }

  private openText(file: string): string | undefined {
    return this.openDoc(file)?.text;
  }

  private project(folder: string | null, python?: string): Project | undefined {
    if (!folder) return undefined;
    // One per folder and interpreter: choosing another environment reads its packages.
    const key = `${folder}\u0000${python ?? ''}`;
    let p = this.projects.get(key);
    if (!p) {
      // Reads stay inside the folder, the Hugging Face folders and the site-packages of the folder's Python
      // environments, whatever a file of the workspace names.
      const libraries = sitePackages(diskFS, [folder], this.machine.env, python ? [python] : []);
      p = new Project(
        [folder],
        this.grammar,
        confine(this.files, [folder, ...huggingFaceRoots(this.machine), ...libraries]),
        { libraries },
      );
      this.projects.set(key, p);
    }
    return p;
  }

  /** The machine as one document's analysis sees it: its folder, the Hugging Face folders, the user's paths. */
  private host(folder: string | null, usersPaths: string[]): Host {
    const roots = [...(folder ? [folder] : []), ...huggingFaceRoots(this.machine), ...usersPaths];
    return nodeHost(confine(this.files, roots));
  }

  analyze(req: AnalyzeRequest, cancelled: () => boolean = () => false): DocumentAnalysis {
    let open = this.docs.get(req.uri);
    if (!open) {
      open = {
        doc: new ParsedDocument(this.grammar),
        file: req.file,
        onDisk: req.onDisk,
        text: '',
        version: -1,
        units: req.settings.units,
        folder: req.folder,
      };
      this.docs.set(req.uri, open);
    }
    // The edits apply to the tree of the version they start from; anything else is parsed afresh.
    if (req.edits && req.edits.from === open.version) open.doc.applyChanges(req.edits.changes);
    else open.doc.reset();
    Object.assign(open, {
      text: req.text,
      version: req.version,
      units: req.settings.units,
      folder: req.folder,
      file: req.file,
      python: req.python,
      settings: req.settings,
    });
    open.analysis = undefined;
    if (req.onDisk) for (const p of this.projects.values()) p.invalidate(req.file, { contentOnly: true });
    const base = { uri: req.uri, version: req.version, units: req.settings.units, faults: [] };
    const tooLarge = checkTextSize(req.text, req.settings.maxBytes);
    if (tooLarge) {
      open.doc.reset();
      return {
        ...base,
        facts: emptyFacts(req.file),
        findings: [],
        notice: `fsdp-lens: not analysed: ${tooLarge} (setting fsdpLens.maxFileSizeKB)`,
      };
    }
    const project = this.project(req.folder, req.python);
    const fallback = fallbackModel(req.settings.model);
    const exact = this.exact.get(req.uri);
    const a = analyzeDocument(
      this.grammar,
      req.config
        ? { file: req.file, text: req.text }
        : { file: req.file, text: req.text, tree: open.doc.parse(req.text, req.version) },
      {
        lint: req.settings.lint,
        estimate: {
          settings: req.settings.estimate,
          host: this.host(req.folder, req.settings.usersPaths),
          ...(project ? { project } : {}),
          ...(fallback ? { fallbackModel: fallback } : {}),
          ...(req.choice && !req.config ? { modelChoice: req.choice } : {}),
          ...(exact && !req.config ? { exactModel: exact } : {}),
        },
        cancelled,
      },
    );
    open.analysis = a;
    const reading = a.reading
      ? a.reading.kind === 'plan'
        ? { kind: 'plan' as const, plan: a.reading.plan }
        : a.reading
      : undefined;
    const estimate = a.estimate ? plainEstimate(a.estimate) : undefined;
    // A pure rewrite of the text, offered as a refactoring where the file has FSDP1 wraps.
    const migration = a.facts.calls.some((c) => c.api === 'FSDP')
      ? migrateToFsdp2(a.facts, req.text)
      : undefined;
    const facts = { ...a.facts, calls: a.facts.calls.slice(0, EDITOR_CALLS) };
    const leftOut = callsLeftOut(a.facts.calls.length ? a.facts.calls : (estimate?.helperCalls ?? []));
    if (estimate?.helperCalls) estimate.helperCalls = estimate.helperCalls.slice(0, EDITOR_CALLS);
    return {
      ...base,
      facts,
      ...(leftOut ? { callsLeftOut: leftOut } : {}),
      findings: a.findings,
      faults: a.faults,
      ...(migration && (migration.edits.length || migration.skipped.length) ? { migration } : {}),
      ...(estimate ? { estimate } : {}),
      ...(a.incomplete ? { incomplete: a.incomplete } : {}),
      ...(reading
        ? { config: { ...reading, ...(reading.kind === 'plan' ? { plan: stripBuilt(reading.plan) } : {}) } }
        : {}),
    };
  }

  /** The panel's data for the document's last analysis under the user's what-if values. */
  async panel(req: PanelRequestMessage): Promise<PanelData | undefined> {
    const open = this.docs.get(req.uri);
    const a = open?.analysis;
    if (!open || !a) return undefined;
    const compare = req.compare ? await this.compared(open, req.compare) : undefined;
    const measured = req.measured ? await this.measured(req.measured) : undefined;
    return buildPanelData({
      facts: a.facts,
      uri: req.uri,
      focusUnit: req.focusUnit,
      units: open.units,
      ...(a.estimate ? { estimate: a.estimate } : {}),
      whatIf: req.whatIf,
      ...(req.fit ? { fit: true } : {}),
      ...(compare ? { compare } : {}),
      ...(measured ? { measured } : {}),
    });
  }

  /**
   * The measured run in `file` (a read of its whole file is kept while the file stays the same), or why it cannot
   * be read; while a long read goes on, how far it is, and the panel shows the rest meanwhile.
   */
  private async measured(file: string): Promise<NonNullable<PanelInput['measured']>> {
    const r = await this.runs.get(file, PANEL_RUN_WAIT_MS);
    return 'reading' in r
      ? { file, reading: r.reading }
      : 'error' in r
        ? { file, error: r.error }
        : { file, run: r };
  }

  /** Resolves when the read of a measured run's file under way ends. */
  async measuredRunRead(file: string): Promise<boolean> {
    await this.runs.settled(file);
    return true;
  }

  /** The last comparison's analysis, kept while the other version's text stays the same. */
  private lastCompared?: { key: string; estimate: EstimateResult | undefined };

  /**
   * Another version of a document's job and its estimate, analysed as the document is, at the path it names: the
   * text of another document, or the file at a revision (read from the repository's objects: git is never run).
   */
  private async compared(
    open: OpenDocument,
    source: CompareSource,
  ): Promise<{ label: string; estimate?: EstimateResult; error?: string }> {
    let c: { label: string; file: string; text: string };
    if (source.kind === 'revision') {
      const r = await fileAtRevision(source.file, source.rev);
      const label = source.rev === 'HEAD' ? 'the last commit' : source.rev;
      if ('error' in r) return { label, error: r.error };
      c = { label: `${label} (${r.commit.slice(0, 8)})`, file: source.file, text: r.text };
    } else c = source;
    return { label: c.label, ...this.estimateOf(open, c) };
  }

  private estimateOf(
    open: OpenDocument,
    c: { file: string; text: string },
  ): { estimate?: EstimateResult; error?: string } {
    const key = `${open.folder ?? ''}\u0000${c.file}\u0000${c.text}`;
    if (this.lastCompared?.key === key)
      return this.lastCompared.estimate ? { estimate: this.lastCompared.estimate } : {};
    const tooLarge = checkTextSize(c.text, open.settings?.maxBytes);
    if (tooLarge) return { error: tooLarge };
    const project = this.project(open.folder, open.python);
    const estimate = analyzeDocument(
      this.grammar,
      { file: c.file, text: c.text },
      {
        lint: null,
        estimate: {
          ...(open.settings ? { settings: open.settings.estimate } : {}),
          host: this.host(open.folder, open.settings?.usersPaths ?? []),
          ...(project ? { project } : {}),
        },
      },
    ).estimate;
    this.lastCompared = { key, estimate };
    return estimate ? { estimate } : {};
  }

  /** What the model command offers: the model found, the classes that reach the file, every nn.Module class. */
  models(uri: string): ModelsReply | undefined {
    const open = this.docs.get(uri);
    const project = open && this.project(open.folder, open.python);
    const facts = open?.analysis?.facts;
    if (!open || !project || !facts) return undefined;
    const found = modelFromScript(project, facts);
    return {
      found: found.ok ? { ok: true, className: found.model.className } : { ok: false, reason: found.reason },
      candidates: found.ok ? found.candidates : (found.candidates ?? []),
      classes: moduleClasses(project),
      root: project.roots[0] ?? '',
    };
  }

  /** Exact mode: the model built by the user's PyTorch; on success the next analyses use it. */
  async measure(req: ExactRequest, signal: AbortSignal): Promise<ExactReply> {
    const open = this.docs.get(req.uri);
    const project = open && this.project(open.folder, open.python);
    const facts = open?.analysis?.facts;
    if (!open || !project || !facts)
      return { ok: false, error: 'exact mode needs a file on disk in a workspace folder' };
    const r = await exactForScript(project, facts, {
      python: req.python,
      timeoutMs: req.timeoutMs,
      signal,
      ...(req.choice ? { choice: req.choice } : {}),
      run: runExactHelper,
    });
    if (!r.ok) return r;
    this.exact.set(req.uri, r.model);
    return {
      ok: true,
      className: r.model.root.className,
      params: countParams(r.model.root),
      staticParams: r.model.staticParams,
    };
  }

  forgetExact(uri: string): void {
    this.exact.delete(uri);
  }

  close(uri: string): void {
    const open = this.docs.get(uri);
    if (!open) return;
    open.doc.dispose();
    this.docs.delete(uri);
    // The project reads the file from disk again.
    if (open.onDisk) for (const p of this.projects.values()) p.invalidate(open.file, { contentOnly: true });
  }

  invalidate(file: string, contentOnly: boolean): void {
    for (const p of this.projects.values()) p.invalidate(file, { contentOnly });
  }

  reset(): void {
    for (const p of this.projects.values()) p.dispose();
    this.projects.clear();
  }

  dispose(): void {
    this.reset();
    this.runs.dispose();
    for (const d of this.docs.values()) d.doc.dispose();
    this.docs.clear();
  }
}

/** A framework plan without the model tree it may carry (the worker keeps that). */
function stripBuilt<T extends { builtModel?: unknown }>(plan: T): Omit<T, 'builtModel'> {
  const { builtModel: _, ...rest } = plan;
  return rest;
}

/** The model setting (`fsdpLens.model`): a Hugging Face id, or a path to a config.json. */
function fallbackModel(m: string | null): ModelChoice | undefined {
  return m ? settingModel(m, { kind: 'setting', detail: 'fsdpLens.model' }) : undefined;
}
