/**
 * What fits, as `fsdp-lens fit` and the panel's "Where it fits" show it: for every GPU of the catalog the largest
 * micro-batch and the longest sequence whose estimate fits and the fewest GPUs, and the changes that make the plan
 * fit ranked by the step time they cost for the tokens the job trains on now.
 */
import type { Estimate } from '../estimator/types';
import { GPUS, gpuBytes } from '../hardware/catalog';
import type { Verdict } from '../vocabulary/fsdp';
import { advise } from './advice';
import type { WhatIf, WhatIfModel } from './model';
import { checkedMinGpus, largestFittingOn, stepSeconds, type LargestOn, type SmallestOn } from './solve';

/** The largest micro-batch and sequence searched. */
export const MAX_MICRO_BATCH = 4096;
export const MAX_SEQ = 1 << 21;

/** One GPU's answers. */
export interface GpuFitRow {
  gpu: string;
  name: string;
  memoryBytes: number;
  /** The plan as it is, on this GPU. */
  verdict: Verdict | null;
  largestMicroBatch: LargestOn;
  longestSequence: LargestOn;
  smallestWorldSize: SmallestOn;
}

/** A change that makes the plan fit, with the step time it leads to. */
export interface FitChange {
  label: string;
  /** The change as the panel's what-if controls express it. */
  whatIf: WhatIf;
  peakBytes: number;
  /** The step time for the tokens the job trains on now (a smaller batch is a cheaper step of fewer tokens). */
  stepSeconds: number;
  /** A cost the step time leaves out, in words: then `stepSeconds` is a lower bound. */
  unmodelledCost?: string;
}

export interface FitReport {
  target: {
    gpu: string;
    worldSize: number;
    microBatch: number;
    seqLen: number;
    verdict: Verdict | null;
    stepSeconds: number;
  };
  /** Every GPU of the catalog, smallest memory first. */
  perGpu: GpuFitRow[];
  /** Changes that fit, cheapest first; those with a cost the step time leaves out after the timed ones. */
  changes: FitChange[];
}

/** Tokens a step trains on per GPU. */
const tokens = (e: Estimate) => e.setup.microBatch * e.setup.seqLen * e.setup.gradAccum;

/** The answers for the estimate `e` of `model` under the what-if `w` (the panel's values; none for the file's). */
export function fitReport(model: WhatIfModel, e: Estimate, w: WhatIf = {}): FitReport {
  const run = (change: WhatIf): Estimate | undefined => model.tryRun({ ...w, ...change });
  const gpus = [...GPUS].sort((a, b) => gpuBytes(a) - gpuBytes(b) || a.id.localeCompare(b.id));
  const ids = gpus.map((g) => g.id);
  const micros = largestFittingOn(run, 'microBatch', e.setup.microBatch, MAX_MICRO_BATCH, ids);
  const seqs = largestFittingOn(run, 'seqLen', e.setup.seqLen, MAX_SEQ, ids);
  const perGpu = gpus.map((g) => ({
    gpu: g.id,
    name: g.name,
    memoryBytes: gpuBytes(g),
    verdict: e.fit.find((f) => f.gpu === g.id)?.verdict ?? null,
    largestMicroBatch: micros.get(g.id)!,
    longestSequence: seqs.get(g.id)!,
    // Checked against that GPU's own estimate at the count found.
    smallestWorldSize: checkedMinGpus(
      model.minGpus(g.id, w),
      (n) => run({ worldSize: n, gpu: g.id })?.targetFit,
    ),
  }));
  // The changes the advice compares, each re-estimated for its step time; those that fit, cheapest first.
  const changes = advise(model, w, e)
    .filter((a) => a.id === 'fit')
    .flatMap((a) => a.options)
    .filter((o) => o.verdict === 'fits' && o.whatIf)
    .flatMap((o): FitChange[] => {
      const est = run(o.whatIf!);
      if (!est) return [];
      return [
        {
          label: o.whatIf!.gpu ? `on ${o.label}` : o.label,
          whatIf: o.whatIf!,
          peakBytes: o.peakBytes,
          stepSeconds: stepSeconds(est) * (tokens(e) / tokens(est)),
          ...(o.unmodelledCost ? { unmodelledCost: o.unmodelledCost } : {}),
        },
      ];
    })
    // A lower bound ranks after every timed change: what it leaves out may be the most of its cost.
    .sort((a, b) => Number(!!a.unmodelledCost) - Number(!!b.unmodelledCost) || a.stepSeconds - b.stepSeconds);
  return {
    target: {
      gpu: e.gpu.name,
      worldSize: e.mesh.worldSize,
      microBatch: e.setup.microBatch,
      seqLen: e.setup.seqLen,
      verdict: e.targetFit?.verdict ?? null,
      stepSeconds: stepSeconds(e),
    },
    perGpu,
    changes,
  };
}
