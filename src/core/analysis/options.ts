/**
 * The values of wrap-call options as FSDP reads them: mixed-precision policies, wrap policies, CPU offload,
 * sharding strategies, meshes.
 */
import { classifyApi } from './apis';
import { SHARDING_STRATEGIES } from '../vocabulary/fsdp';
import { dtypeOf, toJson } from '../python/plain';
import { type Value } from '../python/values';

/** Mixed precision as both FSDP generations describe it (FSDP1 `MixedPrecision` adds `buffer_dtype`). */
export interface MixedPrecisionValue {
  kind: 'MixedPrecisionPolicy' | 'MixedPrecision';
  param_dtype: string | null;
  reduce_dtype: string | null;
  output_dtype?: string | null;
  buffer_dtype?: string | null;
  cast_forward_inputs?: boolean | null;
  keep_low_precision_grads?: boolean | null;
  /** Source text of the dtype arguments that could not be resolved. */
  unresolved?: Record<string, string>;
}

export interface OffloadValue {
  offloadParams: boolean;
  pinMemory?: boolean | null;
  /** FSDP1's `CPUOffload(...)` given to FSDP2's `offload_policy`, which offloads for a `CPUOffloadPolicy` only. */
  fsdp1Object?: boolean;
  /** What that object asks for (`offload_params`): true, false, or null when it is not known. */
  asked?: boolean | null;
}

/** The meaning of one wrap option's value, as the command line and the estimator read it. */
export function interpretOption(name: string, v: Value): unknown {
  switch (name) {
    case 'mp_policy':
    case 'mixed_precision':
      return mixedPrecision(v) ?? toJson(v);
    case 'sharding_strategy':
      // None means the default, FULL_SHARD.
      return v.k === 'none' ? 'FULL_SHARD' : enumMember(v, 'ShardingStrategy', SHARDING_STRATEGIES);
    case 'backward_prefetch':
      return v.k === 'none' ? null : enumMember(v, 'BackwardPrefetch', ['BACKWARD_PRE', 'BACKWARD_POST']);
    case 'offload_policy':
    case 'cpu_offload':
      return offload(v, name) ?? toJson(v);
    case 'reshard_after_forward':
      if (v.k === 'bool' || v.k === 'none') return toJson(v);
      if (v.k === 'num' && v.int) return v.v;
      return null;
    default:
      return toJson(v);
  }
}

export function mixedPrecision(v: Value): MixedPrecisionValue | null {
  if (v.k !== 'call') return null;
  const api = classifyApi(v.callee)?.kind ?? lastSegment(v.callee);
  if (api !== 'MixedPrecisionPolicy' && api !== 'MixedPrecision') return null;
  const arg = (name: string, index: number): Value | undefined => v.kwargs[name] ?? v.args[index];
  const unresolved: Record<string, string> = {};
  const dtype = (name: string, index: number): string | null => {
    const a = arg(name, index);
    const d = a ? (dtypeOf(a) ?? null) : null;
    if (a && !d && a.k !== 'none') unresolved[name] = describe(a);
    return d;
  };
  const withUnresolved = <T extends MixedPrecisionValue>(mp: T): T =>
    Object.keys(unresolved).length ? { ...mp, unresolved } : mp;
  const flag = (name: string, index: number, dflt: boolean): boolean | null => {
    const a = arg(name, index);
    if (!a) return dflt;
    return a.k === 'bool' ? a.v : null;
  };
  if (api === 'MixedPrecisionPolicy') {
    return withUnresolved({
      kind: api,
      param_dtype: dtype('param_dtype', 0),
      reduce_dtype: dtype('reduce_dtype', 1),
      output_dtype: dtype('output_dtype', 2),
      cast_forward_inputs: flag('cast_forward_inputs', 3, true),
    });
  }
  return withUnresolved({
    kind: api,
    param_dtype: dtype('param_dtype', 0),
    reduce_dtype: dtype('reduce_dtype', 1),
    buffer_dtype: dtype('buffer_dtype', 2),
    keep_low_precision_grads: flag('keep_low_precision_grads', 3, false),
  });
}

function offload(v: Value, option: string): OffloadValue | null {
  if (v.k === 'none') return { offloadParams: false };
  if (v.k === 'bool') return { offloadParams: v.v };
  if (v.k !== 'call') return null;
  const kind = classifyApi(v.callee)?.kind ?? lastSegment(v.callee);
  if (kind === 'CPUOffloadPolicy') {
    const pin = v.kwargs.pin_memory ?? v.args[0];
    return { offloadParams: true, pinMemory: pin ? (pin.k === 'bool' ? pin.v : null) : true };
  }
  if (kind === 'OffloadPolicy') return { offloadParams: false };
  if (kind === 'CPUOffload') {
    // FSDP2 offloads only `isinstance(offload_policy, CPUOffloadPolicy)` (FSDPParam's `offload_to_cpu`, and
    // FSDPParamGroup._validate_cpu_offload_params): FSDP1's CPUOffload there offloads nothing.
    const p = v.kwargs.offload_params ?? v.args[0];
    if (option === 'offload_policy')
      return { offloadParams: false, fsdp1Object: true, asked: p ? (p.k === 'bool' ? p.v : null) : false };
    return { offloadParams: p ? p.k === 'bool' && p.v : false };
  }
  return null;
}

function enumMember(v: Value, enumName: string, members: readonly string[]): string | null {
  if (v.k === 'ref') {
    const m = lastSegment(v.name);
    const owner = v.name.slice(0, v.name.length - m.length - 1);
    if (members.includes(m) && lastSegment(owner) === enumName) return m;
  }
  if (v.k === 'str' && members.includes(v.v.toUpperCase())) return v.v.toUpperCase();
  return null;
}

export function lastSegment(q: string): string {
  return q.slice(q.lastIndexOf('.') + 1);
}

/** Short source-like text of a value, for messages. */
export function describe(v: Value): string {
  switch (v.k) {
    case 'unknown':
      return v.text;
    case 'ref':
      return v.name;
    case 'call':
    case 'lambda':
      return v.node.text;
    case 'param':
      return v.name;
    default:
      return JSON.stringify(toJson(v));
  }
}

/** What a `mesh=` argument denotes: a mesh from `init_device_mesh`, or some of its named dimensions. */
export interface MeshValue {
  shape: (number | null)[] | null;
  dimNames: string[] | null;
  /** The whole mesh when FSDP is given a slice of it (`world_mesh["dp"]` of a `("dp", "tp")` mesh). */
  full?: { shape: (number | null)[] | null; dimNames: string[] | null };
  /** Line of the `init_device_mesh` call. */
  line: number;
}
