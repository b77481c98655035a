/** Pipeline stages of a decoder as torchtitan splits it: which blocks each stage holds, and the tree a rank holds. */
import { outermostOfClass, type ModuleNode } from './tree';

/** The schedules of `torch.distributed.pipelining` (`get_schedule_class` names). */
export const PIPELINE_SCHEDULES = [
  '1F1B',
  'Interleaved1F1B',
  'GPipe',
  'LoopedBFS',
  'InterleavedZeroBubble',
  'ZBVZeroBubble',
  'DualPipeV',
] as const;
export type PipelineSchedule = (typeof PIPELINE_SCHEDULES)[number];

/** One pipeline stage: its blocks `[from, to)` in model order, and whether it holds the embedding or the head. */
export interface StageLayout {
  index: number;
  first: boolean;
  last: boolean;
  from: number;
  to: number;
}

/**
 * The stages of a decoder of `layers` blocks, as torchtitan's `_generate_llm_fqn_per_model_part`
 * (torchtitan/distributed/pipeline_parallel.py) splits it: the embedding counts as `inputWeight` blocks and the
 * final norm with the head as `outputWeight` (torchtitan's `pipeline_parallel_first_stage_less_layers` and
 * `..._last_stage_less_layers`, 1 each by default); `layers + inputWeight + outputWeight` divided as evenly as it
 * goes, the first stages taking one more. A split torchtitan refuses is a message, with its reason.
 */
export function splitStages(
  layers: number,
  stages: number,
  inputWeight = 1,
  outputWeight = 1,
): StageLayout[] | { problem: string } {
  if (stages <= 1) return [{ index: 0, first: true, last: true, from: 0, to: layers }];
  const effective = layers + inputWeight + outputWeight;
  if (stages > effective)
    return {
      problem: `${stages} stages are more than the ${effective} layers (with the embedding and head)`,
    };
  const per = Math.floor(effective / stages);
  const extra = effective % stages;
  if (inputWeight > per || outputWeight > per)
    return { problem: `the embedding or head weighs more than the ${per} layers of a stage` };
  const out: StageLayout[] = [];
  let at = 0;
  for (let s = 0; s < stages; s++) {
    const share = per + (s < extra ? 1 : 0);
    const first = s === 0;
    const last = s === stages - 1;
    const take = share - (first ? inputWeight : 0) - (last ? outputWeight : 0);
    const from = at;
    at = Math.min(layers, at + Math.max(0, take));
    out.push({ index: s, first, last, from, to: at });
  }
  return out;
}

/**
 * The stages rank `rank` of `ranks` holds, `perRank` of them: torchtitan's loop layout (`rank + s x ranks`), or the
 * V layout of the zero-bubble V schedules (rank r holds stages r and 2 ranks - 1 - r), as
 * `_get_pp_rank_to_stage_indices_mapping` places them.
 */
export function stagesOfRank(rank: number, ranks: number, perRank: number, style: 'loop' | 'v'): number[] {
  if (style === 'v') return [rank, 2 * ranks - 1 - rank];
  return Array.from({ length: perRank }, (_, s) => rank + s * ranks);
}

/**
 * The tree one pipeline rank holds: the blocks of its stages (numbered as in the whole model, as torchtitan's
 * `_split_module` keeps their names), the modules before the first block (the embedding) when it holds the first
 * stage, and those after the last block (the final norm and the head) when it holds the last. A parameter tied
 * to one the rank does not hold is its own copy there.
 */
export function stageTree(
  root: ModuleNode,
  blockClass: string,
  blocks: ReadonlySet<number>,
  embedding: boolean,
  head: boolean,
): ModuleNode {
  const all = outermostOfClass(root, blockClass);
  const index = new Map(all.map((b, i) => [b, i]));
  const kept = new Set<string>();
  // Whether a module with no block inside it comes before the blocks (in depth-first order) or after them.
  let seen = 0;
  const side = new Map<ModuleNode, 'before' | 'after'>();
  const hasBlock = new Map<ModuleNode, boolean>();
  const mark = (m: ModuleNode): boolean => {
    if (index.has(m)) {
      seen++;
      hasBlock.set(m, true);
      return true;
    }
    let any = false;
    for (const c of m.children) any = mark(c) || any;
    hasBlock.set(m, any);
    if (!any) side.set(m, seen === 0 ? 'before' : 'after');
    return any;
  };
  mark(root);
  const copy = (m: ModuleNode): ModuleNode | null => {
    const i = index.get(m);
    if (i !== undefined && !blocks.has(i)) return null;
    if (i === undefined && !hasBlock.get(m)) {
      const s = side.get(m);
      if ((s === 'before' && !embedding) || (s === 'after' && !head)) return null;
    }
    const children = m.children.map(copy).filter((c): c is ModuleNode => c !== null);
    const node = { ...m, children };
    kept.add(m.path);
    return node;
  };
  const out = copy(root) ?? { ...root, children: [] };
  // A tie to a module this rank does not hold: the rank holds the tensor itself.
  const untie = (m: ModuleNode): ModuleNode => ({
    ...m,
    params: m.params.map((p) => {
      if (!p.tiedTo) return p;
      const owner = p.tiedTo.includes('.') ? p.tiedTo.slice(0, p.tiedTo.lastIndexOf('.')) : '';
      if (kept.has(owner)) return p;
      const { tiedTo: _, ...own } = p;
      return own;
    }),
    children: m.children.map(untie),
  });
  return untie(out);
}
