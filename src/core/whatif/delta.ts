/**
 * Why the figures differ between two estimates of one model: the inputs that differ, applied to the first
 * estimate's plan one named cause at a time (precision, checkpointing, loss, batch, sequence, world size, ...),
 * each cause's bytes the change it makes on top of the ones before, and what is left the plan's own (its units,
 * wrap API, reshard, offload, fine-tuning). The causes add up to the total by construction.
 */
import { INPUT_KEYS, inputSpec, type InputKey, type TrainingSetup } from '../inputs/table';
import type { Estimate } from '../estimator/types';
import { WhatIfModel, type WhatIf } from './model';
import type { EstimateInput } from '../estimator/types';

/** The causes in the order they apply, and the inputs each is made of. */
const CAUSES: [string, InputKey[]][] = [
  ['precision', ['masterDtype', 'paramDtype', 'reduceDtype', 'float8', 'float8Skip']],
  ['checkpointing', ['checkpointing', 'reentrantCheckpoint', 'activationOffload']],
  ['loss', ['loss', 'keepsOutput', 'compile', 'attention']],
  ['batch', ['microBatch', 'gradAccum', 'globalBatch', 'syncEveryMicroBatch']],
  ['sequence', ['seqLen']],
  ['world size', ['worldSize', 'gpusPerNode', 'replicas']],
  [
    'model parallelism',
    [
      'tensorParallel',
      'tpPlan',
      'lossParallel',
      'contextParallel',
      'cpMethod',
      'expertParallel',
      'pipelineParallel',
      'ppSchedule',
      'ppMicrobatches',
    ],
  ],
  ['optimizer', ['optimizer', 'optimizerImpl', 'pagedOptimizer', 'optimizerInBackward', 'forwardPrefetch']],
];

export interface DeltaChange {
  key: InputKey;
  label: string;
  from: string;
  to: string;
}

/** One cause: the inputs it changes and what that does on top of the causes before it. */
export interface DeltaCause {
  cause: string;
  changes: DeltaChange[];
  peakBytes: number;
  persistentBytes: number;
  trafficBytes: number;
  /** Host memory per process (offloaded state). */
  hostBytes: number;
}

export interface DeltaSide {
  peakBytes: number;
  persistentBytes: number;
  trafficBytes: number;
  /** Host memory per process (offloaded state). */
  hostBytes: number;
  verdict: string | null;
  gpu: string;
  worldSize: number;
}

export interface EstimateDelta {
  before: DeltaSide;
  after: DeltaSide;
  /** The causes in order; empty when the models differ (then only the totals compare). */
  causes: DeltaCause[];
  /** Why the change is not attributed, when it is not. */
  unattributed?: string;
}

const side = (e: Estimate): DeltaSide => ({
  peakBytes: e.perGpu.peakBytes,
  persistentBytes: e.perGpu.persistentBytes,
  trafficBytes: e.comms.traffic.bytes,
  hostBytes: e.perGpu.hostBytes,
  verdict: e.targetFit?.verdict ?? null,
  gpu: e.gpu.name,
  worldSize: e.mesh.worldSize,
});

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

function show(key: InputKey, v: unknown): string {
  const spec = inputSpec(key) as { show?: (x: unknown) => string };
  return spec.show ? spec.show(v) : v === null ? 'none' : String(v);
}

/**
 * The change from `before` to `after`, attributed: `run(change)` re-estimates `before`'s plan with inputs changed
 * (its what-if), undefined where PyTorch would refuse the combination.
 */
export function estimateDelta(
  before: Estimate,
  after: Estimate,
  run: (change: WhatIf) => Estimate | undefined,
  onSecondModel?: (change: WhatIf) => Estimate | undefined,
): EstimateDelta {
  const out: EstimateDelta = { before: side(before), after: side(after), causes: [] };
  // The same model with adapters added (LoRA): attributed, the adapters last, when the first plan can be estimated
  // on the second model (`onSecondModel`).
  const adapters =
    !!onSecondModel &&
    before.model.name === after.model.name &&
    after.model.params > before.model.params &&
    after.model.trainableParams < after.model.params;
  if (!adapters && (before.model.params !== after.model.params || before.model.name !== after.model.name)) {
    out.unattributed = `the models differ (${before.model.name}, ${after.model.name}): only the totals compare`;
    return out;
  }
  const differs = INPUT_KEYS.filter((k) => !same(before.setup[k], after.setup[k]));
  const grouped = new Set(CAUSES.flatMap(([, keys]) => keys));
  const groups: [string, InputKey[]][] = [
    ...CAUSES.map(
      ([cause, keys]) => [cause, keys.filter((k) => differs.includes(k))] as [string, InputKey[]],
    ),
    ['other inputs', differs.filter((k) => !grouped.has(k))],
  ];
  let prev = before;
  const change: Partial<TrainingSetup> = {};
  for (const [cause, keys] of groups) {
    if (!keys.length) continue;
    for (const k of keys) (change as Record<string, unknown>)[k] = after.setup[k];
    const next = run({ ...change });
    if (!next) {
      out.unattributed = `${cause} with the changes before it is a combination PyTorch refuses on the first plan: the rest is counted with the plan`;
      break;
    }
    out.causes.push({
      cause,
      changes: keys.map((k) => ({
        key: k,
        label: inputSpec(k).label,
        from: show(k, before.setup[k]),
        to: show(k, after.setup[k]),
      })),
      peakBytes: next.perGpu.peakBytes - prev.perGpu.peakBytes,
      persistentBytes: next.perGpu.persistentBytes - prev.perGpu.persistentBytes,
      trafficBytes: next.comms.traffic.bytes - prev.comms.traffic.bytes,
      hostBytes: next.perGpu.hostBytes - prev.perGpu.hostBytes,
    });
    prev = next;
  }
  // Then the plan's own changes that the what-if model can make on the first plan, each a cause of its own.
  const plan: WhatIf = {};
  const planSteps: [string, WhatIf, DeltaChange][] = [];
  const kept = (e: Estimate) => e.units.filter((u) => !u.isRoot && u.residency.kind === 'keep').length;
  const blocks = (e: Estimate) => e.units.filter((u) => !u.isRoot).length;
  // Units of k consecutive blocks: the second plan has 1/k of the first's.
  const nA = blocks(before);
  const nB = blocks(after);
  if (before.plan.api === after.plan.api && nB > 0 && nB < nA && nA % nB === 0)
    planSteps.push([
      'unit granularity',
      { blocksPerUnit: nA / nB },
      {
        key: 'units' as InputKey,
        label: 'units',
        from: String(before.units.length),
        to: String(after.units.length),
      },
    ]);
  // Every unit kept gathered from forward to backward, or none.
  if (before.plan.api === after.plan.api && kept(before) !== kept(after)) {
    const all = (e: Estimate) => kept(e) === blocks(e);
    if (kept(before) === 0 && all(after))
      planSteps.push([
        'reshard',
        { strategy: 'SHARD_GRAD_OP' },
        {
          key: 'reshard' as InputKey,
          label: 'units kept gathered after forward',
          from: '0',
          to: String(kept(after)),
        },
      ]);
    else if (all(before) && kept(after) === 0)
      planSteps.push([
        'reshard',
        before.plan.api === 'fsdp2' ? { reshardAll: true } : { strategy: 'FULL_SHARD' },
        {
          key: 'reshard' as InputKey,
          label: 'units kept gathered after forward',
          from: String(kept(before)),
          to: '0',
        },
      ]);
  }
  // Every unit's state in host memory, or none.
  const offloaded = (e: Estimate) => e.units.filter((u) => u.offload).length;
  if (offloaded(before) !== offloaded(after)) {
    const toAll = offloaded(before) === 0 && offloaded(after) === after.units.length;
    const toNone = offloaded(before) === before.units.length && offloaded(after) === 0;
    if (toAll || toNone)
      planSteps.push([
        'offload',
        { offload: toAll },
        {
          key: 'offload' as InputKey,
          label: 'units offloaded to the CPU',
          from: String(offloaded(before)),
          to: String(offloaded(after)),
        },
      ]);
  }
  // FSDP1's units made FSDP2's, before the reshard and offload that follow from the second plan's own wraps.
  if (before.plan.api === 'fsdp1' && after.plan.api === 'fsdp2')
    planSteps.splice(nB > 0 && nB < nA ? 1 : 0, 0, [
      'FSDP1 to FSDP2',
      { api: 'fsdp2' },
      { key: 'api' as InputKey, label: 'wrap API', from: 'fsdp1', to: 'fsdp2' },
    ]);
  const attributed = new Set<string>();
  for (const [cause, step, said] of out.unattributed ? [] : planSteps) {
    const next = run({ ...change, ...plan, ...step });
    // A step that does not make the second plan's units is left to the plan's remainder.
    if (!next || (cause === 'unit granularity' && next.units.length !== after.units.length)) continue;
    Object.assign(plan, step);
    attributed.add(said.key);
    if (step.strategy) attributed.add('strategy');
    out.causes.push({
      cause,
      changes: [said],
      peakBytes: next.perGpu.peakBytes - prev.perGpu.peakBytes,
      persistentBytes: next.perGpu.persistentBytes - prev.perGpu.persistentBytes,
      trafficBytes: next.comms.traffic.bytes - prev.comms.traffic.bytes,
      hostBytes: next.perGpu.hostBytes - prev.perGpu.hostBytes,
    });
    prev = next;
  }
  // The adapters: the first plan, with every change before, on the second model (its base frozen, LoRA trained).
  if (adapters && !out.unattributed) {
    const next = onSecondModel!({ ...change, ...plan });
    if (next && next.model.params === after.model.params) {
      attributed.add('trainable');
      out.causes.push({
        cause: 'LoRA',
        changes: [
          {
            key: 'trainable' as InputKey,
            label: 'trainable parameters',
            from: String(before.model.trainableParams),
            to: String(after.model.trainableParams),
          },
        ],
        peakBytes: next.perGpu.peakBytes - prev.perGpu.peakBytes,
        persistentBytes: next.perGpu.persistentBytes - prev.perGpu.persistentBytes,
        trafficBytes: next.comms.traffic.bytes - prev.comms.traffic.bytes,
        hostBytes: next.perGpu.hostBytes - prev.perGpu.hostBytes,
      });
      prev = next;
    } else
      out.unattributed =
        'the first plan could not be estimated on the model with adapters: their bytes are counted with the plan';
  }
  // What the inputs and those changes do not explain: the plan itself.
  const rest = {
    peakBytes: after.perGpu.peakBytes - prev.perGpu.peakBytes,
    persistentBytes: after.perGpu.persistentBytes - prev.perGpu.persistentBytes,
    trafficBytes: after.comms.traffic.bytes - prev.comms.traffic.bytes,
    hostBytes: after.perGpu.hostBytes - prev.perGpu.hostBytes,
  };
  const planChanges: DeltaChange[] = [];
  const left = (key: string, label: string, a: unknown, b: unknown) => {
    if (!same(a, b) && !attributed.has(key))
      planChanges.push({ key: key as InputKey, label, from: String(a), to: String(b) });
  };
  left('api', 'wrap API', before.plan.api, after.plan.api);
  left('units', 'units', before.units.length, after.units.length);
  left('strategy', 'sharding strategy', before.plan.strategy, after.plan.strategy);
  left('reshard', 'units kept gathered after forward', kept(before), kept(after));
  left('offload', 'units offloaded to the CPU', offloaded(before), offloaded(after));
  left('trainable', 'trainable parameters', before.model.trainableParams, after.model.trainableParams);
  if (planChanges.length || rest.peakBytes || rest.persistentBytes || rest.trafficBytes || rest.hostBytes)
    out.causes.push({
      cause: 'the plan',
      changes: planChanges,
      ...rest,
    });
  return out;
}

/**
 * The first job's plan and inputs estimated on the second job's model (its adapters added), for the adapters'
 * cause of a delta; undefined where the first plan's modules are not the second model's.
 */
export function onModelOf(
  first: EstimateInput,
  second: EstimateInput,
): (change: WhatIf) => Estimate | undefined {
  let model: WhatIfModel | null | undefined;
  return (change) => {
    if (model === undefined)
      try {
        model = new WhatIfModel({ ...first, model: second.model });
      } catch {
        model = null;
      }
    try {
      return model?.tryRun(change);
    } catch {
      return undefined;
    }
  };
}
