/**
 * The estimate of one plan: the mesh, then per unit its shard, what it gathers and when it is freed, its
 * collectives and their time; then per GPU the persistent state, host memory, the traffic of a step and how much
 * of it hides behind compute; then the step's timeline, its peak and the fit. Pure: the same input gives the same
 * estimate. Every term is explained in docs/estimator.md, with the PyTorch function it follows.
 */
import { count } from '../vocabulary/words';
import { findGpu, findLink, type Link, type Gpu } from '../hardware/catalog';
import { fmtBytes, fmtCount } from '../vocabulary/bytes';
import { isFloat, tensorBytes, type DType } from '../vocabulary/dtypes';
import { countBufferBytes, countParams, outermostOfClass, walk, type ModuleNode } from '../model/tree';
import { float8Tree } from '../model/float8';
import { tensorParallelTree } from '../model/tensorParallel';
import { expertParallelTree } from '../model/expertParallel';
import type { ArchShape } from '../model/hf';
import { addTraffic, linkLoads, scaleTraffic, transfersHide } from './collectives';
import { activeParams, attentionFlops, recomputedShares } from './compute';
import { recomputeOf } from './activations';
import { fitAll, fitOn, reservedBytes, reserveOn } from './fit';
import { colocatedFit, colocatedFitAll, colocatedPhases } from './colocated';
import { COMPILED_LOSS, COMPILED_MODEL_AND_LOSS, FULL_LENGTH, setupBounds, uncountedOf } from './bounds';
import { hostPerNode } from './host';
import { fsdpMesh, lossParallelOf, type Mesh } from './mesh';
import { badReshardNotes, residencyOf, rootClampNotes } from './residency';
import {
  bytesOf,
  flatShardNumel,
  groupRanks,
  groupSums,
  optimizerBytes,
  ownedStateBytes,
  shardNumel,
  shardRows,
} from './shards';
import { simulate } from './timeline';
import { pipelined } from './pipelined';
import type {
  Estimate,
  EstimateInput,
  Figure,
  LinkLoad,
  ParamGroup,
  Plan,
  StageRun,
  Term,
  Traffic,
  Unit,
  UnitEstimate,
} from './types';
import { assignParameters, type Ownership } from './units';
import { dtypeWords, optimizerWords, peakFigure } from './words';
import type { TrainingSetup } from '../inputs/table';

/** Each tree's expert-parallel share by degree: what-if runs estimate one model at many world sizes. */
const EXPERT_TREES = new WeakMap<ModuleNode, Map<number, ReturnType<typeof expertParallelTree>>>();

function expertParallelOf(root: ModuleNode, ep: number): ReturnType<typeof expertParallelTree> {
  let byDegree = EXPERT_TREES.get(root);
  if (!byDegree) EXPERT_TREES.set(root, (byDegree = new Map()));
  let t = byDegree.get(ep);
  if (!t) byDegree.set(ep, (t = expertParallelTree(root, ep)));
  return t;
}

/** What every unit's figures are computed from. */
interface StepContext {
  setup: TrainingSetup;
  plan: Plan;
  gpu: Gpu;
  mesh: Mesh;
  fsdp1: boolean;
  noShard: boolean;
  /** SHARD_GRAD_OP: every unit stays gathered from forward to backward. */
  keepAll: boolean;
  gatherDtype: DType;
  reduceDtype: DType;
  shardLink: Link;
  replicaLink: Link | null;
  /** Bytes per second a link carries at the assumed efficiency. */
  bw(l: Link): number;
  /** FLOP/s at the assumed utilisation. */
  flops: number;
  tokens: number;
}

/** The dtype of a unit's FSDP1 FlatParameter: its floating-point parameters' one dtype, else the master dtype. */
function flatDtypeOf(groups: ParamGroup[], master: DType): DType {
  const floats = new Set(groups.filter((g) => isFloat(g.dtype)).map((g) => g.dtype));
  return floats.size === 1 ? [...floats][0]! : master;
}

/** One unit's shard, gather, residency, collectives and times per micro-batch. */
function unitEstimate(u: Unit, ctx: StepContext, recompute: number, input: EstimateInput): UnitEstimate {
  const { setup, fsdp1, noShard } = ctx;
  const N = ctx.mesh.worldSize;
  const W = ctx.mesh.shardGroup;
  const R = ctx.mesh.replicas;
  const ag = bytesOf(ctx.gatherDtype);
  const rd = bytesOf(ctx.reduceDtype);
  // FSDP1 flattens a unit's parameters into one FlatParameter of their common dtype (`FlatParamHandle`
  // `_validate_tensors_to_flatten` requires one): a unit of frozen weights kept in bf16 beside fp32 master weights
  // elsewhere is a bf16 FlatParameter.
  const flatDtype = fsdp1 ? flatDtypeOf(u.groups, setup.masterDtype) : setup.masterDtype;
  const master = bytesOf(flatDtype);
  const all = () => true;
  const trainable = (g: ParamGroup) => g.trainable;
  const sharded = !noShard && W > 1;
  const numelW = fsdp1 ? flatShardNumel(u.groups, W, all, flatDtype) : shardNumel(u.groups, W, all);
  const paramShard = fsdp1
    ? numelW * master
    : u.groups.reduce(
        (s, g) => s + g.count * tensorBytes(shardRows(g.dim0, groupRanks(g, W)) * g.rest, g.dtype),
        0,
      );
  const trainableW = fsdp1 ? flatShardNumel(u.groups, W, trainable) : shardNumel(u.groups, W, trainable);
  // An FSDP1 FlatParameter holding frozen and trainable parameters (`use_orig_params=True`; without it FSDP1
  // refuses the mix) has one gradient the size of the whole FlatParameter, zeros where frozen: its unsharded
  // gradient, reduce-scatter and gradient shard are full size (PyTorch's FSDP notes: "the gradient memory usage
  // will be higher than expected"). The optimizer still holds state for the trainable parameters only.
  const mixedFlat = fsdp1 && u.trainableParams > 0 && u.trainableParams < u.params;
  const trainW = mixedFlat ? numelW : trainableW;
  // The FlatParameter's own elements (packed storage counted as stored), padded to W when sharded.
  const flatNumel = sharded ? numelW * W : flatShardNumel(u.groups, 1, all, flatDtype);
  const gradShard = trainW * master;
  const optShard = optimizerBytes(setup.optimizer, u.groups, W, fsdp1, setup.masterDtype);
  const residency = residencyOf(u, ctx.plan, ctx.keepAll, W, setup.torchVersion);
  // Mixed precision casts floating-point parameters to the all-gather dtype; quantised ones travel as stored, and
  // a tensor subclass's (torchao's Float8 weights) in the dtype its `fsdp_pre_all_gather` returns.
  const gatherSize = (g: ParamGroup, numel: number) =>
    g.gathersAs
      ? tensorBytes(numel, g.gathersAs)
      : isFloat(g.dtype)
        ? numel * ag
        : tensorBytes(numel, g.dtype);
  // What a gathered unit holds: FSDP2 all-gathers W padded shards and keeps them as the unsharded storage
  // (`FSDPParam._init_sharded_param` chunks dim 0 into pieces of ceil(dim0 / W) rows, `init_all_gather_outputs`
  // allocates W of them; the unsharded parameter is a view of its own size). FSDP1's FlatParameter is padded
  // at its end to a multiple of W (`FlatParamHandle.flatten_tensors_into_flat_param`).
  const unpadded = u.groups.reduce((s, g) => s + g.count * gatherSize(g, g.dim0 * g.rest), 0);
  // FSDP1 casts its whole FlatParameter to param_dtype and gathers it (`_use_low_precision_shard`).
  const gathered = !sharded ? unpadded : fsdp1 ? numelW * W * ag : groupSums(u.groups, W, gatherSize).padded;
  // Ring accounting: each rank receives the other W-1 (padded) shards of an all-gather and sends as much in a
  // reduce-scatter; an all-reduce moves twice that. (Experts under expert parallelism: over their own W / E_p.)
  const ringGather = (ranks: number) =>
    fsdp1
      ? (ranks - 1) * flatShardNumel(u.groups, ranks, all, flatDtype) * ag
      : groupSums(u.groups, ranks, gatherSize).ring;
  const agBytes = noShard ? 0 : ringGather(W);
  const bwdAg =
    noShard || residency.kind === 'keep'
      ? 0
      : residency.kind === 'slice'
        ? ringGather(residency.ranks)
        : agBytes;
  const rsBytes = noShard
    ? 0
    : fsdp1
      ? (W - 1) * trainW * rd
      : groupSums(u.groups, W, (_, n) => n * rd, trainable).ring;
  const arBytes = noShard
    ? N > 1
      ? 2 * ((N - 1) / N) * (mixedFlat ? flatNumel : u.trainableParams) * rd
      : 0
    : R > 1
      ? 2 * ((R - 1) / R) * trainW * rd
      : 0;
  // A unit that owns no parameters gets no FlatParamHandle in FSDP1 (`_init_param_handle_from_params` returns
  // on an empty list, and `_unshard` / `_reshard` return without a handle) and no FSDPParamGroup in FSDP2
  // (`fully_shard` creates one only `if params`): it runs no collectives at all.
  const hasParams = u.params > 0;
  const traffic = {
    allGatherBytes: agBytes + bwdAg,
    forwardAllGatherBytes: agBytes,
    backwardAllGatherBytes: bwdAg,
    reduceScatterBytes: rsBytes,
    allReduceBytes: arBytes,
    collectives: {
      allGather: noShard || W === 1 || !hasParams ? 0 : 1 + (residency.kind === 'keep' ? 0 : 1),
      reduceScatter: !noShard && W > 1 && u.trainableParams > 0 ? 1 : 0,
      allReduce: arBytes > 0 ? 1 : 0,
    },
  };
  // Under tensor parallelism each GPU computes its share of the heads' scores (its parameters are already 1/T).
  const fwdFlops =
    2 * activeParams(u, input.model.shape) * ctx.tokens +
    attentionFlops(u, input.model.shape, setup) / ctx.mesh.tp / setup.contextParallel;
  const { bw, shardLink } = ctx;
  return {
    index: u.index,
    name: u.name,
    modules: u.modules,
    classNames: u.classNames,
    isRoot: u.isRoot,
    params: u.params,
    trainableParams: u.trainableParams,
    gatheredBytes: gathered,
    shard: { params: paramShard, grads: gradShard, optimizer: optShard },
    reduceScatterNumel: sharded
      ? fsdp1
        ? trainW * W
        : groupSums(u.groups, W, (_, n) => n, trainable).padded
      : mixedFlat
        ? flatNumel
        : u.trainableParams,
    gradientNumel: mixedFlat ? flatNumel : u.trainableParams,
    trainableShardNumel: trainableW,
    residency,
    offload: u.offload,
    trainableDtypes: [...new Set(u.groups.filter((g) => g.trainable).map((g) => g.dtype))],
    gradsAt: u.gradsAt,
    traffic,
    time: {
      forwardGather: agBytes / bw(shardLink),
      backwardGather: bwdAg / bw(shardLink),
      reduceScatter: rsBytes / bw(shardLink),
      allReduce: arBytes / bw(ctx.replicaLink ?? shardLink),
      forwardCompute: fwdFlops / ctx.flops,
      backwardCompute: ((2 + recompute) * fwdFlops) / ctx.flops,
    },
    origin: u.origin,
    site: u.site,
  };
}

const sum = (us: UnitEstimate[], f: (u: UnitEstimate) => number) => us.reduce((s, u) => s + f(u), 0);

/** What stays on each GPU through a step, and what CPU offload keeps in host memory instead. */
function stateFigures(
  units: UnitEstimate[],
  own: Ownership,
  ctx: StepContext,
  bufferBytes: number,
  quantState = false,
): {
  persistent: Figure;
  host: Figure;
  unownedBytes: number;
  unownedTrainable: number;
  unownedGradBytes: number;
  unownedLargestGradBytes: number;
  unownedOptimizerBytes: number;
} {
  const { setup, fsdp1 } = ctx;
  const W = ctx.mesh.shardGroup;
  const master = bytesOf(setup.masterDtype);
  // Parameters outside every unit stay whole on every rank, with whole gradients and optimizer state.
  const unownedParamBytes = own.unowned.groups.reduce(
    (s, g) => s + g.count * g.dim0 * g.rest * bytesOf(g.dtype),
    0,
  );
  const unownedTrainable = own.unowned.groups.reduce(
    (s, g) => s + (g.trainable ? g.count * g.dim0 * g.rest : 0),
    0,
  );
  const unownedOptimizerBytes = optimizerBytes(
    setup.optimizer,
    own.unowned.groups,
    1,
    false,
    setup.masterDtype,
  );
  const unownedBytes = unownedParamBytes + unownedTrainable * master + unownedOptimizerBytes;
  const onGpu = units.filter((u) => !u.offload);
  const offloaded = units.filter((u) => u.offload);
  // Under expert parallelism each GPU holds 1/E_p of the experts, which FSDP2 shards over W / E_p.
  const ep = own.units.reduce((m, u) => Math.max(m, ...u.groups.map((g) => g.expertParallel ?? 1)), 1);
  // The expert parameters this GPU's units hold (its 1/E_p of each layer's experts).
  const expertsHeld = own.units
    .filter((u) => !u.offload)
    .reduce(
      (n, u) =>
        n + u.groups.reduce((m, g) => m + ((g.expertParallel ?? 1) > 1 ? g.dim0 * g.rest * g.count : 0), 0),
      0,
    );
  const shardWords = fsdp1
    ? `FlatParameter per unit padded to a multiple of ${W}`
    : W === 1
      ? 'one GPU: nothing is split'
      : `each parameter's dim 0 split ${W} ways, padded${ep > 1 ? (W / ep > 1 ? `; the experts over ${Math.floor(W / ep)}` : '; the experts whole') : ''}`;
  const terms: Term[] = [
    {
      name: 'sharded parameters',
      bytes: sum(onGpu, (u) => u.shard.params),
      formula: `${
        ep > 1
          ? `${fmtCount(sum(onGpu, (u) => u.params) - expertsHeld)} params / ${count(W, 'GPU')} + ${fmtCount(expertsHeld)} expert params (this GPU's 1/${ep} of the experts) / ${count(Math.max(1, Math.floor(W / ep)), 'GPU')}`
          : `${fmtCount(sum(onGpu, (u) => u.params))} params / ${count(W, 'GPU')}`
      } x ${dtypeWords(
        own.units.filter((u) => !u.offload),
        setup.masterDtype,
      )} (${shardWords})`,
    },
    {
      name: 'sharded gradients',
      bytes: sum(onGpu, (u) => u.shard.grads),
      formula: `${fmtCount(sum(onGpu, (u) => u.trainableParams))} trainable params / ${W} x ${master} B (${setup.masterDtype})${
        onGpu.some((u) => u.gradientNumel > u.trainableParams)
          ? '; an FSDP1 unit mixing frozen and trainable parameters has a gradient of its whole FlatParameter'
          : ''
      }${setup.optimizerInBackward && !fsdp1 ? "; with the optimizer in backward, each unit's only during its own post-backward" : ''}`,
    },
    {
      name: 'optimizer state',
      bytes: sum(onGpu, (u) => u.shard.optimizer),
      formula: `${optimizerWords(setup)} on each GPU's shard`,
    },
  ];
  // Without units (no FSDP: a single-device job) every parameter is outside a unit: the model whole, with its gradients and
  // optimizer state, and none of the sharded terms.
  const plain = units.length === 0;
  if (plain) terms.splice(0, terms.length);
  if (own.unowned.params > 0)
    terms.push(
      plain
        ? {
            name: 'parameters, gradients and optimizer state',
            bytes: unownedBytes,
            formula: `${fmtCount(own.unowned.params)} params whole on the GPU (no FSDP)`,
          }
        : {
            name: 'replicated parameters outside every unit',
            bytes: unownedBytes,
            formula: `${fmtCount(own.unowned.params)} params whole on every GPU: parameters, gradients and optimizer state`,
          },
    );
  if (bufferBytes > 0)
    terms.push({
      name: 'buffers',
      bytes: bufferBytes,
      formula: quantState
        ? "module buffers and bitsandbytes' quantisation state (absmax per 64 values), never sharded"
        : 'module buffers, never sharded',
    });
  const persistent: Figure = {
    bytes: terms.reduce((s, t) => s + t.bytes, 0),
    terms: terms.filter((t) => t.bytes > 0 || t.name !== 'buffers'),
  };
  const hostTerms: Term[] = offloaded.length
    ? [
        {
          name: 'offloaded sharded parameters',
          bytes: sum(offloaded, (u) => u.shard.params),
          formula: 'CPU offload: sharded parameters in host memory',
        },
        {
          name: 'offloaded gradients',
          bytes: sum(offloaded, (u) => u.shard.grads),
          formula: 'sharded gradients in host memory',
        },
        {
          name: 'offloaded optimizer state',
          bytes: sum(offloaded, (u) => u.shard.optimizer),
          formula: 'optimizer steps on the CPU',
        },
      ]
    : [];
  const host: Figure = { bytes: hostTerms.reduce((s, t) => s + t.bytes, 0), terms: hostTerms };
  const largest = own.unowned.groups.reduce((m, g) => (g.trainable ? Math.max(m, g.dim0 * g.rest) : m), 0);
  return {
    persistent,
    host,
    unownedBytes,
    unownedTrainable,
    unownedGradBytes: unownedTrainable * master,
    unownedLargestGradBytes: largest * master,
    unownedOptimizerBytes,
  };
}

/** The traffic of one optimizer step: every micro-batch gathers; reductions run each one, or the last only. */
function stepTraffic(
  units: UnitEstimate[],
  ctx: StepContext,
  owned: Unit[],
): { perMicroBatch: Traffic; perStep: Traffic; figure: Figure } {
  const { setup, noShard } = ctx;
  const { worldSize: N, shardGroup: W, replicas: R } = ctx.mesh;
  const perMicroBatch = addTraffic(units.map((u) => u.traffic));
  const K = setup.gradAccum;
  const perStep: Traffic = setup.syncEveryMicroBatch
    ? scaleTraffic(perMicroBatch, K)
    : {
        // Gradients accumulate unsharded; only the last micro-batch reduces.
        allGatherBytes: perMicroBatch.allGatherBytes * K,
        reduceScatterBytes: perMicroBatch.reduceScatterBytes,
        allReduceBytes: perMicroBatch.allReduceBytes,
        collectives: {
          allGather: perMicroBatch.collectives.allGather * K,
          reduceScatter: perMicroBatch.collectives.reduceScatter,
          allReduce: perMicroBatch.collectives.allReduce,
        },
      };
  const ag = bytesOf(ctx.gatherDtype);
  const rd = bytesOf(ctx.reduceDtype);
  const kept = units.filter((u) => u.residency.kind === 'keep').length;
  const frac = `${W - 1}/${W}`;
  // Weights all-gathered in float8 (their groups' own gather dtype).
  const f8 = owned.reduce(
    (n, u) => n + u.groups.reduce((m, g) => m + (g.gathersAs ? g.count * g.dim0 * g.rest : 0), 0),
    0,
  );
  const times = K > 1 ? ` x ${K} micro-batches` : '';
  const terms: Term[] = [
    {
      name: 'forward all-gathers',
      bytes: sum(units, (u) => u.traffic.forwardAllGatherBytes) * K,
      formula: `${count(units.length, 'unit')}: ${frac} x ${fmtCount(sum(units, (u) => u.params) - f8)} params x ${ag} B (${ctx.gatherDtype})${f8 ? ` + ${fmtCount(f8)} Float8 weights x 1 B` : ''}${times}`,
    },
    {
      name: 'backward all-gathers',
      bytes: sum(units, (u) => u.traffic.backwardAllGatherBytes) * K,
      formula: `again for the ${units.length - kept} units freed after forward${kept ? ` (${kept} kept gathered: none)` : ''}${times}`,
    },
    {
      name: 'reduce-scatters',
      bytes: perStep.reduceScatterBytes,
      formula: `${frac} x ${fmtCount(sum(units, (u) => u.trainableParams))} trainable params x ${rd} B (${ctx.reduceDtype})${setup.syncEveryMicroBatch ? times : ' once per step'}`,
    },
  ];
  if (perStep.allReduceBytes > 0)
    terms.push({
      name: noShard ? 'all-reduces' : 'all-reduces across replicas',
      bytes: perStep.allReduceBytes,
      formula: noShard
        ? `2 x ${N - 1}/${N} x trainable params x ${rd} B`
        : `2 x ${R - 1}/${R} x the trainable shard (1/${W}) x ${rd} B`,
    });
  const figure = { bytes: terms.reduce((s, t) => s + t.bytes, 0), terms: terms.filter((t) => t.bytes > 0) };
  return { perMicroBatch, perStep, figure };
}

/**
 * The collectives of the parallelisms around FSDP, per optimizer step, each on its group's link and in the compute
 * stream (none hides behind compute).
 *
 * Tensor parallelism, under torchtitan's plan with sequence parallelism: in each block's forward two all-gathers
 * (the attention and MLP inputs, to `Replicate`) and two reduce-scatters (the o and down projections' outputs, to
 * the sequence shards), their transposes in backward, the forward ones again for a recomputed block; the
 * embedding reduce-scatters its output and the head all-gathers its input, with their transposes (loss parallel's
 * all-reduces of b·s values are left out). Each moves (T-1)/T of b·s·h elements per GPU. torchtitan's async TP,
 * off by default, would overlap them.
 *
 * Context parallelism, as PyTorch's ring attention with the all-gather rotation runs it: per block, K and V
 * all-gathered in forward, again in backward with their gradients reduce-scattered, and again for a recomputed
 * block; each moves (C-1)/C of b·s x the K/V width (1/T of it under tensor parallelism) per GPU.
 */
function modelParallelLoads(
  ctx: StepContext,
  shape: ArchShape | undefined,
  tp: number,
  stage?: { blocks: number[]; run: StageRun },
  experts?: { degree: number; layers: number[] },
): (LinkLoad & { formula: string })[] {
  const { setup } = ctx;
  const C = setup.contextParallel;
  const ep = experts?.degree ?? 1;
  if (!shape || (tp <= 1 && C <= 1 && ep <= 1)) return [];
  const e = bytesOf(ctx.gatherDtype);
  // On a pipeline rank: its own blocks, the embedding and head only where it holds them, for each of the step's
  // micro-batches.
  const K = setup.gradAccum * (stage?.run.microbatches ?? 1);
  const blocks = stage ? stage.blocks : Array.from({ length: shape.layers }, (_, i) => i);
  const layers = blocks.length;
  const ends = stage ? (stage.run.first ? 2 : 0) + (stage.run.last ? 2 : 0) : 4;
  const tokens = setup.microBatch * setup.seqLen;
  let recomputed = 0;
  for (const i of blocks) recomputed += recomputeOf(setup.checkpointing, i);
  const times = K > 1 ? `, x ${K} micro-batches` : '';
  const load = (role: LinkLoad['role'], span: number, collectives: number, each: number, formula: string) => {
    const link = findLink(span <= setup.gpusPerNode ? ctx.gpu.intraNode : ctx.gpu.interNode)!;
    const bytes = collectives * each;
    return { link, role, collectives, bytes, seconds: bytes / ctx.bw(link), formula };
  };
  const out: (LinkLoad & { formula: string })[] = [];
  if (tp > 1 && setup.tpPlan === 'transformers') {
    // Transformers' plan, without sequence parallelism: each row-wise projection (o, down) all-reduces its output
    // in forward, each column-wise group's input gradient (q/k/v, gate/up) is all-reduced in backward, again in
    // a recomputed block's forward; the head all-gathers its vocabulary-sharded logits (`colwise_gather_output`)
    // and all-reduces its input's gradient. An all-reduce moves 2 (T-1)/T of b·s·h per GPU.
    const n = (4 * layers + 2 * recomputed + (stage && !stage.run.last ? 0 : 1)) * K;
    const allReduce = ((2 * (tp - 1)) / tp) * tokens * shape.hidden * e;
    const logits = ((tp - 1) / tp) * tokens * shape.vocab * e;
    const l = load('tensor parallel', tp, n, allReduce, '');
    const heads = stage && !stage.run.last ? 0 : K;
    l.collectives += heads;
    l.bytes += logits * heads;
    l.seconds = l.bytes / ctx.bw(l.link);
    l.formula =
      `${n} all-reduces per step (4 per block${recomputed ? ', 2 per recomputed block' : ''}, 1 for the head${times}) x 2 x ${tp - 1}/${tp} x b·s·h x ${e} B` +
      ` + ${K} all-gather${K > 1 ? 's' : ''} of the logits x ${tp - 1}/${tp} x b·s·V x ${e} B`;
    out.push(l);
  } else if (tp > 1) {
    const n = (ends + 8 * layers + 4 * recomputed) * K;
    const activations = load(
      'tensor parallel',
      tp,
      n,
      ((tp - 1) / tp) * tokens * shape.hidden * e,
      `${n} per step (8 per block${recomputed ? `, 4 per recomputed block` : ''}${ends ? `, ${ends} for the ${ends === 4 ? 'embedding and head' : stage?.run.first ? 'embedding' : 'head'}` : ''}${times}) x ${tp - 1}/${tp} x b·s·h x ${e} B`,
    );
    // Without loss parallel the head's vocabulary-sharded logits are all-gathered whole in forward (their gradient
    // is sliced back locally: `Redistribute` from `Replicate` to `Shard` moves nothing).
    if (!lossParallelOf(setup) && (!stage || stage.run.last)) {
      const logits = ((tp - 1) / tp) * tokens * shape.vocab * e * K;
      activations.collectives += K;
      activations.bytes += logits;
      activations.seconds = activations.bytes / ctx.bw(activations.link);
      activations.formula += ` + ${K} all-gather${K > 1 ? 's' : ''} of the logits (no loss parallel) x ${tp - 1}/${tp} x b·s·V x ${e} B`;
    }
    out.push(activations);
  }
  if (C > 1 && setup.cpMethod === 'ulysses') {
    // Ulysses (verl/utils/ulysses.py: `gather_seq_scatter_heads` before attention, `gather_heads_scatter_seq`
    // after, each an all-to-all and its reverse in backward, again in a recomputed block): per block q, k, v and
    // the output, each GPU sending (C-1)/C of its b·s/C x width.
    const width = (2 * shape.hidden + 2 * shape.kvHeads * shape.headDim) / Math.max(1, tp);
    const n = (8 * layers + 4 * recomputed) * K;
    const blocks = (2 * layers + recomputed) * K;
    const l = load('context parallel', C * Math.max(1, tp), n, 0, '');
    l.bytes = blocks * ((C - 1) / C) * (tokens / C) * width * e;
    l.seconds = l.bytes / ctx.bw(l.link);
    l.formula = `${n} all-to-alls per step (q, k, v and the output per block in forward and in backward${recomputed ? ', again per recomputed block' : ''}${times}) moving ${C - 1}/${C} x b·s/${C} x (2h + 2 kv width = ${width}) x ${e} B per block pass`;
    out.push(l);
  } else if (C > 1) {
    const kv = (shape.kvHeads * shape.headDim) / Math.max(1, tp);
    const n = (6 * layers + 2 * recomputed) * K;
    out.push(
      load(
        'context parallel',
        C * Math.max(1, tp),
        n,
        ((C - 1) / C) * tokens * kv * e,
        `${n} per step (K and V: 2 all-gathers per block in forward, 2 and 2 reduce-scatters in backward${recomputed ? ', 2 per recomputed block' : ''}${times}) x ${C - 1}/${C} x b·s x ${kv} x ${e} B`,
      ),
    );
  }
  if (ep > 1 && experts) {
    // Expert parallelism, as torchtitan's token dispatcher runs it (`AllToAllTokenDispatcher`: `dispatch` and
    // `combine` each an `all_to_all_single` of the routed tokens, their autograd reverses in backward, again in a
    // recomputed block): per MoE layer 4 all-to-alls of b·s·k token rows of h, (E_p - 1)/E_p of which leave the
    // GPU when routing is balanced, on the E_p consecutive GPUs of the group (`ep` innermost in the mesh).
    let recomputedMoe = 0;
    for (const i of experts.layers) recomputedMoe += recomputeOf(setup.checkpointing, i);
    const n = (4 * experts.layers.length + 2 * recomputedMoe) * K;
    const rows = (tokens / C) * shape.expertsPerToken;
    out.push(
      load(
        'expert parallel',
        ep,
        n,
        ((ep - 1) / ep) * rows * shape.hidden * e,
        `${n} all-to-alls per step (dispatch and combine in forward and backward per MoE layer${recomputedMoe ? ', again per recomputed one' : ''}${times}) x ${ep - 1}/${ep} x b·s·k x h x ${e} B, routing taken as balanced`,
      ),
    );
  }
  return out;
}

/** Seconds per step on the links and of compute, and the transfer time that cannot hide behind compute. */
function stepTimes(units: UnitEstimate[], setup: TrainingSetup) {
  const K = setup.gradAccum;
  // Gathers run every micro-batch; reductions every micro-batch, or only on the last one when gradient sync is
  // skipped in between (no_sync / set_requires_gradient_sync(False)), as the per-step traffic counts them.
  const reductions = setup.syncEveryMicroBatch ? K : 1;
  const gatherPerMb = sum(units, (u) => u.time.forwardGather + u.time.backwardGather);
  const reducePerMb = sum(units, (u) => u.time.reduceScatter + u.time.allReduce);
  const computePerMb = sum(units, (u) => u.time.forwardCompute + u.time.backwardCompute);
  // Forward: unit i+1's all-gather runs under unit i's compute; backward likewise, with reduce-scatters too.
  const exposedOf = (withReductions: boolean) => {
    let x = units[0] ? units[0].time.forwardGather : 0;
    for (let i = 0; i + 1 < units.length; i++)
      x += Math.max(0, units[i + 1]!.time.forwardGather - units[i]!.time.forwardCompute);
    for (const u of units)
      x += Math.max(
        0,
        u.time.backwardGather +
          (withReductions ? u.time.reduceScatter + u.time.allReduce : 0) -
          u.time.backwardCompute,
      );
    return x;
  };
  return {
    commSeconds: gatherPerMb * K + reducePerMb * reductions,
    computeSeconds: computePerMb * K,
    exposedSeconds: exposedOf(true) * reductions + exposedOf(false) * (K - reductions),
  };
}

/** What Float8 training changes in the figures, and what it leaves out. */
function float8Notes(mode: TrainingSetup['float8'], api: Plan['api'], converted: number): string[] {
  if (mode === 'off') return [];
  if (!converted)
    return ['Float8 training: no Linear layer qualifies (both dims multiples of 16, not skipped)'];
  const layers = `${converted} Linear layer${converted === 1 ? '' : 's'}`;
  return [
    mode === 'all-gather' && api === 'fsdp2'
      ? `Float8 training of ${layers}: their weights are all-gathered and held gathered in float8 (1 B)`
      : `Float8 training of ${layers}: their weights are all-gathered in the parameter dtype${mode === 'all-gather' ? ' (float8 all-gather is FSDP2 only)' : ''}`,
    "Float8's casts while a matmul runs (float8 copies of its input, weight and output gradient) are not counted",
  ];
}

/**
 * Computes persistent memory per GPU, communication per step, the step's timeline and the fit for a plan; under
 * pipeline parallelism, those of the pipeline's rank with the highest peak (`pipelined.ts`).
 * Throws MeshError for a mesh PyTorch refuses to build.
 */
export function estimate(whole: EstimateInput, ownership?: Ownership): Estimate {
  if (whole.setup.pipelineParallel > 1)
    return pipelined(whole, (input, stage) => estimateMesh(input, undefined, stage));
  return estimateMesh(whole, ownership);
}

/**
 * The estimate of one FSDP mesh; on a pipeline rank (`stage`), of the rank's stages beside its micro-batches
 * (`pipelined` calls it once per kind of rank).
 */
export function estimateMesh(whole: EstimateInput, ownership?: Ownership, stage?: StageRun): Estimate {
  const { setup, plan } = whole;
  const notes = [...plan.notes];
  // Tensor parallelism first: each GPU holds its TP shard of the tree, which FSDP then shards (a plan that does
  // not apply leaves the figures FSDP's alone, and no verdict rests on them).
  // Float8 converts Linear layers before any parallelism (torchtitan's model converters run on the whole model);
  // its float8 all-gather is FSDP2's extension (`fsdp_pre_all_gather`), which FSDP1 never calls.
  const float8 = setup.float8 === 'all-gather' && plan.api === 'fsdp1' ? ('linear' as const) : setup.float8;
  const f8 = float8Tree(whole.model.root, float8, setup.float8Skip);
  notes.push(...float8Notes(setup.float8, plan.api, f8.converted));
  const tp = tensorParallelTree(f8.root, whole.model.shape, setup.tensorParallel, setup.tpPlan);
  const tpProblem = 'problem' in tp ? tp.problem : null;
  // Expert parallelism places 1/E_p of each layer's experts on each GPU (FSDP2 only: FSDP1 has no placement of
  // its own for them).
  const afterTp = 'root' in tp ? tp.root : f8.root;
  const mesh = fsdpMesh(setup, plan.strategy);
  // torchtitan's `ParallelDims._validate`: `ep` divides dp_shard x cp x tp.
  const epGroup = mesh.shardGroup * mesh.tp;
  const ep =
    setup.expertParallel > 1
      ? plan.api === 'fsdp1'
        ? { problem: 'FSDP1 places no experts' }
        : epGroup % setup.expertParallel !== 0
          ? { problem: `it does not divide the ${epGroup} GPUs of a shard group` }
          : expertParallelOf(afterTp, setup.expertParallel)
      : { root: afterTp };
  const epProblem = 'problem' in ep ? ep.problem : null;
  const held = 'root' in ep ? ep.root : afterTp;
  const input: EstimateInput =
    held !== whole.model.root ? { ...whole, model: { ...whole.model, root: held } } : whole;
  if (input !== whole) ownership = undefined;
  // The tree each GPU holds is a tensor-parallel split of the model (not only Float8's re-typed copy).
  const split = 'root' in tp && tp.root !== f8.root;
  // Or its experts' share of it.
  const experts = held !== afterTp;
  const gpu = findGpu(setup.gpu) ?? findGpu('h100-sxm-80gb')!;
  const own = ownership ?? assignParameters(input.model.root, plan, setup.masterDtype);
  const { worldSize: N, shardGroup: W, replicas: R } = mesh;
  const noShard = plan.strategy === 'NO_SHARD';
  const keepAll = plan.strategy === 'SHARD_GRAD_OP' || plan.strategy === '_HYBRID_SHARD_ZERO2';
  const gatherDtype = setup.paramDtype ?? setup.masterDtype;
  const ctx: StepContext = {
    setup,
    plan,
    gpu,
    mesh,
    fsdp1: plan.api === 'fsdp1',
    noShard,
    keepAll,
    gatherDtype,
    reduceDtype: setup.reduceDtype ?? gatherDtype,
    // FSDP's ranks are T apart (tensor parallelism innermost): a shard group stays in a node while W x T GPUs do.
    shardLink: findLink(W * mesh.tp <= setup.gpusPerNode ? gpu.intraNode : gpu.interNode)!,
    replicaLink: R > 1 ? findLink(N <= setup.gpusPerNode ? gpu.intraNode : gpu.interNode)! : null,
    bw: (l) => l.perDirectionGBs * 1e9 * setup.linkEfficiency,
    flops: gpu.bf16Tflops * 1e12 * setup.mfu,
    // Each GPU computes its 1/C of the sequence under context parallelism.
    tokens: (setup.microBatch * setup.seqLen) / setup.contextParallel,
  };
  // Backward recomputes the checkpointed blocks' forward: a share of each unit's forward FLOPs.
  const recompute = recomputedShares(own.units, input.model.root, input.model.shape, setup.checkpointing);
  const units = own.units.map((u, i) => unitEstimate(u, ctx, recompute[i]!, input));
  if (plan.api === 'fsdp2' && !keepAll && !noShard)
    notes.push(...badReshardNotes(own.units, W), ...rootClampNotes(own.units, setup.torchVersion));
  if (own.unowned.params > 0)
    notes.push(
      `${fmtCount(own.unowned.params)} parameters are in no FSDP unit (${own.unowned.modules.slice(0, 4).join(', ')}${own.unowned.modules.length > 4 ? ', …' : ''}): replicated on every GPU, and FSDP never reduces their gradients across ranks`,
    );
  const bufferBytes = countBufferBytes(input.model.root);
  const state = stateFigures(units, own, ctx, bufferBytes, hasQuantState(input.model.root));
  const traffic = stepTraffic(units, ctx, own.units);
  const times = stepTimes(units, setup);
  const parallelLoads = modelParallelLoads(
    ctx,
    input.model.shape,
    split ? setup.tensorParallel : 1,
    stage && input.model.shape
      ? {
          run: stage,
          blocks: outermostOfClass(input.model.root, input.model.shape.blockClass).map((b) => Number(b.name)),
        }
      : undefined,
    experts && input.model.shape
      ? {
          degree: setup.expertParallel,
          // The blocks this GPU holds whose MLP is a layer of experts.
          layers: outermostOfClass(input.model.root, input.model.shape.blockClass)
            .filter((b) => [...walk(b)].some((m) => m.name === 'experts'))
            .map((b) => Number(b.name)),
        }
      : undefined,
  );
  for (const l of parallelLoads) {
    traffic.figure.terms.push({ name: `${l.role} collectives`, bytes: l.bytes, formula: l.formula });
    traffic.figure.bytes += l.bytes;
  }
  const totalParams = sum(units, (u) => u.params) + own.unowned.params;
  const trainableParams = sum(units, (u) => u.trainableParams) + state.unownedTrainable;
  const ag = bytesOf(ctx.gatherDtype);
  const rd = bytesOf(ctx.reduceDtype);
  const K = setup.gradAccum;

  const compiled = setupBounds(setup);
  const result: Estimate = {
    gaps: input.model.gaps ?? [],
    uncounted: uncountedOf(input.model.shape),
    unmodelled: [
      ...(input.unmodelled ?? []),
      ...compiled.unmodelled,
      ...(tpProblem ? [`tensor parallelism (degree ${setup.tensorParallel}): ${tpProblem}`] : []),
      ...(epProblem ? [`expert parallelism (degree ${setup.expertParallel}; ${epProblem})`] : []),
      // `context_parallel` replaces SDPA's kernels with ring attention; eager attention's scores are not split.
      ...(setup.contextParallel > 1 && setup.attention === 'eager'
        ? ['context parallelism with eager attention (ring attention runs SDPA kernels)']
        : []),
      ...(split && setup.checkpointing === 'selective'
        ? ['selective checkpointing under tensor parallelism (what the op policy keeps of split tensors)']
        : []),
    ],
    overcounted: [...(input.overcounted ?? []), ...compiled.overcounted],
    undecided: input.undecided ?? [],
    model: {
      name: input.model.name,
      // With tensor parallelism the units hold one GPU's share: the model's own counts come from the whole tree.
      params: split || experts ? countParams(whole.model.root) : totalParams,
      trainableParams: split || experts ? countParams(whole.model.root, (p) => p.trainable) : trainableParams,
      bufferBytes,
      source: input.model.source,
    },
    plan: {
      api: plan.api,
      strategy: plan.strategy,
      units: units.length,
      source: plan.source,
      notes: plan.notes,
    },
    mesh,
    units,
    unowned: {
      params: own.unowned.params,
      bytes: state.unownedBytes,
      gradBytes: state.unownedGradBytes,
      largestGradBytes: state.unownedLargestGradBytes,
      modules: own.unowned.modules,
    },
    perGpu: {
      persistentBytes: state.persistent.bytes,
      persistent: state.persistent,
      modelStateBytes: state.persistent.bytes - bufferBytes + state.host.bytes,
      hostBytes: state.host.bytes,
      host: state.host,
      peakBytes: state.persistent.bytes,
      peakAt: null,
      peak: state.persistent,
      peakForwardBackwardBytes: state.persistent.bytes,
      reservedBytes: 0,
    },
    modelStateTotalBytes: ownedStateBytes(own, setup),
    comms: {
      perMicroBatch: traffic.perMicroBatch,
      perStep: traffic.perStep,
      traffic: traffic.figure,
      // ZeRO-3's accounting: parameters all-gathered twice and gradients reduce-scattered once per step.
      zero3ReferenceBytes: ((W - 1) / W) * totalParams * (2 * ag + rd) * K,
      // Plain data parallelism: one all-reduce of all gradients per step.
      ddpAllReduceBytes: 2 * ((N - 1) / N) * trainableParams * rd * K,
      ddpDtype: ctx.reduceDtype,
      gatherDtype: ctx.gatherDtype,
      reduceDtype: ctx.reduceDtype,
      shardLink: ctx.shardLink,
      replicaLink: ctx.replicaLink,
      links: [
        ...linkLoads(traffic.perStep, ctx.shardLink, ctx.replicaLink, ctx.bw),
        ...parallelLoads.map(({ formula: _, ...l }) => l),
      ],
      ...times,
      transfersHide: transfersHide(times),
    },
    gpu,
    setup,
    assumptions: input.assumptions,
    notes,
    timeline: null,
    fit: [],
    targetFit: fitOn(0, gpu),
    fitReserve: reserveOn(gpu.id, input.calibrations),
    ...(input.calibrations?.length ? { calibrations: input.calibrations } : {}),
    hostPerNode: { bytes: 0, terms: [] },
  };
  result.hostPerNode = hostPerNode(result, input.loading, input.stateDict);
  const timeline = simulate(
    result,
    input.model.root,
    input.model.shape,
    split ? setup.tensorParallel : 1,
    stage,
  );
  result.timeline = timeline;
  if (timeline) {
    result.perGpu.peakBytes = timeline.peak.bytes;
    result.perGpu.peakAt = timeline.peak.at;
    result.perGpu.peak = peakFigure(timeline.peak.live, setup, plan.api === 'none');
    result.perGpu.peakForwardBackwardBytes = Math.max(
      ...timeline.events.filter((ev) => ev.phase !== 'optimizer').map((ev) => ev.total),
    );
    notes.push(...timeline.notes);
  } else {
    notes.push(
      'activations are not modelled for this model: the peak shown is the persistent state plus two gathered units',
    );
    const largest = Math.max(0, ...units.map((u) => u.gatheredBytes));
    result.perGpu.peakBytes = state.persistent.bytes + 2 * largest;
    result.perGpu.peak = {
      bytes: result.perGpu.peakBytes,
      terms: [
        ...state.persistent.terms,
        {
          name: 'two gathered units',
          bytes: 2 * largest,
          formula: 'the running unit and the prefetched one',
        },
      ],
    };
  }
  // bitsandbytes' paged optimizers allocate their state with `cudaMallocManaged` (`get_paged` in
  // bitsandbytes/functional.py, for every state of 100,000 elements or more: `Optimizer8bit.get_state_buffer`):
  // outside PyTorch's allocator, resident while the GPU has room, moved to the CPU by the driver when it has not.
  // The figures keep it on the GPU; a peak that fits only without it is no verdict.
  // (With the state of parameters outside every unit, all of it on a single-device job.)
  const paged = setup.pagedOptimizer
    ? sum(units, (u) => (u.offload ? 0 : u.shard.optimizer)) + state.unownedOptimizerBytes
    : 0;
  if (paged > 0) {
    result.perGpu.pagedOptimizerBytes = paged;
    result.overcounted.push(
      `bitsandbytes' paged optimizer state (${fmtBytes(paged)} per GPU, in CUDA unified memory, which the driver moves to the CPU when the GPU runs short)`,
    );
  }
  // What shares the GPUs and is not counted (a rollout engine's CUDA graphs, a critic's own passes).
  if (input.colocated) result.uncounted.push(...input.colocated.uncounted, ...input.colocated.notEstimated);
  // Parts not counted make a fit that holds undecided; parts counted beyond what the job keeps, one that fails;
  // parallelism not modelled (or both bounds at once), any verdict.
  const lower = result.gaps.length > 0 || result.uncounted.length > 0;
  const upper = result.overcounted.length > 0;
  const partial =
    result.unmodelled.length || result.undecided.length || (lower && upper) ? 'any' : upper ? 'upper' : lower;
  result.perGpu.reservedBytes = reservedBytes(result.perGpu.peakBytes, timeline?.pools, result.fitReserve);
  const floor = certainPeakBytes(result);
  if (input.colocated) {
    // The step shares its GPUs with other phases: the fit is the worst phase's.
    const col = colocatedPhases(result, input.colocated, input.model.shape);
    result.colocated = col;
    result.fit = colocatedFitAll(result, col, partial, floor);
    result.targetFit = colocatedFit(result, col, gpu, partial, floor);
    return result;
  }
  result.fit = fitAll(result.perGpu.peakBytes, partial, floor, input.calibrations);
  result.targetFit = fitOn(result.perGpu.peakBytes, gpu, partial, floor, input.calibrations);
  return result;
}

/**
 * The peak the step reaches whatever is overcounted: activations (offloaded ones, what Liger's kernels or a
 * compiled model keep less of), saved for backward or the running block's, the logits and the loss's temporaries
 * under a compiled loss, and a paged optimizer's state, which may leave the GPU; the rest of each event is held
 * anyway.
 */
export function certainPeakBytes(e: Estimate): number {
  const paged = e.perGpu.pagedOptimizerBytes ?? 0;
  // A compiled loss keeps less of the logits than eager's loss; a compiled model, Liger's kernels or offloading,
  // less of the activations.
  const logits =
    e.overcounted.includes(COMPILED_LOSS) ||
    e.overcounted.includes(COMPILED_MODEL_AND_LOSS) ||
    e.overcounted.some((o) => o.startsWith(FULL_LENGTH));
  const activations = e.overcounted.some((o) => !/paged optimizer/.test(o) && o !== COMPILED_LOSS);
  return e.timeline
    ? Math.max(
        ...e.timeline.events.map(
          (ev) =>
            ev.total -
            (activations ? ev.live.activations + ev.live.working : 0) -
            (logits ? ev.live.logits : 0) -
            paged,
        ),
      )
    : e.perGpu.persistentBytes - paged;
}

/** Whether bitsandbytes' quantisation state sits among the buffers (model/finetune.ts adds it per NF4 weight). */
function hasQuantState(root: ModuleNode): boolean {
  const stack = [root];
  while (stack.length) {
    const m = stack.pop()!;
    if (m.buffers.some((b) => b.name === 'weight.quant_state')) return true;
    stack.push(...m.children);
  }
  return false;
}
