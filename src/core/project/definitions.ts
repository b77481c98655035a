/** Where a class or function a file imports is defined in the project: the module's file, through re-exports. */
import type { Node } from '../parsing/python';
import type { Project, PyFile } from './project';

/** The most re-exports followed to a definition (`from .training import train_config` in a package's `__init__`). */
export const MAX_REEXPORTS = 3;

/** A module-level class or function of a project file. */
export interface Definition {
  file: PyFile;
  node: Node;
}

/**
 * The file that defines `name` of `module` as a module-level class (or function), as Python's import of it would
 * find it from `from`: the module's file, else the file its `__init__` (or the module) imports the name from,
 * at most MAX_REEXPORTS hops. Undefined when the module is not in the project or its environments.
 */
export function definitionFile(
  project: Project,
  from: string,
  module: string,
  name: string,
  kind: 'class' | 'def',
): { where: string; name: string } | undefined {
  const find = (
    file: string | undefined,
    name: string,
    hop: number,
  ): { where: string; name: string } | undefined => {
    if (!file || hop > MAX_REEXPORTS || name.startsWith('_')) return undefined;
    const text = project.fs.readFile(file);
    if (text === undefined) return undefined;
    if (new RegExp(`^(?:async[ \\t]+)?${kind}[ \\t]+${name.replace(/\W/g, '')}\\b`, 'm').test(text))
      return { where: file, name };
    const imports = project.file(file)?.imports;
    const reexport = imports?.bindings.find((b) => b.local === name && !b.isModule);
    const dot = reexport?.qualified.lastIndexOf('.') ?? -1;
    if (reexport && dot > 0)
      return find(
        project.resolveModule(file, reexport.qualified.slice(0, dot)),
        reexport.qualified.slice(dot + 1),
        hop + 1,
      );
    // `from .wrapping import *` (a package's `__init__`): the last star import that defines it, as Python binds
    // public names in import order.
    const stars = imports?.wildcards ?? [];
    for (let i = stars.length - 1; i >= 0; i--) {
      const hit = find(project.resolveModule(file, stars[i]!.module), name, hop + 1);
      if (hit) return hit;
    }
    return undefined;
  };
  return find(project.resolveModule(from, module), name, 0);
}

/**
 * The definition a qualified name of `from`'s imports refers to (`pkg.configs.train_config`): the module-level
 * class or function of that name in the project, or undefined.
 */
export function definitionOf(
  project: Project,
  from: string,
  qualified: string,
  kind: 'class' | 'def',
): Definition | undefined {
  const dot = qualified.lastIndexOf('.');
  if (dot <= 0) return undefined;
  const module = qualified.slice(0, dot);
  const name = qualified.slice(dot + 1);
  return project.memo(`definition:${from}\u0000${qualified}\u0000${kind}`, () => {
    const found = definitionFile(project, from, module, name, kind);
    const file = found ? project.file(found.where) : undefined;
    // Re-exported under another name (`from .training import TrainConfig as train_config`): the name it is defined by.
    const node = file && (kind === 'class' ? file.classes : file.functions).get(found!.name);
    return file && node ? { file, node } : undefined;
  });
}

/**
 * A reader of the classes and functions `from` imports from other files of the project (or its environments),
 * for the values a script reads through them.
 */
export function definitionReader(
  project: Project,
  from: string,
): (
  qualified: string,
  kind: 'class' | 'def',
) => { source: PyFile['source']; imports: PyFile['imports']; node: Node } | undefined {
  return (qualified, kind) => {
    const d = definitionOf(project, from, qualified, kind);
    return d && { source: d.file.source, imports: d.file.imports, node: d.node };
  };
}
