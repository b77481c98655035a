// The footprint panel's "Measured against estimated": a measured run beside the file's own estimate, and the
// worker's reading of the run's file (once per version of it, a chunk at a time).
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { buildPanelData, type PanelData, type WhatIfValues } from '../../src/core/report/panelData';
import type { MeasuredRun } from '../../src/core/report/measured';
import type { MeasuredComparison } from '../../src/core/report/panelProtocol';
import { estimateFile } from '../../src/core/resolve/analyze';
import { MeasuredRuns, readRunFile, readRunFileAsync } from '../../src/host/measuredRun';
import { skipUnless } from '../tools';
import { fixture, scanSource, tempDir } from './helpers';
import { makeSnapshot } from './snapshot-fixture';

const GiB = 2 ** 30;

async function fileEstimate() {
  const facts = await scanSource(fixture('workspace/train_fsdp2.py'), 'train.py');
  const estimate = estimateFile(facts);
  assert.ok(estimate.ok);
  return { facts, estimate };
}

async function panelWith(
  measured: NonNullable<Parameters<typeof buildPanelData>[0]['measured']>,
  whatIf: Partial<WhatIfValues> = {},
): Promise<PanelData> {
  const { facts, estimate } = await fileEstimate();
  return buildPanelData({
    facts,
    uri: 'file:///train.py',
    focusUnit: null,
    units: 'GB',
    estimate,
    whatIf,
    measured,
  });
}

function run(phases: MeasuredRun['phases']): MeasuredRun {
  return {
    source: 'probe',
    rank: 0,
    worldSize: 8,
    device: 'NVIDIA H100 80GB HBM3',
    phases,
    settings: {},
    notes: ['a note on the run'],
  };
}

const comparison = (d: PanelData): MeasuredComparison => {
  const m = d.measured;
  assert.ok(m && 'phases' in m, JSON.stringify(m));
  return m;
};

describe('footprint panel: a measured run beside the estimate', () => {
  it("puts each phase beside the estimate's peak of it, with the ratio estimated / measured", async () => {
    const { estimate } = await fileEstimate();
    const events = estimate.estimate.timeline!.events;
    // The estimate's forward (forward and loss, the forward that computes the loss) and backward peaks, by hand.
    const forward = Math.max(
      ...events.filter((e) => ['forward', 'loss'].includes(e.phase)).map((e) => e.total),
    );
    const backward = Math.max(...events.filter((e) => e.phase === 'backward').map((e) => e.total));
    const reserved = estimate.estimate.perGpu.reservedBytes;
    const d = await panelWith({
      file: '/runs/run.rank0.json',
      run: run({
        forward: { allocated: forward, reserved: reserved },
        backward: { allocated: 2 * backward, reserved: 2 * reserved },
        warmup: { allocated: 1, reserved: 1 },
      }),
    });
    const m = comparison(d);
    assert.equal(m.file, '/runs/run.rank0.json');
    assert.equal(m.source, 'probe');
    assert.equal(m.rank, 0);
    assert.equal(m.device, 'NVIDIA H100 80GB HBM3');
    assert.deepEqual(m.notes, ['a note on the run']);
    assert.deepEqual(
      m.phases.map((p) => [p.phase, p.estimatedBytes, p.measuredBytes, p.ratio]),
      [
        ['forward', forward, forward, 1],
        ['backward', backward, 2 * backward, 0.5],
      ],
    );
    // Reserved against the highest reserved peak measured: the estimate's reserve over twice itself.
    assert.equal(m.reserved.estimatedBytes, reserved);
    assert.equal(m.reserved.measuredBytes, 2 * reserved);
    assert.equal(m.reserved.ratio, 0.5);
    const pools = m.reserved.pools!;
    assert.ok(pools.compute > 0);
    assert.deepEqual(m.unknownPhases, ['warmup']);
    assert.deepEqual(m.against, {
      worldSize: 8,
      gpu: estimate.estimate.gpu.name,
      microBatch: 1,
      seqLen: 4096,
    });
    // Where estimate and run part (more than 1.25 either way), the estimate's largest terms at that peak, biggest
    // first; none where they agree.
    assert.equal(m.agree, 1.25);
    assert.equal(m.phases[0]!.terms, undefined);
    const terms = m.phases[1]!.terms!;
    assert.ok(terms.length > 0);
    assert.deepEqual(
      terms.map((t) => t.bytes),
      [...terms.map((t) => t.bytes)].sort((x, y) => y - x),
    );
    const atPeak = events.find((e) => e.phase === 'backward' && e.total === backward)!;
    assert.ok(
      terms.every((t) => Object.values(atPeak.live).includes(t.bytes)),
      JSON.stringify(terms),
    );
  });

  it("pairs a snapshot's categories at its peak with the estimate's terms at its step peak", async () => {
    const { estimate } = await fileEstimate();
    const events = estimate.estimate.timeline!.events;
    // The estimate's step peak: the first event of the largest total, as compareMeasured takes it.
    let at = events[0]!;
    for (const ev of events) if (ev.total > at.total) at = ev;
    const l = at.live;
    // A snapshot's step peak of 30 GiB: 6 of parameters, 12 of optimizer state, 2 gathered, 1 of all-gather
    // buffers, 7 of activations, 2 unknown (1.5 with no frame, 0.5 before the trace).
    const bytes = {
      parameters: 6 * GiB,
      optimizerState: 12 * GiB,
      gathered: 2 * GiB,
      gatherBuffers: 1 * GiB,
      gradients: 0,
      activations: 7 * GiB,
      optimizerStep: 0,
      unknown: 2 * GiB,
    };
    const snapshot: MeasuredRun = {
      ...run({ step: { allocated: 30 * GiB, reserved: 34 * GiB } }),
      source: 'snapshot',
      rank: null,
      worldSize: null,
      device: 'cuda:0',
      categories: {
        step: { bytes, unknown: { withoutFrames: 1.5 * GiB, undecided: 0, beforeTrace: 0.5 * GiB } },
      },
    };
    const m = comparison(await panelWith({ file: '/runs/snapshot.pickle', run: snapshot }));
    const rows = m.phases[0]!.categories!;
    const gathered = l.gathered + l.gatherBuffers;
    const activations = l.activations + l.working + l.logits + l.heldOutput;
    const grads = l.shardGrads + l.gradients;
    assert.deepEqual(
      rows.map((r) => [r.name, r.estimatedBytes, r.measuredBytes, r.difference]),
      [
        ['parameters and optimizer state', l.state, 18 * GiB, l.state - 18 * GiB],
        ['gathered parameters and all-gather buffers', gathered, 3 * GiB, gathered - 3 * GiB],
        ...(grads ? [['gradients', grads, 0, grads]] : []),
        ['activations', activations, 7 * GiB, activations - 7 * GiB],
        ...(l.optimizer ? [['optimizer step', l.optimizer, 0, l.optimizer]] : []),
        ['unknown', null, 2 * GiB, null],
      ],
    );
    assert.deepEqual(rows[0]!.measured, [
      { name: 'parameters and buffers', bytes: 6 * GiB },
      { name: 'optimizer state', bytes: 12 * GiB },
    ]);
    assert.deepEqual(rows.at(-1)!.measured, [
      { name: 'no frame recorded', bytes: 1.5 * GiB },
      { name: 'allocated before the trace, not placed', bytes: 0.5 * GiB },
    ]);
    // The estimate's side adds up to its step peak.
    assert.equal(
      rows.reduce((s, r) => s + (r.estimatedBytes ?? 0), 0),
      at.total,
    );
    // A probe's run has no categories.
    const probe = comparison(
      await panelWith({
        file: '/runs/run.json',
        run: run({ step: { allocated: 30 * GiB, reserved: null } }),
      }),
    );
    assert.equal(probe.phases[0]!.categories, undefined);
  });

  it("compares with the file's own estimate, not the what-if values", async () => {
    const measured = { file: '/runs/run.json', run: run({ step: { allocated: 40e9, reserved: 50e9 } }) };
    const own = comparison(await panelWith(measured));
    const whatIf = await panelWith(measured, { worldSize: 32, checkpointing: 'full' });
    // The what-if changes the panel's figures, not the comparison.
    assert.notEqual(whatIf.estimate!.perGpu.peakBytes, own.phases[0]!.estimatedBytes);
    assert.deepEqual(comparison(whatIf), own);
    assert.equal(own.phases[0]!.ratio, own.phases[0]!.estimatedBytes! / 40e9);
    assert.equal(own.against.worldSize, 8);
  });

  it('passes on why a run could not be read, and how far a long read is', async () => {
    assert.deepEqual((await panelWith({ file: '/x.json', error: 'a directory' })).measured, {
      file: '/x.json',
      error: 'a directory',
    });
    assert.deepEqual((await panelWith({ file: '/x.pickle', reading: { bytes: 1, size: 2 } })).measured, {
      file: '/x.pickle',
      reading: { bytes: 1, size: 2 },
    });
    // A file with nothing to estimate has no figures to compare with.
    const facts = await scanSource('print("hello")\n', 'hello.py');
    const d = buildPanelData({
      facts,
      uri: 'file:///hello.py',
      focusUnit: null,
      units: 'GB',
      estimate: estimateFile(facts),
      measured: { file: '/x.json', run: run({}) },
    });
    assert.deepEqual(d.measured, { file: '/x.json', error: 'the file has no estimate to compare it with' });
  });
});

const PROBE = {
  fsdpLensProbe: 1,
  rank: 1,
  worldSize: 8,
  device: 'NVIDIA H100 80GB HBM3',
  phases: { forward: { allocated: 60e9, reserved: 70e9 } },
};

const titanLine = (gib: string) =>
  `[titan] 2025-03-02 10:16:31,772 - root - INFO - step: 10  loss:  9.4410  grad_norm:  1.2208  memory: ${gib}GiB(77.74%)  tps: 6,811`;

describe("the panel's reader of measured runs", () => {
  it('reads as the command line does, a chunk at a time', async () => {
    const dir = tempDir('fsdp-lens-runs-');
    const probe = path.join(dir, 'run.json');
    fs.writeFileSync(probe, JSON.stringify(PROBE));
    const log = path.join(dir, 'train.log');
    // Three chunks of filler before the memory line.
    fs.writeFileSync(log, `${'x'.repeat(99)}\n`.repeat(30_000) + `${titanLine('61.50')}\n`);
    const notes = path.join(dir, 'notes.txt');
    fs.writeFileSync(notes, 'epoch 1 done\n');
    for (const f of [probe, log, notes, dir, path.join(dir, 'missing.json')])
      assert.deepEqual(await readRunFileAsync(f), readRunFile(f), f);
    const r = await readRunFileAsync(log);
    assert.ok(!('error' in r));
    assert.equal(r.phases.step!.reserved, Math.round(61.5 * GiB));
    // A signal stops it, and says why.
    const stop = new AbortController();
    stop.abort('stopped here');
    assert.deepEqual(await readRunFileAsync(log, { signal: stop.signal }), { error: 'stopped here' });
  });

  it('reads a memory snapshot as the command line does', { skip: skipUnless('python3') }, async () => {
    const { file } = makeSnapshot({
      protocol: 4,
      frames: { fwd: { filename: '/work/model.py', name: 'forward', line: 40 } },
      stacks: { F: ['fwd'] },
      segments: [
        {
          device: 0,
          address: 0x7f0000000000,
          total_size: 8 * GiB,
          blocks: [{ size: 8 * GiB, requested_size: 0, state: 'inactive' }],
        },
      ],
      traces: [
        [
          { action: 'alloc', addr: 1, size: 2 * GiB, stack: 'F' },
          { action: 'free_completed', addr: 1, size: 2 * GiB, stack: 'F' },
        ],
      ],
    });
    const r = await readRunFileAsync(file);
    assert.ok(!('error' in r), JSON.stringify(r));
    assert.equal(r.source, 'snapshot');
    assert.deepEqual(r, readRunFile(file));
  });

  it('reads a file once while it stays the same, and again when it changes', async () => {
    const dir = tempDir('fsdp-lens-runs-');
    const file = path.join(dir, 'run.json');
    const then = new Date('2025-03-02T10:00:00Z');
    fs.writeFileSync(file, JSON.stringify(PROBE));
    fs.utimesSync(file, then, then);
    const runs = new MeasuredRuns();
    try {
      const first = await runs.get(file, 5_000);
      assert.ok('phases' in first && first.rank === 1);
      // The same size and modification time: the run read before, not the file's new bytes.
      fs.writeFileSync(file, JSON.stringify({ ...PROBE, rank: 2 }));
      fs.utimesSync(file, then, then);
      const kept = await runs.get(file, 5_000);
      assert.equal(kept, first);
      // Changed: read again.
      fs.writeFileSync(file, JSON.stringify({ ...PROBE, rank: 3, worldSize: 16 }));
      const again = await runs.get(file, 5_000);
      assert.ok('phases' in again && again.rank === 3);
      fs.rmSync(file);
      assert.ok('error' in (await runs.get(file, 5_000)));
    } finally {
      runs.dispose();
    }
  });

  it('says how far a long read is, and when it ends', async () => {
    const dir = tempDir('fsdp-lens-runs-');
    const file = path.join(dir, 'train.log');
    fs.writeFileSync(file, `${'x'.repeat(99)}\n`.repeat(300_000) + `${titanLine('61.50')}\n`);
    const size = fs.statSync(file).size;
    const runs = new MeasuredRuns();
    try {
      const first = await runs.get(file, 0);
      assert.ok('reading' in first, JSON.stringify(first));
      assert.equal(first.reading.size, size);
      await runs.settled(file);
      const read = await runs.get(file, 0);
      assert.ok('phases' in read, JSON.stringify(read));
      assert.equal(read.phases.step!.reserved, Math.round(61.5 * GiB));
    } finally {
      runs.dispose();
    }
    // Past its time limit, the read stops and says so.
    const slow = new MeasuredRuns(0);
    try {
      await slow.get(file, 0);
      await slow.settled(file);
      const r = await slow.get(file, 0);
      assert.ok('error' in r);
      assert.match(
        r.error,
        /reading stopped after 0 s, at .* of 30\.\d MB: `fsdp-lens calibrate` reads it to its end/,
      );
    } finally {
      slow.dispose();
    }
  });
});
