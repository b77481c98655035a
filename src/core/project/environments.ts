/**
 * The site-packages folders of the Python environments a project uses, found without running Python: a virtual
 * environment in the project (`.venv`, `venv`, `env`, `.env` holding `pyvenv.cfg`), and the active one
 * (`$VIRTUAL_ENV`, `$CONDA_PREFIX`). Helpers of installed packages (`torchtune.training.shard_model`) are read
 * from them, read-only and within the file system's size cap.
 */
import * as path from 'node:path';
import type { FileSystem, Host } from '../vocabulary/host';

/** Folders of a project that hold a virtual environment, by the names `python -m venv` and tools give them. */
const VENV_DIRS = ['.venv', 'venv', 'env', '.env'];

/** The most environments, and Python versions in one, looked at. */
const MAX_PREFIXES = 6;
const MAX_VERSIONS = 8;

/**
 * Packages whose wraps the analysis models itself (PyTorch's own APIs; the frameworks read as configurations):
 * their code is never followed as a helper of the project.
 */
export const MODELLED_PACKAGES = new Set([
  'torch',
  'transformers',
  'accelerate',
  'lightning',
  'lightning_fabric',
  'pytorch_lightning',
  'deepspeed',
  'peft',
  'trl',
  'bitsandbytes',
]);

/**
 * The environment an interpreter belongs to: `prefix/bin/python` (POSIX), `prefix\\Scripts\\python.exe`
 * (a Windows venv), or `prefix\\python.exe` (a Windows conda environment).
 */
export function interpreterPrefix(python: string): string {
  const dir = path.dirname(python);
  return ['bin', 'Scripts'].includes(path.basename(dir)) ? path.dirname(dir) : dir;
}

/**
 * The site-packages folders of the environments of `roots`, of the active one, and of the interpreters the
 * editor names (the Python extension's choice, `fsdpLens.pythonPath`).
 */
export function sitePackages(
  fs: FileSystem,
  roots: readonly string[],
  env: Host['env'],
  interpreters: readonly string[] = [],
): string[] {
  const prefixes: string[] = [];
  for (const p of interpreters) if (path.isAbsolute(p)) prefixes.push(interpreterPrefix(p));
  for (const r of roots)
    for (const d of VENV_DIRS) {
      const p = path.join(r, d);
      if (fs.version(path.join(p, 'pyvenv.cfg')) !== undefined) prefixes.push(p);
    }
  for (const v of [env.VIRTUAL_ENV, env.CONDA_PREFIX])
    if (v && path.isAbsolute(v)) prefixes.push(path.resolve(v));
  const out: string[] = [];
  for (const prefix of [...new Set(prefixes)].slice(0, MAX_PREFIXES)) {
    // POSIX: lib/python3.N/site-packages; Windows: Lib/site-packages.
    const versions = fs
      .entries(path.join(prefix, 'lib'))
      .filter((e) => e.kind === 'dir' && /^python3\.\d+t?$/.test(e.name))
      .map((e) => e.name)
      .sort()
      .slice(0, MAX_VERSIONS);
    const candidates = [
      ...versions.map((v) => path.join(prefix, 'lib', v, 'site-packages')),
      path.join(prefix, 'Lib', 'site-packages'),
    ];
    for (const c of candidates) if (fs.isDirectory(c)) out.push(c);
  }
  return [...new Set(out)];
}

/** Whether a module is one of the packages the analysis models itself (`torch.distributed.fsdp`). */
export function isModelledPackage(module: string): boolean {
  return MODELLED_PACKAGES.has(module.split('.')[0]!);
}
