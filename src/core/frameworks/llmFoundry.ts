/** llm-foundry's training YAML (run by Composer's Trainer): the Hugging Face model, its FSDP config, batch, precision. */
import { DEFAULTS } from './defaults';
import type { OptimizerFamily } from '../inputs/parse';
import type { FineTune } from '../model/finetune';
import type { ShardingStrategyName } from '../vocabulary/fsdp';
import { SHARDING_STRATEGIES } from '../vocabulary/fsdp';
import { at, bool, countSetting, isRecord, setupFrom, str, strList, type ConfigDoc } from './configDoc';
import type { FrameworkPlan, FrameworkProblem } from './types';

/** The model names llm-foundry's registry builds (`llmfoundry/registry.py` models). */
const HF_MODELS = ['hf_causal_lm'];
/** Names it builds that fsdp-lens does not estimate, and why. */
const OTHER_MODELS: Record<string, string> = {
  mpt_causal_lm: "llm-foundry's own MPT architecture, which fsdp-lens does not know",
  hf_t5: 'an encoder-decoder (T5), which fsdp-lens does not estimate',
};

/** An llm-foundry training YAML: `model.name` from its registry and the Trainer's keys around it. */
export function isLlmFoundry(doc: ConfigDoc): boolean {
  const d = doc.data;
  const name = str(at(d, ['model', 'name']));
  return (
    doc.format === 'yaml' &&
    !!name &&
    (HF_MODELS.includes(name) || name in OTHER_MODELS) &&
    (d.train_loader !== undefined || d.max_duration !== undefined || d.fsdp_config !== undefined)
  );
}

/** OmegaConf's `${a.b}` interpolation of a whole value, followed a few steps (llm-foundry's `variables:`). */
function resolved(doc: ConfigDoc, v: unknown): unknown {
  for (let step = 0; step < 8 && typeof v === 'string'; step++) {
    const m = /^\$\{([\w.]+)\}$/.exec(v.trim());
    if (!m) break;
    v = at(doc.data, m[1]!.split('.'));
  }
  return typeof v === 'string' && /\$\{/.test(v) ? undefined : v;
}

const OPTIMIZERS: [RegExp, OptimizerFamily][] = [
  [/^decoupled_adamw$|^adamw$/, 'adamw'],
  [/^adam$/, 'adam'],
  [/^decoupled_sgdw$|^sgd$/, 'sgd-momentum'],
];

/**
 * An llm-foundry YAML as the FSDP plan Composer builds. For `hf_causal_lm`, `prepare_hf_causal_lm_model_for_fsdp`
 * (llmfoundry/models/hf/hf_fsdp.py) sets `fsdp_wrap_fn` to the decoder block class and, for a PEFT model, marks
 * each LoRA matrix `_fsdp_wrap`; Composer's FSDP1 auto-wrap (`prepare_fsdp_module`) wraps those and the root
 * (FSDP2 only with `FSDP_VERSION=2` in the environment, `Trainer._parse_parallelism_config`). `FSDPConfig`'s
 * defaults: FULL_SHARD, mixed precision DEFAULT (parameters in the `precision` dtype, gradients reduced in fp32;
 * PURE reduces in that dtype too, FULL keeps fp32: `get_mixed_precision`), no forward prefetch, and activation
 * checkpointing of the same blocks when `activation_checkpointing` is set. The weights load in fp32
 * (`_MASTER_WEIGHTS_PRECISION`). Micro-batches are not `no_sync`ed under FSDP: each reduce-scatters.
 */
export function llmFoundryPlan(doc: ConfigDoc): FrameworkPlan | FrameworkProblem {
  const d = doc.data;
  const file = doc.file;
  const name = str(at(d, ['model', 'name']))!;
  const range = doc.rangeOf(['model']);
  if (!HF_MODELS.includes(name))
    return {
      framework: 'llm-foundry',
      file,
      range,
      message: `model ${name} is ${OTHER_MODELS[name]}; hf_causal_lm with a Hugging Face model is read`,
    };
  const fsdp = d.fsdp_config;
  if (!isRecord(fsdp))
    return {
      framework: 'llm-foundry',
      file,
      range: doc.rangeOf([]),
      message: 'no fsdp_config: Composer trains this config with DDP, not FSDP',
    };
  const id = str(resolved(doc, at(d, ['model', 'pretrained_model_name_or_path'])));
  const notes = ['llm-foundry: FSDP1 through Composer (FSDP2 only with FSDP_VERSION=2 set)'];
  const unmodelled: string[] = [];
  const { values, details, keys, set } = setupFrom(doc);
  const value = (path: string[]) => resolved(doc, at(d, path));
  const count = (path: string[]) => countSetting(value(path), path.join('.'), notes, 'the default used');

  const micro = value(['device_train_microbatch_size']);
  if (micro === 'auto')
    notes.push(
      `device_train_microbatch_size: auto (${doc.where(['device_train_microbatch_size'])}): Composer finds the micro-batch by trying; the default 1 is used`,
    );
  else set('microBatch', count(['device_train_microbatch_size']), ['device_train_microbatch_size']);
  set('seqLen', count(['max_seq_len']), ['max_seq_len']);
  // Composer's micro-batches per step: `device_train_batch_size` (global / world size) over the micro-batch,
  // rounded up, once the world size is known.
  set('globalBatch', count(['global_train_batch_size']), ['global_train_batch_size']);
  values.syncEveryMicroBatch = true;
  details.syncEveryMicroBatch = "Composer's FSDP micro-batches (no no_sync)";

  // Precision: `precision` names the autocast dtype, `fsdp_config.mixed_precision` what FSDP gathers and reduces in.
  const precision = str(value(['precision'])) ?? DEFAULTS['llm-foundry'].precision.value;
  const low = /bf16/.test(precision) ? 'bfloat16' : /fp16/.test(precision) ? 'float16' : null;
  const mp = str(fsdp.mixed_precision)?.toUpperCase() ?? DEFAULTS['llm-foundry'].mixedPrecision.value;
  const mpWhere = fsdp.mixed_precision !== undefined ? ['fsdp_config', 'mixed_precision'] : ['precision'];
  set('masterDtype', 'float32', ['model']);
  details.masterDtype = `llm-foundry loads the weights in fp32 (${doc.where(['model'])})`;
  if (mp === 'FULL' || !low) {
    set('paramDtype', null, mpWhere);
    set('reduceDtype', null, mpWhere);
  } else if (mp === 'PURE') {
    set('paramDtype', low, mpWhere);
    set('reduceDtype', low, mpWhere);
  } else if (mp === 'DEFAULT') {
    set('paramDtype', low, mpWhere);
    set('reduceDtype', 'float32', mpWhere);
  } else notes.push(`mixed_precision ${mp} (${doc.where(mpWhere)}) is not one Composer names: not read`);

  const ac = bool(fsdp.activation_checkpointing);
  if (ac !== undefined)
    set('checkpointing', ac ? 'full' : 'none', ['fsdp_config', 'activation_checkpointing']);
  if (bool(fsdp.forward_prefetch) === true) set('forwardPrefetch', true, ['fsdp_config', 'forward_prefetch']);
  // Activations offloaded to the CPU leave the GPU; the figures keep them there.
  if (bool(fsdp.activation_cpu_offload) === true)
    set('activationOffload', true, ['fsdp_config', 'activation_cpu_offload']);
  if (bool(fsdp.cpu_offload) === true)
    notes.push(
      `cpu_offload at ${doc.where(['fsdp_config', 'cpu_offload'])}: Composer raises "FSDP CPU Offload not supported yet" (get_cpu_offload)`,
    );
  const written = str(fsdp.sharding_strategy)?.toUpperCase();
  const strategy: ShardingStrategyName = (SHARDING_STRATEGIES as readonly string[]).includes(written ?? '')
    ? (written as ShardingStrategyName)
    : 'FULL_SHARD';
  if (written && strategy !== written)
    notes.push(`sharding_strategy ${written} is not one FSDP has: FULL_SHARD, the default, used`);
  const shardDegree = count(['fsdp_config', 'data_parallel_shard_degree']);
  const replicate = count(['fsdp_config', 'data_parallel_replicate_degree']);
  if (replicate && replicate > 1) {
    set('replicas', replicate, ['fsdp_config', 'data_parallel_replicate_degree']);
    if (shardDegree) set('worldSize', shardDegree * replicate, ['fsdp_config', 'data_parallel_shard_degree']);
  }
  if (isRecord(d.tp_config)) unmodelled.push(`tensor parallelism (tp_config at ${doc.where(['tp_config'])})`);

  const optimizer = str(value(['optimizer', 'name']));
  const family = optimizer && OPTIMIZERS.find(([re]) => re.test(optimizer))?.[1];
  if (family) set('optimizer', family, ['optimizer', 'name']);
  else if (optimizer)
    notes.push(
      `optimizer ${optimizer} (${doc.where(['optimizer', 'name'])}) is not one fsdp-lens models: AdamW's two states assumed`,
    );

  let fineTune: FineTune | undefined;
  const peft = at(d, ['model', 'peft_config']);
  if (isRecord(peft)) {
    const targets = strList(peft.target_modules) ?? [];
    const rank = countSetting(peft.r, 'model.peft_config.r', notes, 'rank 8, PEFT’s default') ?? 8;
    if (targets.length) {
      fineTune = { lora: { rank, targets } };
      notes.push(`LoRA rank ${rank} on ${targets.join(', ')} (model.peft_config), each LoRA matrix a unit`);
    } else
      notes.push(
        'model.peft_config names no target_modules: PEFT’s defaults for the architecture apply, which are not read; estimated without LoRA',
      );
  }
  return {
    framework: 'llm-foundry',
    file,
    range,
    api: 'fsdp1',
    strategy,
    wrap: { kind: 'policy', classes: null, ...(fineTune ? { trainableLeaves: true } : {}) },
    reshardAfterForward: null,
    offload: false,
    values,
    details,
    keys,
    // Composer's `activation_checkpointing` checkpoints the modules the model's `activation_checkpointing_fn`
    // picks: its blocks.
    checkpointingKey: { path: ['fsdp_config', 'activation_checkpointing'], value: true },
    ...(id
      ? {
          model: {
            id,
            source: {
              kind: 'config' as const,
              detail: `model.pretrained_model_name_or_path at ${doc.where(['model', 'pretrained_model_name_or_path'])}`,
            },
          },
        }
      : {}),
    ...(fineTune ? { fineTune } : {}),
    notes,
    ...(unmodelled.length ? { unmodelled } : {}),
    traps: [],
  };
}
