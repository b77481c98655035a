/**
 * Transformers' and TRL's FSDP: TrainingArguments in code, on command lines and in fsdp_config JSON, by the
 * version the project pins.
 */
import { DEFAULTS } from './defaults';
import type { OptimizerFamily } from '../inputs/parse';
import type { FrameworkCallFact } from '../analysis/facts';
import type { PlainValue } from '../python/plain';
import type { Range } from '../vocabulary/range';
import type { SetupValues } from '../inputs/table';
import { acceleratePlan } from './accelerate';
import { versionAtLeast, type VersionPin } from '../vocabulary/versions';
import { bool, isRecord, num, posInt, str, strList, type ConfigDoc } from './configDoc';
import type { FrameworkPlan } from './types';

/** Keys of a Transformers `fsdp_config` (also accepted with an `fsdp_` prefix). */
const FSDP_CONFIG_KEYS = new Set([
  'version',
  'min_num_params',
  'transformer_layer_cls_to_wrap',
  'backward_prefetch',
  'forward_prefetch',
  'limit_all_gathers',
  'use_orig_params',
  'sync_module_states',
  'cpu_ram_efficient_loading',
  'activation_checkpointing',
  'reshard_after_forward',
  'auto_wrap_policy',
  'cpu_offload',
  'state_dict_type',
  'xla',
]);

/** A Transformers `fsdp_config` JSON file: only `fsdp_config` keys, no Accelerate `distributed_type`. */
export function isTrainerArgsJson(doc: ConfigDoc): boolean {
  if (doc.format !== 'json' || doc.data.distributed_type !== undefined) return false;
  const keys = Object.keys(doc.data).map((k) => k.replace(/^fsdp_/, ''));
  return keys.length > 0 && keys.every((k) => FSDP_CONFIG_KEYS.has(k)) && keys.some((k) => k !== 'xla');
}

const OPTIM: [RegExp, OptimizerFamily][] = [
  [/8bit/, 'adam8bit'],
  [/^paged_adamw/, 'adamw'],
  [/^paged_lion/, 'sgd-momentum'],
  [/^adafactor/, 'adafactor'],
  [/^sgd/, 'sgd'],
  [/^adamw/, 'adamw'],
  [/^adam/, 'adam'],
];

interface TrainerArgs {
  fsdp: PlainValue | undefined;
  fsdpConfig: Record<string, unknown>;
  configWhere: (key: string) => string;
  configRange: (key: string) => Range;
  /** Where `fsdp` is given (`fsdp= at train.py:12`, `--fsdp at run.sh:3`). */
  fsdpWhere?: string;
}

/**
 * Transformers' FSDP as `TrainingArguments` turns it into Accelerate's plugin. Transformers 4: `fsdp="full_shard
 * auto_wrap"` (words: full_shard, shard_grad_op, no_shard, hybrid_shard, offload, auto_wrap) selects FSDP1 unless
 * Accelerate's config says FSDP2; without `auto_wrap` no block is a unit of its own. Transformers 5: `fsdp=True`,
 * FSDP2 by default (`fsdp_config["version"]`), transformer-based wrapping by default, legacy words mapped to
 * `reshard_after_forward`. `fsdp_config` keys may carry an `fsdp_` prefix.
 */
function trainerArgsPlan(
  a: TrainerArgs,
  framework: 'Transformers' | 'TRL',
  file: string,
  range: Range,
  versions: { transformers?: VersionPin; accelerate?: VersionPin },
): FrameworkPlan {
  const cfg: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(a.fsdpConfig)) cfg[k.replace(/^fsdp_/, '')] = v;
  const v5 = versions.transformers ? versionAtLeast(versions.transformers.version, '5') : true;
  const words =
    typeof a.fsdp === 'string'
      ? a.fsdp.split(/\s+/).filter(Boolean)
      : Array.isArray(a.fsdp)
        ? a.fsdp.map((x) =>
            String(
              typeof x === 'object' && x !== null && 'ref' in x ? x.ref.split('.').pop() : x,
            ).toLowerCase(),
          )
        : [];
  // Transformers 4 reads no `version` key (FSDP2 only through Accelerate's own config); 5 defaults to 2.
  const version = v5 ? (posInt(cfg.version) ?? 2) : 1;
  const strategyWord = words.find((w) =>
    ['full_shard', 'shard_grad_op', 'no_shard', 'hybrid_shard', 'hybrid_shard_zero2'].includes(w),
  );
  const settings: Record<string, { v: unknown; where: string }> = {};
  const put = (key: string, v: unknown, where: string) => {
    if (v !== undefined) settings[key] = { v, where };
  };
  put('fsdp_version', version, a.configWhere('version'));
  const fsdpWhere = a.fsdpWhere ?? `fsdp= at ${file.split(/[\\/]/).pop()}:${range.start.line + 1}`;
  if (version === 1) {
    // Transformers 4 exports the strategy word as FSDP_SHARDING_STRATEGY; 5 passes it as reshard_after_forward,
    // which Accelerate's FSDP1 path does not use for the strategy.
    if (strategyWord && !v5) put('fsdp_sharding_strategy', strategyWord.toUpperCase(), fsdpWhere);
    else if (strategyWord) put('fsdp_reshard_after_forward', strategyWord.toUpperCase(), fsdpWhere);
    if (cfg.reshard_after_forward !== undefined)
      put('fsdp_reshard_after_forward', cfg.reshard_after_forward, a.configWhere('reshard_after_forward'));
  } else {
    const r =
      cfg.reshard_after_forward !== undefined
        ? cfg.reshard_after_forward
        : strategyWord === 'shard_grad_op'
          ? false
          : true;
    put(
      'fsdp_reshard_after_forward',
      r,
      cfg.reshard_after_forward !== undefined ? a.configWhere('reshard_after_forward') : fsdpWhere,
    );
  }
  const autoWrap = v5 || words.includes('auto_wrap');
  const minParams = num(cfg.min_num_params) ?? 0;
  const policy =
    str(cfg.auto_wrap_policy) ??
    (autoWrap ? (minParams > 0 ? 'SIZE_BASED_WRAP' : 'TRANSFORMER_BASED_WRAP') : 'NO_WRAP');
  put(
    'fsdp_auto_wrap_policy',
    policy,
    cfg.auto_wrap_policy !== undefined ? a.configWhere('auto_wrap_policy') : fsdpWhere,
  );
  const classes = strList(cfg.transformer_layer_cls_to_wrap);
  if (classes)
    put('fsdp_transformer_layer_cls_to_wrap', classes, a.configWhere('transformer_layer_cls_to_wrap'));
  if (minParams > 0) put('fsdp_min_num_params', minParams, a.configWhere('min_num_params'));
  if (words.includes('offload') || bool(cfg.cpu_offload)) put('fsdp_offload_params', true, fsdpWhere);
  if (cfg.activation_checkpointing !== undefined)
    put(
      'fsdp_activation_checkpointing',
      cfg.activation_checkpointing,
      a.configWhere('activation_checkpointing'),
    );
  // Passed on to Accelerate's plugin as given (TrainingArguments._process_fsdp_args); the state dict type defaults
  // to FULL_STATE_DICT whatever the version.
  for (const key of [
    'backward_prefetch',
    'forward_prefetch',
    'use_orig_params',
    'sync_module_states',
    'cpu_ram_efficient_loading',
    'state_dict_type',
  ])
    if (cfg[key] !== undefined) put(`fsdp_${key}`, cfg[key], a.configWhere(key));
  if (cfg.state_dict_type === undefined)
    put('fsdp_state_dict_type', 'FULL_STATE_DICT', `Transformers' default FULL_STATE_DICT (${fsdpWhere})`);
  const plan = acceleratePlan(
    {
      file,
      range,
      rangeOf: (key) => a.configRange(key.replace(/^fsdp_/, '')),
      get: (key) => settings[key],
    },
    framework,
    versions.accelerate,
  );
  plan.notes.unshift(
    `${framework === 'TRL' ? 'TRL on ' : ''}Transformers ${versions.transformers ? `${versions.transformers.version} (${versions.transformers.where})` : '5 (not pinned in the workspace)'}: ` +
      `FSDP${version === 2 ? '2' : '1'}${version === 1 && !autoWrap ? ' without auto_wrap: the whole model is one unit' : ''}`,
  );
  const limit = bool(cfg.limit_all_gathers);
  if (limit === false && version === 1)
    plan.notes.push(
      'limit_all_gathers false: FSDP1 may issue all-gathers further ahead, so more gathered units can be in flight than the figures count',
    );
  else if (limit !== undefined)
    plan.notes.push(`limit_all_gathers ${String(limit)}: read, with no effect on memory`);
  if (cfg.xla !== undefined) plan.notes.push('xla: read, not modelled (fsdp-lens models GPUs)');
  if (!v5 && strategyWord === undefined && words.length)
    plan.notes.push('fsdp= names no sharding strategy: FULL_SHARD');
  return plan;
}

function plainRecord(v: PlainValue | undefined): Record<string, unknown> {
  if (typeof v === 'object' && v !== null && !Array.isArray(v) && 'dict' in v) {
    const o: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v.dict))
      o[k] = typeof x === 'object' && x !== null && 'ref' in x ? x.ref : x;
    return o;
  }
  return {};
}

/**
 * `TrainingArguments(...)` / TRL's `SFTConfig(...)` in a script: the FSDP plan, with the batch, precision,
 * checkpointing and optimizer it sets. A `fsdp_config` path is read with `readJson` (relative to the script).
 */
export function trainingArgumentsPlan(
  call: FrameworkCallFact,
  file: string,
  versions: { transformers?: VersionPin; accelerate?: VersionPin },
  readJson?: (relPath: string) => { data: Record<string, unknown>; doc?: ConfigDoc } | undefined,
  /** Read from the script's command line (`--fsdp "full_shard auto_wrap" --fsdp_config fsdp.json`). */
  commandLine = false,
  /** Where each `fsdp_config` key is written, when the config is a section of a file (axolotl's YAML). */
  configAt?: { where: (key: string) => string; range: (key: string) => Range },
): FrameworkPlan | null {
  const k = call.kwargs;
  const fsdp = k.fsdp;
  if (
    fsdp === undefined ||
    fsdp === null ||
    fsdp === false ||
    fsdp === '' ||
    (Array.isArray(fsdp) && !fsdp.length)
  )
    return null;
  const name = file.split(/[\\/]/).pop() ?? file;
  const line = (key: string) => call.kwargLines[key] ?? call.line;
  let fsdpConfig: Record<string, unknown> = plainRecord(k.fsdp_config);
  let configWhere = (_key: string) =>
    commandLine
      ? `--fsdp_config at ${name}:${line('fsdp_config')}`
      : `fsdp_config= at ${name}:${line('fsdp_config')}`;
  let configRange = (_key: string): Range => ({
    start: { line: line('fsdp_config') - 1, character: 0 },
    end: { line: line('fsdp_config') - 1, character: 0 },
  });
  if (configAt) {
    configWhere = configAt.where;
    configRange = configAt.range;
  }
  if (typeof k.fsdp_config === 'string' && readJson) {
    const read = readJson(k.fsdp_config);
    if (read) {
      fsdpConfig = read.data;
      const doc = read.doc;
      if (doc) {
        configWhere = (key) => doc.where([fsdpConfig[key] !== undefined ? key : `fsdp_${key}`]);
        configRange = (key) => doc.rangeOf([fsdpConfig[key] !== undefined ? key : `fsdp_${key}`]);
      }
    }
  }
  const at = (key: string) =>
    commandLine ? `--${key} at ${name}:${line(key)}` : `${key}= at ${name}:${line(key)}`;
  // Transformers 4's deprecated arguments join fsdp_config (`TrainingArguments.__post_init__`): the layer class is
  // appended to `transformer_layer_cls_to_wrap`, `min_num_params` is the larger of the two. Transformers 5's
  // parser refuses them, so a job that passes one runs 4.
  const flagClass = str(k.fsdp_transformer_layer_cls_to_wrap);
  const flagMin = num(k.fsdp_min_num_params);
  if (!versions.transformers && (flagClass || flagMin !== undefined))
    versions = {
      ...versions,
      transformers: {
        version: '4',
        where: `${flagClass ? 'fsdp_transformer_layer_cls_to_wrap' : 'fsdp_min_num_params'}, which 5 refuses`,
      },
    };
  const merged = { ...fsdpConfig };
  const own = (key: string) => (merged[key] !== undefined ? key : `fsdp_${key}`);
  const given = new Set<string>();
  if (flagClass) {
    const listed = strList(merged[own('transformer_layer_cls_to_wrap')]) ?? [];
    merged[own('transformer_layer_cls_to_wrap')] = [...listed, flagClass];
    given.add('transformer_layer_cls_to_wrap');
  }
  if (flagMin !== undefined && flagMin > (num(merged[own('min_num_params')]) ?? 0)) {
    merged[own('min_num_params')] = flagMin;
    given.add('min_num_params');
  }
  const framework = /^trl\b/.test(call.callee) || /Config$/.test(call.callee) ? 'TRL' : 'Transformers';
  const plan = trainerArgsPlan(
    {
      fsdp,
      fsdpConfig: merged,
      configWhere: (key) => (given.has(key) ? at(`fsdp_${key}`) : configWhere(key)),
      configRange,
      fsdpWhere: commandLine ? at('fsdp') : `fsdp= at ${name}:${line('fsdp')}`,
    },
    framework,
    file,
    call.range,
    versions,
  );
  const t = trainingArgumentValues(call, file, commandLine);
  Object.assign(plan.values, t.values);
  Object.assign(plan.details, t.details);
  if (t.values.loss === 'fused')
    plan.overcounted = [
      ...(plan.overcounted ?? []),
      `Liger's RMSNorm and SwiGLU kernels (${commandLine ? '' : 'use_liger_kernel at '}${at('use_liger_kernel')})`,
    ];
  return plan;
}

/**
 * What `TrainingArguments(...)` / TRL's configs set besides FSDP: the micro-batch, gradient accumulation (the
 * Trainer syncs gradients on the last micro-batch only), sequence length, precision, checkpointing, optimizer.
 */
export function trainingArgumentValues(
  call: FrameworkCallFact,
  file: string,
  /** Read from a command line (`--per_device_train_batch_size 4`): details name the flag. */
  commandLine = false,
): { values: SetupValues; details: FrameworkPlan['details'] } {
  const k = call.kwargs;
  const name = file.split(/[\\/]/).pop() ?? file;
  const line = (key: string) => call.kwargLines[key] ?? call.line;
  const framework = /^trl\b/.test(call.callee) || /Config$/.test(call.callee) ? 'TRL' : 'Transformers';
  // TRL's SFTConfig turns gradient checkpointing and bf16 on by default.
  const trlDefaults = framework === 'TRL' && /SFTConfig$/.test(call.callee);
  const values: SetupValues = {};
  const details: FrameworkPlan['details'] = {};
  const at = (key: string) => (commandLine ? `--${key} at ${name}:${line(key)}` : `${name}:${line(key)}`);
  const bf16 =
    k.bf16 === true || (trlDefaults && DEFAULTS.TRL.bf16.value && k.bf16 === undefined && k.fp16 !== true);
  if (bf16 || k.fp16 === true) {
    const d = bf16 ? 'bfloat16' : 'float16';
    values.paramDtype = values.reduceDtype = d;
    values.masterDtype = 'float32';
    details.paramDtype =
      details.reduceDtype =
      details.masterDtype =
        k.bf16 === undefined && bf16
          ? `SFTConfig's default bf16=True (${name}:${call.line})`
          : commandLine
            ? at(bf16 ? 'bf16' : 'fp16')
            : `${bf16 ? 'bf16' : 'fp16'}=True at ${at(bf16 ? 'bf16' : 'fp16')}`;
  } else if (k.bf16 === false || k.fp16 === false || (k.bf16 === undefined && k.fp16 === undefined)) {
    values.paramDtype = values.reduceDtype = null;
    details.paramDtype = details.reduceDtype = `no bf16/fp16 at ${name}:${call.line}`;
  }
  const batch = posInt(k.per_device_train_batch_size);
  if (batch) {
    values.microBatch = batch;
    details.microBatch = at('per_device_train_batch_size');
  }
  const accum = posInt(k.gradient_accumulation_steps);
  if (accum) {
    values.gradAccum = accum;
    details.gradAccum = at('gradient_accumulation_steps');
    // The Trainer skips the gradient sync of every micro-batch but the last (accelerator.no_sync).
    values.syncEveryMicroBatch = false;
    details.syncEveryMicroBatch = `the Trainer's no_sync between the micro-batches of ${at('gradient_accumulation_steps')}`;
  }
  for (const key of ['max_length', 'max_seq_length']) {
    const s = posInt(k[key]);
    if (s) {
      values.seqLen = s;
      details.seqLen = at(key);
    }
  }
  // A script's own `model_max_length` (the tokenizer's truncation length, as Stanford Alpaca's train.py and its
  // descendants pass it): batches padded to their longest sequence are at most that long.
  const most = commandLine ? posInt(k.model_max_length) : undefined;
  if (most && values.seqLen === undefined) {
    values.seqLen = most;
    details.seqLen = `${at('model_max_length')} (the longest a sequence may be)`;
  }
  if (
    k.gradient_checkpointing === true ||
    (trlDefaults && DEFAULTS.TRL.gradientCheckpointing.value && k.gradient_checkpointing === undefined)
  ) {
    values.checkpointing = 'full';
    details.checkpointing =
      k.gradient_checkpointing === true
        ? at('gradient_checkpointing')
        : `SFTConfig's default gradient_checkpointing=True (${name}:${call.line})`;
    // `gradient_checkpointing_kwargs={"use_reentrant": ...}`, passed to `torch.utils.checkpoint.checkpoint` around
    // each layer's call (`PreTrainedModel.gradient_checkpointing_enable`); unset, the release decides
    // (resolve/transformersCheckpoint.ts).
    // A dict in code (`{"use_reentrant": True}`), or an object in an argument file or a command line's JSON.
    const gck = k.gradient_checkpointing_kwargs;
    const entries =
      gck && typeof gck === 'object' && !Array.isArray(gck)
        ? 'dict' in gck
          ? (gck.dict as Record<string, unknown>)
          : (gck as Record<string, unknown>)
        : undefined;
    const reentrant = entries?.use_reentrant;
    if (typeof reentrant === 'boolean') {
      values.reentrantCheckpoint = reentrant;
      details.reentrantCheckpoint = at('gradient_checkpointing_kwargs');
    }
  }
  // `use_liger_kernel=True`: the Trainer patches the model with Liger's defaults (`_apply_liger_kernel_to_instance`,
  // `fused_linear_cross_entropy=True` among them); its RMSNorm and SwiGLU kernels keep less than the eager modules.
  if (k.use_liger_kernel === true) {
    values.loss = 'fused';
    details.loss = `${at('use_liger_kernel')} (Liger's RMSNorm and SwiGLU kernels, also applied, keep less for backward than the activations count)`;
  }
  // `torch_compile=True`, or a `torch_compile_mode` / `torch_compile_backend`, which turn it on
  // (`TrainingArguments.__post_init__`): Accelerate compiles the prepared model (`Accelerator.prepare_model`), whose
  // forward computes the loss from `labels`. Modes that record CUDA graphs are not modelled.
  const compileMode = str(k.torch_compile_mode);
  const compileKey = ['torch_compile', 'torch_compile_mode', 'torch_compile_backend'].find(
    (key) => k[key] === true || (key !== 'torch_compile' && str(k[key])),
  );
  if (compileKey) {
    values.compile =
      compileMode === 'reduce-overhead' || compileMode === 'max-autotune' ? 'cudagraphs' : 'model+loss';
    details.compile = `${at(compileKey)} (the Trainer compiles the model, whose forward computes the loss)`;
  }
  // TRL's `activation_offloading=True` runs the training step inside its activation-offloading context
  // (`get_act_offloading_ctx_manager`, torchtune's OffloadActivations).
  if (framework === 'TRL' && k.activation_offloading === true) {
    values.activationOffload = true;
    details.activationOffload = at('activation_offloading');
  }
  const optim = str(k.optim);
  const family = optim && OPTIM.find(([re]) => re.test(optim.toLowerCase()))?.[1];
  if (family) {
    values.optimizer = family;
    details.optimizer = at('optim');
  }
  // `adamw_torch_fused`: `Trainer.get_optimizer_cls_and_kwargs` builds torch.optim.AdamW with `fused=True`, which
  // steps without foreach's shard-sized temporaries.
  if (optim && optim.toLowerCase() === 'adamw_torch_fused') {
    values.optimizerImpl = 'fused';
    details.optimizerImpl = at('optim');
  }
  // `paged_adamw_32bit`, `paged_adamw_8bit`, `paged_lion_*`: bitsandbytes' paged optimizers
  // (`OptimizerNames` in transformers/training_args.py, built in `Trainer.get_optimizer_cls_and_kwargs`).
  if (optim && /^paged_/.test(optim.toLowerCase())) {
    values.pagedOptimizer = true;
    details.pagedOptimizer = at('optim');
  }
  return { values, details };
}

/** A Transformers `fsdp_config` JSON file as a plan (FSDP enabled by the script that points at it). */
export function trainerArgsJsonPlan(
  doc: ConfigDoc,
  versions: { transformers?: VersionPin; accelerate?: VersionPin } = {},
): FrameworkPlan {
  const fsdpConfig = isRecord(doc.data) ? doc.data : {};
  // Without the script, the `fsdp=` words are unknown. A JSON that names the classes to wrap, a wrap policy or a
  // size threshold is written for auto-wrapping: under Transformers 4 those keys only act with the `auto_wrap`
  // word, so it is assumed (and said), as the script form would give it.
  const wrapKeys = ['transformer_layer_cls_to_wrap', 'auto_wrap_policy', 'min_num_params'].filter(
    (k) => fsdpConfig[k] !== undefined || fsdpConfig[`fsdp_${k}`] !== undefined,
  );
  const v4 = !!versions.transformers && !versionAtLeast(versions.transformers.version, '5');
  const plan = trainerArgsPlan(
    {
      fsdp: wrapKeys.length ? ['full_shard', 'auto_wrap'] : true,
      fsdpConfig,
      configWhere: (key) => doc.where([fsdpConfig[key] !== undefined ? key : `fsdp_${key}`]),
      configRange: (key) => doc.rangeOf([fsdpConfig[key] !== undefined ? key : `fsdp_${key}`]),
    },
    'Transformers',
    doc.file,
    doc.rangeOf([]),
    versions,
  );
  if (wrapKeys.length && v4)
    plan.notes.push(
      `${wrapKeys.join(', ')} given: assumed run with fsdp="full_shard auto_wrap" (Transformers 4 ignores ${wrapKeys.length > 1 ? 'them' : 'it'} without auto_wrap)`,
    );
  return plan;
}
