import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';

export const EXTENSION_ID = 'fsdp-lens.fsdp-lens';

export function workspaceFile(name: string): vscode.Uri {
  const folder = vscode.workspace.workspaceFolders?.[0];
  assert.ok(folder, 'the tests need a workspace folder');
  return vscode.Uri.joinPath(folder.uri, name);
}

export async function open(name: string): Promise<vscode.TextEditor> {
  const doc = await vscode.workspace.openTextDocument(workspaceFile(name));
  return vscode.window.showTextDocument(doc);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Polls `probe` until it returns a value that `ok` accepts (analysis is asynchronous and debounced). */
export async function eventually<T>(
  probe: () => Promise<T> | T,
  ok: (v: T) => boolean,
  what: string,
  timeoutMs = 20_000,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: T | undefined;
  for (;;) {
    last = await probe();
    if (ok(last)) return last;
    if (Date.now() > end)
      throw new Error(`timed out waiting for ${what}; last value: ${JSON.stringify(last)?.slice(0, 2000)}`);
    await sleep(150);
  }
}

export async function codeLenses(uri: vscode.Uri): Promise<vscode.CodeLens[]> {
  return (
    (await vscode.commands.executeCommand<vscode.CodeLens[]>('vscode.executeCodeLensProvider', uri, 100)) ??
    []
  );
}

/**
 * Puts a document back to its file on disk and waits until it is: the revert command acts on the active editor,
 * so the document is shown first, and asked again while it is still dirty (a test after it must not see the
 * edits of this one).
 */
export async function revertFile(doc: vscode.TextDocument): Promise<void> {
  await eventually(
    async () => {
      if (!doc.isDirty) return true;
      await vscode.window.showTextDocument(doc);
      await vscode.commands.executeCommand('workbench.action.files.revert');
      return !doc.isDirty;
    },
    (x) => x,
    `${doc.uri.path} to revert to its file`,
  );
}
