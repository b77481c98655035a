// The extension-host suite: the `run()` that @vscode/test-electron and the offline runner call inside VS Code.
import * as fs from 'node:fs';
import * as path from 'node:path';
import Mocha from 'mocha';

export function run(): Promise<void> {
  const mocha = new Mocha({ ui: 'bdd', timeout: 60_000, color: false, reporter: 'spec' });
  const grep = process.env.FSDP_LENS_TEST_GREP;
  if (grep) mocha.grep(grep);
  for (const f of fs.readdirSync(__dirname).sort())
    if (f.endsWith('.test.js')) mocha.addFile(path.join(__dirname, f));
  const log: string[] = [];
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  return new Promise((resolve, reject) => {
    const runner = mocha.run((failures) => {
      const report = { passed, failed, skipped, log };
      fs.writeFileSync(path.join(__dirname, '..', 'result.json'), JSON.stringify(report, null, 2));
      if (failures > 0) reject(new Error(`${failures} integration tests failed`));
      else resolve();
    });
    runner.on('pass', (t) => {
      passed++;
      log.push(`  ✔ ${t.fullTitle()}`);
    });
    // A test that needs a tool this machine lacks (test/tools.ts) skips itself and says why in its title.
    runner.on('pending', (t) => {
      skipped++;
      log.push(`  - ${t.fullTitle()}`);
    });
    runner.on('fail', (t, err: Error) => {
      failed++;
      log.push(
        `  ✖ ${t.fullTitle()}\n      ${(err.stack ?? err.message).split('\n').slice(0, 6).join('\n      ')}`,
      );
    });
  });
}
