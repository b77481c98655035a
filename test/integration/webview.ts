// The footprint panel's webview in a real browser, outside VS Code: the bundled panel script and stylesheet under
// the same Content-Security-Policy, fed the data the extension would post. Checks what it draws, that strings
// from user files stay text, and what it sends back. Screenshots go to test-artifacts/webview/.
//   node out/test/integration/webview.js
import assert from 'node:assert/strict';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import { scanText } from '../../src/core/analysis/input';
import { loadPython } from '../../src/host/grammar';
import { buildPanelData, type PanelData, type WhatIfValues } from '../../src/core/report/panelData';
import { estimateFile } from '../../src/core/resolve/analyze';
import { analyzeConfigText } from '../../src/core/entry/analyze';
import { launchBrowser, ROOT } from './harness';
import { GPUS } from '../../src/core/hardware/catalog';
import { requireTools } from '../tools';

const ARTIFACTS = path.join(ROOT, 'test-artifacts', 'webview');

async function data(
  text: string,
  file: string,
  whatIf: Partial<WhatIfValues> = {},
  fit = false,
): Promise<PanelData> {
  const grammar = await loadPython(path.join(ROOT, 'out', 'test'));
  const facts = scanText(grammar, file, text);
  return buildPanelData({
    facts,
    uri: `file:///ws/${file}`,
    focusUnit: null,
    units: 'GB',
    estimate: estimateFile(facts),
    whatIf,
    ...(fit ? { fit: true } : {}),
  });
}

/**
 * The panel's data with a measured run beside it: a probe's JSON of rank 0 whose forward is the estimate's own
 * forward peak (ratio 1) and whose backward is twice the estimate's (ratio 0.5, far enough to say why).
 */
async function measuredData(file: string): Promise<PanelData> {
  const grammar = await loadPython(path.join(ROOT, 'out', 'test'));
  const facts = scanText(grammar, 'train_70b.py', LLAMA);
  const estimate = estimateFile(facts);
  assert.ok(estimate.ok);
  const events = estimate.estimate.timeline!.events;
  const peak = (phases: string[]) =>
    Math.max(...events.filter((e) => phases.includes(e.phase)).map((e) => e.total));
  return buildPanelData({
    facts,
    uri: 'file:///ws/train_70b.py',
    focusUnit: null,
    units: 'GB',
    estimate,
    whatIf: {},
    measured: {
      file,
      run: {
        source: 'probe',
        rank: 0,
        worldSize: 8,
        device: 'NVIDIA H100 80GB HBM3',
        phases: {
          forward: { allocated: peak(['forward', 'loss']), reserved: 70e9 },
          backward: { allocated: 2 * peak(['backward']), reserved: 78e9 },
          warmup: { allocated: 1e9, reserved: 2e9 },
        },
        settings: {},
        notes: ['The probe recorded torch.cuda.max_memory_allocated() at the end of each phase.'],
      },
    },
  });
}

/** The panel's page as the extension writes it, with the script and stylesheet inlined under a nonce. */
type Theme = 'dark' | 'light' | 'high-contrast';

/** The theme colours the panel reads, as VS Code's Dark Modern, Light Modern and Dark High Contrast give them. */
const THEME_VARS: Record<Theme, string> = {
  dark: '--vscode-foreground:#cccccc;--vscode-editor-background:#1f1f1f;--vscode-descriptionForeground:#9d9d9d;--vscode-editorWidget-background:#202020;--vscode-errorForeground:#f85149;--vscode-textBlockQuote-background:#2b2b2b;--vscode-testing-iconPassed:#73c991;--vscode-editorWarning-foreground:#cca700',
  light:
    '--vscode-foreground:#3b3b3b;--vscode-editor-background:#ffffff;--vscode-descriptionForeground:#717171;--vscode-editorWidget-background:#f8f8f8;--vscode-errorForeground:#f85149;--vscode-textBlockQuote-background:#f8f8f8;--vscode-testing-iconPassed:#73c991;--vscode-editorWarning-foreground:#bf8803',
  'high-contrast':
    '--vscode-foreground:#ffffff;--vscode-editor-background:#000000;--vscode-descriptionForeground:#ffffff;--vscode-editorWidget-background:#0c141f;--vscode-errorForeground:#f48771;--vscode-textBlockQuote-background:#000000;--vscode-testing-iconPassed:#73c991;--vscode-editorWarning-foreground:#ffd370;--vscode-contrastBorder:#6fc3df',
};

function html(theme: Theme): string {
  const nonce = crypto.randomBytes(16).toString('base64');
  const script = fs.readFileSync(path.join(ROOT, 'dist', 'panel.js'), 'utf8');
  const css = fs.readFileSync(path.join(ROOT, 'media', 'panel.css'), 'utf8');
  const vars = THEME_VARS[theme];
  return `<!DOCTYPE html><html lang="en"><head><meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'nonce-${nonce}'; img-src data:; script-src 'nonce-${nonce}'">
<style nonce="${nonce}">${css} body{${vars}}</style></head>
<body class="vscode-${theme}"><main id="app"><p>Analysing…</p></main>
<script nonce="${nonce}">
window.__posted = []; window.__state = undefined; window.__errors = [];
window.addEventListener('error', (e) => window.__errors.push(String(e.message)));
window.acquireVsCodeApi = () => ({ postMessage: (m) => window.__posted.push(m), getState: () => window.__state, setState: (s) => { window.__state = s; } });
</script>
<script nonce="${nonce}">${script.replace(/<\/script/gi, '<\\/script')}</script>
</body></html>`;
}

async function show(page: Page, d: PanelData): Promise<void> {
  await page.evaluate((x) => (globalThis as unknown as W).postMessage({ type: 'update', data: x }, '*'), d);
  await page.waitForSelector('#summary', { timeout: 10_000 });
  await page.waitForTimeout(300);
}

const LLAMA = `import torch
from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-70B")
mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16)
for layer in model.model.layers:
    fully_shard(layer, mp_policy=mp)
fully_shard(model, mp_policy=mp)
`;

/** How many pixels the page is wider than the panel (0 or less: no sideways scrolling). */
function overflowPx(page: Page): Promise<number> {
  return page.evaluate(() => {
    const doc = (
      globalThis as unknown as { document: { documentElement: { scrollWidth: number; clientWidth: number } } }
    ).document;
    return doc.documentElement.scrollWidth - doc.documentElement.clientWidth;
  });
}

/** The test page's globals (set by its stub of the VS Code webview API). */
interface W {
  __errors: string[];
  __posted: unknown[];
  __state: { data: PanelData };
  __pwned?: number;
  postMessage(m: unknown, origin: string): void;
}

interface Canvas {
  width: number;
  height: number;
  getContext(kind: '2d'): {
    getImageData(x: number, y: number, w: number, h: number): { data: Uint8ClampedArray };
  };
}

interface Check {
  name: string;
  run(page: Page, theme: Theme): Promise<void>;
}

/** The panel's data for a launch file of the bundled fixtures, as the extension builds it for a config. */
function configData(rel: string): PanelData {
  const file = path.join(ROOT, 'test', 'fixtures', 'frameworks', rel);
  const a = analyzeConfigText(file, fs.readFileSync(file, 'utf8'), { lint: null, estimate: {} });
  return buildPanelData({
    facts: a.facts,
    uri: `file:///ws/${path.basename(file)}`,
    focusUnit: null,
    units: 'GB',
    ...(a.estimate ? { estimate: a.estimate } : {}),
    whatIf: {},
  });
}

const CHECKS: Check[] = [
  {
    name: "lists an RL run's phases on the same GPUs, the one that needs most marked",
    async run(page, theme) {
      await show(page, configData('verl/grpo_qwen3_8b.sh'));
      // The rollout, the two log-probability passes and the update (verl/grpo_qwen3_8b.sh).
      const rows = await page.$$('#phases tbody tr');
      assert.equal(rows.length, 4);
      const text = (await page.textContent('#phases')) ?? '';
      assert.match(text, /verl's hybrid engine runs these in turn/);
      assert.match(text, /rollout.*\(0\.5\)/);
      assert.equal(await page.$$eval('#phases tbody td.bad', (c) => c.length >= 1), true);
      await page.screenshot({ path: path.join(ARTIFACTS, `panel-phases-${theme}.png`), fullPage: true });
    },
  },
  {
    name: "lists a pipeline's ranks, the one whose figures it shows marked",
    async run(page, theme) {
      const d = await data(`# fsdp: pp=4 world_size=16 batch=8 ac=full\n${LLAMA}`, 'train_pp.py');
      await show(page, d);
      // 4 pipeline ranks of Llama 3.1 70B's 80 blocks (1F1B, 8 micro-batches of 1).
      const rows = await page.$$('#pipeline tbody tr');
      assert.equal(rows.length, 4);
      const text = (await page.textContent('#pipeline')) ?? '';
      assert.match(text, /1F1B: 8 micro-batches of 1, 1 stage per rank/);
      assert.match(text, /embedding \+ 0-19/);
      await page.screenshot({ path: path.join(ARTIFACTS, `panel-pipeline-${theme}.png`), fullPage: true });
    },
  },
  {
    name: 'draws the summary, the memory chart, the tables and the advice',
    async run(page, theme) {
      const d = await data(LLAMA, 'train_70b.py');
      await show(page, d);
      const text = (await page.textContent('#app')) ?? '';
      // 70B on 8 GPUs at the defaults does not fit an 80 GB H100.
      assert.match(text, /Does not fit H100 SXM 80GB/);
      assert.match(text, /What to change/);
      for (const id of [
        '#summary',
        '#memory canvas',
        '#units table',
        '#comms table',
        '#fit table',
        '#advice',
      ])
        assert.ok(await page.$(id), `${id} missing`);
      const painted = await page.$eval('#memory canvas', (c) => {
        const cv = c as unknown as Canvas;
        const px = cv.getContext('2d')!.getImageData(0, 0, cv.width, cv.height).data;
        let n = 0;
        for (let i = 3; i < px.length; i += 4) if (px[i]! > 0) n++;
        return n;
      });
      assert.ok(painted > 1000, `the memory chart drew ${painted} pixels`);
      // Llama 3.1 70B has 80 decoder layers (its config.json): 80 alike block units share one row, the root has its own.
      assert.equal(d.estimate!.units.length, 81);
      assert.equal(await page.locator('#units tbody tr').count(), 2);
      assert.match((await page.locator('#units tbody tr').first().textContent()) ?? '', /\(80 units\)/);
      assert.deepEqual(await page.evaluate(() => (globalThis as unknown as W).__errors), []);
      await page.screenshot({ path: path.join(ARTIFACTS, `panel-${theme}.png`) });
      await page.screenshot({ path: path.join(ARTIFACTS, `panel-full-${theme}.png`), fullPage: true });
    },
  },
  {
    name: 'strings from user files stay text (no markup injection)',
    async run(page) {
      const evil = '<img src=x onerror="window.__pwned=1">';
      const d = await data(
        `# fsdp: model=meta-llama/Llama-3.1-8B\nfrom torch.distributed.fsdp import fully_shard\nfor layer in model.model.layers:\n    fully_shard(layer)\nfully_shard(model)\n`,
        'evil<b>.py',
      );
      d.estimate!.model.name = evil;
      d.estimate!.units[0]!.name = `<script>window.__pwned=2</script>`;
      d.estimate!.notes.push(evil);
      d.calls[0]!.target = evil;
      await show(page, d);
      assert.equal(await page.$$eval('#app img, #app b, #app script', (els) => els.length), 0);
      assert.equal(await page.evaluate(() => (globalThis as unknown as W).__pwned), undefined);
      assert.match((await page.textContent('#app')) ?? '', /<img src=x onerror=/);
    },
  },
  {
    name: 'the controls send what-if values; the advice buttons send their change',
    async run(page) {
      const d = await data(LLAMA, 'train_70b.py');
      await show(page, d);
      await page.evaluate(() => ((globalThis as unknown as W).__posted = []));
      const field = page.locator('vscode-textfield[aria-label="World size"]');
      assert.equal(await field.evaluate((f) => (f as unknown as { value: string }).value), '8');
      await field.evaluate((f) => {
        (f as unknown as { value: string }).value = '32';
        f.dispatchEvent(new Event('change'));
      });
      await page.waitForTimeout(100);
      const posted = await page.evaluate(() => (globalThis as unknown as W).__posted);
      assert.deepEqual((posted.at(-1) as { type: string; values: { worldSize: number } }).type, 'whatIf');
      assert.equal((posted.at(-1) as { values: { worldSize: number } }).values.worldSize, 32);
      // A value the estimate cannot take is said under the field, and nothing is sent.
      const before = (await page.evaluate(() => (globalThis as unknown as W).__posted)).length;
      await field.evaluate((f) => {
        (f as unknown as { value: string }).value = '2.5';
        f.dispatchEvent(new Event('change'));
      });
      await page.waitForTimeout(100);
      assert.match(
        (await page.textContent('.invalid-message')) ?? '',
        /World size: a whole number of at least 1/,
      );
      assert.equal((await page.evaluate(() => (globalThis as unknown as W).__posted)).length, before);
      await page.locator('#advice vscode-button').first().click();
      const last = (await page.evaluate(() => (globalThis as unknown as W).__posted)).at(-1);
      assert.equal((last as { type: string }).type, 'whatIf');
      // The state is kept for the panel serializer.
      const state = await page.evaluate(() => (globalThis as unknown as W).__state);
      assert.equal(state.data.file, 'train_70b.py');
    },
  },
  {
    name: '"Where it fits" asks for the solve when opened; its tables read at 525 px; its changes are tried',
    async run(page, theme) {
      await show(page, await data(LLAMA, 'train_70b.py'));
      const open = () => page.$eval('#solve', (s) => (s as unknown as { open: boolean }).open);
      assert.equal(await open(), false, 'closed at first: solving costs a few hundred estimates');
      await page.evaluate(() => ((globalThis as unknown as W).__posted = []));
      await page.click('#solve summary');
      await page.waitForTimeout(100);
      const asked = await page.evaluate(() => (globalThis as unknown as W).__posted);
      assert.deepEqual(asked.at(-1), { type: 'fit', on: true });
      await page.setViewportSize({ width: 525, height: 900 });
      await show(page, await data(LLAMA, 'train_70b.py', {}, true));
      assert.equal(await open(), true, 'kept open across updates');
      // One row per GPU of the catalog; 70B on 8 GPUs does not fit: changes that do are listed.
      assert.equal(
        (await page.$$('#solve .scroll tbody tr')).length,
        GPUS.length,
        `${await page.evaluate(() => (globalThis as unknown as W).__errors.join('; '))} ${(await page.textContent('#solve'))?.slice(0, 300)}`,
      );
      assert.match((await page.textContent('#solve')) ?? '', /Changes that make it fit, cheapest first/);
      const overflow = await overflowPx(page);
      assert.ok(overflow <= 0, `the page is ${overflow} px wider than the panel`);
      await page.$eval('#solve', (s) => (s as unknown as { scrollIntoView(): void }).scrollIntoView());
      await page.screenshot({ path: path.join(ARTIFACTS, `panel-solve-525-${theme}.png`) });
      await page.locator('#solve vscode-button').first().click();
      const tried = (await page.evaluate(() => (globalThis as unknown as W).__posted)).at(-1);
      assert.equal((tried as { type: string }).type, 'whatIf');
    },
  },
  {
    name: 'compares with another version: totals, causes that add up, and the choice sent back',
    async run(page, theme) {
      const grammar = await loadPython(path.join(ROOT, 'out', 'test'));
      const facts = scanText(grammar, 'train_70b.py', LLAMA);
      const older = estimateFile(
        scanText(grammar, 'train_70b.py', `# fsdp: world_size=16 ac=full\n${LLAMA}`),
      );
      const d = buildPanelData({
        facts,
        uri: 'file:///ws/train_70b.py',
        focusUnit: null,
        units: 'GB',
        estimate: estimateFile(facts),
        whatIf: {},
        compare: { label: 'the last commit (0123abcd)', estimate: older },
      });
      d.compareChoices = [
        { value: '', label: 'nothing' },
        { value: 'HEAD', label: 'the last commit' },
      ];
      d.comparing = 'HEAD';
      await page.setViewportSize({ width: 525, height: 900 });
      await show(page, d);
      const text = (await page.textContent('#compare')) ?? '';
      assert.match(text, /the last commit \(0123abcd\)/);
      assert.match(text, /checkpointing/);
      assert.match(text, /world size/);
      // Two tables: the versions and their change, then the causes.
      assert.equal((await page.$$('#compare table')).length, 2);
      const overflow = await overflowPx(page);
      assert.ok(overflow <= 0, `the page is ${overflow} px wider than the panel`);
      await page.$eval('#compare', (s) => (s as unknown as { scrollIntoView(): void }).scrollIntoView());
      await page.screenshot({ path: path.join(ARTIFACTS, `panel-compare-525-${theme}.png`) });
      await page.evaluate(() => ((globalThis as unknown as W).__posted = []));
      await page.locator('#compare vscode-single-select').evaluate((x) => {
        (x as unknown as { value: string }).value = 'none';
        x.dispatchEvent(new Event('change'));
      });
      const sent = (await page.evaluate(() => (globalThis as unknown as W).__posted)).at(-1);
      assert.deepEqual(sent, { type: 'compare', against: '' });
    },
  },
  {
    name: 'puts a measured run beside the estimate at 525 px; its buttons pick a run and clear it',
    async run(page, theme) {
      await page.setViewportSize({ width: 525, height: 900 });
      // Before any run: the section says what it takes, and its button asks the extension for one.
      await show(page, await data(LLAMA, 'train_70b.py'));
      assert.match((await page.textContent('#measured')) ?? '', /fsdp_lens_probe\.py writes/);
      await page.evaluate(() => ((globalThis as unknown as W).__posted = []));
      await page.locator('#measured vscode-button', { hasText: 'Compare with a measured run…' }).click();
      assert.deepEqual((await page.evaluate(() => (globalThis as unknown as W).__posted)).at(-1), {
        type: 'command',
        command: 'compareMeasured',
      });
      const d = await measuredData('/runs/<i>run.rank0.json');
      await show(page, d);
      const text = (await page.textContent('#measured')) ?? '';
      assert.match(
        text,
        /<i>run\.rank0\.json: fsdp_lens_probe\.py's JSON, rank 0 of 8 on NVIDIA H100 80GB HBM3/,
      );
      assert.match(text, /Against the file's own estimate \(8 x H100 SXM 80GB, .*\), not the what-if values/);
      // Forward, backward and the reserved row; the phase with no counterpart is named.
      const rows = await page.$$eval('#measured tbody tr', (trs) =>
        trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent ?? '')),
      );
      assert.deepEqual(
        rows.map((r) => [r[0], r[3]]),
        [
          ['forward', '1.00'],
          ['backward', '0.50'],
          [
            'reserved (the step)',
            d.measured && 'reserved' in d.measured ? d.measured.reserved.ratio!.toFixed(2) : '',
          ],
        ],
      );
      assert.match(text, /Phases with no counterpart in the estimate: warmup/);
      assert.match(text, /The probe recorded torch\.cuda\.max_memory_allocated\(\)/);
      // The backward is far from its estimate: the difference, and the estimate's largest terms at its peak.
      const far = (await page.textContent('#measured-far')) ?? '';
      assert.match(far, /backward: the estimate is [\d.]+ GB below the [\d.]+ GB measured \(ratio 0\.50\)/);
      assert.match(far, /The estimate's largest terms at this phase's peak: [a-z ]+ [\d.]+ GB/);
      assert.doesNotMatch(far, /forward:/);
      assert.equal(await page.$$eval('#app img, #app i, #app script', (els) => els.length), 0);
      const overflow = await overflowPx(page);
      assert.ok(overflow <= 0, `the page is ${overflow} px wider than the panel`);
      assert.deepEqual(await page.evaluate(() => (globalThis as unknown as W).__errors), []);
      await page.$eval('#measured', (s) => (s as unknown as { scrollIntoView(): void }).scrollIntoView());
      await page.screenshot({ path: path.join(ARTIFACTS, `panel-measured-525-${theme}.png`) });
      await page.evaluate(() => ((globalThis as unknown as W).__posted = []));
      await page
        .locator('#measured vscode-button', { hasText: 'Compare with another measured run…' })
        .click();
      await page.locator('#measured vscode-button', { hasText: 'Clear' }).click();
      assert.deepEqual(await page.evaluate(() => (globalThis as unknown as W).__posted), [
        { type: 'command', command: 'compareMeasured' },
        { type: 'clearMeasured' },
      ]);
      // A snapshot still being read says so.
      await show(page, {
        ...d,
        measured: { file: '/runs/snapshot.pickle', reading: { bytes: 3e8, size: 1.2e9 } },
      });
      assert.match((await page.textContent('#measured')) ?? '', /Reading snapshot\.pickle \(1\.20 GB\)…/);
      // A run that could not be read says why.
      await show(page, {
        ...d,
        measured: {
          file: '/runs/notes.txt',
          error: 'no memory line of torchtitan, torchtune or the Trainer',
        },
      });
      assert.match(
        (await page.textContent('#measured')) ?? '',
        /No comparison with notes\.txt: no memory line of torchtitan/,
      );
    },
  },
  {
    name: 'reads in a 525 px side panel: no sideways scrolling',
    async run(page, theme) {
      await page.setViewportSize({ width: 525, height: 900 });
      for (const [d, name] of [
        [await data(LLAMA, 'train_70b.py'), 'short'],
        [await data(LLAMA, 'train_70b.py', { worldSize: 64, checkpointing: 'full' }), 'fits'],
        [await data(`# fsdp: pp=4 world_size=16 batch=8 ac=full\n${LLAMA}`, 'train_pp.py'), 'pipeline'],
      ] as const) {
        await show(page, d);
        const overflow = await overflowPx(page);
        const wide = await page.evaluate(() => {
          type E = {
            tagName: string;
            id: string;
            className: string;
            getBoundingClientRect(): { right: number; width: number };
          };
          const g = globalThis as unknown as { document: { querySelectorAll(s: string): E[] } };
          return [...g.document.querySelectorAll('#app *')]
            .filter((e) => e.getBoundingClientRect().right > 525)
            .slice(0, 12)
            .map(
              (e) =>
                `${e.tagName}#${e.id}.${String(e.className)} ${Math.round(e.getBoundingClientRect().width)}`,
            );
        });
        assert.ok(
          overflow <= 0,
          `${name}: the page is ${overflow} px wider than the panel: ${wide.join(', ')}`,
        );
        await page.screenshot({
          path: path.join(ARTIFACTS, `panel-525-${name}-${theme}.png`),
          fullPage: true,
        });
      }
    },
  },
  {
    name: 'the verdict colours pass WCAG AA contrast on their backgrounds',
    async run(page) {
      for (const d of [
        await data(LLAMA, 'train_70b.py'),
        await data(LLAMA, 'train_70b.py', { worldSize: 64, checkpointing: 'full' }),
        await measuredData('/runs/run.rank0.json'),
      ]) {
        await show(page, d);
        // Every coloured text of the verdicts and figures, with the first opaque background behind it.
        const pairs = await page.evaluate(() => {
          type El = { parentElement: El | null; textContent: string | null };
          const g = globalThis as unknown as {
            document: { querySelectorAll(s: string): El[] };
            getComputedStyle(e: El): { color: string; backgroundColor: string };
          };
          const bg = (e: El | null): string => {
            for (let x = e; x; x = x.parentElement) {
              const c = g.getComputedStyle(x).backgroundColor;
              if (c && c !== 'rgba(0, 0, 0, 0)' && c !== 'transparent') return c;
            }
            return 'rgb(255, 255, 255)';
          };
          return [...g.document.querySelectorAll('.ok, .bad, .notice, .card.bad .card-value')]
            .filter((e) => (e.textContent ?? '').trim())
            .map((e) => ({
              text: (e.textContent ?? '').trim().slice(0, 40),
              fg: g.getComputedStyle(e).color,
              bg: bg(e),
            }));
        });
        assert.ok(pairs.length > 0, 'coloured verdict text found');
        for (const p of pairs) {
          const ratio = contrast(p.fg, p.bg);
          assert.ok(ratio >= 4.5, `"${p.text}": ${p.fg} on ${p.bg} is ${ratio.toFixed(2)}:1`);
        }
      }
    },
  },
  {
    name: 'a what-if that fits says so',
    async run(page, theme) {
      const d = await data(LLAMA, 'train_70b.py', { worldSize: 64, checkpointing: 'full' });
      await show(page, d);
      assert.match((await page.textContent('#summary')) ?? '', /Fits H100 SXM 80GB/);
      // The smallest world size, and on whole nodes of 8 as the CLI says it (19 GPUs: 3 nodes, 24 GPUs).
      assert.match(
        (await page.textContent('#summary')) ?? '',
        /19 GPUsthat fits H100 SXM 80GB; 24 on 3 whole nodes of 8/,
      );
      // The banner says the figures are a what-if's, with the file's values, and offers the way back.
      const banner = (await page.textContent('#whatif-banner')) ?? '';
      assert.match(
        banner,
        /What-if: World size 64 \(file: 8\), Activation checkpointing full \(every block\) \(file: none\)/,
      );
      assert.match(banner, /Apply to file/);
      assert.match(banner, /Reset/);
      await page.locator('#whatif-banner vscode-button').first().click();
      const last = (await page.evaluate(() => (globalThis as unknown as W).__posted)).at(-1);
      assert.deepEqual(last, { type: 'applyWhatIf' });
      await page.screenshot({ path: path.join(ARTIFACTS, `panel-whatif-${theme}.png`), fullPage: true });
    },
  },
];

/** WCAG 2's contrast ratio of two CSS `rgb(...)` colours: (L1 + 0.05) / (L2 + 0.05) of their relative luminance. */
function contrast(a: string, b: string): number {
  const lum = (c: string) => {
    const [r, g, bl] = (c.match(/[\d.]+/g) ?? ['0', '0', '0']).slice(0, 3).map((v) => {
      const x = Number(v) / 255;
      return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r! + 0.7152 * g! + 0.0722 * bl!;
  };
  const [hi, lo] = [lum(a), lum(b)].sort((x, y) => y - x);
  return (hi! + 0.05) / (lo! + 0.05);
}

async function main(): Promise<number> {
  requireTools('test:webview', ['chromium']);
  // Screenshots of this run only: a failure's picture from an earlier run would mislead.
  fs.rmSync(ARTIFACTS, { recursive: true, force: true });
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const browser = await launchBrowser();
  let passed = 0;
  let failed = 0;
  try {
    for (const theme of ['dark', 'light', 'high-contrast'] as const) {
      const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
      for (const check of CHECKS) {
        const page = await context.newPage();
        await page.setContent(html(theme));
        try {
          await check.run(page, theme);
          passed++;
          console.log(`  ✔ ${check.name} (${theme})`);
        } catch (e) {
          failed++;
          console.log(`  ✖ ${check.name} (${theme}): ${e instanceof Error ? e.message : String(e)}`);
          await page.screenshot({
            path: path.join(ARTIFACTS, `FAILED-${check.name.replace(/\W+/g, '-')}-${theme}.png`),
          });
        }
        await page.close();
      }
      await context.close();
    }
  } finally {
    await browser.close();
  }
  console.log(`webview (Chromium): ${passed} passed, ${failed} failed`);
  return failed ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error(e instanceof Error ? e.message : e);
    process.exit(1);
  },
);
