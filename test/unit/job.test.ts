// One job, one verdict: the entry script, the helper that wraps its model and the launch file that runs it.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { cli, projectDir, writeFiles } from './helpers';

interface Json {
  perGpu: { peakBytes: number };
  targetFit: { verdict: string; headroomBytes: number };
  mesh: { worldSize: number };
  assumptions: { key: string; value: string }[];
  notes: string[];
}

function project(): string {
  const dir = projectDir('fsdp-lens-job-');
  writeFiles(dir, {
    'parallel.py': [
      'import torch',
      'from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy',
      '',
      'def shard(model):',
      '    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)',
      '    for layer in model.model.layers:',
      '        fully_shard(layer, mp_policy=mp)',
      '    fully_shard(model, mp_policy=mp)',
      '',
    ],
    'train.py': [
      'import argparse',
      'import torch',
      'from transformers import AutoModelForCausalLM',
      'from parallel import shard',
      '',
      'p = argparse.ArgumentParser()',
      'p.add_argument("--batch", type=int, default=1)',
      'p.add_argument("--seq", type=int, default=4096)',
      'args = p.parse_args()',
      'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")',
      'model.gradient_checkpointing_enable()',
      'shard(model)',
      'x = torch.randint(0, 128256, (args.batch, args.seq))',
      'model(x, labels=x).loss.backward()',
      '',
    ],
    'run.sh': ['#!/bin/bash', 'torchrun --nnodes 2 --nproc_per_node 8 train.py --batch 4 --seq 8192', ''],
  });
  return dir;
}

async function estimate(file: string): Promise<Json> {
  const r = await cli('estimate', file, '--json');
  assert.equal(r.code, 0, r.err);
  return JSON.parse(r.out) as Json;
}

describe('a job across files', () => {
  it('shows the same plan and verdict in the entry script, its helper and its launch file', async () => {
    const dir = project();
    const [entry, helper, launch] = await Promise.all(
      ['train.py', 'parallel.py', 'run.sh'].map((f) => estimate(path.join(dir, f))),
    );
    // The job's inputs: 2 nodes of 8 from run.sh, 4 x 8192 from its arguments, checkpointing from train.py.
    const input = (j: Json, key: string) => j.assumptions.find((a) => a.key === key)?.value;
    assert.equal(entry!.mesh.worldSize, 16);
    assert.equal(input(entry!, 'microBatch'), '4');
    assert.equal(input(entry!, 'seqLen'), '8192');
    assert.match(input(entry!, 'checkpointing') ?? '', /^full/);
    for (const other of [helper!, launch!]) {
      assert.equal(other.mesh.worldSize, entry!.mesh.worldSize);
      for (const key of ['model', 'microBatch', 'seqLen', 'checkpointing', 'paramDtype'])
        assert.equal(input(other, key), input(entry!, key), key);
      assert.equal(other.perGpu.peakBytes, entry!.perGpu.peakBytes);
      assert.deepEqual(other.targetFit, entry!.targetFit);
    }
    // Each says whose job it shows.
    assert.ok(helper!.notes.some((n) => /^the job is train\.py's, which calls shard\(\) at line 12/.test(n)));
    assert.ok(launch!.notes.some((n) => /^the job is train\.py, which this file launches at line 2/.test(n)));
  });

  it("takes a launch script's own annotations (the panel's Apply to file) above its command's inputs", async () => {
    const dir = project();
    const run = path.join(dir, 'run.sh');
    fs.writeFileSync(
      run,
      fs.readFileSync(run, 'utf8').replace('#!/bin/bash\n', '#!/bin/bash\n# fsdp: world_size=32\n'),
    );
    const j = await estimate(run);
    assert.equal(j.mesh.worldSize, 32);
    assert.match(JSON.stringify(j.assumptions), /# fsdp: at run\.sh:2/);
  });

  it('lets a helper called by two scripts show the job of the one its caller= annotation names', async () => {
    const dir = projectDir('fsdp-lens-callers-');
    const caller = (model: string) => [
      'from transformers import AutoModelForCausalLM',
      'from shard import shard',
      `model = AutoModelForCausalLM.from_pretrained("${model}")`,
      'shard(model)',
    ];
    writeFiles(dir, {
      'shard.py': [
        'from torch.distributed.fsdp import fully_shard',
        '',
        'def shard(model):',
        '    for layer in model.model.layers:',
        '        fully_shard(layer)',
        '    fully_shard(model)',
      ],
      'a.py': caller('meta-llama/Llama-3.1-8B'),
      'b.py': caller('meta-llama/Llama-3.1-70B'),
      // Its own function of the same name: not a caller of shard.py's.
      'c.py': ['def shard(x):', '    return x', '', 'shard(1)'],
    });
    const helper = path.join(dir, 'shard.py');
    // The first by path: a.py's 8B (8,030,261,248 parameters).
    const first = JSON.parse((await cli('estimate', helper, '--json')).out) as {
      model: { params: number };
      notes: string[];
    };
    assert.equal(first.model.params, 8_030_261_248);
    assert.ok(
      first.notes.some((n) =>
        /^the job is a\.py's, which calls shard\(\) at line 4: .*; another script calls it too \(b\.py:4\), each its own job/.test(
          n,
        ),
      ),
      first.notes.join('\n'),
    );
    // `# fsdp: caller=b.py`: b.py's 70B (70,553,706,496 parameters), said so.
    fs.writeFileSync(helper, `# fsdp: caller=b.py\n${fs.readFileSync(helper, 'utf8')}`);
    const picked = JSON.parse((await cli('estimate', helper, '--json')).out) as {
      model: { params: number };
      notes: string[];
    };
    assert.equal(picked.model.params, 70_553_706_496);
    assert.ok(
      picked.notes.some((n) =>
        /^the job is b\.py's, which calls shard\(\) at line 4 \(# fsdp: caller= at line 1\)/.test(n),
      ),
    );
    // A name no caller has: said, and the first caller's job stands.
    fs.writeFileSync(helper, fs.readFileSync(helper, 'utf8').replace('caller=b.py', 'caller=c.py'));
    const none = JSON.parse((await cli('estimate', helper, '--json')).out) as {
      model: { params: number };
      notes: string[];
    };
    assert.equal(none.model.params, 8_030_261_248);
    assert.ok(
      none.notes.some((n) =>
        /no script of the project calling it is c\.py .*its callers: a\.py, b\.py/.test(n),
      ),
    );
  });
});

describe('a helper file of several plans', () => {
  it("is the job of the script that calls the plan its reading chooses; --plan keeps the file's own", async () => {
    const dir = projectDir('fsdp-lens-plans-');
    writeFiles(dir, {
      'sharding.py': [
        'from torch.distributed.fsdp import fully_shard',
        '',
        'def shard_text(model):',
        '    for layer in model.model.layers:',
        '        fully_shard(layer)',
        '    fully_shard(model)',
        '',
        'def shard_vision(tower):',
        '    for block in tower.blocks:',
        '        fully_shard(block)',
        '    fully_shard(tower)',
        '',
      ],
      'train.py': [
        '# fsdp: world_size=16 seq_len=8192 micro_batch=2',
        'from transformers import AutoModelForCausalLM',
        'from sharding import shard_text',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")',
        'model.gradient_checkpointing_enable()',
        'shard_text(model)',
        '',
      ],
    });
    const est = async (...args: string[]) => {
      const r = await cli('estimate', ...args, '--json');
      return { code: r.code, json: r.code === 0 ? (JSON.parse(r.out) as Json) : undefined };
    };
    const job = (await est(path.join(dir, 'train.py'))).json!;
    const helper = (await est(path.join(dir, 'sharding.py'))).json!;
    // The helper's plan is shard_text's, which train.py calls: its figures are train.py's (16 GPUs, 2 x 8192).
    assert.equal(helper.mesh.worldSize, 16);
    assert.equal(helper.perGpu.peakBytes, job.perGpu.peakBytes);
    assert.ok(
      helper.notes.some((n) => /^the job is train\.py's, which calls shard_text\(\) at line 6/.test(n)),
    );
    assert.ok(
      helper.notes.some((n) =>
        /shard_vision\(\) \(line 8, called nowhere in the project\) makes another plan/.test(n),
      ),
    );
    // Asked for the other plan, the file is read on its own, at its defaults.
    const r = await cli('estimate', path.join(dir, 'sharding.py'), '--plan', 'shard_vision');
    assert.doesNotMatch(r.out + r.err, /the job is train\.py's/);
  });
});
