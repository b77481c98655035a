/** The Python grammar (web-tree-sitter with tree-sitter-python's WebAssembly) and its compiled queries. */
import {
  Edit,
  Language,
  Parser,
  Query,
  type Node,
  type Point,
  type QueryMatch,
  type Tree,
} from 'web-tree-sitter';
import { QUERY_SOURCES, type QueryName } from './queries';

export type { Node, Point, Query, QueryMatch, Tree };
export { Edit };

/** File names of the two WebAssembly modules the bundles ship beside themselves. */
export const RUNTIME_WASM = 'web-tree-sitter.wasm';
export const PYTHON_WASM = 'tree-sitter-python.wasm';

/**
 * The Python grammar, loaded once per process and shared by every document, the CLI and the tests.
 * Parsing is synchronous once loaded, so one parser instance serves all callers on the one JS thread.
 */
const compiled = new WeakMap<Language, Map<QueryName, Query>>();

/** A query from `queries/NAME.scm` compiled for `language`, once per process. */
export function compiledQuery(language: Language, name: QueryName): Query {
  let byName = compiled.get(language);
  if (!byName) compiled.set(language, (byName = new Map()));
  let q = byName.get(name);
  if (!q) byName.set(name, (q = new Query(language, QUERY_SOURCES[name])));
  return q;
}

export class PythonGrammar {
  private constructor(
    readonly language: Language,
    private readonly parser: Parser,
  ) {}

  /** Parses `text`; pass the previous tree, already edited, to re-parse incrementally. */
  parse(text: string, oldTree?: Tree | null): Tree {
    const runs = commentRuns(text);
    if (!runs.length) return this.parseText(text, oldTree ?? null);
    // Blanked lines are not edits the old tree knows of: such a text is parsed from scratch.
    let tree = this.parseText(blank(text, runs), null);
    // A line of a string that starts with `#` is no comment: the string keeps its text.
    const inStrings = runs.filter(([a]) => /string/.test(tree.rootNode.descendantForIndex(a)?.type ?? ''));
    if (inStrings.length) {
      tree.delete();
      const rest = runs.filter((r) => !inStrings.includes(r));
      tree = this.parseText(rest.length ? blank(text, rest) : text, null);
    }
    return tree;
  }

  private parseText(text: string, oldTree: Tree | null): Tree {
    const tree = this.parser.parse(text, oldTree);
    if (!tree) throw new Error('tree-sitter returned no tree');
    return tree;
  }

  /** A compiled query from `queries/NAME.scm`, compiled on first use. */
  query(name: QueryName): Query {
    return compiledQuery(this.language, name);
  }

  /**
   * Loads the grammar: `runtimeWasm` is the path of web-tree-sitter's runtime (the library reads it), `grammar`
   * the Python grammar's WebAssembly bytes. The edge finds and reads them (src/host/grammar.ts).
   */
  static async load(runtimeWasm: string, grammar: Uint8Array): Promise<PythonGrammar> {
    await Parser.init({ locateFile: () => runtimeWasm });
    const language = await Language.load(grammar);
    const parser = new Parser();
    parser.setLanguage(language);
    return new PythonGrammar(language, parser);
  }
}

/** Comment lines a run may hold before the rest of the run is blanked for the parser. */
const COMMENT_RUN = 32;
/** Annotation and `noqa` lines kept as comments in one blanked run. */
const KEPT_IN_RUN = 64;
const KEEP = /fsdp:|noqa/i;

/**
 * The comment lines to blank for the parser: after a line of code, tree-sitter-python's scanner looks past every
 * following comment line for the next line's indentation, once per comment, so a run of n comment lines costs n^2
 * (8,000 lines: 15 s). Past `COMMENT_RUN` comment lines in a run (blank lines between them belong to it), the lines
 * that are not `# fsdp:` annotations or `# noqa` comments are given to the parser as spaces of the same length:
 * every offset and every other node stays as it is, and the run costs n.
 */
export function commentRuns(text: string): [number, number][] {
  const blanked: [number, number][] = [];
  let run: [number, number][] = [];
  const flush = () => {
    if (run.length > COMMENT_RUN) {
      let kept = 0;
      for (const [a, b] of run) {
        if (kept < KEPT_IN_RUN && KEEP.test(text.slice(a, b))) kept++;
        else blanked.push([a, b]);
      }
    }
    run = [];
  };
  for (let i = 0; i <= text.length;) {
    let end = text.indexOf('\n', i);
    if (end < 0) end = text.length;
    const lineEnd = end > i && text.charCodeAt(end - 1) === 13 ? end - 1 : end;
    let j = i;
    while (j < lineEnd && /[ \t\f]/.test(text[j]!)) j++;
    if (j < lineEnd && text.charCodeAt(j) === 35) run.push([j, lineEnd]);
    else if (j < lineEnd) flush();
    i = end + 1;
  }
  flush();
  return blanked;
}

/** `text` with the ranges replaced by spaces. */
function blank(text: string, ranges: [number, number][]): string {
  const parts: string[] = [];
  let at = 0;
  for (const [a, b] of ranges) {
    parts.push(text.slice(at, a), ' '.repeat(b - a));
    at = b;
  }
  parts.push(text.slice(at));
  return parts.join('');
}

/** Parents already asked for, by tree and node id. */
const PARENTS = new WeakMap<Tree, Map<number, Node | null>>();

/**
 * A node's parent, remembered. Tree-sitter finds a parent by walking down from the root, so each `node.parent`
 * costs the node's depth, and walking up from deep nodes of a broken or deeply nested file cost its square.
 */
export function up(node: Node | null | undefined): Node | null {
  if (!node) return null;
  let byId = PARENTS.get(node.tree);
  if (!byId) PARENTS.set(node.tree, (byId = new Map()));
  let p = byId.get(node.id);
  if (p === undefined) {
    p = node.parent;
    byId.set(node.id, p);
    // Its siblings have the same parent: one lookup per parent, not per child.
    if (p && byId.size < 1_000_000) for (const c of p.children) if (c) byId.set(c.id, p);
  }
  return p;
}

/** Each parent's children, with every child's place among them, by tree and parent id. */
const SIBLINGS = new WeakMap<Tree, Map<number, { children: Node[]; at: Map<number, number> }>>();

/**
 * The sibling after (`step` 1) or before (-1) a node, named ones only when `named`. Tree-sitter finds a sibling by
 * walking its parent's children, so in a broken file's ERROR node of thousands of children each `nextSibling`
 * costs them all; here the children are listed once per parent.
 */
export function sibling(node: Node, step: 1 | -1, named = false): Node | null {
  const parent = up(node);
  if (!parent) return null;
  let byId = SIBLINGS.get(node.tree);
  if (!byId) SIBLINGS.set(node.tree, (byId = new Map()));
  let list = byId.get(parent.id);
  if (!list) {
    const children = parent.children.filter((c): c is Node => !!c);
    list = { children, at: new Map(children.map((c, i) => [c.id, i])) };
    byId.set(parent.id, list);
  }
  for (let i = (list.at.get(node.id) ?? -2) + step; i >= 0 && i < list.children.length; i += step) {
    const c = list.children[i]!;
    if (!named || c.isNamed) return c;
  }
  return null;
}
