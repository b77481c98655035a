// The layer order is written down once for people (docs/architecture.md) and once for the lint rule that enforces
// it (CORE_STAGES in eslint.config.mjs): the two must name the same stages in the same order, and every folder of
// src/core must be one of them.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { build } from 'esbuild';
import { ROOT } from './helpers';

function lintStages(): string[] {
  const text = fs.readFileSync(path.join(ROOT, 'eslint.config.mjs'), 'utf8');
  const body = /export const CORE_STAGES = \[([\s\S]*?)\];/.exec(text)?.[1] ?? '';
  return [...body.matchAll(/'([a-z]+)'/g)].map((m) => m[1]!);
}

function documentedStages(): string[] {
  const text = fs.readFileSync(path.join(ROOT, 'docs', 'architecture.md'), 'utf8');
  const start = text.search(/^\| stage /m);
  const table = text.slice(start, text.indexOf('\n\n', start));
  return [...table.matchAll(/^\| `([a-z]+)` +\|/gm)].map((m) => m[1]!);
}

describe('the layer order', () => {
  it('docs/architecture.md and the lint rule list the same stages in the same order', () => {
    assert.ok(lintStages().length > 10);
    assert.deepEqual(documentedStages(), lintStages());
  });

  it('every folder of src/core is a stage, and no file sits outside one', () => {
    const entries = fs.readdirSync(path.join(ROOT, 'src', 'core'), { withFileTypes: true });
    assert.deepEqual(
      entries.filter((e) => !e.isDirectory()).map((e) => e.name),
      [],
      'files directly in src/core belong to no stage',
    );
    assert.deepEqual(entries.map((e) => e.name).sort(), [...lintStages()].sort());
  });

  it('every source file opens with a comment that says what it is for', () => {
    const missing: string[] = [];
    const walk = (dir: string) => {
      for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
        const p = path.join(dir, e.name);
        if (e.isDirectory()) walk(p);
        else if (e.name.endsWith('.ts') && !/^(\/\*\*|\/\/)/.test(fs.readFileSync(p, 'utf8')))
          missing.push(path.relative(ROOT, p));
      }
    };
    walk(path.join(ROOT, 'src'));
    assert.deepEqual(missing, []);
  });
});

describe('what the extension host loads', () => {
  it('the extension bundle holds no parser: tree-sitter and the analysis run in the worker', async () => {
    // esbuild resolves the same imports scripts/build.mjs bundles; only what it reports is checked.
    const r = await build({
      entryPoints: [path.join(ROOT, 'src', 'extension', 'extension.ts')],
      bundle: true,
      write: false,
      metafile: true,
      platform: 'node',
      format: 'cjs',
      external: ['vscode'],
      loader: { '.scm': 'text' },
      logLevel: 'silent',
    });
    const inputs = Object.keys(r.metafile.inputs);
    assert.deepEqual(
      inputs.filter((f) =>
        /web-tree-sitter|src[\\/]core[\\/](parsing|analysis[\\/](scan|branches|evaluator))/.test(f),
      ),
      [],
    );
  });
});
