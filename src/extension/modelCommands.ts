/** The model commands: exact mode (only in trusted workspaces) and choosing the model of a file. */
import * as path from 'node:path';
import * as vscode from 'vscode';
import { fmtCount } from '../core/vocabulary/bytes';
import type { ExactReply, ModelsReply } from '../worker/protocol';
import type { DocumentAnalyses } from './analyses';
import type { WorkspaceProjects } from './projects';
import { SECTION } from './settings';
import { pythonFor } from './python';

function activePython(): vscode.TextDocument | undefined {
  const d = vscode.window.activeTextEditor?.document;
  return d?.languageId === 'python' ? d : undefined;
}

/** "FSDP: Measure model exactly with PyTorch": runs the model's code, so only in trusted workspaces. */
export async function measureExactly(
  analyses: DocumentAnalyses,
  projects: WorkspaceProjects,
  uri?: vscode.Uri,
): Promise<void> {
  if (!vscode.workspace.isTrusted) {
    void vscode.window.showWarningMessage(
      'Exact mode imports and runs your model code with PyTorch: trust this workspace to use it.',
    );
    return;
  }
  const doc = uri ? await vscode.workspace.openTextDocument(uri) : activePython();
  if (!doc) {
    void vscode.window.showInformationMessage('Open the Python script whose model you want to measure.');
    return;
  }
  const analysis = await analyses.analyze(doc);
  if (doc.uri.scheme !== 'file' || !analysis) {
    void vscode.window.showWarningMessage('Exact mode needs a file on disk in a workspace folder.');
    return;
  }
  const { python, from } = await pythonFor(doc.uri);
  const setting = vscode.workspace.getConfiguration(SECTION, doc.uri).get<number>('exactTimeoutSeconds', 120);
  // The setting's schema bounds: 5 s to an hour, whatever a settings file holds.
  const seconds = Number.isFinite(setting) ? Math.min(3600, Math.max(5, setting)) : 120;
  const choice = projects.modelChoice(doc.uri);
  const result = await vscode.window.withProgress(
    {
      location: vscode.ProgressLocation.Notification,
      title: `FSDP: building the model with PyTorch (${path.basename(python)})…`,
      cancellable: true,
    },
    async (_progress, token): Promise<ExactReply> => {
      let id: number | undefined;
      token.onCancellationRequested(() => id !== undefined && analyses.worker.cancel(id));
      try {
        return await analyses.worker.request<ExactReply>(
          {
            kind: 'exact',
            uri: doc.uri.toString(),
            python,
            timeoutMs: seconds * 1000,
            ...(choice ? { choice } : {}),
          },
          seconds * 1000 + 30_000,
          (n) => (id = n),
        );
      } catch (e) {
        return { ok: false, error: e instanceof Error ? e.message : String(e) };
      }
    },
  );
  if (!result.ok) {
    if (result.error === 'cancelled') return;
    void vscode.window.showErrorMessage(
      `FSDP exact mode (${python}, from ${from}): ${result.error}${result.detail ? ` — ${result.detail}` : ''}`,
    );
    return;
  }
  analyses.invalidate();
  await analyses.analyze(doc);
  const agree =
    result.staticParams === result.params
      ? 'the same as the static reading'
      : `the static reading found ${fmtCount(result.staticParams ?? 0)}`;
  void vscode.window.showInformationMessage(
    `FSDP: ${result.className} has ${fmtCount(result.params)} parameters (${agree}). The estimate now uses the measured model.`,
  );
}

/** "FSDP: Choose the model for this file": when the code allows several models, or none is found. */
export async function chooseModel(
  analyses: DocumentAnalyses,
  projects: WorkspaceProjects,
  uri?: vscode.Uri,
): Promise<void> {
  const doc = uri ? await vscode.workspace.openTextDocument(uri) : activePython();
  if (!doc) return;
  const analysis = await analyses.analyze(doc);
  const models =
    analysis && doc.uri.scheme === 'file'
      ? await analyses.worker
          .request<ModelsReply | undefined>({ kind: 'models', uri: doc.uri.toString() }, 20_000)
          .catch(() => undefined)
      : undefined;
  if (!models) {
    void vscode.window.showWarningMessage('Choosing a model needs a file on disk in a workspace folder.');
    return;
  }
  const items: (vscode.QuickPickItem & { value: string })[] = [];
  for (const c of models.candidates)
    items.push({ label: c, description: 'reaches this file through its callers', value: c });
  for (const c of models.classes) {
    const rel = path.relative(models.root, c.file);
    items.push({ label: c.name, description: rel, value: `${c.file}:${c.name}` });
  }
  if (!items.length) {
    void vscode.window.showInformationMessage('No nn.Module classes were found in this workspace.');
    return;
  }
  const pick = await vscode.window.showQuickPick(items, {
    title: 'FSDP: the model this file trains',
    placeHolder: models.found.ok ? `Now: ${models.found.className}` : models.found.reason,
    matchOnDescription: true,
  });
  if (!pick) return;
  await projects.setModelChoice(doc.uri, pick.value);
  analyses.invalidate();
  await analyses.analyze(doc);
}
