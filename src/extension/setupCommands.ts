/** The commands that set the world size and the target GPU as settings. */
import * as vscode from 'vscode';
import { GPUS, gpuBytes } from '../core/hardware/catalog';
import { fmtBytes } from '../core/vocabulary/bytes';
import { undecidedWhy } from '../core/vocabulary/words';
import { sourceText } from '../core/report/text';
import type { DocumentAnalyses } from './analyses';
import { SECTION } from './settings';

/** Where a setting changed from a file's context goes: its workspace folder, else the workspace, else the user. */
function target(uri: vscode.Uri | undefined): { scope?: vscode.Uri; target: vscode.ConfigurationTarget } {
  const folder = uri && vscode.workspace.getWorkspaceFolder(uri);
  if (folder) return { scope: folder.uri, target: vscode.ConfigurationTarget.WorkspaceFolder };
  if (vscode.workspace.workspaceFolders?.length) return { target: vscode.ConfigurationTarget.Workspace };
  return { target: vscode.ConfigurationTarget.Global };
}

function documentUri(arg: unknown): vscode.Uri | undefined {
  if (arg instanceof vscode.Uri) return arg;
  if (typeof arg === 'string') return vscode.Uri.parse(arg);
  return vscode.window.activeTextEditor?.document.uri;
}

/**
 * Says so when the file itself (an annotation, the code, pyproject.toml, a launch file) sets the value: those
 * take precedence over the setting, which then applies only to files that do not say.
 */
function warnIfOverridden(
  analyses: DocumentAnalyses,
  uri: vscode.Uri | undefined,
  key: string,
  label: string,
): void {
  const a = uri && analyses.latest(uri);
  const r = a?.estimate;
  if (!r?.ok) return;
  const assumption = r.estimate.assumptions.find((x) => x.key === key);
  const kind = assumption?.source.kind;
  if (kind && kind !== 'setting' && kind !== 'default')
    void vscode.window.showInformationMessage(
      `The ${label} of this file comes from ${sourceText(assumption.source)}, which takes precedence over the setting. ` +
        'Change it there, or try values in the footprint panel.',
    );
}

/** "FSDP: Set world size": writes fsdpLens.worldSize for the file's folder. */
export async function setWorldSize(analyses: DocumentAnalyses, arg?: unknown): Promise<void> {
  const uri = documentUri(arg);
  const t = target(uri);
  const current = vscode.workspace.getConfiguration(SECTION, t.scope).get<number | null>('worldSize', null);
  const r = uri && analyses.latest(uri)?.estimate;
  const shown = current ?? (r?.ok ? r.estimate.mesh.worldSize : 8);
  const value = await vscode.window.showInputBox({
    title: 'FSDP: world size (GPUs in all)',
    prompt: 'Total number of GPUs the job runs on. Leave empty to clear the setting.',
    value: String(shown),
    validateInput: (v) =>
      v.trim() === '' || (/^\d+$/.test(v.trim()) && Number(v) >= 1 && Number(v) <= 1_048_576)
        ? undefined
        : 'A whole number of GPUs, 1 or more',
  });
  if (value === undefined) return;
  await vscode.workspace
    .getConfiguration(SECTION, t.scope)
    .update('worldSize', value.trim() === '' ? undefined : Number(value), t.target);
  warnIfOverridden(analyses, uri, 'worldSize', 'world size');
}

/** "FSDP: Choose target GPU": writes fsdpLens.gpu for the file's folder. */
export async function setGpu(analyses: DocumentAnalyses, arg?: unknown): Promise<void> {
  const uri = documentUri(arg);
  const t = target(uri);
  const r = uri && analyses.latest(uri)?.estimate;
  const need = r?.ok ? r.estimate.fit : [];
  const pick = await vscode.window.showQuickPick(
    GPUS.map((g) => {
      const f = need.find((x) => x.gpu === g.id);
      return {
        label: g.name,
        description: fmtBytes(gpuBytes(g)),
        detail: f
          ? f.verdict === 'fits'
            ? `fits: ${fmtBytes(f.headroomBytes)} to spare`
            : f.verdict === 'short'
              ? `does not fit: ${fmtBytes(-f.headroomBytes)} short`
              : r?.ok && r.estimate.unmodelled.length
                ? `fit undecided: ${undecidedWhy(r.estimate)}`
                : `fit undecided: parts of the model not counted, ${fmtBytes(f.headroomBytes)} left for them`
          : undefined,
        id: g.id,
      };
    }),
    { title: 'FSDP: target GPU', placeHolder: 'The GPU to check the fit against and take speeds from' },
  );
  if (!pick) return;
  await vscode.workspace.getConfiguration(SECTION, t.scope).update('gpu', pick.id, t.target);
  warnIfOverridden(analyses, uri, 'gpu', 'GPU');
}
