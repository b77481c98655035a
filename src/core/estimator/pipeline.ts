/**
 * Pipeline parallelism as torch.distributed.pipelining schedules it: the stages each rank holds, how many
 * micro-batches each rank keeps in flight under each schedule, and the point-to-point traffic between stages.
 */
import { splitStages, stagesOfRank, type PipelineSchedule, type StageLayout } from '../model/pipelineStages';
import type { PendingWeightPoint } from './types';
import { zeroBubblePoints } from './zeroBubble';

/** Schedules of one stage per rank (`PipelineScheduleSingle`); the others are `PipelineScheduleMulti`. */
const SINGLE: ReadonlySet<PipelineSchedule> = new Set(['1F1B', 'GPipe']);
/** Schedules that place two stages per rank in a V (rank r holds stages r and 2p - 1 - r). */
const V_SHAPED: ReadonlySet<PipelineSchedule> = new Set(['ZBVZeroBubble', 'DualPipeV']);
/** Schedules that run every forward of a step before its first backward. */
const ALL_FORWARD_FIRST: ReadonlySet<PipelineSchedule> = new Set(['GPipe', 'LoopedBFS']);
/** Zero-bubble schedules: a micro-batch's weight gradients wait after its input gradients (`stage_backward_weight`). */
export const ZERO_BUBBLE: ReadonlySet<PipelineSchedule> = new Set([
  'InterleavedZeroBubble',
  'ZBVZeroBubble',
  'DualPipeV',
]);

/** The stages per rank a schedule runs by default: torchtitan's `_get_pipeline_metadata` (1 single-stage, 2 multi). */
export function stagesPerRank(schedule: PipelineSchedule): number {
  return SINGLE.has(schedule) ? 1 : 2;
}

/** What one rank of the pipeline holds and keeps in flight. */
export interface PipelineRank {
  rank: number;
  /** Its stages, in model order. */
  stages: StageLayout[];
  /** Its blocks, numbered as in the whole model. */
  blocks: number[];
  /** Whether it holds the embedding (the first stage) and the head with the loss (the last stage). */
  first: boolean;
  last: boolean;
  /**
   * The most micro-batches' activations it keeps at once, in micro-batches of its whole set of layers (stage
   * chunks in flight / stages per rank): PyTorch's order of forward and backward actions for the rank.
   */
  inFlight: number;
  /** Micro-batches whose loss (logits and its fp32 tensors) the last stage keeps at once. */
  lossInFlight: number;
  /**
   * Whether a backward has run before the rank holds its most micro-batches (a steady 1F1B phase): the unsharded
   * gradient accumulators are then full at its peak.
   */
  steady: boolean;
  /**
   * Zero-bubble schedules: the states before each backward that may hold the peak (micro-batches in flight and of
   * them those whose weight gradient waits), from the schedule's order of actions for the rank.
   */
  pendingWeight?: PendingWeightPoint[];
  /** Stage inputs received per micro-batch (forward) and gradients received (backward), counted per step. */
  receives: { forward: number; backward: number };
  /** Stage outputs sent to another rank per micro-batch, forward, and input gradients sent, backward. */
  sends: { forward: number; backward: number };
}

export interface PipelineLayout {
  degree: number;
  schedule: PipelineSchedule;
  microbatches: number;
  stagesPerRank: number;
  stages: StageLayout[];
  ranks: PipelineRank[];
}

/**
 * Stage chunks in flight on rank r of p, with v stages per rank and m micro-batches: the largest number of
 * forwards not yet matched by their backward (for zero-bubble schedules, by their weight-gradient step) in the
 * order each schedule builds (torch/distributed/pipelining/schedules.py):
 * - GPipe, `ScheduleGPipe._step_microbatches`: every forward, then every backward: m;
 * - 1F1B, `Schedule1F1B._step_microbatches`: `warmup_chunks = min(n_microbatches, num_stages - stage_index)` forwards,
 *   then one backward before each forward: min(m, p - r);
 * - Interleaved1F1B, `_get_1f1b_rank_ops` with `_get_warmup_ops(multiply_factor=2)`: warm-up
 *   `(v - 1) x mpr + 2 (p - 1 - r)` (mpr the micro-batches per round), then a forward before each backward: one more;
 * - LoopedBFS: every forward of each local stage, then the backwards: m x v;
 * - InterleavedZeroBubble (factor 1): `(v - 1) x mpr + p` chunks whose forward or weight gradient is pending;
 * - ZBVZeroBubble: min(2p, 2m, m + r + 1); DualPipeV: 2p + 1 (its overlapped pairs run forward first).
 * Each is capped by the m x v chunks a step has.
 */
export function chunksInFlight(
  schedule: PipelineSchedule,
  rank: number,
  p: number,
  v: number,
  m: number,
): number {
  const all = m * v;
  const rounds = Math.max(1, Math.floor(m / p));
  const perRound = Math.floor(m / rounds);
  switch (schedule) {
    case 'GPipe':
      return m;
    case '1F1B':
      return Math.min(m, p - rank);
    case 'Interleaved1F1B':
      return Math.min(Math.min((v - 1) * perRound + 2 * (p - 1 - rank), all) + 1, all);
    case 'LoopedBFS':
      return all;
    case 'InterleavedZeroBubble':
      return Math.min((v - 1) * perRound + p, all);
    case 'ZBVZeroBubble':
      return Math.min(2 * p, 2 * m, m + rank + 1);
    case 'DualPipeV':
      return Math.min(2 * p + 1, all);
  }
}

/** Why PyTorch refuses a schedule with these degrees, or null: the checks of each schedule's `__init__`. */
export function scheduleProblem(schedule: PipelineSchedule, p: number, m: number): string | null {
  if (schedule === '1F1B' && m < p)
    return `Schedule1F1B refuses fewer micro-batches than stages, ${m} < ${p}`;
  if (schedule === 'Interleaved1F1B' || schedule === 'InterleavedZeroBubble') {
    const rounds = Math.max(1, Math.floor(m / p));
    if (m % rounds !== 0)
      return `${schedule} refuses micro-batches that are not whole rounds, ${m} not a multiple of ${rounds}`;
  }
  if (schedule === 'DualPipeV' && m < 2 * p)
    return `DualPipeV refuses fewer micro-batches than twice the ranks, ${m} < ${2 * p}`;
  return null;
}

/**
 * The pipeline of a decoder of `layers` blocks over `p` ranks, with `m` micro-batches per step: torchtitan's stage
 * split (`splitStages`), the stages of each rank, and what each keeps in flight. A pipeline PyTorch or torchtitan
 * refuses is a message.
 */
export function pipelineLayout(
  layers: number,
  p: number,
  schedule: PipelineSchedule,
  m: number,
): PipelineLayout | { problem: string } {
  const problem = scheduleProblem(schedule, p, m);
  if (problem) return { problem };
  const v = stagesPerRank(schedule);
  const stages = splitStages(layers, p * v);
  if ('problem' in stages) return stages;
  const style = V_SHAPED.has(schedule) ? 'v' : 'loop';
  const rankOf = new Map<number, number>();
  for (let r = 0; r < p; r++) for (const s of stagesOfRank(r, p, v, style)) rankOf.set(s, r);
  const total = p * v;
  const ranks: PipelineRank[] = [];
  for (let r = 0; r < p; r++) {
    const own = stagesOfRank(r, p, v, style)
      .sort((a, b) => a - b)
      .map((s) => stages[s]!);
    const chunks = chunksInFlight(schedule, r, p, v, m);
    const first = own.some((s) => s.first);
    const last = own.some((s) => s.last);
    // Sends and receives cross ranks only: the V layout hands the middle stage's output to the same rank
    // (`set_local_fwd_input`).
    const remote = (s: number, t: number) => t >= 0 && t < total && rankOf.get(t) !== r;
    const lastLocal = own.findIndex((s) => s.last);
    const pending = ZERO_BUBBLE.has(schedule)
      ? zeroBubblePoints(schedule, r, p, v, m, lastLocal < 0 ? null : lastLocal).map((pt) => ({
          inFlight: pt.inFlight / v,
          pending: pt.pending / v,
          pendingLast: pt.pendingLast,
          inputStep: pt.inputStep,
        }))
      : undefined;
    ranks.push({
      rank: r,
      stages: own,
      blocks: own.flatMap((s) => Array.from({ length: s.to - s.from }, (_, i) => s.from + i)),
      first,
      last,
      inFlight: chunks / v,
      lossInFlight: last ? (ALL_FORWARD_FIRST.has(schedule) ? chunks : 1) : 0,
      steady: !ALL_FORWARD_FIRST.has(schedule) && chunks < m * v,
      ...(pending ? { pendingWeight: pending } : {}),
      receives: {
        forward: own.filter((s) => remote(s.index, s.index - 1)).length,
        backward: own.filter((s) => remote(s.index, s.index + 1)).length,
      },
      sends: {
        forward: own.filter((s) => remote(s.index, s.index + 1)).length,
        backward: own.filter((s) => remote(s.index, s.index - 1)).length,
      },
    });
  }
  return { degree: p, schedule, microbatches: m, stagesPerRank: v, stages, ranks };
}

/**
 * What a rank's figures depend on: ranks of one kind (the same blocks held, in flight, first, last, steady) have
 * the same figures, so each kind is estimated once and the pipeline's peak is the largest kind's. Blocks are
 * keyed by their kinds (`blockKind`), so that a rank of dense blocks differs from one of MoE blocks.
 */
export function rankKind(r: PipelineRank, blockKind: (block: number) => string = () => ''): string {
  return [
    r.blocks.map(blockKind).join(','),
    r.blocks.length,
    r.inFlight,
    r.first,
    r.last,
    r.steady,
    r.lossInFlight,
    JSON.stringify(r.pendingWeight ?? []),
  ].join('/');
}
