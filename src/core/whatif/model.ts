/**
 * Re-estimates of one plan under changed inputs: what-ifs, unit granularity, the fit matrix and the smallest world
 * size that fits.
 */
import type { Verdict } from '../vocabulary/fsdp';
import { findGpu, gpuBytes } from '../hardware/catalog';
import { estimate } from '../estimator/estimate';
import { MeshError } from '../estimator/mesh';
import { isHybrid } from '../vocabulary/fsdp';
import type { Estimate, EstimateInput, Plan, Unit } from '../estimator/types';
import { fmtBytes } from '../vocabulary/bytes';
import { listed } from '../vocabulary/words';
import { requiredBytes, reserveOn } from '../estimator/fit';
import { setupBounds, uncountedOf } from '../estimator/bounds';
import type { TrainingSetup } from '../inputs/table';
import { assignParameters, type Ownership } from '../estimator/units';

/** Changes of the plan itself beside its inputs: unit granularity and the sharding strategy. */
export interface PlanChanges {
  /** One unit per k consecutive blocks (1 = one per block, as planned). */
  blocksPerUnit?: number;
  /**
   * The sharding strategy: FULL_SHARD, SHARD_GRAD_OP (units stay gathered from forward to backward: for FSDP2,
   * `reshard_after_forward=False` everywhere) or HYBRID_SHARD (shard within a node, replicate across nodes).
   */
  strategy?: 'FULL_SHARD' | 'SHARD_GRAD_OP' | 'HYBRID_SHARD';
  /** FSDP2: every unit but the root resharded after forward, whatever its `reshard_after_forward` says. */
  reshardAll?: true;
  /**
   * Every unit's sharded parameters, gradients and optimizer state in host memory (FSDP2 `CPUOffloadPolicy`,
   * FSDP1 `CPUOffload(offload_params=True)`), or none of them with false; the step time leaves out the copies and the
   * optimizer step on the CPU.
   */
  offload?: boolean;
  /**
   * FSDP1's units made FSDP2's: the same modules wrapped by `fully_shard`, the same strategy (FSDP2 keeps units
   * gathered or shards within a node as FSDP1's SHARD_GRAD_OP and HYBRID_SHARD did), what each API holds
   * estimated as that API holds it.
   */
  api?: 'fsdp2';
}

/** A what-if: any inputs of the table changed, and changes of the plan. Everything else stays as the file says. */
export type WhatIf = Partial<TrainingSetup> & PlanChanges;

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
  /** Peak per GPU (allocated bytes) at each world size; null where the mesh cannot be built. */
  peakBytes: (number | null)[];
  gpus: { id: string; name: string; memoryBytes: number; fits: (Verdict | null)[]; minGpus: MinGpus }[];
}

/**
 * Re-runs estimates of one plan under changed inputs. The parameter ownership is computed once; changing the unit
 * granularity merges consecutive block units instead of walking the model again, so each call stays well under a
 * frame even for the largest models of the catalog.
 */
export class WhatIfModel {
  private readonly base: Ownership;
  private readonly merged = new Map<number, { plan: Plan; ownership: Ownership }>();
  private readonly peaks = new Map<string, number | null>();

  constructor(readonly input: EstimateInput) {
    this.base = assignParameters(input.model.root, input.plan, input.setup.masterDtype);
  }

  /** The setup and plan a what-if makes, with the ownership to estimate them with. */
  private changed(w: WhatIf): { setup: TrainingSetup; plan: Plan; ownership: Ownership } {
    const { blocksPerUnit, strategy, reshardAll, offload, api, ...inputs } = w;
    const setup: TrainingSetup = { ...this.input.setup };
    for (const [k, v] of Object.entries(inputs))
      if (v !== undefined) (setup as Record<string, unknown>)[k] = v;
    // A world size that tensor or context parallelism does not divide has no mesh (fsdpMesh throws MeshError).
    if (
      setup.replicas > 1 &&
      (setup.worldSize / (setup.tensorParallel * setup.pipelineParallel)) % setup.replicas !== 0
    )
      setup.replicas = 1;
    const k = Math.max(1, Math.floor(blocksPerUnit ?? 1));
    const regrouped = k === 1 ? { plan: this.input.plan, ownership: this.base } : this.regrouped(k);
    let plan = regrouped.plan;
    let ownership = regrouped.ownership;
    if (api === 'fsdp2' && plan.api === 'fsdp1') plan = { ...plan, api: 'fsdp2' };
    if (strategy) {
      const hybridNow = isHybrid(plan.strategy) || setup.replicas > 1;
      if (strategy === 'HYBRID_SHARD') {
        // One shard group per node, replicated across nodes: the mesh derives it (see fsdpMesh).
        if (!hybridNow) plan = { ...plan, strategy: 'HYBRID_SHARD' };
      } else {
        if (hybridNow) setup.replicas = 1;
        if (plan.strategy !== strategy) plan = { ...plan, strategy };
      }
    }
    // Every unit but the root resharded after forward (FSDP2 `reshard_after_forward=True` where the code keeps some
    // gathered); the units' parameters are unchanged.
    // FSDP2's FULL_SHARD chosen for a plan whose wraps keep every unit gathered (what the controls call
    // SHARD_GRAD_OP): each of them resharded after forward. A plan that keeps some units only is left as it is.
    const keepsAll = (units: readonly Unit[]) => {
      const blocks = units.filter((u) => !u.isRoot && u.params > 0);
      return blocks.length > 0 && blocks.every((u) => u.reshardAfterForward === false);
    };
    if (plan.api === 'fsdp2' && (reshardAll || (strategy === 'FULL_SHARD' && keepsAll(ownership.units)))) {
      const resharded = <T extends { isRoot: boolean }>(u: T): T =>
        u.isRoot ? u : { ...u, reshardAfterForward: true };
      plan = { ...plan, units: plan.units.map(resharded) };
      ownership = { ...ownership, units: ownership.units.map(resharded) };
    }
    // Every unit offloaded (or none): the units' parameters are unchanged, their shards move to host memory.
    if (offload !== undefined) {
      const offloaded = <T extends { offload: boolean }>(u: T): T =>
        u.offload === offload ? u : { ...u, offload };
      plan = { ...plan, units: plan.units.map(offloaded) };
      ownership = { ...ownership, units: ownership.units.map(offloaded) };
    }
    return { setup, plan, ownership };
  }

  /** The estimate under a what-if. Throws MeshError when the what-if makes a mesh PyTorch refuses. */
  run(w: WhatIf = {}): Estimate {
    const c = this.changed(w);
    return estimate({ ...this.input, plan: c.plan, setup: c.setup }, c.ownership);
  }

  /** The estimate under a what-if, or undefined where it makes a mesh PyTorch refuses. */
  tryRun(w: WhatIf = {}): Estimate | undefined {
    try {
      return this.run(w);
    } catch (err) {
      if (err instanceof MeshError) return undefined;
      throw err;
    }
  }

  /** Shard groups of one node each, derived from the world size (FSDP1's hybrid strategies without a mesh). */
  private perNodeGroups(w: WhatIf): number | null {
    const c = this.changed(w);
    return isHybrid(c.plan.strategy) && c.setup.replicas === 1 ? c.setup.gpusPerNode : null;
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

  /**
   * The peak per GPU at a world size, or null where the mesh cannot be built there (memoised: memory does not
   * depend on which GPU).
   */
  private peakAt(worldSize: number, w: WhatIf): number | null {
    const key = JSON.stringify({ ...w, gpu: undefined, worldSize });
    let p = this.peaks.get(key);
    if (p === undefined) {
      try {
        p = this.run({ ...w, worldSize }).perGpu.peakBytes;
      } catch (e) {
        if (!(e instanceof MeshError)) throw e;
        p = null;
      }
      if (this.peaks.size > 4096) this.peaks.clear();
      this.peaks.set(key, p);
    }
    return p;
  }

  /**
   * What the figures leave out of a what-if's verdicts: parallelism they do not model, and what they count above
   * what the job keeps (the input's, torch.compile's, offloaded activations, a paged optimizer's state).
   */
  private bounds(w: WhatIf): { unmodelled: string[]; overcounted: string[] } {
    const compiled = setupBounds({ ...this.input.setup, ...w });
    const paged = (w.pagedOptimizer ?? this.input.setup.pagedOptimizer) ? ["a paged optimizer's state"] : [];
    return {
      unmodelled: [...(this.input.unmodelled ?? []), ...compiled.unmodelled],
      overcounted: [...(this.input.overcounted ?? []), ...compiled.overcounted, ...paged],
    };
  }

  /**
   * The GPUs the fixed degrees put around one rank of FSDP's dimension: pipeline stages, tensor and context
   * parallel groups, and as many more as expert parallelism needs for its degree to divide dp_shard x cp x tp
   * (torchtitan's `ParallelDims._validate`).
   */
  private around(): number {
    const {
      tensorParallel: T,
      contextParallel: C,
      pipelineParallel: P,
      expertParallel: ep,
    } = this.input.setup;
    const gcd = (a: number, b: number): number => (b ? gcd(b, a % b) : a);
    return P * T * C * (ep / gcd(ep, T * C));
  }

  /** Fit of the plan on every GPU of the catalog, at powers of two up to past the smallest that fits. */
  fitMatrix(gpus: readonly { id: string }[], w: WhatIf = {}): FitMatrix {
    // World sizes are whole replica sets (whole nodes where shard groups are nodes).
    const R = (this.perNodeGroups(w) ?? Math.max(1, this.input.setup.replicas)) * this.around();
    const minimums = gpus.map((g) => this.minGpus(g.id, w));
    const current = w.worldSize ?? this.input.setup.worldSize;
    const wanted = Math.max(current, ...minimums.map((m) => m.worldSize ?? 0));
    const worldSizes: number[] = [];
    for (let n = R; n <= Math.max(8 * R, wanted) && worldSizes.length < 12; n *= 2) worldSizes.push(n);
    const peakBytes = worldSizes.map((n) => this.peakAt(n, w));
    const partial =
      (this.input.model.gaps ?? []).length > 0 || uncountedOf(this.input.model.shape).length > 0;
    // Figures above what the job keeps: a peak that does not fit is no verdict. One arm of an undecided
    // condition: no verdict at all.
    const upper = this.bounds(w).overcounted.length > 0;
    const arm = (this.input.undecided ?? []).length > 0;
    return {
      worldSizes,
      peakBytes,
      gpus: gpus.flatMap((g, i) => {
        const gpu = findGpu(g.id);
        if (!gpu) return [];
        const capacity = gpuBytes(gpu);
        const r = reserveOn(gpu.id, this.input.calibrations);
        return [
          {
            id: gpu.id,
            name: gpu.name,
            memoryBytes: capacity,
            fits: peakBytes.map((p) =>
              p === null
                ? null
                : arm
                  ? 'undecided'
                  : requiredBytes(p, r) > capacity
                    ? upper
                      ? 'undecided'
                      : 'short'
                    : partial
                      ? 'undecided'
                      : 'fits',
            ),
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
    const r = reserveOn(gpu.id, this.input.calibrations);
    // With parallelism the figures do not model, a search over FSDP's dimension alone decides nothing.
    // Without FSDP the job is one GPU's, whatever the world: more GPUs need a recipe that shards.
    if (this.input.plan.api === 'none') {
      const p = this.peakAt(1, w);
      return p !== null && requiredBytes(p, r) <= gpuBytes(gpu)
        ? { gpu: gpu.id, worldSize: 1 }
        : {
            gpu: gpu.id,
            worldSize: null,
            reason: `the job runs on one GPU without FSDP, which the ${gpu.name} does not hold: more GPUs help only a job that shards the model (an FSDP recipe)`,
          };
    }
    const { unmodelled, overcounted } = this.bounds(w);
    const undecided = this.input.undecided ?? [];
    if (undecided.length)
      return {
        gpu: gpu.id,
        worldSize: null,
        undecided: true,
        reason: `not decided: the figures are one arm of what the analysis cannot decide (${listed(undecided)})`,
      };
    if (unmodelled.length)
      return {
        gpu: gpu.id,
        worldSize: null,
        undecided: true,
        reason: `not decided: the search varies FSDP's dimension alone, and ${listed(unmodelled)} ${unmodelled.length === 1 ? 'is' : 'are'} not modelled`,
      };
    // Figures above what the job keeps: the search finds a world size that surely fits, not the smallest.
    if (overcounted.length)
      return {
        gpu: gpu.id,
        worldSize: null,
        undecided: true,
        reason: `not decided: the figures count more than the job keeps (${listed(overcounted)})`,
      };
    const capacity = gpuBytes(gpu);
    const perNode = this.perNodeGroups(w);
    if (perNode !== null) {
      // Shard groups are nodes: more nodes add replicas, not shards, so one node's peak is every world size's.
      const p = this.peakAt(perNode, w);
      if (p !== null && requiredBytes(p, r) <= capacity) return { gpu: gpu.id, worldSize: perNode };
      return {
        gpu: gpu.id,
        worldSize: null,
        reason:
          `shard groups are single nodes of ${perNode} GPUs here, so more nodes add replicas, not shards: ` +
          (p === null
            ? 'no mesh of whole nodes can be built'
            : `each GPU needs ${fmtBytes(requiredBytes(p, r))}`) +
          '. Shard over more GPUs (FULL_SHARD, or a 2-D mesh with larger shard groups), or lower the peak',
      };
    }
    // The other dimensions stay as they are: R replicas and T-way tensor parallelism around each shard group.
    const R = Math.max(1, this.input.setup.replicas) * this.around();
    const need = (shard: number) => requiredBytes(this.peakAt(shard * R, w) ?? Infinity, r);
    const fits = (shard: number) => ({ ok: need(shard) <= capacity });
    // The peak falls with W (close to a + b/W: what sharding cannot shrink, plus what it divides) until FSDP2's
    // padding of each dim 0 to a multiple of W grows the gathered units again (a 1,024-row projection sharded 8,192
    // ways is gathered as 8,192 rows). So the search climbs from below: doubling to the first W that fits, then
    // bisection between the last power of two that does not fit and the first that does: the W found fits and W - 1
    // does not (a smaller W that divides the dims better and fits is not searched for).
    const MAX = 65_536;
    let hi = 0;
    let best = 1;
    for (let shard = 1; shard <= MAX; shard *= 2) {
      if (fits(shard).ok) {
        hi = shard;
        break;
      }
      if (need(shard) < need(best)) best = shard;
    }
    if (!hi) {
      // What sharding cannot shrink: everything but the sharded state, where the peak was lowest.
      const e = this.run({ ...w, worldSize: best * R });
      const fixed = e.perGpu.peakBytes - e.perGpu.persistentBytes;
      return {
        gpu: gpu.id,
        worldSize: null,
        reason:
          `activations, gathered units and buffers alone need ${fmtBytes(requiredBytes(fixed, r))} at the peak, more than the ` +
          `${fmtBytes(capacity)} of one ${gpu.name}: more GPUs shrink the sharded state, not these. Use activation ` +
          'checkpointing, a smaller micro-batch or sequence, or smaller units',
      };
    }
    let lo = hi / 2;
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
  /** No search was made: the figures leave out parallelism the job applies (see EstimateInput.unmodelled). */
  undecided?: true;
}
