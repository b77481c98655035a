// Hostile and pathological input: every evaluation bounded, costs linear in the file, unknown values instead of
// allocations. Each reproducer is written here; large ones are generated at test time.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { Parser } from 'web-tree-sitter';
import { isUnder } from '../../src/core/analysis/paths';
import { PathIndex } from '../../src/core/analysis/wrapCalls';
import type { WrapCall } from '../../src/core/analysis/facts';
import { analyzeDocument } from '../../src/core/entry/analyze';
import { DEFAULT_LINT_OPTIONS } from '../../src/core/lint/types';
import { commentRuns } from '../../src/core/parsing/python';
import { Project } from '../../src/core/project/project';
import { nodeHost } from '../../src/host/disk';
import { grammar } from './helpers';

const SEED = 20261201;

/** The tree's shape without its comment nodes. */
function shapeWithoutComments(sexp: string): string {
  return sexp.replace(/ ?\(comment\)/g, '');
}

describe('parsing cost is linear in the file', () => {
  it('a long run of comment lines is blanked for the parser; code, strings and annotations stay', async () => {
    const g = await grammar();
    const run = (n: number, indent = '') =>
      Array.from({ length: n }, (_, i) => `${indent}# note ${i}`).join('\n');
    const text = [
      'import torch',
      'x = 1',
      run(200),
      '# fsdp: world_size=16',
      run(50),
      'def f(model):',
      '    y = 2',
      run(100, '    '),
      '    # noqa: FSDP001',
      '    return y',
      's = """',
      run(100),
      '"""',
      '',
    ].join('\n');
    const blanked = commentRuns(text);
    // 200 + 50 comments in the first run (the annotation kept), 100 in the function, 100 inside the string.
    assert.equal(blanked.length, 200 + 50 + 100 + 100);
    const tree = g.parse(text);
    // The same tree as tree-sitter builds from the text as written, less the comment nodes of the blanked lines.
    const parser = new Parser();
    parser.setLanguage(g.language);
    const full = parser.parse(text)!;
    assert.equal(
      shapeWithoutComments(tree.rootNode.toString()),
      shapeWithoutComments(full.rootNode.toString()),
    );
    // The string keeps its text; the annotation and the noqa comment are still comments.
    const str = tree.rootNode.descendantForIndex(text.indexOf('# note 0', text.indexOf('s = """')));
    assert.match(str?.parent?.text ?? '', /# note 99/);
    for (const needle of ['# fsdp: world_size=16', '# noqa: FSDP001'])
      assert.equal(tree.rootNode.descendantForIndex(text.indexOf(needle))?.type, 'comment', needle);
    tree.delete();
    full.delete();
    parser.delete();
  });
});

describe('roots and their children', () => {
  it('the path index yields every call isUnder accepts', () => {
    const seg = fc.constantFrom('model', 'layers', 'attn', '0', '1', '*', '**', 'self', 'mlp');
    const path = fc.array(seg, { minLength: 1, maxLength: 5 });
    fc.assert(
      fc.property(fc.array(fc.array(path, { minLength: 1, maxLength: 2 }), { maxLength: 30 }), (pathSets) => {
        const calls = pathSets.map((paths) => ({ paths }) as unknown as WrapCall);
        const index = new PathIndex(calls);
        for (const c of calls) {
          const p = c.paths[0]!;
          const found = new Set(index.candidatesUnder(p));
          calls.forEach((d, j) => {
            if (d.paths.some((q) => isUnder(q, p)))
              assert.ok(found.has(j), `${p.join('.')} ⊐ ${d.paths[0]!.join('.')}`);
          });
        }
      }),
      { seed: SEED, numRuns: 300 },
    );
  });
});

describe('every evaluation is bounded', () => {
  /** Analyses `text` as `train.py` of a project on disk, with the editor's options. */
  async function analyze(text: string) {
    const g = await grammar();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fsdp-lens-hostile-'));
    try {
      fs.writeFileSync(path.join(dir, 'pyproject.toml'), '');
      const file = path.join(dir, 'train.py');
      fs.writeFileSync(file, text);
      const host = nodeHost();
      const project = new Project([dir], g, host.fs);
      const started = performance.now();
      const a = analyzeDocument(
        g,
        { file, text },
        { lint: DEFAULT_LINT_OPTIONS, estimate: { project, host } },
      );
      const ms = performance.now() - started;
      project.dispose();
      assert.deepEqual(a.faults, [], 'no stage failed');
      return { a, ms };
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }

  it('values that double on every line become unknown, never an allocation', async () => {
    const doubling = (init: string, op: string) =>
      [
        `from torch.distributed.fsdp import fully_shard`,
        `x = ${init}`,
        ...Array(40).fill(op),
        'fully_shard(model)',
      ].join('\n');
    for (const text of [
      doubling('[1]', 'x = x + x'),
      doubling('(1,)', 'x = x + x'),
      doubling("'ab'", 'x = x + x'),
      doubling('[1]', 'x = x * 2'),
      doubling("{'a': [1]}", "x['a'] = x['a'] + x['a']"),
      doubling('[1] * 100000', 'x = [*x, *x, *x, *x]'),
    ]) {
      const { ms } = await analyze(text);
      assert.ok(ms < 5000, `${ms} ms: ${text.split('\n')[2]}`);
    }
  });

  it('a nested comprehension that never ends stops at the budget and says so', async () => {
    const text = [
      'import torch.nn as nn',
      'from torch.distributed.fsdp import fully_shard',
      'class Net(nn.Module):',
      '    def __init__(self):',
      '        super().__init__()',
      '        xs = list(range(10000))',
      '        n = len([a for a in xs for b in xs for c in xs if a < 0])',
      '        self.fc = nn.Linear(8, 8)',
      'model = Net()',
      'fully_shard(model)',
    ].join('\n');
    const { a, ms } = await analyze(text);
    assert.ok(ms < 5000, `${ms} ms`);
    assert.match(
      a.incomplete ?? (a.estimate && !a.estimate.ok ? a.estimate.reason : ''),
      /budget|too complex/,
    );
  });
});
