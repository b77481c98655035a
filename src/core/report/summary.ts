import { describeCall, shortDtype } from '../analysis/describe';
import type { WrapCall } from '../analysis/facts';
import type { Estimate, UnitEstimate } from '../estimator/estimate';
import { trafficBytes } from '../estimator/estimate';
import { fmtBytes, fmtParams, type ByteUnits } from '../estimator/format';

/** The units a wrap call created (matched by the line the plan recorded). */
export function unitsOfCall(e: Estimate, call: WrapCall): UnitEstimate[] {
  const suffix = `:${call.line}`;
  return e.units.filter((u) => u.origin.endsWith(suffix));
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
export function lensTitle(call: WrapCall, e: Estimate | undefined, units: ByteUnits = 'GB'): string {
  const gen = call.api === 'fully_shard' ? 'FSDP2' : 'FSDP1';
  if (!e) return describeCall(call);
  const mine = unitsOfCall(e, call);
  const b = (n: number) => fmtBytes(n, units);
  if (call.isRoot) {
    const traffic = trafficBytes(e.comms.perStep);
    const c = e.comms.perStep.collectives;
    const mp = `${shortDtype(e.comms.gatherDtype)}/${shortDtype(e.comms.reduceDtype)}`;
    return (
      `${gen} root · ${e.units.length} units · ${b(e.perGpu.persistentBytes)}/GPU persistent · ` +
      `${b(traffic)}/step in ${c.allGather + c.reduceScatter + c.allReduce} collectives (${mp}) · ${e.mesh.worldSize} x ${shortGpu(e.gpu.name)}`
    );
  }
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
  return `${gen} ${count}${size}${cls} · ${b(u.gatheredBytes)} gathered${mine.length > 1 ? ' each' : ''} · ${residency} · ${collectivesPerUnit(u)}/step`;
}

function shortGpu(name: string): string {
  return name.replace(/^NVIDIA (GeForce )?/, '').replace(/^AMD Instinct /, '');
}
