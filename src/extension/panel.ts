/** The footprint panel's host: one webview per window, fed the core's panel data, answering its messages. */
import * as crypto from 'node:crypto';
import * as vscode from 'vscode';
import type { PanelData, PanelRequest, WhatIfValues } from '../core/report/panelProtocol';
import type { DocumentAnalyses, DocumentAnalysis } from './analyses';
import type { CompareSource } from '../worker/protocol';
import { COMMANDS } from './commands';
import { setAnnotations } from '../core/lint/annotationEdits';
import type { Fix } from '../core/lint/types';
import { configInputEdit } from '../core/lint/configEdits';
import { offloadEdit, strategyEdit, type StrategyChoice } from '../core/lint/planEdits';
import { toRange } from './convert';

export const PANEL_VIEW_TYPE = 'fsdpLens.footprint';

/**
 * How long the panel waits for the worker to read a measured run's file: past the worker's own limit on it
 * (`PANEL_READ_MS` of src/host/measuredRun.ts, ten minutes), which ends the read with a message first.
 */
const RUN_READ_TIMEOUT_MS = 11 * 60_000;

/** What the webview saves with `setState` and VS Code hands back when it restores the panel. */
export interface PanelState {
  data?: PanelData;
}

/**
 * The "Estimate FSDP footprint" panel: one per window, reused and revealed. It shows one document's analysis
 * under the what-if values the user set in it; every number comes from `buildPanelData` over that analysis.
 */
export class FootprintPanel implements vscode.Disposable {
  private static current?: FootprintPanel;
  private readonly disposables: vscode.Disposable[] = [];

  /** The document the panel shows. */
  uri: string | undefined;
  private focusUnit: number | null = null;
  /** Updates asked for, so that only the last one's data is shown. */
  private asked = 0;
  private whatIf: Partial<WhatIfValues> = {};
  /** "Where it fits" is open: each update solves for what fits on every GPU. */
  private fitOpen = false;
  /** What the panel compares the file with: 'HEAD', an open document's URI, or '' for nothing. */
  private comparing = '';
  /** The path of the measured run the panel puts beside the file's estimate, or '' for none. */
  private measured = '';
  /** The measured run whose reading the panel waits for, to show it when it is read. */
  private awaitingRun = '';
  /** The last data posted (tests read it through the `fsdpLens.panelData` command). */
  lastData: PanelData | undefined;

  private constructor(
    private readonly panel: vscode.WebviewPanel,
    private readonly extensionUri: vscode.Uri,
    private readonly analyses: DocumentAnalyses,
  ) {
    panel.onDidDispose(() => this.dispose(), null, this.disposables);
    panel.webview.onDidReceiveMessage((m: PanelRequest) => this.onMessage(m), null, this.disposables);
    panel.webview.html = this.html();
  }

  /** Opens (or reveals) the panel on a document's analysis, focused on one wrap call when given. */
  static show(
    extensionUri: vscode.Uri,
    analyses: DocumentAnalyses,
    analysis: DocumentAnalysis,
    focusUnit: number | null,
  ): FootprintPanel {
    let p = FootprintPanel.current;
    if (!p) {
      const panel = vscode.window.createWebviewPanel(
        PANEL_VIEW_TYPE,
        'FSDP footprint',
        { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
        panelOptions(extensionUri),
      );
      p = new FootprintPanel(panel, extensionUri, analyses);
      FootprintPanel.current = p;
    } else p.panel.reveal(vscode.ViewColumn.Beside, true);
    // Another document: another job, whose what-if values and measured run are its own.
    if (p.uri !== analysis.uri) {
      p.whatIf = {};
      p.measured = '';
    }
    p.focusUnit = focusUnit;
    void p.update(analysis);
    return p;
  }

  /** Restores a panel VS Code kept across a reload, from the state its webview saved. */
  static revive(
    panel: vscode.WebviewPanel,
    extensionUri: vscode.Uri,
    analyses: DocumentAnalyses,
    state: PanelState | undefined,
  ): FootprintPanel {
    panel.webview.options = panelOptions(extensionUri);
    const p = new FootprintPanel(panel, extensionUri, analyses);
    FootprintPanel.current = p;
    const data = state?.data;
    if (data?.uri) {
      p.uri = data.uri;
      p.focusUnit = data.focusUnit;
      if (data.whatIf) p.whatIf = changedValues(data.whatIf.values, data.whatIf.base);
      if (typeof data.measured?.file === 'string') p.measured = data.measured.file;
      void vscode.workspace.openTextDocument(vscode.Uri.parse(data.uri)).then(
        async (doc) => {
          const a = await analyses.analyze(doc);
          if (a) await p.update(a);
        },
        () => undefined,
      );
    }
    return p;
  }

  static get active(): FootprintPanel | undefined {
    return FootprintPanel.current;
  }

  /**
   * Shows a (newer) analysis of the panel's document under the current what-if values: the worker explores them
   * on the analysis it keeps; a document it did not analyse shows why.
   */
  async update(analysis: DocumentAnalysis): Promise<PanelData> {
    this.uri = analysis.uri;
    const asked = ++this.asked;
    const compare = this.compareSource(analysis.uri);
    const data =
      (analysis.notice
        ? undefined
        : await this.analyses.worker
            .request<PanelData | undefined>(
              {
                kind: 'panel',
                uri: analysis.uri,
                focusUnit: this.focusUnit,
                whatIf: this.whatIf,
                ...(this.fitOpen ? { fit: true } : {}),
                ...(compare && !('error' in compare) ? { compare } : {}),
                ...(this.measured ? { measured: this.measured } : {}),
              },
              20_000,
            )
            .catch(() => undefined)) ?? noticeData(analysis, this.focusUnit);
    // A later update (a newer analysis, other what-if values) has the say.
    if (asked !== this.asked) return data;
    if (compare && 'error' in compare) data.compare = { label: compare.label, reason: compare.error };
    if (data.measured && 'reading' in data.measured) this.awaitRun(data.measured.file);
    data.compareChoices = compareChoices(analysis.uri);
    data.comparing = this.comparing;
    for (const c of data.whatIf?.changed ?? []) {
      const fix = codeFixFor(analysis, c.key, data.whatIf!.values[c.key]);
      if (fix) c.codeFix = fix.title;
    }
    this.lastData = data;
    this.panel.title = `FSDP footprint: ${data.file.split(/[\\/]/).pop() ?? data.file}`;
    void this.panel.webview.postMessage({ type: 'update', data });
    return data;
  }

  /**
   * Writes the what-if values that annotations can say into the file as `# fsdp:` pairs (one edit, undoable, as the
   * user asked with "Apply to file"), then shows the file's own figures, which now carry them.
   */
  async applyWhatIf(): Promise<boolean> {
    const all = this.lastData?.whatIf?.changed ?? [];
    if (!this.uri || !all.some((c) => c.annotation || c.codeFix)) return false;
    const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(this.uri));
    const values = this.lastData!.whatIf!.values;
    // A change the file's own quick fix makes goes into the code (or config) by that fix, on the version it was
    // computed for; the rest as `# fsdp:` annotations.
    const analysis = this.analyses.latest(doc.uri);
    const current = analysis?.version === doc.version ? analysis : undefined;
    const fixes = all
      .filter((c) => c.codeFix)
      .map((c) => (current ? codeFixFor(current, c.key, values[c.key]) : undefined));
    if (fixes.some((f) => !f)) return false;
    const annotated = all.filter((c) => c.annotation && !c.codeFix);
    const edit = annotated.length
      ? setAnnotations(
          doc.getText(),
          annotated.map((c) => [c.annotation!, String(values[c.key])]),
        )
      : null;
    if (!edit && !fixes.length) return false;
    const we = new vscode.WorkspaceEdit();
    if (edit) we.replace(doc.uri, toRange(edit.range), edit.newText);
    for (const f of fixes) for (const e of f!.edits) we.replace(doc.uri, toRange(e.range), e.newText);
    if (!(await vscode.workspace.applyEdit(we))) return false;
    // Keep what no annotation says (the plan's sharding, its units) as a what-if.
    const kept = all.filter((c) => !c.annotation && !c.codeFix);
    this.whatIf = Object.fromEntries(kept.map((c) => [c.key, values[c.key]!]));
    return true;
  }

  /** Compares the file with another version ('HEAD', an open document's URI, '' for none), as the webview's select does. */
  async setComparing(against: string): Promise<PanelData | undefined> {
    this.comparing = against;
    return this.refresh();
  }

  /**
   * Puts a measured run (the probe's JSON, a memory snapshot, a training log; '' for none) beside the file's own
   * estimate, as the command "Compare with a measured run…" does.
   */
  async setMeasured(file: string): Promise<PanelData | undefined> {
    this.measured = file;
    return this.refresh();
  }

  /** Waits for the worker to finish reading a run's file, then shows it (while the panel still compares with it). */
  private awaitRun(file: string): void {
    if (this.awaitingRun === file) return;
    this.awaitingRun = file;
    void this.analyses.worker
      .request<boolean>({ kind: 'measuredRun', file }, RUN_READ_TIMEOUT_MS)
      .catch(() => false)
      .then(() => {
        if (this.awaitingRun === file) this.awaitingRun = '';
        if (this.measured === file) void this.refresh();
      });
  }

  /**
   * The version the panel compares the file with: the file at the last commit (the worker reads it from the
   * repository's objects, never by running git), or another open document's text; or why there is none.
   */
  private compareSource(uri: string): CompareSource | { label: string; error: string } | undefined {
    if (!this.comparing) return undefined;
    const self = vscode.Uri.parse(uri);
    if (this.comparing === 'HEAD')
      return self.scheme === 'file'
        ? { kind: 'revision', rev: 'HEAD', file: self.fsPath }
        : { label: 'the last commit', error: 'the file is not saved on disk' };
    const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === this.comparing);
    const label = this.comparing.split('/').pop() ?? this.comparing;
    if (!doc) return { label, error: 'it is no longer open' };
    return {
      kind: 'text',
      label: vscode.workspace.asRelativePath(doc.uri),
      file: doc.uri.fsPath,
      text: doc.getText(),
    };
  }

  /** Opens or folds "Where it fits", as the webview's section does (tests drive the panel through this). */
  async setFitOpen(on: boolean): Promise<PanelData | undefined> {
    this.fitOpen = on;
    return this.refresh();
  }

  /** Applies what-if values as the panel's controls would (tests drive the panel through this). */
  async setWhatIf(values: Partial<WhatIfValues>): Promise<PanelData | undefined> {
    this.whatIf = values;
    return this.refresh();
  }

  private async refresh(): Promise<PanelData | undefined> {
    const a = this.uri ? this.analyses.latest(vscode.Uri.parse(this.uri)) : undefined;
    return a ? this.update(a) : undefined;
  }

  private onMessage(m: PanelRequest): void {
    switch (m?.type) {
      case 'ready':
        // The script loaded after the last update was posted (messages to a loading webview are lost): resend.
        if (this.lastData) void this.panel.webview.postMessage({ type: 'update', data: this.lastData });
        return;
      case 'whatIf':
        this.whatIf = m.values ?? {};
        void this.refresh();
        return;
      case 'reset':
        this.whatIf = {};
        void this.refresh();
        return;
      case 'fit':
        this.fitOpen = m.on === true;
        if (this.fitOpen) void this.refresh();
        return;
      case 'compare':
        this.comparing = typeof m.against === 'string' ? m.against : '';
        void this.refresh();
        return;
      case 'applyWhatIf':
        this.applyWhatIf().catch((e: unknown) => {
          void vscode.window.showErrorMessage(
            `FSDP: the what-if could not be written to the file (${e instanceof Error ? e.message : String(e)})`,
          );
        });
        return;
      case 'reveal': {
        if (!this.uri || typeof m.line !== 'number') return;
        const line = Math.max(0, Math.floor(m.line) - 1);
        void vscode.window.showTextDocument(vscode.Uri.parse(this.uri), {
          viewColumn: vscode.ViewColumn.One,
          selection: new vscode.Range(line, 0, line, 0),
        });
        return;
      }
      case 'clearMeasured':
        this.measured = '';
        void this.refresh();
        return;
      case 'command': {
        const id =
          m.command === 'measureExactly'
            ? COMMANDS.measureExactly
            : m.command === 'compareMeasured'
              ? COMMANDS.compareMeasuredRun
              : COMMANDS.chooseModel;
        if (this.uri) void vscode.commands.executeCommand(id, vscode.Uri.parse(this.uri));
        return;
      }
    }
  }

  private html(): string {
    const webview = this.panel.webview;
    const nonce = crypto.randomBytes(16).toString('base64');
    const script = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, 'dist', 'panel.js'));
    const style = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, 'media', 'panel.css'));
    const csp = [
      "default-src 'none'",
      `style-src ${webview.cspSource}`,
      `img-src ${webview.cspSource} data:`,
      `script-src 'nonce-${nonce}'`,
      `font-src ${webview.cspSource}`,
    ].join('; ');
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${style.toString()}">
<title>FSDP footprint</title>
</head>
<body>
<main id="app" aria-live="polite"><p class="muted">Analysing…</p></main>
<script nonce="${nonce}" src="${script.toString()}"></script>
</body>
</html>`;
  }

  dispose(): void {
    if (FootprintPanel.current === this) FootprintPanel.current = undefined;
    this.panel.dispose();
    for (const d of this.disposables) d.dispose();
  }
}

/** The panel's data for a document that was not analysed: why, and nothing else. */
function noticeData(a: DocumentAnalysis, focusUnit: number | null): PanelData {
  return {
    file: a.facts.path,
    uri: a.uri,
    focusUnit,
    units: a.units,
    calls: [],
    notice: a.notice ?? 'fsdp-lens: this document has no analysis yet',
  };
}

/**
 * The edit of the file that makes a what-if change in its code or configuration: full activation checkpointing by
 * the fix FSDP015 offers on a plan that does not fit (`gradient_checkpointing_enable()`, `apply_activation_
 * checkpointing`, a config key), the sharding strategy and CPU offload on the wraps (`strategyEdit`,
 * `offloadEdit`), and in a framework configuration any input at the key its reader takes it from.
 */
function codeFixFor(analysis: DocumentAnalysis, key: string, value: unknown): Fix | undefined {
  if (key === 'checkpointing' && value === 'full') {
    const fix = analysis.findings
      .find((f) => f.rule === 'FSDP015')
      ?.fixes.find((f) => f.title.startsWith('Enable activation checkpointing'));
    if (fix) return fix;
  }
  const r = analysis.estimate;
  if (!r?.ok) return undefined;
  const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === analysis.uri);
  // A file larger than this is not parsed on the extension host; the analysis must be of this very text.
  if (!doc || doc.version !== analysis.version || doc.getText().length > 256 * 1024) return undefined;
  const text = doc.getText();
  const api = r.estimate.plan.api;
  if (!r.framework && key === 'strategy') {
    const e = strategyEdit(analysis.facts.calls, text, api, value as StrategyChoice);
    return e ? { title: `Write ${e.written}`, edits: e.edits } : undefined;
  }
  if (!r.framework && key === 'offload' && value === 'on') {
    const e = offloadEdit(analysis.facts.calls, text, api);
    return e ? { title: `Write ${e.written}`, edits: e.edits } : undefined;
  }
  // A framework configuration: the value at the key its reader takes it from (`configInputEdit`).
  if (!r.framework) return undefined;
  const v = key === 'checkpointing' ? value : Number(value);
  const cfg = configInputEdit(r.framework, analysis.facts.path, text, r.estimate.assumptions, key, v);
  return cfg ? { title: `Write ${cfg.written}`, edits: [cfg.edit] } : undefined;
}

/** What the panel can compare a file with: the last commit, and the other open files the analysis reads. */
function compareChoices(uri: string): { value: string; label: string }[] {
  const others = vscode.workspace.textDocuments
    .filter(
      (d) =>
        d.uri.toString() !== uri &&
        !d.isClosed &&
        (d.uri.scheme === 'file' || d.uri.scheme === 'untitled') &&
        /\.(py|ya?ml|toml|json|sh)$/.test(d.uri.path),
    )
    .slice(0, 20)
    .map((d) => ({ value: d.uri.toString(), label: vscode.workspace.asRelativePath(d.uri) }));
  return [{ value: '', label: 'nothing' }, { value: 'HEAD', label: 'the last commit' }, ...others];
}

function changedValues(values: WhatIfValues, base: WhatIfValues): Partial<WhatIfValues> {
  const out: Partial<WhatIfValues> = {};
  for (const k of Object.keys(values) as (keyof WhatIfValues)[])
    if (values[k] !== base[k]) (out as Record<string, unknown>)[k] = values[k];
  return out;
}

function panelOptions(extensionUri: vscode.Uri): vscode.WebviewPanelOptions & vscode.WebviewOptions {
  return {
    enableScripts: true,
    localResourceRoots: [
      vscode.Uri.joinPath(extensionUri, 'dist'),
      vscode.Uri.joinPath(extensionUri, 'media'),
    ],
  };
}
