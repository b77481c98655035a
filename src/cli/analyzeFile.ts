/** One file analysed as `estimate` analyses it, for the commands that compare or solve over its estimate. */
import * as path from 'node:path';
import { scanText } from '../core/analysis/input';
import { analyzeDocument, scanContext } from '../core/entry/analyze';
import { projectAt } from '../core/project/project';
import type { EstimateResult } from '../core/resolve/analyze';
import { isConfigPath } from '../core/vocabulary/files';
import type { PythonGrammar } from '../core/parsing/python';
import { commandLineHost } from './files';

/**
 * The estimate of `file` with `text` (its text on disk, or at a revision), in its project; or why there is none,
 * and whether that is an unknown model (exit 3) rather than bad input.
 */
export function estimateOfFile(
  grammar: PythonGrammar,
  file: string,
  text: string,
):
  | { ok: true; result: Extract<EstimateResult, { ok: true }> }
  | { ok: false; reason: string; unknownModel: boolean } {
  const abs = path.resolve(file);
  const { host, projectRoot } = commandLineHost(abs, []);
  const project = projectRoot ? projectAt(projectRoot, grammar, host) : undefined;
  try {
    const facts = isConfigPath(abs)
      ? undefined
      : scanText(grammar, abs, text, scanContext(project, abs, undefined));
    const a = analyzeDocument(
      grammar,
      { file: abs, text, ...(facts ? { facts } : {}) },
      { lint: null, estimate: { host, ...(project ? { project } : {}) } },
    );
    const r = a.estimate;
    if (r?.ok) return { ok: true, result: r };
    const reason =
      r?.reason ?? (a.reading?.kind === 'problem' ? a.reading.problem.message : 'it has nothing to estimate');
    return { ok: false, reason, unknownModel: !!(r && !r.ok && r.unknownModel) };
  } finally {
    project?.dispose();
  }
}
