import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { FileFacts, WrapCall } from '../../src/core/analysis/facts';
import { scanText } from '../../src/core/analysis/input';
import { runCli } from '../../src/cli/cli';
import { loadPython } from '../../src/host/grammar';
import { type PythonGrammar } from '../../src/core/parsing/python';
import type { EstimateInput, Plan } from '../../src/core/estimator/types';
import { resolveSetup } from '../../src/core/inputs/layers';
import type { SetupValues } from '../../src/core/inputs/table';
import { modelFromHfConfig } from '../../src/core/model/hf';
import { defaultUnits } from '../../src/core/plan/policies';

/** The repository root (tests run from out/test/unit). */
export const ROOT = path.resolve(__dirname, '..', '..', '..');
export const FIXTURES = path.join(ROOT, 'test', 'fixtures');

export function grammar(): Promise<PythonGrammar> {
  return loadPython(path.join(ROOT, 'out', 'test'));
}

export function fixture(rel: string): string {
  return fs.readFileSync(path.join(FIXTURES, rel), 'utf8');
}

export async function scanFixture(rel: string): Promise<FileFacts> {
  return scanText(await grammar(), rel, fixture(rel));
}

export async function scanSource(text: string, name = 'snippet.py'): Promise<FileFacts> {
  return scanText(await grammar(), name, text);
}

/** A temporary project folder (its pyproject.toml marks the root) for a test's files. */
/** Folders the tests of this process made, removed when it exits: a run leaves nothing in the temp folder. */
const made: string[] = [];
process.on('exit', () => {
  for (const dir of made) fs.rmSync(dir, { recursive: true, force: true });
});

/** A fresh folder under the temp folder, removed when the process exits. */
export function tempDir(prefix: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  made.push(dir);
  return dir;
}

export function projectDir(prefix: string): string {
  const dir = tempDir(prefix);
  fs.writeFileSync(path.join(dir, 'pyproject.toml'), '[project]\nname = "t"\n');
  return dir;
}

/** Writes files (path relative to `dir`, its lines) into a project folder, making their folders. */
export function writeFiles(dir: string, files: Record<string, string[]>): void {
  for (const [file, lines] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    fs.writeFileSync(path.join(dir, file), lines.join('\n'));
  }
}

/** An input as an estimate's JSON reports it: its value and where it came from. */
export interface Assumed {
  key: string;
  value: string;
  source: { kind: string; detail?: string };
}

/** What the estimate (JSON) took for an input, from its assumptions; fails when it lists none. */
export function assumed(data: { assumptions: Assumed[] }, key: string): Assumed {
  const a = data.assumptions.find((x) => x.key === key);
  if (!a) throw new Error(`no assumption ${key}`);
  return a;
}

/** The wrap call on a 1-based line. */
export function callAt(f: FileFacts, line: number): WrapCall {
  const c = f.calls.find((x) => x.line === line);
  if (!c) throw new Error(`no wrap call on line ${line}; calls on ${f.calls.map((x) => x.line).join(', ')}`);
  return c;
}

/** Runs the command-line tool in-process; its exit code and what it printed. */
export async function cli(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  await grammar();
  let out = '';
  let err = '';
  const code = await runCli(args, {
    out: { write: (s: string) => (out += s) },
    err: { write: (s: string) => (err += s) },
  });
  return { code, out, err };
}

/** A small Llama for tests that derive figures by hand: hidden 64, 4 heads of 16 (2 KV heads), MLP 128, vocabulary 96, two blocks, untied head. */
export const SMALL_LLAMA = {
  model_type: 'llama',
  architectures: ['LlamaForCausalLM'],
  hidden_size: 64,
  intermediate_size: 128,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  vocab_size: 96,
  tie_word_embeddings: false,
};

/**
 * The estimate input of a model built from a config.json's fields, with the default plan (a unit per block, then
 * the root) and the setup the given values make over the defaults.
 */
export function defaultInput(
  config: Record<string, unknown>,
  values: SetupValues = {},
  api: Plan['api'] = 'fsdp2',
): EstimateInput {
  const m = modelFromHfConfig(config);
  const { setup, assumptions } = resolveSetup([{ source: { kind: 'flag' }, values }]);
  return {
    model: { name: 'tiny', root: m.root, shape: m.shape, source: { kind: 'default' } },
    plan: {
      api,
      strategy: 'FULL_SHARD',
      units: defaultUnits(m.root, m.shape.blockClass, 't'),
      source: { kind: 'default' },
      notes: [],
    },
    setup,
    assumptions,
  };
}
