// Recomputes docs/calibration.md's table of published runs: each estimate against its measurement, and the verdict.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { FIXTURES, ROOT, cli } from './helpers';

interface Run {
  id: string;
  estimate: string[];
  measured: { kind: 'allocated' | 'reserved' | 'oom'; bytes?: number; text: string };
  ran: boolean;
  miss?: string;
}

const RUNS = (
  JSON.parse(fs.readFileSync(path.join(FIXTURES, 'calibration', 'runs.json'), 'utf8')) as { runs: Run[] }
).runs;
const DOC = fs.readFileSync(path.join(ROOT, 'docs', 'calibration.md'), 'utf8');

/** The row the table gives a run: its estimate in GiB, the ratio to the measurement, the verdict. */
function rowOf(
  run: Run,
  j: { perGpu: { peakBytes: number; reservedBytes: number }; targetFit: { verdict: string } },
) {
  const GiB = 2 ** 30;
  const estimate = run.measured.kind === 'reserved' ? j.perGpu.reservedBytes : j.perGpu.peakBytes;
  return {
    estimate: `${(estimate / GiB).toFixed(2)} GiB ${run.measured.kind === 'reserved' ? 'reserved' : 'allocated'}`,
    ratio: run.measured.bytes ? (estimate / run.measured.bytes).toFixed(2) : '-',
    verdict:
      j.targetFit.verdict === 'fits'
        ? 'fits'
        : j.targetFit.verdict === 'short'
          ? 'does not fit'
          : 'undecided',
  };
}

describe('calibration against published runs (docs/calibration.md)', () => {
  for (const run of RUNS)
    it(`${run.id}: the table's row is what the estimate gives now`, async () => {
      // `--json` is fsdp-lens's own: before the script's arguments, when the run gives some after `--`.
      const own = run.estimate.indexOf('--');
      const args =
        own < 0
          ? [...run.estimate, '--json']
          : [...run.estimate.slice(0, own), '--json', ...run.estimate.slice(own)];
      const r = await cli('estimate', ...args);
      assert.equal(r.code, 0, r.err);
      const row = rowOf(run, JSON.parse(r.out));
      const line = DOC.split('\n').find((l) => l.startsWith(`| ${run.id} `));
      assert.ok(line, `no row for ${run.id} in docs/calibration.md`);
      const cells = line.split('|').map((c) => c.trim());
      assert.deepEqual(cells.slice(3, 6), [row.estimate, row.ratio, row.verdict], line);
      // A run that ran is judged to fit, one that ran out of memory not to, within 0.85-1.15 of its measurement;
      // a known miss says why in the table, and stops being one only with the table updated.
      const right =
        (run.ran ? row.verdict === 'fits' : row.verdict === 'does not fit') &&
        (row.ratio === '-' || (Number(row.ratio) >= 0.85 && Number(row.ratio) <= 1.15));
      assert.equal(right, !run.miss, run.miss ?? 'within the band');
      if (run.miss) assert.ok(cells[6]!.startsWith('no'), line);
    });
});
