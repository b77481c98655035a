/** Snapshot pickles for tests, written by test/fixtures/snapshot/make_snapshot.py with Python's standard library. */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { tools } from '../tools';
import { FIXTURES, tempDir } from './helpers';

/** Any Python 3 (FSDP_LENS_PYTHON, else python3 on PATH): suites that use it skip without one. */
export const PYTHON = tools().python3.python ?? process.env.FSDP_LENS_PYTHON ?? 'python3';
const MAKE = path.join(FIXTURES, 'snapshot', 'make_snapshot.py');

/** Writes a snapshot pickle from a spec (make_snapshot.py says what it takes); its path and its opcode counts. */
export function makeSnapshot(
  spec: object,
  name = 'snapshot.pickle',
): { file: string; ops: Record<string, number> } {
  const file = path.join(tempDir('fsdp-lens-snapshot-'), name);
  const out = execFileSync(PYTHON, [MAKE, file], {
    input: JSON.stringify(spec),
    maxBuffer: 1 << 20,
  }).toString();
  return { file, ops: JSON.parse(out) as Record<string, number> };
}

/** A file's bytes in chunks of `size`, one Buffer reused from chunk to chunk (as the command line reads). */
export function* chunksOf(file: string, size: number): Generator<Uint8Array> {
  const fd = fs.openSync(file, 'r');
  try {
    const buf = Buffer.alloc(size);
    for (let pos = 0; ;) {
      const n = fs.readSync(fd, buf, 0, size, pos);
      if (n === 0) return;
      pos += n;
      yield buf.subarray(0, n);
    }
  } finally {
    fs.closeSync(fd);
  }
}
