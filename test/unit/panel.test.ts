import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { requiredBytes } from '../../src/core/estimator/fit';
import { findGpu, gpuBytes } from '../../src/core/hardware/catalog';
import { hoverMarkdown, mdEscape } from '../../src/core/report/hover';
import { buildPanelData, whatIfFrom, type WhatIfValues } from '../../src/core/report/panelData';
import { estimateFile } from '../../src/core/resolve/analyze';
import { fixture, scanSource } from './helpers';
import { setAnnotations } from '../../src/core/lint/annotationEdits';
import { applyEdits } from '../../src/core/lint/edits';

// Llama 3.1 8B (config.json): 32 layers of 218,112,000 parameters; 8,030,261,248 in all.
const PARAMS = 8_030_261_248;
const LAYER = 218_112_000;
const BUFFERS = 256; // rotary inv_freq: 64 x fp32

async function panelFor(whatIf: Partial<WhatIfValues> = {}, text = fixture('workspace/train_fsdp2.py')) {
  const facts = await scanSource(text, 'train.py');
  const estimate = estimateFile(facts);
  assert.ok(estimate.ok);
  return buildPanelData({ facts, uri: 'file:///train.py', focusUnit: null, units: 'GB', estimate, whatIf });
}

const traffic = (d: Awaited<ReturnType<typeof panelFor>>) => {
  const s = d.estimate!.comms.perStep;
  return s.allGatherBytes + s.reduceScatterBytes + s.allReduceBytes;
};

describe('footprint panel data', () => {
  it("names the optimizer step as the peak's place when the step is the peak", async () => {
    // One GPU, 16 tokens: the foreach AdamW step's extra fp32 copy of every parameter is the largest moment.
    const d = await panelFor({ worldSize: 1, seqLen: 16 });
    assert.deepEqual(d.estimate!.perGpu.peakAt, { unit: 'optimizer step', phase: 'optimizer' });
  });

  it('shows the file as it is when nothing is changed', async () => {
    const d = await panelFor();
    assert.deepEqual(d.whatIf!.values, d.whatIf!.base);
    // fp32 parameters and gradients, two fp32 Adam states: 16 B per parameter over 8 GPUs.
    assert.equal(d.estimate!.perGpu.persistentBytes, (PARAMS * 16) / 8 + BUFFERS);
    assert.equal(d.advice![0]!.level, 'ok');
    assert.equal(d.whatIf!.blockUnits, 32);
  });

  it("offers an FSDP2 plan's sharding in FSDP2's words, an FSDP1 plan's as its strategies", async () => {
    const fsdp2 = await panelFor();
    const options = (d: typeof fsdp2) => d.whatIf!.controls.find((c) => c.key === 'strategy')!.options!;
    assert.deepEqual(
      options(fsdp2).map((o) => o.label),
      ['reshard after forward', 'no reshard after forward', 'HSDP (2-D mesh)'],
    );
    // The values stay the what-if's: FSDP2's reshard_after_forward=False is SHARD_GRAD_OP's schedule.
    assert.deepEqual(
      options(fsdp2).map((o) => o.value),
      ['FULL_SHARD', 'SHARD_GRAD_OP', 'HYBRID_SHARD'],
    );
    const fsdp1 = await panelFor(
      {},
      fixture('lint/fsdp015_bad.py')
        .replace(/fully_shard\((\w+)\)/g, 'FSDP($1)')
        .replace('import fully_shard', 'import FullyShardedDataParallel as FSDP'),
    );
    assert.deepEqual(
      options(fsdp1).map((o) => o.label),
      ['FULL_SHARD', 'SHARD_GRAD_OP', 'HYBRID_SHARD'],
    );
  });

  it('lists what a what-if changes, and writes it to the file as one annotation edit', async () => {
    const d = await panelFor({ worldSize: 16, checkpointing: 'full', strategy: 'SHARD_GRAD_OP' });
    assert.deepEqual(
      d.whatIf!.changed.map((c) => [c.key, c.value, c.file, c.annotation]),
      [
        ['worldSize', '16', '8', 'world_size'],
        ['checkpointing', 'full (every block)', 'none', 'ac'],
        // The plan's own change: no annotation says it, the code does.
        ['strategy', 'no reshard after forward', 'reshard after forward', null],
      ],
    );
    assert.deepEqual((await panelFor()).whatIf!.changed, []);
    // Two pairs into a file with an annotation comment: replaced and added in that one comment line.
    const text = '# fsdp: world_size=8 gpu=h100\nimport torch\n';
    const edit = setAnnotations(text, [
      ['world_size', '16'],
      ['checkpointing', 'full'],
    ])!;
    // The pair it has is replaced in place; the one it lacks goes in a comment of its own at the top.
    assert.equal(
      applyEdits(text, [edit]),
      '# fsdp: checkpointing=full\n# fsdp: world_size=16 gpu=h100\nimport torch\n',
    );
    // One edit over the first line only: the rest of the file is untouched.
    assert.deepEqual([edit.range.start.line, edit.range.end.line], [0, 0]);
    // A file that starts with a blank line: the comment goes first, whole.
    const blank = '\nimport torch\n';
    assert.equal(
      applyEdits(blank, [setAnnotations(blank, [['world_size', '16']])!]),
      '# fsdp: world_size=16\n\nimport torch\n',
    );
  });

  it('world size 16 halves the sharded state', async () => {
    const d = await panelFor({ worldSize: 16 });
    assert.equal(d.estimate!.perGpu.persistentBytes, PARAMS + BUFFERS);
    assert.equal(d.whatIf!.values.worldSize, 16);
    assert.equal(d.whatIf!.base.worldSize, 8);
  });

  it("CPU offload moves every unit's sharded state to the host", async () => {
    const d = await panelFor({ offload: 'on' });
    const e = d.estimate!;
    // 16 B per parameter (fp32 weights and gradients, Adam's two moments) over 8 ranks leave the GPU; the buffers
    // are never sharded nor offloaded.
    assert.equal(e.perGpu.persistentBytes, BUFFERS);
    assert.equal(e.perGpu.hostBytes, (PARAMS * 16) / 8);
    assert.equal(d.whatIf!.values.offload, 'on');
    assert.equal(d.whatIf!.base.offload, 'off');
    assert.deepEqual(whatIfFrom({ offload: 'on' }, d.whatIf!.base), { offload: true });
    assert.deepEqual(whatIfFrom({ offload: 'some' }, d.whatIf!.base), {});
  });

  it('solves for what fits on every GPU only when asked, under the what-if values', async () => {
    const facts = await scanSource(fixture('workspace/train_fsdp2.py'), 'train.py');
    const estimate = estimateFile(facts);
    assert.ok(estimate.ok);
    const input = { facts, uri: 'file:///train.py', focusUnit: null, units: 'GB' as const, estimate };
    assert.equal(buildPanelData({ ...input, whatIf: {} }).fit, undefined);
    const d = buildPanelData({ ...input, whatIf: { worldSize: 16 }, fit: true });
    assert.ok(d.fit);
    assert.equal(d.fit.target.worldSize, 16);
    const h100 = d.fit.perGpu.find((r) => r.gpu === 'h100-sxm-80gb')!;
    assert.equal(h100.largestMicroBatch.status, 'found');
  });

  it('compares with another version of the job: the causes add up to the change', async () => {
    const text = fixture('workspace/train_fsdp2.py');
    const facts = await scanSource(text, 'train.py');
    const estimate = estimateFile(facts);
    assert.ok(estimate.ok);
    const older = estimateFile(
      await scanSource(`# fsdp: world_size=16 checkpointing=full\n${text}`, 'train.py'),
    );
    const d = buildPanelData({
      facts,
      uri: 'file:///train.py',
      focusUnit: null,
      units: 'GB',
      estimate,
      whatIf: {},
      compare: { label: 'the last commit', estimate: older },
    });
    const delta = d.compare!.delta!;
    // 16 GPUs to 8: twice the state of 16 B per parameter over 16 GPUs, PARAMS bytes more on each.
    assert.equal(delta.after.persistentBytes - delta.before.persistentBytes, PARAMS);
    assert.deepEqual(
      delta.causes.map((c) => c.cause),
      ['checkpointing', 'world size'],
    );
    for (const k of ['peakBytes', 'persistentBytes', 'trafficBytes', 'hostBytes'] as const)
      assert.equal(
        delta.causes.reduce((a, c) => a + c[k], 0),
        delta.after[k] - delta.before[k],
        k,
      );
    const none = buildPanelData({
      facts,
      uri: 'file:///train.py',
      focusUnit: null,
      units: 'GB',
      estimate,
      whatIf: {},
      compare: { label: 'x.py', estimate: undefined },
    });
    assert.deepEqual(none.compare, { label: 'x.py', reason: 'it has nothing to estimate' });
  });

  it("names an FSDP2 file's kept units as SHARD_GRAD_OP, and reshards them when FULL_SHARD is chosen", async () => {
    const text = fixture('workspace/train_fsdp2.py').replace(
      'fully_shard(layer, mp_policy=mp)',
      'fully_shard(layer, mp_policy=mp, reshard_after_forward=False)',
    );
    const kept = await panelFor({}, text);
    assert.equal(kept.whatIf!.base.strategy, 'SHARD_GRAD_OP');
    const resharded = await panelFor({ strategy: 'FULL_SHARD' }, text);
    const plain = await panelFor();
    // Every block resharded after forward: the file's figures as if it said nothing of reshard.
    assert.equal(resharded.estimate!.perGpu.peakBytes, plain.estimate!.perGpu.peakBytes);
    assert.equal(traffic(resharded), traffic(plain));
  });

  it('control values equal to the file change nothing', () => {
    const base: WhatIfValues = {
      worldSize: 8,
      gpusPerNode: 8,
      gpu: 'h100-sxm-80gb',
      microBatch: 1,
      seqLen: 4096,
      checkpointing: 'none',
      blocksPerUnit: 1,
      strategy: 'FULL_SHARD',
    };
    assert.deepEqual(whatIfFrom({ ...base }, base), {});
    assert.deepEqual(whatIfFrom({ ...base, worldSize: 32, checkpointing: 'every-2' }, base), {
      worldSize: 32,
      checkpointing: { everyN: 2 },
    });
    // Nonsense from the webview is dropped, not trusted.
    assert.deepEqual(whatIfFrom({ worldSize: -3, gpu: 'no-such-gpu', strategy: 'EVIL' } as never, base), {});
  });

  it('SHARD_GRAD_OP drops exactly the backward all-gathers', async () => {
    const base = await panelFor();
    const sgo = await panelFor({ strategy: 'SHARD_GRAD_OP' });
    // 32 block units gathered again in backward at 7/8 x 218,112,000 params x 2 B (bf16); the root is kept anyway.
    assert.equal(traffic(base) - traffic(sgo), 32 * (7 / 8) * LAYER * 2);
    assert.ok(sgo.estimate!.perGpu.peakBytes > base.estimate!.perGpu.peakBytes, 'kept units cost memory');
  });

  it('HYBRID_SHARD on 2 nodes: the state of 8 GPUs, plus an all-reduce of each shard across the replicas', async () => {
    const d = await panelFor({ worldSize: 16, strategy: 'HYBRID_SHARD' });
    const e = d.estimate!;
    assert.equal(e.mesh.replicas, 2);
    assert.equal(e.mesh.shardGroup, 8);
    assert.equal(e.perGpu.persistentBytes, (PARAMS * 16) / 8 + BUFFERS);
    // Ring all-reduce of the fp32 gradient shard (1/8) between 2 replicas: 2 x 1/2 x PARAMS/8 x 4 B.
    assert.equal(e.comms.perStep.allReduceBytes, 2 * 0.5 * (PARAMS / 8) * 4);
    assert.deepEqual(
      e.comms.links.map((l) => [l.role, l.link.id]),
      [
        ['shard group', 'nvlink4'],
        ['replicas', 'ib-ndr'],
      ],
    );
  });

  it('the granularity curve: 2 blocks per unit halves the block collectives', async () => {
    const d = await panelFor();
    const at = (k: number) => d.granularity!.find((p) => p.blocksPerUnit === k)!;
    // Divisors of 32.
    assert.deepEqual(
      d.granularity!.map((p) => p.blocksPerUnit),
      [1, 2, 4, 8, 16, 32],
    );
    // One block per unit: 32 x (2 all-gathers + 1 reduce-scatter) + the root's 1 + 1 = 98.
    assert.equal(at(1).collectivesPerStep, 98);
    assert.equal(at(1).units, 33);
    // Two: 16 units of 2 blocks: 16 x 3 + 2 = 50.
    assert.equal(at(2).collectivesPerStep, 50);
    assert.equal(at(2).units, 17);
    for (let i = 1; i < d.granularity!.length; i++)
      assert.ok(
        d.granularity![i]!.peakBytes >= d.granularity![i - 1]!.peakBytes,
        'bigger units, higher peak',
      );
  });

  it('the fit matrix agrees with itself and with the smallest world size', async () => {
    const d = await panelFor();
    const m = d.fitMatrix!;
    for (let i = 1; i < m.peakBytes.length; i++) assert.ok(m.peakBytes[i]! <= m.peakBytes[i - 1]!);
    for (const g of m.gpus) {
      const gpu = findGpu(g.id)!;
      m.worldSizes.forEach((n, i) => {
        assert.equal(
          g.fits[i] === 'fits',
          requiredBytes(m.peakBytes[i]!) <= gpuBytes(gpu),
          `${g.id} at ${n}`,
        );
        if (g.minGpus.worldSize !== null)
          assert.equal(g.fits[i] === 'fits', n >= g.minGpus.worldSize, `${g.id} at ${n}`);
      });
    }
  });

  it('a plan that does not fit gets the changes that would, each re-estimated', async () => {
    const d = await panelFor({ worldSize: 1 });
    const fit = d.advice!.find((a) => a.id === 'fit')!;
    assert.equal(fit.level, 'problem');
    // One GPU holds 8,030,261,248 x 16 B = 128 GB of state: more than any 80 GB GPU.
    const more = fit.options.find((o) => /^\d+ GPUs$/.test(o.label))!;
    assert.equal(more.verdict, 'fits');
    const n = Number(more.label.split(' ')[0]);
    // On n GPUs the state alone is 128.5 GB / n, which must leave room in 76.8 GB: n >= 2.
    assert.ok(n >= 2);
    // Memory is tight: Adam's state is half of it, and LoRA (rank 16 on every linear layer) would train
    // 32 x (16 x (8192 + 5120 + 5120 + 8192) + 3 x 16 x (4096 + 14336)) = 41,943,040 parameters: 0.52% of the model.
    const opt = d.advice!.find((a) => a.id === 'optimizer')!;
    assert.match(opt.options[0]!.note, /^0\.52% of parameters trainable/);
    assert.ok(opt.options[0]!.persistentBytes < d.estimate!.perGpu.persistentBytes / 2);
  });

  it('escapes user strings in hover Markdown', async () => {
    assert.equal(mdEscape('[x](command:evil)'), '\\[x\\]\\(command\\:evil\\)');
    assert.equal(mdEscape('<img src=x>'), '\\<img src=x\\>');
    const facts = await scanSource(fixture('workspace/train_fsdp2.py'), 'train.py');
    const r = estimateFile(facts);
    assert.ok(r.ok);
    const gpu = r.estimate.assumptions.find((a) => a.key === 'gpu')!;
    gpu.value = '[click](command:workbench.action.terminal.new)';
    const md = hoverMarkdown(facts.calls[0]!, r.estimate, 'GB', {});
    assert.match(md, /\\\[click\\\]\\\(command\\:workbench/);
    assert.ok(!md.includes('](command:'), md);
  });
});
