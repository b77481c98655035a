/** The versions of Transformers, Accelerate and TRL a project pins, from lock files and requirements. */
import * as path from 'node:path';
import type { PinnedVersions } from '../vocabulary/versions';
import type { ProjectFS } from './project';

const PACKAGES = ['transformers', 'accelerate', 'trl', 'torch'] as const;

/**
 * The versions of Transformers, Accelerate and TRL a project pins: lock files first (uv.lock, poetry.lock), then
 * exact or lower-bound requirements (`requirements*.txt`, `pyproject.toml`). A range keeps its lower bound.
 */
export function pinnedVersions(fsys: ProjectFS, root: string): PinnedVersions {
  const out: PinnedVersions = {};
  const set = (
    pkg: (typeof PACKAGES)[number],
    version: string,
    file: string,
    line: number,
    floor = false,
  ) => {
    if (!out[pkg])
      out[pkg] = {
        version,
        where: `${path.relative(root, file) || path.basename(file)}:${line + 1}`,
        ...(floor ? { floor: true } : {}),
      };
  };
  for (const lock of ['uv.lock', 'poetry.lock']) {
    const file = path.join(root, lock);
    const text = fsys.readFile(file);
    if (!text) continue;
    const lines = text.split('\n');
    for (let i = 0; i + 1 < lines.length; i++) {
      const m = /^name\s*=\s*"([\w.-]+)"/.exec(lines[i]!);
      const v = /^version\s*=\s*"([^"]+)"/.exec(lines[i + 1]!);
      const pkg =
        m && (PACKAGES as readonly string[]).includes(m[1]!.toLowerCase())
          ? (m[1]!.toLowerCase() as (typeof PACKAGES)[number])
          : undefined;
      if (pkg && v) set(pkg, v[1]!, file, i + 1);
    }
  }
  const reqFiles = fsys
    .entries(root)
    .filter((e) => e.kind === 'file')
    .map((e) => e.name)
    .filter((n) => /^requirements.*\.(txt|in)$/.test(n) || n === 'pyproject.toml' || n === 'setup.py')
    .sort();
  const spec = new RegExp(
    `(?:^|["'\\s])(${PACKAGES.join('|')})(?:\\[[^\\]]*\\])?\\s*(==|~=|>=|===)\\s*([0-9][\\w.]*)`,
    'i',
  );
  for (const name of reqFiles) {
    const file = path.join(root, name);
    const text = fsys.readFile(file);
    if (!text) continue;
    // Optional extras and dependency groups (`[project.optional-dependencies]`, `extras_require`) are not what the
    // project runs by default: their pins are skipped.
    let optional = false;
    text.split('\n').forEach((line, i) => {
      if (/^\s*#/.test(line)) return;
      const section = /^\s*\[([^\]]+)\]\s*$/.exec(line);
      if (name === 'pyproject.toml' && section)
        optional = /optional-dependencies|dependency-groups|\.group\.|dev-dependencies|extras/.test(
          section[1]!,
        );
      if (
        name === 'setup.py' &&
        /\bextras_require\b|_REQUIRES\s*=|_requires\s*=/.test(line) &&
        !/install_requires/.test(line)
      )
        optional = true;
      if (optional) return;
      const m = spec.exec(line);
      if (m) set(m[1]!.toLowerCase() as (typeof PACKAGES)[number], m[3]!, file, i, m[2] === '>=');
    });
  }
  return out;
}
