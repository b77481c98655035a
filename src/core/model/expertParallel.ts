/** Expert parallelism on the module tree: the experts of each MoE layer that one GPU of an expert group holds. */
import type { ModuleNode } from './tree';

/**
 * The tree one GPU holds under expert parallelism of degree `ep`, as torchtitan places experts
 * (`expert_param_placement_sparse`: the expert dimension `Shard(0)` over the `ep` mesh): of each MoE layer's `experts`
 * list of n, n / ep, their parameters marked as sharded by FSDP2 over the shard group / ep (`apply_fsdp_to_decoder`
 * gives expert parameters the `efsdp` mesh through `shard_placement_fn`). A layer whose experts ep does not divide,
 * or a model without experts, is the reason it is not modelled.
 */
export function expertParallelTree(root: ModuleNode, ep: number): { root: ModuleNode } | { problem: string } {
  if (ep <= 1) return { root };
  let lists = 0;
  let problem: string | null = null;
  const mark = (m: ModuleNode): ModuleNode => ({
    ...m,
    params: m.params.map((p) => ({ ...p, expertParallel: ep })),
    children: m.children.map(mark),
  });
  const visit = (m: ModuleNode): ModuleNode => {
    if (m.name === 'experts' && m.children.length > 0) {
      // A list of expert modules (Mixtral, Qwen3-MoE, DeepSeek in Transformers 4).
      lists++;
      const n = m.children.length;
      if (n % ep !== 0) problem ??= `${n} experts in ${m.path} are not whole groups of ${ep}`;
      return { ...m, children: m.children.slice(0, Math.floor(n / ep)).map(mark) };
    }
    if (m.name === 'experts' && m.params.length > 0) {
      // Experts fused into parameters whose dim 0 is the expert (Llama 4's `Llama4TextExperts`, torchtitan's
      // `GroupedExperts`): each GPU holds 1/ep of that dim.
      lists++;
      return {
        ...m,
        params: m.params.map((p) => {
          const n = p.shape[0] ?? 1;
          if (n % ep !== 0) problem ??= `${n} experts in ${m.path}.${p.name} are not whole groups of ${ep}`;
          const rows = Math.floor(n / ep);
          return {
            ...p,
            shape: [rows, ...p.shape.slice(1)],
            numel: (p.numel / n) * rows,
            expertParallel: ep,
          };
        }),
      };
    }
    return m.children.length ? { ...m, children: m.children.map(visit) } : m;
  };
  const out = visit(root);
  if (!lists) return { problem: 'the model has no experts to place' };
  return problem ? { problem } : { root: out };
}
