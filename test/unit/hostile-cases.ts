// Hostile and pathological workspaces as project trees written at test time: what each reproducer holds, how the
// command-line tool is run on it, and what a correct run says. Shared by the robustness suite and the bench.
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { tempDir } from './helpers';

/** A file's text, a symbolic link to a path, or a FIFO. */
export type Entry = string | { link: string } | { fifo: true };

export interface Reproducer {
  id: string;
  /** The files of the project, by path relative to its root (a pyproject.toml is added when absent). */
  files: () => Record<string, Entry>;
  /** The command line, paths relative to the root. */
  args: string[];
  /** Environment added to the run (a Hugging Face home inside the tree). */
  env?: (root: string) => Record<string, string>;
  /** Exit statuses a correct run may end with (never 70, an internal error). */
  codes: number[];
  /** What the output must say. */
  says?: RegExp;
  /** What the output must never hold (file contents from outside the project). */
  never?: RegExp;
}

const WRAP = 'from torch.distributed.fsdp import fully_shard';
const lines = (n: number, f: (i: number) => string) => Array.from({ length: n }, (_, i) => f(i)).join('\n');

/** A Llama-style config.json with one count replaced. */
function config(field: string, value: number, type = 'llama'): string {
  return JSON.stringify({
    model_type: type,
    hidden_size: 64,
    intermediate_size: 128,
    num_attention_heads: 4,
    num_key_value_heads: 4,
    num_hidden_layers: 2,
    vocab_size: 100,
    ...(type === 'mixtral' ? { num_local_experts: 4, num_experts_per_tok: 2 } : {}),
    [field]: value,
  });
}

const scriptNaming = (config: string) =>
  `${WRAP}\n# fsdp: config=${config}\nfor block in model.model.layers:\n    fully_shard(block)\nfully_shard(model)\n`;

const doublingModule = (init: string, step: string) =>
  [
    'import torch.nn as nn',
    '',
    'class Net(nn.Module):',
    '    def __init__(self):',
    '        super().__init__()',
    `        x = ${init}`,
    lines(40, () => `        ${step}`),
    '        self.fc = nn.Linear(8, 8)',
  ].join('\n');

const trainNet = `${WRAP}\nfrom net import Net\n\nmodel = Net()\nfully_shard(model)\n`;

export const REPRODUCERS: Reproducer[] = [
  // Methods that call one another forever, and a method called on thousands of objects.
  {
    id: 'wrapping methods that call each other in a cycle',
    files: () => ({
      'train.py': [
        'import torch.nn as nn',
        WRAP,
        'class A(nn.Module):',
        '    def shard(self):',
        '        for b in self.parts:',
        '            b.go()',
        '        fully_shard(self)',
        'class B(nn.Module):',
        '    def go(self):',
        '        for a in self.parts:',
        '            a.shard()',
        '        fully_shard(self)',
        lines(2000, (i) => `A().shard()  # ${i}`),
        '',
      ].join('\n'),
    }),
    args: ['scan', 'train.py'],
    codes: [0],
  },
  // A config the script loads that is not data: a YAML bomb of aliases, binary bytes, a path outside the project.
  ...(
    [
      [
        'a YAML of nested aliases',
        'a: &a [x, x, x, x, x, x, x, x, x]\n' +
          Array.from(
            { length: 12 },
            (_, i) =>
              `l${i}: &l${i} [*${i ? `l${i - 1}` : 'a'}, *${i ? `l${i - 1}` : 'a'}, *${i ? `l${i - 1}` : 'a'}]`,
          ).join('\n') +
          '\n',
      ],
      ['binary bytes', '\u0000\u0001\u00ff\u0000not yaml: [\n'],
      ['a deep list', '['.repeat(5000) + ']'.repeat(5000)],
    ] as const
  ).map(([what, text]): Reproducer => ({
    id: `a loaded config that is ${what}`,
    files: () => ({
      'cfg.yaml': text,
      'train.py': [
        'import yaml',
        'from transformers import AutoModelForCausalLM',
        WRAP,
        'cfg = yaml.safe_load(open("cfg.yaml"))',
        'model = AutoModelForCausalLM.from_pretrained(cfg["model"])',
        'fully_shard(model)',
        '',
      ].join('\n'),
    }),
    args: ['estimate', 'train.py'],
    codes: [3],
  })),
  {
    id: 'a launch file passing ten thousand arguments',
    files: () => ({
      'run.sh': `torchrun --nproc_per_node 8 train.py ${lines(10000, (i) => `--x${i} ${i}`).replace(/\n/g, ' ')}\n`,
      'train.py': `import argparse\nimport torch.nn as nn\n${WRAP}\np = argparse.ArgumentParser()\np.add_argument("--dim", type=int, default=8)\nargs = p.parse_args()\nmodel = nn.Linear(args.dim, args.dim)\nfully_shard(model)\n`,
    }),
    args: ['estimate', 'train.py'],
    codes: [0],
    says: /Linear/,
  },
  // 1. Values that double on every line, at module level and in an imported model's constructor.
  {
    id: 'a list doubled 40 times',
    files: () => ({ 'train.py': `${WRAP}\nx = [1]\n${lines(40, () => 'x = x + x')}\nfully_shard(model)\n` }),
    args: ['estimate', 'train.py'],
    codes: [2, 3],
  },
  ...(
    [
      ['a list', '[nn.Linear(2, 2)]', 'x = x + x'],
      ['a tuple', '(1,)', 'x = x + x'],
      ['a string', "'ab'", 'x = x + x'],
      ['a list in a dict', "{'a': [1]}", "x['a'] = x['a'] + x['a']"],
      ['a spread', '[1] * 100000', 'x = [*x, *x, *x, *x]'],
    ] as const
  ).map(([what, init, step]): Reproducer => ({
    id: `${what} doubled in an imported model's constructor`,
    files: () => ({ 'net.py': doublingModule(init, step), 'train.py': trainNet }),
    args: ['estimate', 'train.py'],
    codes: [0],
    says: /Net/,
  })),
  {
    id: 'a comprehension of 10^12 turns in a model',
    files: () => ({
      'net.py': [
        'import torch.nn as nn',
        'class Net(nn.Module):',
        '    def __init__(self):',
        '        super().__init__()',
        '        xs = list(range(10000))',
        '        n = len([a for a in xs for b in xs for c in xs if a < 0])',
        '        self.fc = nn.Linear(8, 8)',
      ].join('\n'),
      'train.py': trainNet,
    }),
    args: ['estimate', 'train.py'],
    codes: [0, 2, 3],
  },
  // 2. Paths a project names outside itself, and files that are not regular.
  ...(
    [
      ['/dev/zero', '/dev/zero'],
      ['/dev/urandom', '/dev/urandom'],
      ['/etc/passwd', '/etc/passwd'],
      ['/proc/self/environ', '/proc/self/environ'],
    ] as const
  ).map(([what, target]): Reproducer => ({
    id: `an annotation naming ${what}`,
    files: () => ({ 'train.py': scriptNaming(target) }),
    args: ['estimate', 'train.py'],
    codes: [2, 3],
    says: /outside the workspace/,
    never: /root:|PATH=|HOME=/,
  })),
  {
    id: 'an annotation naming a FIFO',
    files: () => ({ 'train.py': scriptNaming('pipe.json'), 'pipe.json': { fifo: true } }),
    args: ['estimate', 'train.py'],
    codes: [2, 3],
    says: /not a regular file/,
  },
  {
    id: 'an annotation naming a link to /etc/passwd',
    files: () => ({ 'train.py': scriptNaming('cfg.json'), 'cfg.json': { link: '/etc/passwd' } }),
    args: ['estimate', 'train.py'],
    codes: [2, 3],
    says: /outside the workspace/,
    never: /root:/,
  },
  {
    id: 'pyproject.toml naming /etc/passwd',
    files: () => ({
      'pyproject.toml': '[tool.fsdp-lens]\nconfig = "/etc/passwd"\n',
      'train.py': `${WRAP}\nfully_shard(model)\n`,
    }),
    args: ['estimate', 'train.py'],
    codes: [2, 3],
    says: /outside the workspace/,
    never: /root:/,
  },
  // 3. Symbolic link loops: a folder of 100 links to itself, links to the parent around a helper.
  {
    id: 'a folder of 100 links to itself',
    files: () => ({
      'train.py': `${WRAP}\n# fsdp: model=meta-llama/Llama-3.1-8B\nfully_shard(model)\n`,
      ...Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`loop/l${i}`, { link: '.' }])),
    }),
    args: ['estimate', 'train.py'],
    codes: [0],
    says: /Peak/,
  },
  {
    id: 'four links to the parent around a helper',
    files: () => ({
      'pkg/helper.py': `${WRAP}\ndef shard(model):\n    for b in model.layers:\n        fully_shard(b)\n    fully_shard(model)\n`,
      ...Object.fromEntries(Array.from({ length: 4 }, (_, i) => [`pkg/up${i}`, { link: '..' }])),
    }),
    args: ['lint', 'pkg'],
    codes: [0, 1],
  },
  // 5. Counts past any real model, in a config.json and in the Hugging Face cache.
  ...(
    [
      ['num_hidden_layers', 2 ** 31, 'llama'],
      ['num_hidden_layers', 100_000, 'llama'],
      ['num_hidden_layers', 1_000_000, 'llama'],
      ['num_local_experts', 1_000_000, 'mixtral'],
    ] as const
  ).map(([field, value, type]): Reproducer => ({
    id: `config.json with ${field} = ${value}`,
    files: () => ({ 'config.json': config(field, value, type), 'train.py': scriptNaming('config.json') }),
    args: ['estimate', 'train.py'],
    codes: [2, 3],
    says: new RegExp(field),
  })),
  {
    id: 'a Hugging Face cache entry with 10^6 layers',
    files: () => ({
      'hf/hub/models--evil--big/refs/main': 'abc',
      'hf/hub/models--evil--big/snapshots/abc/config.json': config('num_hidden_layers', 1_000_000),
      'train.py': `${WRAP}\n# fsdp: model=evil/big\nfully_shard(model)\n`,
    }),
    env: (root) => ({ HF_HOME: path.join(root, 'hf') }),
    args: ['estimate', 'train.py'],
    codes: [2, 3],
    says: /num_hidden_layers/,
  },
  // 6. A launch script holding a 500 KB token.
  {
    id: 'a launch script with a 500 KB token',
    files: () => ({
      'train.py': `${WRAP}\n# fsdp: model=meta-llama/Llama-3.1-8B\nfully_shard(model)\n`,
      'run.sh': `torchrun --nproc_per_node=8 ${'a'.repeat(500_000)}\n`,
      'run2.sh': `accelerate launch --fsdp ${'a'.repeat(500_000)}\n`,
    }),
    args: ['estimate', 'train.py'],
    codes: [0],
  },
  // 7. Large files that are valid or half-typed.
  {
    id: '8,000 comment lines',
    files: () => ({
      'train.py': `${WRAP}\nx = 1\n${lines(8000, (i) => `# note ${i}`)}\nfully_shard(model)\n`,
    }),
    args: ['estimate', 'train.py'],
    codes: [2, 3],
  },
  {
    id: 'calls nested 600 deep',
    files: () => ({
      'train.py': `${WRAP}\nx = ${'f('.repeat(600)}1${')'.repeat(600)}\nfully_shard(model)\n`,
    }),
    args: ['estimate', 'train.py'],
    codes: [2, 3],
  },
  {
    id: '1,000 wrap lines',
    files: () => ({
      'train.py': `${WRAP}\n${lines(1000, (i) => `fully_shard(model.layers[${i}])`)}\nfully_shard(model)\n`,
    }),
    args: ['lint', 'train.py'],
    codes: [0, 1],
  },
  {
    id: 'a 130 KB file of unclosed calls',
    files: () => ({ 'train.py': `${WRAP}\n${lines(3000, (i) => `fully_shard(model.layers[${i}], mp=(`)}\n` }),
    args: ['lint', 'train.py'],
    codes: [0, 1],
  },
  {
    id: '10,000 wrapped blocks of a known model',
    files: () => ({
      'train.py': `${WRAP}\n# fsdp: model=meta-llama/Llama-3.1-8B\n${lines(10_000, (i) => `fully_shard(model.model.layers[${i}])`)}\nfully_shard(model)\n`,
    }),
    args: ['estimate', 'train.py'],
    // Blocks 32 to 9,999 are not in Llama 3.1 8B: the code wraps a deeper model than the one named, so no figure.
    codes: [3],
  },
  // 8. launch.json in shapes no launcher writes.
  ...(
    [
      '[null]',
      '5',
      'null',
      '{"configurations": [{"program": "torchrun", "args": "--nproc_per_node 4 train.py"}]}',
      '{"configurations": [null, 3, {"module": "torch.distributed.run", "args": [{}, null, "--nproc_per_node=2", "train.py"]}]}',
    ] as const
  ).map((json, i): Reproducer => ({
    id: `launch.json shape ${i + 1}: ${json.slice(0, 40)}`,
    files: () => ({
      '.vscode/launch.json': json,
      'train.py': `${WRAP}\n# fsdp: model=meta-llama/Llama-3.1-8B\nfully_shard(model)\n`,
    }),
    args: ['estimate', 'train.py'],
    codes: [0],
    says: /Peak/,
  })),
  // 9. Sizes that cannot be: a launch file's world size of 10^12, a model whose parts are unknown.
  {
    id: 'a launch file of 10^12 GPUs',
    files: () => ({
      'train.py': `${WRAP}\n# fsdp: model=meta-llama/Llama-3.1-8B\nfully_shard(model)\n`,
      'run.sh': 'torchrun --nproc_per_node=1000000 --nnodes=1000000 train.py\n',
    }),
    args: ['estimate', 'train.py'],
    codes: [0],
    says: /world size at run\.sh:1 must be a positive whole number.*ignored/,
  },
  {
    id: 'a model whose blocks are not known',
    files: () => ({
      'net.py': [
        'import torch.nn as nn',
        'import timm',
        'class Net(nn.Module):',
        '    def __init__(self, blocks):',
        '        super().__init__()',
        '        self.vision = timm.create_model("vit_large_patch14_224")',
        '        self.head = nn.Linear(1024, 1000)',
      ].join('\n'),
      'train.py': `${WRAP}\nfrom net import Net\n\nmodel = Net(load())\nfully_shard(model)\n`,
    }),
    args: ['estimate', 'train.py'],
    codes: [0],
    says: /Fit {7}undecided/,
  },
  {
    id: 'layers of 10^18 elements',
    files: () => ({
      'net.py': [
        'import torch',
        'import torch.nn as nn',
        'class Net(nn.Module):',
        '    def __init__(self):',
        '        super().__init__()',
        '        self.fc = nn.Linear(10**9, 10**9)',
        '        self.w = nn.Parameter(torch.empty(2**31, 2**31))',
      ].join('\n'),
      'train.py': trainNet,
    }),
    args: ['estimate', 'train.py'],
    codes: [2, 3],
    says: /implausibly large/,
    never: /e\+\d+ ?B|NaN/,
  },
  {
    id: 'attributes of self set from each other',
    files: () => ({
      'train.py': [
        'from transformers import AutoModelForCausalLM',
        WRAP,
        'class T:',
        '    def __init__(self, other):',
        '        self.a = self.b',
        '        self.b = self.a',
        '    def go(self):',
        '        model = AutoModelForCausalLM.from_pretrained(self.a)',
        '        fully_shard(model)',
        'T(T(None)).go()',
      ].join('\n'),
    }),
    args: ['estimate', 'train.py'],
    codes: [3],
    says: /not known statically/,
  },
  {
    id: 'a Hydra defaults list that includes itself',
    files: () => ({
      'conf/train.yaml': 'defaults:\n  - train\n  - model: loop\n  - _self_\nbatch: 2\n',
      'conf/model/loop.yaml': 'defaults:\n  - loop\nname: meta-llama/Llama-3.2-1B\n',
      'train.py': [
        'import hydra',
        'from transformers import AutoModelForCausalLM',
        WRAP,
        '@hydra.main(config_path="conf", config_name="train")',
        'def main(cfg):',
        '    model = AutoModelForCausalLM.from_pretrained(cfg.model.name)',
        '    fully_shard(model)',
      ].join('\n'),
    }),
    args: ['estimate', 'train.py'],
    codes: [0],
    says: /meta-llama\/Llama-3\.2-1B/,
  },
  {
    id: 'a test of each module that calls itself without end',
    files: () => ({
      'train.py': [
        WRAP,
        '# fsdp: model=meta-llama/Llama-3.2-1B',
        'def picked(name):',
        '    return picked(name + ".")',
        'for name, m in model.named_modules():',
        '    if picked(name):',
        '        fully_shard(m)',
        'fully_shard(model)',
      ].join('\n'),
    }),
    args: ['estimate', 'train.py'],
    codes: [0, 3],
    says: /not known statically for (\d+ of \d+|any of the \d+) modules/,
  },
  {
    id: 'a test of each module behind 40 undecided conditions',
    files: () => ({
      'train.py': [
        WRAP,
        'import flags',
        '# fsdp: model=meta-llama/Llama-3.2-1B',
        'def picked(name):',
        lines(
          40,
          (i) => `    if flags.F${i}:
        return name.endswith("${i}")`,
        ),
        '    return False',
        'for name, m in model.named_modules():',
        '    if picked(name):',
        '        fully_shard(m)',
        'fully_shard(model)',
      ].join('\n'),
    }),
    args: ['estimate', 'train.py'],
    codes: [0, 3],
    says: /not known statically for (\d+ of \d+|any of the \d+) modules/,
  },
  {
    id: 'an installed package whose modules import each other in a cycle',
    files: () => ({
      '.venv/pyvenv.cfg': 'version = 3.11\n',
      '.venv/lib/python3.11/site-packages/kit/__init__.py': 'from kit.a import shard\n',
      '.venv/lib/python3.11/site-packages/kit/a.py': 'from kit.b import shard\n',
      '.venv/lib/python3.11/site-packages/kit/b.py': 'from kit.a import shard\n',
      'train.py': `${WRAP}\n# fsdp: model=meta-llama/Llama-3.2-1B\nimport kit\nkit.shard(model)\nfully_shard(model)\n`,
    }),
    args: ['estimate', 'train.py'],
    codes: [0],
    says: /Llama-3\.2-1B/,
  },
  // 10. A timeout past Node's timer limit.
  {
    id: '--exact-timeout of 2,147,484 s',
    files: () => ({ 'train.py': trainNet, 'net.py': doublingModule('1', 'x = x') }),
    args: ['estimate', 'train.py', '--exact', '--exact-timeout', '2147484'],
    codes: [2, 3],
    says: /at most 86400/,
  },
];

/** Writes a reproducer's tree under a new temporary folder; returns the folder. */
export function writeTree(r: Reproducer): string {
  const root = tempDir('fsdp-lens-hostile-');
  const files = r.files();
  if (!('pyproject.toml' in files)) files['pyproject.toml'] = '';
  for (const [rel, entry] of Object.entries(files)) {
    const p = path.join(root, rel);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    if (typeof entry === 'string') fs.writeFileSync(p, entry);
    else if ('link' in entry) fs.symlinkSync(entry.link, p);
    else execFileSync('mkfifo', [p]);
  }
  return root;
}

/** The outcome of one command-line run: exit status, output, wall time and peak memory of the process. */
export interface Run {
  code: number | null;
  out: string;
  ms: number;
  rssMB: number;
}

/** Runs the built CLI on a reproducer's tree in a child process (a V8 fatal error ends only the child). */
export function runCli(cli: string, r: Reproducer, root: string, timeoutMs = 30_000): Run {
  const rss = path.join(root, '.rss');
  const preload = path.join(root, '.preload.js');
  fs.writeFileSync(
    preload,
    `process.on('exit', () => require('fs').writeFileSync(${JSON.stringify(rss)}, String(process.resourceUsage().maxRSS)));`,
  );
  const started = performance.now();
  const p = spawnSync(process.execPath, ['--max-old-space-size=1536', '-r', preload, cli, ...r.args], {
    cwd: root,
    env: { ...process.env, ...(r.env?.(root) ?? {}) },
    timeout: timeoutMs,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  const ms = performance.now() - started;
  const kb = fs.existsSync(rss) ? Number(fs.readFileSync(rss, 'utf8')) : NaN;
  return { code: p.status, out: `${p.stdout ?? ''}${p.stderr ?? ''}`, ms, rssMB: kb / 1024 };
}
