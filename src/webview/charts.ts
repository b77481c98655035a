// The panel's charts, drawn with Chart.js in the theme's chart colours (VS Code's --vscode-charts-* variables), so
// they follow light, dark and high-contrast themes. The numbers come from the estimate as they are; the charts
// only scale bytes to the unit the user chose.
import {
  BarController,
  BarElement,
  CategoryScale,
  Chart,
  Filler,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip,
  type ChartDataset,
} from 'chart.js';
import { fmtBytes, type ByteUnit } from '../core/vocabulary/bytes';
import type { PanelData } from '../core/report/panelProtocol';

Chart.register(
  BarController,
  BarElement,
  CategoryScale,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip,
  Legend,
  Filler,
);

type Estimate = NonNullable<PanelData['estimate']>;
type LiveSet = Estimate['timeline'][number]['live'];

function cssVar(name: string, fallback: string): string {
  const v = getComputedStyle(document.body).getPropertyValue(name).trim();
  return v || fallback;
}

function theme() {
  return {
    fg: cssVar('--vscode-charts-foreground', cssVar('--vscode-foreground', '#888')),
    lines: cssVar('--vscode-charts-lines', 'rgba(128,128,128,0.35)'),
    blue: cssVar('--vscode-charts-blue', '#3794ff'),
    purple: cssVar('--vscode-charts-purple', '#b180d7'),
    yellow: cssVar('--vscode-charts-yellow', '#cca700'),
    orange: cssVar('--vscode-charts-orange', '#d18616'),
    green: cssVar('--vscode-charts-green', '#89d185'),
    red: cssVar('--vscode-charts-red', '#f14c4c'),
    font: cssVar('--vscode-font-family', 'sans-serif'),
  };
}

/** The stacked categories of the memory chart, in drawing order, and the live-set fields each one sums. */
export const MEMORY_CATEGORIES: {
  label: string;
  fields: (keyof LiveSet)[];
  color: keyof ReturnType<typeof theme>;
}[] = [
  { label: 'sharded state', fields: ['state', 'shardGrads'], color: 'blue' },
  { label: 'gathered parameters', fields: ['gathered', 'gatherBuffers'], color: 'purple' },
  { label: 'activations', fields: ['activations', 'working', 'pipeline'], color: 'green' },
  { label: 'gradient buffers', fields: ['gradients'], color: 'orange' },
  { label: 'logits', fields: ['logits', 'heldOutput'], color: 'yellow' },
  { label: 'optimizer step', fields: ['optimizer'], color: 'red' },
];

/** A colour at 40% opacity (theme colours are #rrggbb; others are left as they are). */
function faded(c: string): string {
  return /^#[0-9a-f]{6}$/i.test(c) ? `${c}66` : c;
}

const scaleOf = (units: ByteUnit) => (units === 'GB' ? 1e9 : 2 ** 30);

function axisDefaults(t: ReturnType<typeof theme>) {
  return { ticks: { color: t.fg, font: { family: t.font } }, grid: { color: t.lines } };
}

/** Memory over the step: forward through the units, the loss, backward, the optimizer step; stacked by category. */
export function memoryChart(
  canvas: HTMLCanvasElement,
  e: Estimate,
  units: ByteUnit,
  focus: Set<string>,
): Chart {
  const t = theme();
  const s = scaleOf(units);
  const events = e.timeline;
  const labels = events.map((ev) => ev.label);
  const datasets: ChartDataset<'bar', number[]>[] = MEMORY_CATEGORIES.map((c) => ({
    type: 'bar' as const,
    label: c.label,
    data: events.map((ev) => c.fields.reduce((sum, f) => sum + ev.live[f], 0) / s),
    backgroundColor: events.map((ev) => (focus.size && !focus.has(ev.unit) ? faded(t[c.color]) : t[c.color])),
    borderWidth: 0,
    stack: 'memory',
    order: 1,
    barPercentage: 1,
    categoryPercentage: 1,
  }));
  // A line over the bars (Chart.js mixed chart): the dataset is typed as the chart's bar type.
  const capacity: ChartDataset<'line', number[]> = {
    type: 'line',
    label: `${e.gpu.name}: usable for the peak`,
    data: events.map(() => e.gpu.usableBytes / s),
    borderColor: t.red,
    borderDash: [6, 4],
    borderWidth: 1.5,
    pointRadius: 0,
    fill: false,
    // Drawn over the bars (a lower order is drawn later).
    order: 0,
  };
  datasets.push(capacity as unknown as ChartDataset<'bar', number[]>);
  // The step's phases as bands behind the bars, each named at its top, and the peak named over its bar.
  const peakAt = events.reduce((best, ev, i) => (ev.totalBytes > events[best]!.totalBytes ? i : best), 0);
  const phases: { phase: string; from: number; to: number }[] = [];
  events.forEach((ev, i) => {
    const last = phases[phases.length - 1];
    if (last && last.phase === ev.phase) last.to = i;
    else phases.push({ phase: ev.phase, from: i, to: i });
  });
  const bands = {
    id: 'phaseBands',
    beforeDatasetsDraw(chart: Chart) {
      const { ctx, chartArea: a, scales } = chart;
      const x = scales.x!;
      const half = events.length > 1 ? (x.getPixelForValue(1) - x.getPixelForValue(0)) / 2 : a.width / 2;
      ctx.save();
      ctx.font = `11px ${t.font}`;
      ctx.textBaseline = 'top';
      phases.forEach((p) => {
        const left = Math.max(a.left, x.getPixelForValue(p.from) - half);
        const right = Math.min(a.right, x.getPixelForValue(p.to) + half);
        // Forward and the optimizer step shaded, the loss and backward not: each turn of the step shows.
        if (p.phase === 'forward' || p.phase === 'optimizer') {
          ctx.globalAlpha = 0.35;
          ctx.fillStyle = t.lines;
          ctx.fillRect(left, a.top, right - left, a.bottom - a.top);
          ctx.globalAlpha = 1;
        }
        const name = p.phase === 'optimizer' ? 'optimizer' : p.phase;
        if (right - left > ctx.measureText(name).width + 6) {
          ctx.fillStyle = t.fg;
          ctx.fillText(name, left + 3, a.top + 2);
        }
      });
      ctx.restore();
    },
    afterDatasetsDraw(chart: Chart) {
      const { ctx, chartArea: a, scales } = chart;
      const ev = events[peakAt];
      if (!ev) return;
      const px = scales.x!.getPixelForValue(peakAt);
      const py = scales.y!.getPixelForValue(ev.totalBytes / s);
      const text = `peak ${fmtBytes(ev.totalBytes, units)}`;
      ctx.save();
      ctx.font = `bold 11px ${t.font}`;
      ctx.fillStyle = t.fg;
      ctx.textBaseline = 'bottom';
      const w = ctx.measureText(text).width;
      const x = Math.min(Math.max(a.left, px - w / 2), a.right - w);
      const y = Math.max(a.top + 30, py - 3);
      // On a box of the page's background, so the label reads over the bars.
      ctx.fillStyle = cssVar('--vscode-editor-background', '#1f1f1f');
      ctx.fillRect(x - 3, y - 14, w + 6, 15);
      ctx.fillStyle = t.fg;
      ctx.fillText(text, x, y);
      ctx.restore();
    },
  };
  return new Chart(canvas, {
    type: 'bar',
    data: { labels, datasets },
    plugins: [bands],
    options: {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      interaction: { mode: 'index', intersect: false },
      plugins: {
        legend: { labels: { color: t.fg, font: { family: t.font }, boxWidth: 12 } },
        tooltip: {
          callbacks: {
            title: (items) => items[0]?.label ?? '',
            label: (item) => `${item.dataset.label ?? ''}: ${fmtBytes((item.raw as number) * s, units)}`,
            footer: (items) => {
              const ev = events[items[0]?.dataIndex ?? 0];
              return ev ? `total ${fmtBytes(ev.totalBytes, units)}` : '';
            },
          },
        },
      },
      scales: {
        x: {
          stacked: true,
          ...axisDefaults(t),
          ticks: { ...axisDefaults(t).ticks, maxTicksLimit: 12, maxRotation: 0 },
        },
        y: {
          stacked: true,
          beginAtZero: true,
          ...axisDefaults(t),
          title: { display: true, text: units, color: t.fg },
        },
      },
    },
  });
}

/** Unit granularity: the peak rises and the collectives fall as more blocks share a unit. */
export function granularityChart(
  canvas: HTMLCanvasElement,
  points: NonNullable<PanelData['granularity']>,
  units: ByteUnit,
  current: number,
): Chart {
  const t = theme();
  const s = scaleOf(units);
  return new Chart(canvas, {
    type: 'line',
    data: {
      labels: points.map((p) => String(p.blocksPerUnit)),
      datasets: [
        {
          label: `peak per GPU (${units})`,
          data: points.map((p) => p.peakBytes / s),
          borderColor: t.purple,
          backgroundColor: t.purple,
          pointRadius: points.map((p) => (p.blocksPerUnit === current ? 6 : 3)),
          yAxisID: 'y',
        },
        {
          label: 'collectives per step',
          data: points.map((p) => p.collectivesPerStep),
          borderColor: t.orange,
          backgroundColor: t.orange,
          pointRadius: points.map((p) => (p.blocksPerUnit === current ? 6 : 3)),
          yAxisID: 'y1',
        },
      ],
    },
    options: {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      plugins: {
        legend: { labels: { color: t.fg, font: { family: t.font }, boxWidth: 12 } },
        tooltip: {
          callbacks: {
            title: (items) => `${items[0]?.label ?? ''} blocks per unit`,
            label: (item) =>
              item.datasetIndex === 0
                ? `peak ${fmtBytes((item.raw as number) * s, units)}`
                : `${item.raw as number} collectives per step`,
          },
        },
      },
      scales: {
        x: { ...axisDefaults(t), title: { display: true, text: 'blocks per unit', color: t.fg } },
        y: { ...axisDefaults(t), beginAtZero: true, title: { display: true, text: units, color: t.fg } },
        y1: {
          ...axisDefaults(t),
          position: 'right',
          beginAtZero: true,
          grid: { drawOnChartArea: false },
          title: { display: true, text: 'collectives', color: t.fg },
        },
      },
    },
  });
}
