/** `fsdp-lens fit FILE`: the largest micro-batch and sequence that fit, the fewest GPUs, the cheapest fixes. */
import { advise } from '../../core/whatif/advice';
import type { Estimate } from '../../core/estimator/types';
import { largestFitting, stepSeconds, type Largest } from '../../core/whatif/solve';
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
    'What fits the target GPU: the largest micro-batch and sequence, the fewest GPUs, the cheapest fixes.',
  about:
    "The largest micro-batch (at the file's sequence) and the longest sequence (at its micro-batch) whose estimate fits, each checked against the next value's, which does not; the smallest world size that fits, on whole nodes too; and the changes that make the plan fit, cheapest first by the step time they lead to (compute with recomputation, and transfers left exposed) for the tokens the job trains on now: a smaller batch is a cheaper step of fewer tokens.",
  options: { json: { type: 'boolean' } },
  flags: () => [{ flag: '--json', text: 'The answers as JSON.' }],
  examples: [{ line: 'fsdp-lens fit train.py', does: 'How far the job can grow, and what makes it fit.' }],
  exits: { ok: EXIT_TEXT.ok, usage: EXIT_TEXT.usage, unknownModel: EXIT_TEXT.unknownModel },
} satisfies CommandSpec;

export async function fitCommand(argv: string[], io: Streams): Promise<number> {
  const { values, positionals } = parseOptions(argv, fitSpec);
  if (positionals.length !== 1) throw new UsageError('fit takes one FILE');
  const result = await estimateOnDisk(positionals[0]!, io);
  if (typeof result === 'number') return result;
  const e = result.estimate;
  const run = whatIfOf(result);
  const micro = largestFitting(run, 'microBatch', e.setup.microBatch, MAX_MICRO_BATCH);
  const seq = largestFitting(run, 'seqLen', e.setup.seqLen, MAX_SEQ);
  const min = result.minGpus;
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
    smallestWorldSize: min.worldSize,
    ...(min.wholeNodes ? { smallestWholeNodes: min.wholeNodes } : {}),
    fixes,
  };
  if (values.json) {
    io.out.write(`${JSON.stringify(answer, null, 2)}\n`);
    return EXIT.ok;
  }
  const largest = (what: string, l: Largest | null, unit: string, at: string) =>
    l
      ? `${what}: ${fmtCount(l.value)}${unit} ${at}${l.nextNeedsBytes !== null ? ` (${fmtCount(l.value + 1)} needs ${fmtBytes(l.nextNeedsBytes)})` : `, the most searched`}`
      : `${what}: none fits, or the fit is undecided ${at}`;
  const lines = [
    `${e.mesh.worldSize} x ${e.gpu.name}, now: ${answer.target.verdict ?? 'no verdict'} (micro-batch ${e.setup.microBatch}, sequence ${fmtCount(e.setup.seqLen)})`,
    largest('Largest micro-batch', micro, '', `at sequence ${fmtCount(e.setup.seqLen)}`),
    largest('Longest sequence', seq, ' tokens', `at micro-batch ${e.setup.microBatch}`),
    min.worldSize !== null
      ? `Smallest world size: ${min.worldSize} GPU${min.worldSize === 1 ? '' : 's'}${wholeNodesText(min, ' (')}${min.wholeNodes ? ')' : ''}`
      : `Smallest world size: ${min.reason ?? 'none fits'}`,
  ];
  if (fixes.length) {
    lines.push('Changes that make it fit, cheapest first (step time for the tokens the job trains on now):');
    for (const f of fixes)
      lines.push(
        `  ${f.label.padEnd(36)} step ${f.stepSeconds.toFixed(2)} s (now ${answer.target.stepSeconds.toFixed(2)} s), peak ${fmtBytes(f.peakBytes)}`,
      );
  }
  io.out.write(`${lines.join('\n')}\n`);
  return EXIT.ok;
}
