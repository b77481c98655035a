/** Rule FSDP021: an FSDP1 unit holding frozen and trainable parameters without `use_orig_params=True`. */
import { fmtCount } from '../../vocabulary/bytes';
import type { Draft, Rule } from '../types';

export const frozenAndTrainableFlatParam: Rule = {
  id: 'FSDP021',
  name: 'frozen-and-trainable-flat-param',
  title: 'An FSDP1 unit holds frozen and trainable parameters without use_orig_params=True',
  defaultSeverity: 'error',
  readsModel: true,
  rationale: `FSDP1 flattens each unit's parameters into one \`FlatParameter\`, which has one \`requires_grad\`.
Unless \`use_orig_params=True\`, a unit whose parameters disagree (LoRA adapters inside frozen layers, a frozen
embedding wrapped with trainable blocks) fails when FSDP is constructed: \`FlatParamHandle\` raises "Must flatten
tensors with uniform \`requires_grad\` when \`use_orig_params=False\`". With \`use_orig_params=True\`, FSDP1 keeps
the original parameters as views and accepts the mix (frozen ones simply get no gradient).`,
  example: {
    bad: `model = get_peft_model(model, LoraConfig(r=16, target_modules=["q_proj", "v_proj"]))
model = FSDP(model, auto_wrap_policy=policy)`,
    good: `model = get_peft_model(model, LoraConfig(r=16, target_modules=["q_proj", "v_proj"]))
model = FSDP(model, auto_wrap_policy=policy, use_orig_params=True)`,
  },
  fix: 'Adds `use_orig_params=True` to the FSDP call.',
  check(ctx) {
    const m = ctx.model;
    if (!m || m.estimate.plan.api !== 'fsdp1') return [];
    const mixed = m.estimate.units.filter((u) => u.trainableParams > 0 && u.trainableParams < u.params);
    if (!mixed.length) return [];
    const out: Draft[] = [];
    for (const c of ctx.facts.calls) {
      if (c.api !== 'FSDP' || !c.isRoot || c.incomplete || c.neverRuns || c.offByDefault) continue;
      const opt = c.options.use_orig_params;
      // Passed and not known to be False (a variable, a config value): it may well be True.
      if (opt && opt.value !== false) continue;
      if (c.unresolvedSplats.length) continue;
      const u = mixed[0]!;
      out.push({
        range: c.calleeRange,
        summary: `${u.name} mixes frozen and trainable parameters: FSDP1 raises without use_orig_params=True`,
        message:
          `${u.name} holds ${fmtCount(u.trainableParams)} trainable and ${fmtCount(u.params - u.trainableParams)} frozen parameters` +
          `${mixed.length > 1 ? ` (and ${mixed.length - 1} more unit${mixed.length > 2 ? 's' : ''} like it)` : ''}: ` +
          'FSDP1 flattens a unit into one FlatParameter and raises "Must flatten tensors with uniform requires_grad when use_orig_params=False". Pass use_orig_params=True.',
        fixes:
          !opt && c.argumentsEnd
            ? [
                {
                  title: 'Add use_orig_params=True',
                  edits: [
                    {
                      range: { start: c.argumentsEnd, end: c.argumentsEnd },
                      newText: ', use_orig_params=True',
                    },
                  ],
                  preferred: true,
                },
              ]
            : opt?.value === false
              ? [
                  {
                    title: 'Set use_orig_params=True',
                    edits: [{ range: opt.range, newText: 'True' }],
                    preferred: true,
                  },
                ]
              : [],
      });
    }
    return out;
  },
};
