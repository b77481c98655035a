/**
 * A launch script's job: `torchrun ... train.py --batch 4` runs a Python script of the project, so the launch file
 * shows that script's estimate, read with this command's arguments and process counts, as the script's own view
 * does with the same launch file: one plan and one verdict for the files of one job.
 */
import * as path from 'node:path';
import type { FileFacts } from '../analysis/facts';
import { scanFile } from '../analysis/scan';
import { projectReaders } from '../frameworks/scriptConfigs';
import type { Project } from '../project/project';
import { launchLayer, resolvedLaunchFile } from '../project/settings';
import type { Range } from '../vocabulary/range';
import type { EstimateResult } from '../resolve/analyze';
import type { Layer } from '../inputs/layers';

/**
 * The estimate of the first Python script of the project this launch file runs, with the command's arguments and
 * counts, said so; the command's range for the lens. Undefined when it runs none the project holds.
 */
export function launchScriptEstimate(
  project: Project,
  file: string,
  text: string,
  analyze: (facts: FileFacts, text: string, layers: Layer[]) => EstimateResult | undefined,
): { estimate: EstimateResult; script: string; range: Range } | undefined {
  const root = project.roots[0];
  if (!root) return undefined;
  const facts = resolvedLaunchFile(project.fs, root, file, text);
  for (const f of facts.slice(0, 4)) {
    if (!f.resolved || !f.resolved.endsWith('.py')) continue;
    const py = project.file(f.resolved);
    if (!py) continue;
    const name = path.basename(file);
    const target = scanFile(project.grammar, py.source, {
      argv: f.scriptArgs ?? [],
      argvFrom: `the launch command at ${name}:${f.line}`,
      ...projectReaders(project, f.resolved),
    });
    // This command's process counts, not another launch file's of the same script.
    const layer = launchLayer([f], root, f.resolved);
    const estimate = analyze(target, py.source.text, layer ? [layer.layer] : []);
    if (!estimate) continue;
    const script = path.relative(path.dirname(file), f.resolved) || path.basename(f.resolved);
    const said = `the job is ${script}, which this file launches at line ${f.line}`;
    const lines = text.split('\n');
    const range = {
      start: { line: f.line - 1, character: 0 },
      end: { line: f.line - 1, character: (lines[f.line - 1] ?? '').replace(/\r$/, '').length },
    };
    if (!estimate.ok)
      return { estimate: { ...estimate, reason: `${said}: ${estimate.reason}` }, script, range };
    estimate.estimate.notes.unshift(said);
    return { estimate, script, range };
  }
  return undefined;
}
