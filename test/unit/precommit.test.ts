// Where fsdp-lens runs besides the editor, run as documented: the pre-commit hook (.pre-commit-hooks.yaml's entry
// and args with the file names appended) and the CI recipes of docs/ci.md (each marked block's commands, in a
// shell), with dist/cli.js standing in for the installed `fsdp-lens`.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parse } from 'yaml';
import { FIXTURES, ROOT, tempDir } from './helpers';

const CLI = path.join(ROOT, 'dist', 'cli.js');
const SKIP = fs.existsSync(CLI) ? false : 'dist/cli.js is not built: run "npm run build" first';
const PKG = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  bin: Record<string, string>;
  repository: { url: string };
};
const BIN = Object.keys(PKG.bin)[0]!;

interface Run {
  code: number | null;
  out: string;
  err: string;
}

function run(cmd: string, argv: string[], cwd: string): Run {
  const r = spawnSync(cmd, argv, { cwd, encoding: 'utf8', timeout: 60_000 });
  if (r.error) throw r.error;
  return { code: r.status, out: r.stdout, err: r.stderr };
}

/** A command line of the docs with the published tool (`npx --yes fsdp-lens@0.1`, `fsdp-lens`) made dist/cli.js. */
function local(command: string): string {
  return command.replace(/\bnpx --yes fsdp-lens@[\w.^~-]+|\bfsdp-lens(?= )/g, `node '${CLI}'`);
}

/** A shell line as the CI runner runs it: bash, stopping at the first failing command. */
function shell(line: string, cwd: string): Run {
  return run('bash', ['-e', '-c', local(line)], cwd);
}

/** The fenced blocks of docs/ci.md marked `<!-- tested: NAME -->`, by name. */
function recipes(): Map<string, { lang: string; text: string }> {
  const doc = fs.readFileSync(path.join(ROOT, 'docs', 'ci.md'), 'utf8');
  const blocks = new Map<string, { lang: string; text: string }>();
  for (const m of doc.matchAll(/<!-- tested: ([\w-]+) -->\n\n```(\w+)\n([\s\S]*?)\n```/g))
    blocks.set(m[1]!, { lang: m[2]!, text: m[3]! });
  return blocks;
}

function recipe(name: string): string {
  const b = recipes().get(name);
  assert.ok(b, `docs/ci.md has a block marked <!-- tested: ${name} -->`);
  return b.text;
}

interface Hook {
  id: string;
  entry: string;
  language: string;
  args?: string[];
  types?: string[];
  files?: string;
  pass_filenames?: boolean;
  [key: string]: unknown;
}

function hooks(): Hook[] {
  return parse(fs.readFileSync(path.join(ROOT, '.pre-commit-hooks.yaml'), 'utf8')) as Hook[];
}

/** The hook run as pre-commit runs it: entry, then args, then the file names (relative to the repository). */
function runHook(hook: Hook, files: string[], cwd: string): Run {
  const [bin, ...rest] = hook.entry.split(/\s+/);
  assert.equal(bin, BIN, `the entry runs the package's bin "${BIN}"`);
  return run(process.execPath, [CLI, ...rest, ...(hook.args ?? []), ...files], cwd);
}

/** A folder standing for a user's repository, with these files copied in (name → fixture or text). */
function repo(files: Record<string, { fixture: string } | { text: string }>): string {
  const dir = tempDir('fsdp-lens-hook-');
  for (const [name, src] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    const text = 'fixture' in src ? fs.readFileSync(path.join(FIXTURES, src.fixture), 'utf8') : src.text;
    fs.writeFileSync(path.join(dir, name), text);
  }
  return dir;
}

const dirs: string[] = [];
after(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

describe('the pre-commit hook', { skip: SKIP }, () => {
  let dir = '';
  before(() => {
    dir = repo({
      'clean.py': { fixture: 'lint/fsdp001_good.py' },
      'plain.py': { text: 'import os\n\nprint(os.getcwd())\n' },
      'src/missing_root.py': { fixture: 'lint/fsdp001_bad.py' },
      'configs/fsdp/accelerate.yaml': { fixture: 'frameworks/accelerate/fsdp1_trap.yaml' },
      'configs/fsdp/zero3.json': { fixture: 'frameworks/deepspeed/ds_zero3.json' },
      '.github/workflows/ci.yaml': { text: 'on: push\njobs: {}\n' },
    });
    dirs.push(dir);
  });

  it('.pre-commit-hooks.yaml declares fsdp-lens: node, the package bin, Python files, names passed', () => {
    const all = hooks();
    assert.ok(Array.isArray(all));
    const hook = all.find((h) => h.id === 'fsdp-lens');
    assert.ok(hook, 'a hook with id fsdp-lens');
    assert.equal(hook.language, 'node');
    assert.equal(hook.entry, `${BIN} lint`);
    assert.deepEqual(hook.types, ['python']);
    assert.notEqual(hook.pass_filenames, false);
    const known = new Set([
      ...['id', 'name', 'entry', 'language', 'description', 'args', 'files', 'exclude', 'types', 'types_or'],
      ...[
        'exclude_types',
        'pass_filenames',
        'require_serial',
        'always_run',
        'fail_fast',
        'verbose',
        'stages',
      ],
      ...['language_version', 'minimum_pre_commit_version', 'additional_dependencies', 'log_file'],
    ]);
    for (const h of all) for (const k of Object.keys(h)) assert.ok(known.has(k), `${h.id}: unknown key ${k}`);
  });

  it('exits 0 on clean files and 1 on a file with a finding', () => {
    const hook = hooks().find((h) => h.id === 'fsdp-lens')!;
    const clean = runHook(hook, ['clean.py', 'plain.py'], dir);
    assert.equal(clean.code, 0, clean.err);
    assert.equal(clean.out, '');
    const bad = runHook(hook, ['src/missing_root.py'], dir);
    assert.equal(bad.code, 1, bad.err);
    assert.match(bad.out, /^src\/missing_root\.py:\d+:\d+: FSDP001 /m);
    const both = runHook(hook, ['clean.py', 'src/missing_root.py', 'plain.py'], dir);
    assert.equal(both.code, 1);
    assert.equal(both.out, bad.out);
  });

  it('takes framework configurations by name, as docs/ci.md adds them; other YAML would exit 2', () => {
    const base = hooks().find((h) => h.id === 'fsdp-lens')!;
    const overrides = (parse(recipe('pre-commit-configs')) as Hook[])[0]!;
    assert.equal(overrides.id, base.id);
    const hook = { ...base, ...overrides };
    const files = new RegExp(hook.files!);
    const staged = [
      'clean.py',
      'configs/fsdp/accelerate.yaml',
      'configs/fsdp/zero3.json',
      '.github/workflows/ci.yaml',
    ];
    const chosen = staged.filter((f) => files.test(f));
    assert.deepEqual(chosen, ['configs/fsdp/accelerate.yaml', 'configs/fsdp/zero3.json']);
    const r = runHook(hook, chosen, dir);
    assert.equal(r.code, 1, r.err);
    assert.match(r.out, /^configs\/fsdp\/accelerate\.yaml:\d+:\d+: FSDP016 /m);
    assert.doesNotMatch(r.out, /zero3/);
    // Why the hook's own filter is Python only: a YAML file that is no FSDP configuration is bad input.
    assert.equal(runHook(base, ['.github/workflows/ci.yaml'], dir).code, 2);
  });

  it("docs/ci.md's hook from npm is the same hook, on the published package", () => {
    const config = parse(recipe('pre-commit-npm')) as { repos: { repo: string; hooks: Hook[] }[] };
    const [entry] = config.repos;
    assert.equal(entry!.repo, 'local');
    const local = entry!.hooks[0]!;
    const base = hooks().find((h) => h.id === 'fsdp-lens')!;
    for (const k of ['id', 'entry', 'language', 'types'] as const) assert.deepEqual(local[k], base[k], k);
    assert.match(String(local.additional_dependencies), /^fsdp-lens@\d+\.\d+\.\d+$/);
    const r = runHook(local, ['clean.py', 'src/missing_root.py'], dir);
    assert.equal(r.code, 1, r.err);
  });

  it("docs/ci.md's configuration names this repository and its hook", () => {
    const config = parse(recipe('pre-commit')) as {
      repos: { repo: string; rev: string; hooks: { id: string }[] }[];
    };
    const [entry] = config.repos;
    assert.equal(entry!.repo, PKG.repository.url.replace(/\.git$/, ''));
    assert.match(entry!.rev, /^v\d+\.\d+\.\d+$/);
    const ids = new Set(hooks().map((h) => h.id));
    for (const h of entry!.hooks) assert.ok(ids.has(h.id), h.id);
  });
});

describe("docs/ci.md's CI recipes", { skip: SKIP }, () => {
  let dir = '';
  /** The documented pyproject.toml with another world size: the change that makes the plan stop fitting. */
  const worldSize = (n: number) => recipe('pyproject').replace(/^world_size = \d+$/m, `world_size = ${n}`);
  before(() => {
    // A fine-tuning script of Llama 3.1 70B whose inputs come from pyproject.toml alone.
    const script = fs
      .readFileSync(path.join(FIXTURES, 'lint/fsdp015_good.py'), 'utf8')
      .replace(/^# fsdp:.*\n/, '');
    dir = repo({ 'train.py': { text: script }, 'pyproject.toml': { text: recipe('pyproject') } });
    dirs.push(dir);
  });

  it('GitHub Actions: SARIF for code scanning, uploaded always, and a job that fails when the plan stops fitting', () => {
    const wf = parse(recipe('github-actions')) as {
      permissions: Record<string, string>;
      jobs: Record<
        string,
        { steps: { run?: string; uses?: string; if?: string; with?: Record<string, string> }[] }
      >;
    };
    assert.equal(wf.permissions['security-events'], 'write');
    const steps = Object.values(wf.jobs)[0]!.steps;
    const lint = steps.find((s) => s.run?.includes('fsdp-lens'));
    const upload = steps.find((s) => s.uses?.startsWith('github/codeql-action/upload-sarif@'));
    assert.ok(lint?.run && upload, 'a lint step and an upload step');
    assert.equal(upload.if, 'always()');
    const sarifFile = /> (\S+)$/.exec(lint.run)?.[1];
    assert.equal(upload.with?.sarif_file, sarifFile);
    assert.ok(steps.indexOf(upload) > steps.indexOf(lint));

    const sarif = () =>
      JSON.parse(fs.readFileSync(path.join(dir, sarifFile!), 'utf8')) as {
        version: string;
        runs: { results: { ruleId: string; level: string }[] }[];
      };
    const fits = shell(lint.run, dir);
    assert.equal(fits.code, 0, fits.err);
    assert.equal(sarif().version, '2.1.0');
    assert.deepEqual(sarif().runs[0]!.results, []);

    fs.writeFileSync(path.join(dir, 'pyproject.toml'), worldSize(8));
    try {
      const short = shell(lint.run, dir);
      assert.equal(short.code, 1, 'the lint step fails the job');
      const results = sarif().runs[0]!.results.map((r) => `${r.ruleId} ${r.level}`);
      assert.deepEqual(results, ['FSDP015 error']);
    } finally {
      fs.writeFileSync(path.join(dir, 'pyproject.toml'), recipe('pyproject'));
    }
  });

  it('GitHub Actions: the estimate gate passes a plan that fits and fails one that does not', (t) => {
    if (spawnSync('jq', ['--version']).status !== 0) return t.skip('jq is not installed');
    const run = (parse(recipe('github-actions-estimate')) as { run: string }[])[0]?.run ?? '';
    assert.match(run, /fsdp-lens@\S+ estimate /);
    assert.equal(shell(run, dir).code, 0);
    fs.writeFileSync(path.join(dir, 'pyproject.toml'), worldSize(8));
    try {
      assert.equal(shell(run, dir).code, 1);
    } finally {
      fs.writeFileSync(path.join(dir, 'pyproject.toml'), recipe('pyproject'));
    }
  });

  it('GitLab CI: the script passes a plan that fits, keeps its estimate, and fails one that does not', () => {
    const job = Object.values(parse(recipe('gitlab')) as Record<string, { script: string[] }>)[0]!;
    const runAll = () => {
      for (const line of job.script) {
        const r = shell(line, dir);
        if (r.code !== 0) return r.code;
      }
      return 0;
    };
    assert.equal(runAll(), 0);
    const estimate = JSON.parse(fs.readFileSync(path.join(dir, 'fsdp-estimate.json'), 'utf8')) as {
      targetFit: { verdict: string };
      mesh: { worldSize: number };
    };
    assert.equal(estimate.targetFit.verdict, 'fits');
    assert.equal(estimate.mesh.worldSize, 32);
    fs.writeFileSync(path.join(dir, 'pyproject.toml'), worldSize(8));
    try {
      assert.equal(runAll(), 1);
    } finally {
      fs.writeFileSync(path.join(dir, 'pyproject.toml'), recipe('pyproject'));
    }
  });
});
