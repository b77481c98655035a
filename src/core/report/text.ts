/** The estimate and its advice as a person reads them in a terminal. */
import { fmtBytes, fmtCount, fmtParams, fmtSeconds, type ByteUnit } from '../vocabulary/bytes';
import {
  blockRanges,
  fmtInFlight,
  article,
  atLeast,
  count,
  wholeNodesText,
  peakWhereInFull,
  shortGpu,
  undecidedWhy,
} from '../vocabulary/words';
import { type MinGpus } from '../whatif/model';
import { type Estimate, type UnitEstimate, type Verdict } from '../estimator/types';
import { modelParallelLinks, trafficBytes } from '../estimator/collectives';
import type { Source } from '../vocabulary/source';
import { FIT_RESERVE, requiredBytes } from '../estimator/fit';
import { gpuBytes } from '../hardware/catalog';
import type { Advice } from '../whatif/advice';
import { planLabel } from '../vocabulary/fsdp';

/** Where an input came from, in a few words. */
export function sourceText(s: Source): string {
  const kind: Record<Source['kind'], string> = {
    flag: 'flag',
    annotation: 'annotation',
    pyproject: 'pyproject.toml',
    launch: 'launch file',
    setting: 'editor setting',
    detected: 'detected',
    measured: 'measured',
    config: 'config',
    default: 'default',
  };
  return s.detail ? `${kind[s.kind]}: ${s.detail}` : kind[s.kind];
}

/** Groups alike units (32 decoder blocks) so a plan reads in one line. */
export function planSummary(e: Estimate, units: ByteUnit = 'GB'): string {
  const groups = new Map<string, UnitEstimate[]>();
  for (const u of e.units) {
    const key = u.isRoot ? `root:${u.name}` : `${u.classNames.join('+')}:${u.params}`;
    groups.set(key, [...(groups.get(key) ?? []), u]);
  }
  const parts = [...groups.values()].map((us) => {
    const u = us[0]!;
    const what = u.isRoot
      ? `root ${u.classNames[0] ?? ''}`.trim()
      : us.length > 1
        ? `${us.length} x ${u.classNames.join('+')}`
        : u.name;
    return `${what} (${fmtParams(u.params)} params, ${fmtBytes(u.gatheredBytes, units)} gathered)`;
  });
  return parts.join(' + ');
}

const pad = (s: string, n: number) => s.padEnd(n);

/** Rows as columns two spaces apart, each as wide as its longest cell (the last column left ragged). */
function columns(rows: string[][], indent = '  ', widths?: number[]): string[] {
  const w = widths ?? columnWidths(rows);
  return rows.map(
    (r) =>
      indent +
      r
        .map((c, i) => (i < r.length - 1 ? pad(c, w[i]!) : c))
        .join('  ')
        .trimEnd(),
  );
}

/** Each column as wide as its longest cell up to `cap`: a longer cell overflows rather than widen them all. */
function columnWidths(rows: string[][], cap = 48): number[] {
  const w: number[] = [];
  for (const r of rows) r.forEach((c, i) => (w[i] = Math.max(w[i] ?? 0, Math.min(cap, c.length))));
  return w;
}

/** A GPU's name with its capacity as the driver reports it, in MiB, and in the units of the rest of the text. */
function gpuWithMemory(e: Estimate, bytes: string): string {
  return `${e.gpu.name} (${fmtCount(e.gpu.memoryMiB)} MiB = ${bytes})`;
}

/** The estimate as a person reads it in a terminal. */
export function estimateText(e: Estimate, opts: { units?: ByteUnit; minGpus?: MinGpus } = {}): string {
  const U = opts.units ?? 'GB';
  const b = (n: number) => fmtBytes(n, U);
  const L: string[] = [];
  const api = planLabel(e.plan.api, e.plan.strategy);
  const least = atLeast(e.gaps.length > 0);
  // Memory left out though the model is counted whole: the peak and what follows from it are lower bounds.
  const peakLeast = atLeast(e.gaps.length > 0 || e.uncounted.length > 0);
  L.push(
    `${e.model.name}  ·  ${least}${fmtCount(e.model.params)} parameters (${fmtParams(e.model.params)})` +
      (e.gaps.length ? ' counted' : ''),
  );
  L.push(
    e.plan.api === 'none'
      ? `Plan      ${api}: the whole model on one GPU, its gradients made by autograd in backward`
      : `Plan      ${api} · ${count(e.units.length, 'unit')}${e.pipeline ? ` on rank ${e.pipeline.worstRank}` : ''}: ${planSummary(e, U)}`,
  );
  const tp =
    (e.mesh.tp > 1 ? ` x tensor parallel ${e.mesh.tp}` : '') +
    (e.mesh.cp > 1 ? ` (context parallel ${e.mesh.cp} within it)` : '') +
    (e.mesh.pp > 1 ? `, in each of ${e.mesh.pp} pipeline stages` : '');
  const mesh = e.mesh.hsdp
    ? `${count(e.mesh.worldSize, 'GPU')} as ${e.mesh.replicas} replicas x ${e.mesh.shardGroup} (HSDP)${tp}`
    : `${count(e.mesh.worldSize, 'GPU')}, shard group ${e.mesh.shardGroup}${tp}`;
  L.push(`Mesh      ${mesh} · ${count(e.mesh.nodes, 'node')} of ${e.mesh.gpusPerNode} · ${e.gpu.name}`);
  if (e.pipeline) L.push(...pipelineLines(e.pipeline, b));
  L.push('');
  L.push(
    e.plan.api === 'none'
      ? `Per GPU   persistent ${least}${b(e.perGpu.persistentBytes)} (the whole model state, on one GPU)`
      : `Per GPU   persistent ${least}${b(e.perGpu.persistentBytes)} (model state ${b(e.perGpu.modelStateBytes)} of ${b(e.modelStateTotalBytes)} in all; ` +
          `plain data parallelism would hold all ${b(e.modelStateTotalBytes)} on every GPU)`,
  );
  // One set of columns for every term of the memory sections, so that their figures line up.
  const termRow = (t: { name: string; bytes: number; formula: string }) => [t.name, b(t.bytes), t.formula];
  const termWidths = columnWidths(
    [e.perGpu.persistent, e.perGpu.host, e.hostPerNode, e.perGpu.peak].flatMap((f) => f.terms.map(termRow)),
  );
  const terms = (ts: { name: string; bytes: number; formula: string }[]) =>
    columns(ts.map(termRow), '  ', termWidths);
  L.push(...terms(e.perGpu.persistent.terms));
  if (e.perGpu.hostBytes > 0) {
    L.push(`Host      ${b(e.perGpu.hostBytes)} per GPU in CPU memory (offload)`);
    L.push(...terms(e.perGpu.host.terms));
  }
  // Host memory of the node, for what the script does (loading, offload, a checkpoint it gathers).
  if (e.hostPerNode.terms.length) {
    L.push(`Host      up to ${b(e.hostPerNode.bytes)} of CPU memory per node`);
    L.push(...terms(e.hostPerNode.terms));
  }
  L.push('');
  const at = e.perGpu.peakAt;
  L.push(`Peak      ${peakLeast}${b(e.perGpu.peakBytes)} per GPU${at ? `, ${peakWhereInFull(at)}` : ''}`);
  L.push(...terms(e.perGpu.peak.terms));
  const worst = e.colocated?.phases.find((p) => p.name === e.colocated!.worst);
  const need = worst ? worst.needBytes : requiredBytes(e.perGpu.peakBytes, e.fitReserve);
  const mine = e.targetFit;
  // The reserve beside the peak: the defaults, or what was measured on the user's cluster, named.
  const r = e.fitReserve;
  const allowance = r.measured
    ? `the allocator's allowance measured on ${r.measured}`
    : 'a default allowance for the caching allocator';
  const context =
    r.measured && r.contextBytes !== FIT_RESERVE.contextBytes
      ? 'of CUDA context measured there'
      : 'of CUDA context';
  const needs = `needs ${peakLeast}${b(need)} (${worst ? `its ${worst.name} phase: ` : ''}the ${worst ? "process's bytes" : 'peak'} x ${(1 + r.fragmentation).toFixed(2)}, ${allowance}, and ${b(r.contextBytes)} ${context}${worst?.engineFraction ? ', with the engine’s share' : ''})`;
  const pools = e.timeline?.pools;
  if (pools && pools.gather + pools.reduce > 0)
    L.push(
      `Reserved  ${peakLeast}${b(e.perGpu.reservedBytes)} per GPU where memory allows: the compute stream's ${b(pools.compute)} x ${(1 + r.fragmentation).toFixed(2)}, and what the allocator keeps for FSDP's all-gather stream (${b(pools.gather)}) and reduce-scatter stream (${b(pools.reduce)}), freed again before it runs out`,
    );
  if (e.colocated) {
    L.push('');
    L.push(
      `Phases    ${e.colocated.by} runs these in turn on the same GPUs; the one that needs most decides the fit`,
    );
    for (const p of e.colocated.phases) {
      L.push(
        `  ${p.name}: ${b(p.bytes)} in the training process${p.engineFraction ? ` and ${b(p.engineFraction * gpuBytes(e.gpu))} for the rollout engine` : ''}${p === worst ? ' (needs most)' : ''}${p.where ? `; micro-batch from ${p.where}` : ''}`,
      );
      L.push(...terms(p.terms).map((t) => `  ${t}`));
    }
  }
  L.push(
    mine.verdict === 'fits'
      ? `Fit       fits ${gpuWithMemory(e, b(mine.memoryBytes))}: ${needs}, ${b(mine.headroomBytes)} to spare`
      : mine.verdict === 'short'
        ? `Fit       does NOT fit ${gpuWithMemory(e, b(mine.memoryBytes))}: ${needs}, ${b(-mine.headroomBytes)} short`
        : e.unmodelled.length || e.undecided.length || (e.overcounted.length && mine.headroomBytes < 0)
          ? `Fit       undecided on ${gpuWithMemory(e, b(mine.memoryBytes))}: ${undecidedWhy(e)}; the figures need ${b(need)}`
          : `Fit       undecided on ${gpuWithMemory(e, b(mine.memoryBytes))}: ${needs}, leaving ${b(mine.headroomBytes)} for the parts not counted`,
  );
  if (opts.minGpus?.undecided)
    L.push(
      `          smallest world size: not decided (${e.undecided.length ? "the figures are one arm's" : e.unmodelled.length ? "the search varies FSDP's dimension alone" : 'the figures count more than the job keeps'})`,
    );
  else if (opts.minGpus) {
    L.push(
      opts.minGpus.worldSize !== null
        ? `          smallest world size that fits ${article(e.gpu.name)}: ${peakLeast}${count(opts.minGpus.worldSize, 'GPU')}${wholeNodesText(opts.minGpus, '; ')}${fixedDegrees(e.mesh) ? ` (FSDP's dimension searched, ${fixedDegrees(e.mesh)} fixed)` : ''}`
        : `          no world size fits ${article(e.gpu.name)}: ${opts.minGpus.reason}`,
    );
  }
  const others = e.fit.filter((f) => f.gpu !== e.gpu.id);
  const yes: Record<Verdict, string> = { fits: 'yes', short: 'no', undecided: '?' };
  L.push(`          other GPUs: ${others.map((f) => `${shortGpu(f.name)} ${yes[f.verdict]}`).join(', ')}`);
  if (e.gaps.length || e.uncounted.length) {
    const all = [...e.gaps, ...e.uncounted];
    L.push('');
    L.push(
      e.gaps.length
        ? 'Not counted (the figures above are lower bounds)'
        : 'Not counted (the peak and the fit above are lower bounds)',
    );
    for (const g of all.slice(0, 12)) L.push(`  - ${g}`);
    if (all.length > 12) L.push(`  - and ${all.length - 12} more`);
    if (e.gaps.length)
      L.push('  to count them: --exact (measure with PyTorch), or name the model (# fsdp: model=ORG/NAME)');
  }
  L.push('');
  if (e.plan.api === 'none') L.push('Traffic   none: one GPU without FSDP has no collectives');
  else {
    const s = e.comms.perStep;
    const k = e.setup.gradAccum > 1 ? ` (${e.setup.gradAccum} micro-batches)` : '';
    const around = modelParallelLinks(e.comms.links);
    L.push(`Traffic   ${b(trafficBytes(s) + around.reduce((t, l) => t + l.bytes, 0))} per GPU per step${k}`);
    const traffic = [
      [
        'all-gather',
        b(s.allGatherBytes),
        `${count(s.collectives.allGather, 'collective')} in ${e.comms.gatherDtype}${e.setup.float8 === 'all-gather' && e.plan.api === 'fsdp2' ? ', the Float8 weights in float8' : ''}`,
      ],
      [
        'reduce-scatter',
        b(s.reduceScatterBytes),
        `${count(s.collectives.reduceScatter, 'collective')} in ${e.comms.reduceDtype}`,
      ],
      ...(s.collectives.allReduce
        ? [
            [
              'all-reduce',
              b(s.allReduceBytes),
              `${count(s.collectives.allReduce, 'collective')} in ${e.comms.reduceDtype}`,
            ],
          ]
        : []),
      ...around.map((l) => [
        l.role,
        b(l.bytes),
        `${count(l.collectives, 'collective')} of activations in ${e.comms.gatherDtype}: ${fmtSeconds(l.seconds)} on ${l.link.name}, in the compute stream (not hidden)`,
      ]),
    ];
    L.push(...columns(traffic));
    // What the same model would move under the textbook schemes, to compare the plan with.
    L.push(
      `  for comparison: ZeRO-3 (every parameter gathered in forward and in backward, every gradient reduce-scattered) ` +
        `${b(e.comms.zero3ReferenceBytes)} · DDP (every gradient all-reduced in ${e.comms.ddpDtype}) ${b(e.comms.ddpAllReduceBytes)}`,
    );
    const link = e.comms.shardLink;
    L.push(
      `  ${link.name}, ${link.perDirectionGBs} GB/s each way at ${Math.round(e.setup.linkEfficiency * 100)}%: ` +
        `${fmtSeconds(e.comms.commSeconds)} on the link against ${fmtSeconds(e.comms.computeSeconds)} of compute per step; ` +
        (!e.comms.transfersHide
          ? `about ${fmtSeconds(e.comms.exposedSeconds)} cannot hide behind compute`
          : 'transfers hide behind compute'),
    );
  }
  L.push('');
  L.push('Assumptions');
  const rows = e.assumptions.map((a) => [a.label, a.value, sourceText(a.source)]);
  L.push(...columns(rows, '  ', columnWidths(rows, 38)));
  if (e.notes.length) {
    L.push('');
    L.push('Notes');
    for (const n of e.notes) L.push(`  - ${n}`);
  }
  return L.join('\n') + '\n';
}

/** The advice as a terminal section: each finding and the changes it compares, re-estimated. */
export function adviceText(advice: Advice[], units: ByteUnit = 'GB'): string {
  const shown = advice.filter((a) => a.level !== 'ok');
  if (!shown.length) return '';
  const b = (n: number) => fmtBytes(n, units);
  const L = ['', 'What to change'];
  for (const a of shown) {
    L.push(`  ${a.level === 'problem' ? '!' : '-'} ${a.title}`, `    ${a.detail}`);
    for (const o of a.options)
      L.push(
        `      ${pad(o.label, 44)} peak ${pad(b(o.peakBytes), 9)} ${pad(o.verdict === 'fits' ? 'fits' : o.verdict === 'short' ? 'no fit' : 'may fit', 7)} ` +
          `traffic ${pad(b(o.trafficBytes), 9)} exposed ${pad(`${o.unmodelledCost ? '≥ ' : ''}${fmtSeconds(o.exposedSeconds)}`, 8)} ${o.unmodelledCost ? `${o.note}; ${o.unmodelledCost}` : o.note}`,
      );
  }
  return L.join('\n') + '\n';
}

/** The degrees around FSDP that a world-size search keeps: `pipeline parallel 8 x tensor parallel 8`. */
function fixedDegrees(mesh: Estimate['mesh']): string {
  return [
    mesh.pp > 1 ? `pipeline parallel ${mesh.pp}` : '',
    mesh.tp > 1 ? `tensor parallel ${mesh.tp}` : '',
    mesh.cp > 1 ? `context parallel ${mesh.cp}` : '',
  ]
    .filter(Boolean)
    .join(' x ');
}

/**
 * The pipeline's ranks, a line each kind: the blocks each holds, the micro-batches it keeps in flight and its peak;
 * the rank whose figures follow first.
 */
function pipelineLines(p: NonNullable<Estimate['pipeline']>, b: (n: number) => string): string[] {
  const out = [
    `Pipeline  ${p.schedule}, ${count(p.microbatches, 'micro-batch', 'micro-batches')} of ${p.microBatchSize}, ${count(p.stagesPerRank, 'stage')} per rank; the figures below are rank ${p.worstRank}'s, the highest peak`,
  ];
  const shown =
    p.ranks.length <= 8
      ? p.ranks
      : p.ranks.filter((r, i) => i < 3 || i >= p.ranks.length - 3 || r.rank === p.worstRank);
  let last = -1;
  for (const r of shown) {
    if (last >= 0 && r.rank > last + 1) out.push('          …');
    last = r.rank;
    const holds = [
      r.first ? 'embedding' : '',
      `blocks ${blockRanges(r.stages)}`,
      r.last ? 'head and loss' : '',
    ]
      .filter(Boolean)
      .join(' + ');
    out.push(
      `  rank ${r.rank}${r.rank === p.worstRank ? '*' : ' '}  ${holds} · ${fmtInFlight(r.inFlight)} in flight · peak ${b(r.peakBytes)}`,
    );
  }
  return out;
}
