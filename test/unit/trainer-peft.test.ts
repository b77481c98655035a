// LoRA through Transformers' Trainer under an Accelerate FSDP1 configuration: PEFT's wrap policy, and frozen
// weights kept in the dtype they were loaded in while Accelerate upcasts the trainable ones.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { cli, projectDir } from './helpers';

/** A project: an Accelerate FSDP1 configuration on 2 GPUs and an SFTTrainer script beside it. */
function project(load: string, config = ''): string {
  const dir = projectDir('fsdp-lens-peft-');
  fs.writeFileSync(
    path.join(dir, 'fsdp.yaml'),
    [
      'distributed_type: FSDP',
      'mixed_precision: bf16',
      'num_machines: 1',
      'num_processes: 2',
      'fsdp_config:',
      '  fsdp_version: 1',
      '  fsdp_sharding_strategy: FULL_SHARD',
      '  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP',
      '',
    ].join('\n'),
  );
  fs.writeFileSync(
    path.join(dir, 'train.py'),
    [
      'import torch',
      'from peft import LoraConfig',
      'from transformers import AutoModelForCausalLM',
      'from trl import SFTConfig, SFTTrainer',
      `model = AutoModelForCausalLM.from_pretrained("mistralai/Mistral-7B-v0.1"${load})`,
      'lora = LoraConfig(r=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])',
      `args = SFTConfig(output_dir="out", per_device_train_batch_size=1, max_seq_length=1024${config})`,
      'SFTTrainer(model=model, args=args, peft_config=lora).train()',
      '',
    ].join('\n'),
  );
  return path.join(dir, 'train.py');
}

interface Json {
  plan: { units: number; notes: string[] };
  units: { classNames: string[]; params: number; trainableParams: number }[];
  perGpu: { persistent: { terms: { name: string; bytes: number }[] } };
}

async function estimate(file: string): Promise<Json> {
  const r = await cli('estimate', file, '--json');
  assert.equal(r.code, 0, r.err);
  return JSON.parse(r.out) as Json;
}

// Mistral 7B (hidden 4096, 32 layers, 8 KV heads of 128: k and v project to 1024). Rank-16 LoRA on q, k, v, o:
// A is 16 x 4096 on each; B is 4096 x 16 on q and o, 1024 x 16 on k and v.
const A = 16 * 4096;
const PER_LAYER = 4 * A + 2 * (4096 * 16) + 2 * (1024 * 16);
const LORA = 32 * PER_LAYER;
// The base: 7,241,732,096 parameters (mistralai/Mistral-7B-v0.1's published count, 7.24B).
const BASE = 7_241_732_096;

describe("LoRA through Transformers' Trainer under FSDP1", () => {
  it("wraps each LoRA matrix as a unit of its own, as PEFT's policy does", async () => {
    const j = await estimate(project(', torch_dtype=torch.bfloat16'));
    // 8 LoRA matrices in each of 32 layers, the 32 decoder layers, the root.
    assert.equal(j.plan.units, 32 * 8 + 32 + 1);
    const lora = j.units.filter((u) => u.trainableParams > 0);
    assert.equal(lora.length, 256);
    assert.equal(
      lora.reduce((s, u) => s + u.params, 0),
      LORA,
    );
    // The decoder layers hold only frozen weights: no FlatParameter mixes the two.
    assert.ok(j.units.every((u) => u.trainableParams === 0 || u.trainableParams === u.params));
    assert.match(j.plan.notes.join('\n'), /PEFT's fsdp_auto_wrap_policy/);
  });

  it('keeps the frozen base in the dtype it was loaded in, and the trainable weights in fp32', async () => {
    const term = (j: Json, n: string) => j.perGpu.persistent.terms.find((t) => t.name === n)?.bytes;
    // bf16=True (SFTConfig's default) with mixed precision: Accelerate upcasts what requires grad to fp32.
    const bf16 = await estimate(project(', torch_dtype=torch.bfloat16'));
    // Every FlatParameter here has an even number of elements: no padding at 2 ranks.
    assert.equal(term(bf16, 'sharded parameters'), (BASE * 2 + LORA * 4) / 2);
    assert.equal(term(bf16, 'sharded gradients'), (LORA * 4) / 2);
    // Loaded in fp32: the base is fp32 too.
    const fp32 = await estimate(project(''));
    assert.equal(term(fp32, 'sharded parameters'), ((BASE + LORA) * 4) / 2);
  });

  it("keeps each frozen layer's input and its gradient to the end of backward under a reentrant checkpoint", async () => {
    // FSDP1 reshards a frozen unit through a multi-grad hook on its input (`_register_post_backward_reshard_only_hook`),
    // removed when backward ends (`_finalize_params`). Transformers' reentrant checkpoint around each layer's call
    // makes that input the checkpoint's detached leaf, which the hook's AccumulateGrad node holds with its `.grad`.
    // So when block 0 runs its backward, the 31 blocks done keep their inputs, and 30 of their gradients beyond the
    // one flowing into block 0: each 1 x 1024 tokens x 4096 x 2 B (bf16, SFTConfig's default).
    const E = 1024 * 4096 * 2;
    type Timed = Json & { timeline: { label: string; live: { activations: number } }[] };
    const at = (j: Timed) => j.timeline.find((ev) => ev.label === 'backward block 0')!.live.activations;
    const reentrant = (await estimate(
      project(', torch_dtype=torch.bfloat16', ', gradient_checkpointing_kwargs={"use_reentrant": True}'),
    )) as Timed;
    const plain = (await estimate(
      project(', torch_dtype=torch.bfloat16', ', gradient_checkpointing_kwargs={"use_reentrant": False}'),
    )) as Timed;
    assert.equal(at(reentrant) - at(plain), 31 * E + 30 * E);
  });
});
