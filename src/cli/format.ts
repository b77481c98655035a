/** The scan of a file as a person reads it in a terminal. */
import type { FileFacts } from '../core/analysis/facts';
import { describeCall } from '../core/analysis/describe';

/** The scan of one file as a person reads it in a terminal. */
export function formatScanText(f: FileFacts): string {
  const lines: string[] = [f.path];
  if (!f.calls.length) lines.push('  no FSDP wrap calls found');
  for (const c of f.calls) {
    lines.push(
      `  ${String(c.line).padStart(4)}  ${c.api === 'fully_shard' ? 'fully_shard' : c.api}(${c.target})`,
    );
    lines.push(`        ${describeCall(c)}`);
    if (c.loop) lines.push(`        in loop: for ${c.loop.target} in ${c.loop.iterable}`);
    if (c.conditions.length) lines.push(`        when: ${c.conditions.join(' and ')}`);
  }
  for (const m of f.meshes)
    lines.push(
      `  ${String(m.line).padStart(4)}  mesh ${m.name ?? ''} ${m.shapeText}${m.dimNames ? ` (${m.dimNames.join(', ')})` : ''}`,
    );
  for (const o of f.optimizers)
    lines.push(`  ${String(o.line).padStart(4)}  optimizer ${o.name}(${o.paramsText})`);
  for (const m of f.models)
    lines.push(
      `  ${String(m.line).padStart(4)}  model ${m.variable ?? ''} = ${m.callee}${m.pretrained ? `("${m.pretrained}")` : '(...)'}${m.meta ? ' on meta' : ''}`,
    );
  for (const c of f.checkpointing)
    lines.push(`  ${String(c.line).padStart(4)}  activation checkpointing: ${c.api}`);
  for (const p of f.problems)
    lines.push(`  ${p.line ? String(p.line).padStart(4) : '    '}  note: ${p.message}`);
  return lines.join('\n') + '\n';
}
