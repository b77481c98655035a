/** Package versions a project pins (Transformers, Accelerate, TRL, PyTorch), and how they compare. */

/** A pinned version and where it is written (`requirements.txt:3`). */
export interface VersionPin {
  version: string;
  where: string;
  /** A lower bound (`torch>=2.4`): the oldest release the project allows, not the one it runs. */
  floor?: boolean;
}

export interface PinnedVersions {
  transformers?: VersionPin;
  accelerate?: VersionPin;
  trl?: VersionPin;
  torch?: VersionPin;
}

/** Whether version `v` is at least `min` (numeric dotted comparison; pre-release suffixes ignored). */
export function versionAtLeast(v: string, min: string): boolean {
  const a = v.split(/[.+-]/).map((x) => parseInt(x, 10) || 0);
  const b = min.split('.').map((x) => parseInt(x, 10) || 0);
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) > (b[i] ?? 0);
  }
  return true;
}
