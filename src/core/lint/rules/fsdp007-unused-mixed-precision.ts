/** Rule FSDP007: A mixed-precision policy is built but never passed. */
import type { Draft, Rule } from '../types';

export const unusedMixedPrecision: Rule = {
  id: 'FSDP007',
  name: 'mixed-precision-not-passed',
  title: 'A mixed-precision policy is built but never passed',
  defaultSeverity: 'warning',
  rationale: `A \`MixedPrecisionPolicy\` (FSDP2) or \`MixedPrecision\` (FSDP1) does nothing until it is passed to
\`fully_shard(..., mp_policy=...)\` or \`FSDP(..., mixed_precision=...)\`. Without it, parameters are gathered and
gradients reduced in the model's own dtype (fp32 for most training setups): twice the all-gather and reduce-scatter
traffic of bf16 and twice the memory for every gathered unit, while the code reads as if bf16 were in use.`,
  example: {
    bad: `mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16)
for layer in model.layers:
    fully_shard(layer)
fully_shard(model)`,
    good: `mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16)
for layer in model.layers:
    fully_shard(layer, mp_policy=mp)
fully_shard(model, mp_policy=mp)`,
  },
  fix: 'Passes the policy to every wrap call of the file that sets no mixed precision.',
  check(ctx) {
    const out: Draft[] = [];
    if (!ctx.facts.calls.length) return out;
    for (const mp of ctx.facts.mixedPrecision) {
      if (mp.used || !mp.variable) continue;
      const option = mp.api === 'MixedPrecisionPolicy' ? 'mp_policy' : 'mixed_precision';
      const api = mp.api === 'MixedPrecisionPolicy' ? 'fully_shard' : 'FSDP';
      // Calls of the matching generation that set no mixed precision, below the policy, in reach of its name.
      const targets = ctx.facts.calls.filter(
        (c) =>
          (c.api === 'fully_shard') === (api === 'fully_shard') &&
          !c.options[option] &&
          !c.unresolvedSplats.length &&
          c.argumentsEnd &&
          c.line > mp.line &&
          !c.incomplete,
      );
      out.push({
        range: mp.range,
        summary: `${mp.variable} is never passed to ${api}: no mixed precision, traffic and gathers in the model dtype`,
        message:
          `\`${mp.variable}\` is never passed to ${api}(..., ${option}=${mp.variable}), so it has no effect: parameters are ` +
          'gathered and gradients reduced in the model dtype (fp32 unless cast), doubling traffic and gathered memory against bf16.',
        fixes: targets.length
          ? [
              {
                title: `Pass ${option}=${mp.variable} to ${targets.length} wrap call${targets.length > 1 ? 's' : ''}`,
                edits: targets.map((c) => ({
                  range: { start: c.argumentsEnd!, end: c.argumentsEnd! },
                  newText: `, ${option}=${mp.variable}`,
                })),
                preferred: true,
              },
            ]
          : [],
      });
    }
    return out;
  },
};
