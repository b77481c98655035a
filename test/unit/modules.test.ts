import assert from 'node:assert/strict';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { scanText } from '../../src/core/analysis/input';
import { countBufferBytes, countParams, moduleAt, walk, type ModuleNode } from '../../src/core/model/tree';
import { exactForScript } from '../../src/core/exact/exact';
import { Interpreter } from '../../src/core/modules/interpreter';
import { toModuleTree } from '../../src/core/modules/moduleValues';
import { modelFromClass, modelFromScript } from '../../src/core/modules/resolveModel';
import { Project } from '../../src/core/project/project';
import { estimateFile } from '../../src/core/resolve/analyze';
import { fixture, FIXTURES, grammar, tempDir, writeFiles } from './helpers';
import { diskFS } from '../../src/host/disk';
import { runExactHelper } from '../../src/host/exact';
import { missing, skipUnless, tools, torchLine } from '../tools';

async function project(name: string) {
  const dir = path.join(FIXTURES, 'projects', name);
  return { dir, p: new Project([dir], await grammar(), diskFS) };
}

async function facts(name: string, file: string) {
  const { dir, p } = await project(name);
  return {
    p,
    dir,
    facts: scanText(await grammar(), path.join(dir, file), fixture(`projects/${name}/${file}`)),
  };
}

describe('static nn.Module analysis: a minimal GPT (dataclass config, ModuleDict of a ModuleList, tied head)', () => {
  // n_embd 512, 6 layers, vocabulary 50,304, 512 positions, no biases (train.py's GPTConfig).
  const block = 512 + 512 * 1536 + 512 * 512 + 512 + 512 * 2048 + 2048 * 512; // ln_1, c_attn, c_proj, ln_2, c_fc, c_proj
  const wte = 50_304 * 512;
  const wpe = 512 * 512;

  it('counts every parameter once, with the head tied to the embedding', async () => {
    const { p, facts: f } = await facts('gpt', 'train.py');
    const r = modelFromScript(p, f);
    assert.ok(r.ok, r.ok ? '' : r.reason);
    const root = r.model.root;
    assert.equal(block, 3_146_752);
    assert.equal(countParams(root), wte + wpe + 6 * block + 512);
    assert.equal(countParams(root), 44_898_816);
    assert.equal(moduleAt(root, 'transformer.h.5.attn.c_attn')?.params[0]?.shape.join('x'), '1536x512');
    assert.equal(moduleAt(root, 'transformer.h.0.ln_1')?.params.length, 1, 'LayerNorm without bias');
    // transformer.wte comes first in named_parameters(): the head's weight is the duplicate.
    assert.equal(moduleAt(root, 'lm_head')?.params[0]?.tiedTo, 'transformer.wte.weight');
    assert.equal(r.model.className, 'GPT');
  });

  it('gives exact parameters per unit through the estimate, with no annotation', async () => {
    const { p, facts: f } = await facts('gpt', 'train.py');
    const r = estimateFile(f, { project: p });
    assert.ok(r.ok, r.ok ? '' : r.reason);
    assert.deepEqual(
      r.estimate.units.map((u) => u.params),
      [...Array<number>(6).fill(block), wte + wpe + 512],
    );
    assert.equal(r.estimate.model.source.kind, 'detected');
    assert.match(
      r.estimate.model.source.detail ?? '',
      /GPT in model\.py \(read statically\), built at train\.py:7/,
    );
  });
});

describe('static nn.Module analysis: a framework-style Llama across files', () => {
  it('builds Llama 3.1 8B from ModelArgs, a dict of named configs and a ModuleDict filled in a loop', async () => {
    const { p, facts: f } = await facts('llama', 'parallelize.py');
    const r = modelFromScript(p, f);
    assert.ok(r.ok, r.ok ? '' : r.reason);
    const root = r.model.root;
    // FeedForward: int(2·16384/3) = 10,922; int(1.3·10,922) = 14,198; rounded up to a multiple of 1024: 14,336.
    assert.equal(moduleAt(root, 'layers.0.feed_forward.w1')?.params[0]?.shape.join('x'), '14336x4096');
    assert.equal(moduleAt(root, 'layers.31.attention.wk')?.params[0]?.shape.join('x'), '1024x4096');
    // Llama 3.1 8B's published total, reached through the model code (vocabulary set in train.py).
    assert.equal(countParams(root), 8_030_261_248);
    assert.match(
      r.model.origin,
      /Transformer in models\/llama\/model\.py \(read statically\), passed to apply_fsdp\(\) at train\.py:14/,
    );
  });

  it('maps apply_fsdp (called from another file) onto the units, exactly', async () => {
    const { p, facts: f } = await facts('llama', 'parallelize.py');
    const r = estimateFile(f, { project: p });
    assert.ok(r.ok, r.ok ? '' : r.reason);
    assert.equal(r.estimate.units.length, 33);
    assert.deepEqual(new Set(r.estimate.units.slice(0, 32).map((u) => u.params)), new Set([218_112_000]));
    assert.equal(r.estimate.units[32]!.params, 2 * 128_256 * 4096 + 4096);
    assert.equal(r.estimate.perGpu.modelStateBytes, 16_060_522_496);
    // reshard_after_forward=int(layer_id) < len(model.layers) - 1, written inline: only layers.31 stays gathered.
    assert.deepEqual(
      r.estimate.units.filter((u) => u.residency.kind === 'keep').map((u) => u.name),
      ['layers.31'],
    );
  });

  it('reads a named config from an annotation: model=path:Class config=8B', async () => {
    const { p, dir } = await project('llama');
    const r = modelFromClass(p, path.join(dir, 'models/llama/model.py'), 'Transformer', 'debugmodel');
    // debugmodel: dim 256, 8 layers, 16 heads, vocab_size -1 (unset): the embedding has an unknown size.
    assert.equal(r.ok, true);
    // What is not known is listed as not counted.
    if (r.ok) assert.ok([...r.model.notes, ...r.model.gaps].some((n) => /not known|not counted/.test(n)));
  });
});

describe('static nn.Module analysis: the model passed through two functions (torchtitan layout)', () => {
  // "mini": dim 640, 3 layers, 10 heads (head_dim 64), 2 KV heads, vocabulary 32,000, ffn multiplier 1.3, multiple 128.
  // FFN width: int(2·2560/3) = 1706; int(1.3·1706) = 2217; rounded up to a multiple of 128: 2304.
  const block = 2 * 640 * 640 + 2 * 640 * 128 + 3 * 640 * 2304 + 2 * 640; // wq wo, wk wv, w1 w2 w3, two RMSNorms
  const total = 3 * block + 32_000 * 640 + 640 + 640 * 32_000; // embedding, final norm, output

  it('follows apply_fsdp() to parallelize_llama() to the script that builds the model', async () => {
    const { p, facts: f } = await facts('titan', 'mypkg/parallelize.py');
    const r = modelFromScript(p, f);
    assert.ok(r.ok, r.ok ? '' : r.reason);
    assert.equal(block, 5_408_000);
    assert.equal(countParams(moduleAt(r.model.root, 'layers.0')!), block);
    assert.equal(countParams(r.model.root), total);
    assert.equal(total, 57_184_640); // PyTorch 1.13's sum(p.numel()) for the same model
    assert.match(r.model.origin, /passed to parallelize_llama\(\) at train\.py:13 \(then apply_fsdp\(\)\)/);
  });

  it('evaluates reshard_after_forward for each block: every one but the last reshards', async () => {
    // apply_fsdp: reshard_after_forward = int(layer_id) < len(model.layers) - 1, so layers 0 and 1 of 3 reshard.
    const { p, facts: f } = await facts('titan', 'mypkg/parallelize.py');
    const r = estimateFile(f, { project: p });
    assert.ok(r.ok, r.ok ? '' : r.reason);
    assert.deepEqual(
      r.estimate.units.map((u) => [u.name, u.residency.kind]),
      [
        ['layers.0', 'reshard'],
        ['layers.1', 'reshard'],
        ['layers.2', 'keep'],
        ['Transformer (root)', 'reshard'],
      ],
    );
    assert.ok(
      r.estimate.notes.some((n) =>
        /evaluated for each module: kept gathered after forward: layers\.2$/.test(n),
      ),
    );
    assert.ok(!r.estimate.notes.some((n) => /assumed the default/.test(n)));
  });

  it('ends at functions that only call each other, without a model and without looping', async () => {
    const { p, facts: f } = await facts('titan', 'mypkg/loop.py');
    const r = modelFromScript(p, f);
    assert.equal(r.ok, false);
    assert.match(r.ok ? '' : r.reason, /not known statically/);
  });
});

describe('constant evaluation and layers', () => {
  // Net(Config(dim=64, n_layers=3)), by hand: hidden() = max(16, min(4096, ceil(64·2.5/8)·8)) = 160.
  const blockBase =
    64 + 64 * 160 + (160 * 64 + 64) + (3 * 64 * 64 + 3 * 64 + 64 * 64 + 64) + (64 * 16 * 3 + 64);
  const blocks = [blockBase + 128, blockBase, blockBase + 128]; // LayerNorm affine only on even blocks
  const embed = 100 * 64;
  const heads = 64 * 10 + 10 + 64 * 8;
  const stem = 8 * 3 * 3 * 3 + 8 + 8 * 8;
  const pieces = 2 * (64 * 64 + 64);

  it('evaluates dataclass defaults, methods, math, conditions, relative imports, and every layer kind', async () => {
    const { p, facts: f } = await facts('layers', 'train.py');
    const r = modelFromScript(p, f);
    assert.ok(r.ok, r.ok ? '' : r.reason);
    const root = r.model.root;
    assert.equal(blockBase, 40_384);
    assert.equal(countParams(moduleAt(root, 'blocks.0')!), blocks[0]);
    assert.equal(countParams(moduleAt(root, 'blocks.1')!), blocks[1]);
    assert.equal(countParams(root), embed + blocks.reduce((a, b) => a + b, 0) + heads + stem + pieces);
    assert.equal(moduleAt(root, 'blocks.2.mix')?.params[0]?.shape.join('x'), '160x64');
    assert.equal(
      moduleAt(root, 'blocks.0.norm')?.params.length,
      1,
      'Norm(bias=False) from a subclass via super().__init__',
    );
    assert.equal(moduleAt(root, 'blocks.0.conv')?.params[0]?.shape.join('x'), '64x16x3');
    assert.equal(moduleAt(root, 'blocks.0.attn.out_proj')?.className, 'NonDynamicallyQuantizableLinear');
    assert.equal(moduleAt(root, 'blocks.0.extra'), undefined, 'if cfg.extra is not None: skipped');
    assert.equal(moduleAt(root, 'heads.b')?.params[0]?.shape.join('x'), '8x64');
    assert.equal(moduleAt(root, 'stem.2')?.params[0]?.shape.join('x'), '8x8x1x1');
    assert.equal(moduleAt(root, 'pieces.1')?.className, 'Linear');
    // Buffers: a 64x64 fp32 mask and 64 int64 positions.
    assert.equal(countBufferBytes(root), 64 * 64 * 4 + 64 * 8);
  });

  it('ends pathological code with a reason instead of hanging', { timeout: 60_000 }, async () => {
    const { p, dir } = await project('layers');
    for (const cls of ['SelfReferential', 'Endless']) {
      const r = modelFromClass(p, path.join(dir, 'pkg/model.py'), cls);
      if (r.ok)
        assert.ok(r.model.notes.length + r.model.gaps.length > 0, `${cls}: says what it could not resolve`);
      else assert.match(r.reason, /too (complex|deeply)|nest/);
    }
  });

  it('keeps values it cannot know as unknown, with a reason', async () => {
    const { p, dir } = await project('layers');
    const f = p.file(path.join(dir, 'pkg/model.py'))!;
    const interp = new Interpreter(p);
    const net = interp.instantiate(interp.moduleName(f, 'Net') as never, [], {});
    assert.equal(net.k, 'mod');
    const tree = toModuleTree(net as never).root;
    // Net() with the default PRESETS["base"] config: 3 blocks of 64.
    assert.equal(tree.children.filter((c) => c.name === 'blocks')[0]?.children.length, 3);
  });
});

describe('torch.nn layers beyond the basics, with parameters and buffers as PyTorch defines them', () => {
  const d = 32;
  // RNNBase, per layer and direction: gates·h·(in + h_out) weights, 2·gates·h biases (LSTM 4 gates, GRU 3, RNN 1).
  const lstm = 2 * (4 * 48 * (d + 48) + 8 * 48) + 2 * (4 * 48 * (2 * 48 + 48) + 8 * 48); // 2 layers, both ways
  // proj_size 16, no biases: weight_hh is [4h, 16] and weight_hr [16, h]; layer 1's input is the 16 projected.
  const lstmProj = 4 * 48 * (d + 16) + 16 * 48 + (4 * 48 * (16 + 16) + 16 * 48);
  const gru = 3 * 24 * (d + 24) + 6 * 24;
  const rnn = 16 * (d + 16);
  const cell = 4 * 8 * (d + 8) + 8 * 8;
  // MultiheadAttention: in_proj [3d, d] + [3d], out_proj [d, d] + [d]; linear1 [64, d], linear2 [d, 64]; LayerNorms.
  const mha = 3 * d * d + 3 * d + d * d + d;
  const ff = d * 64 + 64 + 64 * d + d;
  const encLayer = mha + ff + 2 * 2 * d;
  const decLayer = 2 * mha + ff + 3 * 2 * d;
  const encoder = 2 * encLayer + 2 * d; // two deep copies and the final norm
  const transformer = encLayer + 2 * d + decLayer + 2 * d;
  const norms = 2 * 8 + 2 * 8 + 2 * 8 + 8; // BatchNorm2d, InstanceNorm3d(affine), GroupNorm, PReLU(8)
  const rest = 4 * d * 16 + 4 + 100 * d + (8 * 4 * 3 + 4) + 8 * 2 * 3 * 2; // Bilinear, EmbeddingBag, ConvTranspose
  const copies = 2 * gru;

  it('counts recurrent, transformer, norm and transposed-convolution layers exactly', async () => {
    const { p, facts: f } = await facts('zoo', 'train.py');
    const r = modelFromScript(p, f);
    assert.ok(r.ok, r.ok ? '' : r.reason);
    const root = r.model.root;
    const at = (path: string) => countParams(moduleAt(root, path)!);
    assert.equal(at('lstm'), lstm);
    assert.equal(lstm, 87_552);
    assert.equal(at('lstm_proj'), lstmProj);
    assert.equal(at('gru'), gru);
    assert.equal(at('rnn'), rnn);
    assert.equal(at('cell'), cell);
    assert.equal(at('encoder'), encoder);
    assert.equal(at('decoder_layer'), decLayer);
    assert.equal(at('tr'), transformer);
    assert.equal(at('copies'), copies, 'copy.deepcopy gives each copy its own parameters');
    assert.equal(
      moduleAt(root, 'copies.1')?.params.some((q) => q.tiedTo),
      false,
    );
    assert.equal(
      moduleAt(root, 'lstm_proj')
        ?.params.map((q) => q.name)
        .join(' '),
      'weight_ih_l0 weight_hh_l0 weight_hr_l0 weight_ih_l1 weight_hh_l1 weight_hr_l1',
    );
    assert.equal(
      countParams(root),
      lstm + lstmProj + gru + rnn + cell + encoder + decLayer + transformer + norms + rest + copies,
    );
    assert.equal(countParams(root), 176_080); // PyTorch 1.13's sum(p.numel()) for Zoo(32)
    // running_mean and running_var (8 float32 each) and num_batches_tracked (one int64), on bn and inorm_stats.
    const stats = 2 * (8 * 4 + 8 * 4 + 8);
    // tril(ones(16, 16)).view(1, 1, 16, 16) in float32; arange(16).unsqueeze(0) as float16; 4 inverse frequencies.
    const shaped = 16 * 16 * 4 + 16 * 2 + 4 * 4;
    assert.equal(countBufferBytes(root), stats + shaped);
    const buf = (name: string) => root.buffers.find((b) => b.name === name);
    assert.deepEqual(buf('bias')?.shape, [1, 1, 16, 16]);
    assert.deepEqual(
      [buf('pos')?.shape, buf('pos')?.dtype, buf('pos')?.persistent],
      [[1, 16], 'float16', false],
    );
    assert.deepEqual([buf('inv_freq')?.shape, buf('inv_freq')?.dtype], [[4, 1], 'float32']);
    assert.equal(moduleAt(root, 'inorm')?.buffers.length, 0, 'InstanceNorm tracks nothing by default');
    assert.equal(moduleAt(root, 'bn_plain')?.buffers.length, 0);
  });

  it('registers nn.Buffer values as buffers, and takes .to(device) as no cast', async () => {
    const { p, dir } = await project('zoo');
    const r = modelFromClass(p, path.join(dir, 'model.py'), 'NewStyle');
    assert.ok(r.ok, r.ok ? '' : r.reason);
    // table: 4 x 8 float32, not persistent; steps: one int64; alias is a plain attribute, not a second buffer.
    assert.deepEqual(
      r.model.root.buffers.map((b) => [b.name, b.shape.join('x'), b.dtype, b.persistent]),
      [
        ['table', '4x8', 'float32', false],
        ['steps', '', 'int64', true],
      ],
    );
    assert.equal(countBufferBytes(r.model.root), 4 * 8 * 4 + 8);
    assert.equal(countParams(r.model.root), 8 * 8 + 8);
    assert.deepEqual(
      r.model.notes.filter((n) => /dtype/.test(n)),
      [],
    );
  });

  it('says which torch.nn layers it does not model instead of dropping them silently', async () => {
    const { p, dir } = await project('zoo');
    const r = modelFromClass(p, path.join(dir, 'model.py'), 'Unlisted');
    assert.ok(r.ok, r.ok ? '' : r.reason);
    assert.equal(countParams(r.model.root), 4 * 4 + 4);
    assert.ok(r.model.notes.includes('nn.LazyLinear not modelled: its parameters are not counted'));
    assert.ok(r.model.notes.includes('nn.Fold not modelled: its parameters are not counted'));
    assert.equal(moduleAt(r.model.root, 'lazy')?.className, 'LazyLinear');
  });
});

describe('control flow in constructors: break, continue, while, else', () => {
  it('a dataclass built from a mapping it cannot read keeps no defaults; one it reads sets its fields', async () => {
    // litgpt's pattern: `Config.from_name(name)` returns `cls(**name_to_config[name])`. With the name unknown the
    // mapping is unknown, and any field may come from it: the dataclass defaults are not the model's.
    const dir = tempDir('splat-');
    writeFiles(dir, {
      'm.py': [
        'from dataclasses import dataclass',
        'import torch.nn as nn',
        'configs = {"tiny": {"n_embd": 8}}',
        '@dataclass',
        'class Config:',
        '    n_embd: int = 4096',
        '    @classmethod',
        '    def from_name(cls, name):',
        '        return cls(**configs[name])',
        'class Net(nn.Module):',
        '    def __init__(self, config):',
        '        super().__init__()',
        '        self.proj = nn.Linear(config.n_embd, config.n_embd)',
        'def unknown(name):',
        '    return Net(Config.from_name(name))',
        'def tiny():',
        '    return Net(Config.from_name("tiny"))',
      ],
    });
    const p = new Project([dir], await grammar(), diskFS);
    const interp = new Interpreter(p);
    const file = p.file(path.join(dir, 'm.py'))!;
    const tree = (fn: string) => {
      const v = interp.callFunction(interp.moduleName(file, fn) as never, [], {});
      assert.equal(v.k, 'mod', fn);
      return toModuleTree(v as never).root;
    };
    assert.equal(countParams(tree('tiny')), 8 * 8 + 8, 'n_embd 8 from the mapping it reads');
    assert.equal(countParams(tree('unknown')), 0, 'not 4096 x 4096 from the default');
  });

  it('makes a call that recurses too deeply unknown, and builds the rest', async () => {
    const { p, dir } = await project('zoo');
    const r = modelFromClass(p, path.join(dir, 'flow.py'), 'DeepHelper');
    assert.ok(r.ok, r.ok ? '' : r.reason);
    assert.equal(countParams(r.model.root), 8 * 8 + 8 + (8 * 2 + 2), 'fc and head; deep has no known width');
    assert.ok(r.model.notes.some((n) => /depth_of\(\) is called too deep in nested calls to follow/.test(n)));
  });

  it('builds what Python builds', async () => {
    const { p, dir } = await project('zoo');
    const r = modelFromClass(p, path.join(dir, 'flow.py'), 'Loops');
    assert.ok(r.ok, r.ok ? '' : r.reason);
    const root = r.model.root;
    assert.equal(moduleAt(root, 'layers')?.children.length, 3, 'break at i == 3');
    assert.equal(moduleAt(root, 'odd')?.children.length, 3, 'continue on even i: 1, 3, 5');
    assert.equal(moduleAt(root, 'wide')?.params[0]?.shape.join('x'), '128x4', '8 doubled while below 100');
    assert.equal(moduleAt(root, 'k')?.params[0]?.shape.join('x'), '1x5', 'while True with a break at 5');
    assert.ok(moduleAt(root, 'after'), "a loop's else runs when it does not break");
    assert.equal(moduleAt(root, 'never'), undefined, 'and not when it does');
    const total = 3 * (4 * 4 + 4) + 3 * (4 * 2 + 2) + (4 * 128 + 128) + (5 + 1) + (2 * 2 + 2);
    assert.equal(countParams(root), total);
    assert.equal(total, 742); // PyTorch 1.13
  });

  it('makes what a loop it cannot follow builds unknown, with a note', { timeout: 60_000 }, async () => {
    const { p, dir } = await project('zoo');
    for (const [cls, why] of [
      ['Unbounded', /while depth > 0` depends on values not known statically/],
      ['Spinning', /while n > 0` runs more than \d+ times/],
      ['TooDeepLSTM', /LSTM with 1000000000 layers/],
    ] as const) {
      const r = modelFromClass(p, path.join(dir, 'flow.py'), cls);
      assert.ok(r.ok, r.ok ? '' : r.reason);
      const said = [...r.model.notes, ...r.model.gaps];
      assert.ok(
        said.some((n) => why.test(n)),
        said.join('; '),
      );
      if (cls === 'TooDeepLSTM') {
        assert.equal(countParams(r.model.root), 8 * 2 + 2, 'only the head');
        continue;
      }
      assert.equal(countParams(r.model.root), 0, `${cls}: proj's width is not guessed`);
      assert.ok(r.model.gaps.some((n) => /Linear with sizes not known statically/.test(n)));
    }
  });
});

/**
 * The Python with PyTorch that scripts/provision.mjs found: Debian's python3-torch (PyTorch 1.13) is what CI
 * installs; FSDP_LENS_PYTHON points elsewhere. Without one the suite is skipped, and under CI it fails.
 */
const PYTHON = tools().torch.python ?? process.env.FSDP_LENS_PYTHON ?? '/usr/bin/python3';
const NEEDS_TORCH = { skip: skipUnless('torch') };

let saidWhich = false;
/** Says (once) which Python the tests ran; under CI, fails at once when there is none. */
function withTorch(t: { diagnostic(message: string): void }): void {
  const absent = missing('torch');
  if (absent) assert.fail(`CI runs every test: ${absent}`);
  if (!saidWhich) t.diagnostic(torchLine());
  saidWhich = true;
}

describe('exact mode (PyTorch on the meta device) agrees with the static reading', NEEDS_TORCH, () => {
  for (const [name, file] of [
    ['gpt', 'train.py'],
    ['llama', 'parallelize.py'],
    ['layers', 'train.py'],
    ['zoo', 'train.py'],
  ] as const) {
    it(`${name}: same modules, shapes, buffers and ties`, { timeout: 120_000 }, async (t) => {
      withTorch(t);
      const { p, facts: f } = await facts(name, file);
      const stat = modelFromScript(p, f);
      assert.ok(stat.ok, stat.ok ? '' : stat.reason);
      const x = await exactForScript(p, f, { python: PYTHON, timeoutMs: 110_000, run: runExactHelper });
      assert.ok(x.ok, x.ok ? '' : `${x.error} ${x.detail ?? ''}`);
      const flat = (root: ModuleNode) =>
        [...walk(root)]
          .flatMap((m) =>
            m.params.map((q) => `${m.path}.${q.name}:${q.shape.join('x')}${q.tiedTo ? `=${q.tiedTo}` : ''}`),
          )
          .sort();
      assert.deepEqual(flat(x.model.root), flat(stat.model.root));
      assert.equal(countParams(x.model.root), countParams(stat.model.root));
      assert.equal(countBufferBytes(x.model.root), countBufferBytes(stat.model.root));
      assert.match(x.model.origin, /built by PyTorch \d+\.\d+/);
      // And the estimate made from it says so.
      const r = estimateFile(f, { project: p, exactModel: x.model });
      assert.ok(r.ok);
      assert.equal(r.estimate.model.source.kind, 'measured');
    });
  }

  it(
    'reports a missing PyTorch, an import error and a time limit clearly',
    { timeout: 120_000 },
    async (t) => {
      withTorch(t);
      const { p, facts: f } = await facts('broken', 'train.py');
      const noTorch = await exactForScript(p, f, {
        python: process.execPath.replace(/node$/, 'nonexistent-python'),
        timeoutMs: 30_000,
        run: runExactHelper,
      });
      assert.equal(noTorch.ok, false);
      assert.match(noTorch.ok ? '' : noTorch.error, /Python not found/);
      const bad = await exactForScript(p, f, { python: PYTHON, timeoutMs: 60_000, run: runExactHelper });
      assert.equal(bad.ok, false);
      assert.match(
        bad.ok ? '' : bad.error,
        /importing .*model\.py failed: ModuleNotFoundError: No module named 'not_a_real_package'/,
      );
      // A fifty-line dispatcher error: its first sentence once, and the user's line it came from.
      const { facts: loud } = await facts('broken', 'train_loud.py');
      const noisy = await exactForScript(p, loud, { python: PYTHON, timeoutMs: 60_000, run: runExactHelper });
      assert.equal(noisy.ok, false);
      if (!noisy.ok) {
        assert.equal(
          noisy.error,
          "building Loud failed: NotImplementedError: Could not run 'aten::polar.out' with arguments from the 'Meta' backend. (no kernel for it on the meta device in this PyTorch)",
        );
        assert.equal(noisy.detail, 'loud.py:18 in __init__: raise dispatcher_error()');
      }
      const { facts: slow } = await facts('broken', 'train_slow.py');
      const timed = await exactForScript(p, slow, { python: PYTHON, timeoutMs: 2000, run: runExactHelper });
      assert.equal(timed.ok, false);
      assert.match(timed.ok ? '' : timed.error, /longer than 2 s and was stopped/);
    },
  );
});

describe('project settings: pyproject.toml, launch files, precedence', () => {
  it('reads [tool.fsdp-lens] and a torchrun line that launches the script', async () => {
    const { p, facts: f } = await facts('settings', 'train.py');
    const r = estimateFile(f, { project: p, settings: { worldSize: 64, seqLen: 2048 } });
    assert.ok(r.ok, r.ok ? '' : r.reason);
    const a = (k: string) => r.estimate.assumptions.find((x) => x.key === k)!;
    assert.equal(r.estimate.model.name, 'meta-llama/Llama-3.2-1B');
    assert.equal(a('model').source.kind, 'pyproject');
    assert.equal(r.estimate.setup.gpu, 'h200-141gb');
    assert.equal(a('gpu').source.kind, 'pyproject');
    assert.equal(r.estimate.setup.microBatch, 4);
    assert.deepEqual(r.estimate.setup.checkpointing, 'full');
    // torchrun --nnodes 2 --nproc_per_node=4 train.py (a continued line in scripts/run.sh)
    assert.equal(r.estimate.setup.worldSize, 8);
    assert.equal(r.estimate.setup.gpusPerNode, 4);
    assert.deepEqual(a('worldSize').source, { kind: 'launch', detail: 'scripts/run.sh:3' });
    // The editor setting is below all of them; sequence length comes from it.
    assert.equal(r.estimate.setup.seqLen, 2048);
    assert.equal(a('seqLen').source.kind, 'setting');
  });

  it('an annotation beats pyproject.toml; SLURM node counts reach the launch layer', async () => {
    const { p, facts: f } = await facts('settings', 'annotated.py');
    const r = estimateFile(f, { project: p });
    assert.ok(r.ok);
    assert.equal(r.estimate.setup.microBatch, 2);
    assert.equal(r.estimate.assumptions.find((x) => x.key === 'microBatch')!.source.kind, 'annotation');
    // #SBATCH --nodes=4 with torchrun --nproc_per_node 8 (its --nnodes is a shell variable): 32 GPUs.
    assert.equal(r.estimate.setup.worldSize, 32);
  });
});
