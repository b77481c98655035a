/**
 * Accelerate's FSDP: its config files, `accelerate launch` flags and `FullyShardedDataParallelPlugin(...)`,
 * resolved as Accelerate resolves them.
 */
import { DEFAULTS } from './defaults';
import type { ShardingStrategyName } from '../vocabulary/fsdp';
import type { DType } from '../vocabulary/dtypes';
import { versionAtLeast, type VersionPin } from '../vocabulary/versions';
import type { SetupValues } from '../inputs/table';
import { at, bool, countSetting, isRecord, num, posInt, str, strList, type ConfigDoc } from './configDoc';
import type { FrameworkPlan, FrameworkTrap, WrapSpec } from './types';

/** Accelerate's sharding strategies by name and by number (`FSDP_SHARDING_STRATEGY`, 1-based). */
const STRATEGIES: ShardingStrategyName[] = [
  'FULL_SHARD',
  'SHARD_GRAD_OP',
  'NO_SHARD',
  'HYBRID_SHARD',
  '_HYBRID_SHARD_ZERO2',
];

export function accelerateStrategy(v: unknown): ShardingStrategyName | undefined {
  const n = num(v);
  if (n !== undefined && Number.isInteger(n) && n >= 1 && n <= 5) return STRATEGIES[n - 1];
  const s = str(v)?.trim().toUpperCase();
  if (!s) return undefined;
  if (s === 'HYBRID_SHARD_ZERO2') return '_HYBRID_SHARD_ZERO2';
  return STRATEGIES.find((x) => x === s);
}

/**
 * Accelerate's `mixed_precision` names and the dtype each gathers and reduces in (`FullyShardedDataParallelPlugin.
 * set_mixed_precision`): fp8 computes in bf16, `no` keeps the model's own dtype.
 */
export const ACCELERATE_PRECISION: Readonly<Record<string, DType | null>> = {
  no: null,
  fp16: 'float16',
  bf16: 'bfloat16',
  fp8: 'bfloat16',
  fp32: 'float32',
};

/** An Accelerate config: `distributed_type: FSDP`, or an `fsdp_config` section. */
export function isAccelerate(doc: ConfigDoc): boolean {
  const t = str(doc.data.distributed_type);
  if (doc.format !== 'yaml' && doc.format !== 'json') return false;
  if (t?.toUpperCase() === 'FSDP') return true;
  const fsdp = doc.data.fsdp_config;
  if (!isRecord(fsdp)) return false;
  // `accelerate config` writes its FSDP keys with an `fsdp_` prefix (`fsdp_sharding_strategy`), beside
  // `compute_environment`; another framework's `fsdp_config:` (Composer's `sharding_strategy`, `mixed_precision:
  // PURE`) is not Accelerate's, whose reader would take every key as unset.
  const keys = Object.keys(fsdp);
  return 'compute_environment' in doc.data || keys.length === 0 || keys.some((k) => k.startsWith('fsdp_'));
}

/**
 * The FSDP settings of an Accelerate configuration, keyed as `accelerate config` writes them (`fsdp_version`,
 * `fsdp_auto_wrap_policy`, ...). `get(key)` reads one setting with its location.
 */
interface AccelerateSettings {
  get(key: string): { v: unknown; where: string; line?: number } | undefined;
  /** The `fsdp_*` keys the configuration gives, to note those fsdp-lens does not read. */
  keys?(): string[];
  /** Launched with `accelerate launch`, which exports its flags' defaults for what the config omits. */
  launcher?: boolean;
  /**
   * Passed to `FullyShardedDataParallelPlugin(...)` in code: the plugin takes them as given. Otherwise they reach
   * it through the environment (`accelerate launch`, Transformers' `fsdp_config`), and `__post_init__` reads each
   * only where its version does.
   */
  inCode?: boolean;
  file: string;
  range: FrameworkPlan['range'];
  rangeOf(key: string): FrameworkPlan['range'];
  mixedPrecision?: { v: unknown; where: string };
  numProcesses?: { v: unknown; where: string };
  numMachines?: { v: unknown; where: string };
  /** The dynamo backend (`dynamo_config.dynamo_backend`, `--dynamo_backend`) and mode. */
  dynamo?: { backend: string; mode?: string; where: string };
  parallelism?: { replicate?: number; shard?: number; tp?: number; cp?: number; where: string };
  /** What reading the settings found wrong (a size that is not a whole number), for the plan's notes. */
  readNotes?: string[];
  /** The config file's key for activation checkpointing, when the settings are a config file's. */
  checkpointingKey?: FrameworkPlan['checkpointingKey'];
}

/**
 * Accelerate's FSDP as `FullyShardedDataParallelPlugin.__post_init__` resolves it from what `accelerate launch`
 * exports (accelerate/utils/dataclasses.py, commands/launch.py):
 *  - `fsdp_version` defaults to 1;
 *  - FSDP1 always runs `fsdp_sharding_strategy`, which the launcher fills with FULL_SHARD when the config omits
 *    it: an `fsdp_reshard_after_forward` strategy name alone is not used (a trap the findings report);
 *  - FSDP2 takes `fsdp_reshard_after_forward` as a boolean (default true);
 *  - `fsdp_auto_wrap_policy` defaults to NO_WRAP; TRANSFORMER_BASED_WRAP without classes wraps the model's
 *    `_no_split_modules` (its decoder block); SIZE_BASED_WRAP uses `fsdp_min_num_params`;
 *  - the FSDP2 path (Accelerate 1.14 and later) also makes units of the input embedding and of the final norm with
 *    the head (kept gathered after forward), then the root;
 *  - top-level `mixed_precision` gathers and reduces in that dtype, with fp32 master weights.
 */
export function acceleratePlan(
  s: AccelerateSettings,
  framework: FrameworkPlan['framework'],
  accelerateVersion?: VersionPin,
): FrameworkPlan {
  const values: SetupValues = {};
  const details: FrameworkPlan['details'] = {};
  const notes: string[] = [...(s.readNotes ?? [])];
  const traps: FrameworkTrap[] = [];
  const versionAt = s.get('fsdp_version');
  const version = posInt(versionAt?.v) === 2 ? 2 : DEFAULTS.Accelerate.fsdpVersion.value;
  if (versionAt && posInt(versionAt.v) !== version)
    notes.push(`fsdp_version ${String(versionAt.v)} is neither 1 nor 2: Accelerate's default 1 assumed`);
  const strategyAt = s.get('fsdp_sharding_strategy');
  const reshardAt = s.get('fsdp_reshard_after_forward');
  let strategy: ShardingStrategyName = 'FULL_SHARD';
  let reshard: boolean | null = null;
  if (version === 1) {
    strategy = accelerateStrategy(strategyAt?.v) ?? 'FULL_SHARD';
    const asStrategy = accelerateStrategy(reshardAt?.v);
    if (reshardAt && !strategyAt && asStrategy && asStrategy !== 'FULL_SHARD')
      traps.push({
        rule: 'FSDP016',
        range: s.rangeOf('fsdp_reshard_after_forward'),
        summary: `fsdp_reshard_after_forward sets no strategy under fsdp_version 1: FULL_SHARD runs, not ${asStrategy}`,
        message:
          `fsdp_reshard_after_forward: ${String(reshardAt.v)} does not choose the sharding strategy under fsdp_version 1: ` +
          'Accelerate runs fsdp_sharding_strategy, which accelerate launch sets to FULL_SHARD when the config omits it. ' +
          `Set fsdp_sharding_strategy: ${asStrategy.replace(/^_/, '')}.`,
      });
  } else {
    const b = bool(reshardAt?.v);
    reshard = b ?? true;
    if (reshardAt && b === undefined)
      traps.push({
        rule: 'FSDP016',
        range: s.rangeOf('fsdp_reshard_after_forward'),
        message: `fsdp_reshard_after_forward must be true or false under fsdp_version 2 (Accelerate raises on "${String(reshardAt.v)}")`,
      });
    if (strategyAt)
      notes.push(
        'fsdp_sharding_strategy is deprecated under fsdp_version 2: fsdp_reshard_after_forward decides',
      );
  }
  const policy = (
    str(s.get('fsdp_auto_wrap_policy')?.v) ?? DEFAULTS.Accelerate.autoWrapPolicy.value
  ).toUpperCase();
  const classes = strList(s.get('fsdp_transformer_layer_cls_to_wrap')?.v) ?? null;
  // `accelerate launch` exports FSDP_MIN_NUM_PARAMS=1e8 when the config omits it; a plugin built in Python has 0.
  const minParams =
    num(s.get('fsdp_min_num_params')?.v) ?? (s.launcher ? DEFAULTS.Accelerate.minNumParams.value : 0);
  const carve = version === 2 && (!accelerateVersion || versionAtLeast(accelerateVersion.version, '1.14'));
  let wrap: WrapSpec;
  if (policy === 'TRANSFORMER_BASED_WRAP')
    wrap = { kind: 'policy', classes, ...(carve ? { hfExtras: true } : {}) };
  else if (policy === 'SIZE_BASED_WRAP')
    wrap =
      minParams > 0
        ? { kind: 'policy', classes: null, minParams, ...(carve ? { hfExtras: true } : {}) }
        : { kind: 'root' };
  else {
    wrap = carve ? { kind: 'policy', classes: [], hfExtras: true } : { kind: 'root' };
    notes.push(
      `fsdp_auto_wrap_policy ${policy === 'NO_WRAP' ? 'NO_WRAP' : 'not set (NO_WRAP)'}: no block is a unit of its own`,
    );
  }
  if (policy === 'SIZE_BASED_WRAP' && minParams <= 0)
    notes.push(
      'SIZE_BASED_WRAP without fsdp_min_num_params: Accelerate ignores the policy (the whole model is one unit)',
    );
  if (version === 2)
    notes.push(
      carve
        ? `Accelerate${accelerateVersion ? ` ${accelerateVersion.version}` : ' 1.14 or later'}: the input embedding and the final norm with the head are units of their own`
        : `Accelerate ${accelerateVersion!.version}: the embedding, final norm and head stay in the root unit`,
    );
  const offload = bool(s.get('fsdp_offload_params')?.v) ?? false;
  const ac = bool(s.get('fsdp_activation_checkpointing')?.v);
  if (ac !== undefined) {
    values.checkpointing = ac ? 'full' : 'none';
    details.checkpointing = s.get('fsdp_activation_checkpointing')!.where;
  }
  const ignored = strList(s.get('fsdp_ignored_modules')?.v);
  if (ignored?.length) notes.push(`fsdp_ignored_modules (${ignored.join(', ')}) is not modelled`);
  const mp = s.mixedPrecision;
  if (mp) {
    const m = str(mp.v)?.toLowerCase() ?? 'no';
    if (m in ACCELERATE_PRECISION) {
      const d = ACCELERATE_PRECISION[m]!;
      values.paramDtype = d;
      values.reduceDtype = d;
      details.paramDtype = details.reduceDtype = `mixed_precision: ${m} at ${mp.where}`;
      // Under mixed precision, Accelerate keeps trainable parameters in fp32 (the FSDP2 path upcasts them).
      if (d) {
        values.masterDtype = 'float32';
        details.masterDtype = details.paramDtype;
      }
    }
  }
  // A dynamo backend other than "no": `Accelerator.prepare_model` compiles the prepared model (`torch.compile`, or
  // `compile_regions` for its repeated blocks), whose forward computes the loss when it is given `labels`.
  if (s.dynamo && s.dynamo.backend.toUpperCase() !== 'NO') {
    const m = s.dynamo.mode;
    values.compile = m === 'reduce-overhead' || m === 'max-autotune' ? 'cudagraphs' : 'model+loss';
    details.compile = `${s.dynamo.where} (the prepared model compiled, and its loss with it)`;
  }
  const procs = countSetting(s.numProcesses?.v, 'num_processes', notes, 'the world size is not read from it');
  const machines =
    countSetting(s.numMachines?.v, 'num_machines', notes, 'one machine assumed', { max: 1 << 16 }) ?? 1;
  if (procs) {
    values.worldSize = procs;
    details.worldSize = `num_processes at ${s.numProcesses!.where}`;
    if (procs % machines === 0 && machines >= 1) {
      values.gpusPerNode = procs / machines;
      details.gpusPerNode = `num_processes / num_machines at ${s.numProcesses!.where}`;
    }
  }
  const host = loadSave(s, version, notes, traps);
  // FSDP1's `forward_prefetch` (Accelerate passes `fsdp_forward_prefetch` to it; it raises under FSDP2).
  const forwardPrefetch = s.get('fsdp_forward_prefetch');
  if (version === 1 && forwardPrefetch && bool(forwardPrefetch.v)) {
    values.forwardPrefetch = true;
    details.forwardPrefetch = `fsdp_forward_prefetch at ${forwardPrefetch.where}`;
  }
  const par = s.parallelism;
  if (par?.replicate && par.replicate > 1) {
    values.replicas = par.replicate;
    details.replicas = `parallelism_config at ${par.where}`;
    strategy = 'HYBRID_SHARD';
  }
  if (par?.shard && par.shard > 0 && ((par.replicate ?? 1) > 1 || (par.tp ?? 1) > 1 || (par.cp ?? 1) > 1)) {
    values.worldSize = (par.replicate ?? 1) * par.shard * (par.tp ?? 1) * (par.cp ?? 1);
    details.worldSize = `parallelism_config at ${par.where}`;
  }
  // Tensor parallelism: Accelerate takes a model Transformers loaded with `tp_plan="auto"` and refuses any other
  // (`Accelerator.prepare_model`: "You can use .from_pretrained(..., tp_plan='auto')"): the model's own plan,
  // without sequence parallelism.
  if (par?.tp && par.tp > 1) {
    values.tensorParallel = par.tp;
    details.tensorParallel = `parallelism_config at ${par.where}`;
    values.tpPlan = 'transformers';
    details.tpPlan = `parallelism_config at ${par.where} (the model loaded with tp_plan="auto")`;
  }
  // Accelerate's context parallelism splits the sequence only inside the script's
  // `accelerator.maybe_context_parallel(...)`, which Transformers' Trainer enters in its training step: not decided
  // from the config alone (the script's reading decides, `trainerContextParallel`).
  const cpEntry = par?.cp && par.cp > 1 ? `context parallelism (cp_size ${par.cp})` : undefined;
  const unmodelled = cpEntry ? [cpEntry] : [];
  return {
    ...(unmodelled.length ? { unmodelled } : {}),
    ...(cpEntry && par?.cp
      ? {
          trainerContextParallel: {
            degree: par.cp,
            unmodelled: cpEntry,
            where: `parallelism_config at ${par.where}`,
          },
        }
      : {}),
    framework,
    file: s.file,
    range: s.range,
    api: version === 2 ? 'fsdp2' : 'fsdp1',
    strategy,
    wrap,
    reshardAfterForward: reshard,
    offload,
    values,
    details,
    host,
    notes,
    traps,
    ...(s.checkpointingKey ? { checkpointingKey: s.checkpointingKey } : {}),
  };
}

/** The `fsdp_config` keys Accelerate reads (`accelerate config` writes them; dataclasses.py reads their env vars). */
const KNOWN_KEYS = new Set([
  'fsdp_version',
  'fsdp_sharding_strategy',
  'fsdp_reshard_after_forward',
  'fsdp_auto_wrap_policy',
  'fsdp_transformer_layer_cls_to_wrap',
  'fsdp_min_num_params',
  'fsdp_offload_params',
  'fsdp_activation_checkpointing',
  'fsdp_ignored_modules',
  'fsdp_backward_prefetch',
  'fsdp_forward_prefetch',
  'fsdp_use_orig_params',
  'fsdp_sync_module_states',
  'fsdp_cpu_ram_efficient_loading',
  'fsdp_state_dict_type',
]);

/** `FSDP_BACKWARD_PREFETCH` and `FSDP_STATE_DICT_TYPE` by name or by their 1-based number (utils/constants.py). */
const BACKWARD_PREFETCH = ['BACKWARD_PRE', 'BACKWARD_POST', 'NO_PREFETCH'];
const STATE_DICT_TYPES = ['FULL_STATE_DICT', 'LOCAL_STATE_DICT', 'SHARDED_STATE_DICT'];
function enumName(v: unknown, names: string[]): string | undefined {
  const n = posInt(v);
  if (n !== undefined) return names[n - 1];
  const t = str(v)?.trim().toUpperCase();
  return t && names.includes(t) ? t : undefined;
}

/**
 * The keys that change what happens around the training step rather than in it, read as Accelerate's
 * `FullyShardedDataParallelPlugin.__post_init__` resolves them, each either modelled or noted:
 *  - `fsdp_backward_prefetch`: unset means None (NO_PREFETCH) under FSDP1; FSDP2 ignores it;
 *  - `fsdp_forward_prefetch`: FSDP1 only (ignored under FSDP2 from the environment, refused in code);
 *  - `fsdp_use_orig_params`, `fsdp_sync_module_states`: no effect on memory (obsolete under FSDP2);
 *  - `fsdp_cpu_ram_efficient_loading` (`accelerate launch` defaults it to true): Transformers' `from_pretrained`
 *    loads the weights on local rank 0 only, the other processes on the meta device;
 *  - `fsdp_state_dict_type`: FULL_STATE_DICT by default under FSDP1, SHARDED_STATE_DICT under FSDP2; only the full
 *    one gathers the model on rank 0 (offloaded to its host memory) when saving.
 */
function loadSave(
  s: AccelerateSettings,
  version: 1 | 2,
  notes: string[],
  traps: FrameworkTrap[],
): NonNullable<FrameworkPlan['host']> {
  const host: NonNullable<FrameworkPlan['host']> = {};
  const noEffect: string[] = [];
  const bp = s.get('fsdp_backward_prefetch');
  const prefetch = bp ? enumName(bp.v, BACKWARD_PREFETCH) : 'NO_PREFETCH';
  if (version === 2) {
    if (bp)
      noEffect.push(
        'fsdp_backward_prefetch (Accelerate drops it under FSDP2, which prefetches one unit in backward itself)',
      );
  } else if (bp && !prefetch)
    notes.push(
      `fsdp_backward_prefetch ${String(bp.v)} is not one Accelerate knows (BACKWARD_PRE, BACKWARD_POST, NO_PREFETCH)`,
    );
  else if (prefetch === 'NO_PREFETCH')
    notes.push(
      `${bp ? 'fsdp_backward_prefetch NO_PREFETCH' : "no fsdp_backward_prefetch (Accelerate's default is NO_PREFETCH)"}: FSDP1 gathers each unit only when its backward starts, ` +
        'so backward all-gathers do not overlap compute and one gathered unit fewer is in flight than the figures count (they assume BACKWARD_PRE)',
    );
  else if (prefetch === 'BACKWARD_POST')
    notes.push(
      'fsdp_backward_prefetch BACKWARD_POST: counted as BACKWARD_PRE, one unit prefetched in backward',
    );
  const fp = s.get('fsdp_forward_prefetch');
  const forward = fp ? bool(fp.v) : undefined;
  // FullyShardedDataParallelPlugin.__post_init__ reads FSDP_FORWARD_PREFETCH only when fsdp_version is 1, and
  // raises when the plugin is given forward_prefetch under fsdp_version 2.
  if (forward && version === 2 && s.inCode)
    notes.push(
      'forward_prefetch=True under fsdp_version=2: FullyShardedDataParallelPlugin raises (not implemented for FSDP2)',
    );
  else if (forward && version === 2)
    traps.push({
      rule: 'FSDP016',
      range: s.rangeOf('fsdp_forward_prefetch'),
      summary: 'fsdp_forward_prefetch is ignored under fsdp_version 2: no unit is gathered ahead in forward',
      message:
        'fsdp_forward_prefetch: true is read only under fsdp_version 1: FullyShardedDataParallelPlugin ignores it under ' +
        "fsdp_version 2, so no unit is gathered ahead in forward. Remove it, or prefetch in code with FSDP2's " +
        'set_modules_to_forward_prefetch.',
    });
  else if (fp && !forward)
    noEffect.push(
      `fsdp_forward_prefetch ${String(fp.v)} (FSDP1's default: no unit gathered ahead in forward)`,
    );
  for (const key of ['fsdp_use_orig_params', 'fsdp_sync_module_states']) {
    const v = s.get(key);
    if (v) noEffect.push(`${key} ${String(v.v)}${version === 2 ? ' (obsolete under FSDP2)' : ''}`);
  }
  const ram = s.get('fsdp_cpu_ram_efficient_loading');
  const efficient = ram ? bool(ram.v) : s.launcher;
  if (efficient)
    host.rank0Loading = ram
      ? `fsdp_cpu_ram_efficient_loading at ${ram.where}`
      : "accelerate launch's default fsdp_cpu_ram_efficient_loading true";
  const sd = s.get('fsdp_state_dict_type');
  const sdName = sd ? enumName(sd.v, STATE_DICT_TYPES) : undefined;
  if (sd && !sdName)
    notes.push(
      `fsdp_state_dict_type ${String(sd.v)} is not one Accelerate knows: its default for FSDP${version} assumed`,
    );
  const kind =
    sdName ??
    (version === 1 ? DEFAULTS.Accelerate.stateDictFsdp1.value : DEFAULTS.Accelerate.stateDictFsdp2.value);
  host.stateDict = {
    kind: kind === 'FULL_STATE_DICT' ? 'full' : 'sharded',
    where: sdName
      ? `fsdp_state_dict_type ${sdName} at ${sd!.where}`
      : `Accelerate's default ${kind} under FSDP${version}`,
  };
  if (noEffect.length) notes.push(`read, with no effect on memory: ${noEffect.join('; ')}`);
  const unknown = (s.keys?.() ?? []).filter((k) => /^fsdp_/.test(k) && !KNOWN_KEYS.has(k));
  if (unknown.length) notes.push(`${unknown.join(', ')}: not keys Accelerate reads, ignored`);
  return host;
}

/** Settings of an Accelerate YAML/JSON config (`fsdp_config` keys, top-level precision and processes). */
function configSettings(doc: ConfigDoc): AccelerateSettings {
  const fsdp = isRecord(doc.data.fsdp_config) ? doc.data.fsdp_config : {};
  const top = (key: string) =>
    doc.data[key] !== undefined ? { v: doc.data[key], where: doc.where([key]) } : undefined;
  const pc = isRecord(doc.data.parallelism_config) ? doc.data.parallelism_config : undefined;
  const readNotes: string[] = [];
  const pget = (k: string) =>
    countSetting(
      pc?.[`parallelism_config_${k}`] ?? pc?.[k],
      `parallelism_config ${k}`,
      readNotes,
      'not used',
      { max: 1 << 16 },
    );
  // A launch config without `mixed_precision`: `ClusterConfig.from_yaml_file` takes a legacy `fp16: true` as fp16,
  // else None, which `accelerate launch` (`_validate_launch_command`) turns into "no".
  const precision =
    top('mixed_precision') ??
    (doc.data.distributed_type === undefined
      ? undefined
      : doc.data.fp16 === true
        ? { v: 'fp16', where: doc.where(['fp16']) }
        : {
            v: DEFAULTS.Accelerate.mixedPrecision.value,
            where: `accelerate launch's default for a config without it (${doc.where(['distributed_type'])})`,
          });
  const replicate = pc ? pget('dp_replicate_size') : undefined;
  const shard = pc ? pget('dp_shard_size') : undefined;
  const tp = pc ? pget('tp_size') : undefined;
  const cp = pc ? pget('cp_size') : undefined;
  return {
    file: doc.file,
    launcher: true,
    readNotes,
    // `FullyShardedDataParallelPlugin.activation_checkpointing`, from `FSDP_ACTIVATION_CHECKPOINTING` that the
    // launcher exports: `Accelerator.prepare_model` then runs `apply_activation_checkpointing` on the modules the
    // auto-wrap policy wraps (the decoder blocks).
    checkpointingKey: { path: ['fsdp_config', 'fsdp_activation_checkpointing'], value: true },
    range: doc.rangeOf(['distributed_type']),
    rangeOf: (key) => doc.rangeOf(['fsdp_config', key]),
    get(key) {
      const v = fsdp[key];
      return v === undefined ? undefined : { v, where: doc.where(['fsdp_config', key]) };
    },
    keys: () => Object.keys(fsdp),
    ...(precision ? { mixedPrecision: precision } : {}),
    ...(top('num_processes') ? { numProcesses: top('num_processes')! } : {}),
    ...(top('num_machines') ? { numMachines: top('num_machines')! } : {}),
    ...(dynamoOf(doc) ? { dynamo: dynamoOf(doc)! } : {}),
    ...(pc
      ? {
          parallelism: {
            ...(replicate ? { replicate } : {}),
            ...(shard ? { shard } : {}),
            ...(tp ? { tp } : {}),
            ...(cp ? { cp } : {}),
            where: doc.where(['parallelism_config']),
          },
        }
      : {}),
  };
}

/** An Accelerate config file as an FSDP plan (or null when it does not use FSDP). */
export function accelerateConfigPlan(doc: ConfigDoc, accelerateVersion?: VersionPin): FrameworkPlan | null {
  const t = str(doc.data.distributed_type);
  if (t && t.toUpperCase() !== 'FSDP') return null;
  const plan = acceleratePlan(configSettings(doc), 'Accelerate', accelerateVersion);
  // `num_processes` is the world size `accelerate launch` starts (over every machine).
  const procs = doc.data.num_processes;
  if (typeof procs === 'number' || procs === undefined) plan.keys = { worldSize: ['num_processes'] };
  return plan;
}

/** `accelerate launch --fsdp_* ...` flags of a launch script as settings (`--use_fsdp`, `--num_processes`, ...). */
export function launchFlagSettings(
  flags: Record<string, { v: string; line: number }>,
  file: string,
): AccelerateSettings {
  const name = file.split(/[\\/]/).pop() ?? file;
  const first = Math.min(...Object.values(flags).map((f) => f.line), Number.MAX_SAFE_INTEGER);
  const lineRange = (l: number) => ({ start: { line: l, character: 0 }, end: { line: l, character: 0 } });
  const top = (k: string) =>
    flags[k] ? { v: flags[k]!.v, where: `--${k} at ${name}:${flags[k]!.line + 1}` } : undefined;
  return {
    file,
    launcher: true,
    range: lineRange(first === Number.MAX_SAFE_INTEGER ? 0 : first),
    rangeOf: (key) => lineRange(flags[key]?.line ?? first),
    get: (key) =>
      flags[key] ? { v: flags[key]!.v, where: `--${key} at ${name}:${flags[key]!.line + 1}` } : undefined,
    keys: () => Object.keys(flags),
    ...(top('mixed_precision') ? { mixedPrecision: top('mixed_precision')! } : {}),
    ...(top('num_processes') ? { numProcesses: top('num_processes')! } : {}),
    ...(top('num_machines') ? { numMachines: top('num_machines')! } : {}),
    ...(flags.dynamo_backend
      ? {
          dynamo: {
            backend: flags.dynamo_backend.v,
            ...(flags.dynamo_mode ? { mode: flags.dynamo_mode.v } : {}),
            where: `--dynamo_backend at ${name}:${flags.dynamo_backend.line + 1}`,
          },
        }
      : {}),
  };
}

/** A config's `dynamo_config` (`accelerate config` writes `dynamo_backend` and `dynamo_mode` there). */
function dynamoOf(doc: ConfigDoc): AccelerateSettings['dynamo'] {
  const backend = str(at(doc.data, ['dynamo_config', 'dynamo_backend']));
  if (!backend) return undefined;
  const mode = str(at(doc.data, ['dynamo_config', 'dynamo_mode']));
  return { backend, ...(mode ? { mode } : {}), where: doc.where(['dynamo_config', 'dynamo_backend']) };
}

/** Settings from `FullyShardedDataParallelPlugin(...)` keyword arguments in Python (names without `fsdp_`). */
export function pluginSettings(
  kwargs: Record<string, unknown>,
  kwargLines: Record<string, number>,
  file: string,
  range: FrameworkPlan['range'],
): AccelerateSettings {
  const name = file.split(/[\\/]/).pop() ?? file;
  const alias: Record<string, string> = {
    fsdp_version: 'fsdp_version',
    fsdp_sharding_strategy: 'sharding_strategy',
    fsdp_reshard_after_forward: 'reshard_after_forward',
    fsdp_auto_wrap_policy: 'auto_wrap_policy',
    fsdp_transformer_layer_cls_to_wrap: 'transformer_cls_names_to_wrap',
    fsdp_min_num_params: 'min_num_params',
    fsdp_offload_params: 'cpu_offload',
    fsdp_activation_checkpointing: 'activation_checkpointing',
    fsdp_ignored_modules: 'ignored_modules',
    fsdp_backward_prefetch: 'backward_prefetch',
    fsdp_forward_prefetch: 'forward_prefetch',
    fsdp_use_orig_params: 'use_orig_params',
    fsdp_sync_module_states: 'sync_module_states',
    fsdp_cpu_ram_efficient_loading: 'cpu_ram_efficient_loading',
    fsdp_state_dict_type: 'state_dict_type',
  };
  return {
    inCode: true,
    file,
    range,
    rangeOf: (key) => {
      const l = kwargLines[alias[key] ?? key];
      return l ? { start: { line: l - 1, character: 0 }, end: { line: l - 1, character: 0 } } : range;
    },
    get(key) {
      const k = alias[key] ?? key;
      const v = kwargs[k];
      if (v === undefined) return undefined;
      // `sharding_strategy=ShardingStrategy.SHARD_GRAD_OP`, `cpu_offload=CPUOffload(offload_params=True)`.
      const plain =
        isRecord(v) && 'ref' in v
          ? String(v.ref).split('.').pop()
          : isRecord(v) && 'call' in v && isRecord(v.kwargs) && 'offload_params' in v.kwargs
            ? v.kwargs.offload_params
            : isRecord(v) && 'call' in v && /CPUOffloadPolicy$/.test(String(v.call))
              ? true
              : v;
      return { v: plain, where: `${k}= at ${name}:${kwargLines[k] ?? range.start.line + 1}` };
    },
  };
}
