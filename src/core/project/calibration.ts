/**
 * The project's calibration file, `.fsdp-lens/calibration.json`: the allocator's allowance and the CUDA context
 * measured on each of the user's clusters (`fsdp-lens calibrate --save`), which fit verdicts on that GPU use and
 * name. Read leniently (an entry that does not check out is skipped), written by replacing one cluster's entry.
 */
import * as path from 'node:path';
import type { Calibration } from '../hardware/calibration';
import { findGpu } from '../hardware/catalog';
import type { ProjectFS } from './project';

/** Where the calibration file lives under a project root. */
export const CALIBRATION_FILE = path.join('.fsdp-lens', 'calibration.json');

/** A calibration file is small; one larger than this is not read. */
const MAX_BYTES = 256 * 1024;

/** An allowance beyond this is no measurement of fragmentation (a run that cached a whole other model). */
const MAX_FRAGMENTATION = 1;

/** One cluster's entry as the file keeps it. */
interface Entry {
  cluster: string;
  gpu: string;
  fragmentation: number;
  contextBytes?: number;
  from: string;
  measured?: string;
}

/** The entries of a calibration file's text, checked; those that do not check out are left out. */
function entriesOf(text: string | undefined): Entry[] {
  if (!text || text.length > MAX_BYTES) return [];
  let d: unknown;
  try {
    d = JSON.parse(text);
  } catch {
    return [];
  }
  const clusters = (d as { clusters?: unknown })?.clusters;
  if (!Array.isArray(clusters)) return [];
  const out: Entry[] = [];
  for (const c of clusters.slice(0, 64)) {
    const e = c as Partial<Entry>;
    if (
      typeof e.cluster !== 'string' ||
      typeof e.gpu !== 'string' ||
      !findGpu(e.gpu) ||
      typeof e.fragmentation !== 'number' ||
      !(e.fragmentation >= 0 && e.fragmentation <= MAX_FRAGMENTATION)
    )
      continue;
    const context =
      typeof e.contextBytes === 'number' && e.contextBytes >= 0 && e.contextBytes < 2 ** 40
        ? e.contextBytes
        : undefined;
    out.push({
      cluster: e.cluster.slice(0, 80),
      gpu: findGpu(e.gpu)!.id,
      fragmentation: e.fragmentation,
      ...(context !== undefined ? { contextBytes: context } : {}),
      from: typeof e.from === 'string' ? e.from.slice(0, 200) : 'a measured run',
      ...(typeof e.measured === 'string' ? { measured: e.measured.slice(0, 40) } : {}),
    });
  }
  return out;
}

/** The calibrations of the project at `root`, each for the GPU it was measured on. */
export function readCalibrations(fs: ProjectFS, root: string): Calibration[] {
  return entriesOf(fs.readFile(path.join(root, CALIBRATION_FILE))).map((e) => ({
    cluster: e.cluster,
    gpu: e.gpu,
    fragmentation: e.fragmentation,
    ...(e.contextBytes !== undefined ? { contextBytes: e.contextBytes } : {}),
    file: CALIBRATION_FILE.split(path.sep).join('/'),
    from: e.from,
  }));
}

/**
 * The calibration file's new text with `entry` in place of the cluster's entry of the same name (first, so a later
 * fit on that GPU takes it), the others kept.
 */
export function calibrationWithEntry(text: string | undefined, entry: Entry): string {
  const others = entriesOf(text).filter((e) => e.cluster !== entry.cluster);
  return `${JSON.stringify({ fsdpLensCalibration: 1, clusters: [entry, ...others] }, null, 2)}\n`;
}
