import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { runCli } from '../../src/cli/cli';
import { FIXTURES, grammar } from './helpers';

async function cli(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  await grammar();
  let out = '';
  let err = '';
  const code = await runCli(args, {
    out: { write: (s: string) => (out += s) },
    err: { write: (s: string) => (err += s) },
  });
  return { code, out, err };
}

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
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fsdp-lens-cli-'));
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
    assert.match(r.out, /ZeRO-3 reference 42\.2 GB · DDP all-reduce \(bfloat16\) 28\.1 GB/);
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

  it('reads a config.json given by path, and the Hugging Face cache for from_pretrained ids', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fsdp-lens-hf-'));
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
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fsdp-lens-bad-'));
    const bad = path.join(dir, 'config.json');
    for (const [content, msg] of [
      ['{not json', /not valid JSON/],
      ['[1, 2]', /not a JSON object/],
      ['{"model_type": "llama", "hidden_size": NaN}', /not valid JSON/],
      ['{"model_type": "llama", "hidden_size": -5}', /must be a positive integer/],
      ['{"model_type": "t5"}', /"t5" is not supported; supported: llama/],
    ] as const) {
      fs.writeFileSync(bad, content);
      const r = await cli('estimate', '--config', bad);
      assert.equal(r.code, 2);
      assert.match(r.err, msg);
    }
  });
});
