/**
 * FSDP's own vocabulary, shared by the scan, the framework readers, the planner and the estimator: the two APIs,
 * FSDP1's sharding strategies, `reshard_after_forward`, and the label a plan is shown under.
 */

/** FSDP2 (`fully_shard`) or FSDP1 (`FullyShardedDataParallel`). */
export type FsdpApi = 'fsdp2' | 'fsdp1' | 'none';

/** FSDP1 `ShardingStrategy` members. */
export const SHARDING_STRATEGIES = [
  'FULL_SHARD',
  'SHARD_GRAD_OP',
  'NO_SHARD',
  'HYBRID_SHARD',
  '_HYBRID_SHARD_ZERO2',
] as const;
export type ShardingStrategyName = (typeof SHARDING_STRATEGIES)[number];

/** The strategies that shard within a group and replicate across groups (HSDP). */
export function isHybrid(s: ShardingStrategyName): boolean {
  return s === 'HYBRID_SHARD' || s === '_HYBRID_SHARD_ZERO2';
}

/** FSDP2 `reshard_after_forward`: a bool, an int (a 1/k slice kept), or null for the default. */
export type ReshardAfterForward = boolean | number | null;

/** `FSDP2`, or `FSDP1 FULL_SHARD`: how a plan is named everywhere. */
export function planLabel(api: FsdpApi, strategy: ShardingStrategyName): string {
  return api === 'none' ? 'no FSDP' : api === 'fsdp2' ? 'FSDP2' : `FSDP1 ${strategy}`;
}

/** The phases of one training step, in order. */
export type Phase = 'forward' | 'loss' | 'backward' | 'optimizer';

/**
 * Whether a plan fits a GPU: `fits`, `short`, or `undecided` when parts of the model are not counted and the
 * counted peak fits (what was left out could take the headroom; a counted peak that is short is short whatever
 * the rest holds).
 */
export type Verdict = 'fits' | 'short' | 'undecided';
