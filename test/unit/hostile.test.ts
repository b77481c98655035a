// Hostile and pathological input: every evaluation bounded, costs linear in the file, unknown values instead of
// allocations. Each reproducer is written here; large ones are generated at test time.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
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
import { commandLineHost } from '../../src/cli/files';
import { hoverMarkdown } from '../../src/core/report/hover';
import { REPRODUCERS, runCli, writeTree, type Entry } from './hostile-cases';
import { grammar, ROOT, tempDir } from './helpers';

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
    const dir = tempDir('fsdp-lens-hostile-');
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

describe('hostile workspaces on disk: the command line ends each within 5 s and 1.5 GB, with a message', () => {
  const CLI = path.join(ROOT, 'dist', 'cli.js');
  for (const r of REPRODUCERS)
    it(r.id, { timeout: 60_000 }, async () => {
      const root = writeTree(r);
      try {
        const run = runCli(CLI, r, root);
        const said = `${r.args.join(' ')} → ${run.code}: ${run.out.slice(0, 600)}`;
        assert.ok(r.codes.includes(run.code ?? -1), `exit status: ${said}`);
        assert.ok(run.ms < 5000, `${run.ms.toFixed(0)} ms: ${said}`);
        assert.ok(run.rssMB < 1536, `${run.rssMB.toFixed(0)} MB: ${said}`);
        if (r.says) assert.match(run.out, r.says, said);
        if (r.never) assert.doesNotMatch(run.out, r.never, said);
        assert.doesNotMatch(run.out, /internal error|TypeError|RangeError/, said);
        // The same files through the core entry in this process: no stage may fail.
        const g = await grammar();
        const file = path.join(root, r.args[1]!);
        if (!file.endsWith('.py')) return;
        const { host, projectRoot } = commandLineHost(file);
        const project = new Project([projectRoot!], g, host.fs);
        try {
          const a = analyzeDocument(
            g,
            { file, text: fs.readFileSync(file, 'utf8') },
            { lint: DEFAULT_LINT_OPTIONS, estimate: { project, host } },
          );
          assert.deepEqual(a.faults, [], r.id);
        } finally {
          project.dispose();
        }
      } finally {
        fs.rmSync(root, { recursive: true, force: true });
      }
    });
});

describe('fuzzing whole project trees', () => {
  // Pieces a project is made of, each a little wrong in its own way; a tree is a random choice of them.
  const WRAP = 'from torch.distributed.fsdp import fully_shard';
  const pieces: Record<string, Entry[]> = {
    'train.py': [
      `${WRAP}\nfrom model import Net\nmodel = Net()\nfor b in model.blocks:\n    fully_shard(b)\nfully_shard(model)\n`,
      `${WRAP}\nfrom pkg.helper import shard\nfrom model import Net\nshard(Net(4))\n`,
      `${WRAP}\n# fsdp: config=cfg/config.json world_size=16\nfully_shard(model)\n`,
      `${WRAP}\n# fsdp: model=meta-llama/Llama-3.1-8B batch=2 seq=oops\nfor l in model.model.layers:\n    fully_shard(l\n`,
      `${WRAP}\nimport model\nx = model.Net\nfully_shard(x())\n`,
    ],
    'model.py': [
      'import torch.nn as nn\nfrom model import Net\nclass Net(nn.Module):\n    def __init__(self, n=2):\n        super().__init__()\n        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(n)])\n',
      'import torch.nn as nn\nfrom pkg.helper import *\nclass Net(Net):\n    pass\n',
      'import torch.nn as nn\nclass Net(nn.Module):\n    def __init__(self, n=10**9):\n        super().__init__()\n        self.blocks = nn.ModuleList([nn.Linear(n, n) for _ in range(n)])\n',
      '\u0000\u0001binary',
    ],
    'pkg/helper.py': [
      `${WRAP}\ndef shard(model):\n    for b in model.blocks:\n        fully_shard(b)\n    fully_shard(model)\n`,
      'from train import *\nfrom model import *\n',
      `${WRAP}\ndef shard(model):\n    shard(model)\n`,
    ],
    'pkg/__init__.py': ['', 'from .helper import shard\n'],
    'pyproject.toml': [
      '',
      '[tool.fsdp-lens]\nworld_size = "x"\n',
      '[tool.fsdp-lens\n',
      '[tool.fsdp-lens]\nconfig = "../../../etc/passwd"\n',
    ],
    'cfg/config.json': [
      config1(),
      '{"model_type": "llama", "num_hidden_layers": -1}',
      '[[[[',
      '{"model_type": 5}',
    ],
    'run.sh': [
      'torchrun --nproc_per_node=8 train.py\n',
      'torchrun --nproc_per_node=0 --nnodes=x train.py\n',
      '\\\n\\\n\\\n',
    ],
    '.vscode/launch.json': [
      '[1, {"configurations": {}}]',
      '{"configurations": [{"program": "torchrun", "args": [1, 2]}]}',
      '{',
    ],
    'accelerate.yaml': [
      'distributed_type: FSDP\nfsdp_config: [1, 2]\n',
      'fsdp_config:\n  fsdp_version: "x"\n',
      '&a [*a]',
    ],
    link: [{ link: '..' }, { link: '/etc' }, { link: 'link' }, { link: 'pkg' }],
  };
  function config1(): string {
    return JSON.stringify({
      model_type: 'llama',
      hidden_size: 64,
      intermediate_size: 128,
      num_attention_heads: 4,
      num_hidden_layers: 2,
      vocab_size: 100,
    });
  }

  it('any tree: no stage fails, every analysis ends within its budget', { timeout: 240_000 }, async () => {
    const g = await grammar();
    const names = Object.keys(pieces);
    const tree = fc.record(
      Object.fromEntries(names.map((n) => [n, fc.option(fc.nat(pieces[n]!.length - 1), { nil: undefined })])),
    );
    await fc.assert(
      fc.asyncProperty(tree, async (choice) => {
        const files: Record<string, Entry> = {};
        for (const [n, i] of Object.entries(choice)) if (i !== undefined) files[n] = pieces[n]![i as number]!;
        files['train.py'] ??= pieces['train.py']![0]!;
        const root = writeTree({ id: 'fuzz', files: () => files, args: [], codes: [] });
        try {
          for (const rel of ['train.py', 'pkg/helper.py', 'accelerate.yaml', 'run.sh', 'cfg/config.json']) {
            const file = path.join(root, rel);
            if (!fs.existsSync(file) || fs.lstatSync(file).isSymbolicLink()) continue;
            const { host, projectRoot } = commandLineHost(file);
            const project = new Project([projectRoot!], g, host.fs);
            try {
              const started = performance.now();
              const a = analyzeDocument(
                g,
                { file, text: fs.readFileSync(file, 'latin1') },
                { lint: DEFAULT_LINT_OPTIONS, estimate: { project, host } },
              );
              assert.deepEqual(a.faults, [], `${rel} of ${JSON.stringify(choice)}`);
              assert.ok(performance.now() - started < 5000, `${rel} of ${JSON.stringify(choice)}`);
            } finally {
              project.dispose();
            }
          }
        } finally {
          fs.rmSync(root, { recursive: true, force: true });
        }
      }),
      { seed: SEED, numRuns: 60 },
    );
  });
});

describe('no markup from user text', () => {
  it('a module name with a carriage return, a command link and an image stays text in the hover', async () => {
    const g = await grammar();
    const file = path.join(ROOT, 'test', 'fixtures', 'workspace', 'injection', 'train.py');
    const { host, projectRoot } = commandLineHost(file);
    const project = new Project([projectRoot!], g, host.fs);
    try {
      const a = analyzeDocument(
        g,
        { file, text: fs.readFileSync(file, 'utf8') },
        { lint: null, estimate: { project, host } },
      );
      assert.ok(a.estimate?.ok, a.estimate && !a.estimate.ok ? a.estimate.reason : '');
      const e = a.estimate.estimate;
      assert.ok(
        e.units.some((u) => u.name.includes('\r')),
        'the attacker text reached the unit name',
      );
      for (const call of a.facts.calls) {
        const md = hoverMarkdown(call, e, 'GB', {});
        // No line break of any kind survives, so no code span or table row can end early.
        assert.doesNotMatch(md.replace(/\n/g, ''), /[\r\u2028\u2029\u0085]/);
        // Outside code spans, no link or image syntax is left unescaped.
        const prose = md.replace(/`[^`\n]*`/g, '');
        assert.doesNotMatch(prose, /(^|[^\\])!?\[[^\]]*(^|[^\\])\]\(/);
        assert.doesNotMatch(prose, /(^|[^\\])command:/);
      }
    } finally {
      project.dispose();
    }
  });
});
