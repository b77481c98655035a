/** torchtune's recipe YAML: the model component, custom sharded layers, dtype, batch, checkpointing, LoRA. */
import { DEFAULTS } from './defaults';
import type { OptimizerFamily } from '../inputs/parse';
import type { FineTune } from '../model/finetune';
import { at, bool, countSetting, isRecord, setupFrom, str, strList, type ConfigDoc } from './configDoc';
import { gemmaNative, TUNE_GEMMA } from './gemmaNative';
import { llamaNative, TUNE_MODELS } from './llamaNative';
import type { FrameworkPlan, FrameworkProblem } from './types';

/** A torchtune recipe config: `model._component_` naming one of torchtune's model builders. */
export function isTorchtune(doc: ConfigDoc): boolean {
  const c = str(at(doc.data, ['model', '_component_']));
  return doc.format === 'yaml' && !!c && /^torchtune\.models\./.test(c);
}

const OPTIMIZERS: [RegExp, OptimizerFamily][] = [
  [/AdamW8bit|Adam8bit|PagedAdamW8bit/i, 'adam8bit'],
  [/AdamW$/, 'adamw'],
  [/Adam$/, 'adam'],
  [/SGD$/, 'sgd'],
  [/Adafactor/i, 'adafactor'],
];

/**
 * A torchtune distributed recipe config (full_finetune_distributed, lora_finetune_distributed) as an FSDP2 plan.
 * torchtune's `shard_model` calls `fully_shard` on every `layers.<i>` and on each module named in
 * `custom_sharded_layers`, then on the root; it passes no mixed-precision policy, so parameters, gradients and
 * optimizer state are all in `dtype` (bf16 by default), and every micro-batch reduce-scatters.
 */
export function torchtunePlan(doc: ConfigDoc): FrameworkPlan | FrameworkProblem {
  const d = doc.data;
  const component = str(at(d, ['model', '_component_']))!;
  const file = doc.file;
  const range = doc.rangeOf(['model']);
  const launch = launchComment(doc);
  // A single-device recipe (`full_finetune_single_device`, `lora_finetune_single_device`: the config's launch
  // line, or the `_single_device` config torchtune names it by) trains on one GPU without FSDP.
  const single =
    (launch && /_single_device$/.test(launch.recipe)) || /_single_device\.ya?ml$/.test(file)
      ? launch
      : undefined;
  const singleWhere = single
    ? `${single.recipe} trains on one GPU without FSDP (${single.where})`
    : /_single_device\.ya?ml$/.test(file)
      ? 'a _single_device config: one GPU without FSDP'
      : undefined;
  const builder = component.split('.').pop()!;
  const lora = /^(q)?lora_/.exec(builder);
  const base = builder.replace(/^q?lora_/, '');
  // Own keys only: a component named `toString` is no builder.
  const gemma = Object.hasOwn(TUNE_GEMMA, base) ? TUNE_GEMMA[base] : undefined;
  const llama = Object.hasOwn(TUNE_MODELS, base) ? TUNE_MODELS[base] : undefined;
  const dims = llama ?? (gemma ? { tied: true, hf: gemma.hf } : undefined);
  // torchtune's Llama 4 (torchtune/models/llama4/_model_builders.py): `EarlyFusionModel` of a vision encoder and
  // a MoE decoder, with its own module names, and its configs shard it with torchtune's tensor parallel plan.
  const llama4 = /^llama4_(scout|maverick)_17b_(16|128)e$/.exec(base);
  if (llama4) {
    const tp = at(d, ['tensor_parallel_dim']);
    return {
      framework: 'torchtune',
      file,
      range,
      message:
        `model component ${component} is torchtune's Llama 4, an early-fusion model (a vision encoder beside a MoE decoder, torchtune's EarlyFusionModel) that fsdp-lens does not read` +
        (typeof tp === 'number' && tp > 1
          ? `; the config also shards it with tensor parallelism (tensor_parallel_dim ${tp}, ${doc.where(['tensor_parallel_dim'])}), which is not modelled for torchtune`
          : '') +
        `. The Hugging Face release is in the catalog: meta-llama/Llama-4-${llama4[1] === 'scout' ? 'Scout' : 'Maverick'}-17B-${llama4[2]}E (--model), whose MoE activations are not modelled`,
    };
  }
  if (!dims)
    return {
      framework: 'torchtune',
      file,
      range,
      message: `model component ${component} is not one fsdp-lens knows (${[...Object.keys(TUNE_MODELS), ...Object.keys(TUNE_GEMMA)].join(', ')})`,
    };
  const notes: string[] = [];
  const { values, details, keys, set } = setupFrom(doc);
  // A count torchtune could not use (2.5, -1, "many") is noted and left to the default.
  const count = (path: string[], fallback = 'the default used') =>
    countSetting(at(d, path), path.join('.'), notes, fallback);
  const dtype = str(at(d, ['dtype'])) ?? DEFAULTS.torchtune.dtype.value;
  const master = dtype === 'fp32' || dtype === 'float32' ? 'float32' : 'bfloat16';
  set('masterDtype', master, ['dtype']);
  // No MixedPrecisionPolicy: gathered and reduced in the parameters' own dtype.
  values.paramDtype = null;
  values.reduceDtype = null;
  details.paramDtype = `${doc.where(['dtype'])} (no mixed-precision policy)`;
  set('microBatch', count(['batch_size']), ['batch_size']);
  set('gradAccum', count(['gradient_accumulation_steps']), ['gradient_accumulation_steps']);
  values.syncEveryMicroBatch = true;
  set('seqLen', count(['tokenizer', 'max_seq_len']), ['tokenizer', 'max_seq_len']);
  const ac = bool(at(d, ['enable_activation_checkpointing']));
  if (ac !== undefined) set('checkpointing', ac ? 'full' : 'none', ['enable_activation_checkpointing']);
  const optimizer = str(at(d, ['optimizer', '_component_']));
  const family = optimizer && OPTIMIZERS.find(([re]) => re.test(optimizer))?.[1];
  if (family) set('optimizer', family, ['optimizer', '_component_']);
  if (optimizer && /(^|\.)Paged\w+$/.test(optimizer))
    set('pagedOptimizer', true, ['optimizer', '_component_']);
  if (bool(at(d, ['optimizer', 'fused'])) === true) set('optimizerImpl', 'fused', ['optimizer', 'fused']);
  const shardDim = at(d, ['data_parallel_shard_dim']) === -1 ? undefined : count(['data_parallel_shard_dim']);
  const replicateDim = count(['data_parallel_replicate_dim'], 'the default 1 used') ?? 1;
  if (shardDim) set('worldSize', shardDim * replicateDim, ['data_parallel_shard_dim']);
  // The config's own launch line (`tune run --nproc_per_node 8 lora_finetune_distributed --config ...`): one node
  // of that many processes, unless the job is launched otherwise (a launch file, a flag, a setting).
  const hint = launch
    ? `${(launch.nodes ?? 1) > 1 ? '--nnodes x ' : ''}--nproc_per_node in the config's launch comment (${launch.where})`
    : '';
  if (singleWhere) {
    values.worldSize = 1;
    values.gpusPerNode = 1;
    details.worldSize = details.gpusPerNode = singleWhere;
    notes.push(`torchtune: ${singleWhere}`);
  }
  const suggested: FrameworkPlan['suggested'] =
    launch?.nproc && !shardDim && !singleWhere
      ? {
          values: { worldSize: launch.nproc * (launch.nodes ?? 1), gpusPerNode: launch.nproc },
          details: { worldSize: hint, gpusPerNode: hint },
        }
      : undefined;
  if (replicateDim > 1) set('replicas', replicateDim, ['data_parallel_replicate_dim']);
  const tp = count(['tensor_parallel_dim'], 'the default 1 used') ?? 1;
  const unmodelled: string[] = tp > 1 ? [`tensor parallelism (degree ${tp})`] : [];

  // The loss component: what it keeps of the logits. `CEWithChunkedOutputLoss` upcasts the head's chunks one by one
  // (the model returns them in the compute dtype: `TransformerDecoder.chunked_output`); `LinearCrossEntropyLoss`
  // applies the head itself, chunk by chunk, inside the loss. Others are left to the default, with a note.
  const lossComponent = str(at(d, ['loss', '_component_']));
  const lossName = lossComponent?.split('.').pop();
  if (lossName === 'CEWithChunkedOutputLoss') set('loss', 'chunked', ['loss', '_component_']);
  else if (lossName === 'LinearCrossEntropyLoss') set('loss', 'linear-chunked', ['loss', '_component_']);
  else if (lossComponent)
    notes.push(
      `loss ${lossComponent} (${doc.where(['loss', '_component_'])}) is not one fsdp-lens reads: the logits are counted as the default loss keeps them (set "# fsdp: loss=..." to say otherwise)`,
    );
  // `enable_activation_offloading: True` moves saved activations to the CPU (`OffloadActivations`): the figures
  // keep them on the GPU.
  if (bool(at(d, ['enable_activation_offloading'])) === true)
    set('activationOffload', true, ['enable_activation_offloading']);
  // `compile: True` compiles each block and the loss (`training.compile_model`, `training.compile_loss`).
  if (bool(at(d, ['compile'])) === true) set('compile', 'model+loss', ['compile']);
  // `optimizer_in_bwd: True`: one optimizer per parameter, stepped by a post-accumulate-grad hook
  // (`training.register_optim_in_bwd_hooks`).
  if (bool(at(d, ['optimizer_in_bwd'])) === true) set('optimizerInBackward', true, ['optimizer_in_bwd']);
  const custom = strList(at(d, ['custom_sharded_layers'])) ?? [];
  const offload = bool(at(d, ['fsdp_cpu_offload'])) ?? DEFAULTS.torchtune.cpuOffload.value;
  const reshard = bool(at(d, ['fsdp_reshard_after_forward'])) ?? DEFAULTS.torchtune.reshardAfterForward.value;
  let fineTune: FineTune | undefined;
  if (lora && isRecord(d.model)) {
    const m = d.model;
    const targets = [...(strList(m.lora_attn_modules) ?? ['q_proj', 'v_proj'])];
    // Gemma's MLP is `gemma_mlp`'s gate_proj, down_proj and up_proj (`lora_gemma_mlp`); Llama's w1, w2, w3.
    if (bool(m.apply_lora_to_mlp))
      targets.push(...(gemma ? ['gate_proj', 'down_proj', 'up_proj'] : ['w1', 'w2', 'w3']));
    // Gemma's output is the embedding's `TiedLinear`: its LoRA builders take no apply_lora_to_output.
    if (bool(m.apply_lora_to_output) && !gemma) targets.push('output');
    fineTune = { lora: { rank: count(['model', 'lora_rank'], 'rank 8 used') ?? 8, targets } };
    // torchtune's QLoRA builders quantise the base with torchao's NF4Tensor (`to_nf4`).
    if (lora[1]) Object.assign(fineTune, { baseDtype: 'nf4', quantizer: 'torchao' });
    notes.push(
      `LoRA rank ${fineTune.lora!.rank} on ${targets.join(', ')}${lora[1] ? ', NF4 base (QLoRA)' : ''}`,
    );
  }
  // Modules `shard_model` matches by exact name: in reverse named_modules() order, output before the layers.
  const before = custom.filter((n) => n === 'tok_embeddings').map((n) => [n]);
  const after = custom
    .filter((n) => n !== 'tok_embeddings' && !(n === 'output' && dims.tied))
    .map((n) => [n]);
  if (custom.includes('output') && dims.tied)
    notes.push(
      'custom_sharded_layers names output, but the model ties it to tok_embeddings: no module of its own',
    );
  const loaded = gemma
    ? gemmaNative(gemma, `torchtune ${builder}`)
    : llamaNative(llama!, 'torchtune', `torchtune ${builder}`);
  // Gemma 2's `Gemma2Attention` soft-caps the scores, so it computes them itself (no
  // scaled_dot_product_attention), as eager attention does: the s x s scores are kept.
  if (gemma?.version === 2) {
    values.attention = 'eager';
    details.attention = `torchtune's Gemma2Attention (${component} at ${doc.where(['model', '_component_'])}) computes its soft-capped scores itself`;
  }
  return {
    framework: 'torchtune',
    file,
    range,
    api: singleWhere ? 'none' : 'fsdp2',
    strategy: replicateDim > 1 ? 'HYBRID_SHARD' : 'FULL_SHARD',
    wrap: singleWhere ? { kind: 'none' } : { kind: 'blocks', before, after },
    reshardAfterForward: reshard,
    offload,
    values,
    details,
    keys,
    builtModel: {
      loaded: { ...loaded, origin: `torchtune ${builder} (the shapes of ${dims.hf})` },
      source: { kind: 'config', detail: `${component} at ${doc.where(['model', '_component_'])}` },
    },
    naming: 'torchtune',
    // The recipes' `training.set_activation_checkpointing(model, auto_wrap_policy={TransformerSelfAttentionLayer})`
    // under `enable_activation_checkpointing`: every decoder layer.
    checkpointingKey: { path: ['enable_activation_checkpointing'], value: true },
    ...(fineTune ? { fineTune } : {}),
    notes,
    ...(unmodelled.length ? { unmodelled } : {}),
    ...(suggested ? { suggested } : {}),
    traps: [],
  };
}

/**
 * The `tune run [--nproc_per_node N] RECIPE --config NAME` line of a config's header comments that launches this
 * config (its `--config` naming the file), else the first such line.
 */
function launchComment(
  doc: ConfigDoc,
):
  | { recipe: string; nproc?: number; nodes?: number; where: string; range: FrameworkPlan['range'] }
  | undefined {
  const own = doc.file
    .split(/[\\/]/)
    .pop()!
    .replace(/\.ya?ml$/, '');
  const found: { recipe: string; nproc?: number; nodes?: number; line: number; mine: boolean }[] = [];
  const lines = doc.text.split('\n');
  for (let i = 0; i < lines.length && i < 400 && found.length < 16; i++) {
    // `tune run [torchrun options] RECIPE --config NAME`: the options (`--nnodes 1 --nproc_per_node 4`) come
    // before the recipe.
    const m =
      /^\s*#.*?\btune\s+run\s+((?:--[\w-]+(?:[ =](?!-)\S+)?\s+){0,8})([A-Za-z_][\w]*)(?:\s+--config\s+(\S+))?/.exec(
        lines[i]!,
      );
    if (!m) continue;
    const option = (name: string) => new RegExp(`--${name}[ =](\\d+)`).exec(m[1]!)?.[1];
    const perNode = option('nproc_per_node');
    const nodes = Number(option('nnodes') ?? 1);
    const config = m[3]
      ?.split('/')
      .pop()
      ?.replace(/\.ya?ml$/, '');
    found.push({
      recipe: m[2]!,
      ...(perNode ? { nproc: Number(perNode), nodes: nodes >= 1 && nodes <= 4096 ? nodes : 1 } : {}),
      line: i,
      mine: config === own,
    });
  }
  const pick = found.find((f) => f.mine) ?? found[0];
  if (!pick) return undefined;
  const name = doc.file.split(/[\\/]/).pop();
  return {
    recipe: pick.recipe,
    ...(pick.nproc && pick.nproc > 0 && pick.nproc <= 1024
      ? { nproc: pick.nproc, nodes: pick.nodes ?? 1 }
      : {}),
    where: `${name}:${pick.line + 1}`,
    range: {
      start: { line: pick.line, character: 0 },
      end: { line: pick.line, character: lines[pick.line]!.length },
    },
  };
}
