/**
 * axolotl's YAML config as the FSDP job it runs: axolotl hands `fsdp` and `fsdp_config` to Transformers'
 * `TrainingArguments` (`TrainerBuilderBase._set_base_training_args`) and pins the FSDP version itself, so the plan
 * is the Trainer's, read through the one reading of TrainingArguments; the model, the adapter and the batch are
 * axolotl's own keys.
 */
import { DEFAULTS } from './defaults';
import type { FrameworkCallFact } from '../analysis/facts';
import type { PlainValue } from '../python/plain';
import type { VersionPin } from '../vocabulary/versions';
import { bool, isRecord, posInt, str, strList, type ConfigDoc } from './configDoc';
import { trainingArgumentsPlan } from './transformers';
import type { FrameworkPlan, FrameworkProblem } from './types';

/** An axolotl config: a `base_model` to fine-tune with FSDP settings, and none of another framework's keys. */
export function isAxolotl(doc: ConfigDoc): boolean {
  const d = doc.data;
  return (
    doc.format === 'yaml' &&
    typeof d.base_model === 'string' &&
    (d.fsdp !== undefined || d.fsdp_config !== undefined || d.fsdp_version !== undefined) &&
    d.distributed_type === undefined &&
    !isRecord(d.model)
  );
}

/**
 * An axolotl config that does not use FSDP: a `base_model`, axolotl's own training keys (`datasets`,
 * `micro_batch_size`, `sequence_len`), and no FSDP key.
 */
export function isAxolotlWithoutFsdp(doc: ConfigDoc): boolean {
  const d = doc.data;
  return (
    doc.format === 'yaml' &&
    typeof d.base_model === 'string' &&
    d.fsdp === undefined &&
    d.fsdp_config === undefined &&
    d.fsdp_version === undefined &&
    d.distributed_type === undefined &&
    !isRecord(d.model) &&
    (Array.isArray(d.datasets) || d.micro_batch_size !== undefined || d.sequence_len !== undefined)
  );
}

/** What an axolotl config without FSDP runs, said instead of a plan. */
export function axolotlWithoutFsdp(doc: ConfigDoc): FrameworkProblem {
  const ds = str(doc.data.deepspeed);
  return {
    framework: 'axolotl',
    file: doc.file,
    range: doc.rangeOf(ds ? ['deepspeed'] : ['base_model']),
    message: ds
      ? `an axolotl config that trains with DeepSpeed (deepspeed: ${ds} at ${doc.where(['deepspeed'])}), not FSDP: estimate that JSON for the FSDP plan its ZeRO stage corresponds to`
      : 'an axolotl config without FSDP (no fsdp, fsdp_config or fsdp_version): it trains on one GPU, or with DDP under a multi-GPU launch; fsdp-lens estimates FSDP jobs (fsdp_version: 2 with an fsdp_config shards it)',
  };
}

/** axolotl's config keys and the TrainingArguments fields its trainer builder fills from them. */
const ARGUMENTS: [string, string][] = [
  ['micro_batch_size', 'per_device_train_batch_size'],
  ['gradient_accumulation_steps', 'gradient_accumulation_steps'],
  ['sequence_len', 'max_seq_length'],
  ['gradient_checkpointing', 'gradient_checkpointing'],
  ['gradient_checkpointing_kwargs', 'gradient_checkpointing_kwargs'],
  ['optimizer', 'optim'],
  ['fp16', 'fp16'],
  ['torch_compile', 'torch_compile'],
];

export function axolotlPlan(
  doc: ConfigDoc,
  versions: { transformers?: VersionPin; accelerate?: VersionPin } = {},
): FrameworkPlan | FrameworkProblem | null {
  const d = doc.data;
  const name = doc.file.split(/[\\/]/).pop() ?? doc.file;
  const lineOf = (key: string) => doc.rangeOf([key]).start.line + 1;
  // `fsdp_` prefixes dropped (`check_fsdp_config_kwargs_prefix`), the version pinned at the top level, 1 when
  // unset (`check_fsdp_version_in_fsdp_config`, axolotl/utils/schemas/validation.py).
  const raw = isRecord(d.fsdp_config) ? d.fsdp_config : {};
  const config: Record<string, PlainValue> = {};
  for (const [k, v] of Object.entries(raw))
    config[k === 'fsdp_version' ? k : k.replace(/^fsdp_/, '')] = v as PlainValue;
  const pinned = posInt(d.fsdp_version) ?? posInt(config.fsdp_version) ?? posInt(config.version);
  const version = pinned ?? DEFAULTS.axolotl.fsdpVersion.value;
  delete config.fsdp_version;
  config.version = version;
  // `setup_fsdp_envs` exports `offload_params` as FSDP_OFFLOAD_PARAMS, which Accelerate's plugin reads: the
  // Trainer's own name for it is `cpu_offload`.
  if (config.offload_params !== undefined) {
    config.cpu_offload = config.offload_params;
    delete config.offload_params;
  }
  const kwargs: Record<string, PlainValue> = {
    // `training_args_kwargs["fsdp"] = cfg.fsdp if cfg.fsdp else True`.
    fsdp: d.fsdp === undefined || d.fsdp === null || d.fsdp === false ? true : (d.fsdp as PlainValue),
    fsdp_config: { dict: config },
  };
  const kwargLines: Record<string, number> = { fsdp: lineOf(d.fsdp !== undefined ? 'fsdp' : 'fsdp_config') };
  kwargLines.fsdp_config = lineOf('fsdp_config');
  for (const [key, arg] of ARGUMENTS)
    if (d[key] !== undefined && d[key] !== null) {
      kwargs[arg] = d[key] as PlainValue;
      kwargLines[arg] = lineOf(key);
    }
  // The trainer builder passes `torch_compile_backend` and `torch_compile_mode` on only with `torch_compile` set.
  if (d.torch_compile === true)
    for (const key of ['torch_compile_backend', 'torch_compile_mode'])
      if (typeof d[key] === 'string') {
        kwargs[key] = d[key] as PlainValue;
        kwargLines[key] = lineOf(key);
      }
  // `bf16: auto` is bf16 where the GPU supports it (axolotl's `normalize_config`); fsdp-lens's GPUs all do but
  // the V100 and T4, which are not in its catalog.
  const bf16 = d.bf16 === 'auto' || d.bf16 === true || bool(d.bf16) === true;
  if (bf16) {
    kwargs.bf16 = true;
    kwargLines.bf16 = lineOf('bf16');
  } else if (d.bf16 === false) kwargs.bf16 = false;
  const call: FrameworkCallFact = {
    kind: 'TrainingArguments',
    callee: 'transformers.TrainingArguments',
    line: lineOf('fsdp_config'),
    range: doc.rangeOf([d.fsdp_config !== undefined ? 'fsdp_config' : 'fsdp']),
    kwargs,
    kwargLines,
  };
  // axolotl sets FSDP_VERSION itself (`setup_fsdp_envs`); the rest of the mapping is Transformers 5's, the
  // release axolotl pins, unless the project pins another.
  // axolotl pins Transformers 5.14.1 and Accelerate 1.13.0 (its pyproject.toml, July 2026).
  const transformers = versions.transformers ?? { version: '5.14.1', where: 'the release axolotl pins' };
  const accelerate = versions.accelerate ?? { version: '1.13.0', where: 'the release axolotl pins' };
  // The section's own keys, with or without the `fsdp_` prefix as written.
  const written = (key: string) => {
    const k = key === 'cpu_offload' ? 'offload_params' : key;
    return raw[k] !== undefined ? k : raw[`fsdp_${k}`] !== undefined ? `fsdp_${k}` : k;
  };
  const plan = trainingArgumentsPlan(call, doc.file, { transformers, accelerate }, undefined, false, {
    where: (key) => doc.where(['fsdp_config', written(key)]),
    range: (key) => doc.rangeOf(['fsdp_config', written(key)]),
  });
  if (!plan) return null;
  plan.framework = 'axolotl';
  plan.throughTrainer = true;
  // The keys an edit of micro-batch, sequence or accumulation writes (numbers there, or not written).
  const editable = {
    microBatch: 'micro_batch_size',
    seqLen: 'sequence_len',
    gradAccum: 'gradient_accumulation_steps',
  };
  plan.keys = Object.fromEntries(
    Object.entries(editable)
      .filter(([, key]) => d[key] === undefined || typeof d[key] === 'number')
      .map(([input, key]) => [input, [key]]),
  );
  // The key a fix turns on: the FSDP section's own `activation_checkpointing` where the config writes it (axolotl
  // refuses both at once), else `gradient_checkpointing`, the Trainer's `gradient_checkpointing_enable()`.
  const fsdpAc = ['activation_checkpointing', 'fsdp_activation_checkpointing'].find(
    (k) => raw[k] !== undefined,
  );
  plan.checkpointingKey = fsdpAc
    ? { path: ['fsdp_config', fsdpAc], value: true }
    : { path: ['gradient_checkpointing'], value: true };
  plan.notes[0] = `axolotl: FSDP${version} (${pinned ? 'its fsdp_version' : "axolotl's default, fsdp_version 1"}), through Transformers' Trainer`;
  if (d.bf16 === 'auto') {
    const where = `bf16: auto at ${name}:${lineOf('bf16')} (bf16 where the GPU supports it, as the catalog's do)`;
    for (const key of ['paramDtype', 'reduceDtype', 'masterDtype'] as const)
      if (plan.details[key]) plan.details[key] = where;
  }
  plan.model = {
    id: d.base_model as string,
    source: { kind: 'config', detail: `base_model at ${doc.where(['base_model'])}` },
  };
  // The adapter (`adapter: lora | qlora`, `lora_r`, `lora_target_modules` or `lora_target_linear`).
  const adapter = str(d.adapter)?.toLowerCase();
  if (adapter === 'lora' || adapter === 'qlora') {
    const targets = bool(d.lora_target_linear) ? ['all-linear'] : (strList(d.lora_target_modules) ?? []);
    const rank = posInt(d.lora_r) ?? 8;
    if (!targets.length)
      plan.notes.push(
        `the adapter at ${doc.where(['adapter'])} names no lora_target_modules (and lora_target_linear is not set): PEFT's defaults for the architecture apply, which are not read; estimated without LoRA (--lora-rank R --lora-targets M estimates with it)`,
      );
    else {
      plan.fineTune = {
        lora: { rank, targets },
        ...(adapter === 'qlora' || d.load_in_4bit === true
          ? { baseDtype: 'nf4' as const, quantizer: 'bitsandbytes' as const }
          : {}),
      };
      if (posInt(d.lora_r) === undefined) plan.notes.push("lora_r not set: rank 8, PEFT's default");
    }
  }
  if (d.load_in_8bit === true)
    plan.notes.push(
      `load_in_8bit at ${doc.where(['load_in_8bit'])}: 8-bit base weights are not modelled; estimated in the load dtype`,
    );
  // `activation_offloading: true` (or `legacy`): the trainer's activation-checkpointing mixin moves the saved
  // activations to the CPU.
  if (d.activation_offloading === true || d.activation_offloading === 'legacy') {
    plan.values.activationOffload = true;
    plan.details.activationOffload = `activation_offloading at ${doc.where(['activation_offloading'])}`;
  }
  // Liger's fused linear cross-entropy (axolotl's Liger plugin patches the model with
  // `fused_linear_cross_entropy=True`): the logits a chunk at a time.
  const unmodelled: string[] = [];
  if (d.liger_fused_linear_cross_entropy === true) {
    plan.values.loss = 'fused';
    plan.details.loss = `liger_fused_linear_cross_entropy at ${doc.where(['liger_fused_linear_cross_entropy'])}`;
  }
  // Liger's RMSNorm and SwiGLU keep less for backward than the eager modules the activations are counted as.
  const kernels = ['liger_rms_norm', 'liger_glu_activation'].filter((k) => d[k] === true);
  if (kernels.length)
    plan.overcounted = [
      ...(plan.overcounted ?? []),
      `Liger's ${kernels.map((k) => (k === 'liger_rms_norm' ? 'RMSNorm' : 'SwiGLU')).join(' and ')} (${kernels.map((k) => `${k} at ${doc.where([k])}`).join(', ')})`,
    ];
  // `tiled_mlp: true` (axolotl/monkeypatch/tiled_mlp): each decoder MLP runs through `TiledMLP`, an autograd
  // function over shards of the sequence that keeps only its input and recomputes each shard in backward, so the
  // MLP's intermediate activations are never all held: they keep less than the figures count.
  if (d.tiled_mlp === true)
    plan.overcounted = [
      ...(plan.overcounted ?? []),
      `axolotl's tiled MLP (tiled_mlp at ${doc.where(['tiled_mlp'])}), which keeps only each MLP's input`,
    ];
  // Apple's cut cross-entropy, through axolotl's CutCrossEntropyPlugin (axolotl/integrations/cut_cross_entropy:
  // its `pre_model_load` patches the model's forward when `cut_cross_entropy` is set, which its
  // `CutCrossEntropyArgs` default to true); without the plugin listed the key is not read by anything.
  const plugins = Array.isArray(d.plugins) ? d.plugins.map(String) : [];
  const cce = plugins.some((p) => /CutCrossEntropyPlugin$/.test(p));
  if (cce && d.cut_cross_entropy !== false) {
    plan.values.loss = 'cut';
    plan.details.loss =
      d.cut_cross_entropy === true
        ? `cut_cross_entropy at ${doc.where(['cut_cross_entropy'])}`
        : `CutCrossEntropyPlugin at ${doc.where(['plugins'])} (cut_cross_entropy defaults to true)`;
  } else if (!cce && d.cut_cross_entropy === true)
    plan.notes.push(
      `cut_cross_entropy at ${doc.where(['cut_cross_entropy'])} without axolotl's CutCrossEntropyPlugin in plugins: not applied`,
    );
  // Tensor parallelism: axolotl loads the model with `tp_plan="auto"` (`ModelLoader`, axolotl/loaders/model.py)
  // and hands Accelerate a ParallelismConfig with that tp_size (`build_parallelism_config`, axolotl/utils/
  // distributed.py): Transformers' plan, FSDP over the ranks left.
  const tp = posInt(d.tensor_parallel_size);
  if (tp && tp > 1) {
    plan.values.tensorParallel = tp;
    plan.details.tensorParallel = `tensor_parallel_size at ${doc.where(['tensor_parallel_size'])}`;
    plan.values.tpPlan = 'transformers';
    plan.details.tpPlan = `tensor_parallel_size at ${doc.where(['tensor_parallel_size'])} (the model loaded with tp_plan="auto")`;
  }
  // The mesh's data-parallel sizes (`_get_parallel_config_kwargs`): with dp_shard_size given, the world is their
  // product with the other degrees; dp_replicate_size > 1 replicates the shard groups (HSDP).
  const shard = posInt(d.dp_shard_size);
  const replicate = posInt(d.dp_replicate_size) ?? 1;
  if (shard) {
    plan.values.worldSize = shard * replicate * (tp ?? 1) * (posInt(d.context_parallel_size) ?? 1);
    plan.details.worldSize = `dp_shard_size at ${doc.where(['dp_shard_size'])}`;
  }
  if (replicate > 1) {
    plan.values.replicas = replicate;
    plan.details.replicas = `dp_replicate_size at ${doc.where(['dp_replicate_size'])}`;
  }
  for (const [key, what] of [
    ['context_parallel_size', 'context parallelism'],
    ['expert_parallel_size', 'expert parallelism'],
  ] as const) {
    const n = posInt(d[key]);
    if (n && n > 1) unmodelled.push(`${what} (${key}: ${n} at ${doc.where([key])})`);
  }
  if (unmodelled.length) plan.unmodelled = [...(plan.unmodelled ?? []), ...unmodelled];
  return plan;
}
