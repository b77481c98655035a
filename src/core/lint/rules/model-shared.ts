/** What the model-aware rules share: the call that made a unit, the unit that holds a module. */
import type { WrapCall } from '../../analysis/facts';
import type { Estimate, UnitEstimate } from '../../estimator/types';

/** The wrap call that created a unit. */
export function callOfUnit(calls: WrapCall[], u: UnitEstimate): WrapCall | undefined {
  return calls.find((c) => u.site?.file === c.file && u.site.line === c.line);
}

/** The innermost unit whose modules contain the module at `path`. */
export function unitOfModule(e: Estimate, path: string): UnitEstimate | undefined {
  let best: UnitEstimate | undefined;
  let depth = -1;
  for (const u of e.units)
    for (const m of u.modules) {
      const inside = m === '' || path === m || path.startsWith(`${m}.`);
      const d = m === '' ? 0 : m.split('.').length;
      if (inside && d > depth) {
        best = u;
        depth = d;
      }
    }
  return best;
}
