/** Fixes that change the wraps themselves: CPU offload, the sharding strategy, FSDP1 checkpointing of own blocks. */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { analyzeDocument } from '../../src/core/entry/analyze';
import { applyEdits } from '../../src/core/lint/edits';
import { strategyEdit } from '../../src/core/lint/planEdits';
import { DEFAULT_LINT_OPTIONS } from '../../src/core/lint/types';
import { Project } from '../../src/core/project/project';
import { diskFS } from '../../src/host/disk';
import { FIXTURES, grammar, tempDir } from './helpers';

/** Analyses `text` as `train.py` of a project that also holds the GPT fixture's `model.py`. */
async function analyser() {
  const dir = tempDir('plan-fix-');
  fs.copyFileSync(path.join(FIXTURES, 'projects', 'gpt', 'model.py'), path.join(dir, 'model.py'));
  const file = path.join(dir, 'train.py');
  const g = await grammar();
  const project = new Project([dir], g, diskFS);
  return (text: string) => {
    fs.writeFileSync(file, text);
    return analyzeDocument(g, { file, text }, { lint: DEFAULT_LINT_OPTIONS, estimate: { project } });
  };
}

// Llama 3.1 8B, fully fine-tuned with AdamW on 2 x A100 80 GB: fp32 parameters (4 B), their gradients (4 B) and
// Adam's two moments (8 B) are 16 B per parameter, 8,030,261,248 x 16 / 2 = 64.2 GB per GPU before any activation:
// with the allocator's reserve and the CUDA context it does not fit. Offloaded, those bytes move to host memory.
const LLAMA_8B_PARAMS = 8_030_261_248;
const fsdp2 = [
  '# fsdp: world_size=2 gpu=a100-80gb seq_len=2048 micro_batch=1 checkpointing=full',
  'import torch',
  'from torch.distributed.fsdp import fully_shard',
  'from transformers import AutoModelForCausalLM',
  '',
  'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", torch_dtype=torch.float32)',
  'for layer in model.model.layers:',
  '    fully_shard(layer)',
  'fully_shard(model)',
  'optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)',
  '',
].join('\n');

describe('FSDP015 offloads the sharded state to the CPU when that makes the plan fit', () => {
  it('FSDP2: offload_policy=CPUOffloadPolicy() on every fully_shard, with the import', async () => {
    const analyse = await analyser();
    const before = analyse(fsdp2);
    assert.ok(before.estimate?.ok, JSON.stringify(before.estimate));
    assert.equal(before.estimate.estimate.targetFit?.verdict, 'short');
    const f = before.findings.find((x) => x.rule === 'FSDP015');
    assert.ok(f);
    const fix = f.fixes.find((x) => x.title.startsWith('Offload to CPU'));
    assert.ok(fix, f.fixes.map((x) => x.title).join('; '));
    assert.match(fix.title, /offload_policy=CPUOffloadPolicy\(\) \(fits, needs .* per GPU; slower steps/);
    const after = applyEdits(fsdp2, fix.edits);
    assert.match(after, /^from torch\.distributed\.fsdp import CPUOffloadPolicy$/m);
    assert.match(after, /^ {4}fully_shard\(layer, offload_policy=CPUOffloadPolicy\(\)\)$/m);
    assert.match(after, /^fully_shard\(model, offload_policy=CPUOffloadPolicy\(\)\)$/m);
    const again = analyse(after);
    assert.ok(again.estimate?.ok);
    const e = again.estimate.estimate;
    assert.equal(e.targetFit?.verdict, 'fits');
    assert.ok(e.units.every((u) => u.offload));
    // Host memory holds each rank's half of the fp32 parameters: every dimension of the model is even, so FSDP2's
    // dim-0 padding adds nothing.
    const host = (name: string) => e.perGpu.host.terms.find((t) => t.name === name)?.bytes;
    assert.equal(host('offloaded sharded parameters'), (LLAMA_8B_PARAMS / 2) * 4);
    assert.equal(host('offloaded gradients'), (LLAMA_8B_PARAMS / 2) * 4);
    assert.equal(host('offloaded optimizer state'), (LLAMA_8B_PARAMS / 2) * 8);
    assert.ok(!again.findings.some((x) => x.rule === 'FSDP015'));
  });

  it('FSDP1: cpu_offload=CPUOffload(offload_params=True) on the wrap its policy units inherit', async () => {
    const analyse = await analyser();
    const text = [
      '# fsdp: world_size=2 gpu=a100-80gb seq_len=2048 micro_batch=1 checkpointing=full',
      'import functools',
      'import torch',
      'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP',
      'from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy',
      'from transformers import AutoModelForCausalLM',
      'from transformers.models.llama.modeling_llama import LlamaDecoderLayer',
      '',
      'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", torch_dtype=torch.float32)',
      'policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={LlamaDecoderLayer})',
      'model = FSDP(model, auto_wrap_policy=policy, use_orig_params=True)',
      'optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)',
      '',
    ].join('\n');
    const f = analyse(text).findings.find((x) => x.rule === 'FSDP015');
    assert.ok(f);
    const fix = f.fixes.find((x) => x.title.startsWith('Offload to CPU'));
    assert.ok(fix, f.fixes.map((x) => x.title).join('; '));
    const after = applyEdits(text, fix.edits);
    assert.match(after, /^from torch\.distributed\.fsdp import CPUOffload$/m);
    assert.match(
      after,
      /^model = FSDP\(model, auto_wrap_policy=policy, use_orig_params=True, cpu_offload=CPUOffload\(offload_params=True\)\)$/m,
    );
    const again = analyse(after);
    assert.ok(again.estimate?.ok);
    assert.ok(again.estimate.estimate.units.every((u) => u.offload));
    assert.equal(again.estimate.estimate.targetFit?.verdict, 'fits');
  });

  it('no offload fix where a wrap passes keywords it cannot read, or already says offload', async () => {
    const analyse = await analyser();
    for (const text of [
      fsdp2.replace('fully_shard(model)', 'fully_shard(model, **kwargs)'),
      fsdp2.replace('fully_shard(model)', 'fully_shard(model, offload_policy=OffloadPolicy())'),
    ]) {
      const f = analyse(text).findings.find((x) => x.rule === 'FSDP015');
      assert.ok(f);
      assert.ok(!f.fixes.some((x) => x.title.startsWith('Offload to CPU')), text);
    }
  });
});

describe("FSDP015 checkpoints an FSDP1 model of the project's own classes", () => {
  // nanoGPT-style blocks of hidden 2048 at 2 x 8192 tokens, as the FSDP2 case of config-fixes.test.ts: every
  // block keeps its attention and MLP activations without checkpointing.
  const train = [
    '# fsdp: world_size=8 gpu=a100-40gb seq_len=8192 micro_batch=2',
    'import functools',
    'import torch',
    'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP',
    'from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy',
    '',
    'from model import GPT, Block, GPTConfig',
    '',
    'config = GPTConfig(n_layer=48, n_head=16, n_embd=2048, block_size=8192)',
    'model = GPT(config)',
    'policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})',
    'model = FSDP(model, auto_wrap_policy=policy)',
    'optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)',
    '',
  ].join('\n');

  it('apply_activation_checkpointing after the root wrap, as the FSDP tutorials do', async () => {
    const analyse = await analyser();
    const before = analyse(train);
    assert.ok(before.estimate?.ok, JSON.stringify(before.estimate));
    const f = before.findings.find((x) => x.rule === 'FSDP015');
    assert.ok(f);
    const fix = f.fixes.find((x) => x.title.startsWith('Enable activation checkpointing'));
    assert.ok(fix, f.fixes.map((x) => x.title).join('; '));
    const after = applyEdits(train, fix.edits);
    assert.match(
      after,
      /\nmodel = FSDP\(model, auto_wrap_policy=policy\)\napply_activation_checkpointing\(model, check_fn=lambda m: isinstance\(m, Block\)\)\noptimizer =/,
    );
    assert.match(
      after,
      /^from torch\.distributed\.algorithms\._checkpoint\.checkpoint_wrapper import apply_activation_checkpointing$/m,
    );
    const again = analyse(after);
    assert.ok(again.estimate?.ok);
    assert.equal(again.estimate.estimate.setup.checkpointing, 'full');
    assert.equal(again.estimate.estimate.targetFit?.verdict, 'fits');
  });
});

describe('FSDP015 writes checkpointing with the wrapper the file already names', () => {
  it("the file's non-reentrant partial of checkpoint_wrapper, as checkpoint_wrapper_fn", async () => {
    const analyse = await analyser();
    const text = [
      '# fsdp: world_size=8 gpu=a100-40gb seq_len=8192 micro_batch=2',
      'import functools',
      'from functools import partial',
      'import torch',
      'from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (',
      '    CheckpointImpl,',
      '    checkpoint_wrapper,',
      ')',
      'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP',
      'from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy',
      '',
      'from model import GPT, Block, GPTConfig',
      '',
      'no_reentrant = partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)',
      '',
      'config = GPTConfig(n_layer=48, n_head=16, n_embd=2048, block_size=8192)',
      'model = GPT(config)',
      'policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})',
      'model = FSDP(model, auto_wrap_policy=policy)',
      '',
    ].join('\n');
    const f = analyse(text).findings.find((x) => x.rule === 'FSDP015');
    assert.ok(f);
    const fix = f.fixes.find((x) => x.title.startsWith('Enable activation checkpointing'));
    assert.ok(fix, f.fixes.map((x) => x.title).join('; '));
    const after = applyEdits(text, fix.edits);
    assert.match(
      after,
      /\nmodel = FSDP\(model, auto_wrap_policy=policy\)\napply_activation_checkpointing\(model, checkpoint_wrapper_fn=no_reentrant, check_fn=lambda m: isinstance\(m, Block\)\)\n/,
    );
    const again = analyse(after);
    assert.ok(again.estimate?.ok);
    assert.equal(again.estimate.estimate.setup.checkpointing, 'full');
    assert.equal(again.estimate.estimate.targetFit?.verdict, 'fits');
    // A reentrant partial is not taken: the preview is of the default, non-reentrant wrapper.
    const reentrant = text.replace('CheckpointImpl.NO_REENTRANT', 'CheckpointImpl.REENTRANT');
    const g = analyse(reentrant).findings.find((x) => x.rule === 'FSDP015');
    const plain = g?.fixes.find((x) => x.title.startsWith('Enable activation checkpointing'));
    assert.ok(plain);
    assert.match(
      plain.title,
      /apply_activation_checkpointing\(model, checkpoint_wrapper_fn=checkpoint_wrapper, check_fn=/,
    );
  });
});

describe('The sharding strategy written into the wraps', () => {
  it('FSDP1: the inline strategy replaced; appended with its import where none is written', async () => {
    const analyse = await analyser();
    const written = [
      'import torch',
      'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy',
      'from model import GPT, Block, GPTConfig',
      'model = GPT(GPTConfig())',
      'model = FSDP(model, sharding_strategy=ShardingStrategy.SHARD_GRAD_OP)',
      '',
    ].join('\n');
    const a = analyse(written);
    const e = strategyEdit(a.facts.calls, written, 'fsdp1', 'HYBRID_SHARD');
    assert.ok(e);
    assert.match(
      applyEdits(written, e.edits),
      /^model = FSDP\(model, sharding_strategy=ShardingStrategy\.HYBRID_SHARD\)$/m,
    );
    const bare = written.replace(', sharding_strategy=ShardingStrategy.SHARD_GRAD_OP', '');
    const noImport = bare.replace(', ShardingStrategy', '');
    const b = strategyEdit(analyse(noImport).facts.calls, noImport, 'fsdp1', 'HYBRID_SHARD');
    assert.ok(b);
    const out = applyEdits(noImport, b.edits);
    assert.match(out, /^model = FSDP\(model, sharding_strategy=ShardingStrategy\.HYBRID_SHARD\)$/m);
    assert.match(out, /^from torch\.distributed\.fsdp import ShardingStrategy$/m);
    const again = analyse(out);
    assert.ok(again.estimate?.ok);
    assert.equal(again.estimate.estimate.plan.strategy, 'HYBRID_SHARD');
  });

  it('FSDP2: reshard_after_forward on every wrap but the root; no 2-D mesh written', async () => {
    const analyse = await analyser();
    const text = [
      'import torch',
      'from torch.distributed.fsdp import fully_shard',
      'from model import GPT, Block, GPTConfig',
      'model = GPT(GPTConfig())',
      'for block in model.transformer.h:',
      '    fully_shard(block)',
      'fully_shard(model)',
      '',
    ].join('\n');
    const a = analyse(text);
    const keep = strategyEdit(a.facts.calls, text, 'fsdp2', 'SHARD_GRAD_OP');
    assert.ok(keep);
    const out = applyEdits(text, keep.edits);
    assert.match(out, /^ {4}fully_shard\(block, reshard_after_forward=False\)$/m);
    assert.match(out, /^fully_shard\(model\)$/m);
    const again = analyse(out);
    assert.ok(again.estimate?.ok);
    assert.ok(
      again.estimate.estimate.units.filter((u) => !u.isRoot).every((u) => u.residency.kind === 'keep'),
    );
    // Back: the written False becomes True.
    const back = strategyEdit(again.facts.calls, out, 'fsdp2', 'FULL_SHARD');
    assert.ok(back);
    assert.match(applyEdits(out, back.edits), /^ {4}fully_shard\(block, reshard_after_forward=True\)$/m);
    assert.equal(strategyEdit(a.facts.calls, text, 'fsdp2', 'HYBRID_SHARD'), null);
  });
});
