/** The CodeLens text over a wrap call or a configuration: what it makes and what that costs. */
import { describeCall } from '../analysis/describe';
import { shortDtype } from '../vocabulary/dtypes';
import type { WrapCall } from '../analysis/facts';
import type { FrameworkPlan } from '../frameworks/types';
import { type Estimate, type UnitEstimate } from '../estimator/types';
import { trafficBytes } from '../estimator/collectives';
import { fmtBytes, fmtParams, type ByteUnit } from '../vocabulary/bytes';
import { atLeast, count, listed, peakWhere, shortGpu, spaced, unitsWords } from '../vocabulary/words';
import { planLabel } from '../vocabulary/fsdp';

/** The units a wrap call created. */
export function unitsOfCall(e: Estimate, call: WrapCall): UnitEstimate[] {
  return e.units.filter((u) => u.site?.file === call.file && u.site.line === call.line);
}

function collectivesPerUnit(u: UnitEstimate): string {
  const c = u.traffic.collectives;
  const parts: string[] = [];
  if (c.allGather) parts.push(`${c.allGather} all-gather${c.allGather > 1 ? 's' : ''}`);
  if (c.reduceScatter) parts.push(`${c.reduceScatter} reduce-scatter`);
  if (c.allReduce) parts.push(`${c.allReduce} all-reduce`);
  return parts.join(' + ') || 'no collectives';
}

/** The one-line CodeLens over a wrap call: what it makes and what that costs. */
/** The lens over a framework's FSDP configuration (a config file's first line, a constructor call). */
export function frameworkLensTitle(fw: FrameworkPlan, e: Estimate, units: ByteUnit = 'GB'): string {
  const api = planLabel(fw.api, e.plan.strategy);
  return `${fw.framework} → ${api} · ${planTotals(e, units)}`;
}

/** The plan's totals: per-GPU memory, the step's peak and the fit, traffic per step. */
export function planTotals(e: Estimate, units: ByteUnit = 'GB'): string {
  const b = (n: number) => fmtBytes(n, units);
  const traffic = trafficBytes(e.comms.perStep);
  const c = e.comms.perStep.collectives;
  const mp = `${shortDtype(e.comms.gatherDtype)}/${shortDtype(e.comms.reduceDtype)}`;
  const fit = e.targetFit;
  const on = `${e.mesh.worldSize} x ${shortGpu(e.gpu.name)}`;
  // A job whose GPUs the step shares with other phases: the phase that decides, when it is not the step.
  const phase =
    e.colocated && e.colocated.worst !== 'actor update' ? `, in its ${e.colocated.worst} phase` : '';
  const verdict =
    fit.verdict === 'fits'
      ? `fits ${on} (${b(fit.headroomBytes)} spare${phase})`
      : fit.verdict === 'short'
        ? `does not fit ${on} (${b(-fit.headroomBytes)} short${phase})`
        : `fit on ${on} undecided (${e.unmodelled.length ? `${listed(e.unmodelled)} not modelled` : `${count(e.gaps.length + e.uncounted.length, 'part')} not counted`})`;
  const least = atLeast(e.gaps.length > 0);
  const peakLeast = atLeast(e.gaps.length > 0 || e.uncounted.length > 0);
  return (
    `${unitsWords(e.plan.api, e.units.length)} · ${least}${b(e.perGpu.persistentBytes)}/GPU persistent · ` +
    `peak ${peakLeast}${b(e.perGpu.peakBytes)}${e.pipeline ? ` on pipeline rank ${e.pipeline.worstRank} of ${e.pipeline.degree}` : spaced(peakWhere(e.perGpu.peakAt))} · ${verdict} · ` +
    `${b(traffic)}/step in ${c.allGather + c.reduceScatter + c.allReduce} collectives (${mp})`
  );
}

/**
 * The one-line CodeLens over a wrap call: what it makes and what that costs. The root's lens carries the plan's
 * totals; in a file without a root wrap, `totals` puts them on the last call.
 */
/** A wrap the defaults keep off the estimated path (`if args.fsdp1:` with `--fsdp1` not given): in no unit. */
export function isOffPath(call: WrapCall, e: Estimate | undefined): boolean {
  return !!call.offByDefault && !!e && !unitsOfCall(e, call).length;
}

/** Its lens: why it is off, the arguments that take it, then what it does. */
export function offPathTitle(call: WrapCall): string {
  const taken = call.runsWith ? ` · ${call.runsWith.join(' ')} takes it` : '';
  return `off the default path, not estimated${taken} · ${describeCall(call)}`;
}

export function lensTitle(
  call: WrapCall,
  e: Estimate | undefined,
  units: ByteUnit = 'GB',
  opts: { totals?: boolean; why?: string } = {},
): string {
  const gen = call.api === 'fully_shard' ? 'FSDP2' : 'FSDP1';
  // Without an estimate: what the call does, and on the root why there are no numbers.
  if (!e) return `${describeCall(call)}${opts.why && call.isRoot ? ` · no estimate: ${opts.why}` : ''}`;
  const mine = unitsOfCall(e, call);
  const b = (n: number) => fmtBytes(n, units);
  // Off the path the defaults take, a root wrap too: not the estimated plan's.
  if (isOffPath(call, e)) return offPathTitle(call);
  if (call.isRoot) return `${gen} root · ${planTotals(e, units)}`;
  if (opts.totals) return `${lensTitle(call, e, units)} ‖ no root wrap: ${planTotals(e, units)}`;
  if (!mine.length) return `${describeCall(call)} · matches no module of ${e.model.name}`;
  const u = mine[0]!;
  const same = mine.every((x) => x.params === u.params);
  const count = mine.length > 1 ? `${mine.length} units x ` : '1 unit · ';
  const size = same
    ? `${fmtParams(u.params)} params`
    : `${fmtParams(mine.reduce((s, x) => s + x.params, 0))} params in all`;
  const cls = u.classNames.length === 1 && mine.length > 1 ? ` (${u.classNames[0]})` : '';
  const residency =
    u.residency.kind === 'keep'
      ? 'kept gathered to backward'
      : u.residency.kind === 'slice'
        ? `keeps 1/${u.residency.ranks} after forward`
        : 'reshards after forward';
  const peaks = mine.map((x) => e.timeline?.perUnit[x.name]).filter((p): p is number => p !== undefined);
  const peak = peaks.length
    ? ` · peak ${b(Math.max(...peaks))} while ${mine.length > 1 ? 'they run' : 'it runs'}`
    : '';
  const per = e.setup.gradAccum > 1 ? 'micro-batch' : 'step';
  return `${gen} ${count}${size}${cls} · ${b(u.gatheredBytes)} gathered${mine.length > 1 ? ' each' : ''} · ${residency} · ${collectivesPerUnit(u)}/${per}${peak}`;
}
