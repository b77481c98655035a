// The command-line tool as npm ships it: `npm pack` keeps only the CLI bundle, the files it loads and the docs,
// and the tarball installs offline into an empty folder (it has no dependencies), where `npx fsdp-lens` runs.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FIXTURES, ROOT, tempDir } from './helpers';

const CLI = path.join(ROOT, 'dist', 'cli.js');
const SKIP = fs.existsSync(CLI) ? false : 'dist/cli.js is not built: run "npm run build" first';
const PKG = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
  bin: Record<string, string>;
  files: string[];
  dependencies?: Record<string, string>;
};

/** What the tarball holds: the CLI, what it reads beside itself at run time, and the package's documents. */
const SHIPPED = [
  'CHANGELOG.md',
  'LICENSE',
  'README.md',
  'dist/cli.js',
  'dist/fsdp_lens_measure.py',
  'dist/fsdp_lens_probe.py',
  'dist/tree-sitter-python.wasm',
  'dist/web-tree-sitter.wasm',
  'package.json',
];

/** npm or npx with no network, no audit, no funding or update notices; its output as text. */
function run(cmd: 'npm' | 'npx', args: string[], cwd: string) {
  const r = spawnSync(cmd, args, {
    cwd,
    encoding: 'utf8',
    timeout: 60_000,
    env: {
      ...process.env,
      npm_config_offline: 'true',
      npm_config_audit: 'false',
      npm_config_fund: 'false',
      npm_config_update_notifier: 'false',
    },
  });
  if (r.error) throw r.error;
  return { code: r.status, out: r.stdout, err: r.stderr };
}

describe('the npm package', { skip: SKIP }, () => {
  let tmp = '';
  let tarball = '';
  let packed: string[] = [];
  let consumer = '';

  before(() => {
    tmp = tempDir('fsdp-lens-npm-');
    // The bundle as built: `--ignore-scripts` skips prepack's minified rebuild, which publishing runs.
    const pack = run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp], ROOT);
    assert.equal(pack.code, 0, pack.err);
    const [info] = JSON.parse(pack.out) as { filename: string; files: { path: string }[] }[];
    tarball = path.join(tmp, info!.filename);
    packed = info!.files.map((f) => f.path).sort();

    consumer = path.join(tmp, 'consumer');
    fs.mkdirSync(path.join(consumer, 'src'), { recursive: true });
    fs.writeFileSync(path.join(consumer, 'package.json'), '{ "name": "consumer", "private": true }\n');
    for (const f of ['fsdp001_bad.py', 'fsdp001_good.py'])
      fs.copyFileSync(path.join(FIXTURES, 'lint', f), path.join(consumer, 'src', f));
    const install = run('npm', ['install', '--offline', '--no-audit', '--no-fund', tarball], consumer);
    assert.equal(install.code, 0, install.err);
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('ships only the CLI, the files it loads and the documents, with no dependencies', () => {
    assert.deepEqual(packed, SHIPPED);
    assert.equal(PKG.dependencies, undefined, 'the bundle holds every dependency');
    assert.equal(PKG.bin['fsdp-lens'], 'dist/cli.js');
    const installed = path.join(consumer, 'node_modules', PKG.name, 'dist', 'cli.js');
    assert.match(fs.readFileSync(installed, 'utf8').split('\n')[0]!, /^#!\/usr\/bin\/env node$/);
  });

  it('`npx fsdp-lens --version` in a clean folder prints the version', () => {
    const r = run('npx', ['fsdp-lens', '--version'], consumer);
    assert.equal(r.code, 0, r.err);
    assert.equal(r.out.trim(), PKG.version);
  });

  it('`npx fsdp-lens lint` parses with the shipped grammar and exits 1 on a finding, 0 on a clean file', () => {
    const bad = run('npx', ['fsdp-lens', 'lint', 'src/fsdp001_bad.py'], consumer);
    assert.equal(bad.code, 1, bad.err);
    assert.match(bad.out, /^src\/fsdp001_bad\.py:8:9: FSDP001 /m);
    const good = run('npx', ['fsdp-lens', 'lint', 'src/fsdp001_good.py'], consumer);
    assert.equal(good.code, 0, good.err);
    assert.equal(good.out, '');
  });
});
