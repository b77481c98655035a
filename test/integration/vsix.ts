// The packaged extension as a user gets it: `npm run package` builds the VSIX, which must hold what the
// Marketplace and Open VSX show (the user README, the icon, the changelog), the offline VS Code server installs it
// (no development path), and a workbench in Chromium shows its lenses and its panel on a training script.
//   node out/test/integration/vsix.js
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as zlib from 'node:zlib';
import { launchBrowser, openWorkbench, prepareWorkspace, ROOT, startServer, workbenchUrl } from './harness';
import { openFile, panelFrame, runCommand, waitForLens } from './workbench';
import { requireTools } from '../tools';

const ARTIFACTS = path.join(ROOT, 'test-artifacts', 'vsix');

/** A zip archive's entries, from its central directory (a VSIX is a zip): name, compression, size, local header. */
function zipDirectory(zip: Buffer): { name: string; method: number; size: number; local: number }[] {
  // The end-of-central-directory record: signature 0x06054b50, within the last 64 KiB + 22 bytes.
  let end = -1;
  for (let i = zip.length - 22; i >= Math.max(0, zip.length - 22 - 0xffff); i--)
    if (zip.readUInt32LE(i) === 0x06054b50) {
      end = i;
      break;
    }
  if (end < 0) throw new Error('not a zip archive: no end of central directory');
  const count = zip.readUInt16LE(end + 10);
  const entries: { name: string; method: number; size: number; local: number }[] = [];
  for (let at = zip.readUInt32LE(end + 16), n = 0; n < count; n++) {
    if (zip.readUInt32LE(at) !== 0x02014b50) throw new Error(`bad central directory entry at ${at}`);
    const [nameLen, extraLen, commentLen] = [28, 30, 32].map((o) => zip.readUInt16LE(at + o)) as [
      number,
      number,
      number,
    ];
    entries.push({
      name: zip.toString('utf8', at + 46, at + 46 + nameLen),
      method: zip.readUInt16LE(at + 10),
      size: zip.readUInt32LE(at + 20),
      local: zip.readUInt32LE(at + 42),
    });
    at += 46 + nameLen + extraLen + commentLen;
  }
  return entries;
}

/** The names of a zip archive's entries. */
function zipEntries(zip: Buffer): string[] {
  return zipDirectory(zip).map((e) => e.name);
}

/** The contents of one entry of a zip archive (stored or deflated). */
function zipRead(zip: Buffer, name: string): Buffer {
  const e = zipDirectory(zip).find((x) => x.name === name);
  if (!e) throw new Error(`the VSIX has no ${name}`);
  const data = e.local + 30 + zip.readUInt16LE(e.local + 26) + zip.readUInt16LE(e.local + 28);
  const raw = zip.subarray(data, data + e.size);
  if (e.method === 0) return raw;
  if (e.method === 8) return zlib.inflateRawSync(raw);
  throw new Error(`${name}: zip compression method ${e.method}`);
}

/**
 * What the Marketplace and Open VSX show from the VSIX: the user README (README.md without its contributor
 * section, every image and link absolute), the icon, the changelog, and a manifest without the npm allow-list.
 */
function checkListing(vsix: string, listing: string[]): void {
  const zip = fs.readFileSync(vsix);
  const entry = (name: string) => zipRead(zip, name);
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
    version: string;
    icon: string;
  };
  const manifest = entry('extension.vsixmanifest').toString();
  const packaged = JSON.parse(entry('extension/package.json').toString()) as Record<string, unknown>;

  const readme = entry('extension/readme.md').toString();
  if (!/^# FSDP Lens\n/.test(readme) || !readme.includes('\n## Settings\n'))
    throw new Error('the packaged README is not the user README');
  const devOnly = /npm ci|npm (run )?test|npm run (example|build|package|bench)|CONTRIBUTING|vsix:omit/.exec(
    readme,
  );
  if (devOnly) throw new Error(`the packaged README has contributor material: "${devOnly[0]}"`);
  const relative = /!?\[[^\]]*\]\((?!https:\/\/|#)([^)]*)\)/.exec(readme);
  if (relative)
    throw new Error(`the packaged README links to "${relative[1]}", which the Marketplace cannot resolve`);
  if (!/!\[[^\]]*\]\(https:\/\/github\.com\/[^)]+\/media\/screenshots\/\w+\.png\)/.test(readme))
    throw new Error('the packaged README shows no screenshot');
  console.log('  ✔ the packaged README is the user README, its images and links absolute');

  const icon = `extension/${pkg.icon}`;
  if (!listing.includes(icon) || !manifest.includes(`<Icon>${icon}</Icon>`))
    throw new Error(`the VSIX has no icon ${icon} in its manifest`);
  const png = entry(icon);
  const [w, h] = [png.readUInt32BE(16), png.readUInt32BE(20)];
  if (png.toString('latin1', 1, 4) !== 'PNG' || w !== h || (w !== 128 && w !== 256))
    throw new Error(`the icon is not a 128 or 256 pixel square PNG (${w} x ${h})`);
  console.log(`  ✔ the VSIX has its icon (${w} x ${h} PNG)`);

  const changelog = entry('extension/changelog.md').toString();
  if (
    !manifest.includes('Microsoft.VisualStudio.Services.Content.Changelog') ||
    !changelog.startsWith('# Changelog')
  )
    throw new Error('the VSIX has no changelog');
  if (!changelog.includes(`\n## ${pkg.version}\n`))
    throw new Error(`the changelog has no ${pkg.version} section`);
  console.log('  ✔ the VSIX has the changelog');

  if ('files' in packaged) throw new Error('the VSIX\'s package.json keeps the npm allow-list "files"');
}

async function main(): Promise<number> {
  requireTools('test:vsix', ['chromium', 'server']);
  // Screenshots of this run only: a failure's picture from an earlier run would mislead.
  fs.rmSync(ARTIFACTS, { recursive: true, force: true });
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'fsdp-lens-vsix-'));
  const vsix = path.join(tmp, 'fsdp-lens.vsix');
  execFileSync('npm', ['run', '--silent', 'package', '--', '--out', vsix], { cwd: ROOT, stdio: 'inherit' });
  const listing = zipEntries(fs.readFileSync(vsix));
  const unexpected = listing.filter(
    (f) =>
      !/^(\[Content_Types\]\.xml|extension\.vsixmanifest|extension\/(package\.json|readme\.md|changelog\.md|LICENSE\.txt|dist\/(extension|panel|worker)\.js|dist\/[\w-]+\.wasm|dist\/fsdp_lens_measure\.py|dist\/train_llama_fsdp2\.py|docs\/rules\.md|media\/(icon\.png|panel\.css|walkthrough\/\w+\.md)|syntaxes\/[\w.-]+\.json))$/.test(
        f,
      ),
  );
  if (unexpected.length) throw new Error(`the VSIX holds files that do not run: ${unexpected.join(', ')}`);
  console.log(`  ✔ the VSIX holds only what runs (${listing.length} entries)`);
  checkListing(vsix, listing);

  const server = await startServer({ 'workbench.startupEditor': 'none' }, { installVsix: vsix });
  const browser = await launchBrowser();
  let failed = 0;
  try {
    const workspace = prepareWorkspace('workspace');
    const { page } = await openWorkbench(
      browser,
      workbenchUrl(server, workspace, undefined, { development: false }),
    );
    await page.waitForSelector('.monaco-workbench', { timeout: 60_000 });
    const step = async (name: string, run: () => Promise<void>) => {
      try {
        await run();
        console.log(`  ✔ ${name}`);
      } catch (e) {
        failed++;
        console.log(`  ✖ ${name}: ${e instanceof Error ? e.message : String(e)}`);
        await page.screenshot({ path: path.join(ARTIFACTS, `FAILED-${name.replace(/\W+/g, '-')}.png`) });
      }
    };
    await step('the installed extension shows its lenses', async () => {
      await openFile(page, 'train_fsdp2.py');
      await waitForLens(page, /fits 8 x H100 SXM.*33 FSDP2 units/);
      await page.screenshot({ path: path.join(ARTIFACTS, 'lens.png') });
    });
    await step('the installed extension opens the footprint panel', async () => {
      await runCommand(page, 'FSDP: Estimate FSDP footprint');
      const frame = await panelFrame(page);
      await frame.waitForSelector('#memory canvas', { timeout: 20_000 });
      const text = (await frame.textContent('#summary')) ?? '';
      if (!/Fits H100 SXM 80GB/.test(text)) throw new Error(`panel summary: ${text.slice(0, 200)}`);
      await page.screenshot({ path: path.join(ARTIFACTS, 'panel.png') });
    });
    await page.context().close();
    fs.rmSync(workspace, { recursive: true, force: true });
  } finally {
    await browser.close();
    await server.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  console.log(`vsix (installed into the VS Code server): ${failed ? `${failed} failed` : 'passed'}`);
  return failed ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error(e instanceof Error ? e.message : e);
    process.exit(1);
  },
);
