/** Which Python interpreter the editor uses for a folder, as the user or the Python extension names it. */
import * as vscode from 'vscode';
import { SECTION } from './settings';

/**
 * The Python of a file's folder: the setting, else the Python extension's interpreter, else `python3`. Exact mode
 * runs it; the analysis reads its site-packages. `activate: false` asks the Python extension only when it is
 * already running (the analysis never starts another extension).
 */
export async function pythonFor(
  uri: vscode.Uri,
  opts: { activate?: boolean } = {},
): Promise<{ python: string; from: string }> {
  const configured = vscode.workspace.getConfiguration(SECTION, uri).get<string | null>('pythonPath', null);
  if (configured?.trim()) return { python: configured.trim(), from: 'fsdpLens.pythonPath' };
  const ext = vscode.extensions.getExtension<{
    environments?: { getActiveEnvironmentPath(resource?: vscode.Uri): { path: string } };
    settings?: { getExecutionDetails(resource?: vscode.Uri): { execCommand?: string[] } };
  }>('ms-python.python');
  if (ext && (ext.isActive || opts.activate !== false)) {
    try {
      const api = ext.isActive ? ext.exports : await ext.activate();
      const env = api.environments?.getActiveEnvironmentPath(uri)?.path;
      if (env) return { python: env, from: 'the Python extension' };
      const exec = api.settings?.getExecutionDetails(uri)?.execCommand?.[0];
      if (exec) return { python: exec, from: 'the Python extension' };
    } catch {
      // Fall back below.
    }
  }
  return { python: 'python3', from: 'default (python3 on PATH)' };
}
