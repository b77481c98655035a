/**
 * A measured run against its estimate: the peaks `fsdp_lens_probe.py` recorded per phase of a step on one rank (or
 * what a memory snapshot or a training log gives, read by snapshot.ts and trainingLog.ts), beside the estimate's
 * peak of the same phase (allocated against allocated) and its reserved estimate (reserved against reserved), with
 * the ratio of each.
 */
import type { Estimate, TimelineEvent } from '../estimator/types';
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
