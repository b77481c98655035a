/** Rule FSDP002: The model is wrapped before its blocks. */
import { exclusive } from '../../analysis/facts';
import { moveLines, TextIndex } from '../edits';
import type { Draft, Rule } from '../types';

export const rootBeforeChildren: Rule = {
  id: 'FSDP002',
  name: 'root-wrapped-before-children',
  title: 'The model is wrapped before its blocks',
  defaultSeverity: 'error',
  rationale: `FSDP assigns each parameter to the first wrap that covers it, so \`fully_shard\` must be called bottom-up.
Wrapping the model first makes the root own **every** parameter, blocks included (one unit whose full weights are
gathered for the whole forward and backward), and the later \`fully_shard(block)\` then fails: its parameters are
already sharded DTensors, and PyTorch raises a confusing error from \`DeviceMesh\` (a \`TypeError\` or "Cannot
concatenate overlapping meshes"). Wrap the blocks first, then the model.`,
  example: {
    bad: `fully_shard(model)
for layer in model.layers:
    fully_shard(layer)`,
    good: `for layer in model.layers:
    fully_shard(layer)
fully_shard(model)`,
  },
  fix: 'Moves the root wrap after the last block wrap, when both are statements of the same block.',
  check(ctx) {
    const out: Draft[] = [];
    const index = new TextIndex(ctx.text);
    const calls = ctx.facts.calls;
    for (const root of calls) {
      if (!root.isRoot) continue;
      // Block wraps in another arm of an `if` (or below an arm that returns) never run after this root wrap.
      const later = root.children
        .map((i) => calls[i]!)
        .filter(
          (c) =>
            c.function === root.function &&
            c.statement.start > root.statement.end &&
            !exclusive(root.branch, c.branch),
        );
      if (!later.length) continue;
      const last = later.reduce((a, b) =>
        (b.loopStatement ?? b.statement).end > (a.loopStatement ?? a.statement).end ? b : a,
      );
      const anchor = last.loopStatement ?? last.statement;
      const draft: Draft = {
        range: root.range,
        summary: `${root.target} is wrapped before its blocks: the block wraps after it fail at run time`,
        message:
          `\`${root.target}\` is wrapped before its blocks (line ${later[0]!.line}): the root claims every parameter, blocks ` +
          'included, and the later block wraps fail at run time (their parameters are already sharded). Wrap the blocks first, then the root.',
        fixes: [],
        related: later.map((c) => ({ range: c.range, message: 'block wrapped after the root' })),
      };
      // Safe to move when the root wrap is a plain statement at the same level as the statement it must follow.
      if (root.statement.indent === anchor.indent && !root.assignedTo) {
        draft.fixes.push({
          title: `Move the wrap of ${root.target} after its blocks`,
          edits: moveLines(
            index,
            root.statement.range,
            anchor.range.end.line,
            root.statement.indent,
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
