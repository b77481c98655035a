/**
 * FSDP1 to FSDP2: each `FullyShardedDataParallel(model, ...)` wrap of a file rewritten as the `fully_shard` calls
 * that build the same units (the classes its transformer auto-wrap policy names, then the root), with its options
 * in their FSDP2 forms; what has no FSDP2 form is said, with what to do. A wrap the rewrite cannot carry over
 * faithfully (a size or custom policy, NO_SHARD, options it does not know) is left as it is, with the reason.
 * The FSDP1 calls the file makes on the modules it moves (`no_sync`, `clip_grad_norm_`, the state-dict functions)
 * are rewritten in their FSDP2 forms where the rewrite keeps their meaning, and named with what to do where not.
 * A file without wraps (helpers handed the wrapped model) gets the same rewrites on the modules FSDP1's class calls
 * name in each function, on the assumption that the wrap they come from moves to fully_shard too.
 */
import type {
  FileFacts,
  Fsdp1ArgumentFact,
  Fsdp1CallFact,
  PlainValue,
  WithBlockFact,
  WrapCall,
} from '../analysis/facts';
import type { Range } from '../vocabulary/range';
import { applyEdits, lastImportLine, TextIndex } from './edits';
import type { TextEdit } from './types';

export interface Migration {
  edits: TextEdit[];
  /** What changed meaning or has no FSDP2 form, with what to do; and FSDP1 calls the file still makes. */
  notes: string[];
  /** Wraps left as they are, each with why. */
  skipped: string[];
}

const DTYPES: Record<string, string> = {
  bfloat16: 'torch.bfloat16',
  float16: 'torch.float16',
  float32: 'torch.float32',
};

/** Options with no FSDP2 form that change nothing the estimate models, and what to do instead. */
const DROPPED: Record<string, string> = {
  device_id:
    'fully_shard places parameters on the mesh device: call torch.cuda.set_device(local_rank) before it, as FSDP1 device_id did',
  limit_all_gathers: 'FSDP2 limits in-flight all-gathers itself (no rate limiter to set)',
  use_orig_params: 'FSDP2 always keeps the original parameters (as DTensors)',
  sync_module_states:
    "FSDP2 does not broadcast rank 0's weights: load them on every rank, or use set_model_state_dict(..., StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))",
  backward_prefetch:
    'FSDP2 prefetches the next unit in backward by default (set_modules_to_backward_prefetch changes it)',
  forward_prefetch:
    'FSDP2 prefetches nothing in forward by default: call set_modules_to_forward_prefetch on each unit',
};

/** The FSDP1 wraps of `facts` rewritten for FSDP2, or why each is left. Text only: the user applies the edits. */
export function migrateToFsdp2(facts: FileFacts, text: string): Migration {
  const index = new TextIndex(text);
  const out: Migration = { edits: [], notes: [], skipped: [] };
  // A file without wraps (the checkpoint or training helpers a script hands its wrapped model to): its FSDP1 calls.
  if (!facts.calls.length) return withoutWraps(facts, index, out);
  const used = new Set<string>();
  const moved: Moved[] = [];
  let mesh = false;
  for (const call of facts.calls.filter((c) => c.api === 'FSDP')) {
    const r = rewrite(call, index, out.notes);
    if ('skip' in r) {
      out.skipped.push(`line ${call.line}: ${r.skip}`);
      continue;
    }
    out.edits.push(r.edit);
    for (const n of r.imports) used.add(n);
    mesh ||= r.mesh;
    moved.push({ names: r.names, line: call.line, function: call.function });
  }
  if (!out.edits.length) return out;
  // The FSDP1 calls the file makes on the modules it moves, in their FSDP2 forms or named.
  const runtime = new RuntimeCalls(facts.fsdp1Calls ?? [], index, moved, out.edits, null).run();
  out.edits.push(...runtime.edits);
  out.notes.push(...runtime.notes);
  const lines = [`from torch.distributed.fsdp import ${[...used].sort().join(', ')}`];
  if (mesh) lines.push('from torch.distributed.device_mesh import init_device_mesh');
  out.edits.push(importEdit(facts, index, lines, runtime.imports, out.edits)!);
  return out;
}

/**
 * The FSDP1 calls of a file that wraps nothing, on the modules FSDP1's class calls name: `FSDP.state_dict_type(model,
 * ...)` and its kin take an FSDP module (or one holding FSDP modules), so in the function that makes one, that name
 * is FSDP1's module. They are rewritten as where the file wraps it, on the assumption that the caller's wrap moves to
 * fully_shard too. A method call (`model.no_sync()`, `model.clip_grad_norm_()`) on a name no class call names there
 * may be any module's (DDP has no_sync too): left, with its FSDP2 form should the module be FSDP1's.
 */
function withoutWraps(facts: FileFacts, index: TextIndex, out: Migration): Migration {
  const calls = facts.fsdp1Calls ?? [];
  const named = new Set(calls.filter((c) => c.onClass && c.module).map((c) => scoped(c.function, c.module!)));
  // Notes on method calls only in a file that imports FSDP1's class or calls it: elsewhere `no_sync` is DDP's.
  const usesFsdp1 = calls.some((c) => c.onClass) || facts.imports.some((i) => FSDP1_CLASS.test(i.qualified));
  const runtime = new RuntimeCalls(calls, index, [], [], { named, usesFsdp1 }).run();
  out.notes.push(...runtime.notes);
  if (!runtime.edits.length) return out;
  out.edits.push(...runtime.edits);
  // Which modules the rewrites take to be FSDP2's, and where.
  const where = new Map<string, string[]>();
  for (const c of runtime.rewrote) {
    const fns = where.get(c.module) ?? [];
    const fn = c.function ? `${c.function}()` : 'the module-level code';
    if (!fns.includes(fn)) fns.push(fn);
    where.set(c.module, fns);
  }
  const said = [...where].map(([m, fns]) => `${m} in ${listed(fns)}`);
  out.notes.unshift(
    'the file holds no FSDP1 wrap (FullyShardedDataParallel), so its rewrites assume the modules they act on are ' +
      `moved to fully_shard where they are wrapped, and FSDP1's calls on them rewritten everywhere: ${listed(said)}`,
  );
  const imports = importEdit(facts, index, [], runtime.imports, out.edits);
  if (imports) out.edits.push(imports);
  return out;
}

/** `torch.distributed.fsdp.FullyShardedDataParallel` as imported (or its module's path). */
const FSDP1_CLASS = /^torch\.distributed\.fsdp(\.fully_sharded_data_parallel)?\.FullyShardedDataParallel$/;

/** At most this many names in one list of a note. */
const MAX_LISTED = 8;

/** `a`, `a and b`, `a, b and c`; past MAX_LISTED, `and N more`. */
function listed(items: string[]): string {
  const shown = items.slice(0, MAX_LISTED);
  if (items.length > shown.length) shown.push(`${items.length - MAX_LISTED} more`);
  return shown.length > 1
    ? `${shown.slice(0, -1).join(', ')} and ${shown[shown.length - 1]}`
    : (shown[0] ?? '');
}

/**
 * The new names, imported after the file's last top-level import: `lines`, then the checkpoint functions the edits
 * call, then `import torch` where the new code needs the name. The old imports stay, for code that still uses them.
 */
function importEdit(
  facts: FileFacts,
  index: TextIndex,
  lines: string[],
  names: Set<string>,
  edits: TextEdit[],
): TextEdit | null {
  const have = new Set(facts.imports.filter((i) => i.topLevel).map((i) => `${i.qualified} as ${i.local}`));
  const checkpoint = [...names].filter((n) => !have.has(`${STATE_DICT_MODULE}.${n} as ${n}`)).sort();
  const all = [...lines];
  if (checkpoint.length) all.push(`from ${STATE_DICT_MODULE} import ${checkpoint.join(', ')}`);
  // `torch.` in the new code needs the name `torch` (`import torch.distributed as dist` does not bind it).
  const torch = facts.imports.some((i) => i.topLevel && i.local === 'torch' && i.qualified === 'torch');
  if (/\btorch\./.test(edits.map((e) => e.newText).join('')) && !torch) all.push('import torch');
  if (!all.length) return null;
  const at = { line: lastImportLine(index) + 1, character: 0 };
  return { range: { start: at, end: at }, newText: all.map((l) => l + index.eol()).join('') };
}

function rewrite(
  call: WrapCall,
  index: TextIndex,
  notes: string[],
): { edit: TextEdit; imports: string[]; mesh: boolean; names: string[] } | { skip: string } {
  if (call.incomplete) return { skip: 'the call does not parse yet' };
  if (call.loop) return { skip: 'the wrap runs in a loop: rewrite it by hand as fully_shard of each module' };
  if (call.unresolvedSplats.length)
    return { skip: `its options come from ${call.unresolvedSplats.join(', ')}, not read` };
  const stmt = call.statement;
  const stmtText = index.text.slice(stmt.start, stmt.end);
  // A statement that is the call, or `name = <the call>`.
  const callText = index.slice(call.range);
  const assign = new RegExp(`^\\s*([A-Za-z_][\\w.]*)\\s*=\\s*$`).exec(
    stmtText.slice(0, stmtText.indexOf(callText)),
  );
  if (stmtText.trim() !== callText.trim() && !(assign && stmtText.trimEnd().endsWith(callText)))
    return { skip: 'the call is part of a larger expression' };
  const target = call.target;
  if (!/^[A-Za-z_][\w.]*$/.test(target)) return { skip: `the wrapped object \`${target}\` is not a name` };
  const o = call.options;
  const known = new Set([
    'module',
    'auto_wrap_policy',
    'sharding_strategy',
    'mixed_precision',
    'cpu_offload',
    'device_mesh',
    ...Object.keys(DROPPED),
  ]);
  const unknown = Object.keys(o).filter((k) => !known.has(k));
  // What needs the user's hand, with what FSDP2 does instead.
  const HAND: Record<string, string> = {
    param_init_fn:
      'param_init_fn has no FSDP2 form: after fully_shard, call model.to_empty(device="cuda") and initialize or load the weights as param_init_fn did',
    ignored_modules:
      'ignored_modules has no FSDP2 form here: leave those modules out of the fully_shard calls, or pass their parameters as the ignored_params of fully_shard where your PyTorch release has it',
  };
  const hand = unknown.filter((k) => HAND[k]);
  if (hand.length) return { skip: hand.map((k) => HAND[k]).join('; ') };
  if (unknown.length)
    return {
      skip: `${unknown.join(', ')} ${unknown.length > 1 ? 'have' : 'has'} no FSDP2 form the rewrite knows`,
    };
  // Which modules become units: the classes a transformer policy names, each wrapped before the root.
  const policy = o.auto_wrap_policy?.value as { policy?: string; classes?: string[] } | null | undefined;
  let classes: string[] = [];
  if (o.auto_wrap_policy) {
    if (policy?.policy !== 'transformer' || !policy.classes?.length)
      return {
        skip: `its auto_wrap_policy (${o.auto_wrap_policy.text}) is not a transformer policy over named classes: list the modules to fully_shard by hand`,
      };
    classes = policy.classes;
  }
  const kwargs: string[] = [];
  const pre: string[] = [];
  const imports = ['fully_shard'];
  let mesh = false;
  const strategy =
    typeof o.sharding_strategy?.value === 'string'
      ? o.sharding_strategy.value
      : o.sharding_strategy
        ? null
        : 'FULL_SHARD';
  if (strategy === null) return { skip: `its sharding_strategy (${o.sharding_strategy!.text}) is not read` };
  if (strategy === 'NO_SHARD')
    return {
      skip: 'NO_SHARD has no FSDP2 form: replicate with DDP (or torch.distributed._composable.replicate)',
    };
  // FSDP1's `device_mesh` (1-D, or 2-D replicate x shard for the hybrid strategies) is FSDP2's `mesh`, as it is.
  const given = o.device_mesh?.text;
  if (given) kwargs.push(`mesh=${given}`);
  else if (strategy === 'HYBRID_SHARD' || strategy === '_HYBRID_SHARD_ZERO2') {
    // FSDP1 shards within each node and replicates across nodes: a 2-D mesh of nodes x GPUs per node.
    mesh = true;
    kwargs.push('mesh=mesh');
  }
  if (strategy === 'SHARD_GRAD_OP' || strategy === '_HYBRID_SHARD_ZERO2')
    kwargs.push('reshard_after_forward=False');
  else if (strategy !== 'FULL_SHARD' && strategy !== 'HYBRID_SHARD')
    return { skip: `sharding_strategy ${strategy} is not one FSDP1 has` };
  const mp = o.mixed_precision?.value as Record<string, unknown> | null | undefined;
  if (o.mixed_precision) {
    if (!mp || mp.kind !== 'MixedPrecision')
      return { skip: `its mixed_precision (${o.mixed_precision.text}) is not read` };
    const parts: string[] = [];
    for (const k of ['param_dtype', 'reduce_dtype'] as const) {
      const d = typeof mp[k] === 'string' ? DTYPES[mp[k]] : undefined;
      if (mp[k] && !d) return { skip: `its mixed_precision ${k} (${String(mp[k])}) is not read` };
      if (d) parts.push(`${k}=${d}`);
    }
    // FSDP1 reduces in param_dtype when reduce_dtype is not given; FSDP2's None keeps the parameter's own dtype.
    if (mp.param_dtype && !mp.reduce_dtype) parts.push(`reduce_dtype=${DTYPES[mp.param_dtype as string]}`);
    // Bound once, before the wraps that share it.
    const name = /\bmp_policy\s*=/.test(index.text) ? 'fsdp2_mp_policy' : 'mp_policy';
    pre.push(`${name} = MixedPrecisionPolicy(${parts.join(', ')})`);
    kwargs.push(`mp_policy=${name}`);
    imports.push('MixedPrecisionPolicy');
    if (mp.buffer_dtype)
      notes.push(
        `line ${call.line}: buffer_dtype has no FSDP2 form: FSDP2 leaves buffers in their dtype (cast them with module.to() if the model needs it)`,
      );
    if (mp.keep_low_precision_grads === true)
      notes.push(
        `line ${call.line}: keep_low_precision_grads has no FSDP2 form: gradients are reduced and kept in reduce_dtype`,
      );
  }
  const offload = o.cpu_offload?.value as Record<string, unknown> | boolean | null | undefined;
  if (o.cpu_offload) {
    const on =
      typeof offload === 'object' && offload !== null
        ? offload.offloadParams === true || offload.offload_params === true
        : offload === true;
    if (typeof offload !== 'object' || offload === null)
      return { skip: `its cpu_offload (${o.cpu_offload.text}) is not read` };
    if (on) {
      kwargs.push('offload_policy=CPUOffloadPolicy()');
      imports.push('CPUOffloadPolicy');
    }
  }
  for (const k of Object.keys(DROPPED))
    if (o[k]) notes.push(`line ${call.line}: ${k} dropped: ${DROPPED[k]}`);
  const ind = stmt.indent;
  const args = kwargs.length ? `, ${kwargs.join(', ')}` : '';
  const lines: string[] = pre.map((l) => ind + l);
  if (mesh)
    lines.push(
      `${ind}mesh = init_device_mesh("cuda", (torch.distributed.get_world_size() // torch.cuda.device_count(), torch.cuda.device_count()), mesh_dim_names=("replicate", "shard"))`,
    );
  if (classes.length) {
    // Children before their parent, as FSDP1's auto-wrap builds them: every module of the classes, then the root.
    const tuple = classes.length === 1 ? classes[0] : `(${classes.join(', ')})`;
    lines.push(`${ind}for module in ${target}.modules():`);
    lines.push(`${ind}    if isinstance(module, ${tuple}):`);
    lines.push(`${ind}        fully_shard(module${args})`);
  }
  lines.push(`${ind}fully_shard(${target}${args})`);
  // `fsdp_model = FSDP(model)`: fully_shard changes `model` in place and returns it.
  if (assign && assign[1] !== target) lines.push(`${ind}${assign[1]} = ${target}`);
  const range = index.wholeLines(stmt.range);
  const after = index.text.slice(index.offsetAt(range.start), index.offsetAt(range.end));
  const ending = after.endsWith('\r\n') ? '\r\n' : after.endsWith('\n') ? '\n' : '';
  // The names that hold the FSDP2 module afterwards: the wrapped object, and the result's variable.
  const names = assign && assign[1] !== target ? [target, assign[1]!] : [target];
  return { edit: { range, newText: lines.join(index.eol()) + ending }, imports, mesh, names };
}

/** The module `get_model_state_dict` and its kin live in (torch/distributed/checkpoint/state_dict.py). */
const STATE_DICT_MODULE = 'torch.distributed.checkpoint.state_dict';

/** The names of torch.distributed.checkpoint.state_dict the rewrites call. */
const CHECKPOINT_NAMES = [
  'StateDictOptions',
  'get_model_state_dict',
  'get_optimizer_state_dict',
  'set_model_state_dict',
];

/** A wrap the migration rewrote: the names that hold the FSDP2 module afterwards, and where the wrap runs. */
interface Moved {
  names: string[];
  line: number;
  function: string | null;
}

/** What a call's rewrite is: edits at the call, and notes that go with it; or why it is left. */
type Rewritten = { edits: TextEdit[]; notes?: string[] } | { left: string };

/** FSDP1 `StateDictType` members the rewrite maps, and their config classes (torch/distributed/fsdp/api.py). */
const CONFIGS = {
  FULL_STATE_DICT: { model: 'FullStateDictConfig', optim: 'FullOptimStateDictConfig' },
  SHARDED_STATE_DICT: { model: 'ShardedStateDictConfig', optim: 'ShardedOptimStateDictConfig' },
} as const;
type MappedType = keyof typeof CONFIGS;

/** Node types that need no parentheses after `not`. */
const PRIMARY = ['identifier', 'attribute', 'call', 'subscript', 'parenthesized_expression', 'true', 'false'];

/**
 * The FSDP1 runtime calls of a file (`FileFacts.fsdp1Calls`) on the modules the migration moves to `fully_shard`:
 * each rewritten in its FSDP2 form where that keeps its meaning, or named with what to do. A `with` block is
 * rewritten as one edit of its lines, holding the edits of the calls in its body.
 */
class RuntimeCalls {
  private readonly names: Set<string>;
  private readonly notes: { line: number; text: string }[] = [];
  private readonly edits: TextEdit[] = [];
  /** Edits of single calls, by index, until a block takes them in or they are kept as they are. */
  private readonly sites = new Map<number, TextEdit[]>();
  /** Calls rewritten (alone, or by their block). */
  private readonly done = new Set<number>();
  /** Why a call is left, by index. */
  private readonly left = new Map<number, string>();
  /** Lines of the `no_sync` blocks rewritten. */
  private readonly syncLines: number[] = [];

  constructor(
    private readonly calls: Fsdp1CallFact[],
    private readonly index: TextIndex,
    private readonly moved: Moved[],
    private readonly taken: TextEdit[],
    /** In a file without wraps: the modules FSDP1's class calls name, by function (`scoped`); else null. */
    private readonly unwrapped: { named: Set<string>; usesFsdp1: boolean } | null,
  ) {
    this.names = new Set(moved.flatMap((m) => m.names.map(compact)));
  }

  run(): {
    edits: TextEdit[];
    notes: string[];
    imports: Set<string>;
    rewrote: (Fsdp1CallFact & { module: string })[];
  } {
    this.calls.forEach((c, i) => {
      if (c.method === 'clip_grad_norm_') this.site(i, this.clip(c));
      else if (c.method === 'full_optim_state_dict') this.site(i, this.fullOptim(c));
    });
    this.calls.forEach((c, i) => {
      if (c.method !== 'no_sync' && c.method !== 'state_dict_type') return;
      const why = this.block(c, i);
      if (why) this.left.set(i, why);
    });
    for (const [i, edits] of this.sites) {
      this.edits.push(...edits);
      this.done.add(i);
    }
    if (this.syncLines.length) {
      const [first, ...more] = this.syncLines;
      this.notes.push({
        line: first!,
        text:
          `no_sync() ${more.length ? `(and at line${more.length > 1 ? 's' : ''} ${more.join(', ')}) ` : ''}rewritten as ` +
          'set_requires_gradient_sync(False) before the body and set_requires_gradient_sync(True) after it ' +
          "(FSDPModule.set_requires_gradient_sync, FSDP2's form of no_sync): an exception raised in the body now " +
          "leaves gradient sync off, where no_sync's exit restored it",
      });
    }
    this.calls.forEach((c, i) => {
      if (this.done.has(i)) return;
      const why = this.left.get(i) ?? this.leftAlone(c);
      if (why) this.notes.push({ line: c.line, text: why });
    });
    this.notes.sort((a, b) => a.line - b.line);
    return {
      edits: this.edits,
      notes: this.notes.map((n) => `line ${n.line}: ${n.text}`),
      // The checkpoint functions the kept edits call (a block left whole takes its calls' names with it).
      imports: new Set(CHECKPOINT_NAMES.filter((n) => this.edits.some((e) => e.newText.includes(`${n}(`)))),
      rewrote: [...this.done]
        .sort((a, b) => a - b)
        .map((i) => this.calls[i]!)
        .filter((c): c is Fsdp1CallFact & { module: string } => c.module !== null),
    };
  }

  /** The call acts on a module the migration moves (a file without wraps: one a class call names in its function). */
  private moves(c: Fsdp1CallFact): c is Fsdp1CallFact & { module: string } {
    if (c.module === null) return false;
    return this.unwrapped
      ? this.unwrapped.named.has(scoped(c.function, c.module))
      : this.names.has(compact(c.module));
  }

  /** The names that hold a module the migration moves, where `c` runs. */
  private namesAt(c: Fsdp1CallFact): string[] {
    if (!this.unwrapped) return [...this.names];
    const prefix = scoped(c.function, '');
    return [...this.unwrapped.named].filter((k) => k.startsWith(prefix)).map((k) => k.slice(prefix.length));
  }

  private site(i: number, r: Rewritten): void {
    if ('left' in r) {
      this.left.set(i, r.left);
      return;
    }
    if (r.edits.some((e) => this.taken.some((t) => overlaps(this.index, e.range, t.range)))) return;
    this.sites.set(i, r.edits);
    for (const n of r.notes ?? []) this.notes.push({ line: this.calls[i]!.line, text: n });
  }

  /**
   * `model.clip_grad_norm_(max_norm, norm_type)` (FullyShardedDataParallel.clip_grad_norm_ in
   * torch/distributed/fsdp/fully_sharded_data_parallel.py, which all-reduces the ranks' local norms) as
   * `torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm, norm_type)`: FSDP2's gradients are DTensors, so
   * the norm torch.nn.utils computes over them is the global one. Its other arguments keep their places (both
   * signatures go on `max_norm, norm_type=2.0`).
   */
  private clip(c: Fsdp1CallFact): Rewritten {
    if (!this.moves(c)) return { left: this.foreign(c) };
    const M = c.module;
    if (!c.args.length) return { left: 'clip_grad_norm_() without max_norm is left as it is' };
    const callee = { range: c.calleeRange, newText: 'torch.nn.utils.clip_grad_norm_' };
    let first: TextEdit;
    if (c.onClass) {
      if (!c.moduleRange) return { left: `${c.callee}: its module is not read` };
      first = { range: c.moduleRange, newText: `${M}.parameters()` };
    } else {
      const at = this.index.offsetAt(c.argumentsStart);
      const breakNext = /[\r\n]/.test(this.index.text[at] ?? '');
      first = {
        range: { start: c.argumentsStart, end: c.argumentsStart },
        newText: `${M}.parameters(),${breakNext ? '' : ' '}`,
      };
    }
    const notes =
      c.use === 'statement'
        ? []
        : [
            'torch.nn.utils.clip_grad_norm_ returns the total norm as a DTensor under FSDP2 (the gradients are ' +
              "DTensors; its placement is a partial norm), where FSDP1's clip_grad_norm_ returned a plain tensor: " +
              'call .full_tensor() on it for the global norm before .item() or logging, as torchtitan does',
          ];
    return { edits: [callee, first], notes };
  }

  /**
   * `FSDP.full_optim_state_dict(model, optim)` (torch/distributed/fsdp/fully_sharded_data_parallel.py): the whole
   * optimizer state on rank 0, on CPU (`rank0_only=True` by default, and `_optim_state_dict_impl`'s
   * `cpu_offload=True`, which it does not pass), the other ranks getting `{}`; keyed by parameter name. `get_optimizer_state_dict(model, optim, options=StateDictOptions(full_state_dict=True, cpu_offload=True))`
   * gives the same: with both options `_maybe_full_or_cpu_state_dict` gathers on every rank and keeps the result on
   * rank 0 only (`ranks_only=(0,)`), offloaded to CPU.
   */
  private fullOptim(c: Fsdp1CallFact): Rewritten {
    if (!this.moves(c) || !c.onClass) return { left: this.foreign(c) };
    const optim = arg(c, 0, 'optim');
    const rank0 = arg(c, 2, 'rank0_only');
    const extra = c.args.find(
      (a) => a !== optim && a !== rank0 && !(a === arg(c, 1, 'optim_input') && a.value === null),
    );
    if (!optim || optim.name?.startsWith('*')) return { left: `${c.callee}: its optimizer is not read` };
    if (extra)
      return {
        left: `${c.callee} with ${extra.name ?? extra.text} is left: get_optimizer_state_dict has no such argument`,
      };
    if (rank0 && rank0.value !== true)
      return {
        left:
          `${c.callee}(..., rank0_only=${rank0.text}) is left: FSDP1 gives every rank the full optimizer state on CPU, ` +
          'which FSDP2 has no form for (get_optimizer_state_dict with full_state_dict=True and cpu_offload=True keeps ' +
          'it on rank 0 only, with full_state_dict=True alone on GPU)',
      };
    return {
      edits: [
        {
          range: c.range,
          newText: `get_optimizer_state_dict(${c.module}, ${optim.text}, options=StateDictOptions(full_state_dict=True, cpu_offload=True))`,
        },
      ],
    };
  }

  /** Rewrites the `with` block call `i` opens, or says why not. */
  private block(c: Fsdp1CallFact, i: number): string | undefined {
    const what = `${c.callee}()`;
    if (!this.moves(c)) return undefined;
    const b = c.block;
    if (!b)
      return c.method === 'no_sync'
        ? `${what} outside a with statement is left: ${NO_SYNC_BY_HAND(c.module)}`
        : undefined;
    const outer = c.heldBy !== undefined ? this.calls[c.heldBy] : undefined;
    if (outer) return `${what} is left: it runs inside the ${outer.callee}() block at line ${outer.line}`;
    const inner = this.calls.find((o) => o.heldBy === i && o.block);
    if (inner) return `${what} is left: its body opens the ${inner.callee}() block at line ${inner.line}`;
    const shape = blockShape(b);
    if (shape) return `${what} is left: ${shape}`;
    return c.method === 'no_sync' ? this.noSync(c, i, b) : this.stateDictType(c, i, b);
  }

  /**
   * `with model.no_sync():` (FSDP1: gradients accumulate unreduced in the block, reduced by the first backward
   * after it) as `model.set_requires_gradient_sync(False)` before the body and `(True)` after it: FSDPModule's
   * set_requires_gradient_sync (torch/distributed/fsdp/_fully_shard/_fully_shard.py) is "the equivalence of
   * `no_sync` in FSDP1", over every FSDP module under the root (`recurse=True`). FSDP1's exit restores the flags as
   * they were, which is True unless an outer no_sync is open: a block inside another one is left.
   */
  private noSync(c: Fsdp1CallFact, i: number, b: WithBlockFact): string | undefined {
    const M = c.module!;
    const what = `${c.callee}()`;
    if (c.onClass || c.args.length) return `${what} is left: not the method call this rewrite knows`;
    if (b.exits)
      return (
        `${what} is left: its body leaves the block early (return, break or continue), past where ` +
        `set_requires_gradient_sync(True) would go: ${NO_SYNC_BY_HAND(M)}, with the True call in a finally`
      );
    // `with model.no_sync() if accumulating else contextlib.nullcontext():`: sync off only where the test says.
    let off = 'False';
    const k = b.conditional;
    if (k) {
      if (!k.nullcontext)
        return `${what} is left: the with item chooses between it and another context manager than contextlib.nullcontext()`;
      if (k.callWhen)
        off = k.notOperand
          ? asBool(k.notOperand.text, k.notOperand.isBool)
          : `not ${PRIMARY.includes(k.testType) ? k.test : `(${k.test})`}`;
      else off = asBool(k.test, k.testIsBool);
    }
    const edit = this.region(
      b,
      `${M}.set_requires_gradient_sync(${off})`,
      `${M}.set_requires_gradient_sync(True)`,
      [],
    );
    if (typeof edit === 'string') return `${what} is left: ${edit}`;
    this.edits.push(edit);
    this.done.add(i);
    this.syncLines.push(c.line);
    return undefined;
  }

  /**
   * `with FSDP.state_dict_type(model, type, config, optim_config):` and the state-dict calls of its body, as the
   * functions of torch.distributed.checkpoint.state_dict with the StateDictOptions that give the same state dicts;
   * the block's other statements stay, dedented. Left whole where one call has no exact form, or where the body
   * may take a state dict in a way not seen (a call that is handed the module).
   */
  private stateDictType(c: Fsdp1CallFact, i: number, b: WithBlockFact): string | undefined {
    const M = c.module!;
    const what = `${c.callee}()`;
    if (!c.onClass)
      return `${what} is left: not the FSDP.state_dict_type(module, ...) call this rewrite knows`;
    const typeArg = arg(c, 0, 'state_dict_type');
    const known = ['state_dict_type', 'state_dict_config', 'optim_state_dict_config'];
    const odd = c.args.find((a, k) => (a.name === null ? k > 2 : !known.includes(a.name)));
    if (odd) return `${what} is left: its argument ${odd.text} is not read`;
    const member = typeArg ? refName(typeArg.value) : null;
    if (member === 'LOCAL_STATE_DICT')
      return (
        `${what} is left: LOCAL_STATE_DICT (each rank's flat parameter shards) has no FSDP2 form; ` +
        `get_model_state_dict(${M}) gives the sharded DTensors, for torch.distributed.checkpoint`
      );
    if (member !== 'FULL_STATE_DICT' && member !== 'SHARDED_STATE_DICT')
      return `${what} is left: its state-dict type (${typeArg?.text ?? 'none'}) is not read`;
    if (b.defines)
      return `${what} is left: its body defines a function, class or lambda, which may take a state dict under the block unseen`;
    const children = this.calls.map((o, j) => ({ o, j })).filter(({ o }) => o.heldBy === i);
    const inner: TextEdit[] = [];
    const claimed: Range[] = [];
    const mapped: number[] = [];
    let sharded = false;
    for (const { o, j } of children) {
      // Calls that do not read the state-dict type (clip_grad_norm_, full_optim_state_dict) go on their own.
      if (this.sites.has(j) || this.left.has(j)) {
        claimed.push(o.range);
        continue;
      }
      const r = this.stateDictCall(o, M, member, c);
      if ('left' in r) return `${what} is left: ${r.left}`;
      inner.push(...r.edits);
      claimed.push(o.range);
      mapped.push(j);
      if (member === 'SHARDED_STATE_DICT' && o.method !== 'load_state_dict') sharded = true;
    }
    const takes = mapped.length;
    if (!takes) return `${what} is left: its body takes no state dict of ${M} this rewrite maps`;
    if (b.readsCut)
      return `${what} is left: its body uses ${M} or the names around it more often than the rewrite reads`;
    const escape = b.reads.find((r) => !claimed.some((x) => inside(r.range, x)) && this.reaches(r, M, c));
    if (escape)
      return (
        `${what} is left: its body uses ${escape.text}${escape.called ? '()' : ''} at line ${escape.range.start.line + 1} ` +
        'beyond the state-dict calls, where a state dict taken under the block would change'
      );
    const edit = this.region(b, null, null, inner);
    if (typeof edit === 'string') return `${what} is left: ${edit}`;
    this.edits.push(edit);
    this.done.add(i);
    for (const j of mapped) this.done.add(j);
    if (sharded)
      this.notes.push({
        line: c.line,
        text:
          "the sharded state dicts' values are DTensors, where FSDP1's SHARDED_STATE_DICT gave ShardedTensors " +
          '(torch.distributed.checkpoint saves either)',
      });
    return undefined;
  }

  /**
   * One state-dict call of a `state_dict_type` block's body in its FSDP2 form. The options follow FSDP1's config
   * classes (torch/distributed/fsdp/api.py): FULL_STATE_DICT with `FullStateDictConfig()` is the full state dict on
   * every rank (`full_state_dict=True`); with `offload_to_cpu=True, rank0_only=True`, on rank 0's CPU and `{}`
   * elsewhere, which is what `full_state_dict=True, cpu_offload=True` gives: `_maybe_full_or_cpu_state_dict`
   * (torch/distributed/checkpoint/state_dict.py) gathers with `ranks_only=(0,)`, every rank taking part in the
   * gathers, and `_iterate_state_dict` (torch/distributed/_state_dict_utils.py) returns `{}` on the other ranks.
   * SHARDED_STATE_DICT is get_model_state_dict's default, `cpu_offload=True` for `offload_to_cpu=True`
   * (`_offload_state_dict_to_cpu`, on every rank). Optimizer configs offload to CPU unless told not to
   * (`OptimStateDictConfig.offload_to_cpu = True`). A full load reads a full state dict on every rank whatever the
   * config (`_full_pre_load_state_dict_hook` in torch/distributed/fsdp/_state_dict_utils.py unshards with its
   * defaults), as `set_model_state_dict(..., options=StateDictOptions(full_state_dict=True))` does
   * (`_distribute_state_dict`). Keys are the parameters' names either way (`_get_fqns`).
   */
  private stateDictCall(
    o: Fsdp1CallFact,
    M: string,
    member: MappedType,
    c: Fsdp1CallFact,
  ): { edits: TextEdit[] } | { left: string } {
    const same = o.module !== null && compact(o.module) === compact(M);
    const full = member === 'FULL_STATE_DICT';
    if (o.method === 'state_dict' && !o.onClass && same) {
      if (o.args.length)
        return { left: `${o.callee}(${o.args.map((a) => a.text).join(', ')}) takes arguments` };
      const options = this.options(c, member, 'model');
      if (typeof options === 'string') return { left: options };
      return {
        edits: [{ range: o.range, newText: `get_model_state_dict(${M}${optionsText(options)})` }],
      };
    }
    if (o.method === 'load_state_dict' && !o.onClass && same) {
      const sd = arg(o, 0, 'state_dict');
      const strict = arg(o, 1, 'strict');
      const extra = o.args.find((a) => a !== sd && a !== strict);
      if (!sd || sd.name?.startsWith('*') || extra)
        return {
          left: `${o.callee}(${o.args.map((a) => a.text).join(', ')}) is not the call this rewrite maps`,
        };
      const options = [
        ...(full ? ['full_state_dict=True'] : []),
        ...(strict ? [`strict=${strict.text}`] : []),
      ];
      return {
        edits: [{ range: o.range, newText: `set_model_state_dict(${M}, ${sd.text}${optionsText(options)})` }],
      };
    }
    if (o.method === 'optim_state_dict' && o.onClass && same) {
      const optim = arg(o, 0, 'optim');
      const extra = o.args.find((a) => a !== optim);
      if (!optim || optim.name?.startsWith('*') || extra)
        return {
          left: `${o.callee}(${[M, ...o.args.map((a) => a.text)].join(', ')}): get_optimizer_state_dict takes no optimizer state dict or group`,
        };
      const options = this.options(c, member, 'optim');
      if (typeof options === 'string') return { left: options };
      return {
        edits: [
          {
            range: o.range,
            newText: `get_optimizer_state_dict(${M}, ${optim.text}${optionsText(options)})`,
          },
        ],
      };
    }
    return { left: `its body also calls ${o.callee}() at line ${o.line}, which this rewrite does not map` };
  }

  /** The StateDictOptions that give the state dict the block's config gives, or why there are none. */
  private options(c: Fsdp1CallFact, member: MappedType, of: 'model' | 'optim'): string[] | string {
    const given = of === 'model' ? arg(c, 1, 'state_dict_config') : arg(c, 2, 'optim_state_dict_config');
    const cls = CONFIGS[member][of];
    // Config defaults: StateDictConfig.offload_to_cpu False, OptimStateDictConfig.offload_to_cpu True, rank0_only False.
    let offload = of === 'optim';
    let rank0 = false;
    if (given && given.value !== null) {
      const v = given.value;
      if (typeof v !== 'object' || Array.isArray(v) || !('call' in v))
        return `its ${of === 'model' ? 'state_dict_config' : 'optim_state_dict_config'} (${given.text}) is not read`;
      if (lastName(v.call) !== cls) return `${given.text} does not go with ${member} (FSDP1 expects ${cls})`;
      const field = (name: string, k: number, d: boolean): boolean | string => {
        const x = name in v.kwargs ? v.kwargs[name] : v.args[k];
        return x === undefined ? d : typeof x === 'boolean' ? x : `${cls}'s ${name} is not read`;
      };
      const o = field('offload_to_cpu', 0, offload);
      if (typeof o === 'string') return o;
      offload = o;
      if (member === 'FULL_STATE_DICT') {
        const r = field('rank0_only', 1, false);
        if (typeof r === 'string') return r;
        rank0 = r;
      }
    }
    const written = `${cls}(offload_to_cpu=${py(offload)}${member === 'FULL_STATE_DICT' ? `, rank0_only=${py(rank0)}` : ''})`;
    if (member === 'SHARDED_STATE_DICT') return offload ? ['cpu_offload=True'] : [];
    if (offload === rank0)
      return offload ? ['full_state_dict=True', 'cpu_offload=True'] : ['full_state_dict=True'];
    const where = offload ? 'on CPU on every rank' : "on rank 0's GPU (the other ranks get {})";
    return (
      `${written} keeps the full ${of === 'model' ? 'state dict' : 'optimizer state'} ${where}, which FSDP2 has no form for: ` +
      'StateDictOptions(full_state_dict=True, cpu_offload=True) keeps it on rank 0 only, on CPU (the other ranks get {}), ' +
      'and full_state_dict=True alone on GPU on every rank'
    );
  }

  /** A read of the body that may hand the module on: the module (or an object holding it) used or called. */
  private reaches(r: WithBlockFact['reads'][number], M: string, c: Fsdp1CallFact): boolean {
    const subject = r.called
      ? r.text.includes('.')
        ? r.text.slice(0, r.text.lastIndexOf('.'))
        : r.text
      : r.text;
    return [M, ...this.namesAt(c)].some((n) => related(compact(subject), compact(n)));
  }

  private regionRange(b: WithBlockFact): Range {
    return this.index.wholeLines({
      start: { line: b.start, character: 0 },
      end: { line: b.body.end.line, character: 0 },
    });
  }

  /**
   * The block's lines rewritten: the header replaced by `head` (or by nothing, its comment kept), the body with
   * `inner` applied and dedented to the `with` statement's indentation, and `tail` after it.
   */
  private region(
    b: WithBlockFact,
    head: string | null,
    tail: string | null,
    extra: TextEdit[],
  ): TextEdit | string {
    const { index } = this;
    const eol = index.eol();
    const range = this.regionRange(b);
    // The calls of the body rewritten on their own go into the block's edit.
    const absorbed = [...this.sites].filter(([, edits]) =>
      edits.some((e) => overlaps(index, e.range, range) || inside(e.range, range)),
    );
    if (absorbed.some(([, edits]) => edits.some((e) => !inside(e.range, range))))
      return 'a call rewritten on its own crosses its lines';
    const inner = [...extra, ...absorbed.flatMap(([, edits]) => edits)];
    if (this.taken.some((t) => overlaps(index, t.range, range)))
      return 'it overlaps a wrap the migration rewrites';
    const start = index.offsetAt(range.start);
    const headerEnd = index.offsetAt(b.headerEnd) - start;
    if (inner.some((e) => index.offsetAt(e.range.start) - start < headerEnd))
      return 'an edit falls in its header';
    const rebase = (p: { line: number; character: number }) => ({
      line: p.line - b.start,
      character: p.character,
    });
    const after = applyEdits(
      index.text.slice(start, index.offsetAt(range.end)),
      inner.map((e) => ({
        range: { start: rebase(e.range.start), end: rebase(e.range.end) },
        newText: e.newText,
      })),
    );
    const ending = after.endsWith('\n') ? eol : '';
    const lineEnd = after.indexOf('\n', headerEnd);
    const rest = (lineEnd < 0 ? after.slice(headerEnd) : after.slice(headerEnd, lineEnd))
      .replace(/\r$/, '')
      .trim();
    const ind = b.indent;
    const lines: string[] = [];
    if (b.body.inline) {
      if (head) lines.push(ind + head);
      lines.push(ind + rest);
    } else {
      if (rest && !rest.startsWith('#')) return 'its header is not read';
      if (head) lines.push(ind + head + (rest ? `  ${rest}` : ''));
      else if (rest) lines.push(ind + rest);
      const body = lineEnd < 0 ? '' : after.slice(lineEnd + 1);
      for (const raw of (ending ? body.slice(0, body.length - 1) : body).split('\n')) {
        const l = raw.replace(/\r$/, '');
        lines.push(l.startsWith(b.body.indent) ? ind + l.slice(b.body.indent.length) : l);
      }
    }
    if (tail) lines.push(ind + tail);
    for (const [j] of absorbed) {
      this.sites.delete(j);
      this.done.add(j);
    }
    return { range, newText: lines.join(eol) + ending };
  }

  /** The note of a call no rewrite took, or null where none is due. */
  private leftAlone(c: Fsdp1CallFact): string {
    const M = c.module ?? 'the module';
    const mine = this.moves(c);
    // The state-dict calls of a state_dict_type block left whole: its note says why.
    if (['state_dict', 'load_state_dict', 'optim_state_dict'].includes(c.method))
      for (let h = c.heldBy, n = 0; h !== undefined && n < this.calls.length; h = this.calls[h]!.heldBy, n++)
        if (this.calls[h]!.method === 'state_dict_type') return '';
    if (!mine) return this.foreign(c);
    switch (c.method) {
      case 'no_sync':
        return `${c.callee}() is left: ${NO_SYNC_BY_HAND(M)}`;
      case 'state_dict': {
        if (this.before(c)) return '';
        return (
          `${c.callee}() outside a state_dict_type block gives the full state dict on every rank under FSDP1 ` +
          '(FULL_STATE_DICT with FullStateDictConfig() is its default type, unless set_state_dict_type changed it), and the ' +
          `DTensor shards under FSDP2: get_model_state_dict(${M}, options=StateDictOptions(full_state_dict=True)) gives the full one`
        );
      }
      case 'load_state_dict': {
        if (this.before(c)) return '';
        return (
          `${c.callee}(...) outside a state_dict_type block loads a full state dict on every rank under FSDP1 (its ` +
          'default type); an FSDP2 module holds DTensor shards: set_model_state_dict(' +
          `${M}, state_dict, options=StateDictOptions(full_state_dict=True)) loads a full one into them`
        );
      }
      case 'optim_state_dict':
        return (
          `${c.callee}(...) outside a state_dict_type block follows the type set on the model (by default ` +
          'FULL_STATE_DICT with FullOptimStateDictConfig(): the full state on every rank, on CPU), which FSDP2 has no ' +
          `exact form for: get_optimizer_state_dict(${M}, optim, options=StateDictOptions(full_state_dict=True, cpu_offload=True)) ` +
          "gives it on rank 0's CPU ({} elsewhere)"
        );
      case 'summon_full_params':
        return (
          `${c.callee}(...) has no FSDP2 form: FSDPModule.unshard() all-gathers the parameters of one fully_shard ` +
          'unit (not recursive) and reshard() frees them; writeback, rank0_only, offload_to_cpu and with_grads have no ' +
          `counterpart. To read the full weights, use get_model_state_dict(${M}, options=StateDictOptions(full_state_dict=True))`
        );
      case 'set_state_dict_type':
        return (
          `${c.callee}(...) has no FSDP2 form (an FSDP2 module's state_dict() holds DTensor shards): take state ` +
          'dicts with get_model_state_dict / get_optimizer_state_dict and the StateDictOptions of that type'
        );
      case 'shard_full_optim_state_dict':
      case 'scatter_full_optim_state_dict':
        return this.fullOptimLoad(c, M);
      case 'optim_state_dict_to_load':
        return (
          `${c.callee}(...) has no FSDP2 form: set_optimizer_state_dict(${M}, optim, optim_state_dict, ` +
          'options=StateDictOptions(...)) loads an optimizer state dict into the optimizer itself ' +
          '(full_state_dict=True for a full one, broadcast_from_rank0=True to read it from rank 0 only)'
        );
      case 'sharded_optim_state_dict':
      case 'flatten_sharded_optim_state_dict':
      case 'rekey_optim_state_dict':
        return `${c.callee}(...) has no FSDP2 form: get_optimizer_state_dict(${M}, optim) gives the optimizer state keyed by parameter name, as DTensor shards`;
      case 'state_dict_type':
        return `${c.callee}(...) outside a with statement is left: take state dicts with get_model_state_dict / get_optimizer_state_dict and StateDictOptions`;
      default:
        return `${c.callee}(...) stays FSDP1: an FSDP2 module has no such method`;
    }
  }

  /**
   * `FSDP.scatter_full_optim_state_dict(full_osd, model)` (the full optimizer state read on rank 0, each rank's part
   * sent to it) and `FSDP.shard_full_optim_state_dict(full_osd, model)` (the full state on every rank, each taking its
   * part), both keyed by parameter name as full_optim_state_dict gives it, return a sharded optimizer state dict for
   * `optim.load_state_dict`. FSDP2 has no such dict to hand back: set_optimizer_state_dict
   * (torch/distributed/checkpoint/state_dict.py) loads the full state into the optimizer itself, with
   * `full_state_dict=True` (`_distribute_state_dict`, every rank holding it) and `broadcast_from_rank0=True`
   * (`_broadcast_state_dict`, from rank 0's copy; it needs full_state_dict=True).
   */
  private fullOptimLoad(c: Fsdp1CallFact, M: string): string {
    const full = arg(c, 0, 'full_optim_state_dict');
    const optim = arg(c, 2, 'optim');
    const scatter = c.method === 'scatter_full_optim_state_dict';
    const options = scatter ? 'full_state_dict=True, broadcast_from_rank0=True' : 'full_state_dict=True';
    return (
      `${c.callee}(...) has no FSDP2 form (FSDP2 has no sharded optimizer state dict to hand back): ` +
      `set_optimizer_state_dict(${M}, ${optim?.name === null || optim?.name === 'optim' ? optim.text : 'optim'}, ` +
      `${full && full.name !== '*' && full.name !== '**' ? full.text : 'full_osd'}, options=StateDictOptions(${options})) ` +
      `loads the full optimizer state${scatter ? ' that rank 0 holds' : ''} into the optimizer itself, in place of this ` +
      "call and the optimizer's load_state_dict of its result"
    );
  }

  /**
   * The note of a call on a module the migration does not move: FSDP1's class calls only (a module's may be DDP's);
   * in a file without wraps that uses FSDP1, `no_sync` and `clip_grad_norm_` with the form they take should the
   * module be FSDP1's.
   */
  private foreign(c: Fsdp1CallFact): string {
    const M = c.module ?? 'its module';
    if (c.onClass)
      return `${c.callee}(${M}, ...) stays FSDP1: ${M} is not a module this migration moves to fully_shard`;
    if (!this.unwrapped?.usesFsdp1 || c.module === null) return '';
    const unsure =
      `the file holds no FSDP1 wrap, and ${c.function ? `${c.function}()` : 'the module-level code'} makes no ` +
      `FSDP1 class call on ${M} (FSDP.state_dict_type(${M}, ...) and the like) to show it is an FSDP1 module; if it is, ` +
      'and its wrap moves to fully_shard';
    if (c.method === 'no_sync' && c.use === 'with')
      return (
        `${c.callee}() is left: ${unsure}, the block becomes ${M}.set_requires_gradient_sync(False) before its body ` +
        `and ${M}.set_requires_gradient_sync(True) after it (FSDPModule.set_requires_gradient_sync)`
      );
    if (c.method === 'clip_grad_norm_' && c.args.length) {
      const args = c.args.map((a) =>
        a.name && a.name !== '*' && a.name !== '**' ? `${a.name}=${a.text}` : a.text,
      );
      return (
        `${c.callee}(...) is left: ${unsure}, it becomes torch.nn.utils.clip_grad_norm_(${M}.parameters(), ` +
        `${args.join(', ')}) (FSDP2's gradients are DTensors, so its norm is the global one)`
      );
    }
    return '';
  }

  /** Called on the module before the wrap, in the same function: a plain module's call, not FSDP1's. */
  private before(c: Fsdp1CallFact): boolean {
    return this.moved.some(
      (m) =>
        m.function === c.function &&
        c.line < m.line &&
        m.names.some((n) => compact(n) === compact(c.module ?? '')),
    );
  }
}

/** What keeps a block from being rewritten line by line, or undefined. */
function blockShape(b: WithBlockFact): string | undefined {
  if (b.items > 1) return 'its with statement has other items';
  if (b.alias) return 'its with statement binds the context to a name';
  if (b.async) return 'its with statement is async';
  if (b.unread) return 'its body is larger than the rewrite reads';
  if (b.multilineString) return 'its body holds a string over several lines, which dedenting would change';
  if (b.body.inline)
    return b.body.end.line === b.headerEnd.line ? undefined : 'its body follows the colon over several lines';
  if (!b.body.indent.startsWith(b.indent) || b.body.indent.length <= b.indent.length)
    return 'its body is not indented under its with statement';
  return undefined;
}

const NO_SYNC_BY_HAND = (M: string) =>
  `on the FSDP2 module call ${M}.set_requires_gradient_sync(False) where the context starts and ` +
  `${M}.set_requires_gradient_sync(True) where it ends (FSDPModule.set_requires_gradient_sync)`;

/** `, options=StateDictOptions(...)` for a call's last argument, or nothing for the defaults. */
function optionsText(options: string[]): string {
  return options.length ? `, options=StateDictOptions(${options.join(', ')})` : '';
}

/** The argument at `position` among those after the module, or the keyword `name`. */
function arg(c: Fsdp1CallFact, position: number, name: string): Fsdp1ArgumentFact | undefined {
  return c.args.find((a) => a.name === name) ?? c.args.filter((a) => a.name === null)[position];
}

/** `FULL_STATE_DICT` for `StateDictType.FULL_STATE_DICT` (however imported), else null. */
function refName(v: PlainValue): string | null {
  if (typeof v !== 'object' || v === null || Array.isArray(v) || !('ref' in v)) return null;
  const parts = v.ref.split('.');
  return parts[parts.length - 2] === 'StateDictType' ? parts[parts.length - 1]! : null;
}

function lastName(q: string): string {
  return q.slice(q.lastIndexOf('.') + 1);
}

function py(b: boolean): string {
  return b ? 'True' : 'False';
}

/** A test's text as a `bool`: as written when it is one, else through `bool()`. */
function asBool(text: string, isBool: boolean): string {
  return isBool ? text : `bool(${text})`;
}

function compact(s: string): string {
  return s.replace(/\s+/g, '');
}

/** A module's name within the function that uses it (null: module level). */
function scoped(fn: string | null, module: string): string {
  return `${fn ?? ''}\0${compact(module)}`;
}

/** One dotted name is the other, or holds it, or is held by it (`self` and `self.model`, `model.config`). */
function related(a: string, b: string): boolean {
  return a === b || a.startsWith(`${b}.`) || b.startsWith(`${a}.`);
}

function inside(r: Range, outer: Range): boolean {
  const le = (a: Range['start'], b: Range['start']) =>
    a.line < b.line || (a.line === b.line && a.character <= b.character);
  return le(outer.start, r.start) && le(r.end, outer.end);
}

function overlaps(index: TextIndex, a: Range, b: Range): boolean {
  const [a0, a1, b0, b1] = [a.start, a.end, b.start, b.end].map((p) => index.offsetAt(p)) as [
    number,
    number,
    number,
    number,
  ];
  return a0 < b1 && b0 < a1;
}
