import assert from 'node:assert/strict';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { estimateFile } from '../../src/core/resolve/analyze';
import { FIXTURES, cli, scanFixture, scanSource } from './helpers';

/*
 * Published configs the expected figures are derived from (config.json of each model):
 *   Llama 3.2 1B: hidden 2048, 32 heads x 64, 8 KV heads x 64 (k/v out 512), intermediate 8192, 16 layers,
 *     vocab 128,256, tied embeddings.
 *   Llama 3.1 8B: hidden 4096, 32 heads x 128, 8 KV heads x 128 (k/v out 1024), intermediate 14,336, 32 layers,
 *     vocab 128,256, untied head.
 */
const H1 = 2048;
const KV1 = 8 * 64;
const I1 = 8192;
const L1 = 16;
const V = 128_256;
// Linear weights of one Llama 3.2 1B layer: q and o 2048 x 2048, k and v 2048 x 512, gate, up and down 2048 x 8192.
const LINEAR_1B = 2 * H1 * H1 + 2 * H1 * KV1 + 3 * H1 * I1;
const LAYER_1B = LINEAR_1B + 2 * H1; // and two RMSNorm weights
const P_1B = L1 * LAYER_1B + V * H1 + H1; // the head shares the embedding's weight

const H8 = 4096;
const KV8 = 8 * 128;
const I8 = 14_336;
const LAYER_8B = 2 * H8 * H8 + 2 * H8 * KV8 + 3 * H8 * I8 + 2 * H8;
const P_8B = 32 * LAYER_8B + 2 * V * H8 + H8;

/** LoRA adds A (r x in) and B (out x r) to a linear: r x (in + out) parameters. */
const lora = (r: number, inp: number, out: number) => r * (inp + out);

/** bitsandbytes NF4: half a byte per value and one fp32 absmax per block of 64 values. */
// bitsandbytes' packed 4-bit codes, two per byte, in the parameter; the absmax (one fp32 per 64) is outside it.
const nf4 = (n: number) => n / 2;

describe('the configs behind the expected figures', () => {
  it('Llama 3.2 1B has 1,235,814,400 and Llama 3.1 8B 8,030,261,248 parameters', () => {
    assert.equal(P_1B, 1_235_814_400);
    assert.equal(P_8B, 8_030_261_248);
  });
});

describe('PEFT: wrapping through get_peft_model', () => {
  it('maps model.base_model.model.model.layers onto the base model: 16 block units and the root', async () => {
    const r = estimateFile(await scanFixture('finetune/peft_lora_llama.py'));
    assert.ok(r.ok, r.ok ? '' : r.reason);
    const e = r.estimate;
    const blocks = e.units.filter((u) => !u.isRoot);
    assert.equal(blocks.length, L1);
    assert.deepEqual(
      blocks.map((u) => u.modules[0]),
      Array.from({ length: L1 }, (_, i) => `model.layers.${i}`),
    );
    assert.ok(blocks.every((u) => u.classNames.includes('LlamaDecoderLayer')));
    assert.equal(e.units.length, L1 + 1);
    assert.ok(e.units[L1]!.isRoot);
    assert.deepEqual(e.plan.notes, []);
    assert.equal(e.unowned.params, 0);
  });

  it('trains r x (in + out) per targeted linear: q_proj 2048 -> 2048, v_proj 2048 -> 512, 16 layers', async () => {
    const r = estimateFile(await scanFixture('finetune/peft_lora_llama.py'));
    assert.ok(r.ok);
    const perLayer = lora(8, H1, H1) + lora(8, H1, KV1);
    assert.equal(perLayer, 53_248);
    const trainable = L1 * perLayer;
    assert.equal(trainable, 851_968); // what PEFT's print_trainable_parameters() reports for this setup
    assert.equal(r.estimate.model.trainableParams, trainable);
    assert.equal(r.estimate.model.params, P_1B + trainable);
    // Each block unit holds its layer's adapters; the root (embedding, final norm) trains nothing.
    for (const u of r.estimate.units.filter((x) => !x.isRoot)) assert.equal(u.trainableParams, perLayer);
    assert.equal(r.estimate.units[L1]!.trainableParams, 0);
    const ft = r.estimate.assumptions.find((a) => a.key === 'fineTune')!;
    assert.equal(ft.value, 'LoRA rank 8 on q_proj, v_proj');
    assert.deepEqual(ft.source, { kind: 'detected', detail: 'peft_lora_llama.py:8' });
  });

  it('reads the same wrapping under another variable name, and wrapping model.base_model as the root', async () => {
    const facts = await scanSource(
      [
        'from peft import LoraConfig, get_peft_model',
        'from torch.distributed.fsdp import fully_shard',
        'from transformers import AutoModelForCausalLM',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        'peft_model = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj"]))',
        'for block in peft_model.base_model.model.model.layers:',
        '    fully_shard(block)',
        'fully_shard(peft_model.base_model)',
        '',
      ].join('\n'),
      'train.py',
    );
    const r = estimateFile(facts);
    assert.ok(r.ok, r.ok ? '' : r.reason);
    assert.equal(r.estimate.units.length, L1 + 1);
    assert.ok(r.estimate.units[L1]!.isRoot);
    assert.equal(r.estimate.model.trainableParams, L1 * lora(4, H1, H1));
  });
});

describe('fine-tuning read from scripts', () => {
  it('LoraConfig(target_modules="all-linear") adapts every linear of the blocks but the head', async () => {
    const r = estimateFile(await scanFixture('finetune/qlora_nf4.py'));
    assert.ok(r.ok, r.ok ? '' : r.reason);
    // q 2048+2048, k 2048+512, v 2048+512, o 2048+2048, gate and up 2048+8192, down 8192+2048; rank 16.
    const perLayer =
      lora(16, H1, H1) + 2 * lora(16, H1, KV1) + lora(16, H1, H1) + 2 * lora(16, H1, I1) + lora(16, I1, H1);
    assert.equal(perLayer, 704_512);
    assert.equal(r.estimate.model.trainableParams, L1 * perLayer);
    assert.equal(r.estimate.model.trainableParams, 11_272_192);
  });

  it('BitsAndBytesConfig(load_in_4bit=True, nf4) stores the block linears in NF4, gathered as stored', async () => {
    const r = estimateFile(await scanFixture('finetune/qlora_nf4.py'));
    assert.ok(r.ok);
    const ft = r.estimate.assumptions.find((a) => a.key === 'fineTune')!;
    assert.match(ft.value, /NF4 base weights/);
    const block = r.estimate.units[0]!;
    // NF4 linear weights: 60,817,408 values -> 30,408,704 B of 4-bit codes, gathered as stored; their 950,272
    // blocks' absmax (4 B each) stay whole on every GPU, with the buffers.
    assert.equal(LINEAR_1B, 60_817_408);
    assert.equal(nf4(LINEAR_1B), 30_408_704);
    const buffers = r.estimate.perGpu.persistent.terms.find((t) => t.name === 'buffers')!.bytes;
    assert.ok(buffers >= L1 * 950_272 * 4, `buffers ${buffers}`);
    // The two norms and the adapters (704,512) stay in bf16 (torch_dtype; no mixed precision policy).
    assert.equal(block.gatheredBytes, nf4(LINEAR_1B) + 2 * H1 * 2 + 704_512 * 2);
    // The root (embedding, tied head, final norm) is not quantised.
    assert.equal(r.estimate.units[L1]!.gatheredBytes, (V * H1 + H1) * 2);
  });

  it('requires_grad_(False) and p.requires_grad = False freeze their modules', async () => {
    const r = estimateFile(await scanFixture('finetune/frozen.py'));
    assert.ok(r.ok, r.ok ? '' : r.reason);
    // Frozen: the embedding (128,256 x 4,096), the untied head (the same size) and layer 0 (218,112,000).
    assert.equal(LAYER_8B, 218_112_000);
    const frozen = 2 * V * H8 + LAYER_8B;
    assert.equal(r.estimate.model.trainableParams, P_8B - frozen);
    assert.equal(r.estimate.model.trainableParams, 6_761_476_096);
    assert.equal(r.estimate.units[0]!.trainableParams, 0);
    assert.equal(r.estimate.units[1]!.trainableParams, LAYER_8B);
    // The root keeps only its final norm trainable.
    assert.equal(r.estimate.units[32]!.trainableParams, H8);
    const ft = r.estimate.assumptions.find((a) => a.key === 'fineTune')!;
    assert.equal(ft.value, 'frozen: model.embed_tokens, model.layers[0], lm_head');
  });

  it('a frozen module named through PEFT is the base model module', async () => {
    const facts = await scanSource(
      [
        'from transformers import AutoModelForCausalLM',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")',
        'model.base_model.model.model.embed_tokens.requires_grad_(False)',
        '',
      ].join('\n'),
    );
    const r = estimateFile(facts);
    assert.ok(r.ok);
    assert.equal(r.estimate.model.trainableParams, P_8B - V * H8);
  });
});

describe('fine-tuning flags', () => {
  it('--lora-rank 8 adapts q_proj and v_proj by default', async () => {
    const r = await cli('estimate', '--model', 'meta-llama/Llama-3.2-1B', '--lora-rank', '8', '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as { model: { params: number; trainableParams: number } };
    assert.equal(j.model.trainableParams, L1 * (lora(8, H1, H1) + lora(8, H1, KV1)));
    assert.equal(j.model.params, P_1B + j.model.trainableParams);
  });

  it('--lora-targets names the adapted modules', async () => {
    const r = await cli(
      'estimate',
      '--model',
      'meta-llama/Llama-3.1-8B',
      '--lora-rank',
      '16',
      '--lora-targets',
      'q_proj,k_proj,v_proj,o_proj',
      '--json',
    );
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as { model: { trainableParams: number } };
    // 32 layers x 16 x ((4096 + 4096) x 2 + (4096 + 1024) x 2).
    assert.equal(j.model.trainableParams, 32 * (2 * lora(16, H8, H8) + 2 * lora(16, H8, KV8)));
    assert.equal(j.model.trainableParams, 13_631_488);
  });

  it('--base-dtype nf4 stores the block linears in NF4; with LoRA the adapters travel in bf16', async () => {
    const r = await cli(
      'estimate',
      '--model',
      'meta-llama/Llama-3.2-1B',
      '--base-dtype',
      'nf4',
      '--lora-rank',
      '8',
      '--json',
    );
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as { units: { gatheredBytes: number; trainableParams: number }[] };
    const adapters = lora(8, H1, H1) + lora(8, H1, KV1);
    // bf16 all-gathers (the default param_dtype) for the norms and adapters.
    assert.equal(j.units[0]!.gatheredBytes, nf4(LINEAR_1B) + 2 * H1 * 2 + adapters * 2);
    assert.equal(j.units[0]!.trainableParams, adapters);
  });

  it('--base-dtype nf4 alone: the 4-bit weights take no gradient, the rest trains', async () => {
    const r = await cli('estimate', '--model', 'meta-llama/Llama-3.2-1B', '--base-dtype', 'nf4', '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as { model: { trainableParams: number } };
    // Embedding (tied head), 32 block norms of 2048 and the final norm.
    assert.equal(j.model.trainableParams, V * H1 + L1 * 2 * H1 + H1);
  });

  it('exits 2 on a bad rank or base dtype', async () => {
    for (const [args, msg] of [
      [['--lora-rank', '0'], /--lora-rank must be a positive whole number/],
      [['--lora-rank', 'eight'], /--lora-rank must be a positive whole number/],
      [['--base-dtype', 'int8'], /--base-dtype takes nf4/],
    ] as const) {
      const r = await cli('estimate', '--model', 'meta-llama/Llama-3.2-1B', ...args);
      assert.equal(r.code, 2, args.join(' '));
      assert.match(r.err, msg);
    }
  });

  it('reads a fine-tuning script end to end', async () => {
    const r = await cli('estimate', path.join(FIXTURES, 'finetune/peft_lora_llama.py'), '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as { units: unknown[]; model: { trainableParams: number } };
    assert.equal(j.units.length, L1 + 1);
    assert.equal(j.model.trainableParams, 851_968);
  });
});
