import { findGpu, gpuBytes } from '../hardware/catalog';
import { estimate, type Estimate, type EstimateInput } from './estimate';
import { fmtBytes } from './format';
import { requiredBytes } from './timeline';
import type { Plan, TrainingSetup, Unit } from './types';
import { assignParameters, type Ownership } from './units';

/** Inputs the panel's controls change; everything else stays as the file and settings say. */
export interface WhatIf {
  worldSize?: number;
  gpusPerNode?: number;
  gpu?: string;
  microBatch?: number;
  seqLen?: number;
  checkpointing?: TrainingSetup['checkpointing'];
  /** One unit per k consecutive blocks (1 = one per block, as planned). */
  blocksPerUnit?: number;
}

/**
 * Re-runs estimates of one plan under changed inputs. The parameter ownership is computed once; changing the unit
 * granularity merges consecutive block units instead of walking the model again, so each call stays well under a
 * frame even for the largest models of the catalog.
 */
export class WhatIfModel {
  private readonly base: Ownership;
  private readonly merged = new Map<number, { plan: Plan; ownership: Ownership }>();

  constructor(readonly input: EstimateInput) {
    this.base = assignParameters(input.model.root, input.plan, input.setup.masterDtype);
  }

  run(w: WhatIf = {}): Estimate {
    const setup: TrainingSetup = { ...this.input.setup };
    if (w.worldSize) setup.worldSize = w.worldSize;
    if (w.gpusPerNode) setup.gpusPerNode = w.gpusPerNode;
    if (w.gpu) setup.gpu = w.gpu;
    if (w.microBatch) setup.microBatch = w.microBatch;
    if (w.seqLen) setup.seqLen = w.seqLen;
    if (w.checkpointing) setup.checkpointing = w.checkpointing;
    if (setup.replicas > 1 && setup.worldSize % setup.replicas !== 0) setup.replicas = 1;
    const k = Math.max(1, Math.floor(w.blocksPerUnit ?? 1));
    const { plan, ownership } = k === 1 ? { plan: this.input.plan, ownership: this.base } : this.regrouped(k);
    return estimate({ ...this.input, plan, setup }, ownership);
  }

  /** The smallest world size whose peak fits `gpuId` (keeping the HSDP replica count), or why none does. */
  minGpus(gpuId: string, w: WhatIf = {}): MinGpus {
    const gpu = findGpu(gpuId);
    if (!gpu) return { gpu: gpuId, worldSize: null, reason: `unknown GPU ${gpuId}` };
    const capacity = gpuBytes(gpu);
    const R = Math.max(1, this.input.setup.replicas);
    const fits = (shard: number) => {
      const e = this.run({ ...w, worldSize: shard * R, gpu: gpu.id });
      return { ok: requiredBytes(e.perGpu.peakBytes) <= capacity, e };
    };
    const MAX = 65_536;
    const top = fits(MAX);
    if (!top.ok) {
      // What sharding cannot shrink: everything but the sharded state.
      const fixed = top.e.perGpu.peakBytes - top.e.perGpu.persistentBytes;
      return {
        gpu: gpu.id,
        worldSize: null,
        reason:
          `activations, gathered units and buffers alone need ${fmtBytes(requiredBytes(fixed))} at the peak, more than the ` +
          `${fmtBytes(capacity)} of one ${gpu.name}: more GPUs shrink the sharded state, not these. Use activation ` +
          'checkpointing, a smaller micro-batch or sequence, or smaller units',
      };
    }
    let lo = 1;
    let hi = MAX;
    if (fits(1).ok) hi = 1;
    while (lo + 1 < hi) {
      const mid = Math.floor((lo + hi) / 2);
      if (fits(mid).ok) hi = mid;
      else lo = mid;
    }
    return { gpu: gpu.id, worldSize: hi * R };
  }

  private regrouped(k: number): { plan: Plan; ownership: Ownership } {
    const cached = this.merged.get(k);
    if (cached) return cached;
    const plan: Plan = { ...this.input.plan, units: [] };
    const units: Unit[] = [];
    let run: number[] = [];
    const flush = () => {
      if (!run.length) return;
      const us = run.map((i) => this.base.units[i]!);
      const pu = run.map((i) => this.input.plan.units[i]!);
      plan.units.push({ ...pu[0]!, modules: pu.flatMap((p) => p.modules) });
      units.push({
        ...us[0]!,
        index: units.length,
        name: us.length > 1 ? `${us[0]!.name} … ${us[us.length - 1]!.name}` : us[0]!.name,
        modules: us.flatMap((u) => u.modules),
        params: us.reduce((s, u) => s + u.params, 0),
        trainableParams: us.reduce((s, u) => s + u.trainableParams, 0),
        groups: us.flatMap((u) => u.groups),
        bufferBytes: us.reduce((s, u) => s + u.bufferBytes, 0),
      });
      run = [];
    };
    const blockClass = this.input.model.shape?.blockClass;
    this.base.units.forEach((u, i) => {
      const isBlock =
        !u.isRoot &&
        u.modules.length === 1 &&
        !!blockClass &&
        u.classNames.length === 1 &&
        u.classNames[0] === blockClass;
      if (!isBlock) {
        flush();
        plan.units.push(this.input.plan.units[i]!);
        units.push({ ...u, index: units.length });
        return;
      }
      run.push(i);
      if (run.length === k) flush();
    });
    flush();
    const r = { plan, ownership: { units, unowned: this.base.unowned } };
    this.merged.set(k, r);
    return r;
  }
}

export interface MinGpus {
  gpu: string;
  /** The smallest world size that fits, or null when none does. */
  worldSize: number | null;
  reason?: string;
}
