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
    const tree = this.parser.parse(text, oldTree ?? null);
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
