// The pickle reader against CPython's pickle module, and PyTorch memory snapshots (pickles shaped as
// torch.cuda.memory._dump_snapshot writes them, made by test/fixtures/snapshot/make_snapshot.py with the standard
// library alone) read as a stream into a measured run, with their peaks derived here by hand.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import * as v8 from 'node:v8';
import * as vm from 'node:vm';
import { PickleError, PickleReader } from '../../src/core/report/pickle';
import {
  CATEGORY_ROWS,
  MEASURED_CATEGORIES,
  type MeasuredCategories,
  type MeasuredCategory,
} from '../../src/core/report/measured';
import type { LiveSet } from '../../src/core/estimator/types';
import { frameCategory, framePhase, readSnapshot } from '../../src/core/report/snapshot';
import { skipUnless } from '../tools';
import { tempDir } from './helpers';
import { chunksOf, makeSnapshot, PYTHON } from './snapshot-fixture';

const GiB = 2 ** 30;
const MiB = 2 ** 20;

/** Plain JSON of a decoded value, as the Python side writes it (see PLAIN below). */
function plain(v: unknown): unknown {
  if (v instanceof Map) return Object.fromEntries([...v].map(([k, x]) => [String(k), plain(x)]));
  if (Array.isArray(v)) return v.map(plain);
  if (v instanceof Uint8Array) return { bytes: Buffer.from(v).toString('hex') };
  if (typeof v === 'bigint') return { int: v.toString() };
  return v;
}

const PLAIN = `
def plain(v):
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (set, frozenset)):
        return [plain(x) for x in sorted(v)]
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, (bytes, bytearray)):
        return {"bytes": v.hex()}
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2**53 - 1:
        return {"int": str(v)}
    return v
`;

/** Every opcode the reader knows, pickled by CPython at `protocol`: the file and the value as plain JSON. */
function pythonPickle(protocol: number): { file: string; expected: unknown } {
  const file = path.join(tempDir('fsdp-lens-pickle-'), `p${protocol}.pickle`);
  const program = `
import json, pickle, sys
${PLAIN}
shared = ["shared", 1]
text = "a string seen twice"
value = {
    "ints": [0, 1, 255, 256, 65535, 65536, -1, -2**31, 2**31 - 1, 2**31, 2**40, -2**40, 2**53 - 1, 2**63, -(2**70)],
    "floats": [1.5, -2.25, 1e300, 0.1],
    "consts": [True, False, None],
    "strings": ["", "ascii", "é ü 日本 🎉", "x" * 300, "y" * 70000, text, text],
    "tuples": [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)],
    "long_list": list(range(3000)),
    "big_dict": {"k%d" % i: i for i in range(2500)},
    "twice": [shared, shared],
    "nested": {"a": {"b": [{"c": (1, "d")}]}},
}
# Below protocol 3 bytes, and below 4 sets, are pickled as calls (GLOBAL and REDUCE), which the reader refuses.
if ${protocol} >= 3:
    value["bytes"] = [b"", b"\\x00\\xff", b"z" * 300] + ([bytearray(b"ba")] if ${protocol} >= 5 else [])
if ${protocol} >= 4:
    value["sets"] = [{3}, frozenset([4])]
with open(sys.argv[1], "wb") as f:
    pickle.dump(value, f, protocol=${protocol})
print(json.dumps(plain(value)))
`;
  const out = execFileSync(PYTHON, ['-c', program, file], { maxBuffer: 16 << 20 }).toString();
  return { file, expected: JSON.parse(out) };
}

function decode(file: string, chunk: number): unknown {
  const r = new PickleReader();
  for (const c of chunksOf(file, chunk)) if (r.write(c)) break;
  return r.result();
}

describe('the pickle reader', { skip: skipUnless('python3') }, () => {
  for (const protocol of [2, 3, 4, 5])
    it(`reads what CPython's pickle writes at protocol ${protocol}, in chunks of any size`, () => {
      const { file, expected } = pythonPickle(protocol);
      for (const size of [1, 7, 4096, 1 << 20])
        assert.deepEqual(plain(decode(file, size)), expected, `chunks of ${size}`);
    });

  it('keeps a value stored once and referred to twice as one value (the memo)', () => {
    const { file } = pythonPickle(4);
    const v = decode(file, 4096) as Map<string, unknown>;
    const twice = v.get('twice') as unknown[];
    assert.equal(twice[0], twice[1]);
  });

  it('refuses Python objects (GLOBAL, REDUCE) by name, and runs nothing', () => {
    const file = path.join(tempDir('fsdp-lens-pickle-'), 'objects.pickle');
    for (const [protocol, opcode] of [
      [2, 'GLOBAL'],
      [4, 'STACK_GLOBAL'],
    ] as const) {
      execFileSync(PYTHON, [
        '-c',
        `import pickle, collections, sys; pickle.dump(collections.OrderedDict(a=1), open(sys.argv[1], "wb"), protocol=${protocol})`,
        file,
      ]);
      assert.throws(
        () => decode(file, 4096),
        (e: Error) =>
          e instanceof PickleError && e.message.includes(opcode) && /Python objects/.test(e.message),
      );
    }
  });

  it('says a pickle cut short is truncated', () => {
    const { file } = pythonPickle(4);
    const bytes = fs.readFileSync(file);
    const r = new PickleReader();
    r.write(bytes.subarray(0, bytes.length >> 1));
    assert.throws(() => r.result(), /truncated/);
  });

  it('refuses a value past its caps, naming the cap', () => {
    const { file } = pythonPickle(4);
    const r = new PickleReader(undefined, { liveItems: 1000 });
    assert.throws(() => {
      for (const c of chunksOf(file, 4096)) if (r.write(c)) break;
    }, /more than 1000 items/);
    const s = new PickleReader(undefined, { stringBytes: 1000 });
    assert.throws(() => {
      for (const c of chunksOf(file, 4096)) if (s.write(c)) break;
    }, /70000 bytes, over/);
    const m = new PickleReader(undefined, { memoBytes: 50_000 });
    assert.throws(() => {
      for (const c of chunksOf(file, 4096)) if (m.write(c)) break;
    }, /memo passes/);
  });
});

describe('what a stack frame says of its phase', () => {
  it('reads the functions PyTorch runs in each phase', () => {
    const site = '/usr/lib/python3/dist-packages/';
    assert.equal(framePhase(`${site}torch/autograd/graph.py`, '_engine_run_backward'), 'backward');
    assert.equal(framePhase(`${site}torch/_tensor.py`, 'backward'), 'backward');
    assert.equal(framePhase(`${site}torch/autograd/__init__.py`, 'grad'), 'backward');
    assert.equal(framePhase(`${site}torch/utils/checkpoint.py`, 'unpack_hook'), 'backward');
    assert.equal(
      framePhase(`${site}torch/distributed/fsdp/_fully_shard/_fsdp_state.py`, '_pre_backward'),
      'backward',
    );
    assert.equal(
      framePhase(`${site}torch/distributed/fsdp/_runtime_utils.py`, '_post_backward_hook'),
      'backward',
    );
    assert.equal(framePhase('??', 'torch::autograd::Engine::evaluate_function(...)'), 'backward');
    assert.equal(framePhase('??', 'torch::autograd::generated::MmBackward0::apply(...)'), 'backward');
    assert.equal(framePhase(`${site}torch/optim/adamw.py`, 'step'), 'optimizer');
    assert.equal(framePhase(`${site}torch/optim/adam.py`, '_multi_tensor_adam'), 'optimizer');
    assert.equal(framePhase(`${site}torch/nn/modules/module.py`, 'zero_grad'), 'optimizer');
    assert.equal(framePhase('/work/model.py', 'forward'), 'forward');
    assert.equal(framePhase(`${site}torch/nn/modules/module.py`, '_call_impl'), 'forward');
    assert.equal(framePhase(`${site}torch/nn/functional.py`, 'cross_entropy'), 'forward');
    // Names that say nothing: the training loop's own functions, a user function that happens to be called step.
    assert.equal(framePhase('/work/train.py', 'main'), null);
    assert.equal(framePhase('/work/train.py', 'step'), null);
    assert.equal(framePhase('/work/train.py', 'post_backward'), null);
    assert.equal(framePhase(`${site}torch/nn/functional.py`, 'linear'), null);
  });
});

/** Frames of the hand-made snapshots: PyTorch's own files and functions, and a training script's. */
const FRAMES = {
  mod: { filename: '/site/torch/nn/modules/module.py', name: '_call_impl', line: 1750 },
  fwd: { filename: '/work/model.py', name: 'forward', line: 40 },
  train: { filename: '/work/train.py', name: 'train_step', line: 12 },
  main: { filename: '/work/train.py', name: 'main', line: 90 },
  eng: { filename: '/site/torch/autograd/graph.py', name: '_engine_run_backward', line: 823 },
  tb: { filename: '/site/torch/_tensor.py', name: 'backward', line: 626 },
  opt: { filename: '/site/torch/optim/adamw.py', name: 'step', line: 220 },
  cppEngine: { filename: '??', name: 'torch::autograd::Engine::evaluate_function(...)', line: 0 },
  cppMm: { filename: '??', name: 'at::native::mm(...)', line: 0 },
};

const STACKS = {
  F: ['fwd', 'mod', 'train', 'main'],
  // The backward pass on autograd's own thread: C++ frames only (stacks="all").
  B: ['cppMm', 'cppEngine'],
  // The same thread with stacks="python": a stack with no frame.
  Bpy: [],
  O: ['opt', 'train', 'main'],
  U: ['train', 'main'],
};

const BASE = 0x7f0000000000;
const g = (x: number) => x * GiB;

/**
 * One step on cuda:0, in GiB. Before tracing began 1 GiB was allocated (a block with no counterpart in the trace).
 * Running allocated from the trace's start: +1 F, +2 F (3), a 2 GiB segment, +1.5 B (4.5), -1 (3.5), +0.5 Bpy (4),
 * -2 (2), -0.5 (1.5), +0.25 O (1.75), -1.5 (0.25), the segment freed, +0.125 U (0.375), an OOM, +0.0625 with no
 * stack (0.4375), +0.25 F (0.6875), whose free is requested and not completed.
 */
const STEP = {
  frames: FRAMES,
  stacks: STACKS,
  segments: [
    {
      device: 0,
      address: BASE,
      total_size: g(8),
      blocks: [
        { size: g(1), requested_size: g(1), state: 'active_allocated', stack: 'U' },
        { size: g(0.25), requested_size: g(0.25), state: 'active_allocated', stack: 'O' },
        { size: g(0.125) + 512, requested_size: g(0.125), state: 'active_allocated', stack: 'U' },
        { size: g(0.0625), requested_size: g(0.0625), state: 'active_allocated' },
        { size: g(0.25), requested_size: g(0.25), state: 'active_pending_free', stack: 'F' },
        { size: g(8 - 1 - 0.25 - 0.125 - 0.0625 - 0.25) - 512, requested_size: 0, state: 'inactive' },
      ],
    },
  ],
  traces: [
    [
      { action: 'alloc', addr: BASE + g(2), size: g(1), stack: 'F', time_us: 1_700_000_000_000_000 },
      { action: 'alloc', addr: BASE + g(3), size: g(2), stack: 'F' },
      { action: 'segment_alloc', addr: BASE + g(16), size: g(2) },
      { action: 'alloc', addr: BASE + g(16), size: g(1.5), stack: 'B' },
      { action: 'free_requested', addr: BASE + g(2), size: g(1), stack: 'F' },
      { action: 'free_completed', addr: BASE + g(2), size: g(1), stack: 'F' },
      { action: 'alloc', addr: BASE + g(5), size: g(0.5), stack: 'Bpy' },
      { action: 'free_completed', addr: BASE + g(3), size: g(2), stack: 'F' },
      { action: 'free_completed', addr: BASE + g(5), size: g(0.5), stack: 'Bpy' },
      { action: 'alloc', addr: BASE + g(1), size: g(0.25), stack: 'O' },
      { action: 'free_completed', addr: BASE + g(16), size: g(1.5), stack: 'B' },
      { action: 'segment_free', addr: BASE + g(16), size: g(2) },
      { action: 'alloc', addr: BASE + g(1.25), size: g(0.125), stack: 'U' },
      { action: 'oom', size: g(40), device_free: g(1) },
      // The blocks after the 0.125 GiB one start 512 bytes further on (its block is rounded up).
      { action: 'alloc', addr: BASE + g(1.375) + 512, size: g(0.0625) },
      { action: 'alloc', addr: BASE + g(1.4375) + 512, size: g(0.25), stack: 'F' },
      { action: 'free_requested', addr: BASE + g(1.4375) + 512, size: g(0.25), stack: 'F' },
      { action: 'snapshot', addr: 0, size: g(1.6875), time_us: 1_700_000_002_500_000 },
    ],
  ],
};

/** Measured categories: the named ones, the rest zero, and unknown the sum of its parts. */
function cats(
  named: Partial<Record<Exclude<MeasuredCategory, 'unknown'>, number>>,
  unknown: Partial<MeasuredCategories['unknown']> = {},
): MeasuredCategories {
  const u = { withoutFrames: 0, undecided: 0, beforeTrace: 0, ...unknown };
  const bytes = Object.fromEntries(MEASURED_CATEGORIES.map((c) => [c, 0])) as Record<
    MeasuredCategory,
    number
  >;
  Object.assign(bytes, named, { unknown: u.withoutFrames + u.undecided + u.beforeTrace });
  return { bytes, unknown: u };
}

describe('what a stack frame says an allocation is', () => {
  const site = '/usr/lib/python3/dist-packages/';
  const fsdp2 = `${site}torch/distributed/fsdp/_fully_shard/`;
  const fsdp1 = `${site}torch/distributed/fsdp/`;
  it("reads FSDP2's and FSDP1's functions, under both of FSDP2's homes", () => {
    assert.equal(frameCategory(`${fsdp2}_fsdp_param.py`, '_init_sharded_param'), 'parameters');
    assert.equal(frameCategory(`${fsdp2}_fsdp_param.py`, 'reset_sharded_param'), 'parameters');
    assert.equal(frameCategory(`${fsdp2}_fully_shard.py`, 'fully_shard'), 'parameters');
    assert.equal(frameCategory(`${fsdp2}_fsdp_init.py`, '_move_states_to_device'), 'parameters');
    assert.equal(frameCategory(`${fsdp2}_fsdp_collectives.py`, 'foreach_all_gather'), 'gatherBuffers');
    assert.equal(frameCategory(`${fsdp2}_fsdp_collectives.py`, 'foreach_all_gather_copy_out'), 'gathered');
    assert.equal(frameCategory(`${fsdp2}_fsdp_param.py`, 'alloc_all_gather_outputs'), 'gathered');
    assert.equal(frameCategory(`${fsdp2}_fsdp_param.py`, 'to_sharded_post_forward'), 'gathered');
    assert.equal(frameCategory(`${fsdp2}_fsdp_collectives.py`, 'foreach_reduce'), 'gradients');
    assert.equal(frameCategory(`${fsdp2}_fsdp_param_group.py`, 'post_backward'), 'gradients');
    // PyTorch 2.2 to 2.5 kept FSDP2 in torch/distributed/_composable/fsdp/.
    assert.equal(
      frameCategory(`${site}torch/distributed/_composable/fsdp/_fsdp_collectives.py`, 'foreach_reduce'),
      'gradients',
    );
    assert.equal(frameCategory(`${fsdp1}_flat_param.py`, 'flatten_tensors_into_flat_param'), 'parameters');
    assert.equal(frameCategory(`${fsdp1}flat_param.py`, 'shard'), 'parameters');
    assert.equal(frameCategory(`${fsdp1}_init_utils.py`, '_move_module_to_device'), 'parameters');
    assert.equal(frameCategory(`${fsdp1}fully_sharded_data_parallel.py`, '__init__'), 'parameters');
    assert.equal(frameCategory(`${fsdp1}_flat_param.py`, '_use_low_precision_shard'), 'gatherBuffers');
    assert.equal(frameCategory(`${fsdp1}_flat_param.py`, '_alloc_padded_unsharded_flat_param'), 'gathered');
    assert.equal(frameCategory(`${fsdp1}_runtime_utils.py`, '_unshard'), 'gathered');
    assert.equal(frameCategory(`${fsdp1}_runtime_utils.py`, '_reduce_grad'), 'gradients');
    assert.equal(frameCategory(`${fsdp1}_runtime_utils.py`, '_post_backward_hook'), 'gradients');
    // FSDP's functions that allocate nothing of one kind themselves: what is inside them decides.
    assert.equal(frameCategory(`${fsdp2}_fsdp_param_group.py`, 'unshard'), null);
    assert.equal(frameCategory(`${fsdp2}_fsdp_param_group.py`, 'pre_forward'), null);
    assert.equal(frameCategory(`${fsdp2}_fsdp_collectives.py`, 'allocate'), null);
  });

  it("reads the optimizer's state apart from its step's temporaries, where the frames tell", () => {
    assert.equal(frameCategory(`${site}torch/optim/adamw.py`, '_init_group'), 'optimizerState');
    assert.equal(frameCategory(`${site}torch/optim/adagrad.py`, '__init__'), 'optimizerState');
    // AveragedModel's copy of the model is no optimizer's state.
    assert.equal(frameCategory(`${site}torch/optim/swa_utils.py`, '__init__'), null);
    assert.equal(frameCategory(`${site}torch/optim/optimizer.py`, 'load_state_dict'), 'optimizerState');
    assert.equal(frameCategory(`${site}torch/optim/adamw.py`, '_multi_tensor_adamw'), 'optimizerStep');
    assert.equal(frameCategory(`${site}torch/optim/adam.py`, '_single_tensor_adam'), 'optimizerStep');
    assert.equal(frameCategory(`${site}torch/optim/adamw.py`, '_fused_adamw'), 'optimizerStep');
    // SGD makes its momentum buffers in its step functions, PyTorch 1.x every state in step: not told apart.
    assert.equal(frameCategory(`${site}torch/optim/sgd.py`, '_multi_tensor_sgd'), 'unknown');
    assert.equal(frameCategory(`${site}torch/optim/adamw.py`, 'step'), 'unknown');
    assert.equal(frameCategory(`${site}torch/optim/adamw.py`, 'adamw'), null);
  });

  it('reads parameters loaded or moved, the forward, and the backward', () => {
    assert.equal(frameCategory(`${site}torch/nn/modules/module.py`, '_apply'), 'parameters');
    assert.equal(frameCategory(`${site}torch/nn/modules/linear.py`, '__init__'), 'parameters');
    assert.equal(frameCategory(`${site}torch/nn/modules/linear.py`, 'reset_parameters'), 'parameters');
    assert.equal(frameCategory(`${site}transformers/modeling_utils.py`, 'from_pretrained'), 'parameters');
    assert.equal(frameCategory('/work/model.py', 'forward'), 'activations');
    assert.equal(frameCategory(`${site}torch/nn/modules/module.py`, '_call_impl'), 'activations');
    assert.equal(frameCategory(`${site}torch/nn/functional.py`, 'cross_entropy'), 'activations');
    assert.equal(frameCategory(`${site}torch/_tensor.py`, 'backward'), 'unknown');
    assert.equal(frameCategory('??', 'torch::autograd::Engine::evaluate_function(...)'), 'unknown');
    // The training loop's own functions, and a user's __init__, say nothing.
    assert.equal(frameCategory('/work/train.py', 'main'), null);
    assert.equal(frameCategory('/work/model.py', '__init__'), null);
    assert.equal(frameCategory(`${site}torch/nn/functional.py`, 'linear'), null);
    // Names that objects inherit are names like any other.
    assert.equal(frameCategory(`${fsdp2}_fsdp_param.py`, 'constructor'), null);
    assert.equal(frameCategory(`${fsdp1}constructor`, 'toString'), null);
  });

  it("maps every term of the estimate's live set and every measured category to one row", () => {
    const fields: Record<keyof LiveSet, true> = {
      state: true,
      shardGrads: true,
      gathered: true,
      gatherBuffers: true,
      activations: true,
      working: true,
      gradients: true,
      logits: true,
      heldOutput: true,
      optimizer: true,
      pipeline: true,
    };
    assert.deepEqual(CATEGORY_ROWS.flatMap((r) => r.fields).sort(), Object.keys(fields).sort());
    assert.deepEqual(CATEGORY_ROWS.flatMap((r) => r.categories).sort(), [...MEASURED_CATEGORIES].sort());
  });
});

const FSDP2 = '/site/torch/distributed/fsdp/_fully_shard/';

/** Frames of FSDP2's step, PyTorch's own functions as its files name them. */
const CAT_FRAMES = {
  initParam: { filename: `${FSDP2}_fsdp_param.py`, name: '_init_sharded_param', line: 240 },
  paramInit: { filename: `${FSDP2}_fsdp_param.py`, name: '__init__', line: 220 },
  fullyShard: { filename: `${FSDP2}_fully_shard.py`, name: 'fully_shard', line: 200 },
  allGather: { filename: `${FSDP2}_fsdp_collectives.py`, name: 'foreach_all_gather', line: 250 },
  unshard: { filename: `${FSDP2}_fsdp_param_group.py`, name: 'unshard', line: 300 },
  preForward: { filename: `${FSDP2}_fsdp_param_group.py`, name: 'pre_forward', line: 380 },
  allocOut: { filename: `${FSDP2}_fsdp_param.py`, name: 'alloc_all_gather_outputs', line: 600 },
  copyOut: { filename: `${FSDP2}_fsdp_collectives.py`, name: 'foreach_all_gather_copy_out', line: 330 },
  waitUnshard: { filename: `${FSDP2}_fsdp_param_group.py`, name: 'wait_for_unshard', line: 330 },
  preBackward: { filename: `${FSDP2}_fsdp_param_group.py`, name: 'pre_backward', line: 420 },
  reduce: { filename: `${FSDP2}_fsdp_collectives.py`, name: 'foreach_reduce', line: 420 },
  postBackward: { filename: `${FSDP2}_fsdp_param_group.py`, name: 'post_backward', line: 440 },
  // RegisterPostBackwardFunction.backward, which autograd's engine calls.
  fnBackward: { filename: `${FSDP2}_fsdp_state.py`, name: 'backward', line: 360 },
  linear: { filename: '/site/torch/nn/modules/linear.py', name: 'forward', line: 125 },
  mod: FRAMES.mod,
  fwd: FRAMES.fwd,
  train: FRAMES.train,
  main: FRAMES.main,
  initGroup: { filename: '/site/torch/optim/adamw.py', name: '_init_group', line: 110 },
  optStep: { filename: '/site/torch/optim/adamw.py', name: 'step', line: 190 },
  optWrapper: { filename: '/site/torch/optim/optimizer.py', name: 'wrapper', line: 480 },
  adamw: { filename: '/site/torch/optim/adamw.py', name: 'adamw', line: 700 },
  multi: { filename: '/site/torch/optim/adamw.py', name: '_multi_tensor_adamw', line: 500 },
};

const CAT_STACKS = {
  // fully_shard(model): FSDPParam's sharded parameter.
  P: ['initParam', 'paramInit', 'fullyShard', 'main'],
  // The pre-forward unshard: the group's all-gather output, then the parameters it is copied out into.
  AG: ['allGather', 'unshard', 'preForward', 'mod', 'fwd', 'mod', 'train', 'main'],
  GO: ['allocOut', 'copyOut', 'waitUnshard', 'preForward', 'mod', 'fwd', 'mod', 'train', 'main'],
  A: ['linear', 'mod', 'fwd', 'mod', 'train', 'main'],
  // The pre-backward unshard, run from a hook on autograd's thread: no frame below FSDP's.
  BAG: ['allGather', 'unshard', 'preBackward'],
  BGO: ['allocOut', 'copyOut', 'waitUnshard', 'preBackward'],
  // Autograd's engine computing gradients, recorded with stacks="python": no frame.
  E: [],
  R: ['reduce', 'postBackward', 'fnBackward'],
  S: ['initGroup', 'optStep', 'optWrapper', 'train', 'main'],
  T: ['multi', 'adamw', 'optStep', 'optWrapper', 'train', 'main'],
};

const X = BASE + g(32);

/**
 * One FSDP2 step, in GiB. Before the trace: a 0.5 GiB sharded parameter (its block records fully_shard's stack)
 * and 0.25 GiB with no stack. Running allocated from the trace's start: +1 P (1), +2 AG (3), +2 GO (5), -2 AG (3),
 * +3 A (6: the forward's peak), -2 GO (4), +2 BAG (6), +2 BGO (8), -2 BAG (6), +1.5 E (7.5), +1 R (8.5: the step's
 * and the backward's peak), -1.5 E, -2 BGO, -3 A (2), +2 S (4), +0.25 T (4.25: the optimizer's), -0.25 T, -1 R (3).
 */
const FSDP2_STEP = {
  protocol: 4,
  frames: CAT_FRAMES,
  stacks: CAT_STACKS,
  segments: [
    {
      device: 0,
      address: BASE,
      total_size: g(16),
      blocks: [
        { size: g(0.5), requested_size: g(0.5), state: 'active_allocated', stack: 'P' },
        { size: g(0.25), requested_size: g(0.25), state: 'active_allocated' },
        { size: g(1), requested_size: g(1), state: 'active_allocated', stack: 'P' },
        { size: g(2), requested_size: g(2), state: 'active_allocated', stack: 'S' },
        { size: g(12.25), requested_size: 0, state: 'inactive' },
      ],
    },
  ],
  traces: [
    [
      { action: 'alloc', addr: BASE + g(0.75), size: g(1), stack: 'P' },
      { action: 'alloc', addr: X, size: g(2), stack: 'AG' },
      { action: 'alloc', addr: X + g(2), size: g(2), stack: 'GO' },
      { action: 'free_completed', addr: X, size: g(2), stack: 'AG' },
      { action: 'alloc', addr: X + g(4), size: g(3), stack: 'A' },
      { action: 'free_completed', addr: X + g(2), size: g(2), stack: 'GO' },
      { action: 'alloc', addr: X + g(8), size: g(2), stack: 'BAG' },
      { action: 'alloc', addr: X + g(10), size: g(2), stack: 'BGO' },
      { action: 'free_completed', addr: X + g(8), size: g(2), stack: 'BAG' },
      { action: 'alloc', addr: X + g(12), size: g(1.5), stack: 'E' },
      { action: 'alloc', addr: X + g(14), size: g(1), stack: 'R' },
      { action: 'free_completed', addr: X + g(12), size: g(1.5), stack: 'E' },
      { action: 'free_completed', addr: X + g(10), size: g(2), stack: 'BGO' },
      { action: 'free_completed', addr: X + g(4), size: g(3), stack: 'A' },
      { action: 'alloc', addr: BASE + g(1.75), size: g(2), stack: 'S' },
      { action: 'alloc', addr: X + g(16), size: g(0.25), stack: 'T' },
      { action: 'free_completed', addr: X + g(16), size: g(0.25), stack: 'T' },
      { action: 'free_completed', addr: X + g(14), size: g(1), stack: 'R' },
    ],
  ],
};

describe('a memory snapshot by category', { skip: skipUnless('python3') }, () => {
  it('places the allocations live at each peak by the innermost frame of their stacks that tells', () => {
    const { file } = makeSnapshot(FSDP2_STEP);
    const r = readSnapshot(chunksOf(file, 4096));
    assert.ok(!('error' in r), JSON.stringify(r));
    const { run } = r;
    // At the end 0.5 + 0.25 + 1 + 2 GiB are active; the trace's net is +3: 0.75 GiB was there before it began.
    const start = g(0.75);
    assert.deepEqual(run.phases, {
      forward: { allocated: start + g(6), reserved: null },
      backward: { allocated: start + g(8.5), reserved: null },
      optimizer: { allocated: start + g(4.25), reserved: null },
      step: { allocated: start + g(8.5), reserved: g(16) },
    });
    // The step's peak, right after the reduce-scatter's 1 GiB: the sharded parameters (the trace's 1 GiB and the
    // 0.5 GiB block, by its own stack), the backward's gathered parameters (its all-gather buffer already freed),
    // the forward's activations, the reduce-scatter's gradients, autograd's 1.5 GiB with no frame, and the
    // 0.25 GiB there before the trace whose block records no stack.
    const peak = cats(
      { parameters: g(1 + 0.5), gathered: g(2), activations: g(3), gradients: g(1) },
      { withoutFrames: g(1.5), beforeTrace: g(0.25) },
    );
    assert.equal(
      Object.values(peak.bytes).reduce((a, b) => a + b, 0),
      run.phases.step!.allocated,
    );
    assert.deepEqual(run.categories, {
      step: peak,
      backward: peak,
      // The forward's peak, right after the activations: its all-gather buffer freed, its parameters gathered.
      forward: cats({ parameters: g(1.5), gathered: g(2), activations: g(3) }, { beforeTrace: g(0.25) }),
      // The optimizer's, right after AdamW's step temporaries: its state, made by _init_group, and the sharded
      // gradients the reduce-scatter left.
      optimizer: cats(
        { parameters: g(1.5), gradients: g(1), optimizerState: g(2), optimizerStep: g(0.25) },
        { beforeTrace: g(0.25) },
      ),
    });
    const notes = run.notes.join('\n');
    assert.match(
      notes,
      /by category at each peak: the allocations live then, each placed by the innermost frame/,
    );
    assert.match(notes, /anything else is unknown, not guessed/);
    assert.match(
      notes,
      /of the 9\.93 GB at the step's peak, 1\.88 GB is unknown: 1\.61 GB recorded with no frame \(the backward pass on autograd's own thread has none when only Python frames are recorded, stacks="python"/,
    );
    assert.match(
      notes,
      /0\.268 GB allocated before the trace began and not placed \(its block records no stack/,
    );
  });

  it('counts allocations with no frame, or with no stack at all, as unknown', () => {
    const { file } = makeSnapshot({
      protocol: 4,
      frames: FRAMES,
      stacks: STACKS,
      segments: [
        {
          device: 0,
          address: BASE,
          total_size: g(8),
          blocks: [{ size: g(8), requested_size: 0, state: 'inactive' }],
        },
      ],
      traces: [
        [
          // No "frames" key (recorded without context), then an empty stack (autograd's thread, stacks="python").
          { action: 'alloc', addr: BASE, size: g(1) },
          { action: 'alloc', addr: BASE + g(1), size: g(2), stack: 'Bpy' },
          { action: 'alloc', addr: BASE + g(3), size: g(0.5), stack: 'F' },
          { action: 'free_completed', addr: BASE + g(3), size: g(0.5), stack: 'F' },
          { action: 'free_completed', addr: BASE + g(1), size: g(2), stack: 'Bpy' },
          { action: 'free_completed', addr: BASE, size: g(1) },
        ],
      ],
    });
    const r = readSnapshot(chunksOf(file, 4096));
    assert.ok(!('error' in r), JSON.stringify(r));
    assert.deepEqual(r.run.categories?.step, cats({ activations: g(0.5) }, { withoutFrames: g(3) }));
    // The forward's one allocation: its peak has the two with no frame beside it.
    assert.deepEqual(r.run.categories?.forward, cats({ activations: g(0.5) }, { withoutFrames: g(3) }));
    assert.match(r.run.notes.join('\n'), /3\.22 GB is unknown: 3\.22 GB recorded with no frame/);
  });

  it('gives no categories where the trace and the blocks disagree, and says why', () => {
    // A block of the trace's whose address the trace never allocated: counted twice at the peak.
    const { file } = makeSnapshot({
      protocol: 4,
      frames: FRAMES,
      stacks: STACKS,
      segments: [
        {
          device: 0,
          address: BASE,
          total_size: g(4),
          blocks: [
            { size: g(1), requested_size: g(1), state: 'active_allocated', stack: 'F' },
            { size: g(3), requested_size: 0, state: 'inactive' },
          ],
        },
      ],
      traces: [[{ action: 'alloc', addr: BASE + g(2), size: g(1), stack: 'F' }]],
    });
    const r = readSnapshot(chunksOf(file, 4096));
    assert.ok(!('error' in r), JSON.stringify(r));
    assert.equal(r.run.categories, undefined);
    assert.deepEqual(r.run.phases.step, { allocated: g(1), reserved: g(4) });
    assert.match(
      r.run.notes.join('\n'),
      /no breakdown by category: the trace's allocations live at the peak and the blocks there before it add up to 1\.07 GB more than the 1\.07 GB allocated/,
    );
  });
  it('follows a bounded number of live allocations and blocks, and says when there are more', () => {
    // Five allocations of the trace are live at once at the backward's peak.
    const step = makeSnapshot(FSDP2_STEP).file;
    const categories = (file: string, cap: number) => {
      const r = readSnapshot(chunksOf(file, 4096), {}, cap);
      assert.ok(!('error' in r), JSON.stringify(r));
      return r.run.categories;
    };
    assert.ok(categories(step, 5));
    // Three blocks active at the end, there before the trace.
    const blocks = makeSnapshot({
      protocol: 4,
      frames: FRAMES,
      stacks: STACKS,
      segments: [
        {
          device: 0,
          address: BASE,
          total_size: g(4),
          blocks: [
            { size: g(1), requested_size: g(1), state: 'active_allocated', stack: 'U' },
            { size: g(1), requested_size: g(1), state: 'active_allocated', stack: 'U' },
            { size: g(1), requested_size: g(1), state: 'active_allocated', stack: 'U' },
            { size: g(1), requested_size: 0, state: 'inactive' },
          ],
        },
      ],
      traces: [
        [
          { action: 'alloc', addr: BASE + g(3), size: g(1), stack: 'F' },
          { action: 'free_completed', addr: BASE + g(3), size: g(1), stack: 'F' },
        ],
      ],
    }).file;
    assert.ok(categories(blocks, 3));
    for (const [file, cap, why, peak] of [
      [step, 4, /no breakdown by category: more than 4 allocations are live at once/, g(0.75 + 8.5)],
      [blocks, 2, /no breakdown by category: the snapshot holds more than 2 active blocks/, g(3 + 1)],
    ] as const) {
      const r = readSnapshot(chunksOf(file, 4096), {}, cap);
      assert.ok(!('error' in r), JSON.stringify(r));
      assert.equal(r.run.categories, undefined);
      assert.match(r.run.notes.join('\n'), why);
      // The peaks do not depend on it.
      assert.equal(r.run.phases.step!.allocated, peak);
    }
  });
});

describe('a memory snapshot read as a stream', { skip: skipUnless('python3') }, () => {
  for (const protocol of [2, 4, 5])
    it(`replays the trace for the peaks by phase from where tracing began (protocol ${protocol})`, () => {
      const { file, ops } = makeSnapshot({ ...STEP, protocol });
      // The stacks and frames are stored once and referred back to, and protocol 4 frames its opcodes.
      assert.ok((ops.BINGET ?? 0) + (ops.LONG_BINGET ?? 0) > 10, JSON.stringify(ops));
      if (protocol >= 4) assert.ok(ops.FRAME! > 0 && ops.MEMOIZE! > 0, JSON.stringify(ops));
      else assert.ok(ops.BINPUT! > 0 && !ops.FRAME, JSON.stringify(ops));
      const r = readSnapshot(chunksOf(file, 4096));
      assert.ok(!('error' in r), JSON.stringify(r));
      const { run, summary } = r;
      // Active blocks at the end, requested: 1 + 0.25 + 0.125 + 0.0625 + 0.25 (pending free is still allocated).
      const atEnd = g(1 + 0.25 + 0.125 + 0.0625 + 0.25);
      // The trace's net: what it allocated, less what it freed to completion.
      const net = g(1 + 2 + 1.5 + 0.5 + 0.25 + 0.125 + 0.0625 + 0.25) - g(1 + 2 + 0.5 + 1.5);
      const start = atEnd - net;
      assert.equal(start, g(1));
      assert.equal(summary.devices[0]!.allocatedAtStart, start);
      assert.deepEqual(run.phases, {
        forward: { allocated: start + g(1 + 2), reserved: null },
        backward: { allocated: start + g(1 + 2 + 1.5), reserved: null },
        optimizer: { allocated: start + g(1.5 + 0.25), reserved: null },
        // The whole trace: its highest, and the reserved 8 GiB segment plus the 2 GiB one while it lived.
        step: { allocated: start + g(4.5), reserved: g(8 + 2) },
      });
      // By category at each peak. The forward's 1 + 2 GiB are activations (a module's forward); the backward's
      // 1.5 GiB has C++ frames only, autograd's engine, which say backward, not what it holds; the 1 GiB block there
      // before the trace records the training loop's frames only; the optimizer's 0.25 GiB is AdamW.step's own
      // (PyTorch 1.x made the state there): all three unknown, their frames deciding none.
      assert.deepEqual(run.categories, {
        step: cats({ activations: g(3) }, { undecided: g(1.5 + 1) }),
        forward: cats({ activations: g(3) }, { undecided: g(1) }),
        backward: cats({ activations: g(3) }, { undecided: g(1.5 + 1) }),
        optimizer: cats({}, { undecided: g(1.5 + 0.25 + 1) }),
      });
      assert.equal(run.source, 'snapshot');
      assert.equal(run.device, 'cuda:0');
      assert.equal(run.rank, null);
      assert.equal(run.worldSize, null);
      const notes = run.notes.join('\n');
      assert.match(
        notes,
        /18 trace events over 2\.5 s \(8 allocations, 4 completed frees, 2 segment events\)/,
      );
      assert.match(notes, /tracing began after 1\.07 GB was already allocated/);
      // The 0.5 GiB with an empty stack, 0.125 with a stack that says nothing, 0.0625 with none: unknown.
      assert.match(notes, /3 allocations \(38%\) are in no phase their stack tells/);
      assert.match(notes, /1 has no stack/);
      assert.match(notes, /1 has no Python frame/);
      assert.match(notes, /1 out-of-memory error\b/);
      assert.match(notes, /neither the rank nor the world size/);
    });

  it('reads the same in chunks of one byte as in one chunk', () => {
    const { file } = makeSnapshot({ ...STEP, protocol: 4 });
    const one = readSnapshot(chunksOf(file, 1));
    const all = readSnapshot(chunksOf(file, 1 << 24));
    assert.ok(!('error' in one) && !('error' in all));
    assert.deepEqual(one.run, all.run);
  });

  it('says when a snapshot has no trace, and gives no peak', () => {
    const { file } = makeSnapshot({ ...STEP, traces: [[]], protocol: 4 });
    const r = readSnapshot(chunksOf(file, 4096));
    assert.ok(!('error' in r), JSON.stringify(r));
    assert.deepEqual(r.run.phases, {});
    assert.match(
      r.run.notes[0]!,
      /with no trace, only the state when it was taken \(1\.81 GB allocated, 8\.59 GB reserved\)/,
    );
  });

  it('shows the device with a trace, and names the others', () => {
    const second = STEP.traces[0]!.slice(0, 2);
    const { file } = makeSnapshot({ ...STEP, traces: [[], STEP.traces[0], second], protocol: 4 });
    const r = readSnapshot(chunksOf(file, 4096));
    assert.ok(!('error' in r), JSON.stringify(r));
    assert.equal(r.run.device, 'cuda:1');
    assert.match(r.run.notes.join('\n'), /cuda:2 has a trace too \(2 events\): not shown/);
  });

  it('refuses a pickle that is not a snapshot, one cut short, and one of Python objects', () => {
    const list = makeSnapshot({ root: [1, 2, 3], protocol: 4 }).file;
    const r = readSnapshot(chunksOf(list, 4096));
    assert.ok('error' in r);
    assert.match(r.error, /a pickle of a list, not a memory snapshot/);
    const dict = makeSnapshot({ root: { a: 1 }, protocol: 4 }).file;
    const d = readSnapshot(chunksOf(dict, 4096));
    assert.ok('error' in d);
    assert.match(d.error, /neither "segments" nor "device_traces"/);
    const { file } = makeSnapshot({ ...STEP, protocol: 4 });
    const bytes = fs.readFileSync(file);
    const t = readSnapshot([bytes.subarray(0, bytes.length - 40)]);
    assert.ok('error' in t);
    assert.match(t.error, /truncated/);
  });

  it('streams a long trace with bounded memory: 200,000 events, tens of MB', () => {
    const cycles = 25_000;
    const { file } = makeSnapshot({
      frames: FRAMES,
      stacks: STACKS,
      protocol: 4,
      segments: [
        {
          device: 0,
          address: BASE,
          total_size: 64 * MiB,
          blocks: [
            { size: 10 * MiB, requested_size: 10 * MiB, state: 'active_allocated', stack: 'U' },
            { size: 54 * MiB, requested_size: 0, state: 'inactive' },
          ],
        },
      ],
      generate: { cycles, device: 0 },
    });
    const size = fs.statSync(file).size;
    assert.ok(size > 20e6, `${size} bytes`);
    // What the reader holds, not what it has let go of: the heap after a collection, every few chunks.
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    gc();
    const before = process.memoryUsage().heapUsed;
    let highest = before;
    function* watched(): Generator<Uint8Array> {
      let i = 0;
      for (const c of chunksOf(file, 1 << 20)) {
        if (i++ % 4 === 0) {
          gc();
          highest = Math.max(highest, process.memoryUsage().heapUsed);
        }
        yield c;
      }
    }
    // The memo is charged only for what it still holds: four folded stacks and frames a cycle, 32 bytes each
    // (3.2 MB), not each of the 200,000 entries it stored and let go as they were folded.
    const r = readSnapshot(watched(), { memoBytes: 8 * MiB });
    assert.ok(!('error' in r), JSON.stringify(r));
    // Each cycle (MiB): +1 F, +2 F, +3 B, -1, -2, +1 O, -3, -1; 10 MiB were allocated before it all.
    assert.deepEqual(r.run.phases, {
      forward: { allocated: (10 + 1 + 2) * MiB, reserved: null },
      backward: { allocated: (10 + 1 + 2 + 3) * MiB, reserved: null },
      optimizer: { allocated: (10 + 3 + 1) * MiB, reserved: null },
      step: { allocated: (10 + 6) * MiB, reserved: 64 * MiB },
    });
    assert.equal(r.summary.devices[0]!.trace.events, cycles * 8);
    // Loosely: the reader holds well under the file's size (each entry is folded as it streams; what stays is the
    // memo's record of each distinct stack, four per cycle here, where a real run repeats far fewer).
    assert.ok(highest - before < size / 2, `the heap held ${highest - before} bytes more reading ${size}`);
  });
});
