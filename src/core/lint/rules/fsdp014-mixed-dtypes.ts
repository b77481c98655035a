/** Rule FSDP014: One unit mixes parameter dtypes. */
import type { Draft, Rule } from '../types';
import { callOfUnit } from './model-shared';

export const mixedDtypes: Rule = {
  id: 'FSDP014',
  name: 'unit-mixes-dtypes',
  title: 'One unit mixes parameter dtypes',
  defaultSeverity: 'error',
  readsModel: true,
  rationale: `FSDP2 keeps one flat all-gather and one reduce-scatter per unit, so all trainable parameters of a
unit must share their original dtype: PyTorch asserts "FSDP expects uniform original parameter dtype". A module cast
to bf16 inside an fp32 model (or the reverse), wrapped in the same unit as the rest, fails at the first forward.
Cast the whole model, or give the odd module its own \`fully_shard\`.`,
  example: {
    bad: `model.lm_head.to(torch.bfloat16)
fully_shard(model)`,
    good: `model.to(torch.bfloat16)
fully_shard(model)`,
  },
  check(ctx) {
    const m = ctx.model;
    if (!m || m.estimate.plan.api !== 'fsdp2') return [];
    const out: Draft[] = [];
    for (const u of m.estimate.units) {
      if (u.trainableDtypes.length < 2) continue;
      const call = callOfUnit(ctx.facts.calls, u);
      if (!call) continue;
      out.push({
        range: call.range,
        summary: `${u.name} mixes ${u.trainableDtypes.join(' and ')} trainable parameters: FSDP2 raises at the first forward`,
        message: `${u.name} mixes trainable parameters of ${u.trainableDtypes.join(' and ')}: FSDP2 requires one original dtype per unit and raises at the first forward. Cast the whole model, or wrap the odd module on its own.`,
        fixes: [],
      });
    }
    return out;
  },
};
