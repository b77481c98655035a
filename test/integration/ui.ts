// UI checks in a real browser: what a person sees in VS Code (the lens text over a fully_shard line, the panel),
// in dark and light themes. Screenshots go to test-artifacts/ui/ (git-ignored): look there first when this fails.
//   node out/test/integration/ui.js
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Frame, Page } from 'playwright-core';
import {
  launchBrowser,
  openWorkbench,
  prepareWorkspace,
  ROOT,
  startServer,
  workbenchUrl,
  type Server,
} from './harness';

const ARTIFACTS = path.join(ROOT, 'test-artifacts', 'ui');

interface Check {
  name: string;
  run(page: Page, theme: Theme): Promise<void>;
}
type Theme = 'dark' | 'light';

/** Theme labels as the color theme picker lists them. */
const THEMES: Record<Theme, string> = { dark: 'Dark Modern', light: 'Light Modern' };

/** Opens a file of the workspace root by clicking it in the Explorer, as a person would. */
async function openFile(page: Page, name: string): Promise<void> {
  await page.keyboard.press('Escape');
  const row = page.locator(`.explorer-folders-view .monaco-list-row[aria-label="${name}"]`);
  await row.first().waitFor({ timeout: 20_000 });
  await row.first().click();
  await page.waitForSelector(`.tab.active[data-resource-name="${name}"]`, { timeout: 20_000 });
  await page
    .locator('.part.editor .monaco-editor .view-lines')
    .first()
    .click({ position: { x: 5, y: 5 } });
}

async function runCommand(page: Page, title: string): Promise<void> {
  await page.keyboard.press('Control+Shift+P');
  await page.waitForSelector('.quick-input-widget input', { state: 'visible' });
  await page.keyboard.type(title, { delay: 10 });
  // The exact command, not the first fuzzy match ("... Color Theme" also matches "Browse Color Themes").
  const row = page.locator('.quick-input-list .monaco-list-row').filter({
    has: page.locator('.label-name', {
      hasText: new RegExp(`^${title.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`),
    }),
  });
  await row.first().waitFor({ timeout: 10_000 });
  await row.first().click();
}

async function lensTexts(page: Page): Promise<string[]> {
  return page.$$eval('.codelens-decoration', (els) => els.map((e) => (e.textContent ?? '').trim()));
}

async function waitForLens(page: Page, pattern: RegExp): Promise<string[]> {
  const end = Date.now() + 30_000;
  for (;;) {
    const texts = await lensTexts(page);
    if (texts.some((t) => pattern.test(t))) return texts;
    if (Date.now() > end) throw new Error(`no lens matching ${pattern}; lenses: ${JSON.stringify(texts)}`);
    await page.waitForTimeout(250);
  }
}

/** The panel's document: webviews are nested iframes (the outer `iframe.webview.ready`, then `#active-frame`). */
export async function panelFrame(page: Page): Promise<Frame> {
  const end = Date.now() + 30_000;
  for (;;) {
    for (const f of page.frames()) {
      if (f.name() === 'active-frame' || f.url().includes('fake.html')) {
        const ok = await f.$('#app').catch(() => null);
        if (ok) return f;
      }
    }
    if (Date.now() > end) throw new Error('the panel webview did not appear');
    await page.waitForTimeout(250);
  }
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
      if (!texts.some((t) => /FSDP2 root · 33 units · 16\.1 GB\/GPU persistent/.test(t)))
        throw new Error(`no root lens: ${JSON.stringify(texts)}`);
      await page.screenshot({ path: path.join(ARTIFACTS, `lens-${theme}.png`) });
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
      if (!/never is/.test(text) || !/fsdp-lens/.test(text))
        throw new Error(`unexpected problem text: ${text}`);
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
      await page.waitForTimeout(300);
      await page.screenshot({ path: path.join(ARTIFACTS, `panel-${theme}.png`) });
    },
  },
];

async function main(): Promise<number> {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  let passed = 0;
  let failed = 0;
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
      for (const check of CHECKS) {
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
    `ui (VS Code server, Chromium; screenshots in ${path.relative(ROOT, ARTIFACTS)}): ${passed} passed, ${failed} failed`,
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
