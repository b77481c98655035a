/**
 * A file's text at a revision of the repository it is in, read from the repository's objects with isomorphic-git:
 * `git` itself is never run, so nothing in a clone's config (hooks, filters, aliases) executes.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import git from 'isomorphic-git';
import { decodeSource, DEFAULT_MAX_BYTES } from '../core/analysis/input';

/** At most this many `~` / `^` steps back through first parents. */
const MAX_STEPS = 1000;

/**
 * The text of `file` at `rev`: a branch, tag, `HEAD`, a full or short commit id, each with `~N` or `^` suffixes
 * (first parents). An error in words when the file is in no repository, the revision is unknown, or the file did
 * not exist there.
 */
export async function fileAtRevision(
  file: string,
  rev: string,
): Promise<{ text: string; commit: string } | { error: string }> {
  const abs = path.resolve(file);
  let dir: string;
  try {
    dir = await git.findRoot({ fs, filepath: path.dirname(abs) });
  } catch {
    return { error: `${file} is not in a git repository` };
  }
  const m = /^([^~^]+)((?:~\d*|\^)*)$/.exec(rev.trim());
  if (!m) return { error: `"${rev}" is not a revision (a branch, a tag, HEAD or a commit, with ~N or ^)` };
  let oid: string;
  try {
    oid = /^[0-9a-f]{4,40}$/i.test(m[1]!)
      ? await git.expandOid({ fs, dir, oid: m[1]!.toLowerCase() })
      : await git.resolveRef({ fs, dir, ref: m[1]! });
  } catch {
    return { error: `no revision "${m[1]}" in ${dir}` };
  }
  let steps = 0;
  for (const s of m[2]!.match(/~\d*|\^/g) ?? []) steps += s === '^' || s === '~' ? 1 : Number(s.slice(1));
  if (steps > MAX_STEPS) return { error: `"${rev}" goes back more than ${MAX_STEPS} commits` };
  try {
    for (let i = 0; i < steps; i++) {
      const { commit } = await git.readCommit({ fs, dir, oid });
      const parent = commit.parent[0];
      if (!parent) return { error: `"${rev}" goes back past the first commit` };
      oid = parent;
    }
    const filepath = path.relative(dir, abs).split(path.sep).join('/');
    const { blob } = await git.readBlob({ fs, dir, oid, filepath });
    const decoded = decodeSource(blob, DEFAULT_MAX_BYTES);
    return decoded.ok
      ? { text: decoded.text, commit: oid }
      : { error: `${filepath} at ${rev}: ${decoded.reason}` };
  } catch (e) {
    return {
      error: `${path.relative(dir, abs)} is not in ${rev} (${e instanceof Error ? e.message : String(e)})`,
    };
  }
}
