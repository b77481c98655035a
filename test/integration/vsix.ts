// The packaged extension as a user gets it: `npm run package` builds the VSIX, the offline VS Code server installs
// it (no development path), and a workbench in Chromium shows its lenses and its panel on a training script.
//   node out/test/integration/vsix.js
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { launchBrowser, openWorkbench, prepareWorkspace, ROOT, startServer, workbenchUrl } from './harness';
import { openFile, panelFrame, runCommand, waitForLens } from './workbench';

const ARTIFACTS = path.join(ROOT, 'test-artifacts', 'vsix');

async function main(): Promise<number> {
  // Screenshots of this run only: a failure's picture from an earlier run would mislead.
  fs.rmSync(ARTIFACTS, { recursive: true, force: true });
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'fsdp-lens-vsix-'));
  const vsix = path.join(tmp, 'fsdp-lens.vsix');
  execFileSync('npm', ['run', '--silent', 'package', '--', '--out', vsix], { cwd: ROOT, stdio: 'inherit' });
  const listing = execFileSync('unzip', ['-Z1', vsix]).toString().split('\n').filter(Boolean);
  const unexpected = listing.filter(
    (f) =>
      !/^(\[Content_Types\]\.xml|extension\.vsixmanifest|extension\/(package\.json|readme\.md|changelog\.md|LICENSE\.txt|dist\/(extension|panel|worker)\.js|dist\/[\w-]+\.wasm|dist\/fsdp_lens_measure\.py|docs\/rules\.md|media\/(icon\.png|panel\.css|walkthrough\/\w+\.md)|syntaxes\/[\w.-]+\.json))$/.test(
        f,
      ),
  );
  if (unexpected.length) throw new Error(`the VSIX holds files that do not run: ${unexpected.join(', ')}`);
  console.log(`  ✔ the VSIX holds only what runs (${listing.length} entries)`);

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
      await waitForLens(page, /FSDP2 root · 33 units · 16\.1 GB\/GPU persistent/);
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
