/**
 * The step's timeline: forward through the units, the loss, backward in reverse and the optimizer step, with what
 * is alive at each event and the peak.
 */
import type { ArchShape } from '../model/hf';
import { DTYPE_BYTES } from '../vocabulary/dtypes';
import { outermostOfClass, type ModuleNode } from '../model/tree';
import { lossParallelOf } from './mesh';
import { lossFused } from './bounds';
import { fmtBytes } from '../vocabulary/bytes';
import { fmtInFlight } from '../vocabulary/words';
import {
  blockActivations,
  LIGER_MODEL_TYPES,
  weightGradInputs,
  lossTransient,
  tailActivations,
  type ActivationInputs,
} from './activations';
import {
  OPTIMIZER_STEP,
  type PendingWeightPoint,
  type Estimate,
  type LiveSet,
  type Phase,
  type StageRun,
  type Timeline,
  type TimelineEvent,
  type UnitEstimate,
} from './types';

const CATEGORIES: (keyof LiveSet)[] = [
  'state',
  'shardGrads',
  'gathered',
  'gatherBuffers',
  'activations',
  'working',
  'gradients',
  'logits',
  'heldOutput',
  'optimizer',
  'pipeline',
];

export function liveTotal(l: LiveSet): number {
  return CATEGORIES.reduce((s, k) => s + l[k], 0);
}

interface Segment {
  kind: 'head' | 'block' | 'tail';
  /** DFS range of the segment's modules. */
  lo: number;
  hi: number;
  blockIndex: number;
  moe: boolean;
}

/** Depth-first positions of every module: a subtree is a contiguous range. */
function dfsRanges(root: ModuleNode): Map<string, [number, number]> {
  const out = new Map<string, [number, number]>();
  let i = 0;
  const visit = (m: ModuleNode) => {
    const start = i++;
    for (const c of m.children) visit(c);
    out.set(m.path, [start, i - 1]);
  };
  visit(root);
  return out;
}

const RANGES = new WeakMap<ModuleNode, Map<string, [number, number]>>();

function rangesOf(root: ModuleNode): Map<string, [number, number]> {
  let r = RANGES.get(root);
  if (!r) RANGES.set(root, (r = dfsRanges(root)));
  return r;
}

/** The step's execution segments: what runs before the blocks, each block, what runs after them. */
function segmentsOf(root: ModuleNode, shape: ArchShape): Segment[] {
  const ranges = rangesOf(root);
  const outer = outermostOfClass(root, shape.blockClass);
  const blocks = outer.map((m) => ranges.get(m.path)!);
  const isMoe = outer.map(
    (m) => shape.experts > 0 && m.children.some((c) => c.children.some((g) => g.name === 'experts')),
  );
  const total = ranges.get('')![1];
  if (!blocks.length) return [{ kind: 'head', lo: 0, hi: total, blockIndex: -1, moe: false }];
  return [
    { kind: 'head', lo: 0, hi: blocks[0]![0] - 1, blockIndex: -1, moe: false },
    ...blocks.map((b, i): Segment => ({ kind: 'block', lo: b[0], hi: b[1], blockIndex: i, moe: isMoe[i]! })),
    { kind: 'tail', lo: blocks[blocks.length - 1]![1] + 1, hi: total, blockIndex: -1, moe: false },
  ];
}

/**
 * The zero-bubble state before a backward that holds the most: the other micro-batches' saved activations, the
 * weight-gradient inputs of those waiting (and of the running one in an input-gradient step, which keeps its
 * activations to its end: `retain_graph=True`), and the logits' gradient of waiting last-stage chunks.
 */
function mostWaiting(
  points: readonly PendingWeightPoint[],
  saved: number,
  grads: { perMicroBatch: number; head: number },
): { bytes: number; pt: PendingWeightPoint | undefined } {
  let best: { bytes: number; pt: PendingWeightPoint | undefined } = { bytes: 0, pt: undefined };
  for (const pt of points) {
    const bytes =
      Math.max(0, pt.inFlight - 1) * saved +
      (pt.pending + (pt.inputStep ? 1 : 0)) * grads.perMicroBatch +
      pt.pendingLast * grads.head;
    if (bytes > best.bytes) best = { bytes, pt };
  }
  return best;
}

/**
 * Simulates the live set over one micro-batch: forward through the segments, the loss, backward in reverse, the
 * optimizer step. Units are gathered over the segments their modules span, prefetched one ahead, freed after
 * forward unless kept (root, reshard_after_forward=False, SHARD_GRAD_OP) or kept as a 1/k slice.
 *
 * On a rank of a pipeline (`stage`), the micro-batch simulated runs beside the others the schedule keeps in flight,
 * with its stage's units gathered through the step and its gradients accumulated unsharded until the step's end,
 * as `PipelineStage` runs FSDP2 (`backward_maybe_with_nosync`: `set_requires_gradient_sync(False)`,
 * `set_reshard_after_backward(False)` for every micro-batch; `perform_reduce_grad` reduce-scatters once).
 */
export function simulate(
  e: Estimate,
  root: ModuleNode,
  shape: ArchShape | undefined,
  tp = 1,
  stage?: StageRun,
): Timeline | null {
  if (!shape) return null;
  const setup = e.setup;
  const computeBytes = DTYPE_BYTES[setup.paramDtype ?? setup.masterDtype];
  const reduceBytes = DTYPE_BYTES[e.comms.reduceDtype];
  // `tp`: the tensor-parallel degree the tree is already split by (1 when none applies).
  // Context parallelism leaves each GPU 1/C of every sequence.
  const C = setup.contextParallel;
  const x: ActivationInputs = {
    microBatch: setup.microBatch,
    seqLen: Math.ceil(setup.seqLen / C),
    attention: setup.attention,
    bytes: computeBytes,
    tp,
    lossParallel: lossParallelOf(setup),
    sequenceParallel: setup.tpPlan !== 'transformers',
    cp: C,
    ulysses: setup.cpMethod === 'ulysses',
    ep: setup.expertParallel,
  };
  const segs = segmentsOf(root, shape);
  const ranges = rangesOf(root);
  const fsdp1 = e.plan.api === 'fsdp1';
  const notes: string[] = [];

  // Each unit's span of segments, from the modules it wraps.
  const spans = e.units.map((u) => {
    let lo = Infinity;
    let hi = -Infinity;
    for (const p of u.modules) {
      const r = ranges.get(p);
      if (!r) continue;
      segs.forEach((s, i) => {
        if (s.hi >= s.lo && r[0] <= s.hi && r[1] >= s.lo) {
          lo = Math.min(lo, i);
          hi = Math.max(hi, i);
        }
      });
    }
    return Number.isFinite(lo) ? ([lo, hi] as [number, number]) : null;
  });
  const inner = (s: number): UnitEstimate | undefined => {
    let best: UnitEstimate | undefined;
    let width = Infinity;
    e.units.forEach((u, i) => {
      const sp = spans[i];
      if (sp && sp[0] <= s && s <= sp[1] && sp[1] - sp[0] < width) {
        width = sp[1] - sp[0];
        best = u;
      }
    });
    return best;
  };

  const acts = segs.map((s) => {
    if (s.kind === 'block') return blockActivations(shape, x, setup.checkpointing, s.moe, s.blockIndex);
    if (s.kind === 'tail') {
      const t = stage && !stage.last ? 0 : tailActivations(shape, x);
      return { kind: 'none' as const, saved: t, full: t, transient: 0, recompute: 0, tensors: [] };
    }
    return { kind: 'none' as const, saved: 0, full: 0, transient: 0, recompute: 0, tensors: [] };
  });
  // This GPU's gradient shards do not exist before backward: FSDP2 creates a unit's in its post-backward
  // (`FSDPParamGroup.post_backward` → `foreach_reduce`, which sets `sharded_param.grad`), FSDP1 in
  // `_post_backward_hook` (`_reduce_grad`), and `optimizer.zero_grad()` frees them (`set_to_none=True` by
  // default). When every micro-batch of an accumulating step syncs, they are kept from the first micro-batch on,
  // and a later micro-batch runs with all of them.
  const shardGradsOf = (u: UnitEstimate) => (u.offload || u.params === 0 ? 0 : u.shard.grads);
  // (Units whose modules run in no segment have no post-backward event here: their shards stay in the state.)
  const allShardGrads = e.units.reduce((sum, u, i) => sum + (spans[i] ? shardGradsOf(u) : 0), 0);
  // The gradients of parameters in no unit are plain autograd gradients: created as backward reaches them (at the
  // latest by its last segment; counted from its first), kept across the micro-batches of an accumulating step,
  // freed by `zero_grad()`.
  // The optimizer in backward (torchtune's `register_optim_in_bwd_hooks`: one optimizer per parameter, stepped and
  // zeroed by a post-accumulate-grad hook): FSDP2's `foreach_reduce` runs the sharded parameter's
  // `_post_accumulate_grad_hooks` right after it sets the gradient shard, so each unit's shards live only through
  // its own post-backward, and nothing is left for a step after backward. Each step is of one parameter (no
  // foreach temporary over all of them). FSDP1 runs no such hook on a FlatParameter's shard, and torchtune refuses
  // it with gradient accumulation.
  const inBackward = setup.optimizerInBackward && !fsdp1 && setup.gradAccum === 1 && !stage;
  if (setup.optimizerInBackward && !inBackward)
    notes.push(
      fsdp1
        ? "the optimizer in backward is not modelled for FSDP1 (its hooks do not fire on a FlatParameter's shard): a step after backward is counted"
        : 'the optimizer in backward does not run with gradient accumulation (torchtune raises): a step after backward is counted',
    );
  // Under it, a parameter outside every unit is stepped by the same hook as AccumulateGrad makes its gradient:
  // one such gradient at a time, not all of them.
  const unownedGrads = inBackward
    ? Math.min(e.unowned.gradBytes, e.unowned.largestGradBytes ?? e.unowned.gradBytes)
    : e.unowned.gradBytes;
  const state = e.perGpu.persistentBytes - allShardGrads - e.unowned.gradBytes;
  const unownedBefore = setup.gradAccum > 1 ? unownedGrads : 0;
  const gradsKept = setup.gradAccum > 1 && setup.syncEveryMicroBatch;
  let shardGrads = gradsKept ? allShardGrads : 0;
  // Liger's kernels replace the loss only of the model types it patches.
  const ligerless = setup.loss === 'fused' && !LIGER_MODEL_TYPES.has(shape.modelType);
  if (ligerless)
    notes.push(
      `Liger has no kernels for model type ${shape.modelType}: the loss is counted as the model computes it (an fp32 copy in the loss)`,
    );
  // A trainable head (not LoRA's frozen base) gets its gradient from a fused loss in forward, from cut
  // cross-entropy in backward.
  let headTrainable = false;
  const look = (m: ModuleNode, depth: number) => {
    for (const p of m.params)
      if (p.trainable && p.shape[0] === shape.vocab && p.shape[1] === shape.hidden) headTrainable = true;
    if (depth < 3) for (const c of m.children) look(c, depth + 1);
  };
  if (setup.loss === 'fused' || setup.loss === 'cut' || setup.loss === 'head-chunked') look(root, 0);
  // Gradient accumulation without sync keeps every unit's unsharded gradient between micro-batches. FSDP2 keeps
  // it in the reduce dtype (`FSDPParam.to_accumulated_grad_if_needed` casts when it differs from the parameter
  // dtype); FSDP1 in the compute dtype (`_post_backward_hook` returns before `_prepare_gradient_for_reduce`
  // casts).
  const accumulatedBytes =
    !fsdp1 && setup.reduceDtype && setup.reduceDtype !== setup.paramDtype ? reduceBytes : computeBytes;
  // A chunked loss accumulates the head's unsharded gradient the same way, with sync off across its chunks.
  const loss = lossTransient(
    shape,
    x,
    ligerless ? 'upcast' : setup.loss,
    headTrainable,
    lossFused(setup),
    accumulatedBytes,
  );
  // A script that keeps the model's output in a variable of its loop holds the logits from the loss on, through
  // backward and the optimizer step; left bound after the step, the previous step's through the next forward too,
  // until the assignment rebinds it.
  const heldFrom = (phase: Phase, label: string) =>
    setup.keepsOutput === 'step' ||
    (setup.keepsOutput === 'backward' &&
      (phase === 'backward' || phase === 'optimizer' || label === 'gradient of the loss'))
      ? loss.output
      : 0;
  // On a pipeline rank the unsharded gradients stay as accumulators between micro-batches (FSDP2's
  // `to_accumulated_grad_if_needed`, in the reduce dtype, for every micro-batch: the stage runs each backward with
  // gradient sync off) until the step's one reduce-scatter: full at the rank's peak once a backward ran before it,
  // else made by its first backward.
  const accumulatorOf = (u: UnitEstimate) => (u.params === 0 ? 0 : u.gradientNumel * accumulatedBytes);
  const stageAccumulators = stage
    ? e.units.reduce((sum, u, i) => sum + (spans[i] ? accumulatorOf(u) : 0), 0)
    : 0;
  const accumulated = stage
    ? stage.steady
      ? stageAccumulators
      : 0
    : !setup.syncEveryMicroBatch && setup.gradAccum > 1
      ? e.units.reduce((s, u) => s + u.gradientNumel * accumulatedBytes, 0)
      : 0;
  if (accumulated && !stage)
    notes.push('gradients accumulate unsharded between micro-batches (no gradient sync until the last)');
  // A pipeline rank's receive buffers, kept from the first step, and the outputs of its micro-batches in flight.
  const pipelineOf = (phase: Phase) =>
    stage ? stage.receiveBytes + (phase === 'optimizer' ? 0 : stage.outputBytes * stage.inFlight) : 0;
  const events: TimelineEvent[] = [];
  // The caching allocator keeps a freed block for the stream that allocated it (`get_free_block` searches the
  // pool by stream and size), so what FSDP allocates in its side streams is reused only there. FSDP2 allocates its
  // all-gather outputs in the copy-in stream (`foreach_all_gather`) and the reduce-scatter output, which becomes the
  // gradient shard, in the reduce-scatter stream (`foreach_reduce`); its unsharded parameters (copy-out) and the
  // reduce-scatter input are the compute stream's. FSDP1 gathers into the FlatParameter's padded storage in the
  // unshard stream (`_unshard`) and reduces in the post-backward stream (`_post_backward_hook` → `_reduce_grad`:
  // the reduce-dtype copy and the new gradient shard).
  const push = (
    phase: Phase,
    segment: number,
    unit: UnitEstimate | undefined,
    label: string,
    partial: Omit<LiveSet, 'heldOutput' | 'pipeline'>,
    reduceCopy = 0,
  ) => {
    const name = phase === 'optimizer' ? OPTIMIZER_STEP : (unit?.name ?? '');
    const live: LiveSet = { ...partial, heldOutput: heldFrom(phase, label), pipeline: pipelineOf(phase) };
    const streams = {
      gather: fsdp1 ? live.gathered : live.gatherBuffers,
      reduce: live.shardGrads + reduceCopy,
    };
    events.push({ phase, segment, unit: name, label, live, total: liveTotal(live), streams });
  };
  const gatheredOf = (u: UnitEstimate) => u.gatheredBytes;
  const sliceOf = (u: UnitEstimate) =>
    u.residency.kind === 'slice' ? Math.ceil(u.gatheredBytes / u.residency.ranks) : 0;

  // A pipeline rank keeps its stages gathered from its first forward to the step's reduce-scatter
  // (reshard_after_forward=False, torchtitan's default under pipeline parallelism, and no reshard after a
  // micro-batch's backward): no all-gather runs at its peak.
  const gatheredAll = stage ? e.units.reduce((sum, u, i) => sum + (spans[i] ? gatheredOf(u) : 0), 0) : 0;
  // The other micro-batches in flight: their saved activations, and on the last stage (GPipe, LoopedBFS) their
  // losses.
  const savedPerMicroBatch = acts.reduce((sum, a) => sum + a.saved, 0);
  // Under a zero-bubble schedule, micro-batches whose weight gradient waits also keep the output gradients of
  // their matmuls and norms (`weightGradInputs`), and on the last stage their logits' gradient: the state before a
  // backward that makes the most of both (`StageRun.pendingWeight`). Only a zero-bubble rank pays for this.
  const waiting = stage?.pendingWeight?.length
    ? mostWaiting(stage.pendingWeight, savedPerMicroBatch, {
        perMicroBatch: segs.reduce(
          (sum, s) => sum + (s.kind === 'block' ? weightGradInputs(shape, x, s.moe) : 0),
          0,
        ),
        head: shape.activationsNotModelled
          ? 0
          : (computeBytes * x.microBatch * x.seqLen * shape.vocab) / (x.lossParallel && tp > 1 ? tp : 1),
      })
    : { bytes: 0, pt: undefined };
  const pendingBytes = stage
    ? Math.max(0, waiting.bytes - Math.max(0, stage.inFlight - 1) * savedPerMicroBatch)
    : 0;
  const others = stage ? Math.max(0, stage.inFlight - 1) * savedPerMicroBatch + pendingBytes : 0;
  if (pendingBytes > 0 && waiting.pt)
    notes.push(
      `${setup.ppSchedule}: up to ${fmtInFlight(waiting.pt.pending)} micro-batches wait for their weight gradients at once, keeping each matmul's and norm's output gradient${waiting.pt.pendingLast ? " and the head's logits gradient" : ''} (${fmtBytes(pendingBytes)} beside the saved activations)`,
    );
  const hasLoss = !stage || stage.last;
  const lossOthers = stage && stage.last ? Math.max(0, stage.lossInFlight - 1) * loss.kept : 0;

  // Forward. No unit is prefetched unless asked: FSDP1's `forward_prefetch` is False by default, and FSDP2
  // all-gathers a unit in its own pre-forward (`FSDPParamGroup.pre_forward` → `unshard`), after the previous one has resharded. In
  // FSDP2 a unit's all-gather output outlives its copy-out: `wait_for_unshard` keeps it in
  // `comm_ctx.all_gather_state` until the next unit's copy-out, and the last one until the root's post-forward
  // (`FSDPState._post_forward` frees it), so it is alive through what runs after the last block. FSDP1 gathers
  // into the FlatParameter's own padded storage: no second buffer. (World size 1 gathers nothing.)
  const keepsOutput = !fsdp1 && e.mesh.shardGroup > 1;
  let lastOutput = 0;
  let saved = 0;
  for (let s = 0; s < segs.length; s++) {
    if (segs[s]!.hi < segs[s]!.lo) continue;
    let gathered = 0;
    let ahead = 0;
    e.units.forEach((u, i) => {
      const sp = spans[i];
      if (!sp) return;
      if (sp[0] <= s && s <= sp[1]) gathered += gatheredOf(u);
      else if (sp[1] < s) gathered += u.residency.kind === 'keep' ? gatheredOf(u) : sliceOf(u);
      if (keepsOutput && sp[0] === s && u.params > 0) lastOutput = gatheredOf(u);
      // Explicit forward prefetch gathers the next unit while this one runs (FSDP2 `_prefetch_unshard` from the
      // running unit's pre-forward; FSDP1 `_prefetch_handle` into the next FlatParameter).
      if (setup.forwardPrefetch && sp[0] === s + 1 && u.params > 0) ahead += gatheredOf(u);
    });
    const a = acts[s]!;
    push('forward', s, inner(s), segLabel(segs[s]!, 'forward'), {
      state,
      shardGrads,
      gathered: stage ? gatheredAll : gathered,
      gatherBuffers: stage ? 0 : lastOutput + ahead,
      activations: saved + others,
      working: a.saved + a.transient,
      gradients: accumulated + unownedBefore,
      logits: lossOthers,
      optimizer: 0,
    });
    saved += a.saved;
  }
  const activationBytes = saved;

  // The turn: the loss runs after the model's forward (the root's post-forward has run), so every unit has
  // resharded but those kept (the root by default, reshard_after_forward=False, and 1/k slices); the last
  // all-gather output is freed.
  const keptNow = () =>
    stage
      ? gatheredAll
      : e.units.reduce(
          (sum, u, i) => (spans[i] ? sum + (u.residency.kind === 'keep' ? gatheredOf(u) : sliceOf(u)) : sum),
          0,
        );
  const last = segs.length - 1;
  const tailUnit = inner(last);
  // A loss that applies the head itself (torchtune's `LinearCrossEntropyLoss` calls `model.output` chunk by chunk)
  // runs the head unit's pre-forward again: FSDP2 all-gathers it unless it is kept gathered.
  const headAgain =
    setup.loss === 'linear-chunked' && tailUnit && tailUnit.residency.kind !== 'keep' && !stage
      ? gatheredOf(tailUnit) - sliceOf(tailUnit)
      : 0;
  if (hasLoss)
    for (const [label, logits] of [
      ['logits and loss', loss.forward],
      ['gradient of the loss', loss.backward],
    ] as const)
      push('loss', last, tailUnit, label, {
        state,
        shardGrads,
        gathered: keptNow() + headAgain,
        gatherBuffers: 0,
        activations: saved + others,
        working: 0,
        gradients: accumulated + unownedBefore,
        logits: logits + lossOthers,
        optimizer: 0,
      });

  // Unsharded gradients appear as autograd produces each parameter's gradient (FSDP2 leaves them to autograd
  // until the unit's post-backward reduce-scatter): a unit spanning several segments, like the root with the
  // embedding at the start and the norm and head at the end, holds the head's gradient from the start of
  // backward but the embedding's only at the end. `gradsFrom[i][s]`: unit i's trainable parameters whose
  // gradients exist once backward reaches segment s; what no segment holds counts from the unit's first segment
  // in backward.
  // FSDP1 reduces one FlatParameter per unit, whose gradient is modelled whole from the unit's first segment.
  // Non-empty segments by their first position, searched by bisection (a MoE model has tens of thousands of paths).
  const bySpan = segs
    .map((g, index) => ({ lo: g.lo, hi: g.hi, index }))
    .filter((g) => g.hi >= g.lo)
    .sort((a, b) => a.lo - b.lo);
  const segmentOf = (path: string): number => {
    const at = ranges.get(path)?.[0];
    if (at === undefined) return -1;
    let lo = 0;
    let hi = bySpan.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (bySpan[mid]!.lo <= at) lo = mid;
      else hi = mid - 1;
    }
    const g = bySpan[lo];
    return g && g.lo <= at && at <= g.hi ? g.index : -1;
  };
  const gradsFrom = e.units.map((u, i) => {
    const per = segs.map(() => 0);
    const sp = spans[i];
    if (!sp) return per;
    let placed = 0;
    // Only a unit spanning several segments has gradients appearing at different times.
    if (!fsdp1 && sp[0] < sp[1])
      for (const [path, n] of Object.entries(u.gradsAt ?? {})) {
        const t = segmentOf(path);
        if (t < sp[0] || t > sp[1]) continue;
        per[t]! += n;
        placed += n;
      }
    per[sp[1]]! += u.gradientNumel - placed;
    // Suffix sums: the elements whose gradients exist once backward has reached segment s.
    for (let t = per.length - 2; t >= 0; t--) per[t]! += per[t + 1]!;
    return per;
  });
  const gradsSoFar = (i: number, s: number) => gradsFrom[i]![s]!;

  // FSDP1 registers a unit whose FlatParameter is frozen for its reshard through a multi-grad hook on the unit's
  // inputs (`_register_post_backward_reshard_only_hook` → `register_multi_grad_hook`, removed only by
  // `_finalize_params` when backward ends). Under a reentrant checkpoint around the unit (Transformers' gradient
  // checkpointing wraps each layer's call), that input is the checkpoint's detached leaf, registered as the
  // recomputation runs: the hook's `AccumulateGrad` keeps it, and the `.grad` its backward accumulates, until
  // backward ends. So each frozen unit whose backward has run keeps its input and its gradient.
  const retains = fsdp1 && setup.reentrantCheckpoint;
  const frozenBlock = segs.map((g) => {
    if (!retains || g.kind !== 'block') return false;
    let owner: UnitEstimate | undefined;
    let width = Infinity;
    e.units.forEach((u) => {
      for (const p of u.modules) {
        const r = ranges.get(p);
        if (r && r[0] <= g.lo && g.hi <= r[1] && r[1] - r[0] < width) {
          width = r[1] - r[0];
          owner = u;
        }
      }
    });
    return !!owner && owner.params > 0 && owner.trainableParams === 0;
  });

  // Backward of one micro-batch beside `inFlight` other micro-batches' activations, with `accStart` bytes of
  // pipeline accumulators (grown by each post-backward when `first`).
  const backward = (inFlight: number, accStart: number, first: boolean, tag: string) => {
    let left = activationBytes;
    let acc = accStart;
    let rsBuffer = 0; // the previous unit's reduce-scatter input, alive until the next post-backward
    const done = new Set<number>();
    // Inputs and input gradients kept by FSDP1's reshard-only hooks (the newest gradient is the one flowing into
    // the running block, counted with its working tensors).
    let retained = 0;
    let retainedBlocks = 0;
    for (let s = last; s >= 0; s--) {
      if (segs[s]!.hi < segs[s]!.lo) continue;
      let gathered = 0;
      let buffers = 0;
      let grads = (stage ? acc : accumulated) + unownedGrads;
      e.units.forEach((u, i) => {
        const sp = spans[i];
        if (!sp || done.has(i)) return;
        if (sp[0] <= s && s <= sp[1]) {
          gathered += gatheredOf(u);
          grads += gradsSoFar(i, s) * computeBytes; // its unsharded gradients produced so far in its backward
        } else if (sp[0] > s) return;
        else gathered += u.residency.kind === 'keep' ? gatheredOf(u) : sliceOf(u);
        if (sp[1] === s - 1 && u.residency.kind !== 'keep') buffers += gatheredOf(u); // backward prefetch of one unit
      });
      if (stage) {
        gathered = gatheredAll;
        buffers = 0;
      }
      const a = acts[s]!;
      left -= a.saved;
      const unit = inner(s);
      push('backward', s, unit, segLabel(segs[s]!, 'backward') + tag, {
        state,
        shardGrads,
        gathered,
        gatherBuffers: buffers,
        activations: left + a.saved + inFlight + retained,
        // Recomputation rebuilds what was not kept: the whole block under full checkpointing.
        working: a.transient + (a.kind === 'full' ? a.full : a.kind === 'selective' ? a.full - a.saved : 0),
        gradients: grads + rsBuffer,
        logits: lossOthers,
        optimizer: 0,
      });
      if (frozenBlock[s] && a.kind === 'full') {
        retained += a.saved + (retainedBlocks > 0 ? a.saved : 0);
        retainedBlocks++;
      }
      // Post-backward of the units that start here: reshard, free the previous reduce-scatter input, copy the
      // unsharded gradients into this unit's reduce-scatter input (reduce dtype), then free them.
      e.units.forEach((u, i) => {
        const sp = spans[i];
        if (!sp || sp[0] !== s || done.has(i)) return;
        done.add(i);
        // A unit that owns no parameters has no post-backward at all (no FlatParamHandle / FSDPParamGroup).
        if (u.params === 0) return;
        if (stage) {
          // A pipeline micro-batch: no reshard and no reduce-scatter; the gradients go into the unit's
          // accumulator (made by the first micro-batch's cast to the reduce dtype, added to by the next ones).
          const made = first ? accumulatorOf(u) : 0;
          push('backward', s, u, `${u.name}: gradients accumulated${tag}`, {
            state,
            shardGrads,
            gathered,
            gatherBuffers: 0,
            activations: left + inFlight + retained,
            working: 0,
            gradients: grads + made,
            logits: lossOthers,
            optimizer: 0,
          });
          acc += made;
          return;
        }
        // FSDP2's `foreach_reduce` copies the gradients into one reduce-dtype reduce-scatter input of W padded
        // shards (`torch.empty((world_size * padded_shard_numel,))`), kept until the
        // next unit's post-backward (`comm_ctx.reduce_scatter_state`). FSDP1's `_reduce_grad` reduce-scatters the
        // FlatParameter's gradient itself, cast to the reduce dtype first when that differs, and frees it when
        // the hook returns.
        const rsInput = fsdp1
          ? reduceBytes !== computeBytes
            ? u.reduceScatterNumel * reduceBytes
            : 0
          : u.reduceScatterNumel * reduceBytes;
        gathered -= gatheredOf(u);
        // The reduce-scatter output becomes this GPU's gradient shard (added into the kept one when accumulating:
        // FSDP2's `sharded_param.grad += ...`, FSDP1's `_accumulate_sharded_grad`).
        if (!gradsKept) shardGrads += shardGradsOf(u);
        push(
          'backward',
          s,
          u,
          `${u.name}: reduce-scatter`,
          {
            state,
            shardGrads,
            gathered,
            gatherBuffers: 0,
            activations: left + retained,
            working: 0,
            // Still alive: every unit's unsharded gradients in backward and this unit's reduce-scatter input; the
            // previous unit's reduce-scatter input is released first.
            gradients: grads + rsInput,
            logits: 0,
            optimizer: 0,
          },
          fsdp1 ? rsInput : 0,
        );
        if (inBackward) shardGrads -= shardGradsOf(u);
        rsBuffer = fsdp1 ? 0 : rsInput;
      });
    }
  };
  backward(others, accumulated, !stage?.steady, '');
  if (stage) {
    // Without a steady phase the first backward makes the accumulators; the next micro-batch's backward runs
    // with them full and one micro-batch fewer in flight.
    if (!stage.steady && stage.microbatches > 1)
      backward(
        Math.max(0, stage.inFlight - 2) * savedPerMicroBatch,
        stageAccumulators,
        false,
        ' (the next micro-batch)',
      );
    // The step's one reduce-scatter (`perform_reduce_grad`): each unit's accumulator copied into its
    // reduce-scatter input while the others wait, then resharded.
    const largestInput = e.units.reduce(
      (m, u, i) => (spans[i] && u.params > 0 ? Math.max(m, u.reduceScatterNumel * reduceBytes) : m),
      0,
    );
    push('backward', 0, undefined, 'reduce-scatter of the accumulated gradients', {
      state,
      shardGrads,
      gathered: gatheredAll,
      gatherBuffers: 0,
      activations: 0,
      working: 0,
      gradients: stageAccumulators + largestInput,
      logits: 0,
      optimizer: 0,
    });
  }

  // Optimizer step: the foreach implementation (PyTorch's default on CUDA) computes the denominators of all
  // trainable parameters at once (`_multi_tensor_adam`: `_foreach_sqrt(exp_avg_sqs)`), a temporary of the
  // second moments' size and dtype. The for-loop one works a parameter at a
  // time (a negligible temporary) and the fused kernel needs none. bitsandbytes' optimizers (8-bit and paged) step
  // a parameter at a time with their own kernels (`Optimizer8bit.step` calls `update_step` per parameter,
  // `F.optimizer_update_8bit_blockwise` / `optimizer_update_32bit`): no foreach temporary.
  const bitsandbytes = setup.optimizer === 'adam8bit' || setup.pagedOptimizer;
  const sqrtTemp =
    setup.optimizerImpl === 'foreach' && !bitsandbytes && !inBackward
      ? e.units.reduce(
          (sum, u) => sum + (u.offload ? 0 : u.trainableShardNumel * DTYPE_BYTES[setup.masterDtype]),
          0,
        )
      : 0;
  push('optimizer', -1, undefined, inBackward ? 'optimizer step (done in backward)' : 'optimizer step', {
    state,
    shardGrads: inBackward ? 0 : allShardGrads,
    gathered: 0,
    gatherBuffers: 0,
    activations: 0,
    working: 0,
    gradients: inBackward ? 0 : unownedGrads,
    logits: 0,
    optimizer: setup.optimizer === 'sgd' || setup.optimizer === 'adafactor' ? 0 : sqrtTemp,
  });

  let peakIdx = 0;
  events.forEach((ev, i) => {
    if (ev.total > events[peakIdx]!.total) peakIdx = i;
  });
  const perUnit: Record<string, number> = {};
  for (const ev of events)
    if (ev.unit && ev.phase !== 'optimizer') perUnit[ev.unit] = Math.max(perUnit[ev.unit] ?? 0, ev.total);
  const p = events[peakIdx]!;
  const blocks = acts.filter((_, i) => segs[i]!.kind === 'block');
  const recomputeFraction = blocks.length
    ? blocks.reduce((s, a) => s + a.recompute, 0) / blocks.length / 3
    : 0;
  const pools = { compute: 0, gather: 0, reduce: 0 };
  for (const ev of events) {
    pools.compute = Math.max(pools.compute, ev.total - ev.streams.gather - ev.streams.reduce);
    pools.gather = Math.max(pools.gather, ev.streams.gather);
    pools.reduce = Math.max(pools.reduce, ev.streams.reduce);
  }
  return {
    events,
    pools,
    peak: {
      bytes: p.total,
      at: { unit: p.unit, phase: p.phase },
      event: peakIdx,
      live: p.live,
    },
    perUnit,
    activationBytes,
    recomputeFraction,
    notes,
  };
}

function segLabel(s: Segment, phase: 'forward' | 'backward'): string {
  const what =
    s.kind === 'block' ? `block ${s.blockIndex}` : s.kind === 'head' ? 'embedding' : 'final norm and head';
  return `${phase} ${what}`;
}
