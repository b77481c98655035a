/**
 * `fsdp-lens fit FILE`: the largest micro-batch and sequence that fit, the fewest GPUs, the cheapest fixes; and
 * the same answers for every GPU of the catalog.
 */
import { advise } from '../../core/whatif/advice';
import type { Estimate } from '../../core/estimator/types';
import { GPUS, gpuBytes } from '../../core/hardware/catalog';
import {
  checkedMinGpus,
  largestFittingOn,
  stepSeconds,
  type Largest,
  type LargestOn,
  type SmallestOn,
} from '../../core/whatif/solve';
import { fmtBytes, fmtCount } from '../../core/vocabulary/bytes';
import { wholeNodesText } from '../../core/vocabulary/words';
import { parseOptions } from '../args';
import { estimateOnDisk, whatIfOf } from '../analyzeFile';
import { EXIT_TEXT } from '../help';
import { EXIT, UsageError, type Streams } from '../io';
import type { CommandSpec } from '../spec';

/** Tokens a step trains on per GPU. */
const tokens = (e: Estimate) => e.setup.microBatch * e.setup.seqLen * e.setup.gradAccum;

/** The largest micro-batch and sequence searched. */
const MAX_MICRO_BATCH = 4096;
const MAX_SEQ = 1 << 21;

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

/** A search's answer in a cell of the per-GPU table. */
function largestCell(a: LargestOn): string {
  switch (a.status) {
    case 'found':
      return a.nextNeedsBytes === null ? `>= ${fmtCount(a.value)}` : fmtCount(a.value);
    case 'not found':
      return 'not solved';
    default:
      return a.status;
  }
}

/** The smallest world size in a cell: `9 (16 on 2 nodes)` when the count leaves a node part-filled. */
function smallestCell(s: SmallestOn): string {
  if (s.status !== 'found') return s.status === 'not found' ? 'not solved' : s.status;
  const n = s.wholeNodes;
  return n ? `${s.worldSize} (${n.worldSize} on ${n.nodes} nodes)` : String(s.worldSize);
}

export async function fitCommand(argv: string[], io: Streams): Promise<number> {
  const { values, positionals } = parseOptions(argv, fitSpec);
  if (positionals.length !== 1) throw new UsageError('fit takes one FILE');
  const result = await estimateOnDisk(positionals[0]!, io);
  if (typeof result === 'number') return result;
  const e = result.estimate;
  const run = whatIfOf(result);
  // Every GPU of the catalog, smallest memory first; the target's answers are its row's.
  const gpus = [...GPUS].sort((a, b) => gpuBytes(a) - gpuBytes(b) || a.id.localeCompare(b.id));
  const ids = gpus.map((g) => g.id);
  const micros = largestFittingOn(run, 'microBatch', e.setup.microBatch, MAX_MICRO_BATCH, ids);
  const seqs = largestFittingOn(run, 'seqLen', e.setup.seqLen, MAX_SEQ, ids);
  // The smallest world size of each GPU, checked against that GPU's own estimate at the count found.
  const smallest = new Map(
    ids.map((gpu) => [
      gpu,
      checkedMinGpus(result.whatIf.minGpus(gpu), (n) => run({ worldSize: n, gpu })?.targetFit),
    ]),
  );
  const perGpu = gpus.map((g) => ({
    gpu: g.id,
    name: g.name,
    memoryBytes: gpuBytes(g),
    verdict: e.fit.find((f) => f.gpu === g.id)?.verdict ?? null,
    largestMicroBatch: micros.get(g.id)!,
    longestSequence: seqs.get(g.id)!,
    smallestWorldSize: smallest.get(g.id)!,
  }));
  const micro = found(micros.get(e.gpu.id));
  const seq = found(seqs.get(e.gpu.id));
  const min = smallest.get(e.gpu.id) ?? {
    status: 'none fits' as const,
    reason: `${e.gpu.id} is not in the catalog`,
  };
  // The changes the advice compares, each re-estimated for its step time; those that fit, cheapest first.
  const fixes = advise(result.whatIf, {}, e)
    .filter((a) => a.id === 'fit')
    .flatMap((a) => a.options)
    .filter((o) => o.verdict === 'fits' && o.whatIf)
    .flatMap((o) => {
      const est = run(o.whatIf!);
      const label = o.whatIf!.gpu ? `on ${o.label}` : o.label;
      // A smaller batch or sequence is a cheaper step of fewer tokens: compared on the tokens the job runs now.
      return est
        ? [{ label, peakBytes: o.peakBytes, stepSeconds: stepSeconds(est) * (tokens(e) / tokens(est)) }]
        : [];
    })
    .sort((a, b) => a.stepSeconds - b.stepSeconds);
  const answer = {
    target: {
      gpu: e.gpu.name,
      worldSize: e.mesh.worldSize,
      verdict: e.targetFit?.verdict ?? null,
      stepSeconds: stepSeconds(e),
    },
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
    largest('Largest micro-batch', micros.get(e.gpu.id), '', `at sequence ${fmtCount(e.setup.seqLen)}`),
    largest('Longest sequence', seqs.get(e.gpu.id), ' tokens', `at micro-batch ${e.setup.microBatch}`),
    min.status === 'found'
      ? `Smallest world size: ${min.worldSize} GPU${min.worldSize === 1 ? '' : 's'}${wholeNodesText(min, ' (')}${min.wholeNodes ? ')' : ''}`
      : `Smallest world size: ${min.reason}`,
  ];
  if (fixes.length) {
    lines.push('Changes that make it fit, cheapest first (step time for the tokens the job trains on now):');
    for (const f of fixes)
      lines.push(
        `  ${f.label.padEnd(36)} step ${f.stepSeconds.toFixed(2)} s (now ${answer.target.stepSeconds.toFixed(2)} s), peak ${fmtBytes(f.peakBytes)}`,
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
