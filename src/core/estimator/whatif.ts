import { findGpu, gpuBytes } from '../hardware/catalog';
import { estimate, type Estimate, type EstimateInput } from './estimate';
import { fmtBytes } from '../vocabulary/bytes';
import { requiredBytes } from './timeline';
import type { Plan, Unit } from './types';
import type { TrainingSetup } from '../inputs/table';
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
  /**
   * The sharding strategy: FULL_SHARD, SHARD_GRAD_OP (units stay gathered from forward to backward: for FSDP2,
   * `reshard_after_forward=False` everywhere) or HYBRID_SHARD (shard within a node, replicate across nodes).
   */
  strategy?: 'FULL_SHARD' | 'SHARD_GRAD_OP' | 'HYBRID_SHARD';
}

/** One point of the unit-granularity curve: bigger units mean fewer collectives and a higher peak. */
export interface GranularityPoint {
  blocksPerUnit: number;
  units: number;
  peakBytes: number;
  collectivesPerStep: number;
  exposedSeconds: number;
}

/** Which GPUs of the catalog the plan fits at which world sizes, and the smallest world size for each. */
export interface FitMatrix {
  worldSizes: number[];
  /** Peak per GPU (allocated bytes) at each world size. */
  peakBytes: number[];
  gpus: { id: string; name: string; memoryBytes: number; fits: boolean[]; minGpus: MinGpus }[];
}

/**
 * Re-runs estimates of one plan under changed inputs. The parameter ownership is computed once; changing the unit
 * granularity merges consecutive block units instead of walking the model again, so each call stays well under a
 * frame even for the largest models of the catalog.
 */
export class WhatIfModel {
  private readonly base: Ownership;
  private readonly merged = new Map<number, { plan: Plan; ownership: Ownership }>();
  private readonly peaks = new Map<string, number>();

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
    const regrouped = k === 1 ? { plan: this.input.plan, ownership: this.base } : this.regrouped(k);
    let plan = regrouped.plan;
    if (w.strategy) {
      const hybridNow =
        plan.strategy === 'HYBRID_SHARD' || plan.strategy === '_HYBRID_SHARD_ZERO2' || setup.replicas > 1;
      if (w.strategy === 'HYBRID_SHARD') {
        if (!hybridNow) {
          plan = { ...plan, strategy: 'HYBRID_SHARD' };
          // One shard group per node, replicated across nodes.
          setup.replicas =
            setup.worldSize % setup.gpusPerNode === 0 ? Math.max(1, setup.worldSize / setup.gpusPerNode) : 1;
        }
      } else {
        if (hybridNow) setup.replicas = 1;
        if (plan.strategy !== w.strategy) plan = { ...plan, strategy: w.strategy };
      }
    }
    return estimate({ ...this.input, plan, setup }, regrouped.ownership);
  }

  /** Units made of one block each (what `blocksPerUnit` regroups). */
  blockUnits(): number {
    return this.base.units.filter((u) => this.isBlockUnit(u)).length;
  }

  /** Peak and collectives for each way of grouping consecutive blocks into units (divisors of the block count). */
  granularity(w: WhatIf = {}): GranularityPoint[] {
    const n = this.blockUnits();
    const out: GranularityPoint[] = [];
    for (let k = 1; k <= n; k++) {
      if (n % k !== 0) continue;
      const e = this.run({ ...w, blocksPerUnit: k });
      const c = e.comms.perStep.collectives;
      out.push({
        blocksPerUnit: k,
        units: e.units.length,
        peakBytes: e.perGpu.peakBytes,
        collectivesPerStep: c.allGather + c.reduceScatter + c.allReduce,
        exposedSeconds: e.comms.exposedSeconds,
      });
    }
    return out;
  }

  /** The peak per GPU at a world size (memoised: memory does not depend on which GPU). */
  private peakAt(worldSize: number, w: WhatIf): number {
    const key = JSON.stringify({ ...w, gpu: undefined, worldSize });
    let p = this.peaks.get(key);
    if (p === undefined) {
      p = this.run({ ...w, worldSize }).perGpu.peakBytes;
      if (this.peaks.size > 4096) this.peaks.clear();
      this.peaks.set(key, p);
    }
    return p;
  }

  /** Fit of the plan on every GPU of the catalog, at powers of two up to past the smallest that fits. */
  fitMatrix(gpus: { id: string }[], w: WhatIf = {}): FitMatrix {
    const R = Math.max(1, this.input.setup.replicas);
    const minimums = gpus.map((g) => this.minGpus(g.id, w));
    const current = w.worldSize ?? this.input.setup.worldSize;
    const wanted = Math.max(current, ...minimums.map((m) => m.worldSize ?? 0));
    const worldSizes: number[] = [];
    for (let n = R; n <= Math.max(8 * R, wanted) && worldSizes.length < 12; n *= 2) worldSizes.push(n);
    const peakBytes = worldSizes.map((n) => this.peakAt(n, w));
    return {
      worldSizes,
      peakBytes,
      gpus: gpus.flatMap((g, i) => {
        const gpu = findGpu(g.id);
        if (!gpu) return [];
        const capacity = gpuBytes(gpu);
        return [
          {
            id: gpu.id,
            name: gpu.name,
            memoryBytes: capacity,
            fits: peakBytes.map((p) => requiredBytes(p) <= capacity),
            minGpus: minimums[i]!,
          },
        ];
      }),
    };
  }

  /** The smallest world size whose peak fits `gpuId` (keeping the HSDP replica count), or why none does. */
  minGpus(gpuId: string, w: WhatIf = {}): MinGpus {
    const gpu = findGpu(gpuId);
    if (!gpu) return { gpu: gpuId, worldSize: null, reason: `unknown GPU ${gpuId}` };
    const capacity = gpuBytes(gpu);
    const R = Math.max(1, this.input.setup.replicas);
    const need = (shard: number) => requiredBytes(this.peakAt(shard * R, w));
    const fits = (shard: number) => ({ ok: need(shard) <= capacity });
    const MAX = 65_536;
    const top = fits(MAX);
    if (!top.ok) {
      // What sharding cannot shrink: everything but the sharded state.
      const e = this.run({ ...w, worldSize: MAX * R });
      const fixed = e.perGpu.peakBytes - e.perGpu.persistentBytes;
      return {
        gpu: gpu.id,
        worldSize: null,
        reason:
          `activations, gathered units and buffers alone need ${fmtBytes(requiredBytes(fixed))} at the peak, more than the ` +
          `${fmtBytes(capacity)} of one ${gpu.name}: more GPUs shrink the sharded state, not these. Use activation ` +
          'checkpointing, a smaller micro-batch or sequence, or smaller units',
      };
    }
    // The peak is close to a + b/W (what sharding cannot shrink, plus what it divides): a first guess from W = 1
    // and W = MAX, then a bracket around it by doubling, then bisection. A handful of estimates instead of 17.
    let lo = 1;
    let hi = MAX;
    const n1 = need(1);
    if (n1 <= capacity) hi = 1;
    else {
      const nMax = need(MAX);
      const b = (n1 - nMax) / (1 - 1 / MAX);
      const a = n1 - b;
      const guess = capacity > a ? Math.min(MAX, Math.max(2, Math.ceil(b / (capacity - a)))) : MAX;
      if (fits(guess).ok) {
        hi = guess;
        for (let step = 1; hi - step >= 1; step *= 2) {
          if (!fits(hi - step).ok) {
            lo = hi - step;
            break;
          }
          hi -= step;
        }
      } else {
        lo = guess;
        for (let step = 1; lo + step <= MAX; step *= 2) {
          if (fits(lo + step).ok) {
            hi = lo + step;
            break;
          }
          lo += step;
        }
      }
    }
    while (lo + 1 < hi) {
      const mid = Math.floor((lo + hi) / 2);
      if (fits(mid).ok) hi = mid;
      else lo = mid;
    }
    const worldSize = hi * R;
    const gpn = Math.max(1, w.gpusPerNode ?? this.input.setup.gpusPerNode);
    if (worldSize <= gpn || worldSize % gpn === 0) return { gpu: gpu.id, worldSize };
    // More GPUs only shrink the sharded state, so the whole-node count fits too; it must also keep R replicas.
    let nodes = Math.ceil(worldSize / gpn);
    while ((nodes * gpn) % R !== 0) nodes++;
    return { gpu: gpu.id, worldSize, wholeNodes: { worldSize: nodes * gpn, nodes, gpusPerNode: gpn } };
  }

  private isBlockUnit(u: Unit): boolean {
    const blockClass = this.input.model.shape?.blockClass;
    return (
      !u.isRoot &&
      u.modules.length === 1 &&
      !!blockClass &&
      u.classNames.length === 1 &&
      u.classNames[0] === blockClass
    );
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
        gradsAt: Object.assign({}, ...us.map((u) => u.gradsAt)) as Record<string, number>,
      });
      run = [];
    };
    this.base.units.forEach((u, i) => {
      if (!this.isBlockUnit(u)) {
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
  /**
   * When that count spans nodes without filling them (9 GPUs on nodes of 8), the smallest count on whole nodes
   * that fits: launchers start the same number of processes on every node.
   */
  wholeNodes?: { worldSize: number; nodes: number; gpusPerNode: number };
  reason?: string;
}
