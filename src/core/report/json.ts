/** The estimate as JSON: exact bytes and counts, the terms of each figure, and every assumption's source. */
import { collectiveCount, modelParallelLinks, trafficBytes } from '../estimator/collectives';
import { planLabel } from '../vocabulary/fsdp';
import type { Estimate } from '../estimator/types';
import { usableBytes } from '../estimator/fit';
import { gpuBytes } from '../hardware/catalog';
import type { MinGpus } from '../whatif/model';
import type { LoadedModel } from '../model/load';

/** The estimate as JSON: exact bytes and counts, the terms behind each figure, and every assumption's source. */
export function estimateJson(e: Estimate, model?: LoadedModel, minGpus?: MinGpus) {
  return {
    model: {
      name: e.model.name,
      ...(model?.id ? { id: model.id } : {}),
      params: e.model.params,
      trainableParams: e.model.trainableParams,
      bufferBytes: e.model.bufferBytes,
      source: model?.origin ?? e.model.source.detail ?? e.model.source.kind,
      from: e.model.source,
    },
    /** Parts of the model not counted: when any, every byte figure is a lower bound and a fit that holds is undecided. */
    gaps: e.gaps,
    /** Memory the peak leaves out though the model is counted whole: the peak and the fit are lower bounds. */
    uncounted: e.uncounted,
    lowerBound: e.gaps.length > 0 || e.uncounted.length > 0,
    /** Parallelism the figures do not model: when any, no fit verdict holds (every fit is undecided). */
    unmodelled: e.unmodelled,
    /** What keeps less than the figures count: when any, activation figures are upper bounds and a fit that fails is undecided. */
    overcounted: e.overcounted,
    upperBound: e.overcounted.length > 0,
    /** Conditions the analysis cannot decide on which the job depends: the figures are one arm's, no fit verdict holds. */
    undecided: e.undecided,
    plan: { ...e.plan, label: planLabel(e.plan.api, e.plan.strategy) },
    mesh: e.mesh,
    gpu: {
      id: e.gpu.id,
      name: e.gpu.name,
      memoryBytes: gpuBytes(e.gpu),
      usableBytes: usableBytes(gpuBytes(e.gpu), e.fitReserve),
    },
    units: e.units.map((u) => ({
      name: u.name,
      modules:
        u.modules.length > 8 ? [...u.modules.slice(0, 8), `… ${u.modules.length - 8} more`] : u.modules,
      classNames: u.classNames,
      isRoot: u.isRoot,
      params: u.params,
      trainableParams: u.trainableParams,
      gatheredBytes: u.gatheredBytes,
      shardBytes: u.shard,
      residency: u.residency,
      offload: u.offload,
      traffic: u.traffic,
      trafficBytes: trafficBytes(u.traffic),
      seconds: u.time,
      origin: u.origin,
      site: u.site,
    })),
    unowned: e.unowned,
    hostPerNode: e.hostPerNode,
    modelStateTotalBytes: e.modelStateTotalBytes,
    perGpu: {
      persistentBytes: e.perGpu.persistentBytes,
      modelStateBytes: e.perGpu.modelStateBytes,
      persistent: e.perGpu.persistent,
      hostBytes: e.perGpu.hostBytes,
      host: e.perGpu.host,
      peakBytes: e.perGpu.peakBytes,
      // The allocated peak (`max_memory_allocated`) and what the caching allocator holds reserved on a GPU with
      // room (`reserved_bytes.all.peak`), its side streams' pools included.
      reservedBytes: e.perGpu.reservedBytes,
      reservedPools: e.timeline?.pools ?? null,
      peakAt: e.perGpu.peakAt,
      peak: e.perGpu.peak,
      peakForwardBackwardBytes: e.perGpu.peakForwardBackwardBytes,
      perUnitPeakBytes: e.timeline?.perUnit ?? {},
      activationBytes: e.timeline?.activationBytes ?? null,
    },
    fit: e.fit,
    targetFit: e.targetFit,
    fitReserve: {
      contextBytes: e.fitReserve.contextBytes,
      fragmentation: e.fitReserve.fragmentation,
      ...(e.fitReserve.measured ? { measured: e.fitReserve.measured } : {}),
      rule: "fits when peak x (1 + fragmentation) + context <= the memory the driver reports; the side streams' cached blocks in reservedBytes are freed and retried before out-of-memory",
    },
    minGpus: minGpus?.worldSize ?? null,
    ...(minGpus?.wholeNodes ? { minGpusOnWholeNodes: minGpus.wholeNodes } : {}),
    ...(minGpus?.reason ? { minGpusReason: minGpus.reason } : {}),
    ...(minGpus?.undecided ? { minGpusUndecided: true } : {}),
    recomputeFraction: e.timeline?.recomputeFraction ?? 0,
    // Under pipeline parallelism: each rank's stages, micro-batches in flight and peak; the figures above are the
    // worst rank's.
    pipeline: e.pipeline ?? null,
    // A job whose GPUs the step shares with other phases (an RL trainer's rollout): each phase's bytes in the
    // training process and the rollout engine's fraction of the GPU; the fit above is the worst phase's.
    colocated: e.colocated ?? null,
    timeline: (e.timeline?.events ?? []).map((ev) => ({
      phase: ev.phase,
      unit: ev.unit,
      label: ev.label,
      totalBytes: ev.total,
      live: ev.live,
    })),
    comms: {
      perStep: e.comms.perStep,
      /** Bytes and collectives of a step, all kinds together. */
      perStepTotal: {
        bytes:
          trafficBytes(e.comms.perStep) + modelParallelLinks(e.comms.links).reduce((t, l) => t + l.bytes, 0),
        collectives:
          collectiveCount(e.comms.perStep) +
          modelParallelLinks(e.comms.links).reduce((t, l) => t + l.collectives, 0),
      },
      traffic: e.comms.traffic,
      perMicroBatch: e.comms.perMicroBatch,
      zero3ReferenceBytes: e.comms.zero3ReferenceBytes,
      ddpAllReduceBytes: e.comms.ddpAllReduceBytes,
      ddpDtype: e.comms.ddpDtype,
      gatherDtype: e.comms.gatherDtype,
      reduceDtype: e.comms.reduceDtype,
      shardLink: e.comms.shardLink,
      replicaLink: e.comms.replicaLink,
      links: e.comms.links,
      seconds: {
        comm: e.comms.commSeconds,
        compute: e.comms.computeSeconds,
        exposed: e.comms.exposedSeconds,
        transfersHide: e.comms.transfersHide,
      },
    },
    assumptions: e.assumptions,
    notes: e.notes,
  };
}
