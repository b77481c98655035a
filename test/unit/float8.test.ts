// Float8 training (torchao, torchtitan's float8 converter): which Linear layers convert, what FSDP2 gathers when
// their weights are all-gathered in float8, and torchtitan's config keys that turn it on.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { estimate } from '../../src/core/estimator/estimate';
import type { Plan } from '../../src/core/estimator/types';
import { resolveSetup } from '../../src/core/inputs/layers';
import type { SetupValues } from '../../src/core/inputs/table';
import { float8Tree } from '../../src/core/model/float8';
import { modelFromHfConfig } from '../../src/core/model/hf';
import { walk } from '../../src/core/model/tree';
import { defaultUnits } from '../../src/core/plan/policies';
import { cli, SMALL_LLAMA, tempDir } from './helpers';

// Hidden 64, 4 heads of 16 (2 KV heads), MLP 128, vocabulary 96, two blocks, untied head.
const LLAMA = SMALL_LLAMA;
const m = modelFromHfConfig(LLAMA);

function run(values: SetupValues, api: Plan['api'] = 'fsdp2') {
  const { setup, assumptions } = resolveSetup([
    { source: { kind: 'flag' }, values: { worldSize: 8, microBatch: 1, seqLen: 16, ...values } },
  ]);
  const plan: Plan = {
    api,
    strategy: 'FULL_SHARD',
    units: defaultUnits(m.root, m.shape.blockClass, api === 'fsdp1' ? 'p' : 't'),
    source: { kind: 'default' },
    notes: [],
  };
  return estimate({
    model: { name: 'small', root: m.root, shape: m.shape, source: { kind: 'default' } },
    plan,
    setup,
    assumptions,
  });
}

// One block's weights: q 64x64, k 32x64, v 32x64, o 64x64, gate 128x64, up 128x64, down 64x128 = 36,864 elements
// in seven Linear layers whose dims are all multiples of 16; two RMSNorm weights of 64.
const LINEARS = 64 * 64 + 2 * 32 * 64 + 64 * 64 + 2 * 128 * 64 + 64 * 128;
const NORMS = 2 * 64;

describe('Float8 training', () => {
  it("converts the Linear layers torchtitan's module_filter_fn picks: dims multiples of 16, not skipped", () => {
    // 7 per block x 2 blocks, and the head (96 x 64): 15; skipping "lm_head" leaves 14.
    assert.equal(float8Tree(m.root, 'linear', '').converted, 15);
    assert.equal(float8Tree(m.root, 'linear', 'lm_head').converted, 14);
    // A vocabulary of 100 is not a multiple of 16: the head stays in high precision.
    const odd = modelFromHfConfig({ ...LLAMA, vocab_size: 100 });
    assert.equal(float8Tree(odd.root, 'all-gather', '').converted, 14);
    // Only the all-gather mode changes what FSDP sees: the weights' gather dtype, nothing else.
    const t = float8Tree(m.root, 'all-gather', 'lm_head').root;
    const gathers = [...walk(t)].flatMap((x) => x.params.filter((p) => p.gathersAs).map((p) => p.gathersAs));
    assert.equal(gathers.length, 14);
    assert.ok(gathers.every((g) => g === 'float8_e4m3fn'));
    assert.equal(float8Tree(m.root, 'linear', '').root, m.root);
  });

  it("FSDP2 gathers a block's converted weights in 1 byte each and its norms in bf16", () => {
    const bf16 = run({ paramDtype: 'bfloat16' });
    const f8 = run({ paramDtype: 'bfloat16', float8: 'all-gather' });
    const block = (e: ReturnType<typeof run>) => e.units.find((u) => /layers\.0$/.test(u.name))!;
    // W = 8 divides every dim 0 (64, 32, 128): no padding.
    assert.equal(block(bf16).gatheredBytes, 2 * (LINEARS + NORMS));
    assert.equal(block(f8).gatheredBytes, LINEARS * 1 + NORMS * 2);
    // The all-gather moves 7/8 of it, forward and again in backward.
    assert.equal(block(f8).traffic.allGatherBytes, 2 * (7 / 8) * (LINEARS + 2 * NORMS));
    // The shards, the gradients and the optimizer state keep their dtypes.
    assert.deepEqual(block(f8).shard, block(bf16).shard);
    assert.match(
      f8.notes.join('\n'),
      /Float8 training of 15 Linear layers: their weights are all-gathered and held gathered in float8/,
    );
  });

  it('linear mode and FSDP1 gather in the parameter dtype, and say so', () => {
    const bf16 = run({ paramDtype: 'bfloat16' });
    const linear = run({ paramDtype: 'bfloat16', float8: 'linear' });
    assert.deepEqual(
      linear.units.map((u) => u.gatheredBytes),
      bf16.units.map((u) => u.gatheredBytes),
    );
    const fsdp1 = run({ paramDtype: 'bfloat16', float8: 'all-gather' }, 'fsdp1');
    assert.match(
      fsdp1.notes.join('\n'),
      /all-gathered in the parameter dtype \(float8 all-gather is FSDP2 only\)/,
    );
  });

  it("reads torchtitan's converters, float8 all-gather and filter_fqns from a TOML config", async () => {
    const dir = tempDir('fsdp-lens-float8-');
    try {
      const toml = path.join(dir, 'job.toml');
      fs.writeFileSync(
        toml,
        [
          '[model]',
          'name = "llama3"',
          'flavor = "8B"',
          'converters = ["quantize.linear.float8"]',
          '[training]',
          'local_batch_size = 1',
          'seq_len = 8192',
          '[parallelism]',
          'data_parallel_shard_degree = 8',
          '[quantize.linear.float8]',
          'enable_fsdp_float8_all_gather = true',
          'filter_fqns = ["output"]',
          '',
        ].join('\n'),
      );
      const r = await cli('estimate', toml, '--json');
      assert.equal(r.code, 0, r.err);
      const j = JSON.parse(r.out);
      const shown = (key: string) => j.assumptions.find((a: { key: string }) => a.key === key);
      assert.equal(shown('float8').source.kind, 'config');
      assert.match(shown('float8').value, /all-gathered in float8/);
      assert.equal(shown('float8Skip').value, 'output');
      // Llama 3.1 8B's block: q 4096x4096, k and v 1024x4096, o 4096x4096, gate and up 14336x4096, down 4096x14336,
      // all in float8; its two norms of 4096 in bf16; W = 8 divides every dim 0.
      const linears = 2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14336 * 4096;
      const block = j.units.find((u: { name: string }) => /^layers\.0$/.test(u.name));
      assert.equal(block.gatheredBytes, linears + 2 * 2 * 4096);
      // The skipped head (128256 x 4096) is gathered in bf16 with the final norm.
      const head = j.units.find((u: { name: string }) => /output/.test(u.name));
      assert.equal(head.gatheredBytes, 2 * (128_256 * 4096 + 4096));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
