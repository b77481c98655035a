/**
 * Reading the files the command line is given: Python files by extension or shebang, configurations, folders
 * walked for Python files.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { decodeSource, DEFAULT_MAX_BYTES } from '../core/analysis/input';
import { MAX_CONFIG_BYTES } from '../core/frameworks/configDoc';
import { isConfigPath, SKIP_DIRS } from '../core/vocabulary/files';
import { commandLineRoots, confine, huggingFaceRoots } from '../core/project/boundary';
import { findProjectRoot } from '../core/project/project';
import { sitePackages } from '../core/project/environments';
import type { Host } from '../core/vocabulary/host';
import { diskFS, nodeHost } from '../host/disk';

/** File name endings the tools read as Python source without looking inside. */
const PYTHON_EXTENSIONS = new Set(['.py', '.pyi']);

/** A first line that runs the file with Python: `#!/usr/bin/env python3`, `#!/opt/py/bin/python3.12 -u`, `#!python`. */
const PYTHON_SHEBANG = /^#!(?:[^\r\n]*[\s/])?(?:python|pypy)[0-9.]*(?:\s|$)/;

/** Whether a name ends in .py or .pyi (any case). */
export function hasPythonExtension(file: string): boolean {
  return PYTHON_EXTENSIONS.has(path.extname(file).toLowerCase());
}

/** Whether the bytes start with a shebang line naming a Python interpreter. */
export function hasPythonShebang(bytes: Uint8Array): boolean {
  if (bytes[0] !== 0x23 || bytes[1] !== 0x21) return false; // "#!"
  const head = bytes.subarray(0, 256);
  const nl = head.indexOf(0x0a);
  const line = Buffer.from(nl < 0 ? head : head.subarray(0, nl)).toString('latin1');
  return PYTHON_SHEBANG.test(line);
}

/**
 * Reads a Python file for analysis; a message for the user when it cannot be. A file counts as Python when its
 * name ends in .py or .pyi, or when its first line is a Python shebang; anything else (README.md, package.json)
 * is refused before it is decoded, so its contents are never parsed as Python.
 */
export function readPythonFile(file: string): { text: string } | { error: string } {
  let bytes: Buffer;
  try {
    const st = fs.statSync(file);
    if (st.isDirectory()) return { error: `${file}: is a directory` };
    if (!st.isFile()) return { error: `${file}: not a regular file` };
    if (st.size > DEFAULT_MAX_BYTES)
      return { error: `${file}: larger than ${DEFAULT_MAX_BYTES / 1024 / 1024} MiB, the analysis limit` };
    bytes = fs.readFileSync(file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return {
      error: `${file}: ${code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : 'cannot be read'}`,
    };
  }
  if (!hasPythonExtension(file) && !hasPythonShebang(bytes))
    return { error: `${file}: not a Python file (expected a .py or .pyi file, or a python shebang line)` };
  const decoded = decodeSource(bytes);
  if (!decoded.ok) return { error: `${file}: ${decoded.reason}` };
  return { text: decoded.text };
}

/** Reads a configuration file as UTF-8 text; a message for the user when it cannot be. */
export function readConfigFile(file: string): { text: string } | { error: string } {
  let bytes: Buffer;
  try {
    const st = fs.statSync(file);
    if (!st.isFile()) return { error: `${file}: not a regular file` };
    if (st.size > MAX_CONFIG_BYTES) return { error: `${file}: larger than ${MAX_CONFIG_BYTES / 1024} KiB` };
    bytes = fs.readFileSync(file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return { error: `${file}: ${code === 'ENOENT' ? 'no such file' : 'cannot be read'}` };
  }
  const decoded = decodeSource(bytes);
  if (!decoded.ok) return { error: `${file}: ${decoded.reason}` };
  return { text: decoded.text };
}

/** Words without which a YAML, JSON or TOML file configures no FSDP job (read only when one appears). */
const FSDP_CONFIG_WORDS =
  /fsdp|FSDP|data_parallel_shard|dp_shard|\[parallelism\]|zero_optimization|fully_shard/;
/** Launchers a launch script of a distributed job names (its text is linted: a command cut short). */
const LAUNCHER_WORDS =
  /torchrun|accelerate\s+launch|tune\s+run|torch\.distributed\.(?:run|launch)|verl\.trainer/;

/**
 * Python files under the given files and directories (directories searched recursively, in name order, for .py
 * files, and for YAML, JSON and TOML files that mention FSDP: `found` holds those, which are skipped quietly when
 * they configure no framework fsdp-lens reads). Files named explicitly are returned whatever their name: reading
 * them decides whether they are Python or a configuration.
 */
export function collectPythonFiles(paths: string[]): {
  files: string[];
  missing: string[];
  empty: string[];
  found: Set<string>;
} {
  const files: string[] = [];
  const missing: string[] = [];
  const found = new Set<string>();
  /** Directories given that hold no .py file. */
  const empty: string[] = [];
  const mentionsFsdp = (p: string) => {
    try {
      if (fs.statSync(p).size > MAX_CONFIG_BYTES) return false;
      const text = fs.readFileSync(p, 'utf8');
      return (
        FSDP_CONFIG_WORDS.test(text) || (/\.(sh|bash|slurm|sbatch)$/.test(p) && LAUNCHER_WORDS.test(text))
      );
    } catch {
      return false;
    }
  };
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
      else if (e.isFile() && isConfigPath(e.name) && mentionsFsdp(p)) {
        files.push(p);
        found.add(p);
      }
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
    if (st.isDirectory()) {
      const before = files.length;
      walk(p, 0);
      if (files.length === before) empty.push(p);
    } else files.push(p);
  }
  return { files, missing, empty, found };
}

/**
 * The machine as a command-line run sees it: the disk confined to the file's project, repository and working
 * folder, the Hugging Face folders, and the paths the command line names itself (`--config`). Files a project
 * names outside these are refused. `projectRoot` is where the file's imports resolve.
 */
export function commandLineHost(
  file: string | undefined,
  named: string[] = [],
): { host: Host; projectRoot?: string } {
  const disk = nodeHost();
  const own = file ? commandLineRoots(file, disk) : [];
  const roots = [
    ...own,
    ...huggingFaceRoots(disk),
    // Installed packages a helper may come from: read, never run.
    ...sitePackages(disk.fs, own, disk.env),
    ...named.map((p) => path.resolve(p)),
  ];
  return {
    host: nodeHost(confine(diskFS, roots)),
    ...(file ? { projectRoot: findProjectRoot(path.resolve(file), disk) } : {}),
  };
}

/**
 * `commandLineHost` for many files, computed once per folder: the roots of a file depend on its folder alone
 * (its project, its repository, the working folder).
 */
export function commandLineHosts(): (file: string) => { host: Host; projectRoot?: string } {
  const byDir = new Map<string, { host: Host; projectRoot?: string }>();
  return (file) => {
    const dir = path.dirname(path.resolve(file));
    let h = byDir.get(dir);
    if (!h) byDir.set(dir, (h = commandLineHost(file)));
    return h;
  };
}
