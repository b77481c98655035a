// UI checks in a real browser: what a person sees in VS Code (the lens text over a fully_shard line, the panel),
// in dark and light themes. Screenshots go to test-artifacts/ui/ (git-ignored): look there first when this fails.
//   node out/test/integration/ui.js
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import { openFile, panelFrame, quickOpen, runCommand, waitForLens } from './workbench';
import {
  launchBrowser,
  openWorkbench,
  prepareWorkspace,
  ROOT,
  startServer,
  workbenchUrl,
  type Server,
} from './harness';
import { CI, missing, requireTools, type Tool } from '../tools';

const ARTIFACTS = path.join(ROOT, 'test-artifacts', 'ui');

interface Check {
  name: string;
  /** A tool the check needs beyond Chromium and the VS Code server: without it the check is skipped. */
  needs?: Tool;
  run(page: Page, theme: Theme): Promise<void>;
}
type Theme = 'dark' | 'light';

/** Theme labels as the color theme picker lists them. */
const THEMES: Record<Theme, string> = { dark: 'Dark Modern', light: 'Light Modern' };

/** Hovers `fully_shard` on the line holding `needle` until a hover with `hasText` shows (three tries). */
async function hoverWrap(page: Page, needle: string, hasText: string, callee = 'fully_shard') {
  const word = page
    .locator('.view-line', { hasText: needle })
    .locator('span > span', { hasText: callee })
    .first();
  await word.waitFor({ timeout: 20_000 });
  const hover = page.locator('.monaco-hover:not(.hidden)', { hasText });
  for (let attempt = 0; attempt < 3 && !(await hover.count()); attempt++) {
    await word.hover();
    await hover
      .first()
      .waitFor({ timeout: 8_000 })
      .catch(() => undefined);
  }
  return hover;
}

async function setTheme(page: Page, theme: Theme): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await runCommand(page, 'Preferences: Color Theme');
      const row = page.locator(`.quick-input-list .monaco-list-row[aria-label*="${THEMES[theme]}"]`);
      await row.first().waitFor({ timeout: 15_000 });
      await page.keyboard.type(THEMES[theme], { delay: 10 });
      await page.waitForTimeout(300);
      await page.keyboard.press('Enter');
      await page.waitForTimeout(500);
      return;
    } catch (e) {
      await page.screenshot({ path: path.join(ARTIFACTS, `FAILED-theme-${theme}-${attempt}.png`) });
      if (attempt >= 2) throw e;
      await page.keyboard.press('Escape');
      await page.waitForTimeout(1000);
    }
  }
}

export const CHECKS: Check[] = [
  {
    name: 'lens over fully_shard lines',
    async run(page, theme) {
      await openFile(page, 'train_fsdp2.py');
      const texts = await waitForLens(page, /FSDP2 32 units x 218M params/);
      // The root's line as drawn: the verdict first, what each GPU needs of its memory, the units, the traffic.
      const rootLine = texts.find((t) =>
        /^fits 8 x H100 SXM\s+\|\s+needs [\d.]+\/85\.5 GB\s+\|\s+33 FSDP2 units\s+\|\s+[\d.]+ GB\/step$/.test(
          t,
        ),
      );
      if (!rootLine) throw new Error(`no root lens: ${JSON.stringify(texts)}`);
      // Read at a glance: every line about 80 characters (the verdict's icon is drawn, not in the text).
      const long = texts.filter((t) => t.length > 80);
      if (long.length) throw new Error(`lens lines over 80 characters: ${JSON.stringify(long)}`);
      // The verdict carries its icon: a plan that fits and one that does not look different.
      if (!(await page.$('.codelens-decoration .codicon-pass')))
        throw new Error('no verdict icon on the root lens');
      await page.screenshot({ path: path.join(ARTIFACTS, `lens-${theme}.png`) });
    },
  },
  {
    name: 'lens over an RL launch script: the verdict of its worst phase',
    async run(page, theme) {
      await quickOpen(page, 'grpo_qwen3_8b.sh');
      // verl's GRPO run: the rollout beside vLLM needs most; vLLM's CUDA graphs are not counted, so no verdict.
      const texts = await waitForLens(page, /needs at least [\d.]+\/85\.5 GB/);
      if (
        !texts.some((t) =>
          /^fit undecided\s+\|\s+needs at least [\d.]+\/85\.5 GB\s+\|\s+37 FSDP1 units/.test(t),
        )
      )
        throw new Error(`no verdict lens on the verl command: ${JSON.stringify(texts)}`);
      const long = texts.filter((t) => t.length > 80);
      if (long.length) throw new Error(`lens lines over 80 characters: ${JSON.stringify(long)}`);
      await page.screenshot({ path: path.join(ARTIFACTS, `lens-verl-${theme}.png`) });
    },
  },
  {
    name: "lenses of a file of two workers' plans",
    async run(page, theme) {
      await openFile(page, 'two_workers.py');
      // The estimated plan's root lens, and the other plan's wraps named as such.
      const texts = await waitForLens(page, /33 FSDP2 units/);
      if (
        !texts.some((t) => /plan of class ScoringWorker, not estimated \(estimating PolicyWorker\)/.test(t))
      )
        throw new Error(`no lens naming the other plan: ${JSON.stringify(texts)}`);
      await page.screenshot({ path: path.join(ARTIFACTS, `plans-${theme}.png`) });
    },
  },
  {
    name: 'lens and hover over a wrap the defaults keep off',
    async run(page, theme) {
      await openFile(page, 'two_paths.py');
      const texts = await waitForLens(page, /33 FSDP2 units/);
      if (!texts.some((t) => /^off the default path, not estimated · --strategy fsdp takes it/.test(t)))
        throw new Error(`no lens over the FSDP1 arm: ${JSON.stringify(texts)}`);
      const hover = await hoverWrap(page, 'model = FSDP(model)', 'takes it', 'FSDP');
      const text = (await hover.first().textContent()) ?? '';
      if (!/Not in this estimate: off the path/.test(text) || !/Choose the script's arguments/.test(text))
        throw new Error(`unexpected hover: ${text.slice(0, 400)}`);
      await page.screenshot({ path: path.join(ARTIFACTS, `off-path-${theme}.png`) });
      await page.keyboard.press('Escape');
    },
  },
  {
    name: 'hover over a fully_shard line',
    async run(page, theme) {
      await openFile(page, 'train_fsdp2.py');
      await waitForLens(page, /FSDP2 32 units/);
      const hover = await hoverWrap(page, 'fully_shard(layer', 'Assumptions');
      const text = (await hover.first().textContent()) ?? '';
      // 32 decoder blocks of Llama 3.1 8B: 218,112,000 parameters each, gathered in bf16 (2 B) = 0.436 GB.
      if (!/218,112,000/.test(text) || !/0\.436 GB/.test(text) || !/Open the footprint panel/.test(text))
        throw new Error(`unexpected hover: ${text.slice(0, 400)}`);
      await page.screenshot({ path: path.join(ARTIFACTS, `hover-${theme}.png`) });
      await page.keyboard.press('Escape');
    },
  },
  {
    name: 'hover over a module named with Markdown shows the name as text',
    // Quick Open finds injection/train.py with VS Code's file search, which runs ripgrep.
    needs: 'ripgrep',
    async run(page, theme) {
      // injection/model.py names a module "a\r![t](https://localhost/t) [run it](https://localhost/run)".
      await page.keyboard.press('Escape');
      await page.keyboard.press('Control+P');
      await page.waitForSelector('.quick-input-widget input', { state: 'visible' });
      await page.keyboard.type('injection/train.py', { delay: 10 });
      // The row of injection/train.py itself (the first match may be another file of the folder).
      const row = page
        .locator('.quick-input-list .monaco-list-row', { hasText: 'injection' })
        .filter({ has: page.locator('.label-name', { hasText: /^train\.py$/ }) });
      await row.first().waitFor();
      await row.first().click();
      await page.waitForSelector('.tab.active[data-resource-name="train.py"]', { timeout: 20_000 });
      await waitForLens(page, /FSDP2/);
      // The unit named with an image and a link, then the wrap whose target carries a command link.
      for (const [needle, shown] of [
        ['fully_shard(block', '![t](https://localhost/t) [run it](https://localhost/run)'],
        ['fully_shard(getattr(model', '[run it](command:fsdpLens.measureExactly'],
      ] as const) {
        const hover = await hoverWrap(page, needle, 'FSDP2');
        const text = (await hover.first().textContent()) ?? '';
        if (!text.includes(shown)) throw new Error(`the name is not shown as text: ${text.slice(0, 400)}`);
        const links = await hover
          .first()
          .locator('a')
          .evaluateAll((as) =>
            as.map((a) => `${a.textContent} ${a.getAttribute('data-href') ?? a.getAttribute('href') ?? ''}`),
          );
        const images = await hover.first().locator('img').count();
        if (links.some((l) => /run it|passwd|localhost/.test(l)) || images)
          throw new Error(`live markup from the file: links ${JSON.stringify(links)}, ${images} images`);
        if (needle === 'fully_shard(block')
          await page.screenshot({ path: path.join(ARTIFACTS, `hover-injection-${theme}.png`) });
        await page.keyboard.press('Escape');
        await page.mouse.move(0, 0);
      }

      await page.keyboard.press('Escape');
    },
  },
  {
    name: 'status bar shows the peak and the fit',
    async run(page, theme) {
      await openFile(page, 'train_fsdp2.py');
      const item = page.locator('.statusbar-item', { hasText: /FSDP [\d.]+ GB\/GPU/ });
      await item.first().waitFor({ timeout: 20_000 });
      const label = (await item.first().getAttribute('aria-label')) ?? '';
      if (!/fits NVIDIA H100 SXM 80GB/.test(label)) throw new Error(`status bar label: ${label}`);
      await item.first().screenshot({ path: path.join(ARTIFACTS, `statusbar-${theme}.png`) });
      // A script that shards through a helper of another file has the same status item, the helper's plan's.
      await page.keyboard.press('Escape');
      await page.keyboard.press('Control+P');
      await page.waitForSelector('.quick-input-widget input', { state: 'visible' });
      await page.keyboard.type('helper/run.py', { delay: 10 });
      await page.waitForTimeout(500);
      await page.keyboard.press('Enter');
      await page.waitForSelector('.tab.active[data-resource-name="run.py"]', { timeout: 20_000 });
      const helper = page.locator('.statusbar-item', { hasText: /FSDP [\d.]+ GB\/GPU/ });
      await helper.first().waitFor({ timeout: 20_000 });
    },
  },
  {
    name: 'annotation comments are highlighted',
    async run(page, theme) {
      await openFile(page, 'annotated.py');
      const line = page.locator('.view-line', { hasText: 'fsdp: model=' }).first();
      await line.waitFor({ timeout: 20_000 });
      // The injection grammar gives `fsdp`, keys and values their own token classes within the comment.
      const spans = await line
        .locator('span > span')
        .evaluateAll((els) => els.map((e) => ({ text: e.textContent ?? '', cls: e.className })));
      const cls = (t: string) => spans.find((s) => s.text.includes(t))?.cls;
      const comment = cls('#');
      if (
        !cls('fsdp') ||
        cls('fsdp') === comment ||
        cls('world_size') === comment ||
        cls('world_size') === cls('16')
      )
        throw new Error(`annotation not highlighted: ${JSON.stringify(spans)}`);
      await page.screenshot({ path: path.join(ARTIFACTS, `annotation-${theme}.png`) });
    },
  },
  {
    name: 'Problems view shows a missing root wrap',
    async run(page, theme) {
      await openFile(page, 'missing_root_wrap.py');
      await page.keyboard.press('Control+Shift+M');
      const row = page.locator('.markers-panel .monaco-list-row', { hasText: 'FSDP001' });
      await row.first().waitFor({ timeout: 30_000 });
      const text = (await row.first().textContent()) ?? '';
      if (!/No root wrap: model is never wrapped/.test(text) || !/fsdp-lens/.test(text))
        throw new Error(`unexpected problem text: ${text}`);
      // A diagnostic is plain text: no raw Markdown backticks.
      if (text.includes('`')) throw new Error(`raw backticks in a problem: ${text}`);
      await page.waitForTimeout(300);
      await page.screenshot({ path: path.join(ARTIFACTS, `problems-${theme}.png`) });
      // Hide the panel again (Ctrl+J toggles it) so the next check starts from the editor.
      await page.keyboard.press('Escape');
      await page
        .locator('.part.editor')
        .first()
        .click({ position: { x: 200, y: 5 } });
      await page.keyboard.press('Control+J');
    },
  },
  {
    name: 'footprint panel',
    async run(page, theme) {
      await openFile(page, 'train_fsdp2.py');
      await runCommand(page, 'FSDP: Estimate FSDP footprint');
      const frame = await panelFrame(page);
      await frame.waitForSelector('table', { timeout: 20_000 });
      const text = (await frame.textContent('#app')) ?? '';
      if (!/train_fsdp2\.py/.test(text))
        throw new Error(`panel does not name the file: ${text.slice(0, 300)}`);
      if (!/Fits H100 SXM 80GB/.test(text)) throw new Error(`no verdict: ${text.slice(0, 300)}`);
      await frame.waitForSelector('#memory canvas', { timeout: 10_000 });
      await page.waitForTimeout(500);
      await page.screenshot({ path: path.join(ARTIFACTS, `panel-${theme}.png`) });
      // What-if: one GPU cannot hold 8B parameters with fp32 AdamW state (8.03e9 x 16 B = 128 GB).
      const field = frame.locator('vscode-textfield[aria-label="World size"] input');
      await field.fill('1');
      await field.press('Enter');
      await frame.waitForSelector('.verdict.no-fit', { timeout: 15_000 });
      await page.waitForTimeout(300);
      await page.screenshot({ path: path.join(ARTIFACTS, `panel-whatif-${theme}.png`) });
      await frame.locator('vscode-button', { hasText: 'Reset to the file' }).click();
      await frame.waitForSelector('.verdict.fits', { timeout: 15_000 });
    },
  },
];

async function main(): Promise<number> {
  requireTools('test:ui', ['chromium', 'server']);
  // Screenshots of this run only: a failure's picture from an earlier run would mislead.
  fs.rmSync(ARTIFACTS, { recursive: true, force: true });
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  for (const theme of ['dark', 'light'] as Theme[]) {
    const server: Server = await startServer({
      'workbench.colorTheme': THEMES[theme],
      'workbench.startupEditor': 'none',
    });
    const browser = await launchBrowser();
    try {
      const workspace = prepareWorkspace('workspace');
      const { page } = await openWorkbench(browser, workbenchUrl(server, workspace), { colorScheme: theme });
      await page.waitForSelector('.monaco-workbench', { timeout: 60_000 });
      await page.waitForTimeout(1500);
      await setTheme(page, theme);
      // UI_ONLY=panel runs the checks whose name contains "panel" (for working on one view).
      const only = process.env.UI_ONLY;
      for (const check of CHECKS.filter((c) => !only || c.name.includes(only))) {
        const lacking = check.needs && missing(check.needs);
        if (lacking && !CI) {
          skipped++;
          console.log(`  - ${check.name} (${theme}) skipped: ${lacking}`);
          continue;
        }
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
      }
      await page.context().close();
      fs.rmSync(workspace, { recursive: true, force: true });
    } finally {
      await browser.close();
      await server.stop();
    }
  }
  console.log(
    `ui (VS Code server, Chromium; screenshots in ${path.relative(ROOT, ARTIFACTS)}): ${passed} passed, ${failed} failed` +
      `${skipped ? `, ${skipped} skipped` : ''}`,
  );
  return failed ? 1 : 0;
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (e: unknown) => {
      console.error(e instanceof Error ? e.message : e);
      process.exit(1);
    },
  );
}
