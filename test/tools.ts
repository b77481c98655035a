// What the test layers need beyond npm, as scripts/provision.mjs found it, and how a layer skips without it.
// A layer runs, or skips with one line saying what it lacks and how to get it; under CI (CI=true) it fails instead.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

export type Tool = 'chromium' | 'torch' | 'python3' | 'ripgrep' | 'server';

/** One tool: where it is, or what is missing and how to get it. */
export interface Found {
  path?: string;
  python?: string;
  version?: string;
  dir?: string;
  missing?: string;
  hint?: string;
}

export type Tools = Record<Exclude<Tool, 'server'>, Found> & {
  /** Null: not installed yet (it is installed on first use). */
  server: Found | null;
  env: Record<string, string | null>;
};

/** CI=true (or any value but false/0): every layer must run, so a missing tool fails it. */
export const CI = !!process.env.CI && !/^(false|0)$/i.test(process.env.CI);

/** The environment variables that choose a tool (as scripts/provision.mjs reads them). */
const OVERRIDES = ['FSDP_LENS_PYTHON', 'FSDP_LENS_CHROMIUM', 'CHROMIUM_PATH'];

const NAMES: Record<Tool, string> = {
  chromium: 'Chromium',
  torch: 'PyTorch',
  python3: 'Python 3',
  ripgrep: 'ripgrep',
  server: 'the VS Code server',
};

/** The repository root: the folder above this bundle that holds scripts/provision.mjs. */
function repoRoot(): string {
  for (let d = __dirname; ; d = path.dirname(d)) {
    if (fs.existsSync(path.join(d, 'scripts', 'provision.mjs'))) return d;
    if (path.dirname(d) === d) throw new Error(`scripts/provision.mjs not found above ${__dirname}`);
  }
}

const toolsFile = () => path.join(repoRoot(), '.vscode-test', 'tools.json');

function read(): Tools | null {
  try {
    return JSON.parse(fs.readFileSync(toolsFile(), 'utf8')) as Tools;
  } catch {
    return null;
  }
}

/** Whether a record still describes this machine: same overrides, and what it found still there. */
function current(t: Tools): boolean {
  if (OVERRIDES.some((k) => (process.env[k] ?? null) !== (t.env?.[k] ?? null))) return false;
  const entries = [t.chromium, t.torch, t.python3, t.ripgrep];
  if (entries.some((e) => !e || e.missing)) return false;
  const is = (p: string | undefined, kind: 'file' | 'dir') => {
    try {
      const st = fs.statSync(p ?? '');
      return kind === 'file' ? st.isFile() : st.isDirectory();
    } catch {
      return false;
    }
  };
  return (
    [t.chromium.path, t.torch.python, t.python3.python, t.ripgrep.path].every((p) => is(p, 'file')) &&
    (!t.server?.dir || is(t.server.dir, 'dir'))
  );
}

/** Locates the tools again (no installs): scripts/provision.mjs --locate rewrites the record. */
function locate(): Tools {
  // In desktop VS Code (test:electron) process.execPath is Electron: ELECTRON_RUN_AS_NODE makes it run the script as Node.
  execFileSync(process.execPath, [path.join(repoRoot(), 'scripts', 'provision.mjs'), '--locate'], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, ELECTRON_RUN_AS_NODE: '1' },
  });
  const t = read();
  if (!t) throw new Error(`${toolsFile()} was not written by scripts/provision.mjs --locate`);
  return t;
}

let cached: Tools | null = null;

/** The record, located again when absent, written for other overrides, or saying something is missing. */
export function tools(): Tools {
  if (cached) return cached;
  const t = read();
  cached = t && current(t) ? t : locate();
  return cached;
}

/** Why `tool` is missing and how to get it, or null when it is there. */
export function missing(tool: Tool): string | null {
  const found = tools()[tool];
  return found?.missing ? `${found.missing}; ${found.hint ?? `install ${NAMES[tool]}`}` : null;
}

/** What a test that needs PyTorch says it ran with: "exact mode tested with /usr/bin/python3 (PyTorch 1.13.0)". */
export function torchLine(): string {
  const t = tools().torch;
  return t.python
    ? `exact mode tested with ${t.python} (PyTorch ${t.version})`
    : `exact mode: ${missing('torch')}`;
}

/**
 * The `skip` option of a node:test suite that needs `needs`: the reason when one is missing, else false. Under CI
 * a missing tool never skips: the suite runs and fails, saying what is missing.
 */
export function skipUnless(...needs: Tool[]): string | false {
  if (CI) return false;
  const why = needs.map(missing).filter((m): m is string => !!m);
  return why.length ? why.join('; ') : false;
}

/** Installs the VS Code server (on first use); whether that worked (the installer printed why not). */
function installServer(): boolean {
  try {
    execFileSync(process.execPath, [path.join(repoRoot(), 'scripts', 'vscode-server.mjs')], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    return true;
  } catch {
    return false;
  }
}

/**
 * For a test layer run as a script: when a tool in `needs` is missing, prints one line per missing tool and exits,
 * 0 (skipped) or under CI 1 (failed).
 */
export function requireTools(layer: string, needs: Tool[]): void {
  // Not installed yet, or a failed install (the registry may be reachable now): install it before the layer starts.
  if (needs.includes('server') && (!tools().server || tools().server?.missing))
    cached = installServer()
      ? locate()
      : {
          ...tools(),
          server: {
            missing: 'the VS Code server could not be installed',
            hint: 'run `node scripts/vscode-server.mjs` where the npm registry is reachable',
          },
        };
  const why = needs.map(missing).filter((m): m is string => !!m);
  if (!why.length) return;
  for (const w of why) console.log(`${layer} ${CI ? 'FAILED (CI runs every layer)' : 'skipped'}: ${w}`);
  process.exit(CI ? 1 : 0);
}
