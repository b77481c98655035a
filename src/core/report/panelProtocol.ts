/**
 * The messages between the extension and the footprint panel's webview: the one file both programs share. The
 * webview receives `PanelData` (plain data the core computed) and sends back what the user asks for.
 */
import type { ByteUnit } from '../vocabulary/bytes';
import type { Advice } from '../whatif/advice';
import type { ControlDescription, WhatIfValues } from '../whatif/controls';
import type { FitMatrix, GranularityPoint } from '../whatif/model';
import type { FitReport } from '../whatif/fitReport';
import type { EstimateDelta } from '../whatif/delta';
import type { estimateJson } from './json';
import type { MeasuredRun, PhaseComparison } from './measured';

export type { ControlDescription, WhatIfValues };

/** What the webview receives: plain data, rendered by src/webview/panel.ts. */
export interface PanelData {
  file: string;
  uri: string;
  focusUnit: number | null;
  units: ByteUnit;
  /** The file's wrap calls, each with the units it made (by name). */
  calls: { line: number; api: string; target: string; description: string; lens: string; units: string[] }[];
  estimate?: ReturnType<typeof estimateJson>;
  noEstimate?: { reason: string; hint?: string };
  notice?: string;
  whatIf?: {
    /** The controls to show, derived from the table of inputs and the plan's own changes. */
    controls: ControlDescription[];
    /** The values in force (the file's, changed by the controls). */
    values: WhatIfValues;
    /** The values the file and settings give. */
    base: WhatIfValues;
    /** Units of one block each (the granularity control regroups them); 0 when the model has no block class. */
    blockUnits: number;
    /** The values that differ from the file's, for the banner that says the figures are not the file's. */
    changed: WhatIfChange[];
  };
  fitMatrix?: FitMatrix;
  granularity?: GranularityPoint[];
  advice?: Advice[];
  /** What fits on every GPU, and the changes that make the plan fit, when the panel asked (`fitReport`). */
  fit?: FitReport;
  /** The change from another version of the job to this file, cause by cause, when the panel compares. */
  compare?: { label: string; delta?: EstimateDelta; reason?: string };
  /** What the panel can compare with (the last commit, other open files), and the one chosen ('' for nothing). */
  compareChoices?: { value: string; label: string }[];
  comparing?: string;
  /** The framework whose configuration made the plan (when the file has no wrap calls of its own). */
  framework?: { name: string; file: string; line: number };
  /**
   * A measured run beside the file's own estimate (not the what-if values), when the panel compares with one: phase
   * by phase; or why there is none; or, while its file is still being read, how far.
   */
  measured?: MeasuredComparison | { file: string; error: string } | { file: string; reading: ReadProgress };
}

/** How far a measured run's file has been read. */
export interface ReadProgress {
  bytes: number;
  size: number;
}

/** A measured run against the file's own estimate (`compareMeasured`), as the panel shows it. */
export interface MeasuredComparison {
  /** The run's path. */
  file: string;
  source: MeasuredRun['source'];
  /** The training framework whose log it is, where the log says. */
  framework?: string;
  rank: number | null;
  worldSize: number | null;
  device: string | null;
  notes: string[];
  /** Each phase beside the estimate's peak of it; where they part, the estimate's largest terms there. */
  phases: PhaseComparison[];
  /** The estimate's reserved bytes against the highest reserved peak measured. */
  reserved: PhaseComparison & {
    /** The pools the estimate's reserve adds up (the compute stream's before its allowance), when it has a timeline. */
    pools?: { compute: number; gather: number; reduce: number };
  };
  /** The run's phases with no counterpart in the estimate. */
  unknownPhases: string[];
  /** Within this factor either way estimate and measurement agree (`AGREE`). */
  agree: number;
  /** The estimate compared with: the file's own inputs. */
  against: { worldSize: number; gpu: string; microBatch: number; seqLen: number };
}

/** A control whose value differs from the file's: what it shows, what the file gives, and if a `# fsdp:` key can say it. */
export interface WhatIfChange {
  key: string;
  label: string;
  value: string;
  file: string;
  /** The annotation that makes the file say it, or null for a change of the code (the plan's sharding, its units). */
  annotation: string | null;
  /**
   * A quick fix of the file that makes this change in its code or configuration (activation checkpointing turned on
   * where the file does it): "Apply to file" applies it instead of writing an annotation. Its title.
   */
  codeFix?: string;
}

/** Messages from the panel's webview to the extension. */
export type PanelRequest =
  | { type: 'ready' }
  | { type: 'whatIf'; values: Partial<WhatIfValues> }
  | { type: 'reset' }
  | { type: 'applyWhatIf' }
  | { type: 'reveal'; line: number }
  /** Solve for what fits on every GPU while the section is open (and stop when it folds). */
  | { type: 'fit'; on: boolean }
  /** Compare with another version of the job: 'HEAD', an open document's URI, or '' for none. */
  | { type: 'compare'; against: string }
  /** Stop comparing with a measured run. */
  | { type: 'clearMeasured' }
  | { type: 'command'; command: 'measureExactly' | 'chooseModel' | 'compareMeasured' };

/** Messages from the extension to the panel's webview. */
export type PanelUpdate = { type: 'update'; data: PanelData };
