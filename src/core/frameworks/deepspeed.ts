/** DeepSpeed ZeRO configs read as the FSDP plan each stage corresponds to, for comparison. */
import { DEFAULTS } from './defaults';
import { at, bool, countSetting, isRecord, setupFrom, num, str, type ConfigDoc } from './configDoc';
import type { FrameworkPlan, FrameworkProblem } from './types';

/** A DeepSpeed config: a `zero_optimization` section. */
export function isDeepSpeed(doc: ConfigDoc): boolean {
  return doc.format === 'json' && isRecord(doc.data.zero_optimization);
}

/**
 * A DeepSpeed ZeRO config shown as the FSDP plan it corresponds to, for comparison: stage 3 shards parameters,
 * gradients and optimizer state (FULL_SHARD, a unit per block as FSDP would wrap it), stage 2 gradients and
 * optimizer state (SHARD_GRAD_OP keeps the gathered parameters through the step, as ZeRO-2 keeps its working
 * copy), stages 0 and 1 nothing FSDP models (NO_SHARD; stage 1's sharded optimizer state is noted).
 */
export function deepspeedPlan(doc: ConfigDoc): FrameworkPlan | FrameworkProblem {
  const d = doc.data;
  const file = doc.file;
  const range = doc.rangeOf(['zero_optimization']);
  const stage = num(at(d, ['zero_optimization', 'stage'])) ?? DEFAULTS.DeepSpeed.stage.value;
  if (![0, 1, 2, 3].includes(stage))
    return {
      framework: 'DeepSpeed',
      file,
      range,
      message: `zero_optimization.stage ${stage} is not 0, 1, 2 or 3`,
    };
  const { values, details, keys, set } = setupFrom(doc);
  const notes = [`DeepSpeed ZeRO stage ${stage}, shown as the FSDP plan it corresponds to`];
  // "auto" leaves the value to the Transformers Trainer that fills it in.
  const count = (key: string) => {
    const v = at(d, [key]);
    return v === 'auto' ? undefined : countSetting(v, key, notes, 'the default used');
  };
  set('microBatch', count('train_micro_batch_size_per_gpu'), ['train_micro_batch_size_per_gpu']);
  set('gradAccum', count('gradient_accumulation_steps'), ['gradient_accumulation_steps']);
  // `train_batch_size` = micro-batch x accumulation x data-parallel GPUs (DeepSpeedConfig
  // `_configure_train_batch_size`): the accumulation follows from it when it is not given.
  set('globalBatch', count('train_batch_size'), ['train_batch_size']);
  const bf16 = bool(at(d, ['bf16', 'enabled'])) === true;
  const fp16 = bool(at(d, ['fp16', 'enabled'])) === true;
  // `"enabled": "auto"` is filled by Transformers' Trainer from its own bf16/fp16 (`HfTrainerDeepSpeedConfig
  // .trainer_config_process`): not known from this file.
  const auto = ['bf16', 'fp16'].filter((k) => at(d, [k, 'enabled']) === 'auto');
  if (auto.length && !bf16 && !fp16)
    notes.push(
      `${auto.map((k) => `${k}.enabled: "auto" (${doc.where([k, 'enabled'])})`).join(', ')}: the Trainer's own bf16/fp16 decides, which this file does not say; the default precision is used`,
    );
  else {
    // Low-precision working weights with fp32 master weights and optimizer state; gradients reduced in that dtype.
    const low = bf16 ? 'bfloat16' : fp16 ? 'float16' : null;
    set('masterDtype', 'float32', [bf16 ? 'bf16' : 'fp16']);
    set('paramDtype', low, [bf16 ? 'bf16' : 'fp16']);
    set('reduceDtype', low, [bf16 ? 'bf16' : 'fp16']);
  }
  const offParam = str(at(d, ['zero_optimization', 'offload_param', 'device'])) ?? 'none';
  const offOpt = str(at(d, ['zero_optimization', 'offload_optimizer', 'device'])) ?? 'none';
  return zeroPlan(file, range, stage, offParam, offOpt, { values, details, keys }, notes);
}

/**
 * The FSDP plan of ZeRO stage `stage` with the inputs a DeepSpeed config sets: its strategy and offload, with what
 * does not correspond noted.
 */
function zeroPlan(
  file: string,
  range: FrameworkPlan['range'],
  stage: number,
  offParam: string,
  offOpt: string,
  setup: Pick<FrameworkPlan, 'values' | 'details' | 'keys'>,
  notes: string[],
): FrameworkPlan {
  if (offOpt !== 'none' && offParam === 'none')
    notes.push(
      `offload_optimizer to ${offOpt} alone is not modelled: FSDP offloads parameters, gradients and optimizer state together`,
    );
  if (stage === 1)
    notes.push(
      'ZeRO-1 also shards the optimizer state, which NO_SHARD keeps whole: the figures overstate it',
    );
  if (stage === 2)
    notes.push(
      'ZeRO-2 keeps a whole low-precision copy of the weights on every GPU; SHARD_GRAD_OP frees it after backward',
    );
  return {
    framework: 'DeepSpeed',
    file,
    range,
    api: 'fsdp1',
    strategy: stage === 3 ? 'FULL_SHARD' : stage === 2 ? 'SHARD_GRAD_OP' : 'NO_SHARD',
    wrap: { kind: 'policy', classes: null },
    reshardAfterForward: null,
    offload: offParam !== 'none' && stage === 3,
    ...setup,
    notes,
    traps: [],
  };
}

/** An Accelerate config that launches DeepSpeed: `distributed_type: DEEPSPEED` with a `deepspeed_config` section. */
export function isAccelerateDeepSpeed(doc: ConfigDoc): boolean {
  return (
    (doc.format === 'yaml' || doc.format === 'json') &&
    str(doc.data.distributed_type)?.toUpperCase() === 'DEEPSPEED'
  );
}

/**
 * An Accelerate DeepSpeed config as the FSDP plan its ZeRO stage corresponds to. `accelerate launch` exports its
 * `deepspeed_config` keys (`zero_stage`, `offload_param_device`, `offload_optimizer_device`,
 * `gradient_accumulation_steps`) and the top-level `mixed_precision` and `num_processes`, which `DeepSpeedPlugin`
 * turns into the DeepSpeed config (accelerate/utils/dataclasses.py). A `deepspeed_config_file` holds the settings
 * instead: that JSON is the one to estimate.
 */
export function accelerateDeepSpeedPlan(doc: ConfigDoc): FrameworkPlan | FrameworkProblem {
  const d = doc.data;
  const file = doc.file;
  const ds = isRecord(d.deepspeed_config) ? d.deepspeed_config : {};
  const range = doc.rangeOf(['distributed_type']);
  const jsonFile = str(ds.deepspeed_config_file);
  if (jsonFile)
    return {
      framework: 'DeepSpeed',
      file,
      range,
      message: `an Accelerate config that launches DeepSpeed with its settings in ${jsonFile} (${doc.where(['deepspeed_config', 'deepspeed_config_file'])}): estimate that JSON for the FSDP plan its ZeRO stage corresponds to${d.num_processes !== undefined ? `, with --world-size ${String(d.num_processes)} (num_processes at ${doc.where(['num_processes'])})` : ''}`,
    };
  const stageAt = ['deepspeed_config', 'zero_stage'];
  const stage = num(ds.zero_stage);
  if (stage === undefined || ![0, 1, 2, 3].includes(stage))
    return {
      framework: 'DeepSpeed',
      file,
      range,
      message: `an Accelerate config that launches DeepSpeed without a ZeRO stage of 0 to 3 (deepspeed_config.zero_stage${ds.zero_stage === undefined ? ' is not set' : ` ${String(ds.zero_stage)} at ${doc.where(stageAt)}`})`,
    };
  const { values, details, keys, set } = setupFrom(doc);
  const notes = [
    `Accelerate launching DeepSpeed ZeRO stage ${stage} (${doc.where(stageAt)}), shown as the FSDP plan it corresponds to`,
  ];
  const procs = countSetting(d.num_processes, 'num_processes', notes, 'the world size is not read from it');
  set('worldSize', procs, ['num_processes']);
  set(
    'gradAccum',
    countSetting(ds.gradient_accumulation_steps, 'gradient_accumulation_steps', notes, 'the default used'),
    ['deepspeed_config', 'gradient_accumulation_steps'],
  );
  // `mixed_precision` bf16/fp16: DeepSpeed's bf16/fp16 section, low-precision weights over fp32 master weights.
  const mp = str(d.mixed_precision)?.toLowerCase();
  const low = mp === 'bf16' ? 'bfloat16' : mp === 'fp16' ? 'float16' : null;
  if (mp !== undefined) {
    set('masterDtype', 'float32', ['mixed_precision']);
    set('paramDtype', low, ['mixed_precision']);
    set('reduceDtype', low, ['mixed_precision']);
  }
  const offParam = str(ds.offload_param_device) ?? 'none';
  const offOpt = str(ds.offload_optimizer_device) ?? 'none';
  return zeroPlan(file, range, stage, offParam, offOpt, { values, details, keys }, notes);
}
