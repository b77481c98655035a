/** Rule FSDP010: The auto-wrap policy wraps no module of the model. */
import { fmtCount } from '../../vocabulary/bytes';
import type { WrapPolicyValue } from '../../analysis/wrapPolicy';
import { walk } from '../../model/tree';
import type { Draft, Rule } from '../types';

export const policyWrapsNothing: Rule = {
  id: 'FSDP010',
  name: 'wrap-policy-wraps-nothing',
  title: 'The auto-wrap policy wraps no module of the model',
  defaultSeverity: 'warning',
  readsModel: true,
  rationale: `An FSDP1 \`auto_wrap_policy\` that matches nothing leaves one unit holding the whole model: every
parameter is gathered at once for forward and for backward. It happens when \`transformer_layer_cls\` names a class
the model does not use (another architecture's decoder layer, a class imported from the wrong module), or when a
size-based threshold is larger than every module. Name the model's own block class, or lower the threshold.`,
  example: {
    bad: `policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={GPT2Block})
model = FSDP(llama, auto_wrap_policy=policy)`,
    good: `policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={LlamaDecoderLayer})
model = FSDP(llama, auto_wrap_policy=policy)`,
  },
  check(ctx) {
    const m = ctx.model;
    if (!m || m.estimate.plan.api !== 'fsdp1') return [];
    const out: Draft[] = [];
    for (const c of ctx.facts.calls) {
      const policy = c.options.auto_wrap_policy;
      const v = policy?.value as WrapPolicyValue | null | undefined;
      if (!c.isRoot || !policy || !v || typeof v !== 'object') continue;
      if (m.estimate.units.length > 1) continue;
      const classes = new Set<string>();
      for (const n of walk(m.root)) classes.add(n.className);
      let why = 'it matches no module';
      if ((v.policy === 'transformer' || v.policy === 'module') && v.classes.length) {
        const missing = v.classes.filter((x) => !classes.has(x));
        if (missing.length)
          why = `${missing.join(', ')} ${missing.length > 1 ? 'are' : 'is'} not a class of ${m.estimate.model.name}`;
      } else if (v.policy === 'size' && v.minNumParams !== null)
        why = `no module reaches min_num_params=${fmtCount(v.minNumParams)}`;
      out.push({
        range: policy.range,
        message: `This auto_wrap_policy wraps nothing: ${why}. The root unit then holds all ${fmtCount(m.estimate.model.params)} parameters and gathers them at once.`,
        fixes: [],
      });
    }
    return out;
  },
};
