/** `fsdp-lens diff A B`: why the peak, the state and the traffic differ between two versions of a job. */
import * as fs from 'node:fs';
import type { EstimateResult } from '../../core/resolve/analyze';
import { estimateDelta, onModelOf, type EstimateDelta } from '../../core/whatif/delta';
import { fmtBytes } from '../../core/vocabulary/bytes';
import { loadPython } from '../../host/grammar';
import { fileAtRevision } from '../../host/gitRevision';
import { parseOptions } from '../args';
import { estimateOfFile, readInputFile, whatIfOf } from '../analyzeFile';
import { EXIT_TEXT } from '../help';
import { EXIT, UsageError, type Streams } from '../io';
import type { CommandSpec } from '../spec';

export const diffSpec = {
  name: 'diff',
  args: 'A B | REV FILE | REV1 REV2 FILE',
  summary: 'Why the peak, state and traffic differ between two versions of a job, cause by cause.',
  about:
    "A and B are two scripts or configurations of the same model (a file and its edited copy, two launch configs), or one file at a revision of its git repository and now (REV FILE), or at two revisions (REV1 REV2 FILE): HEAD, a branch, a tag or a commit, with ~N or ^, read from the repository's objects without running git (the other files of the project are read as they are now). B's inputs are applied to A's plan one cause at a time, in this order: precision, checkpointing, loss, batch, sequence, world size, model parallelism, optimizer, other inputs; what is left is the plan's own (units, wrap API, reshard, offload, fine-tuning). The causes add up to the total.",
  options: {
    json: { type: 'boolean' },
    'fail-if-peak-increases': { type: 'string' },
  },
  flags: () => [
    { flag: '--json', text: 'The delta as JSON: both sides and each cause with its bytes.' },
    {
      flag: '--fail-if-peak-increases P%',
      text: "Exit 1 when B's peak per GPU is more than P percent above A's (0% fails on any increase).",
    },
  ],
  examples: [
    { line: 'fsdp-lens diff train_old.py train.py', does: 'What changed the peak, and by how much.' },
    { line: 'fsdp-lens diff HEAD~1 train.py', does: 'What the last commit and the edits since did to it.' },
    {
      line: 'fsdp-lens diff main.yaml branch.yaml --fail-if-peak-increases 5%',
      does: 'In CI: fail when a change raises the peak by more than 5%.',
    },
  ],
  exits: {
    ok: EXIT_TEXT.ok,
    findings: 'with --fail-if-peak-increases: the peak rose by more than the threshold',
    usage: EXIT_TEXT.usage,
    unknownModel: 'one of the files gives no estimate (the message says why)',
  },
} satisfies CommandSpec;

export async function diffCommand(argv: string[], io: Streams): Promise<number> {
  const { values, positionals } = parseOptions(argv, diffSpec);
  if (positionals.length !== 2 && positionals.length !== 3)
    throw new UsageError('diff takes two files (A B), or revisions and a file (REV FILE, REV1 REV2 FILE)');
  const threshold = values['fail-if-peak-increases'];
  const limit = threshold === undefined ? undefined : /^(\d+(?:\.\d+)?)%?$/.exec(threshold.trim())?.[1];
  if (threshold !== undefined && limit === undefined)
    throw new UsageError(`diff: --fail-if-peak-increases takes a percentage such as 5%, not "${threshold}"`);
  const sides = await sidesOf(positionals);
  if ('error' in sides) {
    io.err.write(`fsdp-lens: ${sides.error}\n`);
    return EXIT.usage;
  }
  const grammar = await loadPython();
  const results: Extract<EstimateResult, { ok: true }>[] = [];
  for (const { file, label, read } of sides) {
    const r = estimateOfFile(grammar, file, read.text);
    if (!r.ok) {
      io.err.write(`fsdp-lens: ${label}: no estimate: ${r.reason}\n`);
      return r.unknownModel ? EXIT.unknownModel : EXIT.usage;
    }
    results.push(r.result);
  }
  const [a, b] = results as [(typeof results)[0], (typeof results)[0]];
  const delta = estimateDelta(a.estimate, b.estimate, whatIfOf(a), onModelOf(a.input, b.input));
  if (values.json) io.out.write(`${JSON.stringify(delta, null, 2)}\n`);
  else io.out.write(deltaText(delta, [sides[0]!.label, sides[1]!.label]));
  if (limit === undefined) return EXIT.ok;
  const rise = (delta.after.peakBytes - delta.before.peakBytes) / Math.max(1, delta.before.peakBytes);
  return rise * 100 > Number(limit) ? EXIT.findings : EXIT.ok;
}

/**
 * What the two sides are: two files, or one file at a revision and now, or at two revisions (read from the
 * repository's objects); the text of each, and how it is named.
 */
async function sidesOf(
  args: string[],
): Promise<{ file: string; label: string; read: { text: string } }[] | { error: string }> {
  const readFile = readInputFile;
  const atRevision = async (rev: string, file: string) => {
    const r = await fileAtRevision(file, rev);
    return 'error' in r
      ? r
      : { file, label: `${file} at ${rev} (${r.commit.slice(0, 8)})`, read: { text: r.text } };
  };
  if (args.length === 3) {
    const [r1, r2, file] = args as [string, string, string];
    const a = await atRevision(r1, file);
    if ('error' in a) return a;
    const b = await atRevision(r2, file);
    return 'error' in b ? b : [a, b];
  }
  const [x, y] = args as [string, string];
  if (!fs.existsSync(x) && fs.existsSync(y)) {
    const a = await atRevision(x, y);
    if ('error' in a) return a;
    const b = readFile(y);
    return 'error' in b ? b : [a, { file: y, label: `${y} now`, read: b }];
  }
  const a = readFile(x);
  if ('error' in a) return a;
  const b = readFile(y);
  return 'error' in b
    ? b
    : [
        { file: x, label: x, read: a },
        { file: y, label: y, read: b },
      ];
}

/** The delta as the terminal shows it: both sides, then each cause with its share of the change. */
export function deltaText(d: EstimateDelta, [fa, fb]: [string, string]): string {
  const sign = (n: number) => `${n > 0 ? '+' : n < 0 ? '-' : '±'}${fmtBytes(Math.abs(n))}`;
  const sideText = (s: EstimateDelta['before']) =>
    `peak ${fmtBytes(s.peakBytes)}, state ${fmtBytes(s.persistentBytes)}, traffic ${fmtBytes(s.trafficBytes)} per GPU per step${s.hostBytes ? `, host ${fmtBytes(s.hostBytes)} per process` : ''}; ${s.worldSize} x ${s.gpu}: ${s.verdict ?? 'no verdict'}`;
  const lines = [
    `A  ${fa}: ${sideText(d.before)}`,
    `B  ${fb}: ${sideText(d.after)}`,
    `Peak ${sign(d.after.peakBytes - d.before.peakBytes)}, state ${sign(d.after.persistentBytes - d.before.persistentBytes)}, traffic ${sign(d.after.trafficBytes - d.before.trafficBytes)}${d.after.hostBytes || d.before.hostBytes ? `, host ${sign(d.after.hostBytes - d.before.hostBytes)}` : ''}`,
  ];
  if (d.causes.length) lines.push('', 'Causes, in the order they apply (each on top of the ones before):');
  for (const c of d.causes) {
    lines.push(
      `  ${c.cause.padEnd(18)} peak ${sign(c.peakBytes).padStart(9)}  state ${sign(c.persistentBytes).padStart(9)}  traffic ${sign(c.trafficBytes).padStart(9)}${c.hostBytes ? `  host ${sign(c.hostBytes).padStart(9)}` : ''}`,
    );
    for (const ch of c.changes) lines.push(`      ${ch.label}: ${ch.from} -> ${ch.to}`);
  }
  if (d.unattributed) lines.push('', `Not attributed: ${d.unattributed}`);
  return `${lines.join('\n')}\n`;
}
