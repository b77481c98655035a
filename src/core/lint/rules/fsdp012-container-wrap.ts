/** Rule FSDP012: `fully_shard` on a ModuleList or ModuleDict. */
import type { Draft, Rule } from '../types';
import { callOfUnit } from './model-shared';

export const containerWrap: Rule = {
  id: 'FSDP012',
  name: 'fully-shard-on-container',
  title: '`fully_shard` on a ModuleList or ModuleDict',
  defaultSeverity: 'error',
  readsModel: true,
  rationale: `\`nn.ModuleList\` and \`nn.ModuleDict\` have no \`forward\`: FSDP2 hooks a unit's all-gather and reshard
on its module's forward, so \`fully_shard(model.layers)\` raises \`ValueError: fully_shard does not support
containers that do not implement forward\`. Wrap each block in the container, or pass them as a list
(\`fully_shard([model.layers[0], model.layers[1]])\`) to make them one unit.`,
  example: {
    bad: 'fully_shard(model.layers)',
    good: `for block in model.layers:
    fully_shard(block)`,
  },
  check(ctx) {
    const m = ctx.model;
    if (!m || m.estimate.plan.api !== 'fsdp2') return [];
    const out: Draft[] = [];
    for (const u of m.estimate.units) {
      if (u.modules.length !== 1 || !u.classNames.some((c) => c === 'ModuleList' || c === 'ModuleDict'))
        continue;
      const call = callOfUnit(ctx.facts.calls, u);
      if (!call || call.targets.length !== 1) continue;
      out.push({
        range: call.range,
        message: `\`${call.target}\` is a ${u.classNames[0]}, which has no forward: fully_shard raises ValueError at run time. Wrap each of its blocks instead.`,
        fixes: [],
      });
    }
    return out;
  },
};
