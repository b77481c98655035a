/** The disk as the core's file system, for the command line, the extension's closed files and the tests. */
import * as fs from 'node:fs';
import * as os from 'node:os';
import { decodeSource, DEFAULT_MAX_BYTES } from '../core/analysis/input';
import type { DirEntry, FileSystem, Host } from '../core/vocabulary/host';

/** Why a path is not read, from its status alone (nothing is opened unless it is a regular file of a fair size). */
function statRefusal(file: string): { refusal: string } | { size: number } {
  let st: fs.Stats;
  try {
    st = fs.statSync(file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return { refusal: code === 'EACCES' ? 'permission denied' : 'no such file' };
  }
  // FIFOs, sockets and devices (`/dev/zero`) are never opened: reading them can block or never end.
  if (!st.isFile()) return { refusal: st.isDirectory() ? 'a directory' : 'not a regular file' };
  if (st.size > DEFAULT_MAX_BYTES) return { refusal: `larger than ${DEFAULT_MAX_BYTES / 1024 / 1024} MiB` };
  return { size: st.size };
}

function read(file: string): { text: string } | { refusal: string } {
  const st = statRefusal(file);
  if ('refusal' in st) return st;
  let bytes: Buffer;
  try {
    bytes = fs.readFileSync(file);
  } catch {
    return { refusal: 'cannot be read' };
  }
  const d = decodeSource(bytes);
  return d.ok ? { text: d.text } : { refusal: d.reason };
}

export const diskFS: FileSystem = {
  readFile(file) {
    const r = read(file);
    return 'text' in r ? r.text : undefined;
  },
  refusal(file) {
    const r = read(file);
    return 'refusal' in r ? r.refusal : undefined;
  },
  version(file) {
    try {
      const st = fs.statSync(file);
      return st.isFile() ? `${st.mtimeMs}:${st.size}` : undefined;
    } catch {
      return undefined;
    }
  },
  isDirectory(dir) {
    try {
      return fs.statSync(dir).isDirectory();
    } catch {
      return false;
    }
  },
  entries(dir) {
    let list: fs.Dirent[];
    try {
      list = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return [];
    }
    return list.map((e): DirEntry => {
      if (!e.isSymbolicLink())
        return { name: e.name, kind: e.isFile() ? 'file' : e.isDirectory() ? 'dir' : 'other', link: false };
      let kind: DirEntry['kind'] = 'other';
      try {
        const st = fs.statSync(`${dir}/${e.name}`);
        kind = st.isFile() ? 'file' : st.isDirectory() ? 'dir' : 'other';
      } catch {
        // A dangling link.
      }
      return { name: e.name, kind, link: true };
    });
  },
  realPath(p) {
    try {
      return fs.realpathSync.native(p);
    } catch {
      return undefined;
    }
  },
};

/** This process's machine: the disk, its environment, its home and working folders. */
export function nodeHost(fsys: FileSystem = diskFS): Host {
  return { fs: fsys, env: process.env, home: os.homedir(), cwd: process.cwd() };
}
