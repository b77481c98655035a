// The command line helps: per-command help, suggestions for what was mistyped, syntax errors as findings,
// documented exit statuses, text that reads right, whole-tree runs that read each file once, exact mode's PyTorch.
import * as assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { cli, ROOT, tempDir } from './helpers';
import { closest, didYouMean } from '../../src/core/vocabulary/suggest';
import { article, count } from '../../src/core/vocabulary/words';
import { mentionsFsdp } from '../../src/core/analysis/relevance';
import { missing, skipUnless, tools, torchLine } from '../tools';

const CLI = path.join(ROOT, 'dist', 'cli.js');
const built = fs.existsSync(CLI);

function tmpTree(files: Record<string, string>): string {
  const dir = tempDir('fsdp-lens-cli-');
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), text);
  }
  // A project root marker, so that the tree is its own project.
  fs.writeFileSync(path.join(dir, 'pyproject.toml'), '[project]\nname = "t"\n');
  return dir;
}

const WRAPPED = [
  'import torch.nn as nn',
  'from torch.distributed.fsdp import fully_shard',
  '',
  'class Block(nn.Module):',
  '    def __init__(self):',
  '        super().__init__()',
  '        self.fc = nn.Linear(64, 64)',
  '',
  'class Net(nn.Module):',
  '    def __init__(self):',
  '        super().__init__()',
  '        self.layers = nn.ModuleList([Block() for _ in range(2)])',
  '',
  'model = Net()',
  'for layer in model.layers:',
  '    fully_shard(layer)',
  'fully_shard(model)',
  '',
].join('\n');

describe('fsdp-lens help', () => {
  it("COMMAND --help prints that command's usage, flags, examples and exit statuses", async () => {
    for (const command of ['scan', 'lint', 'estimate', 'models', 'gpus', 'rules']) {
      const r = await cli(command, '--help');
      assert.equal(r.code, 0, command);
      assert.match(r.out, new RegExp(`^Usage: fsdp-lens ${command} `), command);
      assert.match(r.out, /^Options:$/m, command);
      assert.match(r.out, /^Examples:$/m, command);
      assert.match(r.out, /^Exit status:$/m, command);
      assert.match(r.out, /^ {2}0 +/m, command);
      // Another command's flags are not listed.
      if (command !== 'estimate') assert.doesNotMatch(r.out, /--world-size/, command);
    }
    const lint = await cli('lint', '--help');
    assert.match(lint.out, /--format F/);
    assert.match(lint.out, /^ {2}1 +a lint finding of severity error or warning/m);
    assert.match(lint.out, /fsdp-lens lint \. --format sarif > fsdp\.sarif/);
    // `fsdp-lens help lint` is the same.
    assert.equal((await cli('help', 'lint')).out, lint.out);
  });

  it("the tool's usage lists every command and the four exit statuses", async () => {
    const r = await cli('--help');
    for (const c of ['scan', 'lint', 'estimate', 'models', 'gpus', 'rules'])
      assert.match(r.out, new RegExp(`^ {2}${c} `, 'm'));
    for (const code of ['0', '1', '2', '70']) assert.match(r.out, new RegExp(`^ {2}${code} +\\S`, 'm'));
    assert.match(r.out, /Run "fsdp-lens <command> --help" for its flags and examples/);
  });
});

describe('did you mean', () => {
  it('suggests the closest names within a few typos, and none for a word far from all', () => {
    assert.deepEqual(closest('lnt', ['scan', 'lint', 'estimate']), ['lint']);
    assert.deepEqual(closest('--formt', ['--format', '--rule', '--min-torch']), ['--format']);
    // A prefix of a longer name counts.
    assert.deepEqual(closest('estim', ['scan', 'lint', 'estimate']), ['estimate']);
    assert.deepEqual(closest('banana', ['scan', 'lint', 'estimate']), []);
    assert.equal(didYouMean('gib', ['GB', 'GiB']), ' (did you mean "GiB" or "GB"?)');
    assert.equal(didYouMean('xyzzy', ['GB', 'GiB']), '');
  });

  it('for commands, flags and values, with exit status 2', async () => {
    const cases: [string[], RegExp][] = [
      [['lnt', 'x.py'], /unknown command "lnt" \(did you mean "lint"\?\)/],
      [['lint', '--formt', 'json', 'x.py'], /lint: unknown flag --formt \(did you mean --format\?\)/],
      [['lint', '--format', 'sarf', 'x.py'], /not "sarf" \(did you mean "sarif"\?\)/],
      [
        ['lint', '--rule', 'FSDP01=error', 'x.py'],
        /unknown rule "FSDP01" \(did you mean "FSDP001" or "FSDP010"\?\)/,
      ],
      [
        ['lint', '--rule', 'FSDP001=eror', 'x.py'],
        /takes error, warning, info, hint, off \(did you mean "error"\?\)/,
      ],
      [
        ['estimate', '--model', 'openai-community/gpt2', '--ac', 'ful'],
        /not "ful" \(did you mean "full"\?\)/,
      ],
      [
        ['estimate', '--model', 'openai-community/gpt2', '--gpu', 'h2000'],
        /unknown GPU "h2000" \(did you mean "h200-141gb"|unknown GPU "h2000".*fsdp-lens gpus/,
      ],
      [
        ['estimate', '--model', 'openai-community/gpt2', '--world-sise', '8'],
        /unknown flag --world-size|did you mean --world-size\?/,
      ],
      [
        ['estimate', '--model', 'openai-community/gpt2', '--optimizer', 'adamw8'],
        /did you mean "adamw" or "adamw8bit"\?/,
      ],
      [['lint', '--format'], /lint: --format needs a value/],
    ];
    for (const [args, expected] of cases) {
      const r = await cli(...args);
      assert.equal(r.code, 2, args.join(' '));
      assert.match(r.err, expected, args.join(' '));
      assert.match(r.err, /Run "fsdp-lens (\w+ )?--help" for usage/, args.join(' '));
    }
  });
});

describe('fsdp-lens lint and syntax errors', () => {
  it('reports a syntax error in a file with FSDP code as FSDP000 at its position, exit 1', async () => {
    const dir = tmpTree({
      'train.py': WRAPPED.replace('for layer in model.layers:', 'for layer in model.layers'),
    });
    const r = await cli('lint', path.join(dir, 'train.py'));
    assert.equal(r.code, 1, r.err);
    // tree-sitter reports the missing ":" where the `for` header ends: line 15.
    assert.match(
      r.out,
      /train\.py:15:\d+: FSDP000 Syntax error \(.+\): the analysis reads only the parts that parse/,
    );
    const j = JSON.parse((await cli('lint', path.join(dir, 'train.py'), '--format', 'json')).out) as {
      code: string;
      line: number;
    }[];
    assert.deepEqual(
      j.filter((f) => f.code === 'FSDP000').map((f) => f.line),
      [15],
    );
    // It can be turned off like any rule.
    assert.doesNotMatch(
      (await cli('lint', path.join(dir, 'train.py'), '--rule', 'FSDP000=off')).out,
      /FSDP000/,
    );
  });

  it('reads a file that mentions no FSDP name without parsing it: no finding, even with a syntax error', async () => {
    const dir = tmpTree({ 'util.py': 'def f(:\n  return 1\n', 'train.py': WRAPPED });
    const r = await cli('lint', dir);
    assert.equal(r.code, 0, r.out + r.err);
    assert.equal(r.out, '');
  });

  it('decides relevance by the words every finding starts from', () => {
    assert.equal(mentionsFsdp('from torch.distributed.fsdp import fully_shard'), true);
    assert.equal(mentionsFsdp('model = FSDP(model)'), true);
    assert.equal(mentionsFsdp('from accelerate import Accelerator'), true);
    assert.equal(mentionsFsdp('args = TrainingArguments(output_dir="o")'), true);
    assert.equal(mentionsFsdp('# fsdp: world_size=8'), true);
    assert.equal(mentionsFsdp('import torch\nx = torch.zeros(3)\ndef trainer_step(): pass\n'), false);
  });
});

describe('whole-tree runs', { skip: built ? false : 'dist/cli.js is not built (npm run build)' }, () => {
  // A tree large enough for the command line to use its threads (64 files or more), each file its own case.
  const files: Record<string, string> = {};
  for (let i = 0; i < 80; i++)
    files[`pkg/m${String(i).padStart(2, '0')}.py`] =
      i % 10 === 0 ? WRAPPED : `import torch\n\ndef f${i}(x):\n    return torch.relu(x) * ${i}\n`;
  files['pkg/m05.py'] = WRAPPED.replace('fully_shard(model)\n', '');

  it('scan on threads gives what one thread gives, in the order of the files', async () => {
    const dir = tmpTree(files);
    const list = Object.keys(files)
      .map((f) => path.join(dir, f))
      .sort();
    // The built tool splits 80 files over its threads; in this process (no threads) the same facts.
    const threaded = execFileSync(process.execPath, [CLI, 'scan', '--json', ...list], { encoding: 'utf8' });
    const single = await cli('scan', '--json', ...list);
    assert.equal(single.code, 0, single.err);
    assert.deepEqual(JSON.parse(threaded), JSON.parse(single.out));
    const paths = (JSON.parse(threaded) as { files: { path: string }[] }).files.map((f) => f.path);
    assert.deepEqual(paths, list);
  });

  it('lint over the tree finds what linting each file alone finds', async () => {
    const dir = tmpTree(files);
    const r = spawnSync(process.execPath, [CLI, 'lint', '.'], { encoding: 'utf8', cwd: dir });
    assert.equal(r.status, 1, r.stderr);
    // m05 wraps its blocks but not the model: FSDP001 there, and nowhere else.
    assert.match(r.stdout, /^pkg\/m05\.py:\d+:\d+: FSDP001 /m);
    assert.equal(r.stdout.trim().split('\n').length, 1, r.stdout);
    const alone = spawnSync(process.execPath, [CLI, 'lint', 'pkg/m05.py'], {
      encoding: 'utf8',
      cwd: dir,
    });
    assert.equal(alone.stdout, r.stdout);
  });
});

describe('text output', () => {
  it('says "a" or "an" as the name is said, and counts in singular and plural', () => {
    assert.equal(article('NVIDIA H100 SXM 80GB'), 'an NVIDIA H100 SXM 80GB');
    assert.equal(article('AMD Instinct MI300X'), 'an AMD Instinct MI300X');
    assert.equal(article('H200'), 'an H200');
    assert.equal(article('B200'), 'a B200');
    assert.equal(article('GPU'), 'a GPU');
    assert.equal(count(1, 'GPU'), '1 GPU');
    assert.equal(count(8, 'GPU'), '8 GPUs');
    assert.equal(count(1024, 'collective'), '1,024 collectives');
  });

  it('a one-GPU estimate says 1 GPU, the card with its driver-reported MiB, and aligned columns', async () => {
    const r = await cli('estimate', '--model', 'openai-community/gpt2', '--world-size', '1');
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^Mesh {6}1 GPU, shard group 1 · 1 node of 8/m);
    assert.doesNotMatch(r.out, /\b1 GPUs\b|\b1 ways\b|\ba NVIDIA\b/);
    // H100 SXM 80GB: the driver reports 81,559 MiB = 81,559 x 2^20 B = 85.52 GB.
    assert.match(r.out, /fits NVIDIA H100 SXM 80GB \(81,559 MiB = 85\.5 GB\)/);
    const gib = await cli('estimate', '--model', 'openai-community/gpt2', '--units', 'GiB');
    // 81,559 MiB / 1,024 = 79.65 GiB.
    assert.match(gib.out, /NVIDIA H100 SXM 80GB \(81,559 MiB = 79\.6 GiB\)/);
    // The memory terms share columns: every figure starts at the same column.
    const terms = r.out
      .split('\n')
      .filter((l) => /^ {2}(sharded|optimizer state|saved|gathered|logits)/.test(l));
    const starts = new Set(terms.map((l) => l.search(/\d[\d.,]* (GB|MB|kB|B)\b/)));
    assert.equal(starts.size, 1, terms.join('\n'));
    // ZeRO-3 and DDP are named for what they move.
    assert.match(r.out, /for comparison: ZeRO-3 \(every parameter gathered in forward and in backward/);
  });

  it('a host line for a checkpoint only where the script gathers one', async () => {
    const plain = tmpTree({ 'train.py': WRAPPED });
    const r = await cli('estimate', path.join(plain, 'train.py'));
    assert.equal(r.code, 0, r.err);
    assert.doesNotMatch(r.out, /state dict/);
    const saving = tmpTree({
      'train.py':
        WRAPPED +
        'from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict\n' +
        'sd = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))\n',
    });
    const s = await cli('estimate', path.join(saving, 'train.py'));
    assert.match(s.out, /saving a full state dict on rank 0 .*StateDictOptions at train\.py:19/);
  });
});

describe('exact mode and the PyTorch it finds', { skip: skipUnless('torch') }, () => {
  it('counts a model whose file imports FSDP2 names this PyTorch lacks, and says which were stood in for', async (t) => {
    t.diagnostic(torchLine());
    const dir = tmpTree({ 'train.py': WRAPPED });
    const r = await cli(
      'estimate',
      path.join(dir, 'train.py'),
      '--exact',
      '--python',
      tools().torch.python!,
      '--json',
    );
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as {
      model: { params: number };
      assumptions: { key: string; source: { detail?: string } }[];
    };
    // Two blocks of Linear(64, 64): 2 x (64 x 64 + 64) = 8,320 parameters.
    assert.equal(j.model.params, 8_320);
    const origin = j.assumptions.find((a) => a.key === 'model')!.source.detail!;
    assert.match(origin, /built by PyTorch \d/);
    if (/PyTorch 1\./.test(origin))
      assert.match(origin, /fully_shard not in this PyTorch, given placeholders/);
  });

  it(
    'names the Python it tried and the PyTorch it needs when there is none',
    { skip: missing('python3') ? 'no python3' : false },
    async () => {
      const dir = tmpTree({ 'train.py': WRAPPED });
      // A Python that cannot import torch: an empty PYTHONPATH on an isolated interpreter (-I -S has no site-packages).
      const shim = path.join(dir, 'bare-python');
      fs.writeFileSync(shim, `#!/bin/sh\nexec ${tools().python3.path ?? 'python3'} -I -S "$@"\n`, {
        mode: 0o755,
      });
      const r = await cli('estimate', path.join(dir, 'train.py'), '--exact', '--python', shim);
      assert.equal(r.code, 2);
      assert.match(r.err, /PyTorch is not installed in \S+ \(Python 3\.\d+/);
      assert.match(r.err, /exact mode needs PyTorch 1\.13 or later: choose a Python that has it \(--python/);
    },
  );
});
