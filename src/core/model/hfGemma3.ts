/** Gemma 3 as Transformers builds it: the text model (`gemma3_text`) and the SigLIP-and-text model (`gemma3`). */
import type { HfConfig } from './catalog';
import type { ArchShape, HfModel } from './hf';
import { bool, DENSE, int, optPositive, subConfig } from './hfFields';
import { ModuleBuilder } from './tree';

/** The text model's dimensions, with `Gemma3TextConfig`'s defaults for the fields a config leaves out. */
function textDims(c: HfConfig) {
  return {
    d: int(c, 'hidden_size', 2304),
    I: int(c, 'intermediate_size', 9216),
    layers: int(c, 'num_hidden_layers', 26),
    nh: int(c, 'num_attention_heads', 8),
    nkv: int(c, 'num_key_value_heads', 4),
    hd: int(c, 'head_dim', 256),
    V: int(c, 'vocab_size', 262_208),
    bias: bool(c, 'attention_bias', false),
  };
}

/**
 * `Gemma3TextModel` (transformers' modeling_gemma3.py, 4.52 to 4.56): `embed_tokens` (a
 * `Gemma3TextScaledWordEmbedding`, which also holds its `embed_scale` as a non-persistent scalar buffer), `layers`
 * of `Gemma3DecoderLayer` (`Gemma3Attention` with q/k/v/o projections and `q_norm` / `k_norm` over head_dim; a
 * GeGLU `Gemma3MLP`; Gemma 2's four norms), the final `norm`, and two rotary embeddings (`rotary_emb` for the
 * global layers, `rotary_emb_local` for the sliding-window ones; Transformers 5 keeps both tables in one module).
 */
function textModel(b: ModuleBuilder, c: HfConfig): void {
  const { d, I, layers, nh, nkv, hd, V, bias } = textDims(c);
  const norm = 'Gemma3RMSNorm';
  b.child('embed_tokens', 'Gemma3TextScaledWordEmbedding', (e) => {
    e.param('weight', [V, d]);
    e.buffer('embed_scale', [], 'float32', false);
  });
  b.list('layers', layers, 'Gemma3DecoderLayer', (layer) => {
    layer.child('self_attn', 'Gemma3Attention', (a) => {
      a.linear('q_proj', d, nh * hd, bias);
      a.linear('k_proj', d, nkv * hd, bias);
      a.linear('v_proj', d, nkv * hd, bias);
      a.linear('o_proj', nh * hd, d, bias);
      a.norm('q_norm', hd, norm);
      a.norm('k_norm', hd, norm);
    });
    layer.child('mlp', 'Gemma3MLP', (mlp) => {
      mlp.linear('gate_proj', d, I);
      mlp.linear('up_proj', d, I);
      mlp.linear('down_proj', I, d);
    });
    layer.norm('input_layernorm', d, norm);
    layer.norm('post_attention_layernorm', d, norm);
    layer.norm('pre_feedforward_layernorm', d, norm);
    layer.norm('post_feedforward_layernorm', d, norm);
  });
  b.norm('norm', d, norm);
  for (const rotary of ['rotary_emb', 'rotary_emb_local'])
    b.child(rotary, 'Gemma3RotaryEmbedding', (r) =>
      r.buffer('inv_freq', [Math.floor(hd / 2)], 'float32', false),
    );
}

/**
 * SigLIP's vision tower as `SiglipVisionModel` builds it (transformers' modeling_siglip.py), with
 * `SiglipVisionConfig`'s defaults: `vision_model.embeddings` (a biased `Conv2d` patch embedding of
 * num_channels x patch_size² to hidden_size, a `position_embedding` of (image_size / patch_size)² positions and
 * its non-persistent `position_ids`), `encoder.layers` of `SiglipEncoderLayer` (biased k/v/q/out projections, two
 * biased LayerNorms, a biased fc1/fc2 MLP), `post_layernorm`, and, when `vision_use_head` (the default), the
 * attention-pooling `head`. Returns the encoder's layer and patch counts.
 */
export function siglipVisionTower(
  b: ModuleBuilder,
  name: string,
  c: HfConfig,
): { layers: number; patches: number } {
  const h = int(c, 'hidden_size', 768);
  const I = int(c, 'intermediate_size', 3072);
  const layers = int(c, 'num_hidden_layers', 12);
  const channels = int(c, 'num_channels', 3);
  const image = int(c, 'image_size', 224);
  const patch = int(c, 'patch_size', 16);
  const patches = Math.floor(image / patch) ** 2;
  const mlp = (m: ModuleBuilder) => {
    m.linear('fc1', h, I, true);
    m.linear('fc2', I, h, true);
  };
  b.child(name, 'SiglipVisionModel', (tower) =>
    tower.child('vision_model', 'SiglipVisionTransformer', (t) => {
      t.child('embeddings', 'SiglipVisionEmbeddings', (e) => {
        e.child('patch_embedding', 'Conv2d', (conv) =>
          conv.param('weight', [h, channels, patch, patch]).param('bias', [h]),
        );
        e.embedding('position_embedding', patches, h);
        e.buffer('position_ids', [1, patches], 'int64', false);
      });
      t.child('encoder', 'SiglipEncoder', (enc) =>
        enc.list('layers', layers, 'SiglipEncoderLayer', (layer) => {
          layer.child('self_attn', 'SiglipAttention', (a) => {
            for (const p of ['k_proj', 'v_proj', 'q_proj', 'out_proj']) a.linear(p, h, h, true);
          });
          layer.norm('layer_norm1', h, 'LayerNorm', true);
          layer.child('mlp', 'SiglipMLP', mlp);
          layer.norm('layer_norm2', h, 'LayerNorm', true);
        }),
      );
      t.norm('post_layernorm', h, 'LayerNorm', true);
      if (bool(c, 'vision_use_head', true))
        t.child('head', 'SiglipMultiheadAttentionPoolingHead', (head) => {
          head.param('probe', [1, 1, h]);
          head.child('attention', 'MultiheadAttention', (a) => {
            a.param('in_proj_weight', [3 * h, h]).param('in_proj_bias', [3 * h]);
            a.linear('out_proj', h, h, true, 'NonDynamicallyQuantizableLinear');
          });
          head.norm('layernorm', h, 'LayerNorm', true);
          head.child('mlp', 'SiglipMLP', mlp);
        });
    }),
  );
  return { layers, patches };
}

/**
 * Gemma 3. `gemma3_text` (the 1B) is `Gemma3ForCausalLM`: `model` (the text model) and `lm_head`, tied to the
 * embedding unless `tie_word_embeddings` is false (`Gemma3TextConfig` defaults to true). `gemma3` (4B, 12B, 27B)
 * is `Gemma3ForConditionalGeneration` (4.52 and later): `model.vision_tower` (SigLIP, from `vision_config`),
 * `model.multi_modal_projector` (`Gemma3MultiModalProjector`: the `mm_input_projection_weight` parameter of vision
 * hidden x text hidden and `mm_soft_emb_norm` over the vision hidden size; its average pooling has no
 * parameters), `model.language_model` (the text model, from `text_config`) and the tied `lm_head`.
 */
export function gemma3(config: HfConfig, type: 'gemma3' | 'gemma3_text'): HfModel {
  const multimodal = type === 'gemma3';
  const text = multimodal ? subConfig(config, 'text_config') : config;
  const vision = subConfig(config, 'vision_config');
  const { d, I, layers, nh, nkv, hd, V } = textDims(text);
  const tied = bool(config, 'tie_word_embeddings', bool(text, 'tie_word_embeddings', true));
  const root = ModuleBuilder.root(multimodal ? 'Gemma3ForConditionalGeneration' : 'Gemma3ForCausalLM');
  const leftOut: string[] = [];
  let embedding = 'model.embed_tokens.weight';
  if (multimodal) {
    embedding = 'model.language_model.embed_tokens.weight';
    root.child('model', 'Gemma3Model', (m) => {
      const tower = siglipVisionTower(m, 'vision_tower', vision);
      const vh = int(vision, 'hidden_size', 768);
      m.child('multi_modal_projector', 'Gemma3MultiModalProjector', (p) => {
        p.param('mm_input_projection_weight', [vh, d]);
        p.norm('mm_soft_emb_norm', vh, 'Gemma3RMSNorm');
      });
      m.child('language_model', 'Gemma3TextModel', (lm) => textModel(lm, text));
      leftOut.push(
        `the vision tower's activations for the images of a batch (SigLIP, ${tower.layers} layers over ${tower.patches} patches an image): the activation model counts the language model's blocks`,
      );
    });
  } else root.child('model', 'Gemma3TextModel', (m) => textModel(m, text));
  root.linear('lm_head', d, V);
  if (tied) root.tie('lm_head', 'weight', embedding);
  const shape: ArchShape = {
    modelType: type,
    hidden: d,
    layers,
    heads: nh,
    kvHeads: nkv,
    headDim: hd,
    intermediate: I,
    vocab: V,
    ...DENSE,
    denseLayers: layers,
    mlp: 'swiglu',
    norm: 'rmsnorm',
    // Gemma 2's sandwich of four norms, scaling in fp32 (`Gemma3RMSNorm`: `(x * (1 + w)).type_as(x)`), and
    // Qwen3's per-head q/k norms; no soft-capping unless the config sets it (`Gemma3TextConfig` defaults: null).
    normsPerBlock: 4,
    normScalesInFp32: true,
    qkNorm: true,
    finalLogitSoftcap: optPositive(text, 'final_logit_softcapping', null),
    attnLogitSoftcap: optPositive(text, 'attn_logit_softcapping', null),
    blockClass: 'Gemma3DecoderLayer',
    tiedEmbeddings: tied,
  };
  return { root: root.node, shape: { ...shape, ...(leftOut.length ? { activationsLeftOut: leftOut } : {}) } };
}
