/** Rule FSDP008: A wrap call sits under a condition that never holds. */
import type { Draft, Rule } from '../types';

export const wrapNeverRuns: Rule = {
  id: 'FSDP008',
  name: 'wrap-never-runs',
  title: 'A wrap call sits under a condition that never holds',
  defaultSeverity: 'error',
  rationale: `A \`fully_shard\` / \`FSDP\` call guarded by a condition that is never true wraps nothing. The classic case
iterates \`model.named_modules()\` (which yields \`(name, module)\` pairs) into a single variable and tests
\`isinstance(m, Block)\`: a tuple is never a \`Block\`, so no block becomes a unit and the root holds the whole model.`,
  example: {
    bad: `for m in model.named_modules():
    if isinstance(m, Block):
        fully_shard(m)`,
    good: `for name, m in model.named_modules():
    if isinstance(m, Block):
        fully_shard(m)`,
  },
  fix: 'For a `(name, module)` loop, unpacks the pair: `for m in model.named_modules()` becomes `for _, m in ...`.',
  check(ctx) {
    return ctx.facts.calls
      .filter((c) => c.neverRuns)
      .map((c): Draft => {
        const pairLoop = c.loops.find((l) => c.neverRuns!.startsWith(`\`for ${l.target} in `));
        return {
          range: c.range,
          message: `This wrap never runs: ${c.neverRuns}. No unit is created here, so its parameters fall to the enclosing unit (or stay unsharded).`,
          fixes: pairLoop
            ? [
                {
                  title: `Unpack the pairs: for _, ${pairLoop.target} in ...`,
                  edits: [{ range: pairLoop.targetRange, newText: `_, ${pairLoop.target}` }],
                  preferred: true,
                },
              ]
            : [],
        };
      });
  },
};
