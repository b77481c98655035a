/**
 * The Python files of a workspace, parsed on demand and cached by version: imports resolve and callers are found
 * here.
 */
import { up } from '../parsing/python';
import type { FileSystem, Host } from '../vocabulary/host';
import * as path from 'node:path';
import { readImports, type ImportTable } from '../python/imports';
import type { Node, PythonGrammar } from '../parsing/python';
import { SourceFile } from '../parsing/source';
import { walkFiles } from './walk';
import { SKIP_DIRS } from '../vocabulary/files';
import { isModelledPackage, sitePackages } from './environments';

/** File access the project analysis needs (the editor serves open documents first). */
export type ProjectFS = FileSystem;

/** A parsed Python file of the project, with what the model analysis looks up in it. */
export interface PyFile {
  path: string;
  source: SourceFile;
  imports: ImportTable;
  /** Top-level classes and functions by name. */
  classes: Map<string, Node>;
  functions: Map<string, Node>;
  version: string;
}

/**
 * The Python files of a workspace, parsed on demand and cached by file version: the project's imports resolve
 * here, and a function's callers are found here. Bounded so that a huge repository degrades, never hangs.
 */
export class Project {
  private readonly cache = new Map<string, PyFile | null>();
  private listing: string[] | undefined;
  readonly maxFiles: number;
  /** The site-packages folders of the project's Python environments: installed packages' helpers are read there. */
  readonly libraries: readonly string[];

  constructor(
    readonly roots: string[],
    readonly grammar: PythonGrammar,
    readonly fs: ProjectFS,
    opts: { maxFiles?: number; libraries?: readonly string[] } = {},
  ) {
    this.maxFiles = opts.maxFiles ?? 5000;
    this.libraries = opts.libraries ?? [];
  }

  /** The site-packages folder a file is installed in, or undefined for the project's own files. */
  libraryOf(file: string): string | undefined {
    const abs = path.resolve(file);
    return this.libraries.find((l) => abs.startsWith(path.resolve(l) + path.sep));
  }

  /** The parsed file, or undefined when it cannot be read as Python. */
  file(file: string): PyFile | undefined {
    const abs = path.resolve(file);
    const version = this.fs.version(abs);
    const cached = this.cache.get(abs);
    if (cached !== undefined && (cached === null ? version === undefined : cached.version === version))
      return cached ?? undefined;
    // A new version (an edit, or the editor's document replacing the disk's): what was derived from the old tree
    // goes with it, so that no memo (a function's callers) keeps nodes of a tree that is freed.
    // A file that appears or disappears changes the listing too.
    if (cached !== undefined) this.invalidate(abs, { contentOnly: cached !== null && version !== undefined });
    const text = version === undefined ? undefined : this.fs.readFile(abs);
    if (text === undefined) {
      this.cache.set(abs, null);
      return undefined;
    }
    const tree = this.grammar.parse(text);
    const source = new SourceFile(abs, text, tree);
    const classes = new Map<string, Node>();
    const functions = new Map<string, Node>();
    for (const stmt of tree.rootNode.namedChildren) {
      const def = stmt.type === 'decorated_definition' ? stmt.childForFieldName('definition') : stmt;
      const name = def?.childForFieldName('name')?.text;
      if (!def || !name) continue;
      if (def.type === 'class_definition') classes.set(name, def);
      else if (def.type === 'function_definition') functions.set(name, def);
    }
    const grammar = this.grammar;
    let imports: ImportTable | undefined;
    const parsed: PyFile = {
      path: abs,
      source,
      // Read when first asked: a file parsed for a search of its calls may never need them.
      get imports() {
        return (imports ??= readImports(grammar, source));
      },
      classes,
      functions,
      version: version!,
    };
    this.cache.set(abs, parsed);
    return parsed;
  }

  /**
   * Forgets a file (the editor calls this when a file changes or is deleted). An edit of an open file's text
   * (`contentOnly`) keeps the listing of files, which only creation and deletion change.
   */
  invalidate(file: string, opts: { contentOnly?: boolean } = {}): void {
    const abs = path.resolve(file);
    const cached = this.cache.get(abs);
    if (cached) cached.source.tree.delete();
    this.cache.delete(abs);
    if (!opts.contentOnly) this.listing = undefined;
    // The callers of a function are found in Python files alone: a configuration, launch file or version pin
    // leaves them as they are (they are the costly search); every other value may read any of those files.
    if (abs.endsWith('.py')) this.memos.clear();
    else for (const k of [...this.memos.keys()]) if (!k.startsWith('callers:')) this.memos.delete(k);
  }

  private readonly memos = new Map<string, unknown>();

  /**
   * A value derived from the project's files (launch files found, callers of a function), kept until any file
   * changes: the editor reports changes through `invalidate`, so an unchanged project is not walked again.
   */
  memo<T>(key: string, compute: () => T): T {
    if (this.memos.has(key)) return this.memos.get(key) as T;
    const v = compute();
    this.memos.set(key, v);
    return v;
  }

  /**
   * The file of a module, as Python's import system would find it from `fromFile`: relative imports from the
   * file's package, absolute ones from the file's directory (the script's directory is on sys.path), the project
   * roots and their `src/` folders, then the site-packages of its environments.
   */
  resolveModule(fromFile: string, module: string): string | undefined {
    // Asked again and again for the same imports (each call of an imported helper or class): found once per folder.
    return this.memo(`module:${path.dirname(path.resolve(fromFile))}\u0000${module}`, () =>
      this.findModule(fromFile, module),
    );
  }

  private findModule(fromFile: string, module: string): string | undefined {
    const m = /^(\.*)(.*)$/.exec(module)!;
    const dots = m[1]!.length;
    const rest = m[2] ? m[2].split('.') : [];
    const bases: string[] = [];
    if (dots > 0) {
      let dir = path.dirname(path.resolve(fromFile));
      for (let i = 1; i < dots; i++) dir = path.dirname(dir);
      bases.push(dir);
    } else {
      bases.push(path.dirname(path.resolve(fromFile)));
      for (const r of this.roots) bases.push(r, path.join(r, 'src'));
    }
    // Installed packages after the project's own folders, as on sys.path; never those the analysis models itself.
    if (dots === 0 && rest.length && !isModelledPackage(m[2]!)) bases.push(...this.libraries);
    for (const base of bases) {
      const p = path.join(base, ...rest);
      if (rest.length && this.fs.version(`${p}.py`) !== undefined) return `${p}.py`;
      const init = path.join(p, '__init__.py');
      if (this.fs.version(init) !== undefined) return init;
    }
    return undefined;
  }

  /** Python files under the roots (bounded, in name order, skipping virtual environments and build output). */
  pythonFiles(): string[] {
    if (this.listing) return this.listing;
    const out: string[] = [];
    for (const r of this.roots) {
      const { files } = walkFiles(this.fs, r, {
        enter: (name) => !name.startsWith('.') && !SKIP_DIRS.has(name) && !name.includes('.'),
        take: (name) => name.endsWith('.py'),
        maxDepth: 12,
        maxFiles: this.maxFiles - out.length,
      });
      out.push(...files);
    }
    this.listing = out;
    return out;
  }

  /** Call sites of a function named `name` in the project (text search first, then the tree). */
  callersOf(name: string): { file: PyFile; call: Node }[] {
    return this.memo(`callers:${name}`, () => this.findCallers(name));
  }

  private findCallers(name: string): { file: PyFile; call: Node }[] {
    const out: { file: PyFile; call: Node }[] = [];
    const needle = `${name}(`;
    for (const f of this.pythonFiles()) {
      const text = this.fs.readFile(f);
      if (!text?.includes(needle)) continue;
      const parsed = this.file(f);
      if (!parsed) continue;
      for (const id of parsed.source.identifiers(name)) {
        const parent = up(id);
        const callee =
          parent?.type === 'attribute' && parent.childForFieldName('attribute')?.id === id.id ? parent : id;
        const call = up(callee);
        if (call?.type === 'call' && call.childForFieldName('function')?.id === callee.id)
          out.push({ file: parsed, call });
      }
    }
    return out;
  }

  dispose(): void {
    for (const f of this.cache.values()) f?.source.tree.delete();
    this.cache.clear();
    this.memos.clear();
  }
}

/**
 * The project a file belongs to: the nearest folder above it with pyproject.toml, setup.py or .git. Without one, the
 * working folder when the file lies under it (a script run as `fsdp-lens estimate pkg/parallelize.py` from the folder
 * whose train.py calls it), else the file's own folder. The filesystem root and the home folder are never taken
 * as a project from the working folder alone.
 */
export function findProjectRoot(file: string, host: Pick<Host, 'fs' | 'cwd' | 'home'>): string {
  const fsys = host.fs;
  const cwd = host.cwd;
  const abs = path.resolve(file);
  let dir = path.dirname(abs);
  const has = (d: string, m: string) =>
    fsys.version(path.join(d, m)) !== undefined || fsys.isDirectory(path.join(d, m));
  for (let i = 0; i < 32; i++) {
    // A `setup.py` beside an `__init__.py` is a module of a package (`pkg/setup.py`), not a project's setup script.
    const marker =
      ['pyproject.toml', 'setup.cfg', '.git'].some((m) => has(dir, m)) ||
      (has(dir, 'setup.py') && !has(dir, '__init__.py'));
    if (marker) return dir;
    const up = path.dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  const work = path.resolve(cwd);
  const inside = !path.relative(work, abs).startsWith('..') && !path.isAbsolute(path.relative(work, abs));
  if (inside && work !== path.parse(work).root && work !== path.resolve(host.home)) return work;
  return path.dirname(abs);
}

/** The project of a folder, with the installed packages of its Python environments (read through `host.fs`). */
export function projectAt(root: string, grammar: PythonGrammar, host: Pick<Host, 'fs' | 'env'>): Project {
  return new Project([root], grammar, host.fs, { libraries: sitePackages(host.fs, [root], host.env) });
}
