import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { readRunFile } from '../../src/host/measuredRun';
import { readMeasuredRun } from '../../src/core/report/measured';
import { skipUnless, tools } from '../tools';
import { cli, projectDir, ROOT, writeFiles } from './helpers';
import { makeSnapshot } from './snapshot-fixture';

// Llama 3.1 8B on 8 GPUs at 2 x 4,096 tokens without checkpointing: its peak is at the loss, which a probe's
// "forward" phase holds (the forward that computes the loss).
const SCRIPT = [
  '# fsdp: world_size=8 seq_len=4096 micro_batch=2',
  'import torch',
  'from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy',
  'from transformers import AutoModelForCausalLM',
  'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")',
  'mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)',
  'for layer in model.model.layers:',
  '    fully_shard(layer, mp_policy=mp)',
  'fully_shard(model, mp_policy=mp)',
  '',
];

const RUN = {
  fsdpLensProbe: 1,
  rank: 0,
  worldSize: 8,
  device: 'NVIDIA H100 80GB HBM3',
  phases: {
    forward: { allocated: 60e9, reserved: 70e9 },
    backward: { allocated: 62e9, reserved: 72e9 },
    warmup: { allocated: 1, reserved: 1 },
  },
  settings: { micro_batch: 2 },
};

interface Comparison {
  run: {
    source: string;
    rank: number | null;
    worldSize: number | null;
    device: string | null;
    notes: string[];
  };
  phases: { phase: string; estimatedBytes: number; measuredBytes: number | null; ratio: number | null }[];
  reserved: { estimatedBytes: number; measuredBytes: number | null; ratio: number | null };
  unknownPhases: string[];
}

const GiB = 2 ** 30;

/**
 * A step of the same job as a memory snapshot records it on cuda:0, in GiB: 30 allocated before tracing began
 * (parameters, gradients, optimizer states), then +20 in forward, +10 in backward, -25, +2 in the optimizer, -7.
 * frames are innermost first, as PyTorch's symbolize gives them.
 */
const SNAPSHOT = {
  protocol: 4,
  frames: {
    fwd: { filename: '/work/model.py', name: 'forward', line: 40 },
    loop: { filename: '/work/train.py', name: 'main', line: 90 },
    eng: {
      filename: '/usr/lib/python3/site-packages/torch/autograd/graph.py',
      name: '_engine_run_backward',
      line: 823,
    },
    opt: { filename: '/usr/lib/python3/site-packages/torch/optim/adamw.py', name: 'step', line: 220 },
  },
  stacks: { F: ['fwd', 'loop'], B: ['eng', 'loop'], O: ['opt', 'loop'] },
  segments: [
    {
      device: 0,
      address: 0x7f0000000000,
      total_size: 64 * GiB,
      blocks: [
        { size: 30 * GiB, requested_size: 30 * GiB, state: 'active_allocated' },
        { size: 2 * GiB, requested_size: 2 * GiB, state: 'active_allocated', stack: 'O' },
        { size: 32 * GiB, requested_size: 0, state: 'inactive' },
      ],
    },
  ],
  traces: [
    [
      { action: 'alloc', addr: 1, size: 20 * GiB, stack: 'F' },
      { action: 'alloc', addr: 2, size: 10 * GiB, stack: 'B' },
      { action: 'free_completed', addr: 1, size: 20 * GiB, stack: 'F' },
      { action: 'free_completed', addr: 2, size: 5 * GiB, stack: 'B' },
      { action: 'alloc', addr: 3, size: 2 * GiB, stack: 'O' },
      { action: 'free_completed', addr: 4, size: 5 * GiB, stack: 'B' },
    ],
  ],
};

const SITE = '/usr/lib/python3/site-packages/torch/';

/**
 * The same job's step as a snapshot with FSDP2's and AdamW's frames, in GiB: +4 sharded parameters
 * (FSDPParam._init_sharded_param), +8 AdamW state (_init_group), +2 gathered in forward (the all-gather's copy-out),
 * +40 and +10 activations (a module's forward, the loss), +3 recorded with no frame (autograd's thread): the peak,
 * 67 GiB; then all but the parameters and the state freed.
 */
const CATEGORY_SNAPSHOT = {
  protocol: 4,
  frames: {
    init: {
      filename: `${SITE}distributed/fsdp/_fully_shard/_fsdp_param.py`,
      name: '_init_sharded_param',
      line: 240,
    },
    shard: {
      filename: `${SITE}distributed/fsdp/_fully_shard/_fully_shard.py`,
      name: 'fully_shard',
      line: 200,
    },
    state: { filename: `${SITE}optim/adamw.py`, name: '_init_group', line: 110 },
    step: { filename: `${SITE}optim/adamw.py`, name: 'step', line: 190 },
    out: {
      filename: `${SITE}distributed/fsdp/_fully_shard/_fsdp_param.py`,
      name: 'alloc_all_gather_outputs',
      line: 600,
    },
    wait: {
      filename: `${SITE}distributed/fsdp/_fully_shard/_fsdp_param_group.py`,
      name: 'wait_for_unshard',
      line: 330,
    },
    call: { filename: `${SITE}nn/modules/module.py`, name: '_call_impl', line: 1750 },
    fwd: { filename: '/work/model.py', name: 'forward', line: 40 },
    loss: { filename: `${SITE}nn/functional.py`, name: 'cross_entropy', line: 3400 },
    loop: { filename: '/work/train.py', name: 'main', line: 90 },
  },
  stacks: {
    P: ['init', 'shard', 'loop'],
    S: ['state', 'step', 'loop'],
    G: ['out', 'wait', 'call', 'loop'],
    A: ['fwd', 'call', 'loop'],
    L: ['loss', 'loop'],
    E: [],
  },
  segments: [
    {
      device: 0,
      address: 0x7f0000000000,
      total_size: 80 * GiB,
      blocks: [
        { size: 4 * GiB, requested_size: 4 * GiB, state: 'active_allocated', stack: 'P' },
        { size: 8 * GiB, requested_size: 8 * GiB, state: 'active_allocated', stack: 'S' },
        { size: 68 * GiB, requested_size: 0, state: 'inactive' },
      ],
    },
  ],
  traces: [
    [
      { action: 'alloc', addr: 0x7f0000000000, size: 4 * GiB, stack: 'P' },
      { action: 'alloc', addr: 0x7f0000000000 + 4 * GiB, size: 8 * GiB, stack: 'S' },
      { action: 'alloc', addr: 1, size: 2 * GiB, stack: 'G' },
      { action: 'alloc', addr: 2, size: 40 * GiB, stack: 'A' },
      { action: 'alloc', addr: 3, size: 10 * GiB, stack: 'L' },
      { action: 'alloc', addr: 4, size: 3 * GiB, stack: 'E' },
      { action: 'free_completed', addr: 4, size: 3 * GiB, stack: 'E' },
      { action: 'free_completed', addr: 3, size: 10 * GiB, stack: 'L' },
      { action: 'free_completed', addr: 2, size: 40 * GiB, stack: 'A' },
      { action: 'free_completed', addr: 1, size: 2 * GiB, stack: 'G' },
    ],
  ],
};

interface CategoryRowJson {
  name: string;
  estimated: { name: string; bytes: number }[];
  measured: { name: string; bytes: number }[];
  estimatedBytes: number | null;
  measuredBytes: number | null;
  difference: number | null;
}

describe('fsdp-lens calibrate', () => {
  it('puts each measured phase beside the same phase of the estimate, allocated and reserved apart', async () => {
    const dir = projectDir('fsdp-lens-calibrate-');
    writeFiles(dir, { 'train.py': SCRIPT, 'run.json': [JSON.stringify(RUN)] });
    const r = await cli('calibrate', path.join(dir, 'train.py'), path.join(dir, 'run.json'), '--json');
    assert.equal(r.code, 0, r.err);
    const c = JSON.parse(r.out) as Comparison;
    const est = JSON.parse((await cli('estimate', path.join(dir, 'train.py'), '--json')).out) as {
      perGpu: { peakBytes: number; reservedBytes: number; peakAt: { phase: string } };
    };
    // The step's peak is at the loss: the "forward" phase (forward and loss) estimates it whole.
    assert.equal(est.perGpu.peakAt.phase, 'loss');
    const fwd = c.phases.find((p) => p.phase === 'forward')!;
    assert.equal(fwd.estimatedBytes, est.perGpu.peakBytes);
    assert.equal(fwd.measuredBytes, 60e9);
    assert.equal(fwd.ratio, est.perGpu.peakBytes / 60e9);
    // Reserved against reserved: the estimate's reserve and the highest reserved peak measured.
    assert.equal(c.reserved.estimatedBytes, est.perGpu.reservedBytes);
    assert.equal(c.reserved.measuredBytes, 72e9);
    assert.deepEqual(c.unknownPhases, ['warmup']);
  });

  it('refuses a file the probe did not write', async () => {
    const dir = projectDir('fsdp-lens-calibrate-');
    writeFiles(dir, { 'train.py': SCRIPT, 'run.json': ['{"phases": {}}'] });
    const r = await cli('calibrate', path.join(dir, 'train.py'), path.join(dir, 'run.json'));
    assert.equal(r.code, 2);
    assert.match(r.err, /not a file fsdp_lens_probe\.py wrote/);
  });

  it(
    'reads a memory snapshot: its peaks by phase beside the estimate, with notes on what they assume',
    { skip: skipUnless('python3') },
    async () => {
      const dir = projectDir('fsdp-lens-calibrate-');
      writeFiles(dir, { 'train.py': SCRIPT });
      const { file } = makeSnapshot(SNAPSHOT);
      const r = await cli('calibrate', path.join(dir, 'train.py'), file, '--json');
      assert.equal(r.code, 0, r.err);
      const c = JSON.parse(r.out) as Comparison;
      assert.equal(c.run.source, 'snapshot');
      assert.equal(c.run.device, 'cuda:0');
      assert.equal(c.run.rank, null);
      // At the end: 30 + 2 GiB active; the trace's net is +20 +10 -20 -5 +2 -5 = 2: it began with 30 allocated.
      const measured = Object.fromEntries(c.phases.map((p) => [p.phase, p.measuredBytes]));
      assert.deepEqual(measured, {
        forward: (30 + 20) * GiB,
        backward: (30 + 20 + 10) * GiB,
        optimizer: (30 + 5 + 2) * GiB,
        step: (30 + 20 + 10) * GiB,
      });
      assert.equal(c.reserved.measuredBytes, 64 * GiB);
      const step = c.phases.find((p) => p.phase === 'step')!;
      assert.equal(step.ratio, step.estimatedBytes / (60 * GiB));
      assert.ok(
        c.run.notes.some((n) => /tracing began after 32\.2 GB was already allocated/.test(n)),
        c.run.notes.join('\n'),
      );
      const text = await cli('calibrate', path.join(dir, 'train.py'), file);
      assert.equal(text.code, 0, text.err);
      assert.match(text.out, /^Run: memory snapshot on cuda:0$/m);
      assert.match(text.out, /^ {2}backward +estimated .* measured +64\.4 GB/m);
      assert.match(
        text.out,
        /^Notes on the measured figures:\n {2}- memory snapshot of cuda:0: 6 trace events/m,
      );
    },
  );

  it(
    "pairs a snapshot's categories at its peak with the estimate's terms at its step peak",
    { skip: skipUnless('python3') },
    async () => {
      const dir = projectDir('fsdp-lens-calibrate-');
      writeFiles(dir, { 'train.py': SCRIPT });
      const { file } = makeSnapshot(CATEGORY_SNAPSHOT);
      const r = await cli('calibrate', path.join(dir, 'train.py'), file, '--json');
      assert.equal(r.code, 0, r.err);
      const c = JSON.parse(r.out) as {
        phases: { phase: string; measuredBytes: number; categories?: CategoryRowJson[] }[];
      };
      const step = c.phases.find((p) => p.phase === 'step')!;
      assert.equal(step.measuredBytes, 67 * GiB);
      // The estimate's step peak (the first event of its largest total), as compareMeasured takes it.
      const est = JSON.parse((await cli('estimate', path.join(dir, 'train.py'), '--json')).out) as {
        timeline: { totalBytes: number; live: Record<string, number> }[];
      };
      let at = est.timeline[0]!;
      for (const ev of est.timeline) if (ev.totalBytes > at.totalBytes) at = ev;
      const l = at.live;
      const row = (name: string) => step.categories!.find((x) => x.name === name)!;
      // Rows where the estimate and the run both hold nothing (gradients and the optimizer step at a forward peak,
      // pipeline buffers) are left out; unknown is always there.
      assert.deepEqual(
        step.categories!.map((x) => x.name),
        [
          'parameters and optimizer state',
          'gathered parameters and all-gather buffers',
          'activations',
          'unknown',
        ],
      );
      assert.deepEqual(row('parameters and optimizer state'), {
        name: 'parameters and optimizer state',
        estimated: [{ name: 'sharded state', bytes: l.state }],
        measured: [
          { name: 'parameters and buffers', bytes: 4 * GiB },
          { name: 'optimizer state', bytes: 8 * GiB },
        ],
        estimatedBytes: l.state,
        measuredBytes: 12 * GiB,
        difference: l.state! - 12 * GiB,
      });
      const gathered = l.gathered! + l.gatherBuffers!;
      assert.equal(row('gathered parameters and all-gather buffers').estimatedBytes, gathered);
      assert.equal(row('gathered parameters and all-gather buffers').measuredBytes, 2 * GiB);
      const activations = l.activations! + l.working! + l.logits! + l.heldOutput!;
      assert.deepEqual(
        [row('activations').estimatedBytes, row('activations').measuredBytes, row('activations').difference],
        [activations, 50 * GiB, activations - 50 * GiB],
      );
      // The estimate's terms in it, as its figures name them: its saved activations and its logits.
      assert.deepEqual(
        row('activations').estimated.map((t) => t.name),
        ['saved activations', 'logits and loss'].filter((_, i) => [l.activations, l.logits][i]! > 0),
      );
      assert.deepEqual(row('unknown'), {
        name: 'unknown',
        estimated: [],
        measured: [{ name: 'no frame recorded', bytes: 3 * GiB }],
        estimatedBytes: null,
        measuredBytes: 3 * GiB,
        difference: null,
      });
      // Each side adds up to its own peak.
      assert.equal(
        step.categories!.reduce((s, x) => s + (x.measuredBytes ?? 0), 0),
        67 * GiB,
      );
      assert.equal(
        step.categories!.reduce((s, x) => s + (x.estimatedBytes ?? 0), 0),
        at.totalBytes,
      );
      const text = await cli('calibrate', path.join(dir, 'train.py'), file);
      assert.equal(text.code, 0, text.err);
      assert.match(text.out, /^Allocated peak by phase:\n(.*\n)+By category at the peak \(/m);
      assert.match(
        text.out,
        /^ {2}activations +estimated +[\d.]+ GB {2}measured +53\.7 GB {2}difference [+-][\d.]+ GB$/m,
      );
      assert.match(text.out, /^ {6}measured: parameters and buffers 4\.29 GB, optimizer state 8\.59 GB$/m);
      assert.match(
        text.out,
        /^ {2}unknown +estimated +none {2}measured +3\.22 GB\n {6}measured: no frame recorded 3\.22 GB$/m,
      );
      assert.match(text.out, /^ {2}Largest differences \(estimated - measured\): activations [+-]/m);
      // A probe's run has no categories: no such table.
      writeFiles(dir, { 'run.json': [JSON.stringify(RUN)] });
      const probe = await cli('calibrate', path.join(dir, 'train.py'), path.join(dir, 'run.json'));
      assert.doesNotMatch(probe.out, /By category/);
    },
  );

  it('reads a training log: its reserved peak beside the estimate', async () => {
    const dir = projectDir('fsdp-lens-calibrate-');
    writeFiles(dir, {
      'train.py': SCRIPT,
      // torchtitan/components/metrics.py MetricsProcessor.log's step line, as torchtitan's logger prints it.
      'train.log': [
        '[titan] 2025-03-02 10:14:03,118 - root - INFO - CUDA capacity: NVIDIA H100 80GB HBM3 with 79.11GiB memory',
        '[titan] 2025-03-02 10:16:31,772 - root - INFO - step: 10  loss:  9.4410  grad_norm:  1.2208  memory: 61.50GiB(77.74%)  tps: 6,811  tflops: 396.71  mfu: 40.11%',
        '',
      ],
    });
    const r = await cli('calibrate', path.join(dir, 'train.py'), path.join(dir, 'train.log'), '--json');
    assert.equal(r.code, 0, r.err);
    const c = JSON.parse(r.out) as Comparison;
    assert.equal(c.run.source, 'log');
    assert.equal(c.run.device, 'NVIDIA H100 80GB HBM3');
    assert.equal(c.reserved.measuredBytes, Math.round(61.5 * GiB));
    assert.deepEqual(
      c.phases.map((p) => [p.phase, p.measuredBytes, p.ratio]),
      [['step', null, null]],
    );
    const text = await cli('calibrate', path.join(dir, 'train.py'), path.join(dir, 'train.log'));
    assert.match(text.out, /^Run: training log \(torchtitan\) on NVIDIA H100 80GB HBM3$/m);
    assert.match(text.out, /reserved \(the step\) +estimated .* measured +66\.0 GB {2}ratio/);
  });

  it("reads a log that opens with the Trainer's metrics dict (Python's repr, not JSON) as a log", async () => {
    const dir = projectDir('fsdp-lens-calibrate-');
    writeFiles(dir, {
      'train.py': SCRIPT,
      // transformers/trainer.py: train() logs its metrics with TrainerMemoryTracker's (bytes) as a dict.
      'trainer.log': [
        "{'train_runtime': 120.5012, 'init_mem_gpu_alloc_delta': 16060055552, 'train_mem_gpu_alloc_delta': 32120111104, 'train_mem_gpu_peaked_delta': 9663676416, 'before_init_mem_gpu': 0, 'epoch': 1.0}",
      ],
    });
    const r = await cli('calibrate', path.join(dir, 'train.py'), path.join(dir, 'trainer.log'), '--json');
    assert.equal(r.code, 0, r.err);
    const c = JSON.parse(r.out) as Comparison;
    assert.equal(c.run.source, 'log');
    assert.deepEqual(
      c.phases.map((p) => [p.phase, p.measuredBytes]),
      [['step', 0 + 16060055552 + 32120111104 + 9663676416]],
    );
    assert.equal(c.reserved.measuredBytes, null);
  });

  it("reads a long log's end only, from its first whole line", () => {
    const dir = projectDir('fsdp-lens-calibrate-');
    const step = (n: number, gib: string) =>
      `[titan] 2025-03-02 10:16:31,772 - root - INFO - step: ${n}  loss:  9.4410  grad_norm:  1.2208  memory: ${gib}GiB(77.74%)  tps: 6,811`;
    // 70.00 GiB at step 1, then 2,000 lines of 100 characters, then 61.50 GiB at step 2: the last 100,000 bytes
    // start inside the filler, so step 1 is not read.
    const lines = [
      step(1, '70.00'),
      ...Array.from({ length: 2000 }, () => 'x'.repeat(99)),
      step(2, '61.50'),
      '',
    ];
    writeFiles(dir, { 'train.log': lines });
    const run = readRunFile(path.join(dir, 'train.log'), 100_000);
    assert.ok(!('error' in run), JSON.stringify(run));
    assert.deepEqual(run.phases, { step: { allocated: null, reserved: Math.round(61.5 * GiB) } });
    assert.ok(run.notes.some((n) => /only the log's last part was read/.test(n)));
    const all = readRunFile(path.join(dir, 'train.log'));
    assert.ok(!('error' in all));
    assert.equal(all.phases.step!.reserved, Math.round(70 * GiB));
  });

  it(
    'refuses a RUN of none of the three kinds, and a snapshot cut short, with a message and exit 2',
    { skip: skipUnless('python3') },
    async () => {
      const dir = projectDir('fsdp-lens-calibrate-');
      writeFiles(dir, { 'train.py': SCRIPT, 'notes.txt': ['epoch 1 done', 'loss 2.1'] });
      const r = await cli('calibrate', path.join(dir, 'train.py'), path.join(dir, 'notes.txt'));
      assert.equal(r.code, 2);
      assert.match(r.err, /no memory line of torchtitan/);
      assert.match(
        r.err,
        /RUN is fsdp_lens_probe\.py's JSON, a PyTorch memory snapshot .* or a training log/,
      );
      const { file } = makeSnapshot(SNAPSHOT);
      const cut = path.join(dir, 'cut.pickle');
      fs.writeFileSync(cut, fs.readFileSync(file).subarray(0, 200));
      const t = await cli('calibrate', path.join(dir, 'train.py'), cut);
      assert.equal(t.code, 2);
      assert.match(t.err, /cut\.pickle: not a memory snapshot this reader takes: .*truncated/);
      const list = makeSnapshot({ root: [1, 2], protocol: 2 }).file;
      const l = await cli('calibrate', path.join(dir, 'train.py'), list);
      assert.equal(l.code, 2);
      assert.match(l.err, /a pickle of a list, not a memory snapshot/);
    },
  );

  it(
    'reads what the probe writes, run with real PyTorch (no GPU here: the peaks are said to be unmeasured)',
    { skip: skipUnless('torch') },
    () => {
      const dir = projectDir('fsdp-lens-probe-');
      const out = path.join(dir, 'run.json');
      const python = tools().torch.python ?? '/usr/bin/python3';
      execFileSync(python, [
        '-c',
        [
          'import sys',
          `sys.path.insert(0, ${JSON.stringify(path.join(ROOT, 'python'))})`,
          'from fsdp_lens_probe import Probe',
          `p = Probe(${JSON.stringify(out)})`,
          'with p.phase("forward"): pass',
          'with p.phase("backward"): pass',
          'p.save(micro_batch=2)',
        ].join('\n'),
      ]);
      const run = readMeasuredRun(fs.readFileSync(out, 'utf8'));
      assert.ok(!('error' in run), JSON.stringify(run));
      assert.deepEqual(Object.keys(run.phases), ['forward', 'backward']);
      assert.equal(run.settings.micro_batch, 2);
    },
  );
});
