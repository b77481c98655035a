/**
 * What each framework does where its configuration is silent (precision, wrap policy, reshard, checkpointing,
 * loading, saving, the job's sizes), with where in its source it says so: the one table the readers take their
 * defaults from, and `fsdp-lens defaults` (docs/defaults.md) shows.
 */

export type DefaultTopic =
  'precision' | 'wrap' | 'reshard' | 'checkpointing' | 'loading' | 'saving' | 'sizes';

/** One default: the key as the framework names it, its value, and the framework's own source for it. */
export interface FrameworkDefault<T extends string | number | boolean = string | number | boolean> {
  topic: DefaultTopic;
  key: string;
  value: T;
  /** The file and function (or generated config) of the framework's release that sets it. */
  source: string;
}

const d = <T extends string | number | boolean>(
  topic: DefaultTopic,
  key: string,
  value: T,
  source: string,
): FrameworkDefault<T> => ({ topic, key, value, source });

const ACC_PLUGIN = 'accelerate/utils/dataclasses.py, FullyShardedDataParallelPlugin.__post_init__';
const ACC_LAUNCH = 'accelerate/commands/launch.py, launch_command_parser and _validate_launch_command';
const TITAN =
  'torchtitan/config/job_config.py of the TOML releases (before February 2026), its Training, ActivationCheckpoint and Parallelism dataclasses';
const VERL = 'verl/trainer/config/_generated_ppo_trainer.yaml (ppo_trainer.yaml with its defaults resolved)';

/** The defaults, by framework. */
export const DEFAULTS = {
  Accelerate: {
    fsdpVersion: d('wrap', 'fsdp_version', 1, `${ACC_PLUGIN} (FSDP_VERSION defaults to "1")`),
    autoWrapPolicy: d('wrap', 'fsdp_auto_wrap_policy', 'NO_WRAP', `${ACC_PLUGIN} (FSDP_AUTO_WRAP_POLICY)`),
    minNumParams: d(
      'wrap',
      'fsdp_min_num_params',
      100_000_000,
      `${ACC_LAUNCH} (--fsdp_min_num_params defaults to 1e8 under accelerate launch)`,
    ),
    shardingStrategy: d(
      'reshard',
      'fsdp_sharding_strategy (FSDP1)',
      'FULL_SHARD',
      `${ACC_LAUNCH} (the launcher exports FULL_SHARD when the config omits it)`,
    ),
    reshardAfterForward: d('reshard', 'fsdp_reshard_after_forward (FSDP2)', true, ACC_PLUGIN),
    mixedPrecision: d(
      'precision',
      'mixed_precision',
      'no',
      `${ACC_LAUNCH} (a config without it: ClusterConfig.from_yaml_file gives None, which the launcher makes "no")`,
    ),
    activationCheckpointing: d('checkpointing', 'fsdp_activation_checkpointing', false, ACC_PLUGIN),
    cpuRamEfficientLoading: d(
      'loading',
      'fsdp_cpu_ram_efficient_loading',
      true,
      `${ACC_LAUNCH} (accelerate launch exports it as true)`,
    ),
    stateDictFsdp1: d('saving', 'fsdp_state_dict_type (FSDP1)', 'FULL_STATE_DICT', ACC_PLUGIN),
    stateDictFsdp2: d('saving', 'fsdp_state_dict_type (FSDP2)', 'SHARDED_STATE_DICT', ACC_PLUGIN),
  },
  Transformers: {
    precision: d(
      'precision',
      'bf16 / fp16',
      false,
      'transformers/training_args.py, TrainingArguments (no mixed precision unless bf16 or fp16 is set)',
    ),
    gradientCheckpointing: d(
      'checkpointing',
      'gradient_checkpointing',
      false,
      'transformers/training_args.py, TrainingArguments',
    ),
  },
  TRL: {
    bf16: d(
      'precision',
      'bf16 (SFTConfig)',
      true,
      'trl/trainer/sft_config.py, SFTConfig (bf16 on unless fp16 is set)',
    ),
    gradientCheckpointing: d(
      'checkpointing',
      'gradient_checkpointing (SFTConfig)',
      true,
      'trl/trainer/sft_config.py, SFTConfig',
    ),
  },
  axolotl: {
    fsdpVersion: d(
      'wrap',
      'fsdp_version',
      1,
      'axolotl/utils/schemas/validation.py, check_fsdp_version_in_fsdp_config',
    ),
  },
  torchtune: {
    dtype: d(
      'precision',
      'dtype',
      'bf16',
      'torchtune recipes, setup (cfg.dtype; the shipped configs write bf16)',
    ),
    cpuOffload: d(
      'loading',
      'fsdp_cpu_offload',
      false,
      'torchtune recipes, setup (cfg.get("fsdp_cpu_offload", False))',
    ),
    reshardAfterForward: d(
      'reshard',
      'fsdp_reshard_after_forward',
      true,
      'torchtune recipes, setup (cfg.get("fsdp_reshard_after_forward", True))',
    ),
  },
  'llm-foundry': {
    precision: d(
      'precision',
      'precision',
      'fp32',
      "composer/trainer/trainer.py, Trainer (precision not given: fp32, as Composer's numerics notes say)",
    ),
    mixedPrecision: d(
      'precision',
      'fsdp_config.mixed_precision',
      'DEFAULT',
      'composer/distributed/mosaic_parallelism.py, get_mixed_precision (FSDPConfig.mixed_precision "DEFAULT")',
    ),
  },
  Lightning: {
    shardingStrategy: d(
      'reshard',
      'sharding_strategy',
      'FULL_SHARD',
      'lightning/pytorch/strategies/fsdp.py, FSDPStrategy',
    ),
  },
  DeepSpeed: {
    stage: d(
      'reshard',
      'zero_optimization.stage',
      0,
      'deepspeed/runtime/zero/config.py, DeepSpeedZeroConfig (stage 0)',
    ),
  },
  torchtitan: {
    localBatchSize: d('sizes', 'training.local_batch_size', 8, TITAN),
    seqLen: d('sizes', 'training.seq_len', 2048, TITAN),
    dataParallelShardDegree: d('sizes', 'parallelism.data_parallel_shard_degree', -1, TITAN),
    dtype: d('precision', 'training.dtype', 'float32', TITAN),
    mixedPrecisionParam: d('precision', 'training.mixed_precision_param', 'bfloat16', TITAN),
    mixedPrecisionReduce: d('precision', 'training.mixed_precision_reduce', 'float32', TITAN),
    acMode: d('checkpointing', 'activation_checkpoint.mode', 'selective', TITAN),
    selectiveAcOption: d('checkpointing', 'activation_checkpoint.selective_ac_option', '2', TITAN),
  },
  verl: {
    nGpusPerNode: d('sizes', 'trainer.n_gpus_per_node', 8, VERL),
    nnodes: d('sizes', 'trainer.nnodes', 1, VERL),
    maxPromptLength: d('sizes', 'data.max_prompt_length', 512, VERL),
    maxResponseLength: d('sizes', 'data.max_response_length', 512, VERL),
    ppoMaxTokenLenPerGpu: d('sizes', 'actor.ppo_max_token_len_per_gpu', 16384, VERL),
    strategy: d('wrap', 'actor.strategy', 'fsdp', `${VERL} (fsdp is FSDP1; fsdp2 is FSDP2)`),
    modelDtype: d('precision', 'actor.fsdp_config.model_dtype', 'fp32', VERL),
    paramDtype: d('precision', 'actor.fsdp_config.dtype', 'bf16', VERL),
    reduceDtype: d(
      'precision',
      'actor.fsdp_config.mixed_precision.reduce_dtype',
      'fp32',
      'verl/workers/fsdp_workers.py, _build_model_optimizer (reduce_dtype fp32 unless mixed_precision says)',
    ),
    gradientCheckpointing: d(
      'checkpointing',
      'actor_rollout_ref.model.enable_gradient_checkpointing',
      true,
      VERL,
    ),
    gpuMemoryUtilization: d('loading', 'rollout.gpu_memory_utilization', 0.5, VERL),
    criticGradientCheckpointing: d('checkpointing', 'critic.model.enable_gradient_checkpointing', true, VERL),
    criticPpoMaxTokenLenPerGpu: d('sizes', 'critic.ppo_max_token_len_per_gpu', 32768, VERL),
  },
} as const;

/** The table as Markdown: one section per framework, its defaults by topic with their sources. */
export function renderDefaultsDoc(): string {
  const out = [
    '# What each framework does where its configuration is silent',
    '',
    'Generated from `src/core/frameworks/defaults.ts` (`fsdp-lens defaults --markdown`): the defaults the',
    'configuration readers apply, each labelled a default wherever an estimate uses it, with the place in the',
    "framework's source that sets it.",
    '',
  ];
  for (const [framework, table] of Object.entries(DEFAULTS)) {
    out.push(`## ${framework}`, '', '| topic | key | default | source |', '| --- | --- | --- | --- |');
    for (const e of Object.values(table) as FrameworkDefault[])
      out.push(`| ${e.topic} | \`${e.key}\` | \`${String(e.value)}\` | ${e.source} |`);
    out.push('');
  }
  return out.join('\n');
}
