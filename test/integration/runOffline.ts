// Runs the extension-host test suite inside a real VS Code, offline: VS Code server + headless Chromium.
//   node out/test/integration/runOffline.js
import * as fs from 'node:fs';
import * as path from 'node:path';
import { launchBrowser, openWorkbench, prepareWorkspace, ROOT, startServer, workbenchUrl } from './harness';
import { requireTools } from '../tools';

const TIMEOUT_MS = 8 * 60_000;

async function main(): Promise<number> {
  requireTools('test:integration', ['chromium', 'server']);
  const testsIndex = path.join(ROOT, 'out', 'test', 'integration', 'suite', 'index.js');
  if (!fs.existsSync(testsIndex))
    throw new Error(`${testsIndex} missing: run "node scripts/build.mjs --tests"`);
  const resultFile = path.join(ROOT, 'out', 'test', 'integration', 'result.json');
  fs.rmSync(resultFile, { force: true });
  const server = await startServer();
  const workspace = prepareWorkspace('workspace', {}, { hostile: true });
  const browser = await launchBrowser();
  try {
    const { exit } = await openWorkbench(browser, workbenchUrl(server, workspace, testsIndex), {
      onLog: (s) => process.stdout.write(`${s}\n`),
    });
    const code = await Promise.race([
      exit,
      new Promise<number>((_, reject) =>
        setTimeout(() => reject(new Error('integration tests timed out')), TIMEOUT_MS),
      ),
    ]);
    // The suite writes its report beside itself (the extension host's console does not reach this process).
    if (fs.existsSync(resultFile)) {
      const r = JSON.parse(fs.readFileSync(resultFile, 'utf8')) as {
        log: string[];
        passed: number;
        failed: number;
        skipped?: number;
      };
      process.stdout.write(
        `integration (VS Code ${'1.100.3'} server, Chromium): ${r.passed} passed, ${r.failed} failed` +
          `${r.skipped ? `, ${r.skipped} skipped` : ''}\n`,
      );
      if (r.failed > 0) return 1;
    } else {
      process.stdout.write(server.log.join(''));
      process.stdout.write('integration: the suite wrote no report\n');
      return 1;
    }
    return code;
  } finally {
    await browser.close();
    await server.stop();
    fs.rmSync(workspace, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error(e instanceof Error ? e.message : e);
    process.exit(1);
  },
);
