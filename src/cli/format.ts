/** The scan of a file as a person reads it in a terminal. */
import * as path from 'node:path';
import type { FileFacts, WrapCall } from '../core/analysis/facts';
import type { UnfollowedHelper } from '../core/resolve/helpers';
import { describeCall } from '../core/analysis/describe';
import { count, oneLine } from '../core/vocabulary/words';

/** The scan of one file as a person reads it in a terminal. */
/** The wraps a file makes through helpers of its project, and the helpers found but not planned. */
export interface ThroughHelpers {
  calls: WrapCall[];
  notes: string[];
  unfollowed?: UnfollowedHelper[];
}

export function formatScanText(f: FileFacts & { throughHelpers?: ThroughHelpers }): string {
  const lines: string[] = [f.path];
  // Frameworks that configure FSDP themselves: their constructors are the plan where no wrap call is written.
  const configuring = f.frameworkCalls.filter((c) => c.kind !== 'Accelerator' && c.kind !== 'TrlTrainer');
  const helpers = f.throughHelpers;
  const viaHelpers = () => {
    for (const c of helpers?.calls ?? []) {
      const target = c.paths.map((p) => p.join('.')).join(', ');
      lines.push(
        `  ${String(c.range.start.line + 1).padStart(4)}  ${c.api === 'fully_shard' ? 'fully_shard' : c.api}(${target})`,
      );
      lines.push(`        ${describeCall(c)} · written at ${path.basename(c.file)}:${c.line}`);
      if (c.conditions.length)
        lines.push(`        when: ${c.conditions.map((x) => oneLine(x)).join(' and ')}`);
    }
  };
  if (!f.calls.length && helpers?.calls.length) {
    lines.push(
      `  no FSDP wrap calls written here; ${count(helpers.calls.length, 'wrap')} made through helpers:`,
    );
    viaHelpers();
  } else if (!f.calls.length)
    lines.push(
      configuring.length
        ? '  no FSDP wrap calls written here; FSDP is configured by the framework calls below (fsdp-lens estimate reads their plan)'
        : helpers?.unfollowed?.length
          ? '  no FSDP wrap calls written here; helpers it calls wrap:'
          : '  no FSDP wrap calls found',
    );
  // Helpers whose wraps are found but not planned: what they wrap, and why the plan does not take it.
  for (const u of helpers?.unfollowed ?? []) {
    lines.push(
      `  ${String(u.line).padStart(4)}  ${u.helper} in ${u.where} wraps, not estimated: ${u.reason}`,
    );
    for (const w of u.wraps.slice(0, 8))
      lines.push(
        `          ${path.basename(u.where.replace(/ \(installed\)$/, ''))}:${w.line}  ${w.api === 'fully_shard' ? 'fully_shard' : w.api}(${w.target})`,
      );
    if (u.wraps.length > 8) lines.push(`          … and ${u.wraps.length - 8} more`);
  }
  for (const n of helpers?.notes ?? [])
    if (
      /not followed/.test(n) &&
      !helpers?.unfollowed?.some((u) => n.includes(`(line ${u.line}) is not followed`))
    )
      lines.push(`        note: ${n}`);
  for (const c of f.calls) {
    lines.push(
      `  ${String(c.line).padStart(4)}  ${c.api === 'fully_shard' ? 'fully_shard' : c.api}(${c.target})`,
    );
    lines.push(`        ${describeCall(c)}`);
    if (c.loop) lines.push(`        in loop: for ${c.loop.target} in ${c.loop.iterable}`);
    if (c.conditions.length) lines.push(`        when: ${c.conditions.map((x) => oneLine(x)).join(' and ')}`);
  }
  if (f.calls.length && helpers?.calls.length) {
    lines.push(`  and ${count(helpers.calls.length, 'wrap')} made through helpers:`);
    viaHelpers();
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
  for (const c of configuring) {
    const keys = Object.keys(c.kwargs).filter((k) =>
      /fsdp|strategy|wrap|shard|offload|precision|devices|num_nodes/i.test(k),
    );
    lines.push(
      `  ${String(c.line).padStart(4)}  ${c.callee.slice(c.callee.lastIndexOf('.') + 1)}(...)${keys.length ? ` · ${keys.join(', ')}` : ''}`,
    );
  }
  for (const c of f.checkpointing)
    lines.push(`  ${String(c.line).padStart(4)}  activation checkpointing: ${c.api}`);
  for (const n of f.methodNotes) lines.push(`        note: ${n}`);
  for (const p of f.problems)
    lines.push(`  ${p.line ? String(p.line).padStart(4) : '    '}  note: ${p.message}`);
  return lines.join('\n') + '\n';
}
