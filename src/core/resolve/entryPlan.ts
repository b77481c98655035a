/**
 * Which of a file's plans is estimated: a file whose wraps sit in several functions, none calling another
 * (`shard_vision(encoder)`, `shard_decoder(model)`), or in several classes (an actor's, a critic's and a reward
 * model's workers), is estimated for the one the user names, else the one the project runs (the most callers),
 * else the first; the note names the others and how to pick one.
 */
import * as path from 'node:path';
import type { FileFacts, WrapCall } from '../analysis/facts';
import type { Project } from '../project/project';
import { isTestFile } from '../project/testFiles';
import type { LineSpan } from './helpers';
import { planName, type PlanChoices } from '../vocabulary/planChoices';

export type { PlanChoices };

export interface ChosenPlan {
  facts: FileFacts;
  /** Which plan this is, and what the others are. */
  note?: string;
  /** The lines of the function or class whose plan this is: helper calls outside it belong to other plans. */
  span?: LineSpan;
  /** The file's plans, for a surface that offers the others (`# fsdp: plan=NAME`). */
  choices?: PlanChoices;
}

/** One candidate plan: the wraps of a function, or of a class's methods (which call one another through `self`). */
interface PlanGroup {
  name: string;
  kind: 'function' | 'class';
  span: LineSpan;
  calls: WrapCall[];
}

/**
 * The file's facts restricted to one plan when its wraps make several; `pick` names one (`--plan`, or a
 * `# fsdp: plan=NAME` comment).
 */
export function planOfCalledFunction(
  project: Project | undefined,
  facts: FileFacts,
  pick?: string,
): ChosenPlan {
  const groups = planGroups(facts);
  if (!groups || groups.length < 2) return { facts };
  const annotated = facts.annotations.find((a) => a.values.plan !== undefined);
  const wanted = pick ?? annotated?.values.plan;
  const pickedBy = pick !== undefined ? `--plan ${pick}` : `# fsdp: plan= at line ${annotated?.line}`;
  const named =
    wanted !== undefined ? groups.find((g) => g.name === wanted || lastName(g.name) === wanted) : undefined;
  const label = planName;
  const parts: string[] = [];
  if (wanted !== undefined && !named)
    parts.push(
      `no plan is named "${wanted}" (${pickedBy}); the file's plans: ${groups.map((g) => g.name).join(', ')}`,
    );
  let chosen: PlanGroup;
  const callers = project ? callerSites(project, facts, groups) : new Map<PlanGroup, string[]>();
  if (named) {
    chosen = named;
    parts.push(`the plan of ${label(chosen)}, chosen by ${pickedBy}`);
  } else {
    // The one most callers run first (a decoder's helper over a vision encoder's that only some models call).
    const called = groups
      .filter((g) => callers.get(g)?.length)
      .sort((a, b) => callers.get(b)!.length - callers.get(a)!.length);
    if (called.length) {
      chosen = called[0]!;
      const sites = callers.get(chosen)!;
      const verb = chosen.kind === 'class' ? 'built' : 'called';
      parts.push(
        `the plan of ${label(chosen)}, ${verb} at ${sites.slice(0, 3).join(', ')}${sites.length > 3 ? ', …' : ''}`,
      );
    } else {
      chosen = groups[0]!;
      parts.push(
        `the plan of ${label(chosen)}, the first in the file: ${chosen.kind === 'class' ? 'no call in the project builds any of them' : 'the project calls none of them'}`,
      );
    }
  }
  const others = groups
    .filter((g) => g !== chosen)
    .map((g) => {
      const sites = callers.get(g) ?? [];
      const how = sites.length
        ? `${g.kind === 'class' ? 'built' : 'called'} at ${sites[0]}`
        : `${g.kind === 'class' ? 'built by no call' : 'called nowhere'} in the project`;
      return `${label(g)} (line ${g.span.line}, ${how})`;
    });
  parts.push(
    `${others.join(', ')} ${others.length === 1 ? 'makes' : 'make'} another plan, not estimated here (\`--plan NAME\` or \`# fsdp: plan=NAME\` picks one)`,
  );
  return {
    facts: restrictedTo(facts, chosen, groups),
    note: parts.join('; '),
    span: chosen.span,
    choices: {
      chosen: chosen.name,
      plans: groups.map((g) => ({ name: g.name, kind: g.kind, line: g.span.line, end: g.span.end })),
    },
  };
}

function lastName(name: string): string {
  return name.slice(name.lastIndexOf('.') + 1);
}

/**
 * The plans the file's wraps make, in file order; null when they make one together: wraps at module level, in a
 * nested function, or in functions the file calls itself.
 */
function planGroups(facts: FileFacts): PlanGroup[] | null {
  const groups = new Map<string, PlanGroup>();
  for (const c of facts.calls) {
    if (c.incomplete) continue;
    const fn = c.function ? facts.functions[c.function] : undefined;
    if (!c.function || !fn) return null;
    let g: PlanGroup;
    if (fn.owner)
      g = { name: fn.owner.name, kind: 'class', span: { line: fn.owner.line, end: fn.owner.end }, calls: [] };
    else if (!c.function.includes('.') && !fn.calledInFile)
      g = { name: c.function, kind: 'function', span: { line: fn.line, end: fn.end }, calls: [] };
    else return null;
    const known = groups.get(`${g.kind}:${g.name}`);
    if (known) known.calls.push(c);
    else groups.set(`${g.kind}:${g.name}`, { ...g, calls: [c] });
  }
  return [...groups.values()].sort((a, b) => a.span.line - b.span.line);
}

/** Where the project calls each function, or builds each class (test files left out), as `file:line`. */
function callerSites(project: Project, facts: FileFacts, groups: PlanGroup[]): Map<PlanGroup, string[]> {
  const root = project.roots[0] ?? path.dirname(facts.path);
  const rel = (f: string) => path.relative(root, f) || path.basename(f);
  const self = path.resolve(facts.path);
  const out = new Map<PlanGroup, string[]>();
  for (const g of groups) {
    const sites = project
      .callersOf(lastName(g.name))
      .filter((s) => {
        const line = s.call.startPosition.row + 1;
        const here = path.resolve(s.file.path) === self;
        // A function's callers in this file make it part of one plan already; a class may be built here.
        if (here && (g.kind === 'function' || (line >= g.span.line && line <= g.span.end))) return false;
        return !isTestFile(rel(s.file.path));
      })
      .map((s) => `${rel(s.file.path)}:${s.call.startPosition.row + 1}`);
    out.set(g, sites);
  }
  return out;
}

/**
 * The facts of one plan: its wrap calls, and the other facts (models, checkpointing, optimizers, casts) written
 * in its lines or outside every plan's lines (module level), not those of the other plans.
 */
function restrictedTo(facts: FileFacts, chosen: PlanGroup, groups: PlanGroup[]): FileFacts {
  const inSpan = (line: number, s: LineSpan) => line >= s.line && line <= s.end;
  const keep = (x: { line: number }) =>
    inSpan(x.line, chosen.span) || !groups.some((g) => inSpan(x.line, g.span));
  return {
    ...facts,
    calls: keptCalls(facts.calls, (c) => chosen.calls.includes(c)),
    meshes: facts.meshes.filter(keep),
    optimizers: facts.optimizers.filter(keep),
    models: facts.models.filter(keep),
    checkpointing: facts.checkpointing.filter(keep),
    training: facts.training.filter(keep),
    mixedPrecision: facts.mixedPrecision.filter(keep),
    frameworkCalls: facts.frameworkCalls.filter(keep),
  };
}

/**
 * Wraps of whole models that several functions make under one name (a policy's and a reference model's setup
 * methods, each sharding its own `model`): different objects, of which the estimate takes the first function's;
 * the others are left out with a note. Returns the calls kept (children renumbered).
 */
export function oneModelPerName(calls: WrapCall[], notes: string[]): WrapCall[] {
  const byName = new Map<string, (string | null)[]>();
  for (const c of calls)
    for (const p of c.paths)
      if (p.length === 1) {
        const fns = byName.get(p[0]!) ?? [];
        if (!fns.includes(c.function)) fns.push(c.function);
        byName.set(p[0]!, fns);
      }
  const dropped = new Set<WrapCall>();
  for (const [name, fns] of byName) {
    if (fns.length < 2 || fns.some((f) => f === null)) continue;
    const [first, ...others] = fns;
    for (const c of calls)
      if (c.function !== first && others.includes(c.function) && c.paths.some((p) => p[0] === name))
        dropped.add(c);
    notes.push(
      `${others.map((f) => `${f}()`).join(', ')} also ${others.length === 1 ? 'wraps' : 'wrap'} a whole \`${name}\`, another model of that name: estimated for the one ${first}() wraps`,
    );
  }
  return dropped.size ? keptCalls(calls, (c) => !dropped.has(c)) : calls;
}

/** The calls `keep` admits, each one's children (indices into the calls) renumbered among them. */
function keptCalls(calls: WrapCall[], keep: (c: WrapCall) => boolean): WrapCall[] {
  const kept = calls.filter(keep);
  const index = new Map(kept.map((c, i) => [calls.indexOf(c), i]));
  return kept.map((c) => ({
    ...c,
    children: c.children.filter((i) => index.has(i)).map((i) => index.get(i)!),
  }));
}
