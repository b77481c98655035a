// Installs a real VS Code (1.100.3) server for the integration and UI tests without internet beyond the npm
// registry: the `code-server@4.100.3` package carries the server build in lib/vscode. Cached under
// .vscode-test/code-server-4.100.3; prints the server's folder.
//   node scripts/vscode-server.mjs [--force]
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

export const CODE_SERVER_VERSION = '4.100.3';
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const cache = path.join(root, '.vscode-test', `code-server-${CODE_SERVER_VERSION}`);
const vscodeDir = path.join(cache, 'node_modules', 'code-server', 'lib', 'vscode');
const marker = path.join(cache, '.ready');

const NATIVE = ['@vscode/spdlog', 'native-watchdog', 'node-pty', '@parcel/watcher'];
const NATIVE_FILES = [
  'node_modules/@vscode/spdlog/build/Release/spdlog.node',
  'node_modules/native-watchdog/build/Release/watchdog.node',
  'node_modules/node-pty/build/Release/pty.node',
];

/** Runs a command; with `quiet`, its output is kept and returned instead of printed. */
function run(cmd, args, cwd, { quiet = false } = {}) {
  return execFileSync(cmd, args, {
    cwd,
    stdio: ['ignore', quiet ? 'pipe' : 'inherit', quiet ? 'pipe' : 'inherit'],
    encoding: 'utf8',
    env: {
      ...process.env,
      npm_config_audit: 'false',
      npm_config_fund: 'false',
      npm_config_loglevel: 'error',
    },
  });
}

/** Where a failed install leaves npm's output. */
export const INSTALL_LOG = path.join(root, '.vscode-test', 'vscode-server-install.log');

/** Runs npm quietly; when it fails, its output goes to INSTALL_LOG and the error is one line. */
function npm(args, cwd) {
  try {
    run('npm', args, cwd, { quiet: true });
  } catch (e) {
    const output = `${e.stdout ?? ''}${e.stderr ?? ''}`.trim();
    fs.writeFileSync(INSTALL_LOG, `npm ${args.join(' ')} (in ${cwd})\n${output}\n`);
    const code = /npm error code (\w+)/.exec(output)?.[1];
    throw new Error(
      `npm ${args[0]} of code-server@${CODE_SERVER_VERSION} failed${code ? ` (${code})` : ''}; npm's output is in ${path.relative(root, INSTALL_LOG)}`,
      { cause: e },
    );
  }
}

/** The folder holding out/server-main.js, installing it first when needed. */
export function ensureServer({ force = false, log = console.error } = {}) {
  if (!force && fs.existsSync(marker)) {
    linkRipgrep();
    return vscodeDir;
  }
  fs.rmSync(cache, { recursive: true, force: true });
  fs.mkdirSync(cache, { recursive: true });
  fs.writeFileSync(
    path.join(cache, 'package.json'),
    JSON.stringify({ name: 'vscode-server-cache', private: true }),
  );
  log(`Installing code-server@${CODE_SERVER_VERSION} (VS Code server) into ${path.relative(root, cache)} …`);
  // Its own postinstall downloads ripgrep from GitHub, which is out of reach: install without scripts. npm's
  // output is shown only when it fails, so that a passing run prints no warnings.
  npm(['install', '--ignore-scripts', '--no-save', `code-server@${CODE_SERVER_VERSION}`], cache);
  npm(['install', '--omit=dev', '--ignore-scripts'], vscodeDir);
  log('Building the server’s native modules …');
  // node-pty's post-install step fails after pty.node is built (it asks npx for a node-gyp it may not fetch): its
  // output is shown only when a module is really missing, so that a passing run prints no error.
  let output;
  try {
    output = run('npm', ['rebuild', ...NATIVE], vscodeDir, { quiet: true });
  } catch (e) {
    output = `${e.stdout ?? ''}${e.stderr ?? ''}`;
  }
  const missing = NATIVE_FILES.filter((f) => !fs.existsSync(path.join(vscodeDir, f)));
  if (missing.length) {
    log(output);
    throw new Error(`VS Code server native modules missing after rebuild: ${missing.join(', ')}`);
  }
  linkRipgrep();
  fs.writeFileSync(marker, new Date().toISOString());
  return vscodeDir;
}

/** Whether the server is installed (then `ensureServer` returns at once). */
export function serverReady() {
  return fs.existsSync(marker);
}

/**
 * Search and Quick Open in the workbench need ripgrep; Debian's binary stands in for the one the postinstall would
 * fetch. Checked on every use, so that a ripgrep installed after the server still reaches it.
 */
function linkRipgrep() {
  const rg = ['/usr/bin/rg', '/usr/local/bin/rg'].find((p) => fs.existsSync(p));
  const rgDir = path.join(vscodeDir, 'node_modules', '@vscode', 'ripgrep', 'bin');
  if (!rg || !fs.existsSync(path.dirname(rgDir)) || fs.existsSync(path.join(rgDir, 'rg'))) return;
  fs.mkdirSync(rgDir, { recursive: true });
  fs.copyFileSync(rg, path.join(rgDir, 'rg'));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  try {
    console.log(ensureServer({ force: process.argv.includes('--force') }));
  } catch (e) {
    console.error(e instanceof Error ? e.message : String(e));
    process.exit(1);
  }
}
