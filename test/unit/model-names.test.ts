// Wraps that name modules the model estimated does not have: no figure, unless a test or a rebinding explains it.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { cli, projectDir } from './helpers';

function script(lines: string[]): string {
  const dir = projectDir('fsdp-lens-names-');
  const file = path.join(dir, 'train.py');
  fs.writeFileSync(file, lines.join('\n') + '\n');
  return file;
}

interface PlanJson {
  plan: { known?: boolean; units: number; notes: string[] };
  units: { modules: string[]; params: number; isRoot: boolean }[];
}

describe('wraps of modules the model does not have', () => {
  // A decoder with its own module names (`tok_embeddings`, `layers`, `norm`, `output`), as a framework's model
  // definitions write them, estimated with a Hugging Face model whose blocks sit at `model.layers`.
  const ownNames = [
    'from torch.distributed.fsdp import fully_shard',
    '',
    'def apply_fsdp(model):',
    '    fully_shard(model.tok_embeddings)',
    '    for block in model.layers.values():',
    '        fully_shard(block)',
    '    fully_shard([model.norm, model.output])',
    '    fully_shard(model)',
  ];

  it('give no figure, and say the code wraps a model of other module names', async () => {
    const file = script(ownNames);
    const r = await cli('estimate', file, '--model', 'meta-llama/Llama-3.1-8B');
    assert.equal(r.code, 3, r.err);
    assert.equal(r.out, '');
    assert.match(r.err, /wraps `model\.tok_embeddings`, which LlamaForCausalLM does not have/);
    assert.match(r.err, /give the model the code builds/);
    const j = await cli('estimate', file, '--model', 'meta-llama/Llama-3.1-8B', '--json');
    assert.equal(j.code, 3);
    assert.equal((JSON.parse(j.out) as { plan: { known: boolean } }).plan.known, false);
  });

  it('are no fault where a test that the module exists keeps the wrap off', async () => {
    // `hasattr` is false on a model without the attribute, so the wrap does not run; the blocks are the model's.
    const file = script([
      'from torch.distributed.fsdp import fully_shard',
      '',
      'def apply_fsdp(model):',
      '    if hasattr(model, "tok_embeddings"):',
      '        fully_shard(model.tok_embeddings)',
      '    for block in model.model.layers:',
      '        fully_shard(block)',
      '    fully_shard(model)',
    ]);
    const r = await cli('estimate', file, '--model', 'meta-llama/Llama-3.1-8B', '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as PlanJson;
    // Llama 3.1 8B has 32 decoder blocks (num_hidden_layers = 32): 32 block units and the root.
    assert.equal(j.plan.units, 33);
  });

  it('give way to the arm of a test whose wraps name the modules the model has', async () => {
    // Two arms for two architectures, the one for other module names first: on a Llama the `else` arm runs, by a
    // test of an attribute or of the config's model type alike.
    for (const test of ['hasattr(model, "transformer")', 'model.config.model_type == "gpt2"']) {
      const file = script([
        'from torch.distributed.fsdp import fully_shard',
        '',
        'def apply_fsdp(model):',
        `    if ${test}:`,
        '        for block in model.transformer.h:',
        '            fully_shard(block)',
        '    else:',
        '        for layer in model.model.layers:',
        '            fully_shard(layer)',
        '    fully_shard(model)',
      ]);
      const r = await cli('estimate', file, '--model', 'meta-llama/Llama-3.1-8B', '--json');
      assert.equal(r.code, 0, r.err);
      const j = JSON.parse(r.out) as PlanJson;
      // Llama 3.1 8B: 32 decoder layers, and the root.
      assert.equal(j.plan.units, 33);
      assert.match(
        j.plan.notes.join('\n'),
        /the arm whose modules the model has \(train\.py:9\) is estimated/,
      );
    }
  });

  it('give no figure when every wrap, under whatever tests, names modules the model lacks', async () => {
    // The framework's decoder helper: its arms and its per-block test all name its own modules; one element
    // missing from a list wrap (`model.norm`, `model.output` beside an existing one) raises for the whole list.
    const file = script([
      'from torch.distributed.fsdp import fully_shard',
      '',
      'def apply_fsdp(model):',
      '    if model.enable_weight_tying:',
      '        fully_shard([model.tok_embeddings, model.norm, model.lm_head])',
      '    else:',
      '        fully_shard(model.tok_embeddings)',
      '    for block in model.layers.values():',
      '        if getattr(block, "moe_enabled", False):',
      '            fully_shard(block, reshard_after_forward=False)',
      '        else:',
      '            fully_shard(block)',
      '    fully_shard(model)',
    ]);
    const r = await cli('estimate', file, '--model', 'meta-llama/Llama-3.1-8B');
    assert.equal(r.code, 3, r.err);
    assert.match(r.err, /which LlamaForCausalLM does not have/);
  });

  it('are left to their test when a test or a `try` keeps them off on this model', async () => {
    // An arm for another architecture, and a wrap whose AttributeError is caught: neither runs on a Llama, and the
    // blocks are still the plan (Llama 3.1 8B: 32 blocks and the root).
    const file = script([
      'from torch.distributed.fsdp import fully_shard',
      'from transformers import GPT2LMHeadModel',
      '',
      'def apply_fsdp(model):',
      '    if isinstance(model, GPT2LMHeadModel):',
      '        for block in model.transformer.h:',
      '            fully_shard(block)',
      '    try:',
      '        fully_shard(model.model.vision_tower)',
      '    except AttributeError:',
      '        pass',
      '    for block in model.model.layers:',
      '        fully_shard(block)',
      '    fully_shard(model)',
    ]);
    const r = await cli('estimate', file, '--model', 'meta-llama/Llama-3.1-8B', '--json');
    assert.equal(r.code, 0, r.err);
    assert.equal((JSON.parse(r.out) as PlanJson).plan.units, 33);
  });

  it('read a path as it runs when a rebinding under its own test cannot have run on this model', async () => {
    // The unwrap of a wrapper (`model.module`): Llama 3.2 1B has no `module`, so `hasattr` is false and the
    // loop runs over the model's own 16 blocks (num_hidden_layers = 16), then the root.
    const file = script([
      'from torch.distributed.fsdp import fully_shard',
      'from transformers import AutoModelForCausalLM',
      '',
      'def shard(model):',
      '    if hasattr(model, "module"):',
      '        model = model.module',
      '    for layer in model.model.layers:',
      '        fully_shard(layer)',
      '    fully_shard(model)',
      '',
      'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
      'shard(model)',
    ]);
    const r = await cli('estimate', file, '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as PlanJson;
    assert.equal(j.plan.units, 17);
    assert.ok(
      j.plan.notes.some((n) =>
        /the rebinding at line 6, under `hasattr\(model, "module"\)`, cannot have run/.test(n),
      ),
      j.plan.notes.join('\n'),
    );
  });

  it('read the right side of `model = model.decoder` with the binding before it', async () => {
    // Python evaluates the right side first: `model.decoder` of the parameter, once, not of itself again.
    const file = script([
      'from torch.distributed.fsdp import fully_shard',
      'from transformers import AutoModelForCausalLM',
      '',
      'def shard(model):',
      '    if isinstance(model, FusionModel):',
      '        model = model.decoder',
      '    fully_shard(model.lm_head)',
      '    fully_shard(model)',
      '',
      'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
      'shard(model)',
    ]);
    const r = await cli('scan', file);
    assert.doesNotMatch(r.out, /decoder\.decoder/);
    const e = await cli('estimate', file, '--json');
    assert.equal(e.code, 0, e.err);
    const j = JSON.parse(e.out) as PlanJson;
    const head = j.units.find((u) => !u.isRoot)!;
    assert.deepEqual(head.modules, ['lm_head']);
    // The head's weight, vocab 128,256 x hidden 2,048 (tied to the embedding; the head's unit, wrapped first,
    // manages it).
    assert.equal(head.params, 128_256 * 2_048);
  });
});
