/**
 * Edits of whole lines (and insertions at a line's start) as a unified diff without context lines, which
 * `git apply --unidiff-zero` and `patch` take: what `fsdp-lens migrate` prints before it writes anything.
 */
import { TextIndex } from '../lint/edits';
import type { TextEdit } from '../lint/types';

export function unifiedDiff(file: string, text: string, edits: readonly TextEdit[]): string {
  const index = new TextIndex(text);
  const sorted = [...edits].sort(
    (a, b) => a.range.start.line - b.range.start.line || a.range.start.character - b.range.start.character,
  );
  const out = [`--- a/${file}`, `+++ b/${file}`];
  let shift = 0;
  for (const e of sorted) {
    const { start, end } = e.range;
    // Lines the edit removes: from its start line to the line before its end when it ends at a line's start.
    const last = end.character === 0 && end.line > start.line ? end.line - 1 : end.line;
    const removed =
      start.line === end.line && start.character === end.character
        ? []
        : range(start.line, last).map((l) => index.lineText(l));
    const added = e.newText.replace(/\r?\n$/, '').split(/\r?\n/);
    if (e.newText === '') added.length = 0;
    const oldStart = removed.length ? start.line + 1 : start.line;
    const newStart = (added.length ? start.line + 1 : start.line) + shift;
    out.push(`@@ -${oldStart},${removed.length} +${newStart},${added.length} @@`);
    for (const l of removed) out.push(`-${l}`);
    for (const l of added) out.push(`+${l}`);
    shift += added.length - removed.length;
  }
  return `${out.join('\n')}\n`;
}

function range(a: number, b: number): number[] {
  const out: number[] = [];
  for (let i = a; i <= b; i++) out.push(i);
  return out;
}
