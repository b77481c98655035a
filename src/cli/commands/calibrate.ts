/** `fsdp-lens calibrate FILE RUN`: a measured run (fsdp_lens_probe.py's JSON) against the file's estimate. */
import * as fs from 'node:fs';
import { compareMeasured, readMeasuredRun, type PhaseComparison } from '../../core/report/measured';
import { fmtBytes } from '../../core/vocabulary/bytes';
import { parseOptions } from '../args';
import { estimateOnDisk } from '../analyzeFile';
import { EXIT_TEXT } from '../help';
import { EXIT, UsageError, type Streams } from '../io';
import type { CommandSpec } from '../spec';

/** A probe's file is small; anything larger is not one. */
const MAX_RUN_BYTES = 1 << 20;

export const calibrateSpec = {
  name: 'calibrate',
  args: 'FILE RUN',
  summary:
    "A measured run beside the file's estimate: allocated peaks phase by phase, and the reserved peak.",
  about:
    'RUN is the JSON that fsdp_lens_probe.py (shipped beside the CLI in dist/) writes on a rank of a real run: the allocated and reserved peaks of each phase of a step. Phases named forward, loss, backward, optimizer or step are compared with the same phases of the estimate (a forward that computes the loss holds the loss too); the reserved peak with the estimate of what the caching allocator keeps. Each ratio is estimated / measured.',
  options: { json: { type: 'boolean' } },
  flags: () => [{ flag: '--json', text: 'The comparison as JSON.' }],
  examples: [
    { line: 'fsdp-lens calibrate train.py run.rank0.json', does: 'Estimated against measured, per phase.' },
  ],
  exits: { ok: EXIT_TEXT.ok, usage: EXIT_TEXT.usage, unknownModel: EXIT_TEXT.unknownModel },
} satisfies CommandSpec;

export async function calibrateCommand(argv: string[], io: Streams): Promise<number> {
  const { values, positionals } = parseOptions(argv, calibrateSpec);
  if (positionals.length !== 2) throw new UsageError("calibrate takes a FILE and a RUN (the probe's JSON)");
  const [file, runFile] = positionals as [string, string];
  let runText: string;
  try {
    if (fs.statSync(runFile).size > MAX_RUN_BYTES) throw new Error(`larger than ${MAX_RUN_BYTES >> 10} KiB`);
    runText = fs.readFileSync(runFile, 'utf8');
  } catch (e) {
    io.err.write(`fsdp-lens: ${runFile}: ${e instanceof Error ? e.message : String(e)}\n`);
    return EXIT.usage;
  }
  const run = readMeasuredRun(runText);
  if ('error' in run) {
    io.err.write(`fsdp-lens: ${runFile}: ${run.error}\n`);
    return EXIT.usage;
  }
  const result = await estimateOnDisk(file, io);
  if (typeof result === 'number') return result;
  const e = result.estimate;
  const c = compareMeasured(e, run);
  if (values.json) {
    io.out.write(
      `${JSON.stringify({ run: { rank: run.rank, worldSize: run.worldSize, device: run.device }, ...c }, null, 2)}\n`,
    );
    return EXIT.ok;
  }
  const b = (n: number | null) => (n === null ? 'not measured' : fmtBytes(n));
  const row = (p: PhaseComparison) =>
    `  ${p.phase.padEnd(20)} estimated ${b(p.estimatedBytes).padStart(9)}  measured ${b(p.measuredBytes).padStart(12)}  ${p.ratio === null ? '' : `ratio ${p.ratio.toFixed(2)}`}`;
  const lines = [
    `Estimate: ${e.mesh.worldSize} x ${e.gpu.name}, micro-batch ${e.setup.microBatch}, sequence ${e.setup.seqLen}`,
    `Run: rank ${run.rank} of ${run.worldSize}${run.device ? ` on ${run.device}` : ''}${run.worldSize !== e.mesh.worldSize ? ` (the estimate is for ${e.mesh.worldSize} GPUs: give the run's world size to compare like with like)` : ''}`,
    'Allocated peak by phase:',
    ...c.phases.map(row),
    row(c.reserved),
  ];
  if (c.unknownPhases.length)
    lines.push(
      `Phases with no estimate counterpart: ${c.unknownPhases.join(', ')} (name them forward, loss, backward, optimizer or step)`,
    );
  io.out.write(`${lines.join('\n')}\n`);
  return EXIT.ok;
}
