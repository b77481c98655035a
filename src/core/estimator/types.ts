/**
 * The estimator's vocabulary: its inputs (the plan, the model, the setup) and everything an estimate reports (per
 * unit, per GPU, per step, over the step's timeline), as plain data every surface renders.
 */
import type { Calibration, FitReserve } from './fit';
import type { Gpu, Link } from '../hardware/catalog';
import type { TrainingSetup } from '../inputs/table';
import type { ArchShape } from '../model/hf';
import type { ModuleNode } from '../model/tree';
import type { Mesh } from './mesh';
import type { Colocation, ColocatedPhases } from './colocated';
import type { FsdpApi, Phase, ShardingStrategyName, ReshardAfterForward, Verdict } from '../vocabulary/fsdp';
import type { DType } from '../vocabulary/dtypes';
import type { Assumption, Source } from '../vocabulary/source';

/** The call (or configuration line) that made a unit: where the lens, hover and findings about it go. */
export interface WrapSite {
  /** The file's path as the analysis read it. */
  file: string;
  /** 1-based line of the wrap call, or of the configuration's first line. */
  line: number;
}

/** One FSDP unit as the plan applies it, before parameters are assigned. */
export interface UnitPlan {
  /** Module paths the unit wraps ('' is the model root). */
  modules: string[];
  isRoot: boolean;
  /** FSDP2 `reshard_after_forward`: null means the default (False for the root, True otherwise). */
  reshardAfterForward: ReshardAfterForward;
  /** Parameters and gradients in host memory (CPUOffloadPolicy / CPUOffload(offload_params=True)). */
  offload: boolean;
  /** Where the plan said so (`train.py:14`), or how it was derived, in words. */
  origin: string;
  /** The call that made the unit; null for a default plan. */
  site: WrapSite | null;
}

export interface Plan {
  api: FsdpApi;
  /** FSDP1 sharding strategy (FSDP2 plans are FULL_SHARD, or HSDP with a 2-D mesh). */
  strategy: ShardingStrategyName;
  units: UnitPlan[];
  /** How the plan was obtained. */
  source: Source;
  /** Things the plan could not map onto the model (a pattern that matched nothing). */
  notes: string[];
  /** Why the plan is not known: a wrap whose modules are undecided for every module it may wrap. */
  unknown?: string;
  /** The plan is not known because its wraps name modules the model estimated does not have. */
  unknownModel?: true;
}

/** Parameters of one unit grouped by what their shards depend on. */
export interface ParamGroup {
  dim0: number;
  /** Elements per row (product of the dims after the first). */
  rest: number;
  count: number;
  dtype: DType;
  trainable: boolean;
  /** The dtype FSDP2 all-gathers the group in, where a tensor subclass decides it (torchao's Float8 weights). */
  gathersAs?: DType;
  /** Experts under expert parallelism of this degree: FSDP2 shards them over the shard group / degree. */
  expertParallel?: number;
}

/** A unit with the parameters it owns. */
export interface Unit {
  index: number;
  name: string;
  modules: string[];
  classNames: string[];
  isRoot: boolean;
  params: number;
  trainableParams: number;
  groups: ParamGroup[];
  /** Buffers of the unit's modules: never sharded. */
  bufferBytes: number;
  /**
   * Trainable parameters by the module whose backward first produces their gradient (the last module in forward
   * order that uses the parameter: `lm_head` for an embedding tied to the head).
   */
  gradsAt: Record<string, number>;
  reshardAfterForward: ReshardAfterForward;
  offload: boolean;
  origin: string;
  site: WrapSite | null;
}

/** A sum with the terms that make it, for hovers and the panel. */
export interface Figure {
  bytes: number;
  terms: Term[];
}

export interface Term {
  name: string;
  bytes: number;
  /** The formula in words, with the numbers put in. */
  formula: string;
}

export interface Traffic {
  allGatherBytes: number;
  reduceScatterBytes: number;
  allReduceBytes: number;
  collectives: { allGather: number; reduceScatter: number; allReduce: number };
}

export type { Verdict };

export interface FitResult {
  gpu: string;
  name: string;
  verdict: Verdict;
  /** Usable memory minus the peak, allocator overhead and CUDA context; negative when it does not fit. */
  headroomBytes: number;
  memoryBytes: number;
}

/** Everything an estimate is computed from. */
export interface EstimateInput {
  /** Reserves measured on the project's clusters (`.fsdp-lens/calibration.json`), each for the GPU it was measured on. */
  calibrations?: Calibration[];
  model: {
    name: string;
    root: ModuleNode;
    shape?: ArchShape;
    source: Source;
    /** Parts of the model not known, so not counted (every figure is then a lower bound). */
    gaps?: string[];
  };
  /**
   * Parallelism the job applies that the figures do not model (`tensor parallelism (degree 8)`): they are those
   * of FSDP alone, with whole layers on each GPU, so no fit verdict rests on them.
   */
  unmodelled?: string[];
  /**
   * What the job does that keeps less than the figures count (activations offloaded to the CPU, Liger's RMSNorm
   * and SwiGLU kernels): every figure is then an upper bound, and a peak that does not fit is no verdict.
   */
  overcounted?: string[];
  /**
   * Conditions the analysis cannot decide on which what the job trains or holds depends (`whether LoRA at
   * train.py:672 runs`): the figures are one arm's, so no fit verdict rests on them.
   */
  undecided?: string[];
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
  /** What shares the GPUs with the FSDP step between its phases (an RL trainer's rollout engine and models). */
  colocated?: Colocation;
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
  /** Elements of the unit's reduce-scatter input: W padded shards of its trainable parameters. */
  reduceScatterNumel: number;
  /** Elements of the unit's unsharded gradient: its trainable parameters, or a mixed FSDP1 FlatParameter whole. */
  gradientNumel: number;
  /** This rank's elements of the unit's trainable parameters: what the optimizer steps. */
  trainableShardNumel: number;
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
  /**
   * Who talks over it: the shard group (all-gathers, reduce-scatters), the replicas (all-reduces), a tensor- or
   * context-parallel group (activations' all-gathers and reduce-scatters, in the compute stream: not hidden), or
   * the pipeline's neighbouring stages (their activations and gradients, point to point).
   */
  role:
    | 'shard group'
    | 'replicas'
    | 'tensor parallel'
    | 'context parallel'
    | 'pipeline parallel'
    | 'expert parallel';
  collectives: number;
  bytes: number;
  seconds: number;
}

export interface Estimate {
  model: { name: string; params: number; trainableParams: number; bufferBytes: number; source: Source };
  plan: { api: Plan['api']; strategy: ShardingStrategyName; units: number; source: Source; notes: string[] };
  mesh: Mesh;
  units: UnitEstimate[];
  /** Parameters in no unit: replicated, with full gradients and optimizer state on every rank. */
  unowned: {
    params: number;
    /** Their parameters, gradients and optimizer state, whole on every GPU. */
    bytes: number;
    /** Of which their gradients: autograd creates them in backward and `zero_grad()` frees them. */
    gradBytes: number;
    /** The largest one parameter's gradient among them (what one step of the optimizer in backward holds). */
    largestGradBytes?: number;
    modules: string[];
  };
  /** Parts of the model not known, so not counted: when any, every figure is a lower bound (at least). */
  gaps: string[];
  /** Parallelism not modelled (see EstimateInput): when any, every fit is undecided. */
  unmodelled: string[];
  /**
   * Memory the peak leaves out though the model is counted whole (activations of a part not modelled, what a
   * schedule keeps beside them): when any, the peak is a lower bound and a fit that holds is undecided.
   */
  uncounted: string[];
  /** What keeps less than counted (see EstimateInput): when any, a fit that fails is undecided. */
  overcounted: string[];
  /** Conditions not decided on which the job depends (see EstimateInput): when any, every fit is undecided. */
  undecided: string[];
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
    /** What the caching allocator holds reserved over the step on a GPU with room (`fit.ts` `reservedBytes`). */
    reservedBytes: number;
    /** A paged optimizer's state, counted in the figures though it may leave the GPU (`--paged-optimizer`). */
    pagedOptimizerBytes?: number;
  };
  /** The live set over the step, event by event (null when activations cannot be modelled). */
  timeline: Timeline | null;
  /** Under pipeline parallelism: the stages, what each rank holds and keeps in flight, and each rank's peak. */
  pipeline?: PipelineSummary;
  /** A job whose GPUs the step shares with other phases: each phase's bytes; the fit is the worst phase's. */
  colocated?: ColocatedPhases;
  /** Whether the peak fits each GPU of the catalog, with the allocator overhead and CUDA context added. */
  fit: FitResult[];
  /** The fit on the target GPU (the verdict every surface shows). */
  targetFit: FitResult;
  /** What the target GPU's fit reserves beside the peak: the defaults, or a cluster's measured reserve. */
  fitReserve: FitReserve;
  /** The measured reserves the fits use, each for its GPU (absent when none). */
  calibrations?: Calibration[];
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
    /** Whether the exposed transfers stay under the share of compute that counts as hidden. */
    transfersHide: boolean;
  };
  gpu: Gpu;
  setup: TrainingSetup;
  assumptions: Assumption[];
  notes: string[];
}

/** What is alive at one moment of the step, by category (bytes). */
export interface LiveSet {
  /** Sharded parameters and optimizer state, replicated leftovers, buffers. */
  state: number;
  /** This GPU's shard of the gradients: created in each unit's post-backward, kept until `zero_grad()`. */
  shardGrads: number;
  /** Unsharded parameters of the units gathered now (and 1/k slices kept after forward). */
  gathered: number;
  /** All-gather output buffers: the unit prefetched in backward, and in FSDP2's forward the last unit gathered. */
  gatherBuffers: number;
  /** Activations saved by earlier blocks for their backward. */
  activations: number;
  /** The running block's own tensors: built in forward, rebuilt by recomputation in backward, and gradients of activations. */
  working: number;
  /** Unsharded gradients and reduce-scatter buffers in flight. */
  gradients: number;
  /** Logits and loss at the turn from forward to backward. */
  logits: number;
  /** The model's output (its logits) a variable of the script keeps across the step (the `keepsOutput` input). */
  heldOutput: number;
  /** Optimizer step temporaries. */
  optimizer: number;
  /**
   * Pipeline parallelism's own tensors: the receive buffers of stage inputs and of their gradients (allocated for
   * every micro-batch at the first step and kept), and the stage outputs kept until their backward.
   */
  pipeline: number;
}

/** What one rank of a pipeline runs, for its timeline (`estimator/pipeline.ts` says how many of each). */
export interface StageRun {
  /** It holds the first stage (the embedding) or the last (the head and the loss). */
  first: boolean;
  last: boolean;
  /** Micro-batches of this rank's layers whose activations it keeps at once, the one simulated included. */
  inFlight: number;
  /** Micro-batches whose loss the last stage keeps at once. */
  lossInFlight: number;
  /** A backward has run before the rank keeps its most micro-batches: its gradient accumulators are full then. */
  steady: boolean;
  /** Micro-batches per step. */
  microbatches: number;
  /** Receive buffers of stage inputs and their gradients, kept from the first step on. */
  receiveBytes: number;
  /** The stage output one micro-batch keeps until its backward (a rank without the last stage). */
  outputBytes: number;
  /**
   * Under a zero-bubble schedule, the states just before each backward of the rank that may hold its peak:
   * micro-batches in flight (forward run, weight gradient not), and of them those whose weight gradient waits
   * after their input gradient, in micro-batches of the rank's layers; `pendingLast` counts the waiting chunks of
   * the model's last stage, whose head keeps its logits' gradient.
   */
  pendingWeight?: PendingWeightPoint[];
}

/** One state of a zero-bubble rank before a backward (`StageRun.pendingWeight`). */
export interface PendingWeightPoint {
  inFlight: number;
  pending: number;
  pendingLast: number;
  /** The backward that runs is an input-gradient step: it ends holding its own weight-gradient inputs too. */
  inputStep: boolean;
}

export type { Phase };

/** What the optimizer step's event (and a peak there) names in place of a unit. */
export const OPTIMIZER_STEP = 'optimizer step';

export interface TimelineEvent {
  phase: Phase;
  /** Index of the execution segment (embedding, block i, head), -1 outside them. */
  segment: number;
  /**
   * The unit whose compute or collective this is (the innermost unit around the segment); `OPTIMIZER_STEP` for
   * the optimizer step, which updates every unit's shard at once.
   */
  unit: string;
  label: string;
  live: LiveSet;
  total: number;
  /**
   * Of `total`, the bytes allocated from the side streams' pools of the caching allocator (blocks belong to the
   * stream that allocated them): FSDP's all-gather stream and its reduce-scatter stream.
   */
  streams: StreamBytes;
}

/** Bytes allocated from the pools of FSDP's side streams. */
export interface StreamBytes {
  /** FSDP2's all-gather outputs (`foreach_all_gather` allocates them in the copy-in stream); FSDP1's unsharded FlatParameters (`_unshard` runs `handle.unshard()` in the unshard stream). */
  gather: number;
  /** This GPU's gradient shards (FSDP2 `foreach_reduce`'s output, FSDP1 `_reduce_grad`'s), and FSDP1's reduce-dtype copy of a gradient. */
  reduce: number;
}

export interface Timeline {
  events: TimelineEvent[];
  peak: { bytes: number; at: { unit: string; phase: Phase }; event: number; live: LiveSet };
  /** The largest live set while each unit runs, forward or backward. */
  perUnit: Record<string, number>;
  /** Saved activations of the whole forward (what checkpointing trades for compute). */
  activationBytes: number;
  /** Extra compute from recomputation, as a fraction of the step without it. */
  recomputeFraction: number;
  /** The largest bytes each pool of the caching allocator holds live over the step: the compute stream's and the side streams'. */
  pools: StreamBytes & { compute: number };
  notes: string[];
}

/** A pipeline's ranks as estimated: the figures of an estimate with a pipeline are its worst rank's. */
export interface PipelineSummary {
  degree: number;
  schedule: string;
  microbatches: number;
  /** Samples per pipeline micro-batch: the GPU's batch split `microbatches` ways. */
  microBatchSize: number;
  stagesPerRank: number;
  /** The rank whose figures the estimate shows: the one with the highest peak. */
  worstRank: number;
  ranks: {
    rank: number;
    /** Its stages' blocks, `[from, to)` each, and whether it holds the embedding and the head. */
    stages: { index: number; from: number; to: number }[];
    first: boolean;
    last: boolean;
    inFlight: number;
    peakBytes: number;
    reservedBytes: number;
  }[];
}
