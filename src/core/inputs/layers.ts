/**
 * Precedence: each input takes its value from the highest layer that sets it (a flag, an annotation, the
 * framework's configuration, the code, pyproject.toml, a launch file, an editor setting), else its default, and
 * says where it came from (docs/estimator.md, "Inputs").
 */
import type { Assumption, Source } from '../vocabulary/source';
import {
  DEFAULTS,
  INPUT_KEYS,
  INPUTS,
  showInput,
  type InputKey,
  type SetupValues,
  type TrainingSetup,
} from './table';

/** One source of inputs; layers are listed highest precedence first. */
export interface Layer {
  source: Source;
  values: SetupValues;
  /** Per-key source detail (`train.py:12` for the mesh, another line for the dtype). */
  details?: Partial<Record<InputKey, string>>;
}

/** Whether `replicas` HSDP replicas split `worldSize` GPUs into whole shard groups. */
export function replicasDivide(worldSize: number, replicas: number): boolean {
  return replicas >= 1 && worldSize % replicas === 0;
}

/** Resolves every input by precedence, recording where each came from. */
export function resolveSetup(layers: Layer[]): { setup: TrainingSetup; assumptions: Assumption[] } {
  const all: Layer[] = [...layers, { source: { kind: 'default' }, values: DEFAULTS }];
  const chosen = {} as Record<InputKey, { value: unknown; source: Source }>;
  for (const key of INPUT_KEYS) {
    for (const layer of all) {
      const v = layer.values[key];
      if (v === undefined) continue;
      const detail = layer.details?.[key] ?? layer.source.detail;
      chosen[key] = {
        value: v,
        source: detail ? { kind: layer.source.kind, detail } : { kind: layer.source.kind },
      };
      break;
    }
  }
  const setup = Object.fromEntries(INPUT_KEYS.map((k) => [k, chosen[k].value])) as TrainingSetup;
  // The world is whole tensor-parallel groups, then whole replicas of whole shard groups: a degree that does not
  // divide it is not used (PyTorch's `init_device_mesh` refuses such a mesh).
  // Pipeline stages are the outermost dimension (torchtitan's mesh: pp, dp_replicate, dp_shard, cp, tp).
  const askedPp = setup.pipelineParallel;
  if (setup.worldSize % setup.pipelineParallel !== 0) setup.pipelineParallel = 1;
  const perStage = setup.worldSize / setup.pipelineParallel;
  const askedTp = setup.tensorParallel;
  if (perStage % setup.tensorParallel !== 0) setup.tensorParallel = 1;
  const askedCp = setup.contextParallel;
  if ((perStage / setup.tensorParallel) % setup.contextParallel !== 0) setup.contextParallel = 1;
  const askedReplicas = setup.replicas;
  if (!replicasDivide(perStage / setup.tensorParallel, setup.replicas)) setup.replicas = 1;
  // Expert parallelism borrows its ranks from the shard group (torchtitan's `ParallelDims._validate`: `ep` must
  // divide dp_shard x cp x tp), innermost.
  const askedEp = setup.expertParallel;
  const shardGroup = perStage / setup.replicas;
  if (shardGroup % setup.expertParallel !== 0) setup.expertParallel = 1;
  // A global batch without a gradient accumulation given: the micro-batches each data-parallel GPU runs per step
  // (Composer's `device_train_batch_size / device_train_microbatch_size`, rounded up; torchtitan's
  // `global_batch_size // (local_batch_size * dp_degree)`).
  if (setup.globalBatch !== null && chosen.gradAccum.source.kind === 'default') {
    const dp = perStage / (setup.tensorParallel * setup.contextParallel);
    const k = Math.ceil(setup.globalBatch / (setup.microBatch * dp));
    if (Number.isFinite(k) && k > 1) {
      setup.gradAccum = k;
      chosen.gradAccum = {
        value: k,
        source: {
          kind: chosen.globalBatch.source.kind,
          detail: `global batch ${setup.globalBatch} / (micro-batch ${setup.microBatch} x ${dp} data-parallel GPUs)${chosen.globalBatch.source.detail ? `, ${chosen.globalBatch.source.detail}` : ''}`,
        },
      };
    }
  }
  // Degrees left at their default of 1 are not listed.
  // Inputs that only qualify another one are not listed while it is off.
  const unused = (k: InputKey) =>
    ((k === 'replicas' ||
      k === 'tensorParallel' ||
      k === 'contextParallel' ||
      k === 'pipelineParallel' ||
      k === 'expertParallel') &&
      setup[k] === 1 &&
      chosen[k].source.kind === 'default') ||
    (chosen[k].source.kind === 'default' &&
      (((k === 'lossParallel' || k === 'tpPlan') && setup.tensorParallel === 1) ||
        (k === 'cpMethod' && setup.contextParallel === 1) ||
        ((k === 'ppSchedule' || k === 'ppMicrobatches') && setup.pipelineParallel === 1) ||
        (k === 'float8Skip' && setup.float8 === 'off') ||
        (k === 'pagedOptimizer' && !setup.pagedOptimizer) ||
        (k === 'compile' && setup.compile === 'off') ||
        (k === 'optimizerInBackward' && !setup.optimizerInBackward) ||
        (k === 'reentrantCheckpoint' && !setup.reentrantCheckpoint) ||
        (k === 'activationOffload' && !setup.activationOffload) ||
        (k === 'globalBatch' && setup.globalBatch === null)));
  const assumptions: Assumption[] = INPUT_KEYS.filter((k) => !unused(k)).map((k) => ({
    key: k,
    label: INPUTS[k].label,
    value:
      k === 'replicas' && setup.replicas !== askedReplicas
        ? `1 (${askedReplicas} replicas do not divide ${perStage / setup.tensorParallel} data-parallel GPUs: not used)`
        : k === 'expertParallel' && setup.expertParallel !== askedEp
          ? `1 (a degree of ${askedEp} does not divide the ${shardGroup} GPUs of a shard group: not used)`
          : k === 'pipelineParallel' && setup.pipelineParallel !== askedPp
            ? `1 (a degree of ${askedPp} does not divide ${setup.worldSize} GPUs: not used)`
            : k === 'tensorParallel' && setup.tensorParallel !== askedTp
              ? `1 (a degree of ${askedTp} does not divide ${perStage} GPUs${setup.pipelineParallel > 1 ? ' of a pipeline stage' : ''}: not used)`
              : k === 'contextParallel' && setup.contextParallel !== askedCp
                ? `1 (a degree of ${askedCp} does not divide the ${perStage / setup.tensorParallel} GPUs outside tensor parallelism: not used)`
                : showInput(k, chosen[k].value as never, setup),
    source: chosen[k].source,
  }));
  return { setup, assumptions };
}
