// The micro-batch and sequence of token ids a script makes up and feeds its model, under the model's own name or
// the name a wrap's result is bound to.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { assumed, cli, projectDir } from './helpers';

describe('inputs fed to the wrapped model', () => {
  it('are read through the name fully_shard returns', async () => {
    const dir = projectDir('fsdp-lens-inputs-');
    fs.writeFileSync(
      path.join(dir, 'train.py'),
      [
        'import torch',
        'from torch.distributed.fsdp import fully_shard',
        'from transformers import AutoModelForCausalLM',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")',
        'for block in model.model.layers:',
        '    fully_shard(block)',
        'sharded = fully_shard(model)',
        'for step in range(10):',
        '    tokens = torch.randint(128256, (4, 1024))',
        '    sharded(tokens).logits.sum().backward()',
      ].join('\n'),
    );
    const r = await cli('estimate', path.join(dir, 'train.py'), '--json');
    assert.equal(r.code, 0, r.err);
    const data = JSON.parse(r.out);
    const get = (k: string) => assumed(data, k);
    // torch.randint(high, size): a batch of 4 sequences of 1024 tokens.
    assert.equal(get('microBatch').value, '4');
    assert.equal(get('seqLen').value, '1024');
    assert.match(get('seqLen').source.detail ?? '', /train\.py:9 \(the input \(4, 1024\) fed to sharded\)/);
  });

  it("take DataLoader's own default batch size when nothing may pass another, and say when one is not read", async () => {
    const dir = projectDir('fsdp-lens-loaders-');
    const script = (loader: string) =>
      [
        'import torch',
        'from torch.distributed.fsdp import fully_shard',
        'from torch.utils.data import DataLoader',
        'from transformers import AutoModelForCausalLM',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")',
        'for block in model.model.layers:',
        '    fully_shard(block)',
        'fully_shard(model)',
        'kwargs = make_kwargs()',
        `loader = ${loader}`,
      ].join('\n');
    fs.writeFileSync(path.join(dir, 'plain.py'), script('DataLoader(dataset, shuffle=True)'));
    fs.writeFileSync(path.join(dir, 'splat.py'), script('DataLoader(dataset, **kwargs)'));
    const get = (out: string, k: string) => assumed(JSON.parse(out), k);
    // torch.utils.data.DataLoader(dataset, batch_size=1, ...): the default batch is one sample.
    const plain = await cli('estimate', path.join(dir, 'plain.py'), '--json');
    assert.equal(plain.code, 0, plain.err);
    assert.equal(get(plain.out, 'microBatch').value, '1');
    assert.match(get(plain.out, 'microBatch').source.detail ?? '', /DataLoader's default batch_size=1/);
    const splat = await cli('estimate', path.join(dir, 'splat.py'), '--json');
    assert.equal(splat.code, 0, splat.err);
    assert.equal(get(splat.out, 'microBatch').source.kind, 'default');
    assert.ok(
      JSON.parse(splat.out).notes.some((n: string) =>
        /batch size of the DataLoader at splat\.py:10 is not read statically \(passed in \*\*kwargs\)/.test(
          n,
        ),
      ),
    );
  });

  it('name the batch and sequence the code reads when the input fed to the model is not seen', async () => {
    const dir = projectDir('fsdp-lens-input-hint-');
    fs.writeFileSync(
      path.join(dir, 'train.py'),
      [
        'from dataclasses import dataclass, field',
        'from torch.distributed.fsdp import fully_shard',
        'from transformers import AutoModelForCausalLM',
        'from mydata import make_loader',
        '',
        '@dataclass',
        'class DataArgs:',
        '    batch_size: int = 2',
        '    seq_len: int = 512',
        '',
        '@dataclass',
        'class Args:',
        '    data: DataArgs = field(default_factory=DataArgs)',
        '',
        'args = Args()',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")',
        'for block in model.model.layers:',
        '    fully_shard(block)',
        'fully_shard(model)',
        'loader = make_loader(args.data)',
        'tokens_per_step = args.data.batch_size * args.data.seq_len',
        'for batch in loader:',
        '    model(batch).loss.backward()',
      ].join('\n'),
    );
    const r = await cli('estimate', path.join(dir, 'train.py'), '--json');
    assert.equal(r.code, 0, r.err);
    const data = JSON.parse(r.out);
    const get = (k: string) => assumed(data, k);
    // A hint, not a result: the loader's batch is not seen, so the defaults stand and the note names the reads.
    assert.equal(get('microBatch').source.kind, 'default');
    assert.equal(get('seqLen').source.kind, 'default');
    assert.ok(
      data.notes.some(
        (n: string) =>
          n ===
          'the code reads args.data.batch_size (2, line 21) and args.data.seq_len (512, line 21), but the input the model is fed is not seen: the default stands (--batch 2 --seq 512 estimates with them)',
      ),
      data.notes.join('\n'),
    );
  });

  it("name a length read from a dict of the command line's options, as fastcore scripts pass them on", async () => {
    const dir = projectDir('fsdp-lens-input-dict-');
    fs.writeFileSync(
      path.join(dir, 'train.py'),
      [
        'from torch.distributed.fsdp import fully_shard',
        'from transformers import AutoModelForCausalLM',
        'from mydata import make_dataset',
        '',
        'def main(args):',
        '    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")',
        '    for block in model.model.layers:',
        '        fully_shard(block)',
        '    fully_shard(model)',
        '    data = make_dataset(["x" * args["context_length"] * 2])',
        '    for batch in data:',
        '        model(batch).loss.backward()',
        '',
        'main(dict(context_length=2048, lr=1e-4))',
      ].join('\n'),
    );
    const r = await cli('estimate', path.join(dir, 'train.py'), '--json');
    assert.equal(r.code, 0, r.err);
    const data = JSON.parse(r.out);
    assert.equal(assumed(data, 'seqLen').source.kind, 'default');
    assert.ok(
      data.notes.some((n: string) =>
        n.startsWith(
          'the code reads args["context_length"] (2048, line 10), but the input the model is fed is not seen',
        ),
      ),
      data.notes.join('\n'),
    );
  });
});
