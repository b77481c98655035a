/**
 * verl's PPO/GRPO runs (`python -m verl.trainer.main_ppo key=value ...`, Hydra overrides of its
 * ppo_trainer.yaml): named with what they set. Its hybrid engine keeps the actor, the reference model and the
 * rollout engine (vLLM or SGLang) on the same GPUs, phase by phase, and its actor's loss is a log-probability over
 * the response tokens of unpadded sequences: neither is modelled, so the run is named with what it sets, not
 * estimated.
 */
import { commandLines, tokens } from '../parsing/commandLine';
import type { FrameworkProblem } from './types';

/** The overrides of the first verl trainer command of a launch file, with its line; undefined without one. */
function verlCommand(text: string): { line: number; entry: string; kv: Map<string, string> } | undefined {
  for (const c of commandLines(text)) {
    if (/^\s*#/.test(c.cmd)) continue;
    const m = /\bverl\.trainer\.(main_ppo|main_generation|fsdp_sft_trainer)\b/.exec(c.cmd);
    if (!m) continue;
    const kv = new Map<string, string>();
    for (const t of tokens(c.cmd)) {
      const eq = /^\+{0,2}([\w.]+)=(.*)$/.exec(t);
      if (eq) kv.set(eq[1]!, eq[2]!.replace(/^(["'])(.*)\1$/, '$2'));
    }
    return { line: c.line, entry: m[1]!, kv };
  }
  return undefined;
}

/**
 * A launch file that runs verl's PPO trainer: what it is, what it sets, and the estimate it can be given; undefined
 * for any other file.
 */
export function verlRun(file: string, text: string): FrameworkProblem | undefined {
  const run = verlCommand(text);
  if (!run || run.entry !== 'main_ppo') return undefined;
  const v = (k: string) => run.kv.get(k);
  const name = file.split(/[\\/]/).pop() ?? file;
  const model = v('actor_rollout_ref.model.path');
  const perNode = Number(v('trainer.n_gpus_per_node'));
  const nodes = Number(v('trainer.nnodes') ?? '1');
  const micro = v('actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu');
  const prompt = Number(v('data.max_prompt_length'));
  const response = Number(v('data.max_response_length'));
  const read: string[] = [];
  if (Number.isInteger(perNode) && perNode > 0 && Number.isInteger(nodes) && nodes > 0)
    read.push(`${perNode * nodes} GPUs (${perNode} per node)`);
  if (micro && /^\d+$/.test(micro)) read.push(`${micro} sequences per GPU per actor micro-batch`);
  // A sequence is the prompt and the response together (the actor's update sees both).
  if (Number.isInteger(prompt) && Number.isInteger(response) && prompt > 0 && response > 0)
    read.push(`each of up to ${prompt + response} tokens (${prompt} prompt + ${response} response)`);
  if (v('actor_rollout_ref.model.enable_gradient_checkpointing') === 'True')
    read.push('gradient checkpointing');
  const rollout = v('actor_rollout_ref.rollout.name') ?? 'the rollout engine';
  const util = v('actor_rollout_ref.rollout.gpu_memory_utilization');
  const offload = ['param_offload', 'optimizer_offload'].filter(
    (k) => v(`actor_rollout_ref.actor.fsdp_config.${k}`) === 'True',
  );
  return {
    framework: 'verl',
    file,
    range: { start: { line: run.line, character: 0 }, end: { line: run.line, character: 0 } },
    message:
      `a verl PPO run (verl.trainer.main_ppo at ${name}:${run.line + 1}${model ? `, actor ${model}` : ''}): its hybrid engine keeps the actor, the reference model and ${rollout}${util ? ` (gpu_memory_utilization ${util} of each GPU while it generates)` : ''} on the same GPUs, phase by phase, which fsdp-lens does not model` +
      `${offload.length ? `; the actor's ${offload.join(' and ')} ${offload.length > 1 ? 'move' : 'moves'} its state to the CPU between phases` : ''}` +
      `${read.length ? `. It sets ${read.join(', ')}` : ''}` +
      "; its actor's loss, log-probabilities of the response tokens of unpadded sequences, is not a Trainer's cross-entropy either, so no estimate is made",
  };
}
