import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import type { FsdpLensApi } from '../../../src/extension/extension';
import { codeLenses, eventually, EXTENSION_ID, open, sleep, revertFile } from './util';

describe('extension', () => {
  it('activates on a Python file and contributes its commands in the FSDP category', async () => {
    await open('train_fsdp2.py');
    const ext = vscode.extensions.getExtension(EXTENSION_ID);
    assert.ok(ext, 'extension is installed in development mode');
    await eventually(
      () => ext.isActive,
      (a) => a,
      'activation',
    );
    const commands = await vscode.commands.getCommands(true);
    assert.ok(commands.includes('fsdpLens.estimateFootprint'));
    const contributed = (
      ext.packageJSON as { contributes: { commands: { command: string; category: string; title: string }[] } }
    ).contributes.commands;
    const estimate = contributed.find((c) => c.command === 'fsdpLens.estimateFootprint');
    assert.equal(estimate?.category, 'FSDP');
    assert.equal(estimate?.title, 'Estimate FSDP footprint');
    for (const c of contributed) {
      assert.equal(c.category, 'FSDP', c.command);
      assert.ok(commands.includes(c.command), `${c.command} is registered`);
    }
    // The log shows what was analysed and how long it took.
    await vscode.commands.executeCommand('fsdpLens.showLog');
  });

  it('shows a lens over each wrap call with what was detected', async () => {
    const editor = await open('train_fsdp2.py');
    const lenses = await eventually(
      () => codeLenses(editor.document.uri),
      (l) => l.length >= 2,
      'two code lenses',
    );
    // Each line's segments, titles then tooltips (VS Code shows a line's lenses side by side).
    const byLine = new Map<number, string>();
    for (const l of lenses)
      byLine.set(
        l.range.start.line,
        `${byLine.get(l.range.start.line) ?? ''}${l.command?.title ?? ''}\n${l.command?.tooltip ?? ''}\n`,
      );
    const text = editor.document.getText().split('\n');
    const blockLine = text.findIndex((l) => l.includes('fully_shard(layer'));
    const rootLine = text.findIndex((l) => l.includes('fully_shard(model'));
    // Llama 3.1 8B: 32 decoder layers of 218,112,000 parameters, 0.436 GB each in bf16.
    assert.match(byLine.get(blockLine) ?? '', /^FSDP2 32 units x 218M params \(LlamaDecoderLayer\)$/m);
    assert.match(byLine.get(blockLine) ?? '', /^0\.436 GB gathered each$/m);
    assert.match(byLine.get(blockLine) ?? '', /2 all-gathers \+ 1 reduce-scatter\/step/);
    // 16 bytes per parameter over 8 GPUs (default world size): 16.1 GB.
    assert.match(byLine.get(rootLine) ?? '', /^\$\(pass\) fits 8 x H100 SXM$/m);
    assert.match(byLine.get(rootLine) ?? '', /^FSDP2 root: 33 units · 16\.1 GB\/GPU persistent/m);
    assert.match(byLine.get(rootLine) ?? '', /\(bf16\/fp32\)/);
  });

  it("opens the walkthrough's example as an unsaved document, and estimates it", async () => {
    await vscode.commands.executeCommand('fsdpLens.openExample');
    const editor = await eventually(
      () => vscode.window.activeTextEditor,
      (e) => !!e && e.document.isUntitled && e.document.languageId === 'python',
      'the example open',
    );
    assert.ok(editor!.document.getText().includes('fully_shard('));
    const lenses = await eventually(
      () => codeLenses(editor!.document.uri),
      (l) => l.some((x) => /33 FSDP2 units/.test(x.command?.title ?? '')),
      "the example's root lens",
    );
    assert.ok(lenses.length >= 2);
    await vscode.commands.executeCommand('workbench.action.revertAndCloseActiveEditor');
  });

  it('updates the lenses after an edit, on the new version only', async () => {
    const editor = await open('train_fsdp2.py');
    const doc = editor.document;
    const line = doc
      .getText()
      .split('\n')
      .findIndex((l) => l.includes('fully_shard(layer'));
    const old = doc.lineAt(line).text;
    await editor.edit((b) =>
      b.replace(
        doc.lineAt(line).range,
        old.replace('mp_policy=mp', 'mp_policy=mp, reshard_after_forward=False'),
      ),
    );
    const lenses = await eventually(
      () => codeLenses(doc.uri),
      (l) =>
        l.some(
          (x) =>
            /kept gathered to backward · 1 all-gather \+ 1 reduce-scatter\/step/.test(
              x.command?.tooltip ?? '',
            ) && x.range.start.line === line,
        ),
      'the lens to follow the edit',
    );
    assert.ok(lenses.length >= 2);
    await revertFile(doc);
  });

  it('analyses a burst of edits once, at its last version', async () => {
    const editor = await open('train_fsdp2.py');
    const doc = editor.document;
    const api = vscode.extensions.getExtension<FsdpLensApi>(EXTENSION_ID)!.exports;
    // The tests run with a short delay; a burst here is five edits inside a one-second pause.
    const config = vscode.workspace.getConfiguration('fsdpLens');
    await config.update('analysisDelayMs', 1000, vscode.ConfigurationTarget.Workspace);
    await sleep(300);
    const analysed: number[] = [];
    const sub = api.onDidAnalyze((a) => {
      if (a.uri === doc.uri.toString()) analysed.push(a.version);
    });
    try {
      const first = doc.version;
      // Five edits well inside the analysis delay: each cancels the pending run of the one before.
      for (let i = 0; i < 5; i++)
        await editor.edit((b) => b.insert(new vscode.Position(doc.lineCount - 1, 0), `# edit ${i}\n`));
      const last = doc.version;
      assert.ok(last >= first + 5);
      await eventually(
        () => analysed,
        (v) => v.includes(last),
        'the analysis of the last version',
      );
      await sleep(300);
      // Debounced: the lens and hover asking in between wait for the pause instead of analysing each version.
      assert.deepEqual(
        analysed.filter((v) => v > first && v < last),
        [],
        `intermediate versions analysed: ${analysed.join(', ')}`,
      );
    } finally {
      sub.dispose();
      await config.update('analysisDelayMs', undefined, vscode.ConfigurationTarget.Workspace);
      await revertFile(doc);
      await sleep(100);
    }
  });

  it('runs "Estimate FSDP footprint" and opens the panel', async () => {
    await open('train_fsdp2.py');
    await vscode.commands.executeCommand('fsdpLens.estimateFootprint');
    await eventually(
      () => vscode.window.tabGroups.all.flatMap((g) => g.tabs).map((t) => t.label),
      (labels) => labels.some((l) => l.startsWith('FSDP footprint')),
      'the panel tab',
    );
  });

  it('says so instead of analysing a file over the size cap', async () => {
    const config = vscode.workspace.getConfiguration('fsdpLens');
    await config.update('maxFileSizeKB', 1, vscode.ConfigurationTarget.Workspace);
    try {
      const editor = await open('large_fsdp.py');
      const lenses = await eventually(
        () => codeLenses(editor.document.uri),
        (l) => l.length === 1,
        'the size notice',
      );
      assert.match(lenses[0]!.command!.title, /not analysed: file is .* over the 1 KiB analysis limit/);
    } finally {
      await config.update('maxFileSizeKB', undefined, vscode.ConfigurationTarget.Workspace);
    }
  });
});
