/** `fsdp-lens migrate FILE`: the FSDP1 wraps of a script rewritten for FSDP2, as a diff, with both estimates. */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { scanText } from '../../core/analysis/input';
import { analyzeDocument, scanContext } from '../../core/entry/analyze';
import { applyEdits, TextIndex } from '../../core/lint/edits';
import { migrateToFsdp2 } from '../../core/lint/migrate';
import type { TextEdit } from '../../core/lint/types';
import { projectAt } from '../../core/project/project';
import { unifiedDiff } from '../../core/report/unifiedDiff';
import type { EstimateResult } from '../../core/resolve/analyze';
import { fmtBytes } from '../../core/vocabulary/bytes';
import { loadPython } from '../../host/grammar';
import { parseOptions } from '../args';
import { commandLineHost, readPythonFile } from '../files';
import { EXIT_TEXT } from '../help';
import { EXIT, UsageError, type Streams } from '../io';
import type { CommandSpec } from '../spec';

export const migrateSpec = {
  name: 'migrate',
  args: 'FILE',
  summary:
    "A script's FSDP1 wraps rewritten as FSDP2 fully_shard calls: a diff, and the estimate before and after.",
  about:
    'Each FullyShardedDataParallel(model, ...) becomes fully_shard of every module its transformer auto-wrap policy names, then of the model; sharding_strategy becomes reshard_after_forward (a 2-D mesh for the hybrid ones), MixedPrecision becomes MixedPrecisionPolicy, CPUOffload becomes CPUOffloadPolicy. The FSDP1 calls on the wrapped model become their FSDP2 forms where these keep their meaning: with model.no_sync() becomes set_requires_gradient_sync(False) before the block and (True) after it, model.clip_grad_norm_ becomes torch.nn.utils.clip_grad_norm_ of its parameters, and state_dict_type blocks and full_optim_state_dict become get_model_state_dict, get_optimizer_state_dict and set_model_state_dict with the StateDictOptions that give the same state dicts. A file without wraps (checkpoint or training helpers handed the wrapped model) gets the same rewrites for the modules that the FSDP1 class calls of each function name (FSDP.state_dict_type(model, ...), FSDP.full_optim_state_dict(model, ...)), on the assumption that the script wrapping them moves to fully_shard too; there a model.no_sync() or model.clip_grad_norm_() on a module no class call of its function names is left, with the form it takes if the module is an FSDP1 one. What has no FSDP2 form is said with what to do, and a wrap the rewrite cannot carry over faithfully is left as it is, with the reason. Nothing is written without --write.',
  options: { write: { type: 'boolean' } },
  flags: () => [{ flag: '--write', text: 'Write the rewritten file in place (after showing the diff).' }],
  examples: [
    {
      line: 'fsdp-lens migrate train.py',
      does: 'The diff, the notes and both estimates; the file unchanged.',
    },
    { line: 'fsdp-lens migrate train.py --write', does: 'The same, then the file rewritten.' },
  ],
  exits: {
    ok: EXIT_TEXT.ok,
    usage: `${EXIT_TEXT.usage}; no FSDP1 wrap or FSDP1 call the rewrite can carry over`,
  },
} satisfies CommandSpec;

export async function migrateCommand(argv: string[], io: Streams): Promise<number> {
  const { values, positionals } = parseOptions(argv, migrateSpec);
  if (positionals.length !== 1) throw new UsageError('migrate takes one FILE');
  const file = positionals[0]!;
  const read = readPythonFile(file);
  if ('error' in read) {
    io.err.write(`fsdp-lens: ${read.error}\n`);
    return EXIT.usage;
  }
  const abs = path.resolve(file);
  const grammar = await loadPython();
  const { host, projectRoot } = commandLineHost(abs, []);
  const project = projectRoot ? projectAt(projectRoot, grammar, host) : undefined;
  try {
    const context = scanContext(project, abs, undefined);
    const facts = scanText(grammar, abs, read.text, context);
    const m = migrateToFsdp2(facts, read.text);
    // No wrap at all: the FSDP1 calls of helpers that are handed the wrapped model.
    const wrapless = !facts.calls.length;
    for (const s of m.skipped) io.err.write(`fsdp-lens: ${file}: left as FSDP1: ${s}\n`);
    if (!m.edits.length) {
      if (wrapless) for (const n of m.notes) io.out.write(`note: ${n}\n`);
      if (!m.skipped.length)
        io.err.write(
          `fsdp-lens: ${file}: no FSDP1 wrap (FullyShardedDataParallel) ${m.notes.length ? 'and no FSDP1 call the rewrite can carry over' : 'or FSDP1 call to migrate'}\n`,
        );
      return EXIT.usage;
    }
    const after = applyEdits(read.text, m.edits);
    io.out.write(
      unifiedDiff(path.relative(process.cwd(), abs) || file, read.text, lineEdits(read.text, m.edits)),
    );
    for (const n of m.notes) io.out.write(`note: ${n}\n`);
    // Both versions estimated as the editor would: the same project, the file's text before and after.
    const estimate = (text: string): EstimateResult | undefined =>
      analyzeDocument(
        grammar,
        { file: abs, text },
        { lint: null, estimate: { host, ...(project ? { project } : {}) } },
      ).estimate;
    const line = (label: string, r: EstimateResult | undefined) =>
      r?.ok
        ? `${label}: ${r.estimate.plan.api === 'fsdp2' ? 'FSDP2' : 'FSDP1'}, ${r.estimate.units.length} units, peak ${fmtBytes(r.estimate.perGpu.peakBytes)} per GPU, traffic ${fmtBytes(r.estimate.comms.traffic.bytes)} per step, ${r.estimate.targetFit?.verdict ?? 'no verdict'} on ${r.estimate.mesh.worldSize} x ${r.estimate.gpu.name}`
        : `${label}: no estimate${r ? `: ${r.reason}` : ''}`;
    const [was, now] = [estimate(read.text), estimate(after)];
    // A file without wraps has nothing to estimate on its own: the script that wraps its modules has.
    if (wrapless && !was?.ok && !now?.ok)
      io.out.write('estimate: none: the file wraps no model (estimate the script that wraps it)\n');
    else io.out.write(`${line('before', was)}\n${line('after ', now)}\n`);
    if (values.write) {
      fs.writeFileSync(abs, after);
      io.out.write(`wrote ${file}\n`);
    }
    return EXIT.ok;
  } finally {
    project?.dispose();
  }
}

/**
 * The edits as edits of whole lines, which is what a unified diff shows: the edits within a line (a call renamed, an
 * argument inserted) merged with the others on its lines into one edit of those lines. Insertions at a line's start
 * stay as they are.
 */
function lineEdits(text: string, edits: readonly TextEdit[]): TextEdit[] {
  const index = new TextIndex(text);
  const sorted = [...edits].sort(
    (a, b) => a.range.start.line - b.range.start.line || a.range.start.character - b.range.start.character,
  );
  const out: TextEdit[] = [];
  let group: { range: TextEdit['range']; edits: TextEdit[] } | null = null;
  const flush = () => {
    if (!group) return;
    const { start } = group.range;
    const rebased = group.edits.map((e) => ({
      range: {
        start: { line: e.range.start.line - start.line, character: e.range.start.character },
        end: { line: e.range.end.line - start.line, character: e.range.end.character },
      },
      newText: e.newText,
    }));
    out.push({ range: group.range, newText: applyEdits(index.slice(group.range), rebased) });
    group = null;
  };
  for (const e of sorted) {
    const { start, end } = e.range;
    const empty = start.line === end.line && start.character === end.character;
    if (empty && start.character === 0) {
      flush();
      out.push(e);
      continue;
    }
    // Its lines: to the start of the line after it, unless it ends at a line's start already.
    const span = {
      start: { line: start.line, character: 0 },
      end: end.character === 0 && end.line > start.line ? end : index.wholeLines(e.range).end,
    };
    if (group && span.start.line < group.range.end.line + (group.range.end.character === 0 ? 0 : 1)) {
      if (index.offsetAt(span.end) > index.offsetAt(group.range.end)) group.range.end = span.end;
      group.edits.push(e);
      continue;
    }
    flush();
    group = { range: span, edits: [e] };
  }
  flush();
  return out;
}
