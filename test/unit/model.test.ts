import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ALIASES, CATALOG, catalogConfig, closeCatalogIds } from '../../src/core/model/catalog';
import { editDistance } from '../../src/core/vocabulary/suggest';
import { ConfigError, modelFromHfConfig } from '../../src/core/model/hf';
import { countParams, moduleAt, walk } from '../../src/core/model/tree';
import { cli } from './helpers';

/**
 * Parameter totals published for each model (model cards, or the safetensors metadata the Hub shows), against
 * the trees built from the catalog's config.json fields.
 */
const PUBLISHED: Record<string, number> = {
  'meta-llama/Llama-3.1-8B': 8_030_261_248,
  'meta-llama/Llama-3.1-70B': 70_553_706_496,
  'meta-llama/Llama-3.1-405B': 405_853_388_800,
  'meta-llama/Llama-3.2-1B': 1_235_814_400,
  'meta-llama/Llama-3.2-3B': 3_212_749_824,
  'meta-llama/Llama-2-7b-hf': 6_738_415_616,
  'meta-llama/Llama-2-13b-hf': 13_015_864_320,
  'meta-llama/Llama-2-70b-hf': 68_976_648_192,
  'mistralai/Mistral-7B-v0.1': 7_241_732_096,
  'mistralai/Mixtral-8x7B-v0.1': 46_702_792_704,
  'Qwen/Qwen2.5-7B': 7_615_616_512,
  'Qwen/Qwen2.5-72B': 72_706_203_648,
  'Qwen/Qwen3-8B': 8_190_735_360,
  'Qwen/Qwen3-30B-A3B': 30_532_122_624,
  'Qwen/Qwen3-235B-A22B': 235_093_634_560,
  'google/gemma-2-2b': 2_614_341_888,
  'google/gemma-2-9b': 9_241_705_984,
  'microsoft/Phi-3-mini-4k-instruct': 3_821_079_552,
  'openai-community/gpt2': 124_439_808,
  'openai-community/gpt2-medium': 354_823_168,
  'openai-community/gpt2-large': 774_030_080,
  'openai-community/gpt2-xl': 1_557_611_200,
};

describe('model trees from Hugging Face configs', () => {
  for (const [id, total] of Object.entries(PUBLISHED)) {
    it(`${id}: ${total.toLocaleString('en-US')} parameters`, () => {
      const { root } = modelFromHfConfig(CATALOG[id]!);
      assert.equal(countParams(root), total);
    });
  }

  it("Mixtral 8x22B: 56 layers of eight 6,144 x 16,384 experts (hand count), the card's 141B", () => {
    // q and o 6,144², k and v 6,144 x 1,024 (8 KV heads of 128), eight experts of three 6,144 x 16,384
    // projections, the router 6,144 x 8, two norms; untied 32,000 x 6,144 embedding and head, the final norm.
    const layer = 2 * 6144 * 6144 + 2 * 6144 * 1024 + 8 * 3 * 6144 * 16384 + 6144 * 8 + 2 * 6144;
    const total = 56 * layer + 2 * 32000 * 6144 + 6144;
    assert.equal(
      countParams(modelFromHfConfig(CATALOG['mistral-community/Mixtral-8x22B-v0.1']!).root),
      total,
    );
    assert.equal(Math.round(total / 1e9), 141);
    assert.equal(ALIASES['mistralai/Mixtral-8x22B-v0.1'], 'mistral-community/Mixtral-8x22B-v0.1');
  });

  it('Qwen3-MoE: Qwen3 attention and 128 experts of moe_intermediate_size in every layer (hand count)', () => {
    // Qwen3-30B-A3B: q 2,048 x 32 x 128, k and v 2,048 x 4 x 128, o back, q/k norms of 128; 128 experts of three
    // 2,048 x 768 projections, the router 2,048 x 128, two norms; untied 151,936 x 2,048 embedding and head.
    const layer =
      2048 * 4096 + 2 * 2048 * 512 + 4096 * 2048 + 2 * 128 + 128 * 3 * 2048 * 768 + 2048 * 128 + 2 * 2048;
    assert.equal(48 * layer + 2 * 151936 * 2048 + 2048, PUBLISHED['Qwen/Qwen3-30B-A3B']);
    const m = modelFromHfConfig(CATALOG['Qwen/Qwen3-30B-A3B']!);
    assert.equal(m.shape.blockClass, 'Qwen3MoeDecoderLayer');
    assert.deepEqual([m.shape.experts, m.shape.expertsPerToken, m.shape.moeIntermediate], [128, 8, 768]);
    assert.equal(moduleAt(m.root, 'model.layers.0.mlp')?.className, 'Qwen3MoeSparseMoeBlock');
    // A layer in mlp_only_layers keeps a dense MLP of intermediate_size.
    const dense = modelFromHfConfig({ ...CATALOG['Qwen/Qwen3-30B-A3B']!, mlp_only_layers: [0] });
    assert.equal(moduleAt(dense.root, 'model.layers.0.mlp')?.className, 'Qwen3MoeMLP');
    assert.equal(dense.shape.denseLayers, 1);
  });

  it('Gemma 2 27B: head_dim 128 with 32 query and 16 KV heads, four norms per layer, tied (hand count)', () => {
    // q 4,608 x 32 x 128, k and v 4,608 x 16 x 128, o back; a 36,864-wide GeGLU MLP; four norms; the tied
    // 256,000 x 4,608 embedding and the final norm: the card's 27.2B.
    const layer = 4608 * 4096 + 2 * 4608 * 2048 + 4096 * 4608 + 3 * 4608 * 36864 + 4 * 4608;
    const total = 46 * layer + 256000 * 4608 + 4608;
    assert.equal(countParams(modelFromHfConfig(CATALOG['google/gemma-2-27b']!).root), total);
    assert.equal(total, 27_227_128_320);
  });

  it('small Qwen releases tie the head to the embedding; Qwen3 adds per-head q and k norms (hand counts)', () => {
    // Qwen2.5-0.5B: q 896² + 896, k and v 896 x 128 + 128 each, o 896², MLP 3 x 896 x 4,864, two norms: 14,912,384
    // per layer; 24 of them, one 151,936 x 896 embedding (tied), the final norm: 494,032,768 (the card's 0.49B,
    // 0.36B without the embedding).
    const q25 = 896 * 896 + 896 + 2 * (896 * 128 + 128) + 896 * 896 + 3 * 896 * 4864 + 2 * 896;
    assert.equal(
      countParams(modelFromHfConfig(CATALOG['Qwen/Qwen2.5-0.5B']!).root),
      24 * q25 + 151936 * 896 + 896,
    );
    assert.equal(24 * q25 + 151936 * 896 + 896, 494_032_768);
    // Qwen3-0.6B: head_dim 128 (q 16 x 128 = 2,048 wide, k and v 8 x 128), q_norm and k_norm of 128: the card's
    // 0.44B without the embedding.
    const q3 = 1024 * 2048 + 2 * 1024 * 1024 + 2048 * 1024 + 2 * 128 + 3 * 1024 * 3072 + 2 * 1024;
    const q3total = countParams(modelFromHfConfig(CATALOG['Qwen/Qwen3-0.6B']!).root);
    assert.equal(q3total, 28 * q3 + 151936 * 1024 + 1024);
    assert.equal(Math.round((q3total - 151936 * 1024) / 1e7) / 100, 0.44);
    // Mistral 7B v0.3 is v0.1 with 768 more vocabulary entries, in the embedding and the head.
    assert.equal(
      countParams(modelFromHfConfig(CATALOG['mistralai/Mistral-7B-v0.3']!).root),
      7_241_732_096 + 2 * 768 * 4096,
    );
  });

  it('DeepSeek-V3: 671B in the model class (the 14B multi-token-prediction layer is not part of it)', () => {
    const { root, shape } = modelFromHfConfig(CATALOG['deepseek-ai/DeepSeek-V3']!);
    // By hand from config.json: MLA attention 187,107,328 per layer; 3 dense layers with a 3·7168·18432 MLP;
    // 58 MoE layers with 256 routed + 1 shared expert of 3·7168·2048 and a 256·7168 router; two norms per layer;
    // untied 129,280·7168 embedding and head; final norm.
    const attention =
      1536 * 7168 + 1536 + 128 * 192 * 1536 + (512 + 64) * 7168 + 512 + 128 * 256 * 512 + 7168 * 128 * 128;
    assert.equal(attention, 187_107_328);
    const dense = attention + 3 * 7168 * 18432 + 2 * 7168;
    const moe = attention + 257 * 3 * 7168 * 2048 + 256 * 7168 + 2 * 7168;
    const total = 3 * dense + 58 * moe + 2 * 129280 * 7168 + 7168;
    assert.equal(countParams(root), total);
    assert.equal(Math.round(total / 1e9), 671);
    assert.equal(shape.denseLayers, 3);
    assert.equal(
      moduleAt(root, 'model.layers.3.mlp.experts.255.down_proj')?.params[0]?.shape.join('x'),
      '7168x2048',
    );
  });

  it('Llama 3.1 8B: the worked example layer of 218,112,000 parameters, and real module names', () => {
    const { root, shape } = modelFromHfConfig(CATALOG['meta-llama/Llama-3.1-8B']!);
    // attention 4096·4096·2 + 4096·1024·2, MLP 3·4096·14336, two norms
    assert.equal(
      countParams(moduleAt(root, 'model.layers.0')!),
      4096 * 4096 * 2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096,
    );
    assert.equal(countParams(moduleAt(root, 'model.layers.0')!), 218_112_000);
    assert.equal(moduleAt(root, 'model.layers.31.self_attn.k_proj')?.params[0]?.shape.join('x'), '1024x4096');
    assert.equal(moduleAt(root, 'model.layers.0')?.className, 'LlamaDecoderLayer');
    assert.equal(moduleAt(root, 'lm_head')?.params[0]?.tiedTo, undefined);
    assert.equal(shape.blockClass, 'LlamaDecoderLayer');
  });

  it('ties the head to the embedding where the config says so (Llama 3.2 1B, GPT-2)', () => {
    const llama = modelFromHfConfig(CATALOG['meta-llama/Llama-3.2-1B']!).root;
    assert.equal(moduleAt(llama, 'lm_head')?.params[0]?.tiedTo, 'model.embed_tokens.weight');
    const gpt2 = modelFromHfConfig(CATALOG['openai-community/gpt2']!).root;
    assert.equal(moduleAt(gpt2, 'lm_head')?.params[0]?.tiedTo, 'transformer.wte.weight');
    // Conv1D weights are [in, out].
    assert.equal(moduleAt(gpt2, 'transformer.h.0.mlp.c_fc')?.params[0]?.shape.join('x'), '768x3072');
  });

  it('Phi-3 fuses qkv_proj and gate_up_proj; Mixtral has experts w1/w2/w3 and a router', () => {
    const phi = modelFromHfConfig(CATALOG['microsoft/Phi-3-mini-4k-instruct']!).root;
    assert.ok(moduleAt(phi, 'model.layers.0.self_attn.qkv_proj'));
    assert.ok(moduleAt(phi, 'model.layers.0.mlp.gate_up_proj'));
    const mix = modelFromHfConfig(CATALOG['mistralai/Mixtral-8x7B-v0.1']!).root;
    assert.ok(moduleAt(mix, 'model.layers.0.block_sparse_moe.experts.7.w3'));
    assert.equal(moduleAt(mix, 'model.layers.0.block_sparse_moe.gate')?.params[0]?.shape.join('x'), '8x4096');
  });

  it('names unsupported model types and bad fields clearly', () => {
    assert.throws(
      () => modelFromHfConfig({ model_type: 'bert' }),
      (e: Error) =>
        e instanceof ConfigError && /"bert" is not supported; supported: llama, mistral/.test(e.message),
    );
    assert.throws(() => modelFromHfConfig({}), /no "model_type"/);
    assert.throws(
      () =>
        modelFromHfConfig({
          model_type: 'llama',
          hidden_size: -4,
          num_hidden_layers: 2,
          num_attention_heads: 2,
          intermediate_size: 8,
          vocab_size: 10,
        }),
      /hidden_size" must be a positive integer/,
    );
    assert.throws(
      () => modelFromHfConfig({ model_type: 'llama', hidden_size: 'big' }),
      /must be a number, not "big"/,
    );
    assert.throws(
      () => modelFromHfConfig({ model_type: 'llama', hidden_size: 1e308 }),
      /must be a positive integer|implausibly large/,
    );
    assert.throws(
      () =>
        modelFromHfConfig({
          model_type: 'llama',
          hidden_size: 64,
          num_hidden_layers: 2,
          num_attention_heads: 4,
        }),
      /no "intermediate_size"/,
    );
  });

  it('builds DeepSeek-V3 with every expert as its own module', () => {
    const { root } = modelFromHfConfig(CATALOG['deepseek-ai/DeepSeek-V3']!);
    let experts = 0;
    for (const m of walk(root)) if (m.className === 'DeepseekV3MLP') experts++;
    // 3 dense MLPs + 58 MoE layers × (256 routed + 1 shared)
    assert.equal(experts, 3 + 58 * 257);
  });
});

describe('close catalog ids', () => {
  it('edit distance counts insertions, deletions and substitutions', () => {
    // The textbook example: kitten -> sitten (k/s) -> sittin (e/i) -> sitting (+g) = 3.
    assert.equal(editDistance('kitten', 'sitting'), 3);
    assert.equal(editDistance('', 'abc'), 3);
    assert.equal(editDistance('gpt2', 'gpt2'), 0);
  });

  it('suggests ids containing the typed name first, then ids a few typos away, never far ones', () => {
    const qwen3 = closeCatalogIds('Qwen3');
    assert.ok(qwen3.length > 0 && qwen3.every((id) => id.startsWith('Qwen/Qwen3-')), qwen3.join(', '));
    // "gpt2-mediun" is one substitution from "gpt2-medium"; "gpt2" is inside it but 7 characters short.
    assert.deepEqual(closeCatalogIds('gpt2-mediun'), [
      'openai-community/gpt2-medium',
      'openai-community/gpt2',
    ]);
    assert.deepEqual(closeCatalogIds('bert-base-uncased'), []);
    assert.deepEqual(closeCatalogIds(''), []);
  });
});

describe('releases read with the architecture of a catalog entry', () => {
  it('point at entries of the catalog, and are not entries themselves', () => {
    for (const [alias, of] of Object.entries(ALIASES)) {
      assert.ok(CATALOG[of], `${alias} -> ${of}`);
      assert.equal(CATALOG[alias], undefined, alias);
    }
  });

  it('give their own id, the entry they read, and its parameters', async () => {
    const e = catalogConfig('meta-llama/llama-3.3-70b-instruct');
    assert.equal(e?.id, 'meta-llama/Llama-3.3-70B-Instruct');
    assert.equal(e?.architectureOf, 'meta-llama/Llama-3.1-70B');
    const r = await cli('estimate', '--model', 'Qwen/Qwen2.5-7B-Instruct', '--json');
    assert.equal(r.code, 0, r.err);
    const data = JSON.parse(r.out);
    // Qwen2.5 7B: 28 x (3584^2 + 3584 + 2 x (3584 x 512 + 512) + 3584^2 + 3 x 3584 x 18944 + 2 x 3584)
    // + 2 x 152064 x 3584 + 3584 = 7,615,616,512 (the base's published total).
    assert.equal(
      data.model.params,
      28 * (3584 ** 2 + 3584 + 2 * (3584 * 512 + 512) + 3584 ** 2 + 3 * 3584 * 18944 + 2 * 3584) +
        2 * 152064 * 3584 +
        3584,
    );
    assert.match(data.model.source, /the architecture of Qwen\/Qwen2\.5-7B/);
  });
});
