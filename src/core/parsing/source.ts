import { compiledQuery, type Node, type QueryMatch, type Tree } from './python';
import type { QueryName } from './queries';

/** A position in a document: 0-based line and UTF-16 column, as VS Code counts them. */
export interface Position {
  line: number;
  character: number;
}

export interface Range {
  start: Position;
  end: Position;
}

export function rangeOf(node: Node): Range {
  return {
    start: { line: node.startPosition.row, character: node.startPosition.column },
    end: { line: node.endPosition.row, character: node.endPosition.column },
  };
}

const IDENT_CHAR = /[A-Za-z0-9_]/;

/**
 * A parsed Python file. The scan locates candidates by searching the text for the few names it cares about and
 * then reads the tree around each hit, so its cost follows the number of hits rather than the size of the file.
 */
export class SourceFile {
  constructor(
    readonly path: string,
    readonly text: string,
    readonly tree: Tree,
  ) {}

  get root(): Node {
    return this.tree.rootNode;
  }

  /** Offsets of `word` as a whole identifier in `[from, to)`, skipping comments and strings by tree check later. */
  wordOffsets(word: string, from = 0, to = this.text.length): number[] {
    const out: number[] = [];
    const t = this.text;
    let i = t.indexOf(word, from);
    while (i >= 0 && i < to) {
      const before = i > 0 ? t[i - 1]! : ' ';
      const after = t[i + word.length] ?? ' ';
      if (!IDENT_CHAR.test(before) && !IDENT_CHAR.test(after)) out.push(i);
      i = t.indexOf(word, i + word.length);
    }
    return out;
  }

  /** The identifier node at `offset` (null inside comments and strings). */
  identifierAt(offset: number): Node | null {
    const n = this.root.descendantForIndex(offset, offset + 1);
    return n && n.type === 'identifier' && n.startIndex === offset ? n : null;
  }

  /** Identifier nodes of `word` in `[from, to)`. */
  identifiers(word: string, from = 0, to = this.text.length): Node[] {
    const out: Node[] = [];
    for (const off of this.wordOffsets(word, from, to)) {
      const n = this.identifierAt(off);
      if (n) out.push(n);
    }
    return out;
  }

  /** Matches of a declarative query within `node` (callers keep the ones at the depth they mean). */
  matches(name: QueryName, node: Node): QueryMatch[] {
    return compiledQuery(this.tree.language, name).matches(node, {
      startIndex: node.startIndex,
      endIndex: node.endIndex,
    });
  }

  /** 1-based line of a node, as people and compilers print it. */
  line(node: Node): number {
    return node.startPosition.row + 1;
  }

  /** The whitespace that starts the line holding `node`. */
  indentOf(node: Node): string {
    const lineStart = this.text.lastIndexOf('\n', node.startIndex - 1) + 1;
    let end = lineStart;
    while (end < this.text.length && (this.text[end] === ' ' || this.text[end] === '\t')) end++;
    return this.text.slice(lineStart, end);
  }
}
