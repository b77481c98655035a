// Fuzzing and properties: whatever people type, the analysis never throws, finishes within a bound, and never
// returns NaN, negative or infinite sizes. Random inputs come from fast-check with a fixed seed and a bounded
// number of runs, so a failure reproduces exactly.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { decodeSource, scanText } from '../../src/core/analysis/input';
import type { Estimate } from '../../src/core/estimator/types';
import { readFrameworkConfig } from '../../src/core/frameworks/read';
import { DEFAULT_LINT_OPTIONS } from '../../src/core/lint/types';
import { CATALOG, type HfConfig } from '../../src/core/model/catalog';
import { ConfigError, modelFromHfConfig } from '../../src/core/model/hf';
import { ParsedDocument, changeFor } from '../../src/core/parsing/document';
import { SourceFile } from '../../src/core/parsing/source';
import { analyzeFacts } from '../../src/core/entry/analyze';
import { Project } from '../../src/core/project/project';
import { estimateFile } from '../../src/core/resolve/analyze';
import { fixture, FIXTURES, grammar, ROOT, tempDir } from './helpers';
import { diskFS } from '../../src/host/disk';

const SEED = 20261129;
const params = (numRuns: number) => ({ seed: SEED, numRuns });

/** Every byte figure of an estimate is a finite, non-negative number. */
function assertSane(e: Estimate, what: string): void {
  const check = (v: unknown, where: string) => {
    if (typeof v === 'number') assert.ok(Number.isFinite(v) && v >= 0, `${what}: ${where} = ${v}`);
  };
  const walk = (o: unknown, where: string, depth = 0) => {
    if (depth > 6 || o === null || typeof o !== 'object') return check(o, where);
    for (const [k, v] of Object.entries(o)) {
      if (k === 'timeline' || k === 'gpu' || k === 'setup' || k === 'model') continue;
      walk(v, `${where}.${k}`, depth + 1);
    }
  };
  walk(e.perGpu, 'perGpu');
  walk(e.comms.perStep, 'comms.perStep');
  for (const u of e.units) walk(u, `unit ${u.name}`);
  for (const ev of e.timeline?.events ?? []) check(ev.total, `timeline ${ev.label}`);
  assert.ok(
    e.perGpu.peakBytes >= e.perGpu.persistentBytes * 0.999,
    `${what}: peak below the persistent state`,
  );
}

async function analyze(text: string, file = 'fuzz.py') {
  const g = await grammar();
  const facts = scanText(g, file, text);
  const r = analyzeFacts(facts, text, { lint: DEFAULT_LINT_OPTIONS, estimate: {} });
  if (r.estimate?.ok) assertSane(r.estimate.estimate, file);
  return r;
}

const SOURCES = ['workspace/train_fsdp2.py', 'scan/forms.py', 'scan/fsdp1_forms.py', 'scan/config_dict.py'];

describe('robustness: truncated and mutated Python', () => {
  it('truncation at every position of a fixture never throws', { timeout: 120_000 }, async () => {
    const text = fixture('workspace/train_fsdp2.py');
    for (let i = 0; i <= text.length; i++) await analyze(text.slice(0, i));
    // Other fixtures at every 7th position.
    for (const rel of SOURCES.slice(1)) {
      const t = fixture(rel);
      for (let i = 0; i <= t.length; i += 7) await analyze(t.slice(0, i), rel);
    }
  });

  it('random edits (insertions of Python tokens, deletions) never throw', { timeout: 120_000 }, async () => {
    const tokens = [
      '(',
      ')',
      '[',
      ']',
      '{',
      '}',
      ':',
      ',',
      '=',
      '**',
      '.',
      '\n',
      '    ',
      '"',
      "'",
      '#',
      '\\',
      'fully_shard(',
      'FSDP(',
      'model',
      'layer',
      'for ',
      ' in ',
      'if ',
      'def ',
      'class ',
      'lambda ',
      'None',
      'reshard_after_forward=',
      'mesh=',
      'mp_policy=',
      'torch.bfloat16',
      '2**64',
      '-1',
      '1e308',
      '\u0000',
      '\u00e9',
    ];
    const sources = SOURCES.map((s) => fixture(s));
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: sources.length - 1 }),
        fc.array(
          fc.record({
            at: fc.double({ min: 0, max: 1, noNaN: true }),
            del: fc.integer({ min: 0, max: 40 }),
            ins: fc.array(fc.constantFrom(...tokens), { maxLength: 6 }),
          }),
          { minLength: 1, maxLength: 8 },
        ),
        async (which, edits) => {
          let t = sources[which]!;
          for (const e of edits) {
            const i = Math.floor(e.at * t.length);
            t = t.slice(0, i) + e.ins.join('') + t.slice(i + e.del);
          }
          await analyze(t);
        },
      ),
      params(150),
    );
  });

  it('incremental re-parses through random edits agree with a fresh parse', { timeout: 60_000 }, async () => {
    const g = await grammar();
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.tuple(fc.double({ min: 0, max: 1, noNaN: true }), fc.nat(20), fc.string({ maxLength: 12 })),
          {
            minLength: 1,
            maxLength: 10,
          },
        ),
        async (edits) => {
          const doc = new ParsedDocument(g);
          let text = fixture('workspace/train_fsdp2.py');
          doc.parse(text, 0);
          let v = 0;
          for (const [at, del, ins] of edits) {
            const start = Math.floor(at * text.length);
            const end = Math.min(text.length, start + del);
            doc.applyChanges([changeFor(text, start, end, ins)]);
            text = text.slice(0, start) + ins + text.slice(end);
            const incremental = doc.parse(text, ++v).rootNode.toString();
            const fresh = g.parse(text);
            assert.equal(incremental, fresh.rootNode.toString());
            fresh.delete();
          }
          doc.dispose();
        },
      ),
      params(60),
    );
  });
});

describe('robustness: pathological Python', () => {
  it(
    'deep nesting, giant literals and towers of powers finish with a result',
    { timeout: 60_000 },
    async () => {
      const cases = [
        `x = ${'('.repeat(10_000)}1${')'.repeat(10_000)}\nfully_shard(model)\n`,
        `${Array.from({ length: 300 }, (_, i) => `${'    '.repeat(i)}if x:`).join('\n')}\n${'    '.repeat(300)}fully_shard(model)\n`,
        `n = 2**2**2**2**2**2**2\nfor layer in model.layers[:n]:\n    fully_shard(layer)\nfully_shard(model)\n`,
        `n = 10**1000000\nmesh = init_device_mesh("cuda", (n,))\nfully_shard(model, mesh=mesh)\n`,
        `s = "${'x'.repeat(1_000_000)}"\nfully_shard(model)\n`,
        `x = [${Array.from({ length: 50_000 }, (_, i) => i).join(', ')}]\nfully_shard(model)\n`,
        'cfg = dict()\ncfg["x"] = cfg\nfully_shard(model, **cfg)\n',
        'a = b\nb = a\nfully_shard(model, reshard_after_forward=a)\n',
        '# fsdp: model=meta-llama/Llama-3.1-8B world_size=1e308 batch=-1 seq=NaN\nfully_shard(model)\n',
        '# fsdp: model=meta-llama/Llama-3.1-8B world_size=99999999999999999999\nfully_shard(model)\n',
      ];
      for (const text of cases) {
        const started = Date.now();
        await analyze(text);
        assert.ok(Date.now() - started < 20_000, `took ${Date.now() - started} ms: ${text.slice(0, 60)}`);
      }
    },
  );

  it('a class that contains itself, and cyclic imports, give an answer', { timeout: 60_000 }, async () => {
    const dir = tempDir('fsdp-lens-cycle-');
    fs.writeFileSync(
      path.join(dir, 'a.py'),
      'import torch.nn as nn\nfrom b import B\n\nclass A(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.b = B()\n        self.me = A()\n',
    );
    fs.writeFileSync(
      path.join(dir, 'b.py'),
      'import torch.nn as nn\nfrom a import A\n\nclass B(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.a = A()\n        self.fc = nn.Linear(8, 8)\n',
    );
    const script =
      'from torch.distributed.fsdp import fully_shard\nfrom a import A\nmodel = A()\nfully_shard(model)\n';
    fs.writeFileSync(path.join(dir, 'train.py'), script);
    const g = await grammar();
    const facts = scanText(g, path.join(dir, 'train.py'), script);
    const project = new Project([dir], g, diskFS);
    const r = estimateFile(facts, { project });
    if (r.ok) assertSane(r.estimate, 'cycle');
    else assert.match(r.reason, /\S/);
    project.dispose();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('binary and non-UTF-8 bytes are refused with a reason', () => {
    const r1 = decodeSource(new Uint8Array([0x66, 0x00, 0x6f]));
    const r2 = decodeSource(new Uint8Array([0x66, 0xff, 0xfe, 0x6f]));
    assert.ok(!r1.ok && /binary/.test(r1.reason));
    assert.ok(!r2.ok && /UTF-8/.test(r2.reason));
  });

  it('a PEP 263 coding line names the encoding: latin-1 source decodes, an unknown one is refused', () => {
    // "# -*- coding: latin-1 -*-\nname = 'café'\n" with é as the single byte 0xe9.
    const latin = [...'#!/usr/bin/env python\n# -*- coding: latin-1 -*-\nname = "caf'].map((c) =>
      c.charCodeAt(0),
    );
    const r = decodeSource(new Uint8Array([...latin, 0xe9, 0x22, 0x0a]));
    assert.ok(r.ok && r.text.endsWith('name = "caf\u00e9"\n'));
    // The declaration counts only on the first two lines, and only after comments.
    const late = decodeSource(
      new Uint8Array([...'x = 1\n# coding: latin-1\n'].map((c) => c.charCodeAt(0)).concat(0xe9)),
    );
    assert.ok(!late.ok && /UTF-8/.test(late.reason));
    const odd = decodeSource(new TextEncoder().encode('# coding: klingon-9\nx = 1\n'));
    assert.ok(!odd.ok && /klingon-9/.test(odd.reason));
    // utf-8 declared explicitly is the default.
    assert.ok(decodeSource(new TextEncoder().encode('# -*- coding: utf-8 -*-\nx = "\u00e9"\n')).ok);
  });
});

describe('robustness: malformed configurations', () => {
  const weird = fc.oneof(
    fc.constant(null),
    fc.constant(Number.NaN),
    fc.constant(-1),
    fc.constant(0),
    fc.constant(1e308),
    fc.constant(2 ** 53),
    fc.constant(1.5),
    fc.constant('12'),
    fc.constant('abc'),
    fc.constant(true),
    fc.constant([]),
    fc.constant({}),
    fc.integer({ min: 1, max: 100_000 }),
  );
  const FIELDS = [
    'hidden_size',
    'num_hidden_layers',
    'num_attention_heads',
    'num_key_value_heads',
    'intermediate_size',
    'vocab_size',
    'head_dim',
    'tie_word_embeddings',
    'num_local_experts',
    'num_experts_per_tok',
    'model_type',
  ];

  it('config.json with NaN, negative, huge, wrong-typed or missing fields: a ConfigError or a sane model', () => {
    const base = CATALOG['meta-llama/Llama-3.2-1B']!;
    fc.assert(
      fc.property(
        fc.dictionary(fc.constantFrom(...FIELDS), weird, { maxKeys: 4 }),
        fc.array(fc.constantFrom(...FIELDS), { maxLength: 2 }),
        (changes, removed) => {
          const cfg: Record<string, unknown> = { ...base, ...changes };
          for (const k of removed) delete cfg[k];
          try {
            const m = modelFromHfConfig(cfg as HfConfig);
            // A model came out: every parameter shape is positive and finite.
            const stack = [m.root];
            while (stack.length) {
              const n = stack.pop()!;
              for (const p of n.params) assert.ok(p.shape.every((d) => Number.isInteger(d) && d > 0));
              stack.push(...n.children);
            }
          } catch (e) {
            assert.ok(e instanceof ConfigError, String(e));
          }
        },
      ),
      params(300),
    );
  });

  it('framework configurations with random values: a plan with sane numbers, a problem, or none', () => {
    const yamlValue = fc.oneof(
      fc.constantFrom(
        '-1',
        '0',
        '.nan',
        '.inf',
        '1e308',
        'true',
        'FULL_SHARD',
        'SHARD_GRAD_OP',
        '[]',
        '{}',
        '"x"',
        '~',
        '7',
      ),
    );
    const keys = [
      'fsdp_version',
      'fsdp_sharding_strategy',
      'fsdp_reshard_after_forward',
      'fsdp_auto_wrap_policy',
      'fsdp_min_num_params',
      'fsdp_offload_params',
      'fsdp_transformer_layer_cls_to_wrap',
    ];
    fc.assert(
      fc.property(
        fc.dictionary(fc.constantFrom(...keys), yamlValue, { maxKeys: 6 }),
        fc.constantFrom('-1', '0', '8', '.nan', '1e400', 'x'),
        (fsdp, procs) => {
          const yaml =
            `distributed_type: FSDP\nnum_processes: ${procs}\nmixed_precision: bf16\nfsdp_config:\n` +
            Object.entries(fsdp)
              .map(([k, v]) => `  ${k}: ${v}`)
              .join('\n') +
            '\n';
          const r = readFrameworkConfig('accelerate.yaml', yaml);
          if (r.kind === 'plan')
            for (const v of Object.values(r.plan.values))
              if (typeof v === 'number') assert.ok(Number.isFinite(v) && v > 0, `${v} from\n${yaml}`);
        },
      ),
      params(300),
    );
  });
});

describe('properties of the estimator', () => {
  it(
    'any world size, batch, sequence and checkpointing: finite, non-negative figures',
    { timeout: 120_000 },
    async () => {
      const g = await grammar();
      const facts = scanText(g, 'train.py', fixture('workspace/train_fsdp2.py'));
      await fc.assert(
        fc.asyncProperty(
          fc.record({
            worldSize: fc.integer({ min: 1, max: 4096 }),
            microBatch: fc.integer({ min: 1, max: 64 }),
            seqLen: fc.integer({ min: 1, max: 131_072 }),
            checkpointing: fc.constantFrom('none' as const, 'full' as const, 'selective' as const, {
              everyN: 3,
            }),
            model: fc.constantFrom(
              'meta-llama/Llama-3.2-1B',
              'Qwen/Qwen2.5-7B',
              'mistralai/Mixtral-8x7B-v0.1',
              'deepseek-ai/DeepSeek-V3',
            ),
          }),
          async (v) => {
            const r = estimateFile(facts, {
              flags: {
                values: {
                  worldSize: v.worldSize,
                  microBatch: v.microBatch,
                  seqLen: v.seqLen,
                  checkpointing: v.checkpointing,
                },
                model: { id: v.model, source: { kind: 'flag' } },
              },
            });
            assert.ok(r.ok, r.ok ? '' : r.reason);
            assertSane(r.estimate, JSON.stringify(v));
          },
        ),
        params(80),
      );
    },
  );
});

describe('word search', () => {
  it('one pass over the text finds the same words as a search per word', async () => {
    const g = await grammar();
    const alphabet = [
      'fully_shard',
      'fully',
      '_shard',
      'FSDP',
      'FSDP1',
      'x',
      '.',
      ' ',
      '\n',
      '(',
      '#',
      '"',
      '\u00e9',
    ];
    const words = ['fully_shard', 'fully', 'FSDP', 'x', 'shard'];
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...alphabet), { maxLength: 40 }), (parts) => {
        const text = parts.join('');
        const tree = g.parse(text);
        const onePass = new SourceFile('a.py', text, tree);
        const perWord = new SourceFile('a.py', text, tree);
        onePass.prefetchWords(words);
        for (const w of words) assert.deepEqual(onePass.wordOffsets(w), perWord.wordOffsets(w), w);
        tree.delete();
      }),
      params(300),
    );
  });
});

describe('no code of the user runs, no network', () => {
  it('the extension bundle loads no networking module', () => {
    const bundle = fs.readFileSync(path.join(ROOT, 'dist', 'extension.js'), 'utf8');
    for (const m of ['http', 'https', 'net', 'tls', 'dgram', 'undici', 'node:http', 'node:https', 'node:net'])
      assert.ok(!bundle.includes(`require("${m}")`), `the bundle requires ${m}`);
  });

  it('exact mode is declared unavailable in untrusted workspaces, with the interpreter setting restricted', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
      capabilities: { untrustedWorkspaces: { supported: string; restrictedConfigurations: string[] } };
      contributes: { commands: { command: string; enablement?: string }[] };
    };
    assert.equal(pkg.capabilities.untrustedWorkspaces.supported, 'limited');
    assert.ok(pkg.capabilities.untrustedWorkspaces.restrictedConfigurations.includes('fsdpLens.pythonPath'));
    const exact = pkg.contributes.commands.find((c) => c.command === 'fsdpLens.measureExactly');
    assert.equal(exact?.enablement, 'isWorkspaceTrusted');
    // And the command itself checks trust before it spawns anything.
    const src = fs.readFileSync(path.join(ROOT, 'src', 'extension', 'modelCommands.ts'), 'utf8');
    assert.match(src, /workspace\.isTrusted/);
    assert.ok(fs.existsSync(path.join(FIXTURES, 'projects')));
  });
});
