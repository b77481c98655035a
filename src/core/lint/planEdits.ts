/** Edits of a file's wrap calls that change its plan: CPU offload on every unit, and the sharding strategy. */
import type { WrapCall } from '../analysis/facts';
import type { FsdpApi } from '../vocabulary/fsdp';
import { importAfterImports, TextIndex } from './edits';
import type { TextEdit } from './types';

/** A change to the wrap calls: the edits, and what they write, in a few words for a fix's title. */
export interface PlanEdit {
  edits: TextEdit[];
  written: string;
}

/** Modules that export FSDP2's `fully_shard` with its policies (`CPUOffloadPolicy`, `MixedPrecisionPolicy`). */
const FSDP2_MODULES = ['torch.distributed.fsdp', 'torch.distributed._composable.fsdp'];

/** The wraps that run on the estimated plan. */
function onPath(calls: readonly WrapCall[]): WrapCall[] {
  return calls.filter((c) => !c.offByDefault && !c.neverRuns);
}

/**
 * Wraps an edit can append a keyword to: complete calls of one API, each with an argument list and no `**mapping`
 * whose keys are not read (it might already pass the keyword: a duplicate is a TypeError), none of
 * `enable_wrap`'s `wrap()` (its options are the block's). Null when any wrap of the plan is not such a call.
 */
function editableWraps(calls: readonly WrapCall[], api: FsdpApi): WrapCall[] | null {
  const wraps = onPath(calls);
  const want = api === 'fsdp2' ? 'fully_shard' : 'FSDP';
  if (!wraps.length) return null;
  for (const c of wraps)
    if (c.api !== want || c.incomplete || !c.argumentsEnd || c.unresolvedSplats.length) return null;
  if (api === 'fsdp2' && !wraps.every((c) => c.importPath && FSDP2_MODULES.includes(c.importPath)))
    return null;
  return wraps;
}

/** `, name=value` appended after a call's last argument. */
function appendKeyword(c: WrapCall, name: string, value: string): TextEdit {
  const at = c.argumentsEnd!;
  return { range: { start: at, end: at }, newText: `, ${name}=${value}` };
}

/** `from MODULE import NAME` after the file's last top-level import, unless the file already uses the name. */
function importOf(text: string, module: string, name: string): TextEdit | null | undefined {
  // Imported under another name: the name written would not be bound.
  if (new RegExp(`\\b${name}\\s+as\\s+\\w`).test(text)) return null;
  if (new RegExp(`\\b${name}\\b`).test(text)) return undefined;
  return importAfterImports(new TextIndex(text), `from ${module} import ${name}`);
}

/**
 * CPU offload on every unit, in the API's own form: FSDP2 `fully_shard(..., offload_policy=CPUOffloadPolicy())` on
 * each call (each `fully_shard` takes its own policy: `FSDPParamGroup` reads the one its call was given), FSDP1
 * `FullyShardedDataParallel(..., cpu_offload=CPUOffload(offload_params=True))` on each call (an auto-wrap policy
 * hands the root's keyword arguments to the units it wraps: `_auto_wrap` passes `fsdp_kwargs`). Only where no wrap
 * says anything of offload yet.
 */
export function offloadEdit(calls: readonly WrapCall[], text: string, api: FsdpApi): PlanEdit | null {
  const wraps = editableWraps(calls, api);
  if (!wraps || wraps.some((c) => c.options.offload_policy || c.options.cpu_offload)) return null;
  const [name, value, module] =
    api === 'fsdp2'
      ? ['offload_policy', 'CPUOffloadPolicy()', wraps[0]!.importPath!]
      : ['cpu_offload', 'CPUOffload(offload_params=True)', 'torch.distributed.fsdp'];
  const imp = importOf(text, module, value.replace(/\(.*$/, ''));
  if (imp === null) return null;
  return {
    edits: [...wraps.map((c) => appendKeyword(c, name, value)), ...(imp ? [imp] : [])],
    written: `${name}=${value}`,
  };
}

/** The sharding strategies the panel switches between. */
export type StrategyChoice = 'FULL_SHARD' | 'SHARD_GRAD_OP' | 'HYBRID_SHARD';

/**
 * The sharding strategy written into the wraps:
 *  - FSDP1: `sharding_strategy=ShardingStrategy.X` on each call, replaced where written inline, appended where not
 *    (an auto-wrap policy's units take the root's); HYBRID_SHARD without a process group shards within each node
 *    (`_init_intra_and_inter_node_groups` splits the world by `torch.cuda.device_count()`);
 *  - FSDP2 FULL_SHARD / SHARD_GRAD_OP: `reshard_after_forward=True` / `False` on each call but the root's (the root
 *    keeps what it says: by default it is not resharded after forward, as `FSDPState._lazy_init` sets the root
 *    group's `post_forward_mesh_info` to None when its call left the choice to it);
 *  - FSDP2 HYBRID_SHARD: not written (a 2-D mesh needs the node layout the job launches with).
 * Null when a wrap's value is not inline or not one this can rewrite.
 */
export function strategyEdit(
  calls: readonly WrapCall[],
  text: string,
  api: FsdpApi,
  to: StrategyChoice,
): PlanEdit | null {
  const wraps = editableWraps(calls, api);
  if (!wraps) return null;
  const edits: TextEdit[] = [];
  if (api === 'fsdp2') {
    if (to === 'HYBRID_SHARD') return null;
    const want = to === 'FULL_SHARD' ? 'True' : 'False';
    for (const c of wraps) {
      if (c.isRoot) continue;
      const r = c.options.reshard_after_forward;
      if (!r) edits.push(appendKeyword(c, 'reshard_after_forward', want));
      else if (r.via || !/^(True|False)$/.test(r.text.trim())) return null;
      else if (r.text.trim() !== want) edits.push({ range: r.range, newText: want });
    }
    return edits.length ? { edits, written: `reshard_after_forward=${want}` } : null;
  }
  for (const c of wraps) {
    const s = c.options.sharding_strategy;
    if (!s) {
      edits.push(appendKeyword(c, 'sharding_strategy', `ShardingStrategy.${to}`));
      continue;
    }
    // Only `ShardingStrategy.X` (or `X` imported by name) written at the call.
    const m = /(\w+)\s*$/.exec(s.text);
    if (s.via || !m || !/^(FULL_SHARD|SHARD_GRAD_OP|HYBRID_SHARD|_HYBRID_SHARD_ZERO2|NO_SHARD)$/.test(m[1]!))
      return null;
    if (m[1] === to) continue;
    const end = s.range.end;
    edits.push({
      range: { start: { line: end.line, character: end.character - m[1]!.length }, end },
      newText: to,
    });
  }
  if (!edits.length) return null;
  const appended = edits.some((e) => e.newText.startsWith(', '));
  const imp = appended ? importOf(text, 'torch.distributed.fsdp', 'ShardingStrategy') : undefined;
  if (imp === null) return null;
  return {
    edits: [...edits, ...(imp ? [imp] : [])],
    written: `sharding_strategy=ShardingStrategy.${to}`,
  };
}
