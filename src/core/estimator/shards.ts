/**
 * What each rank holds of a unit's parameters, as FSDP shards them: FSDP2 splits each parameter's dim 0 and pads
 * it, FSDP1 flattens the unit into one FlatParameter padded to the shard group; and the optimizer state kept per
 * trainable shard element for each optimizer family.
 */
import type { TrainingSetup } from '../inputs/table';
import { DTYPE_BYTES, isFloat, tensorBytes, type DType } from '../vocabulary/dtypes';
import type { ParamGroup } from './types';

export const bytesOf = (d: DType): number => DTYPE_BYTES[d];

/** Rows each rank holds of a dim-0 of `dim0` rows split `ranks` ways (FSDP pads the last shard). */
export function shardRows(dim0: number, ranks: number): number {
  return Math.ceil(dim0 / ranks);
}

/**
 * The ranks FSDP2 shards a group over when the unit's shard group is `ranks`: an expert's parameters under expert
 * parallelism E_p over `ranks` / E_p (torchtitan's `efsdp` mesh), every other parameter over all of them.
 */
export function groupRanks(g: ParamGroup, ranks: number): number {
  return g.expertParallel ? Math.max(1, Math.floor(ranks / g.expertParallel)) : ranks;
}

/** Elements per rank of a group of parameters sharded `ranks` ways: FSDP2 pads each parameter on dim 0. */
export function shardNumel(
  groups: ParamGroup[],
  ranks: number,
  filter: (g: ParamGroup) => boolean = () => true,
): number {
  let n = 0;
  for (const g of groups) if (filter(g)) n += g.count * shardRows(g.dim0, groupRanks(g, ranks)) * g.rest;
  return n;
}

/**
 * What FSDP2 gathers or reduce-scatters of a unit's groups over a shard group of `ranks`: each group's padded
 * shards over its own ranks (`padded`: the all-gather output, the reduce-scatter input), and what one rank
 * receives of them in a ring, r - 1 shards (`ring`), in the bytes `bytes` gives one tensor of that many elements.
 */
export function groupSums(
  groups: ParamGroup[],
  ranks: number,
  bytes: (g: ParamGroup, numel: number) => number,
  filter: (g: ParamGroup) => boolean = () => true,
): { padded: number; ring: number } {
  let padded = 0;
  let ring = 0;
  for (const g of groups) {
    if (!filter(g)) continue;
    const r = groupRanks(g, ranks);
    const shard = shardRows(g.dim0, r) * g.rest;
    padded += g.count * bytes(g, shard * r);
    ring += (r - 1) * g.count * bytes(g, shard);
  }
  return { padded, ring };
}

/**
 * FSDP1 flattens a unit into one FlatParameter padded to a multiple of the shard group. It flattens tensors as
 * stored, in the FlatParameter's one dtype (`flat`): a quantised weight packed into it (bitsandbytes'
 * `quant_storage`, four NF4 values per bf16 element) takes its bytes, not its values.
 */
export function flatShardNumel(
  groups: ParamGroup[],
  ranks: number,
  filter: (g: ParamGroup) => boolean = () => true,
  flat?: DType,
): number {
  let n = 0;
  for (const g of groups) {
    if (!filter(g)) continue;
    const values = g.count * g.dim0 * g.rest;
    n += flat && !isFloat(g.dtype) ? Math.ceil((values * bytesOf(g.dtype)) / bytesOf(flat)) : values;
  }
  return Math.ceil(n / ranks);
}

/** Optimizer-state bytes for `numel` elements of a parameter shard of `rows` x `rest`. */
export function optimizerBytes(
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
        const rows = shardRows(g.dim0, groupRanks(g, ranks));
        n += g.rest > 1 ? g.count * (rows + g.rest) : g.count * rows;
      }
      return n * 4;
    }
  }
}

/** Parameters, gradients and optimizer state of parameter groups held whole (one GPU of plain data parallelism). */
export function fullStateBytes(groups: ParamGroup[], setup: TrainingSetup): number {
  const params = groups.reduce((s, g) => s + g.count * tensorBytes(g.dim0 * g.rest, g.dtype), 0);
  const grads =
    groups.reduce((s, g) => s + (g.trainable ? g.count * g.dim0 * g.rest : 0), 0) *
    bytesOf(setup.masterDtype);
  return params + grads + optimizerBytes(setup.optimizer, groups, 1, false, setup.masterDtype);
}

/** The model state of every parameter an ownership assigns, unsharded: what one GPU of plain data parallelism holds. */
export function ownedStateBytes(
  own: { units: { groups: ParamGroup[] }[]; unowned: { groups: ParamGroup[] } },
  setup: TrainingSetup,
): number {
  return [...own.units.map((u) => u.groups), own.unowned.groups].reduce(
    (s, g) => s + fullStateBytes(g, setup),
    0,
  );
}
