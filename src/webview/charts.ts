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
  return new Chart(canvas, {
    type: 'bar',
    data: { labels, datasets },
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
