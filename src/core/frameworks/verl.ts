/**
 * verl's PPO/GRPO runs (`python -m verl.trainer.main_ppo key=value ...`, Hydra overrides of its ppo_trainer.yaml)
 * as the actor's FSDP plan and the phases its hybrid engine runs on the same GPUs: the rollout engine, the
 * log-probability passes, the reference model and a critic.
 */
import { DEFAULTS } from './defaults';
import { commandLines, expandShell, shellVariables, tokens } from '../parsing/commandLine';
import type { SetupValues } from '../inputs/table';
import { FULL_LENGTH } from '../estimator/bounds';
import type { FineTune } from '../model/finetune';
import type { ColocationSpec, FrameworkPlan, FrameworkProblem } from './types';

/** verl's trainer modules that run main_ppo's config (the DAPO recipe's entry reads the same keys). */
const PPO_ENTRIES = /\b(?:verl\.trainer\.main_ppo|recipe\.\w+\.main_\w+)\b/;

/** The overrides of the first verl trainer command of a launch file, with its line; undefined without one. */
function verlCommand(
  text: string,
):
  | { line: number; entry: string; kv: Map<string, string>; configName?: string; unread: string[] }
  | undefined {
  const lines = text.split('\n');
  for (const c of commandLines(text)) {
    if (/^\s*#/.test(c.cmd)) continue;
    const m =
      /\bverl\.trainer\.(main_ppo|main_generation|fsdp_sft_trainer)\b/.exec(c.cmd) ?? PPO_ENTRIES.exec(c.cmd);
    if (!m) continue;
    // The variables the script sets before its command (`MODEL_PATH=Qwen/Qwen3-8B`, `NGPU=${NGPU:-8}`, a quoted
    // block of overrides over several lines), expanded and split into words as the shell does; a value still
    // holding a `$` is the environment's.
    const offset = lines.slice(0, c.line).reduce((n, l) => n + l.length + 1, 0);
    const cmd = expandShell(c.cmd, shellVariables(text, offset));
    const kv = new Map<string, string>();
    let configName: string | undefined;
    const words = tokens(cmd);
    // Words that are a variable the script sets in a branch or the environment sets: overrides not read.
    const unread = [
      ...new Set(words.filter((t) => /^["']?\$\{?\w+\}?["']?$/.test(t) && !/^["']?\$[@*#?]/.test(t))),
    ];
    words.forEach((t, i) => {
      const eq = /^\+{0,2}([\w.]+)=(.*)$/.exec(t);
      if (eq) kv.set(eq[1]!, eq[2]!.replace(/^(["'])(.*)\1$/, '$2'));
      const cfg = /^--config-name(?:=(.*))?$/.exec(t);
      if (cfg) configName = (cfg[1] ?? words[i + 1] ?? '').replace(/^(["'])(.*)\1$/, '$2') || undefined;
    });
    return { line: c.line, entry: m[1] ?? 'main_ppo', kv, unread, ...(configName ? { configName } : {}) };
  }
  return undefined;
}

const truthy = (v: string | undefined) => (v === undefined ? undefined : /^true$/i.test(v));
const count = (v: string | undefined) => (v && /^\d+$/.test(v) && Number(v) > 0 ? Number(v) : undefined);
const known = (v: string | undefined) => (v && !/\$/.test(v) && v !== 'null' ? v : undefined);

/**
 * A launch file that runs verl's PPO trainer: the actor's FSDP plan with the settings it writes and verl's
 * defaults for the rest (verl/trainer/config/_generated_ppo_trainer.yaml), and what shares its GPUs; a problem
 * for a run the estimator cannot express; undefined for any other file. Defaults and their sources:
 * - `actor.strategy: fsdp` (FSDP1): `FSDP(actor_module, auto_wrap_policy=get_fsdp_wrap_policy(...))` in
 *   `ActorRolloutRefWorker._build_model_optimizer` (verl/workers/fsdp_workers.py), a transformer policy over the
 *   model's `_no_split_modules` and the root, FULL_SHARD unless `reshard_after_forward=False` (SHARD_GRAD_OP);
 *   `fsdp2`: `apply_fsdp2` (verl/utils/fsdp_utils.py), `fully_shard` on each block, on the input embedding unless
 *   tied, and on the root, each with the configured `reshard_after_forward` (True);
 * - the actor loaded in fp32 (`model_dtype`), gathered in bf16 (`fsdp_config.dtype`), gradients reduced in fp32;
 * - `enable_gradient_checkpointing: true`: `gradient_checkpointing_enable(use_reentrant=False)`, every block;
 * - the actor's loss: `logprobs_from_logits` (verl/utils/torch_functional.py) on the logits of every token of the
 *   packed micro-batch, flash-attn's Triton cross-entropy with `inplace_backward=True` unless entropy is computed;
 * - the reference model (only with `use_kl_loss` or `use_kl_in_reward`) wrapped with `CPUOffload(offload_params
 *   =True)` whatever `ref.fsdp_config.param_offload` says ("We force reference policy to use CPUOffload");
 * - a critic with `algorithm.adv_estimator: gae` (the default), `AutoModelForTokenClassification` with one label,
 *   fp32, its optimizer state kept unless `critic.model.fsdp_config.*_offload`;
 * - vLLM with `gpu_memory_utilization: 0.5`, slept (weights and KV cache freed) after each rollout with
 *   `free_cache_engine: true`; its CUDA graphs stay (rollout.yaml: "cudagraph ... can not be offloaded").
 */
export function verlRun(file: string, text: string): FrameworkPlan | FrameworkProblem | undefined {
  const run = verlCommand(text);
  if (!run || run.entry !== 'main_ppo') return undefined;
  // A value still holding a `$` is the environment's (a variable the script does not set): not known here.
  const raw = (k: string) => run.kv.get(k);
  const v = (k: string) => (/\$/.test(raw(k) ?? '') ? undefined : raw(k));
  const name = file.split(/[\\/]/).pop() ?? file;
  const at = (k: string) => `${k} at ${name}:${run.line + 1}`;
  const range = { start: { line: run.line, character: 0 }, end: { line: run.line, character: 0 } };
  const A = 'actor_rollout_ref.actor';
  // `--config-name ppo_megatron_trainer` makes Megatron the actor's backend.
  const strategy = v(`${A}.strategy`) ?? (/megatron/.test(run.configName ?? '') ? 'megatron' : 'fsdp');
  if (strategy !== 'fsdp' && strategy !== 'fsdp2')
    return {
      framework: 'verl',
      file,
      range,
      message: `a verl PPO run whose actor uses ${strategy} (${v(`${A}.strategy`) ? at(`${A}.strategy`) : `--config-name ${run.configName} at ${name}:${run.line + 1}`}), not FSDP: not estimated`,
    };
  const overcounted: string[] = [];
  const notes: string[] = [
    `verl's PPO trainer (${run.entry} at ${name}:${run.line + 1}): the actor's FSDP step, with the phases its hybrid engine runs on the same GPUs`,
  ];
  if (run.unread.length)
    notes.push(
      `the command at ${name}:${run.line + 1} passes ${run.unread.join(', ')}, set in a branch of the script or by the environment: the overrides ${run.unread.length > 1 ? 'they hold' : 'it holds'} are not read, and verl's defaults stand for them`,
    );
  if (run.configName)
    notes.push(
      `--config-name ${run.configName}: that file is not read; what it sets is taken at verl's defaults`,
    );
  const values: SetupValues = {};
  const details: FrameworkPlan['details'] = {};
  const set = <K extends keyof SetupValues>(k: K, val: SetupValues[K], where: string) => {
    values[k] = val;
    details[k] = where;
  };
  const dflt = (what: string, ...keys: string[]) => {
    const env = keys.find((k) => raw(k) !== undefined && v(k) === undefined);
    return env
      ? `${env}=${raw(env)} at ${name}:${run.line + 1} comes from the environment: verl's default ${what} assumed`
      : `verl's default ${what}`;
  };
  const perNode = count(v('trainer.n_gpus_per_node'));
  const nodes = count(v('trainer.nnodes'));
  set(
    'gpusPerNode',
    perNode ?? DEFAULTS.verl.nGpusPerNode.value,
    perNode
      ? at('trainer.n_gpus_per_node')
      : dflt(`trainer.n_gpus_per_node: ${DEFAULTS.verl.nGpusPerNode.value}`, 'trainer.n_gpus_per_node'),
  );
  set(
    'worldSize',
    (perNode ?? DEFAULTS.verl.nGpusPerNode.value) * (nodes ?? DEFAULTS.verl.nnodes.value),
    ['trainer.n_gpus_per_node', 'trainer.nnodes'].some((k) => raw(k) !== undefined && !v(k))
      ? dflt(
          `${perNode ?? DEFAULTS.verl.nGpusPerNode.value} GPUs per node on ${nodes ?? DEFAULTS.verl.nnodes.value} node`,
          'trainer.n_gpus_per_node',
          'trainer.nnodes',
        )
      : perNode || nodes
        ? at('trainer.n_gpus_per_node x trainer.nnodes')
        : dflt('8 GPUs on 1 node'),
  );
  const world = values.worldSize!;
  // Process counts the environment gives (`trainer.nnodes=$NNODES` with nothing set in the script): the figures are
  // at verl's defaults, and no verdict rests on them.
  const fromEnvironment = ['trainer.n_gpus_per_node', 'trainer.nnodes'].filter(
    (k) => raw(k) !== undefined && !v(k),
  );
  const undecided = fromEnvironment.length
    ? [
        `the world size: ${fromEnvironment.map((k) => `${k}=${raw(k)}`).join(', ')} at ${name}:${run.line + 1} ${fromEnvironment.length > 1 ? 'come' : 'comes'} from the environment, and the figures are at ${world} GPUs`,
      ]
    : [];
  // One micro-batch of the actor's update: sequences per GPU of prompt + response tokens, or with dynamic
  // batching up to `ppo_max_token_len_per_gpu` tokens packed (`prepare_dynamic_batch`).
  const prompt = count(v('data.max_prompt_length')) ?? DEFAULTS.verl.maxPromptLength.value;
  const response = count(v('data.max_response_length')) ?? DEFAULTS.verl.maxResponseLength.value;
  const seqWhere =
    v('data.max_prompt_length') || v('data.max_response_length')
      ? at('data.max_prompt_length + data.max_response_length')
      : dflt(
          `${DEFAULTS.verl.maxPromptLength.value} + ${DEFAULTS.verl.maxResponseLength.value} tokens`,
          'data.max_prompt_length',
          'data.max_response_length',
        );
  const dynamic = truthy(v(`${A}.use_dynamic_bsz`)) === true;
  // Ulysses sequence parallelism (`ulysses_sequence_parallel_size`): each sequence split over sp GPUs, which
  // exchange q, k, v and the attention's output by all-to-all (verl/utils/ulysses.py); FSDP still shards over every
  // GPU (`create_device_mesh(world_size, fsdp_size)`), the data over world / sp groups (`fsdp_workers.py`).
  const spWritten = count(v(`${A}.ulysses_sequence_parallel_size`));
  const sp = spWritten && spWritten > 1 && world % spWritten === 0 ? spWritten : 1;
  // Tokens per GPU of a micro-batch: its sequences' 1/sp, or the dynamic budget, which verl multiplies by sp for
  // the group (`max_token_len * ulysses_sequence_parallel_size`, dp_actor.py) and the group splits again.
  const tokensOf = (micro: number | undefined, maxTokens: string | undefined) =>
    dynamic
      ? (count(maxTokens) ??
        count(v(`${A}.ppo_max_token_len_per_gpu`)) ??
        DEFAULTS.verl.ppoMaxTokenLenPerGpu.value)
      : micro && Math.ceil((micro * (prompt + response)) / sp);
  let micro = count(v(`${A}.ppo_micro_batch_size_per_gpu`));
  let microWhere = micro ? at(`${A}.ppo_micro_batch_size_per_gpu`) : '';
  const globalMicro = count(v(`${A}.ppo_micro_batch_size`));
  const groups = world / sp;
  if (!micro && globalMicro && globalMicro % groups === 0) {
    // `ppo_micro_batch_size //= world size // ulysses_sequence_parallel_size` (fsdp_workers.py), the older form.
    micro = globalMicro / groups;
    microWhere = `${at(`${A}.ppo_micro_batch_size`)} / ${groups} ${sp > 1 ? 'sequence-parallel groups' : 'GPUs'}`;
  }
  if (dynamic) {
    const maxTokens = count(v(`${A}.ppo_max_token_len_per_gpu`));
    set('microBatch', 1, at(`${A}.use_dynamic_bsz`));
    set(
      'seqLen',
      (maxTokens ?? DEFAULTS.verl.ppoMaxTokenLenPerGpu.value) * sp,
      maxTokens
        ? at(`${A}.ppo_max_token_len_per_gpu`)
        : dflt(
            `ppo_max_token_len_per_gpu: ${DEFAULTS.verl.ppoMaxTokenLenPerGpu.value}`,
            `${A}.ppo_max_token_len_per_gpu`,
          ),
    );
    notes.push(
      `dynamic batching: each micro-batch packs sequences up to ${(values.seqLen ?? 0).toLocaleString('en-US')} tokens ${sp > 1 ? `per group of ${sp} sequence-parallel GPUs (ppo_max_token_len_per_gpu x ${sp})` : 'per GPU'}, counted as one sequence of that length`,
    );
    // `prepare_dynamic_batch` fills each micro-batch with the real sequences up to the budget: a full one is
    // the most it holds, so a figure that does not fit is no verdict.
    overcounted.push(
      `${FULL_LENGTH}: micro-batches full to their ${(values.seqLen ?? 0).toLocaleString('en-US')}-token budget; packed from the real sequences, they hold at most that`,
    );
  } else {
    if (micro) set('microBatch', micro, microWhere);
    else
      notes.push(
        `${A}.ppo_micro_batch_size_per_gpu is not set: verl requires it unless use_dynamic_bsz is on; 1 sequence is assumed`,
      );
    set('seqLen', prompt + response, seqWhere);
    // Packed without padding (`use_remove_padding`), a micro-batch holds its sequences' real tokens: every
    // sequence at full length is the most it can hold, so a figure that does not fit is no verdict.
    overcounted.push(
      `${FULL_LENGTH} (${prompt} prompt + ${response} response tokens); packed without padding, shorter ones hold less`,
    );
  }
  const gc = truthy(v('actor_rollout_ref.model.enable_gradient_checkpointing'));
  set(
    'checkpointing',
    (gc ?? DEFAULTS.verl.gradientCheckpointing.value) ? 'full' : 'none',
    gc === undefined
      ? dflt(
          `enable_gradient_checkpointing: ${DEFAULTS.verl.gradientCheckpointing.value}`,
          'actor_rollout_ref.model.enable_gradient_checkpointing',
        )
      : at('actor_rollout_ref.model.enable_gradient_checkpointing'),
  );
  if (gc !== false)
    set('reentrantCheckpoint', false, "verl's gradient_checkpointing_enable(use_reentrant=False)");
  const fsdp = `${A}.fsdp_config`;
  const modelDtype = known(v(`${fsdp}.model_dtype`)) ?? DEFAULTS.verl.modelDtype.value;
  const dtypeOf = (s: string) =>
    /^(bf16|bfloat16)$/.test(s) ? 'bfloat16' : /^(fp16|float16)$/.test(s) ? 'float16' : 'float32';
  set(
    'masterDtype',
    dtypeOf(modelDtype),
    v(`${fsdp}.model_dtype`) ? at(`${fsdp}.model_dtype`) : dflt('model_dtype: fp32', `${fsdp}.model_dtype`),
  );
  const param =
    known(v(`${fsdp}.mixed_precision.param_dtype`)) ??
    known(v(`${fsdp}.dtype`)) ??
    DEFAULTS.verl.paramDtype.value;
  set(
    'paramDtype',
    dtypeOf(param),
    v(`${fsdp}.dtype`) ? at(`${fsdp}.dtype`) : dflt('dtype: bfloat16', `${fsdp}.dtype`),
  );
  const reduce = known(v(`${fsdp}.mixed_precision.reduce_dtype`)) ?? DEFAULTS.verl.reduceDtype.value;
  set(
    'reduceDtype',
    dtypeOf(reduce),
    v(`${fsdp}.mixed_precision.reduce_dtype`)
      ? at(`${fsdp}.mixed_precision.reduce_dtype`)
      : dflt('reduce dtype fp32'),
  );
  set('optimizer', 'adamw', dflt('optimizer: torch.optim.AdamW'));
  set('attention', 'fused', dflt('attn_implementation: flash_attention_2'));
  // Every micro-batch backward runs under FSDP with gradient sync (verl's update loop has no no_sync).
  set('syncEveryMicroBatch', true, "verl's update loop (no no_sync)");
  const entropy =
    truthy(v(`${A}.calculate_entropy`)) === true ||
    (v(`${A}.entropy_coeff`) !== undefined && Number(v(`${A}.entropy_coeff`)) !== 0);
  set('loss', 'inplace', "verl's logprobs_from_logits (flash-attn's cross-entropy, verl's gpu extra)");
  const colocUncounted: string[] = [];
  const unmodelled: string[] = [];
  if (entropy)
    colocUncounted.push(
      `the entropy of the logits in the update (${at(`${A}.entropy_coeff`)}): its tensors, and the logits' gradient it keeps apart (inplace_backward off)`,
    );
  if (truthy(v('actor_rollout_ref.model.use_fused_kernels')) === true)
    overcounted.push(
      `verl's fused kernels (${at('actor_rollout_ref.model.use_fused_kernels')}): the head and log-probabilities by chunks, counted as whole logits`,
    );
  if (truthy(v('actor_rollout_ref.model.enable_activation_offload')) === true)
    set('activationOffload', true, at('actor_rollout_ref.model.enable_activation_offload'));
  if (sp > 1) {
    set('contextParallel', sp, at(`${A}.ulysses_sequence_parallel_size`));
    set('cpMethod', 'ulysses', at(`${A}.ulysses_sequence_parallel_size`));
  } else if (spWritten && spWritten > 1)
    unmodelled.push(
      `Ulysses sequence parallelism of ${spWritten} (${at(`${A}.ulysses_sequence_parallel_size`)}), which does not divide the ${world} GPUs`,
    );
  const fsdpSize = Number(v(`${fsdp}.fsdp_size`) ?? '-1');
  if (fsdpSize > 0 && fsdpSize < world) {
    set('replicas', world / fsdpSize, at(`${fsdp}.fsdp_size`));
  }
  const reshard = truthy(v(`${fsdp}.reshard_after_forward`)) ?? true;
  const paramOffload = truthy(v(`${fsdp}.param_offload`)) === true;
  const optimizerOffload = truthy(v(`${fsdp}.optimizer_offload`)) === true;
  const offloadPolicy = strategy === 'fsdp2' && truthy(v(`${fsdp}.offload_policy`)) === true;

  let fineTune: FineTune | undefined;
  const rank = count(v('actor_rollout_ref.model.lora_rank'));
  if (rank) {
    const targets = known(v('actor_rollout_ref.model.target_modules')) ?? 'all-linear';
    fineTune = {
      lora: {
        rank,
        targets: targets
          .replace(/^\[|\]$/g, '')
          .split(',')
          .map((t) => t.trim()),
      },
    };
    notes.push(
      `LoRA rank ${rank} on ${targets} (${at('actor_rollout_ref.model.lora_rank')}); the reference model is the actor with its adapters off`,
    );
  }

  // What shares the GPUs: the rollout engine, the log-probability passes, the reference model and a critic.
  const R = 'actor_rollout_ref.rollout';
  const engine = known(v(`${R}.name`)) ?? 'vllm';
  const utilText = v(`${R}.gpu_memory_utilization`);
  const util =
    utilText !== undefined && Number(utilText) > 0 && Number(utilText) <= 1
      ? Number(utilText)
      : DEFAULTS.verl.gpuMemoryUtilization.value;
  const freeCache = truthy(v(`${R}.free_cache_engine`)) ?? true;
  const eager = truthy(v(`${R}.enforce_eager`)) === true;
  const adv = known(v('algorithm.adv_estimator')) ?? 'gae';
  const useRef =
    !rank && (truthy(v(`${A}.use_kl_loss`)) === true || truthy(v('algorithm.use_kl_in_reward')) === true);
  const lpMicro = count(v(`${R}.log_prob_micro_batch_size_per_gpu`));
  const refMicro = count(v('actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu'));
  const lpTokens = tokensOf(lpMicro, v(`${R}.log_prob_max_token_len_per_gpu`));
  const refTokens = tokensOf(refMicro, v('actor_rollout_ref.ref.log_prob_max_token_len_per_gpu'));
  const inference: ColocationSpec['inference'] = [];
  if (lpTokens)
    inference.push({
      name: 'old log-probabilities',
      tokens: lpTokens,
      where: dynamic
        ? at(`${R}.log_prob_max_token_len_per_gpu`)
        : at(`${R}.log_prob_micro_batch_size_per_gpu`),
    });
  if (useRef && refTokens)
    inference.push({
      name: "the reference model's log-probabilities",
      tokens: refTokens,
      where: dynamic
        ? at('actor_rollout_ref.ref.log_prob_max_token_len_per_gpu')
        : at('actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu'),
      fromHost: true,
    });
  if (!eager)
    colocUncounted.push(
      `${engine}'s CUDA graphs, which stay on the GPU while it sleeps (their size is the engine's; ${R}.enforce_eager=True has none)`,
    );
  const notEstimated: string[] = [];
  let critic: ColocationSpec['critic'];
  if (adv === 'gae') {
    const path = known(v('critic.model.path'));
    const actorPath = known(v('actor_rollout_ref.model.path'));
    critic = {
      model: path ?? '~/models/deepseek-llm-7b-chat',
      where: path ? at('critic.model.path') : dflt('critic.model.path', 'critic.model.path'),
      sameAsActor: !!path && path === actorPath,
      offloadParams: truthy(v('critic.model.fsdp_config.param_offload')) === true,
      offloadOptimizer: truthy(v('critic.model.fsdp_config.optimizer_offload')) === true,
    };
    // The critic's update is the actor's with a one-output value head where the actor keeps the logits
    // (`DataParallelPPOCritic.update_critic`): with the same model, offload and checkpointing, and micro-batches
    // of no more tokens, its phase needs no more than the actor's update, and computing values (no gradients)
    // less still. Otherwise it is a phase not estimated.
    const C = 'critic';
    const criticDynamic = (truthy(v(`${C}.use_dynamic_bsz`)) ?? dynamic) === true;
    const criticMicro =
      count(v(`${C}.ppo_micro_batch_size_per_gpu`)) ?? (count(v(`${C}.ppo_micro_batch_size`)) ?? 0) / world;
    const criticForward = count(v(`${C}.forward_micro_batch_size_per_gpu`)) ?? criticMicro;
    const criticTokens = criticDynamic
      ? (count(v(`${C}.ppo_max_token_len_per_gpu`)) ?? DEFAULTS.verl.criticPpoMaxTokenLenPerGpu.value)
      : Math.max(criticMicro, criticForward) * (prompt + response);
    const actorTokens = (values.microBatch ?? 0) * (values.seqLen ?? 0);
    const criticGc =
      truthy(v(`${C}.model.enable_gradient_checkpointing`)) ??
      DEFAULTS.verl.criticGradientCheckpointing.value;
    const bounded =
      critic.sameAsActor &&
      critic.offloadParams === paramOffload &&
      critic.offloadOptimizer === optimizerOffload &&
      (criticGc || values.checkpointing === 'none') &&
      criticTokens > 0 &&
      actorTokens > 0 &&
      criticTokens <= actorTokens;
    if (bounded)
      notes.push(
        `the critic's own phases (computing values, its update) need no more than the actor's update: the same model, offload and checkpointing, micro-batches of ${criticTokens.toLocaleString('en-US')} tokens at most against the actor's ${actorTokens.toLocaleString('en-US')}, and a one-output value head where the actor keeps the logits`,
      );
    else
      notEstimated.push(
        `the critic's own phases (computing values, its update): algorithm.adv_estimator ${adv}${v('algorithm.adv_estimator') ? ` (${at('algorithm.adv_estimator')})` : ' (the default)'}`,
      );
  }
  const colocated: ColocationSpec = {
    by: "verl's hybrid engine",
    rollout: {
      engine,
      fraction: util,
      where:
        utilText !== undefined
          ? at(`${R}.gpu_memory_utilization`)
          : dflt(
              `${R}.gpu_memory_utilization: ${DEFAULTS.verl.gpuMemoryUtilization.value}`,
              `${R}.gpu_memory_utilization`,
            ),
    },
    keepsEngine: !freeCache,
    offloadBetween: { params: paramOffload, optimizer: optimizerOffload },
    inference,
    entropyCompiled: truthy(v('actor_rollout_ref.model.use_torch_compile')) !== false,
    notEstimated,
    uncounted: colocUncounted,
    ...(critic ? { critic } : {}),
  };
  const model = known(v('actor_rollout_ref.model.path'));
  const modelId = model && /^[\w.-]+\/[\w.-]+$/.test(model) ? model : undefined;
  const modelUnknown = modelId
    ? undefined
    : raw('actor_rollout_ref.model.path')
      ? `the actor's model is ${raw('actor_rollout_ref.model.path')} (${at('actor_rollout_ref.model.path')}), ${model ? 'a local path' : 'set by the environment'}`
      : run.unread.length
        ? `the command at ${name}:${run.line + 1} passes ${run.unread.join(', ')}, set in a branch of the script or by the environment, and no actor_rollout_ref.model.path of its own`
        : `the command at ${name}:${run.line + 1} sets no actor_rollout_ref.model.path: verl's default is ~/models/deepseek-llm-7b-chat, a local path`;
  return {
    framework: 'verl',
    file,
    range,
    api: strategy === 'fsdp2' ? 'fsdp2' : 'fsdp1',
    strategy: strategy === 'fsdp' && !reshard ? 'SHARD_GRAD_OP' : 'FULL_SHARD',
    wrap: {
      kind: 'policy',
      classes: null,
      ...(rank ? { trainableLeaves: true } : {}),
      ...(strategy === 'fsdp2' ? { embedUnit: true, rootReshard: reshard } : {}),
    },
    reshardAfterForward: strategy === 'fsdp2' ? reshard : null,
    offload: offloadPolicy,
    values,
    details,
    ...(modelId
      ? {
          model: {
            id: modelId,
            source: { kind: 'config' as const, detail: at('actor_rollout_ref.model.path') },
          },
        }
      : {}),
    ...(modelUnknown ? { modelUnknown } : {}),
    ...(fineTune ? { fineTune, fineTuneWhere: at('actor_rollout_ref.model.lora_rank') } : {}),
    notes,
    ...(unmodelled.length ? { unmodelled } : {}),
    ...(overcounted.length ? { overcounted } : {}),
    ...(undecided.length ? { undecided } : {}),
    colocated,
    traps: [],
  };
}
