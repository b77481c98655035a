// The footprint panel's script: renders the data the extension posts. Every string is set as text, never as
// HTML, so nothing from a user's file can inject markup.
import { fmtBytes, fmtCount, fmtParams } from '../src/core/estimator/format';
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

function table(headers: string[], rows: (string | number)[][], numeric: number[] = []): HTMLTableElement {
  const t = el('table');
  const head = el('tr');
  for (const h of headers) head.append(el('th', h));
  t.append(head);
  for (const r of rows) {
    const tr = el('tr');
    r.forEach((c, i) => tr.append(el('td', String(c), numeric.includes(i) ? 'num' : undefined)));
    t.append(tr);
  }
  return t;
}

function render(data: PanelData): void {
  app.replaceChildren();
  app.append(el('h1', data.file.split(/[\\/]/).pop() ?? data.file));
  if (data.notice) app.append(el('p', data.notice, 'notice'));
  const b = (n: number) => fmtBytes(n, data.units);
  const e = data.estimate;
  if (e) {
    const summary = el('section', undefined, 'summary');
    summary.append(
      el(
        'p',
        `${e.model.name} · ${fmtCount(e.model.params)} parameters (${fmtParams(e.model.params)})`,
        'lead',
      ),
      el('p', `Per GPU: ${b(e.perGpu.persistentBytes)} persistent (${e.mesh.worldSize} x ${e.gpu.name})`),
      el(
        'p',
        `Traffic per step: ${b(e.comms.perStep.allGatherBytes + e.comms.perStep.reduceScatterBytes + e.comms.perStep.allReduceBytes)} per GPU`,
      ),
    );
    app.append(summary);
  } else if (data.noEstimate) {
    app.append(el('p', `No estimate: ${data.noEstimate.reason}.`, 'notice'));
    if (data.noEstimate.hint) app.append(el('p', data.noEstimate.hint, 'muted'));
  }
  if (!data.calls.length) {
    app.append(el('p', 'No fully_shard / FSDP wrap calls found in this file.', 'muted'));
    return;
  }
  app.append(el('h2', 'Wrap calls'));
  const calls = table(
    ['Line', 'Call', 'What it costs'],
    data.calls.map((c) => [c.line, `${c.api}(${c.target})`, c.lens]),
    [0],
  );
  if (data.focusUnit !== null) calls.rows[data.focusUnit + 1]?.classList.add('focus');
  app.append(calls);
  if (e) {
    app.append(el('h2', 'Units'));
    app.append(
      table(
        ['Unit', 'Params', 'Gathered', 'Shard state / GPU'],
        e.units.map((u) => [
          u.name,
          fmtParams(u.params),
          b(u.gatheredBytes),
          b(u.shardBytes.params + u.shardBytes.grads + u.shardBytes.optimizer),
        ]),
        [1, 2, 3],
      ),
    );
  }
}

window.addEventListener('message', (e: MessageEvent<{ type: string; data: PanelData }>) => {
  if (e.data?.type === 'update') {
    vscode.setState(e.data.data);
    render(e.data.data);
  }
});

const saved = vscode.getState() as PanelData | undefined;
if (saved) render(saved);
