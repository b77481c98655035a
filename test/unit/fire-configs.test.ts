// Jobs whose command line python-fire hands to `main(**kwargs)`, which sets the fields of config dataclasses
// imported from the project's package: the values read as the job reads them, casts only where their tests hold,
// and launch files matched by the file their command names.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { assumed, cli, projectDir, writeFiles } from './helpers';
import { fireArgs, fireValue } from '../../src/core/python/fireArgs';

/** A package with two config dataclasses, an updater of them, and a fine-tuning script fire launches. */
function project(): string {
  const dir = projectDir('fsdp-lens-fire-');
  const write = (file: string, lines: string[]) => writeFiles(dir, { [file]: lines });
  write('jobs/__init__.py', ['']);
  write('jobs/configs/__init__.py', [
    'from jobs.configs.run import run_config',
    'from jobs.configs.shard import shard_config',
  ]);
  write('jobs/configs/run.py', [
    'from dataclasses import dataclass',
    '',
    '@dataclass',
    'class run_config:',
    '    model_name: str = "path/to/weights"',
    '    enable_fsdp: bool = False',
  ]);
  write('jobs/configs/shard.py', [
    'from dataclasses import dataclass',
    '',
    '@dataclass',
    'class shard_config:',
    '    pure_bf16: bool = False',
  ]);
  write('jobs/tools.py', [
    'def apply_overrides(target, **overrides):',
    '    if isinstance(target, (tuple, list)):',
    '        for t in target:',
    '            apply_overrides(t, **overrides)',
    '        return',
    '    for key, value in overrides.items():',
    '        if hasattr(target, key):',
    '            setattr(target, key, value)',
  ]);
  write('jobs/finetune.py', [
    'import functools',
    'import fire',
    'import torch',
    'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP',
    'from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy',
    'from transformers import AutoModelForCausalLM',
    'from transformers.models.llama.modeling_llama import LlamaDecoderLayer',
    'from jobs.configs import run_config as RUN, shard_config as SHARD',
    'from jobs.tools import apply_overrides',
    '',
    'def main(**kwargs):',
    '    run, shard = RUN(), SHARD()',
    '    apply_overrides((run, shard), **kwargs)',
    '    model = AutoModelForCausalLM.from_pretrained(run.model_name)',
    '    if (',
    '        run.enable_fsdp',
    '        and shard.pure_bf16',
    '    ):',
    '        model.to(torch.bfloat16)',
    '    policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={LlamaDecoderLayer})',
    '    model = FSDP(model, auto_wrap_policy=policy)',
    '',
    'if __name__ == "__main__":',
    '    fire.Fire(main)',
  ]);
  return dir;
}

const MODEL = 'meta-llama/Llama-3.1-8B';
// Llama 3.1 8B, the published total: 32 x (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 14336 + 2 x 4096)
// + 2 x 128256 x 4096 + 4096 = 8,030,261,248.
const PARAMS = 8_030_261_248;

async function json(dir: string, ...argv: string[]) {
  const r = await cli(
    'estimate',
    path.join(dir, 'jobs', 'finetune.py'),
    '--json',
    '--world-size',
    '8',
    ...argv,
  );
  return { ...r, data: r.code === 0 ? JSON.parse(r.out) : undefined };
}

describe('python-fire command lines', () => {
  it('splits flags as fire.core._ParseKeywordArgs does', () => {
    const a = fireArgs(
      ['--enable_fsdp', '--model-name', 'org/m', '--lr=1e-5', '--nopure', '7', '--', '--help'],
      ['model_name', 'pure'],
      true,
    );
    // A flag followed by another flag is boolean; hyphens become underscores; `--noX` is X=False only for a
    // boolean flag (`--nopure 7` passes "7" to the keyword `nopure`, which **kwargs takes).
    assert.equal(a.keywords.get('enable_fsdp')?.raw, 'True');
    assert.equal(a.keywords.get('model_name')?.raw, 'org/m');
    assert.equal(a.keywords.get('lr')?.raw, '1e-5');
    assert.equal(a.keywords.get('nopure')?.raw, '7');
    assert.equal(a.keywords.has('help'), false);
    const b = fireArgs(['--nopure'], ['pure'], false);
    assert.equal(b.keywords.get('pure')?.raw, 'False');
    // Without **kwargs a flag that names no parameter takes nothing, and its value is skipped with it.
    const c = fireArgs(['--other', 'x', 'pos'], ['a'], false);
    assert.equal(c.keywords.size, 0);
    assert.deepEqual(c.positional, ['pos']);
  });

  it('reads values as fire.parser.DefaultParseValue does', () => {
    assert.deepEqual(fireValue('8'), { k: 'num', v: 8, int: true });
    assert.deepEqual(fireValue('1e-5'), { k: 'num', v: 1e-5, int: false });
    assert.deepEqual(fireValue('True'), { k: 'bool', v: true });
    assert.deepEqual(fireValue('None'), { k: 'none' });
    assert.deepEqual(fireValue("'lora'"), { k: 'str', v: 'lora' });
    // A path is not a literal (a BinOp of names): the string itself.
    assert.deepEqual(fireValue('meta-llama/Llama-3.1-8B'), { k: 'str', v: 'meta-llama/Llama-3.1-8B' });
  });
});

describe('config dataclasses of the project set from the command line', () => {
  it('without a command line, the default model name is the model, and it is not one the analysis knows', async () => {
    const r = await cli('estimate', path.join(project(), 'jobs', 'finetune.py'));
    assert.equal(r.code, 3, r.out + r.err);
    assert.match(r.err, /"path\/to\/weights"/);
  });

  it('takes the model from --model_name through the updater, and leaves the cast its default turns off', async () => {
    const { code, data, err } = await json(project(), '--', '--enable_fsdp', '--model_name', MODEL);
    assert.equal(code, 0, err);
    assert.equal(data.model.params, PARAMS);
    // from_pretrained without torch_dtype and no cast that runs: fp32 parameters, the default.
    assert.equal(assumed(data, 'masterDtype').value, 'float32');
    assert.equal(assumed(data, 'masterDtype').source.kind, 'default');
    assert.ok(
      data.notes.some((n: string) =>
        /cast to bfloat16 at .*finetune\.py:19 is left out: run\.enable_fsdp and shard\.pure_bf16 is false by default/.test(
          n,
        ),
      ),
      data.notes.join('\n'),
    );
  });

  it('casts where the command line turns the test on', async () => {
    const { code, data, err } = await json(
      project(),
      '--',
      '--enable_fsdp',
      '--model_name',
      MODEL,
      '--pure_bf16',
    );
    assert.equal(code, 0, err);
    assert.equal(assumed(data, 'masterDtype').value, 'bfloat16');
    // Sharded parameters: every parameter / 8 GPUs x 2 B, FlatParameters padded to a multiple of 8 per unit.
    const sharded = data.perGpu.persistent.terms.find(
      (t: { name: string }) => t.name === 'sharded parameters',
    ).bytes;
    assert.ok(Math.abs(sharded - (PARAMS / 8) * 2) < 1e4, String(sharded));
  });
});

describe('launch files', () => {
  it('run the file their command names, not another of the same name', async () => {
    const dir = project();
    fs.mkdirSync(path.join(dir, 'launch'));
    // `./finetune.py` from the launch file's folder is launch/finetune.py, a wrapper, not jobs/finetune.py.
    fs.writeFileSync(path.join(dir, 'launch', 'finetune.py'), 'from jobs.finetune import main\n');
    fs.writeFileSync(
      path.join(dir, 'launch', 'run.sh'),
      'torchrun --nproc_per_node 2 ./finetune.py --enable_fsdp\n',
    );
    const r = await cli(
      'estimate',
      path.join(dir, 'jobs', 'finetune.py'),
      '--json',
      '--',
      '--model_name',
      MODEL,
    );
    assert.equal(r.code, 0, r.err);
    assert.equal(assumed(JSON.parse(r.out), 'worldSize').source.kind, 'default');
  });
});

describe('torch_dtype="auto"', () => {
  const script = (model: string, dtype: string) => [
    'from torch.distributed.fsdp import fully_shard',
    'from transformers import AutoModelForCausalLM',
    `model = AutoModelForCausalLM.from_pretrained("${model}"${dtype})`,
    'for block in model.model.layers:',
    '    fully_shard(block)',
    'fully_shard(model)',
  ];
  const run = async (lines: string[], requirements?: string) => {
    const dir = projectDir('fsdp-lens-auto-dtype-');
    fs.writeFileSync(path.join(dir, 'train.py'), lines.join('\n'));
    if (requirements) fs.writeFileSync(path.join(dir, 'requirements.txt'), requirements);
    const r = await cli('estimate', path.join(dir, 'train.py'), '--json');
    assert.equal(r.code, 0, r.err);
    return JSON.parse(r.out);
  };

  it("loads in the checkpoint's dtype, from config.json's torch_dtype", async () => {
    // Llama 3.1 8B's config.json records torch_dtype bfloat16.
    const data = await run(script(MODEL, ', torch_dtype="auto"'));
    const a = assumed(data, 'masterDtype');
    assert.equal(a.value, 'bfloat16');
    assert.match(a.source.detail ?? '', /train\.py:3 \(dtype="auto": its checkpoint's bfloat16\)/);
  });

  it('says the dtype is not known where the checkpoint does not record it, and the default stands', async () => {
    const data = await run(script('google/gemma-2-2b', ', torch_dtype="auto"'));
    assert.equal(assumed(data, 'masterDtype').source.kind, 'default');
    assert.ok(
      data.notes.some((n: string) => /train\.py:3 loads the model with torch_dtype="auto"/.test(n)),
      data.notes.join('\n'),
    );
  });

  it("a Trainer job, unpinned, is read with Transformers 5: a LoRA base stays in the checkpoint's bf16", async () => {
    const data = await run([
      'from transformers import AutoModelForCausalLM, Trainer, TrainingArguments',
      'from peft import LoraConfig, get_peft_model',
      `model = AutoModelForCausalLM.from_pretrained("${MODEL}")`,
      'model = get_peft_model(model, LoraConfig(r=16, target_modules=["q_proj", "v_proj"]))',
      'args = TrainingArguments("out", fsdp="full_shard auto_wrap", bf16=True, per_device_train_batch_size=1)',
      'Trainer(model=model, args=args).train()',
    ]);
    // Frozen base: 8,030,261,248 x 2 B; LoRA (32 layers x (4096 x 16 + 16 x 4096 + 4096 x 16 + 16 x 1024) =
    // 6,815,744) upcast to fp32 by Accelerate, with fp32 gradients and two AdamW states: 16 B each; over 8 GPUs.
    const lora = 32 * (4096 * 16 + 16 * 4096 + 4096 * 16 + 16 * 1024);
    assert.equal(lora, 6_815_744);
    const hand = (8_030_261_248 * 2 + lora * 16) / 8;
    const got = data.perGpu.persistentBytes as number;
    assert.ok(Math.abs(got - hand) / hand < 1e-3, `${got} vs ${hand}`);
  });

  it("no dtype: Transformers 5's default is auto, 4's fp32; unpinned, the fp32 default stands and says so", async () => {
    const pinned5 = await run(script(MODEL, ''), 'transformers==5.2.0\n');
    assert.equal(assumed(pinned5, 'masterDtype').value, 'bfloat16');
    const pinned4 = await run(script(MODEL, ''), 'transformers==4.57.1\n');
    assert.equal(assumed(pinned4, 'masterDtype').source.kind, 'default');
    const unpinned = await run(script(MODEL, ''));
    assert.equal(assumed(unpinned, 'masterDtype').source.kind, 'default');
    assert.ok(unpinned.notes.some((n: string) => /Transformers 5 loads its checkpoint's bfloat16/.test(n)));
  });
});

describe('a script that launches a job function of another file', () => {
  it('is estimated as that job, with its own command line and launch file', async () => {
    const dir = project();
    fs.mkdirSync(path.join(dir, 'launch'));
    fs.writeFileSync(
      path.join(dir, 'launch', 'finetune.py'),
      [
        'import fire',
        'from jobs.finetune import main',
        '',
        'if __name__ == "__main__":',
        '    fire.Fire(main)',
      ].join('\n'),
    );
    fs.writeFileSync(
      path.join(dir, 'launch', 'run.sh'),
      `torchrun --nproc_per_node 2 ./finetune.py --enable_fsdp --model_name ${MODEL} --pure_bf16\n`,
    );
    const r = await cli('estimate', path.join(dir, 'launch', 'finetune.py'), '--json');
    assert.equal(r.code, 0, r.err);
    const data = JSON.parse(r.out);
    assert.equal(
      data.notes[0],
      'the job is main() of ../jobs/finetune.py, which this script runs (fire.Fire(main) at line 5)',
    );
    assert.equal(data.model.params, PARAMS);
    // The launch command's world size and arguments: 2 GPUs, the cast its --pure_bf16 turns on.
    assert.equal(assumed(data, 'worldSize').value, '2');
    assert.equal(assumed(data, 'worldSize').source.kind, 'launch');
    assert.equal(assumed(data, 'masterDtype').value, 'bfloat16');
  });
});
