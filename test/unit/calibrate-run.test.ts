import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { readMeasuredRun } from '../../src/core/report/measured';
import { skipUnless, tools } from '../tools';
import { cli, projectDir, ROOT, writeFiles } from './helpers';

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
  phases: { phase: string; estimatedBytes: number; measuredBytes: number; ratio: number }[];
  reserved: { estimatedBytes: number; measuredBytes: number; ratio: number };
  unknownPhases: string[];
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
