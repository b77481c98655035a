import assert from 'node:assert/strict';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { cli, projectDir, writeFiles } from './helpers';

// Llama 3.2 1B on 8 x H100 with every layer checkpointed, 4 x 4,096 tokens per GPU: room to grow.
const SCRIPT = [
  '# fsdp: world_size=8 gpu=h100-sxm-80gb seq_len=4096 micro_batch=4',
  'from torch.distributed.fsdp import fully_shard',
  'from transformers import AutoModelForCausalLM',
  'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
  'model.gradient_checkpointing_enable()',
  'for layer in model.model.layers:',
  '    fully_shard(layer)',
  'fully_shard(model)',
  '',
];

interface FitJson {
  largestMicroBatch: { value: number; nextNeedsBytes: number } | null;
  longestSequence: { value: number; nextNeedsBytes: number } | null;
  smallestWorldSize: number | null;
}

describe('fsdp-lens fit', () => {
  it("the largest micro-batch and sequence are the largest whose estimate fits: the estimator's verdict there and at the next", async () => {
    const dir = projectDir('fsdp-lens-fit-');
    writeFiles(dir, { 'train.py': SCRIPT });
    const file = path.join(dir, 'train.py');
    const r = await cli('fit', file, '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as FitJson;
    const verdict = async (...flags: string[]) =>
      (
        JSON.parse((await cli('estimate', file, '--json', ...flags)).out) as {
          targetFit: { verdict: string };
        }
      ).targetFit.verdict;
    const m = j.largestMicroBatch!.value;
    assert.ok(m > 4, 'more than the file runs');
    assert.equal(await verdict('--batch', String(m)), 'fits');
    assert.equal(await verdict('--batch', String(m + 1)), 'short');
    const s = j.longestSequence!.value;
    assert.ok(s > 4096);
    assert.equal(await verdict('--seq', String(s)), 'fits');
    assert.equal(await verdict('--seq', String(s + 1)), 'short');
    assert.equal(j.smallestWorldSize, 1);
    assert.match((await cli('fit', file)).out, /^Smallest world size: 1 GPU$/m);
  });

  it('ranks the changes that make a plan that does not fit fit, by the step time they lead to', async () => {
    const dir = projectDir('fsdp-lens-fit-');
    // Llama 3.1 8B without checkpointing at 2 x 4,096 tokens on 8 x A100 40 GB: it does not fit.
    writeFiles(dir, {
      'train.py': SCRIPT.filter((l) => !l.includes('gradient_checkpointing')).map((l) =>
        l
          .replace('gpu=h100-sxm-80gb seq_len=4096 micro_batch=4', 'gpu=a100-40gb seq_len=4096 micro_batch=2')
          .replace('Llama-3.2-1B', 'Llama-3.1-8B'),
      ),
    });
    const j = JSON.parse((await cli('fit', path.join(dir, 'train.py'), '--json')).out) as {
      fixes: { label: string; stepSeconds: number }[];
    };
    assert.ok(j.fixes.length > 0);
    for (let i = 1; i < j.fixes.length; i++)
      assert.ok(j.fixes[i - 1]!.stepSeconds <= j.fixes[i]!.stepSeconds);
  });
});
