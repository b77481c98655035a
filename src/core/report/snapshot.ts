/** A PyTorch memory snapshot (torch.cuda.memory._dump_snapshot's pickle) streamed into a measured run. */
import { fmtBytes } from '../vocabulary/bytes';
import type { MeasuredRun } from './measured';
import { DROP, PickleError, PickleReader, type PickleLimits, type PyContainer, type PyDict } from './pickle';

// The pickle is `pickle.dump(torch.cuda.memory._snapshot(), f)`: a dict that THCPModule_memorySnapshot
// (torch/csrc/cuda/Module.cpp) builds with
//   segments:      [{device, address, total_size, allocated_size, active_size, requested_size, stream,
//                    segment_type, segment_pool_id, is_expandable, frames, blocks: [{address, size,
//                    requested_size, state, frames}]}]
//   device_traces: one list per device of {action, addr (device_free for oom), size, stream, time_us, frames}
//   allocator_settings, external_annotations (newer releases)
// where every `frames` is a list of {name, filename, line} dicts that py_symbolize
// (torch/csrc/profiler/python/combined_traceback.cpp) shares between entries, so the pickle memoizes each frame
// and each stack once and refers back to them. Each frame is folded into what it says of the phase, each stack into
// its phase, each trace entry into its device's replay (then dropped), each segment into its sizes: the reader
// holds aggregates, never the trace.

/** The phases an allocation's stack can place it in. */
export type SnapshotPhase = 'forward' | 'backward' | 'optimizer';

const norm = (filename: string) => filename.replace(/\\/g, '/');
const inFile = (filename: string, suffix: string) => filename === suffix || filename.endsWith(`/${suffix}`);

/**
 * Function names that run only in the backward pass, wherever they are defined:
 * - `backward`: Tensor.backward (torch/_tensor.py), torch.autograd.backward (torch/autograd/__init__.py), and the
 *   backward of a torch.autograd.Function, which autograd's engine calls (checkpoint's CheckpointFunction too);
 * - `_engine_run_backward` (torch/autograd/graph.py), which both of the first call into the engine.
 */
const BACKWARD_ANYWHERE = new Set(['backward', '_engine_run_backward']);

/**
 * FSDP's backward hooks (files under torch/distributed/): FSDP2's FSDPState._pre_backward and
 * _root_post_backward_final_callback (_fsdp_state.py), FSDPParamGroup.pre_backward, post_backward and
 * finalize_backward (_fsdp_param_group.py); FSDP1's _pre_backward_hook, _post_backward_hook and
 * _post_backward_final_callback (fsdp/_runtime_utils.py).
 */
const BACKWARD_FSDP = new Set([
  '_pre_backward',
  '_root_post_backward_final_callback',
  '_finalize_backward',
  'pre_backward',
  'post_backward',
  'finalize_backward',
  '_pre_backward_hook',
  '_post_backward_hook',
  '_post_backward_final_callback',
]);

/** Loss functions of torch/nn/functional.py: the loss a probe's forward phase holds. */
const LOSS = /^(cross_entropy|nll_loss|binary_cross_entropy(_with_logits)?|kl_div|\w+_loss)$/;

/**
 * What one frame of an allocation's stack says of the phase it ran in, or null when it says nothing. A stack is in
 * backward when any frame says so (a forward recomputed by activation checkpointing runs inside backward), else in
 * optimizer, else in forward.
 */
export function framePhase(filename: string, name: string): SnapshotPhase | null {
  const f = norm(filename);
  if (BACKWARD_ANYWHERE.has(name)) return 'backward';
  // torch.autograd.grad runs the engine as backward does.
  if (name === 'grad' && inFile(f, 'torch/autograd/__init__.py')) return 'backward';
  // Non-reentrant activation checkpointing recomputes the forward from its saved-tensor unpack hook, in backward
  // (torch/utils/checkpoint.py: _checkpoint_hook's unpack_hook, and the recompute_fn it calls).
  if ((name === 'unpack_hook' || name === 'recompute_fn') && inFile(f, 'torch/utils/checkpoint.py'))
    return 'backward';
  if (BACKWARD_FSDP.has(name) && f.includes('torch/distributed/')) return 'backward';
  // C++ frames (stacks="all"): autograd's engine, which runs the backward pass on threads of its own
  // (torch/csrc/autograd/engine.cpp Engine::thread_main, evaluate_function; python_engine.cpp PythonEngine), and
  // the generated backward nodes it applies (torch::autograd::generated::MmBackward0::apply).
  if (
    name.includes('torch::autograd::Engine::') ||
    name.includes('torch::autograd::python::PythonEngine::') ||
    /Backward\d*::apply/.test(name)
  )
    return 'backward';
  // Everything in torch/optim (Optimizer.step, each optimizer's step, _single_tensor_adamw, _multi_tensor_adamw,
  // _fused_adamw, Optimizer.zero_grad) and torch/distributed/optim; Module.zero_grad wherever it is called.
  if (/(^|\/)torch\/(distributed\/)?optim\//.test(f) || name === 'zero_grad') return 'optimizer';
  // A module's forward, and Module.__call__ (torch/nn/modules/module.py _call_impl, _wrapped_call_impl), which runs
  // forward hooks such as FSDP's pre-forward all-gather.
  if (name === 'forward') return 'forward';
  if ((name === '_call_impl' || name === '_wrapped_call_impl') && inFile(f, 'torch/nn/modules/module.py'))
    return 'forward';
  if (LOSS.test(name) && inFile(f, 'torch/nn/functional.py')) return 'forward';
  return null;
}

/** What a frame says, folded: one object per combination, shared by every frame. */
class FrameSig {
  constructor(
    readonly phase: SnapshotPhase | null,
    readonly python: boolean,
  ) {}
}

/** What a stack says: its phase (null when no frame tells), and whether it has Python frames. */
class StackSig {
  constructor(
    readonly phase: SnapshotPhase | null,
    readonly python: boolean,
  ) {}
}

const PHASES = [null, 'forward', 'backward', 'optimizer'] as const;
const FRAME_SIGS = PHASES.map((p) => [new FrameSig(p, false), new FrameSig(p, true)] as const);
const STACK_SIGS = PHASES.map((p) => [new StackSig(p, false), new StackSig(p, true)] as const);
const sigIndex = (p: SnapshotPhase | null) => PHASES.indexOf(p);

/** A block of a segment, folded: whether it is active (allocated, or freed and waiting on a stream), and its bytes. */
class BlockSig {
  constructor(
    readonly active: boolean,
    readonly requested: number,
  ) {}
}

/** A segment, folded: its device, its bytes, and the bytes its active blocks requested. */
export class SegmentSig {
  constructor(
    readonly device: number | null,
    readonly totalSize: number,
    readonly requested: number,
  ) {}
}

/** A device's trace, replayed as it streams: running totals and their peaks, never the entries. */
export class DeviceTrace {
  events = 0;
  allocs = 0;
  frees = 0;
  segmentEvents = 0;
  ooms = 0;
  other = 0;
  malformed = 0;
  /** Allocated (requested bytes) relative to the trace's start, and its highest. */
  allocated = 0;
  peak = 0;
  /** The highest allocated right after an allocation in each phase ('unknown': no frame tells). */
  readonly phasePeak = new Map<SnapshotPhase | 'unknown', number>();
  readonly phaseAllocs = new Map<SnapshotPhase | 'unknown', number>();
  /** Of the allocations in no phase: those with no stack, and those whose stack has no Python frame. */
  allocsWithoutStack = 0;
  allocsWithoutPython = 0;
  /** Reserved relative to the trace's start (segment_alloc and segment_map add, segment_free and segment_unmap take). */
  reserved = 0;
  reservedPeak = 0;
  firstTimeUs: number | null = null;
  lastTimeUs: number | null = null;

  add(e: PyDict): void {
    this.events++;
    const action = e.get('action');
    const size = e.get('size');
    const t = e.get('time_us');
    if (typeof t === 'number') {
      this.firstTimeUs ??= t;
      this.lastTimeUs = t;
    }
    const bytes = typeof size === 'number' && Number.isFinite(size) && size >= 0 ? size : null;
    switch (action) {
      case 'alloc': {
        if (bytes === null) {
          this.malformed++;
          return;
        }
        this.allocs++;
        this.allocated += bytes;
        this.peak = Math.max(this.peak, this.allocated);
        // No "frames" key: recorded without context. An empty list: a stack with no frame, as a thread that runs
        // no Python code has when only Python frames are recorded.
        const frames = e.get('frames');
        const stack = frames instanceof StackSig ? frames : Array.isArray(frames) ? STACK_SIGS[0]![0] : null;
        const phase = stack?.phase ?? 'unknown';
        if (phase === 'unknown') {
          if (!stack) this.allocsWithoutStack++;
          else if (!stack.python) this.allocsWithoutPython++;
        }
        this.phasePeak.set(phase, Math.max(this.phasePeak.get(phase) ?? 0, this.allocated));
        this.phaseAllocs.set(phase, (this.phaseAllocs.get(phase) ?? 0) + 1);
        return;
      }
      case 'free_completed':
        if (bytes === null) {
          this.malformed++;
          return;
        }
        this.frees++;
        this.allocated -= bytes;
        return;
      case 'segment_alloc':
      case 'segment_map':
        if (bytes === null) {
          this.malformed++;
          return;
        }
        this.segmentEvents++;
        this.reserved += bytes;
        this.reservedPeak = Math.max(this.reservedPeak, this.reserved);
        return;
      case 'segment_free':
      case 'segment_unmap':
        if (bytes === null) {
          this.malformed++;
          return;
        }
        this.segmentEvents++;
        this.reserved -= bytes;
        return;
      case 'oom':
        this.ooms++;
        return;
      default:
        // free_requested (the memory stays allocated until free_completed), snapshot, annotate.
        this.other++;
    }
  }
}

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/** The fold that keeps a snapshot's aggregates only (see the top of this file). */
class SnapshotFold {
  /** Each device's trace, by the list its entries stream into. */
  private readonly traces = new WeakMap<unknown[], DeviceTrace>();

  readonly fold = (v: PyContainer, parent: PyContainer | null): unknown => {
    if (v instanceof Map) return this.dict(v, parent);
    // A device's list of trace entries stays empty (each entry is folded into its replay and dropped).
    const trace = this.traces.get(v);
    if (trace) return trace;
    if (v.length === 0) return v;
    if (v.every((x) => x instanceof FrameSig)) {
      let phase: SnapshotPhase | null = null;
      let python = false;
      for (const f of v as FrameSig[]) {
        python ||= f.python;
        if (f.phase === 'backward') phase = 'backward';
        else if (f.phase === 'optimizer' && phase !== 'backward') phase = 'optimizer';
        else if (f.phase === 'forward' && phase === null) phase = 'forward';
      }
      return STACK_SIGS[sigIndex(phase)]![python ? 1 : 0];
    }
    if (v.every((x) => x instanceof BlockSig)) {
      let requested = 0;
      for (const b of v as BlockSig[]) if (b.active) requested += b.requested;
      return new BlockSig(true, requested);
    }
    return v;
  };

  private dict(d: PyDict, parent: PyContainer | null): unknown {
    const action = d.get('action');
    if (typeof action === 'string' && Array.isArray(parent)) {
      let trace = this.traces.get(parent);
      if (!trace) this.traces.set(parent, (trace = new DeviceTrace()));
      trace.add(d);
      return DROP;
    }
    const filename = d.get('filename');
    const name = d.get('name');
    if (typeof filename === 'string' && typeof name === 'string' && d.has('line')) {
      const phase = framePhase(filename, name);
      return FRAME_SIGS[sigIndex(phase)]![norm(filename).endsWith('.py') ? 1 : 0];
    }
    const totalSize = num(d.get('total_size'));
    if (totalSize !== null && d.has('blocks')) {
      // requested_size: what the active blocks requested (CUDACachingAllocator's snapshot() adds a block's
      // requested_size when it is allocated or awaiting a stream); without it (older releases), the blocks' own.
      const blocks = d.get('blocks');
      const requested =
        num(d.get('requested_size')) ??
        (blocks instanceof BlockSig ? blocks.requested : null) ??
        num(d.get('active_size'));
      return new SegmentSig(num(d.get('device')), totalSize, requested ?? 0);
    }
    const state = d.get('state');
    const size = num(d.get('size'));
    if (typeof state === 'string' && size !== null) {
      // 'active_pending_free' (the name in the pickle; 'active_awaiting_free' in _snapshot's docstring).
      const active = state.startsWith('active');
      return new BlockSig(active, num(d.get('requested_size')) ?? size);
    }
    return d;
  }
}

/** One device of a snapshot: its trace replayed from what the segments hold at the end. */
export interface DeviceSummary {
  device: number;
  trace: DeviceTrace;
  segments: number;
  /** Bytes the active blocks requested, and bytes of segments, when the snapshot was taken. */
  allocatedAtEnd: number;
  reservedAtEnd: number;
  /** Allocated and reserved when the trace began: the end less the trace's net change. */
  allocatedAtStart: number;
  reservedAtStart: number;
}

export interface SnapshotSummary {
  devices: DeviceSummary[];
  /** Segments whose dict names no device (attributed to the device shown). */
  segmentsWithoutDevice: number;
}

/** The snapshot's dict, folded, as devices; an error in words when it is not a memory snapshot. */
function summarize(root: unknown): SnapshotSummary | { error: string } {
  let segments: unknown[];
  let traces: unknown[] = [];
  if (root instanceof Map) {
    const s = root.get('segments');
    const t = root.get('device_traces');
    if (!Array.isArray(s) && !Array.isArray(t))
      return {
        error: 'a pickle, but not a memory snapshot (its dict has neither "segments" nor "device_traces")',
      };
    segments = Array.isArray(s) ? s : [];
    traces = Array.isArray(t) ? t : [];
  } else if (Array.isArray(root) && root.length > 0 && root.every((x) => x instanceof SegmentSig)) {
    // The oldest snapshots are the segment list alone (_memory_viz.py reads them as {'segments': data}).
    segments = root;
  } else {
    const what = Array.isArray(root)
      ? 'a list'
      : root === null
        ? 'None'
        : typeof root === 'object'
          ? 'a value'
          : typeof root;
    return {
      error: `a pickle of ${what}, not a memory snapshot (torch.cuda.memory._dump_snapshot writes a dict)`,
    };
  }
  const segs = segments.filter((x): x is SegmentSig => x instanceof SegmentSig);
  const byDevice = new Map<number, DeviceSummary>();
  const at = (device: number) => {
    let d = byDevice.get(device);
    if (!d) {
      const t = traces[device];
      d = {
        device,
        trace: t instanceof DeviceTrace ? t : new DeviceTrace(),
        segments: 0,
        allocatedAtEnd: 0,
        reservedAtEnd: 0,
        allocatedAtStart: 0,
        reservedAtStart: 0,
      };
      byDevice.set(device, d);
    }
    return d;
  };
  traces.forEach((t, i) => {
    if (t instanceof DeviceTrace && t.events > 0) at(i);
  });
  const traced = [...byDevice.keys()];
  let withoutDevice = 0;
  for (const s of segs) {
    if (s.device === null) withoutDevice++;
    const d = at(s.device ?? traced[0] ?? 0);
    d.segments++;
    d.allocatedAtEnd += s.requested;
    d.reservedAtEnd += s.totalSize;
  }
  for (const d of byDevice.values()) {
    d.allocatedAtStart = d.allocatedAtEnd - d.trace.allocated;
    d.reservedAtStart = d.reservedAtEnd - d.trace.reserved;
  }
  return {
    devices: [...byDevice.values()].sort((a, b) => a.device - b.device),
    segmentsWithoutDevice: withoutDevice,
  };
}

const PHASE_ORDER: SnapshotPhase[] = ['forward', 'backward', 'optimizer'];
const pct = (n: number, of: number) => `${Math.round((100 * n) / of)}%`;
const have = (n: number) => (n === 1 ? 'has' : 'have');

/** The measured run a snapshot gives: the device with a trace (the lowest one when several have). */
export function measuredFromSnapshot(s: SnapshotSummary): MeasuredRun | { error: string } {
  const traced = s.devices.filter((d) => d.trace.events > 0);
  const shown = traced[0] ?? s.devices[0];
  if (!shown)
    return {
      error:
        'a memory snapshot with no segment and no trace: nothing was allocated on a GPU when it was taken',
    };
  const t = shown.trace;
  const notes: string[] = [];
  const phases: MeasuredRun['phases'] = {};
  const b = (n: number) => fmtBytes(n);
  if (t.events === 0) {
    notes.push(
      `memory snapshot of cuda:${shown.device} with no trace, only the state when it was taken (${b(shown.allocatedAtEnd)} allocated, ${b(shown.reservedAtEnd)} reserved), which is not a peak: call torch.cuda.memory._record_memory_history() before the step to record one`,
    );
  } else {
    // The trace keeps its last max_entries events: what was allocated before its first one is known only as the
    // end state less the trace's net change, as pytorch.org/memory_viz reconstructs it (MemoryViz.js
    // process_alloc_data counts frees of unseen allocations and the snapshot's unseen blocks as there from the start).
    let start = shown.allocatedAtStart;
    if (start < 0) {
      notes.push(
        `the trace frees ${b(-start)} more than the snapshot's segments and its own allocations account for: the allocated figures count from zero at the trace's first event instead`,
      );
      start = 0;
    }
    let reservedStart = shown.reservedAtStart;
    if (reservedStart < 0) {
      notes.push(
        `the trace returns ${b(-reservedStart)} more segment memory than the snapshot holds: the reserved peak counts from zero at the trace's first event instead`,
      );
      reservedStart = 0;
    }
    const span =
      t.firstTimeUs !== null && t.lastTimeUs !== null && t.lastTimeUs > t.firstTimeUs
        ? ` over ${((t.lastTimeUs - t.firstTimeUs) / 1e6).toFixed(1)} s`
        : '';
    notes.push(
      `memory snapshot of cuda:${shown.device}: ${t.events} trace events${span} (${t.allocs} allocations, ${t.frees} completed frees, ${t.segmentEvents} segment events), replayed`,
    );
    notes.push(
      `tracing began after ${b(start)} was already allocated (the snapshot's active blocks less the trace's net allocations, as pytorch.org/memory_viz assumes): the peaks count from there`,
    );
    notes.push(
      "allocated is the bytes each allocation requested (the sizes the trace records), which is a little less than torch.cuda.max_memory_allocated (it counts the allocator's rounded blocks)",
    );
    for (const p of PHASE_ORDER) {
      const peak = t.phasePeak.get(p);
      if (peak !== undefined) phases[p] = { allocated: start + peak, reserved: null };
    }
    phases.step = { allocated: start + t.peak, reserved: reservedStart + t.reservedPeak };
    notes.push(
      `a phase's peak is the highest allocated right after an allocation whose stack is in it: backward (autograd's engine, Tensor.backward, FSDP's backward hooks, activation checkpointing's recompute), optimizer (torch/optim, zero_grad), forward (a module's forward or call, the loss functions); step is the highest over the whole trace, which may span several steps and what ran before them`,
    );
    const missing = PHASE_ORDER.filter((p) => !t.phasePeak.has(p));
    if (missing.length && t.allocs)
      notes.push(`no allocation's stack is in ${missing.join(' or ')}: not measured`);
    const unknown = t.phaseAllocs.get('unknown') ?? 0;
    if (unknown) {
      const reasons: string[] = [];
      if (t.allocsWithoutStack)
        reasons.push(
          `${t.allocsWithoutStack} ${have(t.allocsWithoutStack)} no stack (recorded without context: _record_memory_history(context="all") records one)`,
        );
      if (t.allocsWithoutPython)
        reasons.push(
          `${t.allocsWithoutPython} ${have(t.allocsWithoutPython)} no Python frame, as the backward pass's allocations have on autograd's own thread when only Python frames are recorded (stacks="all" adds the C++ frames that place them)`,
        );
      notes.push(
        `${unknown} allocations (${pct(unknown, t.allocs)}) are in no phase their stack tells, and are counted in step only: the highest allocated after one was ${b(start + (t.phasePeak.get('unknown') ?? 0))}${reasons.length ? `; ${reasons.join('; ')}` : ''}`,
      );
    }
    notes.push(
      t.segmentEvents
        ? `reserved: ${b(shown.reservedAtEnd)} in segments when the snapshot was taken; its peak replays segment_alloc and segment_free from ${b(reservedStart)} at the trace's start`
        : `reserved: ${b(shown.reservedAtEnd)} in segments when the snapshot was taken, and no segment was allocated or freed during the trace`,
    );
    if (t.ooms) notes.push(`the trace holds ${t.ooms} out-of-memory error${t.ooms === 1 ? '' : 's'}`);
    if (t.malformed) notes.push(`${t.malformed} trace events without a size were left out`);
  }
  if (s.segmentsWithoutDevice)
    notes.push(`${s.segmentsWithoutDevice} segments name no device and are counted on cuda:${shown.device}`);
  for (const d of s.devices)
    if (d !== shown && d.trace.events > 0)
      notes.push(`cuda:${d.device} has a trace too (${d.trace.events} events): not shown`);
  notes.push('the snapshot records neither the rank nor the world size');
  return {
    source: 'snapshot',
    rank: null,
    worldSize: null,
    device: `cuda:${shown.device}`,
    phases,
    settings: {},
    notes,
  };
}

/**
 * A memory snapshot read as its bytes come, a chunk at a time (`write` until it says to stop, then `finish`), for
 * a caller that reads the file asynchronously; `readSnapshot` is the same over an iterable of chunks.
 */
export class SnapshotReader {
  private readonly reader: PickleReader;
  private failed: string | undefined;

  constructor(limits: Partial<PickleLimits> = {}) {
    this.reader = new PickleReader(new SnapshotFold().fold, limits);
  }

  /** Parses the next chunk (not kept: the caller may reuse it); true once the pickle ended or cannot be read on. */
  write(chunk: Uint8Array): boolean {
    if (this.failed !== undefined) return true;
    try {
      return this.reader.write(chunk);
    } catch (e) {
      if (!(e instanceof PickleError)) throw e;
      this.failed = `not a memory snapshot this reader takes: ${e.message}`;
      return true;
    }
  }

  /** The measured run and the summary it came from, or an error in words. */
  finish(): { run: MeasuredRun; summary: SnapshotSummary } | { error: string } {
    if (this.failed !== undefined) return { error: this.failed };
    let root: unknown;
    try {
      root = this.reader.result();
    } catch (e) {
      if (e instanceof PickleError) return { error: `not a memory snapshot this reader takes: ${e.message}` };
      throw e;
    }
    const summary = summarize(root);
    if ('error' in summary) return summary;
    const run = measuredFromSnapshot(summary);
    return 'error' in run ? run : { run, summary };
  }
}

/**
 * A memory snapshot read from its chunks of bytes in order (it stops reading at the pickle's end): the measured
 * run and the summary it came from, or an error in words.
 */
export function readSnapshot(
  chunks: Iterable<Uint8Array>,
  limits: Partial<PickleLimits> = {},
): { run: MeasuredRun; summary: SnapshotSummary } | { error: string } {
  const reader = new SnapshotReader(limits);
  for (const chunk of chunks) if (reader.write(chunk)) break;
  return reader.finish();
}
