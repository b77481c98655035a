/**
 * The FSDP mesh, written once: R replicas of shard groups of W GPUs, on nodes of G. A 2-D device mesh (or
 * `--replicas`) gives R; FSDP1's hybrid strategies without one shard within each node as PyTorch does; NO_SHARD
 * shards nothing. Meshes PyTorch refuses are an error, with PyTorch's own message.
 */
import { isHybrid, type ShardingStrategyName } from '../vocabulary/fsdp';
import type { TrainingSetup } from '../inputs/table';

export interface Mesh {
  worldSize: number;
  shardGroup: number;
  replicas: number;
  nodes: number;
  gpusPerNode: number;
  /** Tensor-parallel degree T: each FSDP rank is a group of T GPUs holding 1/T of every sharded layer. */
  tp: number;
  /** Context-parallel degree C: within the shard group, C GPUs each keep 1/C of every sequence. */
  cp: number;
  /** Pipeline-parallel degree P: the world is P stages of this mesh, each holding its own blocks. */
  pp: number;
  /** Sharded within groups and replicated across them (HSDP). */
  hsdp: boolean;
  /** How the replicas were found, when the plan derived them (`HYBRID_SHARD: one shard group per node`). */
  derived?: string;
}

/** A mesh PyTorch would refuse to build: the script stops before training. */
export class MeshError extends Error {}

/**
 * The mesh of a plan. `replicas` is R from a 2-D mesh or a flag (1 when none says). FSDP1's HYBRID_SHARD and
 * _HYBRID_SHARD_ZERO2 without a process group or mesh shard within each node: `_init_process_group_state_for_
 * hybrid_shard` builds the shard group with `dist.new_subgroups(device_count())` (torch/distributed/fsdp/
 * _init_utils.py, `_init_intra_node_process_group`), which raises ValueError when the world is smaller than a node
 * or not whole nodes (`new_subgroups` in distributed_c10d.py). Throws MeshError for those.
 */
export function fsdpMesh(
  setup: {
    worldSize: number;
    gpusPerNode: number;
    replicas: number;
    tensorParallel?: number;
    contextParallel?: number;
    pipelineParallel?: number;
  },
  strategy: ShardingStrategyName,
): Mesh {
  const T = setup.tensorParallel ?? 1;
  const C = setup.contextParallel ?? 1;
  const P = setup.pipelineParallel ?? 1;
  if (setup.worldSize % (T * C * P) !== 0)
    throw new MeshError(
      `${setup.worldSize} GPUs are not whole groups of ${P > 1 ? `pipeline parallel ${P} x ` : ''}tensor parallel ${T} x context parallel ${C}: init_device_mesh cannot build the mesh`,
    );
  // FSDP's dimensions span what tensor parallelism leaves within a pipeline stage: torchtitan's mesh puts `pp`
  // outermost and `tp` innermost (`ParallelDims.build_mesh`), so each TP group is T consecutive ranks and FSDP's
  // ranks are T apart.
  const N = setup.worldSize / (T * P);
  const G = setup.gpusPerNode;
  const nodes = Math.ceil(setup.worldSize / G);
  const base = { worldSize: setup.worldSize, nodes, gpusPerNode: G, tp: T, cp: C, pp: P };
  if (strategy === 'NO_SHARD') return { ...base, shardGroup: 1, replicas: 1, hsdp: false };
  if (setup.replicas > 1) {
    const R = setup.replicas;
    return { ...base, shardGroup: Math.max(1, Math.floor(N / R)), replicas: R, hsdp: true };
  }
  if (isHybrid(strategy)) {
    if (G > N)
      throw new MeshError(
        `${strategy} without a device mesh shards within each node: PyTorch's new_subgroups(${G}) raises ValueError ("The arg 'group_size' (${G}) must not exceed the world size (${N})"). Give a 2-D device_mesh, or set the GPUs per node to what each node runs`,
      );
    if (N % G !== 0)
      throw new MeshError(
        `${strategy} without a device mesh shards within each node: PyTorch's new_subgroups(${G}) raises ValueError ("The world size (${N}) must be divisible by 'group_size=${G}'") at ${N} GPUs on nodes of ${G}. Use whole nodes, or give a 2-D device_mesh`,
      );
    return {
      ...base,
      shardGroup: G,
      replicas: N / G,
      hsdp: N / G > 1,
      derived: `${strategy}: one shard group per node of ${G}`,
    };
  }
  return { ...base, shardGroup: N, replicas: 1, hsdp: false };
}

/** Loss parallel applies under torchtitan's plan only: Transformers' gathers the logits (`colwise_gather_output`). */
export function lossParallelOf(setup: Pick<TrainingSetup, 'lossParallel' | 'tpPlan'>): boolean {
  return setup.lossParallel && setup.tpPlan !== 'transformers';
}
