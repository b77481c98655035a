// Finds, and as root with apt installs, what the test layers need beyond npm; records it in .vscode-test/tools.json.
//   node scripts/provision.mjs               locate; install what is missing; install the VS Code server
//   node scripts/provision.mjs --for unit    the same for the unit tests only (Python and PyTorch)
//   node scripts/provision.mjs --locate      locate only, silently: no installs, no VS Code server install
// What each layer needs: Chromium (the VS Code tests, the UI, webview and VSIX checks), ripgrep (VS Code's Quick
// Open in the UI checks), a Python with PyTorch (exact mode: unit tests, one VS Code test, the bench), any
// Python 3 (the value-model conformance test) and the VS Code server (scripts/vscode-server.mjs). Where it cannot
// install (not root, no apt, offline) it prints one line per missing thing, and the layers needing it skip with
// the same line. Under CI (CI=true) a missing thing fails instead: CI must run every layer.
// Overrides: FSDP_LENS_PYTHON (the Python for exact mode), FSDP_LENS_CHROMIUM or CHROMIUM_PATH (the browser).
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CODE_SERVER_VERSION, ensureServer, serverReady } from './vscode-server.mjs';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
export const TOOLS_FILE = path.join(root, '.vscode-test', 'tools.json');
/** The environment variables that choose a tool: a record written under other values is located again. */
export const OVERRIDES = ['FSDP_LENS_PYTHON', 'FSDP_LENS_CHROMIUM', 'CHROMIUM_PATH'];

/** CI=true (or any value but false/0): every layer must run. */
export const isCI = () => !!process.env.CI && !/^(false|0)$/i.test(process.env.CI);

/** The first executable named `name` on PATH. */
function onPath(name) {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter).filter(Boolean)) {
    const p = path.join(dir, name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      if (fs.statSync(p).isFile()) return p;
    } catch {
      // not here
    }
  }
  return null;
}

const executable = (p) => {
  try {
    fs.accessSync(p, fs.constants.X_OK);
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
};

/** `{ path }` when found, else `{ missing, hint }`: what is missing, what skips, how to get it. */
function locateChromium() {
  const env = ['FSDP_LENS_CHROMIUM', 'CHROMIUM_PATH'].find((k) => process.env[k]);
  const hint = 'install it with `sudo apt-get install chromium`, or set FSDP_LENS_CHROMIUM=/path/to/chromium';
  if (env) {
    const p = process.env[env];
    return executable(p)
      ? { path: p, from: env }
      : { missing: `Chromium not found at ${env}=${p}`, hint, override: env };
  }
  for (const p of [
    '/usr/bin/chromium',
    onPath('chromium'),
    onPath('chromium-browser'),
    onPath('google-chrome'),
  ])
    if (p && executable(p)) return { path: p };
  return { missing: 'Chromium not found (/usr/bin/chromium or chromium on PATH)', hint, apt: 'chromium' };
}

/** Runs `python` on a snippet; its stdout lines, or null when it fails. */
function runPython(python, code) {
  const r = spawnSync(python, ['-c', code], { encoding: 'utf8', timeout: 180_000 });
  return r.status === 0 ? r.stdout.trim().split('\n') : null;
}

function locateTorch() {
  const hint =
    'install Debian’s PyTorch with `sudo apt-get install python3-torch`, or `pip install torch` into a Python and set FSDP_LENS_PYTHON=/path/to/that/python';
  const code = 'import sys, torch; print(sys.executable); print(torch.__version__)';
  const env = process.env.FSDP_LENS_PYTHON;
  if (env) {
    const out = runPython(env, code);
    return out
      ? { python: out[0] || env, version: out[1], from: 'FSDP_LENS_PYTHON' }
      : { missing: `PyTorch not importable in FSDP_LENS_PYTHON=${env}`, hint, override: 'FSDP_LENS_PYTHON' };
  }
  // Debian's python3-torch belongs to /usr/bin/python3; the python3 on PATH may be another Python (pyenv, venv).
  const tried = [];
  for (const p of ['/usr/bin/python3', onPath('python3'), onPath('python')]) {
    if (!p || tried.includes(p) || !executable(p)) continue;
    tried.push(p);
    const out = runPython(p, code);
    if (out) return { python: out[0] || p, version: out[1] };
  }
  return {
    missing: `PyTorch is not installed in ${tried.length ? tried.join(' or ') : 'any Python (none found)'}`,
    hint,
    apt: 'python3-torch',
  };
}

function locatePython3() {
  const env = process.env.FSDP_LENS_PYTHON;
  for (const p of [env, onPath('python3'), '/usr/bin/python3']) {
    if (!p) continue;
    const out = runPython(p, 'import sys; print(sys.executable); print(sys.version.split()[0])');
    if (out && /^3\./.test(out[1] ?? '')) return { python: out[0] || p, version: out[1] };
  }
  return {
    missing: 'no Python 3 found (python3 on PATH)',
    hint: 'install it with `sudo apt-get install python3`',
    apt: 'python3',
  };
}

function locateRipgrep() {
  const p = ['/usr/bin/rg', onPath('rg')].find((x) => x && executable(x));
  return p
    ? { path: p }
    : {
        missing: 'ripgrep (rg) not found',
        hint: 'install it with `sudo apt-get install ripgrep`',
        apt: 'ripgrep',
      };
}

function locate() {
  return {
    chromium: locateChromium(),
    torch: locateTorch(),
    python3: locatePython3(),
    ripgrep: locateRipgrep(),
  };
}

/** What each tool is for, as the lines that install or miss it say. */
const PURPOSE = {
  chromium: { name: 'Chromium', for: 'the VS Code tests and the UI, webview and VSIX checks' },
  torch: { name: 'PyTorch', for: 'the exact-mode tests' },
  python3: { name: 'Python 3', for: 'the Python value-model test' },
  ripgrep: { name: 'ripgrep', for: "VS Code's Quick Open in the UI checks" },
  server: { name: 'the VS Code server', for: 'the VS Code tests and the UI and VSIX checks' },
};
/** Which test layers skip without each tool. */
const SKIPS = {
  chromium: 'test:integration, test:ui, test:webview, test:vsix and the bench’s editor figures',
  torch: 'the exact-mode unit tests, the exact-mode VS Code test and the bench’s exact figure',
  python3: 'the Python value-model unit test',
  ripgrep: 'the Quick Open check of test:ui',
  server: 'test:integration, test:ui, test:vsix and the bench’s editor figures',
};
const UNIT = ['torch', 'python3'];

function canApt() {
  return process.getuid?.() === 0 && !!onPath('apt-get');
}

function aptInstall(packages, log) {
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const opts = { env, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' };
  try {
    execFileSync('apt-get', ['update', '-qq'], opts);
    execFileSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...packages], opts);
    return true;
  } catch (e) {
    const out = `${e.stdout ?? ''}${e.stderr ?? ''}`.trim().split('\n').slice(-3).join(' | ');
    log(`provision: apt-get could not install ${packages.join(', ')}: ${out || e.message}`);
    return false;
  }
}

/** Locates (and unless `locateOnly`, installs) the tools; writes TOOLS_FILE; returns the record. */
export function provision({ locateOnly = false, only = null, log = console.error } = {}) {
  const wanted = (k) => !only || only.includes(k);
  let found = locate();
  const absent = () => Object.keys(found).filter((k) => wanted(k) && found[k].missing);
  if (!locateOnly) {
    const installable = absent().filter((k) => found[k].apt);
    if (installable.length && canApt()) {
      for (const k of installable)
        log(`Installing ${PURPOSE[k].name} (Debian package ${found[k].apt}) for ${PURPOSE[k].for}`);
      if (aptInstall([...new Set(installable.map((k) => found[k].apt))], log)) found = locate();
    }
  }
  // Not installed yet: the layers install it on first use. A failed install is remembered until the next try.
  const previous = readTools()?.server;
  let server = previous?.missing ? previous : null;
  if (serverReady()) server = { dir: ensureServer() };
  else if (!locateOnly && wanted('server')) {
    log(
      `Installing ${PURPOSE.server.name} (code-server@${CODE_SERVER_VERSION} from the npm registry) for ${PURPOSE.server.for}`,
    );
    try {
      server = { dir: ensureServer({ log: () => {} }) };
    } catch (e) {
      server = {
        missing: `the VS Code server could not be installed (${e instanceof Error ? e.message : String(e)})`,
        hint: 'run `node scripts/vscode-server.mjs` where the npm registry is reachable',
      };
    }
  }
  const record = {
    written: new Date().toISOString(),
    env: Object.fromEntries(OVERRIDES.map((k) => [k, process.env[k] ?? null])),
    ...found,
    server,
  };
  // Test files run in parallel may locate at the same time: each writes its own file and renames it into place.
  fs.mkdirSync(path.dirname(TOOLS_FILE), { recursive: true });
  const tmp = `${TOOLS_FILE}.${process.pid}`;
  fs.writeFileSync(tmp, JSON.stringify(record, null, 2) + '\n');
  fs.renameSync(tmp, TOOLS_FILE);
  return record;
}

export function readTools() {
  try {
    return JSON.parse(fs.readFileSync(TOOLS_FILE, 'utf8'));
  } catch {
    return null;
  }
}

/** The one line that says a tool is missing, what skips without it and how to get it. */
export function missingLine(key, entry) {
  return `${entry.missing}: ${isCI() ? 'CI runs every layer, so this fails' : `skipping ${SKIPS[key]}`}; ${entry.hint}`;
}

/** The line that says what was found. */
function foundLine(r, keys) {
  const parts = [];
  if (keys.includes('chromium') && r.chromium.path) parts.push(`Chromium ${r.chromium.path}`);
  if (keys.includes('torch') && r.torch.python) parts.push(`PyTorch ${r.torch.version} in ${r.torch.python}`);
  if (keys.includes('python3') && r.python3.python && r.python3.python !== r.torch.python)
    parts.push(`Python ${r.python3.version} ${r.python3.python}`);
  if (keys.includes('ripgrep') && r.ripgrep.path) parts.push(`ripgrep ${r.ripgrep.path}`);
  if (keys.includes('server') && r.server?.dir)
    parts.push(`VS Code server (code-server@${CODE_SERVER_VERSION})`);
  return parts.join(', ');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2);
  const locateOnly = args.includes('--locate');
  const i = args.indexOf('--for');
  const only = i >= 0 && args[i + 1] === 'unit' ? UNIT : null;
  const r = provision({ locateOnly, only });
  if (!locateOnly) {
    const keys = only ?? [...Object.keys(PURPOSE)];
    const missing = keys.filter((k) => r[k]?.missing);
    const have = foundLine(r, keys);
    if (have) console.error(`test tools: ${have}`);
    for (const k of missing) console.error(`test tools: ${missingLine(k, r[k])}`);
    if (missing.length && isCI()) process.exit(1);
  }
}
