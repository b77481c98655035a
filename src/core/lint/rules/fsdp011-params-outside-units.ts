/** Rule FSDP011: Parameters are left outside every FSDP unit. */
import { fmtCount } from '../../vocabulary/bytes';
import type { Draft, Rule } from '../types';

export const paramsOutsideUnits: Rule = {
  id: 'FSDP011',
  name: 'parameters-outside-units',
  title: 'Parameters are left outside every FSDP unit',
  defaultSeverity: 'warning',
  readsModel: true,
  rationale: `Parameters that no \`fully_shard\` call reaches are neither sharded nor managed by FSDP: each GPU keeps
them whole, with whole gradients and optimizer state, and FSDP never reduces their gradients across ranks. It
happens when the outermost wrap is below the model itself (\`fully_shard(model.model)\` leaves a causal LM's
\`lm_head\` out). Wrap the object that owns everything.`,
  example: {
    bad: `for layer in model.model.layers:
    fully_shard(layer)
fully_shard(model.model)  # lm_head stays outside`,
    good: `for layer in model.model.layers:
    fully_shard(layer)
fully_shard(model)`,
  },
  check(ctx) {
    const e = ctx.model?.estimate;
    if (!e || e.unowned.params === 0) return [];
    const roots = ctx.facts.calls.filter((c) => c.isRoot);
    if (!roots.length) return []; // no root at all: FSDP001 says so
    const root = roots[roots.length - 1]!;
    return [
      {
        range: root.range,
        summary: `${fmtCount(e.unowned.params)} parameters in no FSDP unit: replicated on every GPU, their gradients never reduced`,
        message:
          `${fmtCount(e.unowned.params)} parameters (${e.unowned.modules.slice(0, 3).join(', ')}${e.unowned.modules.length > 3 ? ', …' : ''}) ` +
          'are in no FSDP unit: every GPU keeps them whole with their gradients and optimizer state, and their gradients are never reduced across ranks. Wrap the whole model.',
        fixes: [],
      } satisfies Draft,
    ];
  },
};
