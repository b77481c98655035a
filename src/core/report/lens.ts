/**
 * The CodeLens over a wrap call or a configuration as short segments, verdict first: each segment a lens of its
 * own (its own click and tooltip), the whole line about 80 characters, the details in the tooltips and the hover.
 */
import { describeCall } from '../analysis/describe';
import type { WrapCall } from '../analysis/facts';
import type { FrameworkPlan } from '../frameworks/types';
import { trafficBytes } from '../estimator/collectives';
import type { Estimate } from '../estimator/types';
import { fmtBytes, fmtParams, type ByteUnit } from '../vocabulary/bytes';
import { planLabel } from '../vocabulary/fsdp';
import { atLeast, shortGpu, undecidedWhy } from '../vocabulary/words';
import { isOffPath, lensTitle, planTotals, unitsOfCall } from './summary';
import { sourceText } from './text';

/** The inputs a verdict's tooltip names with their sources. */
const VERDICT_INPUTS = ['model', 'worldSize', 'gpu', 'microBatch', 'seqLen', 'checkpointing'];

/** The parts a lens line may show, in the order it shows them (the `fsdpLens.codeLens.segments` setting). */
export const LENS_PARTS = ['verdict', 'memory', 'plan', 'traffic'] as const;
export type LensPart = (typeof LENS_PARTS)[number];

/** One segment of a lens line: its text, what its tooltip says, and the icon a verdict carries. */
export interface LensSegment {
  part: LensPart;
  text: string;
  tooltip: string;
  icon?: 'fits' | 'short' | 'undecided';
}

/** `50.3/85.5 GB`: a need against a capacity, the unit said once where both share it. */
function ofCapacity(need: number, capacity: number, units: ByteUnit): string {
  const n = fmtBytes(need, units);
  const c = fmtBytes(capacity, units);
  const unit = / (\S+)$/.exec(c)?.[1];
  return unit && n.endsWith(` ${unit}`) ? `${n.slice(0, -unit.length - 1)}/${c}` : `${n}/${c}`;
}

/** The verdict and the memory segments of a plan: does it fit the target GPUs, and what it needs of each. */
function fitSegments(e: Estimate, units: ByteUnit): LensSegment[] {
  const b = (n: number) => fmtBytes(n, units);
  const fit = e.targetFit;
  // The card without its memory, which the memory segment gives: `8 x H100 SXM`.
  const on = `${e.mesh.worldSize} x ${shortGpu(e.gpu.name).replace(/ \d+GB$/, '')}`;
  const why = undecidedWhy(e);
  // Which file (or default) gives each input the verdict rests on: the lens of a helper, a script and its config
  // say where the job's count of GPUs, batch and sequence come from.
  const inputs = e.assumptions
    .filter((a) => VERDICT_INPUTS.includes(a.key))
    .map((a) => `${a.label} ${a.value} (${sourceText(a.source)})`)
    .join('\n');
  const verdict: LensSegment =
    fit.verdict === 'fits'
      ? {
          part: 'verdict',
          text: `fits ${on}`,
          icon: 'fits',
          tooltip: `Fits ${on}: ${b(fit.headroomBytes)} to spare\n${inputs}`,
        }
      : fit.verdict === 'short'
        ? {
            part: 'verdict',
            text: `does not fit ${on}`,
            icon: 'short',
            tooltip: `Does not fit ${on}: ${b(-fit.headroomBytes)} short\n${inputs}`,
          }
        : {
            part: 'verdict',
            text: `fit undecided`,
            icon: 'undecided',
            tooltip: `Fit on ${on} undecided: ${why}\n${inputs}`,
          };
  const needs = fit.memoryBytes - fit.headroomBytes;
  const least = atLeast(e.gaps.length > 0 || e.uncounted.length > 0);
  const memory: LensSegment = {
    part: 'memory',
    text: `needs ${least}${ofCapacity(needs, fit.memoryBytes, units)}`,
    tooltip: e.colocated
      ? `Each GPU needs ${least}${b(needs)} of its ${b(fit.memoryBytes)} in its ${e.colocated.worst} phase: ${e.colocated.phases.map((p) => `${p.name} ${b(p.needBytes)}`).join(', ')} (each with the caching allocator's allowance, the CUDA context and the rollout engine's share)`
      : `Each GPU needs ${least}${b(needs)} of its ${b(fit.memoryBytes)}: the peak ${b(e.perGpu.peakBytes)}` +
        ` with the caching allocator's allowance and the CUDA context`,
  };
  return [verdict, memory];
}

/** The traffic segment: bytes per GPU per step. */
function trafficSegment(e: Estimate, units: ByteUnit): LensSegment {
  const c = e.comms.perStep.collectives;
  return {
    part: 'traffic',
    text: `${fmtBytes(trafficBytes(e.comms.perStep), units)}/step`,
    tooltip: `Traffic per GPU per step, in ${c.allGather + c.reduceScatter + c.allReduce} collectives`,
  };
}

/** The segments over a root wrap, a framework's configuration, or the last wrap of a plan without a root. */
export function planSegments(e: Estimate, plan: string, units: ByteUnit = 'GB', by = ''): LensSegment[] {
  return [
    ...fitSegments(e, units),
    { part: 'plan', text: plan, tooltip: `${by}${planTotals(e, units)}` },
    trafficSegment(e, units),
  ];
}

/** The lens segments over a framework's FSDP configuration. */
export function frameworkSegments(fw: FrameworkPlan, e: Estimate, units: ByteUnit = 'GB'): LensSegment[] {
  const api = planLabel(fw.api, e.plan.strategy);
  return planSegments(e, unitCount(e, api), units, `${fw.framework} → ${api}: `);
}

/** `33 FSDP2 units`: the plan's units, named by the API that makes them. */
function unitCount(e: Estimate, api: string): string {
  return `${e.units.length} ${api.split(' ')[0]} unit${e.units.length === 1 ? '' : 's'}`;
}

/**
 * The lens segments over a wrap call: on the root (or on the last call of a plan with no root wrap) the plan's
 * verdict, memory, units and traffic; on another call its units and what each gathers. Without an estimate, or
 * off the path the defaults take, one segment that says so.
 */
export function callSegments(
  call: WrapCall,
  e: Estimate | undefined,
  units: ByteUnit = 'GB',
  opts: { totals?: boolean; why?: string } = {},
): LensSegment[] {
  const one = (text: string, tooltip = describeCall(call)): LensSegment[] => [
    { part: 'plan', text, tooltip },
  ];
  if (!e || isOffPath(call, e)) return one(lensTitle(call, e, units, opts));
  const gen = call.api === 'fully_shard' ? 'FSDP2' : 'FSDP1';
  if (call.isRoot) return planSegments(e, unitCount(e, gen), units, `${gen} root: `);
  const mine = unitsOfCall(e, call);
  if (!mine.length) return one(lensTitle(call, e, units, opts));
  const u = mine[0]!;
  const same = mine.every((x) => x.params === u.params);
  const size = same
    ? `${mine.length > 1 ? `${mine.length} units x ` : '1 unit · '}${fmtParams(u.params)} params`
    : `${mine.length} units · ${fmtParams(mine.reduce((s, x) => s + x.params, 0))} params in all`;
  const cls = u.classNames.length === 1 && mine.length > 1 ? ` (${u.classNames[0]})` : '';
  // The last wrap of a plan with no root wrap carries the plan's line (FSDP001 says what is missing).
  if (opts.totals)
    return planSegments(
      e,
      `${unitCount(e, gen)}, no root`,
      units,
      `${gen} ${size}${cls}, and no root wrap: `,
    );
  const b = (n: number) => fmtBytes(n, units);
  return [
    {
      part: 'plan',
      text: `${gen} ${size}${cls}`,
      tooltip: `${lensTitle(call, e, units)}\n${describeCall(call)}`,
    },
    {
      part: 'memory',
      text: `${b(u.gatheredBytes)} gathered${mine.length > 1 ? ' each' : ''}`,
      tooltip: lensTitle(call, e, units),
    },
  ];
}

/** The segments a setting keeps, in their order; the verdict is kept when every part would go. */
export function keptSegments(segments: LensSegment[], parts: readonly string[]): LensSegment[] {
  const kept = segments.filter((s) => parts.includes(s.part));
  return kept.length ? kept : segments.slice(0, 1);
}
