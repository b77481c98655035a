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
import { framePhase, readSnapshot } from '../../src/core/report/snapshot';
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
      { action: 'alloc', addr: BASE + g(1.375), size: g(0.0625) },
      { action: 'alloc', addr: BASE + g(1.4375), size: g(0.25), stack: 'F' },
      { action: 'free_requested', addr: BASE + g(1.4375), size: g(0.25), stack: 'F' },
      { action: 'snapshot', addr: 0, size: g(1.6875), time_us: 1_700_000_002_500_000 },
    ],
  ],
};

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
