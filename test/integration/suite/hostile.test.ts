// Hostile and pathological files in a real VS Code: opening every reproducer of the robustness suite (huge
// values, symlink loops, paths out of the workspace, huge counts, quadratic inputs) leaves the extension host
// responsive, every document gets an answer, and an ordinary script still gets its lenses.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as vscode from 'vscode';
import { codeLenses, eventually, open, workspaceFile } from './util';

/** The longest the extension host's event loop went without a turn, sampled every 20 ms while it runs. */
function lagProbe(): { stop(): number } {
  let worst = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last - 20);
    last = now;
  }, 20);
  return {
    stop() {
      clearInterval(timer);
      return worst;
    },
  };
}

describe('hostile inputs in the editor', () => {
  it('the extension host stays responsive while every hostile file is analysed', async function () {
    this.timeout(180_000);
    const files = JSON.parse(fs.readFileSync(workspaceFile('hostile/index.json').fsPath, 'utf8')) as string[];
    assert.ok(files.length > 20, 'the reproducers are in the workspace');
    const probe = lagProbe();
    const docs: vscode.TextDocument[] = [];
    for (const f of files) docs.push(await vscode.workspace.openTextDocument(workspaceFile(f)));
    // Each document gets an answer (lenses or none) from the providers: nothing waits forever.
    const lenses = new Map<vscode.TextDocument, vscode.CodeLens[]>();
    for (const d of docs) lenses.set(d, await codeLenses(d.uri));
    // A file of 10,001 wrap calls gets lenses up to the cap, and one saying where they stop.
    const wide = docs.find((d) => d.lineCount > 10_000 && /layers\[9999\]/.test(d.getText()));
    assert.ok(wide, 'the file of 10,001 wrap calls is among the reproducers');
    const cut = lenses.get(wide)!;
    assert.equal(cut.length, 1001);
    assert.match(cut[1000]!.command?.title ?? '', /no lens on this and the 9,000 wrap calls after it/);
    // The import, the model comment, then one block per line: block 1,000 is on the file's line 1,003.
    assert.equal(cut[1000]!.range.start.line, 1002);
    // An ordinary script analysed after all of them still gets its figures.
    const editor = await open('train_fsdp2.py');
    await eventually(
      () => codeLenses(editor.document.uri),
      (l) => l.some((x) => /peak [\d.]+ GB/.test(x.command?.tooltip ?? '')),
      'the lenses of an ordinary script',
    );
    const worst = probe.stop();
    // The analyses ran in the worker: the host's own loop never stalled (a stall of the host is seconds).
    assert.ok(worst < 1000, `the extension host went ${worst.toFixed(0)} ms without a turn`);
    for (const d of docs) await vscode.commands.executeCommand('workbench.action.closeActiveEditor', d.uri);
  });
});
