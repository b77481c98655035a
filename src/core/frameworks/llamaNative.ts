/** torchtune's and torchtitan's own Llama and Qwen definitions: their flavors' dimensions and their module trees. */
import type { ArchShape } from '../model/hf';
import type { LoadedModel } from '../model/load';
import { ModuleBuilder } from '../model/tree';

/** A Llama 3 architecture's dimensions, as torchtitan's `TransformerModelArgs` and torchtune's builders give them. */
export interface LlamaDims {
  dim: number;
  layers: number;
  heads: number;
  kvHeads: number;
  /** The SwiGLU hidden size. */
  ffn: number;
  vocab: number;
  tied: boolean;
  /** Biases on q_proj, k_proj and v_proj (Qwen2 and Qwen2.5: torchtune's `qwen2` builder). */
  qkvBias?: boolean;
  /** The attention head width when it is not dim / heads (Qwen3: 128). */
  headDim?: number;
  /** RMSNorms of each head's queries and keys (Qwen3: torchtune's `qwen3` builder, `q_norm` and `k_norm`). */
  qkNorm?: boolean;
  /** Every block's MLP a layer of routed experts (torchtitan's Qwen3 MoE flavors: `moe_enabled`, no shared expert). */
  moe?: { experts: number; topK: number; inter: number };
  /**
   * q, k and v from one `wqkv` (torchtitan's `FusedQKVLinear`): the same parameters, one matmul. The tree keeps
   * `wq`, `wk` and `wv` (the names torchtitan's checkpoints use); the activation model counts one matmul.
   */
  fusedQkv?: boolean;
}

/**
 * torchtitan's FeedForward hidden size: `int(2 * 4 * dim / 3)`, scaled by `ffn_dim_multiplier`, rounded up to a
 * multiple of `multiple_of` (torchtitan/models/llama3/model/model.py).
 */
export function titanFfnHidden(dim: number, multiplier: number | null, multipleOf: number): number {
  let h = Math.trunc((2 * 4 * dim) / 3);
  if (multiplier !== null) h = Math.trunc(multiplier * h);
  return multipleOf * Math.ceil(h / multipleOf);
}

/** torchtitan's Llama 3 flavors (`llama3_args` in torchtitan/models/llama3/__init__.py, v0.2). */
export const TITAN_FLAVORS: Record<
  string,
  {
    dim: number;
    layers: number;
    heads: number;
    kvHeads: number;
    mult: number | null;
    multipleOf: number;
    vocab: number;
  }
> = {
  debugmodel: { dim: 256, layers: 6, heads: 16, kvHeads: 16, mult: null, multipleOf: 256, vocab: 2048 },
  '8B': { dim: 4096, layers: 32, heads: 32, kvHeads: 8, mult: 1.3, multipleOf: 1024, vocab: 128256 },
  '70B': { dim: 8192, layers: 80, heads: 64, kvHeads: 8, mult: 1.3, multipleOf: 4096, vocab: 128256 },
  '405B': { dim: 16384, layers: 126, heads: 128, kvHeads: 8, mult: 1.2, multipleOf: 4096, vocab: 128256 },
};

export function titanDims(flavor: string): LlamaDims | undefined {
  // Attention variants ("8B_flex", "debugmodel_varlen_attn") share their base flavor's shapes.
  const base = TITAN_FLAVORS[flavor] ?? TITAN_FLAVORS[flavor.replace(/_(flex|varlen)(_attn)?$/, '')];
  if (!base) return undefined;
  return {
    dim: base.dim,
    layers: base.layers,
    heads: base.heads,
    kvHeads: base.kvHeads,
    ffn: titanFfnHidden(base.dim, base.mult, base.multipleOf),
    vocab: base.vocab,
    tied: false,
  };
}

const LLAMA3_8B: LlamaDims = {
  dim: 4096,
  layers: 32,
  heads: 32,
  kvHeads: 8,
  ffn: 14336,
  vocab: 128256,
  tied: false,
};
const LLAMA3_70B: LlamaDims = { ...LLAMA3_8B, dim: 8192, layers: 80, heads: 64, ffn: 28672 };
// torchtune/models/qwen2_5/_model_builders.py: base and instruct builders share their shapes (only
// max_seq_len differs); q, k and v carry biases.
const QWEN2_5_7B: LlamaDims = {
  dim: 3584,
  layers: 28,
  heads: 28,
  kvHeads: 4,
  ffn: 18944,
  vocab: 152064,
  tied: false,
  qkvBias: true,
};
const QWEN2_5_72B: LlamaDims = { ...QWEN2_5_7B, dim: 8192, layers: 80, heads: 64, kvHeads: 8, ffn: 29568 };
// torchtune/models/qwen2 and qwen2_5 `_model_builders.py`: the small sizes tie the output to the embedding.
const QWEN2_0_5B: LlamaDims = {
  ...QWEN2_5_7B,
  dim: 896,
  layers: 24,
  heads: 14,
  kvHeads: 2,
  ffn: 4864,
  vocab: 151936,
  tied: true,
};
const QWEN2_1_5B: LlamaDims = { ...QWEN2_0_5B, dim: 1536, layers: 28, heads: 12, ffn: 8960 };
const QWEN2_5_3B: LlamaDims = { ...QWEN2_0_5B, dim: 2048, layers: 36, heads: 16, ffn: 11008 };
const QWEN2_5_14B: LlamaDims = { ...QWEN2_5_7B, dim: 5120, layers: 48, heads: 40, kvHeads: 8, ffn: 13824 };
const QWEN2_5_32B: LlamaDims = { ...QWEN2_5_14B, layers: 64, ffn: 27648 };
// torchtune/models/llama2/_model_builders.py: the 7B builder leaves intermediate_dim to
// `scale_hidden_dim_for_mlp(4096)` = 256 x ceil(int(8 x 4096 / 3) / 256) = 11,008.
const LLAMA2_7B: LlamaDims = {
  dim: 4096,
  layers: 32,
  heads: 32,
  kvHeads: 32,
  ffn: 11008,
  vocab: 32000,
  tied: false,
};
// torchtune/models/mistral/_model_builders.py: mistral_7b.
const MISTRAL_7B: LlamaDims = { ...LLAMA2_7B, kvHeads: 8, ffn: 14336 };
// torchtune/models/qwen3/_model_builders.py: head_dim 128, no q/k/v biases, q_norm and k_norm; up to 4B the
// output is tied to the embedding.
const QWEN3_0_6B: LlamaDims = {
  dim: 1024,
  layers: 28,
  heads: 16,
  kvHeads: 8,
  ffn: 3072,
  vocab: 151936,
  tied: true,
  headDim: 128,
  qkNorm: true,
};
const QWEN3_1_7B: LlamaDims = { ...QWEN3_0_6B, dim: 2048, ffn: 6144 };
const QWEN3_4B: LlamaDims = { ...QWEN3_0_6B, dim: 2560, layers: 36, heads: 32, ffn: 9728 };
const QWEN3_8B: LlamaDims = { ...QWEN3_4B, dim: 4096, ffn: 12288, tied: false };
const QWEN3_14B: LlamaDims = { ...QWEN3_8B, dim: 5120, layers: 40, heads: 40, ffn: 17408 };
const QWEN3_32B: LlamaDims = { ...QWEN3_8B, dim: 5120, layers: 64, heads: 64, ffn: 25600 };

// torchtitan's Qwen3 debug flavor: its output tied to the embedding (`enable_weight_tying=True`).
const QWEN3_DEBUG: LlamaDims = {
  dim: 256,
  layers: 8,
  heads: 16,
  kvHeads: 8,
  ffn: 3072,
  vocab: 2048,
  tied: true,
  headDim: 128,
  qkNorm: true,
};

/**
 * torchtitan's dense Qwen3 flavors (`qwen3_configs` in torchtitan/models/qwen3/__init__.py: `_0_6b` to `_32b`, and
 * `_debugmodel`): head_dim 128, q and k norms, the output tied to the embedding up to 4B.
 */
export const TITAN_QWEN3: Record<string, LlamaDims> = {
  debugmodel: QWEN3_DEBUG,
  // The same shapes with q, k and v as separate projections (`_debugmodel_non_fused_qkv`, 2026); the other flavors
  // fuse them into one `wqkv` since then, which the tree here keeps separate: the same parameters and shards.
  debugmodel_non_fused_qkv: QWEN3_DEBUG,
  '0.6B': QWEN3_0_6B,
  '1.7B': QWEN3_1_7B,
  '4B': QWEN3_4B,
  '8B': QWEN3_8B,
  '14B': QWEN3_14B,
  '32B': QWEN3_32B,
  // The MoE flavors (`qwen3_args` in torchtitan v0.2's models/qwen3/__init__.py): every block a router and
  // experts of `moe_inter_dim`, top-k softmax routing, no shared expert.
  debugmodel_moe: { ...QWEN3_DEBUG, tied: false, moe: { experts: 64, topK: 8, inter: 768 } },
  '30B-A3B': {
    ...QWEN3_1_7B,
    layers: 48,
    heads: 32,
    kvHeads: 4,
    tied: false,
    moe: { experts: 128, topK: 8, inter: 768 },
  },
  '235B-A22B': {
    ...QWEN3_8B,
    layers: 94,
    heads: 64,
    kvHeads: 4,
    moe: { experts: 128, topK: 8, inter: 1536 },
  },
};

/**
 * torchtune's model builders fsdp-lens knows, by name, with the Hugging Face model of the same shapes: Llama 3
 * (torchtune/models/llama3: llama3_8b and llama3_70b have Llama 3.1's shapes; only RoPE scaling and the maximum
 * length differ, neither of which has parameters), Llama 3.1, 3.2 and 3.3, Llama 2, Mistral 7B, Qwen2, Qwen2.5,
 * Qwen3 (dense), Phi-3 mini and Phi-4, each from torchtune's `_model_builders.py`.
 */
export const TUNE_MODELS: Record<string, LlamaDims & { hf: string }> = {
  llama3_8b: { ...LLAMA3_8B, hf: 'meta-llama/Llama-3.1-8B' },
  llama3_70b: { ...LLAMA3_70B, hf: 'meta-llama/Llama-3.1-70B' },
  qwen2_5_7b_base: { ...QWEN2_5_7B, hf: 'Qwen/Qwen2.5-7B' },
  qwen2_5_7b_instruct: { ...QWEN2_5_7B, hf: 'Qwen/Qwen2.5-7B-Instruct' },
  qwen2_5_72b_base: { ...QWEN2_5_72B, hf: 'Qwen/Qwen2.5-72B' },
  qwen2_5_72b_instruct: { ...QWEN2_5_72B, hf: 'Qwen/Qwen2.5-72B-Instruct' },
  qwen2_5_0_5b: { ...QWEN2_0_5B, hf: 'Qwen/Qwen2.5-0.5B' },
  qwen2_5_1_5b_base: { ...QWEN2_1_5B, hf: 'Qwen/Qwen2.5-1.5B' },
  qwen2_5_1_5b_instruct: { ...QWEN2_1_5B, hf: 'Qwen/Qwen2.5-1.5B-Instruct' },
  qwen2_5_3b: { ...QWEN2_5_3B, hf: 'Qwen/Qwen2.5-3B' },
  qwen2_5_14b_base: { ...QWEN2_5_14B, hf: 'Qwen/Qwen2.5-14B' },
  qwen2_5_14b_instruct: { ...QWEN2_5_14B, hf: 'Qwen/Qwen2.5-14B-Instruct' },
  qwen2_5_32b_base: { ...QWEN2_5_32B, hf: 'Qwen/Qwen2.5-32B' },
  qwen2_5_32b_instruct: { ...QWEN2_5_32B, hf: 'Qwen/Qwen2.5-32B-Instruct' },
  qwen2_0_5b: { ...QWEN2_0_5B, hf: 'Qwen/Qwen2-0.5B' },
  qwen2_1_5b: { ...QWEN2_1_5B, hf: 'Qwen/Qwen2-1.5B' },
  qwen2_7b: { ...QWEN2_5_7B, hf: 'Qwen/Qwen2-7B' },
  llama2_7b: { ...LLAMA2_7B, hf: 'meta-llama/Llama-2-7b-hf' },
  llama2_13b: {
    ...LLAMA2_7B,
    dim: 5120,
    layers: 40,
    heads: 40,
    kvHeads: 40,
    ffn: 13824,
    hf: 'meta-llama/Llama-2-13b-hf',
  },
  llama2_70b: {
    ...LLAMA2_7B,
    dim: 8192,
    layers: 80,
    heads: 64,
    kvHeads: 8,
    ffn: 28672,
    hf: 'meta-llama/Llama-2-70b-hf',
  },
  mistral_7b: { ...MISTRAL_7B, hf: 'mistralai/Mistral-7B-v0.1' },
  // torchtune/models/phi3 and phi4 `_model_builders.py`: the `phi3` component splits q, k and v and the gate and up
  // projections (`w1`, `w3`), as torchtune's Llama does.
  phi3_mini: {
    dim: 3072,
    layers: 32,
    heads: 32,
    kvHeads: 32,
    ffn: 8192,
    vocab: 32064,
    tied: false,
    hf: 'microsoft/Phi-3-mini-4k-instruct',
  },
  phi4_14b: {
    dim: 5120,
    layers: 40,
    heads: 40,
    kvHeads: 10,
    ffn: 17920,
    vocab: 100352,
    tied: false,
    hf: 'microsoft/phi-4',
  },
  qwen3_0_6b_base: { ...QWEN3_0_6B, hf: 'Qwen/Qwen3-0.6B-Base' },
  qwen3_0_6b_instruct: { ...QWEN3_0_6B, hf: 'Qwen/Qwen3-0.6B' },
  qwen3_1_7b_base: { ...QWEN3_1_7B, hf: 'Qwen/Qwen3-1.7B-Base' },
  qwen3_1_7b_instruct: { ...QWEN3_1_7B, hf: 'Qwen/Qwen3-1.7B' },
  qwen3_4b_base: { ...QWEN3_4B, hf: 'Qwen/Qwen3-4B-Base' },
  qwen3_4b_instruct: { ...QWEN3_4B, hf: 'Qwen/Qwen3-4B' },
  qwen3_8b_base: { ...QWEN3_8B, hf: 'Qwen/Qwen3-8B-Base' },
  qwen3_8b_instruct: { ...QWEN3_8B, hf: 'Qwen/Qwen3-8B' },
  qwen3_14b_base: { ...QWEN3_14B, hf: 'Qwen/Qwen3-14B-Base' },
  qwen3_14b_instruct: { ...QWEN3_14B, hf: 'Qwen/Qwen3-14B' },
  qwen3_32b: { ...QWEN3_32B, hf: 'Qwen/Qwen3-32B' },
  llama3_1_8b: {
    dim: 4096,
    layers: 32,
    heads: 32,
    kvHeads: 8,
    ffn: 14336,
    vocab: 128256,
    tied: false,
    hf: 'meta-llama/Llama-3.1-8B',
  },
  llama3_1_70b: {
    dim: 8192,
    layers: 80,
    heads: 64,
    kvHeads: 8,
    ffn: 28672,
    vocab: 128256,
    tied: false,
    hf: 'meta-llama/Llama-3.1-70B',
  },
  llama3_1_405b: {
    dim: 16384,
    layers: 126,
    heads: 128,
    kvHeads: 8,
    ffn: 53248,
    vocab: 128256,
    tied: false,
    hf: 'meta-llama/Llama-3.1-405B',
  },
  llama3_3_70b: {
    dim: 8192,
    layers: 80,
    heads: 64,
    kvHeads: 8,
    ffn: 28672,
    vocab: 128256,
    tied: false,
    hf: 'meta-llama/Llama-3.3-70B-Instruct',
  },
  llama3_2_1b: {
    dim: 2048,
    layers: 16,
    heads: 32,
    kvHeads: 8,
    ffn: 8192,
    vocab: 128256,
    tied: true,
    hf: 'meta-llama/Llama-3.2-1B',
  },
  llama3_2_3b: {
    dim: 3072,
    layers: 28,
    heads: 24,
    kvHeads: 8,
    ffn: 8192,
    vocab: 128256,
    tied: true,
    hf: 'meta-llama/Llama-3.2-3B',
  },
};

/**
 * torchtitan's `MoE` (models/moe/moe.py, v0.2): `GroupedExperts` holding every expert's w1, w2 and w3 as one
 * parameter each with the expert as dim 0, a `TokenChoiceTopKRouter` whose `gate` scores the experts, `shared`
 * (DeepSeek-V3's `shared_experts`, one FeedForward of that hidden size) when given, and the load-balancing buffers
 * (`expert_bias`, with `load_balance_coeff`'s default 1e-3, and `tokens_per_expert`, fp32 per expert).
 */
export function titanMoe(m: ModuleBuilder, dim: number, experts: number, inter: number, shared = 0): void {
  m.child('experts', 'GroupedExperts', (x) =>
    x
      .param('w1', [experts, inter, dim])
      .param('w2', [experts, dim, inter])
      .param('w3', [experts, inter, dim]),
  );
  m.child('router', 'TokenChoiceTopKRouter', (r) => r.linear('gate', dim, experts));
  if (shared)
    m.child('shared_experts', 'FeedForward', (f) =>
      f.linear('w1', dim, shared).linear('w2', shared, dim).linear('w3', dim, shared),
    );
  m.buffer('expert_bias', [experts], 'float32');
  m.buffer('tokens_per_expert', [experts], 'float32', false);
}

/**
 * A Llama 3 model with the framework's own module names: torchtitan's `Transformer` (`tok_embeddings`,
 * `layers.N.attention.wq`, `feed_forward.w1`, `norm`, `output`) or torchtune's `TransformerDecoder`
 * (`layers.N.attn.q_proj`, `mlp.w1`, `sa_norm`, `output`; a tied output is not a module of its own).
 */
export function llamaNative(
  d: LlamaDims,
  naming: 'torchtitan' | 'torchtune',
  name: string,
  seqLen = 4096,
): LoadedModel {
  const hd = d.headDim ?? Math.floor(d.dim / d.heads);
  const titan = naming === 'torchtitan';
  const block = titan ? 'TransformerBlock' : 'TransformerSelfAttentionLayer';
  const root = ModuleBuilder.root(titan ? 'Transformer' : 'TransformerDecoder');
  root.embedding('tok_embeddings', d.vocab, d.dim);
  root.list('layers', d.layers, block, (b) => {
    b.child(titan ? 'attention' : 'attn', titan ? 'Attention' : 'MultiHeadAttention', (a) => {
      const bias = d.qkvBias ?? false;
      a.linear(titan ? 'wq' : 'q_proj', d.dim, d.heads * hd, bias);
      a.linear(titan ? 'wk' : 'k_proj', d.dim, d.kvHeads * hd, bias);
      a.linear(titan ? 'wv' : 'v_proj', d.dim, d.kvHeads * hd, bias);
      a.linear(titan ? 'wo' : 'output_proj', d.heads * hd, d.dim);
      if (d.qkNorm) {
        a.norm('q_norm', hd, 'RMSNorm');
        a.norm('k_norm', hd, 'RMSNorm');
      }
    });
    const moe = d.moe;
    if (moe) b.child('moe', 'MoE', (m) => titanMoe(m, d.dim, moe.experts, moe.inter));
    else
      b.child(titan ? 'feed_forward' : 'mlp', 'FeedForward', (f) => {
        f.linear('w1', d.dim, d.ffn);
        f.linear('w2', d.ffn, d.dim);
        f.linear('w3', d.dim, d.ffn);
      });
    b.norm(titan ? 'attention_norm' : 'sa_norm', d.dim, 'RMSNorm');
    b.norm(titan ? 'ffn_norm' : 'mlp_norm', d.dim, 'RMSNorm');
  });
  root.norm('norm', d.dim, 'RMSNorm');
  if (!d.tied) root.linear('output', d.dim, d.vocab);
  // Rotary tables: torchtitan's `freqs_cis` (complex64, seq_len x head_dim / 2, non-persistent).
  if (titan) root.buffer('freqs_cis', [seqLen, Math.floor(hd / 2), 2], 'float32', false);
  const shape: ArchShape = {
    modelType: d.moe ? 'qwen3_moe' : d.qkNorm ? 'qwen3' : d.qkvBias ? 'qwen2' : 'llama',
    hidden: d.dim,
    layers: d.layers,
    heads: d.heads,
    kvHeads: d.kvHeads,
    headDim: hd,
    intermediate: d.ffn,
    vocab: d.vocab,
    expertsPerToken: d.moe?.topK ?? 0,
    experts: d.moe?.experts ?? 0,
    denseLayers: d.moe ? 0 : d.layers,
    moeIntermediate: d.moe?.inter ?? 0,
    sharedExperts: 0,
    mlp: 'swiglu',
    norm: 'rmsnorm',
    normsPerBlock: 2,
    blockClass: block,
    tiedEmbeddings: d.tied,
    ...(d.qkNorm ? { qkNorm: true } : {}),
    ...(d.fusedQkv ? { fusedQkv: true } : {}),
  };
  return {
    root: root.node,
    shape,
    name,
    origin: `${naming} ${d.moe ? 'Qwen3 MoE' : d.qkNorm ? 'Qwen3' : d.qkvBias ? 'Qwen2' : 'Llama'} definition`,
  };
}
