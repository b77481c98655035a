/**
 * Tensor parallelism as torchtitan applies it to a dense decoder, on the module tree: the shapes each GPU holds
 * before FSDP shards them over the data-parallel ranks.
 */
import type { ArchShape } from './hf';
import { numelOf, walk, type ModuleNode, type ParamInfo } from './tree';

/**
 * torchtitan's plan for its Llama-style decoders (`set_llama3_sharding_config` →
 * `set_gqa_attention_sharding`, `set_dense_ffn_sharding` and `set_decoder_sharding_config` in
 * torchtitan/models/common/decoder_sharding.py; before 2026 `apply_tp` with `ColwiseParallel`, `RowwiseParallel`
 * and `SequenceParallel`), under Hugging Face's names too:
 * - column-wise (weight `Shard(0)`, output sharded on features): q, k, v, gate and up projections;
 * - row-wise (weight `Shard(1)`, output reduce-scattered to the sequence-sharded residual stream): o and down;
 * - the embedding's weight `Shard(0)` (vocabulary), its output reduce-scattered to the sequence shards;
 * - the head's weight `Shard(0)` (vocabulary), its input all-gathered, its logits left sharded for the loss
 *   (loss parallel);
 * - the norms sequence-parallel: their weights whole on every GPU.
 */
const COLWISE = new Set(['wq', 'wk', 'wv', 'w1', 'w3', 'q_proj', 'k_proj', 'v_proj', 'gate_proj', 'up_proj']);
const ROWWISE = new Set(['wo', 'w2', 'o_proj', 'down_proj']);
const VOCAB = new Set(['tok_embeddings', 'embed_tokens', 'output', 'lm_head']);
const NORMS = new Set(['RMSNorm', 'LlamaRMSNorm', 'Qwen2RMSNorm', 'MistralRMSNorm', 'Qwen3RMSNorm']);

type Split = { root: ModuleNode } | { problem: string };

/** The style the split gives a module with parameters (an embedding is row-wise: its weight is split by rows). */
export function splitStyleOf(m: ModuleNode): 'colwise' | 'rowwise' | 'sequence' | null {
  if (COLWISE.has(m.name) || m.name === 'output' || m.name === 'lm_head') return 'colwise';
  if (ROWWISE.has(m.name) || m.name === 'tok_embeddings' || m.name === 'embed_tokens') return 'rowwise';
  if (NORMS.has(m.className) || /norm/i.test(m.name)) return 'sequence';
  return null;
}

/**
 * Whether a plan written in code (`parallelize_module` entries, keys relative to the module each call
 * parallelizes) is the split this file models: every module with parameters named by an entry whose last name is
 * its own, in the style the split gives it. Why not, if it is not.
 */
export function planMismatch(
  root: ModuleNode,
  entries: readonly { key: string; style: string }[],
  plan: TensorParallelPlan = 'torchtitan',
): string | null {
  const styles = new Map<string, Set<string>>();
  for (const e of entries) {
    const name = e.key.split('.').pop()!;
    if (!name) return `a style applied to a whole module (${e.style}) is not modelled`;
    if (!styles.has(name)) styles.set(name, new Set());
    styles.get(name)!.add(e.style);
  }
  for (const m of walk(root)) {
    if (!m.params.length) continue;
    const want = splitStyleOf(m);
    // Transformers' plan leaves the norms and the embedding whole: no entry is what it writes for them.
    const whole = want === 'sequence' || m.name === 'tok_embeddings' || m.name === 'embed_tokens';
    if (plan === 'transformers' && whole) {
      if (styles.has(m.name)) return `${m.path} has an entry, where Transformers' plan leaves it whole`;
      continue;
    }
    const got = styles.get(m.name);
    if (!got)
      return want === 'sequence'
        ? `${m.path} has no SequenceParallel entry: without sequence parallelism the activations differ`
        : `the plan leaves ${m.path || 'the root'} (${m.className}) whole, which the split does not model`;
    if (!want || got.size > 1 || !got.has(want))
      return `${m.path} is ${[...got].join(' and ')}${want ? ` where the split is ${want}` : ', which the split has no place for'}`;
  }
  return null;
}

/**
 * Whose plan splits the tree: torchtitan's (above), or Transformers' `tp_plan="auto"` (the model config's
 * `base_model_tp_plan`, e.g. `LlamaConfig`: q, k, v, gate and up `colwise`, o and down `rowwise`; the causal-LM
 * class's `_tp_plan`: the head `colwise_gather_output`), which leaves the embedding and the norms whole and has no
 * sequence parallelism.
 */
export type TensorParallelPlan = 'torchtitan' | 'transformers';

/** Each tree's splits by plan and degree: what-if runs estimate one model at many world sizes with one degree. */
const SPLITS = new WeakMap<ModuleNode, Map<string, Split>>();

/** The tree as each GPU of a tensor-parallel group of `t` holds it, or why the plan does not apply. */
export function tensorParallelTree(
  root: ModuleNode,
  shape: ArchShape | undefined,
  t: number,
  plan: TensorParallelPlan = 'torchtitan',
): Split {
  if (t === 1) return { root };
  let byDegree = SPLITS.get(root);
  if (!byDegree) SPLITS.set(root, (byDegree = new Map()));
  const key = `${plan}|${t}`;
  let split = byDegree.get(key);
  if (!split) byDegree.set(key, (split = splitTree(root, shape, t, plan)));
  return split;
}

function splitTree(
  root: ModuleNode,
  shape: ArchShape | undefined,
  t: number,
  plan: TensorParallelPlan,
): Split {
  if (!shape) return { problem: 'the model has no decoder shape to apply tensor parallelism to' };
  if (shape.experts > 0 || shape.mla) return { problem: `${shape.modelType}'s experts or latent attention` };
  if (shape.mlp === 'gelu')
    return { problem: `${shape.modelType}'s blocks, which torchtitan has no plan for` };
  // OLMo 2's q_norm / k_norm normalize over every head at once: Transformers' plan (`Olmo2Config`'s
  // `base_model_tp_plan`) gathers q, k and v whole for them (`colwise_gather_output`), which this split does not
  // model, and torchtitan has no plan for it.
  if (shape.modelType === 'olmo2')
    return {
      problem: "olmo2's q and k norms over whole projections, which need q, k and v whole on every GPU",
    };
  // torchtitan's attention views its local q/k/v with n_heads / T and n_kv_heads / T heads.
  const uneven = (
    [
      ['attention heads', shape.heads],
      ['KV heads', shape.kvHeads],
      ['MLP width', shape.intermediate],
      ['vocabulary', shape.vocab],
    ] as const
  ).filter(([, n]) => n % t !== 0);
  if (uneven.length)
    return { problem: `${uneven.map(([w, n]) => `${n} ${w}`).join(', ')} not divisible by the degree ${t}` };
  for (const m of walk(root))
    if (m.params.length && !COLWISE.has(m.name) && !ROWWISE.has(m.name) && !VOCAB.has(m.name))
      if (!NORMS.has(m.className) && !/norm/i.test(m.name))
        return { problem: `${m.path || 'the root'} (${m.className}) has no place in torchtitan's plan` };
  const embedding = (m: ModuleNode) => m.name === 'tok_embeddings' || m.name === 'embed_tokens';
  if (plan === 'transformers')
    for (const m of walk(root))
      if (VOCAB.has(m.name) && !embedding(m) && m.params.some((p) => p.tiedTo))
        return { problem: "a head tied to the embedding, which Transformers' plan splits with it" };
  const split = (m: ModuleNode, p: ParamInfo): ParamInfo => {
    if (plan === 'transformers' && embedding(m)) return p;
    const dim = ROWWISE.has(m.name)
      ? p.name === 'weight'
        ? 1
        : -1
      : COLWISE.has(m.name) || VOCAB.has(m.name)
        ? 0
        : -1;
    if (dim < 0 || p.shape.length <= dim) return p;
    const s = p.shape.map((n, i) => (i === dim ? Math.ceil(n / t) : n));
    return { ...p, shape: s, numel: numelOf(s) };
  };
  const copy = (m: ModuleNode): ModuleNode => ({
    ...m,
    params: m.params.map((p) => split(m, p)),
    children: m.children.map(copy),
  });
  return { root: copy(root) };
}
