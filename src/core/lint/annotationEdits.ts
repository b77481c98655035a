/**
 * The edit that sets one `# fsdp: key=value` annotation of a Python file (the editor's "choose what to estimate"
 * writes `plan=` and `args=` this way): the pair replaced where a comment has it, else a comment of its own at
 * the top of the file, after a shebang and an encoding line. Reads the text only (no parser: the extension host
 * runs it); the user applies the edit.
 */
import { applyEdits, TextIndex } from './edits';
import { annotationPairAt } from '../vocabulary/annotations';
import type { TextEdit } from './types';

/** How far down a file an existing annotation is looked for (they sit near the top). */
const MAX_LINES = 2000;

/** `value` as an annotation writes it: quoted when it holds spaces or is empty. */
export function annotationValue(value: string): string {
  if (value !== '' && !/[\s"']/.test(value)) return value;
  return value.includes('"') ? `'${value}'` : `"${value}"`;
}

/** The edit that makes `key` mean `value` (null: removes the pair). */
export function setAnnotation(text: string, key: string, value: string | null): TextEdit | null {
  const index = new TextIndex(text);
  const lines = Math.min(index.lineCount(), MAX_LINES);
  for (let line = 0; line < lines; line++) {
    const lineText = index.lineText(line);
    const at = /#\s*fsdp:/.exec(lineText);
    if (!at) continue;
    const body = lineText.slice(at.index + at[0].length);
    // The pair itself, quoted value and all: `key=value`, `key="a b"`.
    const pair = annotationPairAt(body, key);
    if (!pair) continue;
    const start = at.index + at[0].length + pair.start;
    const end = at.index + at[0].length + pair.end;
    if (value !== null)
      return {
        range: { start: { line, character: start }, end: { line, character: end } },
        newText: `${key}=${annotationValue(value)}`,
      };
    // Removing the last pair of a comment that holds only annotations removes the line.
    const rest = (lineText.slice(0, start) + lineText.slice(end)).replace(/#\s*fsdp:\s*$/, '');
    if (!rest.trim())
      return {
        range: { start: { line, character: 0 }, end: { line: line + 1, character: 0 } },
        newText: '',
      };
    return {
      range: { start: { line, character: start }, end: { line, character: end } },
      newText: '',
    };
  }
  if (value === null) return null;
  // Below a shebang and a PEP 263 encoding line, which must stay first.
  let line = 0;
  if (index.lineText(0).startsWith('#!')) line++;
  if (/^[ \t\f]*#.*?coding[:=]/.test(index.lineText(line))) line++;
  const eol = text.includes('\r\n') ? '\r\n' : '\n';
  if (line >= index.lineCount()) {
    // Nothing after the shebang, not even a line break.
    const end = index.lineEnd(index.lineCount() - 1);
    return { range: { start: end, end }, newText: `${eol}# fsdp: ${key}=${annotationValue(value)}${eol}` };
  }
  return {
    range: { start: { line, character: 0 }, end: { line, character: 0 } },
    newText: `# fsdp: ${key}=${annotationValue(value)}${eol}`,
  };
}

/**
 * The text with each `key=value` pair set in turn (the panel's "Apply to file" writes a what-if this way), and the
 * one edit from the old text to the new: the lines between the first and the last change.
 */
export function setAnnotations(text: string, pairs: readonly [string, string][]): TextEdit | null {
  let out = text;
  for (const [key, value] of pairs) {
    const edit = setAnnotation(out, key, value);
    if (edit) out = applyEdits(out, [edit]);
  }
  if (out === text) return null;
  // The common head and tail of the two texts, cut at line starts: one edit over the lines that changed.
  let head = 0;
  while (head < text.length && head < out.length && text[head] === out[head]) head++;
  head = head > 0 ? text.lastIndexOf('\n', head - 1) + 1 : 0;
  let tail = 0;
  while (
    tail < text.length - head &&
    tail < out.length - head &&
    text[text.length - 1 - tail] === out[out.length - 1 - tail]
  )
    tail++;
  const index = new TextIndex(text);
  return {
    range: { start: index.positionAt(head), end: index.positionAt(text.length - tail) },
    newText: out.slice(head, out.length - tail),
  };
}
