/**
 * One project per workspace folder, kept in step with the files by a watcher, with the editor's open documents
 * served first.
 */
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { ExactModel } from '../core/exact/exact';
import type { Host } from '../core/vocabulary/host';
import type { PythonGrammar } from '../core/parsing/python';
import { diskFS, nodeHost } from '../host/disk';
import { confine, huggingFaceRoots } from '../core/project/boundary';
import { isProjectInput, Project, PROJECT_INPUTS_GLOB, type ProjectFS } from '../core/project/project';

/** Reads open documents from the editor (their unsaved text) and everything else from disk. */
function editorFS(): ProjectFS {
  const open = (file: string) =>
    vscode.workspace.textDocuments.find((d) => d.uri.scheme === 'file' && d.uri.fsPath === file);
  return {
    readFile: (file) => open(file)?.getText() ?? diskFS.readFile(file),
    version: (file) => {
      const d = open(file);
      return d ? `doc:${d.version}` : diskFS.version(file);
    },
    refusal: (file) => (open(file) ? undefined : diskFS.refusal(file)),
    isDirectory: diskFS.isDirectory,
    entries: diskFS.entries,
    realPath: diskFS.realPath,
  };
}

/** A document's folder of the workspace, or its own folder outside any. */
function rootOf(uri: vscode.Uri): string {
  const folder = vscode.workspace.getWorkspaceFolder(uri);
  return folder?.uri.scheme === 'file' ? folder.uri.fsPath : path.dirname(uri.fsPath);
}

/**
 * One project per workspace folder (imports resolve and callers are found there), kept in step with the files
 * through a watcher; plus the model choices the user made and exact-mode measurements, per file.
 */
export class WorkspaceProjects implements vscode.Disposable {
  private readonly projects = new Map<string, Project>();
  private readonly exact = new Map<string, ExactModel>();
  private readonly disposables: vscode.Disposable[] = [];
  private readonly changed = new vscode.EventEmitter<void>();
  /** Fires when project files change (so open analyses can be refreshed). */
  readonly onDidChange = this.changed.event;

  constructor(
    private readonly grammar: () => PythonGrammar | undefined,
    private readonly state: vscode.Memento,
  ) {
    // Framework configurations and version pins as well as Python files and launch scripts: an edited Accelerate
    // YAML or a changed pin must not leave an open script's plan as it was.
    const watcher = vscode.workspace.createFileSystemWatcher(PROJECT_INPUTS_GLOB);
    const touched = (uri: vscode.Uri) => {
      if (!isProjectInput(uri.fsPath)) return;
      for (const p of this.projects.values()) p.invalidate(uri.fsPath);
      this.changed.fire();
    };
    this.disposables.push(
      watcher,
      watcher.onDidChange(touched),
      watcher.onDidCreate(touched),
      watcher.onDidDelete(touched),
      vscode.workspace.onDidChangeWorkspaceFolders(() => this.reset()),
      // Unsaved edits of open files are what the editor's file system serves: derived values must follow them.
      vscode.workspace.onDidChangeTextDocument((e) => {
        if (e.document.uri.scheme !== 'file' || !e.contentChanges.length) return;
        if (e.document.languageId !== 'python' && !isProjectInput(e.document.uri.fsPath)) return;
        for (const p of this.projects.values()) p.invalidate(e.document.uri.fsPath, { contentOnly: true });
      }),
      this.changed,
    );
  }

  /** The project of a document: its workspace folder, or its own folder outside any (file scheme only). */
  forDocument(uri: vscode.Uri): Project | undefined {
    if (uri.scheme !== 'file') return undefined;
    const grammar = this.grammar();
    if (!grammar) return undefined;
    const root = rootOf(uri);
    let p = this.projects.get(root);
    if (!p) {
      // Reads stay inside the folder and the Hugging Face folders, whatever a file of the workspace names.
      p = new Project([root], grammar, confine(editorFS(), [root, ...huggingFaceRoots(nodeHost())]));
      this.projects.set(root, p);
    }
    return p;
  }

  /**
   * The machine as a document's analysis sees it: the editor's files confined to the document's folder and the
   * Hugging Face folders, plus the paths the user's own settings name (`fsdpLens.model` in user settings).
   */
  hostFor(uri: vscode.Uri, usersPaths: string[]): Host {
    const base = uri.scheme === 'file' ? [rootOf(uri)] : [];
    return nodeHost(confine(editorFS(), [...base, ...huggingFaceRoots(nodeHost()), ...usersPaths]));
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

  exactModel(uri: vscode.Uri): ExactModel | undefined {
    return this.exact.get(uri.toString());
  }

  setExactModel(uri: vscode.Uri, m: ExactModel | undefined): void {
    if (m) this.exact.set(uri.toString(), m);
    else this.exact.delete(uri.toString());
  }

  private reset(): void {
    for (const p of this.projects.values()) p.dispose();
    this.projects.clear();
  }

  dispose(): void {
    this.reset();
    for (const d of this.disposables) d.dispose();
  }
}
