/** Rule FSDP013: Tied parameters fall in different units. */
import { walk } from '../../model/tree';
import type { Draft, Rule } from '../types';
import { callOfUnit, unitOfModule } from './model-shared';

export const tiedSplit: Rule = {
  id: 'FSDP013',
  name: 'tied-parameters-split',
  title: 'Tied parameters fall in different units',
  defaultSeverity: 'warning',
  readsModel: true,
  rationale: `A tied parameter (an output head sharing the embedding's weight) is one tensor used by two modules.
FSDP gives it to the first unit that reaches it; if the other module is in a different unit, that unit's forward
uses a parameter it does not gather. Recent PyTorch rejects it ("shared with a parameter already managed by another
FSDP group"); older releases fail or compute with a sharded tensor. Keep both modules in one unit (usually the
root, or one \`fully_shard([model.embed, model.head])\`).`,
  example: {
    bad: `fully_shard(model.transformer.wte)  # tied to lm_head
fully_shard(model)`,
    good: 'fully_shard([model.transformer.wte, model.lm_head])',
  },
  check(ctx) {
    const m = ctx.model;
    if (!m) return [];
    const out: Draft[] = [];
    for (const mod of walk(m.root)) {
      for (const p of mod.params) {
        if (!p.tiedTo) continue;
        const owner = p.tiedTo.slice(0, p.tiedTo.lastIndexOf('.'));
        const a = unitOfModule(m.estimate, owner);
        const b = unitOfModule(m.estimate, mod.path);
        if (!a || !b || a === b) continue;
        const call = callOfUnit(ctx.facts.calls, a.isRoot ? b : a) ?? ctx.facts.calls.find((c) => c.isRoot);
        if (!call) continue;
        out.push({
          range: call.range,
          summary: `Tied weights split over two units: ${mod.path}.${p.name} and ${p.tiedTo}`,
          message: `${mod.path}.${p.name} is tied to ${p.tiedTo}, but they are in different units (${b.name} and ${a.name}): one unit would use a parameter the other shards. Put both modules in one unit.`,
          fixes: [],
        });
      }
    }
    return out;
  },
};
