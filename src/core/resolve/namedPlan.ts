/**
 * The modules a helper's wrap looks up by the names of a plan its caller passes (`shard(model, plan=grouping_plan(
 * cfg))`, the helper running `for path, reshard in plan: fully_shard(get_module(model, path), ...)`): the plan's
 * value where the call stands, run by the interpreter, and each entry's name and parts.
 */
import type { FileFacts } from '../analysis/facts';
import type { Node } from '../parsing/python';
import type { Project, PyFile } from '../project/project';
import { StepLimit } from '../modules/interpreter';
import { scriptInterpreter } from '../modules/scriptRun';
import type { Value } from '../python/values';
import { oneLine } from '../vocabulary/words';

/** The most entries of one plan read. */
const MAX_ENTRIES = 1024;

export interface PlanEntry {
  /** The module's dotted name (`layers.3`). */
  name: string;
  /** The entry's parts (`("layers.3", False)`), or the entry alone. */
  parts: Value[];
}

/**
 * The plan the helper makes itself where the call passes None (`if plan is None: plan = default_plan(len(
 * model.layers))`): the expression, in the helper's file, and the helper's parameters with what the call passes.
 */
export interface PlanFallback {
  file: PyFile;
  expr: Node;
  passed: { name: string; node: Node }[];
}

/** The entries of the plan `arg` passes (or, for None, of the helper's own), or why they are not known. */
export function planEntries(
  project: Project,
  facts: FileFacts,
  file: PyFile,
  arg: Node,
  place: number,
  fallback?: PlanFallback,
): { entries: PlanEntry[] } | { reason: string } {
  const interp = scriptInterpreter(project, facts.path, facts.argv);
  let v: Value;
  let plan = `the plan \`${oneLine(arg.text, 60)}\` it passes`;
  try {
    v = interp.evalAt(file, arg);
    if (v.k === 'none' && fallback) {
      // The helper's own plan, from the values the call passes (the model, built by the code before the call).
      const call = fallback.passed[0]?.node;
      const values = call
        ? interp.evalManyAt(
            file,
            call,
            fallback.passed.map((p) => p.node),
          )
        : [];
      const env = new Map(fallback.passed.map((p, i) => [p.name, values[i]!]));
      v = interp.evalWith(fallback.file, fallback.expr, env);
      plan = `the plan \`${oneLine(fallback.expr.text, 60)}\` the helper makes when the call passes None`;
    }
  } catch (e) {
    if (e instanceof StepLimit) return { reason: `\`${oneLine(arg.text, 60)}\` is too complex to evaluate` };
    throw e;
  }
  if (v.k === 'none')
    return { reason: `${plan} is None, and the plan the helper then makes is not followed` };
  if (v.k !== 'seq')
    return {
      reason: `${plan} is not known statically (${interp.missing[0] ?? (v.k === 'unknown' ? oneLine(v.why, 120) : v.k)})`,
    };
  if (v.items.length > MAX_ENTRIES) return { reason: `${plan} has more than ${MAX_ENTRIES} entries` };
  const entries: PlanEntry[] = [];
  for (const item of v.items) {
    const parts = place < 0 ? [item] : item.k === 'seq' ? item.items : null;
    const name = parts?.[place < 0 ? 0 : place];
    if (!parts || name?.k !== 'str' || !/^[A-Za-z_0-9]+(\.[A-Za-z_0-9]+)*$/.test(name.v))
      return { reason: `an entry of ${plan} is not a module name known statically` };
    entries.push({ name: name.v, parts });
  }
  return { entries };
}
