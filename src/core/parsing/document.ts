/** A document's syntax tree kept in step with its edits, re-parsed incrementally. */
import { Edit, type PythonGrammar, type Tree } from './python';

/** One text change as editors report it: the replaced range (UTF-16 offsets and positions) and the new text. */
export interface TextChange {
  /** Offset of the replaced range in the text before the change. */
  offset: number;
  /** Length of the replaced range. */
  length: number;
  /** Start of the replaced range (0-based line, UTF-16 column). */
  start: { line: number; character: number };
  /** End of the replaced range, before the change. */
  end: { line: number; character: number };
  text: string;
}

/**
 * A document's syntax tree kept in step with its edits: each change is applied to the tree with `Tree.edit`, and
 * the next parse reuses every unchanged subtree (tree-sitter's incremental parsing).
 */
export class ParsedDocument {
  private tree: Tree | null = null;
  private edited = false;
  private parsedVersion = -1;

  constructor(readonly grammar: PythonGrammar) {}

  /** Records edits made since the last parse (in the order the editor reports them). */
  applyChanges(changes: readonly TextChange[]): void {
    if (!this.tree) return;
    for (const c of changes) {
      this.tree.edit(
        new Edit({
          startIndex: c.offset,
          oldEndIndex: c.offset + c.length,
          newEndIndex: c.offset + c.text.length,
          startPosition: { row: c.start.line, column: c.start.character },
          oldEndPosition: { row: c.end.line, column: c.end.character },
          newEndPosition: advance(c.start, c.text),
        }),
      );
    }
    this.edited = true;
  }

  /** The tree for `text` at `version`: re-parsed incrementally when edits were recorded, from scratch otherwise. */
  parse(text: string, version: number): Tree {
    if (this.tree && this.parsedVersion === version && !this.edited) return this.tree;
    const old = this.tree;
    // Without recorded edits the old tree does not describe the text's history: parse from scratch.
    const next = this.grammar.parse(text, this.edited ? old : null);
    old?.delete();
    this.tree = next;
    this.edited = false;
    this.parsedVersion = version;
    return next;
  }

  /** Forgets the tree (a full re-parse next time), e.g. when edits could not be tracked. */
  reset(): void {
    this.tree?.delete();
    this.tree = null;
    this.edited = false;
    this.parsedVersion = -1;
  }

  dispose(): void {
    this.reset();
  }
}

function advance(p: { line: number; character: number }, inserted: string): { row: number; column: number } {
  const lastNl = inserted.lastIndexOf('\n');
  if (lastNl < 0) return { row: p.line, column: p.character + inserted.length };
  let rows = 0;
  for (let i = 0; i < inserted.length; i++) if (inserted.charCodeAt(i) === 10) rows++;
  return { row: p.line + rows, column: inserted.length - lastNl - 1 };
}

/** The change that replaces `[start, oldEnd)` of `oldText` with `newText` (for tests and benchmarks). */
export function changeFor(oldText: string, start: number, oldEnd: number, newText: string): TextChange {
  return {
    offset: start,
    length: oldEnd - start,
    start: positionAt(oldText, start),
    end: positionAt(oldText, oldEnd),
    text: newText,
  };
}

function positionAt(text: string, offset: number): { line: number; character: number } {
  let line = 0;
  let lineStart = 0;
  for (let i = text.indexOf('\n'); i >= 0 && i < offset; i = text.indexOf('\n', i + 1)) {
    line++;
    lineStart = i + 1;
  }
  return { line, character: offset - lineStart };
}
