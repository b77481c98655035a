/**
 * Compute per unit: the parameters a token passes through (an MoE block's routed experts count for top-k of E),
 * attention's score FLOPs, and the share of forward that activation checkpointing recomputes in backward.
 */
import type { CheckpointMode } from '../inputs/parse';
import type { TrainingSetup } from '../inputs/table';
import type { ArchShape } from '../model/hf';
import { countParams, type ModuleNode } from '../model/tree';
import { recomputeOf } from './activations';
import type { Unit } from './types';

/** Parameters a token passes through: an MoE block's routed experts count for top-k of E. */
export function activeParams(u: Unit, shape: ArchShape | undefined): number {
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
export function recomputedShares(
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
export function attentionFlops(u: Unit, shape: ArchShape | undefined, setup: TrainingSetup): number {
  if (!shape || !u.classNames.includes(shape.blockClass)) return 0;
  const blocks = u.modules.length;
  return blocks * 2 * setup.microBatch * setup.seqLen * setup.seqLen * shape.heads * shape.headDim;
}
