/** Rule FSDP019: FSDP2 gradient sync turned off and never turned back on before the optimizer steps. */
import type { Draft, Rule } from '../types';

/** Calls that may turn gradient sync back on through a helper (`enable_grad_sync(model)`): the rule stays quiet. */
const SYNC_HELPER = /\b\w*(?:enable|restore|resume)\w*sync\w*\s*\(|\b\w*grad\w*_sync\w*\s*\(/i;

export const gradientSyncNeverRestored: Rule = {
  id: 'FSDP019',
  name: 'gradient-sync-never-restored',
  title: 'Gradient sync turned off with set_requires_gradient_sync(False) and never turned back on',
  defaultSeverity: 'warning',
  rationale: `\`set_requires_gradient_sync(False)\` is how FSDP2 accumulates gradients without communication: while it
is off, each unit's post-backward keeps the unsharded gradient and returns before the reduce-scatter
(\`FSDPParamGroup.post_backward\` returns early when \`reduce_grads\` is false, after
\`to_accumulated_grad_if_needed\`). The sharded parameters get a gradient only from that reduce-scatter, so if sync is
never turned back on, \`optimizer.step()\` finds no gradient on any sharded parameter and updates nothing, while the
full-size unsharded gradients stay on every GPU. Turn it on for the last micro-batch of each step
(\`model.set_requires_gradient_sync(is_last_micro_batch)\`).`,
  example: {
    bad: `for i, batch in enumerate(loader):
    model.set_requires_gradient_sync(False)
    model(batch).sum().backward()
    if (i + 1) % accum == 0:
        opt.step()
        opt.zero_grad()`,
    good: `for i, batch in enumerate(loader):
    model.set_requires_gradient_sync((i + 1) % accum == 0)
    model(batch).sum().backward()
    if (i + 1) % accum == 0:
        opt.step()
        opt.zero_grad()`,
  },
  check(ctx) {
    const calls = ctx.facts.training.filter((t) => t.kind === 'requires_gradient_sync' && !t.runsWhen?.off);
    const value = (t: (typeof calls)[number]) =>
      (t.options.requires_gradient_sync?.text ?? t.positional[0] ?? '').trim();
    // Any call that may pass True (a literal, a name, an expression) can restore it: only all-False is a finding.
    if (!calls.length || calls.some((t) => value(t) !== 'False')) return [];
    const first = calls[0]!;
    // The optimizer steps after it in this file, and nothing here looks like a helper that syncs again.
    const lines = ctx.text.split('\n');
    const after = lines.slice(first.range.start.line).join('\n');
    if (!/\.step\(\s*\)/.test(after) || SYNC_HELPER.test(ctx.text.replace(/set_requires_gradient_sync/g, '')))
      return [];
    const out: Draft[] = [];
    for (const t of calls)
      out.push({
        range: t.range,
        summary:
          'Gradient sync turned off and never back on: no reduce-scatter runs, the optimizer updates nothing',
        message:
          `\`${t.target ?? 'the model'}.set_requires_gradient_sync(False)\` turns gradient sync off, and nothing in this file turns it back on: ` +
          'FSDP2 then never reduce-scatters, the sharded parameters get no gradient and optimizer.step() updates nothing. ' +
          'Pass True for the last micro-batch of each step.',
        fixes: [],
      });
    return out;
  },
};
