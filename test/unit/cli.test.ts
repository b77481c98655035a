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
