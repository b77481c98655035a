/** A file's plans when its wraps make several (in different functions or classes): how surfaces name them. */

/** A file's plans: the one estimated and the others, each by the function or class that makes it. */
export interface PlanChoices {
  chosen: string;
  plans: { name: string; kind: 'function' | 'class'; line: number; end: number }[];
}

/** The plan other than the estimated one that a call of the file belongs to, by its lines; undefined for its own. */
export function otherPlanOf(
  line: number,
  choices: PlanChoices | undefined,
): PlanChoices['plans'][number] | undefined {
  return choices?.plans.find((p) => p.name !== choices.chosen && line >= p.line && line <= p.end);
}

/** How a note names a plan: `class RewardWorker`, `shard_decoder()`. */
export function planName(p: { name: string; kind: 'function' | 'class' }): string {
  return p.kind === 'class' ? `class ${p.name}` : `${p.name}()`;
}
