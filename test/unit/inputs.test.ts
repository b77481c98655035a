// The table of estimate inputs is the one source of their names: package.json's settings, the README's settings
// table and the command line must agree with it. `npm run docs:settings` rewrites package.json and the README
// from the table (FSDP_LENS_WRITE=1); the tests check that they were.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import {
  DEFAULTS,
  INPUT_BY_FLAG,
  INPUT_BY_KEY,
  INPUT_KEYS,
  inputSpec,
  parseInput,
  SETTING_INPUTS,
  showInput,
} from '../../src/core/inputs/table';
import { cli, ROOT } from './helpers';

const WRITE = process.env.FSDP_LENS_WRITE === '1';
const PACKAGE = path.join(ROOT, 'package.json');
const README = path.join(ROOT, 'README.md');

type Schema = Record<string, unknown>;

function packageJson(): { contributes: { configuration: { properties: Record<string, Schema> } } } {
  return JSON.parse(fs.readFileSync(PACKAGE, 'utf8'));
}

/** package.json's entry for an input's setting, as the table declares it. */
function expectedSchema(key: (typeof SETTING_INPUTS)[number]): Schema {
  // In the Settings editor, in the table's order, before the settings of the editor itself.
  return { ...key.setting.schema, scope: 'resource', order: SETTING_INPUTS.indexOf(key) + 1 };
}

/** The README's settings table, one row per setting of package.json, in its order. */
function settingsTable(properties: Record<string, Schema>): string {
  const rows = Object.entries(properties).map(([name, s]) => {
    const input = SETTING_INPUTS.find((x) => `fsdpLens.${x.setting.name}` === name);
    const dflt =
      s.default === null || s.default === undefined || s.default === '' || (input && s.default === 0)
        ? input
          ? `unset (${showInput(input.key, DEFAULTS[input.key] as never, DEFAULTS)})`
          : 'unset'
        : `\`${JSON.stringify(s.default).replace(/^"|"$/g, '')}\``;
    const text = String(s.markdownDescription ?? '');
    const first = /^(.*?[.!?])(\s|$)/.exec(text)?.[1] ?? text;
    return [`\`${name}\``, dflt, first.replace(/\|/g, '\\|')];
  });
  const header = ['Setting', 'Default', 'What it does'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(header), `| ${widths.map((w) => '-'.repeat(w)).join(' | ')} |`, ...rows.map(line)].join('\n');
}

const TABLE_START = '| Setting';

describe('the table of estimate inputs', () => {
  it('declares each input once, with a label, a summary and a default its own parser accepts', () => {
    for (const key of INPUT_KEYS) {
      const spec = inputSpec(key);
      assert.ok(spec.label && spec.summary, key);
      assert.ok(showInput(key, DEFAULTS[key] as never, DEFAULTS).length > 0, key);
    }
    // No two inputs share an annotation key or a flag.
    const keys = INPUT_KEYS.flatMap((k) => inputSpec(k).keys ?? []);
    assert.equal(new Set(keys).size, keys.length);
    assert.equal(Object.keys(INPUT_BY_KEY).length, keys.length);
    const flags = INPUT_KEYS.flatMap((k) => inputSpec(k).flag?.name ?? []);
    assert.equal(Object.keys(INPUT_BY_FLAG).length, flags.length);
  });

  it("package.json's settings are the table's", () => {
    const pkg = packageJson();
    const props = pkg.contributes.configuration.properties;
    if (WRITE) {
      for (const s of SETTING_INPUTS) props[`fsdpLens.${s.setting.name}`] = expectedSchema(s);
      fs.writeFileSync(PACKAGE, JSON.stringify(pkg, null, 2) + '\n');
    }
    for (const s of SETTING_INPUTS)
      assert.deepEqual(
        packageJson().contributes.configuration.properties[`fsdpLens.${s.setting.name}`],
        expectedSchema(s),
        `fsdpLens.${s.setting.name} differs from the table of inputs: run "npm run docs:settings"`,
      );
  });

  it("the README's settings table is package.json's", () => {
    const text = fs.readFileSync(README, 'utf8');
    const start = text.indexOf(TABLE_START);
    const end = text.indexOf('\n\n', start);
    assert.ok(start > 0 && end > start, 'the README has a settings table');
    const want = settingsTable(packageJson().contributes.configuration.properties);
    if (WRITE) fs.writeFileSync(README, text.slice(0, start) + want + text.slice(end));
    const now = fs.readFileSync(README, 'utf8');
    assert.equal(now.slice(start, now.indexOf('\n\n', start)), want, 'run "npm run docs:settings"');
  });

  it('every flag of the table is a flag of `estimate`, parsed by the same parser', async () => {
    for (const [flag, key] of Object.entries(INPUT_BY_FLAG)) {
      const raw = key === 'gpu' ? 'h200-141gb' : String(showInputRaw(key));
      const r = await cli('estimate', '--model', 'openai-community/gpt2', `--${flag}`, raw, '--json');
      assert.equal(r.code, 0, `--${flag} ${raw}: ${r.err}`);
      const a = (JSON.parse(r.out) as { assumptions: { key: string; source: { kind: string } }[] })
        .assumptions;
      assert.equal(a.find((x) => x.key === key)?.source.kind, 'flag', `--${flag}`);
      assert.deepEqual(parseInput(key, raw, `--${flag}`), parseInput(key, raw, 'again'));
    }
  });
});

/** A value each input's parser accepts, written as a flag would be. */
function showInputRaw(key: (typeof INPUT_KEYS)[number]): string {
  const samples: Record<string, string> = {
    worldSize: '16',
    gpusPerNode: '4',
    replicas: '2',
    tensorParallel: '2',
    contextParallel: '2',
    pipelineParallel: '2',
    expertParallel: '2',
    ppSchedule: 'Interleaved1F1B',
    ppMicrobatches: '2',
    reentrantCheckpoint: 'on',
    microBatch: '2',
    seqLen: '2048',
    gradAccum: '4',
    globalBatch: '512',
    syncEveryMicroBatch: 'last',
    forwardPrefetch: 'on',
    checkpointing: 'full',
    optimizer: 'sgd',
    optimizerImpl: 'fused',
    loss: 'chunked',
    keepsOutput: 'step',
    masterDtype: 'bf16',
    paramDtype: 'fp32',
    reduceDtype: 'fp32',
    attention: 'eager',
    float8: 'all-gather',
    float8Skip: 'output',
    lossParallel: 'off',
    pagedOptimizer: 'on',
    compile: 'model+loss',
    optimizerInBackward: 'on',
    activationOffload: 'on',
    tpPlan: 'transformers',
    cpMethod: 'ulysses',
    linkEfficiency: '0.5',
    mfu: '0.5',
    torchVersion: '2.7',
  };
  const v = samples[key];
  if (v === undefined) throw new Error(`no sample value for ${key}: add one`);
  return v;
}
