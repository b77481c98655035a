import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { requiredBytes } from '../../src/core/estimator/fit';
import { findGpu, gpuBytes, GPUS } from '../../src/core/hardware/catalog';
import type { Estimate, FitResult } from '../../src/core/estimator/types';
import { WhatIfModel, type WhatIf } from '../../src/core/whatif/model';
import {
  checkedMinGpus,
  largestFittingOn,
  type LargestOn,
  type SmallestOn,
} from '../../src/core/whatif/solve';
import { cli, defaultInput, FIXTURES, projectDir, ROOT, writeFiles } from './helpers';

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

/** A two-block Llama small enough to follow every byte by hand (the one timeline.test.ts derives a step of). */
const TINY = {
  model_type: 'llama',
  hidden_size: 64,
  intermediate_size: 128,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  vocab_size: 100,
  tie_word_embeddings: false,
};

interface PerGpuJson {
  gpu: string;
  memoryBytes: number;
  verdict: string | null;
  largestMicroBatch: LargestOn;
  longestSequence: LargestOn;
  smallestWorldSize: SmallestOn;
}

describe('fsdp-lens fit, per GPU of the catalog', () => {
  it('the largest micro-batch on two GPUs, derived by hand', () => {
    // W = 2, 8,192 tokens per sequence, bf16 compute, fp32 master weights, AdamW, no checkpointing. Parameters
    // (timeline.test.ts): a block 36,992, the root 12,864 (embedding, head, final norm): P = 86,848.
    // The peak is at the loss: the state with no gradient shard yet, 16 B x P / 2 + the rotary buffer (32 B)
    // - the blocks' and the root's fp32 gradient shards (2 x 73,984 + 25,728) = 521,120; the root gathered in bf16,
    // 12,864 x 2 = 25,728; and per token of the micro-batch: each block's saved tensors, 2,192 B (norms 768, q,
    // k and v, attention output 128 each, log-sum-exp 16, SwiGLU 1,024), the tail's 384 (6 x 64) and the logits'
    // 12 B x 100 (the loss's backward: fp32 logits, their softmax and gradient): 2 x 2,192 + 384 + 1,200 = 5,968.
    const FIXED = 521_120 + 25_728;
    const PER_SEQUENCE = 8192 * 5968;
    const peak = (b: number) => FIXED + b * PER_SEQUENCE;
    // It fits a GPU when the peak with the allocator's 10 % and the 1 GiB context is at most the GPU's memory:
    // L4 (23,034 MiB): 1.1 x peak <= 24,152,899,584 - 2^30, peak <= 20,981,052,509, b <= 429.1;
    // H200 (143,771 MiB): peak <= 136,074,154,356, b <= 2,783.3.
    const expected: Record<string, number> = { 'l4-24gb': 429, 'h200-141gb': 2783 };
    for (const [id, b] of Object.entries(expected)) {
      const capacity = gpuBytes(findGpu(id)!);
      assert.ok(requiredBytes(peak(b)) <= capacity && requiredBytes(peak(b + 1)) > capacity, id);
    }
    const model = new WhatIfModel(defaultInput(TINY, { worldSize: 2, microBatch: 1, seqLen: 8192 }));
    const run = (w: Parameters<WhatIfModel['run']>[0]) => model.run(w);
    const answers = largestFittingOn(run, 'microBatch', 1, 4096, Object.keys(expected));
    for (const [id, b] of Object.entries(expected)) {
      const a = answers.get(id)!;
      assert.equal(a.status, 'found', id);
      assert.equal(a.status === 'found' && a.value, b, id);
      // The estimator's own figures are the hand's, on that GPU, at the value and the next.
      for (const [v, verdict] of [
        [b, 'fits'],
        [b + 1, 'short'],
      ] as const) {
        const e = model.run({ microBatch: v, gpu: id });
        assert.equal(e.perGpu.peakBytes, peak(v), `${id} at ${v}`);
        assert.equal(e.targetFit.verdict, verdict, `${id} at ${v}`);
      }
      assert.equal(a.status === 'found' && a.nextNeedsBytes, requiredBytes(peak(b + 1)));
    }
  });

  it("checks each GPU's answer on that GPU's own estimate, and searches again on its own where they disagree", () => {
    // Estimates that need 100 B per micro-batch: the figures for every GPU say the L4 holds 1,000 B, its own
    // estimate 700 B (as a verdict that depends on the GPU beyond its memory would).
    const fit = (gpu: string, memoryBytes: number, need: number): FitResult => ({
      gpu,
      name: gpu,
      verdict: need <= memoryBytes ? 'fits' : 'short',
      headroomBytes: memoryBytes - need,
      memoryBytes,
    });
    const runs: WhatIf[] = [];
    const run = (w: WhatIf) => {
      runs.push(w);
      const need = 100 * (w.microBatch ?? 1);
      const own = w.gpu ?? 'h100-sxm-80gb';
      const all = [fit('h100-sxm-80gb', 2000, need), fit('l4-24gb', 1000, need)];
      return {
        gpu: { id: own },
        fit: all,
        targetFit: own === 'l4-24gb' ? fit('l4-24gb', 700, need) : all[0]!,
      } as unknown as Estimate;
    };
    const answers = largestFittingOn(run, 'microBatch', 1, 4096, ['h100-sxm-80gb', 'l4-24gb']);
    assert.deepEqual(answers.get('h100-sxm-80gb'), {
      status: 'found',
      value: 20,
      nextNeedsBytes: 2100,
      cap: 4096,
    });
    assert.deepEqual(answers.get('l4-24gb'), { status: 'found', value: 7, nextNeedsBytes: 800, cap: 4096 });
    // The target's answer rests on the shared estimates; the L4's were checked on its own at 10 and 11.
    assert.ok(runs.some((w) => w.gpu === 'l4-24gb' && w.microBatch === 10));
    assert.ok(!runs.some((w) => w.gpu === 'h100-sxm-80gb'));
  });

  it('a verdict undecided on the way leaves every answer undecided, never a value', () => {
    const input = { ...defaultInput(TINY, { worldSize: 2, seqLen: 8192 }), undecided: ['a condition'] };
    const model = new WhatIfModel(input);
    const ids = GPUS.map((g) => g.id);
    for (const key of ['microBatch', 'seqLen'] as const)
      for (const [id, a] of largestFittingOn((w) => model.run(w), key, 1, 4096, ids))
        assert.equal(a.status, 'undecided', `${id} ${key}`);
    const min = checkedMinGpus(
      model.minGpus('l4-24gb'),
      (n) => model.run({ worldSize: n, gpu: 'l4-24gb' }).targetFit,
    );
    assert.equal(min.status, 'undecided');
  });

  it("every row of a bundled example is the estimator's: fits at its value, not at the next", async () => {
    const file = path.join(ROOT, 'examples', 'train_llama_fsdp2.py');
    const r = await cli('fit', file, '--json');
    assert.equal(r.code, 0, r.err);
    const rows = (JSON.parse(r.out) as { perGpu: PerGpuJson[] }).perGpu;
    // One row per GPU of the catalog, smallest memory first.
    assert.deepEqual(rows.map((x) => x.gpu).sort(), GPUS.map((g) => g.id).sort());
    for (let i = 1; i < rows.length; i++) assert.ok(rows[i - 1]!.memoryBytes <= rows[i]!.memoryBytes);
    const verdict = async (gpu: string, ...flags: string[]) => {
      const o = await cli('estimate', file, '--json', '--gpu', gpu, ...flags);
      assert.equal(o.code, 0, o.err);
      return (JSON.parse(o.out) as { targetFit: { verdict: string } }).targetFit.verdict;
    };
    const checked = async (gpu: string, a: LargestOn, flag: string) => {
      if (a.status === 'found') {
        assert.equal(await verdict(gpu, flag, String(a.value)), 'fits', `${gpu} ${flag} ${a.value}`);
        if (a.nextNeedsBytes !== null)
          assert.equal(
            await verdict(gpu, flag, String(a.value + 1)),
            'short',
            `${gpu} ${flag} ${a.value + 1}`,
          );
      } else {
        assert.equal(a.status, 'none fits', `${gpu} ${flag}`);
        assert.equal(await verdict(gpu, flag, '1'), 'short', `${gpu} ${flag} 1`);
      }
    };
    let found = 0;
    for (const row of rows) {
      assert.equal(row.verdict, await verdict(row.gpu), row.gpu);
      await checked(row.gpu, row.largestMicroBatch, '--batch');
      await checked(row.gpu, row.longestSequence, '--seq');
      const s = row.smallestWorldSize;
      if (s.status !== 'found') continue;
      found++;
      // The smallest world size fits and the one below it does not; whole nodes fit too.
      assert.equal(await verdict(row.gpu, '--world-size', String(s.worldSize)), 'fits', row.gpu);
      if (s.worldSize > 1)
        assert.equal(await verdict(row.gpu, '--world-size', String(s.worldSize - 1)), 'short', row.gpu);
      if (s.wholeNodes)
        assert.equal(await verdict(row.gpu, '--world-size', String(s.wholeNodes.worldSize)), 'fits', row.gpu);
    }
    assert.ok(found > 0);
    // The target's lines are its row's.
    const target = rows.find((x) => x.gpu === 'h100-sxm-80gb')!;
    const j = JSON.parse(r.out) as {
      largestMicroBatch: { value: number };
      longestSequence: { value: number };
    };
    assert.equal(
      target.largestMicroBatch.status === 'found' && target.largestMicroBatch.value,
      j.largestMicroBatch.value,
    );
    assert.equal(
      target.longestSequence.status === 'found' && target.longestSequence.value,
      j.longestSequence.value,
    );
    // The table, after the target's lines: one line per GPU, none wider than 100 characters.
    const text = (await cli('fit', file)).out;
    const table = text.slice(text.indexOf('Per GPU of the catalog'));
    for (const g of GPUS) assert.match(table, new RegExp(`^[* ] ${g.id} `, 'm'));
    assert.ok(text.split('\n').every((l) => l.length <= 100));
  });

  it('says undecided in a cell where the figures count more than the job keeps', async () => {
    // torchtune's activation offloading without checkpointing: the saved activations are counted on the GPU,
    // where they do not stay, so a peak that does not fit is no verdict, and neither is the boundary.
    const dir = projectDir('fsdp-lens-fit-');
    const yaml = fs
      .readFileSync(path.join(FIXTURES, 'frameworks', 'torchtune', '8B_full.yaml'), 'utf8')
      .replace('enable_activation_checkpointing: True', 'enable_activation_checkpointing: False');
    writeFiles(dir, { 'train.yaml': [yaml, 'enable_activation_offloading: True', ''] });
    const file = path.join(dir, 'train.yaml');
    const rows = (JSON.parse((await cli('fit', file, '--json')).out) as { perGpu: PerGpuJson[] }).perGpu;
    const h100 = rows.find((x) => x.gpu === 'h100-sxm-80gb')!;
    assert.equal(h100.verdict, 'fits');
    assert.equal(h100.largestMicroBatch.status, 'undecided');
    assert.equal(h100.smallestWorldSize.status, 'undecided');
    assert.match(
      (await cli('fit', file)).out,
      /^\* h100-sxm-80gb +85\.5 GB +fits +undecided +undecided +undecided$/m,
    );
  });
});
