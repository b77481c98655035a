/** The extension's activation: the analysis service wired to the editor's providers, commands and panel. */
import * as vscode from 'vscode';
import * as path from 'node:path';
import { DocumentAnalyses, isAnalysable, type DocumentAnalysis } from './analyses';
import { FixProvider } from './codeActions';
import { WrapCodeLensProvider } from './codeLens';
import { COMMANDS } from './commands';
import { Diagnostics } from './diagnostics';
import { FindingHoverProvider, WrapHoverProvider } from './hover';
import { chooseWhatToEstimate } from './pathCommands';
import { chooseModel, measureExactly } from './modelCommands';
import { setGpu, setWorldSize } from './setupCommands';
import { FitStatusBar } from './statusBar';
import { WorkspaceProjects } from './projects';
import { FootprintPanel, PANEL_VIEW_TYPE, type PanelState } from './panel';
import { SECTION } from './settings';

const PYTHON: vscode.DocumentSelector = [
  { language: 'python', scheme: 'file' },
  { language: 'python', scheme: 'untitled' },
  { language: 'python', scheme: 'vscode-remote' },
];

/** Where frameworks configure FSDP: Accelerate and torchtune YAML, DeepSpeed and fsdp_config JSON, torchtitan TOML, launch scripts. */
const CONFIGS: vscode.DocumentSelector = [
  { language: 'yaml' },
  { language: 'json' },
  { language: 'jsonc' },
  { language: 'shellscript' },
  { pattern: '**/*.toml' },
];

const ALL: vscode.DocumentSelector = [
  ...(PYTHON as vscode.DocumentFilter[]),
  ...(CONFIGS as vscode.DocumentFilter[]),
];

/** Wires the analysis service to the editor's providers and commands. */
/** What the extension exports: the footprint panel, for scripts and tests that drive it. */
export interface FsdpLensApi {
  panel(): FootprintPanel | undefined;
  /** Fires when an analysis of a document version finishes (the lenses, hover and problems follow it). */
  onDidAnalyze: vscode.Event<{ uri: string; version: number }>;
}

export function activate(context: vscode.ExtensionContext): FsdpLensApi {
  const distDir = vscode.Uri.joinPath(context.extensionUri, 'dist').fsPath;
  const log = vscode.window.createOutputChannel('FSDP Lens', { log: true });
  log.info(`fsdp-lens ${String(context.extension.packageJSON.version)} activated`);
  // Every analysis runs in a worker thread: the extension host only sends text and shows results.
  const analyses = new DocumentAnalyses(distDir, log);
  const projects = new WorkspaceProjects(analyses.worker, context.workspaceState);
  analyses.projects = projects;
  const lenses = new WrapCodeLensProvider(analyses);
  let refresh: ReturnType<typeof setTimeout> | undefined;

  context.subscriptions.push(
    log,
    // With lines (a refactoring's notes): written to the log first.
    vscode.commands.registerCommand(COMMANDS.showLog, (lines?: unknown) => {
      if (Array.isArray(lines)) for (const l of lines) if (typeof l === 'string') log.info(l);
      log.show(true);
    }),
    vscode.commands.registerCommand(COMMANDS.openExample, () => openExample(distDir)),
    analyses,
    new Diagnostics(analyses, context.extensionUri),
    vscode.languages.registerCodeLensProvider(ALL, lenses),
    vscode.languages.registerHoverProvider(ALL, new WrapHoverProvider(analyses)),
    vscode.languages.registerHoverProvider(ALL, new FindingHoverProvider(analyses)),
    new FitStatusBar(analyses),
    vscode.commands.registerCommand(COMMANDS.setWorldSize, (uri?: unknown) => setWorldSize(analyses, uri)),
    vscode.commands.registerCommand(COMMANDS.setGpu, (uri?: unknown) => setGpu(analyses, uri)),
    vscode.languages.registerCodeActionsProvider(ALL, new FixProvider(analyses), FixProvider.metadata),
    vscode.commands.registerCommand(COMMANDS.estimateFootprint, (uri?: vscode.Uri, unit?: number) =>
      estimateFootprint(context, analyses, uri, unit),
    ),
    projects,
    vscode.commands.registerCommand(COMMANDS.measureExactly, (uri?: vscode.Uri) =>
      measureExactly(analyses, projects, uri),
    ),
    vscode.commands.registerCommand(COMMANDS.chooseModel, (uri?: vscode.Uri) =>
      chooseModel(analyses, projects, uri),
    ),
    vscode.commands.registerCommand(COMMANDS.chooseWhatToEstimate, (uri?: vscode.Uri) =>
      chooseWhatToEstimate(analyses, uri),
    ),
    vscode.commands.registerCommand(COMMANDS.compareMeasuredRun, (uri?: vscode.Uri) =>
      compareMeasuredRun(context, analyses, uri),
    ),
    // A project file changed (an imported model, pyproject.toml, a launch script): re-analyse open scripts.
    projects.onDidChange(() => {
      if (refresh) clearTimeout(refresh);
      refresh = setTimeout(() => {
        analyses.invalidate();
        reanalyseOpen(analyses);
      }, 300);
    }),
    vscode.window.registerWebviewPanelSerializer(PANEL_VIEW_TYPE, {
      async deserializeWebviewPanel(panel, state: unknown) {
        FootprintPanel.revive(panel, context.extensionUri, analyses, state as PanelState | undefined);
      },
    }),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (!e.affectsConfiguration(SECTION)) return;
      analyses.invalidate();
      reanalyseOpen(analyses);
      lenses.refresh();
    }),
    analyses.onDidAnalyze((a) => {
      const panel = FootprintPanel.active;
      if (panel && panel.uri === a.uri) void panel.update(a);
      if (vscode.window.activeTextEditor?.document.uri.toString() === a.uri) setHasWrapCalls(hasPlan(a));
    }),
    vscode.window.onDidChangeActiveTextEditor((editor) => {
      const a = editor && analyses.latest(editor.document.uri);
      setHasWrapCalls(!!a && hasPlan(a));
      if (editor && isAnalysable(editor.document)) void analyses.analyze(editor.document);
    }),
  );
  const active = vscode.window.activeTextEditor?.document;
  if (active && isAnalysable(active)) void analyses.analyze(active);
  return {
    panel: () => FootprintPanel.active,
    onDidAnalyze: (listener, thisArg, disposables) =>
      analyses.onDidAnalyze(
        (a) => listener.call(thisArg, { uri: a.uri, version: a.version }),
        null,
        disposables,
      ),
  };
}

/**
 * Re-analyses open documents after a change that affects every analysis (settings, project files): those on
 * screen first, so that a slow hidden file does not hold up the ones being read, then the rest (their problems).
 */
function reanalyseOpen(analyses: DocumentAnalyses): void {
  const visible = new Set(vscode.window.visibleTextEditors.map((e) => e.document));
  const docs = vscode.workspace.textDocuments.filter(isAnalysable);
  for (const doc of [...docs.filter((d) => visible.has(d)), ...docs.filter((d) => !visible.has(d))])
    void analyses.analyze(doc);
}

/** The document wraps something, or configures FSDP through a framework. */
function hasPlan(a: DocumentAnalysis): boolean {
  return (
    a.facts.calls.length > 0 ||
    (a.estimate?.helperCalls?.length ?? 0) > 0 ||
    a.config?.kind === 'plan' ||
    a.config?.kind === 'launch' ||
    (!!a.estimate?.ok && !!a.estimate.framework)
  );
}

/**
 * Opens the bundled example (a Llama 3.1 8B FSDP2 script) as a new, unsaved Python document, so that a first look
 * writes nothing into the user's workspace.
 */
async function openExample(distDir: string): Promise<void> {
  const bytes = await vscode.workspace.fs.readFile(
    vscode.Uri.file(path.join(distDir, 'train_llama_fsdp2.py')),
  );
  const document = await vscode.workspace.openTextDocument({
    language: 'python',
    content: new TextDecoder().decode(bytes),
  });
  await vscode.window.showTextDocument(document);
}

/** Gates the editor title button: shown on Python files that wrap something. */
function setHasWrapCalls(value: boolean): void {
  void vscode.commands.executeCommand('setContext', 'fsdpLens.hasWrapCalls', value);
}

async function estimateFootprint(
  context: vscode.ExtensionContext,
  analyses: DocumentAnalyses,
  uri?: vscode.Uri,
  unit?: number,
): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  const document = uri
    ? await vscode.workspace.openTextDocument(uri)
    : editor && isAnalysable(editor.document)
      ? editor.document
      : undefined;
  if (!document) {
    void vscode.window.showInformationMessage(
      'Open a Python training script to estimate its FSDP footprint.',
    );
    return;
  }
  const analysis = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Window, title: 'FSDP: analysing' },
    () => analyses.analyze(document),
  );
  if (!analysis) return;
  FootprintPanel.show(context.extensionUri, analyses, analysis, typeof unit === 'number' ? unit : null);
}

/**
 * "Compare with a measured run…": a file the user picks (the JSON fsdp_lens_probe.py writes, a PyTorch memory
 * snapshot, a training log) put beside the footprint panel's estimate; the panel opens first where it is not open
 * on the file.
 */
async function compareMeasuredRun(
  context: vscode.ExtensionContext,
  analyses: DocumentAnalyses,
  uri?: vscode.Uri,
): Promise<void> {
  // The file asked about, else the one being edited (none while the panel has the focus: then the panel's file).
  const editor = vscode.window.activeTextEditor;
  const target = uri ?? (editor && isAnalysable(editor.document) ? editor.document.uri : undefined);
  let panel = FootprintPanel.active;
  if (!panel || (target && panel.uri !== target.toString())) {
    await estimateFootprint(context, analyses, target);
    panel = FootprintPanel.active;
  }
  if (!panel) return;
  const picked = await vscode.window.showOpenDialog({
    canSelectMany: false,
    canSelectFolders: false,
    openLabel: 'Compare',
    title: "A measured run: fsdp_lens_probe.py's JSON, a PyTorch memory snapshot, or a training log",
    filters: {
      JSON: ['json'],
      'Memory snapshots (pickle)': ['pickle', 'pkl'],
      Logs: ['log', 'txt', 'out'],
      'All files': ['*'],
    },
  });
  const file = picked?.[0];
  if (!file) return;
  if (file.scheme !== 'file') {
    void vscode.window.showErrorMessage('FSDP: a measured run is read from a file on this machine.');
    return;
  }
  await panel.setMeasured(file.fsPath);
}

export function deactivate(): void {}
