import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import git from 'isomorphic-git';
import { describe, it } from 'node:test';
import { cli, projectDir, writeFiles } from './helpers';
import type { EstimateDelta } from '../../src/core/whatif/delta';

const A = [
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
// B: checkpointing on, 1 x 8192 tokens, and the blocks kept gathered after forward.
const B = A.map((l) =>
  l
    .replace('seq_len=4096 micro_batch=2', 'seq_len=8192 micro_batch=1')
    .replace(
      'fully_shard(layer, mp_policy=mp)',
      'fully_shard(layer, mp_policy=mp, reshard_after_forward=False)',
    ),
);
B.splice(5, 0, 'model.gradient_checkpointing_enable()');

describe('fsdp-lens diff', () => {
  it('attributes the change to its causes, in order, adding up to the total', async () => {
    const dir = projectDir('fsdp-lens-diff-');
    writeFiles(dir, { 'a.py': A, 'b.py': B });
    const r = await cli('diff', path.join(dir, 'a.py'), path.join(dir, 'b.py'), '--json');
    assert.equal(r.code, 0, r.err);
    const d = JSON.parse(r.out) as EstimateDelta;
    assert.deepEqual(
      d.causes.map((c) => c.cause),
      ['checkpointing', 'batch', 'sequence', 'reshard'],
    );
    // The causes telescope: their sum is B minus A, for the peak, the state and the traffic.
    for (const k of ['peakBytes', 'persistentBytes', 'trafficBytes'] as const)
      assert.equal(
        d.causes.reduce((s, c) => s + c[k], 0),
        d.after[k] - d.before[k],
        k,
      );
    // Keeping the 32 blocks gathered after forward skips their backward all-gathers: each block's 218,112,000
    // parameters in bf16, of which a GPU receives 7/8 over 8 GPUs: 32 x 218,112,000 x 2 B x 7/8.
    // The plan's own change is named as its cause: nothing is left to "the plan".
    const reshard = d.causes.find((c) => c.cause === 'reshard')!;
    assert.equal(reshard.trafficBytes, -((32 * 218_112_000 * 2 * 7) / 8));
    assert.deepEqual(
      reshard.changes.map((c) => [c.label, c.from, c.to]),
      [['units kept gathered after forward', '0', '32']],
    );
    // Neither the batch nor the sequence moves the sharded state.
    assert.equal(d.causes.find((c) => c.cause === 'sequence')!.persistentBytes, 0);
  });

  it('names CPU offload as a cause of its own, with its bytes', async () => {
    const dir = projectDir('fsdp-lens-diff-plan-');
    // B2: every wrap offloads.
    const offloaded = A.map((l) =>
      l
        .replace(
          'fully_shard(layer, mp_policy=mp)',
          'fully_shard(layer, mp_policy=mp, offload_policy=CPUOffloadPolicy())',
        )
        .replace(
          'fully_shard(model, mp_policy=mp)',
          'fully_shard(model, mp_policy=mp, offload_policy=CPUOffloadPolicy())',
        )
        .replace(
          'import fully_shard, MixedPrecisionPolicy',
          'import fully_shard, MixedPrecisionPolicy, CPUOffloadPolicy',
        ),
    );
    writeFiles(dir, { 'a.py': A, 'b.py': offloaded });
    const r = await cli('diff', path.join(dir, 'a.py'), path.join(dir, 'b.py'), '--json');
    assert.equal(r.code, 0, r.err);
    const d = JSON.parse(r.out) as EstimateDelta;
    assert.deepEqual(
      d.causes.map((c) => c.cause),
      ['offload'],
    );
    // fp32 parameters and gradients and Adam's two states, 16 B per parameter of Llama 3.1 8B over 8 GPUs, move
    // from each GPU to its process's host memory.
    const moved = (8_030_261_248 * 16) / 8;
    assert.equal(d.causes[0]!.persistentBytes, -moved);
    assert.equal(d.causes[0]!.hostBytes, moved);
    for (const k of ['peakBytes', 'persistentBytes', 'trafficBytes', 'hostBytes'] as const)
      assert.equal(
        d.causes.reduce((s, c) => s + c[k], 0),
        d.after[k] - d.before[k],
        k,
      );
  });

  it('names FSDP1 to FSDP2 as a cause: the bundled FSDP1 example against its migration', async () => {
    const dir = projectDir('fsdp-lens-diff-api-');
    const example = fs.readFileSync(
      path.join(__dirname, '..', '..', '..', 'examples', 'train_fsdp1_auto_wrap.py'),
      'utf8',
    );
    fs.writeFileSync(path.join(dir, 'a.py'), example);
    fs.writeFileSync(path.join(dir, 'b.py'), example);
    const m = await cli('migrate', path.join(dir, 'b.py'), '--write');
    assert.equal(m.code, 0, m.err);
    const r = await cli('diff', path.join(dir, 'a.py'), path.join(dir, 'b.py'), '--json');
    assert.equal(r.code, 0, r.err);
    const d = JSON.parse(r.out) as EstimateDelta;
    // The same units and precision: the wrap API is the one change, named with its own bytes.
    assert.deepEqual(
      d.causes.map((c) => c.cause),
      ['FSDP1 to FSDP2'],
    );
    assert.deepEqual(
      d.causes[0]!.changes.map((c) => [c.label, c.from, c.to]),
      [['wrap API', 'fsdp1', 'fsdp2']],
    );
    for (const k of ['peakBytes', 'persistentBytes', 'trafficBytes', 'hostBytes'] as const)
      assert.equal(d.causes[0]![k], d.after[k] - d.before[k], k);
  });

  it('names LoRA as a cause: the same model with adapters, estimated on the first plan', async () => {
    const dir = projectDir('fsdp-lens-diff-lora-');
    // B3: LoRA of rank 16 on q_proj and v_proj, the base frozen.
    const lora = [...A];
    lora.splice(
      5,
      0,
      'from peft import LoraConfig, get_peft_model',
      'model = get_peft_model(model, LoraConfig(r=16, target_modules=["q_proj", "v_proj"]))',
    );
    writeFiles(dir, { 'a.py': A, 'b.py': lora });
    const r = await cli('diff', path.join(dir, 'a.py'), path.join(dir, 'b.py'), '--json');
    assert.equal(r.code, 0, r.err);
    const d = JSON.parse(r.out) as EstimateDelta;
    assert.deepEqual(
      d.causes.map((c) => c.cause),
      ['LoRA'],
    );
    // Llama 3.1 8B's 32 layers each get q_proj's 16 x (4096 + 4096) and v_proj's 16 x (4096 + 1024) adapter
    // parameters: 6,815,744 trained at 16 B each; the 8,030,261,248 base parameters keep only their fp32 4 B.
    const base = 8_030_261_248;
    const adapters = 32 * (16 * (4096 + 4096) + 16 * (4096 + 1024));
    assert.equal(d.causes[0]!.persistentBytes, (base * 4 + adapters * 16 - base * 16) / 8);
    for (const k of ['peakBytes', 'persistentBytes', 'trafficBytes', 'hostBytes'] as const)
      assert.equal(d.causes[0]![k], d.after[k] - d.before[k], k);
  });

  it('fails a CI job when the peak rises past the threshold, and says so in text', async () => {
    const dir = projectDir('fsdp-lens-diff-');
    writeFiles(dir, { 'a.py': A, 'b.py': B });
    // B's peak is lower: A -> B passes, B -> A fails at 5%.
    assert.equal(
      (await cli('diff', path.join(dir, 'a.py'), path.join(dir, 'b.py'), '--fail-if-peak-increases', '5%'))
        .code,
      0,
    );
    const back = await cli(
      'diff',
      path.join(dir, 'b.py'),
      path.join(dir, 'a.py'),
      '--fail-if-peak-increases',
      '5%',
    );
    assert.equal(back.code, 1);
    assert.match(back.out, /^Causes, in the order they apply/m);
    assert.match(back.out, /activation checkpointing: full -> none/);
    assert.equal(
      (await cli('diff', path.join(dir, 'a.py'), path.join(dir, 'b.py'), '--fail-if-peak-increases', 'x'))
        .code,
      2,
    );
  });

  it('compares only the totals of two different models', async () => {
    const dir = projectDir('fsdp-lens-diff-');
    writeFiles(dir, { 'a.py': A, 'c.py': A.map((l) => l.replace('Llama-3.1-8B', 'Llama-3.2-1B')) });
    const d = JSON.parse(
      (await cli('diff', path.join(dir, 'a.py'), path.join(dir, 'c.py'), '--json')).out,
    ) as EstimateDelta;
    assert.deepEqual(d.causes, []);
    assert.match(d.unattributed!, /the models differ/);
  });
});

describe('fsdp-lens diff at git revisions', () => {
  it("reads a file at a revision from the repository's objects, and names the revision", async () => {
    const dir = projectDir('fsdp-lens-diff-git-');
    const author = { name: 'a', email: 'a@example.com', timestamp: 1_700_000_000, timezoneOffset: 0 };
    await git.init({ fs, dir });
    writeFiles(dir, { 'train.py': A });
    await git.add({ fs, dir, filepath: 'train.py' });
    await git.add({ fs, dir, filepath: 'pyproject.toml' });
    const first = await git.commit({ fs, dir, message: 'one', author });
    writeFiles(dir, { 'train.py': B });
    await git.add({ fs, dir, filepath: 'train.py' });
    await git.commit({ fs, dir, message: 'two', author: { ...author, timestamp: author.timestamp + 60 } });
    const file = path.join(dir, 'train.py');
    // HEAD~1 is the first commit: A's text against the file now (B).
    const r = await cli('diff', 'HEAD~1', file, '--json');
    assert.equal(r.code, 0, r.err);
    const d = JSON.parse(r.out) as EstimateDelta;
    const both = JSON.parse(
      (await cli('diff', first.slice(0, 7), 'HEAD', file, '--json')).out,
    ) as EstimateDelta;
    assert.deepEqual(both, d);
    assert.ok(d.after.peakBytes < d.before.peakBytes);
    assert.match(
      (await cli('diff', 'HEAD~1', file)).out,
      new RegExp(`^A {2}.*train\\.py at HEAD~1 \\(${first.slice(0, 8)}\\)`),
    );
    // Unknown revisions, and going back past the first commit, are said.
    const none = await cli('diff', 'HEAD~5', file);
    assert.equal(none.code, 2);
    assert.match(none.err, /goes back past the first commit/);
  });
});
