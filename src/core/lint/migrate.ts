/**
 * FSDP1 to FSDP2: each `FullyShardedDataParallel(model, ...)` wrap of a file rewritten as the `fully_shard` calls
 * that build the same units (the classes its transformer auto-wrap policy names, then the root), with its options
 * in their FSDP2 forms; what has no FSDP2 form is said, with what to do. A wrap the rewrite cannot carry over
 * faithfully (a size or custom policy, NO_SHARD, options it does not know) is left as it is, with the reason.
 */
import type { FileFacts, WrapCall } from '../analysis/facts';
import { lastImportLine, TextIndex } from './edits';
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
  const eol = index.eol();
  const out: Migration = { edits: [], notes: [], skipped: [] };
  const used = new Set<string>();
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
  }
  if (!out.edits.length) return out;
  // The new names, imported after the file's last top-level import (the old ones stay for code that still uses them).
  const lines = [`from torch.distributed.fsdp import ${[...used].sort().join(', ')}`];
  if (mesh) lines.push('from torch.distributed.device_mesh import init_device_mesh');
  if (/\btorch\./.test(out.edits.map((e) => e.newText).join('')) && !/^import torch\b/m.test(text))
    lines.push('import torch');
  const at = { line: lastImportLine(index) + 1, character: 0 };
  out.edits.push({ range: { start: at, end: at }, newText: lines.map((l) => l + eol).join('') });
  // FSDP1 calls the rewrite leaves to the user.
  const rest: [RegExp, string][] = [
    [
      /\.no_sync\(\)/,
      'no_sync(): use model.set_requires_gradient_sync(False) before the accumulating backwards and True before the last',
    ],
    [
      /(FSDP|FullyShardedDataParallel)\.clip_grad_norm_\(|\.clip_grad_norm_\(/,
      'clip_grad_norm_: use torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm), which DTensor gradients make global',
    ],
    [
      /(FSDP|FullyShardedDataParallel)\.state_dict_type\(|full_optim_state_dict|sharded_optim_state_dict|optim_state_dict\(/,
      'state dicts: use torch.distributed.checkpoint.state_dict get_model_state_dict / get_optimizer_state_dict',
    ],
  ];
  const lineOf = (re: RegExp) => {
    for (let l = 0; l < index.lineCount(); l++) if (re.test(index.lineText(l))) return l + 1;
    return 0;
  };
  for (const [re, what] of rest) {
    const l = lineOf(re);
    if (l) out.notes.push(`line ${l}: ${what}`);
  }
  return out;
}

function rewrite(
  call: WrapCall,
  index: TextIndex,
  notes: string[],
): { edit: TextEdit; imports: string[]; mesh: boolean } | { skip: string } {
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
  return { edit: { range, newText: lines.join(index.eol()) + ending }, imports, mesh };
}
