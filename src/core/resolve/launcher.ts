/** A script that only launches a job function of another project file (`fire.Fire(main)` of an imported `main`). */
import * as path from 'node:path';
import { up, type Node } from '../parsing/python';
import type { FileFacts } from '../analysis/facts';
import { enclosingFunction } from '../python/scope';
import { definitionOf } from '../project/definitions';
import type { Project, PyFile } from '../project/project';

/** The job function a launcher runs, and where. */
export interface LaunchedJob {
  /** The file that defines the function. */
  file: PyFile;
  /** Its name there. */
  fn: string;
  /** How the launcher runs it, for the note: `fire.Fire(main) at line 5`. */
  how: string;
}

/**
 * The function of another project file this script runs at module level, when the script makes no wrap, loads no
 * model and follows no helper itself: `fire.Fire(main)`, `main()` or `main(args)` (under `if __name__ ==
 * "__main__":` or not) of `from pkg.finetuning import main`, where that file wraps modules in it. Undefined
 * otherwise, or when the script runs several such functions.
 */
export function launchedJob(project: Project, facts: FileFacts): LaunchedJob | undefined {
  if (facts.calls.length || facts.models.length) return undefined;
  const file = project.file(facts.path);
  if (!file) return undefined;
  const found: LaunchedJob[] = [];
  for (const b of file.imports.bindings) {
    if (b.isModule || !b.qualified.includes('.')) continue;
    for (const id of file.source.identifiers(b.local)) {
      const how = launchOf(file, id, b.local);
      if (!how || enclosingFunction(id)) continue;
      const def = definitionOf(project, facts.path, b.qualified, 'def');
      if (!def || path.resolve(def.file.path) === path.resolve(facts.path)) continue;
      const name = def.node.childForFieldName('name')?.text ?? b.local;
      // The function wraps modules itself (a job function); one whose wraps are elsewhere is no job of its file.
      if (!/\b(fully_shard|FullyShardedDataParallel|FSDP)\s*\(/.test(def.node.text)) continue;
      found.push({ file: def.file, fn: name, how: `${how} at line ${file.source.line(id)}` });
    }
  }
  const distinct = [...new Map(found.map((f) => [`${f.file.path}:${f.fn}`, f])).values()];
  return distinct.length === 1 ? distinct[0] : undefined;
}

/** How a module-level use of `name` runs it: handed to `fire.Fire(name)`, or called as `name(...)`. */
function launchOf(file: PyFile, id: Node, name: string): string | undefined {
  const p = up(id);
  if (p?.type === 'call' && p.childForFieldName('function')?.id === id.id) return `${name}()`;
  if (p?.type !== 'argument_list' || p.namedChildren[0]?.id !== id.id) return undefined;
  const fn = up(p)?.childForFieldName('function')?.text;
  return fn && file.imports.qualify(fn).qualified === 'fire.Fire' ? `${fn}(${name})` : undefined;
}
