/** Rule FSDP004: The optimizer is created before the model is wrapped. */
import { exclusive } from '../../analysis/facts';
import { moveLines, TextIndex } from '../edits';
import type { Draft, Rule } from '../types';

export const optimizerBeforeWrap: Rule = {
  id: 'FSDP004',
  name: 'optimizer-before-wrap',
  title: 'The optimizer is created before the model is wrapped',
  defaultSeverity: 'error',
  rationale: `Wrapping replaces the module's parameters: FSDP2's \`fully_shard\` swaps each parameter for a sharded
DTensor, and FSDP1 flattens them into FlatParameters. An optimizer created before that holds the old tensors: it
steps parameters the model no longer uses (training silently does nothing to the real weights) and keeps full,
unsharded optimizer state for them. Create the optimizer after the last wrap.`,
  example: {
    bad: `optimizer = torch.optim.AdamW(model.parameters())
for layer in model.layers:
    fully_shard(layer)
fully_shard(model)`,
    good: `for layer in model.layers:
    fully_shard(layer)
fully_shard(model)
optimizer = torch.optim.AdamW(model.parameters())`,
  },
  fix: 'Moves the optimizer construction after the last wrap when it is a statement of the same block and nothing reads it in between.',
  check(ctx) {
    const out: Draft[] = [];
    const index = new TextIndex(ctx.text);
    for (const opt of ctx.facts.optimizers) {
      if (!opt.target) continue;
      const base = opt.target.split('.')[0];
      const wraps = ctx.facts.calls.filter(
        (c) =>
          c.function === opt.function &&
          c.statement.start > opt.statement.end &&
          !c.neverRuns &&
          // A wrap in another arm of an `if` than the optimizer never runs after it.
          !exclusive(opt.branch, c.branch) &&
          c.paths.some((p) => p[0] === base),
      );
      if (!wraps.length) continue;
      const last = wraps.reduce((a, b) =>
        (b.loopStatement ?? b.statement).end > (a.loopStatement ?? a.statement).end ? b : a,
      );
      const anchor = last.loopStatement ?? last.statement;
      const draft: Draft = {
        range: opt.range,
        summary: `Optimizer created before ${opt.target} is wrapped: it would step parameters the model no longer uses`,
        message:
          `The optimizer is created from \`${opt.paramsText}\` before \`${opt.target}\` is wrapped (line ${wraps[0]!.line}). ` +
          'Wrapping replaces the parameters, so this optimizer would step tensors the model no longer uses and keep full, ' +
          'unsharded state for them. Create it after the last wrap.',
        fixes: [],
        related: wraps.map((c) => ({
          range: c.range,
          message: 'wraps the model after the optimizer was created',
        })),
      };
      const variable = /^\s*([A-Za-z_]\w*)\s*=/.exec(
        ctx.text.slice(opt.statement.start, opt.statement.end),
      )?.[1];
      const between = ctx.text.slice(opt.statement.end, anchor.end);
      const readInBetween = variable ? new RegExp(`\\b${variable}\\b`).test(between) : true;
      if (opt.statement.indent === anchor.indent && !readInBetween) {
        draft.fixes.push({
          title: 'Move the optimizer after the last wrap',
          edits: moveLines(
            index,
            opt.statement.range,
            anchor.range.end.line,
            opt.statement.indent,
            anchor.indent,
          ),
          preferred: true,
        });
      }
      out.push(draft);
    }
    return out;
  },
};
