/**
 * What the analysis needs of the machine it runs on, passed in at the edge: the CLI gives the disk and its
 * environment, the editor its open documents over the disk, tests what they build. The core reads files only
 * through `FileSystem` and the environment only through `Host`.
 */

/** One entry of a directory listing: a symbolic link carries the kind of what it points to. */
export interface DirEntry {
  name: string;
  kind: 'file' | 'dir' | 'other';
  link: boolean;
}

/** File access: reads, versions for caching, directory listings. */
export interface FileSystem {
  /** UTF-8 text, or undefined when missing, not a regular file, binary, too large or outside the workspace. */
  readFile(file: string): string | undefined;
  /** Why `readFile` gives nothing for `file`, in words that never quote its contents; undefined when it reads. */
  refusal(file: string): string | undefined;
  /** A key that changes when the file changes (mtime and size), or undefined when missing. */
  version(file: string): string | undefined;
  isDirectory(dir: string): boolean;
  /** The entries of a directory (none when it cannot be listed). */
  entries(dir: string): DirEntry[];
  /** The path with every symbolic link resolved, or undefined when it does not exist. */
  realPath(p: string): string | undefined;
}

export interface Host {
  fs: FileSystem;
  /** Environment variables the analysis reads (`HF_HOME`, `HF_HUB_CACHE`). */
  env: Readonly<Record<string, string | undefined>>;
  /** The user's home folder (the Hugging Face cache's default place; never taken as a project). */
  home: string;
  /** Where relative paths given on a command line resolve. */
  cwd: string;
}

/** A file system with nothing in it: what the core sees when the caller gives none. */
export const NO_FILES: FileSystem = {
  readFile: () => undefined,
  refusal: () => 'no such file',
  version: () => undefined,
  isDirectory: () => false,
  entries: () => [],
  realPath: () => undefined,
};

/** A host with no files and no environment (pure analyses, tests of one file). */
export const NO_HOST: Host = { fs: NO_FILES, env: {}, home: '/nonexistent', cwd: '/' };
