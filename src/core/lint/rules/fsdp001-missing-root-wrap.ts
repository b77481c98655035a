/** Rule FSDP001: Blocks are wrapped but the model itself is not. */
import type { WrapCall } from '../../analysis/facts';
import { iterableBase } from '../../analysis/describe';
import { insertLinesAfter, TextIndex } from '../edits';
import type { Draft, Rule } from '../types';
import { callOptionsText, rootExpression, unitCallsWithoutRoot } from './shared';

export const missingRootWrap: Rule = {
  id: 'FSDP001',
  name: 'missing-root-wrap',
  title: 'Blocks are wrapped but the model itself is not',
  defaultSeverity: 'error',
  rationale: `Every \`fully_shard\` (or FSDP1 wrap) applied to a block makes that block an FSDP unit, but only a wrap of the
model itself makes a **root** that owns the parameters outside the blocks and coordinates the units. Without it:

- each wrapped block becomes its own root, which FSDP keeps gathered from its forward to its backward, so the
  blocks' full weights pile up instead of one or two at a time;
- the parameters outside every block (token embeddings, final norm, output head) stay **replicated** on every GPU,
  with full gradients and optimizer state on each, and their gradients are **never reduced across ranks**: every
  rank updates its own copy from its own data, and the replicas silently diverge.

Wrap the model after its blocks, with the same options.`,
  example: {
    bad: `for layer in model.layers:
    fully_shard(layer, mp_policy=mp)
optimizer = torch.optim.AdamW(model.parameters())`,
    good: `for layer in model.layers:
    fully_shard(layer, mp_policy=mp)
fully_shard(model, mp_policy=mp)
optimizer = torch.optim.AdamW(model.parameters())`,
  },
  fix: "Inserts `fully_shard(<model>, <the blocks' options>)` (or `model = FSDP(model, ...)` for FSDP1) after the loop, at its indentation.",
  check(ctx) {
    const out: Draft[] = [];
    const index = new TextIndex(ctx.text);
    for (const group of unitCallsWithoutRoot(ctx.facts)) {
      const first = group.calls[0]!;
      const root = rootExpression(group.base);
      const where = first.loop ? `of \`${iterableBase(first.loop.iterable)}\`` : `\`${first.target}\``;
      const message =
        `Blocks ${where} are wrapped with ${first.api === 'fully_shard' ? 'fully_shard' : 'FSDP'} but \`${root}\` itself never is. ` +
        'Each wrapped block becomes its own root and stays gathered from forward to backward, and the parameters ' +
        'outside every block (embeddings, final norm, head) stay replicated on every GPU with their gradients never ' +
        `reduced across ranks, so the replicas silently diverge. Wrap \`${root}\` after its blocks.`;
      const draft: Draft = {
        range: first.range,
        message,
        summary: `No root wrap: ${root} is never wrapped, only its blocks; its other parameters stay replicated`,
        fixes: [],
        related: group.calls
          .slice(1)
          .map((c) => ({ range: c.range, message: `also wraps a part of ${root}` })),
      };
      const fix = rootWrapFix(index, group.calls, root);
      if (fix) draft.fixes.push(fix);
      out.push(draft);
    }
    return out;
  },
};

function rootWrapFix(index: TextIndex, calls: WrapCall[], root: string): Draft['fixes'][number] | null {
  // After the last statement that wraps a block (the outermost loop around it, if any), at that statement's indentation.
  const last = calls.reduce((a, b) =>
    (b.loopStatement ?? b.statement).end > (a.loopStatement ?? a.statement).end ? b : a,
  );
  const anchor = last.loopStatement ?? last.statement;
  // Options computed from the loop's variables (`mesh=meshes[i]`) mean nothing after the loop: left out.
  const loopNames = new Set(last.loops.flatMap((l) => l.target.match(/[A-Za-z_]\w*/g) ?? []));
  const perBlock = Object.entries(last.options)
    .filter(([, o]) => !o.via && (o.text.match(/[A-Za-z_]\w*/g) ?? []).some((w) => loopNames.has(w)))
    .map(([name]) => name);
  // A wrap made through a method (`layer.apply_fsdp(mesh)`) was written in the method: its options and callee name
  // the method's own variables, so the root wrap repeats neither.
  const viaMethod = !!last.via;
  const options = viaMethod
    ? []
    : callOptionsText(last, ['reshard_after_forward', 'auto_wrap_policy', ...perBlock]);
  const args = [root, ...options].join(', ');
  const callee = viaMethod ? (last.api === 'fully_shard' ? 'fully_shard' : null) : last.callee;
  if (!callee) return null;
  const line =
    last.api === 'fully_shard'
      ? `${anchor.indent}${callee}(${args})`
      : `${anchor.indent}${root} = ${callee}(${args})`;
  return {
    title:
      `Wrap ${root} as the root: ${line.trim()}` +
      (perBlock.length ? ` (${perBlock.join(', ')} left out: set per block in the loop)` : ''),
    edits: [insertLinesAfter(index, anchor.range.end.line, [line])],
    preferred: true,
  };
}
