/** Rule FSDP015: The estimated peak does not fit the target GPU. */
import { article, atLeast, shortGpu, wholeNodesText } from '../../vocabulary/words';
import { fmtBytes, fmtCount } from '../../vocabulary/bytes';
import { requiredBytes } from '../../estimator/fit';
import { certainPeakBytes } from '../../estimator/estimate';
import { setAnnotation } from '../annotationEdits';
import { importAfterImports, TextIndex } from '../edits';
import { configInputEdit } from '../configEdits';
import { offloadEdit } from '../planEdits';
import { inputSpec } from '../../inputs/table';
import { formatOf } from '../../frameworks/configDoc';
import type { Draft, Fix, RuleContext, TextEdit } from '../types';
import type { Position, Range } from '../../vocabulary/range';
import type { Rule } from '../types';
import type { Estimate } from '../../estimator/types';

export const peakDoesNotFit: Rule = {
  id: 'FSDP015',
  name: 'peak-does-not-fit',
  title: 'The estimated peak does not fit the target GPU',
  defaultSeverity: 'warning',
  readsModel: true,
  rationale: `The estimate of the step's peak (sharded state, the gathered units, activations, gradient buffers and
the logits at the loss), plus the caching allocator's reserve and the CUDA context, is more than the target GPU's
memory: the run stops with \`torch.OutOfMemoryError\` in its first step. The finding gives the numbers and the
smallest world size that fits; the footprint panel compares the cheaper changes (activation checkpointing, a
smaller micro-batch). Its quick fixes change the code, each titled with the estimate it leads to: activation
checkpointing enabled where a Transformers model is made (\`model.gradient_checkpointing_enable()\`), for a model
of the project's own classes under FSDP2 as \`apply_activation_checkpointing(model, check_fn=lambda m:
isinstance(m, Block))\` before \`fully_shard\` (with its import), under FSDP1 the same call after the root
\`FullyShardedDataParallel\` wrap (as PyTorch's FSDP tutorials place it), each with the checkpoint wrapper the file
already names (a non-reentrant \`partial(checkpoint_wrapper, ...)\` as \`checkpoint_wrapper_fn\`), or at the
framework configuration's own key (Accelerate's \`fsdp_activation_checkpointing\`, torchtune's
\`enable_activation_checkpointing\`, axolotl's \`gradient_checkpointing\`, llm-foundry's
\`fsdp_config.activation_checkpointing\`, torchtitan's \`[activation_checkpoint] mode\`, an argument file's
\`gradient_checkpointing\`); units kept gathered after forward resharded (\`reshard_after_forward=False\` written \`True\`, FSDP1's
\`SHARD_GRAD_OP\` written \`FULL_SHARD\`); CPU offload on every wrap (FSDP2 \`offload_policy=CPUOffloadPolicy()\`, FSDP1
\`cpu_offload=CPUOffload(offload_params=True)\`), whose title says the step slows, since the estimate does not time
the host copies and the optimizer step on the CPU; the largest halved micro-batch, a halved sequence and the fewest GPUs
that fit, written where the job
takes them from (a configuration's own key, such as torchtune's \`batch_size\` or Accelerate's
\`num_processes\`), or as the file's \`# fsdp:\` annotation when the value is a default. No fix writes a value
that something above the file (an annotation, a flag, a setting, another file) decides. The target GPU, world
size, batch and sequence come from the \`# fsdp:\` annotation,
\`pyproject.toml\`, launch files or settings; when the estimate uses a default the user did not choose, say what
the job really uses there.`,
  example: {
    bad: `# fsdp: model=meta-llama/Llama-3.1-70B world_size=8 gpu=h100-sxm-80gb checkpointing=full
for layer in model.model.layers:
    fully_shard(layer)
fully_shard(model)  # 70B of fp32 state is 141 GB per GPU on 8 GPUs`,
    good: `# fsdp: model=meta-llama/Llama-3.1-70B world_size=32 gpu=h100-sxm-80gb checkpointing=full
for layer in model.model.layers:
    fully_shard(layer)
fully_shard(model)`,
  },
  check(ctx) {
    const e = ctx.model?.estimate;
    if (!e || !e.timeline) return [];
    const fit = e.targetFit;
    // Short is short whatever parts of the model were not counted; an undecided fit is no finding.
    if (!fit || fit.verdict !== 'short') return [];
    // On the plan that was estimated: a root wrap the defaults or the arguments keep off is another plan's.
    const onPath = ctx.facts.calls.filter((c) => !c.offByDefault && !c.neverRuns);
    const roots = onPath.filter((c) => c.isRoot);
    const at = roots[roots.length - 1] ?? onPath[onPath.length - 1] ?? ctx.framework;
    if (!at) return [];
    const b = (n: number) => fmtBytes(n);
    const min = ctx.model?.minGpus?.();
    const smallest =
      min && min.worldSize !== null
        ? ` The smallest world size that fits is ${min.worldSize} GPUs${wholeNodesText(min, ' (')}${min.wholeNodes ? ')' : ''}.`
        : min?.undecided
          ? e.overcounted.length
            ? ''
            : ` The smallest world size is ${min.reason}.`
          : min?.reason
            ? ` No world size fits: ${min.reason}.`
            : '';
    // A count of GPUs nothing in the project gives is the default's: said, so the finding is read as conditional.
    const ws = e.assumptions.find((a) => a.key === 'worldSize');
    const gpus = `${e.mesh.worldSize} GPUs${ws?.source.kind === 'default' ? ', a default: nothing in the project says how many;' : ','}`;
    // Figures above what the job keeps: the finding stands on what is held besides what is overcounted.
    const certain = e.overcounted.length
      ? ` ${e.perGpu.pagedOptimizerBytes ? 'Parts are' : 'The activations are'} counted above what the job keeps (${e.overcounted.join('; ')}), but the rest alone needs ${b(requiredBytes(certainPeakBytes(e), e.fitReserve))}.`
      : '';
    return [
      {
        range: at.range,
        // The verdict first, where the Problems view shows it; the figures after, in the full message.
        summary:
          `Does not fit ${e.mesh.worldSize} x ${shortGpu(e.gpu.name)}: needs ${atLeast(e.gaps.length > 0)}${b(requiredBytes(e.perGpu.peakBytes, e.fitReserve))} per GPU of ${b(fit.memoryBytes)}` +
          (min && min.worldSize !== null ? `; ${min.worldSize} GPUs fit` : ''),
        message:
          `Does not fit ${article(e.gpu.name)} (${gpus} micro-batch ${e.setup.microBatch}, sequence ${e.setup.seqLen}): ` +
          `the estimated peak ${atLeast(e.gaps.length > 0)}${b(e.perGpu.peakBytes)} per GPU needs ${b(requiredBytes(e.perGpu.peakBytes, e.fitReserve))} with the allocator's ` +
          `reserve and the CUDA context, ${b(-fit.headroomBytes)} more than its ${b(fit.memoryBytes)} (${fmtCount(e.gpu.memoryMiB)} MiB).${certain}${smallest}`,
        fixes: fitFixes(ctx, e, min && min.worldSize !== null ? min.worldSize : null),
      } satisfies Draft,
    ];
  },
};

/** How many halvings of the micro-batch or the sequence a fix tries. */
const MAX_HALVINGS = 4;

/** What a change gives, for a fix's title: `fits, needs 45.7 of 85.5 GB per GPU`. */
function preview(after: Estimate | undefined): string | null {
  if (!after?.targetFit) return null;
  const f = after.targetFit;
  const needs = `needs ${fmtBytes(f.memoryBytes - f.headroomBytes)} of ${fmtBytes(f.memoryBytes)} per GPU`;
  return f.verdict === 'fits' ? `fits, ${needs}` : f.verdict === 'short' ? `still short, ${needs}` : null;
}

/**
 * The changes to the code that make a plan fit, each titled with its new estimate: activation checkpointing
 * enabled where a Transformers model is made (`gradient_checkpointing_enable()`, which checkpoints every decoder
 * layer, as `PreTrainedModel.gradient_checkpointing_enable` sets on each `GradientCheckpointingLayer`), and the
 * world size that fits as the file's `# fsdp: world_size` when nothing else in the project gives it.
 */
function fitFixes(ctx: RuleContext, e: Estimate, fewest: number | null): Fix[] {
  const fixes: Fix[] = [];
  const whatIf = ctx.model?.whatIf;
  // What an annotation, a flag or a setting says of checkpointing stands over the code: an edit would not change it.
  const said = e.assumptions.find((a) => a.key === 'checkpointing')?.source.kind;
  const decidedAbove = said === 'annotation' || said === 'flag' || said === 'setting';
  if (e.setup.checkpointing !== 'full' && whatIf) {
    const fix = configCheckpointingFix(ctx, e) ?? (decidedAbove ? null : codeCheckpointingFix(ctx, e));
    if (fix) fixes.push(fix);
  }
  const reshard = whatIf ? reshardFix(ctx) : null;
  if (reshard) fixes.push(reshard);
  // A smaller micro-batch, then a shorter sequence (it changes what the job trains on: offered after), that fits:
  // the largest of half, a quarter, ... of the current one, a few halvings at most (each try is a full estimate,
  // and the rules run on every edit).
  const halvings = (input: 'microBatch' | 'seqLen', from: number, floor: number, label: string) => {
    for (
      let v = Math.floor(from / 2), n = 0;
      v >= floor && whatIf && n < MAX_HALVINGS;
      v = Math.floor(v / 2), n++
    ) {
      const fix = inputFix(ctx, e, input, v, `${label} ${v}`);
      if (fix !== undefined) return fix;
    }
    return null;
  };
  const smaller = halvings('microBatch', e.setup.microBatch, 1, 'Micro-batch');
  if (smaller) fixes.push(smaller);
  const shorter = halvings('seqLen', e.setup.seqLen, 128, 'Sequence');
  if (shorter) fixes.push(shorter);
  const offload = whatIf ? offloadFix(ctx, e) : null;
  if (offload) fixes.push(offload);
  if (fewest !== null && whatIf) {
    const fix = inputFix(ctx, e, 'worldSize', fewest, `${fewest} GPUs, the fewest that fit`);
    if (fix) fixes.push(fix);
  }
  return fixes;
}

/**
 * Activation checkpointing turned on in the framework's own configuration file, at its key (`fsdp_config:
 * fsdp_activation_checkpointing: true`, torchtune's `enable_activation_checkpointing: True`, torchtitan's
 * `[activation_checkpoint] mode = "full"`...), when this file is that configuration and nothing above it decides
 * checkpointing (`configInputEdit`).
 */
function configCheckpointingFix(ctx: RuleContext, e: Estimate): Fix | null {
  const fw = ctx.framework;
  const shown = preview(ctx.model?.whatIf?.({ checkpointing: 'full' }));
  const cfg =
    fw && shown
      ? configInputEdit(fw, ctx.facts.path, ctx.text, e.assumptions, 'checkpointing', 'full')
      : null;
  return cfg
    ? {
        title: `Enable activation checkpointing: ${cfg.written} (${shown})`,
        edits: [cfg.edit],
        preferred: true,
      }
    : null;
}

/**
 * An input set to a value that makes the plan fit, where the job takes it from: the framework configuration's key
 * when this file is that configuration (`configInputEdit`), else the file's `# fsdp:` annotation when the value is a
 * default or an annotation's (a JSON file has no comments). Undefined when the value does not fit (the caller may
 * try another), null when it fits but no edit says it here.
 */
function inputFix(
  ctx: RuleContext,
  e: Estimate,
  input: 'microBatch' | 'seqLen' | 'worldSize',
  value: number,
  label: string,
): Fix | null | undefined {
  const after = ctx.model?.whatIf?.({ [input]: value });
  if (after?.targetFit?.verdict !== 'fits') return undefined;
  const shown = preview(after)!;
  const cfg = ctx.framework
    ? configInputEdit(ctx.framework, ctx.facts.path, ctx.text, e.assumptions, input, value)
    : null;
  if (cfg) return { title: `${label}: ${cfg.written} (${shown})`, edits: [cfg.edit] };
  const kind = e.assumptions.find((a) => a.key === input)?.source.kind;
  // The alias the file's annotation already writes (`seq_len=`, `seq=`), so the edit replaces it.
  const keys = inputSpec(input).keys ?? [];
  const key = keys.find((k) => ctx.facts.annotations.some((a) => a.values[k] !== undefined)) ?? keys[0];
  if (!key || (kind !== 'default' && kind !== 'annotation') || formatOf(ctx.facts.path) === 'json')
    return null;
  const edit = setAnnotation(ctx.text, key, String(value));
  return edit
    ? {
        title: `${input === 'worldSize' ? 'Estimate on ' : ''}${label}: # fsdp: ${key}=${value} (${shown})`,
        edits: [edit],
      }
    : null;
}

/** The line after a `name = ...` statement that ends where the call `range` does, and the statement's indent. */
function afterStatement(
  ctx: RuleContext,
  name: string,
  range: Range,
): { at: Position; indent: string; last: boolean } | null {
  const index = new TextIndex(ctx.text);
  const first = index.lineText(range.start.line);
  // An assignment statement of its own line, `model = X(...)` and nothing after the call on its last line.
  const statement = name ? new RegExp(`^(\\s*)${name}\\s*=`).exec(first) : null;
  const endLine = index.lineText(range.end.line);
  // The statement ends where the call does: nothing but a comment after it, no bracket left open before it
  // (`model = (X.from_pretrained(n)` continues on the next line), no line continuation.
  const span = ctx.text.slice(
    index.offsetAt({ line: range.start.line, character: 0 }),
    index.offsetAt(range.end),
  );
  const open = (span.match(/[([{]/g)?.length ?? 0) - (span.match(/[)\]}]/g)?.length ?? 0);
  const ends =
    open === 0 && /^\s*(#.*)?$/.test(endLine.slice(range.end.character)) && !/\\\s*$/.test(endLine);
  if (!statement || !ends) return null;
  const last = range.end.line + 1 >= index.lineCount();
  // After the statement's line: at the next line's start, or at the end of a last line without a break.
  const at = last
    ? { line: range.end.line, character: endLine.length }
    : { line: range.end.line + 1, character: 0 };
  return { at, indent: statement[1]!, last };
}

/** Lines inserted at `place` (after a statement), as one edit. */
function insertAfter(
  ctx: RuleContext,
  place: { at: Position; indent: string; last: boolean },
  lines: string[],
): TextEdit {
  const eol = ctx.text.includes('\r\n') ? '\r\n' : '\n';
  const body = lines.map((l) => place.indent + l);
  return {
    range: { start: place.at, end: place.at },
    newText: place.last ? body.map((l) => eol + l).join('') : body.map((l) => l + eol).join(''),
  };
}

/**
 * Activation checkpointing of every block in the form the code builds its model with:
 *  - a Transformers model (`from_pretrained` / `from_config`): `model.gradient_checkpointing_enable()` after it,
 *    which checkpoints every decoder layer (`PreTrainedModel.gradient_checkpointing_enable` sets it on each
 *    `GradientCheckpointingLayer`);
 *  - a model of the project's own classes under FSDP2: `apply_activation_checkpointing(model, check_fn=lambda m:
 *    isinstance(m, Block))` after it is built and before `fully_shard`, torchtitan's order (`apply_ac` before
 *    `apply_fsdp`): each block becomes a `CheckpointWrapper` (NO_REENTRANT, the default of `checkpoint_wrapper`)
 *    that `fully_shard` then wraps. Only where the block class is a name of this file (defined or imported), the
 *    root wrap is of the built model and nothing in the file checkpoints yet.
 */
function codeCheckpointingFix(ctx: RuleContext, e: Estimate): Fix | null {
  const shown = preview(ctx.model?.whatIf?.({ checkpointing: 'full' }));
  if (!shown) return null;
  const hf = ctx.facts.models.find(
    (m) =>
      m.variable &&
      /^transformers\./.test(m.qualified) &&
      /\.(from_pretrained|from_config)$/.test(m.qualified),
  );
  if (hf) {
    const name = hf.variable!.replace(/[^\w]/g, '');
    const place = afterStatement(ctx, name, hf.range);
    if (!place) return null;
    return {
      title: `Enable activation checkpointing: ${name}.gradient_checkpointing_enable() (${shown})`,
      edits: [insertAfter(ctx, place, [`${name}.gradient_checkpointing_enable()`])],
      preferred: true,
    };
  }
  if (e.plan.api === 'none' || ctx.facts.checkpointing.length) return null;
  const onPath = ctx.facts.calls.filter((c) => !c.offByDefault && !c.neverRuns);
  // The block class: the one class of the plan's per-block units.
  const classes = new Set(
    e.units.filter((u) => !u.isRoot && u.classNames.length === 1).map((u) => u.classNames[0]!),
  );
  const block = classes.size === 1 ? [...classes][0]! : null;
  if (!block || !/^[A-Za-z_]\w*$/.test(block)) return null;
  const index = new TextIndex(ctx.text);
  const known = new RegExp(`^(class\\s+${block}\\b|(from\\s+\\S+\\s+)?import\\b.*\\b${block}\\b)`, 'm');
  if (!known.test(ctx.text)) return null;
  // FSDP2: after the model is built and before any wrap (torchtitan's `apply_ac` before `apply_fsdp`). FSDP1: after
  // the root wrap, as PyTorch's FSDP tutorials apply it: `apply_activation_checkpointing` replaces each block inside
  // its FSDP unit (`_recursive_wrap` reaches it through `_fsdp_wrapped_module`) with a `CheckpointWrapper`.
  let name: string;
  let place: ReturnType<typeof afterStatement>;
  if (e.plan.api === 'fsdp2') {
    const root = onPath.find((c) => c.isRoot);
    const built = ctx.facts.models.find((m) => m.variable && m.variable === root?.target);
    if (!built) return null;
    // Before any wrap: the model's statement must come before the first wrap call.
    const firstWrap = Math.min(...onPath.map((c) => c.range.start.line));
    if (built.range.end.line >= firstWrap) return null;
    name = built.variable!;
    place = afterStatement(ctx, name, built.range);
  } else {
    // The last wrap, assigned to a name: the model everything else uses (`model = FSDP(model, ...)`).
    const root = onPath[onPath.length - 1];
    if (!root || root.api !== 'FSDP' || !root.assignedTo || !/^[A-Za-z_][\w.]*$/.test(root.assignedTo))
      return null;
    name = root.assignedTo;
    place = afterStatement(ctx, name.replace(/\./g, '\\.'), root.range);
  }
  if (!place) return null;
  const wrapper = checkpointWrapperOf(ctx.text);
  const call = `apply_activation_checkpointing(${name}${wrapper ? `, checkpoint_wrapper_fn=${wrapper}` : ''}, check_fn=lambda m: isinstance(m, ${block}))`;
  const edits: TextEdit[] = [insertAfter(ctx, place, [call])];
  if (!/\bapply_activation_checkpointing\b/.test(ctx.text)) {
    const imp = importAfterImports(
      index,
      'from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing',
    );
    if (!imp) return null;
    edits.push(imp);
  }
  return { title: `Enable activation checkpointing: ${call} (${shown})`, edits, preferred: true };
}

/**
 * The checkpoint wrapper the file already names, for the fix to write in its words: a module-level
 * `name = partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)` (the FSDP tutorials'
 * `non_reentrant_wrapper`), else `checkpoint_wrapper` itself when the file imports it. A partial of the reentrant
 * implementation is not taken: the fix's preview is of the default, non-reentrant one (`checkpoint_wrapper`'s
 * `checkpoint_impl=CheckpointImpl.NO_REENTRANT`).
 */
function checkpointWrapperOf(text: string): string | null {
  const partial =
    /^([A-Za-z_]\w*)\s*=\s*(?:functools\.)?partial\(\s*checkpoint_wrapper\s*,\s*checkpoint_impl\s*=\s*CheckpointImpl\.NO_REENTRANT\s*,?\s*\)/m.exec(
      text,
    );
  if (partial) return partial[1]!;
  // Imported by its own name, on one line or in a parenthesised list.
  for (const m of text.matchAll(/^\s*from\s+\S+\s+import\s*(\([^)]*\)|[^\n]*)/gm))
    if (/\bcheckpoint_wrapper\b(?!\s+as\b)/.test(m[1]!)) return 'checkpoint_wrapper';
  return null;
}

/**
 * Units kept gathered from forward to backward resharded instead, where the code says so inline: FSDP2's
 * `reshard_after_forward=False` written `True`, FSDP1's `ShardingStrategy.SHARD_GRAD_OP` (and
 * `_HYBRID_SHARD_ZERO2`) written `FULL_SHARD` (`HYBRID_SHARD`). Each unit then frees its gathered parameters after
 * its forward and gathers them again in backward (`FSDPParamGroup.post_forward` reshards), as the what-if's
 * FULL_SHARD re-estimates: offered only when every such wrap can be edited and the plan then fits.
 */
function reshardFix(ctx: RuleContext): Fix | null {
  const onPath = ctx.facts.calls.filter((c) => !c.offByDefault && !c.neverRuns && !c.incomplete);
  const edits: TextEdit[] = [];
  let written = '';
  for (const c of onPath) {
    const r = c.options.reshard_after_forward;
    const s = c.options.sharding_strategy;
    // An int (a 1/k slice kept) or a value not read stays as it is: the preview would not be this edit's.
    if (r && r.value !== false && r.value !== true) return null;
    if (r && r.value === false) {
      if (r.via || r.text.trim() !== 'False') return null;
      edits.push({ range: r.range, newText: 'True' });
      written = 'reshard_after_forward=True';
    } else if (s && (s.value === 'SHARD_GRAD_OP' || s.value === '_HYBRID_SHARD_ZERO2')) {
      const to = s.value === 'SHARD_GRAD_OP' ? 'FULL_SHARD' : 'HYBRID_SHARD';
      if (s.via || !s.text.endsWith(String(s.value))) return null;
      edits.push({
        range: {
          start: { line: s.range.end.line, character: s.range.end.character - String(s.value).length },
          end: s.range.end,
        },
        newText: to,
      });
      written = `ShardingStrategy.${to}`;
    }
  }
  if (!edits.length) return null;
  const after = ctx.model?.whatIf?.(
    written.startsWith('reshard')
      ? { reshardAll: true }
      : { strategy: written.startsWith('ShardingStrategy.HYBRID') ? 'HYBRID_SHARD' : 'FULL_SHARD' },
  );
  if (after?.targetFit?.verdict !== 'fits') return null;
  return { title: `Reshard after forward: ${written} (${preview(after)})`, edits };
}

/**
 * CPU offload on every unit, written on each wrap (`offloadEdit`): the sharded parameters, their gradients and the
 * optimizer state move to host memory. Offered after the cheaper changes, when the plan then fits; its title says
 * what the step pays for it, which the estimate does not time.
 */
function offloadFix(ctx: RuleContext, e: Estimate): Fix | null {
  if (e.units.some((u) => u.offload)) return null;
  const after = ctx.model?.whatIf?.({ offload: true });
  if (after?.targetFit?.verdict !== 'fits') return null;
  const edit = offloadEdit(ctx.facts.calls, ctx.text, e.plan.api);
  return edit
    ? {
        title: `Offload to CPU: ${edit.written} (${preview(after)}; slower steps: copies over PCIe, optimizer on the CPU)`,
        edits: edit.edits,
      }
    : null;
}
