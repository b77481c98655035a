/**
 * The workspace as the analysis worker must know it: a watcher that tells it which project files changed, and
 * the model the user chose for each file.
 */
import * as vscode from 'vscode';
import { isProjectInput, PROJECT_INPUTS_GLOB } from '../core/vocabulary/files';
import type { AnalysisWorker } from './worker';
import { pythonFor } from './python';

/**
 * Project files kept in step with the worker's projects through a watcher (imports, configurations, launch
 * scripts, version pins); plus the model choices the user made, per file.
 */
export class WorkspaceProjects implements vscode.Disposable {
  private readonly disposables: vscode.Disposable[] = [];
  private readonly changed = new vscode.EventEmitter<void>();
  /** Fires when project files change (so open analyses can be refreshed). */
  readonly onDidChange = this.changed.event;

  constructor(
    private readonly worker: AnalysisWorker,
    private readonly state: vscode.Memento,
  ) {
    // Framework configurations and version pins as well as Python files and launch scripts: an edited Accelerate
    // YAML or a changed pin must not leave an open script's plan as it was.
    const watcher = vscode.workspace.createFileSystemWatcher(PROJECT_INPUTS_GLOB);
    const touched = (uri: vscode.Uri) => {
      if (!isProjectInput(uri.fsPath)) return;
      this.worker.notify({ kind: 'invalidate', file: uri.fsPath, contentOnly: false });
      this.changed.fire();
    };
    this.disposables.push(
      watcher,
      watcher.onDidChange(touched),
      watcher.onDidCreate(touched),
      watcher.onDidDelete(touched),
      vscode.workspace.onDidChangeWorkspaceFolders(() => this.worker.notify({ kind: 'reset' })),
      // Another interpreter chosen: its packages are read from then on.
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (!e.affectsConfiguration('python') && !e.affectsConfiguration('fsdpLens.pythonPath')) return;
        this.pythons.clear();
        this.changed.fire();
      }),
      this.changed,
    );
  }

  /** The interpreter of each workspace folder as the editor names it (null: none beyond PATH's python3). */
  private readonly pythons = new Map<string, string | null>();

  /**
   * The Python interpreter the editor uses for a file's folder (`fsdpLens.pythonPath`, else the Python
   * extension's choice), whose site-packages hold the installed helpers a script calls; undefined until it is
   * known (finding it is asynchronous: open analyses are refreshed when it is).
   */
  pythonOf(uri: vscode.Uri): string | undefined {
    const folder = vscode.workspace.getWorkspaceFolder(uri)?.uri.toString() ?? '';
    if (this.pythons.has(folder)) return this.pythons.get(folder) ?? undefined;
    this.pythons.set(folder, null);
    void pythonFor(uri, { activate: false }).then(
      ({ python, from }) => {
        // PATH's python3 names no environment without running it.
        if (from.startsWith('default')) return;
        this.pythons.set(folder, python);
        this.changed.fire();
      },
      () => undefined,
    );
    return undefined;
  }

  /** The class the user picked for a file whose model can be several. */
  modelChoice(uri: vscode.Uri): string | undefined {
    return this.state.get<Record<string, string>>('fsdpLens.modelChoices', {})[uri.toString()];
  }

  async setModelChoice(uri: vscode.Uri, className: string): Promise<void> {
    const all = {
      ...this.state.get<Record<string, string>>('fsdpLens.modelChoices', {}),
      [uri.toString()]: className,
    };
    await this.state.update('fsdpLens.modelChoices', all);
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }
}
