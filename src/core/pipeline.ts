import type { FileFacts } from './analysis/facts';
import { lintFacts } from './lint/lint';
import type { Finding, LintOptions } from './lint/types';
import { estimateFile, type AnalyzeOptions, type EstimateResult } from './resolve/analyze';

/** Everything the surfaces show for one file: its facts, its estimate (or why none), its findings. */
export interface FileAnalysis {
  facts: FileFacts;
  /** Undefined when the file has nothing to estimate (no wrap call, no model). */
  estimate?: EstimateResult;
  findings: Finding[];
}

/** Estimates a scanned file and lints it, the model-aware rules reading the estimate. Never throws on bad input. */
export function analyzeFacts(
  facts: FileFacts,
  text: string,
  opts: { lint: LintOptions | null; estimate: AnalyzeOptions },
): FileAnalysis {
  let estimate: EstimateResult | undefined;
  if (facts.calls.length || facts.models.length) {
    try {
      estimate = estimateFile(facts, opts.estimate);
    } catch (e) {
      estimate = { ok: false, reason: `the estimate failed: ${e instanceof Error ? e.message : String(e)}` };
    }
  }
  const model = estimate?.ok
    ? { estimate: estimate.estimate, root: estimate.input.model.root, minGpus: () => estimate.minGpus }
    : undefined;
  const findings = opts.lint
    ? lintFacts({ facts, text, options: opts.lint, ...(model ? { model } : {}) })
    : [];
  return { facts, ...(estimate ? { estimate } : {}), findings };
}
