/** Rule FSDP009: `torch.nn.utils.clip_grad_norm_` on an FSDP1 model. */
import { UNBOUND_FALLBACKS, classifyApi } from '../../analysis/apis';
import { exclusive } from '../../analysis/facts';
import type { TrainingFact } from '../../analysis/facts';
import type { Draft, Rule } from '../types';

export const fsdp1ClipGradNorm: Rule = {
  id: 'FSDP009',
  name: 'fsdp1-clip-grad-norm',
  title: '`torch.nn.utils.clip_grad_norm_` on an FSDP1 model',
  defaultSeverity: 'warning',
  rationale: `Under FSDP1 each rank holds only its shard of every gradient, so \`torch.nn.utils.clip_grad_norm_\` computes
the norm of the local shard and every rank clips by a different, too small norm (the gradients then differ across
ranks and the clipping threshold means nothing). FSDP1's documentation says to call the root module's
\`FullyShardedDataParallel.clip_grad_norm_\`, which reduces the norm across ranks. (FSDP2's DTensor gradients make
the plain function correct.)`,
  example: {
    bad: `model = FSDP(model, auto_wrap_policy=policy)
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)`,
    good: `model = FSDP(model, auto_wrap_policy=policy)
model.clip_grad_norm_(1.0)`,
  },
  fix: 'Replaces the call with `<model>.clip_grad_norm_(<max_norm>, ...)` on the FSDP root.',
  check(ctx) {
    const roots = ctx.facts.calls.filter((c) => c.api !== 'fully_shard' && c.isRoot);
    if (!roots.length) return [];
    const out: Draft[] = [];
    for (const t of ctx.facts.training) {
      if (t.kind !== 'clip_grad_norm' || !t.qualified.startsWith('torch.nn.utils')) continue;
      if (notFsdp1Here(t) || dispatchedByVersion(t, ctx.facts.training)) continue;
      // An FSDP1 wrap in another arm of an `if` than the clip (in the same function) never runs before it.
      const reaching = roots.filter((r) => r.function !== t.function || !exclusive(r.branch, t.branch));
      if (!reaching.length) continue;
      const root =
        reaching.find((r) => r.assignedTo && (t.target === r.assignedTo || t.target === null)) ??
        reaching[0]!;
      const model = t.target ?? root.assignedTo ?? root.target;
      const rest = Object.entries(t.options)
        .filter(([k]) => k !== 'parameters')
        .map(([k, o]) => `${k}=${o.text}`);
      const positional = t.positional.slice(1);
      const args = [...positional, ...rest].join(', ');
      out.push({
        range: t.range,
        summary: `Clips ${model}'s FSDP1 shards by each rank's local norm: call ${model}.clip_grad_norm_ instead`,
        message:
          `clip_grad_norm_ over \`${model}\`'s sharded FSDP1 gradients computes each rank's local norm, so ranks clip differently ` +
          `and by the wrong norm. Call \`${model}.clip_grad_norm_(...)\` on the FSDP root instead.`,
        fixes: [
          {
            title: `Use ${model}.clip_grad_norm_`,
            edits: [{ range: t.range, newText: `${model}.clip_grad_norm_(${args})` }],
            preferred: true,
          },
        ],
      });
    }
    return out;
  },
};

/**
 * FSDP1's class, `FullyShardedDataParallel(nn.Module, _FSDPState)` (torch/distributed/fsdp/fully_sharded_data_parallel.py),
 * as imported, or unimported in a snippet.
 */
function isFsdp1Class(qualified: string): boolean {
  return (
    classifyApi(qualified)?.kind === 'FSDP' ||
    (!qualified.includes('.') && UNBOUND_FALLBACKS[qualified] === 'FSDP')
  );
}

/**
 * Classes no FSDP1 module is an instance of: FSDP2's `FSDPModule`, which `fully_shard` mixes into the class of the
 * module it wraps (`_apply_to_module(..., FSDPModule, ...)` in torch/distributed/fsdp/_fully_shard/_fully_shard.py),
 * and DDP's `DistributedDataParallel` (torch/nn/parallel/distributed.py). Neither is a base of FSDP1's class.
 */
const NOT_FSDP1 = new Set([
  'torch.distributed.fsdp.FSDPModule',
  'torch.distributed.fsdp._fully_shard.FSDPModule',
  'torch.distributed.fsdp._fully_shard._fully_shard.FSDPModule',
  'torch.distributed._composable.fsdp.FSDPModule',
  'torch.distributed._composable.fsdp.fully_shard.FSDPModule',
  'torch.nn.parallel.DistributedDataParallel',
  'torch.nn.parallel.distributed.DistributedDataParallel',
]);

/**
 * The clip runs where an `isinstance` test says its model is no FSDP1 module: `isinstance(model, FSDP)` false (an
 * `else` arm, `if not ...`, after an early return), or `isinstance(model, FSDPModule)` true.
 */
function notFsdp1Here(t: TrainingFact): boolean {
  if (!t.target) return false;
  return (t.typeTests ?? []).some(
    (test) =>
      test.subject === t.target &&
      (test.negated
        ? test.classes.some(isFsdp1Class)
        : test.classes.length > 0 && test.classes.every((c) => NOT_FSDP1.has(c))),
  );
}

/**
 * The clip is in one arm of an `if` whose other arm clips the same object with FSDP1's method,
 * `FullyShardedDataParallel.clip_grad_norm_` (torch/distributed/fsdp/fully_sharded_data_parallel.py), or an
 * object the clip's parameters do not name (`torch.nn.utils.clip_grad_norm_(parameters, ...)`): the code already
 * chooses by FSDP version (`if not self.is_fsdp2: return model.clip_grad_norm_(...)` / `else: ...`), and the plain
 * function runs where the module is not FSDP1's. A clip after such an `if`, which both arms reach, is still read.
 */
function dispatchedByVersion(t: TrainingFact, training: TrainingFact[]): boolean {
  return training.some(
    (m) =>
      m.kind === 'clip_grad_norm' &&
      !m.qualified.startsWith('torch.') &&
      m.target !== null &&
      (t.target === null || m.target === t.target) &&
      m.function === t.function &&
      exclusive(m.branch, t.branch),
  );
}
