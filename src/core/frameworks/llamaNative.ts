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

/**
 * torchtune's model builders fsdp-lens knows, by name, with the Hugging Face model of the same shapes: Llama 3
 * (torchtune/models/llama3: llama3_8b and llama3_70b have Llama 3.1's shapes; only RoPE scaling and the maximum
 * length differ, neither of which has parameters), Llama 3.1, 3.2 and 3.3, and Qwen2.5 7B and 72B.
 */
export const TUNE_MODELS: Record<string, LlamaDims & { hf: string }> = {
  llama3_8b: { ...LLAMA3_8B, hf: 'meta-llama/Llama-3.1-8B' },
  llama3_70b: { ...LLAMA3_70B, hf: 'meta-llama/Llama-3.1-70B' },
  qwen2_5_7b_base: { ...QWEN2_5_7B, hf: 'Qwen/Qwen2.5-7B' },
  qwen2_5_7b_instruct: { ...QWEN2_5_7B, hf: 'Qwen/Qwen2.5-7B-Instruct' },
  qwen2_5_72b_base: { ...QWEN2_5_72B, hf: 'Qwen/Qwen2.5-72B' },
  qwen2_5_72b_instruct: { ...QWEN2_5_72B, hf: 'Qwen/Qwen2.5-72B-Instruct' },
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
  const hd = Math.floor(d.dim / d.heads);
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
    });
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
    modelType: d.qkvBias ? 'qwen2' : 'llama',
    hidden: d.dim,
    layers: d.layers,
    heads: d.heads,
    kvHeads: d.kvHeads,
    headDim: hd,
    intermediate: d.ffn,
    vocab: d.vocab,
    expertsPerToken: 0,
    experts: 0,
    denseLayers: d.layers,
    moeIntermediate: 0,
    sharedExperts: 0,
    mlp: 'swiglu',
    norm: 'rmsnorm',
    normsPerBlock: 2,
    blockClass: block,
    tiedEmbeddings: d.tied,
  };
  return {
    root: root.node,
    shape,
    name,
    origin: `${naming} ${d.qkvBias ? 'Qwen2' : 'Llama 3'} definition`,
  };
}
