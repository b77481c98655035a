// verl's PPO/GRPO launch files: the actor's FSDP plan and the phases its hybrid engine runs on the same GPUs.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import type { Estimate } from '../../src/core/estimator/types';
import { analyzeConfigText } from '../../src/core/entry/analyze';
import { Project } from '../../src/core/project/project';
import { DEFAULT_LINT_OPTIONS } from '../../src/core/lint/types';
import { findGpu, gpuBytes } from '../../src/core/hardware/catalog';
import { lossTransient } from '../../src/core/estimator/activations';
import { FIXTURES, grammar } from './helpers';
import { diskFS } from '../../src/host/disk';
import { expandShell, shellVariables } from '../../src/core/parsing/commandLine';

const DIR = path.join(FIXTURES, 'frameworks', 'verl');
const GRPO = fs.readFileSync(path.join(DIR, 'grpo_qwen3_8b.sh'), 'utf8');

// Qwen3-8B (config.json: hidden 4,096, 36 layers, 32 heads of 128, 8 K/V heads, intermediate 12,288, vocabulary
// 151,936, untied head). A layer: q and o 4,096 x 4,096 = 16,777,216 each, k and v 4,096 x 1,024 = 4,194,304
// each, q_norm and k_norm 128 each, the MLP 3 x 4,096 x 12,288 = 150,994,944, two norms of 4,096:
// 192,946,432. The embedding and the head 151,936 x 4,096 = 622,329,856 each, the final norm 4,096:
// 36 x 192,946,432 + 2 x 622,329,856 + 4,096 = 8,190,735,360 (Qwen's published 8.2B).
const H = 4096;
const V = 151_936;
const I = 12_288;
const LAYER = 192_946_432;
const ROOT = 2 * 622_329_856 + 4096;
const P = 36 * LAYER + ROOT;
const H100 = gpuBytes(findGpu('h100-sxm-80gb')!);

async function run(text: string, name = 'run.sh'): Promise<Estimate> {
  const project = new Project([DIR], await grammar(), diskFS);
  const a = analyzeConfigText(path.join(DIR, name), text, {
    lint: DEFAULT_LINT_OPTIONS,
    estimate: { project },
  });
  assert.equal(a.reading?.kind, 'plan', JSON.stringify(a.reading));
  const r = a.estimate;
  assert.ok(r?.ok, JSON.stringify(r && !r.ok ? r : 'no estimate'));
  return r.estimate;
}

const near = (actual: number, expected: number, what: string) =>
  assert.ok(Math.abs(actual - expected) <= 1e-4 * expected, `${what}: ${actual} vs ${expected}`);

describe('verl PPO runs', () => {
  it('plan the actor as verl wraps it, with the settings the command writes and the script sets', async () => {
    const e = await run(GRPO);
    assert.equal(P, 8_190_735_360);
    assert.equal(e.model.params, P);
    // FSDP1 (`actor.strategy: fsdp`): the transformer policy on the 36 decoder layers, and the root.
    assert.equal(e.plan.api, 'fsdp1');
    assert.equal(e.plan.strategy, 'FULL_SHARD');
    assert.equal(e.units.length, 37);
    // trainer.nnodes=${NODES} with NODES=${NODES:-2}: 2 nodes of 4.
    assert.equal(e.mesh.worldSize, 8);
    assert.equal(e.setup.microBatch, 8);
    assert.equal(e.setup.seqLen, 256 + 768);
    assert.equal(e.setup.checkpointing, 'full');
    assert.equal(e.setup.loss, 'inplace');
    assert.equal(e.setup.masterDtype, 'float32');
    assert.equal(e.setup.paramDtype, 'bfloat16');
    assert.equal(e.setup.reduceDtype, 'float32');
  });

  it('count the phases: the rollout beside vLLM, the log-probability passes, the update', async () => {
    const e = await run(GRPO);
    const col = e.colocated!;
    assert.deepEqual(
      col.phases.map((p) => p.name),
      ['rollout', 'old log-probabilities', "the reference model's log-probabilities", 'actor update'],
    );
    const [rollout, old, ref, update] = col.phases;
    // Rollout: the actor's fp32 parameter shards stay (P x 4 B / 8; FSDP1 pads each unit's FlatParameter to a
    // multiple of 8, a few bytes), its AdamW state is on the host (optimizer_offload), the gradients were freed
    // by the zero_grad() that ends update_policy; vLLM takes 0.5 of the GPU's memory in its own processes.
    near(rollout!.bytes, (P * 4) / 8, 'rollout');
    assert.equal(rollout!.engineFraction, 0.5);
    // Old log-probabilities, 16 sequences of 1,024 tokens without gradients: the parameter shards; the root
    // (embedding, head, norm) and one layer gathered in bf16; at the head its input and the residual
    // (2 x 2 B x T x h), the bf16 logits (2 B x T x V) and flash-attn's three fp32 values per token. A layer's
    // MLP at the same moment would be 2 x 2 B x T x h + 3 x 2 B x T x I = 1,476,395,008, less than the head.
    const T = 16 * 1024;
    const head = 2 * 2 * T * H + 2 * T * V + 12 * T;
    assert.ok(head > 2 * 2 * T * H + 3 * 2 * T * I);
    const gathered = 2 * ROOT + 2 * LAYER;
    near(old!.bytes, (P * 4) / 8 + gathered + head, 'old log-probabilities');
    // The reference model (use_kl_loss) is wrapped with CPUOffload: its units come from the host, the actor's
    // state stays as it is between phases: the same bytes here.
    near(ref!.bytes, (P * 4) / 8 + gathered + head, 'reference');
    // The update is the FSDP step's peak, nothing beside it (no critic with GRPO).
    assert.equal(update!.bytes, e.perGpu.peakBytes);
    // The worst phase decides the fit: each phase's need is its bytes x 1.10 + 1 GiB, with vLLM's share.
    const need = (b: number, f = 0) => Math.ceil(b * 1.1) + 2 ** 30 + Math.ceil(f * H100);
    const worst = Math.max(
      need(rollout!.bytes, 0.5),
      need(old!.bytes),
      need(ref!.bytes),
      need(update!.bytes),
    );
    assert.equal(e.targetFit.headroomBytes, H100 - worst);
    // vLLM's CUDA graphs stay on the GPU while it sleeps and are not counted: a fit is then no verdict; without
    // them (enforce_eager) every phase fitting is one.
    assert.equal(e.targetFit.verdict, 'undecided');
    const eager = await run(
      GRPO.replace('rollout.name=vllm', 'rollout.name=vllm actor_rollout_ref.rollout.enforce_eager=True'),
    );
    assert.equal(eager.targetFit.verdict, 'fits');
  });

  it('keep a critic of the same model beside the actor, and vLLM through every phase without free_cache_engine', async () => {
    const text = GRPO.replace('algorithm.adv_estimator=grpo', 'algorithm.adv_estimator=gae')
      .replace('trainer.n_gpus_per_node=4', 'trainer.n_gpus_per_node=4 critic.model.path=Qwen/Qwen3-8B')
      .replace('rollout.name=vllm', 'rollout.name=vllm actor_rollout_ref.rollout.free_cache_engine=False');
    const e = await run(text);
    const col = e.colocated!;
    // AutoModelForTokenClassification with one label: the backbone without the head, a value head of h + 1.
    const critic = P - V * H + H + 1;
    const term = col.phases[0]!.terms.find((t) => t.name === "critic's state")!;
    assert.equal(term.bytes, Math.ceil((critic * 12) / 8));
    const update = col.phases.find((p) => p.kind === 'update')!;
    assert.equal(update.bytes, e.perGpu.peakBytes + term.bytes);
    // vLLM keeps its KV cache and weights between rollouts: its share in every phase.
    assert.ok(col.phases.every((p) => p.engineFraction === 0.5));
    // The critic's own update is not estimated: a fit that holds is no verdict.
    assert.ok(e.uncounted.some((u) => /critic's own phases/.test(u)));
    assert.notEqual(e.targetFit.verdict, 'fits');
  });

  it('say it does not fit when the rollout engine and the state left on the GPU exceed it', async () => {
    // Without offload the actor keeps 12 B per parameter / 8 = 12.3 GB through the rollout; vLLM asks 0.9 of
    // 85.5 GB: 12.29 x 1.10 + 1.07 + 76.9 = 91.5 GB > 85.5 GB.
    const e = await run(
      GRPO.replace('actor_rollout_ref.actor.fsdp_config.optimizer_offload=True', '').replace(
        'gpu_memory_utilization=0.5',
        'gpu_memory_utilization=0.9',
      ),
    );
    const rollout = e.colocated!.phases.find((p) => p.kind === 'rollout')!;
    near(rollout.bytes, (P * 12) / 8, 'rollout with the optimizer state');
    assert.equal(e.targetFit.verdict, 'short');
    assert.equal(e.colocated!.worst, 'rollout');
  });

  it('leave undecided a phase short only because its sequences are counted at full length', async () => {
    // 320 sequences of 1,024 tokens for the old log-probabilities: 2 B x 327,680 x 151,936 = 99.6 GB of logits
    // at full length; packed without padding, the run holds only its real tokens. What the phase holds whatever
    // the length (the parameter shards, the root and a layer gathered) fits, so it is no verdict.
    const e = await run(
      GRPO.replace(
        'rollout.log_prob_micro_batch_size_per_gpu=16',
        'rollout.log_prob_micro_batch_size_per_gpu=320',
      ),
    );
    const old = e.colocated!.phases.find((p) => p.name === 'old log-probabilities')!;
    assert.equal(e.colocated!.worst, 'old log-probabilities');
    assert.ok(Math.ceil(old.bytes * 1.1) + 2 ** 30 > H100);
    assert.equal(e.targetFit.verdict, 'undecided');
    assert.ok(e.overcounted.some((o) => /full length \(256 prompt \+ 768 response tokens\)/.test(o)));
  });

  it('count a dynamic micro-batch as full to its token budget, an upper bound', async () => {
    const e = await run(
      GRPO.replace(
        'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8',
        'actor_rollout_ref.actor.use_dynamic_bsz=True actor_rollout_ref.actor.ppo_max_token_len_per_gpu=12000',
      ).replace(
        'rollout.log_prob_micro_batch_size_per_gpu=16',
        'rollout.log_prob_max_token_len_per_gpu=20000',
      ),
    );
    // prepare_dynamic_batch packs sequences up to 12,000 tokens: one sequence of that length.
    assert.equal(e.setup.microBatch, 1);
    assert.equal(e.setup.seqLen, 12_000);
    assert.ok(e.overcounted.some((o) => /full to their 12,000-token budget/.test(o)));
    // The old log-probabilities' pass packs up to its own budget, 20,000 tokens; the reference's, without one of
    // its own, the update's.
    const logits = (p: string) =>
      e.colocated!.phases.find((x) => x.name === p)!.terms.find((t) => t.name === 'logits')!.bytes;
    assert.equal(logits('old log-probabilities'), 2 * 2 * 20_000 * H + 2 * 20_000 * V + 12 * 20_000);
    assert.equal(
      logits("the reference model's log-probabilities"),
      2 * 2 * 12_000 * H + 2 * 12_000 * V + 12 * 12_000,
    );
  });

  it('wrap the input embedding apart under fsdp2 and reshard the root as configured', async () => {
    const e = await run(
      GRPO.replace(
        'algorithm.adv_estimator=grpo',
        'algorithm.adv_estimator=grpo actor_rollout_ref.actor.strategy=fsdp2',
      ),
    );
    assert.equal(e.plan.api, 'fsdp2');
    // apply_fsdp2: 36 layers, the untied embedding, the root (the head and the final norm).
    assert.equal(e.units.length, 38);
    const embed = e.units.find((u) => u.modules.includes('model.embed_tokens'))!;
    assert.equal(embed.params, 622_329_856);
    assert.equal(e.units.find((u) => u.isRoot)!.params, 622_329_856 + 4096);
  });

  it('read overrides assembled in quoted blocks, and count a critic of the same model beside the actor', async () => {
    const text = fs.readFileSync(path.join(DIR, 'ppo_deepseek7b_blocks.sh'), 'utf8');
    const e = await run(text, 'ppo_deepseek7b_blocks.sh');
    // deepseek-llm-7b (a Llama architecture: hidden 4,096, 30 layers of 32 heads, intermediate 11,008,
    // vocabulary 102,400, untied): a layer 4 x 4,096^2 + 3 x 4,096 x 11,008 + 2 x 4,096 = 202,383,360; 30 of
    // them, the embedding and the head 2 x 102,400 x 4,096 = 838,860,800, the norm 4,096: 6,910,365,696.
    const P7 = 30 * 202_383_360 + 838_860_800 + 4096;
    assert.equal(e.model.params, P7);
    assert.equal(e.setup.microBatch, 16);
    assert.equal(e.setup.seqLen, 1024);
    const col = e.colocated!;
    assert.equal(col.phases.find((p) => p.kind === 'rollout')!.engineFraction, 0.4);
    // The critic: the backbone without the head (102,400 x 4,096) and a value head of 4,096 + 1, in fp32 with
    // AdamW's two fp32 moments, sharded over 8 GPUs.
    const critic = P7 - 102_400 * 4096 + 4096 + 1;
    const term = col.phases[0]!.terms.find((t) => t.name === "critic's state")!;
    assert.equal(term.bytes, Math.ceil((critic * 12) / 8));
    // The old log-probabilities' micro-batch: 32 sequences of 1,024 tokens.
    const old = col.phases.find((p) => p.name === 'old log-probabilities')!;
    assert.ok(
      old.terms.some(
        (t) => t.name === 'logits' && t.bytes === 2 * 2 * 32_768 * 4096 + 2 * 32_768 * 102_400 + 12 * 32_768,
      ),
    );
  });

  it('draw no verdict at a world size the environment gives', async () => {
    const e = await run(GRPO.replace('trainer.nnodes=${NODES}', 'trainer.nnodes=$SLURM_NNODES'));
    // NODES had a shell default (2); SLURM_NNODES is set by nothing in the script: verl's default 1 node of 4.
    assert.equal(e.mesh.worldSize, 4);
    assert.match(
      e.undecided.join(' '),
      /the world size: trainer\.nnodes=\$SLURM_NNODES at run\.sh:\d+ comes from the environment/,
    );
    assert.equal(e.targetFit!.verdict, 'undecided');
  });

  it('split each sequence over Ulysses sequence-parallel groups, with their all-to-alls', async () => {
    const e = await run(
      GRPO.replace(
        '    actor_rollout_ref.actor.use_kl_loss=True \\\n',
        '    actor_rollout_ref.actor.use_kl_loss=True \\\n    actor_rollout_ref.actor.ulysses_sequence_parallel_size=2 \\\n',
      ),
    );
    assert.equal(e.setup.contextParallel, 2);
    assert.equal(e.setup.cpMethod, 'ulysses');
    assert.deepEqual(e.unmodelled, []);
    // FSDP still shards over all 8 GPUs (verl's FSDP mesh is every rank).
    assert.equal(e.mesh.shardGroup, 8);
    // Per block pass, q, k, v and the output cross by all-to-all: each GPU holds b·s/2 = 8 x 1,024 / 2 = 4,096
    // tokens and sends 1/2 of them, of width 2 x 4,096 (q, o) + 2 x 1,024 (k, v) = 10,240, in bf16:
    // 0.5 x 4,096 x 10,240 x 2 B = 41,943,040 B. Passes: 36 blocks forward, 36 backward, 36 recomputed (full
    // checkpointing) = 108; all-to-alls 4 per block in forward and backward, 4 per recomputed block = 432.
    const cp = e.comms.links.find((l) => l.role === 'context parallel')!;
    assert.equal(cp.collectives, 432);
    assert.equal(cp.bytes, 108 * 41_943_040);
    // The old log-probabilities: 16 sequences of 1,024 tokens per group, half on each GPU.
    const old = e.colocated!.phases.find((p) => p.name === 'old log-probabilities')!;
    assert.ok(
      old.terms.some((t) => /8,192 tokens/.test(t.formula ?? '')),
      JSON.stringify(old.terms),
    );
  });

  it("bound the critic's own phases by the actor's update when they can hold no more, else name them", async () => {
    const text = fs.readFileSync(path.join(DIR, 'ppo_deepseek7b_blocks.sh'), 'utf8');
    // The fixture's critic takes 32 sequences per micro-batch against the actor's 16: its update may hold more.
    const wider = (await run(text, 'ppo_deepseek7b_blocks.sh')).colocated!;
    assert.ok(wider.notEstimated.some((n) => /the critic's own phases/.test(n)));
    // 16 and 16 of 1,024 tokens, the same model, offload and (default) checkpointing: the critic's update is the
    // actor's with a one-output head instead of 102,400 logits per token, so it needs no more.
    const same = await run(
      text.replace('critic.ppo_micro_batch_size_per_gpu=32', 'critic.ppo_micro_batch_size_per_gpu=16'),
    );
    assert.deepEqual(same.colocated!.notEstimated, []);
    assert.ok(
      same.notes.some((n) =>
        /the critic's own phases \(computing values, its update\) need no more than the actor's update: .* 16,384 tokens at most against the actor's 16,384/.test(
          n,
        ),
      ),
      same.notes.join('\n'),
    );
  });

  it('name what they cannot estimate: a Megatron actor, a model path from the environment', async () => {
    const project = new Project([DIR], await grammar(), diskFS);
    const analyze = (text: string) =>
      analyzeConfigText(path.join(DIR, 'run.sh'), text, { lint: null, estimate: { project } });
    const megatron = analyze(
      GRPO.replace('algorithm.adv_estimator=grpo', 'actor_rollout_ref.actor.strategy=megatron'),
    );
    assert.equal(megatron.reading?.kind, 'problem');
    assert.match(JSON.stringify(megatron.reading), /uses megatron .* not FSDP/);
    // `--config-name ppo_megatron_trainer` makes Megatron the backend too.
    const named = analyze(
      GRPO.replace(
        'python3 -m verl.trainer.main_ppo',
        "python3 -m verl.trainer.main_ppo --config-name='ppo_megatron_trainer'",
      ),
    );
    assert.match(JSON.stringify(named.reading), /uses megatron \(--config-name ppo_megatron_trainer/);
    const env = analyze(GRPO.replace('MODEL=Qwen/Qwen3-8B\n', ''));
    assert.equal(env.estimate?.ok, false);
    assert.match(JSON.stringify(env.estimate), /set by the environment/);
    // Overrides in a variable set in a branch are not read, and the message says which.
    const branch = analyze(
      [
        'if [ "$BACKEND" = fsdp ]; then',
        '  ACTOR="actor_rollout_ref.model.path=Qwen/Qwen3-8B"',
        'fi',
        'python3 -m verl.trainer.main_ppo $ACTOR trainer.nnodes=1',
      ].join('\n'),
    );
    assert.match(
      JSON.stringify(branch.estimate),
      /passes \$ACTOR, set in a branch of the script or by the environment/,
    );
    // A comment naming the trainer is not a run.
    const none = analyze('# python3 -m verl.trainer.main_ppo x=1\n');
    assert.notEqual(none.reading?.kind, 'plan');
  });
});

describe('the in-place log-probability loss', () => {
  it('keeps the logits and a few fp32 values per token, its gradient written over them', () => {
    // flash-attn's CrossEntropyLossFunction: forward writes losses, lse and z_losses (fp32 per row) and saves the
    // logits and lse; backward with inplace_backward writes dlogits into the logits.
    const shape = { vocab: V, hidden: H } as Parameters<typeof lossTransient>[0];
    const x = { microBatch: 2, seqLen: 1000, attention: 'fused' as const, bytes: 2 };
    const T = 2000;
    const l = lossTransient(shape, x, 'inplace');
    assert.equal(l.forward, 2 * T * V + 12 * T);
    assert.equal(l.backward, 2 * T * V + 8 * T);
    assert.equal(l.output, 2 * T * V);
  });
});

describe('shell variables of a launch file', () => {
  it('are set in order, expanded inside double quotes, and unknown when set inside a conditional', () => {
    const text = [
      'backend=fsdp',
      'MODEL=${MODEL:-"Qwen/Qwen3-8B"}',
      'BASE="',
      '    a.b=1 \\',
      '    c.d=$backend"',
      'if [ "$backend" = "megatron" ]; then',
      '    NAME=ppo_megatron_trainer',
      '    EXTRA="$BASE x=1"',
      'else',
      '    NAME=ppo_trainer',
      'fi',
      'ALL="$BASE e.f=2"',
      'for n in 1 2; do LAST=$n; done',
      'python3 -m verl.trainer.main_ppo $ALL --config-name=$NAME model=$MODEL',
    ].join('\n');
    const vars = shellVariables(text, text.indexOf('python3'));
    assert.equal(vars.get('backend'), 'fsdp');
    assert.equal(vars.get('MODEL'), 'Qwen/Qwen3-8B');
    // A quoted block over several lines: its continuations joined, its variables expanded.
    assert.equal(vars.get('BASE')!.replace(/\s+/g, ' ').trim(), 'a.b=1 c.d=fsdp');
    assert.equal(vars.get('ALL')!.replace(/\s+/g, ' ').trim(), 'a.b=1 c.d=fsdp e.f=2');
    // Set in the arms of an if, or in a loop: which runs is not decided here.
    assert.equal(vars.has('NAME'), false);
    assert.equal(vars.has('EXTRA'), false);
    assert.equal(vars.has('LAST'), false);
    const cmd = expandShell('run $ALL --config-name=$NAME ${GPUS:-4} ${NODES}', vars);
    assert.match(cmd, /c\.d=fsdp e\.f=2 --config-name=\$NAME 4 \$\{NODES\}$/);
  });
});
