import { describeCall } from '../analysis/describe';
import type { FileFacts } from '../analysis/facts';
import type { Estimate } from '../estimator/estimate';
import type { CheckpointMode } from '../inputs/parse';
import type { TrainingSetup } from '../inputs/table';
import type { ByteUnit } from '../vocabulary/bytes';
import type { FitMatrix, GranularityPoint, WhatIf } from '../estimator/whatif';
import { GPUS } from '../hardware/catalog';
import type { EstimateResult } from '../resolve/analyze';
import { advise, type Advice } from './advice';
import { estimateJson } from './json';
import { lensTitle, unitsOfCall } from './summary';

/** The what-if controls' values, as the webview shows them (checkpointing as `none`, `full`, `every-2`). */
export interface WhatIfValues {
  worldSize: number;
  gpusPerNode: number;
  gpu: string;
  microBatch: number;
  seqLen: number;
  checkpointing: string;
  blocksPerUnit: number;
  strategy: 'FULL_SHARD' | 'SHARD_GRAD_OP' | 'HYBRID_SHARD' | string;
}

/** What the webview receives: plain data, rendered by media/panel.ts. */
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
    /** The values in force (the file's, changed by the controls). */
    values: WhatIfValues;
    /** The values the file and settings give. */
    base: WhatIfValues;
    gpus: { id: string; name: string }[];
    /** Sharding strategies the control offers (the file's first). */
    strategies: string[];
    /** Units of one block each (the granularity control regroups them); 0 when the model has no block class. */
    blockUnits: number;
  };
  fitMatrix?: FitMatrix;
  granularity?: GranularityPoint[];
  advice?: Advice[];
  /** The framework whose configuration made the plan (when the file has no wrap calls of its own). */
  framework?: { name: string; file: string; line: number };
}

export function checkpointingText(c: CheckpointMode): string {
  return typeof c === 'object' ? `every-${c.everyN}` : c;
}

export function parseCheckpointing(s: string): CheckpointMode | undefined {
  if (s === 'none' || s === 'full' || s === 'selective') return s;
  const m = /^every-(\d+)$/.exec(s);
  return m ? { everyN: Math.max(1, Number(m[1])) } : undefined;
}

/** The what-if change a set of control values makes to the file's inputs: only the values that differ from `base`. */
export function whatIfFrom(input: Partial<WhatIfValues>, base?: WhatIfValues): WhatIf {
  const values: Partial<WhatIfValues> = {};
  for (const [k, v] of Object.entries(input) as [keyof WhatIfValues, unknown][])
    if (!base || String(base[k]) !== String(v)) (values as Record<string, unknown>)[k] = v;
  const w: WhatIf = {};
  const pos = (n: unknown) =>
    typeof n === 'number' && Number.isFinite(n) && n >= 1 ? Math.floor(n) : undefined;
  const ws = pos(values.worldSize);
  if (ws) w.worldSize = Math.min(ws, 1 << 20);
  const gpn = pos(values.gpusPerNode);
  if (gpn) w.gpusPerNode = Math.min(gpn, 1024);
  if (typeof values.gpu === 'string' && GPUS.some((g) => g.id === values.gpu)) w.gpu = values.gpu;
  const mb = pos(values.microBatch);
  if (mb) w.microBatch = Math.min(mb, 1 << 16);
  const seq = pos(values.seqLen);
  if (seq) w.seqLen = Math.min(seq, 1 << 24);
  const ck = typeof values.checkpointing === 'string' ? parseCheckpointing(values.checkpointing) : undefined;
  if (ck) w.checkpointing = ck;
  const k = pos(values.blocksPerUnit);
  if (k && k > 1) w.blocksPerUnit = k;
  if (
    values.strategy === 'FULL_SHARD' ||
    values.strategy === 'SHARD_GRAD_OP' ||
    values.strategy === 'HYBRID_SHARD'
  )
    w.strategy = values.strategy;
  return w;
}

export interface PanelInput {
  facts: FileFacts;
  uri: string;
  focusUnit: number | null;
  units: ByteUnit;
  estimate?: EstimateResult;
  notice?: string;
  /** Control values the user changed in the panel. */
  whatIf?: Partial<WhatIfValues>;
}

/**
 * Everything the footprint panel shows, from one analysis: the estimate under the what-if values, the GPU fit
 * matrix, the unit-granularity curve and the advice. All numbers come from the estimator; the webview only draws.
 */
export function buildPanelData(input: PanelInput): PanelData {
  const r = input.estimate;
  const data: PanelData = {
    file: input.facts.path,
    uri: input.uri,
    focusUnit: input.focusUnit,
    units: input.units,
    calls: [],
  };
  if (input.notice) data.notice = input.notice;
  if (r && !r.ok) data.noEstimate = { reason: r.reason, ...(r.hint ? { hint: r.hint } : {}) };
  if (!r?.ok) {
    data.calls = input.facts.calls.map((c) => ({
      line: c.line,
      api: c.api,
      target: c.target,
      description: describeCall(c),
      lens: lensTitle(c, undefined, input.units),
      units: [],
    }));
    return data;
  }
  const values = (s: TrainingSetup, k: number, strategy: string): WhatIfValues => ({
    worldSize: s.worldSize,
    gpusPerNode: s.gpusPerNode,
    gpu: s.gpu,
    microBatch: s.microBatch,
    seqLen: s.seqLen,
    checkpointing: checkpointingText(s.checkpointing),
    blocksPerUnit: k,
    strategy,
  });
  const strategyOf = (x: Estimate) => (x.mesh.hsdp ? 'HYBRID_SHARD' : x.plan.strategy);
  const base = values(r.estimate.setup, 1, strategyOf(r.estimate));
  const w = whatIfFrom(input.whatIf ?? {}, base);
  const changed = Object.keys(w).length > 0;
  const e = changed ? r.whatIf.run(w) : r.estimate;
  const gpus = GPUS.map((g) => ({ id: g.id, name: g.name }));
  const fitMatrix = r.whatIf.fitMatrix(gpus, w);
  const minGpus = fitMatrix.gpus.find((g) => g.id === e.gpu.id)?.minGpus;
  data.calls = input.facts.calls.map((c) => ({
    line: c.line,
    api: c.api,
    target: c.target,
    description: describeCall(c),
    lens: lensTitle(c, e, input.units),
    units: unitsOfCall(e, c).map((u) => u.name),
  }));
  data.estimate = estimateJson(e, r.model, minGpus);
  if (r.framework)
    data.framework = {
      name: r.framework.framework,
      file: r.framework.file.split(/[\\/]/).pop() ?? r.framework.file,
      line: r.framework.range.start.line + 1,
    };
  data.whatIf = {
    values: values(e.setup, w.blocksPerUnit ?? 1, strategyOf(e)),
    base,
    strategies: [...new Set([base.strategy, 'FULL_SHARD', 'SHARD_GRAD_OP', 'HYBRID_SHARD'])],
    gpus,
    blockUnits: r.whatIf.blockUnits(),
  };
  data.fitMatrix = fitMatrix;
  data.granularity = r.whatIf.granularity({ ...w, blocksPerUnit: undefined });
  data.advice = advise(r.whatIf, w, e, input.units);
  return data;
}

/** Messages from the panel's webview to the extension. */
export type PanelRequest =
  | { type: 'ready' }
  | { type: 'whatIf'; values: Partial<WhatIfValues> }
  | { type: 'reset' }
  | { type: 'reveal'; line: number }
  | { type: 'command'; command: 'measureExactly' | 'chooseModel' };

/** Messages from the extension to the panel's webview. */
export type PanelUpdate = { type: 'update'; data: PanelData };
