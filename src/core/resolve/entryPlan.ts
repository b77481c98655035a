/**
 * Which of a file's wrap functions makes the plan: a file that defines several functions that wrap
 * (`shard_vision(encoder)`, `shard_decoder(model)`), none calling another, is estimated for the one the project
 * calls (the one most callers call, when several are), not for whichever comes first; the note names the others.
 */
import * as path from 'node:path';
import type { FileFacts, WrapCall } from '../analysis/facts';
import type { Project } from '../project/project';
import { isTestFile } from '../project/testFiles';

export interface ChosenPlan {
  facts: FileFacts;
  /** Which function's plan this is, and what the others are. */
  note?: string;
}

/** The file's facts with only the wrap calls of the function the project calls, when it has several of them. */
export function planOfCalledFunction(project: Project | undefined, facts: FileFacts): ChosenPlan {
  const live = facts.calls.filter((c) => !c.incomplete);
  const names = [...new Set(live.map((c) => c.function))];
  // Module-level wraps, methods, or functions that call one another make one plan together.
  if (
    !project ||
    names.length < 2 ||
    names.some((n) => !n || n.includes('.') || facts.functions[n]?.calledInFile)
  )
    return { facts };
  const root = project.roots[0] ?? path.dirname(facts.path);
  const rel = (f: string) => path.relative(root, f) || path.basename(f);
  const callers = new Map<string, string[]>();
  for (const n of names as string[]) {
    const sites = project
      .callersOf(n)
      .filter((s) => path.resolve(s.file.path) !== path.resolve(facts.path) && !isTestFile(rel(s.file.path)))
      .map((s) => `${rel(s.file.path)}:${s.call.startPosition.row + 1}`);
    callers.set(n, sites);
  }
  // The one most callers run first (a decoder's helper over a vision encoder's that only some models call).
  const called = [...callers].filter(([, s]) => s.length).sort((a, b) => b[1].length - a[1].length);
  if (!called.length) return { facts };
  const [chosen, sites] = called[0]!;
  const kept = facts.calls.filter((c) => c.function === chosen);
  const index = new Map(kept.map((c, i) => [facts.calls.indexOf(c), i]));
  const renumbered: WrapCall[] = kept.map((c) => ({
    ...c,
    children: c.children.filter((i) => index.has(i)).map((i) => index.get(i)!),
  }));
  const others = (names as string[]).filter((n) => n !== chosen);
  const otherCalled = called.slice(1).map(([n, s]) => `${n}() (called at ${s[0]})`);
  const uncalled = others.filter((n) => !callers.get(n)?.length).map((n) => `${n}()`);
  const parts = [
    `the plan of ${chosen}(), called at ${sites.slice(0, 3).join(', ')}${sites.length > 3 ? ', …' : ''}`,
    ...(otherCalled.length
      ? [
          `${otherCalled.join(', ')} also make${otherCalled.length === 1 ? 's' : ''} a plan, not estimated here`,
        ]
      : []),
    ...(uncalled.length
      ? [`${uncalled.join(', ')} ${uncalled.length === 1 ? 'is' : 'are'} called nowhere in the project`]
      : []),
  ];
  return { facts: { ...facts, calls: renumbered }, note: parts.join('; ') };
}
