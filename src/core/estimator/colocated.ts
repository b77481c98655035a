/**
 * Phases of a job whose GPUs the FSDP step shares with other work (an RL trainer's rollout engine, its
 * log-probability passes, a critic kept beside the actor): what the training process holds per GPU in each phase,
 * the engine's share beside it, and the fit of the worst phase.
 */
import { GPUS, gpuBytes, type Gpu } from '../hardware/catalog';
import type { ArchShape } from '../model/hf';
import { fmtBytes } from '../vocabulary/bytes';
import { DTYPE_BYTES } from '../vocabulary/dtypes';
import { requiredBytes, reserveOn, type Calibration } from './fit';
import type { Estimate, FitResult, Term } from './types';

/** What shares the GPUs with the FSDP step, as the job's configuration says. */
export interface Colocation {
  /** Who schedules the phases, for the words ("verl's hybrid engine"). */
  by: string;
  /**
   * The rollout engine in its own processes on the same GPUs, with its share of each GPU's memory: vLLM takes
   * `gpu_memory_utilization` of the GPU's whole memory per instance (`Worker.init_device` in
   * vllm/v1/worker/gpu_worker.py refuses to start when less is free).
   */
  rollout?: { engine: string; fraction: number; where: string };
  /** The engine keeps its memory between rollouts (verl's `free_cache_engine: false`): its share in every phase. */
  keepsEngine?: boolean;
  /** The actor's state moved to the host between phases and loaded back for its own (verl's fsdp_config). */
  offloadBetween: { params: boolean; optimizer: boolean };
  /** Other models' state kept on the same GPUs through every phase (a critic's): bytes per GPU each. */
  resident: Term[];
  /**
   * Forward passes without gradients over the actor's model (old log-probabilities, the reference model's): the
   * tokens of one micro-batch each. `gathered`: the model's units come from the host (a CPU-offloaded reference
   * model), so only the running ones are on the GPU, and the actor's own parameters stay where they are.
   */
  inference: { name: string; tokens: number; where: string; fromHost?: boolean }[];
  /** Whether those passes' entropy is compiled (fused into reductions) or eager (two b·s·V tensors more). */
  entropyCompiled: boolean;
  /** Phases not estimated (a critic's own update): a fit that holds is then a lower bound. */
  notEstimated: string[];
  /** What stays allocated across phases that is not counted (vLLM's CUDA graphs through its sleep). */
  uncounted: string[];
}

/** One phase: what the training process holds per GPU, and the rollout engine's share of the GPU beside it. */
export interface ColocatedPhase {
  kind: 'update' | 'rollout' | 'inference';
  name: string;
  /** Where the configuration sets what sizes it (its micro-batch). */
  where?: string;
  bytes: number;
  terms: Term[];
  /** The engine's fraction of each GPU's memory, in its own processes (the rollout phase). */
  engineFraction?: number;
  /** Of `bytes`, what the phase holds whatever the length of its sequences (its state and gathered units). */
  certainBytes?: number;
  /** What the phase needs of the target GPU: its bytes with the allocator's allowance and context, the engine's share. */
  needBytes: number;
}

export interface ColocatedPhases {
  by: string;
  phases: ColocatedPhase[];
  /** The phase that decides the fit on the target GPU. */
  worst: string;
  /** Phases not estimated (see Colocation.notEstimated). */
  notEstimated: string[];
}

/** The rollout engine's share of a GPU, as a term of a phase. */
function engineTerm(g: Gpu, r: NonNullable<Colocation['rollout']>, how: string): Term {
  return {
    name: `${r.engine}'s share`,
    bytes: Math.ceil(r.fraction * gpuBytes(g)),
    formula: `${r.fraction} of the GPU's ${fmtBytes(gpuBytes(g))}, ${how} (${r.where})`,
  };
}

/** Bytes a phase needs of a GPU: the training process's with its allowance and context, and the engine's share. */
function phaseNeed(
  p: Pick<ColocatedPhase, 'bytes' | 'engineFraction'>,
  g: Gpu,
  calibrations?: readonly Calibration[],
): number {
  return (
    requiredBytes(p.bytes, reserveOn(g.id, calibrations)) + Math.ceil((p.engineFraction ?? 0) * gpuBytes(g))
  );
}

/**
 * The phases of a colocated job from the FSDP step's estimate: the actor's update (the step's peak with the other
 * models kept beside it), the rollout (the actor's state that stays on the GPU, the others', and the engine's
 * share), and each forward without gradients (the state, the gathered units and the larger of a block's MLP and
 * the head's logits).
 */
export function colocatedPhases(e: Estimate, c: Colocation, shape: ArchShape | undefined): ColocatedPhases {
  const b = (n: number) => fmtBytes(n);
  const onGpu = e.units.filter((u) => !u.offload);
  const params = onGpu.reduce((s, u) => s + u.shard.params, 0);
  const grads = onGpu.reduce((s, u) => s + u.shard.grads, 0);
  const optimizer = onGpu.reduce((s, u) => s + u.shard.optimizer, 0);
  const rest = Math.max(0, e.perGpu.persistentBytes - params - grads - optimizer - e.unowned.gradBytes);
  const resident = c.resident.reduce((s, t) => s + t.bytes, 0);
  // verl's `update_policy` ends with `zero_grad()`: the gradient shards are freed after the update.
  const stateTerms = (reloaded: boolean): Term[] => [
    c.offloadBetween.params && !reloaded
      ? { name: "actor's parameter shards", bytes: 0, formula: `on the host between phases (${b(params)})` }
      : { name: "actor's parameter shards", bytes: params, formula: 'this GPU’s shard of the parameters' },
    c.offloadBetween.optimizer
      ? {
          name: "actor's optimizer state",
          bytes: 0,
          formula: `on the host between updates (${b(optimizer)})`,
        }
      : {
          name: "actor's optimizer state",
          bytes: optimizer,
          formula: 'this GPU’s shard, kept between updates',
        },
    ...(rest > 0 ? [{ name: 'buffers and the rest', bytes: rest, formula: 'as in the step' }] : []),
    ...c.resident,
  ];
  const sum = (ts: Term[]) => ts.reduce((s, t) => s + t.bytes, 0);
  const phases: ColocatedPhase[] = [];
  if (c.rollout) {
    const terms = stateTerms(false);
    phases.push({
      kind: 'rollout',
      name: 'rollout',
      needBytes: 0,
      bytes: sum(terms),
      engineFraction: c.rollout.fraction,
      terms: [...terms, engineTerm(e.gpu, c.rollout, 'in its own processes')],
    });
  }
  if (shape) {
    const e2 = DTYPE_BYTES[e.comms.gatherDtype];
    const root = e.units.find((u) => u.isRoot)?.gatheredBytes ?? 0;
    const unit = Math.max(0, ...e.units.filter((u) => !u.isRoot).map((u) => u.gatheredBytes));
    for (const pass of c.inference) {
      const T = pass.tokens;
      const n = T * shape.vocab;
      // The head's moment: its input and the residual stream (e·T·h each), the logits (e·n) and flash-attn's fp32
      // values per token; the entropy verl computes beside them, fused when compiled, else its softmax and the
      // product with the logits (`entropy_from_logits`, two e·n).
      const head = 2 * e2 * T * shape.hidden + e2 * n + 12 * T + (c.entropyCompiled ? 0 : 2 * e2 * n);
      // A block's MLP under no_grad: its input and the residual, then gate, its activation and up beside each
      // other before their product (SwiGLU: three T·I tensors; GELU: two).
      const mlp = 2 * e2 * T * shape.hidden + (shape.mlp === 'swiglu' ? 3 : 2) * e2 * T * shape.intermediate;
      const terms = [
        ...(pass.fromHost ? stateTerms(false) : stateTerms(true)),
        {
          name: pass.fromHost ? 'gathered from the host' : 'gathered units',
          bytes: root + unit,
          formula: 'the root unit and the running block, unsharded',
        },
        head >= mlp
          ? {
              name: 'logits',
              bytes: head,
              formula: `${T.toLocaleString('en-US')} tokens x ${shape.vocab.toLocaleString('en-US')} in ${e2} B, the head's input${c.entropyCompiled ? '' : ', and the eager entropy’s two tensors of the same size'}`,
            }
          : {
              name: "a block's MLP",
              bytes: mlp,
              formula: `${T.toLocaleString('en-US')} tokens, no gradients`,
            },
      ];
      const bytes = sum(terms);
      const tokenTerm = terms[terms.length - 1]!.bytes;
      phases.push({
        kind: 'inference',
        name: pass.name,
        needBytes: 0,
        where: pass.where,
        bytes,
        certainBytes: bytes - tokenTerm,
        terms,
      });
    }
  }
  // In the order of a step: the rollout, the log-probability passes, the update.
  phases.push({
    kind: 'update',
    name: 'actor update',
    needBytes: 0,
    bytes: e.perGpu.peakBytes + resident,
    terms: [
      { name: "the actor's step", bytes: e.perGpu.peakBytes, formula: "the FSDP step's peak above" },
      ...c.resident,
    ],
  });
  // An engine that keeps its memory between rollouts holds its share through the other phases too.
  if (c.rollout && c.keepsEngine)
    for (const p of phases)
      if (p.engineFraction === undefined) {
        p.engineFraction = c.rollout.fraction;
        p.terms.push(engineTerm(e.gpu, c.rollout, 'kept between rollouts'));
      }
  for (const p of phases) p.needBytes = phaseNeed(p, e.gpu, e.calibrations);
  const worst = phases.reduce((w, p) => (p.needBytes > w.needBytes ? p : w), phases[0]!);
  return { by: c.by, phases, worst: worst.name, notEstimated: c.notEstimated };
}

/**
 * The fit of a colocated job on one GPU: every phase's need against its memory, with the step's bounds (`partial`
 * as `fitOn` takes it, `floor` what the step holds whatever is overcounted): short when a phase's certain part
 * does not fit, undecided when only what may be overcounted does not, or when parts are left out.
 */
export function colocatedFit(
  e: Estimate,
  col: ColocatedPhases,
  g: Gpu,
  partial: boolean | 'any' | 'upper',
  floor: number,
): FitResult {
  const update = col.phases.find((p) => p.kind === 'update')!;
  const beside = update.bytes - e.perGpu.peakBytes;
  const capacity = gpuBytes(g);
  // Parallelism not modelled or a condition not decided: no phase gives a verdict.
  const decidable = !e.unmodelled.length && !e.undecided.length;
  let headroom = capacity;
  let short = false;
  // A phase short only by what may be counted beyond what the job keeps (sequences at full length) is no verdict;
  // one whose certain part (its state, gathered units, the engine's share) does not fit is short whatever is left
  // out besides.
  let maybeShort = false;
  for (const p of col.phases) {
    const left = capacity - phaseNeed(p, g, e.calibrations);
    headroom = Math.min(headroom, left);
    if (left >= 0) continue;
    // What the phase holds for certain: all of it, unless the figures count more than the job keeps.
    const overcounts = partial === 'upper' || partial === 'any';
    const certain = !overcounts ? p.bytes : p === update ? floor + beside : (p.certainBytes ?? p.bytes);
    if (decidable && capacity - phaseNeed({ ...p, bytes: certain }, g, e.calibrations) < 0) short = true;
    else maybeShort = true;
  }
  // Nothing over the GPU: a fit, unless parts are left out (a lower bound) or nothing is decided.
  const verdict: FitResult['verdict'] = short
    ? 'short'
    : maybeShort || partial === true || partial === 'any'
      ? 'undecided'
      : 'fits';
  return { gpu: g.id, name: g.name, verdict, headroomBytes: headroom, memoryBytes: capacity };
}

/** The fit of a colocated job on every GPU of the catalog. */
export function colocatedFitAll(
  e: Estimate,
  col: ColocatedPhases,
  partial: boolean | 'any' | 'upper',
  floor: number,
): FitResult[] {
  return GPUS.map((g) => colocatedFit(e, col, g, partial, floor));
}
