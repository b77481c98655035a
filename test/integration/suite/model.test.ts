import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { codeLenses, eventually, open } from './util';
import { CI, missing, tools } from '../../tools';

/** The Python with PyTorch that scripts/provision.mjs found (FSDP_LENS_PYTHON, else Debian's python3-torch). */
const PYTHON = tools().torch.python ?? process.env.FSDP_LENS_PYTHON ?? '/usr/bin/python3';
const NO_TORCH = missing('torch');
/** The exact-mode test's title says which Python it ran, or why it is skipped. */
const RAN_WITH = NO_TORCH
  ? CI
    ? ''
    : ` (skipped: ${NO_TORCH})`
  : ` (${tools().torch.python}, PyTorch ${tools().torch.version})`;

function lensAt(lenses: vscode.CodeLens[], doc: vscode.TextDocument, needle: string): string {
  const line = doc
    .getText()
    .split('\n')
    .findIndex((l) => l.includes(needle));
  return lenses
    .filter((l) => l.range.start.line === line)
    .map((l) => l.command?.title ?? '')
    .join(' | ');
}

describe('the model behind the wrap', () => {
  it('reads a minimal GPT from its own code: exact parameters per unit in the lens', async () => {
    const editor = await open('projects/gpt/train.py');
    const lenses = await eventually(
      () => codeLenses(editor.document.uri),
      (l) => l.length >= 2 && /units x/.test(l.map((x) => x.command?.title).join()),
      'lenses with numbers',
    );
    // 6 blocks of 3,146,752 parameters (nanoGPT block, n_embd 512, no biases), 6.29 MB each in bf16.
    assert.match(
      lensAt(lenses, editor.document, 'fully_shard(block'),
      /^FSDP2 6 units x 3\.15M params \(Block\) \| 6\.29 MB gathered each$/,
    );
    assert.match(lensAt(lenses, editor.document, 'fully_shard(model'), /\| 7 FSDP2 units \|/);
  });

  it('follows apply_fsdp to its caller in another file (framework-style Llama)', async () => {
    const editor = await open('projects/llama/parallelize.py');
    const lenses = await eventually(
      () => codeLenses(editor.document.uri),
      (l) => l.some((x) => /units x/.test(x.command?.title ?? '')),
      'lenses with numbers',
    );
    assert.match(
      lensAt(lenses, editor.document, 'fully_shard(transformer_block'),
      /^FSDP2 32 units x 218M params \(TransformerBlock\) \| 0\.436 GB gathered each$/,
    );
  });

  it('shows one verdict in every file of a job: the entry script, its helper, its launch script', async () => {
    // projects/job: launch.sh runs finetune.py on 2 nodes of 8 with 2 x 8192 tokens; finetune.py loads Llama 3.1
    // 8B and calls shard_model() of sharding.py, which wraps it.
    const verdictOf = async (name: string) => {
      const editor = await open(name);
      const lenses = await eventually(
        () => codeLenses(editor.document.uri),
        (l) => l.some((x) => /needs /.test(x.command?.title ?? '')),
        `the verdict's lenses in ${name}`,
      );
      const titles = lenses.map((l) => l.command?.title ?? '');
      return [
        titles.find((t) => /fits|does not fit|undecided/.test(t)),
        titles.find((t) => /needs /.test(t)),
      ];
    };
    const helper = await verdictOf('projects/job/sharding.py');
    const launch = await verdictOf('projects/job/launch.sh');
    const entry = await verdictOf('projects/job/finetune.py');
    assert.match(entry[0] ?? '', /fits 16 x H100/);
    assert.deepEqual(helper, entry);
    assert.deepEqual(launch, entry);
    // Back in the helper after its caller was opened: still the job's verdict.
    assert.deepEqual(await verdictOf('projects/job/sharding.py'), entry);
  });

  it(`measures the model exactly with PyTorch and uses the measured model${RAN_WITH}`, async function () {
    if (NO_TORCH) {
      if (!CI) this.skip();
      assert.fail(`CI runs every test: ${NO_TORCH}`);
    }
    const config = vscode.workspace.getConfiguration('fsdpLens');
    await config.update('pythonPath', PYTHON, vscode.ConfigurationTarget.Workspace);
    try {
      const editor = await open('projects/gpt/train.py');
      await vscode.commands.executeCommand('fsdpLens.measureExactly');
      // Same numbers as the static reading (they agree), now from PyTorch.
      const lenses = await eventually(
        () => codeLenses(editor.document.uri),
        (l) => /6 units x 3\.15M params/.test(l.map((x) => x.command?.title).join()),
        'lenses after measuring',
        60_000,
      );
      assert.ok(lenses.length >= 2);
      const ext = vscode.extensions.getExtension('fsdp-lens.fsdp-lens');
      assert.ok(ext?.isActive);
    } finally {
      await config.update('pythonPath', undefined, vscode.ConfigurationTarget.Workspace);
    }
  });
});
