/**
 * A measured run against its estimate: the peaks `fsdp_lens_probe.py` recorded per phase of a step on one rank (or
 * what a memory snapshot or a training log gives, read by snapshot.ts and trainingLog.ts), beside the estimate's
 * peak of the same phase (allocated against allocated) and its reserved estimate (reserved against reserved), with
 * the ratio of each.
 */
import type { Estimate } from '../estimator/types';
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
  };
}

export interface PhaseComparison {
  phase: string;
  estimatedBytes: number | null;
  measuredBytes: number | null;
  /** estimated / measured, when both are known. */
  ratio: number | null;
}

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
  const peakOf = (phases: Phase[]) => {
    let m: number | null = null;
    for (const ev of e.timeline?.events ?? []) if (phases.includes(ev.phase)) m = Math.max(m ?? 0, ev.total);
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
    const est = peakOf(mapped);
    phases.push({
      phase: name,
      estimatedBytes: est,
      measuredBytes: m.allocated,
      ratio: ratio(est, m.allocated),
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
