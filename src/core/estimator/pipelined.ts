/**
 * The estimate of a pipeline: every rank's stages estimated as their own FSDP job beside the micro-batches its
 * schedule keeps in flight, and the figures of the rank with the highest peak.
 */
import { findLink } from '../hardware/catalog';
import { transfersHide } from './collectives';
import { ownedStateBytes } from './shards';
import { assignParameters } from './units';
import { countParams, moduleAt, outermostOfClass, type ModuleNode } from '../model/tree';
import { stageTree } from '../model/pipelineStages';
import { fmtBytes } from '../vocabulary/bytes';
import { DTYPE_BYTES } from '../vocabulary/dtypes';
import { blockRanges, count, fmtInFlight } from '../vocabulary/words';
import { pipelineLayout, rankKind, type PipelineRank } from './pipeline';
import type { Estimate, EstimateInput, StageRun } from './types';

/** The estimate of one FSDP mesh, for a rank's stage tree (`estimate.ts`), with the rank's run for its timeline. */
export type MeshEstimate = (input: EstimateInput, stage?: StageRun) => Estimate;

/** Each rank's tree by the blocks it holds: what-if runs estimate one model at many world sizes. */
const TREES = new WeakMap<ModuleNode, Map<string, ModuleNode>>();

function rankTree(root: ModuleNode, blockClass: string, r: PipelineRank): ModuleNode {
  let byKey = TREES.get(root);
  if (!byKey) TREES.set(root, (byKey = new Map()));
  const key = `${r.blocks.join(',')}/${r.first}/${r.last}`;
  let tree = byKey.get(key);
  if (!tree) byKey.set(key, (tree = stageTree(root, blockClass, new Set(r.blocks), r.first, r.last)));
  return tree;
}

/**
 * Estimates a job with pipeline parallelism of degree P > 1: torchtitan's split of the decoder into stages, each
 * rank's stages as an FSDP job of its own over the world / P GPUs of its stage, with the micro-batches its
 * schedule keeps in flight. A pipeline PyTorch refuses, or a model whose blocks are not known, is estimated
 * without the split and says that pipeline parallelism is not modelled, so that no verdict rests on it.
 */
export function pipelined(whole: EstimateInput, mesh: MeshEstimate): Estimate {
  const { setup } = whole;
  const P = setup.pipelineParallel;
  const shape = whole.model.shape;
  const unmodelled = (why: string): Estimate =>
    mesh({
      ...whole,
      unmodelled: [...(whole.unmodelled ?? []), `pipeline parallelism (degree ${P}; ${why})`],
    });
  const blockNodes = shape ? outermostOfClass(whole.model.root, shape.blockClass) : [];
  const blocks = blockNodes.length;
  // Blocks differ by what they hold (a dense MLP or experts): their classes and parameter counts.
  const blockKind = (i: number) => `${blockNodes[i]!.className}:${blockNodes[i]!.children.length}`;
  if (!shape || blocks === 0) return unmodelled("the model's blocks are not known");
  // The batch each GPU runs per step is split into micro-batches (`split_args_kwargs_into_chunks`), one sample each
  // unless said.
  const m = setup.ppMicrobatches ?? setup.microBatch;
  if (m > setup.microBatch)
    return unmodelled(`a batch of ${setup.microBatch} cannot be split into ${m} micro-batches`);
  const layout = pipelineLayout(blocks, P, setup.ppSchedule, m);
  if ('problem' in layout) return unmodelled(layout.problem);
  const mbs = Math.ceil(setup.microBatch / m);
  // What crosses a stage boundary per micro-batch: its hidden states, sequence-sharded under torchtitan's tensor
  // parallelism (the stage's output is a DTensor whose local shard is sent) and split by context parallelism.
  const computeBytes = DTYPE_BYTES[setup.paramDtype ?? setup.masterDtype];
  const sequenceSharded = setup.tensorParallel > 1 && setup.tpPlan === 'torchtitan';
  const tokens = (mbs * setup.seqLen) / setup.contextParallel / (sequenceSharded ? setup.tensorParallel : 1);
  const boundary = tokens * shape.hidden * computeBytes;
  const stageSetup = { ...setup, microBatch: mbs };

  const byKind = new Map<string, Estimate>();
  for (const r of layout.ranks) {
    const kind = rankKind(r, blockKind);
    if (byKind.has(kind)) continue;
    const stageRoot = rankTree(whole.model.root, shape.blockClass, r);
    // Receive buffers, one per micro-batch and stage boundary (`_setup_forward_recv_info`,
    // `_create_grad_recv_info` in torch/distributed/pipelining/stage.py): the forward ones of the micro-batches
    // in flight are their stages' saved inputs, counted with the activations.
    const inFlightPerStage = Math.min(m, r.inFlight);
    const receiveBytes =
      m * boundary * (r.receives.forward + r.receives.backward) -
      inFlightPerStage * boundary * r.receives.forward;
    const run: StageRun = {
      first: r.first,
      last: r.last,
      inFlight: r.inFlight,
      lossInFlight: r.lossInFlight,
      steady: r.steady,
      microbatches: m,
      receiveBytes: Math.max(0, receiveBytes),
      // The output of each local stage that is not the model's last, kept in `fwd_cache` until its backward.
      outputBytes: boundary * r.stages.filter((s) => !s.last).length,
      ...(r.pendingWeight ? { pendingWeight: r.pendingWeight } : {}),
    };
    // The plan's units this rank holds (the root always: it wraps what the rank's other units leave).
    const plan = {
      ...whole.plan,
      units: whole.plan.units.filter((u) => u.isRoot || u.modules.some((p) => moduleAt(stageRoot, p))),
    };
    byKind.set(
      kind,
      mesh({ ...whole, setup: stageSetup, plan, model: { ...whole.model, root: stageRoot } }, run),
    );
  }
  const of = (r: PipelineRank) => byKind.get(rankKind(r, blockKind))!;
  let worst = layout.ranks[0]!;
  for (const r of layout.ranks) if (of(r).perGpu.peakBytes > of(worst).perGpu.peakBytes) worst = r;
  const result = of(worst);
  // The model's counts are the whole model's, not one rank's.
  result.model = {
    ...result.model,
    params: countParams(whole.model.root),
    trainableParams: countParams(whole.model.root, (p) => p.trainable),
  };
  result.setup = setup;
  result.modelStateTotalBytes = ownedStateBytes(
    assignParameters(whole.model.root, whole.plan, setup.masterDtype),
    setup,
  );
  result.pipeline = {
    degree: P,
    schedule: setup.ppSchedule,
    microbatches: m,
    microBatchSize: mbs,
    stagesPerRank: layout.stagesPerRank,
    worstRank: worst.rank,
    ranks: layout.ranks.map((r) => {
      const e = of(r);
      return {
        rank: r.rank,
        stages: r.stages.map((s) => ({ index: s.index, from: s.from, to: s.to })),
        first: r.first,
        last: r.last,
        inFlight: r.inFlight,
        peakBytes: e.perGpu.peakBytes,
        reservedBytes: e.perGpu.reservedBytes,
      };
    }),
  };
  // Each rank runs its stages for every micro-batch; point-to-point, each boundary it crosses sends a
  // micro-batch's hidden states forward and their gradient back (`get_fwd_send_ops`, `get_bwd_send_ops`).
  const K = setup.gradAccum;
  result.comms.computeSeconds *= m;
  result.comms.transfersHide = transfersHide(result.comms);
  const sends = (worst.sends.forward + worst.sends.backward) * m * K;
  if (sends > 0) {
    // Pipeline neighbours are world / P ranks apart (`pp` outermost in the mesh).
    const apart = setup.worldSize / P;
    const link = findLink(apart < setup.gpusPerNode ? result.gpu.intraNode : result.gpu.interNode)!;
    const bytes = sends * boundary;
    const seconds = bytes / (link.perDirectionGBs * 1e9 * setup.linkEfficiency);
    result.comms.links.push({ link, role: 'pipeline parallel', collectives: sends, bytes, seconds });
    result.comms.traffic.terms.push({
      name: 'pipeline parallel sends',
      bytes,
      formula: `${sends} per step (${worst.sends.forward} forward and ${worst.sends.backward} backward per micro-batch x ${m} micro-batches${K > 1 ? ` x ${K}` : ''}) x b·s·h = ${fmtBytes(boundary)}`,
    });
    result.comms.traffic.bytes += bytes;
  }
  const v = layout.stagesPerRank;
  const held = blockRanges(worst.stages);
  result.notes.unshift(
    `pipeline parallelism: ${P} ranks of ${count(layout.stages.length, 'stage')} (${setup.ppSchedule}, ${count(v, 'stage')} per rank), ${count(m, 'micro-batch', 'micro-batches')} of ${mbs}; the figures are rank ${worst.rank}'s (blocks ${held}${worst.first ? ', the embedding' : ''}${worst.last ? ', the head and the loss' : ''}), which keeps ${fmtInFlight(worst.inFlight)} micro-batches in flight and has the highest peak`,
    `the pipeline's bubble: each rank idles for about ${P - 1} of ${m * v + P - 1} micro-batch slots of its stages (not in the time above)`,
  );

  if (whole.plan.units.some((u) => !u.isRoot && u.reshardAfterForward === true))
    result.notes.push(
      `reshard_after_forward=True under pipeline parallelism: the peak holds the stages gathered all the same (a micro-batch's backward leaves them gathered: set_reshard_after_backward(False)), but each micro-batch gathers them again: about ${m} times the all-gathers counted per step`,
    );
  return result;
}
