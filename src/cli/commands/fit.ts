/**
 * `fsdp-lens fit FILE`: the largest micro-batch and sequence that fit, the fewest GPUs, the cheapest fixes; and
 * the same answers for every GPU of the catalog.
 */
import { fitReport } from '../../core/whatif/fitReport';
import { largestCell, smallestCell } from '../../core/report/fitCells';
import type { Largest, LargestOn } from '../../core/whatif/solve';
import { fmtBytes, fmtCount } from '../../core/vocabulary/bytes';
import { wholeNodesText } from '../../core/vocabulary/words';
import { parseOptions } from '../args';
import { estimateOnDisk } from '../analyzeFile';
import { EXIT_TEXT } from '../help';
import { EXIT, UsageError, type Streams } from '../io';
import type { CommandSpec } from '../spec';

export const fitSpec = {
  name: 'fit',
  args: 'FILE',
  summary:
    'What fits on each GPU: the largest micro-batch and sequence, the fewest GPUs, the cheapest fixes.',
  about:
    "The largest micro-batch (at the file's sequence) and the longest sequence (at its micro-batch) whose estimate fits, each checked against the next value's, which does not; the smallest world size that fits, on whole nodes too; and the changes that make the plan fit, cheapest first by the step time they lead to (compute with recomputation, and transfers left exposed) for the tokens the job trains on now: a smaller batch is a cheaper step of fewer tokens. Then a table of every GPU of the catalog at the file's world size: its verdict now, its largest micro-batch and longest sequence (each checked on that GPU at the value and the next) and its smallest world size (checked on that GPU at that count); a cell where a verdict on the way is undecided says undecided.",
  options: { json: { type: 'boolean' } },
  flags: () => [{ flag: '--json', text: 'The answers as JSON.' }],
  examples: [{ line: 'fsdp-lens fit train.py', does: 'How far the job can grow, and what makes it fit.' }],
  exits: { ok: EXIT_TEXT.ok, usage: EXIT_TEXT.usage, unknownModel: EXIT_TEXT.unknownModel },
} satisfies CommandSpec;

/** A search's answer as the target's lines use it: the largest value, or null where there is none. */
const found = (a: LargestOn | undefined): Largest | null =>
  a?.status === 'found' ? { value: a.value, nextNeedsBytes: a.nextNeedsBytes, cap: a.cap } : null;

export async function fitCommand(argv: string[], io: Streams): Promise<number> {
  const { values, positionals } = parseOptions(argv, fitSpec);
  if (positionals.length !== 1) throw new UsageError('fit takes one FILE');
  const result = await estimateOnDisk(positionals[0]!, io);
  if (typeof result === 'number') return result;
  const e = result.estimate;
  const report = fitReport(result.whatIf, e);
  const perGpu = report.perGpu;
  const row = perGpu.find((r) => r.gpu === e.gpu.id);
  const micro = found(row?.largestMicroBatch);
  const seq = found(row?.longestSequence);
  const min = row?.smallestWorldSize ?? {
    status: 'none fits' as const,
    reason: `${e.gpu.id} is not in the catalog`,
  };
  const fixes = report.changes;
  const answer = {
    target: report.target,
    largestMicroBatch: micro,
    longestSequence: seq,
    smallestWorldSize: min.status === 'found' ? min.worldSize : null,
    ...(min.status === 'found' && min.wholeNodes ? { smallestWholeNodes: min.wholeNodes } : {}),
    fixes,
    perGpu,
  };
  if (values.json) {
    io.out.write(`${JSON.stringify(answer, null, 2)}\n`);
    return EXIT.ok;
  }
  const largest = (what: string, a: LargestOn | undefined, unit: string, at: string) => {
    if (a?.status === 'found')
      return `${what}: ${fmtCount(a.value)}${unit} ${at}${a.nextNeedsBytes !== null ? ` (${fmtCount(a.value + 1)} needs ${fmtBytes(a.nextNeedsBytes)})` : `, the most searched`}`;
    const why =
      a?.status === 'undecided'
        ? `undecided ${at} (the fit at ${fmtCount(a.at)} is undecided)`
        : a?.status === 'no estimate'
          ? `none found ${at} (no estimate at ${fmtCount(a.at)})`
          : a?.status === 'not found'
            ? `not solved ${at} (${fmtCount(a.lo)} fits, ${fmtCount(a.hi)} does not; the search stopped between)`
            : `none fits ${at}`;
    return `${what}: ${why}`;
  };
  const lines = [
    `${e.mesh.worldSize} x ${e.gpu.name}, now: ${answer.target.verdict ?? 'no verdict'} (micro-batch ${e.setup.microBatch}, sequence ${fmtCount(e.setup.seqLen)})`,
    largest('Largest micro-batch', row?.largestMicroBatch, '', `at sequence ${fmtCount(e.setup.seqLen)}`),
    largest('Longest sequence', row?.longestSequence, ' tokens', `at micro-batch ${e.setup.microBatch}`),
    min.status === 'found'
      ? `Smallest world size: ${min.worldSize} GPU${min.worldSize === 1 ? '' : 's'}${wholeNodesText(min, ' (')}${min.wholeNodes ? ')' : ''}`
      : `Smallest world size: ${min.reason}`,
  ];
  if (fixes.length) {
    lines.push('Changes that make it fit, cheapest first (step time for the tokens the job trains on now):');
    for (const f of fixes)
      lines.push(
        `  ${f.label.padEnd(36)} step ${f.unmodelledCost ? '>= ' : ''}${f.stepSeconds.toFixed(2)} s (now ${answer.target.stepSeconds.toFixed(2)} s), peak ${fmtBytes(f.peakBytes)}${f.unmodelledCost ? `; ${f.unmodelledCost}` : ''}`,
      );
  }
  lines.push(
    '',
    `Per GPU of the catalog at ${e.mesh.worldSize} GPUs (micro-batch ${e.setup.microBatch}, sequence ${fmtCount(e.setup.seqLen)}; * the target):`,
  );
  const cells = [
    ['GPU', 'memory', 'now', 'micro-batch', 'sequence', 'fewest GPUs'],
    ...perGpu.map((r) => [
      r.gpu,
      fmtBytes(r.memoryBytes),
      r.verdict === 'short' ? 'does not fit' : (r.verdict ?? 'no verdict'),
      largestCell(r.largestMicroBatch),
      largestCell(r.longestSequence),
      smallestCell(r.smallestWorldSize),
    ]),
  ];
  const widths = cells[0]!.map((_, i) => Math.max(...cells.map((c) => c[i]!.length)));
  cells.forEach((c, i) => {
    const mark = i > 0 && perGpu[i - 1]!.gpu === e.gpu.id ? '* ' : '  ';
    lines.push(`${mark}${c.map((x, j) => (j === c.length - 1 ? x : x.padEnd(widths[j]!))).join('  ')}`);
  });
  io.out.write(`${lines.join('\n')}\n`);
  return EXIT.ok;
}
