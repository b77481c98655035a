/**
 * Float8 training on the module tree: which Linear layers torchao converts, and with float8 all-gather the dtype
 * their weights travel and are held in while gathered.
 */
import { walk, type ModuleNode } from './tree';

/**
 * Float8 training of the Linear layers (torchao's `convert_to_float8_training`, torchtitan's float8 converter):
 * off, the layers' matmuls in float8, or those and their weights all-gathered in float8 too
 * (`enable_fsdp_float8_all_gather`).
 */
export const FLOAT8_MODES = ['off', 'linear', 'all-gather'] as const;
export type Float8Mode = (typeof FLOAT8_MODES)[number];

/** The tree under Float8 training, and how many Linear layers it converts. */
export interface Float8Tree {
  root: ModuleNode;
  converted: number;
}

const TREES = new WeakMap<ModuleNode, Map<string, Float8Tree>>();

/**
 * torchtitan's `module_filter_fn` (torchtitan/components/quantization/utils.py) picks the layers
 * `convert_to_float8_training` swaps for `Float8Linear`: an `nn.Linear` whose weight's two dims are multiples of
 * 16 (float8 tensor cores need them) and whose name contains none of `filter_fqns`. With
 * `enable_fsdp_float8_all_gather`, each converted weight becomes a `WeightWithDynamicFloat8CastTensor`
 * (torchao/float8/fsdp_utils.py) whose `fsdp_pre_all_gather` casts the shard to float8 and hands FSDP2 its
 * 1-byte `_data`, and whose `fsdp_post_all_gather` wraps the gathered bytes as the Float8 weight the matmul uses:
 * the all-gather and the unsharded weight are 1 byte per element. The sharded weight, its gradient and the
 * optimizer state keep their dtypes.
 */
export function float8Tree(root: ModuleNode, mode: Float8Mode, skip: string): Float8Tree {
  if (mode === 'off') return { root, converted: 0 };
  const key = `${mode}|${skip}`;
  let byKey = TREES.get(root);
  if (!byKey) TREES.set(root, (byKey = new Map()));
  let tree = byKey.get(key);
  if (!tree) byKey.set(key, (tree = convert(root, mode, skip)));
  return tree;
}

function convert(root: ModuleNode, mode: Float8Mode, skip: string): Float8Tree {
  const fragments = skip ? skip.split(',') : [];
  const picked = new Set<ModuleNode>();
  for (const m of walk(root)) {
    if (m.className !== 'Linear') continue;
    const w = m.params.find((p) => p.name === 'weight');
    if (!w || w.shape.length !== 2 || w.shape[0]! % 16 !== 0 || w.shape[1]! % 16 !== 0) continue;
    if (fragments.some((f) => m.path.includes(f))) continue;
    picked.add(m);
  }
  if (mode === 'linear' || !picked.size) return { root, converted: picked.size };
  const copy = (m: ModuleNode): ModuleNode => ({
    ...m,
    params: picked.has(m)
      ? m.params.map((p) => (p.name === 'weight' ? { ...p, gathersAs: 'float8_e4m3fn' as const } : p))
      : m.params,
    children: m.children.map(copy),
  });
  return { root: copy(root), converted: picked.size };
}
