import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { describeCall } from '../../src/core/analysis/describe';
import { applyEdits } from '../../src/core/lint/edits';
import { lintFacts } from '../../src/core/lint/lint';
import { DEFAULT_LINT_OPTIONS } from '../../src/core/lint/types';
import { callAt, scanFixture, scanSource } from './helpers';

describe('scan: FSDP2 fully_shard', () => {
  it('reads a torchtitan-style apply_fsdp over model.layers.items() with a **config dict', async () => {
    const f = await scanFixture('scan/torchtitan_style.py');
    assert.equal(f.calls.length, 2);
    const block = callAt(f, 38);
    assert.equal(block.api, 'fully_shard');
    assert.equal(block.importPath, 'torch.distributed.fsdp');
    assert.equal(block.legacy, false);
    assert.equal(block.target, 'transformer_block');
    assert.deepEqual(block.loop && { target: block.loop.target, iterable: block.loop.iterable }, {
      target: 'layer_id, transformer_block',
      iterable: 'model.layers.items()',
    });
    assert.equal(block.function, 'apply_fsdp');
    assert.deepEqual(block.paths, [['model', 'layers', '*']]);
    assert.equal(block.isRoot, false);
    // mp_policy comes through the dict; its dtypes through apply_fsdp's parameters from the one call site.
    assert.equal(block.options.mp_policy?.via, '**fsdp_config');
    assert.deepEqual(block.options.mp_policy?.value, {
      kind: 'MixedPrecisionPolicy',
      param_dtype: 'bfloat16',
      reduce_dtype: 'float32',
      output_dtype: null,
      cast_forward_inputs: true,
    });
    // The mesh resolves to the 2-D init_device_mesh in main().
    assert.deepEqual(block.options.mesh?.value, {
      shape: [2, 8],
      dimNames: ['dp_replicate', 'dp_shard'],
      line: 47,
    });
    // reshard_after_forward depends on the loop: recorded as text, value unknown.
    assert.equal(block.options.reshard_after_forward?.text, 'reshard_after_forward');
    assert.equal(block.options.reshard_after_forward?.value, null);
    // cpu_offload defaults to False and no call passes it: the conditional key is known not to be set.
    assert.equal(block.options.offload_policy, undefined);

    const root = callAt(f, 43);
    assert.equal(root.isRoot, true);
    assert.deepEqual(root.children, [0]);
    assert.equal(root.options.reshard_after_forward?.value, true); // not pp_enabled, pp_enabled=False at the call

    assert.equal(f.meshes.length, 1);
    assert.deepEqual(
      f.meshes[0] && [f.meshes[0].name, f.meshes[0].shape, f.meshes[0].dimNames, f.meshes[0].deviceType],
      ['world_mesh', [2, 8], ['dp_replicate', 'dp_shard'], 'cuda'],
    );
    assert.equal(f.optimizers[0]?.name, 'AdamW');
    assert.equal(f.optimizers[0]?.target, 'model');
    assert.equal(f.checkpointing[0]?.api, 'checkpoint_wrapper');
    assert.equal(f.checkpointing[0]?.loop?.iterable, 'model.layers.named_children()');
    const model = f.models.find((m) => m.variable === 'model');
    assert.equal(model?.meta, true);
    assert.equal(model?.callee, 'Transformer.from_model_args');
  });

  it('records keys added to a **config under an unknown condition, with the condition', async () => {
    const f = await scanFixture('scan/config_dict.py');
    const block = callAt(f, 19);
    assert.equal(block.callee, 'torch.distributed.fsdp.fully_shard');
    assert.equal(block.importPath, 'torch.distributed.fsdp');
    assert.equal(block.options.reshard_after_forward?.value, true);
    assert.equal(block.options.reshard_after_forward?.via, '**config');
    assert.equal((block.options.mp_policy?.value as { param_dtype: string }).param_dtype, 'bfloat16');
    assert.deepEqual(block.options.offload_policy?.conditions, ['args.cpu_offload']);
    assert.deepEqual(block.options.offload_policy?.value, { offloadParams: true, pinMemory: false });
    assert.equal(callAt(f, 20).isRoot, true);
    // Optimizer built before wrapping, on the same model.
    assert.equal(f.optimizers[0]?.line, 12);
    assert.equal(f.optimizers[0]?.name, 'Adam');
    assert.deepEqual(
      f.checkpointing.map((c) => [c.api, c.line]),
      [
        ['apply_activation_checkpointing', 17],
        ['checkpoint', 26],
      ],
    );
    const m = f.models.find((x) => x.line === 31);
    assert.equal(m?.meta, true);
    assert.equal(m?.callee, 'MyModel');
  });

  it('reads the legacy composable import path and a minimal GPT', async () => {
    const f = await scanFixture('scan/minimal_gpt_legacy.py');
    const block = callAt(f, 44);
    assert.equal(block.legacy, true);
    assert.equal(block.importPath, 'torch.distributed._composable.fsdp');
    assert.deepEqual(block.paths, [['model', 'transformer', 'h', '*']]);
    assert.equal(block.options.reshard_after_forward?.value, true);
    assert.equal(block.options.mp_policy?.text, 'mp');
    assert.equal((block.options.mp_policy?.value as { reduce_dtype: string }).reduce_dtype, 'float32');
    const root = callAt(f, 45);
    assert.equal(root.isRoot, true);
    assert.equal(root.function, null);
    assert.ok(f.imports.some((i) => i.legacy && i.from?.text === 'torch.distributed._composable.fsdp'));
    assert.equal(f.models.find((m) => m.variable === 'model')?.callee, 'GPT');
  });

  it('reads a named_modules() loop with an isinstance condition and a module alias', async () => {
    const f = await scanFixture('scan/named_modules.py');
    const unit = callAt(f, 10);
    assert.equal(unit.callee, 'tdf.fully_shard');
    assert.equal(unit.importPath, 'torch.distributed.fsdp');
    assert.deepEqual(unit.conditions, ['isinstance(module, TransformerBlock)']);
    assert.equal(unit.loop?.iterable, 'model.named_modules()');
    assert.deepEqual(unit.paths, [['model', '**']]);
    assert.equal(unit.options.reshard_after_forward?.value, 2);
    assert.equal(callAt(f, 11).isRoot, true);
    assert.equal(f.optimizers[0]?.name, 'SGD');
    assert.equal(f.optimizers[0]?.family, 'sgd-momentum');
  });

  it('reads aliases, list arguments, range(len()) indexing and slices', async () => {
    const f = await scanFixture('scan/forms.py');
    const list = callAt(f, 20);
    assert.equal(list.callee, 'shard_it');
    assert.equal(list.api, 'fully_shard');
    assert.deepEqual(list.targets, ['model.tok_embeddings', 'model.norm']);
    assert.deepEqual(list.paths, [
      ['model', 'tok_embeddings'],
      ['model', 'norm'],
    ]);
    assert.equal(list.options.reshard_after_forward?.value, false);
    const indexed = callAt(f, 22);
    assert.deepEqual(indexed.paths, [['model', 'layers', '*']]);
    assert.equal(indexed.loop?.iterable, 'range(len(model.layers))');
    assert.equal((indexed.options.mp_policy?.value as { param_dtype: string }).param_dtype, 'bfloat16');
    assert.equal(callAt(f, 24).options.reshard_after_forward?.value, 4);
    const root = callAt(f, 25);
    assert.equal(root.isRoot, true);
    assert.equal(root.children.length, 3);
  });

  it('never mistakes other functions named like the API for it', async () => {
    const f = await scanSource(
      'def fully_shard(x):\n    return x\n\nfully_shard(model)\nmy.fully_shard_helper(m)\n',
    );
    assert.equal(f.calls.length, 0);
  });

  it('accepts fully_shard without an import (a snippet), marking the import unknown', async () => {
    const f = await scanFixture('scan/unimported.py');
    assert.equal(f.calls.length, 2);
    assert.equal(f.calls[0]?.importPath, null);
    assert.equal(f.calls[1]?.isRoot, true);
  });
});

describe('scan: FSDP1', () => {
  it('reads a Hugging Face FSDP1 script with transformer_auto_wrap_policy', async () => {
    const f = await scanFixture('scan/hf_fsdp1.py');
    assert.equal(f.calls.length, 1);
    const c = callAt(f, 25);
    assert.equal(c.api, 'FSDP');
    assert.equal(c.callee, 'FSDP');
    assert.equal(c.isRoot, true);
    assert.equal(c.assignedTo, 'model');
    assert.deepEqual(c.options.auto_wrap_policy?.value, {
      policy: 'transformer',
      classes: ['LlamaDecoderLayer'],
    });
    assert.equal(c.options.sharding_strategy?.value, 'HYBRID_SHARD');
    assert.deepEqual(c.options.mixed_precision?.value, {
      kind: 'MixedPrecision',
      param_dtype: 'bfloat16',
      reduce_dtype: 'float32',
      buffer_dtype: 'bfloat16',
      keep_low_precision_grads: false,
    });
    assert.equal(c.options.backward_prefetch?.value, 'BACKWARD_PRE');
    assert.deepEqual(c.options.cpu_offload?.value, { offloadParams: false });
    for (const [k, v] of [
      ['forward_prefetch', true],
      ['limit_all_gathers', true],
      ['use_orig_params', true],
      ['sync_module_states', true],
    ] as const)
      assert.equal(c.options[k]?.value, v, k);
    assert.equal(c.options.device_id?.text, 'torch.cuda.current_device()');
    const m = f.models[0];
    assert.equal(m?.pretrained, 'meta-llama/Llama-3.1-8B');
    assert.equal(m?.dtype, 'bfloat16');
    assert.equal(f.checkpointing[0]?.api, 'gradient_checkpointing_enable');
    assert.ok(f.optimizers[0]!.line > c.line);
  });

  it('reads size, lambda, module and custom policies, positional arguments and enable_wrap', async () => {
    const f = await scanFixture('scan/forms.py');
    assert.deepEqual(callAt(f, 30).options.auto_wrap_policy?.value, {
      policy: 'size',
      minNumParams: 100_000_000,
    });
    const lambda = callAt(f, 35);
    assert.equal((lambda.options.auto_wrap_policy?.value as { policy: string }).policy, 'lambda');
    assert.equal(lambda.options.sharding_strategy?.value, 'FULL_SHARD'); // positional None = default
    assert.deepEqual(callAt(f, 39).options.auto_wrap_policy?.value, {
      policy: 'module',
      classes: ['Block', 'Embedding'],
    });
    assert.equal((callAt(f, 43).options.auto_wrap_policy?.value as { policy: string }).policy, 'custom');
    const manual = callAt(f, 49);
    assert.equal(manual.api, 'wrap');
    assert.equal(manual.assignedTo, 'model.layers[i]');
    assert.equal(manual.enableWrap?.limit_all_gathers?.value, true);
    assert.deepEqual(manual.paths, [['model', 'layers', '*']]);
    assert.equal(callAt(f, 50).isRoot, true);
  });

  it('reads a name bound in the arms of an if by the tests the arms are under', async () => {
    const f = await scanSource(
      [
        'import sys',
        'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy',
        'mode = "hsdp"',
        'if mode == "fsdp":',
        '    known = ShardingStrategy.FULL_SHARD',
        'elif mode == "hsdp":',
        '    known = ShardingStrategy.HYBRID_SHARD',
        'if sys.argv[1] == "a":',
        '    open_ = ShardingStrategy.FULL_SHARD',
        'elif sys.argv[1] == "b":',
        '    open_ = ShardingStrategy.NO_SHARD',
        'else:',
        '    raise ValueError("unknown")',
        'same = ShardingStrategy.SHARD_GRAD_OP',
        'if sys.argv[1] == "c":',
        '    same = ShardingStrategy.SHARD_GRAD_OP',
        'if sys.argv[1] == "d":',
        '    only = ShardingStrategy.NO_SHARD',
        '    a = FSDP(model, sharding_strategy=only)',
        'b = FSDP(model, sharding_strategy=known)',
        'c = FSDP(model, sharding_strategy=open_)',
        'd = FSDP(model, sharding_strategy=same)',
      ].join('\n'),
    );
    // The arm whose tests hold binds the name; arms under an undecided test are a choice (FULL_SHARD or
    // NO_SHARD), not the last one written; arms that agree are no choice; a read inside the arm is under its test.
    assert.equal(callAt(f, 19).options.sharding_strategy?.value, 'NO_SHARD');
    assert.equal(callAt(f, 20).options.sharding_strategy?.value, 'HYBRID_SHARD');
    assert.equal(callAt(f, 21).options.sharding_strategy?.value, null);
    assert.equal(callAt(f, 22).options.sharding_strategy?.value, 'SHARD_GRAD_OP');
  });

  it('finds the APIs through names assigned to them', async () => {
    const f = await scanSource(
      [
        'import torch.distributed.fsdp as tdf',
        'from torch.distributed.fsdp import FullyShardedDataParallel',
        'shard = tdf.fully_shard',
        'FSDPAlias = FullyShardedDataParallel',
        'for b in model.layers:',
        '    shard(b)',
        'shard(model)',
        'other = FSDPAlias(net)',
        '',
      ].join('\n'),
    );
    assert.deepEqual(
      f.calls.map((c) => [c.line, c.api]),
      [
        [6, 'fully_shard'],
        [7, 'fully_shard'],
        [8, 'FSDP'],
      ],
    );
    assert.equal(f.calls[1]!.isRoot, true);
  });

  it('wrap() inside enable_wrap runs with the options of the block, overridden by its own', async () => {
    const f = await scanSource(
      [
        'import torch',
        'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision, ShardingStrategy',
        'from torch.distributed.fsdp.wrap import enable_wrap, wrap',
        'mp = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)',
        'with enable_wrap(wrapper_cls=FSDP, mixed_precision=mp, sharding_strategy=ShardingStrategy.SHARD_GRAD_OP):',
        '    for i, layer in enumerate(model.layers):',
        '        model.layers[i] = wrap(layer, sharding_strategy=ShardingStrategy.FULL_SHARD)',
        '    model = wrap(model)',
        '',
      ].join('\n'),
    );
    const [block, root] = f.calls;
    assert.equal(block!.options.sharding_strategy?.value, 'FULL_SHARD');
    assert.equal(block!.options.sharding_strategy?.inherited, undefined);
    assert.equal(root!.options.sharding_strategy?.value, 'SHARD_GRAD_OP');
    assert.equal(root!.options.sharding_strategy?.inherited, 'enable_wrap');
    assert.equal((root!.options.mixed_precision?.value as { param_dtype: string }).param_dtype, 'bfloat16');
    assert.match(describeCall(root!), /SHARD_GRAD_OP/);
  });

  it('reads module-qualified FSDP1 and the fully_sharded_data_parallel module path', async () => {
    const f = await scanFixture('scan/fsdp1_forms.py');
    assert.equal(callAt(f, 6).options.sharding_strategy?.value, 'SHARD_GRAD_OP');
    assert.equal(callAt(f, 6).callee, 'fsdp_mod.FullyShardedDataParallel');
    const inner = callAt(f, 11);
    assert.equal(inner.options.sharding_strategy?.value, 'NO_SHARD');
    assert.equal(inner.isRoot, false);
    assert.equal(callAt(f, 12).isRoot, true);
  });
});

describe('scan: bad input', () => {
  it('reads what parses in half-typed code and says the file has syntax errors', async () => {
    const f = await scanFixture('scan/broken.py');
    assert.ok(f.problems.some((p) => /syntax errors/.test(p.message)));
    assert.ok(f.calls.length >= 1);
    assert.ok(f.calls.some((c) => c.incomplete && c.target === 'layer'));
  });

  it('survives empty, comment-only and odd input', async () => {
    for (const text of [
      '',
      '# only a comment\n',
      '\u0000\u0001',
      'fully_shard(',
      'fully_shard(*',
      '((((((((((',
      'é = 1\nfully_shard(é)\n',
    ]) {
      const f = await scanSource(text);
      assert.ok(Array.isArray(f.calls));
    }
  });

  it('gives unknown for pathological constants instead of hanging', async () => {
    const f = await scanSource(
      'from torch.distributed.fsdp import fully_shard\nk = 2**2**2**2**2**2**2\nx = x + 1\nfully_shard(m, reshard_after_forward=k)\nfully_shard(m, reshard_after_forward=x)\n',
    );
    assert.equal(f.calls[0]?.options.reshard_after_forward?.value, null);
    assert.equal(f.calls[1]?.options.reshard_after_forward?.value, null);
  });

  it('uses UTF-16 columns, as the editor does', async () => {
    const f = await scanSource(
      'from torch.distributed.fsdp import fully_shard\ns = "é€😀"; fully_shard(m)\n',
    );
    assert.equal(f.calls[0]?.range.start.character, 12);
  });
});

/** 0-based position of the `nth` (0-based) occurrence of `needle` in `text`, as the editor counts it. */
function positionOf(text: string, needle: string, nth = 0): { line: number; character: number } {
  const lines = text.split('\n');
  let seen = 0;
  for (let line = 0; line < lines.length; line++) {
    let from = 0;
    for (;;) {
      const character = lines[line]!.indexOf(needle, from);
      if (character < 0) break;
      if (seen++ === nth) return { line, character };
      from = character + 1;
    }
  }
  throw new Error(`${needle} #${nth} not in the text`);
}

describe('scan: options given through a **config dict', () => {
  /** The option's range, for comparing with where its value is written. */
  const rangeOf = (text: string, needle: string, nth = 0) => {
    const start = positionOf(text, needle, nth);
    return { start, end: { line: start.line, character: start.character + needle.length } };
  };

  it('a dict literal: each option keeps the source text and range of its value, keys added under an if too', async () => {
    const text = [
      'from torch.distributed.fsdp import fully_shard',
      'cfg = {"reshard_after_forward": True, "mesh": None}',
      'if args.offload:',
      '    cfg["offload_policy"] = CPUOffloadPolicy(pin_memory=False)',
      'for layer in model.layers:',
      '    fully_shard(layer, **cfg)',
      'fully_shard(model)',
      '',
    ].join('\n');
    const f = await scanSource(text);
    const o = callAt(f, 6).options;
    assert.deepEqual(Object.fromEntries(Object.entries(o).map(([k, v]) => [k, v.text])), {
      reshard_after_forward: 'True',
      mesh: 'None',
      offload_policy: 'CPUOffloadPolicy(pin_memory=False)',
    });
    assert.equal(o.reshard_after_forward?.value, true);
    assert.equal(o.mesh?.value, null);
    assert.deepEqual(o.offload_policy?.value, { offloadParams: true, pinMemory: false });
    // Line 2 (0-based 1) holds the literal; `True` is its first occurrence in the text.
    assert.deepEqual(o.reshard_after_forward?.range, rangeOf(text, 'True'));
    assert.deepEqual(o.reshard_after_forward?.range.start, { line: 1, character: 32 });
    assert.deepEqual(o.offload_policy?.range, rangeOf(text, 'CPUOffloadPolicy(pin_memory=False)'));
    for (const k of Object.keys(o)) assert.equal(o[k]?.via, '**cfg', k);
    assert.deepEqual(o.offload_policy?.conditions, ['args.offload']);
    assert.equal(o.reshard_after_forward?.conditions, undefined);
  });

  it('dict(...): the keyword values are the source text, not their JSON, with their own ranges', async () => {
    const text = [
      'import torch',
      'from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard',
      'mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16)',
      'cfg = dict(reshard_after_forward=True, mesh=None, mp_policy=mp)',
      'if args.shard_placement:',
      '    cfg.update(reshard_after_forward=False)',
      'for layer in model.layers:',
      '    fully_shard(layer, **cfg)',
      'fully_shard(model, **dict(cfg, reshard_after_forward=2))',
      '',
    ].join('\n');
    const f = await scanSource(text);
    const o = callAt(f, 8).options;
    // Before the update the key held True; the update under an unknown condition is the last binding.
    assert.equal(o.reshard_after_forward?.text, 'False');
    assert.equal(o.reshard_after_forward?.value, false);
    assert.deepEqual(o.reshard_after_forward?.conditions, ['args.shard_placement']);
    assert.deepEqual(o.reshard_after_forward?.range, rangeOf(text, 'False'));
    assert.equal(o.mesh?.text, 'None');
    assert.deepEqual(o.mesh?.range, rangeOf(text, 'None'));
    assert.equal(o.mp_policy?.text, 'mp');
    assert.equal((o.mp_policy?.value as { param_dtype: string }).param_dtype, 'bfloat16');
    // `mp` on line 4 (0-based 3) after `cfg = dict(` (11), `reshard_after_forward=True, ` (28), `mesh=None, ` (11)
    // and `mp_policy=` (10): characters 60 to 62.
    assert.deepEqual(o.mp_policy?.range, {
      start: { line: 3, character: 60 },
      end: { line: 3, character: 62 },
    });
    for (const k of Object.keys(o)) assert.equal(o[k]?.via, '**cfg', k);

    // dict(mapping, key=value): the mapping's keys, then the keyword written in the call.
    const root = callAt(f, 9).options;
    assert.equal(root.reshard_after_forward?.text, '2');
    assert.equal(root.reshard_after_forward?.value, 2);
    // `fully_shard(model, **dict(cfg, reshard_after_forward=` is 53 characters: the 2 spans 53 to 54 of line 9.
    assert.deepEqual(root.reshard_after_forward?.range, {
      start: { line: 8, character: 53 },
      end: { line: 8, character: 54 },
    });
    assert.equal(root.mesh?.text, 'None');
    assert.deepEqual(callAt(f, 9).unresolvedSplats, []);
  });

  it('dict(**unknown) leaves the splat unresolved instead of reading part of it', async () => {
    const f = await scanSource(
      'from torch.distributed.fsdp import fully_shard\ncfg = dict(**load_config(), reshard_after_forward=True)\nfully_shard(model, **cfg)\n',
    );
    assert.deepEqual(f.calls[0]?.unresolvedSplats, ['cfg']);
    assert.deepEqual(f.calls[0]?.options, {});
  });

  it('lint keeps working on splatted options: findings on the value, a root fix that passes the splat on', async () => {
    const text = [
      'from torch.distributed.device_mesh import init_device_mesh',
      'from torch.distributed.fsdp import fully_shard',
      'mesh = init_device_mesh("cuda", (8,))',
      'cfg = dict(mesh=mesh, reshard_after_forward=3)',
      'for layer in model.layers:',
      '    fully_shard(layer, **cfg)',
      '',
    ].join('\n');
    const facts = await scanSource(text);
    const findings = lintFacts({ facts, text, options: DEFAULT_LINT_OPTIONS });
    // 3 does not divide the 8 ranks of the mesh: reported where 3 is written (line 4, 0-based 3), and the only
    // fix is the suppression, on that same line, which the next run honours.
    const divisor = findings.find((x) => x.rule === 'FSDP006');
    assert.ok(divisor);
    // `cfg = dict(` (11) + `mesh=mesh, ` (11) + `reshard_after_forward=` (22): the 3 spans characters 44 to 45.
    assert.deepEqual(divisor.range, { start: { line: 3, character: 44 }, end: { line: 3, character: 45 } });
    assert.deepEqual(divisor.range, rangeOf(text, '3'));
    assert.equal(divisor.fixes.length, 1);
    const suppressed = applyEdits(text, divisor.fixes[0]!.edits);
    assert.equal(
      suppressed.split('\n')[3],
      'cfg = dict(mesh=mesh, reshard_after_forward=3)  # noqa: FSDP006',
    );
    const again = lintFacts({
      facts: await scanSource(suppressed),
      text: suppressed,
      options: DEFAULT_LINT_OPTIONS,
    });
    assert.equal(
      again.some((x) => x.rule === 'FSDP006'),
      false,
    );
    // No root wrap: the fix wraps the model with the same `**cfg`, not the values spelled out.
    const root = findings.find((x) => x.rule === 'FSDP001');
    assert.ok(root);
    const fix = root.fixes.find((x) => x.preferred);
    assert.ok(fix);
    assert.equal(applyEdits(text, fix.edits).split('\n')[6], 'fully_shard(model, **cfg)');
  });
});

describe('scan: loop forms, per-unit options and the loaded model', () => {
  it('reads items(), values(), enumerate() and range(len()) loops over model.model.layers', async () => {
    const f = await scanFixture('scan/loop_forms.py');
    assert.equal(f.calls.length, 5);
    const loops = f.calls
      .filter((c) => c.loop)
      .map((c) => [c.line, c.target, c.loop!.target, c.loop!.iterable, c.paths]);
    const layers = [['model', 'model', 'layers', '*']];
    assert.deepEqual(loops, [
      [14, 'block', 'name, block', 'model.model.layers.items()', layers],
      [16, 'block', 'block', 'model.model.layers.values()', layers],
      [18, 'block', 'i, block', 'enumerate(model.model.layers)', layers],
      [20, 'model.model.layers[i]', 'i', 'range(len(model.model.layers))', layers],
    ]);
    // The loop targets' ranges: `name, block` on line 13 (0-based 12) after `for `.
    assert.deepEqual(callAt(f, 14).loop?.targetRange, {
      start: { line: 12, character: 4 },
      end: { line: 12, character: 4 + 'name, block'.length },
    });
    const root = callAt(f, 21);
    assert.equal(root.isRoot, true);
    assert.deepEqual(root.children, [0, 1, 2, 3]);
    assert.deepEqual(root.paths, [['model']]);
  });

  it('records ignored_params= and shard_placement_fn= on fully_shard', async () => {
    const f = await scanFixture('scan/loop_forms.py');
    const ignored = callAt(f, 14).options.ignored_params;
    assert.equal(ignored?.text, 'frozen');
    assert.equal(ignored?.range.start.line, 13);
    const literal = callAt(f, 20).options.ignored_params;
    assert.equal(literal?.text, '{model.model.norm.weight}');
    assert.equal(callAt(f, 16).options.shard_placement_fn?.text, 'place');
    const lambda = callAt(f, 18).options.shard_placement_fn;
    assert.equal(lambda?.text, 'lambda p: Shard(0)');
    assert.deepEqual(lambda?.value, { lambda: 'lambda p: Shard(0)' });
  });

  it('records LlamaForCausalLM.from_pretrained("org/name") as the model, as it does Auto classes', async () => {
    const f = await scanFixture('scan/loop_forms.py');
    assert.equal(f.models.length, 1);
    const m = f.models[0]!;
    assert.equal(m.variable, 'model');
    assert.equal(m.line, 11);
    assert.equal(m.callee, 'LlamaForCausalLM.from_pretrained');
    assert.equal(m.qualified, 'transformers.LlamaForCausalLM.from_pretrained');
    assert.equal(m.pretrained, 'meta-llama/Llama-3.2-1B');
    assert.equal(m.dtype, 'bfloat16');
    assert.equal(m.meta, false);
  });

  it('maps enumerate() and range(len()) loops of snippets to the iterable, with two-level paths', async () => {
    const f = await scanSource(
      [
        'from torch.distributed.fsdp import fully_shard',
        'for i, layer in enumerate(model.layers):',
        '    fully_shard(layer)',
        'for i in range(len(model.layers)):',
        '    fully_shard(model.layers[i].mlp)',
        'for name, block in model.layers.items():',
        '    fully_shard(block.attention)',
        'fully_shard(model)',
        '',
      ].join('\n'),
    );
    assert.deepEqual(
      f.calls.map((c) => c.paths),
      [
        [['model', 'layers', '*']],
        [['model', 'layers', '*', 'mlp']],
        [['model', 'layers', '*', 'attention']],
        [['model']],
      ],
    );
    assert.deepEqual(callAt(f, 8).children, [0, 1, 2]);
  });
});
