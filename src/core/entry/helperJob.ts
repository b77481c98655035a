/**
 * A helper's job: a file whose wraps all run inside one function that scripts of the project call (`shard(model)` in
 * train.py) is estimated as the calling script's job, whose model, batch, sequence and launch file are the helper's
 * inputs too, so every file of the job shows one plan and one verdict.
 */
import * as path from 'node:path';
import type { FileFacts } from '../analysis/facts';
import { scanFile } from '../analysis/scan';
import { projectReaders } from '../frameworks/scriptConfigs';
import type { Project } from '../project/project';
import { isTestFile } from '../project/testFiles';
import { callReaches } from '../modules/resolveModel';
import { launchArguments, type EstimateResult } from '../resolve/analyze';
import { planOfCalledFunction } from '../resolve/entryPlan';

/** At most this many calling scripts are analysed for a helper's job (the first whose plan uses it wins). */
const MAX_CALLERS = 4;

/**
 * The estimate of the job that runs this helper's wraps: the first calling script (by path) whose plan includes
 * them, analysed with its own launch arguments, said so and naming the other callers; undefined when the file wraps
 * at module level (it is an entry itself), has no caller, or no caller's plan reaches it.
 */
export function helperJobEstimate(
  project: Project,
  facts: FileFacts,
  analyze: (facts: FileFacts, text: string) => EstimateResult | undefined,
): EstimateResult | undefined {
  // One function's wraps; in a file of several plans, those of the plan the file's own reading chooses (the one
  // its callers run, or `# fsdp: plan=`), said with the others.
  let calls = facts.calls;
  let planNote: string | undefined;
  let plans: ReturnType<typeof planOfCalledFunction>['choices'];
  const all = new Set(calls.map((c) => c.function));
  if (all.size > 1 && !all.has(null)) {
    const chosen = planOfCalledFunction(project, facts);
    if (chosen.choices) {
      calls = chosen.facts.calls;
      planNote = chosen.note;
      plans = chosen.choices;
    }
  }
  const fns = new Set(calls.map((c) => c.function));
  if (!calls.length || fns.has(null) || fns.size > 1) return undefined;
  const self = path.resolve(facts.path);
  const rel = (p: string) => path.relative(path.dirname(self), p) || path.basename(p);
  const names = [...new Set(calls.map((c) => c.function!.split('.').pop()!))];
  const sites = new Map<string, { file: string; line: number; fn: string }>();
  // A test's toy model says nothing of the job, unless the helper is itself among the tests.
  const inTests = (p: string) => isTestFile(path.relative(project.roots[0] ?? '', p));
  const selfInTests = inTests(self);
  for (const name of names)
    for (const c of project.callersOf(name)) {
      const file = path.resolve(c.file.path);
      if (file === self || (!selfInTests && inTests(file))) continue;
      // A call of this very function (imported from this file), not of another of the same name.
      if (!callReaches(project, c.file, c.call, self, name, false)) continue;
      if (!sites.has(file)) sites.set(file, { file, line: c.call.startPosition.row + 1, fn: name });
    }
  const sorted = [...sites.values()].sort((a, b) => a.file.localeCompare(b.file));
  // `# fsdp: caller=PATH` picks the script whose job this is (its path from this file's folder, or its name).
  const asked = facts.annotations.find((a) => a.values.caller !== undefined);
  const wanted = asked?.values.caller;
  const named = wanted
    ? sorted.find((c) => rel(c.file) === wanted || path.basename(c.file) === wanted)
    : undefined;
  const callers = named ? [named, ...sorted.filter((c) => c !== named)] : sorted;
  const unmatched =
    wanted && !named
      ? `no script of the project calling it is ${wanted} (# fsdp: caller= at line ${asked!.line}); its callers: ${sorted.map((c) => rel(c.file)).join(', ')}`
      : undefined;
  for (const c of callers.slice(0, MAX_CALLERS)) {
    const py = project.file(c.file);
    if (!py) continue;
    const launch = launchArguments(project, c.file);
    const target = scanFile(project.grammar, py.source, {
      ...(launch ? { launchArgv: launch } : {}),
      ...projectReaders(project, c.file),
    });
    const inner = analyze(target, py.source.text);
    // The caller's plan must be made of this helper's wraps: another helper of the same name is another job.
    if (!inner?.ok || !inner.estimate.units.some((u) => u.site && path.resolve(u.site.file) === self))
      continue;
    const others = callers.filter((o) => o !== c).map((o) => `${rel(o.file)}:${o.line}`);
    inner.estimate.notes.unshift(
      `the job is ${rel(c.file)}'s, which calls ${c.fn}() at line ${c.line}${c === named ? ` (# fsdp: caller= at line ${asked!.line})` : ''}: its model, batch, sequence and launch are this file's inputs` +
        (others.length
          ? `; ${others.length === 1 ? 'another script calls' : 'other scripts call'} it too (${others.join(', ')}), each its own job (# fsdp: caller=PATH picks one)`
          : ''),
      ...(unmatched ? [unmatched] : []),
      ...(planNote ? [planNote] : []),
    );
    return {
      ...inner,
      // The file's plans stay choosable (`# fsdp: plan=`), as its own reading offers them.
      ...(plans ? { plans } : {}),
      jobCallers: sorted.map((o) => ({ file: rel(o.file), line: o.line, chosen: o === c })),
    };
  }
  return undefined;
}
