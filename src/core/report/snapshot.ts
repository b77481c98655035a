/** A PyTorch memory snapshot (torch.cuda.memory._dump_snapshot's pickle) streamed into a measured run. */
import { fmtBytes } from '../vocabulary/bytes';
import {
  MEASURED_CATEGORIES,
  type MeasuredCategories,
  type MeasuredCategory,
  type MeasuredRun,
} from './measured';
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
// its phase and category, each trace entry into its device's replay (then dropped), each segment into its sizes and
// its active blocks: the reader holds aggregates and the blocks live at once (which the allocator itself bounds, and
// a cap bounds here), never the trace.

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

/** A category an allocation's stack can place it in: a measured category, or 7 (unknown) when no frame decides. */
type CategoryIndex = number;
const CATEGORY_INDEX = new Map<MeasuredCategory, CategoryIndex>(MEASURED_CATEGORIES.map((c, i) => [c, i]));
const UNDECIDED: CategoryIndex = CATEGORY_INDEX.get('unknown')!;
/** An allocation recorded with no stack, or with an empty one: unknown too, counted apart. */
const WITHOUT_FRAMES: CategoryIndex = MEASURED_CATEGORIES.length;
/** Categories the replay counts: the measured ones and WITHOUT_FRAMES. */
const CATEGORY_SLOTS = MEASURED_CATEGORIES.length + 1;

/**
 * FSDP2's files (torch/distributed/fsdp/_fully_shard/ since PyTorch 2.6, torch/distributed/_composable/fsdp/
 * before) and the functions in each whose allocations are of one kind, whatever calls them:
 * - _fsdp_param.py, class FSDPParam: `__init__` and `_init_sharded_param` make the padded sharded parameter
 *   (`param_data.new_zeros(padded_sharded_size)`), `reset_sharded_param` re-pads it after `Module._apply` or
 *   `load_state_dict` (lazy init); `init_all_gather_outputs`, `alloc_all_gather_outputs` (the unsharded parameter's
 *   storage, `alloc_storage`), `init_unsharded_param` and `to_sharded_post_forward` (the 1/k slice kept after
 *   forward) hold gathered parameters; the `all_gather_inputs` property casts the shard for mixed precision;
 *   `to_accumulated_grad_if_needed` and `accumulate_unsharded_grad_if_needed` hold gradients in the reduce dtype;
 * - _fsdp_collectives.py: `foreach_all_gather` allocates the group's flat all-gather output (`all_gather_comm
 *   .allocate`) and `_get_param_all_gather_inputs` its inputs; `foreach_all_gather_copy_out` copies out into the
 *   parameters; `foreach_reduce` allocates the reduce-scatter input and output (the sharded gradient it keeps) and
 *   `foreach_reduce_scatter_copy_in` fills the input;
 * - _fsdp_param_group.py, class FSDPParamGroup: `__init__` (its FSDPParams) and `lazy_init` (`reset_sharded_param`)
 *   the sharded parameters, `wait_for_unshard` (the copy-out) the gathered ones, `post_backward` the gradients;
 * - _fsdp_init.py: `_move_states_to_device` moves parameters and buffers to the GPU; _fully_shard.py (fully_shard.py
 *   before 2.6): `fully_shard`.
 */
const FSDP2_DIR = /(^|\/)torch\/distributed\/(fsdp\/_fully_shard|_composable\/fsdp)\/([^/]+)$/;
const FSDP2: Record<string, Record<string, MeasuredCategory>> = {
  '_fsdp_param.py': {
    __init__: 'parameters',
    _init_sharded_param: 'parameters',
    reset_sharded_param: 'parameters',
    init_all_gather_outputs: 'gathered',
    alloc_all_gather_outputs: 'gathered',
    init_unsharded_param: 'gathered',
    to_sharded_post_forward: 'gathered',
    all_gather_inputs: 'gatherBuffers',
    to_accumulated_grad_if_needed: 'gradients',
    accumulate_unsharded_grad_if_needed: 'gradients',
  },
  '_fsdp_collectives.py': {
    foreach_all_gather: 'gatherBuffers',
    _get_param_all_gather_inputs: 'gatherBuffers',
    foreach_all_gather_copy_out: 'gathered',
    foreach_reduce: 'gradients',
    foreach_reduce_scatter_copy_in: 'gradients',
  },
  '_fsdp_param_group.py': {
    __init__: 'parameters',
    lazy_init: 'parameters',
    wait_for_unshard: 'gathered',
    post_backward: 'gradients',
  },
  '_fsdp_init.py': { _move_states_to_device: 'parameters' },
  '_fully_shard.py': { fully_shard: 'parameters' },
  'fully_shard.py': { fully_shard: 'parameters' },
};

/**
 * FSDP1's files (torch/distributed/fsdp/) and their functions of one kind:
 * - _flat_param.py (flat_param.py before 2.1), class FlatParamHandle: `__init__`, `_init_flat_param_and_metadata`,
 *   `flatten_tensors_into_flat_param` (the FlatParameter), `shard` (its local shard) and
 *   `init_flat_param_attributes` hold the sharded parameters; `pre_unshard` and `_use_low_precision_shard` the
 *   low-precision shard the all-gather sends (`_mp_shard`); `unshard`, `_alloc_padded_unsharded_flat_param` and
 *   `_all_gather_flat_param` the unsharded flat parameter; `prepare_gradient_for_backward` and
 *   `prepare_gradient_for_optim` gradients;
 * - _runtime_utils.py: `_unshard` the gathered parameters; `_post_backward_hook`, `_reduce_grad`,
 *   `_reduce_grad_no_shard` and `_post_reduce_grad_callback` the reduce-scatter's padded input and sharded output;
 * - _init_utils.py: every function (`_init_param_handle_from_module`, `_move_module_to_device`,
 *   `_sync_module_params_and_buffers`, the meta-device materialisation), run by `FullyShardedDataParallel.__init__`
 *   (fully_sharded_data_parallel.py).
 */
const FSDP1_DIR = /(^|\/)torch\/distributed\/fsdp\/([^/]+)$/;
const FLAT_PARAM: Record<string, MeasuredCategory> = {
  __init__: 'parameters',
  _init_flat_param_and_metadata: 'parameters',
  flatten_tensors_into_flat_param: 'parameters',
  shard: 'parameters',
  init_flat_param_attributes: 'parameters',
  pre_unshard: 'gatherBuffers',
  _use_low_precision_shard: 'gatherBuffers',
  unshard: 'gathered',
  _alloc_padded_unsharded_flat_param: 'gathered',
  _all_gather_flat_param: 'gathered',
  prepare_gradient_for_backward: 'gradients',
  prepare_gradient_for_optim: 'gradients',
};
const FSDP1: Record<string, Record<string, MeasuredCategory>> = {
  '_flat_param.py': FLAT_PARAM,
  'flat_param.py': FLAT_PARAM,
  '_runtime_utils.py': {
    _unshard: 'gathered',
    _post_backward_hook: 'gradients',
    _reduce_grad: 'gradients',
    _reduce_grad_no_shard: 'gradients',
    _post_reduce_grad_callback: 'gradients',
  },
  'fully_sharded_data_parallel.py': { __init__: 'parameters' },
};

/** A table's own entry (never what objects inherit, whatever a frame is named), or null. */
const own = <T>(table: Record<string, T>, key: string): T | null =>
  Object.hasOwn(table, key) ? table[key]! : null;

/** torch/optim's step functions (`_single_tensor_adamw`, `_multi_tensor_adam`, `_fused_adamw`...). */
const OPTIM_STEP = /^_(single_tensor|multi_tensor|fused)_\w+$/;

/**
 * What one frame of an allocation's stack says it is, or null when the frame says nothing of it. An allocation is
 * placed by the innermost frame that says something (stacks list it first): the function nearest the allocation
 * that is known to allocate one kind, or a frame of the forward or the backward pass around it.
 * - parameters (and buffers): FSDP2's and FSDP1's sharding at wrap time and lazy init (see FSDP2, FSDP1 above);
 *   `Module._apply` (torch/nn/modules/module.py; `.to()`, `.cuda()`, `.to_empty()` call it) and the `__init__` or
 *   `reset_parameters` of torch.nn's modules (a model built on the GPU); transformers' `from_pretrained`
 *   (transformers/modeling_utils.py), which loads the weights;
 * - optimizer state: torch/optim's `_init_group` (each optimizer's lazy state init, PyTorch 2.0 on), Adagrad's
 *   `__init__` (adagrad.py, which makes its state there) and `Optimizer.load_state_dict` (optimizer.py);
 * - optimizer step temporaries: torch/optim's `_single_tensor_*`, `_multi_tensor_*` and `_fused_*` functions, but
 *   SGD's (sgd.py), which create the momentum buffers on the first step, and an optimizer's `step` (PyTorch 1.x
 *   initialised the state there), neither of which the frames tell apart from temporaries: unknown;
 * - gathered parameters, all-gather buffers, gradients: FSDP2's and FSDP1's functions (see FSDP2, FSDP1 above);
 * - activations: a frame of the forward (`framePhase`: a module's forward or call, a loss function), which a forward
 *   recomputed by activation checkpointing in backward is too;
 * - unknown: a frame of the backward pass (autograd's engine and its generated nodes, Tensor.backward, the unpack
 *   hook of checkpointing) with none of the above inside it: the gradients of activations and the parameters'
 *   unsharded gradients, which the frames do not tell apart.
 */
export function frameCategory(filename: string, name: string): MeasuredCategory | null {
  const f = norm(filename);
  const fsdp2 = FSDP2_DIR.exec(f);
  const fsdp1 = fsdp2 ? null : FSDP1_DIR.exec(f);
  if (fsdp1?.[2] === '_init_utils.py') return 'parameters';
  // FSDP's other functions say nothing of their own: the frames inside or around them decide.
  const table = fsdp2 ? own(FSDP2, fsdp2[3]!) : fsdp1 ? own(FSDP1, fsdp1[2]!) : null;
  const fsdp = table ? own(table, name) : null;
  if (fsdp) return fsdp;
  const optim = /(^|\/)torch\/optim\/([^/]+)\.py$/.exec(f);
  if (optim) {
    if (name === '_init_group' || name === 'load_state_dict') return 'optimizerState';
    if (name === '__init__' && optim[2] === 'adagrad') return 'optimizerState';
    if (OPTIM_STEP.test(name)) return optim[2] === 'sgd' ? 'unknown' : 'optimizerStep';
    if (name === 'step') return 'unknown';
    return null;
  }
  if (name === '_apply' && inFile(f, 'torch/nn/modules/module.py')) return 'parameters';
  if ((name === '__init__' || name === 'reset_parameters') && /(^|\/)torch\/nn\/modules\/[^/]+\.py$/.test(f))
    return 'parameters';
  if (name === 'from_pretrained' && inFile(f, 'transformers/modeling_utils.py')) return 'parameters';
  const phase = framePhase(filename, name);
  if (phase === 'forward') return 'activations';
  if (phase === 'backward') return 'unknown';
  return null;
}

/** What a frame says, folded: one object per combination, shared by every frame. */
class FrameSig {
  constructor(
    readonly phase: SnapshotPhase | null,
    readonly python: boolean,
    /** The category the frame decides (`frameCategory`), or null. */
    readonly category: CategoryIndex | null,
  ) {}
}

/** What a stack says: its phase (null when no frame tells), whether it has Python frames, and its category. */
class StackSig {
  constructor(
    readonly phase: SnapshotPhase | null,
    readonly python: boolean,
    readonly category: CategoryIndex,
  ) {}
}

const PHASES = [null, 'forward', 'backward', 'optimizer'] as const;
const slots = <T>(n: number, make: (i: number) => T) => Array.from({ length: n }, (_, i) => make(i));
// FRAME_SIGS[phase][python][category + 1] (0: no category); STACK_SIGS[phase][python][category].
const FRAME_SIGS = PHASES.map((p) =>
  [false, true].map((py) => slots(CATEGORY_SLOTS, (c) => new FrameSig(p, py, c === 0 ? null : c - 1))),
);
const STACK_SIGS = PHASES.map((p) =>
  [false, true].map((py) => slots(CATEGORY_SLOTS, (c) => new StackSig(p, py, c))),
);
const sigIndex = (p: SnapshotPhase | null) => PHASES.indexOf(p);
/** The stack of an allocation recorded with no frame (no "frames" key, or an empty list). */
const NO_STACK = STACK_SIGS[0]![0]![WITHOUT_FRAMES]!;

/**
 * A block of a segment, folded: whether it is active (allocated, or freed and waiting on a stream), its bytes, its
 * address and the category its stack (the one it was allocated with) places it in.
 */
class BlockSig {
  constructor(
    readonly active: boolean,
    readonly requested: number,
    readonly address: number | null,
    readonly category: CategoryIndex,
  ) {}
}

/** A segment's blocks, folded: the bytes its active blocks requested, and those blocks (address, bytes, category). */
class BlockList {
  constructor(
    readonly requested: number,
    readonly addresses: number[],
    readonly bytes: number[],
    readonly categories: CategoryIndex[],
    /** Active blocks with no address: they cannot be told from the trace's. */
    readonly withoutAddress: number,
  ) {}
}

/** A segment, folded: its device, its bytes, the bytes its active blocks requested, and those blocks. */
export class SegmentSig {
  constructor(
    readonly device: number | null,
    readonly totalSize: number,
    readonly requested: number,
    readonly blocks: BlockList | null,
  ) {}
}

/**
 * The most allocations the replay keeps live at once (address to bytes and category), and the most active blocks
 * kept from the snapshot's segments: past either, the categories are not given (the peaks still are).
 */
export const LIVE_BLOCKS_CAP = 4_000_000;

/** A device's trace, replayed as it streams: running totals and their peaks, never the entries. */
export class DeviceTrace {
  /** The most allocations kept live by address (LIVE_BLOCKS_CAP unless a caller says less). */
  constructor(private readonly liveCap = LIVE_BLOCKS_CAP) {}

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
  /**
   * The allocations of the trace live now, by address: `bytes * CATEGORY_SLOTS + category` (null once the
   * categories are lost: see `categoriesLost`). Bounded by what the allocator holds at once, and by LIVE_BLOCKS_CAP.
   */
  private live: Map<number, number> | null = new Map();
  /** Bytes of the trace's allocations live now, by category (CATEGORY_SLOTS: the measured ones, WITHOUT_FRAMES). */
  private readonly liveBytes: number[] = new Array<number>(CATEGORY_SLOTS).fill(0);
  /** `liveBytes` right after the allocation that set the step's peak, and each phase's. */
  peakCategories: number[] | null = null;
  readonly phasePeakCategories = new Map<SnapshotPhase, number[]>();
  /** Why the trace's allocations cannot be followed by address (the categories are not given), or null. */
  categoriesLost: string | null = null;
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
        // No "frames" key: recorded without context. An empty list: a stack with no frame, as a thread that runs
        // no Python code has when only Python frames are recorded. A list of something else: frames not read.
        const frames = e.get('frames');
        const stack =
          frames instanceof StackSig
            ? frames
            : Array.isArray(frames)
              ? frames.length
                ? STACK_SIGS[0]![0]![UNDECIDED]!
                : NO_STACK
              : null;
        this.track(e.get('addr'), bytes, (stack ?? NO_STACK).category);
        if (this.allocated > this.peak) {
          this.peak = this.allocated;
          if (this.live) this.peakCategories = this.liveBytes.slice();
        }
        const phase = stack?.phase ?? 'unknown';
        if (phase === 'unknown') {
          if (!stack) this.allocsWithoutStack++;
          else if (!stack.python) this.allocsWithoutPython++;
        }
        const before = this.phasePeak.get(phase);
        const peak = Math.max(before ?? 0, this.allocated);
        this.phasePeak.set(phase, peak);
        if (phase !== 'unknown' && this.live && (before === undefined || peak > before))
          this.phasePeakCategories.set(phase, this.liveBytes.slice());
        this.phaseAllocs.set(phase, (this.phaseAllocs.get(phase) ?? 0) + 1);
        return;
      }
      case 'free_completed': {
        if (bytes === null) {
          this.malformed++;
          return;
        }
        this.frees++;
        this.allocated -= bytes;
        // A free of an address the trace did not allocate: allocated before the trace began (the residual of each
        // peak counts it, see measuredFromSnapshot).
        const addr = e.get('addr');
        const v = typeof addr === 'number' ? this.live?.get(addr) : undefined;
        if (v !== undefined) {
          this.live!.delete(addr as number);
          this.liveBytes[v % CATEGORY_SLOTS]! -= Math.floor(v / CATEGORY_SLOTS);
        }
        return;
      }
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

  /** Keeps an allocation live at its address, with its category; or gives up the categories, saying why. */
  private track(addr: unknown, bytes: number, category: CategoryIndex): void {
    const live = this.live;
    if (!live) return;
    if (typeof addr !== 'number')
      return this.lose('an allocation of the trace has no address this reader can follow');
    const old = live.get(addr);
    if (old === undefined && live.size >= this.liveCap)
      return this.lose(
        `more than ${this.liveCap.toLocaleString('en-US')} allocations are live at once, more than this reader follows`,
      );
    // An address allocated again with no free between: the first one's free is not in the trace.
    if (old !== undefined) this.liveBytes[old % CATEGORY_SLOTS]! -= Math.floor(old / CATEGORY_SLOTS);
    live.set(addr, bytes * CATEGORY_SLOTS + category);
    this.liveBytes[category]! += bytes;
  }

  private lose(why: string): void {
    this.categoriesLost ??= why;
    this.live = null;
    this.peakCategories = null;
    this.phasePeakCategories.clear();
  }

  /** Whether the trace allocated `addr` and has not freed it (null once the categories are lost). */
  isLive(addr: number): boolean | null {
    return this.live ? this.live.has(addr) : null;
  }
}

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/** The fold that keeps a snapshot's aggregates only (see the top of this file). */
class SnapshotFold {
  constructor(readonly liveCap: number) {}

  /** Each device's trace, by the list its entries stream into. */
  private readonly traces = new WeakMap<unknown[], DeviceTrace>();
  /** Active blocks kept from the segments (LIVE_BLOCKS_CAP at most); true once one more was left out. */
  private keptBlocks = 0;
  blocksCapped = false;

  readonly fold = (v: PyContainer, parent: PyContainer | null): unknown => {
    if (v instanceof Map) return this.dict(v, parent);
    // A device's list of trace entries stays empty (each entry is folded into its replay and dropped).
    const trace = this.traces.get(v);
    if (trace) return trace;
    if (v.length === 0) return v;
    if (v.every((x) => x instanceof FrameSig)) {
      let phase: SnapshotPhase | null = null;
      let python = false;
      // Frames come innermost first: the first that decides a category places the allocation.
      let category: CategoryIndex | null = null;
      for (const f of v as FrameSig[]) {
        python ||= f.python;
        category ??= f.category;
        if (f.phase === 'backward') phase = 'backward';
        else if (f.phase === 'optimizer' && phase !== 'backward') phase = 'optimizer';
        else if (f.phase === 'forward' && phase === null) phase = 'forward';
      }
      return STACK_SIGS[sigIndex(phase)]![python ? 1 : 0]![category ?? UNDECIDED];
    }
    if (v.every((x) => x instanceof BlockSig)) {
      let requested = 0;
      const addresses: number[] = [];
      const bytes: number[] = [];
      const categories: CategoryIndex[] = [];
      let withoutAddress = 0;
      for (const b of v as BlockSig[]) {
        if (!b.active) continue;
        requested += b.requested;
        if (b.address === null) withoutAddress++;
        else if (this.keptBlocks >= this.liveCap) this.blocksCapped = true;
        else {
          this.keptBlocks++;
          addresses.push(b.address);
          bytes.push(b.requested);
          categories.push(b.category);
        }
      }
      return new BlockList(requested, addresses, bytes, categories, withoutAddress);
    }
    return v;
  };

  private dict(d: PyDict, parent: PyContainer | null): unknown {
    const action = d.get('action');
    if (typeof action === 'string' && Array.isArray(parent)) {
      let trace = this.traces.get(parent);
      if (!trace) this.traces.set(parent, (trace = new DeviceTrace(this.liveCap)));
      trace.add(d);
      return DROP;
    }
    const filename = d.get('filename');
    const name = d.get('name');
    if (typeof filename === 'string' && typeof name === 'string' && d.has('line')) {
      const phase = framePhase(filename, name);
      const category = frameCategory(filename, name);
      return FRAME_SIGS[sigIndex(phase)]![norm(filename).endsWith('.py') ? 1 : 0]![
        category === null ? 0 : CATEGORY_INDEX.get(category)! + 1
      ];
    }
    const totalSize = num(d.get('total_size'));
    if (totalSize !== null && d.has('blocks')) {
      // requested_size: what the active blocks requested (CUDACachingAllocator's snapshot() adds a block's
      // requested_size when it is allocated or awaiting a stream); without it (older releases), the blocks' own.
      const blocks = d.get('blocks');
      const list = blocks instanceof BlockList ? blocks : null;
      const requested = num(d.get('requested_size')) ?? list?.requested ?? num(d.get('active_size'));
      return new SegmentSig(num(d.get('device')), totalSize, requested ?? 0, list);
    }
    const state = d.get('state');
    const size = num(d.get('size'));
    if (typeof state === 'string' && size !== null) {
      // 'active_pending_free' (the name in the pickle; 'active_awaiting_free' in _snapshot's docstring).
      const active = state.startsWith('active');
      // A block's frames are the stack it was allocated with (segmentInfoToDict, torch/csrc/cuda/Module.cpp:
      // `context_when_allocated`), absent when it was allocated while no history was recorded.
      const frames = d.get('frames');
      const category =
        frames instanceof StackSig
          ? frames.category
          : Array.isArray(frames) && frames.length
            ? UNDECIDED
            : WITHOUT_FRAMES;
      return new BlockSig(active, num(d.get('requested_size')) ?? size, num(d.get('address')), category);
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
  /**
   * Bytes of the blocks active when the snapshot was taken that the trace did not allocate (there before it began,
   * live all through it), by the category their own stacks give (CATEGORY_SLOTS); null where they cannot be told
   * from the trace's (see `categoriesLost`).
   */
  blocksBeforeTrace: number[] | null;
  /** Why the allocations live at the peaks are not given by category, or null. */
  categoriesLost: string | null;
}

export interface SnapshotSummary {
  devices: DeviceSummary[];
  /** Segments whose dict names no device (attributed to the device shown). */
  segmentsWithoutDevice: number;
}

/** The snapshot's dict, folded, as devices; an error in words when it is not a memory snapshot. */
function summarize(root: unknown, blocksCapped: number | null = null): SnapshotSummary | { error: string } {
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
        blocksBeforeTrace: new Array<number>(CATEGORY_SLOTS).fill(0),
        categoriesLost: null,
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
    // The segment's active blocks the trace did not allocate: there before it began.
    const before = d.blocksBeforeTrace;
    if (!before || !s.blocks) continue;
    if (s.blocks.withoutAddress && d.trace.events > 0) {
      d.categoriesLost = "the snapshot's blocks have no address to tell them from the trace's allocations";
      d.blocksBeforeTrace = null;
      continue;
    }
    const { addresses, bytes, categories } = s.blocks;
    for (let i = 0; i < addresses.length; i++)
      if (!d.trace.isLive(addresses[i]!)) before[categories[i]!]! += bytes[i]!;
  }
  for (const d of byDevice.values()) {
    d.allocatedAtStart = d.allocatedAtEnd - d.trace.allocated;
    d.reservedAtStart = d.reservedAtEnd - d.trace.reserved;
    const lost =
      d.trace.categoriesLost ??
      (blocksCapped !== null
        ? `the snapshot holds more than ${blocksCapped.toLocaleString('en-US')} active blocks, more than this reader keeps`
        : null);
    if (lost) {
      d.categoriesLost = lost;
      d.blocksBeforeTrace = null;
    }
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
  let categories: MeasuredRun['categories'];
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
    const cats = snapshotCategories(shown, start, phases, notes);
    if (cats) categories = cats;
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
    ...(categories ? { categories } : {}),
  };
}

/**
 * The allocations live at each peak of `phases` by category: the trace's own (as they stood right after the
 * allocation that set the peak), the blocks there before it began (by their own stacks), and the rest of the
 * allocated peak, which was allocated before the trace and freed after the peak (its stack not recorded where it is
 * freed: `free_completed` carries the stack of the free, or of the allocation, as the history was recorded). Notes
 * say how they were placed and what is unknown; null with a note where they cannot be given.
 */
function snapshotCategories(
  d: DeviceSummary,
  start: number,
  phases: MeasuredRun['phases'],
  notes: string[],
): Record<string, MeasuredCategories> | null {
  const t = d.trace;
  const before = d.blocksBeforeTrace;
  const b = (n: number) => fmtBytes(n);
  if (!before || !t.peakCategories) {
    if (d.categoriesLost) notes.push(`no breakdown by category: ${d.categoriesLost}`);
    return null;
  }
  const at = (live: number[], allocated: number): MeasuredCategories | string => {
    const bytes = Object.fromEntries(MEASURED_CATEGORIES.map((c) => [c, 0])) as Record<
      MeasuredCategory,
      number
    >;
    let counted = 0;
    for (let i = 0; i < UNDECIDED; i++) {
      bytes[MEASURED_CATEGORIES[i]!] = live[i]! + before[i]!;
      counted += live[i]! + before[i]!;
    }
    const withoutFrames = live[WITHOUT_FRAMES]!;
    const undecided = live[UNDECIDED]! + before[UNDECIDED]!;
    // What is left of the peak: blocks there before the trace that record no stack, and allocations made before
    // the trace and freed after the peak.
    const beforeTrace = allocated - counted - withoutFrames - undecided;
    if (beforeTrace < 0)
      return `the trace's allocations live at the peak and the blocks there before it add up to ${b(-beforeTrace)} more than the ${b(allocated)} allocated`;
    bytes.unknown = withoutFrames + undecided + beforeTrace;
    return { bytes, unknown: { withoutFrames, undecided, beforeTrace } };
  };
  const out: Record<string, MeasuredCategories> = {};
  const step = at(t.peakCategories, phases.step?.allocated ?? start + t.peak);
  if (typeof step === 'string') {
    notes.push(`no breakdown by category: ${step}`);
    return null;
  }
  out.step = step;
  for (const p of PHASE_ORDER) {
    const live = t.phasePeakCategories.get(p);
    const allocated = phases[p]?.allocated;
    if (!live || allocated === null || allocated === undefined) continue;
    const c = at(live, allocated);
    if (typeof c !== 'string') out[p] = c;
  }
  notes.push(
    "by category at each peak: the allocations live then, each placed by the innermost frame of its stack that tells (the blocks there before the trace began by the stack their block records): parameters and buffers (FSDP2's FSDPParam init and fully_shard, FSDP1's FlatParamHandle init, Module._apply for .to() and .cuda(), a torch.nn module's __init__, from_pretrained), optimizer state (torch/optim's _init_group, Adagrad's __init__, load_state_dict), gathered parameters (FSDP2's foreach_all_gather_copy_out and wait_for_unshard, FSDP1's unshard), all-gather buffers (FSDP2's foreach_all_gather, FSDP1's low-precision shard), gradients and reduce-scatter buffers (FSDP2's foreach_reduce and post_backward, FSDP1's post-backward hook), optimizer step temporaries (torch/optim's _single_tensor_, _multi_tensor_ and _fused_ functions), activations (a module's forward or the loss, none of the above inside); anything else is unknown, not guessed",
  );
  const u = step.unknown;
  if (step.bytes.unknown > 0) {
    const parts: string[] = [];
    if (u.withoutFrames)
      parts.push(
        `${b(u.withoutFrames)} recorded with no frame (the backward pass on autograd's own thread has none when only Python frames are recorded, stacks="python"; stacks="all" records its C++ frames, which tell it is backward, not what it holds)`,
      );
    if (u.undecided)
      parts.push(
        `${b(u.undecided)} whose frames decide none (autograd's engine: activations' and parameters' gradients alike; the training loop's own code; SGD's momentum buffers, made in its step)`,
      );
    if (u.beforeTrace)
      parts.push(
        `${b(u.beforeTrace)} allocated before the trace began and not placed (its block records no stack, or it was freed after the peak, where the trace gives no stack of its allocation)`,
      );
    notes.push(
      `of the ${b(phases.step?.allocated ?? 0)} at the step's peak, ${b(step.bytes.unknown)} is unknown: ${parts.join('; ')}`,
    );
  }
  return out;
}

/**
 * A memory snapshot read as its bytes come, a chunk at a time (`write` until it says to stop, then `finish`), for
 * a caller that reads the file asynchronously; `readSnapshot` is the same over an iterable of chunks.
 */
export class SnapshotReader {
  private readonly reader: PickleReader;
  private readonly fold: SnapshotFold;
  private failed: string | undefined;

  /** `liveBlocks`: the most allocations (and active blocks) followed by address for the categories. */
  constructor(limits: Partial<PickleLimits> = {}, liveBlocks = LIVE_BLOCKS_CAP) {
    this.fold = new SnapshotFold(liveBlocks);
    this.reader = new PickleReader(this.fold.fold, limits);
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
    const summary = summarize(root, this.fold.blocksCapped ? this.fold.liveCap : null);
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
  liveBlocks = LIVE_BLOCKS_CAP,
): { run: MeasuredRun; summary: SnapshotSummary } | { error: string } {
  const reader = new SnapshotReader(limits, liveBlocks);
  for (const chunk of chunks) if (reader.write(chunk)) break;
  return reader.finish();
}
