import type { ShardingStrategyName, ReshardAfterForward } from '../vocabulary/fsdp';
import type { DType } from '../vocabulary/dtypes';
import type { Source } from '../vocabulary/source';

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
  api: 'fsdp2' | 'fsdp1';
  /** FSDP1 sharding strategy (FSDP2 plans are FULL_SHARD, or HSDP with a 2-D mesh). */
  strategy: ShardingStrategyName;
  units: UnitPlan[];
  /** How the plan was obtained. */
  source: Source;
  /** Things the plan could not map onto the model (a pattern that matched nothing). */
  notes: string[];
}

/** Parameters of one unit grouped by what their shards depend on. */
export interface ParamGroup {
  dim0: number;
  /** Elements per row (product of the dims after the first). */
  rest: number;
  count: number;
  dtype: DType;
  trainable: boolean;
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
