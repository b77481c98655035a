// Tensor parallelism as torchtitan shards a dense decoder: the shapes each GPU holds, its activations, its loss
// parallel, its collectives, and fits that search FSDP's dimension with the degree fixed.
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import {
  blockActivations,
  blockTensors,
  lossTransient,
  type ActivationInputs,
} from '../../src/core/estimator/activations';
import { modelFromHfConfig } from '../../src/core/model/hf';
import { tensorParallelTree } from '../../src/core/model/tensorParallel';
import { countParams, walk, type ModuleNode } from '../../src/core/model/tree';
import * as fs from 'node:fs';
import { FIXTURES, cli, projectDir, SMALL_LLAMA } from './helpers';
import { MeshError } from '../../src/core/estimator/mesh';
import type { Plan } from '../../src/core/estimator/types';
import { resolveSetup } from '../../src/core/inputs/layers';
import { CATALOG } from '../../src/core/model/catalog';
import { defaultUnits } from '../../src/core/plan/policies';
import { WhatIfModel } from '../../src/core/whatif/model';

// Hidden 64, 4 heads of 16 (2 KV heads), MLP 128, vocabulary 96, two blocks, untied head.
const LLAMA = SMALL_LLAMA;

/** Each parameter's shape by its full name. */
function shapesOf(root: ModuleNode): Map<string, number[]> {
  const shapes = new Map<string, number[]>();
  for (const mod of walk(root)) for (const p of mod.params) shapes.set(`${mod.path}.${p.name}`, p.shape);
  return shapes;
}

describe('the tree each GPU holds', () => {
  const m = modelFromHfConfig(LLAMA);
  it('column-wise projections split their outputs, row-wise their inputs, the vocabulary its rows', () => {
    const r = tensorParallelTree(m.root, m.shape, 2);
    assert.ok('root' in r);
    const shapes = shapesOf(r.root);
    // nn.Linear(in, out).weight is [out, in]: Shard(0) halves out, Shard(1) halves in.
    assert.deepEqual(shapes.get('model.layers.0.self_attn.q_proj.weight'), [32, 64]);
    assert.deepEqual(shapes.get('model.layers.0.self_attn.k_proj.weight'), [16, 64]);
    assert.deepEqual(shapes.get('model.layers.0.self_attn.o_proj.weight'), [64, 32]);
    assert.deepEqual(shapes.get('model.layers.0.mlp.up_proj.weight'), [64, 64]);
    assert.deepEqual(shapes.get('model.layers.0.mlp.down_proj.weight'), [64, 64]);
    assert.deepEqual(shapes.get('model.embed_tokens.weight'), [48, 64]);
    assert.deepEqual(shapes.get('lm_head.weight'), [48, 64]);
    assert.deepEqual(shapes.get('model.layers.0.input_layernorm.weight'), [64]);
    // Everything but the norms (2 x 2 x 64 + 64 = 320 weights) is halved.
    const norms = 320;
    assert.equal(countParams(r.root), (countParams(m.root) - norms) / 2 + norms);
  });

  it('refuses what its plan does not cover, saying why', () => {
    const uneven = modelFromHfConfig({ ...LLAMA, num_key_value_heads: 1 });
    const r = tensorParallelTree(uneven.root, uneven.shape, 2);
    assert.ok('problem' in r && /1 KV heads/.test(r.problem), JSON.stringify(r));
    const gpt2 = modelFromHfConfig({
      model_type: 'gpt2',
      architectures: ['GPT2LMHeadModel'],
      n_embd: 64,
      n_layer: 2,
      n_head: 4,
      vocab_size: 96,
      n_positions: 128,
    });
    assert.ok('problem' in tensorParallelTree(gpt2.root, gpt2.shape, 2));
  });
});

describe('activations under sequence parallelism', () => {
  const m = modelFromHfConfig(LLAMA);
  const x: ActivationInputs = { microBatch: 2, seqLen: 32, attention: 'fused', bytes: 2 };
  const sbh = 2 * 32 * 64 * 2; // one b·s·h tensor in bf16
  it('every tensor of a block 1/T, plus the all-gathered inputs of q/k/v and of gate/up kept whole', () => {
    const whole = blockTensors(m.shape, x, false).reduce((s, t) => s + t.bytes, 0);
    const split = blockActivations(m.shape, { ...x, tp: 2 }, 'none', false, 0);
    assert.equal(split.saved, whole / 2 + 2 * sbh);
  });
  it('a checkpointed block keeps its input, sequence-sharded', () => {
    assert.equal(blockActivations(m.shape, { ...x, tp: 2 }, 'full', false, 0).saved, sbh / 2);
  });
  it("loss parallel: the local logits' fp32 copy, shift and exp in forward; four fp32 tensors in backward", () => {
    // n = b·s·V / T = 2 x 32 x 96 / 2 local logits. Forward: bf16 logits, the fp32 copy, `shifted` and
    // `exp(shifted)` (`_log_softmax`); backward: the saved log-softmax, `zeros_like(x)`, `exp(x)` and their sum
    // (`_nll_loss_and_log_softmax_backward`). From forward to backward it keeps the bf16 logits and the saved
    // fp32 log-softmax.
    const n = (2 * 32 * 96) / 2;
    const l = lossTransient(m.shape, { ...x, tp: 2 }, 'upcast');
    assert.deepEqual(l, {
      forward: n * (2 + 4 + 4 + 4),
      backward: 16 * n,
      output: 2 * n,
      kept: n * (2 + 4),
    });
  });
});

describe("torchtitan's 70B job with eight-way tensor parallelism", () => {
  const toml = path.join(FIXTURES, 'frameworks', 'torchtitan', 'llama3_70b_tp.toml');
  const run = async (...args: string[]) => {
    const r = await cli('estimate', toml, '--gpu', 'a100-80gb', '--json', ...args);
    assert.equal(r.code, 0, r.err);
    return JSON.parse(r.out);
  };
  it('fits 64 A100 80 GB, with its collectives shown, and the search keeps whole TP groups', async () => {
    const j = await run('--world-size', '64');
    assert.deepEqual(j.unmodelled, []);
    assert.deepEqual([j.mesh.shardGroup, j.mesh.tp], [8, 8]);
    assert.equal(j.targetFit.verdict, 'fits');
    // Llama 3 70B: 80 blocks, full checkpointing: 80 x 12 + 4 collectives per step, each 7/8 of
    // 8 x 8192 x 8192 bf16 elements.
    const tp = j.comms.links.find((l: { role: string }) => l.role === 'tensor parallel');
    assert.equal(tp.collectives, 80 * 12 + 4);
    assert.equal(tp.bytes, 964 * (7 / 8) * 8 * 8192 * 8192 * 2);
    assert.equal(j.minGpus % 8, 0);
  });
  it('does not fit 8: one TP group holds 1/8 of the model, unsharded', async () => {
    const j = await run('--world-size', '8');
    assert.equal(j.mesh.shardGroup, 1);
    assert.equal(j.targetFit.verdict, 'short');
    // 70,553,706,496 parameters; the norms (80 x 2 x 8,192 + 8,192) stay whole; AdamW with fp32 master weights
    // and gradients: 16 B per local parameter, more than 80 GB before any activation.
    const local = (70_553_706_496 - 1_318_912) / 8 + 1_318_912;
    assert.ok(local * 16 > 80e9);
    assert.ok(j.perGpu.persistentBytes >= local * 16);
  });
});

describe('what the figures leave out, said', () => {
  it('torch.compile and async TP from the job', async () => {
    const dir = projectDir('fsdp-lens-tp-compile-');
    const src = fs.readFileSync(
      path.join(FIXTURES, 'frameworks', 'torchtitan', 'llama3_70b_tp.toml'),
      'utf8',
    );
    const file = path.join(dir, 'job.toml');
    fs.writeFileSync(
      file,
      src.replace(
        'tensor_parallel_degree = 8',
        'tensor_parallel_degree = 8\nenable_async_tensor_parallel = true',
      ) + '\n[compile]\nenable = true\ncomponents = ["model", "loss"]\n',
    );
    const r = await cli('estimate', file, '--world-size', '64', '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as {
      notes: string[];
      overcounted: string[];
      assumptions: { key: string; value: string; source: { detail?: string } }[];
    };
    // `[compile] components = ["model", "loss"]`: both compiled, the activations eager's, an upper bound.
    const compile = j.assumptions.find((a) => a.key === 'compile')!;
    assert.match(compile.value, /^the model and the loss/);
    assert.match(compile.source.detail!, /job\.toml:\d+/);
    assert.match(j.overcounted.join(' '), /torch\.compile of the model and the loss/);
    assert.match(j.notes.join('\n'), /async tensor parallelism .* upper bound/);
  });
});

describe('context parallelism', () => {
  const m = modelFromHfConfig(LLAMA);
  it("each GPU keeps 1/C of the sequence, and holds the others' K and V while attention runs", () => {
    // 4 x 32 tokens over C = 4: every tensor is that of 32 tokens; the running block also holds the 3 other
    // ranks' K and V (2 x 2 KV heads x 16 wide, bf16) for each of its 2 x 32 local tokens.
    const local: ActivationInputs = { microBatch: 2, seqLen: 32, attention: 'fused', bytes: 2 };
    const plain = blockActivations(m.shape, local, 'none', false, 0);
    const cp = blockActivations(m.shape, { ...local, cp: 4 }, 'none', false, 0);
    assert.equal(cp.saved, plain.saved);
    assert.equal(cp.transient - plain.transient, 2 * 2 * (2 * 32) * 3 * (2 * 16));
  });
  it("torchtitan's degree: the sequence split, FSDP over dp_shard x cp, K/V collectives per block", async () => {
    const dir = projectDir('fsdp-lens-cp-');
    const file = path.join(dir, 'job.toml');
    fs.writeFileSync(
      file,
      [
        '[model]',
        'name = "llama3"',
        'flavor = "8B"',
        '[training]',
        'local_batch_size = 1',
        'seq_len = 65536',
        '[parallelism]',
        'data_parallel_shard_degree = 4',
        'context_parallel_degree = 2',
        '[activation_checkpoint]',
        'mode = "full"',
      ].join('\n'),
    );
    const r = await cli('estimate', file, '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out);
    assert.deepEqual(j.unmodelled, []);
    assert.deepEqual([j.mesh.worldSize, j.mesh.shardGroup], [8, 8]);
    // 32 blocks, full checkpointing: 6 K/V collectives per block and 2 per recomputed one; each 1/2 of
    // 65,536 tokens x 8 KV heads x 128 x 2 B.
    const cp = j.comms.links.find((l: { role: string }) => l.role === 'context parallel');
    assert.equal(cp.collectives, 32 * 8);
    assert.equal(cp.bytes, 256 * (1 / 2) * 65_536 * 1_024 * 2);
  });
});

describe('what-if with the degrees fixed', () => {
  it('the fit matrix and the search step in whole tensor-parallel groups; a world they do not divide has no mesh', () => {
    const m = modelFromHfConfig(CATALOG['meta-llama/Llama-3.1-70B']!);
    const { setup, assumptions } = resolveSetup([
      { source: { kind: 'flag' }, values: { worldSize: 64, tensorParallel: 8, checkpointing: 'full' } },
    ]);
    const plan: Plan = {
      api: 'fsdp2',
      strategy: 'FULL_SHARD',
      units: defaultUnits(m.root, m.shape.blockClass, 't'),
      source: { kind: 'default' },
      notes: [],
    };
    const w = new WhatIfModel({
      model: { name: '70B', root: m.root, shape: m.shape, source: { kind: 'default' } },
      plan,
      setup,
      assumptions,
    });
    const matrix = w.fitMatrix([{ id: 'a100-80gb' }]);
    assert.ok(
      matrix.worldSizes.every((n) => n % 8 === 0),
      matrix.worldSizes.join(', '),
    );
    assert.equal(w.minGpus('a100-80gb').worldSize! % 8, 0);
    assert.throws(() => w.run({ worldSize: 12 }), MeshError);
  });
});

describe('tensor parallelism written in code (parallelize_module)', () => {
  // A torchtitan-style decoder of the file's own: hidden 64, 4 heads of 16 (2 KV heads), MLP 128, vocabulary 96,
  // two blocks; split over the "tp" dimension of a 4 x 2 mesh with the plan of PyTorch's FSDP + TP example.
  const script = (opts: { head?: string; tp?: string; norms?: boolean; embedding?: boolean } = {}) =>
    [
      'import torch',
      'import torch.nn as nn',
      'from torch.distributed.device_mesh import init_device_mesh',
      'from torch.distributed.fsdp import fully_shard',
      'from torch.distributed.tensor import Replicate, Shard',
      'from torch.distributed.tensor.parallel import (',
      '    ColwiseParallel, PrepareModuleInput, RowwiseParallel, SequenceParallel, parallelize_module,',
      ')',
      'class Attention(nn.Module):',
      '    def __init__(self, dim, n_heads, n_kv_heads):',
      '        super().__init__()',
      '        self.n_heads = n_heads',
      '        self.n_kv_heads = n_kv_heads',
      '        self.head_dim = dim // n_heads',
      '        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)',
      '        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)',
      '        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)',
      '        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)',
      'class FeedForward(nn.Module):',
      '    def __init__(self, dim, hidden):',
      '        super().__init__()',
      '        self.w1 = nn.Linear(dim, hidden, bias=False)',
      '        self.w2 = nn.Linear(hidden, dim, bias=False)',
      '        self.w3 = nn.Linear(dim, hidden, bias=False)',
      'class TransformerBlock(nn.Module):',
      '    def __init__(self, dim, n_heads, n_kv_heads, hidden):',
      '        super().__init__()',
      '        self.attention = Attention(dim, n_heads, n_kv_heads)',
      '        self.feed_forward = FeedForward(dim, hidden)',
      '        self.attention_norm = nn.RMSNorm(dim)',
      '        self.ffn_norm = nn.RMSNorm(dim)',
      'class Transformer(nn.Module):',
      '    def __init__(self, vocab=96, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, hidden=128):',
      '        super().__init__()',
      '        self.tok_embeddings = nn.Embedding(vocab, dim)',
      '        self.layers = nn.ModuleList(',
      '            [TransformerBlock(dim, n_heads, n_kv_heads, hidden) for _ in range(n_layers)]',
      '        )',
      '        self.norm = nn.RMSNorm(dim)',
      '        self.output = nn.Linear(dim, vocab, bias=False)',
      `tp_size = ${opts.tp ?? '2'}`,
      'mesh = init_device_mesh("cuda", (4, tp_size), mesh_dim_names=("dp", "tp"))',
      'tp_mesh = mesh["tp"]',
      'model = Transformer()',
      'parallelize_module(',
      '    model,',
      '    tp_mesh,',
      '    {',
      ...(opts.embedding === false
        ? []
        : ['        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),']),
      ...(opts.norms === false ? [] : ['        "norm": SequenceParallel(),']),
      `        "output": ${opts.head ?? 'ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate())'},`,
      '    },',
      ')',
      'for block in model.layers:',
      '    plan = {',
      ...(opts.norms === false ? [] : ['        "attention_norm": SequenceParallel(),']),
      '        "attention": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),',
      '        "attention.wq": ColwiseParallel(),',
      '        "attention.wk": ColwiseParallel(),',
      '        "attention.wv": ColwiseParallel(),',
      '        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),',
      ...(opts.norms === false ? [] : ['        "ffn_norm": SequenceParallel(),']),
      '        "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),',
      '        "feed_forward.w1": ColwiseParallel(),',
      '        "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),',
      '        "feed_forward.w3": ColwiseParallel(),',
      '    }',
      '    parallelize_module(block, tp_mesh, plan)',
      '    fully_shard(block, mesh=mesh["dp"])',
      'fully_shard(model, mesh=mesh["dp"])',
      'x = torch.randint(0, 96, (2, 32))',
      'model(x).sum().backward()',
      '',
    ].join('\n');
  const estimateOf = async (text: string, ...args: string[]) => {
    const dir = projectDir('fsdp-lens-tp-code-');
    try {
      fs.writeFileSync(path.join(dir, 'train.py'), text);
      const r = await cli('estimate', path.join(dir, 'train.py'), '--json', ...args);
      assert.equal(r.code, 0, r.err);
      return JSON.parse(r.out);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  };
  const shown = (j: { assumptions: { key: string; value: string }[] }, key: string) =>
    j.assumptions.find((a) => a.key === key)?.value;
  // Embedding and head 96 x 64 each, per block q 64x64, k and v 32x64, o 64x64, w1 and w3 128x64, w2 64x128 and two
  // norms of 64, the final norm 64.
  const block = 64 * 64 + 2 * 32 * 64 + 64 * 64 + 3 * 128 * 64;
  const norms = 2 * 2 * 64 + 64;
  const total = 2 * 96 * 64 + 2 * block + norms;

  it('reads the degree from the tp mesh, the world from the whole mesh, and splits all but the norms', async () => {
    const j = await estimateOf(script());
    assert.deepEqual(j.unmodelled, []);
    assert.equal(j.model.params, total);
    assert.deepEqual([j.mesh.worldSize, j.mesh.shardGroup, j.mesh.tp], [8, 4, 2]);
    assert.match(shown(j, 'tensorParallel')!, /^2/);
    // Each GPU's units hold (total - norms) / 2 + norms parameters.
    const held = j.units.reduce((s: number, u: { params: number }) => s + u.params, 0);
    assert.equal(held, (total - norms) / 2 + norms);
  });

  it('a head with output_layouts=Replicate() all-gathers the logits: no loss parallel, one more collective', async () => {
    const off = await estimateOf(script());
    const on = await estimateOf(
      script({
        head: 'ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1), use_local_output=False)',
      }),
    );
    assert.match(shown(off, 'lossParallel')!, /^off/);
    assert.match(shown(on, 'lossParallel')!, /^on/);
    const tp = (j: { comms: { links: { role: string; collectives: number; bytes: number }[] } }) =>
      j.comms.links.find((l) => l.role === 'tensor parallel')!;
    // 8 per block and 4 for the embedding and head (no checkpointing): 20, each 1/2 of 2 x 32 x 64 fp32 elements;
    // without loss parallel one all-gather of 1/2 of the 2 x 32 x 96 logits more.
    assert.equal(tp(on).collectives, 20);
    assert.equal(tp(on).bytes, 20 * (1 / 2) * 2 * 32 * 64 * 4);
    assert.equal(tp(off).collectives, 21);
    assert.equal(tp(off).bytes, 20 * (1 / 2) * 2 * 32 * 64 * 4 + (1 / 2) * 2 * 32 * 96 * 4);
  });

  it('says why a plan is not modelled, and a degree not known statically until an input gives it', async () => {
    // Norms and embedding left whole, as Transformers' tp_plan leaves them: that plan, modelled.
    const hf = await estimateOf(script({ norms: false, embedding: false }));
    assert.deepEqual(hf.unmodelled, []);
    assert.match(shown(hf, 'tpPlan')!, /^Transformers' tp_plan/);
    assert.equal(
      hf.units.reduce((s: number, u: { params: number }) => s + u.params, 0),
      (total - norms - 96 * 64) / 2 + norms + 96 * 64,
    );
    const noSp = await estimateOf(script({ norms: false }));
    assert.equal(noSp.targetFit.verdict, 'undecided');
    assert.match(noSp.unmodelled.join('\n'), /norm has no SequenceParallel entry/);
    const unknown = await estimateOf(script({ tp: 'int(os.environ["TP"])' }));
    assert.match(unknown.unmodelled.join('\n'), /of a degree not known statically \(set "# fsdp: tp=T"\)/);
    const given = await estimateOf(script({ tp: 'int(os.environ["TP"])' }), '--tp', '2');
    assert.deepEqual(given.unmodelled, []);
    assert.equal(given.mesh.tp, 2);
  });
});

describe("Transformers' tp_plan (no sequence parallelism)", () => {
  const m = modelFromHfConfig(LLAMA);
  it('splits the projections and the head, and leaves the embedding and the norms whole', () => {
    const r = tensorParallelTree(m.root, m.shape, 2, 'transformers');
    assert.ok('root' in r);
    const shapes = shapesOf(r.root);
    // LlamaConfig.base_model_tp_plan: q, k, v, gate, up colwise, o and down rowwise; the head colwise (its
    // output gathered); no entry for embed_tokens or the norms.
    assert.deepEqual(shapes.get('model.layers.0.self_attn.q_proj.weight'), [32, 64]);
    assert.deepEqual(shapes.get('model.layers.0.mlp.down_proj.weight'), [64, 64]);
    assert.deepEqual(shapes.get('lm_head.weight'), [48, 64]);
    assert.deepEqual(shapes.get('model.embed_tokens.weight'), [96, 64]);
    // Whole: the embedding 96 x 64 and the norms (2 x 2 x 64 + 64).
    const whole = 96 * 64 + 320;
    assert.equal(countParams(r.root), (countParams(m.root) - whole) / 2 + whole);
    const tied = modelFromHfConfig({ ...LLAMA, tie_word_embeddings: true });
    assert.ok('problem' in tensorParallelTree(tied.root, tied.shape, 2, 'transformers'));
  });

  it('a block keeps its norms whole and halves attention and the MLP; a checkpointed one its whole input', () => {
    const x: ActivationInputs = { microBatch: 2, seqLen: 32, attention: 'fused', bytes: 2 };
    const sb = 2 * 32;
    const tensors = blockTensors(m.shape, x, false);
    const norms = tensors.filter((t) => /^(input_layernorm|post_attention_layernorm) /.test(t.name));
    // Two RMSNorms, each its fp32 input copy (4 B) and its bf16 output (2 B) per element of b·s·h.
    assert.equal(
      norms.reduce((s, t) => s + t.bytes, 0),
      2 * (4 + 2) * sb * 64,
    );
    const all = tensors.reduce((s, t) => s + t.bytes, 0);
    const normBytes = 2 * 6 * sb * 64;
    const split = blockActivations(m.shape, { ...x, tp: 2, sequenceParallel: false }, 'none', false, 0);
    assert.equal(split.saved, normBytes + (all - normBytes) / 2);
    const full = blockActivations(m.shape, { ...x, tp: 2, sequenceParallel: false }, 'full', false, 0);
    assert.equal(full.saved, 2 * sb * 64);
  });

  it('all-reduces per block, gathers the logits, and reads the plan from Accelerate and axolotl configs', async () => {
    const dir = projectDir('fsdp-lens-hf-tp-');
    try {
      fs.writeFileSync(
        path.join(dir, 'accelerate.yaml'),
        [
          'distributed_type: FSDP',
          'num_processes: 8',
          'fsdp_config:',
          '  fsdp_version: 2',
          '  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP',
          'parallelism_config:',
          '  parallelism_config_dp_shard_size: 4',
          '  parallelism_config_tp_size: 2',
          '',
        ].join('\n'),
      );
      const r = await cli(
        'estimate',
        path.join(dir, 'accelerate.yaml'),
        '--model',
        'meta-llama/Llama-3.1-8B',
        '--seq',
        '2048',
        '--json',
      );
      assert.equal(r.code, 0, r.err);
      const j = JSON.parse(r.out);
      assert.deepEqual(j.unmodelled, []);
      assert.deepEqual([j.mesh.worldSize, j.mesh.shardGroup, j.mesh.tp], [8, 4, 2]);
      const plan = (x: { assumptions: { key: string; value: string }[] }) =>
        x.assumptions.find((y) => y.key === 'tpPlan')?.value;
      assert.match(plan(j)!, /^Transformers' tp_plan/);
      // Llama 3.1 8B, no checkpointing, micro-batch 1 x 2048, fp32 (the config sets no mixed_precision: "no"):
      // 4 all-reduces per block (32) and the head's, each 2 x 1/2 of 2048 x 4096 elements of 4 B, and one
      // all-gather of 1/2 of the 2048 x 128,256 logits.
      const tp = j.comms.links.find((l: { role: string }) => l.role === 'tensor parallel');
      assert.equal(tp.collectives, 4 * 32 + 1 + 1);
      assert.equal(tp.bytes, 129 * 2 * (1 / 2) * 2048 * 4096 * 4 + (1 / 2) * 2048 * 128_256 * 4);
      // axolotl: dp_shard_size 4 x dp_replicate_size 2 x tensor_parallel_size 2 is a world of 16 in HSDP.
      fs.writeFileSync(
        path.join(dir, 'axolotl.yaml'),
        [
          'base_model: meta-llama/Llama-3.1-8B',
          'dp_shard_size: 4',
          'dp_replicate_size: 2',
          'tensor_parallel_size: 2',
          'fsdp_version: 2',
          'fsdp_config:',
          '  auto_wrap_policy: TRANSFORMER_BASED_WRAP',
          '  transformer_layer_cls_to_wrap: LlamaDecoderLayer',
          'sequence_len: 2048',
          'micro_batch_size: 1',
          'bf16: true',
          '',
        ].join('\n'),
      );
      const a = await cli('estimate', path.join(dir, 'axolotl.yaml'), '--json');
      assert.equal(a.code, 0, a.err);
      const k = JSON.parse(a.out);
      assert.deepEqual([k.mesh.worldSize, k.mesh.replicas, k.mesh.shardGroup, k.mesh.tp], [16, 2, 4, 2]);
      assert.match(plan(k)!, /^Transformers' tp_plan/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("Accelerate's context parallelism under Transformers' Trainer", () => {
  // An Accelerate config with cp_size 2 beside a Trainer script: the Trainer's training step enters
  // `maybe_context_parallel` (Transformers 4.56+), so each GPU keeps half of every sequence.
  const files = (pin?: string) => {
    const dir = projectDir('fsdp-lens-acc-cp-');
    fs.writeFileSync(
      path.join(dir, 'accelerate_cp.yaml'),
      [
        'distributed_type: FSDP',
        'mixed_precision: bf16',
        'num_processes: 8',
        'fsdp_config:',
        '  fsdp_version: 2',
        '  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP',
        'parallelism_config:',
        '  parallelism_config_dp_shard_size: 4',
        '  parallelism_config_cp_size: 2',
        '',
      ].join('\n'),
    );
    fs.writeFileSync(
      path.join(dir, 'train.py'),
      [
        '# Launch: accelerate launch --config_file accelerate_cp.yaml train.py',
        'from transformers import AutoModelForCausalLM, Trainer, TrainingArguments',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        'args = TrainingArguments(output_dir="out", per_device_train_batch_size=1, bf16=True)',
        'Trainer(model=model, args=args).train()',
        '',
      ].join('\n'),
    );
    if (pin) fs.writeFileSync(path.join(dir, 'requirements.txt'), `transformers==${pin}\n`);
    return dir;
  };
  it('splits the sequence when the Trainer applies it, and says so when its release predates it', async () => {
    const dir = files();
    const old = files('4.55.4');
    try {
      const r = await cli('estimate', path.join(dir, 'train.py'), '--json');
      assert.equal(r.code, 0, r.err);
      const j = JSON.parse(r.out);
      assert.deepEqual(j.unmodelled, []);
      assert.deepEqual([j.mesh.worldSize, j.mesh.shardGroup], [8, 8]);
      const cpShown = j.assumptions.find((a: { key: string }) => a.key === 'contextParallel');
      assert.equal(cpShown.value, '2');
      assert.match(cpShown.source.detail, /which the Trainer's training step applies/);
      // The config itself, estimated with its companion script, the same.
      const c = JSON.parse((await cli('estimate', path.join(dir, 'accelerate_cp.yaml'), '--json')).out);
      assert.deepEqual([c.unmodelled, c.mesh.worldSize], [[], 8]);
      const o = JSON.parse((await cli('estimate', path.join(old, 'train.py'), '--json')).out);
      assert.deepEqual(o.unmodelled, ['context parallelism (cp_size 2)']);
      assert.match(o.notes.join('\n'), /transformers 4\.55\.4 .* predates the Trainer's context parallelism/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
      fs.rmSync(old, { recursive: true, force: true });
    }
  });
});
