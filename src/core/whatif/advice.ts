/**
 * What to change: a plan that does not fit, transfers that cannot hide, optimizer state that dominates, each
 * change re-estimated.
 */
import type { Verdict } from '../vocabulary/fsdp';
import { type Estimate } from '../estimator/types';
import { trafficBytes } from '../estimator/collectives';
import { fmtBytes, fmtSeconds, type ByteUnit } from '../vocabulary/bytes';
import { count, listed, undecidedWhy, wholeNodesText } from '../vocabulary/words';
import { WhatIfModel, type WhatIf } from './model';
import { requiredBytes } from '../estimator/fit';
import { certainPeakBytes } from '../estimator/estimate';
import { GPUS, findLink, gpuBytes } from '../hardware/catalog';
import { applyFineTune } from '../model/finetune';

/** Changes that fit first, then those that may, then those that do not. */
const RANK: Record<Verdict, number> = { fits: 2, undecided: 1, short: 0 };

/** One change the advice proposes, with the estimate re-run under it. */
export interface AdviceOption {
  label: string;
  /** The change, as the panel's what-if controls express it (absent for changes they cannot make, like LoRA). */
  whatIf?: WhatIf;
  peakBytes: number;
  persistentBytes: number;
  verdict: Verdict;
  trafficBytes: number;
  exposedSeconds: number;
  /** What the change costs or means, in a few words. */
  note: string;
  /** A cost in step time the estimate leaves out, in words (CPU offload's copies and host optimizer step). */
  unmodelledCost?: string;
}

export interface Advice {
  id: 'fit' | 'comms' | 'optimizer' | 'ok' | 'gaps' | 'unmodelled' | 'undecided';
  level: 'problem' | 'suggestion' | 'ok';
  title: string;
  detail: string;
  options: AdviceOption[];
}

const LORA = { rank: 16, targets: ['all-linear'] };

/** What the step time of a CPU-offloaded plan leaves out. */
export const OFFLOAD_COST =
  'the step time leaves out the host-device copies of every shard and gradient and the optimizer step on the CPU';
const loraModels = new WeakMap<WhatIfModel, WhatIfModel>();

/** The same plan with LoRA adapters (rank 16 on every linear layer) and the base frozen. */
function loraModel(m: WhatIfModel): WhatIfModel {
  let l = loraModels.get(m);
  if (!l) {
    const root = applyFineTune(m.input.model.root, { lora: LORA });
    l = new WhatIfModel({ ...m.input, model: { ...m.input.model, root } });
    loraModels.set(m, l);
  }
  return l;
}

/** A change's option, re-estimated; undefined when the change makes a mesh PyTorch refuses. */
function option(
  e: Estimate | undefined,
  label: string,
  note: string,
  whatIf?: WhatIf,
): AdviceOption | undefined {
  if (!e) return undefined;
  const mine = e.targetFit;
  return {
    label,
    ...(whatIf ? { whatIf } : {}),
    peakBytes: e.perGpu.peakBytes,
    persistentBytes: e.perGpu.persistentBytes,
    verdict: mine.verdict,
    trafficBytes: trafficBytes(e.comms.perStep),
    exposedSeconds: e.comms.exposedSeconds,
    note,
  };
}

/**
 * What to change, drawn from the estimate under the current what-if values: a plan that does not fit (with the
 * cheapest changes that would, re-estimated), transfers that cannot hide behind compute (with HYBRID_SHARD and
 * SHARD_GRAD_OP compared), optimizer state dominating memory (with what LoRA would need).
 */
export function advise(model: WhatIfModel, w: WhatIf, e: Estimate, units: ByteUnit = 'GB'): Advice[] {
  const b = (n: number) => fmtBytes(n, units);
  const out: Advice[] = [];
  const mine = e.targetFit;
  const run = (change: WhatIf): Estimate | undefined => model.tryRun({ ...w, ...change });
  const add = (options: AdviceOption[], o: AdviceOption | undefined) => {
    if (o) options.push(o);
  };

  if (mine.verdict === 'short') {
    const options: AdviceOption[] = [];
    const s = e.setup;
    if (s.checkpointing !== 'full') {
      const ch: WhatIf = { checkpointing: 'full' };
      add(
        options,
        option(
          run(ch),
          'full activation checkpointing',
          'recomputes each block in backward: about a third more compute',
          ch,
        ),
      );
    }
    if (s.microBatch > 1) {
      const ch: WhatIf = { microBatch: 1 };
      add(
        options,
        option(
          run(ch),
          'micro-batch 1',
          `keep the global batch with ${s.microBatch}x gradient accumulation; less work per collective`,
          ch,
        ),
      );
    }
    if ((w.blocksPerUnit ?? 1) > 1) {
      const ch: WhatIf = { blocksPerUnit: 1 };
      add(options, option(run(ch), 'one block per unit', 'more, smaller all-gathers', ch));
    }
    // CPU offload: FSDP2's `CPUOffloadPolicy` keeps the sharded parameters, their gradients and the optimizer state
    // on the host (`FSDPParam` copies each shard to the GPU for its all-gather, the gradient back after its
    // reduce-scatter, and the optimizer steps on the CPU), as FSDP1's `CPUOffload(offload_params=True)` does.
    if (e.units.length && !e.units.some((u) => u.offload)) {
      const ch: WhatIf = { offload: true };
      const o = option(
        run(ch),
        'CPU offload',
        'sharded parameters, gradients and optimizer state in host memory',
        ch,
      );
      if (o) o.unmodelledCost = OFFLOAD_COST;
      add(options, o);
    }
    const min = model.minGpus(e.gpu.id, w);
    if (min.worldSize !== null && min.worldSize > e.mesh.worldSize) {
      const ch: WhatIf = { worldSize: min.worldSize };
      add(
        options,
        option(
          run(ch),
          count(min.worldSize, 'GPU'),
          `the smallest world size that fits (${min.worldSize - e.mesh.worldSize} more ${e.gpu.name})${wholeNodesText(min, '; ')}`,
          ch,
        ),
      );
    }
    const need = requiredBytes(e.perGpu.peakBytes, e.fitReserve);
    const bigger = GPUS.filter((g) => gpuBytes(g) >= need && g.id !== e.gpu.id).sort(
      (x, y) => gpuBytes(x) - gpuBytes(y),
    )[0];
    if (bigger) {
      const ch: WhatIf = { gpu: bigger.id };
      add(
        options,
        option(
          run(ch),
          bigger.name,
          `the smallest GPU of the catalog with room (${b(gpuBytes(bigger))})`,
          ch,
        ),
      );
    }
    // Nothing alone fits: checkpointing with the world size that then fits.
    if (!options.some((o) => o.verdict !== 'short') && s.checkpointing !== 'full') {
      const ck: WhatIf = { ...w, checkpointing: 'full' };
      const m = model.minGpus(e.gpu.id, ck);
      if (m.worldSize !== null) {
        const ch: WhatIf = { checkpointing: 'full', worldSize: m.worldSize };
        add(
          options,
          option(
            run(ch),
            `full checkpointing and ${count(m.worldSize, 'GPU')}`,
            'the smallest world size that fits once activations are recomputed',
            ch,
          ),
        );
      }
    }
    // Changes that fit first, in the order above: software before hardware.
    options.sort((x, y) => RANK[y.verdict] - RANK[x.verdict]);
    out.push({
      id: 'fit',
      level: 'problem',
      title: `Does not fit ${e.gpu.name}: needs ${b(need)} of ${b(mine.memoryBytes)}`,
      detail:
        `The peak of ${b(e.perGpu.peakBytes)} plus the allocator's reserve and the CUDA context is ` +
        `${b(-mine.headroomBytes)} more than the GPU holds.` +
        (options.some((o) => o.verdict !== 'short')
          ? ' Each change below, re-estimated on its own:'
          : ` None of these changes fits; shorter sequences${options.some((o) => o.whatIf?.offload) ? '' : ', CPU offload'} or a smaller model remain.`),
      options,
    });
  }

  const compute = e.comms.computeSeconds;
  if (e.mesh.worldSize > 1 && !e.comms.transfersHide) {
    const options: AdviceOption[] = [];
    const nodes = e.mesh.nodes;
    if (!e.mesh.hsdp && nodes > 1 && e.mesh.worldSize % e.mesh.gpusPerNode === 0) {
      const ch: WhatIf = { strategy: 'HYBRID_SHARD' };
      add(
        options,
        option(
          run(ch),
          'HYBRID_SHARD',
          `shard within each node over ${findLink(e.gpu.intraNode)?.name ?? e.gpu.intraNode}, all-reduce across the ${nodes} nodes: more memory per GPU`,
          ch,
        ),
      );
    }
    const keepsAll = e.units.every((u) => u.isRoot || u.residency.kind === 'keep');
    if (!keepsAll) {
      const ch: WhatIf = { strategy: 'SHARD_GRAD_OP' };
      add(
        options,
        option(
          run(ch),
          e.plan.api === 'fsdp2' ? 'reshard_after_forward=False (SHARD_GRAD_OP)' : 'SHARD_GRAD_OP',
          'keep units gathered from forward to backward: no backward all-gathers, more memory',
          ch,
        ),
      );
    }
    const ch: WhatIf = { microBatch: e.setup.microBatch * 2 };
    add(
      options,
      option(
        run(ch),
        `micro-batch ${e.setup.microBatch * 2}`,
        'twice the compute behind each transfer, more activations',
        ch,
      ),
    );
    const link = e.comms.shardLink;
    out.push({
      id: 'comms',
      level: 'suggestion',
      title: `${fmtSeconds(e.comms.exposedSeconds)} per step of transfers cannot hide behind compute on ${link.name}`,
      detail:
        `${b(trafficBytes(e.comms.perStep))} per GPU per step take ${fmtSeconds(e.comms.commSeconds)} on the link ` +
        `against ${fmtSeconds(compute)} of compute; all-gathers that outlast the previous unit's compute stall the step.`,
      options,
    });
  }

  const opt = e.perGpu.persistent.terms.find((t) => t.name === 'optimizer state');
  // Adam's two fp32 states are half of mixed-precision training's 16 B per parameter: worth a word when memory is
  // short (the plan does not fit, or leaves less than a fifth of the GPU free).
  const tight = mine.verdict === 'short' || mine.headroomBytes < 0.2 * mine.memoryBytes;
  if (opt && tight && e.perGpu.persistentBytes > 0 && opt.bytes >= 0.45 * e.perGpu.persistentBytes) {
    const share = Math.round((100 * opt.bytes) / e.perGpu.persistentBytes);
    const options: AdviceOption[] = [];
    if (e.model.trainableParams === e.model.params) {
      const lora = loraModel(model).run(w);
      add(
        options,
        option(
          lora,
          `LoRA rank ${LORA.rank} on every linear layer`,
          `${((100 * lora.model.trainableParams) / lora.model.params).toPrecision(2)}% of parameters trainable: ` +
            `optimizer state ${b(lora.perGpu.persistent.terms.find((t) => t.name === 'optimizer state')?.bytes ?? 0)}`,
        ),
      );
    }
    out.push({
      id: 'optimizer',
      level: 'suggestion',
      title: `Optimizer state is ${share}% of what each GPU keeps`,
      detail:
        `${b(opt.bytes)} of ${b(e.perGpu.persistentBytes)} per GPU (${opt.formula}). Fewer trainable parameters ` +
        'shrink it; a lighter optimizer (8-bit Adam, Adafactor) does too.',
      options,
    });
  }

  if (mine.verdict === 'undecided' && e.undecided.length)
    out.unshift({
      id: 'undecided',
      level: 'problem',
      title: `Fit on ${e.gpu.name} undecided: ${undecidedWhy(e)}`,
      detail:
        `The figures (${b(requiredBytes(e.perGpu.peakBytes, e.fitReserve))} needed) are of the arm the notes name. ` +
        'Run the analysis with the arguments the job is launched with (after `--`), or set what the condition reads, to decide it.',
      options: [],
    });
  else if (mine.verdict === 'undecided' && e.unmodelled.length)
    out.unshift({
      id: 'unmodelled',
      level: 'problem',
      title: `Fit on ${e.gpu.name} undecided: ${listed(e.unmodelled)} ${e.unmodelled.length === 1 ? 'is' : 'are'} not modelled`,
      detail:
        `The figures are FSDP's alone, with whole layers on each GPU (they would need ${b(requiredBytes(e.perGpu.peakBytes, e.fitReserve))}): ` +
        'each GPU holds less under that parallelism, and what its collectives and split activations need is not counted, so no verdict is drawn from them.',
      options: [],
    });
  else if (mine.verdict === 'undecided')
    out.unshift({
      id: 'gaps',
      level: 'problem',
      title: `Fit on ${e.gpu.name} undecided: ${undecidedWhy(e)}`,
      detail:
        e.gaps.length + e.uncounted.length === 0
          ? // Only overcounted: the figures are an upper bound, and what they hold anyway is a lower one.
            `The figures need ${b(requiredBytes(e.perGpu.peakBytes, e.fitReserve))} of ${b(mine.memoryBytes)}; without ` +
            `what they count above the job (${listed(e.overcounted)}) they need ` +
            `${b(requiredBytes(certainPeakBytes(e), e.fitReserve))}. The peak lies between: measuring a step decides it.`
          : `What was counted needs ${b(requiredBytes(e.perGpu.peakBytes, e.fitReserve))} of ${b(mine.memoryBytes)}, leaving ${b(mine.headroomBytes)} for the rest: ` +
            `${[...e.gaps, ...e.uncounted].slice(0, 3).join('; ')}${e.gaps.length + e.uncounted.length > 3 ? '; …' : ''}.` +
            (e.gaps.length
              ? ' Measure the model exactly with PyTorch, or name it (`# fsdp: model=ORG/NAME`), to decide.'
              : ''),
      options: [],
    });
  if (!out.some((a) => a.level === 'problem') && mine.verdict === 'fits') {
    const hides = e.comms.transfersHide;
    out.unshift({
      id: 'ok',
      level: 'ok',
      title: `Fits ${e.gpu.name} with ${b(mine.headroomBytes)} to spare`,
      detail: hides
        ? `Transfers (${fmtSeconds(e.comms.commSeconds)} per step) hide behind compute (${fmtSeconds(compute)}).`
        : 'The plan fits; see below for what the step waits on.',
      options: [],
    });
  }
  return out;
}
