// npm's `prepare`: the minified build of dist/, on `npm install` in a checkout and when npm installs the package
// from git (the pre-commit hook). npm 11 prepares a git clone without its dev dependencies, so they are installed
// first when the build tools are missing. Nothing is written to stdout: pre-commit reads npm's output.
//   node scripts/prepare.mjs
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { createRequire } from 'node:module';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const require = createRequire(path.join(root, 'package.json'));
const quiet = { cwd: root, stdio: ['ignore', 2, 2] };

function run(cmd, args, env = process.env) {
  const r = spawnSync(cmd, args, { ...quiet, env });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

try {
  require.resolve('esbuild');
} catch {
  // A git dependency's clone, prepared by an npm that runs inside a global install: install here, not globally,
  // and without scripts (this one among them).
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^npm_config_global$/i.test(k)),
  );
  console.error('fsdp-lens: installing the build tools (the dev dependencies) to build dist/');
  run(
    'npm',
    [
      'install',
      '--global=false',
      '--include=dev',
      '--no-save',
      '--ignore-scripts',
      '--no-audit',
      '--no-fund',
    ],
    env,
  );
}
run(process.execPath, [path.join(root, 'scripts', 'build.mjs'), '--minify']);
