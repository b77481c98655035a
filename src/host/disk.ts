/** The disk as the core's file system, for the command line, the extension's closed files and the tests. */
import * as fs from 'node:fs';
import * as os from 'node:os';
import { decodeSource } from '../core/analysis/input';
import type { FileSystem, Host } from '../core/vocabulary/host';

/** Larger files are not read as project inputs. */
const MAX_FILE_BYTES = 2 * 1024 * 1024;

export const diskFS: FileSystem = {
  readFile(file) {
    try {
      const st = fs.statSync(file);
      if (!st.isFile() || st.size > MAX_FILE_BYTES) return undefined;
      const d = decodeSource(fs.readFileSync(file), MAX_FILE_BYTES);
      return d.ok ? d.text : undefined;
    } catch {
      return undefined;
    }
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
  listDir(dir) {
    try {
      return fs.readdirSync(dir);
    } catch {
      return [];
    }
  },
};

/** This process's machine: the disk, its environment, its home and working folders. */
export function nodeHost(fsys: FileSystem = diskFS): Host {
  return { fs: fsys, env: process.env, home: os.homedir(), cwd: process.cwd() };
}
