/**
 * The one walk over a project's folders: depth-first in name order, bounded in depth, folders and entries, and
 * safe on symbolic links. A linked folder is followed only when it resolves inside the root and has not been
 * walked already, so a link to `.` or `..`, a loop of links, or a link out of the project ends the branch.
 */
import * as path from 'node:path';
import type { FileSystem } from '../vocabulary/host';

export interface WalkOptions {
  /** Whether to descend into a folder of this name. */
  enter(name: string): boolean;
  /** Whether a file of this name is wanted. */
  take(name: string): boolean;
  /** Folders below the root, at most. */
  maxDepth: number;
  /** Files returned, at most. */
  maxFiles: number;
  /** Folders listed, at most (a tree of empty folders ends too). */
  maxDirs?: number;
  /** Entries looked at, at most. */
  maxEntries?: number;
}

/** The wanted files under `root`, with whether a bound cut the walk short. */
export function walkFiles(
  fs: FileSystem,
  root: string,
  opts: WalkOptions,
): { files: string[]; truncated: boolean } {
  const files: string[] = [];
  const maxDirs = opts.maxDirs ?? 4 * opts.maxFiles;
  const maxEntries = opts.maxEntries ?? 50 * opts.maxFiles;
  const rootReal = fs.realPath(root);
  if (!rootReal) return { files, truncated: false };
  // Every real folder is listed once, whichever path reaches it first.
  const seen = new Set<string>([rootReal]);
  let dirs = 0;
  let entries = 0;
  let truncated = false;
  const walk = (dir: string, real: string, depth: number): void => {
    if (++dirs > maxDirs) {
      truncated = true;
      return;
    }
    const list = fs.entries(dir).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of list) {
      if (files.length >= opts.maxFiles || ++entries > maxEntries) {
        truncated = true;
        return;
      }
      const p = path.join(dir, e.name);
      if (e.kind === 'file') {
        if (opts.take(e.name) && (!e.link || within(fs.realPath(p), rootReal))) files.push(p);
        continue;
      }
      if (e.kind !== 'dir' || depth >= opts.maxDepth || !opts.enter(e.name)) continue;
      const target = e.link ? fs.realPath(p) : path.join(real, e.name);
      if (!target || !within(target, rootReal) || seen.has(target)) continue;
      seen.add(target);
      walk(p, target, depth + 1);
    }
  };
  walk(root, rootReal, 0);
  return { files, truncated };
}

/** Whether `p` (a real path) is `root` or lies below it. */
export function within(p: string | undefined, root: string): boolean {
  if (!p) return false;
  const rel = path.relative(root, p);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}
