import type { ShardingStrategyName } from '../vocabulary/fsdp';
import { findGpu, findLink, GPUS, gpuBytes, type Gpu, type Link } from '../hardware/catalog';
import type { ArchShape } from '../model/hf';
import { recomputeOf } from './activations';
import { countBufferBytes, countParams, type ModuleNode } from '../model/tree';
import { DTYPE_BYTES, isFloat, tensorBytes, type DType } from '../vocabulary/dtypes';
import { fmtBytes, fmtCount, fmtParams } from '../vocabulary/bytes';
import type { Assumption, Source } from '../vocabulary/source';
import type { CheckpointMode } from '../inputs/parse';
import type { Figure, ParamGroup, Plan, Term, Traffic, Unit, WrapSite } from './types';
import type { TrainingSetup } from '../inputs/table';
import { FIT_RESERVE, requiredBytes, simulate, type LiveSet, type Phase, type Timeline } from './timeline';
import { assignParameters, type Ownership } from './units';

export interface FitResult {
  gpu: string;
  name: string;
  fits: boolean;
  /** Usable memory minus the peak, allocator overhead and CUDA context; negative when it does not fit. */
  headroomBytes: number;
  memoryBytes: number;
}

/** Everything an estimate is computed from. */
export interface EstimateInput {
  model: { name: string; root: ModuleNode; shape?: ArchShape; source: Source };
  plan: Plan;
  setup: TrainingSetup;
  assumptions: Assumption[];
  /**
   * How the script loads weights: `from_pretrained` materialises the whole model in every process first, or in
   * local rank 0 only (`rank0Only`: Accelerate's cpu_ram_efficient_loading, the others start on the meta device).
   */
  loading?: {
    fromPretrained: boolean;
    meta: boolean;
    dtype: DType | null;
    line?: string;
    rank0Only?: { detail: string };
  };
  /** How checkpoints are saved, when the configuration says: a full state dict gathered on rank 0, or shards. */
  stateDict?: { kind: 'full' | 'sharded'; detail: string };
}

/**
 * Host memory per node: the larger of the loading spike (before sharding) and every process's offloaded state
 * plus a checkpoint being saved (during training).
 */
function hostPerNode(
  e: Estimate,
  loading: EstimateInput['loading'],
  stateDict?: EstimateInput['stateDict'],
): Figure {
  const G = Math.min(e.setup.gpusPerNode, e.mesh.worldSize);
  const terms: Term[] = [];
  if (e.perGpu.hostBytes > 0)
    terms.push({
      name: 'CPU offload',
      bytes: e.perGpu.hostBytes * G,
      formula: `${G} processes x ${fmtBytes(e.perGpu.hostBytes)} of offloaded state`,
    });
  if (loading?.fromPretrained && !loading.meta && loading.rank0Only) {
    const dt = loading.dtype ?? e.setup.masterDtype;
    const each = e.model.params * bytesOf(dt);
    terms.push({
      name: 'loading (from_pretrained on local rank 0 only)',
      bytes: each,
      formula: `one process per node materialises the whole model in ${dt} (${fmtBytes(each)}); the other ${G - 1} start on the meta device and receive their shards (${loading.rank0Only.detail})`,
    });
  } else if (loading?.fromPretrained && !loading.meta) {
    const dt = loading.dtype ?? e.setup.masterDtype;
    const each = e.model.params * bytesOf(dt);
    terms.push({
      name: 'loading (from_pretrained on every rank)',
      bytes: each * G,
      formula: `${G} processes each materialise the whole model in ${dt} (${fmtBytes(each)}) before sharding, when nothing is offloaded yet${loading.line ? ` (${loading.line})` : ''}; load on the meta device or on rank 0 only to avoid it`,
    });
  }
  if (stateDict?.kind === 'sharded') {
    const W = e.mesh.worldSize;
    const shard = Math.ceil(e.model.params / W) * bytesOf(e.setup.masterDtype);
    terms.push({
      name: 'saving a sharded state dict',
      bytes: shard * G,
      formula: `${G} processes each copy their 1/${W} shard (${fmtBytes(shard)}) to host memory; no full state dict is gathered (${stateDict.detail})`,
    });
  } else
    terms.push({
      name: 'saving a full state dict on rank 0',
      bytes: e.model.params * bytesOf(e.setup.masterDtype),
      formula: `${fmtCount(e.model.params)} params x ${bytesOf(e.setup.masterDtype)} B gathered on one rank (CPU-offloaded full state dict); sharded checkpoints avoid it`,
    });
  // `from_pretrained` on every rank runs before fully_shard exists, so nothing is offloaded yet; saving a
  // checkpoint happens during training, beside the offloaded state. The node needs the larger of the two moments.
  const hostTerm = (name: string) => terms.find((t) => t.name.startsWith(name))?.bytes ?? 0;
  return {
    bytes: Math.max(hostTerm('loading'), hostTerm('CPU offload') + hostTerm('saving')),
    terms,
  };
}

/** How one unit is held between its forward and its backward. */
export type Residency = { kind: 'reshard' } | { kind: 'keep' } | { kind: 'slice'; ranks: number };

export interface UnitEstimate {
  index: number;
  name: string;
  modules: string[];
  classNames: string[];
  isRoot: boolean;
  params: number;
  trainableParams: number;
  /** The unit's parameters unsharded, in the all-gather dtype: what a forward or backward of it holds. */
  gatheredBytes: number;
  /** This rank's shard of the unit: parameters, gradients and optimizer state (on the GPU unless offloaded). */
  shard: { params: number; grads: number; optimizer: number };
  residency: Residency;
  offload: boolean;
  /** Original dtypes of the unit's trainable parameters (FSDP2 requires one). */
  trainableDtypes: DType[];
  /** Trainable parameters by the module whose backward first produces their gradient (see `Unit.gradsAt`). */
  gradsAt: Record<string, number>;
  /** Collectives of this unit in one micro-batch. */
  traffic: Traffic & { forwardAllGatherBytes: number; backwardAllGatherBytes: number };
  /** Seconds on the link and of compute, per micro-batch. */
  time: {
    forwardGather: number;
    backwardGather: number;
    reduceScatter: number;
    allReduce: number;
    forwardCompute: number;
    backwardCompute: number;
  };
  origin: string;
  site: WrapSite | null;
}

/** What one link carries in a step. */
export interface LinkLoad {
  link: Link;
  /** Who talks over it: the shard group (all-gathers, reduce-scatters) or the replicas (all-reduces). */
  role: 'shard group' | 'replicas';
  collectives: number;
  bytes: number;
  seconds: number;
}

export interface Estimate {
  model: { name: string; params: number; trainableParams: number; bufferBytes: number; source: Source };
  plan: { api: Plan['api']; strategy: ShardingStrategyName; units: number; source: Source; notes: string[] };
  mesh: {
    worldSize: number;
    shardGroup: number;
    replicas: number;
    nodes: number;
    gpusPerNode: number;
    hsdp: boolean;
  };
  units: UnitEstimate[];
  /** Parameters in no unit: replicated, with full gradients and optimizer state on every rank. */
  unowned: { params: number; bytes: number; modules: string[] };
  perGpu: {
    /** Everything that stays on the GPU through a step: sharded state, replicated leftovers, buffers. */
    persistentBytes: number;
    persistent: Figure;
    /** Parameters, gradients and optimizer state only (ZeRO's "model state"), on this GPU. */
    modelStateBytes: number;
    hostBytes: number;
    host: Figure;
    /** The largest live set over the step (allocated bytes), where it happens and what it is made of. */
    peakBytes: number;
    peakAt: { unit: string; phase: Phase } | null;
    peak: Figure;
    /** The largest live set of forward and backward alone (without the optimizer step). */
    peakForwardBackwardBytes: number;
  };
  /** The live set over the step, event by event (null when activations cannot be modelled). */
  timeline: Timeline | null;
  /** Whether the peak fits each GPU of the catalog, with the allocator overhead and CUDA context added. */
  fit: FitResult[];
  /** Host (CPU) memory of one node: offloaded state, and the spikes of loading and of saving a full checkpoint. */
  hostPerNode: Figure;
  /** Model state of the whole model, unsharded: what one GPU of plain data parallelism holds. */
  modelStateTotalBytes: number;
  comms: {
    perMicroBatch: Traffic;
    perStep: Traffic;
    /** The per-step traffic by collective and phase, with its formula. */
    traffic: Figure;
    /** ZeRO-3's accounting: parameters all-gathered twice and gradients reduce-scattered once per step. */
    zero3ReferenceBytes: number;
    /** Plain data parallelism: one all-reduce of all gradients per step. */
    ddpAllReduceBytes: number;
    ddpDtype: DType;
    gatherDtype: DType;
    reduceDtype: DType;
    /** Links the shard group's and the replicas' collectives cross. */
    shardLink: Link;
    replicaLink: Link | null;
    /** Per optimizer step, each link's collectives, bytes per GPU and seconds at the assumed efficiency. */
    links: LinkLoad[];
    /** Per optimizer step, seconds: time on the link if nothing overlapped, and compute. */
    commSeconds: number;
    computeSeconds: number;
    /** Communication that cannot hide behind compute (forward gathers vs forward compute, backward likewise). */
    exposedSeconds: number;
  };
  gpu: Gpu;
  setup: TrainingSetup;
  assumptions: Assumption[];
  notes: string[];
}

const bytesOf = (d: DType) => DTYPE_BYTES[d];

/** Rows each rank holds of a dim-0 of `dim0` rows split `ranks` ways (FSDP pads the last shard). */
export function shardRows(dim0: number, ranks: number): number {
  return Math.ceil(dim0 / ranks);
}

/** Elements per rank of a group of parameters sharded `ranks` ways: FSDP2 pads each parameter on dim 0. */
function shardNumel(
  groups: ParamGroup[],
  ranks: number,
  filter: (g: ParamGroup) => boolean = () => true,
): number {
  let n = 0;
  for (const g of groups) if (filter(g)) n += g.count * shardRows(g.dim0, ranks) * g.rest;
  return n;
}

/** FSDP1 flattens a unit into one FlatParameter padded to a multiple of the shard group. */
function flatShardNumel(
  groups: ParamGroup[],
  ranks: number,
  filter: (g: ParamGroup) => boolean = () => true,
): number {
  let n = 0;
  for (const g of groups) if (filter(g)) n += g.count * g.dim0 * g.rest;
  return Math.ceil(n / ranks);
}

/** Optimizer-state bytes for `numel` elements of a parameter shard of `rows` x `rest`. */
function optimizerBytes(
  family: TrainingSetup['optimizer'],
  groups: ParamGroup[],
  ranks: number,
  fsdp1: boolean,
  master: DType,
): number {
  const trainable = (g: ParamGroup) => g.trainable;
  const numel = fsdp1 ? flatShardNumel(groups, ranks, trainable) : shardNumel(groups, ranks, trainable);
  const b = bytesOf(master);
  switch (family) {
    case 'adam':
    case 'adamw':
      return 2 * numel * b;
    case 'sgd-momentum':
      return numel * b;
    case 'sgd':
      return 0;
    case 'adam8bit':
      // Two 8-bit states (block-wise quantisation constants are under 1% and not counted).
      return 2 * numel;
    case 'adafactor': {
      // Factored second moment: a row and a column vector per matrix (of the local shard), full for vectors.
      let n = 0;
      for (const g of groups) {
        if (!g.trainable) continue;
        const rows = shardRows(g.dim0, ranks);
        n += g.rest > 1 ? g.count * (rows + g.rest) : g.count * rows;
      }
      return n * 4;
    }
  }
}

/** Computes persistent memory per GPU and communication per step for a plan. */
export function estimate(input: EstimateInput, ownership?: Ownership): Estimate {
  const { setup, plan } = input;
  const notes = [...plan.notes];
  const gpu = findGpu(setup.gpu) ?? findGpu('h100-sxm-80gb')!;
  const own = ownership ?? assignParameters(input.model.root, plan, setup.masterDtype);
  const N = setup.worldSize;
  const fsdp1 = plan.api === 'fsdp1';
  const strategy = plan.strategy;
  const noShard = strategy === 'NO_SHARD';
  const hybrid = strategy === 'HYBRID_SHARD' || strategy === '_HYBRID_SHARD_ZERO2' || setup.replicas > 1;
  const R = noShard ? 1 : hybrid ? Math.max(1, setup.replicas) : 1;
  const W = noShard ? 1 : Math.max(1, Math.floor(N / R));
  const gatherDtype = setup.paramDtype ?? setup.masterDtype;
  const reduceDtype = setup.reduceDtype ?? gatherDtype;
  const ag = bytesOf(gatherDtype);
  const rd = bytesOf(reduceDtype);
  const master = bytesOf(setup.masterDtype);
  const keepAll = strategy === 'SHARD_GRAD_OP' || strategy === '_HYBRID_SHARD_ZERO2';

  const shardLink = findLink(W <= setup.gpusPerNode ? gpu.intraNode : gpu.interNode)!;
  const replicaLink = R > 1 ? findLink(N <= setup.gpusPerNode ? gpu.intraNode : gpu.interNode)! : null;
  const bw = (l: Link) => l.perDirectionGBs * 1e9 * setup.linkEfficiency;
  const flops = gpu.bf16Tflops * 1e12 * setup.mfu;
  const tokens = setup.microBatch * setup.seqLen;
  // Backward recomputes the checkpointed blocks' forward: a share of each unit's forward FLOPs.
  const recompute = recomputedShares(own.units, input.model.root, input.model.shape, setup.checkpointing);

  const units: UnitEstimate[] = own.units.map((u, unitIndex) => {
    const all = () => true;
    const trainable = (g: ParamGroup) => g.trainable;
    const numelW = fsdp1 ? flatShardNumel(u.groups, W, all) : shardNumel(u.groups, W, all);
    const paramShard = fsdp1
      ? numelW * master
      : u.groups.reduce((s, g) => s + g.count * tensorBytes(shardRows(g.dim0, W) * g.rest, g.dtype), 0);
    const trainW = fsdp1 ? flatShardNumel(u.groups, W, trainable) : shardNumel(u.groups, W, trainable);
    const gradShard = trainW * master;
    const optShard = optimizerBytes(setup.optimizer, u.groups, W, fsdp1, setup.masterDtype);
    const residency = residencyOf(u, plan, keepAll, W);
    // Mixed precision casts floating-point parameters to the all-gather dtype; quantised ones travel as stored.
    const gatherSize = (g: ParamGroup, numel: number) =>
      isFloat(g.dtype) ? numel * ag : tensorBytes(numel, g.dtype);
    const gathered = u.groups.reduce((s, g) => s + g.count * gatherSize(g, g.dim0 * g.rest), 0);
    const shardGather = (ranks: number) =>
      fsdp1
        ? flatShardNumel(u.groups, ranks) * ag
        : u.groups.reduce((s, g) => s + g.count * gatherSize(g, shardRows(g.dim0, ranks) * g.rest), 0);
    // Ring accounting: each rank receives the other W-1 (padded) shards of an all-gather and sends as much in a
    // reduce-scatter; an all-reduce moves twice that.
    const agBytes = noShard ? 0 : (W - 1) * shardGather(W);
    const bwdAg =
      noShard || residency.kind === 'keep'
        ? 0
        : residency.kind === 'slice'
          ? (residency.ranks - 1) * shardGather(residency.ranks)
          : agBytes;
    const rsBytes = noShard ? 0 : (W - 1) * trainW * rd;
    const arBytes = noShard
      ? N > 1
        ? 2 * ((N - 1) / N) * u.trainableParams * rd
        : 0
      : R > 1
        ? 2 * ((R - 1) / R) * trainW * rd
        : 0;
    const hasTrainable = u.trainableParams > 0;
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
        reduceScatter: !noShard && W > 1 && hasTrainable ? 1 : 0,
        allReduce: arBytes > 0 ? 1 : 0,
      },
    };
    const active = activeParams(u, input.model.shape);
    const attn = attentionFlops(u, input.model.shape, setup);
    const fwdFlops = 2 * active * tokens + attn;
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
      residency,
      offload: u.offload,
      trainableDtypes: [...new Set(u.groups.filter((g) => g.trainable).map((g) => g.dtype))],
      gradsAt: u.gradsAt,
      traffic,
      time: {
        forwardGather: agBytes / bw(shardLink),
        backwardGather: bwdAg / bw(shardLink),
        reduceScatter: rsBytes / bw(shardLink),
        allReduce: arBytes / bw(replicaLink ?? shardLink),
        forwardCompute: fwdFlops / flops,
        backwardCompute: ((2 + recompute[unitIndex]!) * fwdFlops) / flops,
      },
      origin: u.origin,
      site: u.site,
    };
  });

  // Parameters outside every unit stay whole on every rank, with whole gradients and optimizer state.
  const unownedParamBytes = own.unowned.groups.reduce(
    (s, g) => s + g.count * g.dim0 * g.rest * bytesOf(g.dtype),
    0,
  );
  const unownedTrainable = own.unowned.groups.reduce(
    (s, g) => s + (g.trainable ? g.count * g.dim0 * g.rest : 0),
    0,
  );
  const unownedGrads = unownedTrainable * master;
  const unownedOpt = optimizerBytes(setup.optimizer, own.unowned.groups, 1, false, setup.masterDtype);
  if (plan.api === 'fsdp2' && !keepAll && !noShard) notes.push(...badReshardNotes(own.units, W));
  if (own.unowned.params > 0)
    notes.push(
      `${fmtCount(own.unowned.params)} parameters are in no FSDP unit (${own.unowned.modules.slice(0, 4).join(', ')}${own.unowned.modules.length > 4 ? ', …' : ''}): replicated on every GPU, and FSDP never reduces their gradients across ranks`,
    );

  const onGpu = units.filter((u) => !u.offload);
  const offloaded = units.filter((u) => u.offload);
  const sum = (us: UnitEstimate[], f: (u: UnitEstimate) => number) => us.reduce((s, u) => s + f(u), 0);
  const bufferBytes = countBufferBytes(input.model.root);
  const shardWords = fsdp1
    ? `FlatParameter per unit padded to a multiple of ${W}`
    : `each parameter's dim 0 split ${W} ways, padded`;
  const persistentTerms: Term[] = [
    {
      name: 'sharded parameters',
      bytes: sum(onGpu, (u) => u.shard.params),
      formula: `${fmtCount(sum(onGpu, (u) => u.params))} params / ${W} GPUs x ${dtypeWords(
        own.units.filter((u) => !u.offload),
        setup.masterDtype,
      )} (${shardWords})`,
    },
    {
      name: 'sharded gradients',
      bytes: sum(onGpu, (u) => u.shard.grads),
      formula: `${fmtCount(sum(onGpu, (u) => u.trainableParams))} trainable params / ${W} x ${master} B (${setup.masterDtype})`,
    },
    {
      name: 'optimizer state',
      bytes: sum(onGpu, (u) => u.shard.optimizer),
      formula: `${optimizerWords(setup)} on each GPU's shard`,
    },
  ];
  if (own.unowned.params > 0)
    persistentTerms.push({
      name: 'replicated parameters outside every unit',
      bytes: unownedParamBytes + unownedGrads + unownedOpt,
      formula: `${fmtCount(own.unowned.params)} params whole on every GPU: parameters, gradients and optimizer state`,
    });
  if (bufferBytes > 0)
    persistentTerms.push({ name: 'buffers', bytes: bufferBytes, formula: 'module buffers, never sharded' });
  const persistent: Figure = {
    bytes: persistentTerms.reduce((s, t) => s + t.bytes, 0),
    terms: persistentTerms.filter((t) => t.bytes > 0 || t.name !== 'buffers'),
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
  const kept = units.filter((u) => u.residency.kind === 'keep').length;
  const frac = `${W - 1}/${W}`;
  const times = K > 1 ? ` x ${K} micro-batches` : '';
  const trafficTerms: Term[] = [
    {
      name: 'forward all-gathers',
      bytes: sum(units, (u) => u.traffic.forwardAllGatherBytes) * K,
      formula: `${units.length} units: ${frac} x ${fmtCount(sum(units, (u) => u.params))} params x ${ag} B (${gatherDtype})${times}`,
    },
    {
      name: 'backward all-gathers',
      bytes: sum(units, (u) => u.traffic.backwardAllGatherBytes) * K,
      formula: `again for the ${units.length - kept} units freed after forward${kept ? ` (${kept} kept gathered: none)` : ''}${times}`,
    },
    {
      name: 'reduce-scatters',
      bytes: perStep.reduceScatterBytes,
      formula: `${frac} x ${fmtCount(sum(units, (u) => u.trainableParams))} trainable params x ${rd} B (${reduceDtype})${setup.syncEveryMicroBatch ? times : ' once per step'}`,
    },
  ];
  if (perStep.allReduceBytes > 0)
    trafficTerms.push({
      name: noShard ? 'all-reduces' : 'all-reduces across replicas',
      bytes: perStep.allReduceBytes,
      formula: noShard
        ? `2 x ${N - 1}/${N} x trainable params x ${rd} B`
        : `2 x ${R - 1}/${R} x the trainable shard (1/${W}) x ${rd} B`,
    });
  const totalParams = sum(units, (u) => u.params) + own.unowned.params;
  const trainableParams = sum(units, (u) => u.trainableParams) + unownedTrainable;
  const zero3ReferenceBytes = ((W - 1) / W) * totalParams * (2 * ag + rd) * K;
  const ddpAllReduceBytes = 2 * ((N - 1) / N) * trainableParams * rd * K;

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
  const exposedSeconds = exposedOf(true) * reductions + exposedOf(false) * (K - reductions);

  const result: Estimate = {
    model: {
      name: input.model.name,
      params: totalParams,
      trainableParams,
      bufferBytes,
      source: input.model.source,
    },
    plan: { api: plan.api, strategy, units: units.length, source: plan.source, notes: plan.notes },
    mesh: {
      worldSize: N,
      shardGroup: W,
      replicas: R,
      nodes: Math.ceil(N / setup.gpusPerNode),
      gpusPerNode: setup.gpusPerNode,
      hsdp: R > 1,
    },
    units,
    unowned: {
      params: own.unowned.params,
      bytes: unownedParamBytes + unownedGrads + unownedOpt,
      modules: own.unowned.modules,
    },
    perGpu: {
      persistentBytes: persistent.bytes,
      persistent,
      modelStateBytes: persistent.bytes - bufferBytes + host.bytes,
      hostBytes: host.bytes,
      host,
      peakBytes: persistent.bytes,
      peakAt: null,
      peak: persistent,
      peakForwardBackwardBytes: persistent.bytes,
    },
    modelStateTotalBytes: [...own.units.map((u) => u.groups), own.unowned.groups].reduce(
      (s, g) => s + fullStateBytes(g, setup),
      0,
    ),
    comms: {
      perMicroBatch,
      perStep,
      traffic: {
        bytes: trafficTerms.reduce((s, t) => s + t.bytes, 0),
        terms: trafficTerms.filter((t) => t.bytes > 0),
      },
      zero3ReferenceBytes,
      ddpAllReduceBytes,
      ddpDtype: reduceDtype,
      gatherDtype,
      reduceDtype,
      shardLink,
      replicaLink,
      links: linkLoads(perStep, shardLink, replicaLink, bw),
      commSeconds: gatherPerMb * K + reducePerMb * reductions,
      computeSeconds: computePerMb * K,
      exposedSeconds,
    },
    gpu,
    setup,
    assumptions: input.assumptions,
    notes,
    timeline: null,
    fit: [],
    hostPerNode: { bytes: 0, terms: [] },
  };
  result.hostPerNode = hostPerNode(result, input.loading, input.stateDict);
  const timeline = simulate(result, input.model.root, input.model.shape);
  result.timeline = timeline;
  if (timeline) {
    result.perGpu.peakBytes = timeline.peak.bytes;
    result.perGpu.peakAt = timeline.peak.at;
    result.perGpu.peak = peakFigure(timeline.peak.live, setup);
    result.perGpu.peakForwardBackwardBytes = Math.max(
      ...timeline.events.filter((ev) => ev.phase !== 'optimizer').map((ev) => ev.total),
    );
    notes.push(...timeline.notes);
  } else {
    notes.push(
      'activations are not modelled for this model: the peak shown is the persistent state plus two gathered units',
    );
    const largest = Math.max(0, ...units.map((u) => u.gatheredBytes));
    result.perGpu.peakBytes = persistent.bytes + 2 * largest;
    result.perGpu.peak = {
      bytes: result.perGpu.peakBytes,
      terms: [
        ...persistent.terms,
        {
          name: 'two gathered units',
          bytes: 2 * largest,
          formula: 'the running unit and the prefetched one',
        },
      ],
    };
  }
  result.fit = fitAll(result.perGpu.peakBytes);
  return result;
}

/** The peak's composition, by category, with what each means. */
function peakFigure(live: LiveSet, setup: TrainingSetup): Figure {
  const ac =
    typeof setup.checkpointing === 'object' ? `every-${setup.checkpointing.everyN}` : setup.checkpointing;
  const words: Record<keyof LiveSet, [string, string]> = {
    state: [
      'sharded state',
      'parameters, gradients and optimizer state of this GPU (with buffers and replicated leftovers)',
    ],
    gathered: [
      'gathered parameters',
      'units unsharded now: the running one, the root and units kept after forward',
    ],
    gatherBuffers: [
      'all-gather buffers',
      'the prefetched unit (and in FSDP2 forward the current one until the next copy-out)',
    ],
    activations: [
      'saved activations',
      `kept for backward (${ac} checkpointing, micro-batch ${setup.microBatch} x ${setup.seqLen} tokens); not reduced by sharding`,
    ],
    working: [
      'running block',
      "the running block's tensors, rebuilt when checkpointed, and the gradients of its activations",
    ],
    gradients: ['gradient buffers', 'unsharded gradients and reduce-scatter inputs in flight'],
    logits: ['logits and loss', 'b·s·V logits, their fp32 copy and log-softmax, and their gradients'],
    optimizer: ['optimizer step', 'temporaries of the optimizer step'],
  };
  const terms: Term[] = (Object.keys(words) as (keyof LiveSet)[])
    .filter((k) => live[k] > 0)
    .map((k) => ({ name: words[k][0], bytes: live[k], formula: words[k][1] }));
  return { bytes: terms.reduce((s, t) => s + t.bytes, 0), terms };
}

/** The fit of a peak on every GPU of the catalog. */
export function fitAll(peakBytes: number): FitResult[] {
  const need = requiredBytes(peakBytes);
  return GPUS.map((g) => ({
    gpu: g.id,
    name: g.name,
    fits: need <= gpuBytes(g),
    headroomBytes: gpuBytes(g) - need,
    memoryBytes: gpuBytes(g),
  }));
}

export { FIT_RESERVE };

/** Parameters, gradients and optimizer state of parameter groups held whole (one GPU of plain data parallelism). */
function fullStateBytes(groups: ParamGroup[], setup: TrainingSetup): number {
  const params = groups.reduce((s, g) => s + g.count * tensorBytes(g.dim0 * g.rest, g.dtype), 0);
  const grads =
    groups.reduce((s, g) => s + (g.trainable ? g.count * g.dim0 * g.rest : 0), 0) *
    bytesOf(setup.masterDtype);
  return params + grads + optimizerBytes(setup.optimizer, groups, 1, false, setup.masterDtype);
}

/** `4 B (float32)`, or the mix of dtypes when parameters differ (NF4 base weights, a bf16 head). */
function dtypeWords(units: Unit[], master: DType): string {
  const byType = new Map<DType, number>();
  for (const u of units)
    for (const g of u.groups) byType.set(g.dtype, (byType.get(g.dtype) ?? 0) + g.count * g.dim0 * g.rest);
  if (byType.size <= 1) {
    const d = [...byType.keys()][0] ?? master;
    return `${bytesOf(d)} B (${d})`;
  }
  return [...byType.entries()].map(([d, n]) => `${fmtParams(n)} in ${d} (${bytesOf(d)} B)`).join(' + ');
}

/** Whether a unit is freed after forward (and gathered again for backward), kept, or kept as a 1/k slice. */
function residencyOf(u: Unit, plan: Plan, keepAll: boolean, W: number): Residency {
  // SHARD_GRAD_OP (FSDP1) keeps every unit gathered; an FSDP2 plan asked "what if SHARD_GRAD_OP" means
  // reshard_after_forward=False on every unit, the same thing.
  if (keepAll) return { kind: 'keep' };
  if (plan.api === 'fsdp1') return u.isRoot ? { kind: 'keep' } : { kind: 'reshard' };
  const r = u.reshardAfterForward;
  if (r === null) return u.isRoot ? { kind: 'keep' } : { kind: 'reshard' };
  if (r === false) return { kind: 'keep' };
  if (r === true) return { kind: 'reshard' };
  // k = W is True and k = 1 is False (`_get_post_forward_mesh_info`); other values out of 1..W are rejected
  // there, and are modelled as the nearer of the two (see `badReshardNotes`).
  if (r >= W) return { kind: 'reshard' };
  if (r <= 1) return { kind: 'keep' };
  return { kind: 'slice', ranks: r };
}

/**
 * FSDP2 units whose `reshard_after_forward` is an int that is not a factor of the shard group size W: PyTorch's
 * `_get_post_forward_mesh_info` raises `ValueError` ("If passing reshard_after_forward as an int, it should be a
 * factor of W, not k") when `fully_shard` is called, so the script stops before training. Say so, and how the
 * estimate modelled it: a 1/k slice after forward when 1 < k < W, as `True` above W, as `False` below 1.
 */
function badReshardNotes(units: Unit[], W: number): string[] {
  const byK = new Map<number, string[]>();
  for (const u of units) {
    const k = u.reshardAfterForward;
    if (typeof k !== 'number' || (k >= 1 && k <= W && W % k === 0)) continue;
    byK.set(k, [...(byK.get(k) ?? []), u.name]);
  }
  return [...byK].map(([k, names]) => {
    const modelled =
      k > W
        ? 'as reshard_after_forward=True (freed after forward)'
        : k < 1
          ? 'as reshard_after_forward=False (kept gathered until backward)'
          : `as if each rank kept a 1/${k} slice after forward (backward all-gather over ${k} ranks)`;
    const where = `${names.slice(0, 3).join(', ')}${names.length > 3 ? `, … (${names.length} units)` : ''}`;
    return `reshard_after_forward=${k} (${where}) is not a factor of the shard group size ${W}: fully_shard raises ValueError ("it should be a factor of ${W}, not ${k}"), so the script stops before training; estimated ${modelled}. Use a divisor of ${W}, True or False.`;
  });
}

/** Parameters a token passes through: an MoE block's routed experts count for top-k of E. */
function activeParams(u: Unit, shape: ArchShape | undefined): number {
  if (!shape || !shape.experts || !u.classNames.includes(shape.blockClass)) return u.params;
  const expertParams = 3 * shape.hidden * (shape.moeIntermediate || shape.intermediate);
  const blocks = u.modules.length;
  const moeBlocks = Math.min(
    blocks,
    Math.max(0, blocks - (shape.denseLayers && shape.denseLayers < shape.layers ? 0 : 0)),
  );
  const idle = (shape.experts - shape.expertsPerToken) * expertParams * moeBlocks;
  return Math.max(0, u.params - (u.params > idle ? idle : 0));
}

/**
 * The share of each unit's forward that backward recomputes: for every decoder block (in model order, which
 * decides every-N), the innermost unit holding it recomputes `recomputeOf` forward passes of the block's
 * parameters. Embeddings, the final norm and the head are never inside a checkpoint wrapper.
 */
function recomputedShares(
  units: Unit[],
  root: ModuleNode,
  shape: ArchShape | undefined,
  mode: CheckpointMode,
): number[] {
  const shares = units.map(() => 0);
  if (!shape || mode === 'none') return shares;
  let index = 0;
  const visit = (m: ModuleNode) => {
    if (m.className !== shape.blockClass) {
      for (const c of m.children) visit(c);
      return;
    }
    const r = recomputeOf(mode, index++);
    if (!r) return;
    let owner = -1;
    let depth = -1;
    units.forEach((u, i) => {
      for (const p of u.modules)
        if ((p === '' || m.path === p || m.path.startsWith(`${p}.`)) && p.length > depth) {
          owner = i;
          depth = p.length;
        }
    });
    const u = units[owner];
    if (u && u.params > 0) shares[owner]! += (r * countParams(m)) / u.params;
  };
  visit(root);
  return shares.map((x) => Math.min(1, x));
}

/** Attention score and value FLOPs of a block unit in forward (causal: half of 4·b·s²·heads·head_dim). */
function attentionFlops(u: Unit, shape: ArchShape | undefined, setup: TrainingSetup): number {
  if (!shape || !u.classNames.includes(shape.blockClass)) return 0;
  const blocks = u.modules.length;
  return blocks * 2 * setup.microBatch * setup.seqLen * setup.seqLen * shape.heads * shape.headDim;
}

function optimizerWords(s: TrainingSetup): string {
  switch (s.optimizer) {
    case 'adam':
    case 'adamw':
      return `${s.optimizer === 'adam' ? 'Adam' : 'AdamW'}: 2 states x ${bytesOf(s.masterDtype)} B (${s.masterDtype}) per trainable param`;
    case 'sgd-momentum':
      return `SGD with momentum: 1 state x ${bytesOf(s.masterDtype)} B per trainable param`;
    case 'sgd':
      return 'SGD: no state';
    case 'adam8bit':
      return '8-bit Adam: 2 one-byte states per trainable param';
    case 'adafactor':
      return 'Adafactor: factored second moment (a row and a column per matrix), 4 B each';
  }
}

function linkLoads(t: Traffic, shard: Link, replica: Link | null, bw: (l: Link) => number): LinkLoad[] {
  const sharded = t.allGatherBytes + t.reduceScatterBytes;
  const out: LinkLoad[] = [];
  if (sharded > 0 || !replica)
    out.push({
      link: shard,
      role: 'shard group',
      collectives: t.collectives.allGather + t.collectives.reduceScatter,
      bytes: sharded,
      seconds: sharded / bw(shard),
    });
  // Without HSDP, all-reduces (NO_SHARD) run within the one group, over the same link.
  const arLink = replica ?? shard;
  if (t.allReduceBytes > 0) {
    if (!replica && out[0]) {
      out[0].collectives += t.collectives.allReduce;
      out[0].bytes += t.allReduceBytes;
      out[0].seconds += t.allReduceBytes / bw(arLink);
    } else
      out.push({
        link: arLink,
        role: 'replicas',
        collectives: t.collectives.allReduce,
        bytes: t.allReduceBytes,
        seconds: t.allReduceBytes / bw(arLink),
      });
  }
  return out;
}

export function addTraffic(ts: Traffic[]): Traffic {
  const out: Traffic = {
    allGatherBytes: 0,
    reduceScatterBytes: 0,
    allReduceBytes: 0,
    collectives: { allGather: 0, reduceScatter: 0, allReduce: 0 },
  };
  for (const t of ts) {
    out.allGatherBytes += t.allGatherBytes;
    out.reduceScatterBytes += t.reduceScatterBytes;
    out.allReduceBytes += t.allReduceBytes;
    out.collectives.allGather += t.collectives.allGather;
    out.collectives.reduceScatter += t.collectives.reduceScatter;
    out.collectives.allReduce += t.collectives.allReduce;
  }
  return out;
}

function scaleTraffic(t: Traffic, k: number): Traffic {
  return {
    allGatherBytes: t.allGatherBytes * k,
    reduceScatterBytes: t.reduceScatterBytes * k,
    allReduceBytes: t.allReduceBytes * k,
    collectives: {
      allGather: t.collectives.allGather * k,
      reduceScatter: t.collectives.reduceScatter * k,
      allReduce: t.collectives.allReduce * k,
    },
  };
}

/** Total bytes moved per step by this plan's collectives. */
export function trafficBytes(t: Traffic): number {
  return t.allGatherBytes + t.reduceScatterBytes + t.allReduceBytes;
}

export { fmtBytes };
