/** Text helpers for building fixes from the original source: lines, offsets, indentation, applying edits. */
import type { Position, Range } from '../vocabulary/range';
import type { TextEdit } from './types';

/** Text helpers for building fixes from the original source. */
export class TextIndex {
  private readonly lineStarts: number[] = [0];

  constructor(readonly text: string) {
    for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) this.lineStarts.push(i + 1);
  }

  offsetAt(p: Position): number {
    const start = this.lineStarts[p.line] ?? this.text.length;
    return Math.min(start + p.character, this.text.length);
  }

  positionAt(offset: number): Position {
    let lo = 0;
    let hi = this.lineStarts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.lineStarts[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    return { line: lo, character: offset - this.lineStarts[lo]! };
  }

  lineText(line: number): string {
    const start = this.lineStarts[line] ?? this.text.length;
    const next = this.lineStarts[line + 1];
    return this.text.slice(start, next === undefined ? undefined : next - 1).replace(/\r$/, '');
  }

  /** End of a line's content (before `\r\n` / `\n`). */
  lineEnd(line: number): Position {
    return { line, character: this.lineText(line).length };
  }

  lineCount(): number {
    return this.lineStarts.length;
  }

  slice(r: Range): string {
    return this.text.slice(this.offsetAt(r.start), this.offsetAt(r.end));
  }

  /** The line break style of the file. */
  eol(): string {
    return this.text.includes('\r\n') ? '\r\n' : '\n';
  }

  /** Whole lines from `range.start.line` to `range.end.line`, including the final line break. */
  wholeLines(range: Range): Range {
    const end =
      range.end.line + 1 < this.lineCount()
        ? { line: range.end.line + 1, character: 0 }
        : this.lineEnd(range.end.line);
    return { start: { line: range.start.line, character: 0 }, end };
  }
}

/** Inserts `lines` (already indented) as new lines after the statement that ends on `afterLine`. */
export function insertLinesAfter(index: TextIndex, afterLine: number, lines: string[]): TextEdit {
  const eol = index.eol();
  const at = index.lineEnd(afterLine);
  return { range: { start: at, end: at }, newText: lines.map((l) => eol + l).join('') };
}

/** Moves whole lines `from` to after the line `afterLine`, re-indented to `indent`. */
export function moveLines(
  index: TextIndex,
  from: Range,
  afterLine: number,
  fromIndent: string,
  indent: string,
): TextEdit[] {
  const lines: string[] = [];
  for (let l = from.start.line; l <= from.end.line; l++) {
    const t = index.lineText(l);
    lines.push(t.startsWith(fromIndent) ? indent + t.slice(fromIndent.length) : t);
  }
  return [{ range: index.wholeLines(from), newText: '' }, insertLinesAfter(index, afterLine, lines)];
}

/** Applies non-overlapping edits to `text` (in any order). */
export function applyEdits(text: string, edits: TextEdit[]): string {
  const index = new TextIndex(text);
  const sorted = edits
    .map((e) => ({ start: index.offsetAt(e.range.start), end: index.offsetAt(e.range.end), text: e.newText }))
    .sort((a, b) => b.start - a.start || b.end - a.end);
  let out = text;
  for (const e of sorted) out = out.slice(0, e.start) + e.text + out.slice(e.end);
  return out;
}

/**
 * The 0-based line after which new imports go: the last line of the file's last top-level import statement, a
 * parenthesised one followed to its end; -1 when the file imports nothing before its code.
 */
export function lastImportLine(index: TextIndex, maxLines = 2000): number {
  let after = -1;
  let depth = 0;
  let inImport = false;
  const n = Math.min(index.lineCount(), maxLines);
  let quote: string | null = null;
  for (let line = 0; line < n; line++) {
    const t = index.lineText(line);
    // Inside a module docstring (or another top-level string) spread over lines.
    if (quote) {
      if (t.includes(quote)) quote = null;
      continue;
    }
    const opens = /^[rRbBuU]?("""|''')/.exec(t)?.[1];
    if (!inImport && opens && t.indexOf(opens, t.indexOf(opens) + 3) < 0) {
      quote = opens;
      continue;
    }
    if (!inImport) {
      if (/^(import|from)\s/.test(t)) inImport = true;
      else if (/^\S/.test(t) && !/^(#|"""|'''|if\b|try\b|except\b|else\b|elif\b|finally\b)/.test(t)) break;
      else continue;
    }
    depth += (t.match(/\(/g)?.length ?? 0) - (t.match(/\)/g)?.length ?? 0);
    if (depth <= 0 && !/\\\s*$/.test(t)) {
      inImport = false;
      depth = 0;
      after = line;
    }
  }
  return after;
}

/**
 * `line` inserted after the file's last top-level import statement (among its first 400 lines), with the file's
 * line ending; null where the file imports nothing before its code, or ends with its imports.
 */
export function importAfterImports(index: TextIndex, line: string): TextEdit | null {
  const after = lastImportLine(index, 400);
  if (after < 0 || after + 1 >= index.lineCount()) return null;
  const at = { line: after + 1, character: 0 };
  return { range: { start: at, end: at }, newText: `${line}${index.eol()}` };
}
