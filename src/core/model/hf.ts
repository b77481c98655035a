/**
 * Hugging Face config.json to the module tree Transformers builds, with PyTorch's names and shapes, and the
 * architecture's dimensions.
 */
import { ARCHITECTURES, SUPPORTED_MODEL_TYPES, type HfConfig } from './catalog';
import { ModelError, ModuleBuilder, type ModuleNode } from './tree';

/** A config.json that cannot be read as a model: the message says which field and why. */
export class ConfigError extends ModelError {}

/**
 * The largest value a count may take, far past every published model (the largest have 126 layers, 384 experts,
 * a vocabulary of 256,000 and a hidden size of 18,432) and small enough that the tree is built at once. A larger
 * value is a mistake or a trap, refused with the field's name.
 */
const PLAUSIBLE_MAX: Record<string, number> = {
  num_hidden_layers: 2048,
  n_layer: 2048,
  num_local_experts: 4096,
  num_experts: 4096,
  decoder_sparse_step: 2048,
  n_routed_experts: 4096,
  n_shared_experts: 64,
  num_experts_per_tok: 256,
  num_attention_heads: 4096,
  num_key_value_heads: 4096,
  n_head: 4096,
  head_dim: 8192,
  qk_nope_head_dim: 8192,
  qk_rope_head_dim: 8192,
  v_head_dim: 8192,
  kv_lora_rank: 65_536,
  q_lora_rank: 65_536,
  first_k_dense_replace: 2048,
  moe_layer_freq: 2048,
  hidden_size: 262_144,
  n_embd: 262_144,
  intermediate_size: 2_097_152,
  moe_intermediate_size: 2_097_152,
  n_inner: 2_097_152,
  vocab_size: 16_777_216,
  n_positions: 16_777_216,
};

/** What the estimator needs to know about a transformer beyond its module tree (for activations and FLOPs). */
export interface ArchShape {
  modelType: string;
  hidden: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  intermediate: number;
  vocab: number;
  /** Activated experts per token and experts per MoE layer (0 for dense models). */
  expertsPerToken: number;
  experts: number;
  /** Layers that use a dense MLP in an MoE model (DeepSeek's first_k_dense_replace). */
  denseLayers: number;
  moeIntermediate: number;
  sharedExperts: number;
  /** Multi-head latent attention (DeepSeek): dims of the compressed projections. */
  mla?: { qLoraRank: number | null; kvLoraRank: number; qkNope: number; qkRope: number; vHead: number };
  /** How the block computes, for the activation model. */
  mlp: 'swiglu' | 'gelu';
  norm: 'rmsnorm' | 'layernorm';
  /**
   * Norms per block: 2 (before attention and before the MLP), or 4 as Gemma 2 sandwiches each sublayer
   * (`input_layernorm`, `post_attention_layernorm` on the attention output, `pre_feedforward_layernorm`,
   * `post_feedforward_layernorm` on the MLP output).
   */
  normsPerBlock: number;
  /**
   * The RMSNorm scales in fp32 and casts afterwards (Gemma 2: `(x * (1 + w)).type_as(x)`), so it keeps the fp32
   * normalized tensor for the weight's gradient; Llama's casts first (`w * x.to(dtype)`) and keeps it in the
   * compute dtype.
   */
  normScalesInFp32?: boolean;
  /** Per-head RMSNorms on q and k before RoPE (Qwen3's `q_norm` / `k_norm` over head_dim). */
  qkNorm?: boolean;
  /** Gemma 2's tanh soft-capping: of the final logits (`final_logit_softcapping`), of the attention scores. */
  finalLogitSoftcap?: number | null;
  attnLogitSoftcap?: number | null;
  /** The decoder block's class name (what wrap policies name). */
  blockClass: string;
  tiedEmbeddings: boolean;
}

export interface HfModel {
  root: ModuleNode;
  shape: ArchShape;
}

/** Reads a positive integer field; `dflt` applies when absent (or null). */
function int(config: HfConfig, key: string, dflt?: number): number {
  const v = config[key];
  if (v === undefined || v === null) {
    if (dflt === undefined) throw new ConfigError(`config.json has no "${key}"`);
    return dflt;
  }
  if (typeof v !== 'number' || !Number.isFinite(v))
    throw new ConfigError(`config.json "${key}" must be a number, not ${JSON.stringify(v)}`);
  if (!Number.isInteger(v) || v < 1)
    throw new ConfigError(`config.json "${key}" must be a positive integer, not ${v}`);
  const max = PLAUSIBLE_MAX[key] ?? 2 ** 24;
  if (v > max)
    throw new ConfigError(
      `config.json "${key}" is ${v}, implausibly large: more than any real model has (at most ${max.toLocaleString('en-US')} is read)`,
    );
  return v;
}

function optInt(config: HfConfig, key: string): number | null {
  const v = config[key];
  return v === undefined || v === null ? null : int(config, key);
}

/** A positive number field, `dflt` when absent; null when the config sets it to null (the feature is off). */
function optPositive(config: HfConfig, key: string, dflt: number | null): number | null {
  const v = config[key];
  if (v === undefined) return dflt;
  if (v === null) return null;
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0)
    throw new ConfigError(`config.json "${key}" must be a positive number or null, not ${JSON.stringify(v)}`);
  return v;
}

function bool(config: HfConfig, key: string, dflt: boolean): boolean {
  const v = config[key];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'boolean')
    throw new ConfigError(`config.json "${key}" must be true or false, not ${JSON.stringify(v)}`);
  return v;
}

/** `tie_word_embeddings` when a config omits it: each Transformers config class has its own default. */
const TIE_DEFAULT: Record<string, boolean> = { gpt2: true, gemma2: true };

/** Builds the module tree Transformers instantiates for a config (the `*ForCausalLM` class), with real names. */
export function modelFromHfConfig(config: HfConfig): HfModel {
  if (typeof config !== 'object' || config === null || Array.isArray(config))
    throw new ConfigError('config.json is not a JSON object');
  const type = config.model_type;
  if (typeof type !== 'string')
    throw new ConfigError(`config.json has no "model_type"; supported: ${SUPPORTED_MODEL_TYPES.join(', ')}`);
  switch (type) {
    case 'llama':
    case 'mistral':
    case 'qwen2':
    case 'qwen3':
    case 'gemma2':
    case 'mixtral':
    case 'qwen3_moe':
    case 'phi3':
      return llamaFamily(config, type);
    case 'gpt2':
      return gpt2(config);
    case 'deepseek_v3':
      return deepseekV3(config);
    default:
      throw new ConfigError(
        `model_type "${type}" is not supported; supported: ${SUPPORTED_MODEL_TYPES.join(', ')}`,
      );
  }
}

const PREFIX: Record<string, string> = {
  llama: 'Llama',
  mistral: 'Mistral',
  qwen2: 'Qwen2',
  qwen3: 'Qwen3',
  gemma2: 'Gemma2',
  mixtral: 'Mixtral',
  qwen3_moe: 'Qwen3Moe',
  phi3: 'Phi3',
};

/** A router over `experts` experts of three projections each, named and ordered as the model writes them. */
function sparseMoe(
  layer: ModuleBuilder,
  name: string,
  cls: string,
  hidden: number,
  experts: number,
  expert: string,
  projections: [string, number, number][],
): void {
  layer.child(name, cls, (moe) => {
    moe.linear('gate', hidden, experts);
    moe.list('experts', experts, expert, (e) => {
      for (const [n, from, to] of projections) e.linear(n, from, to);
    });
  });
}

/**
 * Llama and its relatives (`model.embed_tokens`, `model.layers.N.{self_attn, mlp, *_layernorm}`, `model.norm`,
 * `lm_head`). Differences: Qwen2 has q/k/v biases; Qwen3 per-head q/k norms; Gemma 2 four norms per block;
 * Mixtral a router and experts (`block_sparse_moe`); Qwen3-MoE Qwen3's attention and, in each layer
 * `Qwen3MoeDecoderLayer.__init__` makes sparse (not in `mlp_only_layers`, `(i + 1) % decoder_sparse_step == 0`), a
 * router and `num_experts` experts of `moe_intermediate_size` under `mlp`, no shared expert; Phi-3 fused `qkv_proj`
 * and `gate_up_proj`.
 */
function llamaFamily(config: HfConfig, type: string): HfModel {
  const P = PREFIX[type]!;
  const d = int(config, 'hidden_size');
  const layers = int(config, 'num_hidden_layers');
  const nh = int(config, 'num_attention_heads');
  const nkv = int(config, 'num_key_value_heads', nh);
  if (d % nh !== 0 && (config.head_dim === undefined || config.head_dim === null))
    throw new ConfigError(`hidden_size ${d} is not a multiple of num_attention_heads ${nh}`);
  const hd = int(config, 'head_dim', type === 'gemma2' ? 256 : Math.floor(d / nh));
  const I = int(config, 'intermediate_size');
  const V = int(config, 'vocab_size');
  const tied = bool(config, 'tie_word_embeddings', TIE_DEFAULT[type] ?? false);
  const attnBias = type === 'qwen2' ? true : bool(config, 'attention_bias', false);
  const mlpBias = bool(config, 'mlp_bias', false);
  const qwenMoe = type === 'qwen3_moe';
  const E =
    type === 'mixtral' ? int(config, 'num_local_experts', 8) : qwenMoe ? int(config, 'num_experts') : 0;
  const topK =
    type === 'mixtral'
      ? int(config, 'num_experts_per_tok', 2)
      : qwenMoe
        ? int(config, 'num_experts_per_tok')
        : 0;
  const moeI = qwenMoe ? int(config, 'moe_intermediate_size') : I;
  const sparseStep = qwenMoe ? int(config, 'decoder_sparse_step', 1) : 1;
  const mlpOnly = new Set(
    qwenMoe && Array.isArray(config.mlp_only_layers)
      ? config.mlp_only_layers.filter((x): x is number => Number.isInteger(x))
      : [],
  );
  const sparse = (i: number) => E > 0 && !mlpOnly.has(i) && (i + 1) % sparseStep === 0;
  const norm = `${P}RMSNorm`;

  const root = ModuleBuilder.root(`${P}ForCausalLM`);
  root.child('model', `${P}Model`, (m) => {
    m.embedding('embed_tokens', V, d);
    m.list('layers', layers, `${P}DecoderLayer`, (layer, i) => {
      layer.child('self_attn', `${P}Attention`, (a) => {
        if (type === 'phi3') a.linear('qkv_proj', d, nh * hd + 2 * nkv * hd);
        else {
          // Qwen2 always has q/k/v biases and no o_proj bias.
          a.linear('q_proj', d, nh * hd, attnBias);
          a.linear('k_proj', d, nkv * hd, attnBias);
          a.linear('v_proj', d, nkv * hd, attnBias);
        }
        a.linear('o_proj', nh * hd, d, type === 'qwen2' ? false : attnBias);
        if (type === 'qwen3' || qwenMoe) {
          a.norm('q_norm', hd, norm);
          a.norm('k_norm', hd, norm);
        }
      });
      if (type === 'mixtral')
        sparseMoe(layer, 'block_sparse_moe', 'MixtralSparseMoeBlock', d, E, 'MixtralBlockSparseTop2MLP', [
          ['w1', d, I],
          ['w2', I, d],
          ['w3', d, I],
        ]);
      else if (qwenMoe && sparse(i))
        sparseMoe(layer, 'mlp', 'Qwen3MoeSparseMoeBlock', d, E, 'Qwen3MoeMLP', [
          ['gate_proj', d, moeI],
          ['up_proj', d, moeI],
          ['down_proj', moeI, d],
        ]);
      else if (type === 'phi3') {
        layer.child('mlp', 'Phi3MLP', (mlp) => {
          mlp.linear('gate_up_proj', d, 2 * I);
          mlp.linear('down_proj', I, d);
        });
      } else {
        layer.child('mlp', `${P}MLP`, (mlp) => {
          mlp.linear('gate_proj', d, I, mlpBias);
          mlp.linear('up_proj', d, I, mlpBias);
          mlp.linear('down_proj', I, d, mlpBias);
        });
      }
      layer.norm('input_layernorm', d, norm);
      layer.norm('post_attention_layernorm', d, norm);
      if (type === 'gemma2') {
        layer.norm('pre_feedforward_layernorm', d, norm);
        layer.norm('post_feedforward_layernorm', d, norm);
      }
    });
    m.norm('norm', d, norm);
    // Rotary inverse frequencies: a non-persistent fp32 buffer of head_dim / 2 values.
    m.child('rotary_emb', `${P}RotaryEmbedding`, (r) =>
      r.buffer('inv_freq', [Math.floor(hd / 2)], 'float32', false),
    );
  });
  root.linear('lm_head', d, V);
  if (tied) root.tie('lm_head', 'weight', 'model.embed_tokens.weight');

  return {
    root: root.node,
    shape: {
      modelType: type,
      hidden: d,
      layers,
      heads: nh,
      kvHeads: nkv,
      headDim: hd,
      intermediate: I,
      vocab: V,
      expertsPerToken: topK,
      experts: E,
      denseLayers: Array.from({ length: layers }, (_, i) => i).filter((i) => !sparse(i)).length,
      moeIntermediate: E ? moeI : 0,
      sharedExperts: 0,
      mlp: 'swiglu',
      norm: 'rmsnorm',
      normsPerBlock: type === 'gemma2' ? 4 : 2,
      ...(type === 'gemma2'
        ? {
            normScalesInFp32: true,
            // Gemma2Config's defaults: final_logit_softcapping=30.0, attn_logit_softcapping=50.0.
            finalLogitSoftcap: optPositive(config, 'final_logit_softcapping', 30),
            attnLogitSoftcap: optPositive(config, 'attn_logit_softcapping', 50),
          }
        : {}),
      ...(type === 'qwen3' || qwenMoe ? { qkNorm: true } : {}),
      blockClass: ARCHITECTURES[type]!.block,
      tiedEmbeddings: tied,
    },
  };
}

/**
 * GPT-2 (`transformer.wte`, `transformer.wpe`, `transformer.h.N`, `transformer.ln_f`, tied `lm_head`). Its
 * projections are `Conv1D`, whose weight is `[in, out]` (the transpose of `nn.Linear`'s), so dim 0 is the input.
 */
function gpt2(config: HfConfig): HfModel {
  const d = int(config, 'n_embd', 768);
  const layers = int(config, 'n_layer', 12);
  const nh = int(config, 'n_head', 12);
  const positions = int(config, 'n_positions', 1024);
  const inner = optInt(config, 'n_inner') ?? 4 * d;
  const V = int(config, 'vocab_size', 50257);
  const tied = bool(config, 'tie_word_embeddings', true);
  const conv = (b: ModuleBuilder, name: string, nx: number, nf: number) =>
    b.child(name, 'Conv1D', (c) => c.param('weight', [nx, nf]).param('bias', [nf]));
  const root = ModuleBuilder.root('GPT2LMHeadModel');
  root.child('transformer', 'GPT2Model', (t) => {
    t.embedding('wte', V, d);
    t.embedding('wpe', positions, d);
    t.list('h', layers, 'GPT2Block', (block) => {
      block.norm('ln_1', d, 'LayerNorm', true);
      block.child('attn', 'GPT2Attention', (a) => {
        conv(a, 'c_attn', d, 3 * d);
        conv(a, 'c_proj', d, d);
      });
      block.norm('ln_2', d, 'LayerNorm', true);
      block.child('mlp', 'GPT2MLP', (m) => {
        conv(m, 'c_fc', d, inner);
        conv(m, 'c_proj', inner, d);
      });
    });
    t.norm('ln_f', d, 'LayerNorm', true);
  });
  root.linear('lm_head', d, V);
  if (tied) root.tie('lm_head', 'weight', 'transformer.wte.weight');
  return {
    root: root.node,
    shape: {
      modelType: 'gpt2',
      hidden: d,
      layers,
      heads: nh,
      kvHeads: nh,
      headDim: Math.floor(d / nh),
      intermediate: inner,
      vocab: V,
      expertsPerToken: 0,
      experts: 0,
      denseLayers: layers,
      moeIntermediate: 0,
      sharedExperts: 0,
      mlp: 'gelu',
      norm: 'layernorm',
      normsPerBlock: 2,
      blockClass: 'GPT2Block',
      tiedEmbeddings: tied,
    },
  };
}

/**
 * DeepSeek-V3 as Transformers instantiates it: multi-head latent attention, `first_k_dense_replace` dense layers,
 * then MoE layers of routed experts plus shared experts and a top-k router. The multi-token-prediction layer of
 * the released checkpoint is not part of the model class.
 */
function deepseekV3(config: HfConfig): HfModel {
  const d = int(config, 'hidden_size');
  const layers = int(config, 'num_hidden_layers');
  const nh = int(config, 'num_attention_heads');
  const nkv = int(config, 'num_key_value_heads', nh);
  const I = int(config, 'intermediate_size');
  const moeI = int(config, 'moe_intermediate_size');
  const V = int(config, 'vocab_size');
  const qLora = optInt(config, 'q_lora_rank');
  const kvLora = int(config, 'kv_lora_rank');
  const nope = int(config, 'qk_nope_head_dim');
  const rope = int(config, 'qk_rope_head_dim');
  const vHead = int(config, 'v_head_dim');
  const E = int(config, 'n_routed_experts');
  const shared = int(config, 'n_shared_experts', 1);
  const topK = int(config, 'num_experts_per_tok');
  const firstDense = optInt(config, 'first_k_dense_replace') ?? 0;
  const freq = int(config, 'moe_layer_freq', 1);
  const bias = bool(config, 'attention_bias', false);
  const tied = bool(config, 'tie_word_embeddings', false);
  const qkHead = nope + rope;
  const mlp = (b: ModuleBuilder, inner: number) => {
    b.linear('gate_proj', d, inner);
    b.linear('up_proj', d, inner);
    b.linear('down_proj', inner, d);
  };
  const isMoe = (i: number) => i >= firstDense && i % freq === 0;
  const root = ModuleBuilder.root('DeepseekV3ForCausalLM');
  root.child('model', 'DeepseekV3Model', (m) => {
    m.embedding('embed_tokens', V, d);
    m.list('layers', layers, 'DeepseekV3DecoderLayer', (layer, i) => {
      layer.child('self_attn', 'DeepseekV3Attention', (a) => {
        if (qLora === null) a.linear('q_proj', d, nh * qkHead);
        else {
          a.linear('q_a_proj', d, qLora, bias);
          a.norm('q_a_layernorm', qLora, 'DeepseekV3RMSNorm');
          a.linear('q_b_proj', qLora, nh * qkHead);
        }
        a.linear('kv_a_proj_with_mqa', d, kvLora + rope, bias);
        a.norm('kv_a_layernorm', kvLora, 'DeepseekV3RMSNorm');
        a.linear('kv_b_proj', kvLora, nh * (nope + vHead));
        a.linear('o_proj', nh * vHead, d, bias);
      });
      if (isMoe(i)) {
        layer.child('mlp', 'DeepseekV3MoE', (moe) => {
          moe.list('experts', E, 'DeepseekV3MLP', (e) => mlp(e, moeI));
          moe.child('gate', 'DeepseekV3TopkRouter', (g) => {
            g.param('weight', [E, d]);
            g.buffer('e_score_correction_bias', [E], 'float32');
          });
          moe.child('shared_experts', 'DeepseekV3MLP', (s) => mlp(s, moeI * shared));
        });
      } else layer.child('mlp', 'DeepseekV3MLP', (b) => mlp(b, I));
      layer.norm('input_layernorm', d, 'DeepseekV3RMSNorm');
      layer.norm('post_attention_layernorm', d, 'DeepseekV3RMSNorm');
    });
    m.norm('norm', d, 'DeepseekV3RMSNorm');
    m.child('rotary_emb', 'DeepseekV3RotaryEmbedding', (r) =>
      r.buffer('inv_freq', [Math.floor(rope / 2)], 'float32', false),
    );
  });
  root.linear('lm_head', d, V);
  if (tied) root.tie('lm_head', 'weight', 'model.embed_tokens.weight');
  const moeLayers = Array.from({ length: layers }, (_, i) => i).filter(isMoe).length;
  return {
    root: root.node,
    shape: {
      modelType: 'deepseek_v3',
      hidden: d,
      layers,
      heads: nh,
      kvHeads: nkv,
      headDim: qkHead,
      intermediate: I,
      vocab: V,
      expertsPerToken: topK,
      experts: E,
      denseLayers: layers - moeLayers,
      moeIntermediate: moeI,
      sharedExperts: shared,
      mla: { qLoraRank: qLora, kvLoraRank: kvLora, qkNope: nope, qkRope: rope, vHead },
      mlp: 'swiglu',
      norm: 'rmsnorm',
      normsPerBlock: 2,
      blockClass: 'DeepseekV3DecoderLayer',
      tiedEmbeddings: tied,
    },
  };
}
