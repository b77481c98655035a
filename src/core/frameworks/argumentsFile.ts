/**
 * A Transformers / TRL argument file: the YAML or JSON that `HfArgumentParser.parse_yaml_file` / `parse_json_file`
 * and TRL's `TrlParser` (`--config recipe.yaml`) read into the model, script and training arguments. With `fsdp`
 * set it is the Trainer's FSDP plan; without, FSDP comes from the Accelerate config the job is launched with, and
 * the file says so with what it sets.
 */
import type { FrameworkCallFact } from '../analysis/facts';
import type { PlainValue } from '../python/plain';
import type { VersionPin } from '../vocabulary/versions';
import type { FineTune } from '../model/finetune';
import type { SetupValues } from '../inputs/table';
import { inputSpec } from '../inputs/table';
import { isRecord, str, type ConfigDoc } from './configDoc';
import { trainingArgumentsPlan, trainingArgumentValues } from './transformers';
import type { FrameworkPlan, FrameworkProblem } from './types';

/** TrainingArguments fields an argument file sets (any two of them, with the model, make one). */
const TRAINING_KEYS = [
  'output_dir',
  'per_device_train_batch_size',
  'learning_rate',
  'num_train_epochs',
  'gradient_checkpointing',
  'gradient_accumulation_steps',
  'bf16',
  'max_steps',
  'lr_scheduler_type',
  'logging_steps',
];

/** An argument file: a model (`model_name_or_path`) and TrainingArguments fields, and no framework's own keys. */
export function isArgumentsFile(doc: ConfigDoc): boolean {
  const d = doc.data;
  return (
    (doc.format === 'yaml' || doc.format === 'json') &&
    typeof d.model_name_or_path === 'string' &&
    TRAINING_KEYS.filter((k) => d[k] !== undefined).length >= 2 &&
    d.distributed_type === undefined &&
    d.base_model === undefined &&
    !isRecord(d.model)
  );
}

/** TRL's argument files name the model's dtype and TRL's own sequence keys; Transformers' do not. */
function isTrl(d: Record<string, unknown>): boolean {
  return ['max_seq_length', 'max_length', 'packing', 'dataset_mixture', 'dataset_name', 'beta'].some(
    (k) => d[k] !== undefined,
  );
}

/**
 * TRL's ModelConfig adapter keys: `use_peft` with `lora_r` (16 by default) and `lora_target_modules` (a list, or
 * one name such as `all-linear`), a 4-bit base with `load_in_4bit`.
 */
function adapterOf(
  d: Record<string, unknown>,
): { rank: number; targets?: string[]; nf4: boolean } | undefined {
  if (d.use_peft !== true) return undefined;
  const one = str(d.lora_target_modules);
  const targets = Array.isArray(d.lora_target_modules)
    ? d.lora_target_modules.map(String)
    : one
      ? [one]
      : undefined;
  return {
    rank: typeof d.lora_r === 'number' ? d.lora_r : 16,
    ...(targets ? { targets } : {}),
    nf4: d.load_in_4bit === true,
  };
}

/**
 * What a script's own flags (`--key value` on a launch line, read as HfArgumentParser reads them) say of an adapter:
 * TRL's `ModelConfig` names (`use_peft`, `lora_r`, `lora_target_modules`, `load_in_4bit`) as the fine-tuning they
 * make; other flags that name LoRA, PEFT or quantisation (a script's own dataclass, `--use_peft_lora True`,
 * `--use_4bit_quantization True`) as words, since what the script builds from them is not read. A switch written
 * off (`--use_peft_lora False`) says no adapter.
 */
export function scriptAdapterFlags(kwargs: Record<string, PlainValue>): {
  fineTune?: FineTune;
  unread?: string;
} {
  const adapter = adapterOf(kwargs);
  if (adapter?.targets)
    return {
      fineTune: {
        lora: { rank: adapter.rank, targets: adapter.targets },
        ...(adapter.nf4 ? { baseDtype: 'nf4' as const, quantizer: 'bitsandbytes' as const } : {}),
      },
    };
  const words = /lora|peft|adapter|4bit|8bit|quant|qlora|gptq|awq/i;
  const isSwitch = (k: string) => /^(use|load_in|enable)_/.test(k) && words.test(k);
  const on = (v: PlainValue) => v !== false && v !== 0 && !/^(none|no|false|0)$/i.test(String(v));
  const keys = Object.keys(kwargs).filter((k) => words.test(k) && !/dtype$/.test(k));
  const switches = keys.filter(isSwitch);
  const shown = switches.length ? switches.filter((k) => on(kwargs[k]!)) : keys;
  if (!shown.length) return {};
  const written = (v: PlainValue) => (typeof v === 'boolean' ? (v ? 'True' : 'False') : String(v));
  return { unread: shown.map((k) => `--${k} ${written(kwargs[k]!)}`).join(', ') };
}

/** The undecided condition of a job whose script reads adapter or quantisation flags of its own (`unread`). */
export function adapterUndecided(unread: string, where: string): string {
  return `whether the script trains an adapter or loads the model quantised: its own flags ${unread} (at ${where}) are not read, and the figures are a full fine-tune's`;
}

/**
 * What an argument file gives the job it configures: the model, the training inputs (batch, sequence,
 * accumulation, checkpointing, precision) and TRL's adapter (`use_peft`, `lora_r`, `lora_target_modules`,
 * `load_in_4bit`).
 */
export function argumentsFileInputs(doc: ConfigDoc): {
  model: { id: string; where: string };
  values: SetupValues;
  details: FrameworkPlan['details'];
  fineTune?: FineTune;
} {
  const d = doc.data;
  const { values, details } = trainingArgumentValues(callOf(doc), doc.file);
  const adapter = adapterOf(d);
  return {
    model: { id: d.model_name_or_path as string, where: doc.where(['model_name_or_path']) },
    values,
    details,
    ...(adapter?.targets
      ? {
          fineTune: {
            lora: { rank: adapter.rank, targets: adapter.targets },
            ...(adapter.nf4 ? { baseDtype: 'nf4' as const, quantizer: 'bitsandbytes' as const } : {}),
          },
        }
      : {}),
  };
}

function callOf(doc: ConfigDoc): FrameworkCallFact {
  const d = doc.data;
  const kwargLines: Record<string, number> = {};
  for (const k of Object.keys(d)) kwargLines[k] = (doc.line([k]) ?? 0) + 1;
  return {
    kind: 'TrainingArguments',
    callee: isTrl(d) ? 'trl.SFTConfig' : 'transformers.TrainingArguments',
    line: 1,
    range: doc.rangeOf([]),
    kwargs: d as Record<string, PlainValue>,
    kwargLines,
  };
}

export function argumentsFilePlan(
  doc: ConfigDoc,
  versions: { transformers?: VersionPin; accelerate?: VersionPin } = {},
): FrameworkPlan | FrameworkProblem {
  const d = doc.data;
  const call = callOf(doc);
  const model = d.model_name_or_path as string;
  const plan = trainingArgumentsPlan(call, doc.file, versions);
  if (plan) {
    // `TrainingArguments.gradient_checkpointing`: the Trainer calls `gradient_checkpointing_enable()`.
    plan.checkpointingKey = { path: ['gradient_checkpointing'], value: true };
    const seqKey = ['max_seq_length', 'max_length'].find((k) => d[k] !== undefined) ?? 'max_length';
    const editable = {
      microBatch: 'per_device_train_batch_size',
      gradAccum: 'gradient_accumulation_steps',
      ...(isTrl(d) ? { seqLen: seqKey } : {}),
    };
    plan.keys = Object.fromEntries(
      Object.entries(editable)
        .filter(([, key]) => d[key] === undefined || typeof d[key] === 'number')
        .map(([input, key]) => [input, [key]]),
    );
    plan.model = {
      id: model,
      source: { kind: 'config', detail: `model_name_or_path at ${doc.where(['model_name_or_path'])}` },
    };
    if (typeof d.fsdp_config === 'string')
      plan.notes.push(
        `fsdp_config: ${d.fsdp_config} (${doc.where(['fsdp_config'])}) names a file that is not read from here: its settings are left at Transformers' defaults`,
      );
    return plan;
  }
  // No FSDP of its own: what it sets, as the flags that give it to an estimate of the launch's Accelerate config
  // (only what the file writes: a trainer's default is the launched job's to say).
  const { values, details } = trainingArgumentValues(call, doc.file);
  const flags = [`--model ${model}`];
  for (const key of ['microBatch', 'seqLen', 'gradAccum', 'checkpointing'] as const) {
    const v = values[key];
    const flag = inputSpec(key).flag;
    if (v !== undefined && flag && !/default/i.test(details[key] ?? ''))
      flags.push(`--${flag.name} ${String(v)}`);
  }
  const adapter = adapterOf(d);
  if (adapter) {
    flags.push(`--lora-rank ${adapter.rank}`);
    if (adapter.targets) flags.push(`--lora-targets ${adapter.targets.join(',')}`);
  }
  if (d.load_in_4bit === true) flags.push('--base-dtype nf4');
  const dtype = str(d.torch_dtype) ?? str(d.dtype);
  // fms-hf-tuning's job config: `accelerate_launch_args` are the flags its launcher passes to `accelerate launch`.
  const launch = isRecord(d.accelerate_launch_args) ? d.accelerate_launch_args : undefined;
  const launchConfig = launch ? str(launch.config_file) : undefined;
  if (launch && (launch.use_fsdp === true || launchConfig))
    return {
      framework: isTrl(d) ? 'TRL' : 'Transformers',
      file: doc.file,
      range: doc.rangeOf(['accelerate_launch_args']),
      message: `a job config (model ${model}) whose accelerate_launch_args at ${doc.where(['accelerate_launch_args'])} launch it${launch.use_fsdp === true ? ' with FSDP' : ''}${launchConfig ? ` and the Accelerate config ${launchConfig}` : ''}, which are not read here: estimate ${launchConfig ? 'that config' : 'the Accelerate config it is launched with'} with ${flags.join(' ')}`,
    };
  return {
    framework: isTrl(d) ? 'TRL' : 'Transformers',
    file: doc.file,
    range: doc.rangeOf(['model_name_or_path']),
    message: `a ${isTrl(d) ? 'TRL' : 'Transformers'} argument file (model ${model}${dtype ? `, loaded in ${dtype}` : ''}) that sets no FSDP (no fsdp key): FSDP comes from the Accelerate config the job is launched with (accelerate launch --config_file ...); estimate that config with ${flags.join(' ')}`,
  };
}
