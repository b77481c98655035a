import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { migrateToFsdp2 } from '../../src/core/lint/migrate';
import { applyEdits, lastImportLine, TextIndex } from '../../src/core/lint/edits';
import { cli, fixture, projectDir, scanSource, writeFiles } from './helpers';

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

  it('leaves what it cannot carry over faithfully', async () => {
    const noShard = await migrate(['model = FSDP(model, sharding_strategy=ShardingStrategy.NO_SHARD)']);
    assert.equal(noShard.m.edits.length, 0);
    assert.match(noShard.m.skipped[0]!, /NO_SHARD has no FSDP2 form/);
    const size = await migrate([
      'model = FSDP(model, auto_wrap_policy=functools.partial(size_based_auto_wrap_policy, min_num_params=100_000_000))',
    ]);
    assert.equal(size.m.edits.length, 0);
    assert.match(size.m.skipped[0]!, /is not a transformer policy over named classes/);
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

/** A training script's head: FSDP1 wraps `model` with a policy over Llama's decoder layers. */
const LOOP_HEAD = [
  'import contextlib',
  'import functools',
  'from contextlib import nullcontext',
  '',
  'import torch',
  'import torch.distributed as dist',
  'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP',
  'from torch.distributed.fsdp import FullOptimStateDictConfig, FullStateDictConfig, StateDictType',
  'from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy',
  'from transformers.models.llama.modeling_llama import LlamaDecoderLayer',
  '',
  'policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={LlamaDecoderLayer})',
  'model = FSDP(model, auto_wrap_policy=policy)',
];

/** The same head migrated: `fully_shard` (and the checkpoint functions `names`) imported, the units built. */
function migratedHead(names?: string): string[] {
  return [
    'import contextlib',
    'import functools',
    'from contextlib import nullcontext',
    '',
    'import torch',
    'import torch.distributed as dist',
    'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP',
    'from torch.distributed.fsdp import FullOptimStateDictConfig, FullStateDictConfig, StateDictType',
    'from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy',
    'from transformers.models.llama.modeling_llama import LlamaDecoderLayer',
    'from torch.distributed.fsdp import fully_shard',
    ...(names ? [`from torch.distributed.checkpoint.state_dict import ${names}`] : []),
    '',
    'policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={LlamaDecoderLayer})',
    'for module in model.modules():',
    '    if isinstance(module, LlamaDecoderLayer):',
    '        fully_shard(module)',
    'fully_shard(model)',
  ];
}

async function migrateLoop(lines: string[]) {
  const text = [...LOOP_HEAD, ...lines, ''].join('\n');
  const m = migrateToFsdp2(await scanSource(text, 'train.py'), text);
  const after = m.edits.length ? applyEdits(text, m.edits) : text;
  return { m, after, facts: await scanSource(after, 'train.py') };
}

describe('FSDP1 calls around the wrap, in their FSDP2 forms', () => {
  it('no_sync() blocks become set_requires_gradient_sync(False) before the body and (True) after it', async () => {
    const { m, after, facts } = await migrateLoop([
      'for micro, batch in enumerate(batches):',
      '    with model.no_sync():  # gradients stay local',
      '        out = model(**batch)',
      '        out.loss.backward()',
      '    with model.no_sync() if micro < len(batches) - 1 else contextlib.nullcontext():',
      '        model(**batch).loss.backward()',
      '    is_last = micro == len(batches) - 1',
      '    with nullcontext() if is_last else model.no_sync():',
      '        model(**batch).loss.backward()',
      '    with model.no_sync() if not ready else nullcontext():',
      '        model(**batch).loss.backward()',
      '    with model.no_sync(): model(**batch).loss.backward()',
    ]);
    assert.equal(
      after,
      [
        ...migratedHead(),
        'for micro, batch in enumerate(batches):',
        '    model.set_requires_gradient_sync(False)  # gradients stay local',
        '    out = model(**batch)',
        '    out.loss.backward()',
        '    model.set_requires_gradient_sync(True)',
        // Sync off where the test holds: on where it fails.
        '    model.set_requires_gradient_sync(not (micro < len(batches) - 1))',
        '    model(**batch).loss.backward()',
        '    model.set_requires_gradient_sync(True)',
        '    is_last = micro == len(batches) - 1',
        '    model.set_requires_gradient_sync(is_last)',
        '    model(**batch).loss.backward()',
        '    model.set_requires_gradient_sync(True)',
        // `ready` may be any object: its truth value, as the conditional read it.
        '    model.set_requires_gradient_sync(bool(ready))',
        '    model(**batch).loss.backward()',
        '    model.set_requires_gradient_sync(True)',
        '    model.set_requires_gradient_sync(False)',
        '    model(**batch).loss.backward()',
        '    model.set_requires_gradient_sync(True)',
        '',
      ].join('\n'),
    );
    assert.equal(m.notes.length, 1);
    assert.match(
      m.notes[0]!,
      /^line 15: no_sync\(\) \(and at lines 18, 21, 23, 25\) rewritten as set_requires_gradient_sync\(False\) .*FSDPModule\.set_requires_gradient_sync.*an exception raised in the body now leaves gradient sync off/,
    );
    // Read again: FSDP2 wraps, FSDP2's sync calls, and no FSDP1 call left.
    assert.deepEqual(
      facts.calls.map((c) => c.api),
      ['fully_shard', 'fully_shard'],
    );
    assert.equal(facts.fsdp1Calls, undefined);
    assert.equal(facts.training.filter((t) => t.kind === 'requires_gradient_sync').length, 10);
  });

  it('leaves no_sync() where the rewrite would change what runs, and says why', async () => {
    const lines = [
      'for batch in batches:',
      '    with model.no_sync():',
      '        if batch is None:',
      '            continue',
      '        model(**batch).loss.backward()',
      '    with model.no_sync() if accumulating else torch.no_grad():',
      '        model(**batch).loss.backward()',
      '    with model.no_sync(), torch.autocast("cuda"):',
      '        model(**batch).loss.backward()',
      '    with model.no_sync() as ctx:',
      '        model(**batch).loss.backward()',
      '    with ddp_model.no_sync():',
      '        ddp_model(**batch).loss.backward()',
    ];
    const { m, after } = await migrateLoop(lines);
    assert.equal(after, [...migratedHead(), ...lines, ''].join('\n'));
    assert.deepEqual(
      m.notes.map((n) => n.replace(/:.*/s, '')),
      ['line 15', 'line 19', 'line 21', 'line 23'],
    );
    assert.match(m.notes[0]!, /its body leaves the block early \(return, break or continue\)/);
    assert.match(m.notes[1]!, /another context manager than contextlib\.nullcontext\(\)/);
    assert.match(m.notes[2]!, /its with statement has other items/);
    assert.match(m.notes[3]!, /binds the context to a name/);
    // DDP's no_sync (a module the migration does not move) is no FSDP1 call: nothing said.
    assert.ok(!m.notes.some((n) => /ddp_model/.test(n)));
  });

  it('clip_grad_norm_ becomes torch.nn.utils.clip_grad_norm_ over the parameters, its arguments kept', async () => {
    const { m, after, facts } = await migrateLoop([
      'model.clip_grad_norm_(1.0)',
      'grad_norm = FSDP.clip_grad_norm_(model, max_norm=0.5, norm_type=2.0)',
    ]);
    assert.equal(
      after,
      [
        ...migratedHead(),
        'torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)',
        'grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5, norm_type=2.0)',
        '',
      ].join('\n'),
    );
    // The norm kept: a DTensor now, where FSDP1 returned a plain tensor.
    assert.deepEqual(
      m.notes.map((n) => n.slice(0, 8)),
      ['line 15:'],
    );
    assert.match(m.notes[0]!, /returns the total norm as a DTensor under FSDP2.*\.full_tensor\(\)/);
    assert.equal(facts.fsdp1Calls, undefined);
    assert.deepEqual(
      facts.training.filter((t) => t.kind === 'clip_grad_norm').map((t) => t.qualified),
      ['torch.nn.utils.clip_grad_norm_', 'torch.nn.utils.clip_grad_norm_'],
    );
  });

  it('a file that does not bind `torch` gets `import torch` for the clip', async () => {
    const text = [
      'import torch.distributed as dist',
      'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP',
      '',
      'model = FSDP(model)',
      'model.clip_grad_norm_(max_norm)',
      '',
    ].join('\n');
    const m = migrateToFsdp2(await scanSource(text, 'train.py'), text);
    assert.equal(
      applyEdits(text, m.edits),
      [
        'import torch.distributed as dist',
        'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP',
        'from torch.distributed.fsdp import fully_shard',
        'import torch',
        '',
        'fully_shard(model)',
        'torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)',
        '',
      ].join('\n'),
    );
  });

  it('full state dicts gathered on rank 0, and a full load, through torch.distributed.checkpoint.state_dict', async () => {
    const { m, after, facts } = await migrateLoop([
      'optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)',
      'rank0_cpu = FullStateDictConfig(offload_to_cpu=True, rank0_only=True)',
      'with FSDP.state_dict_type(',
      '    model,',
      '    StateDictType.FULL_STATE_DICT,',
      '    rank0_cpu,',
      '    FullOptimStateDictConfig(offload_to_cpu=True, rank0_only=True),',
      '):  # everything on rank 0',
      '    weights = model.state_dict()',
      '    optim_state = FSDP.optim_state_dict(model, optimizer)',
      '    if dist.get_rank() == 0:',
      '        torch.save({"model": weights, "optim": optim_state}, "ckpt.pt")',
      'with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT):',
      '    model.load_state_dict(torch.load("ckpt.pt")["model"], strict=False)',
    ]);
    assert.equal(
      after,
      [
        ...migratedHead(
          'StateDictOptions, get_model_state_dict, get_optimizer_state_dict, set_model_state_dict',
        ),
        'optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)',
        'rank0_cpu = FullStateDictConfig(offload_to_cpu=True, rank0_only=True)',
        '# everything on rank 0',
        'weights = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))',
        'optim_state = get_optimizer_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True))',
        'if dist.get_rank() == 0:',
        '    torch.save({"model": weights, "optim": optim_state}, "ckpt.pt")',
        'set_model_state_dict(model, torch.load("ckpt.pt")["model"], options=StateDictOptions(full_state_dict=True, strict=False))',
        '',
      ].join('\n'),
    );
    assert.deepEqual(m.notes, []);
    assert.equal(facts.fsdp1Calls, undefined);
  });

  it('sharded state dicts, and the legacy full optimizer state dict', async () => {
    const { m, after, facts } = await migrateLoop([
      'with FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT):',
      '    state = {"model": model.state_dict(), "optim": FSDP.optim_state_dict(model, optimizer)}',
      '    dcp.save(state, checkpoint_id=ckpt_dir)',
      'full_optim = FSDP.full_optim_state_dict(model, optimizer)',
    ]);
    assert.equal(
      after,
      [
        ...migratedHead('StateDictOptions, get_model_state_dict, get_optimizer_state_dict'),
        // SHARDED_STATE_DICT is get_model_state_dict's default; ShardedOptimStateDictConfig() offloads to CPU.
        'state = {"model": get_model_state_dict(model), "optim": get_optimizer_state_dict(model, optimizer, options=StateDictOptions(cpu_offload=True))}',
        'dcp.save(state, checkpoint_id=ckpt_dir)',
        // full_optim_state_dict: rank 0 only, on CPU (its rank0_only=True default).
        'full_optim = get_optimizer_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True))',
        '',
      ].join('\n'),
    );
    assert.equal(m.notes.length, 1);
    assert.match(m.notes[0]!, /^line 14: the sharded state dicts' values are DTensors.*ShardedTensors/);
    assert.equal(facts.fsdp1Calls, undefined);
  });

  it('leaves the state-dict shapes that have no exact FSDP2 form, each with its note', async () => {
    const lines = [
      'with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, FullStateDictConfig(offload_to_cpu=True)):',
      '    weights = model.state_dict()',
      'with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT):',
      '    optim_state = FSDP.optim_state_dict(model, optimizer)',
      'with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT):',
      '    save_checkpoint(model, "ckpt.pt")',
      '    weights = model.state_dict()',
      'with FSDP.state_dict_type(model, StateDictType.LOCAL_STATE_DICT):',
      '    shards = model.state_dict()',
      'with FSDP.summon_full_params(model, writeback=False):',
      '    total = sum(p.numel() for p in model.parameters())',
      'weights = model.state_dict()',
      'everywhere = FSDP.full_optim_state_dict(model, optimizer, rank0_only=False)',
    ];
    const { m, after } = await migrateLoop(lines);
    assert.equal(after, [...migratedHead(), ...lines, ''].join('\n'));
    const at = (line: number) => m.notes.find((n) => n.startsWith(`line ${line}: `)) ?? '';
    assert.equal(m.notes.length, 7);
    // FSDP1 keeps the full state dict on CPU on every rank: FSDP2 has it on rank 0's CPU, or on GPU.
    assert.match(
      at(14),
      /FullStateDictConfig\(offload_to_cpu=True, rank0_only=False\) keeps the full state dict on CPU on every rank, which FSDP2 has no form for/,
    );
    // FullOptimStateDictConfig() offloads to CPU without rank0_only: the same.
    assert.match(
      at(16),
      /FullOptimStateDictConfig\(offload_to_cpu=True, rank0_only=False\) keeps the full optimizer state on CPU on every rank/,
    );
    assert.match(at(18), /its body uses model at line 19 beyond the state-dict calls/);
    assert.match(at(21), /LOCAL_STATE_DICT .* has no FSDP2 form/);
    assert.match(at(23), /summon_full_params\(\.\.\.\) has no FSDP2 form: FSDPModule\.unshard\(\)/);
    assert.match(
      at(25),
      /model\.state_dict\(\) outside a state_dict_type block .*get_model_state_dict\(model, options=StateDictOptions\(full_state_dict=True\)\)/,
    );
    assert.match(
      at(26),
      /rank0_only=False\) is left: FSDP1 gives every rank the full optimizer state on CPU/,
    );
  });

  it('keeps CRLF line ends, and changes nothing in a file it migrated', async () => {
    const lf = fixture('migrate/fsdp1_accumulate_checkpoint.py');
    const crlf = lf.replace(/\n/g, '\r\n');
    const m = migrateToFsdp2(await scanSource(crlf, 'train.py'), crlf);
    const after = applyEdits(crlf, m.edits);
    assert.equal(after.replace(/\r\n/g, '').includes('\n'), false, 'a bare LF in the CRLF result');
    const expected = fixture('migrate/fsdp1_accumulate_checkpoint.fsdp2.py');
    assert.equal(after, expected.replace(/\n/g, '\r\n'));
    // Migrated again: nothing left to rewrite, nothing to say.
    const again = migrateToFsdp2(await scanSource(after, 'train.py'), after);
    assert.deepEqual(again, { edits: [], notes: [], skipped: [] });
  });

  it('`fsdp-lens migrate --write` writes the FSDP2 loop and checkpoint', async () => {
    const dir = projectDir('fsdp-lens-migrate-loop-');
    const file = path.join(dir, 'train.py');
    fs.writeFileSync(file, fixture('migrate/fsdp1_accumulate_checkpoint.py'));
    const r = await cli('migrate', file, '--write');
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^\+ {4}model\.set_requires_gradient_sync\(sync_now\)$/m);
    assert.match(r.out, /^note: line 23: no_sync\(\) rewritten as/m);
    assert.equal(fs.readFileSync(file, 'utf8'), fixture('migrate/fsdp1_accumulate_checkpoint.fsdp2.py'));
  });
});

/** The FSDP1 calls a scan of `text` still finds, as `method line`. */
function fsdp1Left(facts: { fsdp1Calls?: { method: string; line: number }[] }): string[] {
  return (facts.fsdp1Calls ?? []).map((c) => `${c.method} ${c.line}`);
}

describe('a file without wraps: helpers handed the wrapped model', () => {
  it('rewrites the state-dict calls on the modules FSDP1 class calls name, and says what it assumes', async () => {
    const text = fixture('migrate/fsdp1_checkpoint_helpers.py');
    const m = migrateToFsdp2(await scanSource(text, 'checkpointing.py'), text);
    assert.deepEqual(m.skipped, []);
    const after = applyEdits(text, m.edits);
    assert.equal(after, fixture('migrate/fsdp1_checkpoint_helpers.fsdp2.py'));
    // The file's own wrap-free shape: nothing to wrap, the old imports kept for the calls left.
    assert.doesNotMatch(after, /fully_shard/);
    assert.match(after, /^from torch\.distributed\.fsdp import FullyShardedDataParallel as FSDP$/m);
    // torch.distributed.checkpoint's load into the state dict of the DTensors, between the get and the set: kept.
    assert.match(
      after,
      /\n {4}bundle = \{"model": get_model_state_dict\(net\)\}\n {4}dist_cp\.load_state_dict\(state_dict=bundle, storage_reader=FileSystemReader\(shard_dir\)\)\n {4}set_model_state_dict\(net, bundle\["model"\]\)\n/,
    );
    assert.equal(
      m.notes[0],
      'the file holds no FSDP1 wrap (FullyShardedDataParallel), so its rewrites assume the modules they act on are ' +
        "moved to fully_shard where they are wrapped, and FSDP1's calls on them rewritten everywhere: net in " +
        'export_weights(), export_optimizer(), write_shards() and read_shards()',
    );
    const at = (line: number) => m.notes.filter((n) => n.startsWith(`line ${line}: `));
    assert.equal(m.notes.length, 5);
    assert.match(
      at(29)[0]!,
      /^line 29: FSDP\.scatter_full_optim_state_dict\(\.\.\.\) has no FSDP2 form .*set_optimizer_state_dict\(net, optim, full, options=StateDictOptions\(full_state_dict=True, broadcast_from_rank0=True\)\) loads the full optimizer state that rank 0 holds into the optimizer itself/,
    );
    assert.match(at(34)[0]!, /sharded state dicts' values are DTensors/);
    assert.match(at(41)[0]!, /sharded state dicts' values are DTensors/);
    assert.match(at(48)[0]!, /LOCAL_STATE_DICT .* has no FSDP2 form/);
    // Read again: only the calls left stay FSDP1's.
    const facts = await scanSource(after, 'checkpointing.py');
    assert.deepEqual(fsdp1Left(facts), [
      'scatter_full_optim_state_dict 29',
      'state_dict_type 46',
      'state_dict 47',
    ]);
    assert.equal(facts.fsdp1Calls![0]!.module, 'net');
    // Migrated again: nothing more to rewrite; the notes on what stays.
    const again = migrateToFsdp2(facts, after);
    assert.deepEqual(again.edits, []);
    assert.deepEqual(
      again.notes.map((n) => n.replace(/^line \d+: /, '').slice(0, 40)),
      [at(29)[0]!, at(48)[0]!].map((n) => n.replace(/^line \d+: /, '').slice(0, 40)),
    );
  });

  it('keeps CRLF line ends', async () => {
    const crlf = fixture('migrate/fsdp1_checkpoint_helpers.py').replace(/\n/g, '\r\n');
    const m = migrateToFsdp2(await scanSource(crlf, 'checkpointing.py'), crlf);
    const after = applyEdits(crlf, m.edits);
    assert.equal(after.replace(/\r\n/g, '').includes('\n'), false, 'a bare LF in the CRLF result');
    assert.equal(after, fixture('migrate/fsdp1_checkpoint_helpers.fsdp2.py').replace(/\n/g, '\r\n'));
    assert.deepEqual(migrateToFsdp2(await scanSource(after, 'checkpointing.py'), after).edits, []);
  });

  it('no_sync and clip_grad_norm_ on a parameter: a note, unless a class call there names the module', async () => {
    const lines = [
      'import torch',
      'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP',
      '',
      '',
      'def run_epoch(model, batches, optimizer):',
      '    for batch in batches:',
      '        with model.no_sync():',
      '            model(**batch).loss.backward()',
      '        model.clip_grad_norm_(1.0, norm_type=2.0)',
      '        optimizer.step()',
      '',
      '',
      'def run_epoch_clipped(model, batches, optimizer):',
      '    for batch in batches:',
      '        with model.no_sync():',
      '            model(**batch).loss.backward()',
      '        FSDP.clip_grad_norm_(model, 0.5)',
      '        optimizer.step()',
      '',
    ];
    const text = lines.join('\n');
    const m = migrateToFsdp2(await scanSource(text, 'loop.py'), text);
    const after = applyEdits(text, m.edits);
    // run_epoch: as it was. run_epoch_clipped: FSDP.clip_grad_norm_ says `model` is FSDP1's there.
    assert.equal(
      after,
      [
        ...lines.slice(0, 14),
        '        model.set_requires_gradient_sync(False)',
        '        model(**batch).loss.backward()',
        '        model.set_requires_gradient_sync(True)',
        '        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)',
        '        optimizer.step()',
        '',
      ].join('\n'),
    );
    assert.match(m.notes[0]!, /^the file holds no FSDP1 wrap .*: model in run_epoch_clipped\(\)$/);
    assert.match(
      m.notes[1]!,
      /^line 7: model\.no_sync\(\) is left: the file holds no FSDP1 wrap, and run_epoch\(\) makes no FSDP1 class call on model .*; if it is, and its wrap moves to fully_shard, the block becomes model\.set_requires_gradient_sync\(False\) before its body and model\.set_requires_gradient_sync\(True\) after it/,
    );
    assert.match(
      m.notes[2]!,
      /^line 9: model\.clip_grad_norm_\(\.\.\.\) is left: .*it becomes torch\.nn\.utils\.clip_grad_norm_\(model\.parameters\(\), 1\.0, norm_type=2\.0\)/,
    );
    assert.match(m.notes[3]!, /^line 15: no_sync\(\) rewritten as set_requires_gradient_sync\(False\)/);
    assert.equal(m.notes.length, 4);
    const facts = await scanSource(after, 'loop.py');
    assert.deepEqual(fsdp1Left(facts), ['no_sync 7', 'clip_grad_norm_ 9']);
    assert.deepEqual(migrateToFsdp2(facts, after).edits, []);
  });

  it('says nothing on no_sync in a file that does not use FSDP1 (DDP has no_sync too)', async () => {
    const text = [
      'def run_epoch(model, batches):',
      '    for batch in batches:',
      '        with model.no_sync():',
      '            model(**batch).loss.backward()',
      '',
    ].join('\n');
    assert.deepEqual(migrateToFsdp2(await scanSource(text, 'loop.py'), text), {
      edits: [],
      notes: [],
      skipped: [],
    });
  });

  it('reads the module where FSDP1 takes it: second for scatter and shard, third for rekey', async () => {
    const text = [
      'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP',
      '',
      'def load(net, opt, full, key_type):',
      '    a = FSDP.scatter_full_optim_state_dict(full, net)',
      '    b = FSDP.shard_full_optim_state_dict(full, model=net, optim=opt)',
      '    c = FSDP.rekey_optim_state_dict(full, key_type, net)',
      '    d = FSDP.optim_state_dict_to_load(net, opt, full)',
      '',
    ].join('\n');
    const facts = await scanSource(text, 'load.py');
    assert.deepEqual(
      facts.fsdp1Calls!.map((c) => [c.method, c.module, c.args.map((a) => a.text)]),
      [
        ['scatter_full_optim_state_dict', 'net', ['full']],
        ['shard_full_optim_state_dict', 'net', ['full', 'opt']],
        ['rekey_optim_state_dict', 'net', ['full', 'key_type']],
        ['optim_state_dict_to_load', 'net', ['opt', 'full']],
      ],
    );
    const m = migrateToFsdp2(facts, text);
    assert.deepEqual(m.edits, []);
    assert.match(
      m.notes[1]!,
      /^line 5: .*set_optimizer_state_dict\(net, opt, full, options=StateDictOptions\(full_state_dict=True\)\) loads the full optimizer state into the optimizer itself/,
    );
  });

  it('`fsdp-lens migrate` on the helpers: the diff in whole lines, the notes, and no estimate', async () => {
    const dir = projectDir('fsdp-lens-migrate-helpers-');
    const file = path.join(dir, 'checkpointing.py');
    fs.writeFileSync(file, fixture('migrate/fsdp1_checkpoint_helpers.py'));
    const r = await cli('migrate', file);
    assert.equal(r.code, 0, r.err);
    // A call rewritten inside its line shows as the whole line.
    assert.match(
      r.out,
      /^@@ -22,1 \+22,1 @@\n- {4}gathered = FSDP\.full_optim_state_dict\(net, opt\)\n\+ {4}gathered = get_optimizer_state_dict\(net, opt, options=StateDictOptions\(full_state_dict=True, cpu_offload=True\)\)$/m,
    );
    assert.match(r.out, /^note: the file holds no FSDP1 wrap/m);
    assert.match(r.out, /^estimate: none: the file wraps no model/m);
    assert.doesNotMatch(r.out, /^before:/m);
    assert.equal(fs.readFileSync(file, 'utf8'), fixture('migrate/fsdp1_checkpoint_helpers.py'));
    assert.equal((await cli('migrate', file, '--write')).code, 0);
    assert.equal(fs.readFileSync(file, 'utf8'), fixture('migrate/fsdp1_checkpoint_helpers.fsdp2.py'));
    // Only notes: printed, and nothing to carry over.
    const loop = path.join(dir, 'loop.py');
    fs.writeFileSync(
      loop,
      [
        'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP',
        'def run_epoch(model, batches):',
        '    for batch in batches:',
        '        with model.no_sync():',
        '            model(**batch).loss.backward()',
        '',
      ].join('\n'),
    );
    const notes = await cli('migrate', loop);
    assert.equal(notes.code, 2);
    assert.match(notes.out, /^note: line 4: model\.no_sync\(\) is left: the file holds no FSDP1 wrap/m);
    assert.match(
      notes.err,
      /no FSDP1 wrap \(FullyShardedDataParallel\) and no FSDP1 call the rewrite can carry over/,
    );
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
