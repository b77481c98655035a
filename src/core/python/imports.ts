/** Every way an import statement binds a name in a file, and the resolution of dotted names through them. */
import { up } from '../parsing/python';
import type { Node, PythonGrammar } from '../parsing/python';
import type { SourceFile } from '../parsing/source';

/** One name an import statement binds in a file. */
export interface ImportBinding {
  /** The name as the file uses it (`tdf`, `fully_shard`, `torch`). */
  local: string;
  /** What it stands for, fully qualified (`torch.distributed.fsdp`, `torch.distributed.fsdp.fully_shard`). */
  qualified: string;
  /** A module (`import x`) rather than a name from one (`from x import y`). */
  isModule: boolean;
  line: number;
  /** Start offset of the import statement. */
  offset: number;
  /** The import statement's offsets and last line, for quick fixes that rewrite it or add after it. */
  statement: { start: number; end: number; endLine: number; topLevel: boolean };
  /** The source text of the module path in `from X import ...`, for rewriting it. */
  fromNode?: { start: number; end: number; text: string };
  /** The whole dotted path of `import a.b.c` (which binds only `a`). */
  imported?: string;
  /**
   * Inside an `except` clause: the fallback of a `try: import ... except ImportError: import ...` pair, which runs
   * only when the import in the `try` fails.
   */
  fallback?: boolean;
}

export interface ImportTable {
  bindings: ImportBinding[];
  /** Modules imported with `from M import *`. */
  wildcards: { module: string; line: number }[];
  /** Resolves a dotted expression to its qualified name through the bindings (`tdf.fully_shard` → `torch...`). */
  qualify(dotted: string): { qualified: string; bound: boolean };
}

/** Reads every import statement of a file. Statements are located by the `import` keyword, then matched. */
export function readImports(grammar: PythonGrammar, file: SourceFile): ImportTable {
  const bindings: ImportBinding[] = [];
  const wildcards: ImportTable['wildcards'] = [];
  const seen = new Set<number>();
  const query = grammar.query('imports');
  for (const off of file.wordOffsets('import')) {
    let stmt: Node | null = file.root.descendantForIndex(off, off + 6);
    while (stmt && stmt.type !== 'import_statement' && stmt.type !== 'import_from_statement') {
      if (stmt.type === 'module' || stmt.type === 'block') {
        stmt = null;
        break;
      }
      stmt = up(stmt);
    }
    if (!stmt || seen.has(stmt.startIndex)) continue;
    seen.add(stmt.startIndex);
    const line = stmt.startPosition.row + 1;
    const statement = {
      start: stmt.startIndex,
      end: stmt.endIndex,
      endLine: stmt.endPosition.row + 1,
      topLevel: up(stmt)?.type === 'module',
    };
    const fallback = inExceptClause(stmt) ? { fallback: true } : {};
    for (const m of query.matches(stmt)) {
      const cap = (name: string) => m.captures.find((c) => c.name === name)?.node;
      const module = cap('module');
      const from = cap('from');
      const name = cap('name');
      const alias = cap('alias');
      if (m.captures.some((c) => c.node.startIndex < stmt.startIndex || c.node.endIndex > stmt.endIndex))
        continue;
      if (module) {
        const dotted = compact(module.text);
        if (alias)
          bindings.push({
            local: alias.text,
            qualified: dotted,
            isModule: true,
            line,
            offset: stmt.startIndex,
            statement,
            ...fallback,
          });
        // `import a.b.c` binds `a`, through which `a.b.c.x` is reached.
        else
          bindings.push({
            local: dotted.split('.')[0]!,
            qualified: dotted.split('.')[0]!,
            isModule: true,
            line,
            offset: stmt.startIndex,
            statement,
            imported: dotted,
            ...fallback,
          });
      } else if (from && cap('wildcard')) {
        wildcards.push({ module: compact(from.text), line });
      } else if (from && name) {
        const mod = compact(from.text);
        const n = compact(name.text);
        bindings.push({
          local: alias ? alias.text : n,
          qualified: joinModule(mod, n),
          isModule: false,
          line,
          offset: stmt.startIndex,
          statement,
          fromNode: { start: from.startIndex, end: from.endIndex, text: from.text },
          ...fallback,
        });
      }
    }
  }
  // Later bindings of a name shadow earlier ones in the same file, except a fallback in an `except` clause: the
  // import in the `try` is the one that runs where it can.
  const byLocal = new Map<string, ImportBinding>();
  for (const b of bindings) {
    const earlier = byLocal.get(b.local);
    if (!(b.fallback && earlier && !earlier.fallback)) byLocal.set(b.local, b);
  }
  return {
    bindings,
    wildcards,
    qualify(dotted) {
      const dot = dotted.indexOf('.');
      const head = dot < 0 ? dotted : dotted.slice(0, dot);
      const b = byLocal.get(head);
      if (!b) return { qualified: dotted, bound: false };
      return { qualified: dot < 0 ? b.qualified : b.qualified + dotted.slice(dot), bound: true };
    },
  };
}

/** Whether `stmt` sits in an `except` clause of its function or module (not counting nested definitions). */
function inExceptClause(stmt: Node): boolean {
  for (let p = up(stmt); p; p = up(p)) {
    if (p.type === 'except_clause' || p.type === 'except_group_clause') return true;
    if (p.type === 'module' || p.type === 'function_definition' || p.type === 'class_definition')
      return false;
  }
  return false;
}

function compact(text: string): string {
  return text.replace(/\s+/g, '');
}

/** `from . import x` keeps its dots: relative modules are resolved against the file's package later. */
function joinModule(mod: string, name: string): string {
  return mod.endsWith('.') ? mod + name : `${mod}.${name}`;
}
