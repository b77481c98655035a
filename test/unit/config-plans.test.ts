// Jobs configured by OmegaConf from the command line, whose helper wraps the modules a grouping plan names: the
// config read as OmegaConf builds it, the plan run where the call stands, and no figure without the command line.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { cli, projectDir } from './helpers';
import { readLaunchFile } from '../../src/core/project/settings';

/** A project: a model package, a helper that shards by a grouping plan, and a script that merges its config. */
function project(): string {
  const dir = projectDir('fsdp-lens-omegaconf-');
  fs.mkdirSync(path.join(dir, 'job'));
  fs.mkdirSync(path.join(dir, 'conf'));
  fs.writeFileSync(path.join(dir, 'job', '__init__.py'), '');
  fs.writeFileSync(
    path.join(dir, 'job', 'net.py'),
    [
      'from dataclasses import dataclass',
      'from torch import nn',
      '',
      '@dataclass',
      'class NetArgs:',
      '    width: int = 512',
      '    depth: int = 4',
      '    vocab: int = -1',
      '',
      'class Block(nn.Module):',
      '    def __init__(self, args):',
      '        super().__init__()',
      '        self.up = nn.Linear(args.width, 4 * args.width, bias=False)',
      '        self.down = nn.Linear(4 * args.width, args.width, bias=False)',
      '',
      'class Net(nn.Module):',
      '    def __init__(self, args):',
      '        super().__init__()',
      '        self.embed = nn.Embedding(args.vocab, args.width)',
      '        self.blocks = nn.ModuleList([Block(args) for _ in range(args.depth)])',
      '        self.head = nn.Linear(args.width, args.vocab, bias=False)',
      '',
      'def grouping(args):',
      '    groups = []',
      '    groups.append(("embed", False))',
      '    for i in range(args.depth):',
      '        groups.append((f"blocks.{i}", False))',
      '    groups.append(("head", True))',
      '    return groups',
      '',
    ].join('\n'),
  );
  fs.writeFileSync(
    path.join(dir, 'job', 'sharding.py'),
    [
      'import functools',
      'import torch',
      'from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy',
      '',
      'def submodule(root, dotted):',
      '    names = dotted.split(".")',
      '    return functools.reduce(getattr, names, root)',
      '',
      'def shard(model, groups=None, checkpoint=False, precision="bf16"):',
      '    dtypes = dict(bf16=torch.bfloat16, fp32=torch.float32)',
      '    mp = MixedPrecisionPolicy(param_dtype=dtypes[precision], reduce_dtype=torch.float32)',
      '    if groups is None:',
      '        groups = [(f"blocks.{i}", True) for i in range(len(model.blocks))]',
      '    for name, keep in groups:',
      '        fully_shard(submodule(model, name), mp_policy=mp, reshard_after_forward=keep)',
      '    if checkpoint:',
      '        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper',
      '        model = checkpoint_wrapper(model)',
      '    return fully_shard(model, mp_policy=mp)',
      '',
    ].join('\n'),
  );
  fs.writeFileSync(
    path.join(dir, 'train.py'),
    [
      'from dataclasses import dataclass, field',
      'import torch',
      'from omegaconf import OmegaConf',
      'from job.net import Net, NetArgs, grouping',
      'from job.sharding import shard',
      '',
      '@dataclass',
      'class DataArgs:',
      '    batch_size: int = 1',
      '    seq_len: int = 4096',
      '',
      '@dataclass',
      'class RunArgs:',
      '    steps: int = 10',
      '    checkpoint: bool = False',
      '    precision: str = "bf16"',
      '    data: DataArgs = field(default_factory=DataArgs)',
      '    net: NetArgs = field(default_factory=NetArgs)',
      '',
      'def run(cfg: RunArgs):',
      '    with torch.device("meta"):',
      '        model = Net(cfg.net)',
      '    model = shard(model, groups=grouping(cfg.net), checkpoint=cfg.checkpoint, precision=cfg.precision)',
      '    opt = torch.optim.AdamW(model.parameters())',
      '    for _ in range(cfg.steps):',
      '        tokens = torch.randint(0, 100, (cfg.data.batch_size, cfg.data.seq_len))',
      '        model(tokens).sum().backward()',
      '        opt.step()',
      '',
      'def main():',
      '    cli = OmegaConf.from_cli()',
      '    from_file = OmegaConf.load(cli.config)',
      '    del cli.config',
      '    cfg = OmegaConf.merge(OmegaConf.structured(RunArgs()), from_file, cli)',
      '    run(OmegaConf.to_object(cfg))',
      '',
      'if __name__ == "__main__":',
      '    main()',
      '',
    ].join('\n'),
  );
  // The file sets the model's sizes and the batch; the rest keeps the dataclasses' defaults.
  fs.writeFileSync(
    path.join(dir, 'conf', 'small.yaml'),
    ['net:', '  width: 64', '  depth: 3', '  vocab: 100', 'data:', '  batch_size: 2', ''].join('\n'),
  );
  return dir;
}

interface Json {
  model: { params: number };
  plan: { units: number; known?: boolean; reason?: string };
  units: { modules: string[]; params: number; isRoot: boolean; residency: { kind: string } }[];
  assumptions: { key: string; value: unknown; source: { kind: string; detail?: string } }[];
}

async function estimate(dir: string, ...scriptArgs: string[]): Promise<{ code: number; json: Json }> {
  const given = scriptArgs.length ? ['--', ...scriptArgs] : [];
  const r = await cli('estimate', path.join(dir, 'train.py'), '--json', ...given);
  return { code: r.code, json: JSON.parse(r.out) as Json };
}

// By hand, for width w, depth d, vocab V (no biases): each block holds up (w x 4w) and down (4w x w), 8w^2; the
// embedding and the head V x w each. w = 64, V = 100: a block 32,768, the embedding and the head 6,400 each.
const BLOCK = 8 * 64 * 64;
const EDGE = 100 * 64;

describe('a job configured by OmegaConf from its command line', () => {
  it('reads the config file the command line names, merged over the dataclass defaults', async () => {
    const dir = project();
    const { code, json } = await estimate(dir, 'config=conf/small.yaml');
    assert.equal(code, 0);
    assert.equal(json.model.params, 3 * BLOCK + 2 * EDGE);
    const value = (k: string) => json.assumptions.find((a) => a.key === k);
    // `data.batch_size` from the file, `data.seq_len` from DataArgs' default (the file does not set it).
    assert.equal(value('microBatch')?.value, '2');
    assert.equal(value('seqLen')?.value, '4096');
  });

  it("takes the command line's own keys over the file's", async () => {
    const dir = project();
    const { code, json } = await estimate(dir, 'config=conf/small.yaml', 'net.depth=5', 'data.seq_len=256');
    assert.equal(code, 0);
    assert.equal(json.model.params, 5 * BLOCK + 2 * EDGE);
    assert.equal(json.assumptions.find((a) => a.key === 'seqLen')?.value, '256');
  });

  it('gives no figure without the command line, and says how to give it', async () => {
    const dir = project();
    const { code, json } = await estimate(dir);
    assert.equal(code, 3);
    assert.equal(json.plan.known, false);
    assert.match(json.plan.reason ?? '', /command line.*OmegaConf\.from_cli\(\).*-- config=PATH/);
  });
});

describe('a helper that wraps the modules a grouping plan names', () => {
  it('makes one unit per entry, each with the reshard_after_forward its entry gives', async () => {
    const dir = project();
    const { json } = await estimate(dir, 'config=conf/small.yaml');
    // embed, blocks.0-2, head, and the root: fully_shard(model) holds nothing the entries do not.
    assert.equal(json.plan.units, 6);
    const unit = (m: string) => json.units.find((u) => u.modules.join() === m);
    assert.equal(unit('embed')?.params, EDGE);
    assert.equal(unit('blocks.1')?.params, BLOCK);
    // `("embed", False)` and the blocks' `False` keep them gathered after forward; the head's `True` reshards.
    assert.equal(unit('embed')?.residency.kind, 'keep');
    assert.equal(unit('blocks.2')?.residency.kind, 'keep');
    assert.notEqual(unit('head')?.residency.kind, 'keep');
    assert.ok(json.units.find((u) => u.isRoot));
  });

  it('makes the helper’s own plan where the call passes None', async () => {
    const dir = project();
    const train = fs.readFileSync(path.join(dir, 'train.py'), 'utf8');
    fs.writeFileSync(path.join(dir, 'train.py'), train.replace('groups=grouping(cfg.net)', 'groups=None'));
    const { code, json } = await estimate(dir, 'config=conf/small.yaml');
    assert.equal(code, 0);
    // `[(f"blocks.{i}", True) for i in range(len(model.blocks))]`: the 3 blocks, resharded, and the root.
    assert.equal(json.plan.units, 4);
    assert.deepEqual(
      json.units.filter((u) => !u.isRoot).map((u) => [u.modules.join(), u.residency.kind === 'keep']),
      [0, 1, 2].map((i) => [`blocks.${i}`, false]),
    );
  });

  it('decides the helper’s checkpointing by what the call passes', async () => {
    const dir = project();
    const ac = (j: Json) => j.assumptions.find((a) => a.key === 'checkpointing');
    // `checkpoint=cfg.checkpoint`, False by RunArgs' default: no checkpointing.
    assert.equal(ac((await estimate(dir, 'config=conf/small.yaml')).json)?.value, 'none');
    const on = (await estimate(dir, 'config=conf/small.yaml', 'checkpoint=true')).json;
    assert.equal(ac(on)?.value, 'full');
    assert.match(ac(on)?.source.detail ?? '', /sharding\.py:18 \(checkpoint_wrapper\)/);
  });

  it('reads the options the helper computes from what the call passes', async () => {
    const dir = project();
    const dtype = (j: Json) => j.assumptions.find((a) => a.key === 'paramDtype');
    // `param_dtype=dtypes[precision]`, `precision=cfg.precision`: RunArgs' "bf16", or the command line's.
    assert.equal(dtype((await estimate(dir, 'config=conf/small.yaml')).json)?.value, 'bfloat16');
    const fp32 = dtype((await estimate(dir, 'config=conf/small.yaml', 'precision=fp32')).json);
    assert.equal(fp32?.value, 'float32');
    assert.equal(fp32?.source.kind, 'detected');
  });
});

describe('batch files that set up an environment', () => {
  it('are not taken as the launch of a script, and count GPUs by --gres over tasks', () => {
    const setup = [
      '#!/bin/bash',
      '#SBATCH --nodes=1',
      '#SBATCH --gres=gpu:8',
      '#SBATCH --ntasks-per-node=1',
      'conda create -n env python=3.11 -y',
      'pip install torch',
      'echo "ready in $(which python)"',
    ].join('\n');
    assert.deepEqual(readLaunchFile('/p/setup.sh', setup), []);
    // One torchrun per node (one task) running 8 GPUs: 8 GPUs per node.
    const job = setup.replace(/conda[\s\S]*$/, 'srun $CMD\n');
    assert.equal(readLaunchFile('/p/job.sh', job)[0]?.gpusPerNode, 8);
  });
});
