// A cluster's measured reserve, kept by `calibrate --save` and used by later fit verdicts on that GPU.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { compareMeasured, reserveOfRun, type MeasuredRun } from '../../src/core/report/measured';
import { peakFigure } from '../../src/core/estimator/words';
import { estimateFile } from '../../src/core/resolve/analyze';
import { findGpu, gpuBytes } from '../../src/core/hardware/catalog';
import { cli, fixture, projectDir, scanSource } from './helpers';

const GiB = 2 ** 30;

function run(allocated: number, reserved: number, device: string | null, outside?: number): MeasuredRun {
  return {
    source: 'probe',
    rank: 0,
    worldSize: 8,
    device,
    phases: {
      forward: { allocated: allocated / 2, reserved: reserved / 2 },
      step: { allocated, reserved },
    },
    settings: {},
    notes: [],
    ...(outside !== undefined ? { outsideAllocatorBytes: outside } : {}),
  };
}

describe("a run's reserve", () => {
  it("is the step's reserved peak over its allocated peak, and the memory outside the allocator", () => {
    // 40 GiB handed out, 44 GiB held: an allowance of 44 / 40 - 1 = 0.1.
    assert.deepEqual(
      reserveOfRun(run(40 * GiB, 44 * GiB, 'NVIDIA H100 80GB HBM3', 0.75 * GiB), 'NVIDIA H100 SXM 80GB'),
      {
        fragmentation: 0.1,
        contextBytes: 0.75 * GiB,
      },
    );
    assert.deepEqual(reserveOfRun(run(40 * GiB, 41 * GiB, null), 'NVIDIA H100 SXM 80GB'), {
      fragmentation: 0.025,
    });
  });

  it('is not taken from a run of another GPU, or one with no reserved peak', () => {
    const other = reserveOfRun(run(40 * GiB, 44 * GiB, 'NVIDIA A100-SXM4-80GB'), 'NVIDIA H100 SXM 80GB');
    assert.match(
      'error' in other ? other.error : '',
      /measured on NVIDIA A100-SXM4-80GB, the estimate is for the NVIDIA H100/,
    );
    const none = reserveOfRun(
      { ...run(40 * GiB, 0, null), phases: { step: { allocated: 40 * GiB, reserved: null } } },
      'x',
    );
    assert.match('error' in none ? none.error : '', /no reserved peak/);
  });
});

describe('calibrate --save', () => {
  it('keeps the reserve in .fsdp-lens/calibration.json, and later fits on that GPU use and name it', async () => {
    const dir = projectDir('fsdp-lens-calibration-');
    const train = path.join(dir, 'train.py');
    fs.writeFileSync(train, fixture('workspace/train_fsdp2.py'));
    const probe = path.join(dir, 'run.rank0.json');
    // The step held 5% beyond what it handed out, and 0.5 GiB was in use outside the allocator.
    fs.writeFileSync(
      probe,
      JSON.stringify({
        fsdpLensProbe: 1,
        rank: 0,
        worldSize: 8,
        device: 'NVIDIA H100 80GB HBM3',
        phases: { step: { allocated: 40 * GiB, reserved: 42 * GiB } },
        settings: {},
        outsideAllocatorBytes: 0.5 * GiB,
      }),
    );
    const before = JSON.parse((await cli('estimate', train, '--json')).out);
    const saved = await cli('calibrate', train, probe, '--save', 'pod-a');
    assert.equal(saved.code, 0, saved.err);
    assert.match(
      saved.out,
      /Saved pod-a's reserve for the NVIDIA H100 SXM 80GB .*x 1\.050, 0\.537 GB outside the allocator/,
    );
    const kept = JSON.parse(fs.readFileSync(path.join(dir, '.fsdp-lens', 'calibration.json'), 'utf8'));
    assert.equal(kept.clusters[0].cluster, 'pod-a');
    assert.equal(kept.clusters[0].gpu, 'h100-sxm-80gb');
    assert.equal(kept.clusters[0].fragmentation, 0.05);
    assert.equal(kept.clusters[0].contextBytes, 0.5 * GiB);
    assert.equal(kept.clusters[0].from, 'run.rank0.json');

    const after = JSON.parse((await cli('estimate', train, '--json')).out);
    const peak = after.perGpu.peakBytes;
    assert.equal(peak, before.perGpu.peakBytes, 'the peak is the same: only the reserve beside it changed');
    // The fit on the H100 now needs the peak x 1.05 and 0.5 GiB, where it needed the peak x 1.10 and 1 GiB.
    const capacity = gpuBytes(findGpu('h100-sxm-80gb')!);
    assert.equal(after.targetFit.headroomBytes, capacity - (Math.ceil(peak * 1.05) + 0.5 * GiB));
    assert.equal(before.targetFit.headroomBytes, capacity - (Math.ceil(peak * 1.1) + GiB));
    // Another GPU keeps the defaults.
    const a100 = after.fit.find((f: { gpu: string }) => f.gpu === 'a100-sxm-80gb');
    assert.equal(a100.headroomBytes, gpuBytes(findGpu('a100-sxm-80gb')!) - (Math.ceil(peak * 1.1) + GiB));
    const text = (await cli('estimate', train)).out;
    assert.match(
      text,
      /x 1\.05, the allocator's allowance measured on cluster pod-a, \.fsdp-lens\/calibration\.json, and 0\.537 GB of CUDA context measured there/,
    );

    // Saved again for the same cluster: replaced, not added.
    await cli('calibrate', train, probe, '--save', 'pod-a');
    assert.equal(
      JSON.parse(fs.readFileSync(path.join(dir, '.fsdp-lens', 'calibration.json'), 'utf8')).clusters.length,
      1,
    );
  });

  it('refuses a run of another GPU, and a name that is no cluster name', async () => {
    const dir = projectDir('fsdp-lens-calibration-');
    const train = path.join(dir, 'train.py');
    fs.writeFileSync(train, fixture('workspace/train_fsdp2.py'));
    const probe = path.join(dir, 'run.json');
    fs.writeFileSync(
      probe,
      JSON.stringify({
        fsdpLensProbe: 1,
        device: 'NVIDIA A100-SXM4-80GB',
        phases: { step: { allocated: 40 * GiB, reserved: 42 * GiB } },
      }),
    );
    const r = await cli('calibrate', train, probe, '--save', 'pod-b');
    assert.equal(r.code, 2);
    assert.match(r.err, /not saved: the run was measured on NVIDIA A100-SXM4-80GB/);
    assert.ok(!fs.existsSync(path.join(dir, '.fsdp-lens')));
    const bad = await cli('calibrate', train, probe, '--save', '../x');
    assert.match(bad.err, /is not a cluster name/);
  });
});

describe('where a measured run and the estimate part', () => {
  it("lists the estimate's largest terms at that phase's peak, and nothing where they agree", async () => {
    const facts = await scanSource(fixture('workspace/train_fsdp2.py'), 'train.py');
    const r = estimateFile(facts);
    assert.ok(r.ok);
    const e = r.estimate;
    const stepPeak = Math.max(...e.timeline!.events.map((ev) => ev.total));
    // Measured at half the estimate's step peak (ratio 2), and at the estimate exactly (ratio 1).
    const c = compareMeasured(e, {
      ...run(stepPeak / 2, stepPeak, null),
      phases: {
        step: { allocated: stepPeak / 2, reserved: null },
        forward: { allocated: null, reserved: null },
      },
    });
    const step = c.phases.find((p) => p.phase === 'step')!;
    assert.equal(step.ratio, 2);
    assert.ok(step.terms && step.terms.length > 0 && step.terms.length <= 4);
    const peak = e.timeline!.events.find((ev) => ev.total === stepPeak)!;
    const all = peakFigure(peak.live, e.setup)
      .terms.map((t) => t.bytes)
      .sort((a, b) => b - a);
    assert.deepEqual(
      step.terms.map((t) => t.bytes),
      all.filter((b) => b > 0).slice(0, 4),
    );
    const same = compareMeasured(e, {
      ...run(stepPeak, stepPeak, null),
      phases: { step: { allocated: stepPeak, reserved: null } },
    });
    assert.equal(same.phases[0]!.ratio, 1);
    assert.equal(same.phases[0]!.terms, undefined);
  });
});
