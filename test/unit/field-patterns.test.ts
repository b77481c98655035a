// Patterns of public training code: which launch file launches a script, and values read where the code reads them.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { cli, projectDir, scanSource, tempDir } from './helpers';
import { sitePackages } from '../../src/core/project/environments';
import { composeHydra } from '../../src/core/analysis/hydra';
import { withArguments } from '../../src/core/vocabulary/commandLine';
import { setAnnotation } from '../../src/core/lint/annotationEdits';
import { diskFS } from '../../src/host/disk';
import { launchLayer, readLaunchFile } from '../../src/core/project/settings';
import { applyEdits } from '../../src/core/lint/edits';
import { lintFacts } from '../../src/core/lint/lint';
import { DEFAULT_LINT_OPTIONS } from '../../src/core/lint/types';

/** The estimate's JSON, as far as these tests read it. */
interface EstimateJson {
  model: { params: number };
  plan: { api: string; strategy: string; units: number; source: { kind: string }; notes: string[] };
  units: { modules: string[]; params: number; isRoot: boolean; gatheredBytes: number }[];
  assumptions: { key: string; value: unknown; source: { kind: string; detail?: string } }[];
}

/** `fsdp-lens estimate FILE --json [ARGS]`, which must succeed, parsed. */
async function estimateJson(file: string, ...args: string[]): Promise<EstimateJson> {
  const r = await cli('estimate', file, '--json', ...args);
  assert.equal(r.code, 0, r.err);
  return JSON.parse(r.out) as EstimateJson;
}

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

  it('a `# fsdp: args="..."` comment takes the place of the launch file\'s arguments, and `--` of both', async () => {
    const dir = projectDir('fsdp-lens-argsnote-');
    const file = path.join(dir, 'train.py');
    const lines = [
      'import argparse',
      'import torch.nn as nn',
      'from torch.distributed.fsdp import fully_shard',
      'parser = argparse.ArgumentParser()',
      'parser.add_argument("--dim", type=int, default=64)',
      'args = parser.parse_args()',
      'model = nn.Linear(args.dim, args.dim)',
      'fully_shard(model)',
    ];
    fs.writeFileSync(path.join(dir, 'run.sh'), 'torchrun --nproc_per_node 2 train.py --dim 32\n');
    fs.writeFileSync(file, ['# fsdp: args="--dim 16"', ...lines, ''].join('\n'));
    const params = async (...argv: string[]) =>
      (JSON.parse((await cli('estimate', file, '--json', ...argv)).out) as { model: { params: number } })
        .model.params;
    // nn.Linear(d, d): d x d weights and d biases.
    assert.equal(await params(), 16 * 16 + 16);
    assert.equal(await params('--', '--dim', '8'), 8 * 8 + 8);
  });

  it('keeps the arguments the command passes to the script, up to a pipe or a redirection', () => {
    const [f] = readLaunchFile(
      '/p/multi_node.slurm',
      'srun torchrun --nnodes 2 --nproc_per_node 4 ./train.py --use_peft --peft_method "lora" --lr=1e-4 2>&1 | tee out.log\n',
    );
    assert.deepEqual(f!.scriptArgs, ['--use_peft', '--peft_method', 'lora', '--lr=1e-4']);
    const [m] = readLaunchFile(
      '/p/run.sh',
      'torchrun --nproc_per_node 8 -m pkg.train --config c.toml; echo done\n',
    );
    assert.deepEqual(m!.scriptArgs, ['--config', 'c.toml']);
  });

  it('a launch file that passes the script arguments: the estimate takes the path they choose', async () => {
    const dir = projectDir('fsdp-lens-launchargs-');
    const file = path.join(dir, 'train.py');
    fs.writeFileSync(
      file,
      [
        'import argparse',
        'import torch.nn as nn',
        'from torch.distributed.fsdp import fully_shard',
        'parser = argparse.ArgumentParser()',
        'parser.add_argument("--dim", type=int, default=64)',
        'args = parser.parse_args()',
        'model = nn.Linear(args.dim, args.dim)',
        'fully_shard(model)',
        '',
      ].join('\n'),
    );
    fs.writeFileSync(path.join(dir, 'run.sh'), 'torchrun --nproc_per_node 2 train.py --dim 32\n');
    const r = await cli('estimate', file, '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as { model: { params: number }; plan: { notes: string[] } };
    // nn.Linear(32, 32): 32 x 32 weights and 32 biases.
    assert.equal(j.model.params, 32 * 32 + 32);
    assert.ok(
      j.plan.notes.includes("read from the script's arguments (the launch command at run.sh:1): --dim 32"),
      j.plan.notes.join('\n'),
    );
    // Arguments given after `--` take the place of the launch file's.
    const given = JSON.parse((await cli('estimate', file, '--json', '--', '--dim', '16')).out) as typeof j;
    assert.equal(given.model.params, 16 * 16 + 16);
  });

  it('names the module a `-m` launch runs', () => {
    const facts = readLaunchFile('/p/run.sh', 'torchrun --nproc_per_node 8 -m pkg.train --config c.toml\n');
    assert.equal(facts[0]!.script, 'train.py');
    assert.equal(launchLayer(facts, '/p', '/p/pkg/train.py')?.layer.values.worldSize, 8);
  });
});

describe('a plan on a model of unknown size', () => {
  it('gives no figure, exit 3, and JSON that says the model is unknown and what would make it known', async () => {
    const dir = projectDir('fsdp-lens-unknown-');
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
    assert.equal((await cli('estimate', file, '--model', 'meta-llama/Llama-3.2-1B')).code, 0);
    // A model of other module names (GPT-2's blocks are `transformer.h`, it has no `model.layers`) is not the one
    // the code wraps: no figure, and what would give one.
    const other = await cli('estimate', file, '--model', 'openai-community/gpt2');
    assert.equal(other.code, 3, other.err);
    assert.match(other.err, /wraps `model\.model\.layers\.\*`, which GPT2LMHeadModel does not have/);
    assert.match(other.err, /give the model the code builds/);
    // A model the user names wrongly is bad input (2), not an unknown size.
    assert.equal((await cli('estimate', file, '--model', 'nobody/nothing')).code, 2);
  });
});

describe('values a script takes from its own defaults', () => {
  const script = (lines: string[]) => {
    const dir = projectDir('fsdp-lens-defaults-');
    const file = path.join(dir, 'train.py');
    fs.writeFileSync(file, lines.join('\n') + '\n');
    return file;
  };
  const PARSER = [
    'import argparse',
    'from transformers import AutoModelForCausalLM',
    'from torch.distributed.fsdp import fully_shard, FullyShardedDataParallel as FSDP',
    'parser = argparse.ArgumentParser()',
    'parser.add_argument("--model-name", default="meta-llama/Llama-3.2-1B")',
    'parser.add_argument("--fsdp1", action="store_true")',
    'args = parser.parse_args()',
    'model = AutoModelForCausalLM.from_pretrained(args.model_name)',
  ];

  it('a wrap its defaults keep off names the arguments that take it, and those arguments do', async () => {
    const file = script([
      ...PARSER,
      'parser.add_argument("--shard", default="blocks", choices=["none", "blocks", "whole"])',
      'parser.add_argument("--mode", default="a")',
      'args = parser.parse_args()',
      'if args.fsdp1:',
      '    model = FSDP(model)',
      'elif args.shard == "whole" and args.mode == "b":',
      '    fully_shard(model.lm_head)',
      '    fully_shard(model)',
      'else:',
      '    for layer in model.model.layers:',
      '        fully_shard(layer)',
      '    fully_shard(model)',
    ]);
    const scan = JSON.parse((await cli('scan', file, '--json')).out) as {
      files: { calls: { line: number; runsWith?: string[] }[] }[];
    };
    const at = (line: number) => scan.files[0]!.calls.find((c) => c.line === line)?.runsWith;
    // A store_true flag alone; a choice of `choices=`, then the literal the next test compares with.
    assert.deepEqual(at(13), ['--fsdp1']);
    assert.deepEqual(at(15), ['--shard', 'whole', '--mode', 'b']);
    // On the default path: nothing to add.
    assert.equal(at(19), undefined);
    const j = await estimateJson(file);
    assert.ok(
      j.plan.notes.some((n) => n.includes('the arguments `--shard whole --mode b` take that path')),
      j.plan.notes.join('\n'),
    );
    // Those arguments do take it: the lm_head and the root, 2 units.
    const other = await estimateJson(file, '--', '--shard', 'whole', '--mode', 'b');
    assert.equal(other.plan.units, 2);
    assert.equal((await estimateJson(file, '--', '--fsdp1')).plan.api, 'fsdp1');
  });

  it("arms the script's own arguments keep off are off this path, not dead code: no FSDP008, and the way back", async () => {
    const file = script([
      '# fsdp: args="--fsdp1"',
      ...PARSER,
      'if args.fsdp1:',
      '    model = FSDP(model)',
      'else:',
      '    for layer in model.model.layers:',
      '        fully_shard(layer)',
      '    fully_shard(model)',
    ]);
    const lint = await cli('lint', file, '--rule', 'FSDP015=off');
    assert.doesNotMatch(lint.out, /FSDP008/);
    const j = await estimateJson(file);
    assert.equal(j.plan.api, 'fsdp1');
    assert.ok(
      j.plan.notes.some((n) =>
        /fully_shard\(model\) is left out: `args\.fsdp1` is true by the script's arguments \(--fsdp1\)/.test(
          n,
        ),
      ),
      j.plan.notes.join('\n'),
    );
    // FSDP015, when the plan does not fit, stands on the plan estimated (the FSDP1 root), not on the other arm.
    const small = script([
      ...fs.readFileSync(file, 'utf8').trimEnd().split('\n'),
      '# fsdp: world_size=1 gpu=l4-24gb',
    ]);
    const fit = await cli('lint', small);
    assert.match(fit.out, /train\.py:11:\d+: FSDP015/);
  });

  it('a LoRA set-up its defaults keep off names the flag that turns it on, and the flag does', async () => {
    const file = script([
      ...PARSER,
      'from peft import LoraConfig, get_peft_model',
      'parser.add_argument("--use-lora", action="store_true")',
      'args = parser.parse_args()',
      'if args.use_lora:',
      '    model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))',
      'for layer in model.model.layers:',
      '    fully_shard(layer)',
      'fully_shard(model)',
    ]);
    const j = await estimateJson(file);
    assert.ok(
      j.plan.notes.some((n) =>
        /LoRA at train\.py:13 is left out: .*the arguments `--use-lora` take that path/.test(n),
      ),
      j.plan.notes.join('\n'),
    );
    const lora = await estimateJson(file, '--', '--use-lora');
    // Rank 8 on q_proj and v_proj of 16 layers (Llama 3.2 1B: 2048 wide, 512 for k/v): 16·8·(2048+2048) for
    // q_proj and 16·8·(2048+512) for v_proj.
    const trainable = lora.units.reduce(
      (s, u) => s + (u as unknown as { trainableParams: number }).trainableParams,
      0,
    );
    assert.equal(trainable, 16 * 8 * (2048 + 2048) + 16 * 8 * (2048 + 512));
  });

  it("a trainer's `self.args` holds what its construction passes: the model named by an argparse default", async () => {
    const lines = [
      'import argparse',
      'from transformers import AutoModelForCausalLM',
      'from torch.distributed.fsdp import fully_shard',
      'class Trainer:',
      '    def __init__(self, args, world):',
      '        self.args = args',
      '    def build(self):',
      '        model = AutoModelForCausalLM.from_pretrained(self.args.model_name)',
      '        for layer in model.model.layers:',
      '            fully_shard(layer)',
      '        fully_shard(model)',
      'parser = argparse.ArgumentParser()',
      'parser.add_argument("--model-name", default="meta-llama/Llama-3.2-1B")',
      'args = parser.parse_args()',
      'Trainer(args, 8).build()',
    ];
    const j = await estimateJson(script(lines));
    assert.equal(j.model.params, 1_235_814_400);
    const model = j.assumptions.find((a) => a.key === 'model')!;
    assert.match(model.source.detail!, /the default of --model-name at line 13/);
    // Set in two places (which one a read sees depends on the run): not known, no figure.
    const twice = [...lines];
    twice.splice(6, 0, '    def reset(self, other):', '        self.args = other');
    const r = await cli('estimate', script(twice));
    assert.equal(r.code, 3, r.err);
  });

  it('wraps under a test the analysis cannot decide are estimated as running, and the notes say so once', async () => {
    const file = script([
      'import os',
      'from transformers import AutoModelForCausalLM',
      'from torch.distributed.fsdp import fully_shard',
      'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
      'if os.environ["SHARD"] == "1":',
      '    for layer in model.model.layers:',
      '        fully_shard(layer)',
      '    fully_shard(model)',
    ]);
    const j = await estimateJson(file);
    assert.equal(j.plan.units, 17);
    const said = j.plan.notes.filter((n) =>
      /runs only when `os\.environ\["SHARD"\] == "1"`, which the analysis cannot decide; estimated as if it runs/.test(
        n,
      ),
    );
    assert.equal(said.length, 1, j.plan.notes.join('\n'));
  });

  it('wraps of one API in both arms of an undecided test: the first arm is the plan, not both, and said so', async () => {
    const file = script([
      'import os',
      'from transformers import AutoModelForCausalLM',
      'from torch.distributed.fsdp import fully_shard',
      'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
      'if os.environ["GRAIN"] == "fine":',
      '    for layer in model.model.layers:',
      '        fully_shard(layer.self_attn)',
      '        fully_shard(layer.mlp)',
      'else:',
      '    for layer in model.model.layers:',
      '        fully_shard(layer)',
      'fully_shard(model)',
    ]);
    const j = await estimateJson(file);
    // The fine arm: 16 attention and 16 MLP units, and the root; not the 16 layer units of the other arm as well.
    assert.equal(j.plan.units, 33);
    assert.ok(j.units.every((u) => !u.modules.some((m) => /^model\.layers\.\d+$/.test(m))));
    assert.ok(
      j.plan.notes.some((n) =>
        /the wraps at train\.py:7 and train\.py:11 are in arms of an `if` the analysis cannot decide .*: the first arm's \(train\.py:7\) are estimated, the others left out/.test(
          n,
        ),
      ),
      j.plan.notes.join('\n'),
    );
  });

  it('options set again replace their earlier values on the command line', () => {
    assert.deepEqual(withArguments(['--strategy', 'fsdp', '--bs', '8'], ['--strategy', 'fsdp2']), [
      '--bs',
      '8',
      '--strategy',
      'fsdp2',
    ]);
    assert.deepEqual(withArguments(['--strategy=fsdp', '--fsdp1'], ['--fsdp1']), [
      '--strategy=fsdp',
      '--fsdp1',
    ]);
    assert.deepEqual(withArguments([], ['--mode', 'b']), ['--mode', 'b']);
  });

  it('an argparse default names the model, and the source says it is a default', async () => {
    const file = script([
      ...PARSER,
      'for layer in model.model.layers:',
      '    fully_shard(layer)',
      'fully_shard(model)',
    ]);
    const j = await estimateJson(file);
    // Llama 3.2 1B as published: 1,235,814,400 parameters.
    assert.equal(j.model.params, 1_235_814_400);
    assert.match(
      j.assumptions.find((a) => a.key === 'model')!.source.detail!,
      /train\.py:8 \(the default of --model-name at line 5: a command line may change it\)/,
    );
  });

  it('the model built in a branch a store_true default decides is the default branch, said so', async () => {
    const file = script([
      'import argparse',
      'import torch.nn as nn',
      'from torch.distributed.fsdp import fully_shard',
      'class Net(nn.Module):',
      '    def __init__(self, dim):',
      '        super().__init__()',
      '        self.fc = nn.Linear(dim, dim)',
      'def main(args):',
      '    if args.big:',
      '        model = Net(4096)',
      '    else:',
      '        model = Net(64)',
      '    fully_shard(model)',
      'parser = argparse.ArgumentParser()',
      'parser.add_argument("--big", action="store_true")',
      'main(parser.parse_args())',
    ]);
    const r = await cli('estimate', file, '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as { model: { params: number }; plan: { notes: string[] } };
    // Net(64): one Linear of 64 x 64 weights and 64 biases.
    assert.equal(j.model.params, 64 * 64 + 64);
    assert.ok(
      j.plan.notes.some((n) => /`args\.big` is the default of --big at line 15/.test(n)),
      j.plan.notes.join('\n'),
    );
  });

  it("the script's arguments after `--` take the other path, in the plan and in the model", async () => {
    const file = script([
      'import argparse',
      'import torch.nn as nn',
      'from torch.distributed.fsdp import fully_shard',
      'class Net(nn.Module):',
      '    def __init__(self, dim):',
      '        super().__init__()',
      '        self.fc = nn.Linear(dim, dim)',
      'parser = argparse.ArgumentParser()',
      'parser.add_argument("--big", action="store_true")',
      'parser.add_argument("--dim", type=int, default=64)',
      'args = parser.parse_args()',
      'model = Net(args.dim * 2 if args.big else args.dim)',
      'fully_shard(model)',
    ]);
    const params = async (...argv: string[]) => {
      const r = await cli('estimate', file, '--json', ...argv);
      assert.equal(r.code, 0, r.err);
      return JSON.parse(r.out) as { model: { params: number }; plan: { notes: string[] } };
    };
    // Net(d): d x d weights and d biases.
    assert.equal((await params()).model.params, 64 * 64 + 64);
    const j = await params('--', '--dim=100', '--big');
    assert.equal(j.model.params, 200 * 200 + 200);
    assert.ok(
      j.plan.notes.includes("read from the script's arguments: --big --dim 100"),
      j.plan.notes.join('\n'),
    );
    assert.equal((await params('--', '--dim', '8')).model.params, 8 * 8 + 8);
  });

  it('an environment variable default, a pydantic field default and a click option default', async () => {
    const micro = async (lines: string[], ...argv: string[]) => {
      const file = script([
        'import os',
        'import click',
        'from pydantic import BaseModel, Field',
        'from torch.utils.data import DataLoader',
        'from transformers import AutoModelForCausalLM',
        'from torch.distributed.fsdp import fully_shard',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        'fully_shard(model)',
        ...lines,
      ]);
      const j = await estimateJson(file, ...argv);
      return j.assumptions.find((a) => a.key === 'microBatch')!;
    };
    const env = await micro(['loader = DataLoader(ds, batch_size=int(os.environ.get("MICRO_BATCH", "3")))']);
    assert.equal(env.value, '3');
    assert.match(env.source.detail!, /the default of \$MICRO_BATCH at line 9/);
    const pyd = await micro([
      'class Cfg(BaseModel):',
      '    batch: int = Field(default=5)',
      'loader = DataLoader(ds, batch_size=Cfg().batch)',
    ]);
    assert.equal(pyd.value, '5');
    const clickLines = [
      '@click.command()',
      '@click.option("--batch-size", type=int, default=6)',
      'def main(batch_size):',
      '    loader = DataLoader(ds, batch_size=batch_size)',
    ];
    const clicked = await micro(clickLines);
    assert.equal(clicked.value, '6');
    assert.match(clicked.source.detail!, /the default of --batch-size at line 10/);
    assert.equal((await micro(clickLines, '--', '--batch-size', '2')).value, '2');
    // No default: the variable is not known, and nothing is taken from it.
    assert.equal(
      (await micro(['loader = DataLoader(ds, batch_size=int(os.environ["MB"]))'])).source.kind,
      'default',
    );
  });

  it('a branch off by a store_true default is left out of the plan, said so, and is no lint finding', async () => {
    const file = script([
      ...PARSER,
      'if args.fsdp1:',
      '    model = FSDP(model)',
      'else:',
      '    for layer in model.model.layers:',
      '        fully_shard(layer)',
      '    fully_shard(model)',
    ]);
    const r = await cli('estimate', file, '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as { plan: { api: string; units: number; notes: string[] } };
    // FSDP2 on the default path: 16 decoder layers and the root.
    assert.equal(j.plan.api, 'fsdp2');
    assert.equal(j.plan.units, 17);
    assert.ok(
      j.plan.notes.some((n) =>
        /FSDP\(model\) is left out: `args\.fsdp1` is false by the default of --fsdp1/.test(n),
      ),
      j.plan.notes.join('\n'),
    );
    // A default is not dead code: FSDP008 says nothing.
    const lint = await cli('lint', file, '--format', 'json');
    assert.deepEqual(
      (JSON.parse(lint.out) as { code: string }[]).filter((f) => f.code === 'FSDP008'),
      [],
    );
  });

  it('every wrap behind a store_true flag: the plan of those wraps, labelled as off the default path', async () => {
    const file = script([...PARSER, 'if args.fsdp1:', '    model = FSDP(model)']);
    const r = await cli('estimate', file, '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as { plan: { api: string; notes: string[] } };
    assert.equal(j.plan.api, 'fsdp1');
    assert.ok(j.plan.notes.some((n) => /runs only off the default path .*estimated as if it ran/.test(n)));
  });

  it('a dataclass field default and a string default passed through type=int', async () => {
    const file = script([
      'import argparse',
      'from dataclasses import dataclass, field',
      'from transformers import AutoModelForCausalLM',
      'from torch.distributed.fsdp import fully_shard',
      '@dataclass',
      'class Config:',
      '    model: str = "meta-llama/Llama-3.2-1B"',
      '    layers_per_unit: int = field(default=2)',
      'cfg = Config()',
      'p = argparse.ArgumentParser()',
      'p.add_argument("--reshard", type=int, default="0")',
      'args = p.parse_args()',
      'model = AutoModelForCausalLM.from_pretrained(cfg.model)',
      'for layer in model.model.layers:',
      '    fully_shard(layer, reshard_after_forward=args.reshard == 1)',
      'fully_shard(model)',
    ]);
    const j = await estimateJson(file);
    assert.equal(j.model.params, 1_235_814_400);
    assert.match(
      j.assumptions.find((a) => a.key === 'model')!.source.detail!,
      /the default of Config\.model at line 7/,
    );
  });
});

describe('wraps made through a helper of another file', () => {
  const project = (train: string, helper: string) => {
    const dir = projectDir('fsdp-lens-helper-');
    fs.mkdirSync(path.join(dir, 'pkg'));
    fs.writeFileSync(path.join(dir, 'pkg', '__init__.py'), '');
    fs.writeFileSync(path.join(dir, 'pkg', 'parallel.py'), helper);
    fs.writeFileSync(path.join(dir, 'train.py'), train);
    return path.join(dir, 'train.py');
  };
  const HELPER = [
    'import torch',
    'from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard',
    '',
    'def shard_model(net, mesh=None):',
    '    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)',
    '    for block in net.model.layers:',
    '        fully_shard(block, mesh=mesh, mp_policy=mp)',
    '    fully_shard(net, mesh=mesh, mp_policy=mp)',
    '',
  ].join('\n');
  const LOAD =
    'from transformers import AutoModelForCausalLM\nmodel = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")\n';

  for (const [form, train] of [
    ['a function imported by name', `${LOAD}from pkg.parallel import shard_model\nshard_model(model)\n`],
    [
      'a call through the module, by keyword',
      `${LOAD}from pkg import parallel\nparallel.shard_model(net=model)\n`,
    ],
    [
      'a module imported with a dotted name',
      `${LOAD}import pkg.parallel as par\npar.shard_model(model, mesh=None)\n`,
    ],
  ] as const)
    it(`the entry script shows the helper's plan: ${form}`, async () => {
      const j = await estimateJson(project(train, HELPER));
      // Llama 3.2 1B: 16 decoder layers, each a unit, and the root.
      assert.equal(j.plan.units, 17);
      assert.equal(j.plan.source.kind, 'detected');
      assert.ok(
        j.plan.notes.some((n) =>
          /the wraps of shard_model\(\) in pkg\/parallel\.py, called at line 4/.test(n),
        ),
      );
      // The helper's MixedPrecisionPolicy gathers in bf16: 2 B per parameter of a block.
      const block = j.units.find((u) => !u.isRoot)!;
      assert.equal(block.gatheredBytes, block.params * 2);
    });

  it('a chain of helpers: the entry, the middle helper and the wrapping helper each show the plan', async () => {
    // The middle module is named setup.py inside a package: a module, not the project's setup script.
    const train = project(`${LOAD}from pkg import setup\nmodel = setup.prepare(model)\n`, HELPER);
    const dir = path.dirname(train);
    fs.writeFileSync(
      path.join(dir, 'pkg', 'setup.py'),
      'from pkg.parallel import shard_model\n\ndef prepare(model):\n    model.gradient_checkpointing_enable()\n    shard_model(model)\n    return model\n',
    );
    for (const file of [train, path.join(dir, 'pkg', 'setup.py'), path.join(dir, 'pkg', 'parallel.py')]) {
      const r = await cli('estimate', file, '--json');
      assert.equal(r.code, 0, `${file}: ${r.err}`);
      const j = JSON.parse(r.out) as {
        model: { params: number };
        plan: { units: number };
        assumptions: { key: string; value: unknown; source: { detail?: string } }[];
      };
      // Llama 3.2 1B (1,235,814,400 parameters): 16 decoder layers and the root.
      assert.equal(j.model.params, 1_235_814_400);
      assert.equal(j.plan.units, 17);
    }
    // The checkpointing the middle helper turns on counts for the entry script, placed in the helper's file.
    const entry = JSON.parse((await cli('estimate', train, '--json')).out) as {
      assumptions: { key: string; value: unknown; source: { detail?: string } }[];
    };
    const ac = entry.assumptions.find((a) => a.key === 'checkpointing')!;
    assert.equal(ac.value, 'full');
    assert.match(ac.source.detail!, /^setup\.py:4 \(gradient_checkpointing_enable\)/);
  });

  it('scan of the entry script lists the wraps made through the helper, in its names', async () => {
    const train = project(`${LOAD}from pkg.parallel import shard_model\nshard_model(model)\n`, HELPER);
    const r = await cli('scan', train);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /no FSDP wrap calls written here; 2 wraps made through helpers:/);
    assert.match(r.out, / {3}4 {2}fully_shard\(model\.model\.layers\.\*\)\n.*written at parallel\.py:7/);
    assert.match(r.out, / {3}4 {2}fully_shard\(model\)\n {8}FSDP2 root \(model\).*written at parallel\.py:8/);
  });

  it("a file's own FSDP1 wrap and a helper's FSDP2 wraps in two arms: the default arm's plan, the other said", async () => {
    const branches = (cond: string) =>
      `${LOAD}import os\nimport argparse\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\nfrom pkg.parallel import shard_model\n` +
      `parser = argparse.ArgumentParser()\nparser.add_argument("--strategy", default="fsdp2")\nargs = parser.parse_args()\n` +
      `if ${cond}:\n    model = FSDP(model)\nelse:\n    shard_model(model)\n`;
    const byDefault = await cli('estimate', project(branches('args.strategy == "fsdp"'), HELPER), '--json');
    assert.equal(byDefault.code, 0, byDefault.err);
    const j = JSON.parse(byDefault.out) as { plan: { api: string; units: number; notes: string[] } };
    assert.equal(j.plan.api, 'fsdp2');
    assert.equal(j.plan.units, 17);
    assert.ok(
      j.plan.notes.some((n) =>
        /FSDP\(model\) is left out: `args\.strategy == "fsdp"` is false by the default of --strategy/.test(n),
      ),
    );
    // Undecided (an environment variable without a default): estimated as FSDP2, and said so.
    const undecided = await cli('estimate', project(branches('os.environ["S"] == "fsdp"'), HELPER), '--json');
    const u = JSON.parse(undecided.out) as { plan: { api: string; notes: string[] } };
    assert.equal(u.plan.api, 'fsdp2');
    assert.ok(
      u.plan.notes.some((n) =>
        /FSDP1 and FSDP2 wraps are in arms of an `if` the analysis cannot decide .*: estimated as FSDP2/.test(
          n,
        ),
      ),
      u.plan.notes.join('\n'),
    );
  });

  it('a test whose other arm only raises is no choice: the helper is followed on a setting it cannot read', async () => {
    // `parallelize_model(model, cfg)` wraps in the arm of `if cfg.kind == "full" or cfg.kind == "none":`, and its
    // `else:` raises: every run that goes on past the `if` has run the wraps, whatever `cfg.kind` is.
    const helper = [
      'from torch.distributed.fsdp import fully_shard',
      '',
      'def parallelize_model(net, cfg):',
      '    if cfg.kind == "full" or cfg.kind == "none":',
      '        for block in net.model.layers:',
      '            fully_shard(block)',
      '        fully_shard(net)',
      '    else:',
      '        msg = f"unknown kind {cfg.kind}"',
      '        raise ValueError(msg)',
      '    return net',
      '',
    ].join('\n');
    const train = `${LOAD}import json\nfrom pkg.parallel import parallelize_model\ncfg = json.load(open("job.json"))\nparallelize_model(model, cfg)\n`;
    const j = await estimateJson(project(train, helper));
    // Llama 3.2 1B: 16 decoder layers and the root.
    assert.equal(j.plan.units, 17);
    assert.equal(j.plan.source.kind, 'detected');
    // An `else:` that may go on (a log line, no raise) keeps the test a choice: not followed, and said why.
    const goesOn = helper.replace('        raise ValueError(msg)\n', '        print(msg)\n');
    const r = await cli('scan', project(train, goesOn));
    assert.match(
      r.out,
      /not estimated: which of its wraps run depends on `cfg\.kind == "full" or cfg\.kind == "none"`/,
    );
  });

  it('a helper not followed on the path the script takes leaves no estimate of the other arm; an undecided arm is said', async () => {
    // The helper picks its modules by a test of a name the analysis cannot read: listed, not followed.
    const picky = [
      'from torch.distributed.fsdp import fully_shard',
      'from pkg.names import WRAP_NAMES',
      '',
      'def shard_some(net):',
      '    for m in net.modules():',
      '        if type(m).__name__ in WRAP_NAMES:',
      '            fully_shard(m)',
      '    fully_shard(net)',
      '',
    ].join('\n');
    const arms = (test: string) =>
      `${LOAD}import os\nimport argparse\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\nfrom pkg.parallel import shard_some\n` +
      `parser = argparse.ArgumentParser()\nparser.add_argument("--strategy", default="fsdp2")\nargs = parser.parse_args()\n` +
      `if ${test}:\n    model = FSDP(model)\nelse:\n    shard_some(model)\n`;
    // The defaults take the helper's arm: the FSDP1 arm is not the job's plan, and there is no other to show.
    const instead = await cli('estimate', project(arms('args.strategy == "fsdp"'), picky));
    assert.equal(instead.code, 3, instead.err);
    assert.match(
      instead.err,
      /part of the plan is not known statically: shard_some\(\) \(line 13\) in pkg\/parallel\.py, run on the path the script takes instead of the file's own wraps/,
    );
    // A test the analysis cannot decide: the own arm is estimated, and the notes say the job runs one of the two.
    const j = await estimateJson(project(arms('os.environ["S"] == "fsdp"'), picky));
    assert.equal(j.plan.api, 'fsdp1');
    assert.ok(
      j.plan.notes.some((n) =>
        /shard_some\(\) \(line 13\) wraps in another arm of a test the analysis cannot decide, and is not followed: the job runs one of the two/.test(
          n,
        ),
      ),
      j.plan.notes.join('\n'),
    );
  });

  it('a helper taken from a registry by a key the defaults decide is followed, and an unknown key is named', async () => {
    const registry = (key: string) =>
      `${LOAD}import argparse\nfrom pkg.parallel import shard_model\n` +
      `PARALLELIZE = {"fsdp": shard_model, "none": lambda m: m}\n` +
      `parser = argparse.ArgumentParser()\nparser.add_argument("--dp", default="fsdp")\nargs = parser.parse_args()\n` +
      `PARALLELIZE[${key}](model)\n`;
    const r = await cli('estimate', project(registry('args.dp'), HELPER), '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as { plan: { units: number; notes: string[] } };
    assert.equal(j.plan.units, 17);
    assert.ok(
      j.plan.notes.some((n) =>
        /the wraps of shard_model\(\) in pkg\/parallel\.py, called at line 9, chosen by PARALLELIZE\[args\.dp\] \(the default of --dp at line 7/.test(
          n,
        ),
      ),
      j.plan.notes.join('\n'),
    );
    // Taken into a name first, then called.
    const named = registry('args.dp').replace(
      'PARALLELIZE[args.dp](model)',
      'parallelize = PARALLELIZE[args.dp]\nparallelize(model)',
    );
    const n = await cli('estimate', project(named, HELPER), '--json');
    assert.equal(n.code, 0, n.err);
    assert.equal((JSON.parse(n.out) as { plan: { units: number } }).plan.units, 17);
    const unknown = await cli('scan', project(registry('input()'), HELPER));
    assert.match(
      unknown.out,
      /PARALLELIZE\[input\(\)\]\(\.\.\.\) \(line 9\) is not followed: the key input\(\) is not known statically/,
    );
  });

  it('a helper whose wraps depend on its own tests is listed, not planned; a test that a module exists is no choice', async () => {
    const choosing = [
      'from torch.distributed.fsdp import fully_shard',
      'def shard_model(net):',
      '    for block in net.model.layers:',
      '        if getattr(block, "moe_enabled", False):',
      '            fully_shard(block, reshard_after_forward=False)',
      '        else:',
      '            fully_shard(block)',
      '    if net.lm_head is not None:',
      '        fully_shard(net.lm_head)',
      '    fully_shard(net)',
      '',
    ].join('\n');
    const train = project(`${LOAD}from pkg.parallel import shard_model\nshard_model(model)\n`, choosing);
    const scan = await cli('scan', train);
    assert.match(
      scan.out,
      /4 {2}shard_model\(\) in pkg\/parallel\.py wraps, not estimated: which of its wraps run depends on `getattr\(block, "moe_enabled", False\)`/,
    );
    assert.match(
      scan.out,
      /parallel\.py:5 {2}fully_shard\(block\)\n {10}parallel\.py:7 {2}fully_shard\(block\)/,
    );
    // Without the per-block choice, the presence test alone leaves the helper a plan.
    const plain = choosing.replace(
      '        if getattr(block, "moe_enabled", False):\n            fully_shard(block, reshard_after_forward=False)\n        else:\n            fully_shard(block)',
      '        fully_shard(block)',
    );
    const r = await cli(
      'estimate',
      project(`${LOAD}from pkg.parallel import shard_model\nshard_model(model)\n`, plain),
      '--json',
    );
    assert.equal(r.code, 0, r.err);
    // Llama 3.2 1B: 16 layers, the head, and the root.
    assert.equal((JSON.parse(r.out) as { plan: { units: number } }).plan.units, 18);
  });

  it('a helper re-exported by its package is followed to its definition', async () => {
    const file = project(`${LOAD}from pkg import training\ntraining.shard_model(model)\n`, HELPER);
    const dir = path.dirname(file);
    // pkg/training/__init__.py re-exports shard_model from pkg/training/_dist.py.
    fs.mkdirSync(path.join(dir, 'pkg', 'training'));
    fs.writeFileSync(path.join(dir, 'pkg', 'training', '__init__.py'), 'from ._dist import shard_model\n');
    fs.writeFileSync(path.join(dir, 'pkg', 'training', '_dist.py'), HELPER);
    const j = JSON.parse((await cli('estimate', file, '--json')).out) as {
      plan: { units: number; notes: string[] };
    };
    assert.equal(j.plan.units, 17);
    assert.ok(j.plan.notes.some((n) => /the wraps of shard_model\(\) in pkg\/training\/_dist\.py/.test(n)));
  });

  it('a helper that wraps only a part, or selects modules by a test it cannot read, makes no plan', async () => {
    const part = [
      'from torch.distributed.fsdp import fully_shard',
      'def resize_embeddings(net, n):',
      '    fully_shard(net.model.embed_tokens)',
      '',
    ].join('\n');
    const a = JSON.parse(
      (
        await cli(
          'estimate',
          project(`${LOAD}from pkg.parallel import resize_embeddings\nresize_embeddings(model, 8)\n`, part),
          '--json',
        )
      ).out,
    ) as { plan: { source: { kind: string } } };
    assert.equal(a.plan.source.kind, 'default');
    const selective = [
      'from torch.distributed.fsdp import fully_shard',
      'def shard_model(net, conditions):',
      '    for name, sub in reversed(list(net.named_modules())):',
      '        if any(c(name, sub) for c in conditions):',
      '            fully_shard(sub)',
      '    fully_shard(net)',
      '',
    ].join('\n');
    // The script wraps nothing itself: the helper makes its plan, so no default plan stands for it.
    const rb = await cli(
      'estimate',
      project(
        `${LOAD}from pkg.parallel import shard_model\nfrom policies import CONDITIONS\nshard_model(model, CONDITIONS)\n`,
        selective,
      ),
      '--json',
    );
    assert.equal(rb.code, 3, rb.err);
    const b = JSON.parse(rb.out) as { plan: { known: boolean; reason: string } };
    assert.equal(b.plan.known, false);
    assert.match(
      b.plan.reason,
      /shard_model\(\) \(line 5\) in pkg\/parallel\.py, which makes the wraps of the script, is not followed: which modules it wraps depends on/,
    );
    // Conditions the call writes out are read: none at all (`any([])` is False) wraps no module but the root.
    const none = JSON.parse(
      (
        await cli(
          'estimate',
          project(`${LOAD}from pkg.parallel import shard_model\nshard_model(model, [])\n`, selective),
          '--json',
        )
      ).out,
    ) as { plan: { source: { kind: string }; units: number } };
    assert.equal(none.plan.source.kind, 'detected');
    assert.equal(none.plan.units, 1);
  });

  it('a helper whose wraps are not all reached from what the call passes is not followed, and says so', async () => {
    const partial = HELPER.replace(
      '    fully_shard(net, mesh=mesh, mp_policy=mp)',
      '    fully_shard(GLOBAL_HEAD, mesh=mesh)\n    fully_shard(net, mesh=mesh, mp_policy=mp)',
    );
    const r = await cli(
      'estimate',
      project(`${LOAD}from pkg.parallel import shard_model\nshard_model(model)\n`, partial),
      '--json',
    );
    // No plan made of half the helper, nor a default plan in place of the one it makes: no figure.
    assert.equal(r.code, 3, r.err);
    const j = JSON.parse(r.out) as { plan: { known: boolean; reason: string } };
    assert.equal(j.plan.known, false);
    assert.match(
      j.plan.reason,
      /shard_model\(\) \(line 4\) in pkg\/parallel\.py, which makes the wraps of the script, is not followed: 1 of its 3 wrap calls/,
    );
  });
});

describe("wraps made through methods of the model's own classes", () => {
  // A block class that wraps itself, and a model whose method wraps each block through it, then itself.
  const MODEL = [
    'import torch.nn as nn',
    'from torch.distributed.fsdp import fully_shard',
    '',
    'class Block(nn.Module):',
    '    def __init__(self, dim):',
    '        super().__init__()',
    '        self.attn = nn.Linear(dim, 3 * dim)',
    '        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))',
    '',
    '    def apply_fsdp(self, mesh):',
    '        fully_shard(self, mesh=mesh)',
    '',
    'class Model(nn.Module):',
    '    def __init__(self, vocab=1000, dim=256, n_layers=4):',
    '        super().__init__()',
    '        self.embed = nn.Embedding(vocab, dim)',
    '        self.blocks = nn.ModuleDict({str(i): Block(dim) for i in range(n_layers)})',
    '        self.head = nn.Linear(dim, vocab, bias=False)',
    '',
    '    def apply_fsdp(self, mesh):',
    '        for block in self.blocks.values():',
    '            block.apply_fsdp(mesh)',
    '        fully_shard(self, mesh=mesh)',
    '',
  ];
  // Block(256): attn 256 x 768 + 768, mlp 256 x 1024 + 1024 and 1024 x 256 + 256 (nn.Linear keeps a bias).
  const BLOCK = 256 * 768 + 768 + (256 * 1024 + 1024) + (1024 * 256 + 256);
  // The root keeps the embedding (1000 x 256) and the head (256 x 1000, no bias).
  const ROOT = 1000 * 256 * 2;

  it('the entry script shows the plan the methods make: a unit per block and the root', async () => {
    const dir = projectDir('fsdp-lens-method-');
    fs.mkdirSync(path.join(dir, 'pkg'));
    fs.writeFileSync(path.join(dir, 'pkg', '__init__.py'), '');
    fs.writeFileSync(path.join(dir, 'pkg', 'model.py'), MODEL.join('\n'));
    const train = path.join(dir, 'train.py');
    fs.writeFileSync(
      train,
      [
        'from torch.distributed.device_mesh import init_device_mesh',
        'from pkg.model import Model',
        'mesh = init_device_mesh("cuda", (4,))',
        'model = Model()',
        'model.apply_fsdp(mesh)',
        '',
      ].join('\n'),
    );
    const j = await estimateJson(train);
    assert.equal(j.model.params, 4 * BLOCK + ROOT);
    assert.equal(j.plan.units, 5);
    assert.equal(j.plan.source.kind, 'detected');
    assert.deepEqual(
      j.units.map((u) => [u.isRoot, u.params]),
      [...Array.from({ length: 4 }, () => [false, BLOCK]), [true, ROOT]],
    );
    assert.ok(
      j.plan.notes.some((n) =>
        /the wraps of Model\.apply_fsdp\(\) in pkg\/model\.py, called at line 5/.test(n),
      ),
    );
    // How the loop's `block` was told to be a Block is said, not hidden.
    assert.ok(
      j.plan.notes.some((n) => /`block` taken as a Block, the only other class of this file/.test(n)),
    );

    // The model file's own scan: the block's wrap is a unit of each Block, not a root.
    const scan = await cli('scan', path.join(dir, 'pkg', 'model.py'));
    assert.match(
      scan.out,
      /11 {2}fully_shard\(self\)\n {8}FSDP2 unit of each Block where apply_fsdp\(\) is called \(line 22\)/,
    );
    assert.match(
      scan.out,
      /22 {2}fully_shard\(block\)\n {8}FSDP2 unit per block of self\.blocks .* through Block\.apply_fsdp\(\)/,
    );
    assert.match(scan.out, /23 {2}fully_shard\(self\)\n {8}FSDP2 root \(self\)/);
  });

  it('a method that wraps only through its parts, called in the same file, is the plan; the missing root is found there', async () => {
    const dir = projectDir('fsdp-lens-method-');
    const file = path.join(dir, 'train.py');
    const lines = [
      ...MODEL.slice(0, 12),
      'class Net(nn.Module):',
      '    def __init__(self, dim=256, n_layers=4):',
      '        super().__init__()',
      '        self.layers = nn.ModuleList([Block(dim) for _ in range(n_layers)])',
      '',
      '    def shard(self, mesh):',
      '        for layer in self.layers:',
      '            layer.apply_fsdp(mesh)',
      '',
      'net = Net()',
      'net.shard(None)',
      '',
    ];
    fs.writeFileSync(file, lines.join('\n'));
    const lint = await cli('lint', file);
    // Each block is wrapped through the methods, the root never: FSDP001 at the call that makes the plan.
    assert.equal(lint.code, 1, lint.out);
    assert.match(lint.out, /train\.py:23:1: FSDP001 .*`net` itself never is/);
    const r = await cli('estimate', file, '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as { plan: { units: number }; model: { params: number } };
    assert.equal(j.model.params, 4 * BLOCK);
    assert.equal(j.plan.units, 4);
    // The quick fix wraps the root after the call, without the method's own variables, and ends the finding.
    const scanned = await scanSource(lines.join('\n'), file);
    const finding = lintFacts({ facts: scanned, text: lines.join('\n'), options: DEFAULT_LINT_OPTIONS }).find(
      (f) => f.rule === 'FSDP001',
    )!;
    const fixed = applyEdits(lines.join('\n'), finding.fixes.find((f) => f.preferred)!.edits);
    assert.match(fixed, /net\.shard\(None\)\nfully_shard\(net\)\n/);
    fs.writeFileSync(file, fixed);
    assert.equal((await cli('lint', file)).code, 0);
  });

  it('a method defined by several classes, on an object of unknown class, is named and not followed', async () => {
    const f = await scanSource(
      [
        'import torch.nn as nn',
        'from torch.distributed.fsdp import fully_shard',
        'class A(nn.Module):',
        '    def shard(self):',
        '        fully_shard(self)',
        'class B(nn.Module):',
        '    def shard(self):',
        '        fully_shard(self.inner)',
        '        fully_shard(self)',
        'def go(parts):',
        '    for p in parts:',
        '        p.shard()',
        '',
      ].join('\n'),
    );
    assert.equal(f.calls.filter((c) => c.via).length, 0);
    assert.deepEqual(f.methodNotes, [
      'p.shard() (line 12) is not followed: A, B define shard() and the class of `p` is not known statically',
    ]);
  });
});

describe('a method called on an object cast to a class of another file', () => {
  // A model whose blocks are built from a config: each block is cast to the blocks' base class, defined in
  // another file, and asked to wrap itself.
  const project = (blocks: string) => {
    const dir = projectDir('fsdp-lens-cast-');
    fs.mkdirSync(path.join(dir, 'pkg'));
    fs.writeFileSync(path.join(dir, 'pkg', '__init__.py'), '');
    fs.writeFileSync(path.join(dir, 'pkg', 'blocks.py'), blocks);
    fs.writeFileSync(
      path.join(dir, 'pkg', 'model.py'),
      [
        'from typing import cast',
        'import torch.nn as nn',
        'from torch.distributed.fsdp import fully_shard',
        'from .blocks import BlockBase',
        '',
        'class Model(nn.Module):',
        '    def shard(self, mesh):',
        '        for block in self.blocks.values():',
        '            block = cast(BlockBase, block)',
        '            block.shard_self(mesh)',
        '        fully_shard(self.head, mesh=mesh)',
        '        fully_shard(self, mesh=mesh)',
        '',
      ].join('\n'),
    );
    return path.join(dir, 'pkg', 'model.py');
  };
  const BASE = [
    'import torch.nn as nn',
    'from torch.distributed.fsdp import fully_shard',
    '',
    'class BlockBase(nn.Module):',
    '    def shard_self(self, mesh):',
    '        raise NotImplementedError',
    '',
    'class Dense(BlockBase):',
    '    def shard_self(self, mesh):',
    '        fully_shard(self, mesh=mesh)',
    '',
  ];

  it('several classes of the family define it: their wraps are listed and no plan is estimated', async () => {
    const file = project(
      [
        ...BASE,
        'class Experts(BlockBase):',
        '    def shard_self(self, mesh):',
        '        fully_shard(self.experts, mesh=mesh)',
        '        fully_shard(self, mesh=mesh)',
        '',
      ].join('\n'),
    );
    const scan = await cli('scan', file);
    assert.match(
      scan.out,
      /10 {2}BlockBase\.shard_self\(\) in blocks\.py wraps, not estimated: `block` is cast to BlockBase, and 3 classes of blocks\.py \(it and its subclasses\) define shard_self\(\) \(BlockBase, Dense and Experts\)/,
    );
    assert.match(
      scan.out,
      /blocks\.py:10 {2}fully_shard\(self\)\n {10}blocks\.py:14 {2}fully_shard\(self\.experts\)/,
    );
    // The file's own wraps (the head and the root) are only part of what runs: no estimate, exit 3.
    const r = await cli('estimate', file, '--model', 'meta-llama/Llama-3.2-1B', '--json');
    assert.equal(r.code, 3, r.err);
    assert.match(r.err, /part of the plan is not known statically: BlockBase\.shard_self\(\) \(line 10\)/);
    const j = JSON.parse(r.out) as { estimate: null; plan: { known: boolean } };
    assert.equal(j.estimate, null);
    assert.equal(j.plan.known, false);
  });

  it('one class of the family defines it: it is the method that runs, followed', async () => {
    const only = [...BASE.slice(0, 3), 'class BlockBase(nn.Module):', ...BASE.slice(8)].join('\n');
    const scan = await cli('scan', project(only));
    // `BlockBase` itself wraps `self` and nothing derives from it: its wrap, at the call, a unit of each block.
    assert.match(
      scan.out,
      /and 1 wrap made through helpers:\n {4}10 {2}fully_shard\(self\.blocks\.\*\)\n {8}FSDP2 unit \(self\.blocks\.\*\)/,
    );
  });
});

describe('blocks of an object a call computes from the model', () => {
  // The decoder is found by a function of the project (`find_decoder(net)`), whose answer the analysis does not
  // follow; its blocks are wrapped, an expert part of each block too, and then `net` itself.
  const lines = (rootWrap: boolean) => [
    'from transformers import AutoModelForCausalLM',
    'from torch.distributed.fsdp import fully_shard',
    'def find_decoder(net):',
    '    return getattr(net, "model", net)',
    'def shard(net, use_experts):',
    '    decoder = find_decoder(net)',
    '    for block in decoder.layers:',
    '        ffn = getattr(block, "mlp", None)',
    '        if use_experts and ffn is not None:',
    '            fully_shard(ffn.experts)',
    '        fully_shard(block)',
    ...(rootWrap ? ['    fully_shard(net)'] : []),
    'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
    'shard(model, True)',
  ];
  const file = (rootWrap: boolean) => {
    const dir = projectDir('fsdp-lens-derived-');
    fs.writeFileSync(path.join(dir, 'train.py'), lines(rootWrap).join('\n') + '\n');
    return path.join(dir, 'train.py');
  };

  it('no FSDP001 when the model is wrapped whole after them; the plan is not known, so no figure', async () => {
    const train = file(true);
    const lint = await cli('lint', train, '--rule', 'FSDP015=off');
    assert.equal(lint.code, 0, lint.out);
    const r = await cli('estimate', train);
    assert.equal(r.code, 3, r.err);
    assert.match(
      r.err,
      /the plan is not known statically: train\.py:\d+: fully_shard\(\w+(\.experts)?\) wraps a part of `net` through `decoder`, which a call computes from it/,
    );
  });

  it('FSDP001 still when nothing wraps the model whole', async () => {
    const lint = await cli('lint', file(false), '--rule', 'FSDP015=off');
    assert.match(
      lint.out,
      /FSDP001 Blocks of `decoder\.layers` are wrapped with fully_shard but `decoder` itself never is/,
    );
    // The expert part of each block lies inside the block's own unit: it is no block of another root.
    assert.doesNotMatch(lint.out, /`ffn` itself never is/);
  });
});

describe('wraps made by a function that calls itself, or that another call runs', () => {
  const estimate = async (body: string[]) => {
    const dir = projectDir('fsdp-lens-recursive-');
    const file = path.join(dir, 'train.py');
    fs.writeFileSync(
      file,
      [
        'from transformers import AutoModelForCausalLM',
        'from torch.distributed.fsdp import fully_shard',
        ...body,
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        'shard(model)',
        '',
      ].join('\n'),
    );
    return cli('estimate', file);
  };

  it('a function that walks the tree by calling itself on each child: the plan is not known, no figure', async () => {
    const r = await estimate([
      'from names import WANTED',
      'def walk(module):',
      '    for child in module.children():',
      '        walk(child)',
      '    if module in WANTED:',
      '        fully_shard(module)',
      'def shard(model):',
      '    walk(model)',
    ]);
    assert.equal(r.code, 3, r.err);
    assert.match(
      r.err,
      /fully_shard\(module\) wraps a parameter of walk\(\), which calls itself: which modules it wraps is not followed/,
    );
  });

  it('a wrap function handed to another call to run: the plan is not known, no figure', async () => {
    const r = await estimate([
      'def shard(model, applier=lambda m, f: f(m)):',
      '    def wrap(m):',
      '        fully_shard(m)',
      '        return m',
      '    model = applier(model, wrap)',
      '    wrap(model)',
    ]);
    assert.equal(r.code, 3, r.err);
    assert.match(
      r.err,
      /fully_shard\(m\) runs in shard\.wrap\(\), which is handed to `applier\(model, wrap\)`/,
    );
  });
});

describe('FSDP1 with an auto-wrap policy around each part of the model', () => {
  it("the policy wraps inside each part, the part a unit; the parts' strategy is the plan's", async () => {
    const dir = projectDir('fsdp-lens-parts-');
    const file = path.join(dir, 'train.py');
    fs.writeFileSync(
      file,
      [
        'import functools',
        'from transformers import AutoModelForCausalLM',
        'from transformers.models.llama.modeling_llama import LlamaDecoderLayer',
        'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy',
        'from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        'policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={LlamaDecoderLayer})',
        'for name, child in model.named_children():',
        '    setattr(model, name, FSDP(child, auto_wrap_policy=policy, sharding_strategy=ShardingStrategy.SHARD_GRAD_OP))',
        '',
      ].join('\n'),
    );
    const r = await cli('estimate', file, '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as {
      plan: { units: number; strategy: string };
      units: { modules: string[]; params: number }[];
    };
    // Llama 3.2 1B's children: `model` (16 decoder layers, each a unit by the policy, and the rest: the embedding
    // of 128,256 x 2,048 = 262,668,288 and the final norm's 2,048) and `lm_head` (tied to the embedding: 0 of its own).
    assert.equal(j.plan.units, 18);
    const unit = (m: string) => j.units.find((u) => u.modules.includes(m))!;
    assert.equal(unit('model.layers.0').params, 60_821_504);
    assert.equal(unit('model').params, 262_668_288 + 2_048);
    assert.equal(unit('lm_head').params, 0);
    assert.equal(j.plan.strategy, 'SHARD_GRAD_OP');
  });
});

describe('loops that wrap each element', () => {
  const MODEL = [
    'import torch.nn as nn',
    'from torch.distributed.fsdp import fully_shard',
    'class Block(nn.Module):',
    '    def __init__(self):',
    '        super().__init__()',
    '        self.attn = nn.Linear(64, 64)',
    '        self.mlp = nn.Linear(64, 64)',
    'class Net(nn.Module):',
    '    def __init__(self):',
    '        super().__init__()',
    '        self.layers = nn.ModuleList([Block() for _ in range(2)])',
    '        self.out = nn.Linear(64, 10)',
    'model = Net()',
  ];
  it('a wrap of each block that also wraps parts of it is no root: the missing root is found', async () => {
    const dir = projectDir('fsdp-lens-loop-');
    const file = path.join(dir, 'train.py');
    fs.writeFileSync(
      file,
      [
        ...MODEL,
        'for layer in model.layers:',
        '    fully_shard(layer.attn)',
        '    fully_shard(layer)',
        '',
      ].join('\n'),
    );
    const scan = await cli('scan', file);
    assert.match(scan.out, /fully_shard\(layer\)\n {8}FSDP2 unit per block of model\.layers/);
    const lint = await cli('lint', file);
    assert.match(lint.out, /FSDP001 .*`model` itself never is/);
    const r = await cli('estimate', file, '--json');
    assert.equal(r.code, 0, r.err);
    // Two attention units and two block units; Net itself is not wrapped.
    assert.equal((JSON.parse(r.out) as { plan: { units: number } }).plan.units, 4);
  });

  it("modules looked up by names written out: a unit of each, and each entry's own reshard_after_forward", async () => {
    const dir = projectDir('fsdp-lens-loop-');
    const file = path.join(dir, 'train.py');
    fs.writeFileSync(
      file,
      [
        ...MODEL,
        'for name in ("attn", "mlp"):',
        '    fully_shard(getattr(model.layers[0], name))',
        'GROUPS = [("layers.1", True), ("out", False)]',
        'for path, reshard in GROUPS:',
        '    sub = model.get_submodule(path)',
        '    fully_shard(sub, reshard_after_forward=reshard)',
        'fully_shard(model)',
        '',
      ].join('\n'),
    );
    const scan = await cli('scan', file);
    assert.match(scan.out, /FSDP2 unit of each of model\.layers\.0\.attn, model\.layers\.0\.mlp/);
    assert.match(scan.out, /FSDP2 unit of each of model\.layers\.1, model\.out/);
    const r = await cli('estimate', file, '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as {
      plan: { units: number };
      units: { modules: string[]; params: number; residency: { kind: string } }[];
    };
    // attn, mlp of block 0, block 1, out and the root Net.
    assert.equal(j.plan.units, 5);
    const unit = (m: string) => j.units.find((u) => u.modules.includes(m))!;
    // nn.Linear(64, 64): 64·64 weights + 64 biases; nn.Linear(64, 10): 640 + 10.
    assert.equal(unit('layers.0.attn').params, 64 * 64 + 64);
    assert.equal(unit('layers.1').params, 2 * (64 * 64 + 64));
    assert.equal(unit('out').params, 64 * 10 + 10);
    // ("out", False) keeps its unit gathered from forward to backward; ("layers.1", True) reshards.
    assert.equal(unit('out').residency.kind, 'keep');
    assert.equal(unit('layers.1').residency.kind, 'reshard');
  });

  it('a loop over every module that skips containers wraps no container', async () => {
    const dir = projectDir('fsdp-lens-loop-');
    const file = path.join(dir, 'train.py');
    fs.writeFileSync(
      file,
      [
        ...MODEL,
        'for _, m in reversed(list(model.named_modules())):',
        '    if isinstance(m, nn.ModuleList):',
        '        continue',
        '    fully_shard(m)',
        '',
      ].join('\n'),
    );
    const lint = await cli('lint', file);
    assert.equal(lint.code, 0, lint.out);
    const r = await cli('estimate', file, '--json');
    assert.equal(r.code, 0, r.err);
    // named_modules() of Net: Net, layers (skipped), 2 x (Block, attn, mlp), out: 8 units, the root among them.
    const j = JSON.parse(r.out) as { plan: { units: number }; units: { isRoot: boolean }[] };
    assert.equal(j.plan.units, 8);
    assert.equal(j.units.filter((u) => u.isRoot).length, 1);
  });
});

describe('a file of several wrap functions', () => {
  it('is estimated for the function the project calls, with the model its caller loads', async () => {
    const dir = projectDir('fsdp-lens-several-');
    fs.mkdirSync(path.join(dir, 'pkg'));
    fs.writeFileSync(path.join(dir, 'pkg', '__init__.py'), '');
    const helper = path.join(dir, 'pkg', 'parallel.py');
    fs.writeFileSync(
      helper,
      [
        'from torch.distributed.fsdp import fully_shard',
        'def shard_vision(encoder):',
        '    for block in encoder.blocks:',
        '        fully_shard(block)',
        '    fully_shard(encoder)',
        'def shard_decoder(model):',
        '    for layer in model.model.layers:',
        '        fully_shard(layer)',
        '    fully_shard(model)',
        '',
      ].join('\n'),
    );
    fs.writeFileSync(
      path.join(dir, 'train.py'),
      [
        'from transformers import AutoModelForCausalLM',
        'from pkg.parallel import shard_decoder',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        'shard_decoder(model)',
        '',
      ].join('\n'),
    );
    const j = (await estimateJson(helper)) as EstimateJson & { notes: string[] };
    // Llama 3.2 1B as published (1,235,814,400 parameters): its 16 decoder layers and the root.
    assert.equal(j.model.params, 1_235_814_400);
    assert.equal(j.plan.units, 17);
    // The job of the script that calls the chosen plan, with the other plan named.
    assert.match(j.notes[0]!, /^the job is \.\.\/train\.py's, which calls shard_decoder\(\) at line 4/);
    assert.ok(
      j.notes.includes(
        'the plan of shard_decoder(), called at train.py:4; shard_vision() (line 2, called nowhere in the project) makes another plan, not estimated here (`--plan NAME` or `# fsdp: plan=NAME` picks one)',
      ),
      j.notes.join('\n'),
    );
    assert.equal(j.assumptions.find((a) => a.key === 'model')!.source.detail, 'train.py:3');
  });
});

describe("a loop's own tests of each module", () => {
  // Llama 3.2 1B (its config.json): hidden 2048, intermediate 8192, 16 layers; an MLP is 3 x 2048 x 8192.
  const MLP = 3 * 2048 * 8192;
  const LLAMA_1B = 1_235_814_400;
  function script(dir: string, name: string, lines: string[]): string {
    const file = path.join(dir, name);
    fs.writeFileSync(
      file,
      [
        'from transformers import AutoModelForCausalLM',
        'from torch.distributed.fsdp import fully_shard',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        ...lines,
        '',
      ].join('\n'),
    );
    return file;
  }
  const blocks = (j: EstimateJson) => j.units.filter((u) => !u.isRoot);

  it('wraps only the modules whose name passes (named_modules)', async () => {
    const dir = projectDir('fsdp-lens-permodule-');
    const j = await estimateJson(
      script(dir, 'train.py', [
        'for name, module in model.named_modules():',
        '    if name.endswith("mlp"):',
        '        fully_shard(module)',
        'fully_shard(model)',
      ]),
    );
    // 16 MLPs and the root, not every one of the model's modules.
    assert.equal(j.plan.units, 17);
    assert.ok(blocks(j).every((u) => u.params === MLP));
    assert.equal(j.units.find((u) => u.isRoot)!.params, LLAMA_1B - 16 * MLP);
  });

  it("reads a class's name against a constant of the file, and positions from enumerate", async () => {
    const dir = projectDir('fsdp-lens-permodule-');
    const byName = await estimateJson(
      script(dir, 'by_name.py', [
        'WRAP = {"LlamaDecoderLayer"}',
        'for m in reversed(list(model.modules())):',
        '    if m.__class__.__name__ in WRAP:',
        '        fully_shard(m)',
        'fully_shard(model)',
      ]),
    );
    assert.equal(byName.plan.units, 17);
    const every = await estimateJson(
      script(dir, 'every_other.py', [
        'for i, layer in enumerate(model.model.layers):',
        '    if i % 2 == 0:',
        '        fully_shard(layer)',
        'fully_shard(model)',
      ]),
    );
    // Layers 0, 2, ..., 14: 8 of 16.
    assert.equal(every.plan.units, 9);
    assert.deepEqual(
      blocks(every).map((u) => u.modules[0]),
      [0, 2, 4, 6, 8, 10, 12, 14].map((i) => `model.layers.${i}`),
    );
  });

  it('wraps the modules a list picked: a filtered comprehension, or appends under a test', async () => {
    const dir = projectDir('fsdp-lens-permodule-');
    const comprehension = await estimateJson(
      script(dir, 'comprehension.py', [
        'from transformers.models.llama.modeling_llama import LlamaDecoderLayer',
        'blocks = [m for m in model.modules() if isinstance(m, LlamaDecoderLayer)]',
        'for b in blocks:',
        '    fully_shard(b)',
        'fully_shard(model)',
      ]),
    );
    // The 16 decoder layers and the root, not every module the comprehension runs over.
    assert.equal(comprehension.plan.units, 17);
    const appended = await estimateJson(
      script(dir, 'appended.py', [
        'modules = []',
        'for name, module in model.named_modules():',
        '    if module.__class__.__name__ in ["LlamaDecoderLayer"]:',
        '        modules.append(module)',
        'for idx, m in enumerate(modules):',
        '    fully_shard(m)',
        'fully_shard(model)',
      ]),
    );
    assert.equal(appended.plan.units, 17);
    // Picked by a test the analysis cannot evaluate: which modules are units is not known, and no figure is shown.
    const unknown = await cli(
      'estimate',
      script(dir, 'unknown_pick.py', [
        'import policy',
        'modules = []',
        'for name, module in model.named_modules():',
        '    if policy.wanted(module):',
        '        modules.append(module)',
        'for m in modules:',
        '    fully_shard(m)',
        'fully_shard(model)',
      ]),
      '--json',
    );
    assert.equal(unknown.code, 3, unknown.err);
    assert.match(
      unknown.err,
      /the plan is not known statically: .*not known statically for any of the 199 modules/,
    );
    assert.equal((JSON.parse(unknown.out) as { plan: { known: boolean } }).plan.known, false);
  });

  it('a wrap whose test is not known for any module: no plan, no figure, instead of wrapping every module', async () => {
    const dir = projectDir('fsdp-lens-permodule-');
    const r = await cli(
      'estimate',
      script(dir, 'train.py', [
        'import policies',
        'for name, module in model.named_modules():',
        '    if policies.should_wrap(name, module):',
        '        fully_shard(module)',
        'fully_shard(model)',
      ]),
    );
    assert.equal(r.code, 3, r.err);
    // Llama 3.2 1B's named_modules(): 199 modules, the model itself among them.
    assert.match(
      r.err,
      /the plan is not known statically: train\.py:7: which modules fully_shard\(module\) wraps depends on policies\.should_wrap\(name, module\), which is not known statically for any of the 199 modules it may wrap/,
    );
    assert.doesNotMatch(r.out, /^Peak/m);
  });

  it('follows a helper given the class to wrap, and conditions bound with functools.partial', async () => {
    const dir = projectDir('fsdp-lens-permodule-');
    fs.mkdirSync(path.join(dir, 'pkg'));
    fs.writeFileSync(path.join(dir, 'pkg', '__init__.py'), '');
    fs.writeFileSync(
      path.join(dir, 'pkg', 'sharding.py'),
      [
        'from torch.distributed.fsdp import fully_shard',
        'def shard_by_class(model, layer_cls):',
        '    for m in model.modules():',
        '        if isinstance(m, layer_cls):',
        '            fully_shard(m)',
        '    fully_shard(model)',
        'def layer_or_named(name, module, names=None):',
        '    if names and name in names:',
        '        return True',
        '    parts = name.split(".")',
        '    return len(parts) >= 2 and parts[-2] == "layers" and parts[-1].isdigit()',
        'def shard_by_tests(model, tests):',
        '    for n, m in reversed(list(model.named_modules())):',
        '        if any([t(n, m) for t in tests]):',
        '            fully_shard(m)',
        '    fully_shard(model)',
        '',
      ].join('\n'),
    );
    const byClass = await estimateJson(
      script(dir, 'by_class.py', [
        'from transformers.models.llama.modeling_llama import LlamaDecoderLayer',
        'from pkg.sharding import shard_by_class',
        'shard_by_class(model, LlamaDecoderLayer)',
      ]),
    );
    assert.equal(byClass.plan.source.kind, 'detected');
    assert.equal(byClass.plan.units, 17);
    // names=["model.embed_tokens"]: the embedding is a unit too, besides the 16 layers.
    const named = await estimateJson(
      script(dir, 'named.py', [
        'from functools import partial',
        'from pkg.sharding import layer_or_named, shard_by_tests',
        'shard_by_tests(model, [partial(layer_or_named, names=["model.embed_tokens"])])',
      ]),
    );
    assert.equal(named.plan.units, 18);
    assert.ok(blocks(named).some((u) => u.modules[0] === 'model.embed_tokens'));
    // Names not known statically: the layers pass whatever they are (both arms of the `if` return True for
    // them); for every other module it depends, so those are left out and said to be.
    const unknown = await estimateJson(
      script(dir, 'unknown.py', [
        'from functools import partial',
        'from pkg.sharding import layer_or_named, shard_by_tests',
        'from settings import extra_names',
        'shard_by_tests(model, [partial(layer_or_named, names=extra_names())])',
      ]),
    );
    assert.equal(unknown.plan.units, 17);
    assert.match(unknown.plan.notes.join('\n'), /not known statically for 183 of 199 modules/);
  });

  it("reads a helper's options from what the call passes, and drops those set under a test it makes false", async () => {
    const dir = projectDir('fsdp-lens-permodule-');
    fs.mkdirSync(path.join(dir, 'pkg'));
    fs.writeFileSync(path.join(dir, 'pkg', '__init__.py'), '');
    fs.writeFileSync(
      path.join(dir, 'pkg', 'opts.py'),
      [
        'from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard',
        'def shard(model, reshard, offload):',
        '    kwargs = {"reshard_after_forward": reshard}',
        '    if offload:',
        '        kwargs["offload_policy"] = CPUOffloadPolicy()',
        '    for layer in model.model.layers:',
        '        fully_shard(layer, **kwargs)',
        '    fully_shard(model, **kwargs)',
        '',
      ].join('\n'),
    );
    const j = await estimateJson(
      script(dir, 'train.py', ['from pkg.opts import shard', 'shard(model, reshard=False, offload=False)']),
    );
    // reshard_after_forward=False on every unit: the blocks stay gathered after forward; no offload note.
    const notes = j.plan.notes.join('\n');
    assert.doesNotMatch(notes, /not known statically|CPU offload only when/, notes);
    assert.ok(
      (j as unknown as { units: { residency: { kind: string } }[] }).units.every(
        (u) => u.residency.kind === 'keep',
      ),
    );
  });

  it('follows a helper whose arms the call decides, and not one whose arms it leaves open', async () => {
    const dir = projectDir('fsdp-lens-permodule-');
    fs.mkdirSync(path.join(dir, 'pkg'));
    fs.writeFileSync(path.join(dir, 'pkg', '__init__.py'), '');
    fs.writeFileSync(
      path.join(dir, 'pkg', 'arms.py'),
      [
        'from torch.distributed.fsdp import fully_shard',
        'def shard(model, tie_embeddings):',
        '    if tie_embeddings:',
        '        fully_shard([model.model.embed_tokens, model.lm_head])',
        '    else:',
        '        fully_shard(model.model.embed_tokens)',
        '        fully_shard(model.lm_head)',
        '    for layer in model.model.layers:',
        '        fully_shard(layer)',
        '    fully_shard(model)',
        '',
      ].join('\n'),
    );
    // Untied: the embedding and the head each a unit, the 16 layers, the root.
    const untied = await estimateJson(
      script(dir, 'untied.py', ['from pkg.arms import shard', 'shard(model, tie_embeddings=False)']),
    );
    assert.equal(untied.plan.source.kind, 'detected');
    assert.equal(untied.plan.units, 19);
    // Tied: one unit of both, the layers, the root.
    const tied = await estimateJson(
      script(dir, 'tied.py', ['from pkg.arms import shard', 'shard(model, True)']),
    );
    assert.equal(tied.plan.units, 18);
    // A value the call does not decide: no plan of a guess, and no default plan in place of the helper's.
    const open = await cli(
      'estimate',
      script(dir, 'open.py', ['from pkg.arms import shard', 'import flags', 'shard(model, flags.TIE)']),
      '--json',
    );
    assert.equal(open.code, 3, open.err);
    assert.match(
      (JSON.parse(open.out) as { plan: { reason: string } }).plan.reason,
      /shard\(\) \(line 6\) in pkg\/arms\.py, which makes the wraps of the script, is not followed: which of its wraps run depends on `tie_embeddings`/,
    );
  });

  it("follows a helper whose test reads each module's name, as torchtune's layer test does", async () => {
    const dir = projectDir('fsdp-lens-permodule-');
    fs.mkdirSync(path.join(dir, 'pkg'));
    fs.writeFileSync(path.join(dir, 'pkg', '__init__.py'), '');
    fs.writeFileSync(
      path.join(dir, 'pkg', 'sharding.py'),
      [
        'from torch.distributed.fsdp import fully_shard',
        'def is_layer(name):',
        '    parts = name.split(".")',
        '    return len(parts) >= 2 and parts[-2] == "layers" and str.isdigit(parts[-1])',
        'def shard(model):',
        '    for n, m in reversed(list(model.named_modules())):',
        '        if is_layer(n):',
        '            fully_shard(m)',
        '    fully_shard(model)',
        '',
      ].join('\n'),
    );
    const j = await estimateJson(script(dir, 'train.py', ['from pkg.sharding import shard', 'shard(model)']));
    // model.layers.0 ... model.layers.15 and the root.
    assert.equal(j.plan.units, 17);
    assert.equal(j.plan.source.kind, 'detected');
    assert.deepEqual(
      blocks(j).map((u) => u.modules[0]),
      Array.from({ length: 16 }, (_, i) => `model.layers.${i}`),
    );
  });
});

describe('a Hydra app', () => {
  /** conf/train.yaml with a defaults list of two groups and its own keys last (`_self_`). */
  function hydraProject(): string {
    const dir = projectDir('fsdp-lens-hydra-');
    for (const d of ['model', 'trainer']) fs.mkdirSync(path.join(dir, 'conf', d), { recursive: true });
    const write = (f: string, lines: string[]) => fs.writeFileSync(path.join(dir, f), lines.join('\n'));
    write('conf/train.yaml', [
      'defaults:',
      '  - model: llama1b',
      '  - trainer: base',
      '  - _self_',
      'trainer:',
      '  micro_batch: 4',
    ]);
    write('conf/model/llama1b.yaml', ['name: meta-llama/Llama-3.2-1B']);
    write('conf/model/llama8b.yaml', ['name: meta-llama/Llama-3.1-8B']);
    write('conf/trainer/base.yaml', ['micro_batch: 1', 'seq_len: 2048']);
    write('train.py', [
      'import hydra',
      'import torch',
      'from transformers import AutoModelForCausalLM',
      'from torch.distributed.fsdp import fully_shard',
      '@hydra.main(version_base=None, config_path="conf", config_name="train")',
      'def main(cfg):',
      '    model = AutoModelForCausalLM.from_pretrained(cfg.model.name)',
      '    for layer in model.model.layers:',
      '        fully_shard(layer)',
      '    fully_shard(model)',
      '    x = torch.randint(0, 128, (cfg.trainer.micro_batch, cfg.trainer.seq_len))',
      '    model(x).loss.backward()',
      '',
    ]);
    return dir;
  }
  const value = (j: EstimateJson, key: string) => j.assumptions.find((a) => a.key === key)?.value;

  it('an arm its config turns off is off the path, not code that never runs (no FSDP008)', async () => {
    const dir = hydraProject();
    const train = path.join(dir, 'train.py');
    fs.appendFileSync(path.join(dir, 'conf', 'train.yaml'), '\nstrategy: fsdp2\n');
    fs.writeFileSync(
      train,
      [
        'import hydra',
        'from transformers import AutoModelForCausalLM',
        'from torch.distributed.fsdp import fully_shard, FullyShardedDataParallel as FSDP',
        '@hydra.main(version_base=None, config_path="conf", config_name="train")',
        'def main(cfg):',
        '    model = AutoModelForCausalLM.from_pretrained(cfg.model.name)',
        '    if cfg.strategy == "fsdp":',
        '        model = FSDP(model)',
        '    else:',
        '        for layer in model.model.layers:',
        '            fully_shard(layer)',
        '        fully_shard(model)',
        '',
      ].join('\n'),
    );
    const lint = await cli('lint', train, '--rule', 'FSDP015=off');
    assert.doesNotMatch(lint.out, /FSDP008/);
    const j = await estimateJson(train);
    assert.equal(j.plan.api, 'fsdp2');
    assert.ok(
      j.plan.notes.some((n) =>
        /FSDP\(model\) is left out: `cfg\.strategy == "fsdp"` is false by conf\/train\.yaml.*the arguments `strategy=fsdp` take that path/.test(
          n,
        ),
      ),
      j.plan.notes.join('\n'),
    );
    // The Hydra override offered does take it.
    assert.equal((await estimateJson(train, '--', 'strategy=fsdp')).plan.api, 'fsdp1');
  });

  it('composes the config from the defaults list: the model of the group, the batch of _self_', async () => {
    const j = await estimateJson(path.join(hydraProject(), 'train.py'));
    // Llama 3.2 1B as published.
    assert.equal(j.model.params, 1_235_814_400);
    // trainer/base.yaml says 1, train.yaml's own trainer.micro_batch (merged after it, as _self_ is last) says 4.
    assert.equal(value(j, 'microBatch'), '4');
    assert.equal(value(j, 'seqLen'), '2048');
    assert.ok(
      j.plan.notes.includes(
        'values read from conf/train.yaml, conf/model/llama1b.yaml and conf/trainer/base.yaml, which the script loads',
      ),
      j.plan.notes.join('\n'),
    );
  });

  it("takes Hydra overrides after `--`: a group's option and a value", async () => {
    const j = await estimateJson(
      path.join(hydraProject(), 'train.py'),
      '--',
      'model=llama8b',
      'trainer.micro_batch=2',
    );
    // Llama 3.1 8B as published: 8,030,261,248 parameters.
    assert.equal(j.model.params, 8_030_261_248);
    assert.equal(value(j, 'microBatch'), '2');
  });

  it('places a group under its package and honours _self_ first and @_global_', () => {
    const files: Record<string, unknown> = {
      'c/main.yaml': {
        defaults: ['_self_', { 'db@_global_': 'pg' }, { 'opt@optim': 'adam' }],
        port: 1,
        lr: 0,
      },
      'c/db/pg.yaml': { port: 5432 },
      'c/opt/adam.yaml': { lr: 0.001 },
    };
    const read: string[] = [];
    const data = composeHydra((f) => files[f], 'c', 'main', read);
    // _self_ first: the primary's port (1) is overridden by the global db option; adam sits under `optim`.
    assert.deepEqual(data, { port: 5432, lr: 0, optim: { lr: 0.001 } });
    assert.deepEqual(read, ['c/main.yaml', 'c/db/pg.yaml', 'c/opt/adam.yaml']);
  });
});

describe('a helper of an installed package', () => {
  /** A project with a virtual environment whose site-packages holds `shardkit`, a sharding helper. */
  function withInstalledHelper(prefix: string): { dir: string; site: string } {
    const dir = projectDir(prefix);
    const site = path.join(dir, '.venv', 'lib', 'python3.11', 'site-packages');
    fs.mkdirSync(path.join(site, 'shardkit'), { recursive: true });
    fs.writeFileSync(path.join(dir, '.venv', 'pyvenv.cfg'), 'home = /usr/bin\nversion = 3.11.4\n');
    fs.writeFileSync(path.join(site, 'shardkit', '__init__.py'), 'from .parallel import apply_fsdp\n');
    fs.writeFileSync(
      path.join(site, 'shardkit', 'parallel.py'),
      [
        'from torch.distributed.fsdp import fully_shard',
        'def apply_fsdp(model, mesh=None):',
        '    for layer in model.model.layers:',
        '        fully_shard(layer, mesh=mesh)',
        '    fully_shard(model, mesh=mesh)',
        '',
      ].join('\n'),
    );
    return { dir, site };
  }

  it('finds the site-packages of a project venv, of $VIRTUAL_ENV and of a Windows layout', () => {
    const { dir, site } = withInstalledHelper('fsdp-lens-installed-');
    const active = tempDir('fsdp-lens-active-');
    fs.mkdirSync(path.join(active, 'Lib', 'site-packages'), { recursive: true });
    // A folder named like a venv without pyvenv.cfg is not one.
    fs.mkdirSync(path.join(dir, 'env', 'lib', 'python3.10', 'site-packages'), { recursive: true });
    assert.deepEqual(sitePackages(diskFS, [dir], { VIRTUAL_ENV: active }), [
      site,
      path.join(active, 'Lib', 'site-packages'),
    ]);
  });

  it("is followed from the script: the package's wraps are the plan", async () => {
    const { dir } = withInstalledHelper('fsdp-lens-installed-');
    const train = path.join(dir, 'train.py');
    fs.writeFileSync(
      train,
      [
        'from transformers import AutoModelForCausalLM',
        'import shardkit',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        'shardkit.apply_fsdp(model)',
        '',
      ].join('\n'),
    );
    const j = await estimateJson(train);
    // Llama 3.2 1B: 16 decoder layers wrapped in the loop, then the root.
    assert.equal(j.model.params, 1_235_814_400);
    assert.equal(j.plan.units, 17);
    assert.equal(j.plan.source.kind, 'detected');
    assert.ok(
      j.plan.notes.some((n) => n.startsWith('the wraps of apply_fsdp() in shardkit/parallel.py (installed)')),
      j.plan.notes.join('\n'),
    );
  });

  it("never follows PyTorch's own package, even where one is installed in the environment", async () => {
    const { dir, site } = withInstalledHelper('fsdp-lens-installed-');
    // An installed torch whose fully_shard wraps something: the API is modelled, not followed.
    fs.mkdirSync(path.join(site, 'torch', 'distributed', 'fsdp'), { recursive: true });
    fs.writeFileSync(
      path.join(site, 'torch', 'distributed', 'fsdp', '__init__.py'),
      'def fully_shard(module, **kw):\n    fully_shard(module.child)\n    return module\n',
    );
    const train = path.join(dir, 'train.py');
    fs.writeFileSync(
      train,
      [
        'from transformers import AutoModelForCausalLM',
        'from torch.distributed.fsdp import fully_shard',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        'for layer in model.model.layers:',
        '    fully_shard(layer)',
        'fully_shard(model)',
        '',
      ].join('\n'),
    );
    const j = await estimateJson(train);
    assert.equal(j.plan.units, 17);
    assert.ok(!j.plan.notes.some((n) => /installed/.test(n)), j.plan.notes.join('\n'));
  });
});

describe('a file whose classes each make a plan', () => {
  // An RL stack's workers: the actor's and the reward model's, each loading and wrapping its own model.
  const workers = [
    'import torch',
    'import functools',
    'from transformers import AutoModelForCausalLM',
    'from transformers.models.llama.modeling_llama import LlamaDecoderLayer',
    'from torch.distributed.fsdp import CPUOffload, FullyShardedDataParallel as FSDP',
    'from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy',
    'policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={LlamaDecoderLayer})',
    'class ActorWorker:',
    '    def build(self):',
    '        model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
    '        self.model = FSDP(model, auto_wrap_policy=policy)',
    'class RewardWorker:',
    '    def build(self):',
    '        model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", torch_dtype=torch.bfloat16)',
    '        self.model = FSDP(model, auto_wrap_policy=policy, cpu_offload=CPUOffload(offload_params=True))',
    '',
  ].join('\n');
  // Llama 3.2 1B as published: 1,235,814,400 parameters; 16 decoder layers and the root, on 8 GPUs.
  const params = 1_235_814_400;
  const shardedBytes = (
    j: EstimateJson & { perGpu?: { persistent: { terms: { name: string; bytes: number }[] } } },
  ) => j.perGpu!.persistent.terms.find((t) => t.name === 'sharded parameters')!.bytes;

  it("estimates one class's plan, with none of the other's offload or dtype", async () => {
    const dir = projectDir('fsdp-lens-classes-');
    const file = path.join(dir, 'workers.py');
    fs.writeFileSync(file, workers);
    const j = await estimateJson(file, '--world-size', '8');
    assert.equal(j.plan.units, 17);
    // The actor keeps fp32 sharded parameters on the GPU: 1,235,814,400 / 8 x 4 B.
    assert.equal(shardedBytes(j), (params / 8) * 4);
    assert.ok(
      j.plan.notes.includes(
        'the plan of class ActorWorker, the first in the file: no call in the project builds any of them; class RewardWorker (line 12, built by no call in the project) makes another plan, not estimated here (`--plan NAME` or `# fsdp: plan=NAME` picks one)',
      ),
      j.plan.notes.join('\n'),
    );
  });

  it('counts one model where two methods each wrap a whole model under the same name', async () => {
    const dir = projectDir('fsdp-lens-classes-');
    const file = path.join(dir, 'dpo.py');
    fs.writeFileSync(
      file,
      [
        'from transformers import AutoModelForCausalLM',
        'from torch.distributed.fsdp import fully_shard',
        'class Recipe:',
        '    def setup_policy(self):',
        '        model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        '        for layer in model.model.layers:',
        '            fully_shard(layer)',
        '        fully_shard(model)',
        '    def setup_reference(self):',
        '        model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        '        for layer in model.model.layers:',
        '            fully_shard(layer)',
        '        fully_shard(model)',
        '',
      ].join('\n'),
    );
    const j = await estimateJson(file);
    // The policy's 16 layers and root, not 34 units of one model wrapped twice.
    assert.equal(j.plan.units, 17);
    assert.ok(
      j.plan.notes.includes(
        'Recipe.setup_reference() also wraps a whole `model`, another model of that name: estimated for the one Recipe.setup_policy() wraps',
      ),
      j.plan.notes.join('\n'),
    );
  });

  it('estimates the plan --plan names: the reward model offloaded in bf16', async () => {
    const dir = projectDir('fsdp-lens-classes-');
    const file = path.join(dir, 'workers.py');
    fs.writeFileSync(file, workers);
    const j = await estimateJson(file, '--world-size', '8', '--plan', 'RewardWorker');
    // FSDP1 CPUOffload(offload_params=True) keeps the sharded parameters in host memory: none on the GPU.
    assert.equal(shardedBytes(j), 0);
    const host = (j as unknown as { perGpu: { host: { terms: { name: string; bytes: number }[] } } }).perGpu
      .host;
    // bf16 (torch_dtype of this class's load): 1,235,814,400 / 8 x 2 B offloaded.
    assert.equal(host.terms.find((t) => t.name === 'offloaded sharded parameters')!.bytes, (params / 8) * 2);
  });

  it('is switched by the edit the editor writes, and back', async () => {
    const dir = projectDir('fsdp-lens-classes-');
    const file = path.join(dir, 'workers.py');
    const shebang = `#!/usr/bin/env python\n${workers}`;
    const chosen = applyEdits(shebang, [setAnnotation(shebang, 'plan', 'RewardWorker')!]);
    // Below the shebang, which must stay first.
    assert.ok(chosen.startsWith('#!/usr/bin/env python\n# fsdp: plan=RewardWorker\n'), chosen.slice(0, 80));
    fs.writeFileSync(file, chosen);
    assert.equal(shardedBytes(await estimateJson(file, '--world-size', '8')), 0);
    // Choosing again replaces the pair; clearing removes the line.
    const again = applyEdits(chosen, [setAnnotation(chosen, 'plan', 'ActorWorker')!]);
    assert.equal(again.split('\n')[1], '# fsdp: plan=ActorWorker');
    fs.writeFileSync(file, again);
    assert.equal(shardedBytes(await estimateJson(file, '--world-size', '8')), (params / 8) * 4);
    assert.equal(applyEdits(again, [setAnnotation(again, 'plan', null)!]), shebang);
  });

  it('writes arguments quoted, and edits one pair of a comment that holds several', () => {
    const text = '# fsdp: world_size=16 args="--a 1"\nimport torch\n';
    assert.equal(
      applyEdits(text, [setAnnotation(text, 'args', '--use-lora --batch-size 8')!]),
      '# fsdp: world_size=16 args="--use-lora --batch-size 8"\nimport torch\n',
    );
    assert.equal(
      applyEdits(text, [setAnnotation(text, 'args', null)!]),
      '# fsdp: world_size=16 \nimport torch\n',
    );
    assert.equal(setAnnotation('import torch\n', 'args', null), null);
  });

  it('takes the plan a "# fsdp: plan=" comment names', async () => {
    const dir = projectDir('fsdp-lens-classes-');
    const file = path.join(dir, 'workers.py');
    fs.writeFileSync(file, `# fsdp: plan=RewardWorker\n${workers}`);
    const j = await estimateJson(file, '--world-size', '8');
    assert.equal(shardedBytes(j), 0);
    assert.match(
      j.plan.notes.join('\n'),
      /the plan of class RewardWorker, chosen by # fsdp: plan= at line 1/,
    );
  });
});

describe('a parallelize function handed to a strategy', () => {
  it("is run with the module given to Fabric's setup_module, not with a test's toy model", async () => {
    const dir = projectDir('fsdp-lens-strategy-');
    const file = path.join(dir, 'finetune.py');
    fs.writeFileSync(
      file,
      [
        'import lightning as L',
        'import torch.nn as nn',
        'from lightning.fabric.strategies import ModelParallelStrategy',
        'from torch.distributed.fsdp import fully_shard',
        'class Net(nn.Module):',
        '    def __init__(self, n=4):',
        '        super().__init__()',
        '        self.layers = nn.ModuleList([nn.Linear(256, 256) for _ in range(n)])',
        'def parallelize(model, device_mesh):',
        '    for block in model.layers:',
        '        fully_shard(block, mesh=device_mesh["data_parallel"])',
        '    fully_shard(model, mesh=device_mesh["data_parallel"])',
        '    return model',
        'def main():',
        '    strategy = ModelParallelStrategy(parallelize_fn=parallelize, data_parallel_size=4, tensor_parallel_size=1)',
        '    fabric = L.Fabric(devices=4, strategy=strategy)',
        '    model = Net()',
        '    model = fabric.setup_module(model)',
        '',
      ].join('\n'),
    );
    fs.mkdirSync(path.join(dir, 'tests'));
    fs.writeFileSync(
      path.join(dir, 'tests', 'test_parallelize.py'),
      'from finetune import Net, parallelize\nparallelize(Net(n=1), None)\n',
    );
    const j = await estimateJson(file);
    // Net(): four Linear(256, 256), each 256 x 256 weights and 256 biases; a unit each, and the root.
    assert.equal(j.model.params, 4 * (256 * 256 + 256));
    assert.equal(j.plan.units, 5);
    assert.match(
      j.assumptions.find((a) => a.key === 'model')!.source.detail!,
      /given to fabric\.setup_module\(\) at finetune\.py:18, which runs parallelize\(\) through ModelParallelStrategy \(line 15\)/,
    );
  });
});

describe('a job configured by Python objects', () => {
  it('is a plan of unknown size (exit 3) that names the objects, not "nothing to estimate"', async () => {
    const dir = projectDir('fsdp-lens-jobcfg-');
    const file = path.join(dir, 'job.py');
    fs.writeFileSync(
      file,
      [
        'from mylib.train import TrainModuleConfig, DPConfig, ModelConfig',
        'def build_model_config():',
        '    return ModelConfig.llama3_8B(vocab_size=128256)',
        'def build_train_module_config():',
        '    return TrainModuleConfig(',
        '        rank_microbatch_size=2 * 4096,',
        '        dp_config=DPConfig(name="hsdp", param_dtype="bf16", reduce_dtype="fp32"),',
        '    )',
        'def build_parallelism():',
        '    return ParallelismConfig(data_parallel_shard_degree=-1, tensor_parallel_degree=1)',
        '',
      ].join('\n'),
    );
    const r = await cli('estimate', file);
    assert.equal(r.code, 3, r.err);
    assert.match(
      r.err,
      /the job is configured by Python objects the analysis does not read yet \(ParallelismConfig\(\.\.\.\) at line 10\)/,
    );
    assert.match(r.err, /--model ORG\/NAME/);
  });
});

describe('a config file the script loads', () => {
  const run = async (files: Record<string, string>, script: string[]) => {
    const dir = projectDir('fsdp-lens-loads-');
    for (const [name, text] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
      fs.writeFileSync(path.join(dir, name), text);
    }
    const file = path.join(dir, files['proj/pyproject.toml'] === undefined ? '' : 'proj', 'train.py');
    fs.writeFileSync(file, script.join('\n') + '\n');
    const r = await cli('estimate', file, '--json');
    return {
      r,
      j:
        r.code === 0
          ? (JSON.parse(r.out) as {
              model: { params: number };
              plan: { notes: string[] };
              assumptions: { key: string; value: unknown; source: { kind: string } }[];
            })
          : undefined,
    };
  };
  const WRAP = ['for layer in model.model.layers:', '    fully_shard(layer)', 'fully_shard(model)'];

  it('a YAML opened by an argparse default path gives the model and the batch', async () => {
    const { r, j } = await run(
      { 'configs/train.yaml': 'model_name: meta-llama/Llama-3.2-1B\nbatch_size: 4\n' },
      [
        'import argparse',
        'import yaml',
        'from torch.utils.data import DataLoader',
        'from transformers import AutoModelForCausalLM',
        'from torch.distributed.fsdp import fully_shard',
        'parser = argparse.ArgumentParser()',
        'parser.add_argument("--config", default="configs/train.yaml")',
        'args = parser.parse_args()',
        'with open(args.config) as f:',
        '    cfg = yaml.safe_load(f)',
        'model = AutoModelForCausalLM.from_pretrained(cfg["model_name"])',
        ...WRAP,
        'loader = DataLoader(data, batch_size=cfg["batch_size"])',
      ],
    );
    assert.equal(r.code, 0, r.err);
    // Llama 3.2 1B as published: 1,235,814,400 parameters.
    assert.equal(j!.model.params, 1_235_814_400);
    assert.equal(j!.assumptions.find((a) => a.key === 'microBatch')!.value, '4');
    assert.ok(j!.plan.notes.includes('values read from configs/train.yaml, which the script loads'));
  });

  it('OmegaConf.load of a literal path, read by attribute', async () => {
    const { r, j } = await run({ 'conf.yaml': 'model:\n  name: meta-llama/Llama-3.2-1B\n' }, [
      'from omegaconf import OmegaConf',
      'from transformers import AutoModelForCausalLM',
      'from torch.distributed.fsdp import fully_shard',
      'cfg = OmegaConf.load("conf.yaml")',
      'model = AutoModelForCausalLM.from_pretrained(cfg.model.name)',
      ...WRAP,
    ]);
    assert.equal(r.code, 0, r.err);
    assert.equal(j!.model.params, 1_235_814_400);
  });

  it('a file outside the project is not read', async () => {
    // The project is proj/ (its own pyproject.toml); the JSON lies beside it, outside.
    const { r } = await run(
      { 'outside.json': '{"model": "meta-llama/Llama-3.2-1B"}', 'proj/pyproject.toml': '' },
      [
        'import json',
        'from transformers import AutoModelForCausalLM',
        'from torch.distributed.fsdp import fully_shard',
        'cfg = json.load(open("../outside.json"))',
        'model = AutoModelForCausalLM.from_pretrained(cfg["model"])',
        ...WRAP,
      ],
    );
    assert.equal(r.code, 3, r.err);
  });
});

describe('the PyTorch release a project allows', () => {
  it('a lower bound is not the release the job runs; an optional extra pins nothing', async () => {
    const dir = tempDir('fsdp-lens-floor-');
    fs.writeFileSync(
      path.join(dir, 'pyproject.toml'),
      [
        '[project]',
        'name = "t"',
        'dependencies = ["torch>=2.4", "transformers"]',
        '[project.optional-dependencies]',
        'fast = ["torch==2.9.1"]',
        '',
      ].join('\n'),
    );
    const file = path.join(dir, 'train.py');
    fs.writeFileSync(
      file,
      [
        'from transformers import AutoModelForCausalLM',
        'from torch.distributed.fsdp import fully_shard',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        'for layer in model.model.layers:',
        '    fully_shard(layer)',
        'fully_shard(model)',
        '',
      ].join('\n'),
    );
    const r = await cli('estimate', file, '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as {
      assumptions: { key: string; source: { kind: string } }[];
      plan: { notes: string[] };
    };
    assert.equal(j.assumptions.find((a) => a.key === 'torchVersion')!.source.kind, 'default');
    assert.ok(
      j.plan.notes.some((n) =>
        /the project allows torch 2\.4 and later \(torch>=2\.4 at pyproject\.toml:3\)/.test(n),
      ),
      j.plan.notes.join('\n'),
    );
    // An exact pin is the release the job runs.
    fs.writeFileSync(
      path.join(dir, 'pyproject.toml'),
      '[project]\nname = "t"\ndependencies = ["torch==2.6.0"]\n',
    );
    const pinned = JSON.parse((await cli('estimate', file, '--json')).out) as typeof j;
    assert.equal(pinned.assumptions.find((a) => a.key === 'torchVersion')!.source.kind, 'detected');
  });
});

describe('fine-tuning set up under conditions and with values the analysis cannot read', () => {
  const run = async (lines: string[]) => {
    const dir = projectDir('fsdp-lens-lora-');
    const file = path.join(dir, 'train.py');
    fs.writeFileSync(
      file,
      [
        'from transformers import AutoModelForCausalLM',
        'from peft import LoraConfig, get_peft_model',
        'from torch.distributed.fsdp import fully_shard',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        ...lines,
        'for layer in model.model.layers:',
        '    fully_shard(layer)',
        'fully_shard(model)',
        '',
      ].join('\n'),
    );
    return await estimateJson(file);
  };
  const lora = (j: Awaited<ReturnType<typeof run>>) =>
    j.assumptions.find((a) => a.key === 'fineTune')?.value as string | undefined;

  it("LoRA written out applies, with peft's default rank when none is passed", async () => {
    const j = await run(['model = get_peft_model(model, LoraConfig(target_modules=["q_proj", "v_proj"]))']);
    // peft's LoraConfig: r defaults to 8.
    assert.match(lora(j) ?? '', /LoRA rank 8 on q_proj, v_proj/);
  });

  it('LoRA under an undecided condition, or with a rank not known statically, is left out and said so', async () => {
    const gated = await run(['if cfg.use_lora:', '    model = get_peft_model(model, LoraConfig(r=16))']);
    assert.equal(lora(gated), undefined);
    assert.ok(
      gated.plan.notes.some((n) =>
        /LoRA at train\.py:6 runs only when cfg\.use_lora, which the analysis cannot decide/.test(n),
      ),
      gated.plan.notes.join('\n'),
    );
    // What is trained depends on the condition: the figures are one arm's, and no fit verdict rests on them
    // (the script trained LoRA on 24 GB cards where the other arm needs several times more).
    const j = gated as typeof gated & { undecided: string[]; targetFit: { verdict: string } };
    assert.deepEqual(j.undecided, ['whether LoRA at train.py:6 runs (cfg.use_lora)']);
    assert.equal(j.targetFit.verdict, 'undecided');
    const rank = await run(['model = get_peft_model(model, LoraConfig(r=cfg.lora_rank))']);
    assert.equal(lora(rank), undefined);
    assert.ok(rank.plan.notes.some((n) => /its rank `cfg\.lora_rank` is not known statically/.test(n)));
    assert.deepEqual((rank as typeof j).undecided, ['the rank of LoRA at train.py:5 (cfg.lora_rank)']);
  });
});

describe('a wrap option the analysis cannot read', () => {
  it('an FSDP1 sharding strategy chosen at run time is estimated as the labelled default', async () => {
    const dir = projectDir('fsdp-lens-strategy-');
    const file = path.join(dir, 'train.py');
    fs.writeFileSync(
      file,
      [
        'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP',
        'from transformers import AutoModelForCausalLM',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        'model = FSDP(model, sharding_strategy=pick_strategy(cfg))',
        '',
      ].join('\n'),
    );
    const r = await cli('estimate', file, '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as { plan: { strategy: string; notes: string[] } };
    assert.equal(j.plan.strategy, 'FULL_SHARD');
    assert.ok(
      j.plan.notes.some((n) =>
        /train\.py:4: sharding_strategy=pick_strategy\(cfg\) is not known statically; estimated with FSDP1's default, FULL_SHARD/.test(
          n,
        ),
      ),
      j.plan.notes.join('\n'),
    );
  });
});

describe('units named by a variable that holds part of the model', () => {
  it("an embedding and a [norm, head] list bound to names are the model's units, not roots; a copy is its own", async () => {
    const facts = await scanSource(
      [
        'from torch.distributed.fsdp import fully_shard',
        'def prepare(model):',
        '    emb = model.get_input_embeddings()',
        '    fully_shard(emb)',
        '    for layer in model.model.layers:',
        '        fully_shard(layer)',
        '    tail = [m for m in (model.model.norm, model.lm_head) if m is not None]',
        '    fully_shard(tail)',
        '    fully_shard(model)',
        '    twin = copy.deepcopy(model)',
        '    fully_shard(twin)',
        '',
      ].join('\n'),
    );
    assert.deepEqual(
      facts.calls.map((c) => [c.target, c.isRoot]),
      [
        ['emb', false],
        ['layer', false],
        ['tail', false],
        ['model', true],
        // A deep copy is a new object: a root of its own.
        ['twin', true],
      ],
    );
  });
});

describe('a list of modules bound to a name and wrapped whole', () => {
  it('is one unit of the listed modules, a filtered comprehension included', async () => {
    const dir = projectDir('fsdp-lens-listed-');
    const file = path.join(dir, 'train.py');
    fs.writeFileSync(
      file,
      [
        'from transformers import AutoModelForCausalLM',
        'from torch.distributed.fsdp import fully_shard',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")',
        'for layer in model.model.layers:',
        '    fully_shard(layer)',
        'tail = [m for m in (model.model.norm, model.lm_head) if m is not None]',
        'fully_shard(tail)',
        'fully_shard(model)',
        '',
      ].join('\n'),
    );
    const j = await estimateJson(file);
    // Llama 3.1 8B: 32 decoder layers, one unit of [norm, lm_head], and the root.
    assert.equal(j.plan.units, 34);
    const tail = j.units.find((u) => u.modules.length === 2)!;
    assert.deepEqual(tail.modules.sort(), ['lm_head', 'model.norm']);
    // The final RMSNorm (4096) and the untied head (128,256 x 4096).
    assert.equal(tail.params, 4096 + 128_256 * 4096);
  });
});

describe('what from_pretrained loads', () => {
  it('a tokenizer, processor or config loaded beside the model is not the model', async () => {
    const facts = await scanSource(
      [
        'from transformers import AutoConfig, AutoModelForCausalLM, AutoProcessor, AutoTokenizer',
        'tok = AutoTokenizer.from_pretrained(name)',
        'proc = AutoProcessor.from_pretrained(name)',
        'cfg = AutoConfig.from_pretrained(name)',
        'model = AutoModelForCausalLM.from_pretrained(name)',
        '',
      ].join('\n'),
    );
    assert.deepEqual(
      facts.models.map((m) => m.variable),
      ['model'],
    );
  });
});

describe('a model passed through a call that returns it', () => {
  it('parallelize_module returns the same module: the model stays known, and a plan the split does not make is said to be not modelled', async () => {
    const dir = projectDir('fsdp-lens-tp-');
    const file = path.join(dir, 'train.py');
    fs.writeFileSync(
      file,
      [
        'import torch.nn as nn',
        'from torch.distributed.fsdp import fully_shard',
        'from torch.distributed.tensor.parallel import parallelize_module, ColwiseParallel',
        'class Block(nn.Module):',
        '    def __init__(self, d):',
        '        super().__init__()',
        '        self.w1 = nn.Linear(d, 4 * d)',
        '        self.w2 = nn.Linear(4 * d, d)',
        'class Net(nn.Module):',
        '    def __init__(self, d=256, n=2):',
        '        super().__init__()',
        '        self.layers = nn.ModuleList([Block(d) for _ in range(n)])',
        'model = Net()',
        'model = parallelize_module(model, tp_mesh, {"layers.0.w1": ColwiseParallel()})',
        'for layer in model.layers:',
        '    fully_shard(layer, mesh=dp_mesh)',
        'fully_shard(model, mesh=dp_mesh)',
        '',
      ].join('\n'),
    );
    const r = await cli('estimate', file, '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as {
      model: { params: number };
      plan: { notes: string[] };
      unmodelled: string[];
      targetFit: { verdict: string };
    };
    // Two blocks of Linear(256, 1024) and Linear(1024, 256): 2 x (256 x 1024 + 1024 + 1024 x 256 + 256) = 1,051,136.
    assert.equal(j.model.params, 1_051_136);
    // The plan splits layers.0.w1 only: every other Linear stays whole, which the split does not model.
    assert.deepEqual(j.unmodelled, [
      'tensor parallelism (parallelize_module at train.py:14): the plan leaves layers.0.w2 (Linear) whole, which the split does not model',
    ]);
    assert.equal(j.targetFit.verdict, 'undecided');
  });
});

describe("another framework's fsdp_config", () => {
  it("a Composer-style fsdp_config is read as llm-foundry's, not Accelerate's", async () => {
    const dir = tempDir('fsdp-lens-composer-');
    const file = path.join(dir, 'pretrain.yaml');
    fs.writeFileSync(
      file,
      [
        'model:',
        '  name: hf_causal_lm',
        '  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B',
        'fsdp_config:',
        '  sharding_strategy: FULL_SHARD',
        '  mixed_precision: PURE',
        '  backward_prefetch: BACKWARD_PRE',
        'device_train_microbatch_size: 1',
        '',
      ].join('\n'),
    );
    const r = await cli('estimate', file);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /FSDP1 through Composer/);
    assert.doesNotMatch(r.out, /Accelerate configuration/);
    // Accelerate's own keys carry the fsdp_ prefix: still Accelerate.
    fs.writeFileSync(
      file,
      ['fsdp_config:', '  fsdp_sharding_strategy: FULL_SHARD', '  fsdp_version: 2', ''].join('\n'),
    );
    assert.match(
      (await cli('estimate', file, '--model', 'openai-community/gpt2')).out,
      /^Accelerate configuration/m,
    );
  });
});

describe('callers in tests', () => {
  it("a test's toy model is not the job's: a function called only from tests has no known model", async () => {
    const dir = projectDir('fsdp-lens-tests-');
    fs.mkdirSync(path.join(dir, 'pkg'));
    fs.mkdirSync(path.join(dir, 'tests'));
    fs.writeFileSync(path.join(dir, 'pkg', '__init__.py'), '');
    fs.writeFileSync(
      path.join(dir, 'pkg', 'finetune.py'),
      [
        'from torch.distributed.fsdp import fully_shard',
        'def parallelize(model):',
        '    for block in model.blocks:',
        '        fully_shard(block)',
        '    fully_shard(model)',
        '',
      ].join('\n'),
    );
    fs.writeFileSync(
      path.join(dir, 'tests', 'test_finetune.py'),
      [
        'import torch.nn as nn',
        'from pkg.finetune import parallelize',
        'class Tiny(nn.Module):',
        '    def __init__(self):',
        '        super().__init__()',
        '        self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])',
        'def test_parallelize():',
        '    parallelize(Tiny())',
        '',
      ].join('\n'),
    );
    const r = await cli('estimate', path.join(dir, 'pkg', 'finetune.py'));
    assert.equal(r.code, 3, r.err);
    assert.match(r.err, /only tests call it \(tests\/test_finetune\.py:8\), with models of their own/);
  });
});

describe('a dict of wrap options and a same-named dict elsewhere', () => {
  it("another method's own `kwargs` is another dict: the options stay read", async () => {
    const facts = await scanSource(
      [
        'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP',
        'class Prepare:',
        '    def fsdp(self, model, plugin):',
        '        kwargs = {"auto_wrap_policy": plugin.auto_wrap_policy}',
        '        return FSDP(model, **kwargs)',
        '    def other(self, model, cond):',
        '        kwargs = dict(model=model)',
        '        if cond:',
        '            kwargs["model_parameters"] = model.parameters()',
        '        return kwargs',
        '',
      ].join('\n'),
    );
    const c = facts.calls[0]!;
    assert.deepEqual(c.unresolvedSplats, []);
    assert.equal(c.options.auto_wrap_policy?.text, 'plugin.auto_wrap_policy');
  });
});

describe('the micro-batch a script loads', () => {
  const run = async (loaders: string[]) => {
    const dir = projectDir('fsdp-lens-loader-');
    const file = path.join(dir, 'train.py');
    fs.writeFileSync(
      file,
      [
        'import argparse',
        'from torch.utils.data import DataLoader',
        'from transformers import AutoModelForCausalLM',
        'from torch.distributed.fsdp import fully_shard',
        'p = argparse.ArgumentParser()',
        'p.add_argument("--batch-size", type=int, default=4)',
        'args = p.parse_args()',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        'for layer in model.model.layers:',
        '    fully_shard(layer)',
        'fully_shard(model)',
        ...loaders,
        '',
      ].join('\n'),
    );
    return await estimateJson(file);
  };
  const micro = (j: Awaited<ReturnType<typeof run>>) => j.assumptions.find((a) => a.key === 'microBatch')!;

  it("is the DataLoader's batch_size, labelled when it is an argparse default", async () => {
    const m = micro(await run(['loader = DataLoader(ds, batch_size=args.batch_size, shuffle=True)']));
    assert.equal(m.value, '4');
    assert.match(
      m.source.detail!,
      /train\.py:12 \(DataLoader batch_size, the default of --batch-size at line 6/,
    );
  });

  it('loaders that disagree (a larger evaluation batch) decide nothing', async () => {
    const j = await run(['train = DataLoader(ds, batch_size=4)', 'evaluate = DataLoader(ds, batch_size=16)']);
    assert.equal(micro(j).source.kind, 'default');
    assert.ok(j.plan.notes.some((n) => /load different batch sizes/.test(n)));
  });
});

describe('the input a script makes up for the model', () => {
  const script = (input: string) =>
    [
      'import torch',
      'from torch.distributed.fsdp import fully_shard',
      'from transformers import AutoModelForCausalLM',
      'MICRO_BATCH = 2',
      'SEQ_LEN = 8192',
      'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
      'for layer in model.model.layers:',
      '    fully_shard(layer)',
      'fully_shard(model)',
      'def step():',
      input,
      '',
    ].join('\n');
  const values = async (input: string) => {
    const dir = projectDir('fsdp-lens-input-');
    const file = path.join(dir, 'train.py');
    fs.writeFileSync(file, script(input));
    const j = await estimateJson(file);
    const get = (k: string) => j.assumptions.find((a) => a.key === k);
    return { batch: get('microBatch'), seq: get('seqLen') };
  };

  it('token ids of module constants fed to the model give the micro-batch and the sequence', async () => {
    const v = await values(
      '    x = torch.randint(0, 128256, (MICRO_BATCH, SEQ_LEN), device="cuda")\n    model(x).logits.sum().backward()',
    );
    assert.equal(v.batch?.value, '2');
    assert.equal(v.seq?.value, '8192');
    assert.equal(v.seq!.source.kind, 'detected');
    assert.match(v.seq!.source.detail!, /train\.py:11 \(the input \(MICRO_BATCH, SEQ_LEN\) fed to model\)/);
  });

  it('token ids fed to something else, or of a shape not known, decide nothing', async () => {
    for (const input of [
      '    x = torch.randint(0, 10, (4, 16))\n    other(x)',
      '    n = int(input())\n    model(torch.randint(0, 10, (n, 16)))',
    ]) {
      const v = await values(input);
      assert.equal(v.batch!.source.kind, 'default');
      assert.equal(v.seq!.source.kind, 'default');
    }
  });
});

describe('scan of a script whose framework configures FSDP', () => {
  it('names the framework calls instead of saying there is no FSDP', async () => {
    const dir = tempDir('fsdp-lens-scanfw-');
    const file = path.join(dir, 'pretrain.py');
    fs.writeFileSync(
      file,
      [
        'import lightning as L',
        'from lightning.fabric.strategies import FSDPStrategy',
        'strategy = FSDPStrategy(auto_wrap_policy={Block}, sharding_strategy="HYBRID_SHARD")',
        'fabric = L.Fabric(devices=8, num_nodes=2, strategy=strategy, precision="bf16-mixed")',
        '',
      ].join('\n'),
    );
    const r = await cli('scan', file);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /no FSDP wrap calls written here; FSDP is configured by the framework calls below/);
    assert.match(r.out, /^ +3 {2}FSDPStrategy\(\.\.\.\) · auto_wrap_policy, sharding_strategy$/m);
    assert.match(r.out, /^ +4 {2}Fabric\(\.\.\.\) · devices, num_nodes, strategy, precision$/m);
  });
});

describe('arguments written over several lines', () => {
  it('read as one line in the scan', async () => {
    const dir = tempDir('fsdp-lens-multiline-');
    const file = path.join(dir, 'train.py');
    fs.writeFileSync(
      file,
      [
        'from torch.distributed.fsdp import fully_shard',
        'for block in model.layers:',
        '    fully_shard(',
        '        block,',
        '        mesh=(',
        '            mesh["replicate", "shard"]',
        '            if args.hsdp',
        '            else mesh["shard"]',
        '        ),',
        '    )',
        'fully_shard(model)',
        '',
      ].join('\n'),
    );
    const r = await cli('scan', file);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /mesh=\(mesh\["replicate", "shard"\] if args\.hsdp else mesh\["shard"\]\)/);
  });
});

describe('fastcore call_parse jobs that pass their arguments on as a dict', () => {
  // Answer.AI's fsdp_qlora pattern, written afresh: `@call_parse` main -> run(**locals()) -> args = dict(locals())
  // -> torch.multiprocessing.spawn(worker, args=(world_size, args)) -> args["..."] in the worker.
  const script = () => {
    const dir = projectDir('fsdp-lens-fastcore-');
    const file = path.join(dir, 'train.py');
    fs.writeFileSync(
      file,
      [
        'import torch',
        'import torch.multiprocessing as mp',
        'from fastcore.script import call_parse, bool_arg, Param',
        'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP',
        'from transformers import AutoModelForCausalLM',
        'from peft import LoraConfig, get_peft_model',
        '',
        'def worker(local_rank, world_size, args):',
        '    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", torch_dtype=torch.bfloat16)',
        '    if args["mode"] in ["lora", "qlora"]:',
        '        model = get_peft_model(model, LoraConfig(r=args["rank"], target_modules=["q_proj", "v_proj"]))',
        '    elif args["mode"] == "head":',
        '        for p in model.parameters():',
        '            p.requires_grad = False',
        '    model = FSDP(model, device_id=local_rank)',
        '',
        'def run(world_size: int = -1, mode: str = "full", rank: int = 64, offload: bool = False):',
        '    if world_size == -1:',
        '        world_size = torch.cuda.device_count()',
        '    args = dict(locals())',
        '    mp.spawn(worker, args=(world_size, args), nprocs=torch.cuda.device_count(), join=True)',
        '',
        '@call_parse()',
        'def main(',
        '    world_size: int = -1,',
        '    mode: Param("", choices=["full", "lora", "qlora", "head"]) = "full",',
        '    rank: int = 64,',
        '    offload: bool_arg = False,',
        '):',
        '    run(**locals())',
        '',
      ].join('\n'),
    );
    return file;
  };
  const fineTune = (j: EstimateJson) => j.assumptions.find((a) => a.key === 'fineTune')?.value as string;

  it('the command line decides the arm: LoRA with its rank, or none by default', async () => {
    const file = script();
    const lora = await estimateJson(file, '--', '--mode', 'lora', '--rank', '16');
    assert.match(fineTune(lora), /LoRA rank 16 on q_proj, v_proj/);
    assert.ok(
      lora.plan.notes.includes("read from the script's arguments: --mode lora --rank 16"),
      lora.plan.notes.join('\n'),
    );
    const full = await estimateJson(file);
    assert.equal(fineTune(full), undefined);
    assert.ok(
      full.plan.notes.some((n) =>
        /LoRA at train\.py:11 is left out: args\["mode"\] in \["lora", "qlora"\] is false by default/.test(n),
      ),
      full.plan.notes.join('\n'),
    );
    // The freezing loop in the elif arm does not run either.
    assert.ok(
      full.plan.notes.some((n) => /freezing model at train\.py:14 is left out/.test(n)),
      full.plan.notes.join('\n'),
    );
    // `--mode=head` takes the elif arm: LoRA is off by the given arguments, not by a default.
    const head = await estimateJson(file, '--', '--mode=head');
    assert.ok(
      head.plan.notes.some((n) =>
        /LoRA at train\.py:11 is left out: .* is false by the script's arguments/.test(n),
      ),
      head.plan.notes.join('\n'),
    );
  });
});

describe("bitsandbytes' Linear4bit swapped in by the script's own function", () => {
  it('is a 4-bit base with double quantisation, where the call runs; a type test is not one', async () => {
    const dir = projectDir('fsdp-lens-linear4bit-');
    const file = path.join(dir, 'train.py');
    const write = (extra: string[]) =>
      fs.writeFileSync(
        file,
        [
          'import torch',
          'from bitsandbytes.nn import Linear4bit',
          'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP',
          'from transformers import AutoModelForCausalLM',
          '',
          'def swap(module, cls, **kwargs):',
          '    for name, child in module.named_children():',
          '        if issubclass(cls, Linear4bit) and isinstance(child, torch.nn.Linear):',
          '            setattr(module, name, cls(child.in_features, child.out_features, **kwargs))',
          '        else:',
          '            swap(child, cls, **kwargs)',
          '    return module',
          '',
          'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", torch_dtype=torch.bfloat16)',
          ...extra,
          'model = FSDP(model)',
        ].join('\n'),
      );
    write(['model.model = swap(model.model, Linear4bit, quant_type="nf4", quant_storage=torch.bfloat16)']);
    const j = await estimateJson(file);
    const ft = j.assumptions.find((a) => a.key === 'fineTune');
    assert.match(String(ft?.value), /NF4 base weights \(QLoRA\)/);
    assert.match(ft?.source.detail ?? '', /train\.py:15/);
    // Linear4bit's compress_statistics defaults to True: the absmax of every 64 weights kept in 8 bits (with a
    // second-level fp32 scale per 256 of them), where without it each absmax is fp32. Turned off, the
    // quantisation state, replicated on every GPU, is larger.
    write(['model.model = swap(model.model, Linear4bit, compress_statistics=False)']);
    const plain = await estimateJson(file);
    const persistent = (x: EstimateJson) =>
      (x as unknown as { perGpu: { persistentBytes: number } }).perGpu.persistentBytes;
    assert.ok(persistent(plain) > persistent(j), `${persistent(plain)} vs ${persistent(j)}`);
    // Only the type test names the class: no 4-bit base.
    write([]);
    const none = await estimateJson(file);
    assert.equal(
      none.assumptions.find((a) => a.key === 'fineTune'),
      undefined,
    );
  });
});

describe('a config dataclass read through the class itself', () => {
  it("takes the field's default, unless the script sets the class's attributes", async () => {
    // pytorch/examples' FSDP T5 pattern: `from configs import fsdp_config`, then `fsdp_config.sharding_strategy`.
    const dir = projectDir('fsdp-lens-classattr-');
    fs.writeFileSync(
      path.join(dir, 'configs.py'),
      [
        'from dataclasses import dataclass',
        'from torch.distributed.fsdp import ShardingStrategy',
        '',
        '@dataclass',
        'class fsdp_config:',
        '    sharding_strategy: ShardingStrategy = ShardingStrategy.SHARD_GRAD_OP',
        '',
      ].join('\n'),
    );
    const script = (extra: string[]) => {
      const file = path.join(dir, 'train.py');
      fs.writeFileSync(
        file,
        [
          'import torch',
          'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP',
          'from transformers import AutoModelForCausalLM',
          'from configs import fsdp_config',
          ...extra,
          'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
          'model = FSDP(model, sharding_strategy=fsdp_config.sharding_strategy)',
        ].join('\n'),
      );
      return file;
    };
    assert.equal((await estimateJson(script([]))).plan.strategy, 'SHARD_GRAD_OP');
    // Set elsewhere in the script: no longer the class's default.
    const set = await estimateJson(script(['fsdp_config.sharding_strategy = None']));
    assert.equal(set.plan.strategy, 'FULL_SHARD');
    assert.ok(
      set.plan.notes.some((n) => /sharding_strategy=fsdp_config\.sharding_strategy is not known/.test(n)),
    );
  });
});

describe('a model made by a helper of another package, from a name without an organisation', () => {
  it('is followed through the package re-exports and the returned tuple to the Hub id', async () => {
    // pytorch/examples' FSDP T5 shape: `model, tokenizer = setup_model(train_config.model_name)`, the helper and
    // the config dataclass each re-exported by a package's __init__.py, and a legacy id ("t5-base") with no org.
    const dir = projectDir('fsdp-lens-t5-helper-');
    const write = (f: string, lines: string[]) => {
      fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
      fs.writeFileSync(path.join(dir, f), lines.join('\n'));
    };
    write('loaders/build.py', [
      'from transformers import T5ForConditionalGeneration, T5Tokenizer',
      '',
      'def build_model(name):',
      '        net = T5ForConditionalGeneration.from_pretrained(name)',
      '        tok = T5Tokenizer.from_pretrained(name)',
      '        return net, tok',
    ]);
    write('loaders/__init__.py', ['from .build import build_model']);
    write('settings/run.py', [
      'from dataclasses import dataclass',
      '',
      '@dataclass',
      'class run_config:',
      '    name: str = "t5-base"',
    ]);
    write('settings/__init__.py', ['from .run import run_config']);
    write('train.py', [
      'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP',
      'from settings import run_config',
      'from loaders import build_model',
      '',
      'def main():',
      '    model, tokenizer = build_model(run_config.name)',
      '    model = FSDP(model)',
    ]);
    const r = await cli('estimate', path.join(dir, 'train.py'), '--json');
    assert.equal(r.code, 0, r.err);
    const data = JSON.parse(r.out);
    // t5-base: 222,903,552 parameters, what PyTorch counts for T5ForConditionalGeneration (the widely quoted figure).
    assert.equal(data.model.params, 222_903_552);
    assert.match(data.model.name, /t5-base/);
  });
});
