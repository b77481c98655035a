/** One file analysed as `estimate` analyses it, for the commands that compare or solve over its estimate. */
import * as path from 'node:path';
import { scanText } from '../core/analysis/input';
import { analyzeDocument, scanContext } from '../core/entry/analyze';
import type { Estimate } from '../core/estimator/types';
import { projectAt } from '../core/project/project';
import type { EstimateResult } from '../core/resolve/analyze';
import type { WhatIf } from '../core/whatif/model';
import { isConfigPath } from '../core/vocabulary/files';
import type { PythonGrammar } from '../core/parsing/python';
import { loadPython } from '../host/grammar';
import { commandLineHost, readConfigFile, readPythonFile } from './files';
import { EXIT, type Streams } from './io';

export type Estimated = Extract<EstimateResult, { ok: true }>;

/** A file as the commands read it: a configuration, or Python source. */
export function readInputFile(file: string): { text: string } | { error: string } {
  return isConfigPath(file) ? readConfigFile(file) : readPythonFile(file);
}

/**
 * The estimate of `file` with `text` (its text on disk, or at a revision), in its project; or why there is none,
 * and whether that is an unknown model (exit 3) rather than bad input.
 */
export function estimateOfFile(
  grammar: PythonGrammar,
  file: string,
  text: string,
): { ok: true; result: Estimated } | { ok: false; reason: string; unknownModel: boolean } {
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

/** A file on disk read and estimated, or the exit status after saying why not (as `estimate` says it). */
export async function estimateOnDisk(file: string, io: Streams): Promise<Estimated | number> {
  const read = readInputFile(file);
  if ('error' in read) {
    io.err.write(`fsdp-lens: ${read.error}\n`);
    return EXIT.usage;
  }
  const r = estimateOfFile(await loadPython(), file, read.text);
  if (r.ok) return r.result;
  io.err.write(`fsdp-lens: ${file}: no estimate: ${r.reason}\n`);
  return r.unknownModel ? EXIT.unknownModel : EXIT.usage;
}

/** The estimate's what-if, undefined where the change makes a mesh PyTorch refuses. */
export function whatIfOf(result: Estimated): (w: WhatIf) => Estimate | undefined {
  return (w) => {
    try {
      return result.whatIf.run(w);
    } catch {
      return undefined;
    }
  };
}
