/**
 * The workspace as the boundary of what the analysis reads: a file system that serves only paths that resolve,
 * symbolic links followed, inside its roots (the workspace folders or the project, and the Hugging Face folders a
 * model id is read from). A path that a file names (`# fsdp: config=/etc/passwd`, a pyproject or settings entry,
 * a link to `/dev/zero`) is refused as outside the workspace, and its contents are never read.
 */
import * as path from 'node:path';
import type { FileSystem, Host } from '../vocabulary/host';
import { hfHome, hfHubCache } from '../model/load';
import { findProjectRoot } from './project';
import { within } from './walk';

/** `base`, serving only what lies inside `roots` (missing roots are dropped). */
export function confine(base: FileSystem, roots: readonly string[]): FileSystem {
  const real = [...new Set(roots.map((r) => base.realPath(path.resolve(r))).filter((r): r is string => !!r))];
  const inside = (p: string): boolean => {
    const abs = path.resolve(p);
    if (!real.some((r) => within(abs, r)) && !roots.some((r) => within(abs, path.resolve(r)))) return false;
    const target = base.realPath(abs);
    // A path that does not exist has nothing to read: the base says so.
    return !target || real.some((r) => within(target, r));
  };
  const outside = 'outside the workspace (files named by a project are read only inside it)';
  return {
    readFile: (f) => (inside(f) ? base.readFile(f) : undefined),
    refusal: (f) => (inside(f) ? base.refusal(f) : outside),
    version: (f) => (inside(f) ? base.version(f) : undefined),
    isDirectory: (d) => inside(d) && base.isDirectory(d),
    entries: (d) => (inside(d) ? base.entries(d) : []),
    realPath: (p) => (inside(p) ? base.realPath(p) : undefined),
  };
}

/** The Hugging Face folders a model id and Accelerate's default configuration are read from. */
export function huggingFaceRoots(host: Pick<Host, 'env' | 'home'>): string[] {
  return [...new Set([hfHome(host), hfHubCache(host)])];
}

/**
 * The folders a command-line run may read for a file: its project (`findProjectRoot`), the repository around it
 * (the nearest folder above with `.git`, below the home folder), and the working folder when the file lies in it
 * (never the filesystem root or the home folder).
 */
export function commandLineRoots(file: string, host: Pick<Host, 'fs' | 'cwd' | 'home'>): string[] {
  const abs = path.resolve(file);
  const roots = [findProjectRoot(abs, host)];
  const home = path.resolve(host.home);
  for (let dir = path.dirname(abs), i = 0; i < 32 && dir !== home; i++) {
    if (host.fs.isDirectory(path.join(dir, '.git'))) {
      if (dir !== path.parse(dir).root) roots.push(dir);
      break;
    }
    const up = path.dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  const cwd = path.resolve(host.cwd);
  if (within(abs, cwd) && cwd !== path.parse(cwd).root && cwd !== home) roots.push(cwd);
  return [...new Set(roots)];
}
