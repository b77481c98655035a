/**
 * What the editor and its analysis worker say to each other: requests with plain data in, plain results out (no
 * syntax trees, no functions), so that every analysis runs off the extension host's thread.
 */
import type { FileFacts, WrapCall } from '../core/analysis/facts';
import type { Estimate } from '../core/estimator/types';
import type { ConfigReading } from '../core/frameworks/read';
import type { Migration } from '../core/lint/migrate';
import type { FrameworkPlan } from '../core/frameworks/types';
import type { PlanChoices } from '../core/resolve/entryPlan';
import type { JobCaller } from '../core/resolve/analyze';
import type { SetupValues } from '../core/inputs/table';
import type { Finding, LintOptions } from '../core/lint/types';
import type { TextChange } from '../core/parsing/document';
import type { PanelData, WhatIfValues } from '../core/report/panelProtocol';
import type { ByteUnit } from '../core/vocabulary/bytes';
import type { Fault } from '../core/vocabulary/faults';
import type { Range } from '../core/vocabulary/range';
import type { MinGpus } from '../core/whatif/model';

/** The settings an analysis runs under, read by the editor for the document. */
export interface AnalysisSettings {
  /** Lint options, or null when linting is off. */
  lint: LintOptions | null;
  estimate: SetupValues;
  /** `fsdpLens.model`: a Hugging Face id or a config.json path. */
  model: string | null;
  /** Absolute paths the user's own settings name, readable though outside the workspace. */
  usersPaths: string[];
  maxBytes: number;
  units: ByteUnit;
}

export interface AnalyzeRequest {
  kind: 'analyze';
  uri: string;
  /** The file's path (file scheme), or the uri for documents not on disk. */
  file: string;
  onDisk: boolean;
  version: number;
  text: string;
  /** The edits since the version the worker last parsed, for an incremental parse. */
  edits?: { from: number; changes: TextChange[] };
  config: boolean;
  /** The document's workspace folder (its own folder outside any), where imports resolve. */
  folder: string | null;
  settings: AnalysisSettings;
  /** The model class the user chose for this file. */
  choice?: string;
  /** The Python interpreter the editor uses for this file's folder: helpers are read from its site-packages. */
  python?: string;
}

export interface PanelRequestMessage {
  kind: 'panel';
  uri: string;
  focusUnit: number | null;
  whatIf: Partial<WhatIfValues>;
  /** Solve for what fits on every GPU (the panel's "Where it fits" is open): a few hundred estimates. */
  fit?: boolean;
  /** Another version of the job to compare the document with (the last commit, another open file). */
  compare?: CompareSource;
  /** The path of a measured run (the probe's JSON, a memory snapshot, a training log) to put beside the estimate. */
  measured?: string;
}

/** Answered (true) when the read of a measured run's file under way ends: the panel then asks for its data again. */
export interface MeasuredRunRequest {
  kind: 'measuredRun';
  file: string;
}

/**
 * Another version of a job: the text of another document (where it comes from in words, and the path it is
 * analysed at), or the document's file at a git revision, which the worker reads from the repository's objects.
 */
export type CompareSource =
  | { kind: 'text'; label: string; file: string; text: string }
  | { kind: 'revision'; rev: string; file: string };

/** The model a script trains as the static reading finds it, and the project's nn.Module classes to choose from. */
export interface ModelsRequest {
  kind: 'models';
  uri: string;
}
export interface ModelsReply {
  found: { ok: true; className: string } | { ok: false; reason: string };
  candidates: string[];
  classes: { file: string; name: string }[];
  root: string;
}

/** Exact mode for a script: its model built by the user's PyTorch on the meta device. */
export interface ExactRequest {
  kind: 'exact';
  uri: string;
  python: string;
  timeoutMs: number;
  choice?: string;
}
export type ExactReply =
  | { ok: true; className: string; params: number; staticParams: number | null }
  | { ok: false; error: string; detail?: string };

export type Request =
  AnalyzeRequest | PanelRequestMessage | ModelsRequest | ExactRequest | MeasuredRunRequest;

/** Messages that need no answer: a closed document, a changed file, a new set of workspace folders. */
export type Notice =
  | { kind: 'close'; uri: string; file: string }
  | { kind: 'invalidate'; file: string; contentOnly: boolean }
  | { kind: 'forgetExact'; uri: string }
  | { kind: 'cancel'; id: number }
  | { kind: 'reset' };

/** An estimate without what only the worker needs (the model tree, the what-if engine). */
export type PlainEstimate = (
  | { ok: true; estimate: Estimate; framework?: Omit<FrameworkPlan, 'builtModel'>; minGpus: MinGpus }
  | { ok: false; reason: string; hint?: string }
) & {
  /** The wrap calls the file makes through helpers of other files, placed at its calls of them. */
  helperCalls?: WrapCall[];
  /** The file's plans when its wraps make several: which one is estimated, and the others. */
  plans?: PlanChoices;
  /** A helper estimated as a calling script's job: the scripts that call it, the chosen one marked. */
  jobCallers?: JobCaller[];
};

/** The analysis of one document version, as every provider of the editor reads it. */
/**
 * The most wrap calls of one document the editor receives, with a lens each (VS Code likewise shows at most 1,000
 * problems of a file): past it a lens costs the extension host more than it tells, and the panel and the command
 * line still cover every unit.
 */
export const EDITOR_CALLS = 1000;

/** What the editor was not sent of a document's wrap calls: how many, where the first of them is, and whether a root wrap is among them. */
export interface CallsLeftOut {
  count: number;
  range: Range;
  root: boolean;
}

export interface DocumentAnalysis {
  uri: string;
  version: number;
  /** The file's facts, its wrap calls (or the helper's, `estimate.helperCalls`) cut at EDITOR_CALLS. */
  facts: FileFacts;
  /** Set when the wrap calls were cut. */
  callsLeftOut?: CallsLeftOut;
  /** Lint findings under the settings in force for the document. */
  findings: Finding[];
  /** The estimate, or why there is none (no model known, a bad config). */
  estimate?: PlainEstimate;
  units: ByteUnit;
  /** Set when the document was not analysed (too large, grammar unavailable, stopped): why, in words. */
  notice?: string;
  /** A framework configuration (Accelerate, torchtune, torchtitan, DeepSpeed, a launch script): what it is. */
  config?: ConfigReading;
  /** Set when the analysis stopped at its budget: why (the result is partial). */
  incomplete?: string;
  faults: Fault[];
  /** The file's FSDP1 wraps rewritten for FSDP2 (a refactoring the user may choose), when it has any. */
  migration?: Migration;
}

/** A message to the worker: a request with its id, or a notice. */
export type ToWorker = (Request & { id: number }) | Notice;

/** A message from the worker: a request's answer or failure, or a line for the editor's log. */
export type FromWorker =
  | { kind: 'reply'; id: number; value: unknown }
  | { kind: 'failed'; id: number; message: string }
  | { kind: 'log'; level: 'info' | 'warn' | 'error'; message: string }
  | { kind: 'ready' };

export type { PanelData };
