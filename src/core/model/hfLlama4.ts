/** Llama 4 as Transformers builds it: the MoE text model (`llama4_text`) and, with its vision encoder, `llama4`. */
import type { HfConfig } from './catalog';
import type { HfModel } from './hf';
import { bool, indexList, int, subConfig } from './hfFields';
import { ModuleBuilder } from './tree';

/**
 * Llama 4's vision encoder, `Llama4VisionModel` (transformers' modeling_llama4.py), with `Llama4VisionConfig`'s
 * defaults: `patch_embedding` (`Llama4UnfoldConvolution`: an unbiased linear of num_channels x patch_size² to
 * hidden_size), `class_embedding` and `positional_embedding_vlm` ((image_size / patch_size)² + 1 positions) as
 * parameters of the model itself, `layernorm_pre` / `layernorm_post`, `model.layers` of
 * `Llama4VisionEncoderLayer` (biased q/k/v/o projections and fc1/fc2, two LayerNorms), and `vision_adapter`
 * (`Llama4VisionPixelShuffleMLP`, whose `mlp` maps intermediate_size to projector_input_dim and
 * projector_output_dim to itself, unbiased). Its rotary table is a plain attribute, not a buffer.
 */
function visionModel(b: ModuleBuilder, c: HfConfig): void {
  const h = int(c, 'hidden_size', 768);
  const I = int(c, 'intermediate_size', 5632);
  const layers = int(c, 'num_hidden_layers', 34);
  const channels = int(c, 'num_channels', 3);
  const image = int(c, 'image_size', 448);
  const patch = int(c, 'patch_size', 14);
  const projIn = int(c, 'projector_input_dim', 4096);
  const projOut = int(c, 'projector_output_dim', 4096);
  b.child('vision_model', 'Llama4VisionModel', (v) => {
    v.child('patch_embedding', 'Llama4UnfoldConvolution', (p) =>
      p.linear('linear', channels * patch * patch, h),
    );
    v.param('class_embedding', [h]);
    v.param('positional_embedding_vlm', [Math.floor(image / patch) ** 2 + 1, h]);
    v.child('rotary_embedding', 'Llama4VisionRotaryEmbedding');
    v.norm('layernorm_pre', h, 'LayerNorm', true);
    v.norm('layernorm_post', h, 'LayerNorm', true);
    v.child('model', 'Llama4VisionEncoder', (enc) =>
      enc.list('layers', layers, 'Llama4VisionEncoderLayer', (layer) => {
        layer.child('self_attn', 'Llama4VisionAttention', (a) => {
          for (const name of ['q_proj', 'k_proj', 'v_proj', 'o_proj']) a.linear(name, h, h, true);
        });
        layer.child('mlp', 'Llama4VisionMLP', (m) => {
          m.linear('fc1', h, I, true);
          m.linear('fc2', I, h, true);
        });
        layer.norm('input_layernorm', h, 'LayerNorm', true);
        layer.norm('post_attention_layernorm', h, 'LayerNorm', true);
      }),
    );
    v.child('vision_adapter', 'Llama4VisionPixelShuffleMLP', (a) =>
      a.child('mlp', 'Llama4VisionMLP2', (m) => {
        m.linear('fc1', I, projIn);
        m.linear('fc2', projOut, projOut);
      }),
    );
  });
}

/**
 * Llama 4. `llama4_text` is `Llama4ForCausalLM`: `model.embed_tokens`, `model.layers` of `Llama4TextDecoderLayer`
 * (`Llama4TextAttention`: q/k/v/o, and a parameter-free `qk_norm` on the RoPE layers when `use_qk_norm`;
 * `feed_forward`: in the layers of `moe_layers` (every `interleave_moe_layer_step`-th when not listed) a
 * `Llama4TextMoe` of `Llama4TextExperts`, which holds all routed experts as two 3-D parameters (`gate_up_proj`
 * [experts, hidden, 2·intermediate_size], `down_proj` [experts, intermediate_size, hidden]), a `Llama4Router`
 * linear and one `shared_expert`; elsewhere a dense `Llama4TextMLP` of `intermediate_size_mlp`; two RMSNorms),
 * `model.norm`, `model.rotary_emb` and an untied `lm_head`. `llama4` is `Llama4ForConditionalGeneration`:
 * `vision_model`, `multi_modal_projector.linear_1` (vision_output_dim to the text hidden size, unbiased) and
 * `language_model`, the text model above.
 *
 * Transformers' `Llama4TextMoe.forward` repeats every token's hidden state once per expert and runs all experts on
 * all of them (the router's sigmoid scores zero the experts not chosen): its activations are not those of a top-k
 * dispatch, which is what the activation model counts, so they are left out and said to be.
 */
export function llama4(config: HfConfig, type: 'llama4' | 'llama4_text'): HfModel {
  const multimodal = type === 'llama4';
  const c = multimodal ? subConfig(config, 'text_config') : config;
  const d = int(c, 'hidden_size', 5120);
  const I = int(c, 'intermediate_size', 8192);
  const denseI = int(c, 'intermediate_size_mlp', 16384);
  const layers = int(c, 'num_hidden_layers', 48);
  const nh = int(c, 'num_attention_heads', 40);
  const nkv = int(c, 'num_key_value_heads', 8);
  const hd = int(c, 'head_dim', 128);
  const V = int(c, 'vocab_size', 202_048);
  const E = int(c, 'num_local_experts', 16);
  const topK = int(c, 'num_experts_per_tok', 1);
  const step = int(c, 'interleave_moe_layer_step', 1);
  const bias = bool(c, 'attention_bias', false);
  const qkNorm = bool(c, 'use_qk_norm', true);
  const interval = int(c, 'no_rope_layer_interval', 4);
  const listedRope = indexList(c, 'no_rope_layers');
  // `no_rope_layers`: 1 where the layer uses RoPE; an empty or absent list is every `no_rope_layer_interval`-th
  // layer without RoPE (`Llama4TextConfig`).
  const usesRope = (i: number) => (listedRope?.length ? listedRope[i] === 1 : (i + 1) % interval !== 0);
  const moeLayers = new Set(
    indexList(c, 'moe_layers') ??
      Array.from({ length: layers }, (_, i) => i).filter(
        (i) => i >= step - 1 && (i - (step - 1)) % step === 0,
      ),
  );
  const tied = bool(config, 'tie_word_embeddings', bool(c, 'tie_word_embeddings', false));
  const mlp = (b: ModuleBuilder, inner: number) => {
    b.linear('gate_proj', d, inner);
    b.linear('up_proj', d, inner);
    b.linear('down_proj', inner, d);
  };
  const causalLm = (lm: ModuleBuilder) => {
    lm.child('model', 'Llama4TextModel', (m) => {
      m.embedding('embed_tokens', V, d);
      m.list('layers', layers, 'Llama4TextDecoderLayer', (layer, i) => {
        layer.child('self_attn', 'Llama4TextAttention', (a) => {
          a.linear('q_proj', d, nh * hd, bias);
          a.linear('k_proj', d, nkv * hd, bias);
          a.linear('v_proj', d, nkv * hd, bias);
          a.linear('o_proj', nh * hd, d, bias);
          if (qkNorm && usesRope(i)) a.child('qk_norm', 'Llama4TextL2Norm');
        });
        if (moeLayers.has(i))
          layer.child('feed_forward', 'Llama4TextMoe', (moe) => {
            moe.child('experts', 'Llama4TextExperts', (e) => {
              e.param('gate_up_proj', [E, d, 2 * I]);
              e.param('down_proj', [E, I, d]);
            });
            moe.linear('router', d, E, false, 'Llama4Router');
            moe.child('shared_expert', 'Llama4TextMLP', (s) => mlp(s, I));
          });
        else layer.child('feed_forward', 'Llama4TextMLP', (f) => mlp(f, denseI));
        layer.norm('input_layernorm', d, 'Llama4TextRMSNorm');
        layer.norm('post_attention_layernorm', d, 'Llama4TextRMSNorm');
      });
      m.norm('norm', d, 'Llama4TextRMSNorm');
      m.child('rotary_emb', 'Llama4TextRotaryEmbedding', (r) =>
        r.buffer('inv_freq', [Math.floor(hd / 2)], 'float32', false),
      );
    });
    lm.linear('lm_head', d, V);
  };
  let root: ModuleBuilder;
  let prefix = '';
  if (multimodal) {
    const vision = subConfig(config, 'vision_config');
    root = ModuleBuilder.root('Llama4ForConditionalGeneration');
    visionModel(root, vision);
    root.child('multi_modal_projector', 'Llama4MultiModalProjector', (p) =>
      p.linear('linear_1', int(vision, 'vision_output_dim', 7680), d),
    );
    root.child('language_model', 'Llama4ForCausalLM', causalLm);
    prefix = 'language_model.';
  } else {
    root = ModuleBuilder.root('Llama4ForCausalLM');
    causalLm(root);
  }
  if (tied) root.tie(`${prefix}lm_head`, 'weight', `${prefix}model.embed_tokens.weight`);
  return {
    root: root.node,
    shape: {
      modelType: type,
      hidden: d,
      layers,
      heads: nh,
      kvHeads: nkv,
      headDim: hd,
      intermediate: denseI,
      vocab: V,
      expertsPerToken: topK,
      experts: E,
      denseLayers: layers - moeLayers.size,
      moeIntermediate: I,
      sharedExperts: 1,
      mlp: 'swiglu',
      norm: 'rmsnorm',
      normsPerBlock: 2,
      blockClass: 'Llama4TextDecoderLayer',
      tiedEmbeddings: tied,
      activationsNotModelled: `Transformers' Llama 4 MoE layer (Llama4TextMoe) runs all ${E} experts on every token, where the activation model counts the ${topK} chosen${multimodal ? ", and the vision encoder's are not modelled either" : ''}`,
    },
  };
}
