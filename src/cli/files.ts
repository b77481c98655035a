import * as fs from 'node:fs';
import * as path from 'node:path';
import { decodeSource } from '../core/analysis/input';

/** Reads a Python file for analysis; a message for the user when it cannot be. */
export function readPythonFile(file: string): { text: string } | { error: string } {
  let bytes: Buffer;
  try {
    const st = fs.statSync(file);
    if (st.isDirectory()) return { error: `${file}: is a directory` };
    bytes = fs.readFileSync(file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return {
      error: `${file}: ${code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : 'cannot be read'}`,
    };
  }
  const decoded = decodeSource(bytes);
  if (!decoded.ok) return { error: `${file}: ${decoded.reason}` };
  return { text: decoded.text };
}

const SKIP_DIRS = new Set([
  '.git',
  'node_modules',
  '__pycache__',
  '.venv',
  'venv',
  '.tox',
  '.mypy_cache',
  'site-packages',
  'dist',
  'build',
]);

/** Python files under the given files and directories (directories searched recursively, in name order). */
export function collectPythonFiles(paths: string[]): { files: string[]; missing: string[] } {
  const files: string[] = [];
  const missing: string[] = [];
  const walk = (dir: string, depth: number) => {
    if (depth > 32) return;
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
      const p = path.join(dir, e.name);
      if (e.isDirectory() && !SKIP_DIRS.has(e.name) && !e.name.startsWith('.')) walk(p, depth + 1);
      else if (e.isFile() && e.name.endsWith('.py')) files.push(p);
    }
  };
  for (const p of paths) {
    let st: fs.Stats;
    try {
      st = fs.statSync(p);
    } catch {
      missing.push(p);
      continue;
    }
    if (st.isDirectory()) walk(p, 0);
    else files.push(p);
  }
  return { files, missing };
}
