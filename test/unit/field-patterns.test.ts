// Patterns of public training code: which launch file launches a script, and values read where the code reads them.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { cli } from './helpers';
import { launchLayer, readLaunchFile } from '../../src/core/project/settings';

describe('launch files that launch this script', () => {
  it('reads torchrun with a shell default, and ignores a commented-out command', () => {
    const facts = readLaunchFile(
      '/p/run.sh',
      [
        '#!/bin/bash',
        '# torchrun --nproc_per_node 2 train.py',
        'torchrun --nproc_per_node=${2:-4} train.py --lr 1e-4',
      ].join('\n'),
    );
    assert.deepEqual(
      facts.map((f) => [f.line, f.script, f.nprocPerNode]),
      [[3, 'train.py', 4]],
    );
    const layer = launchLayer(facts, '/p', '/p/train.py');
    assert.equal(layer?.layer.values.worldSize, 4);
    // The count is the script's default, which an argument may change: the source says so.
    assert.match(layer!.layer.source.detail!, /run\.sh:3 \(the shell default of \$\{2:-4\}/);
  });

  it('a launch file of another program says nothing of this script', () => {
    const facts = readLaunchFile('/p/eval.sh', 'torchrun --nproc_per_node 1 evaluate.py --ckpt out/\n');
    assert.equal(facts[0]!.script, 'evaluate.py');
    assert.equal(launchLayer(facts, '/p', '/p/train.py'), undefined);
    // A batch header with no program written out is still the lone launch file's.
    const header = readLaunchFile(
      '/p/job.sbatch',
      '#SBATCH --nodes=2\n#SBATCH --gpus-per-node=8\nsrun ./go\n',
    );
    assert.equal(launchLayer(header, '/p', '/p/train.py')?.layer.values.worldSize, 16);
  });

  it('names the module a `-m` launch runs', () => {
    const facts = readLaunchFile('/p/run.sh', 'torchrun --nproc_per_node 8 -m pkg.train --config c.toml\n');
    assert.equal(facts[0]!.script, 'train.py');
    assert.equal(launchLayer(facts, '/p', '/p/pkg/train.py')?.layer.values.worldSize, 8);
  });
});

describe('a plan on a model of unknown size', () => {
  it('gives no figure, exit 3, and JSON that says the model is unknown and what would make it known', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fsdp-lens-unknown-'));
    fs.writeFileSync(path.join(dir, 'pyproject.toml'), '[project]\nname = "t"\n');
    const file = path.join(dir, 'train.py');
    // The config is read at run time from a path on the command line: nothing static says the model's size.
    fs.writeFileSync(
      file,
      [
        'import sys',
        'from transformers import AutoConfig, AutoModelForCausalLM',
        'from torch.distributed.fsdp import fully_shard',
        'model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(sys.argv[1]))',
        'for layer in model.model.layers:',
        '    fully_shard(layer)',
        'fully_shard(model)',
        '',
      ].join('\n'),
    );
    const text = await cli('estimate', file);
    assert.equal(text.code, 3, text.err);
    assert.equal(text.out, '');
    assert.match(text.err, /no estimate: the model behind `model` is not known statically/);
    assert.match(text.err, /# fsdp: model=ORG\/NAME/);
    const json = await cli('estimate', file, '--json');
    assert.equal(json.code, 3);
    const j = JSON.parse(json.out) as { estimate: null; model: { known: boolean; toKnow: string } };
    assert.equal(j.estimate, null);
    assert.equal(j.model.known, false);
    assert.match(j.model.toKnow, /--model \/ --config/);
    // Named on the command line, the same model is known.
    assert.equal((await cli('estimate', file, '--model', 'openai-community/gpt2')).code, 0);
    // A model the user names wrongly is bad input (2), not an unknown size.
    assert.equal((await cli('estimate', file, '--model', 'nobody/nothing')).code, 2);
  });
});
