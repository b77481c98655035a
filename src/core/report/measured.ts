/**
 * A measured run against its estimate: the peaks `fsdp_lens_probe.py` recorded per phase of a step on one rank (or
 * what a memory snapshot or a training log gives, read by snapshot.ts and trainingLog.ts), beside the estimate's
 * peak of the same phase (allocated against allocated) and its reserved estimate (reserved against reserved), with
 * the ratio of each.
 */
import type { Estimate, LiveSet, TimelineEvent } from '../estimator/types';
import { peakFigure } from '../estimator/words';
import type { Phase } from '../vocabulary/fsdp';

export interface MeasuredRun {
  /** What it was read from: the probe's JSON, a PyTorch memory snapshot, or a training log. */
  source: 'probe' | 'snapshot' | 'log';
  /** Null where the source does not record it. */
  rank: number | null;
  worldSize: number | null;
  device: string | null;
  phases: Record<string, { allocated: number | null; reserved: number | null }>;
  settings: Record<string, unknown>;
  /** What the figures are and what they assume, in words, shown with the comparison. */
  notes: string[];
  /**
   * The most device memory in use outside PyTorch's caching allocator at a phase's end (the probe's
   * `torch.cuda.mem_get_info()` total less free, less `memory_reserved()`): the CUDA context, NCCL's buffers and
   * other processes on the GPU. Absent where the source does not record it.
   */
  outsideAllocatorBytes?: number;
  /**
   * A memory snapshot's allocations live at a phase's allocated peak (`step`, `forward`, `backward`, `optimizer`),
   * by what their stacks show (snapshot.ts `frameCategory`). Absent where the source records no stacks (the probe, a
   * log) and where the snapshot's trace cannot be replayed allocation by allocation.
   */
  categories?: Record<string, MeasuredCategories>;
}

/**
 * What a memory snapshot's stacks can say an allocation is (snapshot.ts `frameCategory` says which frames decide
 * each); `unknown` where they say none of these.
 */
export const MEASURED_CATEGORIES = [
  'parameters',
  'optimizerState',
  'gathered',
  'gatherBuffers',
  'gradients',
  'activations',
  'optimizerStep',
  'unknown',
] as const;

export type MeasuredCategory = (typeof MEASURED_CATEGORIES)[number];

/** Each measured category in words. */
export const MEASURED_CATEGORY_WORDS: Record<MeasuredCategory, string> = {
  parameters: 'parameters and buffers',
  optimizerState: 'optimizer state',
  gathered: 'gathered parameters',
  gatherBuffers: 'all-gather buffers',
  gradients: 'gradients and reduce-scatter buffers',
  activations: 'activations',
  optimizerStep: 'optimizer step temporaries',
  unknown: 'unknown',
};

/** The allocations live at one peak of a snapshot's trace, by category. */
export interface MeasuredCategories {
  /** Bytes (requested) by category: they add up to the peak's allocated bytes. */
  bytes: Record<MeasuredCategory, number>;
  /** `unknown`, by why the stacks do not place it. */
  unknown: {
    /** Allocations of the trace recorded with no stack, or with an empty one (no Python frame, stacks="python"). */
    withoutFrames: number;
    /** Allocations whose frames decide no category (the training loop's own, autograd's engine, C++ only). */
    undecided: number;
    /** Allocated before the trace began: blocks the snapshot records with no stack, or freed after the peak. */
    beforeTrace: number;
  };
}

/** The probe's JSON, checked; an error in words when it is not one. */
export function readMeasuredRun(text: string): MeasuredRun | { error: string } {
  let d: unknown;
  try {
    d = JSON.parse(text);
  } catch (e) {
    return { error: `not JSON (${e instanceof Error ? e.message : String(e)})` };
  }
  const r = d as Record<string, unknown>;
  if (typeof r !== 'object' || r === null || r.fsdpLensProbe !== 1)
    return { error: 'not a file fsdp_lens_probe.py wrote (no "fsdpLensProbe": 1)' };
  const phases: MeasuredRun['phases'] = {};
  const raw = r.phases;
  if (typeof raw !== 'object' || raw === null) return { error: 'it has no "phases"' };
  const bytes = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null);
  for (const [name, v] of Object.entries(raw as Record<string, unknown>).slice(0, 64)) {
    const p = (v ?? {}) as Record<string, unknown>;
    phases[name] = { allocated: bytes(p.allocated), reserved: bytes(p.reserved) };
  }
  return {
    source: 'probe',
    rank: typeof r.rank === 'number' ? r.rank : 0,
    worldSize: typeof r.worldSize === 'number' ? r.worldSize : 1,
    device: typeof r.device === 'string' ? r.device : null,
    phases,
    settings:
      typeof r.settings === 'object' && r.settings !== null ? (r.settings as Record<string, unknown>) : {},
    notes: [],
    ...(bytes(r.outsideAllocatorBytes) !== null
      ? { outsideAllocatorBytes: bytes(r.outsideAllocatorBytes)! }
      : {}),
  };
}

/** GPU families as device names spell them (`NVIDIA H100 80GB HBM3`), to tell a run's GPU from the estimate's. */
const FAMILIES =
  /\b(GH200|H100|H200|H20|B200|B300|A100|A10G|L40S|L40|L4|MI300X|MI325X|MI355X|A6000|A5000|4090|3090)\b/i;

/**
 * The reserve a measured run shows beside its allocated peak, for the GPU `gpuName` it must have run on: the
 * allocator's allowance (the step's reserved peak over its allocated peak, less one: what the caching allocator
 * held beyond what it handed out, side streams' caches included, so an allowance on the safe side) and, where the
 * probe recorded it, the memory used outside the allocator (the CUDA context and NCCL's buffers). Or why not.
 */
export function reserveOfRun(
  run: MeasuredRun,
  gpuName: string,
): { fragmentation: number; contextBytes?: number } | { error: string } {
  const peaks = Object.values(run.phases);
  const allocated = Math.max(0, ...peaks.map((p) => p.allocated ?? 0));
  const reserved = Math.max(0, ...peaks.map((p) => p.reserved ?? 0));
  if (!allocated || !reserved)
    return { error: `the run records no ${allocated ? 'reserved' : 'allocated'} peak to calibrate with` };
  if (reserved < allocated)
    return { error: 'its reserved peak is below its allocated peak: not one run of one process' };
  const family = run.device ? FAMILIES.exec(run.device)?.[1] : undefined;
  if (family && !new RegExp(`\\b${family}\\b`, 'i').test(gpuName))
    return {
      error: `the run was measured on ${run.device}, the estimate is for the ${gpuName}: estimate for the GPU the run used (--gpu)`,
    };
  return {
    fragmentation: Math.round((reserved / allocated - 1) * 1000) / 1000,
    ...(run.outsideAllocatorBytes !== undefined ? { contextBytes: run.outsideAllocatorBytes } : {}),
  };
}

export interface PhaseComparison {
  phase: string;
  estimatedBytes: number | null;
  measuredBytes: number | null;
  /** estimated / measured, when both are known. */
  ratio: number | null;
  /**
   * Where the estimate and the measurement part by more than `AGREE` either way: the estimate's largest terms at
   * that phase's peak (what the difference is in), biggest first.
   */
  terms?: { name: string; bytes: number }[];
  /**
   * Where the run records its allocations by category (a memory snapshot): the estimate's live set at this phase's
   * peak beside the allocations live at the run's peak of it, row by row of `CATEGORY_ROWS`.
   */
  categories?: CategoryRow[];
}

/** One row of the comparison by category: estimate terms and measured categories that stand for the same memory. */
export interface CategoryRow {
  /** What the row holds, in words. */
  name: string;
  /** The estimate's terms at the peak in this row (as `peakFigure` names them), those above zero. */
  estimated: { name: string; bytes: number }[];
  /** The measured categories in this row (for `unknown`, why the stacks do not place it), those above zero. */
  measured: { name: string; bytes: number }[];
  /** Null where the estimate has no term for it (`unknown`). */
  estimatedBytes: number | null;
  /** Null where the stacks do not tell it apart (pipeline buffers: counted in what their frames show). */
  measuredBytes: number | null;
  /** estimatedBytes - measuredBytes, when both are known: above zero the estimate counts more. */
  difference: number | null;
}

/**
 * Which terms of the estimate's live set (`LiveSet`) a snapshot's categories stand for, row by row: each field and
 * each category in exactly one row. The estimate's `state` is parameters, optimizer state and buffers together,
 * which the stacks tell apart (and the row shows); the gradients the autograd engine makes in backward have no
 * frame of their own that says so, and are counted as unknown, not here.
 */
export const CATEGORY_ROWS: readonly {
  name: string;
  fields: readonly (keyof LiveSet)[];
  categories: readonly MeasuredCategory[];
}[] = [
  { name: 'parameters and optimizer state', fields: ['state'], categories: ['parameters', 'optimizerState'] },
  {
    name: 'gathered parameters and all-gather buffers',
    fields: ['gathered', 'gatherBuffers'],
    categories: ['gathered', 'gatherBuffers'],
  },
  { name: 'gradients', fields: ['shardGrads', 'gradients'], categories: ['gradients'] },
  {
    name: 'activations',
    fields: ['activations', 'working', 'logits', 'heldOutput'],
    categories: ['activations'],
  },
  { name: 'optimizer step', fields: ['optimizer'], categories: ['optimizerStep'] },
  { name: 'pipeline buffers', fields: ['pipeline'], categories: [] },
  { name: 'unknown', fields: [], categories: ['unknown'] },
];

/** Why a snapshot's unknown bytes are unknown, in words. */
const UNKNOWN_WORDS: Record<keyof MeasuredCategories['unknown'], string> = {
  withoutFrames: 'no frame recorded',
  undecided: 'frames that tell none',
  beforeTrace: 'allocated before the trace, not placed',
};

/**
 * The estimate's live set `live` beside the measured categories `m` of the same peak, row by row of
 * `CATEGORY_ROWS` (rows where both are zero are left out, the unknown row never).
 */
export function compareCategories(
  live: LiveSet,
  m: MeasuredCategories,
  setup: Estimate['setup'],
): CategoryRow[] {
  // Each field's name as the estimate's figures name it: peakFigure of that field alone.
  const zero = Object.fromEntries(Object.keys(live).map((k) => [k, 0])) as unknown as LiveSet;
  const termName = (k: keyof LiveSet) => peakFigure({ ...zero, [k]: 1 }, setup).terms[0]?.name ?? k;
  const rows: CategoryRow[] = [];
  for (const r of CATEGORY_ROWS) {
    const estimated = r.fields.filter((k) => live[k] > 0).map((k) => ({ name: termName(k), bytes: live[k] }));
    const estimatedBytes = r.fields.length ? r.fields.reduce((s, k) => s + live[k], 0) : null;
    const measuredBytes = r.categories.length ? r.categories.reduce((s, c) => s + m.bytes[c], 0) : null;
    const measured =
      r.categories.length === 1 && r.categories[0] === 'unknown'
        ? (Object.keys(UNKNOWN_WORDS) as (keyof MeasuredCategories['unknown'])[])
            .filter((k) => m.unknown[k] > 0)
            .map((k) => ({ name: UNKNOWN_WORDS[k], bytes: m.unknown[k] }))
        : r.categories
            .filter((c) => m.bytes[c] > 0)
            .map((c) => ({ name: MEASURED_CATEGORY_WORDS[c], bytes: m.bytes[c] }));
    if (!estimatedBytes && !measuredBytes && r.name !== 'unknown') continue;
    rows.push({
      name: r.name,
      estimated,
      measured,
      estimatedBytes,
      measuredBytes,
      difference: estimatedBytes !== null && measuredBytes !== null ? estimatedBytes - measuredBytes : null,
    });
  }
  return rows;
}

/** Within this factor either way, estimate and measurement agree (the terms are not listed). */
export const AGREE = 1.25;

/** The estimate's phases a probe's phase name stands for: a forward that computes the loss holds the loss too. */
const PHASES: Record<string, Phase[]> = {
  forward: ['forward', 'loss'],
  loss: ['loss'],
  backward: ['backward'],
  optimizer: ['optimizer'],
  step: ['forward', 'loss', 'backward', 'optimizer'],
};

/** Allocated peaks phase by phase, and the reserved peak, of an estimate against a measured run. */
export function compareMeasured(
  e: Estimate,
  run: MeasuredRun,
): { phases: PhaseComparison[]; reserved: PhaseComparison; unknownPhases: string[] } {
  // The event at a phase's peak: its total, and its live set as the peak's terms.
  const peakOf = (phases: Phase[]) => {
    let m: TimelineEvent | null = null;
    for (const ev of e.timeline?.events ?? [])
      if (phases.includes(ev.phase) && ev.total > (m?.total ?? -1)) m = ev;
    return m;
  };
  const ratio = (a: number | null, b: number | null) => (a !== null && b ? a / b : null);
  const phases: PhaseComparison[] = [];
  const unknownPhases: string[] = [];
  for (const [name, m] of Object.entries(run.phases)) {
    const mapped = PHASES[name.toLowerCase()];
    if (!mapped) {
      unknownPhases.push(name);
      continue;
    }
    const ev = peakOf(mapped);
    const est = ev?.total ?? null;
    const r = ratio(est, m.allocated);
    const parted = r !== null && (r > AGREE || r < 1 / AGREE);
    const cats = run.categories && Object.hasOwn(run.categories, name) ? run.categories[name] : undefined;
    phases.push({
      phase: name,
      estimatedBytes: est,
      measuredBytes: m.allocated,
      ratio: r,
      ...(parted && ev
        ? {
            terms: peakFigure(ev.live, e.setup)
              .terms.filter((t) => t.bytes > 0)
              .sort((a, b) => b.bytes - a.bytes)
              .slice(0, 4)
              .map((t) => ({ name: t.name, bytes: t.bytes })),
          }
        : {}),
      ...(cats && ev ? { categories: compareCategories(ev.live, cats, e.setup) } : {}),
    });
  }
  const measuredReserved = Object.values(run.phases).reduce<number | null>(
    (x, p) => (p.reserved === null ? x : Math.max(x ?? 0, p.reserved)),
    null,
  );
  const reservedEst = e.perGpu.reservedBytes;
  return {
    phases,
    reserved: {
      phase: 'reserved (the step)',
      estimatedBytes: reservedEst,
      measuredBytes: measuredReserved,
      ratio: ratio(reservedEst, measuredReserved),
    },
    unknownPhases,
  };
}
