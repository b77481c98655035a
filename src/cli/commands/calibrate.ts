/** `fsdp-lens calibrate FILE RUN`: a measured run (probe JSON, memory snapshot or log) beside the estimate. */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Estimate } from '../../core/estimator/types';
import { calibrationWithEntry, CALIBRATION_FILE } from '../../core/project/calibration';
import {
  compareMeasured,
  reserveOfRun,
  type CategoryRow,
  type MeasuredRun,
  type PhaseComparison,
} from '../../core/report/measured';
import { commandLineHost } from '../files';
import { fmtBytes } from '../../core/vocabulary/bytes';
import { parseOptions } from '../args';
import { estimateOnDisk } from '../analyzeFile';
import { EXIT_TEXT } from '../help';
import { EXIT, UsageError, type Streams } from '../io';
import { readRunFile } from '../../host/measuredRun';
import type { CommandSpec } from '../spec';

export const calibrateSpec = {
  name: 'calibrate',
  args: 'FILE RUN',
  summary:
    "A measured run beside the file's estimate: allocated peaks phase by phase, and the reserved peak.",
  about:
    "RUN is one of three kinds, told apart by their content. (1) The JSON that fsdp_lens_probe.py (shipped beside the CLI in dist/) writes on a rank of a real run: the allocated and reserved peaks of each phase of a step. Phases named forward, loss, backward, optimizer or step are compared with the same phases of the estimate (a forward that computes the loss holds the loss too). (2) A PyTorch memory snapshot, the pickle torch.cuda.memory._dump_snapshot writes after _record_memory_history: read as a stream (never run by Python, never loaded whole), its allocator trace is replayed for the peak allocated over the trace and each allocation's stack places it in forward, backward or optimizer; the reserved peak replays its segments. (3) A training log with the memory lines torchtitan (the step line's \"memory:\", a reserved peak), torchtune (peak_memory_alloc and peak_memory_reserved) or the Hugging Face Trainer (train_mem_gpu_alloc_delta and train_mem_gpu_peaked_delta) print: the step's peaks, as far as the log gives them (its last 64 MiB are read). The reserved peak is compared with the estimate of what the caching allocator keeps. Each ratio is estimated / measured; notes say what each measured figure is and what it assumes.",
  options: { json: { type: 'boolean' }, save: { type: 'string' } },
  flags: () => [
    { flag: '--json', text: 'The comparison as JSON, with the notes.' },
    {
      flag: '--save CLUSTER',
      text: "Keep the reserve the run shows (the allocator's allowance: reserved over allocated at the step's peak; the memory outside the allocator, where the probe recorded it) as CLUSTER's, for the estimate's GPU, in the project's .fsdp-lens/calibration.json: fit verdicts on that GPU then use it and name it.",
    },
  ],
  examples: [
    { line: 'fsdp-lens calibrate train.py run.rank0.json', does: 'Estimated against measured, per phase.' },
    {
      line: 'fsdp-lens calibrate train.py snapshot.pickle',
      does: 'Against a memory snapshot: its peaks by phase, replayed from its trace.',
    },
    { line: 'fsdp-lens calibrate train.py train.log', does: "Against a training log's memory lines." },
    {
      line: 'fsdp-lens calibrate train.py run.rank0.json --save a100-pod',
      does: "Keep the cluster's measured reserve for later fit verdicts.",
    },
  ],
  exits: { ok: EXIT_TEXT.ok, usage: EXIT_TEXT.usage, unknownModel: EXIT_TEXT.unknownModel },
} satisfies CommandSpec;

/** Who ran it, as the comparison's header says it. */
function runLine(run: MeasuredRun, worldSize: number): string {
  const on = run.device ? ` on ${run.device}` : '';
  if (run.source === 'probe')
    return `Run: rank ${run.rank} of ${run.worldSize}${on}${run.worldSize !== null && run.worldSize !== worldSize ? ` (the estimate is for ${worldSize} GPUs: give the run's world size to compare like with like)` : ''}`;
  const kind =
    run.source === 'snapshot'
      ? 'memory snapshot'
      : `training log${typeof run.settings.framework === 'string' ? ` (${run.settings.framework})` : ''}`;
  const rank =
    run.rank === null ? '' : `, rank ${run.rank}${run.worldSize === null ? '' : ` of ${run.worldSize}`}`;
  return `Run: ${kind}${rank}${on}`;
}

export async function calibrateCommand(argv: string[], io: Streams): Promise<number> {
  const { values, positionals } = parseOptions(argv, calibrateSpec);
  if (positionals.length !== 2)
    throw new UsageError(
      "calibrate takes a FILE and a RUN (the probe's JSON, a memory snapshot or a training log)",
    );
  const [file, runFile] = positionals as [string, string];
  const run = readRunFile(runFile);
  if ('error' in run) {
    io.err.write(`fsdp-lens: ${runFile}: ${run.error}\n`);
    return EXIT.usage;
  }
  const result = await estimateOnDisk(file, io);
  if (typeof result === 'number') return result;
  const e = result.estimate;
  const c = compareMeasured(e, run);
  const saved =
    typeof values.save === 'string' ? saveCalibration(values.save, file, runFile, run, e) : undefined;
  if (saved && 'error' in saved) {
    io.err.write(`fsdp-lens: ${runFile}: not saved: ${saved.error}\n`);
    return EXIT.usage;
  }
  if (values.json) {
    io.out.write(
      `${JSON.stringify(
        {
          run: {
            source: run.source,
            rank: run.rank,
            worldSize: run.worldSize,
            device: run.device,
            notes: run.notes,
          },
          ...c,
          ...(saved ? { saved: saved.said } : {}),
        },
        null,
        2,
      )}\n`,
    );
    return EXIT.ok;
  }
  const b = (n: number | null) => (n === null ? 'not measured' : fmtBytes(n));
  const row = (p: PhaseComparison) =>
    `  ${p.phase.padEnd(20)} estimated ${b(p.estimatedBytes).padStart(9)}  measured ${b(p.measuredBytes).padStart(12)}  ${p.ratio === null ? '' : `ratio ${p.ratio.toFixed(2)}`}`;
  // Where they part, what the estimate holds then: the terms a difference must be in.
  const parted = (p: PhaseComparison) =>
    p.terms?.length
      ? [
          `      ${p.ratio! > 1 ? 'above' : 'below'} the run by ${fmtBytes(Math.abs(p.estimatedBytes! - p.measuredBytes!))}; the estimate's largest terms then: ${p.terms.map((t) => `${t.name} ${fmtBytes(t.bytes)}`).join(', ')}`,
        ]
      : [];
  const lines = [
    `Estimate: ${e.mesh.worldSize} x ${e.gpu.name}, micro-batch ${e.setup.microBatch}, sequence ${e.setup.seqLen}`,
    runLine(run, e.mesh.worldSize),
    'Allocated peak by phase:',
    ...c.phases.flatMap((p) => [row(p), ...parted(p)]),
    row(c.reserved),
  ];
  const step = c.phases.find((p) => p.phase === 'step');
  if (step?.categories?.length) lines.push(...categoryLines(step.categories));
  if (c.unknownPhases.length)
    lines.push(
      `Phases with no estimate counterpart: ${c.unknownPhases.join(', ')} (name them forward, loss, backward, optimizer or step)`,
    );
  if (run.notes.length) lines.push('Notes on the measured figures:', ...run.notes.map((n) => `  - ${n}`));
  if (saved) lines.push(saved.said);
  io.out.write(`${lines.join('\n')}\n`);
  return EXIT.ok;
}

/**
 * The step's peak by category (a memory snapshot's): each row's estimate beside what was live at the run's peak,
 * the terms and categories of each, and the rows that differ most.
 */
function categoryLines(rows: CategoryRow[]): string[] {
  const b = (n: number | null, none: string) => (n === null ? none : fmtBytes(n));
  const signed = (n: number) => `${n > 0 ? '+' : n < 0 ? '-' : ''}${fmtBytes(Math.abs(n))}`;
  const parts = (xs: { name: string; bytes: number }[]) =>
    xs.map((x) => `${x.name} ${fmtBytes(x.bytes)}`).join(', ');
  const lines = [
    "By category at the peak (the estimate's terms at its step peak; the run's allocations live at its allocated peak, by their stacks):",
  ];
  const width = Math.max(20, ...rows.map((r) => r.name.length));
  for (const r of rows) {
    lines.push(
      `  ${r.name.padEnd(width)} estimated ${b(r.estimatedBytes, 'none').padStart(9)}  measured ${b(r.measuredBytes, 'not told').padStart(9)}${r.difference === null ? '' : `  difference ${signed(r.difference)}`}`,
    );
    const said = [
      ...(r.estimated.length > 1 ? [`estimate: ${parts(r.estimated)}`] : []),
      ...(r.measured.length > 1 || (r.name === 'unknown' && r.measured.length)
        ? [`measured: ${parts(r.measured)}`]
        : []),
    ];
    if (said.length) lines.push(`      ${said.join('; ')}`);
  }
  const apart = rows
    .filter((r) => r.difference !== null && r.difference !== 0)
    .sort((x, y) => Math.abs(y.difference!) - Math.abs(x.difference!))
    .slice(0, 3);
  const unknown = rows.find((r) => r.name === 'unknown')?.measuredBytes ?? 0;
  if (apart.length)
    lines.push(
      `  Largest differences (estimated - measured): ${apart.map((r) => `${r.name} ${signed(r.difference!)}`).join(', ')}${unknown ? `; ${fmtBytes(unknown)} of the run is in no category (unknown: see the notes)` : ''}`,
    );
  return lines;
}

/** Names a cluster may have: short, and safe in a file and a message. */
const CLUSTER = /^[\w.-]{1,64}$/;

/**
 * Keeps the reserve `run` shows as `cluster`'s, for the estimate's GPU, in the calibration file of `file`'s project
 * (replacing that cluster's entry); what was saved, in words, or why nothing was.
 */
function saveCalibration(
  cluster: string,
  file: string,
  runFile: string,
  run: MeasuredRun,
  e: Estimate,
): { said: string } | { error: string } {
  if (!CLUSTER.test(cluster)) return { error: `"${cluster}" is not a cluster name (letters, digits, . _ -)` };
  const r = reserveOfRun(run, e.gpu.name);
  if ('error' in r) return r;
  if (r.fragmentation > 1)
    return {
      error: `the allocator held ${Math.round(r.fragmentation * 100)}% beyond its allocated peak: more than one step's caching, not kept`,
    };
  const root = commandLineHost(path.resolve(file), []).projectRoot ?? path.dirname(path.resolve(file));
  const target = path.join(root, CALIBRATION_FILE);
  let old: string | undefined;
  try {
    old = fs.readFileSync(target, 'utf8');
  } catch {
    old = undefined;
  }
  const entry = {
    cluster,
    gpu: e.gpu.id,
    fragmentation: r.fragmentation,
    ...(r.contextBytes !== undefined ? { contextBytes: r.contextBytes } : {}),
    from: path.relative(root, path.resolve(runFile)).split(path.sep).join('/'),
    measured: new Date().toISOString().slice(0, 10),
  };
  try {
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.writeFileSync(target, calibrationWithEntry(old, entry));
  } catch (err) {
    return { error: `${target}: ${err instanceof Error ? err.message : String(err)}` };
  }
  return {
    said:
      `Saved ${cluster}'s reserve for the ${e.gpu.name} in ${path.relative(process.cwd(), target) || target}: the allocator's allowance x ${(1 + r.fragmentation).toFixed(3)}` +
      (r.contextBytes !== undefined
        ? `, ${fmtBytes(r.contextBytes)} outside the allocator`
        : ', the default CUDA context (the run did not record what is used outside the allocator)') +
      '. Fit verdicts on this GPU in this project now use it, and say so.',
  };
}
