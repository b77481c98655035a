// Renders the images the packages show: media/icon.png from media/icon.svg, and the README's screenshots in
// media/screenshots/, cropped from the dark-theme pictures `npm run test:ui` leaves in test-artifacts/ui/.
//   node scripts/media.mjs [--icon] [--screenshots]   (both when neither is given)
import * as fs from 'node:fs';
import * as path from 'node:path';
import { chromium } from 'playwright-core';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const args = new Set(process.argv.slice(2));
const all = !args.has('--icon') && !args.has('--screenshots');
const ICON_SIZE = 256;
const UI = path.join(root, 'test-artifacts', 'ui');
const SHOTS = path.join(root, 'media', 'screenshots');

/**
 * Each README screenshot: the UI check's picture (1500 x 950) and the parts of it to keep, in its pixels, stacked
 * top to bottom. The window's title bar, the explorer and the activity bar are cut away, and so is empty editor.
 */
const CROPS = [
  { name: 'lens', from: 'lens-dark.png', parts: [[348, 36, 1152, 330]] },
  { name: 'hover', from: 'hover-dark.png', parts: [[348, 36, 900, 520]] },
  { name: 'panel', from: 'panel-dark.png', parts: [[348, 36, 1152, 914]] },
  {
    name: 'problems',
    from: 'problems-dark.png',
    parts: [
      [348, 36, 1152, 250],
      [348, 611, 1152, 110],
    ],
  },
];

const dataUrl = (file, type) => `data:${type};base64,${fs.readFileSync(file).toString('base64')}`;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
try {
  const page = await browser.newPage({ deviceScaleFactor: 1, viewport: { width: 1600, height: 1000 } });
  if (all || args.has('--icon')) {
    const svg = dataUrl(path.join(root, 'media', 'icon.svg'), 'image/svg+xml');
    await page.setContent(
      `<style>html,body{margin:0;background:transparent}</style><img src="${svg}" width="${ICON_SIZE}" height="${ICON_SIZE}">`,
    );
    await page.waitForFunction('document.images[0]?.complete');
    const out = path.join(root, 'media', 'icon.png');
    await page.screenshot({
      path: out,
      omitBackground: true,
      clip: { x: 0, y: 0, width: ICON_SIZE, height: ICON_SIZE },
    });
    console.log(`${path.relative(root, out)}: ${fs.statSync(out).size} bytes`);
  }
  if (all || args.has('--screenshots')) {
    fs.mkdirSync(SHOTS, { recursive: true });
    for (const c of CROPS) {
      const from = path.join(UI, c.from);
      if (!fs.existsSync(from))
        throw new Error(`${path.relative(root, from)} is missing: run "npm run test:ui" first`);
      const url = dataUrl(from, 'image/png');
      const parts = c.parts
        .map(
          ([x, y, w, h]) =>
            `<div style="width:${w}px;height:${h}px;background:url(${url}) -${x}px -${y}px no-repeat"></div>`,
        )
        .join('');
      await page.setContent(
        `<style>html,body{margin:0}</style><div id="shot" style="width:max-content">${parts}</div>`,
      );
      await page.waitForLoadState('load');
      const out = path.join(SHOTS, `${c.name}.png`);
      await page.locator('#shot').screenshot({ path: out });
      console.log(`${path.relative(root, out)}: ${fs.statSync(out).size} bytes`);
    }
  }
} finally {
  await browser.close();
}
