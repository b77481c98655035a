import type { Estimate } from '../estimator/estimate';
import type { LoadedModel } from '../model/load';

/** The estimate as JSON: exact bytes and counts, the terms behind each figure, and every assumption's source. */
export function estimateJson(e: Estimate, model?: LoadedModel) {
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
    plan: { ...e.plan },
    mesh: e.mesh,
    gpu: { id: e.gpu.id, name: e.gpu.name, memoryBytes: e.gpu.memoryMiB * 1024 * 1024 },
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
      seconds: u.time,
      origin: u.origin,
    })),
    unowned: e.unowned,
    modelStateTotalBytes: e.modelStateTotalBytes,
    perGpu: {
      persistentBytes: e.perGpu.persistentBytes,
      modelStateBytes: e.perGpu.modelStateBytes,
      persistent: e.perGpu.persistent,
      hostBytes: e.perGpu.hostBytes,
      host: e.perGpu.host,
    },
    comms: {
      perStep: e.comms.perStep,
      traffic: e.comms.traffic,
      perMicroBatch: e.comms.perMicroBatch,
      zero3ReferenceBytes: e.comms.zero3ReferenceBytes,
      ddpAllReduceBytes: e.comms.ddpAllReduceBytes,
      ddpDtype: e.comms.ddpDtype,
      gatherDtype: e.comms.gatherDtype,
      reduceDtype: e.comms.reduceDtype,
      shardLink: e.comms.shardLink,
      replicaLink: e.comms.replicaLink,
      seconds: {
        comm: e.comms.commSeconds,
        compute: e.comms.computeSeconds,
        exposed: e.comms.exposedSeconds,
      },
    },
    assumptions: e.assumptions,
    notes: e.notes,
  };
}
