/** Rule FSDP020: activation checkpointing whose `check_fn` admits no module of the model. */
import { checkFnClasses } from '../../analysis/checkFn';
import { walk } from '../../model/tree';
import type { Draft, Rule } from '../types';

export const checkpointingMatchesNothing: Rule = {
  id: 'FSDP020',
  name: 'checkpointing-matches-nothing',
  title: "Activation checkpointing's check_fn admits no module of the model",
  defaultSeverity: 'warning',
  readsModel: true,
  rationale: `\`apply_activation_checkpointing(model, check_fn=...)\` wraps only the modules for which \`check_fn\`
returns True (it walks \`model.named_modules()\` through \`_recursive_wrap\` with a lambda policy built from
\`check_fn\`). A \`check_fn\` that tests for a class the model does not have (another architecture's block, a class
imported from the wrong module) wraps nothing and raises nothing: every activation is kept for backward, and the
run needs the memory checkpointing was meant to save. Test for the model's own block class.`,
  example: {
    bad: `apply_activation_checkpointing(
    llama, checkpoint_wrapper_fn=checkpoint_wrapper, check_fn=lambda m: isinstance(m, GPT2Block)
)`,
    good: `apply_activation_checkpointing(
    llama, checkpoint_wrapper_fn=checkpoint_wrapper, check_fn=lambda m: isinstance(m, LlamaDecoderLayer)
)`,
  },
  check(ctx) {
    const m = ctx.model;
    if (!m) return [];
    const present = new Set([...walk(m.root)].map((n) => n.className));
    const out: Draft[] = [];
    for (const ac of ctx.facts.checkpointing) {
      const fn = ac.options.check_fn;
      const admitted = ac.api === 'apply_activation_checkpointing' && fn ? checkFnClasses(fn.text) : null;
      if (!admitted || admitted.some((c) => present.has(c))) continue;
      // The class a ModuleList of the model repeats: its block.
      const list = [...walk(m.root)].find(
        (n) =>
          n.className === 'ModuleList' &&
          n.children.length > 1 &&
          n.children.every((c) => c.className === n.children[0]!.className),
      );
      const block = list?.children[0]?.className;
      out.push({
        range: fn!.range,
        summary: `check_fn matches no module of ${m.root.className}: nothing is checkpointed`,
        message:
          `check_fn admits only ${admitted.join(', ')}, which ${m.root.className} does not have: activation checkpointing wraps no module and every activation is kept for backward.` +
          (block ? ` Test for its block class, ${block}.` : ''),
        fixes: [],
      });
    }
    return out;
  },
};
