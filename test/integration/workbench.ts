// Steps a person takes in the VS Code workbench, for the UI checks and the VSIX check.
import type { Frame, Page } from 'playwright-core';

/** Opens a file of the workspace root by clicking it in the Explorer, as a person would. */
export async function openFile(page: Page, name: string): Promise<void> {
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

/** Opens a file anywhere in the workspace by Quick Open (Ctrl+P), as a user finds one in a subfolder. */
export async function quickOpen(page: Page, name: string): Promise<void> {
  await page.keyboard.press('Escape');
  await page.keyboard.press('Control+P');
  await page.waitForSelector('.quick-input-widget input', { state: 'visible' });
  await page.keyboard.type(name, { delay: 10 });
  const row = page.locator('.quick-input-list .monaco-list-row').filter({ hasText: name });
  await row.first().waitFor({ timeout: 10_000 });
  await row.first().click();
  await page.waitForSelector(`.tab.active[data-resource-name="${name}"]`, { timeout: 20_000 });
}

export async function runCommand(page: Page, title: string): Promise<void> {
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

export async function waitForLens(page: Page, pattern: RegExp): Promise<string[]> {
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
