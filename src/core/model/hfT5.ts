/** T5 as Transformers builds it (`T5ForConditionalGeneration`): an encoder and a decoder stack of `T5Block`. */
import type { HfConfig } from './catalog';
import type { HfModel } from './hf';
import { bool, ConfigError, DENSE, int, str } from './hfFields';
import { ModuleBuilder } from './tree';

/**
 * `T5ForConditionalGeneration` (transformers' modeling_t5.py, 4.x): `shared` (the vocabulary embedding), `encoder`
 * and `decoder` (`T5Stack`, whose `embed_tokens` is that same `shared` module), `lm_head` (tied to `shared` when
 * `tie_word_embeddings`, `T5Config`'s default; the FLAN-T5 releases set it false). Each stack is `block`, a list of
 * `T5Block`, and a `final_layer_norm` (`T5LayerNorm`, a weight only). A `T5Block`'s `layer` list holds
 * `T5LayerSelfAttention` (`SelfAttention`: unbiased q/k/v of d_model to num_heads·d_kv and o back, and in the first
 * block of each stack a `relative_attention_bias` embedding of relative_attention_num_buckets x num_heads), in the
 * decoder `T5LayerCrossAttention` (`EncDecAttention`, the same projections), and `T5LayerFF` (`DenseReluDense`:
 * `wi` and `wo`, or with a `gated-` `feed_forward_proj` `T5DenseGatedActDense`'s `wi_0`, `wi_1` and `wo`, all
 * unbiased), each with its `layer_norm`. Dropout modules hold nothing and are left out.
 *
 * The activation model is a decoder-only stack's. T5's step runs the encoder over the inputs and the decoder over
 * the targets (each of its own length) with cross-attention over the encoder's output, and T5's attention adds a
 * position bias to scores it computes itself: none of it is modelled, so the estimate counts no activations,
 * logits or loss for it and says so.
 */
export function t5(config: HfConfig): HfModel {
  const d = int(config, 'd_model', 512);
  const dKv = int(config, 'd_kv', 64);
  const dFf = int(config, 'd_ff', 2048);
  const heads = int(config, 'num_heads', 8);
  const encLayers = int(config, 'num_layers', 6);
  const decLayers = int(config, 'num_decoder_layers', encLayers);
  const buckets = int(config, 'relative_attention_num_buckets', 32);
  const V = int(config, 'vocab_size', 32128);
  const tied = bool(config, 'tie_word_embeddings', true);
  // `T5Config`: "ACT" or "gated-ACT"; an `is_gated_act` the config writes itself (older FLAN-T5 configs wrote
  // `"feed_forward_proj": "gelu"` with `"is_gated_act": true`) is set after and wins.
  const proj = str(config, 'feed_forward_proj', 'relu').split('-');
  if (proj.length > 2 || (proj.length === 2 && proj[0] !== 'gated'))
    throw new ConfigError(
      `config.json "feed_forward_proj" must be "ACT" or "gated-ACT" (like "gated-gelu"), not ${JSON.stringify(config.feed_forward_proj)}`,
    );
  const gated = bool(config, 'is_gated_act', proj[0] === 'gated');
  const inner = heads * dKv;
  const attention = (b: ModuleBuilder, name: string, relativeBias: boolean) =>
    b.child(name, 'T5Attention', (a) => {
      a.linear('q', d, inner);
      a.linear('k', d, inner);
      a.linear('v', d, inner);
      a.linear('o', inner, d);
      if (relativeBias) a.embedding('relative_attention_bias', buckets, heads);
    });
  const stack = (root: ModuleBuilder, name: 'encoder' | 'decoder', layers: number) =>
    root.child(name, 'T5Stack', (s) => {
      s.embedding('embed_tokens', V, d);
      s.list('block', layers, 'T5Block', (block, i) =>
        block.child('layer', 'ModuleList', (l) => {
          l.child('0', 'T5LayerSelfAttention', (sa) => {
            attention(sa, 'SelfAttention', i === 0);
            sa.norm('layer_norm', d, 'T5LayerNorm');
          });
          if (name === 'decoder')
            l.child('1', 'T5LayerCrossAttention', (ca) => {
              attention(ca, 'EncDecAttention', false);
              ca.norm('layer_norm', d, 'T5LayerNorm');
            });
          l.child(name === 'decoder' ? '2' : '1', 'T5LayerFF', (ff) => {
            ff.child('DenseReluDense', gated ? 'T5DenseGatedActDense' : 'T5DenseActDense', (m) => {
              if (gated) {
                m.linear('wi_0', d, dFf);
                m.linear('wi_1', d, dFf);
              } else m.linear('wi', d, dFf);
              m.linear('wo', dFf, d);
            });
            ff.norm('layer_norm', d, 'T5LayerNorm');
          });
        }),
      );
      s.norm('final_layer_norm', d, 'T5LayerNorm');
    });
  const root = ModuleBuilder.root('T5ForConditionalGeneration');
  root.embedding('shared', V, d);
  stack(root, 'encoder', encLayers);
  stack(root, 'decoder', decLayers);
  root.linear('lm_head', d, V);
  root.tie('encoder.embed_tokens', 'weight', 'shared.weight');
  root.tie('decoder.embed_tokens', 'weight', 'shared.weight');
  if (tied) root.tie('lm_head', 'weight', 'shared.weight');
  return {
    root: root.node,
    shape: {
      modelType: 't5',
      hidden: d,
      layers: encLayers + decLayers,
      heads,
      kvHeads: heads,
      headDim: dKv,
      intermediate: dFf,
      vocab: V,
      ...DENSE,
      denseLayers: encLayers + decLayers,
      // Two matrices (wi, wo) or three (wi_0, wi_1, wo); the activation model does not read them for T5.
      mlp: gated ? 'swiglu' : 'gelu',
      norm: 'rmsnorm',
      normsPerBlock: 2,
      blockClass: 'T5Block',
      tiedEmbeddings: tied,
      activationsNotModelled: `T5 is an encoder-decoder (${encLayers} encoder and ${decLayers} decoder blocks over inputs and targets of their own lengths, with cross-attention), which the activation model, a decoder-only stack's, does not describe`,
    },
  };
}
