/** A parsed Python file: its text, tree and the word search the scan locates candidates with. */
import type { Range } from '../vocabulary/range';
import { compiledQuery, type Node, type QueryMatch, type Tree } from './python';
import type { QueryName } from './queries';

export function rangeOf(node: Node): Range {
  return {
    start: { line: node.startPosition.row, character: node.startPosition.column },
    end: { line: node.endPosition.row, character: node.endPosition.column },
  };
}

const WORD_PATTERNS = new Map<string, RegExp>();

/** The first index of the sorted `xs` whose value is >= `x`. */
function lowerBound(xs: number[], x: number): number {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** A-Z, a-z, 0-9 and _ (NaN, before the start or past the end, is not). */
function isIdentChar(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 95;
}

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

  private readonly memos = new Map<string, unknown>();

  /** A value derived from this version of the file, computed once (the file is immutable). */
  memo<T>(key: string, compute: () => T): T {
    if (this.memos.has(key)) return this.memos.get(key) as T;
    const v = compute();
    this.memos.set(key, v);
    return v;
  }

  /** Offsets of each word searched so far, over the whole text (a scan asks for the same names many times). */
  private readonly offsets = new Map<string, number[]>();

  /**
   * Finds every whole-identifier occurrence of many words in one pass over the text (one regular expression
   * instead of a search per word), filling the cache `wordOffsets` reads.
   */
  prefetchWords(words: Iterable<string>): void {
    const wanted = [...new Set(words)].filter((w) => /^\w+$/.test(w) && !this.offsets.has(w));
    if (!wanted.length) return;
    const lists = new Map<string, number[]>(wanted.map((w) => [w, []]));
    const alternatives = wanted.sort((a, b) => b.length - a.length || (a < b ? -1 : 1)).join('|');
    let re = WORD_PATTERNS.get(alternatives);
    if (!re) {
      // Compiled once per set of words (every scan asks for the same set).
      re = new RegExp(`(?<![A-Za-z0-9_])(?:${alternatives})(?![A-Za-z0-9_])`, 'g');
      if (WORD_PATTERNS.size > 64) WORD_PATTERNS.clear();
      WORD_PATTERNS.set(alternatives, re);
    }
    re.lastIndex = 0;
    for (let m = re.exec(this.text); m; m = re.exec(this.text)) lists.get(m[0])!.push(m.index);
    for (const [w, l] of lists) this.offsets.set(w, l);
  }

  /** Offsets of `word` as a whole identifier in `[from, to)`, skipping comments and strings by tree check later. */
  wordOffsets(word: string, from = 0, to = this.text.length): number[] {
    let all = this.offsets.get(word);
    if (!all) {
      all = [];
      const t = this.text;
      for (let i = t.indexOf(word); i >= 0; i = t.indexOf(word, i + word.length))
        if (!isIdentChar(t.charCodeAt(i - 1)) && !isIdentChar(t.charCodeAt(i + word.length))) all.push(i);
      this.offsets.set(word, all);
    }
    if (from <= 0 && to >= this.text.length) return all;
    return all.slice(lowerBound(all, from), lowerBound(all, to));
  }

  /**
   * Identifiers of `name` in `[from, to)` that may bind it: a use followed by `.`, `[` or a call's `(` cannot (a
   * `def` or `class` name followed by `(` can), so those are skipped on the text alone, before the tree is asked.
   * Finding where a name is bound then costs its bindings, not its uses (`torch` is used thousands of times in a
   * large script and bound once).
   */
  bindingCandidates(name: string, from = 0, to = this.text.length): Node[] {
    const t = this.text;
    const out: Node[] = [];
    for (const off of this.wordOffsets(name, from, to)) {
      let j = off + name.length;
      while (t[j] === ' ' || t[j] === '\t') j++;
      const next = t[j];
      if (next === '.' || next === '[') continue;
      if (next === '(' && !/\b(def|class)\s+$/.test(t.slice(Math.max(0, off - 8), off))) continue;
      const n = this.identifierAt(off);
      if (n) out.push(n);
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
