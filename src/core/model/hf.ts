/**
 * Hugging Face config.json to the module tree Transformers builds, with PyTorch's names and shapes, and the
 * architecture's dimensions.
 */
import { ARCHITECTURES, SUPPORTED_MODEL_TYPES, type HfConfig } from './catalog';
import { ModuleBuilder, type ModuleNode } from './tree';
import { bool, ConfigError, DENSE, fraction, indexList, int, optInt, optPositive } from './hfFields';
import { gemma3 } from './hfGemma3';
import { llama4 } from './hfLlama4';
import { t5 } from './hfT5';

export { ConfigError } from './hfFields';

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
  /**
   * q, k and v from one matmul (torchtitan's `FusedQKVLinear.wqkv`, its flavors' default since June 2026): one
   * `aten.mm` where separate projections make three, which changes what a per-op checkpoint policy keeps.
   */
  fusedQkv?: boolean;
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
  /**
   * RMSNorms on q and k before RoPE: Qwen3's and Gemma 3's `q_norm` / `k_norm` over each head's head_dim, OLMo 2's
   * over the whole projection (the same elements, a·head_dim and h_kv, one norm instead of one per head).
   */
  qkNorm?: boolean;
  /** Gemma 2's tanh soft-capping: of the final logits (`final_logit_softcapping`), of the attention scores. */
  finalLogitSoftcap?: number | null;
  attnLogitSoftcap?: number | null;
  /**
   * A tanh soft-cap of the final norm's output, the hidden states before the head (torchtune's `Gemma2FinalNorm`
   * runs its `TanhSoftCapping` there, where Transformers caps the logits).
   */
  finalNormSoftcap?: boolean;
  /** The decoder block's class name (what wrap policies name). */
  blockClass: string;
  tiedEmbeddings: boolean;
  /**
   * Why the activation model (a decoder-only stack of these blocks, activations.ts) does not describe this model's
   * step: an encoder-decoder's two stacks and cross-attention, a forward that runs every expert on every token.
   * The estimate then counts no activations, logits or loss for it, and says so among the parts not counted.
   */
  activationsNotModelled?: string;
  /**
   * Parts whose activations the activation model leaves out though it counts the rest (a multimodal model's
   * vision tower): the peak is then a lower bound, the parameters exact.
   */
  activationsLeftOut?: string[];
}

export interface HfModel {
  root: ModuleNode;
  shape: ArchShape;
  /** Parameters the tree leaves out, in words (the loaded model's `gaps`): every figure is then a lower bound. */
  gaps?: string[];
}

/** `tie_word_embeddings` when a config omits it: each Transformers config class has its own default. */
const TIE_DEFAULT: Record<string, boolean> = { gpt2: true, gemma2: true };

/**
 * Builds the module tree Transformers instantiates for a config (the `*ForCausalLM` class, or the
 * `*ForConditionalGeneration` class of a multimodal or encoder-decoder model), with real names.
 */
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
    case 'olmo2':
      return llamaFamily(config, type);
    case 'gpt2':
      return gpt2(config);
    case 'gpt_neox':
      return gptNeox(config);
    case 'deepseek_v2':
    case 'deepseek_v3':
      return deepseek(config, type);
    case 'gemma3':
    case 'gemma3_text':
      return gemma3(config, type);
    case 'llama4':
    case 'llama4_text':
      return llama4(config, type);
    case 't5':
      return t5(config);
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
  olmo2: 'Olmo2',
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
 * and `gate_up_proj`. OLMo 2 (`Olmo2DecoderLayer`, `Olmo2Attention` in modeling_olmo2.py) normalizes after each
 * sublayer instead of before it (`post_attention_layernorm` on the attention output, `post_feedforward_layernorm`
 * on the MLP output, no `input_layernorm`), and its `q_norm` / `k_norm` span the whole q and k projections
 * (num_heads·head_dim and num_key_value_heads·head_dim), not one head.
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
  const mlpOnly = new Set((qwenMoe ? indexList(config, 'mlp_only_layers') : null) ?? []);
  const sparse = (i: number) => E > 0 && !mlpOnly.has(i) && (i + 1) % sparseStep === 0;
  const norm = `${P}RMSNorm`;
  const olmo2 = type === 'olmo2';

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
        } else if (olmo2) {
          a.norm('q_norm', nh * hd, norm);
          a.norm('k_norm', nkv * hd, norm);
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
      if (!olmo2) layer.norm('input_layernorm', d, norm);
      layer.norm('post_attention_layernorm', d, norm);
      if (type === 'gemma2' || olmo2) {
        if (!olmo2) layer.norm('pre_feedforward_layernorm', d, norm);
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
      // Olmo2RMSNorm scales in fp32 (`(w * x).to(dtype)`). Its post-norms keep the same tensors as two pre-norms:
      // the q/k/v and gate/up matmuls keep their whole inputs (2e·sbh) and each post-norm its fp32 input and
      // normalized output (16·sbh), as much as two fp32-scaling pre-norms keep with their outputs (2·(8 + e)·sbh).
      ...(olmo2 ? { normScalesInFp32: true, qkNorm: true } : {}),
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
      ...DENSE,
      denseLayers: layers,
      mlp: 'gelu',
      norm: 'layernorm',
      normsPerBlock: 2,
      blockClass: 'GPT2Block',
      tiedEmbeddings: tied,
    },
  };
}

/**
 * GPT-NeoX and Pythia (`GPTNeoXForCausalLM` in transformers' modeling_gpt_neox.py, 4.48 and later):
 * `gpt_neox.embed_in`, `gpt_neox.layers.N` (`GPTNeoXLayer`: two LayerNorms with biases, `attention` with one fused
 * `query_key_value` projection of 3·hidden and `dense`, both biased unless `attention_bias` is false, and `mlp`'s
 * biased `dense_h_to_4h` / `dense_4h_to_h`), `gpt_neox.final_layer_norm`, one rotary embedding over the rotated
 * `rotary_pct` of each head, and an output head `embed_out` of its own (`tie_word_embeddings` defaults to false).
 * Releases before 4.48 also held a causal-mask buffer in every layer; the layout built is the later one.
 *
 * For the activation model the block is GPT-2's (GELU MLP, LayerNorm); no field says more, as activations.ts has
 * no GPT-NeoX block. What GPT-NeoX's block keeps differs in its parts: its parallel residual
 * (`use_parallel_residual`) has both LayerNorms read the one block input, kept once (GPT-2's model counts two
 * inputs), its zero `hidden_dropout` keeps no dropout masks (GPT-2's model counts two, 2·sbh bytes), and its
 * partial rotary makes q and k anew while v, a view, keeps the fused projection's whole output alive (2e·sbh more
 * than GPT-2's three views of one output). Under SDPA in bf16 these cancel to the same 18·sbh + 4·sbI a block;
 * in fp32 GPT-NeoX keeps 2·sbh more; under eager attention it keeps an fp32 softmax and its cast (6 bytes a
 * score) where GPT-2's model counts 5.
 */
function gptNeox(config: HfConfig): HfModel {
  const d = int(config, 'hidden_size', 6144);
  const layers = int(config, 'num_hidden_layers', 44);
  const nh = int(config, 'num_attention_heads', 64);
  const I = int(config, 'intermediate_size', 24576);
  const V = int(config, 'vocab_size', 50432);
  if (d % nh !== 0) throw new ConfigError(`hidden_size ${d} is not a multiple of num_attention_heads ${nh}`);
  const headDim = d / nh;
  // `rotary_pct` (Transformers 5 configs: `partial_rotary_factor`), 0.25 by default.
  const rotary = Math.floor(
    headDim * fraction(config, 'rotary_pct', fraction(config, 'partial_rotary_factor', 0.25)),
  );
  const bias = bool(config, 'attention_bias', true);
  const tied = bool(config, 'tie_word_embeddings', false);
  const root = ModuleBuilder.root('GPTNeoXForCausalLM');
  root.child('gpt_neox', 'GPTNeoXModel', (m) => {
    m.embedding('embed_in', V, d);
    m.list('layers', layers, 'GPTNeoXLayer', (layer) => {
      layer.norm('input_layernorm', d, 'LayerNorm', true);
      layer.norm('post_attention_layernorm', d, 'LayerNorm', true);
      layer.child('attention', 'GPTNeoXAttention', (a) => {
        a.linear('query_key_value', d, 3 * d, bias);
        a.linear('dense', d, d, bias);
      });
      layer.child('mlp', 'GPTNeoXMLP', (mlp) => {
        mlp.linear('dense_h_to_4h', d, I, true);
        mlp.linear('dense_4h_to_h', I, d, true);
      });
    });
    m.norm('final_layer_norm', d, 'LayerNorm', true);
    // `inv_freq` over the rotated dims: arange(0, rotary, 2).
    m.child('rotary_emb', 'GPTNeoXRotaryEmbedding', (r) =>
      r.buffer('inv_freq', [Math.ceil(rotary / 2)], 'float32', false),
    );
  });
  root.linear('embed_out', d, V);
  if (tied) root.tie('embed_out', 'weight', 'gpt_neox.embed_in.weight');
  return {
    root: root.node,
    shape: {
      modelType: 'gpt_neox',
      hidden: d,
      layers,
      heads: nh,
      kvHeads: nh,
      headDim,
      intermediate: I,
      vocab: V,
      ...DENSE,
      denseLayers: layers,
      mlp: 'gelu',
      norm: 'layernorm',
      normsPerBlock: 2,
      blockClass: 'GPTNeoXLayer',
      tiedEmbeddings: tied,
    },
  };
}

/**
 * DeepSeek-V3 as Transformers instantiates it: multi-head latent attention, `first_k_dense_replace` dense layers,
 * then MoE layers of routed experts plus shared experts and a top-k router. The multi-token-prediction layer of
 * the released checkpoint is not part of the model class. DeepSeek-V2 (`DeepseekV2DecoderLayer`, `DeepseekV2MoE`
 * in transformers' modeling_deepseek_v2.py, added in 2025) has the same attention and experts; its router,
 * `DeepseekV2MoEGate`, holds only its `[n_routed_experts, hidden]` weight (no `e_score_correction_bias`), every
 * layer from `first_k_dense_replace` on is an MoE layer (`moe_layer_freq` is not read), and the shared experts
 * are left out when `n_shared_experts` is null. Transformers 5 stores each layer's routed experts as two 3-D
 * parameters (`gate_up_proj`, `down_proj`) of the same sizes; the 4.x layout is built here, one module per expert.
 */
function deepseek(config: HfConfig, type: 'deepseek_v2' | 'deepseek_v3'): HfModel {
  const v2 = type === 'deepseek_v2';
  const P = v2 ? 'DeepseekV2' : 'DeepseekV3';
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
  // DeepseekV2Config's default is 2 shared experts, and null means none; DeepseekV3Config's default is 1.
  const shared = v2 && config.n_shared_experts === null ? 0 : int(config, 'n_shared_experts', v2 ? 2 : 1);
  const topK = int(config, 'num_experts_per_tok');
  const firstDense = optInt(config, 'first_k_dense_replace') ?? 0;
  const freq = v2 ? 1 : int(config, 'moe_layer_freq', 1);
  const bias = bool(config, 'attention_bias', false);
  const tied = bool(config, 'tie_word_embeddings', false);
  const qkHead = nope + rope;
  const norm = `${P}RMSNorm`;
  const mlp = (b: ModuleBuilder, inner: number) => {
    b.linear('gate_proj', d, inner);
    b.linear('up_proj', d, inner);
    b.linear('down_proj', inner, d);
  };
  const isMoe = (i: number) => i >= firstDense && i % freq === 0;
  const root = ModuleBuilder.root(`${P}ForCausalLM`);
  root.child('model', `${P}Model`, (m) => {
    m.embedding('embed_tokens', V, d);
    m.list('layers', layers, `${P}DecoderLayer`, (layer, i) => {
      layer.child('self_attn', `${P}Attention`, (a) => {
        if (qLora === null) a.linear('q_proj', d, nh * qkHead);
        else {
          a.linear('q_a_proj', d, qLora, bias);
          a.norm('q_a_layernorm', qLora, norm);
          a.linear('q_b_proj', qLora, nh * qkHead);
        }
        a.linear('kv_a_proj_with_mqa', d, kvLora + rope, bias);
        a.norm('kv_a_layernorm', kvLora, norm);
        a.linear('kv_b_proj', kvLora, nh * (nope + vHead));
        a.linear('o_proj', nh * vHead, d, bias);
      });
      if (isMoe(i)) {
        layer.child('mlp', `${P}MoE`, (moe) => {
          moe.list('experts', E, `${P}MLP`, (e) => mlp(e, moeI));
          if (v2) moe.child('gate', 'DeepseekV2MoEGate', (g) => g.param('weight', [E, d]));
          else
            moe.child('gate', 'DeepseekV3TopkRouter', (g) => {
              g.param('weight', [E, d]);
              g.buffer('e_score_correction_bias', [E], 'float32');
            });
          if (shared) moe.child('shared_experts', `${P}MLP`, (s) => mlp(s, moeI * shared));
        });
      } else layer.child('mlp', `${P}MLP`, (b) => mlp(b, I));
      layer.norm('input_layernorm', d, norm);
      layer.norm('post_attention_layernorm', d, norm);
    });
    m.norm('norm', d, norm);
    m.child('rotary_emb', `${P}RotaryEmbedding`, (r) =>
      r.buffer('inv_freq', [Math.floor(rope / 2)], 'float32', false),
    );
  });
  root.linear('lm_head', d, V);
  if (tied) root.tie('lm_head', 'weight', 'model.embed_tokens.weight');
  const moeLayers = Array.from({ length: layers }, (_, i) => i).filter(isMoe).length;
  return {
    root: root.node,
    shape: {
      modelType: type,
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
      blockClass: `${P}DecoderLayer`,
      tiedEmbeddings: tied,
    },
  };
}
