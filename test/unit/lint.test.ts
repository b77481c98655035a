import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import Ajv from 'ajv';
import { renderRulesDoc } from '../../src/core/lint/docs';
import { applyEdits } from '../../src/core/lint/edits';
import { lintFacts, summaryOf } from '../../src/core/lint/lint';
import { RULES } from '../../src/core/lint/registry';
import { toSarif } from '../../src/core/lint/sarif';
import { DEFAULT_LINT_OPTIONS, type Finding, type LintOptions, type Rule } from '../../src/core/lint/types';
import { analyzeFacts } from '../../src/core/entry/analyze';
import { Project } from '../../src/core/project/project';
import { cli, fixture, FIXTURES, grammar, ROOT, scanSource, tempDir } from './helpers';
import { diskFS } from '../../src/host/disk';

process.env.FSDP_LENS_STRICT_RULES = '1';

async function lint(text: string, options: Partial<LintOptions> = {}): Promise<Finding[]> {
  const facts = await scanSource(text);
  return lintFacts({ facts, text, options: { ...DEFAULT_LINT_OPTIONS, ...options } });
}

async function lintFixture(name: string, options: Partial<LintOptions> = {}) {
  const text = fixture(`lint/${name}`);
  return { text, findings: await lint(text, options) };
}

function preferredFix(f: Finding) {
  const fix = f.fixes.find((x) => x.preferred);
  assert.ok(fix, `${f.rule} has a preferred fix`);
  return fix;
}

describe('lint rules', () => {
  it('FSDP001: blocks wrapped, model not: fires on the block wrap, fix inserts the root wrap with the same options', async () => {
    const { text, findings } = await lintFixture('fsdp001_bad.py');
    assert.deepEqual(
      findings.map((f) => f.rule),
      ['FSDP001'],
    );
    const f = findings[0]!;
    assert.equal(f.severity, 'error');
    assert.equal(f.range.start.line, 7);
    assert.match(f.message, /replicated on every GPU with their gradients never reduced across ranks/);
    const fixed = applyEdits(text, preferredFix(f).edits);
    assert.equal(
      fixed.split('\n').slice(6, 9).join('\n'),
      [
        '    for layer in model.layers:',
        '        fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward=True)',
        '    fully_shard(model, mesh=mesh, mp_policy=mp)',
      ].join('\n'),
    );
    assert.deepEqual(
      (await lint(fixed)).map((x) => x.rule),
      [],
      'the fixed file is clean',
    );
  });

  it('FSDP001: quiet when the root is wrapped, and for block-only helpers whose callers live elsewhere', async () => {
    assert.deepEqual((await lintFixture('fsdp001_good.py')).findings, []);
  });

  it('FSDP001: FSDP1 per-block wraps in a method; the fix assigns the root wrap', async () => {
    const { text, findings } = await lintFixture('fsdp001_fsdp1_bad.py');
    assert.deepEqual(
      findings.map((f) => f.rule),
      ['FSDP001'],
    );
    const fixed = applyEdits(text, preferredFix(findings[0]!).edits);
    assert.match(fixed, /\n {8}self\.model = FSDP\(self\.model, use_orig_params=True\)\n {8}self\.optimizer/);
  });

  it('FSDP002: root wrapped before its children; the fix moves it after the loop', async () => {
    const { text, findings } = await lintFixture('fsdp002_bad.py');
    assert.deepEqual(
      findings.map((f) => f.rule),
      ['FSDP002'],
    );
    assert.equal(
      applyEdits(text, preferredFix(findings[0]!).edits),
      'from torch.distributed.fsdp import fully_shard\n\nmodel = build()\nfor layer in model.layers:\n    fully_shard(layer)\nfully_shard(model)\n',
    );
  });

  it('FSDP003: FSDP1 with no policy on a catalog model; the fix adds the transformer policy and imports', async () => {
    const { text, findings } = await lintFixture('fsdp003_bad.py');
    assert.deepEqual(
      findings.map((f) => f.rule),
      ['FSDP003'],
    );
    assert.match(findings[0]!.message, /MistralDecoderLayer/);
    const fixed = applyEdits(text, preferredFix(findings[0]!).edits);
    assert.match(fixed, /^import functools$/m);
    assert.match(fixed, /^from torch\.distributed\.fsdp\.wrap import transformer_auto_wrap_policy$/m);
    assert.match(fixed, /^from transformers\.models\.mistral\.modeling_mistral import MistralDecoderLayer$/m);
    assert.match(
      fixed,
      /model = FSDP\(model, auto_wrap_policy=functools\.partial\(transformer_auto_wrap_policy, transformer_layer_cls=\{MistralDecoderLayer\}\), mixed_precision=/,
    );
    assert.deepEqual(await lint(fixed), []);
    assert.deepEqual((await lintFixture('fsdp003_good.py')).findings, []);
  });

  it('FSDP004: optimizer before wrapping; the fix moves it after the root wrap', async () => {
    const { text, findings } = await lintFixture('fsdp004_bad.py');
    assert.deepEqual(
      findings.map((f) => f.rule),
      ['FSDP004'],
    );
    assert.equal(applyEdits(text, preferredFix(findings[0]!).edits), fixture('lint/fsdp004_good.py'));
    assert.deepEqual((await lintFixture('fsdp004_good.py')).findings, []);
  });

  it('FSDP004: no move when something reads the optimizer before the wrap', async () => {
    const text =
      'from torch.distributed.fsdp import fully_shard\nopt = torch.optim.SGD(model.parameters())\nsched = make(opt)\nfully_shard(model)\n';
    const findings = await lint(text);
    assert.deepEqual(
      findings.map((f) => f.rule),
      ['FSDP004'],
    );
    assert.equal(findings[0]!.fixes.filter((f) => f.preferred).length, 0);
  });

  it('FSDP002: a root wrap and block wraps in exclusive arms of an `if` are never compared', async () => {
    const head = 'from torch.distributed.fsdp import fully_shard\n\ndef shard(model, flat):\n';
    // Either the whole model as one unit, or the blocks then the model: each arm wraps bottom-up.
    const elseArm = [
      '    if flat:',
      '        fully_shard(model)',
      '    else:',
      '        for b in model.blocks:',
      '            fully_shard(b)',
      '        fully_shard(model)',
      '',
    ].join('\n');
    // The same choice through an early return: the code after the `if` runs only when the arm did not.
    const early = [
      '    if flat:',
      '        fully_shard(model)',
      '        return model',
      '    for b in model.blocks:',
      '        fully_shard(b)',
      '    fully_shard(model)',
      '    return model',
      '',
    ].join('\n');
    const elifArm = [
      '    if flat == "one":',
      '        fully_shard(model)',
      '    elif flat == "blocks":',
      '        for b in model.blocks:',
      '            fully_shard(b)',
      '        fully_shard(model)',
      '',
    ].join('\n');
    for (const body of [elseArm, early, elifArm])
      assert.deepEqual(
        (await lint(head + body)).map((f) => `${f.rule}:${f.range.start.line + 1}`),
        [],
        body,
      );
    // Still reported: the root first in the same arm, and a root in an arm that falls through to the blocks.
    const sameArm = [
      '    if flat:',
      '        fully_shard(model)',
      '        for b in model.blocks:',
      '            fully_shard(b)',
      '',
    ].join('\n');
    const fallsThrough = [
      '    if flat:',
      '        fully_shard(model)',
      '    for b in model.blocks:',
      '        fully_shard(b)',
      '',
    ].join('\n');
    for (const body of [sameArm, fallsThrough])
      assert.deepEqual(
        (await lint(head + body)).map((f) => `${f.rule}:${f.range.start.line + 1}`),
        ['FSDP002:5'],
        body,
      );
  });

  it('FSDP004: an optimizer and a wrap in exclusive arms are never compared', async () => {
    const text = [
      'import torch',
      'from torch.distributed.fsdp import fully_shard',
      '',
      'def setup(model, plain):',
      '    if plain:',
      '        opt = torch.optim.AdamW(model.parameters())',
      '    else:',
      '        for b in model.blocks:',
      '            fully_shard(b)',
      '        fully_shard(model)',
      '        opt = torch.optim.AdamW(model.parameters())',
      '    return opt',
      '',
    ].join('\n');
    assert.deepEqual(await lint(text), []);
    // The optimizer before the wrap inside one arm is still reported.
    const inArm = text.replace(
      '        for b in model.blocks:',
      '        early = torch.optim.SGD(model.parameters())\n        for b in model.blocks:',
    );
    assert.deepEqual(
      (await lint(inArm)).map((f) => `${f.rule}:${f.range.start.line + 1}`),
      ['FSDP004:8'],
    );
    // The arms are recorded from the function down, with the arm each fact sits in.
    const facts = await scanSource(text);
    assert.deepEqual(facts.optimizers[0]!.branch, [{ at: text.indexOf('if plain'), arms: [0] }]);
    assert.deepEqual(facts.calls[0]!.branch, [{ at: text.indexOf('if plain'), arms: [1] }]);
  });

  it('FSDP001: block wraps and the root wrap in exclusive arms are not reported (the root may be wrapped elsewhere)', async () => {
    const text = [
      'from torch.distributed.fsdp import fully_shard',
      'model = build()',
      'if per_block:',
      '    for b in model.blocks:',
      '        fully_shard(b)',
      'else:',
      '    fully_shard(model)',
      '',
    ].join('\n');
    assert.deepEqual(
      (await lint(text)).map((f) => f.rule),
      [],
    );
  });

  it('FSDP001: blocks iterated through a local list or comprehension belong to the wrapped model', async () => {
    const head = 'from torch.distributed.fsdp import fully_shard\nmodel = build()\n';
    const tail = 'for layer in blocks:\n    fully_shard(layer)\nfully_shard(model)\n';
    for (const source of [
      'blocks = list(model.layers)',
      'blocks = [m for m in model.modules() if isinstance(m, Block)]',
      'blocks = [m for _, m in model.named_modules() if isinstance(m, Block)]',
      'blocks = [b.mlp for b in model.layers]',
    ]) {
      const text = `${head}${source}\n${tail}`;
      assert.deepEqual(await lint(text), [], source);
      const facts = await scanSource(text);
      assert.deepEqual(facts.calls[0]!.paths[0]!.slice(0, 1), ['model'], source);
      assert.equal(facts.calls[1]!.isRoot, true, source);
    }
    // A helper that returns the blocks says nothing of which model they belong to: no finding either way.
    assert.deepEqual(
      await lint(`${head}blocks = get_layers(model)\nfor layer in blocks:\n    fully_shard(layer)\n`),
      [],
    );
  });

  it('FSDP001: a written-out list of modules in a helper, and a list built by appends, belong to the wrapped model', async () => {
    const listed = [
      'from torch.distributed.fsdp import fully_shard',
      '',
      'def shard(model):',
      '    for layer in model.layers:',
      '        fully_shard(layer)',
      '    modules = [model.tok_embeddings, model.norm, model.output]',
      '    for m in modules:',
      '        fully_shard(m)',
      '    fully_shard(model)',
      '',
    ].join('\n');
    const appended = [
      'from torch.distributed.fsdp import fully_shard',
      '',
      'def shard(model):',
      '    mods = []',
      '    mods.append(model.embed)',
      '    mods.append(model.head)',
      '    mods += [model.norm]',
      '    for m in mods:',
      '        fully_shard(m)',
      '    fully_shard(model)',
      '',
      'shard(build())',
      '',
    ].join('\n');
    for (const [text, paths] of [
      [
        listed,
        [
          ['model', 'tok_embeddings'],
          ['model', 'norm'],
          ['model', 'output'],
        ],
      ],
      [
        appended,
        [
          ['model', 'embed'],
          ['model', 'head'],
          ['model', 'norm'],
        ],
      ],
    ] as const) {
      assert.deepEqual(await lint(text), [], text);
      const facts = await scanSource(text);
      const loop = facts.calls.find((c) => c.loop && c.target === 'm')!;
      assert.deepEqual(loop.paths, paths);
      assert.equal(facts.calls[facts.calls.length - 1]!.isRoot, true);
    }
    // Without the root wrap, the finding names the model, never the Python list.
    const [f] = await lint(appended.replace('    fully_shard(model)\n', ''));
    assert.equal(f?.rule, 'FSDP001');
    assert.match(f!.message, /but `model` itself never is/);
    // A list filled by something the scan cannot read says nothing of the model, and nothing is reported about the list.
    const opaque = appended.replace('    mods.append(model.head)', '    extend_with_heads(mods)');
    assert.deepEqual(await lint(opaque.replace('    fully_shard(model)\n', '')), []);
  });

  it('FSDP001: the fix leaves out options computed from the loop variables', async () => {
    const text = [
      'from torch.distributed.fsdp import fully_shard',
      'def main():',
      '    model = build()',
      '    for i, layer in enumerate(model.layers):',
      '        fully_shard(layer, mesh=meshes[i], mp_policy=policy_for(layer), offload_policy=offload)',
      '    opt = make_opt(model)',
      '',
      'main()',
      '',
    ].join('\n');
    const [f] = await lint(text);
    assert.equal(f?.rule, 'FSDP001');
    const fix = preferredFix(f!);
    assert.match(fix.title, /mesh, mp_policy left out/);
    assert.equal(
      applyEdits(text, fix.edits).split('\n')[5],
      '    fully_shard(model, offload_policy=offload)',
    );
  });

  it('FSDP001: a loop over modules() / named_modules() wraps the model itself too, unless a test keeps it out', async () => {
    // named_modules() yields the module itself first, then every descendant: the loop wraps the root (last, reversed).
    const shard = (loop: string[]) =>
      [
        'from torch import nn',
        'from torch.distributed.fsdp import fully_shard',
        '',
        'def shard_everything(net):',
        ...loop,
        '    return net',
        '',
        'shard_everything(build())',
        '',
      ].join('\n');
    const wrapsRoot = [
      [
        '    for name, sub in reversed(list(net.named_modules())):',
        '        if isinstance(sub, nn.ModuleList):',
        '            continue',
        '        fully_shard(sub)',
      ],
      ['    for sub in reversed(list(net.modules())):', '        fully_shard(sub)'],
      [
        '    for i, (name, sub) in enumerate(reversed(list(net.named_modules()))):',
        '        fully_shard(sub)',
      ],
      [
        '    for sub in reversed(list(net.modules())):',
        '        if not isinstance(sub, (nn.ModuleList, nn.ModuleDict)):',
        '            fully_shard(sub)',
      ],
    ];
    for (const loop of wrapsRoot) {
      const text = shard(loop);
      assert.deepEqual(await lint(text), [], loop.join('\n'));
      assert.equal((await scanSource(text)).calls[0]!.wrapsBase, true, loop.join('\n'));
    }
    // A class test, a test of the name, a `break` or a filtered list keeps the root out of the loop, and the
    // elements of named_modules() are pairs, not modules: still reported.
    const leavesRoot = [
      ['    for sub in reversed(list(net.named_modules())):', '        fully_shard(sub)'],
      ['    for sub in net.modules():', '        if isinstance(sub, Block):', '            fully_shard(sub)'],
      [
        '    for name, sub in net.named_modules():',
        '        if not name:',
        '            continue',
        '        fully_shard(sub)',
      ],
      [
        '    for sub in reversed(list(net.modules())):',
        '        fully_shard(sub)',
        '        if sub is last:',
        '            break',
      ],
      [
        '    blocks = [m for m in net.modules() if isinstance(m, Block)]',
        '    for b in blocks:',
        '        fully_shard(b)',
      ],
    ];
    for (const loop of leavesRoot)
      assert.deepEqual(
        (await lint(shard(loop))).map((f) => f.rule),
        ['FSDP001'],
        loop.join('\n'),
      );
  });

  it('FSDP001: one attribute wrapped and stored back in place is a root of its own, not a block missing its root', async () => {
    const head =
      'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\nholder = make_holder()\n';
    assert.deepEqual(await lint(`${head}holder.net = FSDP(holder.net)\nrun(holder)\n`), []);
    // Blocks stored back by index, several parts of one model, or another module stored in the attribute: reported.
    for (const body of [
      'for i, block in enumerate(holder.blocks):\n    holder.blocks[i] = FSDP(block)\n',
      'holder.blocks[0] = FSDP(holder.blocks[0])\n',
      'holder.encoder = FSDP(holder.encoder)\nholder.decoder = FSDP(holder.decoder)\n',
      'holder.net = FSDP(holder.net.body)\n',
    ])
      assert.deepEqual(
        (await lint(head + body)).map((f) => f.rule),
        ['FSDP001'],
        body,
      );
  });

  it('FSDP005: legacy path rewritten; quiet with an older minimum PyTorch', async () => {
    const { text, findings } = await lintFixture('fsdp005_bad.py');
    assert.deepEqual(
      findings.map((f) => f.rule),
      ['FSDP005', 'FSDP005'],
    );
    const fixed = applyEdits(
      text,
      findings.flatMap((f) => preferredFix(f).edits),
    );
    assert.match(fixed, /^from torch\.distributed\.fsdp import fully_shard, MixedPrecisionPolicy$/m);
    assert.match(fixed, /^import torch\.distributed\.fsdp as cfsdp$/m);
    assert.deepEqual((await lintFixture('fsdp005_bad.py', { minTorchVersion: '2.5' })).findings, []);
  });

  it('FSDP005: a fallback in `except ImportError` is quiet, and calls resolve to the import that runs', async () => {
    const text = [
      'try:',
      '    from torch.distributed.fsdp import fully_shard',
      'except ImportError:',
      '    from torch.distributed._composable.fsdp import fully_shard',
      'for layer in model.layers:',
      '    fully_shard(layer)',
      'fully_shard(model)',
      '',
    ].join('\n');
    assert.deepEqual(await lint(text), []);
    const facts = await scanSource(text);
    assert.deepEqual(
      facts.calls.map((c) => c.legacy),
      [false, false],
    );
    // The reverse order runs the legacy path first wherever it still exists: reported.
    const reversed = text
      .replace('torch.distributed.fsdp import', 'X')
      .replace('torch.distributed._composable.fsdp import', 'torch.distributed.fsdp import');
    assert.deepEqual(
      (await lint(reversed.replace('X', 'torch.distributed._composable.fsdp import'))).map((f) => f.rule),
      ['FSDP005'],
    );
  });

  it('FSDP005: a legacy import behind a version or feature check, with the public import in the other arm, is a fallback', async () => {
    const publicImport = 'from torch.distributed.fsdp import fully_shard';
    const legacyImport = 'from torch.distributed._composable.fsdp import fully_shard';
    const gate = (condition: string, newerFirst = true) =>
      [
        'import torch',
        'import packaging.version',
        'from packaging import version',
        `if ${condition}:`,
        `    ${newerFirst ? publicImport : legacyImport}`,
        'else:',
        `    ${newerFirst ? legacyImport : publicImport}`,
        'for layer in model.layers:',
        '    fully_shard(layer)',
        'fully_shard(model)',
        '',
      ].join('\n');
    for (const text of [
      gate('version.parse(torch.__version__) >= version.parse("2.6")'),
      gate('torch.__version__ < "2.6"', false),
      gate('hasattr(torch.distributed.fsdp, "fully_shard")'),
      gate('packaging.version.Version(torch.__version__) >= packaging.version.Version("2.6.0")'),
      gate('TORCH_VERSION >= (2, 6)'),
    ]) {
      assert.deepEqual(await lint(text), [], text);
      const facts = await scanSource(text);
      assert.deepEqual(
        facts.imports.filter((i) => i.legacy).map((i) => i.fallback),
        [true],
        text,
      );
    }
    // An unrelated condition, or a version check with no public import in the other arm: still reported.
    for (const text of [
      gate('use_fsdp2'),
      ['import torch', 'if torch.__version__ < "2.6":', `    ${legacyImport}`, ''].join('\n'),
      [
        'import torch',
        'if torch.__version__ >= "2.6":',
        '    from torch.distributed.fsdp import MixedPrecisionPolicy',
        'else:',
        `    ${legacyImport}`,
        '',
      ].join('\n'),
    ])
      assert.deepEqual(
        (await lint(text)).map((f) => f.rule),
        ['FSDP005'],
        text,
      );
  });

  it('FSDP005: the legacy module imported by name, and the whole dotted path without `as`', async () => {
    const byName = await lint('from torch.distributed._composable import fsdp as F\nF.fully_shard(model)\n');
    assert.deepEqual(
      byName.map((f) => f.rule),
      ['FSDP005'],
    );
    const fixed = applyEdits(
      'from torch.distributed._composable import fsdp as F\nF.fully_shard(model)\n',
      preferredFix(byName[0]!).edits,
    );
    assert.equal(fixed, 'from torch.distributed import fsdp as F\nF.fully_shard(model)\n');
    // `import a.b.c` binds `a`: the calls spell the old path, so no mechanical rewrite of the import alone.
    const dotted = await lint(
      'import torch.distributed._composable.fsdp\ntorch.distributed._composable.fsdp.fully_shard(model)\n',
    );
    assert.deepEqual(
      dotted.map((f) => f.rule),
      ['FSDP005'],
    );
    assert.match(dotted[0]!.message, /calls that spell the old path/);
    assert.equal(dotted[0]!.fixes.filter((f) => f.preferred).length, 0);
  });

  it('FSDP007: a mixed-precision policy that is never passed; quiet when passed', async () => {
    const { findings } = await lintFixture('fsdp007_bad.py');
    assert.deepEqual(
      findings.map((f) => f.rule),
      ['FSDP007'],
    );
    assert.deepEqual((await lintFixture('fsdp001_good.py')).findings, []);
  });

  it('FSDP019: gradient sync turned off and never on again before the step; quiet where it can be restored', async () => {
    const { findings } = await lintFixture('fsdp019_bad.py');
    const mine = findings.filter((f) => f.rule === 'FSDP019');
    assert.deepEqual(
      mine.map((f) => [f.range.start.line + 1, f.severity]),
      [[16, 'warning']],
    );
    assert.match(
      mine[0]!.message,
      /the sharded parameters get no gradient and optimizer\.step\(\) updates nothing/,
    );
    assert.deepEqual(
      (await lintFixture('fsdp019_good.py')).findings.filter((f) => f.rule === 'FSDP019'),
      [],
    );
    const base = fixture('lint/fsdp019_bad.py');
    for (const quiet of [
      // Turned on again before the step.
      base.replace(
        '            opt.step()',
        '            model.set_requires_gradient_sync(True)\n            opt.step()',
      ),
      // A helper of the project may turn it on.
      base.replace('            opt.step()', '            enable_grad_sync(model)\n            opt.step()'),
      // No optimizer step after it (an evaluation loop).
      base.replace('            opt.step()\n            opt.zero_grad()', '            pass'),
    ])
      assert.deepEqual(
        (await lint(quiet)).filter((f) => f.rule === 'FSDP019'),
        [],
      );
  });

  it('FSDP018: the FSDP1 clip method on an FSDP2 module; the fix clips with torch.nn.utils and the finding goes', async () => {
    const { findings } = await lintFixture('fsdp018_bad.py');
    const mine = findings.filter((f) => f.rule === 'FSDP018');
    assert.deepEqual(
      mine.map((f) => [f.range.start.line + 1, f.severity]),
      [[15, 'error']],
    );
    assert.match(
      mine[0]!.message,
      /has no clip_grad_norm_ method \(that is FSDP1's\): this call raises AttributeError/,
    );
    const fixed = applyEdits(fixture('lint/fsdp018_bad.py'), preferredFix(mine[0]!).edits);
    assert.match(fixed, /torch\.nn\.utils\.clip_grad_norm_\(model\.parameters\(\), 1\.0, norm_type=2\.0\)/);
    assert.deepEqual(
      (await lint(fixed)).filter((f) => f.rule === 'FSDP018'),
      [],
    );
    assert.deepEqual(
      (await lintFixture('fsdp018_good.py')).findings.filter((f) => f.rule === 'FSDP018'),
      [],
    );
    // Quiet where the module is FSDP1's, or the file also wraps with FSDP1, or the class defines the method.
    const base = fixture('lint/fsdp018_bad.py');
    for (const quiet of [
      base.replace(
        '    model.clip_grad_norm_(1.0, norm_type=2.0)',
        '    if isinstance(model, FSDP):\n        model.clip_grad_norm_(1.0)',
      ),
      base + 'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\nother = FSDP(other)\n',
      base + 'class Net(nn.Module):\n    def clip_grad_norm_(self, x):\n        pass\n',
    ])
      assert.deepEqual(
        (await lint(quiet)).filter((f) => f.rule === 'FSDP018'),
        [],
      );
  });

  it('FSDP017: FSDP1 CPUOffload given to fully_shard; the fix writes CPUOffloadPolicy() and the finding goes', async () => {
    const { findings } = await lintFixture('fsdp017_bad.py');
    const mine = findings.filter((f) => f.rule === 'FSDP017');
    assert.deepEqual(
      mine.map((f) => f.range.start.line + 1),
      [8, 9],
    );
    assert.match(mine[0]!.message, /fully_shard offloads only for a CPUOffloadPolicy/);
    // Through a name (line 8): no automatic fix. Written inline (line 9): replaced by CPUOffloadPolicy().
    assert.equal(mine[0]!.fixes.filter((f) => f.preferred).length, 0);
    const fixed = applyEdits(fixture('lint/fsdp017_bad.py'), preferredFix(mine[1]!).edits);
    assert.match(fixed, /fully_shard\(model, offload_policy=CPUOffloadPolicy\(\)\)/);
    assert.deepEqual(
      (await lint(fixed)).filter((f) => f.rule === 'FSDP017').map((f) => f.range.start.line + 1),
      [8],
    );
    assert.deepEqual(
      (await lintFixture('fsdp017_good.py')).findings.filter((f) => f.rule === 'FSDP017'),
      [],
    );
  });

  it('FSDP008 stays quiet on a condition over a container that another function fills in', async () => {
    // A registry filled at setup (`KEEP_FP32.update(names)`) and read where modules are wrapped: its literal
    // `set()` is not what the wrap loop sees, so the condition is undecided, not always false.
    const text = [
      'from torch.distributed.fsdp import fully_shard',
      'KEEP_FP32: set[str] = set()',
      'WRAPPED = []',
      '',
      'def register(names):',
      '    KEEP_FP32.update(names)',
      '',
      'def remember(m):',
      '    WRAPPED.append(m)',
      '',
      'def shard_fp32(model):',
      '    for m in model.modules():',
      '        if type(m).__name__ in KEEP_FP32:',
      '            fully_shard(m)',
      '        if len(WRAPPED) > 0:',
      '            fully_shard(m)',
      '    fully_shard(model)',
      '',
    ].join('\n');
    assert.deepEqual(
      (await lint(text)).filter((f) => f.rule === 'FSDP008'),
      [],
    );
    // Bound and never changed, the same set is known empty: the wrap never runs.
    const fixed = text.replace('    KEEP_FP32.update(names)', '    pass');
    assert.deepEqual(
      (await lint(fixed)).filter((f) => f.rule === 'FSDP008').map((f) => f.range.start.line + 1),
      [14],
    );
  });

  it('FSDP008: isinstance on named_modules() pairs and an always-false flag; quiet on the correct loop', async () => {
    const { findings } = await lintFixture('fsdp008_bad.py');
    assert.deepEqual(
      findings.map((f) => [f.rule, f.range.start.line + 1]),
      [
        ['FSDP008', 7],
        ['FSDP008', 11],
      ],
    );
    assert.match(findings[0]!.message, /yields \(name, module\) pairs/);
    const fixed = applyEdits(fixture('lint/fsdp008_bad.py'), preferredFix(findings[0]!).edits);
    assert.match(fixed, /for _, m in model\.named_modules\(\):/);
    assert.equal(
      findings[1]!.fixes.filter((f) => f.preferred).length,
      0,
      'no automatic fix for an always-false flag',
    );
    assert.deepEqual((await lintFixture('fsdp008_good.py')).findings, []);
  });

  it('every correct fixture of the project is quiet', async () => {
    for (const f of [
      'scan/torchtitan_style.py',
      'scan/hf_fsdp1.py',
      'scan/named_modules.py',
      'scan/forms.py',
      'scan/fsdp1_forms.py',
    ]) {
      const text = fixture(f);
      assert.deepEqual(
        (await lint(text)).map((x) => `${x.rule}:${x.range.start.line + 1}`),
        [],
        f,
      );
    }
  });
});

describe('suppression and settings', () => {
  it('honours # noqa: CODE and a bare # noqa', async () => {
    assert.deepEqual((await lintFixture('noqa.py')).findings, []);
  });

  it('offers a fix that adds # noqa: CODE', async () => {
    const { text, findings } = await lintFixture('fsdp007_bad.py');
    const fix = findings[0]!.fixes.find((f) => /Suppress/.test(f.title))!;
    const fixed = applyEdits(text, fix.edits);
    assert.match(fixed.split('\n')[3]!, /\) {2}# noqa: FSDP007$/);
    assert.deepEqual(await lint(fixed), []);
  });

  it('reports one finding of a rule at one range', async () => {
    const twice: Rule = {
      ...RULES[0]!,
      check: (ctx) =>
        ['first', 'second'].map((message) => ({ range: ctx.facts.calls[0]!.range, message, fixes: [] })),
    };
    const text = 'from torch.distributed.fsdp import fully_shard\nfully_shard(model)\n';
    const findings = lintFacts({ facts: await scanSource(text), text, options: DEFAULT_LINT_OPTIONS }, [
      twice,
    ]);
    assert.deepEqual(
      findings.map((f) => f.message),
      ['first'],
    );
  });

  it('changes a severity or turns a rule off', async () => {
    const text = fixture('lint/fsdp007_bad.py');
    assert.equal((await lint(text, { rules: { FSDP007: 'error' } }))[0]?.severity, 'error');
    assert.deepEqual(await lint(text, { rules: { FSDP007: 'off' } }), []);
  });
});

describe('rules documentation', () => {
  it('docs/rules.md is generated from the registry (run `npm run docs:rules` after changing a rule)', () => {
    const doc = fs.readFileSync(path.join(ROOT, 'docs', 'rules.md'), 'utf8');
    assert.equal(doc, renderRulesDoc(RULES));
  });

  it('every rule has an id, a name, a rationale and both examples', () => {
    const ids = new Set<string>();
    for (const r of RULES) {
      assert.match(r.id, /^FSDP\d{3}$/);
      assert.ok(!ids.has(r.id), `duplicate ${r.id}`);
      ids.add(r.id);
      assert.match(r.name, /^[a-z0-9-]+$/);
      assert.ok(r.rationale.length > 100 && r.example.bad && r.example.good);
    }
  });
});

describe('SARIF', () => {
  it('validates against the SARIF 2.1.0 schema, with rules and help links', async () => {
    const { findings } = await lintFixture('fsdp001_bad.py');
    const log = toSarif([{ uri: 'train/fsdp001_bad.py', findings }], RULES, {
      version: '1.2.3',
      docsUrl: 'https://example.org/rules.md',
      srcRoot: path.join(ROOT, 'test'),
    });
    const srcRoot = log.runs[0]!.originalUriBaseIds?.['%SRCROOT%']?.uri ?? '';
    assert.match(srcRoot, /^file:\/\/\/.*\/test\/$/, 'an absolute base URI ending in a slash');
    const schemaPath = require.resolve('@microsoft/sarif-matcher-utils/lib/schemas/sarif-2.1.0-rtm.5.json', {
      paths: [ROOT],
    });
    const schema = JSON.parse(fs.readFileSync(schemaPath, 'utf8')) as Record<string, unknown>;
    // The published schema names itself with draft-04's `id`; Ajv (draft-07) wants `$id`.
    delete schema.$schema;
    if (typeof schema.id === 'string') {
      schema.$id = schema.id;
      delete schema.id;
    }
    const ajv = new Ajv({ strict: false, allErrors: true, unicodeRegExp: false });
    const validate = ajv.compile(schema);
    assert.ok(validate(log), JSON.stringify(validate.errors, null, 2));
    // The validator does check: a result without a message, or a run without its tool, is rejected.
    assert.equal(validate({ ...log, runs: [{ ...log.runs[0], tool: undefined }] }), false);
    assert.equal(
      validate({ version: '2.1.0', runs: [{ tool: log.runs[0]!.tool, results: [{ ruleId: 'FSDP001' }] }] }),
      false,
    );
    const run = log.runs[0]!;
    assert.equal(run.tool.driver.rules?.length, RULES.length);
    assert.equal(
      run.tool.driver.rules?.find((x) => x.id === 'FSDP001')?.helpUri,
      'https://example.org/rules.md#fsdp001-missing-root-wrap',
    );
    const r = run.results![0]!;
    assert.equal(r.ruleId, 'FSDP001');
    assert.equal(r.level, 'error');
    assert.deepEqual(r.locations![0]!.physicalLocation!.region, {
      startLine: 8,
      startColumn: 9,
      endLine: 8,
      endColumn: 80,
    });
  });
});

describe('extension manifest', () => {
  it('offers a severity setting for every rule', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
      contributes: {
        configuration: { properties: Record<string, { properties?: Record<string, unknown> }> };
      };
    };
    const props = pkg.contributes.configuration.properties['fsdpLens.lint.rules']?.properties ?? {};
    // Rules the editor never reports (its Python support shows them) have no editor setting.
    assert.deepEqual(
      Object.keys(props).sort(),
      RULES.filter((r) => !r.commandLineOnly)
        .map((r) => r.id)
        .sort(),
    );
  });
});

describe('lint rules that check values', () => {
  it('FSDP006: an int reshard_after_forward that does not divide the mesh, and the int 1', async () => {
    const text = [
      'from torch.distributed.device_mesh import init_device_mesh',
      'from torch.distributed.fsdp import fully_shard',
      'mesh = init_device_mesh("cuda", (2, 8), mesh_dim_names=("replicate", "shard"))',
      'for layer in model.layers:',
      '    fully_shard(layer, mesh=mesh, reshard_after_forward=3)',
      'for layer in model.heads:',
      '    fully_shard(layer, mesh=mesh, reshard_after_forward=1)',
      'for layer in model.blocks:',
      '    fully_shard(layer, mesh=mesh, reshard_after_forward=4)',
      'fully_shard(model, mesh=mesh)',
      '',
    ].join('\n');
    const findings = (await lint(text)).filter((f) => f.rule === 'FSDP006');
    assert.deepEqual(
      findings.map((f) => f.range.start.line + 1),
      [5, 7],
    );
    assert.match(findings[0]!.message, /does not divide the shard group size 8 .*ValueError/);
    assert.match(findings[1]!.message, /like reshard_after_forward=False/);
  });

  it('FSDP009: torch.nn.utils.clip_grad_norm_ on an FSDP1 model; the fix calls the root method', async () => {
    const text = [
      'import torch',
      'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP',
      'model = FSDP(model, auto_wrap_policy=policy)',
      'torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)',
      '',
    ].join('\n');
    const findings = await lint(text);
    assert.deepEqual(
      findings.map((f) => f.rule),
      ['FSDP009'],
    );
    assert.equal(
      applyEdits(text, preferredFix(findings[0]!).edits).split('\n')[3],
      'model.clip_grad_norm_(max_norm=1.0)',
    );
    // FSDP2 gradients are DTensors: the plain function is right there.
    const fsdp2 =
      'import torch\nfrom torch.distributed.fsdp import fully_shard\nfully_shard(model)\ntorch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n';
    assert.deepEqual(await lint(fsdp2), []);
  });
});

describe('lint rules that narrow by isinstance', () => {
  const head = [
    'import torch',
    'from torch.distributed.fsdp import FSDPModule',
    'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP',
    'from torch.distributed.fsdp import FullyShardedDataParallel',
    'model = FSDP(model, auto_wrap_policy=policy)',
    '',
  ];
  const rules = async (body: string[]) =>
    (await lint([...head, ...body, ''].join('\n'))).map((f) => `${f.rule}:${f.range.start.line + 1}`);

  it('FSDP009: quiet where an isinstance check says the model is not an FSDP1 module', async () => {
    const cases = [
      [
        'def step(model):',
        '    if isinstance(model, FSDP):',
        '        model.clip_grad_norm_(1.0)',
        '    else:',
        '        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)',
      ],
      [
        'def step(model):',
        '    if not isinstance(model, FullyShardedDataParallel):',
        '        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)',
      ],
      [
        'def step(model):',
        '    if isinstance(model, (FSDP, FullyShardedDataParallel)):',
        '        model.clip_grad_norm_(1.0)',
        '        return',
        '    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)',
      ],
      [
        'def step(model):',
        '    if isinstance(model, FSDPModule):',
        '        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)',
      ],
      [
        'def step(model):',
        '    if isinstance(model, torch.distributed.fsdp.FullyShardedDataParallel):',
        '        model.clip_grad_norm_(1.0)',
        '    elif True:',
        '        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)',
      ],
    ];
    for (const body of cases) assert.deepEqual(await rules(body), [], body.join('\n'));
  });

  it('FSDP009: still reported where the model is FSDP1, or where the check is about another object', async () => {
    assert.deepEqual(
      await rules([
        'def step(model):',
        '    if isinstance(model, FSDP):',
        '        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)',
      ]),
      ['FSDP009:9'],
    );
    assert.deepEqual(
      await rules([
        'def step(model, other):',
        '    if not isinstance(other, FSDP):',
        '        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)',
      ]),
      ['FSDP009:9'],
    );
  });

  it('FSDP009: quiet in the arm of an `if` whose other arm clips with the FSDP1 method', async () => {
    // The code already chooses by FSDP version: the method where the model is FSDP1's, the function elsewhere.
    const cases = [
      [
        'class Runner:',
        '    def clip(self, parameters, max_norm):',
        '        for model in self.models:',
        '            if not self.is_fsdp2:',
        '                return model.clip_grad_norm_(max_norm)',
        '            else:',
        '                return torch.nn.utils.clip_grad_norm_(parameters, max_norm)',
      ],
      [
        'def step(model, legacy):',
        '    if legacy:',
        '        model.clip_grad_norm_(1.0)',
        '    else:',
        '        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)',
      ],
    ];
    for (const body of cases) assert.deepEqual(await rules(body), [], body.join('\n'));
    // After the `if` (both arms fall through to it), or when the method clips another object: reported.
    assert.deepEqual(
      await rules([
        'def step(model, parameters, legacy):',
        '    if legacy:',
        '        model.clip_grad_norm_(1.0)',
        '    torch.nn.utils.clip_grad_norm_(parameters, 1.0)',
      ]),
      ['FSDP009:10'],
    );
    assert.deepEqual(
      await rules([
        'def step(model, other, legacy):',
        '    if legacy:',
        '        other.clip_grad_norm_(1.0)',
        '    else:',
        '        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)',
      ]),
      ['FSDP009:11'],
    );
  });

  it('FSDP009: an FSDP1 wrap in one arm says nothing of a clip in the other', async () => {
    const text = [
      'import torch',
      'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, fully_shard',
      'def setup(model, legacy):',
      '    if legacy:',
      '        model = FSDP(model, auto_wrap_policy=policy)',
      '    else:',
      '        fully_shard(model)',
      '        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)',
      '    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)',
      '',
    ].join('\n');
    // The clip after the `if` runs after either wrap: reported; the one in the FSDP2 arm is not.
    assert.deepEqual(
      (await lint(text)).map((f) => `${f.rule}:${f.range.start.line + 1}`),
      ['FSDP009:9'],
    );
  });
});

describe('rules that need the model', () => {
  async function lintWithModel(name: string) {
    const text = fixture(`lint/${name}`);
    const facts = await scanSource(text, path.join(FIXTURES, 'lint', name));
    const project = new Project([path.join(FIXTURES, 'lint')], await grammar(), diskFS);
    return analyzeFacts(facts, text, { lint: DEFAULT_LINT_OPTIONS, estimate: { project } }).findings;
  }

  it('FSDP020: a check_fn for a class the model lacks; the estimate keeps every activation', async () => {
    const findings = await lintWithModel('fsdp020_bad.py');
    const mine = findings.filter((f) => f.rule === 'FSDP020');
    assert.deepEqual(
      mine.map((f) => [f.range.start.line + 1, f.severity]),
      [[12, 'warning']],
    );
    assert.match(
      mine[0]!.message,
      /admits only GPT2Block, which LlamaForCausalLM does not have.*its block class, LlamaDecoderLayer/,
    );
    assert.deepEqual(
      (await lintWithModel('fsdp020_good.py')).filter((f) => f.rule === 'FSDP020'),
      [],
    );
    // The estimate does not count the checkpointing that never happens.
    const r = await cli('estimate', path.join(FIXTURES, 'lint', 'fsdp020_bad.py'), '--json');
    const ac = (JSON.parse(r.out) as { assumptions: { key: string; value: unknown }[] }).assumptions.find(
      (a) => a.key === 'checkpointing',
    );
    assert.equal(ac?.value, 'none');
    const good = await cli('estimate', path.join(FIXTURES, 'lint', 'fsdp020_good.py'), '--json');
    assert.equal(
      (JSON.parse(good.out) as { assumptions: { key: string; value: unknown }[] }).assumptions.find(
        (a) => a.key === 'checkpointing',
      )?.value,
      'full',
    );
  });

  it('FSDP021: LoRA in frozen layers under FSDP1 without use_orig_params; the fix passes it and the finding goes', async () => {
    const findings = (await lintWithModel('fsdp021_bad.py')).filter((f) => f.rule === 'FSDP021');
    assert.deepEqual(
      findings.map((f) => [f.range.start.line + 1, f.severity]),
      [[13, 'error']],
    );
    // LoRA r=16: q_proj 16 x (2048 + 2048) + v_proj 16 x (2048 + 512) = 106,496 trainable per layer; the layer's
    // own 60,821,504 (Llama 3.2 1B: attention 10,485,760, MLP 3 x 2048 x 8192, two norms of 2048) frozen.
    assert.match(
      findings[0]!.message,
      /holds 106,496 trainable and 60,821,504 frozen parameters \(and 15 more units/,
    );
    const dir = tempDir('fsdp-lens-021-');
    const fixed = path.join(dir, 'fixed.py');
    fs.writeFileSync(fixed, applyEdits(fixture('lint/fsdp021_bad.py'), preferredFix(findings[0]!).edits));
    assert.match(
      fs.readFileSync(fixed, 'utf8'),
      /FSDP\(model, auto_wrap_policy=policy, use_orig_params=True\)/,
    );
    const again = await cli('lint', fixed);
    assert.doesNotMatch(again.out, /FSDP021/);
    assert.deepEqual(
      (await lintWithModel('fsdp021_good.py')).filter((f) => f.rule === 'FSDP021'),
      [],
    );
  });

  it('FSDP010: a transformer policy naming a class the model does not have', async () => {
    const f = (await lintWithModel('fsdp010_bad.py')).filter((x) => x.rule === 'FSDP010');
    assert.equal(f.length, 1);
    assert.match(f[0]!.message, /GPT2Block is not a class of meta-llama\/Llama-3\.2-1B/);
  });

  it('FSDP011: a root below the model leaves the head outside every unit', async () => {
    const f = (await lintWithModel('fsdp011_bad.py')).filter((x) => x.rule === 'FSDP011');
    assert.equal(f.length, 1);
    // Llama 3.1 8B's untied head: 128,256 x 4,096 parameters outside model.model.
    assert.match(f[0]!.message, /^525,336,576 parameters \(lm_head\) are in no FSDP unit/);
  });

  it('FSDP012: fully_shard on a ModuleList', async () => {
    const f = (await lintWithModel('fsdp012_bad.py')).filter((x) => x.rule === 'FSDP012');
    assert.equal(f.length, 1);
    assert.match(f[0]!.message, /is a ModuleList, which has no forward/);
  });

  it('FSDP012: an `or` of isinstance tests admits only its classes, so no container reaches the wrap', async () => {
    assert.deepEqual(
      (await lintWithModel('fsdp012_or_good.py')).map((x) => x.rule),
      [],
    );
    const facts = await scanSource(fixture('lint/fsdp012_or_good.py'));
    assert.deepEqual(facts.calls[0]!.classFilter, ['LlamaMLP', 'LlamaDecoderLayer', 'Dropout']);
    // A container among the classes still reaches the wrap.
    const text = fixture('lint/fsdp012_or_good.py').replace('nn.Dropout', 'nn.ModuleList');
    // On disk as the project reads it: each module's tests are evaluated in the file's own text.
    const dir = tempDir('fsdp-lens-or-');
    const named = path.join(dir, 'fsdp012_or_container.py');
    fs.writeFileSync(named, text);
    const project = new Project([dir], await grammar(), diskFS);
    const f = analyzeFacts(await scanSource(text, named), text, {
      lint: DEFAULT_LINT_OPTIONS,
      estimate: { project },
    }).findings;
    assert.deepEqual(
      f.map((x) => x.rule),
      ['FSDP012'],
    );
  });

  it('FSDP013: the tied embedding in one unit, the head in another', async () => {
    const f = (await lintWithModel('fsdp013_bad.py')).filter((x) => x.rule === 'FSDP013');
    assert.equal(f.length, 1);
    assert.match(f[0]!.message, /lm_head\.weight is tied to model\.embed_tokens\.weight/);
  });

  it('FSDP014: one unit with fp32 and bf16 trainable parameters', async () => {
    const f = (await lintWithModel('fsdp014_bad.py')).filter((x) => x.rule === 'FSDP014');
    assert.equal(f.length, 1);
    assert.match(f[0]!.message, /mixes trainable parameters of float32 and bfloat16/);
  });

  it('FSDP014: a submodule cast with .to(dtype), or built with dtype=, before the wrap', async () => {
    for (const name of ['fsdp014_cast_bad.py', 'fsdp014_factory_bad.py']) {
      const f = (await lintWithModel(name)).filter((x) => x.rule === 'FSDP014');
      assert.equal(f.length, 1, name);
      assert.match(f[0]!.message, /mixes trainable parameters of float32 and bfloat16/);
    }
  });

  it('FSDP015: Llama 3.1 70B in fp32 with AdamW does not fit 8 H100s', async () => {
    const f = (await lintWithModel('fsdp015_bad.py')).filter((x) => x.rule === 'FSDP015');
    assert.equal(f.length, 1);
    assert.equal(f[0]!.range.start.line, 7, 'on the root wrap');
    // The sharded state alone: 70,553,706,496 params x 16 B (fp32 params, grads, two Adam states) / 8 = 141 GB.
    assert.match(
      f[0]!.message,
      /^Does not fit an NVIDIA H100 SXM 80GB .*: the estimated peak 1\d\d GB per GPU/,
    );
    assert.match(f[0]!.message, /NVIDIA H100 SXM 80GB \(8 GPUs, micro-batch 1, sequence 4096\)/);
    const n = Number(/smallest world size that fits is (\d+) GPUs/.exec(f[0]!.message)?.[1]);
    // The state must fit in what an H100 leaves for the peak, (81,559 MiB - 1 GiB) / 1.1 = 76.8 GB:
    // 70,553,706,496 x 16 / n <= 76.8e9 needs n >= 15. At 64 GPUs the state is 17.6 GB; the fp32 root kept gathered
    // (2.10B params x 4 B = 8.4 GB), two fp32 blocks (2 x 3.42 GB), checkpointed activations (80 x 4096 x 8192 x 2 B
    // = 5.4 GB and the running block) and gradient buffers leave room: n <= 64.
    assert.ok(n >= 15 && n <= 64, `smallest world size ${n}`);
    assert.deepEqual(
      (await lintWithModel('fsdp015_good.py')).filter((x) => x.rule === 'FSDP015'),
      [],
      'at 32 GPUs in bf16 the state is 35.3 GB per GPU and gathered units half as large: it fits',
    );
  });

  it('stays quiet on correct scripts', async () => {
    for (const name of ['fsdp001_good.py', 'fsdp003_good.py', 'fsdp004_good.py', 'fsdp008_good.py']) {
      const f = (await lintWithModel(name)).filter((x) => Number(x.rule.slice(4)) >= 10);
      assert.deepEqual(
        f.map((x) => x.rule),
        [],
        name,
      );
    }
  });

  it('FSDP011-FSDP014: the corrected scripts resolve the same models and are quiet', async () => {
    async function analyzeWithModel(name: string) {
      const text = fixture(`lint/${name}`);
      const facts = await scanSource(text, path.join(FIXTURES, 'lint', name));
      const project = new Project([path.join(FIXTURES, 'lint')], await grammar(), diskFS);
      const a = analyzeFacts(facts, text, { lint: DEFAULT_LINT_OPTIONS, estimate: { project } });
      const e = a.estimate;
      assert.ok(e?.ok, `${name}: the model is resolved (${e && !e.ok ? e.reason : 'no estimate'})`);
      return { rules: a.findings.map((f) => f.rule), estimate: e.estimate };
    }

    // Llama 3.1 8B: vocabulary 128,256, hidden size 4,096, head not tied to the embedding.
    const fsdp011 = await analyzeWithModel('fsdp011_good.py');
    assert.ok(!fsdp011.rules.includes('FSDP011'));
    assert.equal(fsdp011.estimate.unowned.params, 0);
    const root8b = fsdp011.estimate.units.find((u) => u.isRoot)!;
    // The root holds the embedding, the final norm and lm_head: 2 x 128,256 x 4,096 + 4,096.
    assert.equal(root8b.params, 2 * 128_256 * 4_096 + 4_096);
    assert.equal(fsdp011.estimate.units.filter((u) => !u.isRoot).length, 32, '32 decoder layers');

    // Llama 3.2 1B: 16 layers, hidden 2,048, MLP 8,192, 32 query heads and 8 key/value heads of 64.
    const fsdp012 = await analyzeWithModel('fsdp012_good.py');
    assert.ok(!fsdp012.rules.includes('FSDP012'));
    assert.ok(fsdp012.estimate.units.every((u) => !u.classNames.includes('ModuleList')));
    const layers = fsdp012.estimate.units.filter((u) => u.classNames.includes('LlamaDecoderLayer'));
    assert.equal(layers.length, 16);
    // q and o 2,048 x 2,048 each, k and v 2,048 x 512 each, gate/up/down 3 x 2,048 x 8,192, two norms of 2,048.
    const perLayer = 2 * 2_048 * 2_048 + 2 * 2_048 * 512 + 3 * 2_048 * 8_192 + 2 * 2_048;
    assert.ok(layers.every((u) => u.params === perLayer));

    // The tied embedding and head in one list wrap: one unit holding both, the shared weight counted once.
    const fsdp013 = await analyzeWithModel('fsdp013_good.py');
    assert.ok(!fsdp013.rules.includes('FSDP013'));
    const tied = fsdp013.estimate.units.find((u) => u.modules.includes('lm_head'));
    assert.deepEqual(tied?.modules.slice().sort(), ['lm_head', 'model.embed_tokens']);
    assert.equal(tied?.params, 128_256 * 2_048);

    // Net cast whole to bfloat16 before the wrap: body 64 x 64 + 64, head 10 x 64 + 10, all bfloat16.
    const fsdp014 = await analyzeWithModel('fsdp014_good.py');
    assert.ok(!fsdp014.rules.includes('FSDP014'));
    assert.equal(fsdp014.estimate.units.length, 1);
    assert.equal(fsdp014.estimate.units[0]!.params, 64 * 64 + 64 + 10 * 64 + 10);
    assert.deepEqual(fsdp014.estimate.units[0]!.trainableDtypes, ['bfloat16']);

    // model.half() casts every floating-point parameter, the bf16 head included; the int64 counter stays int64.
    // Embedding 100 x 64, body 64 x 64 + 64, head 100 x 64.
    const half = await analyzeWithModel('fsdp014_cast_good.py');
    assert.ok(!half.rules.includes('FSDP014'));
    assert.equal(half.estimate.units[0]!.params, 100 * 64 + 64 * 64 + 64 + 100 * 64);
    assert.deepEqual(half.estimate.units[0]!.trainableDtypes, ['float16']);

    // A list of stem modules wrapped one by one is a unit per stem, not a container missing its root: Linear(16, 32)
    // and Linear(1, 32) alone, each Block's Linear(32, 32), and the root keeps only `out`, Linear(32, 16).
    const listed = await analyzeWithModel('fsdp001_listed_good.py');
    const unitParams = listed.estimate.units.map((u) => [u.modules.join('+'), u.params]);
    assert.deepEqual(unitParams, [
      ['patch', 16 * 32 + 32],
      ['clock', 1 * 32 + 32],
      ['blocks.0', 32 * 32 + 32],
      ['blocks.1', 32 * 32 + 32],
      ['blocks.2', 32 * 32 + 32],
      ['', 32 * 16 + 16],
    ]);

    for (const [name, r] of Object.entries({ fsdp011, fsdp012, fsdp013, fsdp014, half, listed }))
      assert.deepEqual(r.rules, [], `${name}_good.py is clean`);
  });
});

describe('findings in one line', () => {
  it('every finding of the fixtures has a plain summary of at most 120 characters', async () => {
    const r = await cli('lint', FIXTURES, path.join(ROOT, 'examples'), '--format', 'json');
    const rows = JSON.parse(r.out) as { code: string; summary: string; message: string }[];
    const rules = new Set(rows.map((x) => x.code));
    // Most rules fire on the fixtures, so the check covers them.
    assert.ok(rules.size >= 20, [...rules].join(' '));
    for (const x of rows) {
      assert.ok(x.summary.length <= 120, `${x.code}: ${x.summary}`);
      assert.doesNotMatch(x.summary, /`/, `${x.code}: ${x.summary}`);
      assert.ok(!x.summary.endsWith('…'), `${x.code} is cut: ${x.summary}`);
    }
  });

  it("takes a message's first sentence, or the part before its colon, when a rule gives no summary", () => {
    assert.equal(summaryOf('Short and `plain`. Then the why.'), 'Short and plain');
    // 84 characters before the colon, 184 in the sentence.
    const long = `${'a '.repeat(40)}stop: ${'b '.repeat(50)}end`;
    assert.equal(summaryOf(`${long}. More.`), `${'a '.repeat(40)}stop`);
  });
});
