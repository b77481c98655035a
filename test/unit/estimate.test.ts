import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { emptyFacts } from '../../src/core/analysis/facts';
import type { ShardingStrategyName } from '../../src/core/vocabulary/fsdp';
import { certainPeakBytes, estimate } from '../../src/core/estimator/estimate';
import { trafficBytes } from '../../src/core/estimator/collectives';
import type { Estimate, Plan } from '../../src/core/estimator/types';
import { fmtBytes, fmtCount } from '../../src/core/vocabulary/bytes';
import { defaultUnits, unitsFromPolicy } from '../../src/core/plan/policies';
import { CATALOG } from '../../src/core/model/catalog';
import { findGpu, gpuBytes } from '../../src/core/hardware/catalog';
import { requiredBytes } from '../../src/core/estimator/fit';
import { modelFromHfConfig } from '../../src/core/model/hf';
import { estimateFile } from '../../src/core/resolve/analyze';
import { DEFAULTS, type SetupValues } from '../../src/core/inputs/table';
import { resolveSetup } from '../../src/core/inputs/layers';
import { fromPyproject } from '../../src/core/project/settings';
import { Project } from '../../src/core/project/project';
import { diskFS } from '../../src/host/disk';
import { cli, defaultInput, FIXTURES, grammar, scanSource, tempDir } from './helpers';
import { analyzeConfigText } from '../../src/core/entry/analyze';
import { DEFAULT_LINT_OPTIONS } from '../../src/core/lint/types';
import { undecidedWhy } from '../../src/core/vocabulary/words';

const LLAMA_8B = 8_030_261_248;
const LLAMA_8B_LAYER = 218_112_000;
// Root unit of the default plan: embedding 128,256 x 4,096, final norm 4,096, untied head 128,256 x 4,096.
const LLAMA_8B_ROOT = 2 * 128_256 * 4096 + 4096;

function run(
  id: string,
  values: SetupValues = {},
  plan?: (root: ReturnType<typeof modelFromHfConfig>) => Plan,
): Estimate {
  const m = modelFromHfConfig(CATALOG[id]!);
  const { setup, assumptions } = resolveSetup([{ source: { kind: 'flag' }, values }]);
  return estimate({
    model: { name: id, root: m.root, shape: m.shape, source: { kind: 'flag' } },
    plan: plan?.(m) ?? {
      api: 'fsdp2',
      strategy: 'FULL_SHARD',
      units: defaultUnits(m.root, m.shape.blockClass, 'default'),
      source: { kind: 'default' },
      notes: [],
    },
    setup,
    assumptions,
  });
}

function fsdp1(strategy: ShardingStrategyName) {
  return (m: ReturnType<typeof modelFromHfConfig>): Plan => ({
    api: 'fsdp1',
    strategy,
    units: unitsFromPolicy(
      m.root,
      { policy: 'transformer', classes: [m.shape.blockClass] },
      {
        fallbackClasses: [],
        origin: 'test',
        offload: false,
        reshardAfterForward: true,
      },
    ).units,
    source: { kind: 'default' },
    notes: [],
  });
}

describe('counts as written', () => {
  it('groups digits in threes with commas', () => {
    assert.equal(fmtCount(0), '0');
    assert.equal(fmtCount(999), '999');
    assert.equal(fmtCount(1000), '1,000');
    assert.equal(fmtCount(8_030_261_248), '8,030,261,248');
    assert.equal(fmtCount(-1_234_567.4), '-1,234,567');
  });
});

describe('worked example: Llama 3.1 8B on 8 GPUs (ESTIMATOR.md)', () => {
  const e = run('meta-llama/Llama-3.1-8B');

  it('has 8,030,261,248 parameters; one decoder layer is 218,112,000 = 0.436 GB in bf16', () => {
    assert.equal(e.model.params, LLAMA_8B);
    const layer = e.units.find((u) => u.name === 'model.layers.0')!;
    assert.equal(layer.params, LLAMA_8B_LAYER);
    assert.equal(layer.gatheredBytes, LLAMA_8B_LAYER * 2);
    assert.equal(fmtBytes(layer.gatheredBytes), '0.436 GB');
    assert.equal(e.units.length, 33);
    assert.equal(e.units[32]!.params, LLAMA_8B_ROOT);
  });

  it('holds 16.1 GB of model state per GPU: 16 bytes per parameter over 8 GPUs = 16,060,522,496 bytes', () => {
    // fp32 sharded parameters (4 B) + fp32 sharded gradients (4 B) + two fp32 AdamW moments (8 B), / 8 GPUs.
    assert.equal(e.perGpu.modelStateBytes, (LLAMA_8B * 16) / 8);
    assert.equal(e.perGpu.modelStateBytes, 16_060_522_496);
    assert.equal(fmtBytes(e.perGpu.modelStateBytes), '16.1 GB');
    // Persistent adds the buffers (rotary inv_freq: 64 fp32 values).
    assert.equal(e.perGpu.persistentBytes, 16_060_522_496 + 64 * 4);
  });

  it('plain data parallelism would need 128.5 GB on every GPU', () => {
    assert.equal(e.modelStateTotalBytes, LLAMA_8B * 16);
    assert.equal((e.modelStateTotalBytes / 1e9).toFixed(1), '128.5');
  });

  it('moves 40.3 GB per GPU per step against 42.2 GB for ZeRO-3 and 28.1 GB for DDP in bf16', () => {
    const P = LLAMA_8B;
    // ZeRO-3: 3 x model bytes (bf16) x 7/8.
    assert.equal(e.comms.zero3ReferenceBytes, (3 * P * 2 * 7) / 8);
    assert.equal(fmtBytes(e.comms.zero3ReferenceBytes), '42.2 GB');
    // DDP: one all-reduce of every gradient, 2 x 7/8 x P x 2 B.
    assert.equal(e.comms.ddpAllReduceBytes, (2 * 7 * P * 2) / 8);
    assert.equal(fmtBytes(e.comms.ddpAllReduceBytes), '28.1 GB');
    assert.equal(e.comms.ddpDtype, 'bfloat16');
    // The root stays gathered from forward to backward: its parameters are all-gathered once, not twice.
    const expected = ((3 * P - LLAMA_8B_ROOT) * 2 * 7) / 8;
    assert.equal(trafficBytes(e.comms.perStep), expected);
    assert.equal(fmtBytes(trafficBytes(e.comms.perStep)), '40.3 GB');
    assert.deepEqual(e.comms.perStep.collectives, { allGather: 32 * 2 + 1, reduceScatter: 33, allReduce: 0 });
  });
});

describe('worked example: Llama 3.1 70B on 8 GPUs', () => {
  const e = run('meta-llama/Llama-3.1-70B');
  it('holds 1.13 TB of model state, 141 GB per GPU', () => {
    assert.equal(e.model.params, 70_553_706_496);
    assert.equal(e.modelStateTotalBytes, 70_553_706_496 * 16);
    assert.equal(fmtBytes(e.modelStateTotalBytes), '1.13 TB');
    assert.equal(e.perGpu.modelStateBytes, (70_553_706_496 * 16) / 8);
    assert.equal(fmtBytes(e.perGpu.modelStateBytes), '141 GB');
  });
});

describe('sharding semantics', () => {
  it('pads each parameter on dim 0: ceil(rows / W) per rank (FSDP2)', () => {
    // GPT-2's vocabulary (50,257 rows) does not divide by 8: each rank holds ceil(50257/8) = 6,283 rows.
    const e = run('openai-community/gpt2', { worldSize: 8, paramDtype: null, optimizer: 'sgd' });
    const root = e.units.find((u) => u.isRoot)!;
    // wte 50257x768 (tied head counted once), wpe 1024x768, ln_f 768 + 768 (1-D: ceil(768/8) = 96 each).
    const rows = Math.ceil(50257 / 8) * 768 + (1024 / 8) * 768 + 2 * 96;
    assert.equal(root.shard.params, rows * 4);
  });

  it('FSDP1 flattens a unit and pads it to a multiple of W', () => {
    const e = run('openai-community/gpt2', { worldSize: 8, optimizer: 'sgd' }, fsdp1('FULL_SHARD'));
    const root = e.units.find((u) => u.isRoot)!;
    assert.equal(root.shard.params, Math.ceil(root.params / 8) * 4);
  });

  it('FSDP1 with the transformer policy gives the same units and numbers as FSDP2 per-block wrapping', () => {
    const a = run('meta-llama/Llama-3.1-8B');
    const b = run('meta-llama/Llama-3.1-8B', {}, fsdp1('FULL_SHARD'));
    assert.deepEqual(
      b.units.map((u) => u.params),
      a.units.map((u) => u.params),
    );
    assert.equal(b.perGpu.modelStateBytes, a.perGpu.modelStateBytes);
    assert.equal(trafficBytes(b.comms.perStep), trafficBytes(a.comms.perStep));
  });

  it('a root that owns no parameters runs no collectives (no FlatParamHandle / FSDPParamGroup)', () => {
    // Llama 3.1 8B with its 32 blocks and a unit of [embed_tokens, norm, lm_head] wrapped before the root: the root
    // is left with nothing. Every unit that owns parameters is gathered once in forward and once in backward
    // (FULL_SHARD / reshard_after_forward=True) and reduce-scattered once: 33 x 2 = 66 all-gathers, 33
    // reduce-scatters; the empty root adds none. SHARD_GRAD_OP gathers each once: 33 and 33.
    for (const [api, strategy, allGather] of [
      ['fsdp2', 'FULL_SHARD', 66],
      ['fsdp1', 'FULL_SHARD', 66],
      ['fsdp1', 'SHARD_GRAD_OP', 33],
    ] as const) {
      const e = run('meta-llama/Llama-3.1-8B', {}, (m) => {
        const units = defaultUnits(m.root, m.shape.blockClass, 'test');
        const root = units.pop()!;
        return {
          api,
          strategy,
          units: [
            ...units,
            { ...root, isRoot: false, modules: ['model.embed_tokens', 'model.norm', 'lm_head'] },
            root,
          ],
          source: { kind: 'default' },
          notes: [],
        };
      });
      const root = e.units.find((u) => u.isRoot)!;
      assert.equal(root.params, 0);
      assert.deepEqual(root.traffic.collectives, { allGather: 0, reduceScatter: 0, allReduce: 0 });
      // Nor a post-backward in the timeline.
      assert.equal(e.timeline!.events.filter((ev) => ev.label === `${root.name}: reduce-scatter`).length, 0);
      assert.equal(e.timeline!.events.filter((ev) => ev.label.endsWith(': reduce-scatter')).length, 33);
      assert.deepEqual(
        e.comms.perStep.collectives,
        { allGather, reduceScatter: 33, allReduce: 0 },
        `${api} ${strategy}`,
      );
    }
  });

  it('SHARD_GRAD_OP gathers once in forward (no backward all-gather); NO_SHARD all-reduces whole gradients', () => {
    const sgo = run('meta-llama/Llama-3.1-8B', {}, fsdp1('SHARD_GRAD_OP'));
    assert.equal(sgo.comms.perStep.collectives.allGather, 33);
    assert.equal(sgo.comms.perStep.allGatherBytes, (LLAMA_8B * 2 * 7) / 8);
    const ns = run('meta-llama/Llama-3.1-8B', {}, fsdp1('NO_SHARD'));
    assert.equal(ns.comms.perStep.allGatherBytes, 0);
    assert.equal(ns.comms.perStep.allReduceBytes, (2 * 7 * LLAMA_8B * 2) / 8);
    assert.equal(ns.perGpu.modelStateBytes, LLAMA_8B * 16);
  });

  it('with collectives in one dtype: FULL_SHARD <= SHARD_GRAD_OP <= NO_SHARD in memory, the reverse in traffic', () => {
    const one = { reduceDtype: 'bfloat16' as const };
    const [fs, sgo, ns] = (['FULL_SHARD', 'SHARD_GRAD_OP', 'NO_SHARD'] as const).map((s) =>
      run('meta-llama/Llama-3.2-1B', one, fsdp1(s)),
    );
    assert.ok(fs!.perGpu.persistentBytes <= sgo!.perGpu.persistentBytes);
    assert.ok(sgo!.perGpu.persistentBytes < ns!.perGpu.persistentBytes);
    assert.ok(trafficBytes(fs!.comms.perStep) > trafficBytes(sgo!.comms.perStep));
    assert.ok(trafficBytes(sgo!.comms.perStep) >= trafficBytes(ns!.comms.perStep));
  });

  it('HSDP: shards within a group of W, all-reduces the shards across R replicas', () => {
    const e = run('meta-llama/Llama-3.1-8B', { worldSize: 16, replicas: 2 });
    assert.equal(e.mesh.shardGroup, 8);
    assert.equal(e.mesh.replicas, 2);
    assert.equal(e.perGpu.modelStateBytes, 16_060_522_496);
    // 2 x (R-1)/R x (P/W) x 2 B per step.
    assert.equal(e.comms.perStep.allReduceBytes, (2 * (1 / 2) * LLAMA_8B * 2) / 8);
    assert.equal(e.comms.perStep.collectives.allReduce, 33);
  });

  it('reshard_after_forward=k gathers backward over k ranks; False keeps the unit gathered', () => {
    const m = modelFromHfConfig(CATALOG['meta-llama/Llama-3.2-1B']!);
    const withReshard = (r: boolean | number) => (): Plan => ({
      api: 'fsdp2',
      strategy: 'FULL_SHARD',
      units: defaultUnits(m.root, m.shape.blockClass, 't').map((u) =>
        u.isRoot ? u : { ...u, reshardAfterForward: r },
      ),
      source: { kind: 'default' },
      notes: [],
    });
    const block = (e: Estimate) => e.units[0]!;
    const P = block(run('meta-llama/Llama-3.2-1B')).params;
    assert.equal(
      block(run('meta-llama/Llama-3.2-1B', {}, withReshard(true))).traffic.backwardAllGatherBytes,
      (P * 2 * 7) / 8,
    );
    assert.equal(
      block(run('meta-llama/Llama-3.2-1B', {}, withReshard(4))).traffic.backwardAllGatherBytes,
      (P * 2 * 3) / 4,
    );
    assert.equal(
      block(run('meta-llama/Llama-3.2-1B', {}, withReshard(false))).traffic.backwardAllGatherBytes,
      0,
    );
    assert.equal(block(run('meta-llama/Llama-3.2-1B', {}, withReshard(8))).residency.kind, 'reshard');
  });

  it('gradient accumulation: traffic per step is K micro-batches, or K gathers and one reduction without sync', () => {
    const one = run('meta-llama/Llama-3.2-1B');
    const k4 = run('meta-llama/Llama-3.2-1B', { gradAccum: 4 });
    assert.equal(trafficBytes(k4.comms.perStep), 4 * trafficBytes(one.comms.perStep));
    const noSync = run('meta-llama/Llama-3.2-1B', { gradAccum: 4, syncEveryMicroBatch: false });
    assert.equal(noSync.comms.perStep.allGatherBytes, 4 * one.comms.perStep.allGatherBytes);
    assert.equal(noSync.comms.perStep.reduceScatterBytes, one.comms.perStep.reduceScatterBytes);
  });

  it('optimizers: SGD keeps no state, momentum one, 8-bit Adam two bytes', () => {
    const opt = (o: SetupValues['optimizer']) =>
      run('meta-llama/Llama-3.2-1B', { optimizer: o }).perGpu.persistent.terms.find(
        (t) => t.name === 'optimizer state',
      )!.bytes;
    const P = 1_235_814_400;
    assert.equal(opt('adamw'), (P * 8) / 8);
    assert.equal(opt('sgd'), 0);
    assert.equal(opt('sgd-momentum'), (P * 4) / 8);
    assert.equal(opt('adam8bit'), (P * 2) / 8);
  });
});

describe('properties over the catalog', () => {
  for (const id of [
    'meta-llama/Llama-3.1-8B',
    'mistralai/Mixtral-8x7B-v0.1',
    'openai-community/gpt2',
    'google/gemma-2-2b',
  ]) {
    it(`${id}: more GPUs never raise persistent memory`, () => {
      let last = Infinity;
      for (const w of [1, 2, 3, 4, 7, 8, 16, 24, 64, 256, 1024]) {
        const p = run(id, { worldSize: w, gpusPerNode: 8 }).perGpu.persistentBytes;
        assert.ok(p <= last, `${w} GPUs: ${p} > ${last}`);
        last = p;
      }
    });
  }

  it('smaller units add collectives (size-based policy thresholds)', () => {
    const m = modelFromHfConfig(CATALOG['meta-llama/Llama-3.1-8B']!);
    const collectives = (min: number) => {
      const plan: Plan = {
        api: 'fsdp1',
        strategy: 'FULL_SHARD',
        units: unitsFromPolicy(
          m.root,
          { policy: 'size', minNumParams: min },
          { fallbackClasses: [], origin: 't', offload: false, reshardAfterForward: true },
        ).units,
        source: { kind: 'default' },
        notes: [],
      };
      const { setup, assumptions } = resolveSetup([]);
      const e = estimate({
        model: { name: 'x', root: m.root, shape: m.shape, source: { kind: 'default' } },
        plan,
        setup,
        assumptions,
      });
      const c = e.comms.perStep.collectives;
      return { units: e.units.length, total: c.allGather + c.reduceScatter };
    };
    const coarse = collectives(500_000_000);
    const fine = collectives(50_000_000);
    assert.ok(fine.units > coarse.units);
    assert.ok(fine.total > coarse.total);
  });
});

describe('FSDP1 size-based policy, as wrap.py applies it', () => {
  it('wraps every decoder layer at 100M (each 218M), and the root takes the rest', () => {
    const m = modelFromHfConfig(CATALOG['meta-llama/Llama-3.1-8B']!);
    const { units } = unitsFromPolicy(
      m.root,
      { policy: 'size', minNumParams: 100_000_000 },
      { fallbackClasses: [], origin: 't', offload: false, reshardAfterForward: true },
    );
    // Each layer: 218M >= 100M, its children (self_attn 41.9M, mlp 176M) — the MLP alone passes, so it is wrapped
    // first, then the layer's remainder (attention + norms, 41.9M) stays below 100M and the layer is not wrapped.
    const paths = units.map((u) => u.modules[0]);
    assert.ok(paths.includes('model.layers.0.mlp'));
    assert.ok(!paths.includes('model.layers.0'));
    // The embedding (525M) and head (525M) are wrapped on their own; ModuleList is never wrapped.
    assert.ok(paths.includes('model.embed_tokens'));
    assert.ok(paths.includes('lm_head'));
    assert.ok(!paths.includes('model.layers'));
    assert.equal(paths[paths.length - 1], '');
  });
});

describe('estimates from scripts', () => {
  it('reads the plan, mesh and mixed precision of a script', async () => {
    const facts = await scanSource(
      [
        'import torch',
        'from torch.distributed.device_mesh import init_device_mesh',
        'from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard',
        'from transformers import AutoModelForCausalLM',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")',
        'mesh = init_device_mesh("cuda", (2, 8), mesh_dim_names=("replicate", "shard"))',
        'mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)',
        'for layer in model.model.layers:',
        '    fully_shard(layer, mesh=mesh, mp_policy=mp)',
        'fully_shard(model, mesh=mesh, mp_policy=mp)',
        'opt = torch.optim.AdamW(model.parameters())',
        '',
      ].join('\n'),
      'train.py',
    );
    const r = estimateFile(facts);
    assert.ok(r.ok, r.ok ? '' : r.reason);
    const e = r.estimate;
    assert.equal(e.units.length, 33);
    assert.equal(e.mesh.worldSize, 16);
    assert.equal(e.mesh.replicas, 2);
    assert.equal(e.comms.reduceDtype, 'float32');
    const source = (k: string) => e.assumptions.find((a) => a.key === k)!.source;
    assert.deepEqual(source('worldSize'), { kind: 'detected', detail: 'train.py:6' });
    assert.deepEqual(source('reduceDtype'), { kind: 'detected', detail: 'train.py:10' });
    assert.equal(source('model').detail, 'train.py:5');
  });

  it('a guard clause (`if not isinstance(m, Block): continue`) selects the blocks like an if around the wrap', async () => {
    for (const guard of [
      ['    if not isinstance(module, LlamaDecoderLayer):', '        continue'],
      ['    if not isinstance(module, (LlamaDecoderLayer,)):', '        # only blocks', '        continue'],
    ]) {
      const facts = await scanSource(
        [
          'from torch.distributed.fsdp import fully_shard',
          'from transformers import AutoModelForCausalLM',
          'from transformers.models.llama.modeling_llama import LlamaDecoderLayer',
          'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")',
          'for name, module in model.named_modules():',
          ...guard,
          '    fully_shard(module)',
          'fully_shard(model)',
          '',
        ].join('\n'),
        'train.py',
      );
      assert.deepEqual(facts.calls[0]!.classFilter, ['LlamaDecoderLayer']);
      const r = estimateFile(facts);
      assert.ok(r.ok, r.ok ? '' : r.reason);
      // 32 decoder layers, then the root with the embedding, final norm and head.
      assert.equal(r.estimate.units.length, 33);
    }
  });

  it('a flag beats an annotation, an annotation beats the code, the code beats a setting', async () => {
    const facts = await scanSource(
      '# fsdp: world_size=32 batch=4\nfrom torch.distributed.device_mesh import init_device_mesh\nmesh = init_device_mesh("cuda", (8,))\n',
      'p.py',
    );
    const r = estimateFile(facts, {
      flags: {
        values: { microBatch: 2 },
        model: { id: 'meta-llama/Llama-3.2-1B', source: { kind: 'flag', detail: '--model' } },
      },
      settings: { worldSize: 64, seqLen: 1024, gpu: 'a100-sxm-80gb' },
    });
    assert.ok(r.ok);
    const a = (k: string) => r.estimate.assumptions.find((x) => x.key === k)!;
    assert.equal(r.estimate.setup.microBatch, 2);
    assert.equal(a('microBatch').source.kind, 'flag');
    assert.equal(r.estimate.setup.worldSize, 32);
    assert.equal(a('worldSize').source.kind, 'annotation');
    assert.equal(r.estimate.setup.seqLen, 1024);
    assert.equal(a('seqLen').source.kind, 'setting');
    assert.equal(a('optimizer').source.kind, 'default');
    assert.equal(DEFAULTS.optimizer, 'adamw');
  });

  it('wraps without a mixed-precision policy gather in the parameter dtype', async () => {
    const facts = await scanSource(
      'from torch.distributed.fsdp import fully_shard\nmodel = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")\nfor b in model.model.layers:\n    fully_shard(b)\nfully_shard(model)\n',
    );
    const r = estimateFile(facts);
    assert.ok(r.ok);
    assert.equal(r.estimate.comms.gatherDtype, 'float32');
  });

  it('says why there is no estimate', () => {
    const r = estimateFile(emptyFacts('x.py'));
    assert.equal(r.ok, false);
    assert.match(r.ok ? '' : r.reason, /does not say which model/);
    const r2 = estimateFile(emptyFacts('x.py'), {
      flags: { values: {}, model: { id: 'nobody/none', source: { kind: 'flag' } } },
    });
    assert.match(r2.ok ? '' : r2.reason, /not in the Hugging Face cache .* nor in the built-in catalog/);
  });
});

describe('attention kind: flag, annotation, pyproject and the code', () => {
  const script = (impl: string, extra = '') =>
    scanSource(
      [
        extra,
        'from transformers import AutoModelForCausalLM',
        `model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", attn_implementation="${impl}")`,
        '',
      ].join('\n'),
      'train.py',
    );
  // Llama 3.2 1B (16 blocks, 32 heads, 8 KV heads of 64) at the default 4,096 tokens, micro-batch 1: eager
  // attention keeps 6 bytes per score element (the fp32 softmax output and its bf16 cast) of a 32 x 4096 x 4096
  // score matrix per block, and K and V expanded from 8 to 32 heads (2 x 2 B x 4096 x 24 x 64).
  const EAGER_EXTRA = 16 * (6 * 32 * 4096 * 4096 + 2 * 2 * 4096 * 24 * 64);

  it('reads attn_implementation="eager" from from_pretrained, and "sdpa" / "flash_attention_2" as fused', async () => {
    const eager = estimateFile(await script('eager'));
    assert.ok(eager.ok);
    assert.equal(eager.estimate.setup.attention, 'eager');
    const a = eager.estimate.assumptions.find((x) => x.key === 'attention')!;
    assert.deepEqual(a.source, { kind: 'detected', detail: 'train.py:3 (attn_implementation="eager")' });
    for (const impl of ['sdpa', 'flash_attention_2']) {
      const r = estimateFile(await script(impl));
      assert.ok(r.ok);
      assert.equal(r.estimate.setup.attention, 'fused', impl);
      assert.equal(r.estimate.assumptions.find((x) => x.key === 'attention')!.source.kind, 'detected');
      assert.equal(
        eager.estimate.timeline!.activationBytes - r.estimate.timeline!.activationBytes,
        EAGER_EXTRA,
      );
    }
  });

  it('an unknown attn_implementation leaves the default', async () => {
    const r = estimateFile(await script('my_custom_kernel'));
    assert.ok(r.ok);
    assert.equal(r.estimate.setup.attention, 'fused');
    assert.equal(r.estimate.assumptions.find((x) => x.key === 'attention')!.source.kind, 'default');
  });

  it('an annotation beats the code, a flag beats the annotation', async () => {
    const annotated = await script('sdpa', '# fsdp: attention=eager');
    const r = estimateFile(annotated);
    assert.ok(r.ok);
    assert.equal(r.estimate.setup.attention, 'eager');
    assert.equal(r.estimate.assumptions.find((x) => x.key === 'attention')!.source.kind, 'annotation');
    const f = estimateFile(annotated, { flags: { values: { attention: 'fused' } } });
    assert.ok(f.ok);
    assert.equal(f.estimate.setup.attention, 'fused');
    assert.equal(f.estimate.assumptions.find((x) => x.key === 'attention')!.source.kind, 'flag');
    assert.equal(r.estimate.timeline!.activationBytes - f.estimate.timeline!.activationBytes, EAGER_EXTRA);
  });

  it('a bad annotation value says what is accepted', async () => {
    const r = estimateFile(await script('sdpa', '# fsdp: attention=slow'));
    assert.equal(r.ok, false);
    assert.match(r.ok ? '' : r.reason, /attention .* must be fused or eager/);
  });

  it('[tool.fsdp-lens] attention in pyproject.toml', () => {
    const p = fromPyproject('[tool.fsdp-lens]\nattention = "eager"\n', '/x/pyproject.toml')!;
    assert.equal(p.layer.values.attention, 'eager');
    assert.deepEqual(p.problems, []);
    const sdpa = fromPyproject('[tool.fsdp-lens]\nattn_implementation = "sdpa"\n', '/x/pyproject.toml')!;
    assert.equal(sdpa.layer.values.attention, 'fused');
    const bad = fromPyproject('[tool.fsdp-lens]\nattention = "slow"\n', '/x/pyproject.toml')!;
    assert.equal(bad.layer.values.attention, undefined);
    assert.match(bad.problems[0]!, /must be fused or eager/);
  });

  it('--attention eager on the command line; a bad value exits 2', async () => {
    const fused = await cli('estimate', '--model', 'meta-llama/Llama-3.2-1B', '--json');
    const eager = await cli(
      'estimate',
      '--model',
      'meta-llama/Llama-3.2-1B',
      '--attention',
      'eager',
      '--json',
    );
    assert.equal(eager.code, 0, eager.err);
    const act = (r: { out: string }) =>
      (JSON.parse(r.out) as { perGpu: { activationBytes: number } }).perGpu.activationBytes;
    assert.equal(act(eager) - act(fused), EAGER_EXTRA);
    const bad = await cli('estimate', '--model', 'meta-llama/Llama-3.2-1B', '--attention', 'slow');
    assert.equal(bad.code, 2);
    assert.match(bad.err, /--attention must be fused or eager/);
  });
});

describe('dtype inputs: only the dtypes each one can take', () => {
  it('--param-dtype / --reduce-dtype take fp32, bf16 or fp16; --master-dtype fp32 or bf16; others exit 2', async () => {
    for (const [flag, value, msg] of [
      [
        '--param-dtype',
        'int8',
        /--param-dtype must be fp32, bf16 or fp16, not "int8" \(int8 is a storage format/,
      ],
      ['--param-dtype', 'nf4', /--param-dtype must be fp32, bf16 or fp16, not "nf4".*--base-dtype nf4/],
      ['--reduce-dtype', 'uint8', /--reduce-dtype must be fp32, bf16 or fp16, not "uint8"/],
      ['--reduce-dtype', 'float64', /--reduce-dtype must be fp32, bf16 or fp16, not "float64"/],
      ['--master-dtype', 'int8', /--master-dtype must be fp32 or bf16, not "int8"/],
      ['--master-dtype', 'fp16', /--master-dtype must be fp32 or bf16, not "fp16"/],
      ['--master-dtype', 'nf4', /--master-dtype must be fp32 or bf16, not "nf4"/],
    ] as const) {
      const r = await cli('estimate', '--model', 'meta-llama/Llama-3.1-8B', flag, value);
      assert.equal(r.code, 2, `${flag} ${value}`);
      assert.match(r.err, msg);
      assert.equal(r.out, '');
    }
  });

  it('the accepted spellings still parse, and pure-bf16 master weights halve the master copy', async () => {
    const bf16 = await cli(
      'estimate',
      '--model',
      'meta-llama/Llama-3.1-8B',
      '--master-dtype',
      'bf16',
      '--json',
    );
    assert.equal(bf16.code, 0, bf16.err);
    const j = JSON.parse(bf16.out) as { perGpu: { modelStateBytes: number } };
    // bf16 sharded params (2 B) + bf16 grads (2 B) + two bf16 AdamW states (4 B) = 8 B per parameter, over 8 GPUs.
    assert.equal(j.perGpu.modelStateBytes, (LLAMA_8B * 8) / 8);
    for (const v of ['fp32', 'float32', 'torch.bfloat16', 'BF16', 'half', 'fp16'])
      assert.equal(
        (await cli('estimate', '--model', 'meta-llama/Llama-3.1-8B', '--param-dtype', v, '--json')).code,
        0,
        v,
      );
  });

  it('an annotation with an integer dtype gives no estimate but says why; pyproject.toml notes it and goes on', async () => {
    const facts = await scanSource(
      '# fsdp: param_dtype=int8\nfrom transformers import AutoModelForCausalLM\nmodel = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")\n',
      'train.py',
    );
    const r = estimateFile(facts);
    assert.equal(r.ok, false);
    assert.match(r.ok ? '' : r.reason, /param_dtype .* must be fp32, bf16 or fp16, not "int8"/);
    const p = fromPyproject(
      '[tool.fsdp-lens]\nmaster_dtype = "nf4"\nreduce_dtype = "fp32"\n',
      '/x/pyproject.toml',
    )!;
    assert.equal(p.layer.values.masterDtype, undefined);
    assert.equal(p.layer.values.reduceDtype, 'float32');
    assert.match(p.problems[0]!, /master_dtype .* must be fp32 or bf16, not "nf4"/);
  });
});

describe('reshard_after_forward as an int that the shard group cannot use', () => {
  const source = (k: string) =>
    [
      'from torch.distributed.device_mesh import init_device_mesh',
      'from torch.distributed.fsdp import fully_shard',
      'from transformers import AutoModelForCausalLM',
      'mesh = init_device_mesh("cuda", (8,))',
      'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
      'for layer in model.model.layers:',
      `    fully_shard(layer, mesh=mesh, reshard_after_forward=${k})`,
      'fully_shard(model, mesh=mesh)',
      '',
    ].join('\n');
  const script = (k: string) => scanSource(source(k), 'train.py');

  it('3 on a shard group of 8: PyTorch raises at fully_shard; the estimate says so and how it modelled it', async () => {
    const r = estimateFile(await script('3'));
    assert.ok(r.ok);
    const note = r.estimate.notes.find((n) => n.startsWith('reshard_after_forward=3'));
    assert.ok(note, r.estimate.notes.join('\n'));
    assert.match(note, /not a factor of the shard group size 8: fully_shard raises ValueError/);
    assert.match(note, /\(16 units\)/);
    assert.match(note, /estimated as if each rank kept a 1\/3 slice after forward/);
    // The 16 blocks keep a 1/3 slice; the root stays gathered as the default does.
    assert.deepEqual(
      [...new Set(r.estimate.units.filter((u) => !u.isRoot).map((u) => JSON.stringify(u.residency)))],
      ['{"kind":"slice","ranks":3}'],
    );
    // The command line prints it among the notes.
    const dir = tempDir('fsdp-lens-raf-');
    const file = path.join(dir, 'train.py');
    fs.writeFileSync(file, source('3'));
    const text = await cli('estimate', file);
    assert.equal(text.code, 0, text.err);
    assert.match(text.out, /^ {2}- reshard_after_forward=3 .*fully_shard raises ValueError/m);
  });

  it('a divisor (4), True and an int equal to the group (8) raise nothing and get no note', async () => {
    for (const k of ['4', 'True', '8']) {
      const r = estimateFile(await script(k));
      assert.ok(r.ok);
      assert.equal(r.estimate.notes.filter((n) => n.startsWith('reshard_after_forward=')).length, 0, k);
    }
  });

  it('16 on 8 GPUs is modelled as True, and says so', async () => {
    const r = estimateFile(await script('16'));
    assert.ok(r.ok);
    assert.ok(r.estimate.units.filter((u) => !u.isRoot).every((u) => u.residency.kind === 'reshard'));
    assert.ok(
      r.estimate.notes.some((n) =>
        /^reshard_after_forward=16 .*factor of the shard group size 8.*estimated as reshard_after_forward=True/.test(
          n,
        ),
      ),
    );
  });
});

describe('host memory per node', () => {
  // Llama 3.1 8B: 8,030,261,248 parameters (see the worked example).
  const P = LLAMA_8B;
  const host = (e: Estimate, name: string) => e.hostPerNode.terms.find((t) => t.name === name)?.bytes;

  it('from_pretrained on every rank without the meta device: 8 processes of a node each load the whole model', async () => {
    const facts = await scanSource(
      [
        'import torch',
        'from torch.distributed.device_mesh import init_device_mesh',
        'from transformers import AutoModelForCausalLM',
        'mesh = init_device_mesh("cuda", (16,))',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", torch_dtype=torch.bfloat16)',
        'from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict',
        'sd = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))',
        '',
      ].join('\n'),
      'train.py',
    );
    const r = estimateFile(facts);
    assert.ok(r.ok);
    const e = r.estimate;
    assert.equal(e.mesh.worldSize, 16);
    // 8 GPUs per node: 8 x P x 2 B (bf16) = 128,484,179,968 B while loading.
    const loading = 8 * P * 2;
    assert.equal(loading, 128_484_179_968);
    assert.equal(host(e, 'loading (from_pretrained on every rank)'), loading);
    // StateDictOptions(full_state_dict=True, cpu_offload=True): a full state dict gathered into rank 0's CPU
    // memory in the parameters' dtype (bf16 from torch_dtype): P x 2 B.
    assert.equal(host(e, 'saving a full state dict on rank 0'), P * 2);
    // Loading and saving happen at different times: the node needs the larger.
    assert.equal(e.hostPerNode.bytes, loading);
  });

  it('a node with fewer processes than GPUs per node loads fewer copies', async () => {
    const facts = await scanSource(
      [
        '# fsdp: world_size=4',
        'from transformers import AutoModelForCausalLM',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")',
        '',
      ].join('\n'),
    );
    const r = estimateFile(facts);
    assert.ok(r.ok);
    // No torch_dtype: loaded in the fp32 master dtype, 4 processes x P x 4 B.
    assert.equal(host(r.estimate, 'loading (from_pretrained on every rank)'), 4 * P * 4);
    assert.equal(r.estimate.hostPerNode.bytes, 128_484_179_968);
  });

  it('on the meta device only the saving spike remains', () => {
    const e = estimate({
      ...defaultInput(CATALOG['meta-llama/Llama-3.1-8B']!),
      loading: { fromPretrained: true, meta: true, dtype: null },
      stateDict: { kind: 'full', detail: 'StateDictOptions at train.py:9' },
    });
    assert.equal(host(e, 'loading (from_pretrained on every rank)'), undefined);
    // fp32 master weights: P x 4 B = 32,121,044,992 B on rank 0.
    assert.equal(e.hostPerNode.bytes, P * 4);
    assert.equal(e.hostPerNode.bytes, 32_121_044_992);
  });

  it('CPU offload adds every process of the node its offloaded shard (no saving spike where nothing saves)', () => {
    const e = run('meta-llama/Llama-3.1-8B', {}, (m) => ({
      api: 'fsdp2',
      strategy: 'FULL_SHARD',
      units: defaultUnits(m.root, m.shape.blockClass, 't').map((u) => ({ ...u, offload: true })),
      source: { kind: 'default' },
      notes: [],
    }));
    // Each GPU offloads fp32 parameters, gradients and two AdamW moments: 16 B x P / 8 (every dim divides by 8).
    const perGpu = (16 * P) / 8;
    assert.equal(e.perGpu.hostBytes, perGpu);
    assert.equal(host(e, 'CPU offload'), 8 * perGpu);
    // The script gathers no full state dict: no saving term.
    assert.equal(host(e, 'saving a full state dict on rank 0'), undefined);
    assert.equal(e.hostPerNode.bytes, 8 * perGpu);
    assert.equal(e.hostPerNode.bytes, 128_484_179_968);
  });

  it('loading comes before anything is offloaded: the peak is the larger of loading and offload + saving', () => {
    const m = modelFromHfConfig(CATALOG['meta-llama/Llama-3.1-8B']!);
    const offloaded = (masterDtype: 'float32' | 'bfloat16', dtype: 'float32' | 'bfloat16' | null) => {
      const { setup, assumptions } = resolveSetup([{ source: { kind: 'flag' }, values: { masterDtype } }]);
      return estimate({
        model: { name: 'x', root: m.root, shape: m.shape, source: { kind: 'default' } },
        plan: {
          api: 'fsdp2',
          strategy: 'FULL_SHARD',
          units: defaultUnits(m.root, m.shape.blockClass, 't').map((u) => ({ ...u, offload: true })),
          source: { kind: 'default' },
          notes: [],
        },
        setup,
        assumptions,
        loading: { fromPretrained: true, meta: false, dtype },
        stateDict: { kind: 'full', detail: 'FullStateDictConfig at train.py:30' },
      });
    };
    // Loaded in bf16 and trained in pure bf16: each of 8 processes loads P x 2 B = 16 P on the node; afterwards
    // each offloads bf16 params 2 B + grads 2 B + AdamW states 2 x 2 B over 8 GPUs (8 P on the node) and rank 0
    // gathers a bf16 state dict (2 P): max(16 P, 8 P + 2 P) = 16 P, where adding them all gave 24 P.
    const bf16 = offloaded('bfloat16', 'bfloat16');
    assert.equal(host(bf16, 'loading (from_pretrained on every rank)'), 16 * P);
    assert.equal(host(bf16, 'CPU offload'), 8 * P);
    assert.equal(host(bf16, 'saving a full state dict on rank 0'), 2 * P);
    assert.equal(bf16.hostPerNode.bytes, 16 * P);
    assert.equal(bf16.hostPerNode.bytes, 128_484_179_968);
    // Loaded in bf16, fp32 master weights: loading 16 P; offload 16 B x P / 8 x 8 = 16 P plus an fp32 state dict
    // 4 P = 20 P during training, the larger.
    const fp32 = offloaded('float32', 'bfloat16');
    assert.equal(fp32.hostPerNode.bytes, Math.max(16 * P, 16 * P + 4 * P));
    assert.equal(fp32.hostPerNode.bytes, 160_605_224_960);
  });
});

describe('CPU offload as PyTorch decides it', () => {
  it("FSDP2 offloads for CPUOffloadPolicy, not for FSDP1's CPUOffload; a loop over nn.Sequential wraps its children", async () => {
    // 4 x Linear(1024, 1024): 4 x (1024 x 1024 + 1024) = 4,198,400 parameters; fp32 parameters, gradients and two
    // AdamW states are 16 B each, split over 8 GPUs (1024 rows divide by 8): 8,396,800 B per GPU.
    const bytes = (4 * (1024 * 1024 + 1024) * 16) / 8;
    assert.equal(bytes, 8_396_800);
    const run = async (name: string) => {
      const r = await cli('estimate', path.join(FIXTURES, 'lint', name), '--json');
      assert.equal(r.code, 0, r.err);
      return JSON.parse(r.out) as { perGpu: { hostBytes: number }; units: unknown[] };
    };
    const policy = await run('fsdp017_good.py');
    assert.equal(policy.units.length, 5);
    assert.equal(policy.perGpu.hostBytes, bytes);
    // FSDPParam offloads only for isinstance(offload_policy, CPUOffloadPolicy): FSDP1's object offloads nothing.
    assert.equal((await run('fsdp017_bad.py')).perGpu.hostBytes, 0);
  });
});

describe('HSDP replicas that do not divide the world', () => {
  it('--replicas R that does not divide --world-size is a usage error', async () => {
    const r = await cli(
      'estimate',
      '--model',
      'meta-llama/Llama-3.2-1B',
      '--world-size',
      '8',
      '--replicas',
      '3',
    );
    assert.equal(r.code, 2);
    assert.match(r.err, /--replicas 3 does not divide --world-size 8/);
  });

  it('--replicas R against a world size set elsewhere (the default 8) is a usage error too', async () => {
    const r = await cli('estimate', '--model', 'meta-llama/Llama-3.2-1B', '--replicas', '3');
    assert.equal(r.code, 2);
    assert.match(r.err, /--replicas 3 does not divide the world size 8/);
    const more = await cli(
      'estimate',
      '--model',
      'meta-llama/Llama-3.2-1B',
      '--world-size',
      '4',
      '--replicas',
      '8',
    );
    assert.equal(more.code, 2);
  });

  it('replicas that divide it shard within groups of world / R', async () => {
    const r = await cli(
      'estimate',
      '--model',
      'meta-llama/Llama-3.2-1B',
      '--world-size',
      '24',
      '--replicas',
      '3',
      '--json',
    );
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as { mesh: { shardGroup: number; replicas: number } };
    assert.deepEqual([j.mesh.shardGroup, j.mesh.replicas], [8, 3]);
  });

  it('from an annotation, replicas that do not divide are not used, and the assumption says why', async () => {
    const facts = await scanSource(
      '# fsdp: world_size=8 replicas=3\nfrom transformers import AutoModelForCausalLM\nmodel = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")\n',
    );
    const r = estimateFile(facts);
    assert.ok(r.ok);
    assert.equal(r.estimate.mesh.replicas, 1);
    assert.equal(r.estimate.mesh.shardGroup, 8);
    assert.match(
      r.estimate.assumptions.find((a) => a.key === 'replicas')!.value,
      /3 replicas do not divide 8/,
    );
  });
});

describe('FSDP over a slice of a larger mesh', () => {
  it('a ("dp", "tp") mesh: FSDP over dp alone, and a note that tp is not modelled', async () => {
    const facts = await scanSource(
      [
        'from torch.distributed.device_mesh import init_device_mesh',
        'from torch.distributed.fsdp import fully_shard',
        'from transformers import AutoModelForCausalLM',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")',
        'world = init_device_mesh("cuda", (4, 2), mesh_dim_names=("dp", "tp"))',
        'for layer in model.model.layers:',
        '    fully_shard(layer, mesh=world["dp"])',
        'fully_shard(model, mesh=world["dp"])',
        '',
      ].join('\n'),
      'tp.py',
    );
    const r = estimateFile(facts);
    assert.ok(r.ok);
    // The shard group is the 4 GPUs of the dp dimension: 8,030,261,248 x 16 B / 4 per GPU, plus the rotary buffer.
    assert.equal(r.estimate.mesh.shardGroup, 4);
    assert.equal(r.estimate.perGpu.persistentBytes, (8_030_261_248 * 16) / 4 + 256);
    assert.ok(
      r.estimate.notes.some((n) => /FSDP runs over the dp dimension of a dp x tp mesh of 8 GPUs/.test(n)),
      r.estimate.notes.join('\n'),
    );
    // Tensor parallelism is not modelled: the figures are FSDP's alone, and no fit verdict rests on them.
    assert.deepEqual(r.estimate.unmodelled, ["the mesh's tp dimension (2)"]);
    assert.equal(r.estimate.targetFit.verdict, 'undecided');
    assert.ok(r.estimate.fit.every((f) => f.verdict === 'undecided'));
  });
});

describe('CPU offload and time on the link, derived by hand', () => {
  // Llama 3.2 1B (hidden 2,048, 16 layers, 32 heads of 64 with 8 KV heads, MLP 8,192, vocabulary 128,256, tied head):
  // one layer = q 2048x2048 + k, v 2048x512 each + o 2048x2048 + gate, up, down 3 x 2048x8192 + 2 norms of 2048
  //           = 4,194,304 + 2 x 1,048,576 + 4,194,304 + 50,331,648 + 4,096 = 60,821,504;
  // model = 16 x 60,821,504 + embedding 128,256 x 2,048 + final norm 2,048 = 1,235,814,400.
  const LLAMA_1B = 1_235_814_400;
  const LAYER_1B = 4_194_304 + 2 * 1_048_576 + 4_194_304 + 3 * 2048 * 8192 + 2 * 2048;
  // Every dimension divides by 8 (FSDP2 pads no dim 0, FSDP1 pads no FlatParameter): each GPU offloads exactly 1/8
  // of fp32 parameters (4 B) + fp32 gradients (4 B) + two fp32 AdamW moments (8 B) = 16 B per parameter.
  const HOST_PER_GPU = (LLAMA_1B * 16) / 8;
  // What stays on the GPU: the rotary embedding's inv_freq buffer, head_dim / 2 = 32 fp32 values.
  const ROTARY_1B = (64 / 2) * 4;

  const offloadScripts: Record<string, string[]> = {
    'FSDP2 offload_policy=CPUOffloadPolicy() on every unit': [
      'from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard',
      'from transformers import AutoModelForCausalLM',
      'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
      'for layer in model.model.layers:',
      '    fully_shard(layer, offload_policy=CPUOffloadPolicy())',
      'fully_shard(model, offload_policy=CPUOffloadPolicy())',
    ],
    'FSDP2 with the policy given through a dict(...) config': [
      'from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard',
      'from transformers import AutoModelForCausalLM',
      'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
      'cfg = dict(offload_policy=CPUOffloadPolicy(pin_memory=True))',
      'for layer in model.model.layers:',
      '    fully_shard(layer, **cfg)',
      'fully_shard(model, **cfg)',
    ],
    'FSDP1 cpu_offload=CPUOffload(offload_params=True)': [
      'import functools',
      'from torch.distributed.fsdp import CPUOffload, FullyShardedDataParallel as FSDP',
      'from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy',
      'from transformers import AutoModelForCausalLM',
      'from transformers.models.llama.modeling_llama import LlamaDecoderLayer',
      'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
      'policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={LlamaDecoderLayer})',
      'model = FSDP(model, auto_wrap_policy=policy, cpu_offload=CPUOffload(offload_params=True))',
    ],
  };

  for (const [name, lines] of Object.entries(offloadScripts)) {
    it(`${name}: Llama 3.2 1B on 8 GPUs keeps only buffers on the GPU and 2,471,628,800 B per GPU on the host`, async () => {
      const r = estimateFile(await scanSource([...lines, ''].join('\n'), 'offload.py'));
      assert.ok(r.ok, r.ok ? '' : r.reason);
      const e = r.estimate;
      assert.equal(e.model.params, LLAMA_1B);
      assert.equal(e.mesh.shardGroup, 8);
      // 16 decoder layers and the root (embedding, final norm), every one offloaded.
      assert.equal(e.units.length, 17);
      assert.ok(e.units.every((u) => u.offload));
      assert.equal(e.units.find((u) => !u.isRoot)?.params, LAYER_1B);
      assert.equal(HOST_PER_GPU, 2_471_628_800);
      assert.equal(e.perGpu.hostBytes, HOST_PER_GPU);
      const term = (n: string) => e.perGpu.host.terms.find((t) => t.name === n)?.bytes;
      assert.equal(term('offloaded sharded parameters'), (LLAMA_1B * 4) / 8);
      assert.equal(term('offloaded gradients'), (LLAMA_1B * 4) / 8);
      assert.equal(term('offloaded optimizer state'), (LLAMA_1B * 8) / 8);
      // Nothing sharded stays on the GPU.
      const persistent = (n: string) => e.perGpu.persistent.terms.find((t) => t.name === n)?.bytes;
      assert.equal(persistent('sharded parameters'), 0);
      assert.equal(persistent('sharded gradients'), 0);
      assert.equal(persistent('optimizer state'), 0);
      assert.equal(e.perGpu.persistentBytes, ROTARY_1B);
      // Model state counts both places: 16 B x P / 8 in all.
      assert.equal(e.perGpu.modelStateBytes, HOST_PER_GPU);
      // The node's 8 processes each hold their offloaded shard.
      assert.equal(e.hostPerNode.terms.find((t) => t.name === 'CPU offload')?.bytes, 8 * HOST_PER_GPU);
    });
  }

  it('without offload the same 16 B x P / 8 sits on the GPU and nothing on the host', async () => {
    const r = estimateFile(
      await scanSource(
        [
          'from torch.distributed.fsdp import fully_shard',
          'from transformers import AutoModelForCausalLM',
          'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
          'for layer in model.model.layers:',
          '    fully_shard(layer)',
          'fully_shard(model)',
          '',
        ].join('\n'),
      ),
    );
    assert.ok(r.ok);
    assert.equal(r.estimate.perGpu.hostBytes, 0);
    assert.equal(r.estimate.perGpu.persistentBytes, HOST_PER_GPU + ROTARY_1B);
  });

  it('Llama 3.1 8B on 8 H100: forward all-gathers and the step on NVLink 4 at 80% of 450 GB/s', () => {
    const e = run('meta-llama/Llama-3.1-8B', {
      gpu: 'h100-sxm-80gb',
      paramDtype: 'bfloat16',
      reduceDtype: 'float32',
    });
    assert.equal(e.comms.shardLink.id, 'nvlink4');
    assert.equal(e.setup.linkEfficiency, 0.8);
    // 450 GB/s per direction x 0.8 = 360,000,000,000 B/s.
    const bw = 450e9 * 0.8;
    assert.equal(bw, 360_000_000_000);
    const P = LLAMA_8B;
    // Forward: every unit all-gathers 7/8 of its bf16 parameters: 7/8 x 8,030,261,248 x 2 B.
    const forwardBytes = 14_052_957_184;
    assert.equal((7 / 8) * P * 2, forwardBytes);
    assert.equal(
      e.units.reduce((s, u) => s + u.traffic.forwardAllGatherBytes, 0),
      forwardBytes,
    );
    const forwardSeconds = e.units.reduce((s, u) => s + u.time.forwardGather, 0);
    // 14,052,957,184 / 360e9 = 0.0390359921... s.
    assert.ok(Math.abs(forwardSeconds - 0.039035992177777) < 1e-12, String(forwardSeconds));
    // One decoder layer: 7/8 x 218,112,000 x 2 B = 381,696,000 B, 1.0602666... ms.
    const layer = e.units.find((u) => u.name === 'model.layers.0')!;
    assert.ok(Math.abs(layer.time.forwardGather - 381_696_000 / 360e9) < 1e-15);
    assert.ok(Math.abs(layer.time.forwardGather - 0.00106026666666) < 1e-13);

    // The step (one micro-batch, no HSDP so no all-reduce), time on the link if nothing overlapped:
    //   forward all-gathers   7/8 x P x 2 B                    = 14,052,957,184
    //   backward all-gathers  7/8 x (P - root) x 2 B, the root  = 12,214,272,000
    //     (embedding + final norm + head = 1,050,677,248 params) stays gathered from forward to backward
    //   reduce-scatters       7/8 x P x 4 B (fp32)             = 28,105,914,368
    //   total                                                  = 54,373,143,552 B
    assert.equal(LLAMA_8B_ROOT, 1_050_677_248);
    assert.equal((7 / 8) * (P - LLAMA_8B_ROOT) * 2, 12_214_272_000);
    assert.equal((7 / 8) * P * 4, 28_105_914_368);
    const stepBytes = 14_052_957_184 + 12_214_272_000 + 28_105_914_368;
    assert.equal(stepBytes, 54_373_143_552);
    assert.equal(trafficBytes(e.comms.perStep), stepBytes);
    // 54,373,143,552 / 360e9 = 0.151036509866... s.
    assert.ok(Math.abs(e.comms.commSeconds - 0.15103650986667) < 1e-12, String(e.comms.commSeconds));
    assert.ok(Math.abs(e.comms.commSeconds - stepBytes / bw) < 1e-12);
    // The link's own account of the step agrees.
    assert.equal(e.comms.links.length, 1);
    assert.ok(Math.abs(e.comms.links[0]!.seconds - stepBytes / bw) < 1e-12);
  });
});

describe('time on the link with gradient accumulation', () => {
  it('reductions count once per step when gradient sync is skipped between micro-batches', async () => {
    const script = (sync: boolean) =>
      [
        '# fsdp: model=meta-llama/Llama-3.1-8B world_size=8',
        'from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy',
        'import torch',
        'mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)',
        'for layer in model.model.layers:',
        '    fully_shard(layer, mp_policy=mp)',
        'fully_shard(model, mp_policy=mp)',
        sync ? '' : 'model.set_requires_gradient_sync(False)',
        '',
      ].join('\n');
    const flags = { values: { gradAccum: 4 } };
    const synced = estimateFile(await scanSource(script(true), 'a.py'), { flags });
    const skipped = estimateFile(await scanSource(script(false), 'b.py'), { flags });
    assert.ok(synced.ok && skipped.ok);
    const bw = 450e9 * 0.8;
    // Per micro-batch: gathers 26,267,229,184 B (forward 14,052,957,184 + backward 12,214,272,000), fp32
    // reduce-scatters 28,105,914,368 B (7/8 x 8,030,261,248 x 4 B).
    const gathers = (14_052_957_184 + 12_214_272_000) / bw;
    const reduces = 28_105_914_368 / bw;
    assert.ok(Math.abs(synced.estimate.comms.commSeconds - 4 * (gathers + reduces)) < 1e-9);
    assert.ok(Math.abs(skipped.estimate.comms.commSeconds - (4 * gathers + reduces)) < 1e-9);
    assert.equal(skipped.estimate.setup.syncEveryMicroBatch, false);
  });
});

describe('the PyTorch version decides the root of an FSDP2 plan', () => {
  // Before 2.8, FSDPState._lazy_init sets the root's post_forward_mesh_info to None whatever fully_shard was told;
  // from 2.8 an explicit reshard_after_forward=True on the root is respected (PyTorch PRs 154704 and 155319).
  // Llama 3.2 1B (tied embedding): the root owns the embedding [128256, 2048] and the final norm [2048]. Each of 8
  // ranks holds 128256 / 8 = 16032 rows and 2048 / 8 = 256 norm elements; a bf16 all-gather receives the other 7
  // shards: 7 x (16032 x 2048 + 256) x 2 B = 459,673,088 bytes.
  const ROOT_GATHER = 7 * (16032 * 2048 + 256) * 2;
  const script = [
    'from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy',
    'from transformers import AutoModelForCausalLM',
    'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
    'mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16)',
    'for layer in model.model.layers:',
    '    fully_shard(layer, mp_policy=mp)',
    'fully_shard(model, mp_policy=mp, reshard_after_forward=True)',
    '',
  ].join('\n');
  const rootOf = async (torch?: string) => {
    const text = torch ? `# fsdp: torch=${torch}\n${script}` : script;
    const r = estimateFile(await scanSource(text, 'train.py'));
    assert.ok(r.ok, r.ok ? '' : r.reason);
    return { e: r.estimate, root: r.estimate.units.find((u) => u.isRoot)! };
  };

  it('2.8 and later: the root told to reshard is all-gathered again in backward', async () => {
    const { root } = await rootOf();
    assert.equal(root.traffic.forwardAllGatherBytes, ROOT_GATHER);
    assert.equal(root.traffic.backwardAllGatherBytes, ROOT_GATHER);
    assert.equal(root.residency.kind, 'reshard');
  });

  it('before 2.8: the root stays gathered, with a note saying why', async () => {
    const { e, root } = await rootOf('2.7');
    assert.equal(root.traffic.backwardAllGatherBytes, 0);
    assert.equal(root.residency.kind, 'keep');
    assert.ok(e.notes.some((n) => /has no effect on PyTorch 2\.7/.test(n)));
    assert.equal(e.assumptions.find((a) => a.key === 'torchVersion')!.value, '2.7');
  });
});

/** The estimate of `text` as the `train.py` of a fresh project folder that holds `files` beside it. */
async function estimateInProject(files: Record<string, string>, text: string) {
  const dir = tempDir('fsdp-lens-project-');
  try {
    for (const [name, body] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), body);
    const file = path.join(dir, 'train.py');
    fs.writeFileSync(file, text);
    const project = new Project([dir], await grammar(), diskFS);
    const r = estimateFile(await scanSource(text, file), { project });
    project.dispose();
    return r;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describe('the PyTorch version from the project', () => {
  it('a pinned torch in requirements.txt sets the version the estimate uses, with where it is pinned', async () => {
    const r = await estimateInProject(
      { 'requirements.txt': 'transformers>=4.50\ntorch==2.6.0\n' },
      [
        'from torch.distributed.fsdp import fully_shard',
        'from transformers import AutoModelForCausalLM',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        'fully_shard(model, reshard_after_forward=True)',
        '',
      ].join('\n'),
    );
    assert.ok(r.ok, r.ok ? '' : r.reason);
    const a = r.estimate.assumptions.find((x) => x.key === 'torchVersion')!;
    assert.equal(a.value, '2.6.0');
    assert.deepEqual(a.source, { kind: 'detected', detail: 'torch 2.6.0 pinned at requirements.txt:2' });
    assert.equal(r.estimate.units.find((u) => u.isRoot)!.residency.kind, 'keep');
  });
});

describe("the loss from the project's Transformers release", () => {
  // What a Transformers release keeps of the logits when the model computes its loss from `labels`
  // (transformersLoss.ts): before 4.46 `LlamaForCausalLM.forward` upcasts and copies the shifted logits; 4.46 to
  // 4.48 `ForCausalLMLoss` copies the shifted fp32 logits; from 4.49 the labels are padded instead.
  async function lossFor(requirements: string, lossLine: string) {
    const r = await estimateInProject(
      { 'requirements.txt': requirements },
      [
        'from torch.distributed.fsdp import fully_shard',
        'from transformers import AutoModelForCausalLM',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        'for layer in model.model.layers:',
        '    fully_shard(layer)',
        'fully_shard(model)',
        'for batch in loader:',
        `    ${lossLine}`,
        '    loss.backward()',
        '',
      ].join('\n'),
    );
    assert.ok(r.ok, r.ok ? '' : r.reason);
    return { a: r.estimate.assumptions.find((x) => x.key === 'loss')!, notes: r.estimate.notes };
  }
  const READS = 'loss = model(**batch).loss';

  it('transformers 4.40 pinned and outputs.loss read: fp32 logits, with where it is pinned', async () => {
    const { a } = await lossFor('transformers==4.40.2\n', READS);
    assert.equal(a.value, 'fp32 logits from the model and a shifted copy (Transformers before 4.46)');
    assert.equal(a.source.kind, 'detected');
    assert.match(a.source.detail ?? '', /transformers 4\.40\.2 pinned at requirements\.txt:1/);
  });

  it('4.47: the shifted copy; 4.49: the default', async () => {
    assert.match((await lossFor('transformers==4.47.1\n', READS)).a.value, /4\.46-4\.48/);
    const { a } = await lossFor('transformers==4.49.0\n', READS);
    assert.equal(a.source.kind, 'default');
  });

  it('a lower bound keeps the default and says which releases keep more', async () => {
    const { a, notes } = await lossFor('transformers>=4.40\n', READS);
    assert.equal(a.source.kind, 'default');
    assert.ok(notes.some((n) => /allows transformers 4\.40 and later/.test(n)));
  });

  it("a loss the script computes itself is not Transformers': the pin does not apply", async () => {
    const { a } = await lossFor(
      'transformers==4.40.2\n',
      'loss = torch.nn.functional.cross_entropy(model(**batch).logits.flatten(0, 1), batch["labels"].flatten())',
    );
    assert.equal(a.source.kind, 'default');
  });
});

describe("how long a script keeps the model's output", () => {
  const loop = (...body: string[]) => ['for batch in loader:', ...body.map((l) => `    ${l}`), ''].join('\n');
  const heldIn = async (text: string) =>
    (await scanSource(text, 'train.py')).training.find((t) => t.kind === 'model_loss')?.held;

  it('bound in the loop and never released: until the next forward rebinds it', async () => {
    assert.equal(
      await heldIn(
        loop('outputs = model(**batch)', 'loss = outputs.loss', 'loss.backward()', 'optimizer.step()'),
      ),
      'step',
    );
  });

  it("Accelerate's loop: `accelerator.backward(loss)` inside `accelerator.accumulate`, after an evaluation loop", async () => {
    const text = [
      'def evaluate(model, loader):',
      '    for batch in loader:',
      '        outputs = model(**batch)',
      '        losses.append(outputs.loss)',
      '',
      'for step, batch in enumerate(train_dataloader):',
      '    with accelerator.accumulate(model):',
      '        outputs = model(**batch)',
      '        loss = outputs.loss',
      '        accelerator.backward(loss)',
      '        optimizer.step()',
      '        optimizer.zero_grad()',
      '    if args.loss == "mean":',
      '        pass',
      '',
    ].join('\n');
    const fact = (await scanSource(text, 'train.py')).training.find((t) => t.kind === 'model_loss')!;
    assert.equal(fact.held, 'step');
    assert.equal(fact.line, 9);
  });

  it('`outputs["loss"]` is the same read as `outputs.loss`', async () => {
    assert.equal(
      await heldIn(loop('outputs = model(**batch)', 'loss = outputs["loss"]', 'loss.backward()')),
      'step',
    );
    // A string elsewhere, or a dict of metrics, is not a read of the model's output.
    assert.equal(await heldIn(loop('print("loss")', 'metrics = {"loss": 0}')), undefined);
  });

  it('released after backward (`outputs = None`, `del outputs`): through backward only', async () => {
    for (const release of ['outputs = None', 'del outputs', 'del loss, outputs'])
      assert.equal(
        await heldIn(loop('outputs = model(**batch)', 'loss = outputs.loss', 'loss.backward()', release)),
        'backward',
        release,
      );
  });

  it('released before backward, never bound, or backpropagated elsewhere: not kept', async () => {
    assert.equal(
      await heldIn(loop('outputs = model(**batch)', 'loss = outputs.loss', 'del outputs', 'loss.backward()')),
      undefined,
    );
    assert.equal(await heldIn(loop('loss = model(**batch).loss', 'loss.backward()')), undefined);
    // A helper that returns the loss: its local is freed when it returns, before the caller's backward.
    assert.equal(
      await heldIn(
        ['def compute(model, batch):', '    outputs = model(**batch)', '    return outputs.loss', ''].join(
          '\n',
        ) + loop('loss = compute(model, batch)', 'loss.backward()'),
      ),
      undefined,
    );
  });
});

describe('figures that count more than the job keeps', () => {
  it('a peak that fits still fits; one that does not is undecided, and says why', async () => {
    // torchtune's activation offloading moves the saved activations to the CPU; the figures keep them on the GPU.
    const yaml = (extra: string) =>
      fs.readFileSync(path.join(FIXTURES, 'frameworks', 'torchtune', '8B_full.yaml'), 'utf8') + extra;
    const analysis = async (text: string, gpu?: string, worldSize = 8) => {
      const project = new Project([path.join(FIXTURES, 'frameworks', 'torchtune')], await grammar(), diskFS);
      const a = analyzeConfigText(path.join(FIXTURES, 'frameworks', 'torchtune', 'x.yaml'), text, {
        lint: DEFAULT_LINT_OPTIONS,
        estimate: { project, ...(gpu ? { flags: { values: { gpu, worldSize } } } : {}) },
      });
      project.dispose();
      assert.ok(a.estimate?.ok, JSON.stringify(a.estimate));
      return a.estimate.estimate;
    };
    const off = yaml('\nenable_activation_offloading: True\n');
    const fits = await analysis(off);
    assert.match(fits.overcounted.join(' '), /^activation offloading \(saved activations counted on the GPU/);
    assert.match(
      fits.assumptions.find((a) => a.key === 'activationOffload')!.source.detail!,
      /^x\.yaml:\d+$/,
    );
    assert.equal(fits.targetFit.verdict, 'fits');
    // On two 24 GB cards the state alone (8 B per parameter / 2 = 32 GB) does not fit: offloading activations
    // cannot change that, and the verdict stands.
    assert.equal((await analysis(off, 'rtx3090-24gb', 2)).targetFit.verdict, 'short');
    // Without checkpointing, on four: the state (16 GB) and what is not activations fit, the counted peak (48.6 GB
    // of saved activations) does not: with offloading that is no verdict.
    const noAc = (t: string) =>
      t.replace('enable_activation_checkpointing: True', 'enable_activation_checkpointing: False');
    const four = await analysis(noAc(off), 'rtx3090-24gb', 4);
    assert.equal(four.targetFit.verdict, 'undecided', JSON.stringify(four.perGpu.peakBytes));
    assert.match(
      undecidedWhy(four),
      /more activations than the job keeps on the GPU \(activation offloading/,
    );
    // Without offloading, the verdict stands.
    assert.equal((await analysis(noAc(yaml('')), 'rtx3090-24gb', 4)).targetFit.verdict, 'short');
  });
});

describe("bitsandbytes' paged optimizer state", () => {
  it('counted on the GPU, but a peak that fits only without it is no verdict', () => {
    // Llama 3.1 8B on one GPU, fp32 masters: AdamW's 2 states x 4 B x 8,030,261,248 = 64,242,089,984 B, paged.
    const values: SetupValues = { worldSize: 1, checkpointing: 'full', seqLen: 1024 };
    const plain = run('meta-llama/Llama-3.1-8B', values);
    const paged = run('meta-llama/Llama-3.1-8B', { ...values, pagedOptimizer: true });
    assert.equal(paged.perGpu.pagedOptimizerBytes, 2 * 4 * LLAMA_8B);
    // bitsandbytes steps a parameter at a time: none of foreach AdamW's temporary of the second moments' size
    // (4 B x 8,030,261,248) at the optimizer step.
    const step = (e: Estimate) => e.timeline!.events.find((ev) => ev.phase === 'optimizer')!.live.optimizer;
    assert.equal(step(plain), 4 * LLAMA_8B);
    assert.equal(step(paged), 0);
    // With the state the step needs more than an H100's 85.5 GB; without it, the parameters and gradients (8 B
    // each, 64 GB) and a checkpointed step fit.
    assert.equal(plain.targetFit.verdict, 'short');
    assert.equal(paged.targetFit.verdict, 'undecided');
    assert.equal(certainPeakBytes(paged), paged.perGpu.peakBytes - 2 * 4 * LLAMA_8B);
    assert.match(
      undecidedWhy(paged),
      /^the figures count more than the job keeps on the GPU \(bitsandbytes' paged/,
    );
    // On 8 GPUs it fits with the state on the GPU: the verdict stands.
    assert.equal(
      run('meta-llama/Llama-3.1-8B', { ...values, worldSize: 8, pagedOptimizer: true }).targetFit.verdict,
      'fits',
    );
  });

  it("read from Transformers' optim names and bitsandbytes' classes", async () => {
    const facts = await scanSource(
      [
        'import bitsandbytes as bnb',
        'from torch.distributed.fsdp import fully_shard',
        'from transformers import AutoModelForCausalLM',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        'fully_shard(model)',
        'opt = bnb.optim.PagedAdamW32bit(model.parameters())',
        '',
      ].join('\n'),
    );
    assert.equal(facts.optimizers[0]?.name, 'PagedAdamW32bit');
    const r = estimateFile(facts, {});
    assert.ok(r.ok, JSON.stringify(r));
    assert.equal(r.estimate.setup.pagedOptimizer, true);
    assert.equal(r.estimate.setup.optimizer, 'adamw');
  });
});

describe('the optimizer in backward', () => {
  // torchtune's register_optim_in_bwd_hooks: a post-accumulate-grad hook steps and zeroes each parameter, and
  // FSDP2's foreach_reduce runs it right after it sets the gradient shard. Llama 3.1 8B on 8 GPUs, fp32 masters:
  // every dim divides by 8, so each shard is exactly 1/8.
  const values: SetupValues = { worldSize: 8, microBatch: 1, seqLen: 2048, checkpointing: 'full' };
  const opt = (e: Estimate) => e.timeline!.events.find((ev) => ev.phase === 'optimizer')!;

  it("keeps no gradient shards past their unit's post-backward, and leaves no step after backward", () => {
    const after = run('meta-llama/Llama-3.1-8B', values);
    const during = run('meta-llama/Llama-3.1-8B', { ...values, optimizerInBackward: true });
    // After backward: every shard's gradient (4 B x 8,030,261,248 / 8) and foreach AdamW's sqrt temporary (the
    // same size) at the step; in backward, neither.
    assert.equal(opt(after).live.shardGrads, (4 * LLAMA_8B) / 8);
    assert.equal(opt(after).live.optimizer, (4 * LLAMA_8B) / 8);
    assert.equal(opt(during).live.shardGrads, 0);
    assert.equal(opt(during).live.optimizer, 0);
    // At most one unit's shards at once: the root's (embedding and head, 2 x 128,256 x 4,096 + 4,096, x 4 B / 8),
    // the largest unit.
    const most = Math.max(...during.timeline!.events.map((ev) => ev.live.shardGrads));
    assert.equal(most, (4 * LLAMA_8B_ROOT) / 8);
  });

  it('read from torchtune: its config key and its hook registration', async () => {
    const facts = await scanSource(
      [
        'from torch.distributed.fsdp import fully_shard',
        'from torchtune import training',
        'from transformers import AutoModelForCausalLM',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        'fully_shard(model)',
        'training.register_optim_in_bwd_hooks(model=model, optim_dict={})',
        '',
      ].join('\n'),
    );
    const r = estimateFile(facts, {});
    assert.ok(r.ok, JSON.stringify(r));
    assert.equal(r.estimate.setup.optimizerInBackward, true);
  });
});

describe('torch.compile', () => {
  // Inductor's default mode keeps at most what eager PyTorch keeps for backward (AOTAutograd's
  // min_cut_rematerialization_partition recomputes fusible pointwise ops instead of saving them): the figures stay
  // eager's, and only a peak that does not fit loses its verdict; CUDA graphs' private pool is not modelled.
  const values: SetupValues = { worldSize: 8, microBatch: 4, seqLen: 8192, checkpointing: 'none' };

  it("keeps eager PyTorch's figures, an upper bound: a peak that does not fit is no verdict", () => {
    const eager = run('meta-llama/Llama-3.1-8B', values);
    const compiled = run('meta-llama/Llama-3.1-8B', { ...values, compile: 'model' });
    assert.equal(compiled.perGpu.peakBytes, eager.perGpu.peakBytes);
    // 4 x 8192 tokens through 32 uncheckpointed blocks: far past an H100's 79.6 GiB eager; the state (12 B per
    // parameter / 8 = 12 GB) and the gathered units fit whatever compile keeps of the activations.
    assert.equal(eager.targetFit.verdict, 'short');
    assert.equal(compiled.targetFit.verdict, 'undecided');
    assert.match(
      undecidedWhy(compiled),
      /more activations than the job keeps on the GPU \(torch\.compile of the model/,
    );
    const h100 = findGpu('h100-sxm-80gb')!;
    assert.ok(
      requiredBytes(certainPeakBytes(compiled)) <= gpuBytes(h100),
      String(certainPeakBytes(compiled)),
    );
    assert.ok(certainPeakBytes(compiled) >= (12 * LLAMA_8B) / 8);
    // A compiled loss also keeps less of the logits than eager's loss: the floor leaves them out.
    const both = run('meta-llama/Llama-3.1-8B', { ...values, compile: 'model+loss' });
    assert.ok(certainPeakBytes(both) < certainPeakBytes(compiled));
    // A peak that fits eager fits compiled.
    const small = { ...values, microBatch: 1, seqLen: 2048 };
    assert.equal(
      run('meta-llama/Llama-3.1-8B', { ...small, compile: 'model+loss' }).targetFit.verdict,
      'fits',
    );
  });

  it('with CUDA graphs, no verdict: their memory pool is not modelled', () => {
    const small = { ...values, microBatch: 1, seqLen: 2048 };
    const e = run('meta-llama/Llama-3.1-8B', { ...small, compile: 'cudagraphs' });
    assert.equal(e.targetFit.verdict, 'undecided');
    assert.match(e.unmodelled.join(' '), /CUDA graphs/);
  });

  const script = (...lines: string[]) =>
    [
      'import re',
      'import torch',
      'from torch.distributed.fsdp import fully_shard',
      'from transformers import AutoModelForCausalLM',
      'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
      'for block in model.model.layers:',
      '    fully_shard(block)',
      'fully_shard(model)',
      ...lines,
      '',
    ].join('\n');
  const compileOf = async (text: string) => {
    const r = estimateFile(await scanSource(text), {});
    assert.ok(r.ok, JSON.stringify(r));
    return r.estimate;
  };

  it('read from torch.compile of the model, of its blocks, and of a loss function', async () => {
    assert.equal((await compileOf(script('model = torch.compile(model)'))).setup.compile, 'model');
    // A block a wrap call wraps, compiled by nn.Module.compile: torchtitan's per-block compile.
    assert.equal(
      (await compileOf(script('for block in model.model.layers:', '    block.compile()'))).setup.compile,
      'model',
    );
    // The model computes its loss from labels (`outputs.loss` read): the loss is compiled with it.
    const withLoss = await compileOf(
      script('model = torch.compile(model)', 'out = model(input_ids=x, labels=x)', 'out.loss.backward()'),
    );
    assert.equal(withLoss.setup.compile, 'model+loss');
    assert.equal(
      (await compileOf(script('@torch.compile', 'def loss_fn(logits, labels):', '    return logits'))).setup
        .compile,
      'loss',
    );
    assert.equal(
      (await compileOf(script('model = torch.compile(model, mode="reduce-overhead")'))).setup.compile,
      'cudagraphs',
    );
  });

  it("not read from Python's compile, re.compile, or a compile the path does not take", async () => {
    const plain = await compileOf(
      script(
        'pattern = re.compile("x")',
        'code = compile("1", "f", "eval")',
        'helper = torch.compile(tokenize)',
      ),
    );
    assert.equal(plain.setup.compile, 'off');
    const gated = await compileOf(
      [
        'import argparse',
        'import torch',
        'from torch.distributed.fsdp import fully_shard',
        'from transformers import AutoModelForCausalLM',
        'p = argparse.ArgumentParser()',
        'p.add_argument("--compile", action="store_true")',
        'args = p.parse_args()',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        'fully_shard(model)',
        'if args.compile:',
        '    model = torch.compile(model)',
        '',
      ].join('\n'),
    );
    assert.equal(gated.setup.compile, 'off');
    assert.match(gated.plan.notes.join(' ') + JSON.stringify(gated), /torch\.compile of the model is off/);
  });
});

describe('activation offloading in code', () => {
  it("read from PyTorch's save_on_cpu and torchtune's OffloadActivations around the step", async () => {
    const script = (ctx: string, imp: string) =>
      [
        imp,
        'from torch.distributed.fsdp import fully_shard',
        'from transformers import AutoModelForCausalLM',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        'fully_shard(model)',
        `with ${ctx}:`,
        '    loss = model(x).sum()',
        '',
      ].join('\n');
    for (const [ctx, imp] of [
      ['torch.autograd.graph.save_on_cpu(pin_memory=True)', 'import torch'],
      ['OffloadActivations()', 'from torchtune.training import OffloadActivations'],
    ] as const) {
      const r = estimateFile(await scanSource(script(ctx, imp)), {});
      assert.ok(r.ok, JSON.stringify(r));
      assert.equal(r.estimate.setup.activationOffload, true, ctx);
      assert.match(r.estimate.overcounted.join(' '), /^activation offloading/);
    }
    // A function of the same name from elsewhere is not PyTorch's.
    const other = estimateFile(
      await scanSource(script('save_on_cpu()', 'from mylib import save_on_cpu')),
      {},
    );
    assert.ok(other.ok);
    assert.equal(other.estimate.setup.activationOffload, false);
  });
});

describe('GPUs by the names users type', () => {
  it('a whole model name wins over a longer name it begins: L4 is the L4, not the L40S', () => {
    assert.equal(findGpu('L4')?.id, 'l4-24gb');
    assert.equal(findGpu('nvidia l4')?.id, 'l4-24gb');
    assert.equal(findGpu('L40S')?.id, 'l40s-48gb');
    assert.equal(findGpu('h200')?.id, 'h200-141gb');
    assert.equal(findGpu('a100-80gb')?.id, 'a100-sxm-80gb');
  });

  it("the 96 GB H100 is the GH200's GPU, as CUDA names it on its Arm hosts", () => {
    assert.equal(findGpu('h100-96gb')?.id, 'gh200-96gb');
    assert.equal(findGpu('NVIDIA H100 96GB HBM3')?.id, 'gh200-96gb');
    assert.equal(findGpu('H100 96GB HBM3')?.id, 'gh200-96gb');
    // A bare "h100" stays the 80 GB SXM card, the common one.
    assert.equal(findGpu('h100')?.id, 'h100-sxm-80gb');
  });
});

describe('gradients of parameters in no unit', () => {
  // Blocks wrapped, the root not: the embedding, final norm and head (2 x 128,256 x 4,096 + 4,096 parameters) stay
  // whole on every GPU. Their gradients are plain autograd gradients: none exists at the turn from forward to
  // backward; backward creates them (AccumulateGrad), the optimizer step reads them, `zero_grad()` frees them.
  const blocksOnly = (m: ReturnType<typeof modelFromHfConfig>): Plan => {
    const units = defaultUnits(m.root, m.shape.blockClass, 'test');
    units.pop();
    return { api: 'fsdp2', strategy: 'FULL_SHARD', units, source: { kind: 'default' }, notes: [] };
  };
  // fp32 master weights by default: 4 B per gradient element.
  const GRADS = LLAMA_8B_ROOT * 4;
  const live = (e: Estimate, label: string) => e.timeline!.events.find((ev) => ev.label === label)!.live;

  it('do not exist before backward, and do at the optimizer step', () => {
    const e = run('meta-llama/Llama-3.1-8B', {}, blocksOnly);
    assert.equal(e.unowned.params, LLAMA_8B_ROOT);
    assert.equal(e.unowned.gradBytes, GRADS);
    assert.equal(live(e, 'logits and loss').gradients, 0);
    assert.equal(live(e, 'optimizer step').gradients, GRADS);
    // The persistent state still holds them (it is what a step keeps at its end).
    assert.ok(e.perGpu.persistentBytes - live(e, 'logits and loss').state >= GRADS);
  });

  it('persist across the micro-batches of an accumulating step', () => {
    const e = run('meta-llama/Llama-3.1-8B', { gradAccum: 2 }, blocksOnly);
    assert.equal(live(e, 'logits and loss').gradients, GRADS);
  });
});
