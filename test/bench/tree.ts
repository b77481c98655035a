// A seeded, deterministic Python repository of a training project, for the whole-tree benchmark and for tests.
// Packages of data loading, utilities and nn.Module models, their tests, and a few scripts that wrap with FSDP.
import * as fs from 'node:fs';
import * as path from 'node:path';

export interface RepositoryOptions {
  /** Python files in all (default 500). */
  files?: number;
  /** Lines in all, roughly (default 150,000). */
  lines?: number;
  /** The seed of the generator: the same seed gives the same repository (default 1). */
  seed?: number;
  /** Training scripts among the files, each wrapping a model with fully_shard or FullyShardedDataParallel (default 8). */
  scripts?: number;
}

/** A repository as relative paths (POSIX separators) and file texts. */
export interface Repository {
  files: { path: string; text: string }[];
  lines: number;
  /** The training scripts: the files that call fully_shard or FullyShardedDataParallel. */
  scripts: string[];
}

/** mulberry32: a small seeded generator of floats in [0, 1). */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = [
  ...'token patch frame audio image caption shard sample batch prompt label mask'.split(' '),
  ...'feature latent query chunk segment window record corpus vocab span pixel clip'.split(' '),
];
const PARTS = [
  ...'attention mlp norm embedding rotary router expert decoder'.split(' '),
  ...'encoder adapter head projector conv pooler gate mixer'.split(' '),
];
const DATA = 'dataset loader transforms tokenize collate sampler augment streaming cache'.split(' ');
const UTILS = 'logging config metrics checkpoint distributed timer io seed registry env'.split(' ');

class Writer {
  readonly out: string[] = [];
  constructor(readonly r: () => number) {}
  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.r() * xs.length)]!;
  }
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.r() * (hi - lo + 1));
  }
  push(...lines: string[]): void {
    this.out.push(...lines);
  }
}

/** English plurals of the words above: patches, corpora, samples. */
const plural = (s: string) => (s === 'corpus' ? 'corpora' : /(ch|sh|s|x)$/.test(s) ? `${s}es` : `${s}s`);

const camel = (s: string) => s.replace(/(^|_)(\w)/g, (_, __, c: string) => c.toUpperCase());

/** An nn.Module: layers built in __init__ from a config-like signature, and a forward that uses them. */
function moduleClass(w: Writer, name: string): void {
  const dim = w.pick([256, 512, 768, 1024, 2048, 4096]);
  const hidden = dim * w.pick([2, 4, 8 / 3]);
  const kind = w.int(0, 3);
  w.push(
    `class ${name}(nn.Module):`,
    `    """${camel(w.pick(PARTS))} block of the ${w.pick(WORDS)} model."""`,
    '',
    `    def __init__(self, dim: int = ${dim}, hidden: int = ${Math.round(hidden)}, dropout: float = ${w.pick(['0.0', '0.1', '0.05'])}):`,
    '        super().__init__()',
  );
  if (kind === 0)
    w.push(
      '        self.norm = nn.LayerNorm(dim)',
      '        self.qkv = nn.Linear(dim, 3 * dim, bias=False)',
      '        self.proj = nn.Linear(dim, dim, bias=False)',
      `        self.heads = ${w.pick([8, 16, 32])}`,
      '        self.dropout = nn.Dropout(dropout)',
      '',
      '    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:',
      '        b, t, c = x.shape',
      '        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)',
      '        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)',
      '        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)',
      '        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)',
      '        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.dropout.p if self.training else 0.0)',
      '        y = y.transpose(1, 2).contiguous().view(b, t, c)',
      '        return x + self.dropout(self.proj(y))',
    );
  else if (kind === 1)
    w.push(
      '        self.norm = nn.LayerNorm(dim)',
      '        self.up = nn.Linear(dim, hidden)',
      '        self.gate = nn.Linear(dim, hidden)',
      '        self.down = nn.Linear(hidden, dim)',
      '        self.dropout = nn.Dropout(dropout)',
      '',
      '    def forward(self, x: torch.Tensor) -> torch.Tensor:',
      '        h = self.norm(x)',
      '        h = F.silu(self.gate(h)) * self.up(h)',
      '        return x + self.dropout(self.down(h))',
    );
  else if (kind === 2)
    w.push(
      `        self.conv = nn.Conv2d(${w.pick([3, 64, 128])}, dim, kernel_size=${w.pick([3, 7, 16])}, stride=${w.pick([1, 2, 16])})`,
      '        self.bn = nn.BatchNorm2d(dim)',
      '        self.act = nn.GELU()',
      '        self.pool = nn.AdaptiveAvgPool2d(1)',
      '        self.fc = nn.Linear(dim, hidden)',
      '',
      '    def forward(self, x: torch.Tensor) -> torch.Tensor:',
      '        x = self.act(self.bn(self.conv(x)))',
      '        x = self.pool(x).flatten(1)',
      '        return self.fc(x)',
    );
  else
    w.push(
      `        self.embed = nn.Embedding(${w.pick([32000, 50304, 128256])}, dim)`,
      `        self.layers = nn.ModuleList([nn.TransformerEncoderLayer(dim, ${w.pick([8, 16])}, hidden, dropout, batch_first=True) for _ in range(${w.int(2, 12)})])`,
      '        self.norm = nn.LayerNorm(dim)',
      '',
      '    def forward(self, ids: torch.Tensor) -> torch.Tensor:',
      '        x = self.embed(ids)',
      '        for layer in self.layers:',
      '            x = layer(x)',
      '        return self.norm(x)',
    );
  w.push('', '');
}

/** An ordinary function: loops, conditions, comprehensions, dictionaries, string formatting. */
function helper(w: Writer, name: string): void {
  const a = w.pick(WORDS);
  const b = w.pick(WORDS);
  const body = w.int(0, 4);
  const many = plural(a);
  w.push(`def ${name}(${many}, ${b}_size: int = ${w.int(1, 512)}, strict: bool = False):`);
  w.push(`    """Group ${many} into ${plural(b)} of at most ${b}_size items."""`);
  if (body === 0)
    w.push(
      '    out = []',
      `    current = []`,
      `    for i, item in enumerate(${many}):`,
      '        if item is None:',
      '            if strict:',
      `                raise ValueError(f"${a} {i} is missing")`,
      '            continue',
      '        current.append(item)',
      `        if len(current) >= ${b}_size:`,
      '            out.append(current)',
      '            current = []',
      '    if current:',
      '        out.append(current)',
      '    return out',
    );
  else if (body === 1)
    w.push(
      `    counts = {}`,
      `    for item in ${many}:`,
      `        key = str(item)[:${w.int(2, 16)}]`,
      '        counts[key] = counts.get(key, 0) + 1',
      `    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))`,
      `    return [k for k, n in ranked[:${b}_size] if n > ${w.int(0, 3)} or not strict]`,
    );
  else if (body === 2)
    w.push(
      '    total = 0.0',
      '    seen = 0',
      `    for value in ${many}:`,
      '        try:',
      '            total += float(value)',
      '            seen += 1',
      '        except (TypeError, ValueError):',
      '            if strict:',
      '                raise',
      `    mean = total / max(seen, 1)`,
      `    return {"mean": mean, "count": seen, "${b}_size": ${b}_size}`,
    );
  else if (body === 3)
    w.push(
      `    path = os.path.join(os.environ.get("DATA_DIR", "/data"), "${many}-{:05d}.jsonl".format(${b}_size))`,
      '    if not os.path.exists(path):',
      `        logger.warning("no ${a} file at %s", path)`,
      '        return []',
      '    with open(path, encoding="utf-8") as f:',
      '        rows = [json.loads(line) for line in f if line.strip()]',
      `    return [r for r in rows if strict is False or r.get("${b}") is not None]`,
    );
  else
    w.push(
      `    n = len(${many})`,
      `    steps = math.ceil(n / ${b}_size)`,
      `    schedule = [min(1.0, (s + 1) / max(steps, 1)) ** ${w.pick(['0.5', '2', '1.5'])} for s in range(steps)]`,
      '    if strict and any(x <= 0 for x in schedule):',
      '        raise RuntimeError("empty schedule")',
      '    return schedule',
    );
  w.push('', '');
}

function dataset(w: Writer, name: string): void {
  const unit = w.pick(WORDS);
  w.push(
    `class ${name}(Dataset):`,
    `    """${camel(plural(unit))} read from JSON lines, tokenized on access."""`,
    '',
    `    def __init__(self, root: str, split: str = "train", max_len: int = ${w.pick([512, 1024, 2048, 4096])}):`,
    '        self.root = root',
    '        self.split = split',
    '        self.max_len = max_len',
    `        self.files = sorted(glob.glob(os.path.join(root, split, "*.jsonl")))`,
    '        self.index = []',
    '        for fi, path in enumerate(self.files):',
    '            with open(path, encoding="utf-8") as f:',
    '                for li, _ in enumerate(f):',
    '                    self.index.append((fi, li))',
    '',
    '    def __len__(self) -> int:',
    '        return len(self.index)',
    '',
    '    def __getitem__(self, i: int) -> Dict[str, torch.Tensor]:',
    '        fi, li = self.index[i]',
    '        with open(self.files[fi], encoding="utf-8") as f:',
    '            for n, line in enumerate(f):',
    '                if n == li:',
    '                    row = json.loads(line)',
    '                    break',
    `        ids = torch.tensor(row["${unit}_ids"][: self.max_len], dtype=torch.long)`,
    '        return {"input_ids": ids, "labels": ids.clone()}',
    '',
    '',
  );
}

function header(w: Writer, kind: 'model' | 'data' | 'util' | 'test'): void {
  w.push(`"""${camel(kind)} code of the ${w.pick(WORDS)} pipeline."""`);
  const common = [
    'import json',
    'import logging',
    'import math',
    'import os',
    'from typing import Dict, List, Optional',
  ];
  if (kind === 'model')
    w.push(...common, 'import torch', 'import torch.nn as nn', 'import torch.nn.functional as F');
  else if (kind === 'data')
    w.push(...common, 'import glob', 'import torch', 'from torch.utils.data import DataLoader, Dataset');
  else if (kind === 'test') w.push(...common, 'import pytest', 'import torch');
  else w.push(...common, 'import time', 'from dataclasses import dataclass, field', 'import torch');
  w.push('', 'logger = logging.getLogger(__name__)', '', '');
}

function configClass(w: Writer, name: string): void {
  w.push('@dataclass', `class ${name}:`);
  for (let i = 0, n = w.int(4, 10); i < n; i++) {
    const word = w.pick(WORDS);
    w.push(
      w.pick([
        `    ${word}_size: int = ${w.int(1, 8192)}`,
        `    ${word}_dropout: float = ${w.pick(['0.0', '0.1', '0.2'])}`,
        `    ${word}_name: str = "${word}-${w.int(1, 99)}"`,
        `    use_${word}: bool = ${w.pick(['True', 'False'])}`,
        `    ${word}_dims: List[int] = field(default_factory=lambda: [${w.int(1, 64)}, ${w.int(64, 512)}])`,
      ]),
    );
  }
  w.push('', '');
}

/** A checkpoint helper that saves an FSDP model's sharded state dict: utilities that name FSDP without wrapping. */
function shardedCheckpoint(w: Writer, name: string): void {
  w.push(
    `def ${name}(model, path: str, step: int = ${w.int(0, 1000)}):`,
    '    """Save the sharded state dict of an FSDP model, one file per rank."""',
    '    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, StateDictType',
    '',
    '    with FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT):',
    '        state = model.state_dict()',
    '    os.makedirs(path, exist_ok=True)',
    '    torch.save(state, os.path.join(path, f"step{step}-rank{torch.distributed.get_rank()}.pt"))',
    '',
    '',
  );
}

function testFunction(w: Writer, name: string, target: string): void {
  w.push(
    `def test_${name}():`,
    `    x = torch.randn(${w.int(1, 8)}, ${w.int(4, 64)})`,
    `    out = ${target}([x.tolist()], ${w.int(1, 16)})`,
    '    assert out is not None',
    `    assert len(out) >= 0`,
    '',
    '',
  );
}

/** A module of the repository: its kind decides what it holds, `budget` about how many lines. */
function pythonModule(
  w: Writer,
  kind: 'model' | 'data' | 'util' | 'test',
  budget: number,
  tag: number,
): string[] {
  header(w, kind);
  let n = 0;
  const classes: string[] = [];
  while (w.out.length < budget) {
    const id = `${tag}_${n++}`;
    if (kind === 'model') {
      if (w.r() < 0.55) {
        const name = `${camel(w.pick(PARTS))}${id.replace('_', 'x')}`;
        moduleClass(w, name);
        classes.push(name);
      } else helper(w, `init_${w.pick(PARTS)}_${id}`);
    } else if (kind === 'data') {
      if (w.r() < 0.3) dataset(w, `${camel(w.pick(WORDS))}Dataset${id.replace('_', 'x')}`);
      else helper(w, `${w.pick(DATA)}_${w.pick(WORDS)}_${id}`);
    } else if (kind === 'util') {
      const x = w.r();
      if (x < 0.15) configClass(w, `${camel(w.pick(UTILS))}Config${id.replace('_', 'x')}`);
      else if (x < 0.16) shardedCheckpoint(w, `save_sharded_${id}`);
      else helper(w, `${w.pick(UTILS)}_${w.pick(WORDS)}_${id}`);
    } else {
      const made = `_make_${w.pick(WORDS)}_${id}`;
      helper(w, made);
      testFunction(w, `${w.pick(WORDS)}_${id}`, made);
    }
  }
  return classes;
}

/** A training script: imports a model of the repository, wraps it with FSDP2 or FSDP1, and trains. */
function trainingScript(w: Writer, i: number, model: { module: string; cls: string }): void {
  const fsdp2 = i % 2 === 0;
  w.push(
    `"""Train ${model.cls} with ${fsdp2 ? 'FSDP2 (fully_shard)' : 'FSDP (FullyShardedDataParallel)'}."""`,
    'import argparse',
    'import os',
    'import torch',
    'import torch.distributed as dist',
    'import torch.nn as nn',
    fsdp2
      ? 'from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard'
      : 'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision, ShardingStrategy',
    ...(fsdp2
      ? []
      : ['from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy', 'import functools']),
    `from ${model.module} import ${model.cls}`,
    '',
    '',
    'class Stack(nn.Module):',
    `    def __init__(self, n_layers: int = ${w.pick([12, 24, 32, 48])}, dim: int = ${w.pick([1024, 2048, 4096])}):`,
    '        super().__init__()',
    `        self.blocks = nn.ModuleList([${model.cls}(dim) for _ in range(n_layers)])`,
    `        self.head = nn.Linear(dim, ${w.pick([32000, 50304, 128256])}, bias=False)`,
    '',
    '    def forward(self, x):',
    '        for block in self.blocks:',
    '            x = block(x)',
    '        return self.head(x)',
    '',
    '',
    'def main():',
    '    parser = argparse.ArgumentParser()',
    `    parser.add_argument("--lr", type=float, default=${w.pick(['3e-4', '1e-4', '6e-4'])})`,
    `    parser.add_argument("--steps", type=int, default=${w.pick([1000, 5000, 20000])})`,
    '    args = parser.parse_args()',
    '    dist.init_process_group("nccl")',
    '    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))',
    '    model = Stack()',
  );
  if (fsdp2)
    w.push(
      '    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)',
      '    for block in model.blocks:',
      '        fully_shard(block, mp_policy=mp)',
      '    fully_shard(model, mp_policy=mp)',
    );
  else
    w.push(
      `    policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={${model.cls}})`,
      '    model = FSDP(',
      '        model,',
      '        auto_wrap_policy=policy,',
      '        sharding_strategy=ShardingStrategy.FULL_SHARD,',
      '        mixed_precision=MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32),',
      '        device_id=torch.cuda.current_device(),',
      '    )',
    );
  w.push(
    '    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)',
    '    for step in range(args.steps):',
    '        x = torch.randn(8, 1024, device="cuda")',
    '        loss = model(x).float().pow(2).mean()',
    '        loss.backward()',
    '        optimizer.step()',
    '        optimizer.zero_grad(set_to_none=True)',
    '        if step % 100 == 0 and dist.get_rank() == 0:',
    '            print(f"step {step} loss {loss.item():.4f}")',
    '',
    '',
    'if __name__ == "__main__":',
    '    main()',
    '',
  );
}

/** The repository: `files` Python files of about `lines` lines in all, the same for the same options. */
export function pythonRepository(opts: RepositoryOptions = {}): Repository {
  const total = opts.files ?? 500;
  const lines = opts.lines ?? 150_000;
  const nScripts = Math.min(opts.scripts ?? 8, total);
  const r = random(opts.seed ?? 1);
  const packages = ['models', 'data', 'utils', 'tests'] as const;
  const kinds = { models: 'model', data: 'data', utils: 'util', tests: 'test' } as const;
  const share = { models: 0.3, data: 0.2, utils: 0.3, tests: 0.2 };
  const files: { path: string; text: string }[] = [];
  // One __init__.py per package folder; the rest are modules of sizes that vary as real ones do.
  const subs = Math.max(1, Math.round((total - nScripts) / 60));
  const inits = packages.length * (subs + 1);
  const modules = Math.max(0, total - nScripts - inits);
  const weights = Array.from({ length: modules }, () => 0.2 + r() * r() * 3);
  const per = (lines - nScripts * 60) / weights.reduce((s, x) => s + x, 0);
  const models: { module: string; cls: string }[] = [];
  for (const pkg of packages) {
    files.push({ path: `${pkg}/__init__.py`, text: '' });
    for (let s = 0; s < subs; s++) files.push({ path: `${pkg}/part${s}/__init__.py`, text: '' });
  }
  let m = 0;
  for (const pkg of packages) {
    const count = pkg === 'tests' ? modules - m : Math.round(modules * share[pkg]);
    for (let i = 0; i < count && m < modules; i++, m++) {
      const w = new Writer(r);
      const sub = i % subs;
      const base = `${pkg === 'tests' ? 'test_' : ''}${pkg === 'models' ? w.pick(PARTS) : pkg === 'data' ? w.pick(DATA) : w.pick(UTILS)}_${i}`;
      const classes = pythonModule(w, kinds[pkg], Math.max(12, Math.round(weights[m]! * per)), m);
      const rel = `${pkg}/part${sub}/${base}.py`;
      files.push({ path: rel, text: w.out.join('\n') + '\n' });
      for (const cls of classes) models.push({ module: rel.replace(/\.py$/, '').split('/').join('.'), cls });
    }
  }
  const scripts: string[] = [];
  for (let i = 0; i < nScripts; i++) {
    const w = new Writer(r);
    const model = models.length
      ? models[Math.floor(r() * models.length)]!
      : { module: 'torch.nn', cls: 'Linear' };
    trainingScript(w, i, model);
    const rel = `train_${i % 2 === 0 ? 'fsdp2' : 'fsdp1'}_${i}.py`;
    files.push({ path: rel, text: w.out.join('\n') });
    scripts.push(rel);
  }
  return { files, lines: files.reduce((s, f) => s + f.text.split('\n').length - 1, 0), scripts };
}

/** Writes a repository under `dir`; returns the absolute paths of its Python files, in repository order. */
export function writeRepository(dir: string, repo: Repository): string[] {
  return repo.files.map((f) => {
    const p = path.join(dir, ...f.path.split('/'));
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.writeFileSync(p, f.text);
    return p;
  });
}
