/** Lightning's and Fabric's FSDP from a script: the strategy, precision flags, devices and nodes. */
import { DEFAULTS } from './defaults';
import type { ShardingStrategyName } from '../vocabulary/fsdp';
import type { FileFacts, FrameworkCallFact } from '../analysis/facts';
import type { PlainValue } from '../python/plain';
import type { DType } from '../vocabulary/dtypes';
import type { SetupValues } from '../inputs/table';
import { countSetting, posInt, refDtype } from './configDoc';
import type { FrameworkPlan } from './types';

/**
 * What a Lightning `precision` flag means for FSDP (FSDPPrecision.mixed_precision_config, convert_module): the
 * `*-mixed` flags keep the module and FSDP's param_dtype in float32 (gathers stay fp32; autocast computes in the
 * low precision) and reduce gradients in the low precision; the `*-true` flags convert the module itself, so all
 * three are the low precision.
 */
export function lightningPrecision(p: string): { master: DType; param: DType; reduce: DType } | undefined {
  const t = p.trim().toLowerCase();
  const flag = t === '32' ? '32-true' : t === '16' ? '16-mixed' : t === 'bf16' ? 'bf16-mixed' : t;
  switch (flag) {
    case '32-true':
      return { master: 'float32', param: 'float32', reduce: 'float32' };
    case 'bf16-mixed':
      return { master: 'float32', param: 'float32', reduce: 'bfloat16' };
    case '16-mixed':
      return { master: 'float32', param: 'float32', reduce: 'float16' };
    case 'bf16-true':
      return { master: 'bfloat16', param: 'bfloat16', reduce: 'bfloat16' };
    case '16-true':
      return { master: 'float16', param: 'float16', reduce: 'float16' };
    default:
      return undefined;
  }
}

/**
 * Lightning's `_init_sharding_strategy` looks a string up as `ShardingStrategy[name.upper()]`, so every member of
 * torch's enum is accepted, `_HYBRID_SHARD_ZERO2` included (with its leading underscore).
 */
const STRATEGIES: ShardingStrategyName[] = [
  'FULL_SHARD',
  'SHARD_GRAD_OP',
  'NO_SHARD',
  'HYBRID_SHARD',
  '_HYBRID_SHARD_ZERO2',
];

function isCall(
  v: PlainValue | undefined,
): v is { call: string; args: PlainValue[]; kwargs: Record<string, PlainValue> } {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && 'call' in v;
}

/** Class names in a set/list of classes (`{Block}`, `ModuleWrapPolicy({Block})`), last segment of each. */
function classNames(v: PlainValue | undefined): string[] | null {
  if (isCall(v)) return classNames(v.args[0] ?? v.kwargs.module_classes);
  if (!Array.isArray(v)) return null;
  const out = v
    .map((x) =>
      typeof x === 'object' && x !== null && !Array.isArray(x) && 'ref' in x ? x.ref.split('.').pop()! : null,
    )
    .filter((x): x is string => !!x);
  return out.length ? out : null;
}

function strategyName(v: PlainValue | undefined): ShardingStrategyName | undefined {
  const s =
    typeof v === 'string'
      ? v.toUpperCase()
      : typeof v === 'object' && v !== null && !Array.isArray(v) && 'ref' in v
        ? v.ref.split('.').pop()!
        : undefined;
  return STRATEGIES.find((x) => x === s);
}

/**
 * Lightning's FSDP from a script: `Trainer(strategy=FSDPStrategy(...) | "fsdp", precision=..., devices=...,
 * num_nodes=..., accumulate_grad_batches=...)` or Fabric's equivalent. FSDPStrategy wraps the model once at the
 * root with FSDP1, its `auto_wrap_policy` (a set of block classes) making the inner units; without one the whole
 * model is a single unit. Mixed precision follows the `precision` flag unless `mixed_precision=` is given.
 */
export function lightningPlan(facts: FileFacts, file: string): FrameworkPlan | null {
  const trainer = facts.frameworkCalls.find((c) => c.kind === 'LightningTrainer' || c.kind === 'Fabric');
  const strategyArg = trainer?.kwargs.strategy;
  let strategyCall:
    | FrameworkCallFact
    | {
        kwargs: Record<string, PlainValue>;
        line: number;
        range: FrameworkCallFact['range'];
        kwargLines: Record<string, number>;
      }
    | undefined = facts.frameworkCalls.find((c) => c.kind === 'FSDPStrategy');
  const named = typeof strategyArg === 'string' ? strategyArg : undefined;
  if (isCall(strategyArg) && /FSDPStrategy$/.test(strategyArg.call) && !strategyCall && trainer)
    strategyCall = { kwargs: strategyArg.kwargs, line: trainer.line, range: trainer.range, kwargLines: {} };
  if (!strategyCall && !(named && /^fsdp/.test(named))) return null;
  const at = trainer ?? (strategyCall as FrameworkCallFact);
  const where = (c: { line: number; kwargLines: Record<string, number> } | undefined, key: string) =>
    `${file}:${c?.kwargLines[key] ?? c?.line ?? at.line}`;
  const framework = trainer?.kind === 'Fabric' ? 'Lightning Fabric' : 'Lightning';
  const k = strategyCall?.kwargs ?? {};
  const values: SetupValues = {};
  const details: FrameworkPlan['details'] = {};
  const notes: string[] = [];

  const precisionArg = trainer?.kwargs.precision;
  const precision =
    typeof precisionArg === 'string' || typeof precisionArg === 'number' ? String(precisionArg) : '32-true';
  const p = lightningPrecision(precision);
  if (p) {
    values.masterDtype = p.master;
    values.paramDtype = p.param;
    values.reduceDtype = p.reduce;
    details.masterDtype =
      details.paramDtype =
      details.reduceDtype =
        trainer?.kwargs.precision
          ? `precision="${precision}" at ${where(trainer, 'precision')}`
          : `Lightning's default precision "32-true"`;
  } else notes.push(`precision ${precision} is not one FSDP knows: the dtypes are the defaults`);
  const mp = k.mixed_precision;
  if (isCall(mp)) {
    const param = refDtype(mp.kwargs.param_dtype);
    const reduce = refDtype(mp.kwargs.reduce_dtype);
    if (param) values.paramDtype = param;
    if (reduce) values.reduceDtype = reduce;
    details.paramDtype = details.reduceDtype = where(strategyCall as FrameworkCallFact, 'mixed_precision');
  }
  if (p && p.param !== p.reduce && values.paramDtype === 'float32')
    notes.push(
      `precision "${precision}": FSDP gathers float32 parameters and autocast computes in half precision; ` +
        'activations are counted at 4 B each, which overstates them',
    );
  // devices: a count, a string of one ("4"), a list of indices, "auto" or -1 (every GPU: left to the launcher).
  const devices = trainer?.kwargs.devices;
  const perNode = Array.isArray(devices)
    ? devices.length || undefined
    : devices === 'auto' || devices === -1 || devices === '-1' || devices === undefined
      ? undefined
      : countSetting(devices, 'devices', notes, 'the GPUs per node are not read from it', { max: 1 << 16 });
  const nodes =
    countSetting(trainer?.kwargs.num_nodes, 'num_nodes', notes, 'one node assumed', { max: 1 << 16 }) ?? 1;
  if (perNode) {
    values.gpusPerNode = perNode;
    values.worldSize = perNode * nodes;
    details.worldSize = details.gpusPerNode = where(trainer, 'devices');
  }
  const accumulate = countSetting(
    trainer?.kwargs.accumulate_grad_batches,
    'accumulate_grad_batches',
    notes,
    'no accumulation assumed',
  );
  if (accumulate) {
    values.gradAccum = accumulate;
    details.gradAccum = where(trainer, 'accumulate_grad_batches');
    // The Trainer runs FSDP's no_sync() on the micro-batches before the last.
    values.syncEveryMicroBatch = false;
  }
  const mesh = k.device_mesh;
  if (Array.isArray(mesh) && mesh.length === 2 && mesh.every((x) => posInt(x, 1 << 16) !== undefined)) {
    values.replicas = posInt(mesh[0], 1 << 16)!;
    details.replicas = where(strategyCall as FrameworkCallFact, 'device_mesh');
  }
  const classes = classNames(k.auto_wrap_policy);
  const ac = classNames(k.activation_checkpointing_policy) ?? classNames(k.activation_checkpointing);
  if (ac) {
    values.checkpointing = 'full';
    details.checkpointing = where(strategyCall as FrameworkCallFact, 'activation_checkpointing_policy');
  }
  const strategy = strategyName(k.sharding_strategy) ?? DEFAULTS.Lightning.shardingStrategy.value;
  // `_init_cpu_offload`: a CPUOffload is used as given, anything else is CPUOffload(offload_params=bool(value)).
  const cpuOffload = k.cpu_offload;
  const offload =
    named === 'fsdp_cpu_offload' ||
    (isCall(cpuOffload)
      ? /CPUOffload$/.test(cpuOffload.call) &&
        (cpuOffload.kwargs.offload_params ?? cpuOffload.args[0] ?? false) === true
      : cpuOffload === true || (typeof cpuOffload === 'number' && cpuOffload !== 0));
  if (isCall(cpuOffload) && /CPUOffload$/.test(cpuOffload.call)) {
    const v = cpuOffload.kwargs.offload_params ?? cpuOffload.args[0];
    if (v !== undefined && typeof v !== 'boolean')
      notes.push('CPUOffload(offload_params=...) not read statically: assumed off');
  }
  if (
    /HYBRID/.test(strategy) &&
    (k.auto_wrap_policy === undefined || k.auto_wrap_policy === null) &&
    (k.device_mesh === undefined || k.device_mesh === null) &&
    (k.process_group === undefined || k.process_group === null)
  )
    notes.push(
      `${strategy} needs an auto_wrap_policy, a process_group or a device_mesh: Lightning raises without one`,
    );
  if (!classes && k.auto_wrap_policy !== undefined && k.auto_wrap_policy !== null)
    notes.push('auto_wrap_policy not read statically: assumed to wrap each block');
  return {
    framework,
    file,
    range: (strategyCall ?? at).range,
    api: 'fsdp1',
    strategy,
    wrap:
      k.auto_wrap_policy === undefined || k.auto_wrap_policy === null
        ? { kind: 'root' }
        : { kind: 'policy', classes: classes ?? null },
    reshardAfterForward: null,
    offload,
    values,
    details,
    // FSDPStrategy(state_dict_type="full") by default: checkpoints gather the model on rank 0 (offloaded to CPU).
    host: {
      stateDict: {
        kind: k.state_dict_type === 'sharded' ? 'sharded' : 'full',
        where:
          k.state_dict_type !== undefined
            ? `state_dict_type=${JSON.stringify(k.state_dict_type)} at ${where(strategyCall as FrameworkCallFact, 'state_dict_type')}`
            : `Lightning's default state_dict_type="full"`,
      },
    },
    notes: [
      `${framework} FSDPStrategy${named ? ` ("${named}")` : ''}: FSDP1 at the root${classes ? `, a unit per ${classes.join(', ')}` : k.auto_wrap_policy ? '' : ', no auto-wrap policy: the whole model is one unit'}`,
      ...notes,
    ],
    traps: [],
  };
}
