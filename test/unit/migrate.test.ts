import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { migrateToFsdp2 } from '../../src/core/lint/migrate';
import { applyEdits, lastImportLine, TextIndex } from '../../src/core/lint/edits';
import { cli, projectDir, scanSource, writeFiles } from './helpers';

const HEAD = [
  'import functools',
  'import torch',
  'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision, ShardingStrategy, CPUOffload',
  'from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy, size_based_auto_wrap_policy',
  'from transformers import AutoModelForCausalLM',
  'from transformers.models.llama.modeling_llama import LlamaDecoderLayer',
  '',
  'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")',
  'policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={LlamaDecoderLayer})',
];

async function migrate(lines: string[]) {
  const text = [...HEAD, ...lines, ''].join('\n');
  const facts = await scanSource(text, 'train.py');
  const m = migrateToFsdp2(facts, text);
  return { m, after: m.edits.length ? applyEdits(text, m.edits) : text };
}

describe('FSDP1 to FSDP2', () => {
  it('a transformer policy becomes fully_shard of each block, then the root; MixedPrecision its FSDP2 policy', async () => {
    const { m, after } = await migrate([
      'mp = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, buffer_dtype=torch.bfloat16)',
      'model = FSDP(model, auto_wrap_policy=policy, mixed_precision=mp, device_id=torch.cuda.current_device())',
    ]);
    assert.deepEqual(m.skipped, []);
    assert.match(after, /^from torch\.distributed\.fsdp import MixedPrecisionPolicy, fully_shard$/m);
    assert.match(
      after,
      /\nmp_policy = MixedPrecisionPolicy\(param_dtype=torch\.bfloat16, reduce_dtype=torch\.float32\)\nfor module in model\.modules\(\):\n {4}if isinstance\(module, LlamaDecoderLayer\):\n {8}fully_shard\(module, mp_policy=mp_policy\)\nfully_shard\(model, mp_policy=mp_policy\)\n$/,
    );
    assert.ok(m.notes.some((n) => /buffer_dtype has no FSDP2 form/.test(n)));
    assert.ok(m.notes.some((n) => /device_id dropped/.test(n)));
    // The result scans as FSDP2 builds it: a unit per decoder layer (32) and the root, in the same dtypes.
    const facts = await scanSource(after, 'train.py');
    assert.deepEqual(
      facts.calls.map((c) => c.api),
      ['fully_shard', 'fully_shard'],
    );
  });

  it('maps each sharding strategy, CPU offload, and a result bound to another name', async () => {
    const grad = await migrate([
      'fsdp_model = FSDP(model, auto_wrap_policy=policy, sharding_strategy=ShardingStrategy.SHARD_GRAD_OP, cpu_offload=CPUOffload(offload_params=True))',
    ]);
    assert.match(
      grad.after,
      /fully_shard\(model, reshard_after_forward=False, offload_policy=CPUOffloadPolicy\(\)\)\nfsdp_model = model\n/,
    );
    assert.match(grad.after, /^from torch\.distributed\.fsdp import CPUOffloadPolicy, fully_shard$/m);
    // HYBRID_SHARD shards within a node and replicates across nodes: a 2-D mesh (nodes, GPUs per node).
    const hybrid = await migrate([
      'model = FSDP(model, auto_wrap_policy=policy, sharding_strategy=ShardingStrategy.HYBRID_SHARD)',
    ]);
    assert.match(
      hybrid.after,
      /^mesh = init_device_mesh\("cuda", \(torch\.distributed\.get_world_size\(\) \/\/ torch\.cuda\.device_count\(\), torch\.cuda\.device_count\(\)\), mesh_dim_names=\("replicate", "shard"\)\)$/m,
    );
    assert.match(hybrid.after, /fully_shard\(model, mesh=mesh\)/);
    assert.match(hybrid.after, /^from torch\.distributed\.device_mesh import init_device_mesh$/m);
    // A device_mesh FSDP1 was given is FSDP2's mesh as it is.
    const given = await migrate(['model = FSDP(model, auto_wrap_policy=policy, device_mesh=dp_mesh)']);
    assert.match(given.after, /fully_shard\(model, mesh=dp_mesh\)\n$/);
    const init = await migrate([
      'model = FSDP(model, auto_wrap_policy=policy, param_init_fn=lambda m: m.to_empty(device="cuda"))',
    ]);
    assert.match(
      init.m.skipped[0]!,
      /param_init_fn has no FSDP2 form: after fully_shard, call model\.to_empty/,
    );
  });

  it('leaves what it cannot carry over faithfully, and names the FSDP1 calls left to the user', async () => {
    const noShard = await migrate(['model = FSDP(model, sharding_strategy=ShardingStrategy.NO_SHARD)']);
    assert.equal(noShard.m.edits.length, 0);
    assert.match(noShard.m.skipped[0]!, /NO_SHARD has no FSDP2 form/);
    const size = await migrate([
      'model = FSDP(model, auto_wrap_policy=functools.partial(size_based_auto_wrap_policy, min_num_params=100_000_000))',
    ]);
    assert.equal(size.m.edits.length, 0);
    assert.match(size.m.skipped[0]!, /is not a transformer policy over named classes/);
    const sync = await migrate([
      'model = FSDP(model, auto_wrap_policy=policy)',
      'with model.no_sync():',
      '    pass',
      'model.clip_grad_norm_(1.0)',
    ]);
    assert.ok(
      sync.m.notes.some((n) =>
        /^line 11: no_sync\(\): use model\.set_requires_gradient_sync\(False\)/.test(n),
      ),
    );
    assert.ok(sync.m.notes.some((n) => /^line 13: clip_grad_norm_/.test(n)));
  });

  it('`fsdp-lens migrate` prints the diff and both estimates, and writes only with --write', async () => {
    const dir = projectDir('fsdp-lens-migrate-');
    writeFiles(dir, { 'train.py': [...HEAD, 'model = FSDP(model, auto_wrap_policy=policy)', ''] });
    const file = path.join(dir, 'train.py');
    const before = fs.readFileSync(file, 'utf8');
    const r = await cli('migrate', file);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^@@ -10,1 \+11,4 @@$/m);
    // The same units either way: 32 decoder layers and the root.
    assert.match(r.out, /^before: FSDP1, 33 units/m);
    assert.match(r.out, /^after : FSDP2, 33 units/m);
    assert.equal(fs.readFileSync(file, 'utf8'), before);
    assert.equal((await cli('migrate', file, '--write')).code, 0);
    assert.match(fs.readFileSync(file, 'utf8'), /fully_shard\(model\)\n$/);
  });
});

describe('where new imports go', () => {
  it('after the last top-level import, past a module docstring over several lines', () => {
    const text = [
      '"""Train.',
      '',
      'import this is prose, not code',
      '"""',
      'import os',
      'from a import (',
      '    b,',
      ')',
      'x = 1',
      '',
    ].join('\n');
    assert.equal(lastImportLine(new TextIndex(text)), 7);
    assert.equal(lastImportLine(new TextIndex('x = 1\nimport os\n')), -1);
  });
});
