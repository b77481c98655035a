// Compares test/gpu/calibrate.py's measured peaks with `fsdp-lens estimate` of the same cases: allocated against
// allocated, reserved against the estimate with its reserve. Usage: node test/gpu/compare.mjs RESULTS.json
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';

const results = JSON.parse(fs.readFileSync(process.argv[2] ?? 'calibration-results.json', 'utf8'));
const GiB = 2 ** 30;
const rows = [
  [
    'case',
    'measured allocated',
    'estimated',
    'ratio',
    'measured reserved',
    'estimated with reserve',
    'ratio',
  ],
];
for (const [id, { case: c, result: r }] of Object.entries(results)) {
  if (!r.ok) {
    rows.push([id, `failed: ${String(r.error).split('\n').pop()}`, '', '', '', '', '']);
    continue;
  }
  let out;
  try {
    out = execFileSync(process.execPath, ['dist/cli.js', 'estimate', ...c.estimate, '--json'], {
      encoding: 'utf8',
    });
  } catch (e) {
    out = e.stdout ?? '';
  }
  const j = JSON.parse(out);
  const alloc = j.perGpu.peakBytes;
  // The fit's test: peak x 1.10 + 1 GiB (src/core/estimator/fit.ts).
  const reserved = alloc * 1.1 + GiB;
  const f = (b) => (b / GiB).toFixed(2);
  rows.push([
    id,
    f(r.allocatedPeakBytes),
    f(alloc),
    (alloc / r.allocatedPeakBytes).toFixed(3),
    f(r.reservedPeakBytes),
    f(reserved),
    (reserved / r.reservedPeakBytes).toFixed(3),
  ]);
}
for (const row of rows) console.log(`| ${row.join(' | ')} |`);
