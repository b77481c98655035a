import * as fs from 'node:fs';
import * as path from 'node:path';
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

  static async load(wasmDir: string): Promise<PythonGrammar> {
    const runtime = path.join(wasmDir, RUNTIME_WASM);
    const grammar = path.join(wasmDir, PYTHON_WASM);
    for (const f of [runtime, grammar]) {
      if (!fs.existsSync(f))
        throw new Error(`missing ${path.basename(f)} in ${wasmDir}: run "npm run build"`);
    }
    await Parser.init({ locateFile: () => runtime });
    const language = await Language.load(fs.readFileSync(grammar));
    const parser = new Parser();
    parser.setLanguage(language);
    return new PythonGrammar(language, parser);
  }
}

let shared: Promise<PythonGrammar> | undefined;
let sharedDir: string | undefined;

/**
 * The process-wide grammar. The WASM files are looked up beside the running bundle (`dist/`), or in `wasmDir`
 * when given on the first call.
 */
export function loadPython(wasmDir?: string): Promise<PythonGrammar> {
  if (!shared) {
    sharedDir = wasmDir ?? defaultWasmDir();
    shared = PythonGrammar.load(sharedDir);
    shared.catch(() => {
      shared = undefined;
    });
  }
  return shared;
}

/** Where the WASM files were loaded from (for messages). */
export function loadedWasmDir(): string | undefined {
  return sharedDir;
}

function defaultWasmDir(): string {
  const candidates = [__dirname, path.join(__dirname, '..'), path.join(__dirname, '..', '..', 'dist')];
  return candidates.find((d) => fs.existsSync(path.join(d, PYTHON_WASM))) ?? __dirname;
}
