// Pipeline parallelism: torchtitan's stage split, each schedule's micro-batches in flight, and a rank's figures,
// derived by hand from torch.distributed.pipelining's schedules and stage.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { estimate, estimateMesh } from '../../src/core/estimator/estimate';
import { pipelined } from '../../src/core/estimator/pipelined';
import { chunksInFlight, pipelineLayout, scheduleProblem } from '../../src/core/estimator/pipeline';
import { zeroBubblePoints } from '../../src/core/estimator/zeroBubble';
import { weightGradInputs } from '../../src/core/estimator/activations';
import { modelFromHfConfig } from '../../src/core/model/hf';
import type { Estimate, StageRun } from '../../src/core/estimator/types';
import type { SetupValues } from '../../src/core/inputs/table';
import { splitStages } from '../../src/core/model/pipelineStages';
import { cli, defaultInput, projectDir, scanSource } from './helpers';
import { estimateFile } from '../../src/core/resolve/analyze';
import { planTotals } from '../../src/core/report/summary';
import { hoverMarkdown } from '../../src/core/report/hover';
import { estimateText } from '../../src/core/report/text';

describe("pipeline stages as torchtitan's _generate_llm_fqn_per_model_part splits a decoder", () => {
  const blocks = (s: ReturnType<typeof splitStages>) =>
    'problem' in s ? s.problem : s.map((x) => [x.from, x.to, x.first, x.last]);

  it('counts the embedding and the head as a layer each, the first stages taking the remainder', () => {
    // 32 layers + 2 = 34 over 4 stages: 8 each, 2 left for stages 0 and 1 (9 each). Stage 0 gives one of its 9 to
    // the embedding, stage 3 one of its 8 to the norm and head: 8, 9, 8 and 7 blocks.
    assert.deepEqual(blocks(splitStages(32, 4)), [
      [0, 8, true, false],
      [8, 17, false, false],
      [17, 25, false, false],
      [25, 32, false, true],
    ]);
    // Llama 3.1 405B: 126 + 2 = 128 over 8 stages of 16: 15 blocks on the first and last, 16 on the others.
    const s = splitStages(126, 8);
    assert.ok(!('problem' in s));
    assert.deepEqual(
      s.map((x) => x.to - x.from),
      [15, 16, 16, 16, 16, 16, 16, 15],
    );
  });

  it('refuses more stages than layers, as torchtitan does', () => {
    assert.match(String(blocks(splitStages(2, 5))), /more than the 4 layers/);
  });
});

describe("micro-batches in flight, from each schedule's order of actions", () => {
  it('1F1B: min(m, p - r) forwards before the first backward (Schedule1F1B warmup_chunks)', () => {
    assert.deepEqual(
      [0, 1, 2, 3].map((r) => chunksInFlight('1F1B', r, 4, 1, 8)),
      [4, 3, 2, 1],
    );
    assert.equal(chunksInFlight('1F1B', 0, 4, 1, 3), 3);
  });

  it('GPipe and LoopedBFS: every forward before any backward', () => {
    assert.equal(chunksInFlight('GPipe', 2, 4, 1, 8), 8);
    assert.equal(chunksInFlight('LoopedBFS', 2, 4, 2, 8), 16);
  });

  it('Interleaved1F1B: the warm-up of _get_1f1b_rank_ops plus the forward before the first backward', () => {
    // p = 8, v = 2, m = 32: rounds = 32 // 8 = 4, micro-batches per round 8; warm-up (v - 1) x 8 + 2 (p - 1 - r).
    assert.equal(chunksInFlight('Interleaved1F1B', 0, 8, 2, 32), 8 + 14 + 1);
    assert.equal(chunksInFlight('Interleaved1F1B', 7, 8, 2, 32), 8 + 0 + 1);
    // Capped by the m x v chunks of a step.
    assert.equal(chunksInFlight('Interleaved1F1B', 0, 4, 2, 2), 4);
  });

  it('the zero-bubble schedules: pending weight gradients count as in flight', () => {
    // InterleavedZeroBubble: (v - 1) x mpr + p on every rank.
    assert.equal(chunksInFlight('InterleavedZeroBubble', 3, 8, 2, 32), 8 + 8);
    // ZBVZeroBubble: min(2p, 2m, m + r + 1); DualPipeV: 2p + 1.
    assert.equal(chunksInFlight('ZBVZeroBubble', 0, 4, 2, 16), 8);
    assert.equal(chunksInFlight('ZBVZeroBubble', 0, 4, 2, 2), 2 + 0 + 1);
    assert.equal(chunksInFlight('DualPipeV', 1, 4, 2, 16), 9);
  });

  it("says why PyTorch refuses a schedule's micro-batches", () => {
    assert.match(scheduleProblem('1F1B', 8, 4) ?? '', /fewer micro-batches than stages, 4 < 8/);
    assert.match(scheduleProblem('DualPipeV', 4, 6) ?? '', /twice the ranks, 6 < 8/);
    assert.equal(scheduleProblem('GPipe', 8, 4), null);
  });

  it('places two stages per rank in a loop, or in a V for the V schedules', () => {
    const loop = pipelineLayout(32, 4, 'Interleaved1F1B', 8);
    const v = pipelineLayout(32, 4, 'ZBVZeroBubble', 8);
    assert.ok(!('problem' in loop) && !('problem' in v));
    assert.deepEqual(
      loop.ranks[0]!.stages.map((s) => s.index),
      [0, 4],
    );
    // The V: rank 0 holds the first and the last stage, rank 3 the two middle ones, which hand over locally.
    assert.deepEqual(
      v.ranks[0]!.stages.map((s) => s.index),
      [0, 7],
    );
    assert.deepEqual(v.ranks[3]!.sends, { forward: 1, backward: 1 });
    assert.equal(v.ranks[0]!.first && v.ranks[0]!.last, true);
  });
});

/** Four Llama blocks small enough to follow by hand: hidden 64, 8 tokens. */
const TINY = {
  model_type: 'llama',
  hidden_size: 64,
  intermediate_size: 128,
  num_hidden_layers: 4,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  vocab_size: 100,
  tie_word_embeddings: false,
};

/** Each rank's estimate of a pipeline of TINY, by rank kind. */
function ranksOf(values: SetupValues): { rank: StageRun; e: Estimate }[] {
  const out: { rank: StageRun; e: Estimate }[] = [];
  pipelined(defaultInput(TINY, values), (input, stage) => {
    const e = estimateMesh(input, undefined, stage);
    out.push({ rank: stage!, e });
    return e;
  });
  return out;
}

describe('a rank of a 1F1B pipeline, by hand', () => {
  // 2 ranks, 2 GPUs (no data parallelism: FSDP over 1 GPU gathers nothing but holds its units whole), micro-batch
  // 4 split into m = 4 pipeline micro-batches of 1 x 8 tokens, bf16 compute and reduce, full checkpointing.
  const ranks = ranksOf({
    worldSize: 2,
    pipelineParallel: 2,
    microBatch: 4,
    seqLen: 8,
    checkpointing: 'full',
  });
  const first = ranks.find((r) => r.rank.first)!;
  const last = ranks.find((r) => r.rank.last)!;
  // A block: q 64x64, k and v 64x32 (2 KV heads of 16), o 64x64, gate and up 64x128, down 128x64, two norms of 64.
  const BLOCK = 4096 + 2 * 2048 + 4096 + 3 * 8192 + 2 * 64;
  const EMBED = 100 * 64;
  // What crosses a stage boundary, and what a checkpointed block keeps: 1 x 8 tokens x 64 x 2 B.
  const E = 8 * 64 * 2;

  it('splits 4 blocks + 2 as 3 and 3: blocks 0-1 with the embedding, 2-3 with the head', () => {
    assert.equal(ranks.length, 2);
    assert.equal(
      first.e.units.reduce((s, u) => s + u.params, 0),
      2 * BLOCK + EMBED,
    );
  });

  it('keeps min(m, p - r) micro-batches in flight: 2 on the first rank, 1 on the last, after a steady start', () => {
    assert.equal(first.rank.inFlight, 2);
    assert.equal(last.rank.inFlight, 1);
    assert.equal(first.rank.steady, true);
  });

  it("holds its stage gathered, its gradient accumulators full, and the other micro-batch's block inputs", () => {
    // At the first rank's last forward event (block 1): the stage gathered in bf16 (units kept through the step),
    // the unsharded gradients of every micro-batch so far accumulated in the reduce dtype (bf16 here), block 0's
    // input of this micro-batch and both block inputs of the other micro-batch in flight.
    const ev = first.e.timeline!.events.filter((x) => x.phase === 'forward').at(-1)!;
    assert.equal(ev.live.gathered, (2 * BLOCK + EMBED) * 2);
    assert.equal(ev.live.gradients, (2 * BLOCK + EMBED) * 2);
    assert.equal(ev.live.activations, E + 1 * 2 * E);
    // Pipeline buffers: m receive buffers of the gradient from the next stage, and the stage output each of the 2
    // micro-batches in flight keeps until its backward (`fwd_cache`).
    assert.equal(ev.live.pipeline, 4 * E + 2 * E);
    // The last rank: m receive buffers of its input, less the one micro-batch in flight, whose input is its first
    // block's saved input already counted.
    const lastEv = last.e.timeline!.events.find((x) => x.phase === 'forward')!;
    assert.equal(lastEv.live.pipeline, 4 * E - E);
  });

  it('runs the loss only on the last rank', () => {
    assert.equal(first.e.timeline!.events.filter((x) => x.phase === 'loss').length, 0);
    assert.ok(last.e.timeline!.events.some((x) => x.phase === 'loss'));
  });
});

describe('weight gradients a zero-bubble schedule leaves waiting', () => {
  it("follows ScheduleZBVZeroBubble's order: the cool-down's input gradients wait for their weights", () => {
    // Rank 1 of 2, 4 micro-batches (the order is built for max(2p - 1, m) = 4): warm-up F0; F1 F0; F1 I1 W1; steady
    // F0 I0 W0 F1 I1 W1 twice; cool-down I0 I1 (r = 1 pair), I0 W0 (p - r = 1), then W1, W0. Before each backward:
    // 4 chunks in flight with nothing waiting through the steady phase; at the cool-down 3 in flight (2 of the
    // first stage, 1 of the second), and before its last input gradient, 2 of them waiting.
    // Every backward of ZBV is an input-gradient step (I), followed later by its weight step (W).
    assert.deepEqual(zeroBubblePoints('ZBVZeroBubble', 1, 2, 2, 4, null), [
      { inFlight: 4, pending: 0, pendingLast: 0, inputStep: true },
      { inFlight: 3, pending: 2, pendingLast: 0, inputStep: true },
    ]);
    // Rank 0 holds the last stage (its local stage 1): nothing waits there before a backward.
    assert.deepEqual(zeroBubblePoints('ZBVZeroBubble', 0, 2, 2, 4, 1), [
      { inFlight: 4, pending: 0, pendingLast: 0, inputStep: true },
    ]);
  });

  it('InterleavedZeroBubble: rank r runs r input gradients before its first weight gradient', () => {
    // _get_1f1b_rank_ops with enable_zero_bubble and num_1f1b_microbatches = r: at the most chunks in flight, r wait.
    const points = zeroBubblePoints('InterleavedZeroBubble', 3, 4, 2, 8, null);
    assert.ok(
      points.some(
        (x) => x.inFlight === chunksInFlight('InterleavedZeroBubble', 3, 4, 2, 8) && x.pending === 3,
      ),
    );
  });

  it('under tensor parallelism: column-wise outputs 1/T, row-wise output gradients whole', () => {
    const shape = modelFromHfConfig(TINY).shape;
    const x = { microBatch: 1, seqLen: 8, bytes: 2, attention: 'fused' as const };
    // TP 2 with sequence parallelism: q 64, k 32, v 32, gate 128, up 128 halved; o 64 and down 64 whole (their
    // Partial outputs' gradients come back Replicate); the two norms' 128 halved by sequence: 384 wide x 16 B.
    assert.equal(weightGradInputs(shape, { ...x, tp: 2, sequenceParallel: true }, false), 2 * 8 * 384);
    // Without sequence parallelism the norms are whole: 64 more.
    assert.equal(weightGradInputs(shape, { ...x, tp: 2, sequenceParallel: false }, false), 2 * 8 * 448);
    assert.equal(weightGradInputs(shape, x, false), 2 * 8 * 640);
  });

  it("counts each waiting micro-batch's matmul and norm output gradients beside the saved block inputs", () => {
    // ZBV over 2 ranks: 4 stages of TINY's 4 blocks + 2 are 2, 2, 1, 1 layers; rank 1 holds stages 1 and 2 (blocks
    // 1, 2 and 3). Full checkpointing: a micro-batch of the rank keeps 3 block inputs of 8 x 64 x 2 B = 3,072 B.
    const ranks = ranksOf({
      worldSize: 2,
      pipelineParallel: 2,
      ppSchedule: 'ZBVZeroBubble',
      microBatch: 4,
      seqLen: 8,
      checkpointing: 'full',
    });
    const mid = ranks.find((r) => !r.rank.first && !r.rank.last)!;
    // The points in micro-batches of the rank's two stages: 4 chunks = 2, and 3 chunks = 1.5 of which 2 = 1 wait.
    assert.deepEqual(mid.rank.pendingWeight, [
      { inFlight: 2, pending: 0, pendingLast: 0, inputStep: true },
      { inFlight: 1.5, pending: 1, pendingLast: 0, inputStep: true },
    ]);
    // A waiting micro-batch keeps, per block, the output gradient of q 64, k 32, v 32, o 64, gate 128, up 128, down
    // 64 and the two norms' 2 x 64: 640 wide x 8 tokens x 2 B = 10,240 B; 30,720 B for 3 blocks. The running input
    // step (retain_graph=True) ends holding its own 30,720 B too. The worse state is the second: 0.5 x 3,072 +
    // (1 + 1) x 30,720 = 62,976 B beside the running micro-batch's 3,072, where the first has 3,072 + 30,720.
    const backward = mid.e.timeline!.events.filter((x) => x.phase === 'backward');
    assert.equal(Math.max(...backward.map((x) => x.live.activations)), 3 * 1024 + 62_976);
    assert.ok(mid.e.timeline!.notes.some((n) => /ZBVZeroBubble: up to 1 micro-batch/.test(n)));
  });
});

describe('an estimate with pipeline parallelism', () => {
  it("is its worst rank's, with the whole model's counts and the pipeline's ranks", () => {
    const e = estimate(
      defaultInput(TINY, {
        worldSize: 4,
        pipelineParallel: 2,
        microBatch: 4,
        seqLen: 8,
        checkpointing: 'full',
      }),
    );
    // 4 GPUs over 2 stages: FSDP shards over 2.
    assert.equal(e.mesh.shardGroup, 2);
    assert.equal(e.mesh.pp, 2);
    assert.equal(e.model.params, 4 * (4096 + 2 * 2048 + 4096 + 3 * 8192 + 2 * 64) + 2 * 100 * 64 + 64);
    assert.equal(e.pipeline!.ranks.length, 2);
    const worst = e.pipeline!.ranks.find((r) => r.rank === e.pipeline!.worstRank)!;
    assert.equal(worst.peakBytes, e.perGpu.peakBytes);
    assert.ok(e.pipeline!.ranks.every((r) => r.peakBytes <= e.perGpu.peakBytes));
    assert.ok(e.comms.links.some((l) => l.role === 'pipeline parallel'));
    assert.deepEqual(e.unmodelled, []);
  });

  it('says the pipeline is not modelled when PyTorch would refuse its schedule, so no verdict rests on it', () => {
    const e = estimate(defaultInput(TINY, { worldSize: 4, pipelineParallel: 4, microBatch: 2 }));
    assert.match(e.unmodelled.join('\n'), /pipeline parallelism \(degree 4; Schedule1F1B refuses/);
    assert.equal(e.targetFit.verdict, 'undecided');
  });
});

describe("torchtitan's pipeline settings", () => {
  function toml(lines: string[]): string {
    const dir = projectDir('fsdp-lens-pp-');
    const file = path.join(dir, 'job.toml');
    fs.writeFileSync(file, lines.join('\n'));
    return file;
  }

  it('reads the degree, the schedule and the micro-batches, and counts the stages in the world', async () => {
    const file = toml([
      '[model]',
      'name = "llama3"',
      'flavor = "8B"',
      '[training]',
      'local_batch_size = 8',
      'seq_len = 8192',
      '[parallelism]',
      'data_parallel_shard_degree = 4',
      'pipeline_parallel_degree = 2',
      'pipeline_parallel_schedule = "Interleaved1F1B"',
      'pipeline_parallel_microbatch_size = 2',
      '[activation_checkpoint]',
      'mode = "full"',
    ]);
    const r = await cli('estimate', file, '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as {
      mesh: { worldSize: number; shardGroup: number; pp: number };
      pipeline: { schedule: string; microbatches: number; microBatchSize: number; stagesPerRank: number };
      unmodelled: string[];
    };
    // The world is dp_shard x pp; local batch 8 in micro-batches of 2: 4 of them.
    assert.deepEqual([j.mesh.worldSize, j.mesh.shardGroup, j.mesh.pp], [8, 4, 2]);
    assert.deepEqual(
      [j.pipeline.schedule, j.pipeline.microbatches, j.pipeline.microBatchSize, j.pipeline.stagesPerRank],
      ['Interleaved1F1B', 4, 2, 2],
    );
    assert.deepEqual(j.unmodelled, []);
  });

  it("reads a 2024 config's [experimental] degrees, as many micro-batches as stages", async () => {
    const file = toml([
      '[model]',
      'name = "llama3"',
      'flavor = "8B"',
      '[training]',
      'batch_size = 8',
      'seq_len = 2048',
      'data_parallel_shard_degree = 2',
      '[experimental]',
      'pipeline_parallel_degree = 4',
    ]);
    const r = await cli('estimate', file, '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as { mesh: { worldSize: number }; pipeline: { microbatches: number } };
    assert.equal(j.mesh.worldSize, 8);
    assert.equal(j.pipeline.microbatches, 4);
  });

  it('says a stage split of its own is not modelled', async () => {
    const file = toml([
      '[model]',
      'name = "llama3"',
      'flavor = "8B"',
      '[parallelism]',
      'data_parallel_shard_degree = 2',
      'pipeline_parallel_degree = 2',
      'pipeline_parallel_layers_per_stage = 4',
    ]);
    const r = await cli('estimate', file, '--json');
    const j = JSON.parse(r.out) as { unmodelled: string[] };
    assert.match(j.unmodelled.join('\n'), /its own stage split, pipeline_parallel_layers_per_stage/);
  });
});

describe('a pipeline on every surface', () => {
  it('names the rank whose figures the lens, the hover and the text show', async () => {
    const facts = await scanSource(
      [
        '# fsdp: pp=4 world_size=16 batch=8 ac=full',
        'from torch.distributed.fsdp import fully_shard',
        'from transformers import AutoModelForCausalLM',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-70B")',
        'for layer in model.model.layers:',
        '    fully_shard(layer)',
        'fully_shard(model)',
        '',
      ].join('\n'),
      'train_pp.py',
    );
    const r = estimateFile(facts);
    assert.ok(r.ok, r.ok ? '' : r.reason);
    const e = r.estimate;
    // Llama 3.1 70B's 80 blocks over 4 ranks (82 / 4: 21, 21, 20, 20 with the embedding and head): 8
    // micro-batches of 1 under 1F1B.
    assert.deepEqual(
      e.pipeline!.ranks.map((x) => x.stages.map((s) => s.to - s.from)),
      [[20], [21], [20], [19]],
    );
    const worst = `rank ${e.pipeline!.worstRank}`;
    assert.match(planTotals(e), new RegExp(`on pipeline ${worst} of 4`));
    const call = facts.calls.at(-1)!;
    const hover = hoverMarkdown(call, e, 'GB', {});
    assert.match(
      hover,
      new RegExp(`pipeline parallel 4 \\(1F1B, 8 micro-batches\\): the figures are ${worst}'s`),
    );
    assert.match(
      estimateText(e),
      new RegExp(`Pipeline  1F1B, 8 micro-batches of 1, 1 stage per rank; the figures below are ${worst}'s`),
    );
  });
});
