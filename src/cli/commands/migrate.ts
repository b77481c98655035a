/** `fsdp-lens migrate FILE`: the FSDP1 wraps of a script rewritten for FSDP2, as a diff, with both estimates. */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { scanText } from '../../core/analysis/input';
import { analyzeDocument, scanContext } from '../../core/entry/analyze';
import { applyEdits } from '../../core/lint/edits';
import { migrateToFsdp2 } from '../../core/lint/migrate';
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
    'Each FullyShardedDataParallel(model, ...) becomes fully_shard of every module its transformer auto-wrap policy names, then of the model; sharding_strategy becomes reshard_after_forward (a 2-D mesh for the hybrid ones), MixedPrecision becomes MixedPrecisionPolicy, CPUOffload becomes CPUOffloadPolicy. The FSDP1 calls on the wrapped model become their FSDP2 forms where these keep their meaning: with model.no_sync() becomes set_requires_gradient_sync(False) before the block and (True) after it, model.clip_grad_norm_ becomes torch.nn.utils.clip_grad_norm_ of its parameters, and state_dict_type blocks and full_optim_state_dict become get_model_state_dict, get_optimizer_state_dict and set_model_state_dict with the StateDictOptions that give the same state dicts. What has no FSDP2 form is said with what to do, and a wrap the rewrite cannot carry over faithfully is left as it is, with the reason. Nothing is written without --write.',
  options: { write: { type: 'boolean' } },
  flags: () => [{ flag: '--write', text: 'Write the rewritten file in place (after showing the diff).' }],
  examples: [
    {
      line: 'fsdp-lens migrate train.py',
      does: 'The diff, the notes and both estimates; the file unchanged.',
    },
    { line: 'fsdp-lens migrate train.py --write', does: 'The same, then the file rewritten.' },
  ],
  exits: { ok: EXIT_TEXT.ok, usage: `${EXIT_TEXT.usage}; no FSDP1 wrap the rewrite can carry over` },
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
    for (const s of m.skipped) io.err.write(`fsdp-lens: ${file}: left as FSDP1: ${s}\n`);
    if (!m.edits.length) {
      if (!m.skipped.length)
        io.err.write(`fsdp-lens: ${file}: no FSDP1 wrap (FullyShardedDataParallel) to migrate\n`);
      return EXIT.usage;
    }
    const after = applyEdits(read.text, m.edits);
    io.out.write(unifiedDiff(path.relative(process.cwd(), abs) || file, read.text, m.edits));
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
    io.out.write(`${line('before', estimate(read.text))}\n${line('after ', estimate(after))}\n`);
    if (values.write) {
      fs.writeFileSync(abs, after);
      io.out.write(`wrote ${file}\n`);
    }
    return EXIT.ok;
  } finally {
    project?.dispose();
  }
}
