// The footprint panel's script: renders the data the extension posts. Every string is set as text, never as
// HTML, so nothing from a user's file can inject markup.
import type { PanelData } from '../src/core/report/panelData';

interface VsCodeApi {
  postMessage(msg: unknown): void;
  getState(): unknown;
  setState(state: unknown): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

const vscode = acquireVsCodeApi();
const app = document.getElementById('app')!;

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  text?: string,
  cls?: string,
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function render(data: PanelData): void {
  app.replaceChildren();
  app.append(el('h1', data.file.split(/[\\/]/).pop() ?? data.file));
  if (data.notice) app.append(el('p', data.notice, 'notice'));
  if (!data.calls.length) {
    app.append(el('p', 'No fully_shard / FSDP wrap calls found in this file.', 'muted'));
    return;
  }
  const table = el('table');
  const head = el('tr');
  for (const h of ['Line', 'Call', 'Detected']) head.append(el('th', h));
  table.append(head);
  data.calls.forEach((c, i) => {
    const row = el('tr');
    if (data.focusUnit === i) row.className = 'focus';
    row.append(
      el('td', String(c.line), 'num'),
      el('td', `${c.api}(${c.target})`, 'code'),
      el('td', c.description),
    );
    table.append(row);
  });
  app.append(table);
}

window.addEventListener('message', (e: MessageEvent<{ type: string; data: PanelData }>) => {
  if (e.data?.type === 'update') {
    vscode.setState(e.data.data);
    render(e.data.data);
  }
});

const saved = vscode.getState() as PanelData | undefined;
if (saved) render(saved);
