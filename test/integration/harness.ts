// Starts a real VS Code (the 1.100.3 server build from code-server's npm package) and drives it with headless
// Chromium through playwright-core: the offline way to run the extension-host tests and the UI checks.
import { REPRODUCERS } from '../unit/hostile-cases';
import { missing, tools } from '../tools';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { format } from 'node:util';
import { chromium, type Browser, type Page } from 'playwright-core';

export const ROOT = path.resolve(__dirname, '..', '..', '..');

export interface Server {
  port: number;
  url: string;
  process: ChildProcess;
  log: string[];
  /** The server's data folder (its logs, including the extension's own, are under it). */
  dataDir: string;
  stop(): Promise<void>;
}

/** The VS Code server folder, installed on first use (see scripts/vscode-server.mjs). */
export function serverDir(): string {
  const out = execFileSync(process.execPath, [path.join(ROOT, 'scripts', 'vscode-server.mjs')], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return out.toString().trim().split('\n').pop()!;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** Starts the bare VS Code server on a free loopback port and waits until it listens. */
export async function startServer(
  userSettings: Record<string, unknown> = {},
  opts: { installVsix?: string } = {},
): Promise<Server> {
  const dir = serverDir();
  const port = await freePort();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'fsdp-lens-vscode-'));
  const dataDir = path.join(tmp, 'data');
  const extDir = path.join(tmp, 'extensions');
  fs.mkdirSync(path.join(dataDir, 'data', 'Machine'), { recursive: true });
  fs.mkdirSync(extDir, { recursive: true });
  fs.mkdirSync(path.join(dataDir, 'data', 'User'), { recursive: true });
  fs.writeFileSync(
    path.join(dataDir, 'data', 'User', 'settings.json'),
    JSON.stringify(userSettings, null, 2),
  );
  if (opts.installVsix)
    // The server's own command line installs a VSIX into its extensions folder, as `code --install-extension` does.
    execFileSync(
      process.execPath,
      [
        path.join(dir, 'out', 'server-main.js'),
        '--install-extension',
        opts.installVsix,
        '--server-data-dir',
        dataDir,
        '--extensions-dir',
        extDir,
        '--accept-server-license-terms',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, VSCODE_AGENT_FOLDER: dataDir } },
    );
  const proc = spawn(
    process.execPath,
    [
      path.join(dir, 'out', 'server-main.js'),
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--without-connection-token',
      '--enable-smoke-test-driver',
      '--accept-server-license-terms',
      '--disable-telemetry',
      '--disable-workspace-trust',
      '--server-data-dir',
      dataDir,
      '--extensions-dir',
      extDir,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, VSCODE_AGENT_FOLDER: dataDir } },
  );
  const log: string[] = [];
  const listening = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`VS Code server did not start:\n${log.join('')}`)),
      60_000,
    );
    const onData = (b: Buffer) => {
      const s = b.toString();
      log.push(s);
      if (process.env.FSDP_LENS_TEST_VERBOSE) process.stderr.write(s);
      if (s.includes('Extension host agent listening')) {
        clearTimeout(timer);
        resolve();
      }
    };
    proc.stdout!.on('data', onData);
    proc.stderr!.on('data', onData);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`VS Code server exited (${code}):\n${log.join('')}`));
    });
  });
  await listening;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    process: proc,
    log,
    dataDir,
    async stop() {
      proc.kill('SIGTERM');
      await new Promise((r) => setTimeout(r, 200));
      if (proc.exitCode === null) proc.kill('SIGKILL');
      fs.rmSync(tmp, { recursive: true, force: true });
    },
  };
}

/** The browser scripts/provision.mjs found (FSDP_LENS_CHROMIUM, CHROMIUM_PATH, /usr/bin/chromium, PATH). */
export function chromiumPath(): string {
  const found = tools().chromium.path;
  if (!found) throw new Error(missing('chromium') ?? 'Chromium not found');
  return found;
}

export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-dev-shm-usage',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-quic',
    ],
  });
}

/** A copy of a fixture workspace in a temporary folder (tests may edit its files). */
/**
 * The robustness suite's hostile project trees under `hostile/` of a workspace (FIFOs left out: the editor's own
 * file services are not under test), with `hostile/index.json` naming the file each one opens.
 */
export function writeHostile(dst: string): void {
  const index: string[] = [];
  REPRODUCERS.forEach((r, i) => {
    const dir = path.join(dst, 'hostile', String(i).padStart(2, '0'));
    const files = r.files();
    if (!('pyproject.toml' in files)) files['pyproject.toml'] = '';
    for (const [rel, entry] of Object.entries(files)) {
      const p = path.join(dir, rel);
      fs.mkdirSync(path.dirname(p), { recursive: true });
      if (typeof entry === 'string') fs.writeFileSync(p, entry);
      else if ('link' in entry) fs.symlinkSync(entry.link, p);
    }
    const opened = r.args[1];
    if (opened && /\.(py|json|sh|toml|ya?ml)$/.test(opened))
      index.push(path.join('hostile', path.basename(dir), opened));
  });
  fs.writeFileSync(path.join(dst, 'hostile', 'index.json'), JSON.stringify(index));
}

export function prepareWorkspace(
  fixture: string,
  settings: Record<string, unknown> = {},
  opts: { hostile?: boolean } = {},
): string {
  const src = path.join(ROOT, 'test', 'fixtures', fixture);
  const dst = fs.mkdtempSync(path.join(os.tmpdir(), 'fsdp-lens-ws-'));
  fs.cpSync(src, dst, { recursive: true });
  // The lint fixtures (quick-fix tests) and the model projects (static analysis and exact mode).
  fs.cpSync(path.join(ROOT, 'test', 'fixtures', 'lint'), path.join(dst, 'lint'), { recursive: true });
  fs.cpSync(path.join(ROOT, 'test', 'fixtures', 'projects'), path.join(dst, 'projects'), { recursive: true });
  // The bundled examples, as a user opens them.
  fs.cpSync(path.join(ROOT, 'examples'), path.join(dst, 'examples'), { recursive: true });
  // Framework configurations (Accelerate, Lightning, torchtune, torchtitan) beside their scripts.
  fs.cpSync(path.join(ROOT, 'test', 'fixtures', 'frameworks'), path.join(dst, 'frameworks'), {
    recursive: true,
  });
  if (opts.hostile) writeHostile(dst);
  fs.mkdirSync(path.join(dst, '.vscode'), { recursive: true });
  fs.writeFileSync(
    path.join(dst, '.vscode', 'settings.json'),
    JSON.stringify(
      {
        'workbench.startupEditor': 'none',
        'workbench.tips.enabled': false,
        'security.workspace.trust.enabled': false,
        'extensions.ignoreRecommendations': true,
        'fsdpLens.analysisDelayMs': 50,
        // VS Code for the web saves after a delay by default: a test's edit would reach the disk before its revert.
        'files.autoSave': 'off',
        ...settings,
      },
      null,
      2,
    ),
  );
  return dst;
}

/** The workbench URL that loads this extension in development mode (and its tests, when given). */
export function workbenchUrl(
  server: Server,
  workspace: string,
  testsIndex?: string,
  opts: { development?: boolean } = {},
): string {
  const remote = (p: string) => `vscode-remote://127.0.0.1:${server.port}${p}`;
  const payload: [string, string][] = [['skipWelcome', 'true']];
  if (opts.development !== false) payload.unshift(['extensionDevelopmentPath', remote(ROOT)]);
  if (testsIndex) payload.push(['extensionTestsPath', remote(testsIndex)]);
  return `${server.url}/?folder=${encodeURIComponent(workspace)}&payload=${encodeURIComponent(JSON.stringify(payload))}`;
}

/** Opens the workbench in a page that reports `codeAutomationExit` (the test runner's exit code). */
export async function openWorkbench(
  browser: Browser,
  url: string,
  opts: { colorScheme?: 'light' | 'dark'; onLog?: (s: string) => void } = {},
): Promise<{ page: Page; exit: Promise<number> }> {
  const context = await browser.newContext({
    viewport: { width: 1500, height: 950 },
    colorScheme: opts.colorScheme ?? 'dark',
  });
  const page = await context.newPage();
  let resolveExit!: (code: number) => void;
  const exit = new Promise<number>((r) => (resolveExit = r));
  await page.exposeFunction('codeAutomationExit', (code: number) => resolveExit(code));
  // The workbench forwards the extension host's console as (level, args) with args the console call's arguments.
  await page.exposeFunction('codeAutomationLog', (_level: unknown, ...rest: unknown[]) => {
    const args = rest.length === 1 && Array.isArray(rest[0]) ? (rest[0] as unknown[]) : rest;
    const line =
      typeof args[0] === 'string' ? format(...(args as [string, ...unknown[]])) : args.map(String).join(' ');
    // Keep the test runner's report; drop the workbench's own start-up chatter, and its failed lookups of the
    // extension gallery (the tests run offline).
    if (
      !/Service Worker|connection token|Creating a socket|^\s+at |ENOTFOUND|builtin extensions cache|ChatSessionStore/.test(
        line,
      )
    )
      opts.onLog?.(line);
  });
  page.on('console', (m) => {
    if (process.env.FSDP_LENS_TEST_VERBOSE) process.stderr.write(`[page] ${m.text()}\n`);
  });
  await page.goto(url);
  return { page, exit };
}
