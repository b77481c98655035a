// Expert parallelism as torchtitan places a MoE model's experts, derived by hand: each GPU holds 1/E_p of every
// layer's experts, FSDP2 shards them over the shard group / E_p, tokens reach them by all-to-all.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { estimate } from '../../src/core/estimator/estimate';
import type { Estimate, Plan } from '../../src/core/estimator/types';
import type { SetupValues } from '../../src/core/inputs/table';
import { cli, defaultInput, projectDir } from './helpers';

/** Two Qwen3-MoE layers of 8 experts (2 chosen per token), small enough to count by hand. */
const TINY_MOE = {
  model_type: 'qwen3_moe',
  hidden_size: 64,
  intermediate_size: 128,
  moe_intermediate_size: 32,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 16,
  vocab_size: 100,
  tie_word_embeddings: false,
  num_experts: 8,
  num_experts_per_tok: 2,
  decoder_sparse_step: 1,
  mlp_only_layers: [],
};

function run(
  values: SetupValues,
  api: Plan['api'] = 'fsdp2',
  config: Record<string, unknown> = TINY_MOE,
): Estimate {
  return estimate(defaultInput(config, values, api));
}

// One expert: gate and up 64 -> 32, down 32 -> 64. The rest of a layer: q 64x64 (4 heads of 16), k and v 64x32
// (2 KV heads), o 64x64, the per-head q and k norms (16 each), two norms of 64, the router 64 -> 8.
const EXPERT = 3 * 64 * 32;
const REST = 4096 + 2 * 2048 + 4096 + 2 * 16 + 2 * 64 + 8 * 64;

describe('expert parallelism over a shard group of 4', () => {
  const plain = run({ worldSize: 4, microBatch: 1, seqLen: 16 });
  const ep = run({ worldSize: 4, microBatch: 1, seqLen: 16, expertParallel: 2 });
  const block = (e: Estimate) => e.units.find((u) => u.classNames.includes('Qwen3MoeDecoderLayer'))!;

  it('gathers the 4 local experts of a layer, not all 8, in bf16', () => {
    assert.equal(block(plain).gatheredBytes, (REST + 8 * EXPERT) * 2);
    assert.equal(block(ep).gatheredBytes, (REST + 4 * EXPERT) * 2);
  });

  it('keeps the same shard per GPU: the experts split 2 ways over the 2 GPUs holding them', () => {
    // Non-expert parameters over 4 GPUs, each GPU's 4 experts over 4 / 2 = 2: (REST / 4 + 4 x EXPERT / 2) fp32
    // elements, what 8 experts over 4 give. (Every dim 0 here divides evenly, so no padding.)
    assert.equal(block(ep).shard.params, (REST / 4 + (4 * EXPERT) / 2) * 4);
    assert.equal(block(ep).shard.params, block(plain).shard.params);
    // The model's own count is the whole model's.
    assert.equal(ep.model.params, plain.model.params);
  });

  it('moves the routed tokens by all-to-all: 4 per MoE layer, (E_p - 1)/E_p of b·s·k x h each', () => {
    const a2a = ep.comms.links.find((l) => l.role === 'expert parallel')!;
    assert.equal(a2a.collectives, 4 * 2);
    assert.equal(a2a.bytes, 8 * (1 / 2) * (16 * 2) * 64 * 2);
    assert.equal(
      plain.comms.links.find((l) => l.role === 'expert parallel'),
      undefined,
    );
  });

  it('all-gathers and reduce-scatters the experts over their own 2 GPUs', () => {
    // Forward and backward all-gathers of a block: the rest's 3 other shards and the experts' 1 other shard, in
    // bf16; the reduce-scatter likewise.
    const ag = (3 * (REST / 4) + 1 * ((4 * EXPERT) / 2)) * 2;
    assert.equal(block(ep).traffic.forwardAllGatherBytes, ag);
    assert.equal(block(ep).traffic.reduceScatterBytes, ag);
  });

  it('is not modelled under FSDP1, nor for a model without experts, so no verdict rests on it', () => {
    assert.match(
      run({ worldSize: 4, expertParallel: 2 }, 'fsdp1').unmodelled.join(),
      /FSDP1 places no experts/,
    );
    const dense = { ...TINY_MOE, model_type: 'qwen3', num_experts: undefined };
    assert.match(
      run({ worldSize: 4, expertParallel: 2 }, 'fsdp2', dense).unmodelled.join(),
      /expert parallelism \(degree 2; the model has no experts to place\)/,
    );
  });
});

/** A torchtitan job TOML of `model.name` and `flavor` on 8 GPUs, with more `[parallelism]` lines. */
function titanToml(name: string, flavor: string, batch: number, extra: string[] = []): string {
  const file = path.join(projectDir('fsdp-lens-moe-'), 'job.toml');
  fs.writeFileSync(
    file,
    [
      '[model]',
      `name = "${name}"`,
      `flavor = "${flavor}"`,
      '[training]',
      `local_batch_size = ${batch}`,
      'seq_len = 4096',
      '[parallelism]',
      'data_parallel_shard_degree = 8',
      ...extra,
    ].join('\n'),
  );
  return file;
}

/** `fsdp-lens estimate FILE --json`, which must succeed, as far as these tests read it. */
async function estimated(file: string) {
  const r = await cli('estimate', file, '--json');
  assert.equal(r.code, 0, r.err);
  return JSON.parse(r.out) as {
    model: { params: number };
    units: { classNames: string[]; gatheredBytes: number; modules: string[] }[];
    unmodelled: string[];
    assumptions: { key: string; value: string }[];
  };
}

describe("torchtitan's Qwen3 MoE flavors", () => {
  const toml = (flavor: string, extra: string[] = []) => titanToml('qwen3', flavor, 2, extra);
  const run = estimated;

  it("build torchtitan's MoE blocks to Qwen's published totals", async () => {
    // Qwen3-30B-A3B: 30,532,122,624 parameters; Qwen3-235B-A22B: 235,093,634,560 (their model cards' safetensors
    // totals), the same architecture as torchtitan's flavors, with its experts fused per projection.
    assert.equal((await run(toml('30B-A3B'))).model.params, 30_532_122_624);
    assert.equal((await run(toml('235B-A22B'))).model.params, 235_093_634_560);
  });

  it('reads expert_parallel_degree: each GPU gathers 16 of the 128 experts of a block', async () => {
    const j = await run(toml('30B-A3B', ['expert_parallel_degree = 8']));
    assert.deepEqual(j.unmodelled, []);
    assert.equal(j.assumptions.find((a) => a.key === 'expertParallel')?.value, '8');
    // A block: q 2048 -> 32 x 128, k and v 2048 -> 4 x 128, o back, q and k norms of 128, two norms of 2048, the
    // router 2048 -> 128, and 16 experts of gate, up 2048 -> 768 and down 768 -> 2048, all gathered in bf16.
    const rest = 2048 * 4096 * 2 + 2048 * 512 * 2 + 2 * 128 + 2 * 2048 + 2048 * 128;
    const block = j.units.find((u) => u.classNames.includes('TransformerBlock'))!;
    assert.equal(block.gatheredBytes, (rest + 16 * 3 * 2048 * 768) * 2);
  });
});

describe("torchtitan's DeepSeek-V3 flavors", () => {
  const job = (flavor: string, extra: string[] = []) => titanToml('deepseek_v3', flavor, 4, extra);
  const run = estimated;

  it('16B has DeepSeek-V2-Lite’s total; 671B DeepSeek-V3’s main model', async () => {
    // 16B, by hand: the dense layer and 26 MoE layers share the attention (wq 2048 -> 16 x 192, wkv_a 2048 -> 576,
    // kv_norm 512, wkv_b 512 -> 16 x 256, wo 2048 -> 2048) and two norms of 2048; the dense layer adds a SwiGLU of
    // 10,944; a MoE layer 64 experts of 3 x 2048 x 1408, the gate 2048 -> 64 and the shared SwiGLU of 2 x 1408.
    const attention = 2048 * 3072 + 2048 * 576 + 512 + 512 * 4096 + 2048 * 2048 + 2 * 2048;
    const dense = attention + 3 * 2048 * 10_944;
    const moe = attention + 64 * 3 * 2048 * 1408 + 2048 * 64 + 3 * 2048 * 2816;
    const total = dense + 26 * moe + 2 * 102_400 * 2048 + 2048;
    // The Hub's safetensors total of deepseek-ai/DeepSeek-V2-Lite.
    assert.equal(total, 15_706_484_224);
    assert.equal((await run(job('16B'))).model.params, total);
    // DeepSeek-V3's README: 671B main model weights (and 14B of multi-token prediction, not in torchtitan's
    // model): the Hugging Face config without its MTP layer, 671,026,404,352.
    assert.equal((await run(job('671B'))).model.params, 671_026_404_352);
  });

  it('reads expert_parallel_degree: each GPU gathers 8 of the 64 experts of a MoE block', async () => {
    const j = await run(job('16B', ['expert_parallel_degree = 8']));
    assert.deepEqual(j.unmodelled, []);
    const attention = 2048 * 3072 + 2048 * 576 + 512 + 512 * 4096 + 2048 * 2048 + 2 * 2048;
    const block = j.units.find((u) => u.modules.includes('layers.5'))!;
    assert.equal(block.gatheredBytes, (attention + 8 * 3 * 2048 * 1408 + 2048 * 64 + 3 * 2048 * 2816) * 2);
    // The shard's formula adds up: the dense parameters over 8 GPUs, this GPU's 8 of each layer's 64 experts (26
    // MoE layers x 8 x 3 x 2048 x 1408) whole, in fp32.
    const r = await cli('estimate', job('16B', ['expert_parallel_degree = 8']));
    const experts = 26 * 8 * 3 * 2048 * 1408;
    assert.equal(experts, 1_799_356_416);
    assert.match(
      r.out,
      /1,311,632,896 params \/ 8 GPUs \+ 1,799,356,416 expert params \(this GPU's 1\/8 of the experts\) \/ 1 GPU x 4 B/,
    );
    assert.equal(15_706_484_224 - 64 * 26 * 3 * 2048 * 1408, 1_311_632_896);
  });
});

describe("Transformers' own parallelism at loading", () => {
  it('tp_plan and DistributedConfig(enable_expert_parallel=True) are named, and no verdict is drawn', async () => {
    const dir = projectDir('fsdp-lens-hf-ep-');
    const file = path.join(dir, 'train.py');
    fs.writeFileSync(
      file,
      [
        'import torch',
        'from transformers import AutoModelForCausalLM',
        'from transformers.distributed import DistributedConfig',
        'from torch.distributed.fsdp import fully_shard',
        'model = AutoModelForCausalLM.from_pretrained(',
        '    "Qwen/Qwen3-30B-A3B", tp_plan="auto", dtype=torch.bfloat16,',
        '    distributed_config=DistributedConfig(enable_expert_parallel=True),',
        ')',
        'for layer in model.model.layers:',
        '    fully_shard(layer)',
        'fully_shard(model)',
      ].join('\n'),
    );
    const r = await cli('estimate', file, '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as { unmodelled: string[]; targetFit: { verdict: string } };
    assert.deepEqual(j.unmodelled, [
      'tensor parallelism (tp_plan="auto" at train.py:5)',
      'expert parallelism (DistributedConfig(enable_expert_parallel=True) at train.py:5)',
    ]);
    assert.equal(j.targetFit.verdict, 'undecided');
  });
});
