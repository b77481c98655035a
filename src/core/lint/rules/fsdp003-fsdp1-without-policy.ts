/** Rule FSDP003: FSDP1 wraps a model of repeated blocks as one unit. */
import { ARCHITECTURES, catalogConfig } from '../../model/catalog';
import type { FileFacts, WrapCall } from '../../analysis/facts';
import { insertLinesAfter, TextIndex } from '../edits';
import type { Draft, Fix, Rule } from '../types';

export const fsdp1WithoutPolicy: Rule = {
  id: 'FSDP003',
  name: 'fsdp1-without-auto-wrap-policy',
  title: 'FSDP1 wraps a model of repeated blocks as one unit',
  defaultSeverity: 'warning',
  rationale: `\`FullyShardedDataParallel(model)\` with no \`auto_wrap_policy\` (and no inner wraps) makes one unit of the
whole model: all of its parameters are gathered together before forward and again before backward, so the peak
holds the full unsharded model (in the all-gather dtype) on every GPU, next to the sharded state. Sharding then
saves persistent memory but nothing at the peak, and no all-gather overlaps with compute. Wrap each transformer
block as its own unit with \`transformer_auto_wrap_policy\`.`,
  example: {
    bad: 'model = FSDP(model, mixed_precision=bf16)',
    good: `policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={LlamaDecoderLayer})
model = FSDP(model, auto_wrap_policy=policy, mixed_precision=bf16)`,
  },
  fix: 'Adds `auto_wrap_policy=functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})` with its imports, when the block class is known.',
  check(ctx) {
    const out: Draft[] = [];
    const index = new TextIndex(ctx.text);
    for (const c of ctx.facts.calls) {
      if (c.api !== 'FSDP' || !c.isRoot || c.children.length || c.enableWrap || c.unresolvedSplats.length)
        continue;
      if (c.options.auto_wrap_policy && c.options.auto_wrap_policy.text !== 'None') continue;
      const block = blockClass(ctx.facts, c);
      if (!block) continue;
      const draft: Draft = {
        range: c.range,
        summary: `One unit for all of ${c.target}: no auto_wrap_policy, so the whole model is gathered at once`,
        message:
          `FSDP wraps \`${c.target}\` as a single unit: without an auto_wrap_policy every ${block.name} is gathered together with the ` +
          'rest of the model, so the peak holds the whole unsharded model on every GPU and nothing is saved at the peak. ' +
          `Add auto_wrap_policy=functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={${block.name}}).`,
        fixes: [],
      };
      const fix = policyFix(ctx.facts, index, c, block);
      if (fix) draft.fixes.push(fix);
      out.push(draft);
    }
    return out;
  },
};

interface BlockClass {
  name: string;
  /** Module to import it from, when it is not defined or imported in the file already. */
  module?: string;
}

/** The repeated block of the wrapped model, when the scan knows it (a catalog model, or a ModuleList in the file). */
function blockClass(facts: FileFacts, c: WrapCall): BlockClass | undefined {
  const variable = c.paths[0]?.[0];
  const model = facts.models.find((m) => m.variable === variable);
  if (!model) return undefined;
  const entry = model.pretrained ? catalogConfig(model.pretrained) : undefined;
  const arch = entry?.config.model_type ? ARCHITECTURES[entry.config.model_type] : undefined;
  if (arch) return { name: arch.block, module: arch.module };
  // A model class of this file whose blocks sit in a ModuleList: the repeated class.
  const local = model.pretrained ? undefined : facts.blockClasses[0];
  return local ? { name: local } : undefined;
}

function policyFix(facts: FileFacts, index: TextIndex, c: WrapCall, block: BlockClass): Fix | undefined {
  const target = c.targetRange;
  if (!target) return undefined;
  const edits: Fix['edits'] = [
    {
      range: { start: target.end, end: target.end },
      newText: `, auto_wrap_policy=functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={${block.name}})`,
    },
  ];
  // Imports, after the last top-level import of the file (or at the top).
  const imported = new Set(facts.imports.map((i) => i.local));
  const lines: string[] = [];
  if (!imported.has('functools')) lines.push('import functools');
  if (!imported.has('transformer_auto_wrap_policy'))
    lines.push('from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy');
  if (block.module && !imported.has(block.name) && !facts.blockClasses.includes(block.name))
    lines.push(`from ${block.module} import ${block.name}`);
  if (lines.length) {
    const top = facts.imports.filter((i) => i.topLevel);
    const last = top.length ? Math.max(...top.map((i) => i.endLine)) : 0;
    if (last > 0) edits.push(insertLinesAfter(index, last - 1, lines));
    else
      edits.push({
        range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } },
        newText: lines.join(index.eol()) + index.eol(),
      });
  }
  return {
    title: `Wrap every ${block.name} as a unit (transformer_auto_wrap_policy)`,
    edits,
    preferred: true,
  };
}
