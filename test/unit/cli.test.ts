import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { cli, FIXTURES, ROOT, tempDir } from './helpers';

describe('fsdp-lens scan', () => {
  it('prints the documented JSON shape', async () => {
    const r = await cli('scan', path.join(FIXTURES, 'scan/minimal_gpt_legacy.py'), '--json');
    assert.equal(r.code, 0);
    const json = JSON.parse(r.out) as { files: { path: string; calls: Record<string, unknown>[] }[] };
    const call = json.files[0]!.calls[0]!;
    for (const key of ['api', 'line', 'target', 'loop', 'conditions', 'function', 'importPath', 'options'])
      assert.ok(key in call, `calls[].${key}`);
    assert.equal(call.api, 'fully_shard');
    assert.equal(call.line, 44);
    assert.deepEqual(
      call.loop && {
        target: (call.loop as { target: string }).target,
        iterable: (call.loop as { iterable: string }).iterable,
      },
      {
        target: 'block',
        iterable: 'model.transformer.h',
      },
    );
    const opt = (call.options as Record<string, { text: string; value: unknown }>).reshard_after_forward;
    assert.deepEqual({ text: opt?.text, value: opt?.value }, { text: 'True', value: true });
    for (const key of ['meshes', 'optimizers', 'models', 'checkpointing'])
      assert.ok(key in json.files[0]!, key);
  });

  it('names the auto-wrap policy kind and classes', async () => {
    const r = await cli('scan', path.join(FIXTURES, 'scan/hf_fsdp1.py'), '--json');
    const json = JSON.parse(r.out) as {
      files: { calls: { options: Record<string, { value: unknown }> }[] }[];
    };
    assert.deepEqual(json.files[0]!.calls[0]!.options.auto_wrap_policy!.value, {
      policy: 'transformer',
      classes: ['LlamaDecoderLayer'],
    });
  });

  it('prints text a person reads', async () => {
    const r = await cli('scan', path.join(FIXTURES, 'scan/named_modules.py'));
    assert.equal(r.code, 0);
    assert.match(r.out, /10 {2}fully_shard\(module\)/);
    assert.match(r.out, /FSDP2 unit per TransformerBlock in model · keeps a 1\/2 slice after forward/);
  });

  it('exits 2 with a clear message on missing, binary and non-UTF-8 files', async () => {
    const dir = tempDir('fsdp-lens-cli-');
    const bin = path.join(dir, 'weights.py');
    fs.writeFileSync(bin, Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0, 0, 1, 2]));
    const latin1 = path.join(dir, 'latin1.py');
    fs.writeFileSync(latin1, Buffer.from([0x23, 0x20, 0xe9, 0x0a]));
    for (const [file, message] of [
      [path.join(dir, 'nope.py'), /no such file/],
      [bin, /binary file/],
      [latin1, /not valid UTF-8/],
      [dir, /is a directory/],
    ] as const) {
      const r = await cli('scan', file);
      assert.equal(r.code, 2, file);
      assert.match(r.err, message);
    }
  });

  it('exits 2 on usage errors', async () => {
    assert.equal((await cli('scan')).code, 2);
    assert.equal((await cli('frobnicate')).code, 2);
    assert.equal((await cli('scan', '--bogus', 'x.py')).code, 2);
  });
});

describe('fsdp-lens estimate', () => {
  it('prints the worked example for --model meta-llama/Llama-3.1-8B', async () => {
    const r = await cli('estimate', '--model', 'meta-llama/Llama-3.1-8B');
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /8,030,261,248 parameters/);
    assert.match(r.out, /persistent 16\.1 GB/);
    assert.match(r.out, /Traffic {3}40\.3 GB per GPU per step/);
    assert.match(
      r.out,
      /ZeRO-3 \(every parameter gathered in forward and in backward, every gradient reduce-scattered\) 42\.2 GB/,
    );
    assert.match(r.out, /DDP \(every gradient all-reduced in bfloat16\) 28\.1 GB/);
    assert.match(r.out, /32 x LlamaDecoderLayer \(218M params, 0\.436 GB gathered\)/);
  });

  it('prints JSON with the documented fields and exact bytes', async () => {
    const r = await cli('estimate', '--model', 'meta-llama/Llama-3.1-8B', '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    assert.equal(j.model.params, 8_030_261_248);
    assert.equal(j.model.source, 'built-in catalog');
    assert.equal(j.units[0].name, 'model.layers.0');
    assert.equal(j.units[0].params, 218_112_000);
    assert.equal(j.units[0].gatheredBytes, 436_224_000);
    assert.equal(j.perGpu.modelStateBytes, 16_060_522_496);
    assert.ok(j.perGpu.persistentBytes >= 16_060_522_496);
    assert.equal(
      j.comms.perStep.allGatherBytes + j.comms.perStep.reduceScatterBytes + j.comms.perStep.allReduceBytes,
      40_320_186_368,
    );
    assert.deepEqual(j.comms.perStep.collectives, { allGather: 65, reduceScatter: 33, allReduce: 0 });
    assert.equal(j.comms.zero3ReferenceBytes, 42_158_871_552);
    assert.equal(j.comms.ddpAllReduceBytes, 28_105_914_368);
    assert.ok(
      Array.isArray(j.assumptions) && j.assumptions.every((a: { source: { kind: string } }) => a.source.kind),
    );
  });

  it('applies flags: world size, GPU, HSDP replicas, dtypes and optimizer', async () => {
    const r = await cli(
      'estimate',
      '--model',
      'meta-llama/Llama-3.1-8B',
      '--world-size',
      '16',
      '--replicas',
      '2',
      '--reduce-dtype',
      'fp32',
      '--optimizer',
      'sgd',
      '--gpu',
      'h200',
      '--json',
    );
    const j = JSON.parse(r.out) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    assert.equal(j.mesh.shardGroup, 8);
    assert.equal(j.mesh.replicas, 2);
    assert.equal(j.gpu.id, 'h200-141gb');
    assert.equal(j.comms.reduceDtype, 'float32');
    // SGD: no optimizer state; fp32 params and grads over 8 = 8 bytes per parameter / 8.
    assert.equal(j.perGpu.modelStateBytes, 8_030_261_248);
    const ws = j.assumptions.find((a: { key: string }) => a.key === 'worldSize');
    assert.deepEqual(ws.source, { kind: 'flag' });
  });

  it('finds callers in the working folder when no pyproject.toml, setup.py or .git marks the project', async () => {
    const dir = fs.realpathSync(tempDir('fsdp-lens-cwd-'));
    fs.mkdirSync(path.join(dir, 'sub'));
    fs.writeFileSync(
      path.join(dir, 'train.py'),
      [
        'import torch.nn as nn',
        'from sub.parallel import apply_fsdp',
        '',
        'class Net(nn.Module):',
        '    def __init__(self):',
        '        super().__init__()',
        '        self.a = nn.Linear(64, 64)',
        '        self.b = nn.Linear(64, 64)',
        '',
        'model = Net()',
        'apply_fsdp(model)',
        '',
      ].join('\n'),
    );
    fs.writeFileSync(
      path.join(dir, 'sub', 'parallel.py'),
      'from torch.distributed.fsdp import fully_shard\n\ndef apply_fsdp(model):\n    fully_shard(model.a)\n    fully_shard(model)\n',
    );
    const before = process.cwd();
    try {
      process.chdir(dir);
      const r = await cli('estimate', path.join('sub', 'parallel.py'), '--json');
      assert.equal(r.code, 0, r.err);
      const j = JSON.parse(r.out) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
      // Two Linear(64, 64): a in its own unit, b in the root's.
      assert.deepEqual(
        j.units.map((u: { params: number }) => u.params),
        [64 * 64 + 64, 64 * 64 + 64],
      );
      // The helper's job is its caller's: train.py's model, its inputs.
      assert.match(
        JSON.stringify(j.notes),
        /the job is \.\.\/train\.py's, which calls apply_fsdp\(\) at line 11/,
      );
    } finally {
      process.chdir(before);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reads a config.json given by path, and the Hugging Face cache for from_pretrained ids', async () => {
    const dir = tempDir('fsdp-lens-hf-');
    const cfg = {
      model_type: 'llama',
      hidden_size: 64,
      intermediate_size: 128,
      num_hidden_layers: 2,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      vocab_size: 100,
      tie_word_embeddings: false,
    };
    fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(cfg));
    // 2 x (attention 64·64·2 + 64·32·2, MLP 3·64·128, norms 2·64) + embedding and head 2·100·64 + norm 64
    const expected = 2 * (64 * 64 * 2 + 64 * 32 * 2 + 3 * 64 * 128 + 2 * 64) + 2 * 100 * 64 + 64;
    const byPath = JSON.parse(
      (await cli('estimate', '--config', path.join(dir, 'config.json'), '--json')).out,
    ) as { model: { params: number } };
    assert.equal(byPath.model.params, expected);
    // A hub cache holding "acme/tiny": refs/main names the snapshot.
    const repo = path.join(dir, 'hub', 'models--acme--tiny');
    fs.mkdirSync(path.join(repo, 'refs'), { recursive: true });
    fs.mkdirSync(path.join(repo, 'snapshots', 'abc123'), { recursive: true });
    fs.writeFileSync(path.join(repo, 'refs', 'main'), 'abc123\n');
    fs.writeFileSync(path.join(repo, 'snapshots', 'abc123', 'config.json'), JSON.stringify(cfg));
    const old = process.env.HF_HUB_CACHE;
    process.env.HF_HUB_CACHE = path.join(dir, 'hub');
    try {
      const script = path.join(dir, 'train.py');
      fs.writeFileSync(
        script,
        'from transformers import AutoModelForCausalLM\nmodel = AutoModelForCausalLM.from_pretrained("acme/tiny")\n',
      );
      const r = await cli('estimate', script, '--json');
      assert.equal(r.code, 0, r.err);
      const j = JSON.parse(r.out) as { model: { params: number; source: string } };
      assert.equal(j.model.params, expected);
      assert.match(j.model.source, /Hugging Face cache/);
    } finally {
      if (old === undefined) delete process.env.HF_HUB_CACHE;
      else process.env.HF_HUB_CACHE = old;
    }
  });

  it('exits 2 with a clear message on bad flags and files', async () => {
    for (const [args, msg] of [
      [['estimate'], /needs a FILE, --model/],
      [
        ['estimate', '--model', 'x/y', '--world-size', 'many'],
        /--world-size must be a positive whole number/,
      ],
      [['estimate', '--model', 'x/y', '--ac', 'sometimes'], /--ac must be none, full, selective or every-N/],
      [['estimate', '--model', 'x/y', '--gpu', 'tpu-v5'], /unknown GPU "tpu-v5"/],
      [['estimate', '--model', 'nobody/nothing'], /not in the Hugging Face cache/],
      [['estimate', '--config', '/nonexistent/config.json'], /cannot read .*no such file/],
    ] as const) {
      const r = await cli(...args);
      assert.equal(r.code, 2, args.join(' '));
      assert.match(r.err, msg);
    }
    const dir = tempDir('fsdp-lens-bad-');
    const bad = path.join(dir, 'config.json');
    for (const [content, msg] of [
      ['{not json', /not valid JSON/],
      ['[1, 2]', /not a JSON object/],
      ['{"model_type": "llama", "hidden_size": NaN}', /not valid JSON/],
      ['{"model_type": "llama", "hidden_size": -5}', /must be a positive integer/],
      ['{"model_type": "bert"}', /"bert" is not supported; supported: llama/],
    ] as const) {
      fs.writeFileSync(bad, content);
      const r = await cli('estimate', '--config', bad);
      assert.equal(r.code, 2);
      assert.match(r.err, msg);
    }
  });
});

describe('a peak at the optimizer step', () => {
  // Llama 3.2 1B (1,235,814,400 parameters) on one GPU at 16 tokens: activations are tiny, and AdamW's foreach step
  // holds one more fp32 copy of the parameters (4 B x P = 4,943,257,600 B) on top of the 16 B x P of state, more
  // than any moment of forward or backward.
  it('names "optimizer step" as the place in JSON, in the timeline event and in the text', async () => {
    const args = ['estimate', '--model', 'meta-llama/Llama-3.2-1B', '--world-size', '1', '--seq', '16'];
    const j = JSON.parse((await cli(...args, '--json')).out) as {
      perGpu: { peakAt: { unit: string; phase: string }; perUnitPeakBytes: Record<string, number> };
      timeline: { phase: string; unit: string; live: { optimizer: number } }[];
    };
    assert.deepEqual(j.perGpu.peakAt, { unit: 'optimizer step', phase: 'optimizer' });
    const step = j.timeline.find((ev) => ev.phase === 'optimizer')!;
    assert.equal(step.unit, 'optimizer step');
    assert.equal(step.live.optimizer, 4 * 1_235_814_400);
    // Per-unit peaks stay per unit: the optimizer step is no unit.
    assert.equal(j.perGpu.perUnitPeakBytes['optimizer step'], undefined);
    assert.match((await cli(...args)).out, /^Peak {6}\S+ GB per GPU, during the optimizer step$/m);
  });
});

describe('fsdp-lens models and gpus', () => {
  it('models lists every catalog id with its model_type and parameter count, in text and JSON', async () => {
    const text = await cli('models');
    assert.equal(text.code, 0, text.err);
    // ESTIMATOR.md's worked examples: Llama 3.1 8B has 8,030,261,248 parameters, 70B 70,553,706,496.
    assert.match(text.out, /^meta-llama\/Llama-3\.1-8B +llama +8\.03B \(8,030,261,248\)$/m);
    assert.match(text.out, /^meta-llama\/Llama-3\.1-70B +llama +70\.6B \(70,553,706,496\)$/m);
    const j = await cli('models', '--json');
    const rows = (JSON.parse(j.out) as { models: { id: string; modelType: string; params: number }[] })
      .models;
    const ids = Object.keys(
      (
        JSON.parse(fs.readFileSync(path.join(ROOT, 'src/core/model/hf-configs.json'), 'utf8')) as {
          models: object;
        }
      ).models,
    );
    assert.deepEqual(
      rows.map((r) => r.id),
      ids,
    );
    // GPT-2 small: 124,439,808 parameters (Transformers' GPT2LMHeadModel with its tied head).
    assert.deepEqual(
      rows.find((r) => r.id === 'openai-community/gpt2'),
      { id: 'openai-community/gpt2', modelType: 'gpt2', params: 124_439_808 },
    );
    assert.equal((await cli('models', 'extra')).code, 2);
  });

  it('gpus lists the ids --gpu takes, with the driver-reported memory', async () => {
    const r = await cli('gpus');
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^h200-141gb +NVIDIA H200 141GB +143,771 MiB +989 TFLOP\/s/m);
    const j = JSON.parse((await cli('gpus', '--json')).out) as {
      gpus: { id: string; memoryBytes: number }[];
    };
    assert.equal(j.gpus.find((g) => g.id === 'h100-sxm-80gb')!.memoryBytes, 81559 * 1024 * 1024);
    for (const g of j.gpus)
      assert.equal((await cli('estimate', '--model', 'openai-community/gpt2', '--gpu', g.id)).code, 0, g.id);
  });

  it('--help names both listings', async () => {
    const r = await cli('--help');
    assert.match(r.out, /^ {2}models {2,}The built-in model catalog/m);
    assert.match(r.out, /^ {2}gpus {2,}The GPUs --gpu takes/m);
  });

  it('an unknown --model suggests close catalog ids and points to the listing', async () => {
    for (const [typed, first] of [
      ['llama-3.1-8b', 'meta-llama/Llama-3.1-8B'], // the name without its organisation
      ['meta-llama/Llama-3.1-8B-Chat', 'meta-llama/Llama-3.1-8B'], // contains a catalog name
      ['google/gemma-2-2B', 'google/gemma-2-2b'], // case only: matched, not suggested
      ['mistralai/Mixtral-8x7B-v1', 'mistralai/Mixtral-8x7B-v0.1'], // two typos
    ] as const) {
      const r = await cli('estimate', '--model', typed, '--json');
      if (typed.toLowerCase() === first.toLowerCase()) {
        assert.equal(r.code, 0, r.err);
        continue;
      }
      assert.equal(r.code, 2, typed);
      assert.match(r.err, new RegExp(`did you mean "${first.replace(/[.]/g, '\\.')}"`), typed);
      assert.match(r.err, /"fsdp-lens models" lists the built-in catalog/);
    }
    const far = await cli('estimate', '--model', 'acme/widget-xyz');
    assert.equal(far.code, 2);
    assert.doesNotMatch(far.err, /did you mean/);
    assert.match(far.err, /"fsdp-lens models" lists the built-in catalog/);
  });
});

describe('fsdp-lens scan and lint refuse what is not Python source', () => {
  it('exits 2 with "not a Python file" on an explicit README.md or package.json', async () => {
    for (const command of ['scan', 'lint']) {
      for (const name of ['README.md', 'package.json']) {
        const file = path.join(ROOT, name);
        const r = await cli(command, file);
        assert.equal(r.code, 2, `${command} ${name}`);
        // lint reads JSON, YAML and TOML as framework configurations: package.json is none it knows.
        const expected =
          command === 'lint' && name === 'package.json'
            ? 'not a configuration fsdp-lens knows'
            : 'not a Python file';
        assert.match(r.err, new RegExp(`${name.replace('.', '\\.')}: ${expected}`));
        assert.equal(r.out, '', 'nothing of the file is parsed or reported');
      }
    }
  });

  it('reads a script without .py when its first line is a Python shebang, and .pyi stubs', async () => {
    const dir = tempDir('fsdp-lens-shebang-');
    const body =
      'from torch.distributed.fsdp import fully_shard\nfor layer in model.layers:\n    fully_shard(layer)\n';
    const script = path.join(dir, 'train');
    fs.writeFileSync(script, `#!/usr/bin/env python3\n${body}`);
    const stub = path.join(dir, 'train.pyi');
    fs.writeFileSync(stub, body);
    const shell = path.join(dir, 'run');
    fs.writeFileSync(shell, `#!/bin/sh\n${body}`);
    for (const file of [script, stub]) {
      const scan = await cli('scan', file, '--json');
      assert.equal(scan.code, 0, scan.err);
      assert.equal((JSON.parse(scan.out) as { files: { calls: unknown[] }[] }).files[0]!.calls.length, 1);
      // The blocks are wrapped, the model never is: FSDP001 on line 3 (line 4 under the shebang).
      const lint = await cli('lint', file);
      assert.equal(lint.code, 1, lint.err);
      assert.match(lint.out, new RegExp(`:${file === script ? 4 : 3}:5: FSDP001 `));
    }
    for (const command of ['scan', 'lint']) {
      const r = await cli(command, shell);
      assert.equal(r.code, 2);
      assert.match(r.err, /run: not a Python file/);
    }
  });

  it('exits 2 with a clear message on binary and non-UTF-8 files given to lint', async () => {
    const dir = tempDir('fsdp-lens-lint-bytes-');
    const elf = Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0, 0, 1, 2]);
    fs.writeFileSync(path.join(dir, 'weights.py'), elf);
    fs.writeFileSync(path.join(dir, 'weights.bin'), elf);
    fs.writeFileSync(path.join(dir, 'latin1.py'), Buffer.from([0x23, 0x20, 0xe9, 0x0a]));
    // A Python shebang decides it is Python; its bytes then decide it cannot be read.
    fs.writeFileSync(path.join(dir, 'tool'), Buffer.from('#!/usr/bin/python\n# caf\xe9\n', 'latin1'));
    for (const [name, message] of [
      ['weights.py', /weights\.py: binary file/],
      ['weights.bin', /weights\.bin: not a Python file/],
      ['latin1.py', /latin1\.py: not valid UTF-8/],
      ['tool', /tool: not valid UTF-8/],
    ] as const) {
      for (const command of ['scan', 'lint']) {
        const r = await cli(command, path.join(dir, name));
        assert.equal(r.code, 2, `${command} ${name}`);
        assert.match(r.err, message);
      }
    }
  });

  it('walks directories for .py files and FSDP configurations, and says when a directory has none', async () => {
    const dir = tempDir('fsdp-lens-lint-dir-');
    fs.mkdirSync(path.join(dir, 'pkg'));
    fs.writeFileSync(path.join(dir, 'README.md'), '# fully_shard(model.layers)\n\0');
    fs.writeFileSync(path.join(dir, 'package.json'), '{"name": "x"}\n');
    fs.writeFileSync(path.join(dir, 'blob.bin'), Buffer.from([0, 1, 2, 0xff]));
    fs.copyFileSync(path.join(FIXTURES, 'lint', 'fsdp001_bad.py'), path.join(dir, 'pkg', 'train.py'));
    fs.copyFileSync(path.join(FIXTURES, 'lint', 'fsdp001_good.py'), path.join(dir, 'ok.py'));
    const r = await cli('lint', dir, '--format', 'json');
    assert.equal(r.code, 1, r.err);
    const rows = JSON.parse(r.out) as { file: string; code: string }[];
    assert.deepEqual(
      rows.map((x) => [path.relative(dir, x.file), x.code]),
      [[path.join('pkg', 'train.py'), 'FSDP001']],
    );
    assert.doesNotMatch(r.err, /README|package\.json|blob\.bin/);

    const empty = tempDir('fsdp-lens-lint-empty-');
    fs.writeFileSync(path.join(empty, 'notes.txt'), 'nothing here\n');
    const e = await cli('lint', empty);
    assert.equal(e.code, 0);
    assert.equal(e.out, '');
    assert.match(e.err, /no \.py files or FSDP configurations in this directory/);
  });
});

describe('fsdp-lens lint', () => {
  const lintFixture = (name: string) => path.join(FIXTURES, 'lint', name);
  /** 1-based line and column span of `needle` in a fixture, found in its text (end column exclusive, as SARIF). */
  function spanOf(name: string, needle: string, lineNo: number) {
    const line = fs.readFileSync(lintFixture(name), 'utf8').split('\n')[lineNo - 1]!;
    const start = line.indexOf(needle);
    assert.ok(start >= 0, `${needle} on line ${lineNo} of ${name}`);
    return { line: lineNo, column: start + 1, endLine: lineNo, endColumn: start + needle.length + 1 };
  }

  it('prints file:line:col: CODE message and exits 1 on a finding', async () => {
    const file = lintFixture('fsdp001_bad.py');
    const r = await cli('lint', file);
    assert.equal(r.code, 1, r.err);
    const lines = r.out.trimEnd().split('\n');
    assert.equal(lines.length, 1);
    // Line 8 is `        fully_shard(layer, ...)`: the call starts after 8 spaces, in column 9.
    const { line, column } = spanOf(
      'fsdp001_bad.py',
      'fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward=True)',
      8,
    );
    assert.equal(column, 9);
    assert.ok(lines[0]!.startsWith(`${file}:${line}:${column}: FSDP001 `), lines[0]);
    assert.match(lines[0]!, /`model` itself never is/);
    assert.match(r.err, /^1 finding in 1 of 1 files$/m);
  });

  it('exits 0 with no output on a clean file', async () => {
    const r = await cli('lint', lintFixture('fsdp001_good.py'));
    assert.equal(r.code, 0, r.err);
    assert.equal(r.out, '');
    assert.equal(r.err, '');
  });

  it('--format json: one row per finding with its rule and range', async () => {
    const r = await cli(
      'lint',
      lintFixture('fsdp005_bad.py'),
      lintFixture('fsdp001_bad.py'),
      '--format',
      'json',
    );
    assert.equal(r.code, 1, r.err);
    const rows = JSON.parse(r.out) as {
      file: string;
      line: number;
      column: number;
      endLine: number;
      endColumn: number;
      code: string;
      severity: string;
      message: string;
    }[];
    const legacy = 'torch.distributed._composable.fsdp';
    assert.deepEqual(
      rows.map(({ file, line, column, endLine, endColumn, code, severity }) => ({
        file: path.basename(file),
        code,
        severity,
        range: { line, column, endLine, endColumn },
      })),
      [
        // `from torch.distributed._composable.fsdp import ...`: the module after "from ", columns 6 to 6 + 34.
        {
          file: 'fsdp005_bad.py',
          code: 'FSDP005',
          severity: 'warning',
          range: spanOf('fsdp005_bad.py', legacy, 1),
        },
        // `import torch.distributed._composable.fsdp as cfsdp`: after "import ", columns 8 to 8 + 34.
        {
          file: 'fsdp005_bad.py',
          code: 'FSDP005',
          severity: 'warning',
          range: spanOf('fsdp005_bad.py', legacy, 2),
        },
        {
          file: 'fsdp001_bad.py',
          code: 'FSDP001',
          severity: 'error',
          range: spanOf(
            'fsdp001_bad.py',
            'fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward=True)',
            8,
          ),
        },
      ],
    );
    assert.deepEqual(spanOf('fsdp005_bad.py', legacy, 1), { line: 1, column: 6, endLine: 1, endColumn: 40 });
    assert.ok(rows.every((x) => x.message.length > 20));
  });

  it('--format sarif: a SARIF 2.1.0 log with the results and their regions', async () => {
    const r = await cli('lint', lintFixture('fsdp001_bad.py'), '--format', 'sarif');
    assert.equal(r.code, 1, r.err);
    const log = JSON.parse(r.out) as {
      version: string;
      runs: {
        tool: { driver: { name: string; rules: { id: string }[] } };
        results: {
          ruleId: string;
          level: string;
          locations: {
            physicalLocation: { artifactLocation: { uri: string }; region: Record<string, number> };
          }[];
        }[];
      }[];
    };
    assert.equal(log.version, '2.1.0');
    assert.equal(log.runs.length, 1);
    const run = log.runs[0]!;
    assert.equal(run.tool.driver.name, 'fsdp-lens');
    assert.ok(run.tool.driver.rules.some((x) => x.id === 'FSDP001'));
    assert.deepEqual(
      run.results.map((x) => [x.ruleId, x.level]),
      [['FSDP001', 'error']],
    );
    const loc = run.results[0]!.locations[0]!.physicalLocation;
    assert.match(loc.artifactLocation.uri, /(^|\/)fsdp001_bad\.py$/);
    const span = spanOf(
      'fsdp001_bad.py',
      'fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward=True)',
      8,
    );
    assert.deepEqual(loc.region, {
      startLine: span.line,
      startColumn: span.column,
      endLine: span.endLine,
      endColumn: span.endColumn,
    });
  });

  it('--format sarif on a clean file: a log with no results, exit 0', async () => {
    const r = await cli('lint', lintFixture('fsdp001_good.py'), '--format', 'sarif');
    assert.equal(r.code, 0, r.err);
    const log = JSON.parse(r.out) as { version: string; runs: { results: unknown[] }[] };
    assert.equal(log.version, '2.1.0');
    assert.deepEqual(log.runs[0]!.results, []);
  });

  it('--rule FSDP001=off silences the rule; =info reports it without failing', async () => {
    const file = lintFixture('fsdp001_bad.py');
    const off = await cli('lint', file, '--rule', 'FSDP001=off');
    assert.equal(off.code, 0, off.err);
    assert.equal(off.out, '');
    const lower = await cli('lint', file, '--rule', 'fsdp001=off', '--format', 'json');
    assert.equal(lower.code, 0);
    assert.deepEqual(JSON.parse(lower.out), []);
    const info = await cli('lint', file, '--rule', 'FSDP001=info', '--format', 'json');
    assert.equal(info.code, 0, 'an info finding does not fail the run');
    assert.deepEqual(
      (JSON.parse(info.out) as { code: string; severity: string }[]).map((x) => [x.code, x.severity]),
      [['FSDP001', 'info']],
    );
  });

  it('--min-torch 2.4 silences FSDP005 on the legacy torch.distributed._composable.fsdp import', async () => {
    const file = lintFixture('fsdp005_bad.py');
    const dflt = await cli('lint', file);
    assert.equal(dflt.code, 1);
    assert.equal((dflt.out.match(/: FSDP005 /g) ?? []).length, 2);
    // FSDP2 lived only at the legacy path before 2.6: code that must run on 2.4 has to import it from there.
    const old = await cli('lint', file, '--min-torch', '2.4');
    assert.equal(old.code, 0, old.err);
    assert.doesNotMatch(old.out, /FSDP005/);
    const now = await cli('lint', file, '--min-torch', '2.6');
    assert.equal(now.code, 1);
    assert.match(now.out, /FSDP005/);
  });

  it('exits 2 on usage errors, missing files and non-Python files', async () => {
    const good = lintFixture('fsdp001_good.py');
    for (const [args, msg] of [
      [['lint'], /lint needs at least one FILE or DIR/],
      [['lint', good, '--format', 'xml'], /--format must be text, json or sarif, not "xml"/],
      [['lint', good, '--rule', 'FSDP999=off'], /unknown rule "FSDP999"/],
      [['lint', good, '--rule', 'FSDP001=loud'], /--rule FSDP001= takes error, warning, info, hint, off/],
      [['lint', good, '--min-torch', 'latest'], /--min-torch takes a release like 2\.4, not "latest"/],
      [['lint', good, '--bogus'], /.+/],
      [
        ['lint', path.join(FIXTURES, 'lint', 'no_such_file.py')],
        /no_such_file\.py: no such file or directory/,
      ],
      [['lint', path.join(ROOT, 'README.md')], /README\.md: not a Python file/],
    ] as const) {
      const r = await cli(...args);
      assert.equal(r.code, 2, args.join(' '));
      assert.match(r.err, msg);
    }
    // One bad input among good ones: the others are still linted, and the run still exits 2.
    const mixed = await cli('lint', lintFixture('fsdp001_bad.py'), path.join(ROOT, 'package.json'));
    assert.equal(mixed.code, 2);
    assert.match(mixed.out, /fsdp001_bad\.py:8:9: FSDP001 /);
    assert.match(mixed.err, /package\.json: not a configuration fsdp-lens knows/);
  });
});
