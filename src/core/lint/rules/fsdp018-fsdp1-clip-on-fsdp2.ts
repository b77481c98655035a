/** Rule FSDP018: FSDP1's `model.clip_grad_norm_()` method called on a module that FSDP2 wrapped. */
import { classifyApi } from '../../analysis/apis';
import { exclusive } from '../../analysis/facts';
import type { Draft, Rule } from '../types';

export const fsdp1ClipOnFsdp2: Rule = {
  id: 'FSDP018',
  name: 'fsdp1-clip-on-fsdp2',
  title: "FSDP1's clip_grad_norm_ method called on an FSDP2 module",
  defaultSeverity: 'error',
  rationale: `\`clip_grad_norm_\` as a method belongs to FSDP1's \`FullyShardedDataParallel\`. \`fully_shard\` (FSDP2) keeps
the module's own class and mixes in \`FSDPModule\` (\`_apply_to_module(..., FSDPModule, ...)\` in
torch/distributed/fsdp/_fully_shard/_fully_shard.py), which has no such method: the call raises \`AttributeError\`
at the first step. FSDP2's gradients are DTensors, so \`torch.nn.utils.clip_grad_norm_(model.parameters(), ...)\`
computes the norm over every rank's shard (PyTorch's own FSDP2 tests clip this way).`,
  example: {
    bad: `for block in model.layers:
    fully_shard(block)
fully_shard(model)
...
model.clip_grad_norm_(1.0)`,
    good: `for block in model.layers:
    fully_shard(block)
fully_shard(model)
...
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)`,
  },
  fix: 'Rewrites the call as `torch.nn.utils.clip_grad_norm_(<model>.parameters(), ...)` when the file imports `torch`.',
  check(ctx) {
    const calls = ctx.facts.calls;
    // A file that also wraps with FSDP1 may clip an FSDP1 module: no finding there.
    if (!calls.length || calls.some((c) => c.api !== 'fully_shard')) return [];
    // The model's own class may define the method.
    if (/\bdef\s+clip_grad_norm_\s*\(/.test(ctx.text)) return [];
    const torch = ctx.facts.imports.find((i) => i.qualified === 'torch' && i.topLevel)?.local;
    const out: Draft[] = [];
    for (const t of ctx.facts.training) {
      if (t.kind !== 'clip_grad_norm' || t.qualified.startsWith('torch.') || !t.target) continue;
      // Inside `if isinstance(model, FSDP):` the module is FSDP1's, whatever else the file does.
      if ((t.typeTests ?? []).some((x) => x.subject === t.target && !x.negated && x.classes.some(isFsdp1)))
        continue;
      const root = calls.find(
        (c) =>
          c.isRoot &&
          !c.incomplete &&
          !c.neverRuns &&
          (c.assignedTo === t.target || c.target === t.target) &&
          (c.function !== t.function || !exclusive(c.branch, t.branch)),
      );
      if (!root) continue;
      const rest = Object.entries(t.options).map(([k, o]) => `${k}=${o.text}`);
      const args = [`${t.target}.parameters()`, ...t.positional, ...rest].join(', ');
      out.push({
        range: t.range,
        summary: `${t.target}.clip_grad_norm_ raises AttributeError: an FSDP2 module has no such method`,
        message:
          `\`${t.target}\` is an FSDP2 module (fully_shard at line ${root.line}), which has no clip_grad_norm_ method (that is FSDP1's): ` +
          `this call raises AttributeError. Clip with torch.nn.utils.clip_grad_norm_(${t.target}.parameters(), ...), which FSDP2's DTensor gradients make global.`,
        fixes: torch
          ? [
              {
                title: `Use ${torch}.nn.utils.clip_grad_norm_`,
                edits: [{ range: t.range, newText: `${torch}.nn.utils.clip_grad_norm_(${args})` }],
                preferred: true,
              },
            ]
          : [],
      });
    }
    return out;
  },
};

function isFsdp1(qualified: string): boolean {
  return (
    classifyApi(qualified)?.kind === 'FSDP' ||
    qualified === 'FSDP' ||
    qualified === 'FullyShardedDataParallel'
  );
}
