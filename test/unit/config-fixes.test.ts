import assert from 'node:assert/strict';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { setConfigValue } from '../../src/core/lint/configEdits';
import { applyEdits } from '../../src/core/lint/edits';
import * as fs from 'node:fs';
import { analyzeConfigText, analyzeDocument } from '../../src/core/entry/analyze';
import { Project } from '../../src/core/project/project';
import { DEFAULT_LINT_OPTIONS } from '../../src/core/lint/types';
import { fmtBytes } from '../../src/core/vocabulary/bytes';
import { requiredBytes } from '../../src/core/estimator/fit';
import { diskFS } from '../../src/host/disk';
import { FIXTURES, grammar, tempDir } from './helpers';

const set = (text: string, format: 'yaml' | 'json' | 'toml', p: string[], value: boolean | string) => {
  const e = setConfigValue(text, format, { path: p, value });
  return e ? applyEdits(text, [e]) : null;
};

describe('setting a configuration key', () => {
  it('YAML: the value replaced where the key is written, comments and layout kept', () => {
    const text = 'fsdp_config:\n  fsdp_activation_checkpointing: false  # off for now\n  fsdp_version: 2\n';
    assert.equal(
      set(text, 'yaml', ['fsdp_config', 'fsdp_activation_checkpointing'], true),
      'fsdp_config:\n  fsdp_activation_checkpointing: true  # off for now\n  fsdp_version: 2\n',
    );
  });

  it('YAML: a missing key goes first in its section, indented as the section is', () => {
    const text = 'distributed_type: FSDP\nfsdp_config:\n    fsdp_version: 2\nnum_processes: 8\n';
    assert.equal(
      set(text, 'yaml', ['fsdp_config', 'fsdp_activation_checkpointing'], true),
      'distributed_type: FSDP\nfsdp_config:\n    fsdp_activation_checkpointing: true\n    fsdp_version: 2\nnum_processes: 8\n',
    );
  });

  it('YAML: a missing section is added at the end; a top-level key too; `key:` with no value gets one', () => {
    assert.equal(
      set('base_model: x\nsequence_len: 4096', 'yaml', ['fsdp_config', 'activation_checkpointing'], true),
      'base_model: x\nsequence_len: 4096\nfsdp_config:\n  activation_checkpointing: true\n',
    );
    assert.equal(
      set('base_model: x\n', 'yaml', ['gradient_checkpointing'], true),
      'base_model: x\ngradient_checkpointing: true\n',
    );
    assert.equal(
      set('gradient_checkpointing:\nbase_model: x\n', 'yaml', ['gradient_checkpointing'], true),
      'gradient_checkpointing: true\nbase_model: x\n',
    );
  });

  it("YAML: booleans written in the file's own style (torchtune writes True)", () => {
    assert.equal(
      set(
        'compile: False\nenable_activation_checkpointing: False\n',
        'yaml',
        ['enable_activation_checkpointing'],
        true,
      ),
      'compile: False\nenable_activation_checkpointing: True\n',
    );
  });

  it('YAML: no edit where the place is not safe (a flow mapping, several documents, a parse error)', () => {
    assert.equal(set('fsdp_config: {fsdp_version: 2}\n', 'yaml', ['fsdp_config', 'x'], true), null);
    assert.equal(set('a: 1\n---\nb: 2\n', 'yaml', ['x'], true), null);
    assert.equal(set('a: [1, 2\n', 'yaml', ['x'], true), null);
  });

  it('JSON: replaced, or added to its object', () => {
    assert.equal(
      set(
        '{\n  "gradient_checkpointing": false,\n  "bf16": true\n}\n',
        'json',
        ['gradient_checkpointing'],
        true,
      ),
      '{\n  "gradient_checkpointing": true,\n  "bf16": true\n}\n',
    );
    const added = set('{\n  "bf16": true\n}\n', 'json', ['gradient_checkpointing'], true)!;
    assert.deepEqual(JSON.parse(added), { bf16: true, gradient_checkpointing: true });
  });

  it('TOML: replaced in its table, added under the header, or a new table at the end', () => {
    const text = '[training]\nseq_len = 8192\n\n[activation_checkpoint]\nmode = "selective"  # per op\n';
    assert.equal(
      set(text, 'toml', ['activation_checkpoint', 'mode'], 'full'),
      '[training]\nseq_len = 8192\n\n[activation_checkpoint]\nmode = "full"  # per op\n',
    );
    assert.equal(
      set(
        '[activation_checkpoint]\nselective_ac_option = "op"\n',
        'toml',
        ['activation_checkpoint', 'mode'],
        'full',
      ),
      '[activation_checkpoint]\nmode = "full"\nselective_ac_option = "op"\n',
    );
    assert.equal(
      set('[training]\nseq_len = 8192\n', 'toml', ['activation_checkpoint', 'mode'], 'full'),
      '[training]\nseq_len = 8192\n\n[activation_checkpoint]\nmode = "full"\n',
    );
    // A key of the same name in another table is not this one.
    assert.equal(
      set('[compile]\nmode = "max"\n', 'toml', ['activation_checkpoint', 'mode'], 'full'),
      '[compile]\nmode = "max"\n\n[activation_checkpoint]\nmode = "full"\n',
    );
  });
});

/**
 * FSDP015's fix on a framework configuration: the key written where the framework reads it, and the file analysed
 * again checkpoints every block and fits, as the fix's title said.
 */
async function fixAndReanalyse(name: string, text: string, expectLine: RegExp) {
  const dir = tempDir('config-fix-');
  const file = path.join(dir, name);
  const project = new Project([dir], await grammar(), diskFS);
  const analyse = (t: string) =>
    analyzeConfigText(file, t, { lint: DEFAULT_LINT_OPTIONS, estimate: { project } });
  const before = analyse(text);
  assert.ok(before.estimate?.ok, JSON.stringify(before.estimate));
  assert.notEqual(before.estimate.estimate.setup.checkpointing, 'full');
  const finding = before.findings.find((f) => f.rule === 'FSDP015');
  assert.ok(finding, `no FSDP015 on ${name}`);
  const fix = finding.fixes.find((f) => f.title.startsWith('Enable activation checkpointing'));
  assert.ok(fix, finding.fixes.map((f) => f.title).join('; '));
  assert.ok(fix.preferred);
  const after = applyEdits(text, fix.edits);
  assert.match(after, expectLine);
  const again = analyse(after);
  assert.ok(again.estimate?.ok);
  const e = again.estimate.estimate;
  assert.equal(e.setup.checkpointing, 'full');
  assert.equal(e.targetFit?.verdict, 'fits');
  assert.ok(!again.findings.some((f) => f.rule === 'FSDP015'));
  // The title's figure is the one the file now gives.
  assert.ok(fix.title.includes(`fits, needs ${fmtBytes(requiredBytes(e.perGpu.peakBytes))}`), fix.title);
  return { fix, after };
}

describe('FSDP015 turns on activation checkpointing in the framework configuration', () => {
  // Llama 3.1 8B on 8 x A100 40 GB at 2 x 4096 tokens: without checkpointing each GPU keeps every block's
  // activations (tens of GB); with it, only each block's input (2 x 4096 x 4096 x 2 B = 64 MiB per block) and
  // one block's activations during its recompute, well under 40 GB beside the 16 GB of sharded state.
  const annotation = '# fsdp: model=meta-llama/Llama-3.1-8B gpu=a100-40gb seq_len=4096 micro_batch=2\n';

  it("Accelerate: fsdp_config's fsdp_activation_checkpointing set to true", async () => {
    const text =
      annotation +
      [
        'distributed_type: FSDP',
        'fsdp_config:',
        '  fsdp_activation_checkpointing: false',
        '  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP',
        '  fsdp_version: 2',
        'mixed_precision: bf16',
        'num_processes: 8',
        '',
      ].join('\n');
    const { fix } = await fixAndReanalyse(
      'accelerate.yaml',
      text,
      /^ {2}fsdp_activation_checkpointing: true$/m,
    );
    assert.match(fix.title, /^Enable activation checkpointing: fsdp_activation_checkpointing: true \(fits/);
  });

  it('Accelerate: the key added when the config leaves it out', async () => {
    const text =
      annotation +
      'distributed_type: FSDP\nfsdp_config:\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n  fsdp_version: 2\nmixed_precision: bf16\nnum_processes: 8\n';
    const { after } = await fixAndReanalyse(
      'accelerate.yaml',
      text,
      /fsdp_config:\n {2}fsdp_activation_checkpointing: true\n/,
    );
    assert.ok(after.endsWith('num_processes: 8\n'));
  });

  it("torchtune: enable_activation_checkpointing: True, in torchtune's style", async () => {
    const text = [
      '# fsdp: gpu=a100-40gb world_size=8',
      'model:',
      '  _component_: torchtune.models.llama3_1.llama3_1_8b',
      'tokenizer:',
      '  _component_: torchtune.models.llama3.llama3_tokenizer',
      '  max_seq_len: 4096',
      'batch_size: 4',
      'optimizer:',
      '  _component_: torch.optim.AdamW',
      '  fused: True',
      'enable_activation_checkpointing: False',
      'dtype: bf16',
      '',
    ].join('\n');
    await fixAndReanalyse('8B_full.yaml', text, /^enable_activation_checkpointing: True$/m);
  });

  it('llm-foundry: fsdp_config.activation_checkpointing added', async () => {
    const text = [
      '# fsdp: gpu=a100-40gb world_size=8',
      'max_seq_len: 4096',
      'model:',
      '  name: hf_causal_lm',
      '  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B',
      'device_train_microbatch_size: 2',
      'precision: amp_bf16',
      'fsdp_config:',
      '  sharding_strategy: FULL_SHARD',
      '  mixed_precision: PURE',
      '',
    ].join('\n');
    await fixAndReanalyse('llama.yaml', text, /fsdp_config:\n {2}activation_checkpointing: true\n/);
  });

  it('axolotl: gradient_checkpointing, or the FSDP section’s own key where the config writes it', async () => {
    const base = [
      '# fsdp: gpu=a100-40gb world_size=8',
      'base_model: meta-llama/Llama-3.1-8B',
      'sequence_len: 4096',
      'micro_batch_size: 2',
      'bf16: true',
      'datasets:',
      '  - path: data.jsonl',
      'fsdp_version: 2',
      'fsdp_config:',
      '  auto_wrap_policy: TRANSFORMER_BASED_WRAP',
      '  transformer_layer_cls_to_wrap: LlamaDecoderLayer',
    ];
    await fixAndReanalyse('sft.yaml', [...base, ''].join('\n'), /^gradient_checkpointing: true$/m);
    await fixAndReanalyse(
      'sft.yaml',
      [...base, '  activation_checkpointing: false', ''].join('\n'),
      /^ {2}activation_checkpointing: true$/m,
    );
  });

  it('torchtitan TOML: [activation_checkpoint] mode = "full"', async () => {
    const text = [
      '# fsdp: gpu=a100-40gb world_size=8',
      '[model]',
      'name = "llama3"',
      'flavor = "8B"',
      '[training]',
      'local_batch_size = 2',
      'seq_len = 4096',
      '[parallelism]',
      'data_parallel_shard_degree = -1',
      '[activation_checkpoint]',
      'mode = "none"',
      '',
    ].join('\n');
    const { fix } = await fixAndReanalyse('llama3_8b.toml', text, /^mode = "full"$/m);
    assert.match(fix.title, /\[activation_checkpoint\] mode = "full"/);
  });

  it('no config fix where something above the file decides checkpointing (an annotation)', async () => {
    const dir = tempDir('config-fix-');
    const file = path.join(dir, 'accelerate.yaml');
    const project = new Project([dir], await grammar(), diskFS);
    const text =
      annotation.replace('\n', ' checkpointing=none\n') +
      'distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\nmixed_precision: bf16\nnum_processes: 8\n';
    const a = analyzeConfigText(file, text, { lint: DEFAULT_LINT_OPTIONS, estimate: { project } });
    const f = a.findings.find((x) => x.rule === 'FSDP015');
    assert.ok(f);
    assert.ok(!f.fixes.some((x) => x.title.startsWith('Enable activation checkpointing')));
  });
});

describe("FSDP015 turns on activation checkpointing in a model of the project's own classes", () => {
  // nanoGPT-style blocks of hidden 2048 at 2 x 8192 tokens: without checkpointing every block keeps its attention
  // and MLP activations (GB per block); with `apply_activation_checkpointing` only each block's input is kept.
  const train = [
    '# fsdp: world_size=8 gpu=a100-40gb seq_len=8192 micro_batch=2',
    'import torch',
    'from torch.distributed.fsdp import fully_shard',
    '',
    'from model import GPT, Block, GPTConfig',
    '',
    'config = GPTConfig(n_layer=48, n_head=16, n_embd=2048, block_size=8192)',
    'model = GPT(config)',
    'for block in model.transformer.h:',
    '    fully_shard(block)',
    'fully_shard(model)',
    '',
  ].join('\n');

  async function analyse(text: string) {
    const dir = tempDir('code-fix-');
    fs.copyFileSync(path.join(FIXTURES, 'projects', 'gpt', 'model.py'), path.join(dir, 'model.py'));
    const file = path.join(dir, 'train.py');
    fs.writeFileSync(file, text);
    const g = await grammar();
    const project = new Project([dir], g, diskFS);
    return analyzeDocument(g, { file, text }, { lint: DEFAULT_LINT_OPTIONS, estimate: { project } });
  }

  it('apply_activation_checkpointing on the block class, before fully_shard, with its import', async () => {
    const before = await analyse(train);
    assert.ok(before.estimate?.ok, JSON.stringify(before.estimate));
    const f = before.findings.find((x) => x.rule === 'FSDP015');
    assert.ok(f);
    const fix = f.fixes.find((x) => x.title.startsWith('Enable activation checkpointing'));
    assert.ok(fix, f.fixes.map((x) => x.title).join('; '));
    const after = applyEdits(train, fix.edits);
    assert.match(
      after,
      /from model import GPT, Block, GPTConfig\nfrom torch\.distributed\.algorithms\._checkpoint\.checkpoint_wrapper import apply_activation_checkpointing\n/,
    );
    assert.match(
      after,
      /\nmodel = GPT\(config\)\napply_activation_checkpointing\(model, check_fn=lambda m: isinstance\(m, Block\)\)\nfor block in/,
    );
    const again = await analyse(after);
    assert.ok(again.estimate?.ok);
    assert.equal(again.estimate.estimate.setup.checkpointing, 'full');
    assert.equal(again.estimate.estimate.targetFit?.verdict, 'fits');
    assert.ok(!again.findings.some((x) => x.rule === 'FSDP015'));
  });

  it('no code fix where the block class is no name of the file, or an annotation decides checkpointing', async () => {
    for (const text of [
      train.replace('from model import GPT, Block, GPTConfig', 'from model import GPT, GPTConfig'),
      train.replace('micro_batch=2', 'micro_batch=2 ac=none'),
    ]) {
      const a = await analyse(text);
      const f = a.findings.find((x) => x.rule === 'FSDP015');
      assert.ok(f);
      assert.ok(!f.fixes.some((x) => x.title.startsWith('Enable activation checkpointing')));
    }
  });
});

describe('FSDP015 sets the micro-batch or the world size where the configuration writes it', () => {
  async function findingOf(name: string, text: string) {
    const dir = tempDir('config-fix-');
    const file = path.join(dir, name);
    const project = new Project([dir], await grammar(), diskFS);
    const analyse = (t: string) =>
      analyzeConfigText(file, t, { lint: DEFAULT_LINT_OPTIONS, estimate: { project } });
    const a = analyse(text);
    const f = a.findings.find((x) => x.rule === 'FSDP015');
    assert.ok(f, `no FSDP015 on ${name}`);
    return { f, analyse };
  }

  it('torchtune: the batch_size key halved until the plan fits, and the file analysed again fits', async () => {
    // Llama 3.1 8B without checkpointing at 4,096 tokens on 8 x H100: 8 and 4 sequences per GPU keep too many
    // activations, 2 fit (the largest halving that does).
    const text = [
      '# fsdp: gpu=h100-sxm-80gb world_size=8',
      'model:',
      '  _component_: torchtune.models.llama3_1.llama3_1_8b',
      'tokenizer:',
      '  _component_: torchtune.models.llama3.llama3_tokenizer',
      '  max_seq_len: 4096',
      'batch_size: 8  # per GPU',
      'enable_activation_checkpointing: False',
      'dtype: bf16',
      '',
    ].join('\n');
    const { f, analyse } = await findingOf('8B_full.yaml', text);
    const fix = f.fixes.find((x) => x.title.startsWith('Micro-batch'));
    assert.ok(fix, f.fixes.map((x) => x.title).join('; '));
    const m = Number(/^Micro-batch (\d+): batch_size: \1 \(fits/.exec(fix.title)?.[1]);
    assert.equal(m, 2, fix.title);
    const after = applyEdits(text, fix.edits);
    assert.match(after, new RegExp(`^batch_size: ${m} {2}# per GPU$`, 'm'));
    const again = analyse(after);
    assert.ok(again.estimate?.ok);
    assert.equal(again.estimate.estimate.setup.microBatch, m);
    assert.equal(again.estimate.estimate.targetFit?.verdict, 'fits');
  });

  it('torchtune: a halved max_seq_len where even one sequence does not fit', async () => {
    // Llama 3.1 8B without checkpointing, 1 x 16,384 tokens on 8 x H100: the activations alone overflow.
    const text = [
      '# fsdp: gpu=h100-sxm-80gb world_size=8',
      'model:',
      '  _component_: torchtune.models.llama3_1.llama3_1_8b',
      'tokenizer:',
      '  _component_: torchtune.models.llama3.llama3_tokenizer',
      '  max_seq_len: 16384',
      'batch_size: 1',
      'enable_activation_checkpointing: False',
      'dtype: bf16',
      '',
    ].join('\n');
    const { f, analyse } = await findingOf('8B_full.yaml', text);
    const fix = f.fixes.find((x) => x.title.startsWith('Sequence'));
    assert.ok(fix, f.fixes.map((x) => x.title).join('; '));
    const s = Number(/^Sequence (\d+): max_seq_len: \1 \(fits/.exec(fix.title)?.[1]);
    assert.ok(s >= 128 && s < 16384 && (16384 / s) % 2 === 0, fix.title);
    const again = analyse(applyEdits(text, fix.edits));
    assert.ok(again.estimate?.ok);
    assert.equal(again.estimate.estimate.setup.seqLen, s);
    assert.equal(again.estimate.estimate.targetFit?.verdict, 'fits');
  });

  it('Accelerate: num_processes set to the fewest GPUs that fit', async () => {
    // Llama 3.1 70B in fp32 with AdamW on 2 GPUs: 16 B x 70.6B / 2 = 565 GB each; more GPUs shrink it.
    const text =
      '# fsdp: model=meta-llama/Llama-3.1-70B seq_len=2048\n' +
      'distributed_type: FSDP\nfsdp_config:\n  fsdp_activation_checkpointing: true\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n  fsdp_version: 2\nmixed_precision: bf16\nnum_processes: 2\n';
    const { f, analyse } = await findingOf('accelerate.yaml', text);
    const fix = f.fixes.find((x) => /the fewest that fit: num_processes/.test(x.title));
    assert.ok(fix, f.fixes.map((x) => x.title).join('; '));
    const n = Number(/^(\d+) GPUs/.exec(fix.title)?.[1]);
    const again = analyse(applyEdits(text, fix.edits));
    assert.ok(again.estimate?.ok);
    assert.equal(again.estimate.estimate.mesh.worldSize, n);
    assert.equal(again.estimate.estimate.targetFit?.verdict, 'fits');
  });
});

describe('FSDP015 reshards units kept gathered after forward', () => {
  it('reshard_after_forward=False written True where that makes the plan fit', async () => {
    // Llama 3.1 8B over 5 x A100 40 GB at 1 x 2,048 with every layer checkpointed: 32 layers kept gathered
    // (bf16, 436 MB each) overflow the card; resharded after forward, only the running one and the next are.
    const text = [
      '# fsdp: world_size=5 gpu=a100-40gb seq_len=2048 micro_batch=1',
      'import torch',
      'from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy',
      'from transformers import AutoModelForCausalLM',
      'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")',
      'model.gradient_checkpointing_enable()',
      'mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)',
      'for layer in model.model.layers:',
      '    fully_shard(layer, mp_policy=mp, reshard_after_forward=False)',
      'fully_shard(model, mp_policy=mp)',
      '',
    ].join('\n');
    const dir = tempDir('reshard-fix-');
    const file = path.join(dir, 'train.py');
    const g = await grammar();
    const project = new Project([dir], g, diskFS);
    const analyse = (t: string) =>
      analyzeDocument(g, { file, text: t }, { lint: DEFAULT_LINT_OPTIONS, estimate: { project } });
    const f = analyse(text).findings.find((x) => x.rule === 'FSDP015');
    assert.ok(f);
    const fix = f.fixes.find((x) => x.title.startsWith('Reshard after forward'));
    assert.ok(fix, f.fixes.map((x) => x.title).join('; '));
    assert.match(fix.title, /^Reshard after forward: reshard_after_forward=True \(fits/);
    const after = applyEdits(text, fix.edits);
    assert.match(after, /fully_shard\(layer, mp_policy=mp, reshard_after_forward=True\)/);
    const again = analyse(after);
    assert.ok(again.estimate?.ok);
    assert.equal(again.estimate.estimate.targetFit?.verdict, 'fits');
    // An annotation fix rewrites the alias the file writes (seq_len=), not a second one beside it.
    const seq = f.fixes.find((x) => x.title.startsWith('Sequence'));
    assert.ok(seq);
    assert.match(seq.title, /# fsdp: seq_len=1024/);
    assert.match(
      applyEdits(text, seq.edits),
      /^# fsdp: world_size=5 gpu=a100-40gb seq_len=1024 micro_batch=1$/m,
    );
  });
});
