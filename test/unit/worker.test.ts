// The analysis worker as the editor drives it: a real thread running dist/worker.js. Results are plain data equal
// to the in-process analysis, edits re-parse incrementally, a cancelled run ends early, and a worker that stops
// answering is replaced without losing the next request.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';
import { changeFor } from '../../src/core/parsing/document';
import { AnalysisWorker, WorkerStopped } from '../../src/extension/worker';
import {
  EDITOR_CALLS,
  type AnalyzeRequest,
  type DocumentAnalysis,
  type PanelData,
} from '../../src/worker/protocol';
import { DEFAULT_LINT_OPTIONS } from '../../src/core/lint/types';
import { FIXTURES, ROOT, tempDir } from './helpers';

const worker = new AnalysisWorker(path.join(ROOT, 'dist'));
after(() => worker.dispose());

function request(
  file: string,
  text: string,
  version: number,
  extra: Partial<AnalyzeRequest> = {},
): AnalyzeRequest {
  return {
    kind: 'analyze',
    uri: `file://${file}`,
    file,
    onDisk: true,
    version,
    text,
    config: false,
    folder: path.dirname(file),
    settings: {
      lint: DEFAULT_LINT_OPTIONS,
      estimate: {},
      model: null,
      usersPaths: [],
      maxBytes: 4 << 20,
      units: 'GB',
    },
    ...extra,
  };
}

describe('the analysis worker', () => {
  const file = path.join(FIXTURES, 'workspace', 'train_fsdp2.py');
  const text = fs.readFileSync(file, 'utf8');

  it(
    'answers with the plain analysis: the estimate, the findings, no syntax tree',
    { timeout: 60_000 },
    async () => {
      const a = await worker.request<DocumentAnalysis>(request(file, text, 1), 30_000);
      assert.ok(a.estimate?.ok, JSON.stringify(a.estimate));
      // Llama 3.1 8B: 8,030,261,248 parameters, a unit per decoder layer and the root.
      assert.equal(a.estimate.estimate.model.params, 8_030_261_248);
      assert.equal(a.estimate.estimate.units.length, 33);
      assert.deepEqual(a.faults, []);
      // The panel explores the analysis the worker keeps.
      const p = await worker.request<PanelData>(
        { kind: 'panel', uri: `file://${file}`, focusUnit: null, whatIf: { worldSize: 16 } },
        30_000,
      );
      assert.equal(p.whatIf?.values.worldSize, 16);
    },
  );

  it(
    'an edit sent as a change gives what a fresh analysis of the new text gives',
    { timeout: 60_000 },
    async () => {
      const at = text.indexOf('fully_shard(model');
      const edited = `${text.slice(0, at)}# fsdp: world_size=32\n${text.slice(at)}`;
      const change = changeFor(text, at, at, '# fsdp: world_size=32\n');
      const incremental = await worker.request<DocumentAnalysis>(
        request(file, edited, 2, { edits: { from: 1, changes: [change] } }),
        30_000,
      );
      const fresh = await worker.request<DocumentAnalysis>(
        request(file, edited, 1, { uri: 'file:///fresh/train_fsdp2.py' }),
        30_000,
      );
      assert.ok(incremental.estimate?.ok && fresh.estimate?.ok);
      assert.equal(incremental.estimate.estimate.mesh.worldSize, 32);
      assert.deepEqual(incremental.facts.calls, fresh.facts.calls);
      assert.equal(incremental.estimate.estimate.perGpu.peakBytes, fresh.estimate.estimate.perGpu.peakBytes);
    },
  );

  it(
    'reads helpers from the site-packages of the interpreter the editor names, outside the folder',
    { timeout: 60_000 },
    async () => {
      const dir = tempDir('fsdp-lens-interp-');
      const env = tempDir('fsdp-lens-conda-');
      const site = path.join(env, 'lib', 'python3.12', 'site-packages', 'shardkit');
      fs.mkdirSync(site, { recursive: true });
      fs.mkdirSync(path.join(env, 'bin'));
      fs.writeFileSync(path.join(site, '__init__.py'), '');
      fs.writeFileSync(
        path.join(site, 'parallel.py'),
        'from torch.distributed.fsdp import fully_shard\ndef apply_fsdp(model):\n    for layer in model.model.layers:\n        fully_shard(layer)\n    fully_shard(model)\n',
      );
      fs.writeFileSync(path.join(dir, 'pyproject.toml'), '[project]\nname = "t"\n');
      const train = path.join(dir, 'train.py');
      const script = [
        'from transformers import AutoModelForCausalLM',
        'from shardkit.parallel import apply_fsdp',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        'apply_fsdp(model)',
        '',
      ].join('\n');
      fs.writeFileSync(train, script);
      const without = await worker.request<DocumentAnalysis>(request(train, script, 1), 30_000);
      assert.ok(without.estimate?.ok);
      assert.equal(without.estimate.estimate.plan.source.kind, 'default');
      // With the environment's python named (bin/python of a conda prefix): the helper's 16 layers and the root.
      const withPython = await worker.request<DocumentAnalysis>(
        request(train, script, 2, { python: path.join(env, 'bin', 'python') }),
        30_000,
      );
      assert.ok(withPython.estimate?.ok);
      assert.equal(withPython.estimate.estimate.plan.source.kind, 'detected');
      assert.equal(withPython.estimate.estimate.units.length, 17);
    },
  );

  it('a cancelled analysis ends at once and says so', { timeout: 60_000 }, async () => {
    const dir = tempDir('fsdp-lens-worker-');
    try {
      fs.writeFileSync(path.join(dir, 'pyproject.toml'), '');
      fs.writeFileSync(
        path.join(dir, 'net.py'),
        'import torch.nn as nn\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        xs = list(range(10000))\n        n = len([a for a in xs for b in xs for c in xs if a < 0])\n        self.fc = nn.Linear(8, 8)\n',
      );
      const train = path.join(dir, 'train.py');
      const src =
        'from torch.distributed.fsdp import fully_shard\nfrom net import Net\nmodel = Net()\nfully_shard(model)\n';
      fs.writeFileSync(train, src);
      let id = 0;
      const started = performance.now();
      const p = worker.request<DocumentAnalysis>(request(train, src, 1), 30_000, (n) => (id = n));
      setTimeout(() => worker.cancel(id), 150);
      const a = await p;
      assert.match(a.incomplete ?? (a.estimate && !a.estimate.ok ? a.estimate.reason : ''), /cancelled/);
      // The model code alone runs for seconds before its own limits stop it.
      assert.ok(performance.now() - started < 1500, `${(performance.now() - started).toFixed(0)} ms`);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it(
    'sends the editor at most EDITOR_CALLS wrap calls, and says how many more there are and where',
    { timeout: 60_000 },
    async () => {
      // 1,200 blocks wrapped one line each, then the root: 1,201 calls, 201 past the cut, the root among them.
      const blocks = Array.from({ length: 1200 }, (_, i) => `fully_shard(model.layers[${i}])`);
      const src = [
        'from torch.distributed.fsdp import fully_shard',
        ...blocks,
        'fully_shard(model)',
        '',
      ].join('\n');
      const wide = path.join(os.tmpdir(), 'fsdp-lens-wide.py');
      const a = await worker.request<DocumentAnalysis>(
        request(wide, src, 1, { uri: 'file:///wide.py', onDisk: false }),
        30_000,
      );
      assert.equal(a.facts.calls.length, EDITOR_CALLS);
      assert.equal(a.facts.calls[EDITOR_CALLS - 1]!.target, `model.layers[${EDITOR_CALLS - 1}]`);
      // Block 1,000 is on line 1,002 (0-based 1,001): the import, then one block per line.
      assert.deepEqual(a.callsLeftOut && { ...a.callsLeftOut, range: a.callsLeftOut.range.start.line }, {
        count: 1201 - EDITOR_CALLS,
        range: EDITOR_CALLS + 1,
        root: true,
      });
    },
  );

  it(
    'a worker that runs past its time is replaced, and the next request is answered',
    { timeout: 60_000 },
    async () => {
      const before = worker.generation;
      await assert.rejects(
        worker.request(request(file, text, 3, { uri: 'file:///slow.py' }), 1),
        WorkerStopped,
      );
      const a = await worker.request<DocumentAnalysis>(request(file, text, 4), 30_000);
      assert.ok(a.estimate?.ok);
      assert.equal(worker.generation, before + 1);
    },
  );
});
