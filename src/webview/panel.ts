// The footprint panel's script: draws the data the extension posts and sends back what the user changes. Every
// number comes from the extension's estimate; nothing here computes a formula of its own.
import '@vscode-elements/elements/dist/vscode-button/index.js';
import '@vscode-elements/elements/dist/vscode-option/index.js';
import '@vscode-elements/elements/dist/vscode-single-select/index.js';
import '@vscode-elements/elements/dist/vscode-textfield/index.js';
import type { Chart } from 'chart.js';
import { fmtBytes, fmtCount, fmtParams, fmtSeconds } from '../core/vocabulary/bytes';
import {
  atLeast,
  blockRanges,
  fmtInFlight,
  peakWhere,
  shortGpu,
  undecidedWhy,
  unitsWords,
  verdictWords,
  wholeNodesText,
} from '../core/vocabulary/words';
import type { Verdict } from '../core/vocabulary/words';
import type { PanelData, PanelRequest, PanelUpdate, WhatIfValues } from '../core/report/panelProtocol';
import { granularityChart, memoryChart } from './charts';
import { custom, el, section, table, type Cell } from './dom';
import { largestCell, smallestCell } from '../core/report/fitCells';

interface VsCodeApi {
  postMessage(msg: PanelRequest): void;
  getState(): unknown;
  setState(state: unknown): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

/** What the webview keeps across reloads (VS Code hands it back to the panel serializer). */
interface SavedState {
  data: PanelData;
}

const vscode = acquireVsCodeApi();
const app = document.getElementById('app')!;
const charts: Chart[] = [];
let current: PanelData | undefined;

type Estimate = NonNullable<PanelData['estimate']>;

const post = (m: PanelRequest) => vscode.postMessage(m);

function card(label: string, value: string, detail: string, cls = ''): HTMLElement {
  const c = el('div', undefined, `card ${cls}`.trim());
  c.append(el('div', label, 'card-label'), el('div', value, 'card-value'), el('div', detail, 'card-detail'));
  return c;
}

function renderHeader(data: PanelData, e: Estimate | undefined): HTMLElement {
  const h = el('header');
  h.append(el('h1', `FSDP footprint · ${data.file.split(/[\\/]/).pop() ?? data.file}`));
  if (!e) return h;
  const api = e.plan.label;
  const mesh = e.mesh.hsdp
    ? `${e.mesh.worldSize} GPUs as ${e.mesh.replicas} replicas x ${e.mesh.shardGroup}`
    : `${e.mesh.worldSize} GPUs`;
  h.append(
    el(
      'p',
      `${e.model.name} · ${fmtCount(e.model.params)} parameters · ${e.plan.api === 'none' ? api : `${api}, ${unitsWords(e.plan.api, e.units.length)}`} · ${mesh} x ${e.gpu.name}`,
      'lead',
    ),
  );
  return h;
}

/** How each verdict is marked: the summary's class, a table cell's class, yes/no, a tick. */
const VERDICT_CLASS: Record<Verdict, string> = { fits: 'fits', short: 'no-fit', undecided: 'undecided' };
const VERDICT_CELL: Record<Verdict, string> = { fits: 'ok', short: 'bad', undecided: 'muted' };
const YES: Record<Verdict, string> = { fits: 'yes', short: 'no', undecided: 'undecided' };
const MARK: Record<Verdict, string> = { fits: '✓', short: '✗', undecided: '?' };

/** Where an input came from: its kind, and the line or file when known. */
function sourceWords(a: Estimate['assumptions'][number]): string {
  return `${a.source.kind}${a.source.detail ? `: ${a.source.detail}` : ''}`;
}

/** The inputs whose sources the summary shows under the verdict. */
const SUMMARY_INPUTS = ['worldSize', 'gpu', 'microBatch', 'seqLen', 'checkpointing'];

function renderSummary(data: PanelData, e: Estimate): HTMLElement {
  const b = (n: number) => fmtBytes(n, data.units);
  const mine = e.targetFit;
  const s = el('section', undefined, 'summary');
  s.id = 'summary';
  const least = atLeast(e.lowerBound);
  const verdict = el('p', undefined, `verdict ${VERDICT_CLASS[mine.verdict]}`);
  verdict.setAttribute('role', 'status');
  // A job whose GPUs the step shares with other phases: the phase that decides, when it is not the step.
  const phase = e.colocated?.phases.find((p) => p.name === e.colocated!.worst && p.kind !== 'update');
  const peak = phase
    ? `its ${phase.name} phase needs ${least}${b(phase.needBytes)}${phase.engineFraction ? ' with the rollout engine' : ''}`
    : `peak ${least}${b(e.perGpu.peakBytes)} ${peakWhere(e.perGpu.peakAt)}`;
  verdict.textContent =
    mine.verdict === 'fits'
      ? `Fits ${shortGpu(e.gpu.name)}: ${peak}, ${b(mine.headroomBytes)} to spare`
      : mine.verdict === 'short'
        ? `Does not fit ${shortGpu(e.gpu.name)}: ${peak}, ${b(-mine.headroomBytes)} short`
        : e.unmodelled.length || e.undecided.length || (e.overcounted.length && mine.headroomBytes < 0)
          ? `Fit on ${shortGpu(e.gpu.name)} undecided: ${undecidedWhy(e)}`
          : `Fit on ${shortGpu(e.gpu.name)} undecided: ${peak} counted, ${b(mine.headroomBytes)} left for the parts not counted`;
  s.append(verdict);
  // Where the verdict's inputs come from, always in sight: the file's lines, a launch file, or a default.
  const inputs = e.assumptions.filter((a) => SUMMARY_INPUTS.includes(a.key));
  if (inputs.length) {
    const line = el('p', undefined, 'muted sources');
    line.textContent = inputs.map((a) => `${a.label} ${a.value} (${sourceWords(a)})`).join(' · ');
    s.append(line);
  }
  if (e.gaps.length || e.uncounted.length) {
    const gaps = el('div', undefined, 'advice problem');
    gaps.id = 'gaps';
    const list = el('ul');
    for (const g of [...e.gaps, ...e.uncounted].slice(0, 12)) list.append(el('li', g));
    gaps.append(
      el(
        'h3',
        e.gaps.length
          ? 'Not counted: every figure is a lower bound'
          : 'Not counted: the peak is a lower bound',
      ),
      list,
    );
    if (e.gaps.length)
      gaps.append(
        el(
          'p',
          'Measure the model exactly with PyTorch, or name it with a "# fsdp: model=" comment, to count them.',
        ),
      );
    s.append(gaps);
  }
  const cards = el('div', undefined, 'cards');
  const trainable =
    e.model.trainableParams < e.model.params
      ? `${fmtParams(e.model.trainableParams)} trainable`
      : 'all trainable';
  const minCard = card(
    'Smallest world size',
    e.minGpusUndecided
      ? 'not decided'
      : e.minGpus === null
        ? 'none'
        : `${e.minGpus} GPU${e.minGpus === 1 ? '' : 's'}`,
    e.minGpusUndecided
      ? e.undecided.length
        ? "the figures are one arm's"
        : e.unmodelled.length
          ? 'the search varies FSDP alone'
          : 'the figures count more than the job keeps'
      : e.minGpus === null
        ? 'more GPUs do not shrink activations: see What to change'
        : `that fits ${shortGpu(e.gpu.name)}${e.minGpusOnWholeNodes ? `; ${e.minGpusOnWholeNodes.worldSize} on ${e.minGpusOnWholeNodes.nodes} whole nodes of ${e.minGpusOnWholeNodes.gpusPerNode}` : ''}${e.mesh.pp > 1 || e.mesh.tp > 1 || e.mesh.cp > 1 ? `, ${[e.mesh.pp > 1 ? `PP ${e.mesh.pp}` : '', e.mesh.tp > 1 ? `TP ${e.mesh.tp}` : '', e.mesh.cp > 1 ? `CP ${e.mesh.cp}` : ''].filter(Boolean).join(' x ')} fixed` : ''}`,
  );
  if (e.minGpusReason) minCard.title = e.minGpusReason;
  const peakCard = card(
    'Peak per GPU',
    `${least}${b(e.perGpu.peakBytes)}`,
    peakWhere(e.perGpu.peakAt) || 'no activation model',
    mine.verdict === 'fits' ? 'ok' : mine.verdict === 'short' ? 'bad' : '',
  );
  // Allocated is what `max_memory_allocated` shows; reserved adds what the caching allocator keeps for FSDP's
  // side streams where memory allows (docs/estimator.md, "Fit").
  const pools = e.perGpu.reservedPools;
  if (pools && pools.gather + pools.reduce > 0) {
    const reserved = el(
      'div',
      `${least}${b(e.perGpu.reservedBytes)} reserved where memory allows`,
      'card-detail',
    );
    reserved.title =
      `The compute stream's ${b(pools.compute)} with a 10% allowance, and the blocks the caching allocator keeps ` +
      `for FSDP's all-gather stream (${b(pools.gather)}) and reduce-scatter stream (${b(pools.reduce)}), which ` +
      `it frees again before it runs out of memory.`;
    peakCard.append(reserved);
  }
  cards.append(
    card('Parameters', `${least}${fmtParams(e.model.params)}`, trainable),
    card(
      'Per GPU, persistent',
      `${least}${b(e.perGpu.persistentBytes)}`,
      `model state ${b(e.perGpu.modelStateBytes)} of ${b(e.modelStateTotalBytes)} unsharded`,
    ),
    peakCard,
    card(
      'Traffic per step',
      b(e.comms.perStepTotal.bytes),
      `${e.comms.perStepTotal.collectives} collectives per GPU`,
    ),
    minCard,
  );
  s.append(cards);
  return s;
}

const controls = new Map<string, HTMLElement & { value: string }>();
let controlsBuiltFor = '';
let pending: ReturnType<typeof setTimeout> | undefined;

/** The controls' values: numbers for number fields, the chosen value of selects. */
function readControls(): Partial<WhatIfValues> {
  const v: Partial<WhatIfValues> = {};
  for (const c of current?.whatIf?.controls ?? []) {
    const raw = controls.get(c.key)?.value;
    if (raw === undefined) continue;
    if (c.kind === 'number') {
      const n = Number(raw);
      if (Number.isFinite(n) && n >= 1) v[c.key] = Math.floor(n);
    } else v[c.key] = raw;
  }
  return v;
}

function sendWhatIf(delay: number): void {
  if (pending) clearTimeout(pending);
  pending = setTimeout(() => post({ type: 'whatIf', values: readControls() }), delay);
}

function select(key: string, label: string, options: { value: string; label: string }[]): HTMLElement {
  const wrap = el('label', undefined, 'control');
  wrap.append(el('span', label));
  const s = custom('vscode-single-select', { 'aria-label': label }) as HTMLElement & { value: string };
  for (const o of options) s.append(custom('vscode-option', { value: o.value }, o.label));
  s.addEventListener('change', () => sendWhatIf(0));
  controls.set(key, s);
  wrap.append(s);
  return wrap;
}

function field(key: string, label: string): HTMLElement {
  const wrap = el('label', undefined, 'control');
  wrap.append(el('span', label));
  const f = custom('vscode-textfield', { type: 'number', min: '1', 'aria-label': label }) as HTMLElement & {
    value: string;
  };
  // A value the estimate cannot take is said under the field, and not sent.
  const message = el('span', '', 'invalid-message');
  message.setAttribute('aria-live', 'polite');
  const check = (): boolean => {
    const n = Number(f.value);
    const ok = f.value.trim() !== '' && Number.isInteger(n) && n >= 1;
    f.toggleAttribute('invalid', !ok);
    message.textContent = ok ? '' : `${label}: a whole number of at least 1`;
    return ok;
  };
  f.addEventListener('input', () => check() && sendWhatIf(400));
  f.addEventListener('change', () => check() && sendWhatIf(0));
  controls.set(key, f);
  wrap.append(f, message);
  return wrap;
}

/** The what-if controls the core describes: built once per set of controls (so typing keeps focus), their values refreshed on each update. */
function renderControls(data: PanelData, host: HTMLElement): void {
  const w = data.whatIf!;
  const signature = JSON.stringify(w.controls);
  if (controlsBuiltFor !== signature) {
    controls.clear();
    host.replaceChildren();
    const grid = el('div', undefined, 'controls');
    for (const c of w.controls)
      grid.append(c.kind === 'number' ? field(c.key, c.label) : select(c.key, c.label, c.options ?? []));
    const reset = custom('vscode-button', { secondary: true }, 'Reset to the file');
    reset.addEventListener('click', () => post({ type: 'reset' }));
    const actions = el('div', undefined, 'control actions');
    actions.append(reset);
    grid.append(actions);
    host.append(grid);
    controlsBuiltFor = signature;
  }
  for (const [k, c] of controls) {
    if (document.activeElement === c) continue;
    const v = String(w.values[k]);
    if (c.value !== v) c.value = v;
    c.classList.toggle('changed', String(w.base[k]) !== v);
  }
}

function renderChart(data: PanelData, e: Estimate): HTMLElement {
  const s = section('Memory over the step', 'memory');
  if (!e.timeline.length) {
    s.append(el('p', 'No timeline: the model has no block structure the activation model knows.', 'muted'));
    return s;
  }
  const focusCall = data.focusUnit !== null ? data.calls[data.focusUnit] : undefined;
  const focus = new Set(focusCall?.units ?? []);
  s.append(
    el(
      'p',
      `Forward through the units, the loss, backward in reverse, then the optimizer step. The dashed line is what the ` +
        `${shortGpu(e.gpu.name)} leaves for the peak after the allocator's reserve and the CUDA context.`,
      'muted',
    ),
  );
  const box = el('div', undefined, 'chart');
  const canvas = el('canvas');
  canvas.setAttribute('role', 'img');
  canvas.setAttribute(
    'aria-label',
    `Memory per GPU over the step, peaking at ${fmtBytes(e.perGpu.peakBytes, data.units)} ${peakWhere(e.perGpu.peakAt)}`,
  );
  box.append(canvas);
  s.append(box);
  queueMicrotask(() => charts.push(memoryChart(canvas, e, data.units, focus)));
  return s;
}

function renderAdvice(data: PanelData): HTMLElement {
  const s = section('What to change', 'advice');
  const b = (n: number) => fmtBytes(n, data.units);
  for (const a of data.advice ?? []) {
    const item = el('div', undefined, `advice ${a.level}`);
    item.append(el('h3', a.title), el('p', a.detail));
    if (a.options.length) {
      item.append(
        table(
          ['Change', 'Peak / GPU', 'Fits', 'Traffic / step', 'Exposed transfer', ''],
          a.options.map((o) => [
            { text: o.label, cls: 'strong' },
            b(o.peakBytes),
            { text: YES[o.verdict], cls: VERDICT_CELL[o.verdict] },
            b(o.trafficBytes),
            // A cost the estimate leaves out makes the figure a lower bound, and the note says which.
            `${o.unmodelledCost ? '≥ ' : ''}${fmtSeconds(o.exposedSeconds)}`,
            { text: o.unmodelledCost ? `${o.note}; ${o.unmodelledCost}` : o.note, cls: 'muted' },
          ]),
          { numeric: [1, 3, 4] },
        ),
      );
      const tryable = a.options.filter((o) => o.whatIf);
      if (tryable.length) item.append(tryButtons(tryable));
    }
    s.append(item);
  }
  return s;
}

/** A "Try" button per change, each sending the controls' values with that change applied as a what-if. */
function tryButtons(changes: readonly { label: string; whatIf?: unknown }[]): HTMLElement {
  const row = el('div', undefined, 'try');
  for (const c of changes) {
    const btn = custom('vscode-button', { secondary: true }, `Try ${c.label}`);
    btn.addEventListener('click', () =>
      post({
        type: 'whatIf',
        values: { ...readControls(), ...toValues(c.whatIf as Record<string, unknown>) },
      }),
    );
    row.append(btn);
  }
  return row;
}

/** An advice option's change as control values (checkpointing as text, as the control shows it). */
function toValues(w: Record<string, unknown>): Partial<WhatIfValues> {
  const v: Partial<WhatIfValues> = {};
  for (const [k, x] of Object.entries(w)) {
    if (x === undefined) continue;
    v[k] =
      typeof x === 'object' && x !== null && 'everyN' in x
        ? `every-${(x as { everyN: number }).everyN}`
        : typeof x === 'boolean'
          ? x
            ? 'on'
            : 'off'
          : (x as string | number);
  }
  return v;
}

function residencyWords(r: Estimate['units'][number]['residency']): string {
  return r.kind === 'keep' ? 'kept to backward' : r.kind === 'slice' ? `keeps 1/${r.ranks}` : 'reshards';
}

type UnitRow = Estimate['units'][number];

/** Consecutive units that are alike (the blocks of a loop) share one row. */
function groupUnits(units: UnitRow[]): UnitRow[][] {
  const key = (u: UnitRow) =>
    JSON.stringify([
      u.classNames,
      u.params,
      u.gatheredBytes,
      u.shardBytes,
      u.residency,
      u.traffic,
      u.origin,
      u.isRoot,
    ]);
  const out: UnitRow[][] = [];
  for (const u of units) {
    const last = out[out.length - 1];
    if (last && key(last[0]!) === key(u)) last.push(u);
    else out.push([u]);
  }
  return out;
}

function renderUnits(data: PanelData, e: Estimate): HTMLElement {
  const s = section('Units', 'units');
  const b = (n: number) => fmtBytes(n, data.units);
  const focusCall = data.focusUnit !== null ? data.calls[data.focusUnit] : undefined;
  const focus = new Set(focusCall?.units ?? []);
  const peaks = e.perGpu.perUnitPeakBytes as Record<string, number>;
  const groups = groupUnits(e.units);
  const rows: Cell[][] = groups.map((g) => {
    const u = g[0]!;
    const c = u.traffic.collectives;
    const unitPeaks = g.map((x) => peaks[x.name]).filter((p): p is number => p !== undefined);
    const lo = Math.min(...unitPeaks);
    const hi = Math.max(...unitPeaks);
    const name =
      g.length > 1 ? `${u.name} … ${g[g.length - 1]!.name} (${g.length} units)` : u.name || '(root)';
    return [
      {
        text: name,
        cls: 'code',
        title: g
          .flatMap((x) => x.modules)
          .slice(0, 50)
          .join('\n'),
      },
      u.classNames.join(', '),
      fmtParams(u.params),
      b(u.gatheredBytes),
      b(u.shardBytes.params + u.shardBytes.grads + u.shardBytes.optimizer),
      !unitPeaks.length ? '–' : lo === hi ? b(lo) : `${b(lo)} – ${b(hi)}`,
      residencyWords(u.residency),
      `${c.allGather} AG · ${c.reduceScatter} RS${c.allReduce ? ` · ${c.allReduce} AR` : ''}`,
      b(u.trafficBytes),
      { text: g.length > 1 ? `${u.origin} (loop)` : u.origin, cls: 'muted' },
    ];
  });
  if (e.unowned.params > 0)
    rows.push([
      { text: '(no unit)', cls: 'bad' },
      e.unowned.modules.slice(0, 3).join(', '),
      fmtParams(e.unowned.params),
      '–',
      b(e.unowned.bytes),
      '–',
      'replicated',
      '–',
      '–',
      '',
    ]);
  const t = table(
    [
      'Unit',
      'Classes',
      'Params',
      'Gathered',
      'Shard state / GPU',
      'Peak while it runs',
      'After forward',
      'Collectives / micro-batch',
      'Traffic / micro-batch, each',
      'Wrapped at',
    ],
    rows,
    {
      numeric: [2, 3, 4, 5, 8],
      rowClass: (i) => (groups[i]?.some((u) => focus.has(u.name)) ? 'focus' : undefined),
    },
  );
  const wrap = el('div', undefined, 'scroll');
  wrap.append(t);
  s.append(wrap);
  if (focus.size) queueMicrotask(() => t.querySelector('tr.focus')?.scrollIntoView({ block: 'nearest' }));
  return s;
}

/** Under pipeline parallelism: each rank's stages, micro-batches in flight and peak; the figures are the worst's. */
function renderPipeline(data: PanelData, e: Estimate): HTMLElement | undefined {
  const p = e.pipeline;
  if (!p) return undefined;
  const s = section('Pipeline stages', 'pipeline');
  const b = (n: number) => fmtBytes(n, data.units);
  s.append(
    el(
      'p',
      `${p.schedule}: ${fmtCount(p.microbatches)} micro-batches of ${fmtCount(p.microBatchSize)}, ${p.stagesPerRank} stage${p.stagesPerRank === 1 ? '' : 's'} per rank. The figures above are rank ${p.worstRank}'s, the highest peak.`,
      'muted',
    ),
  );
  const blocks = (r: (typeof p.ranks)[number]) =>
    [r.first ? 'embedding' : '', blockRanges(r.stages), r.last ? 'head, loss' : '']
      .filter(Boolean)
      .join(' + ');
  const t = table(
    ['Rank', 'Holds (blocks)', 'In flight', 'Peak', 'Reserved'],
    p.ranks.map((r) => [
      { text: String(r.rank), cls: r.rank === p.worstRank ? 'bad' : '' },
      blocks(r),
      fmtInFlight(r.inFlight),
      b(r.peakBytes),
      b(r.reservedBytes),
    ]),
    { numeric: [0, 2, 3, 4] },
  );
  const wrap = el('div', undefined, 'scroll');
  wrap.append(t);
  s.append(wrap);
  return s;
}

/** A job whose GPUs the step shares with other phases (an RL trainer's rollout): what each phase needs. */
function renderPhases(data: PanelData, e: Estimate): HTMLElement | undefined {
  const c = e.colocated;
  if (!c) return undefined;
  const s = section('Phases on the same GPUs', 'phases');
  const b = (n: number) => fmtBytes(n, data.units);
  const memory = e.targetFit.memoryBytes;
  s.append(
    el(
      'p',
      `${c.by} runs these in turn on each GPU; the one that needs most decides the fit. Needs: the training process's bytes x 1.10 and its CUDA context, with the rollout engine's share beside it.`,
      'muted',
    ),
  );
  const t = table(
    ['Phase', 'Training process', 'Rollout engine', `Needs of ${b(memory)}`],
    c.phases.map((p) => [
      { text: p.name, cls: p.name === c.worst ? 'bad' : '' },
      b(p.bytes),
      p.engineFraction ? `${b(p.engineFraction * memory)} (${p.engineFraction})` : '—',
      { text: b(p.needBytes), cls: p.needBytes > memory ? 'bad' : '' },
    ]),
    { numeric: [1, 2, 3] },
  );
  const wrap = el('div', undefined, 'scroll');
  wrap.append(t);
  s.append(wrap);
  if (c.notEstimated.length) s.append(el('p', `Not estimated: ${c.notEstimated.join('; ')}.`, 'muted'));
  return s;
}

function renderComms(data: PanelData, e: Estimate): HTMLElement {
  const s = section('Collectives and time', 'comms');
  const b = (n: number) => fmtBytes(n, data.units);
  const compute = e.comms.seconds.compute;
  s.append(
    table(
      ['Link', 'Carries', 'Collectives / step', 'Bytes / GPU', 'Time on link', 'Against compute'],
      e.comms.links.map((l) => [
        `${l.link.name} (${l.link.perDirectionGBs} GB/s each way)`,
        l.role === 'shard group'
          ? 'all-gathers, reduce-scatters'
          : l.role === 'tensor parallel' || l.role === 'context parallel'
            ? `${l.role}: activations' all-gathers, reduce-scatters`
            : l.role === 'pipeline parallel'
              ? 'pipeline: stage activations and their gradients, point to point'
              : l.role === 'expert parallel'
                ? "experts: the routed tokens' all-to-alls"
                : 'all-reduces across replicas',
        l.collectives,
        b(l.bytes),
        fmtSeconds(l.seconds),
        compute > 0 ? `${Math.round((100 * l.seconds) / compute)}% of ${fmtSeconds(compute)}` : '–',
      ]),
      { numeric: [2, 3, 4] },
    ),
  );
  const exposed = e.comms.seconds.exposed;
  s.append(
    el(
      'p',
      !e.comms.seconds.transfersHide
        ? `About ${fmtSeconds(exposed)} per step of transfers cannot hide behind compute.`
        : `Transfers hide behind compute (${fmtSeconds(exposed)} exposed per step).`,
      e.comms.seconds.transfersHide ? 'muted' : 'notice',
    ),
  );
  s.append(
    table(
      ['Traffic', 'Bytes / GPU / step', 'How'],
      e.comms.traffic.terms.map((t) => [t.name, b(t.bytes), { text: t.formula, cls: 'muted' }]),
      { numeric: [1] },
    ),
  );
  s.append(
    el(
      'p',
      `For reference: ZeRO-3 moves ${b(e.comms.zero3ReferenceBytes)}, plain data parallelism all-reduces ${b(e.comms.ddpAllReduceBytes)} per step.`,
      'muted',
    ),
  );
  return s;
}

function renderFit(data: PanelData, e: Estimate): HTMLElement {
  const s = section('Which GPUs it fits', 'fit');
  const m = data.fitMatrix!;
  const b = (n: number) => fmtBytes(n, data.units);
  const headers = ['GPU', ...m.worldSizes.map((n) => `${n}`), 'Smallest world size'];
  const rows: Cell[][] = m.gpus.map((g) => [
    { text: shortGpu(g.name), cls: g.id === e.gpu.id ? 'strong' : '' },
    ...g.fits.map((f) =>
      f === null
        ? { text: '–', cls: 'muted', title: 'PyTorch cannot build this mesh' }
        : { text: MARK[f], cls: VERDICT_CELL[f], title: verdictWords(f) },
    ),
    g.minGpus.undecided
      ? { text: '?', cls: 'muted', title: g.minGpus.reason ?? '' }
      : g.minGpus.worldSize === null
        ? { text: 'none', title: g.minGpus.reason ?? '' }
        : g.minGpus.wholeNodes
          ? {
              text: `${g.minGpus.worldSize} (${g.minGpus.wholeNodes.worldSize} on whole nodes)`,
              title: `${g.minGpus.worldSize} GPUs${wholeNodesText(g.minGpus, '; ')}`,
            }
          : String(g.minGpus.worldSize),
  ]);
  rows.push([
    { text: 'peak per GPU', cls: 'muted' },
    ...m.peakBytes.map((p) => ({ text: p === null ? '–' : b(p), cls: 'muted' })),
    '',
  ]);
  const wrap = el('div', undefined, 'scroll');
  wrap.append(
    table(headers, rows, {
      numeric: [...m.worldSizes.map((_, i) => i + 1), m.worldSizes.length + 1],
      rowClass: (i) => (m.gpus[i]?.id === e.gpu.id ? 'current' : undefined),
    }),
  );
  s.append(
    el(
      'p',
      'Columns are world sizes (GPUs in all), at the current micro-batch, sequence and checkpointing.',
      'muted',
    ),
  );
  s.append(wrap);
  return s;
}

/**
 * "Compare with": the change from another version of the job (the last commit, another open file) to this file,
 * the totals and each cause in the order it applies, the causes adding up to the totals.
 */
function renderCompare(data: PanelData): HTMLElement | undefined {
  const choices = data.compareChoices;
  if (!choices?.length) return undefined;
  const s = section('Compare with another version', 'compare');
  const b = (n: number) => fmtBytes(n, data.units);
  const sign = (n: number) => `${n > 0 ? '+' : n < 0 ? '−' : '±'}${b(Math.abs(n))}`;
  const wrap = el('label', undefined, 'control');
  wrap.append(el('span', 'Compare this file with'));
  const pick = custom('vscode-single-select', { 'aria-label': 'Compare this file with' }) as HTMLElement & {
    value: string;
  };
  // The select has no empty value: nothing is 'none' here, '' to the extension.
  for (const c of choices) pick.append(custom('vscode-option', { value: c.value || 'none' }, c.label));
  pick.addEventListener('change', () =>
    post({ type: 'compare', against: pick.value === 'none' ? '' : pick.value }),
  );
  queueMicrotask(() => (pick.value = data.comparing || 'none'));
  wrap.append(pick);
  s.append(wrap);
  const c = data.compare;
  if (!c) return s;
  if (c.reason || !c.delta) {
    s.append(el('p', `No comparison with ${c.label}: ${c.reason ?? 'no estimate'}.`, 'notice'));
    return s;
  }
  const d = c.delta;
  const host = d.before.hostBytes || d.after.hostBytes;
  const side = (name: string, x: typeof d.before): Cell[] => [
    { text: name, cls: 'strong' },
    b(x.peakBytes),
    b(x.persistentBytes),
    b(x.trafficBytes),
    ...(host ? [b(x.hostBytes)] : []),
    x.verdict ? { text: YES[x.verdict as Verdict], cls: VERDICT_CELL[x.verdict as Verdict] } : '–',
  ];
  const delta: Cell[] = [
    { text: 'change', cls: 'strong' },
    sign(d.after.peakBytes - d.before.peakBytes),
    sign(d.after.persistentBytes - d.before.persistentBytes),
    sign(d.after.trafficBytes - d.before.trafficBytes),
    ...(host ? [sign(d.after.hostBytes - d.before.hostBytes)] : []),
    d.before.verdict === d.after.verdict ? 'same' : `${d.before.verdict ?? '–'} → ${d.after.verdict ?? '–'}`,
  ];
  s.append(
    table(
      ['Version', 'Peak / GPU', 'State / GPU', 'Traffic / step', ...(host ? ['Host / process'] : []), 'Fits'],
      [side(c.label, d.before), side('this file', d.after), delta],
      { numeric: host ? [1, 2, 3, 4] : [1, 2, 3] },
    ),
  );
  if (d.causes.length) {
    s.append(el('h3', 'Causes, in the order they apply (each on top of the ones before)'));
    s.append(
      table(
        ['Cause', 'What changed', 'Peak', 'State', 'Traffic', ...(host ? ['Host'] : [])],
        d.causes.map((k) => [
          { text: k.cause, cls: 'strong' },
          { text: k.changes.map((ch) => `${ch.label}: ${ch.from} → ${ch.to}`).join('; '), cls: 'muted' },
          sign(k.peakBytes),
          sign(k.persistentBytes),
          sign(k.trafficBytes),
          ...(host ? [sign(k.hostBytes)] : []),
        ]),
        { numeric: host ? [2, 3, 4, 5] : [2, 3, 4] },
      ),
    );
  } else if (!d.unattributed) s.append(el('p', 'The two versions make the same estimate.', 'muted'));
  if (d.unattributed) s.append(el('p', `Not attributed: ${d.unattributed}.`, 'muted'));
  return s;
}

type Measured = NonNullable<PanelData['measured']>;
type MeasuredRow = Extract<Measured, { phases: unknown }>['phases'][number];

/** Where a measured run comes from, in words. */
function runWords(m: Extract<Measured, { source: unknown }>): string {
  const kind =
    m.source === 'probe'
      ? "fsdp_lens_probe.py's JSON"
      : m.source === 'snapshot'
        ? 'a PyTorch memory snapshot'
        : `a training log${m.framework ? ` (${m.framework})` : ''}`;
  const rank = m.rank === null ? '' : `, rank ${m.rank}${m.worldSize === null ? '' : ` of ${m.worldSize}`}`;
  return `${kind}${rank}${m.device ? ` on ${m.device}` : ''}`;
}

/**
 * What a phase far from its estimate holds in the estimate: the difference, and the estimate's largest terms at
 * that phase's peak; the difference alone where the comparison names no terms.
 */
function farLine(p: MeasuredRow, b: (n: number) => string): string {
  const diff = p.estimatedBytes! - p.measuredBytes!;
  const head = `${p.phase}: the estimate is ${b(Math.abs(diff))} ${diff > 0 ? 'above' : 'below'} the ${b(p.measuredBytes!)} measured (ratio ${p.ratio!.toFixed(2)}).`;
  if (!p.terms?.length) return head;
  return `${head} The estimate's largest terms at this phase's peak: ${p.terms.map((t) => `${t.name} ${b(t.bytes)}`).join(', ')}.`;
}

/** The reserved row's line when far from 1: the difference, and the pools the estimate's reserve adds up. */
function farReservedLine(
  r: Extract<Measured, { source: unknown }>['reserved'],
  b: (n: number) => string,
): string {
  const diff = r.estimatedBytes! - r.measuredBytes!;
  const head = `Reserved: the estimate is ${b(Math.abs(diff))} ${diff > 0 ? 'above' : 'below'} the ${b(r.measuredBytes!)} measured (ratio ${r.ratio!.toFixed(2)}).`;
  const pools = r.pools;
  if (!pools) return head;
  return (
    `${head} It adds up the compute stream's ${b(pools.compute)} with the allocator's allowance` +
    (pools.gather + pools.reduce > 0
      ? `, and the blocks kept for FSDP's all-gather stream (${b(pools.gather)}) and reduce-scatter stream (${b(pools.reduce)}).`
      : '.')
  );
}

type CategoryRows = NonNullable<MeasuredRow['categories']>;

/**
 * A memory snapshot's step peak by category beside the estimate's terms at its own: a table (which reflows in a
 * narrow panel), what each row is made of where it has several parts, and the rows that differ most.
 */
function renderCategories(rows: CategoryRows, b: (n: number) => string): HTMLElement[] {
  const signed = (n: number) => `${n > 0 ? '+' : n < 0 ? '−' : '±'}${b(Math.abs(n))}`;
  const head = el('h3', 'By category at the peak');
  const intro = el(
    'p',
    "The estimate's terms at its step peak beside the run's allocations live at its allocated peak, each placed by the frames of its stack (see the notes); what the frames do not place is unknown.",
    'muted',
  );
  const t = table(
    ['Category', 'Estimated', 'Measured', 'Difference'],
    rows.map((r): Cell[] => [
      { text: r.name, cls: 'strong' },
      r.estimatedBytes === null ? { text: 'none', cls: 'muted' } : b(r.estimatedBytes),
      r.measuredBytes === null
        ? { text: 'not told', cls: 'muted', title: 'The frames do not tell these apart' }
        : b(r.measuredBytes),
      r.difference === null ? { text: '–', cls: 'muted' } : signed(r.difference),
    ]),
    { numeric: [1, 2, 3] },
  );
  t.id = 'measured-categories';
  const parts = (xs: { name: string; bytes: number }[]) =>
    xs.map((x) => `${x.name} ${b(x.bytes)}`).join(', ');
  const ul = el('ul', undefined, 'notes');
  ul.id = 'measured-category-parts';
  for (const r of rows) {
    const said = [
      ...(r.estimated.length > 1 ? [`the estimate counts ${parts(r.estimated)}`] : []),
      ...(r.measured.length > 1 || (r.name === 'unknown' && r.measured.length)
        ? [`the run holds ${parts(r.measured)}`]
        : []),
    ];
    if (said.length) ul.append(el('li', `${r.name}: ${said.join('; ')}.`));
  }
  const apart = rows
    .filter((r) => r.difference !== null && r.difference !== 0)
    .sort((x, y) => Math.abs(y.difference!) - Math.abs(x.difference!))
    .slice(0, 3);
  if (apart.length)
    ul.append(
      el('li', `Largest differences: ${apart.map((r) => `${r.name} ${signed(r.difference!)}`).join(', ')}.`),
    );
  return ul.childElementCount ? [head, intro, t, ul] : [head, intro, t];
}

/**
 * "Measured against estimated": a run's peaks (the probe's JSON, a memory snapshot, a training log) beside the
 * file's own estimate, phase by phase, with the ratio of each; the button that picks a run, and one that clears it.
 */
function renderMeasured(data: PanelData): HTMLElement {
  const s = section('Measured against estimated', 'measured');
  const b = (n: number) => fmtBytes(n, data.units);
  const m = data.measured;
  const actions = el('div', undefined, 'try');
  const pick = custom(
    'vscode-button',
    { secondary: true },
    m ? 'Compare with another measured run…' : 'Compare with a measured run…',
  );
  pick.id = 'compare-measured';
  pick.addEventListener('click', () => post({ type: 'command', command: 'compareMeasured' }));
  actions.append(pick);
  if (m) {
    const clear = custom('vscode-button', { secondary: true }, 'Clear');
    clear.id = 'clear-measured';
    clear.title = 'Stop comparing with this run';
    clear.addEventListener('click', () => post({ type: 'clearMeasured' }));
    actions.append(clear);
  }
  if (!m) {
    s.append(
      el(
        'p',
        'Put what a run measured beside this estimate: the JSON fsdp_lens_probe.py writes on a rank, a PyTorch memory snapshot, or a training log with memory lines (torchtitan, torchtune, the Hugging Face Trainer).',
        'muted',
      ),
      actions,
    );
    return s;
  }
  const name = m.file.split(/[\\/]/).pop() ?? m.file;
  if ('error' in m) {
    s.append(el('p', `No comparison with ${name}: ${m.error}.`, 'notice'), actions);
    return s;
  }
  if ('reading' in m) {
    s.append(
      el('p', `Reading ${name} (${b(m.reading.size)})… The comparison shows here once it is read.`, 'muted'),
      actions,
    );
    return s;
  }
  const source = el('p');
  source.append(el('span', name, 'strong code'), document.createTextNode(`: ${runWords(m)}.`));
  s.append(source);
  const a = m.against;
  s.append(
    el(
      'p',
      `Against the file's own estimate (${a.worldSize} x ${shortGpu(a.gpu)}, micro-batch ${a.microBatch}, sequence ${fmtCount(a.seqLen)}), not the what-if values. Each ratio is estimated / measured: above 1 the estimate counts more than the run held.`,
      'muted',
    ),
  );
  if (m.worldSize !== null && m.worldSize !== a.worldSize)
    s.append(
      el(
        'p',
        `The run had ${m.worldSize} GPUs, the estimate is for ${a.worldSize}: set the file's world size to the run's to compare like with like.`,
        'notice',
      ),
    );
  const far = (p: { ratio: number | null }) =>
    p.ratio !== null && (p.ratio > m.agree || p.ratio < 1 / m.agree);
  const cell = (n: number | null) => (n === null ? { text: 'not measured', cls: 'muted' } : b(n));
  const row = (p: {
    phase: string;
    estimatedBytes: number | null;
    measuredBytes: number | null;
    ratio: number | null;
  }): Cell[] => [
    { text: p.phase, cls: 'strong' },
    p.estimatedBytes === null ? { text: 'none', cls: 'muted' } : b(p.estimatedBytes),
    cell(p.measuredBytes),
    p.ratio === null ? { text: '–', cls: 'muted' } : { text: p.ratio.toFixed(2), cls: far(p) ? 'bad' : '' },
  ];
  s.append(
    table(['Phase', 'Estimated', 'Measured', 'Ratio'], [...m.phases.map(row), row(m.reserved)], {
      numeric: [1, 2, 3],
    }),
  );
  const byCategory = m.phases.find((p) => p.phase === 'step')?.categories;
  if (byCategory?.length) s.append(...renderCategories(byCategory, b));
  const lines = [
    ...m.phases.filter(far).map((p) => farLine(p, b)),
    ...(far(m.reserved) ? [farReservedLine(m.reserved, b)] : []),
  ];
  if (lines.length) {
    const ul = el('ul', undefined, 'notes');
    ul.id = 'measured-far';
    for (const l of lines) ul.append(el('li', l));
    s.append(el('h3', `Far from the estimate (ratio outside ${(1 / m.agree).toFixed(2)}–${m.agree})`), ul);
  }
  if (m.unknownPhases.length)
    s.append(
      el(
        'p',
        `Phases with no counterpart in the estimate: ${m.unknownPhases.join(', ')} (name them forward, loss, backward, optimizer or step).`,
        'muted',
      ),
    );
  if (m.notes.length) {
    const ul = el('ul', undefined, 'notes');
    for (const n of m.notes) ul.append(el('li', n));
    s.append(el('h3', 'Notes on the measured figures'), ul);
  }
  s.append(actions);
  return s;
}

/** Whether the panel last asked the extension to solve for what fits (the section is open). */
let fitAsked = false;

/**
 * "Where it fits": the largest micro-batch and sequence and the fewest GPUs for every GPU of the catalog, and the
 * changes that make the plan fit, cheapest first, each tried as a what-if (whose "Apply to file" writes it). Closed
 * at first: solving takes a few hundred estimates, asked of the extension while the section is open.
 */
function renderSolve(data: PanelData, e: Estimate): HTMLElement {
  const s = section('Where it fits: largest batch, sequence, fewest GPUs', 'solve', true);
  const ask = (on: boolean) => {
    if (on === fitAsked) return;
    fitAsked = on;
    post({ type: 'fit', on });
  };
  s.addEventListener('toggle', () => ask(s.open));
  const f = data.fit;
  if (!f) {
    s.append(
      el('p', s.open ? 'Solving for every GPU…' : 'Open to solve for every GPU of the catalog.', 'muted'),
    );
    return s;
  }
  const b = (n: number) => fmtBytes(n, data.units);
  s.append(
    el(
      'p',
      `At ${f.target.worldSize} GPUs, micro-batch ${f.target.microBatch} and sequence ${fmtCount(f.target.seqLen)}: each value is the largest whose estimate fits that GPU, checked against the next value's, which does not.`,
      'muted',
    ),
  );
  const wrap = el('div', undefined, 'scroll');
  wrap.append(
    table(
      ['GPU', 'Memory', 'Now', 'Largest micro-batch', 'Longest sequence', 'Fewest GPUs'],
      f.perGpu.map((r) => [
        { text: shortGpu(r.name), cls: r.gpu === e.gpu.id ? 'strong' : '' },
        b(r.memoryBytes),
        r.verdict ? { text: YES[r.verdict], cls: VERDICT_CELL[r.verdict] } : '–',
        largestCell(r.largestMicroBatch),
        largestCell(r.longestSequence),
        smallestCell(r.smallestWorldSize),
      ]),
      {
        numeric: [1, 3, 4, 5],
        rowClass: (i) => (f.perGpu[i]?.gpu === e.gpu.id ? 'current' : undefined),
      },
    ),
  );
  s.append(wrap);
  if (f.changes.length) {
    s.append(el('h3', 'Changes that make it fit, cheapest first'));
    s.append(
      table(
        ['Change', 'Step time', 'Peak / GPU', ''],
        f.changes.map((c) => [
          { text: c.label, cls: 'strong' },
          `${c.unmodelledCost ? '≥ ' : ''}${c.stepSeconds.toFixed(2)} s`,
          b(c.peakBytes),
          { text: c.unmodelledCost ?? '', cls: 'muted' },
        ]),
        { numeric: [1, 2] },
      ),
    );
    s.append(
      el(
        'p',
        `Step time now ${f.target.stepSeconds.toFixed(2)} s, for the tokens the job trains on now (compute with recomputation, and transfers left exposed).`,
        'muted',
      ),
    );
    s.append(tryButtons(f.changes));
  }
  return s;
}

function renderGranularity(data: PanelData): HTMLElement | undefined {
  const g = data.granularity ?? [];
  if (g.length < 2) return undefined;
  const s = section('Unit granularity', 'granularity');
  s.append(
    el(
      'p',
      'Grouping consecutive blocks into one unit trades collectives (fewer, larger all-gathers) for a higher peak.',
      'muted',
    ),
  );
  const box = el('div', undefined, 'chart small');
  const canvas = el('canvas');
  canvas.setAttribute('role', 'img');
  canvas.setAttribute('aria-label', 'Peak per GPU and collectives per step against blocks per unit');
  box.append(canvas);
  s.append(box);
  queueMicrotask(() =>
    charts.push(granularityChart(canvas, g, data.units, Number(data.whatIf?.values.blocksPerUnit ?? 1))),
  );
  return s;
}

function renderAssumptions(e: Estimate): HTMLElement {
  const s = section('Assumptions', 'assumptions');
  s.append(
    table(
      ['Input', 'Value', 'From'],
      e.assumptions.map((a) => [a.label, a.value, { text: sourceWords(a), cls: 'muted' }]),
    ),
  );
  const actions = el('div', undefined, 'try');
  const exact = custom('vscode-button', { secondary: true }, 'Measure the model exactly with PyTorch');
  exact.addEventListener('click', () => post({ type: 'command', command: 'measureExactly' }));
  const choose = custom('vscode-button', { secondary: true }, 'Choose the model');
  choose.addEventListener('click', () => post({ type: 'command', command: 'chooseModel' }));
  actions.append(exact, choose);
  s.append(actions);
  if (e.notes.length) {
    const ul = el('ul', undefined, 'notes');
    for (const n of e.notes) ul.append(el('li', n));
    s.append(el('h3', 'Notes'), ul);
  }
  return s;
}

function renderCalls(data: PanelData): HTMLElement {
  const s = section('Wrap calls', 'calls');
  const t = table(
    ['Line', 'Call', 'What it costs'],
    data.calls.map((c) => [c.line, { text: `${c.api}(${c.target})`, cls: 'code' }, c.lens]),
    { numeric: [0], rowClass: (i) => (i === data.focusUnit ? 'focus link' : 'link') },
  );
  t.querySelectorAll('tbody tr').forEach((tr, i) => {
    const line = data.calls[i]!.line;
    tr.addEventListener('click', () => post({ type: 'reveal', line }));
    tr.setAttribute('title', `Go to line ${line}`);
  });
  s.append(t);
  return s;
}

/**
 * While the controls differ from the file: which values, that the figures below are not the file's, and the two
 * ways back to one source of truth (write them to the file as `# fsdp:` annotations, or drop them).
 */
function renderWhatIfBanner(data: PanelData): HTMLElement | undefined {
  const changed = data.whatIf?.changed ?? [];
  if (!changed.length) return undefined;
  const box = el('section', undefined, 'banner');
  box.id = 'whatif-banner';
  box.setAttribute('role', 'status');
  box.append(
    el(
      'p',
      `What-if: ${changed.map((c) => `${c.label} ${c.value} (file: ${c.file})`).join(', ')}. The figures below are not the file's.`,
    ),
  );
  const actions = el('div', undefined, 'try');
  const writable = changed.filter((c) => c.annotation || c.codeFix);
  if (writable.length) {
    const apply = custom('vscode-button', {}, 'Apply to file');
    const annotated = writable.filter((c) => !c.codeFix);
    apply.title = [
      ...writable.filter((c) => c.codeFix).map((c) => c.codeFix!.replace(/ \(.*\)$/, '')),
      ...(annotated.length
        ? [`Write ${annotated.map((c) => `${c.annotation}=…`).join(' ')} as a # fsdp: comment`]
        : []),
    ].join('; ');
    apply.addEventListener('click', () => post({ type: 'applyWhatIf' }));
    actions.append(apply);
  }
  const reset = custom('vscode-button', { secondary: true }, 'Reset');
  reset.addEventListener('click', () => post({ type: 'reset' }));
  actions.append(reset);
  box.append(actions);
  const code = changed.filter((c) => !c.annotation && !c.codeFix);
  if (code.length)
    box.append(
      el('p', `${code.map((c) => c.label).join(' and ')}: change the wrap calls in the code.`, 'muted'),
    );
  return box;
}

function render(data: PanelData): void {
  current = data;
  for (const c of charts.splice(0)) c.destroy();
  const controlsHost = document.getElementById('controls') ?? el('section');
  controlsHost.id = 'controls';
  controlsHost.className = 'whatif';
  const e = data.estimate;
  const parts: HTMLElement[] = [renderHeader(data, e)];
  const banner = renderWhatIfBanner(data);
  if (banner) parts.push(banner);
  if (data.notice) parts.push(el('p', data.notice, 'notice'));
  if (e) {
    parts.push(renderSummary(data, e));
    renderControls(data, controlsHost);
    parts.push(controlsHost, renderChart(data, e), renderAdvice(data));
    const compare = renderCompare(data);
    if (compare) parts.push(compare);
    parts.push(renderMeasured(data));
    parts.push(renderUnits(data, e));
    const pipeline = renderPipeline(data, e);
    if (pipeline) parts.push(pipeline);
    const phases = renderPhases(data, e);
    if (phases) parts.push(phases);
    parts.push(renderComms(data, e));
    parts.push(renderFit(data, e), renderSolve(data, e));
    const g = renderGranularity(data);
    if (g) parts.push(g);
    parts.push(renderAssumptions(e));
  } else if (data.noEstimate) {
    if (data.whatIf) {
      renderControls(data, controlsHost);
      parts.push(controlsHost);
    }
    parts.push(el('p', `No estimate: ${data.noEstimate.reason}.`, 'notice'));
    if (data.noEstimate.hint) parts.push(el('p', data.noEstimate.hint, 'muted'));
    const choose = custom('vscode-button', {}, 'Choose the model');
    choose.addEventListener('click', () => post({ type: 'command', command: 'chooseModel' }));
    parts.push(choose);
    // A run chosen before the figures went away stays in sight, with the way to clear it.
    if (data.measured) parts.push(renderMeasured(data));
  }
  if (data.calls.length) parts.push(renderCalls(data));
  else if (data.framework)
    parts.push(
      el(
        'p',
        `FSDP as ${data.framework.name} configures it (${data.framework.file}:${data.framework.line}).`,
        'muted',
      ),
    );
  else parts.push(el('p', 'No fully_shard / FSDP wrap calls found in this file.', 'muted'));
  app.replaceChildren(...parts);
  app.dataset.peakBytes = e ? String(e.perGpu.peakBytes) : '';
}

window.addEventListener('message', (ev: MessageEvent<PanelUpdate>) => {
  if (ev.data?.type === 'update') {
    const state: SavedState = { data: ev.data.data };
    vscode.setState(state);
    render(ev.data.data);
  }
});

// Theme changes restyle the charts: VS Code swaps the body's class (vscode-light, vscode-dark, vscode-high-contrast).
new MutationObserver(() => current && render(current)).observe(document.body, {
  attributes: true,
  attributeFilter: ['class'],
});

const saved = vscode.getState() as SavedState | undefined;
if (saved?.data) render(saved.data);
post({ type: 'ready' });
