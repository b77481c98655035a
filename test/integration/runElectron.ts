// Runs the same extension-host suite in desktop VS Code through @vscode/test-electron. It downloads VS Code into
// .vscode-test/ (needs internet), or uses an installed one given by VSCODE_EXECUTABLE_PATH.
//   node out/test/integration/runElectron.js
import * as path from 'node:path';
import { runTests } from '@vscode/test-electron';
import { prepareWorkspace, ROOT } from './harness';

async function main(): Promise<void> {
  const workspace = prepareWorkspace('workspace');
  await runTests({
    version: '1.100.3',
    extensionDevelopmentPath: ROOT,
    extensionTestsPath: path.join(ROOT, 'out', 'test', 'integration', 'suite', 'index.js'),
    launchArgs: [workspace, '--disable-extensions', '--disable-workspace-trust'],
    ...(process.env.VSCODE_EXECUTABLE_PATH
      ? { vscodeExecutablePath: process.env.VSCODE_EXECUTABLE_PATH }
      : {}),
  });
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
