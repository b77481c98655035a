/** torchtune's own Gemma and Gemma 2 definitions: their builders' dimensions and their module trees. */
import type { ArchShape } from '../model/hf';
import type { LoadedModel } from '../model/load';
import { ModuleBuilder } from '../model/tree';

/** A Gemma builder's dimensions, as torchtune's `gemma` / `gemma2` component builders take them. */
export interface GemmaDims {
  /** 1 for torchtune.models.gemma, 2 for torchtune.models.gemma2. */
  version: 1 | 2;
  dim: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  /** The GeGLU hidden size (`intermediate_dim`). */
  ffn: number;
  vocab: number;
  /** The Hugging Face model of the same shapes. */
  hf: string;
}

const VOCAB = 256_000;

/**
 * torchtune's Gemma builders (torchtune/models/gemma/_model_builders.py and gemma2/_model_builders.py), their
 * `lora_` and `qlora_` variants sharing the shapes.
 */
export const TUNE_GEMMA: Record<string, GemmaDims> = {
  gemma_2b: {
    version: 1,
    dim: 2048,
    layers: 18,
    heads: 8,
    kvHeads: 1,
    headDim: 256,
    ffn: 16384,
    vocab: VOCAB,
    hf: 'google/gemma-2b',
  },
  gemma_7b: {
    version: 1,
    dim: 3072,
    layers: 28,
    heads: 16,
    kvHeads: 16,
    headDim: 256,
    ffn: 24576,
    vocab: VOCAB,
    hf: 'google/gemma-7b',
  },
  gemma2_2b: {
    version: 2,
    dim: 2304,
    layers: 26,
    heads: 8,
    kvHeads: 4,
    headDim: 256,
    ffn: 9216,
    vocab: VOCAB,
    hf: 'google/gemma-2-2b',
  },
  gemma2_9b: {
    version: 2,
    dim: 3584,
    layers: 42,
    heads: 16,
    kvHeads: 8,
    headDim: 256,
    ffn: 14336,
    vocab: VOCAB,
    hf: 'google/gemma-2-9b',
  },
  gemma2_27b: {
    version: 2,
    dim: 4608,
    layers: 46,
    heads: 32,
    kvHeads: 16,
    headDim: 128,
    ffn: 36864,
    vocab: VOCAB,
    hf: 'google/gemma-2-27b',
  },
};

/** torchtune's `GemmaRMSNorm`: a `scale` applied as `1 + scale` to the fp32 normalized input, cast afterwards. */
function gemmaNorm(b: ModuleBuilder, name: string, dim: number): void {
  b.child(name, 'GemmaRMSNorm', (n) => n.param('scale', [dim]));
}

/**
 * A Gemma model with torchtune's names (`gemma` / `gemma2` in `_component_builders.py`): `tok_embeddings`
 * (`GemmaNormEmbeddings`), `layers.N` of `TransformerSelfAttentionLayer` with `attn.q_proj` ... `output_proj`,
 * `mlp.gate_proj` / `up_proj` / `down_proj` (GeGLU), `sa_norm` and `mlp_norm` (and Gemma 2's `sa_scale` and
 * `mlp_scale` on each sublayer's output), the final `norm`, and the output tied to the embedding (`TiedLinear`, no
 * module of its own). Gemma 2's attention (`Gemma2Attention`) soft-caps its scores, so it computes them itself
 * rather than through `scaled_dot_product_attention`.
 */
export function gemmaNative(d: GemmaDims, name: string): LoadedModel {
  const block = 'TransformerSelfAttentionLayer';
  const root = ModuleBuilder.root('TransformerDecoder');
  root.embedding('tok_embeddings', d.vocab, d.dim, 'GemmaNormEmbeddings');
  root.list('layers', d.layers, block, (b) => {
    b.child('attn', d.version === 2 ? 'Gemma2Attention' : 'MultiHeadAttention', (a) => {
      a.linear('q_proj', d.dim, d.heads * d.headDim);
      a.linear('k_proj', d.dim, d.kvHeads * d.headDim);
      a.linear('v_proj', d.dim, d.kvHeads * d.headDim);
      a.linear('output_proj', d.heads * d.headDim, d.dim);
    });
    b.child('mlp', 'FeedForward', (f) => {
      f.linear('gate_proj', d.dim, d.ffn);
      f.linear('down_proj', d.ffn, d.dim);
      f.linear('up_proj', d.dim, d.ffn);
    });
    gemmaNorm(b, 'sa_norm', d.dim);
    gemmaNorm(b, 'mlp_norm', d.dim);
    if (d.version === 2) {
      gemmaNorm(b, 'sa_scale', d.dim);
      gemmaNorm(b, 'mlp_scale', d.dim);
    }
  });
  if (d.version === 2) root.child('norm', 'Gemma2FinalNorm', (n) => gemmaNorm(n, 'rms_norm', d.dim));
  else gemmaNorm(root, 'norm', d.dim);
  const shape: ArchShape = {
    modelType: d.version === 2 ? 'gemma2' : 'gemma',
    hidden: d.dim,
    layers: d.layers,
    heads: d.heads,
    kvHeads: d.kvHeads,
    headDim: d.headDim,
    intermediate: d.ffn,
    vocab: d.vocab,
    expertsPerToken: 0,
    experts: 0,
    denseLayers: d.layers,
    moeIntermediate: 0,
    sharedExperts: 0,
    // GeGLU keeps the same tensors as SwiGLU: gate, its activation, up, the product.
    mlp: 'swiglu',
    norm: 'rmsnorm',
    normsPerBlock: d.version === 2 ? 4 : 2,
    normScalesInFp32: true,
    // gemma2_*: `hidden_capping_value=30.0` caps the attention scores (`Gemma2Attention(softcapping=...)`),
    // `final_capping_value=50.0` the final norm's output, not the logits (`Gemma2FinalNorm`).
    ...(d.version === 2 ? { attnLogitSoftcap: 30, finalNormSoftcap: true } : {}),
    blockClass: block,
    tiedEmbeddings: true,
  };
  return {
    root: root.node,
    shape,
    name,
    origin: `torchtune Gemma${d.version === 2 ? ' 2' : ''} definition`,
  };
}
