/** torchtitan's own DeepSeek-V3 definition: its flavors' dimensions and their module trees. */
import type { ArchShape } from '../model/hf';
import type { LoadedModel } from '../model/load';
import { ModuleBuilder } from '../model/tree';
import { titanMoe } from './llamaNative';

/** A DeepSeek-V3 flavor's dimensions, as torchtitan's `DeepSeekV3ModelArgs` and `MoEArgs` give them. */
export interface DeepSeekDims {
  vocab: number;
  dim: number;
  /** The dense layers' FeedForward hidden size (`inter_dim`). */
  inter: number;
  /** Each expert's hidden size (`moe_inter_dim`). */
  moeInter: number;
  layers: number;
  /** The first layers with a dense FeedForward instead of a MoE (`n_dense_layers`). */
  denseLayers: number;
  heads: number;
  experts: number;
  sharedExperts: number;
  topK: number;
  /** 0: queries projected directly (`wq`); else through a low-rank `wq_a`, `q_norm`, `wq_b`. */
  qLoraRank: number;
  kvLoraRank: number;
  qkNope: number;
  qkRope: number;
  vHead: number;
}

const DEBUG: DeepSeekDims = {
  vocab: 2048,
  dim: 256,
  inter: 1024,
  moeInter: 256,
  layers: 6,
  denseLayers: 1,
  heads: 16,
  experts: 8,
  sharedExperts: 2,
  topK: 3,
  qLoraRank: 0,
  kvLoraRank: 512,
  qkNope: 128,
  qkRope: 64,
  vHead: 128,
};

/**
 * torchtitan's DeepSeek-V3 flavors (`deepseekv3_args` in torchtitan/models/deepseek_v3/__init__.py, v0.2; the
 * same dimensions in the later `deepseekv3_configs`). The 16B flavor has DeepSeek-V2-Lite's shapes, the 236B
 * DeepSeek-V2's, the 671B DeepSeek-V3's.
 */
export const TITAN_DEEPSEEK_V3: Record<string, DeepSeekDims> = {
  debugmodel: DEBUG,
  debugmodel_flex_attn: DEBUG,
  '16B': {
    vocab: 102400,
    dim: 2048,
    inter: 10944,
    moeInter: 1408,
    layers: 27,
    denseLayers: 1,
    heads: 16,
    experts: 64,
    sharedExperts: 2,
    topK: 6,
    qLoraRank: 0,
    kvLoraRank: 512,
    qkNope: 128,
    qkRope: 64,
    vHead: 128,
  },
  '236B': {
    vocab: 102400,
    dim: 5120,
    inter: 12288,
    moeInter: 1536,
    layers: 60,
    denseLayers: 1,
    heads: 128,
    experts: 160,
    sharedExperts: 2,
    topK: 6,
    qLoraRank: 1536,
    kvLoraRank: 512,
    qkNope: 128,
    qkRope: 64,
    vHead: 128,
  },
  '671B': {
    vocab: 129280,
    dim: 7168,
    inter: 18432,
    moeInter: 2048,
    layers: 61,
    denseLayers: 3,
    heads: 128,
    experts: 256,
    sharedExperts: 1,
    topK: 8,
    qLoraRank: 1536,
    kvLoraRank: 512,
    qkNope: 128,
    qkRope: 64,
    vHead: 128,
  },
};

/**
 * torchtitan's `DeepSeekV3Model` (models/deepseek_v3/model/model.py, v0.2): `tok_embeddings`, `layers.N` of
 * `TransformerBlock` with multi-head latent `attention` (`wq`, or `wq_a`, `q_norm`, `wq_b`; `wkv_a`, `kv_norm`,
 * `wkv_b`, `wo`), `attention_norm` and `ffn_norm`, then a `feed_forward` in the first `n_dense_layers` and a
 * `moe` after (`titanMoe`, with `shared_experts` as one FeedForward of `moe_inter_dim x num_shared_experts`),
 * `norm`, an untied `output`, and `freqs_cis` (complex64, `max_seq_len` 16,384 x qk_rope_head_dim / 2).
 */
export function deepseekNative(d: DeepSeekDims, name: string): LoadedModel {
  const root = ModuleBuilder.root('DeepSeekV3Model');
  const qkHead = d.qkNope + d.qkRope;
  root.embedding('tok_embeddings', d.vocab, d.dim);
  const ffn = (f: ModuleBuilder, hidden: number) =>
    f.linear('w1', d.dim, hidden).linear('w2', hidden, d.dim).linear('w3', d.dim, hidden);
  root.list('layers', d.layers, 'TransformerBlock', (b, i) => {
    b.child('attention', 'Attention', (a) => {
      if (d.qLoraRank === 0) a.linear('wq', d.dim, d.heads * qkHead);
      else {
        a.linear('wq_a', d.dim, d.qLoraRank);
        a.norm('q_norm', d.qLoraRank, 'RMSNorm');
        a.linear('wq_b', d.qLoraRank, d.heads * qkHead);
      }
      a.linear('wkv_a', d.dim, d.kvLoraRank + d.qkRope);
      a.norm('kv_norm', d.kvLoraRank, 'RMSNorm');
      a.linear('wkv_b', d.kvLoraRank, d.heads * (d.qkNope + d.vHead));
      a.linear('wo', d.heads * d.vHead, d.dim);
    });
    b.norm('attention_norm', d.dim, 'RMSNorm');
    b.norm('ffn_norm', d.dim, 'RMSNorm');
    if (i < d.denseLayers) b.child('feed_forward', 'FeedForward', (f) => ffn(f, d.inter));
    else
      b.child('moe', 'MoE', (m) => titanMoe(m, d.dim, d.experts, d.moeInter, d.moeInter * d.sharedExperts));
  });
  root.norm('norm', d.dim, 'RMSNorm');
  root.linear('output', d.dim, d.vocab);
  root.buffer('freqs_cis', [16384, Math.floor(d.qkRope / 2), 2], 'float32', false);
  const shape: ArchShape = {
    modelType: 'deepseek_v3',
    hidden: d.dim,
    layers: d.layers,
    heads: d.heads,
    kvHeads: d.heads,
    headDim: qkHead,
    intermediate: d.inter,
    vocab: d.vocab,
    expertsPerToken: d.topK,
    experts: d.experts,
    denseLayers: d.denseLayers,
    moeIntermediate: d.moeInter,
    sharedExperts: d.sharedExperts,
    mla: {
      qLoraRank: d.qLoraRank || null,
      kvLoraRank: d.kvLoraRank,
      qkNope: d.qkNope,
      qkRope: d.qkRope,
      vHead: d.vHead,
    },
    mlp: 'swiglu',
    norm: 'rmsnorm',
    normsPerBlock: 2,
    blockClass: 'TransformerBlock',
    tiedEmbeddings: false,
  };
  return { root: root.node, shape, name, origin: 'torchtitan DeepSeek-V3 definition' };
}
