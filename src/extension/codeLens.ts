/** The lenses over wrap calls and configurations. */
import * as vscode from 'vscode';
import { describeCall } from '../core/analysis/describe';
import {
  callSegments,
  frameworkSegments,
  keptSegments,
  planSegments,
  type LensSegment,
} from '../core/report/lens';
import { isOffPath, offPathTitle } from '../core/report/summary';
import { planLabel } from '../core/vocabulary/fsdp';
import { otherPlanOf, planName } from '../core/vocabulary/planChoices';
import { EDITOR_CALLS } from '../worker/protocol';
import type { DocumentAnalyses } from './analyses';
import { COMMANDS } from './commands';
import { toRange } from './convert';
import { readSettings } from './settings';

/** The codicons of a verdict: VS Code draws lenses in one colour, so the icon carries it. */
const ICONS = { fits: '$(pass)', short: '$(error)', undecided: '$(question)' } as const;

/** A lens over each wrap call saying what was detected; the numbers join them once the estimate is known. */
export class WrapCodeLensProvider implements vscode.CodeLensProvider {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeCodeLenses = this.changed.event;

  constructor(private readonly analyses: DocumentAnalyses) {
    analyses.onDidAnalyze(() => this.changed.fire());
  }

  refresh(): void {
    this.changed.fire();
  }

  async provideCodeLenses(
    document: vscode.TextDocument,
    token: vscode.CancellationToken,
  ): Promise<vscode.CodeLens[]> {
    if (!readSettings(document.uri).codeLensEnabled) return [];
    const analysis = (await this.analyses.analyze(document, token)) ?? this.analyses.latest(document.uri);
    if (!analysis || token.isCancellationRequested) return [];
    if (analysis.notice) {
      const text = document.getText();
      if (!/fully_shard|FullyShardedDataParallel|FSDP/.test(text.slice(0, 1_000_000))) return [];
      return [new vscode.CodeLens(new vscode.Range(0, 0, 0, 0), { title: analysis.notice, command: '' })];
    }
    const estimate = analysis.estimate?.ok ? analysis.estimate.estimate : undefined;
    const why = analysis.estimate && !analysis.estimate.ok ? analysis.estimate.reason : undefined;
    // A file that wraps through a helper of another file: the helper's wraps, placed at the calls of it.
    const calls = analysis.facts.calls.length ? analysis.facts.calls : (analysis.estimate?.helperCalls ?? []);
    const leftOut = analysis.callsLeftOut;
    const noRoot = !calls.some((c) => c.isRoot) && !leftOut?.root;
    const fw = analysis.estimate?.ok ? analysis.estimate.framework : undefined;
    const config = analysis.config;
    if (config?.kind === 'problem')
      return [
        new vscode.CodeLens(toRange(config.problem.range), {
          title: `${config.problem.framework}: ${config.problem.message}`,
          command: '',
        }),
      ];
    if (config?.kind === 'plan' && !estimate) {
      const p = config.plan;
      return [
        new vscode.CodeLens(toRange(p.range), {
          title: `${p.framework} → ${planLabel(p.api, p.strategy)} · no estimate: ${why ?? 'no model'}`,
          tooltip:
            'Name the model in a "# fsdp: model=ORG/NAME" comment of this file, in a training script beside it, or in the fsdpLens.model setting',
          command: '',
        }),
      ];
    }
    const parts = readSettings(document.uri).codeLensSegments;
    // Each segment a lens of its own: VS Code shows a line's lenses side by side, each with its own click.
    const lensesOf = (range: vscode.Range, segments: LensSegment[], args: unknown[]) =>
      keptSegments(segments, parts).map(
        (seg) =>
          new vscode.CodeLens(range, {
            title: `${seg.icon ? `${ICONS[seg.icon]} ` : ''}${seg.text}`,
            tooltip: `${seg.tooltip}\nClick to open the FSDP footprint panel`,
            command: COMMANDS.estimateFootprint,
            arguments: args,
          }),
      );
    if (fw && estimate && !calls.length)
      return lensesOf(toRange(fw.range), frameworkSegments(fw, estimate, analysis.units), [document.uri]);
    // A launch script: the job of the script it runs, on its command.
    if (config?.kind === 'launch')
      return estimate
        ? lensesOf(
            toRange(config.range),
            planSegments(estimate, `job of ${config.script}`, analysis.units, `${config.script}: `),
            [document.uri],
          )
        : [
            new vscode.CodeLens(toRange(config.range), {
              title: `job of ${config.script} · no estimate: ${why ?? ''}`,
              command: '',
            }),
          ];
    const plans = analysis.estimate?.plans;
    const lenses = calls.flatMap((call, index) => {
      // A call of another plan of the file: named, and one click away from being the one estimated.
      const other = otherPlanOf(call.line, plans);
      if (other)
        return new vscode.CodeLens(toRange(call.range), {
          // What matters first: the lens is cut at the window's edge.
          title: `plan of ${planName(other)}, not estimated (estimating ${plans!.chosen}) · ${describeCall(call)}`,
          tooltip: 'Click to choose which plan of this file is estimated',
          command: COMMANDS.chooseWhatToEstimate,
          arguments: [document.uri],
        });
      // Off the path the defaults take: one click from the arguments that take it.
      if (isOffPath(call, estimate))
        return new vscode.CodeLens(toRange(call.range), {
          title: offPathTitle(call),
          tooltip: `${call.offByDefault}\nClick to choose the script's arguments`,
          command: COMMANDS.chooseWhatToEstimate,
          arguments: [document.uri],
        });
      return lensesOf(
        toRange(call.range),
        callSegments(call, estimate, analysis.units, {
          totals: noRoot && index === calls.length - 1,
          ...(why ? { why } : {}),
        }),
        [document.uri, index],
      );
    });
    // A helper shown as one calling script's job, where several call it: whose, and a click to choose another.
    const callers = analysis.estimate?.jobCallers ?? [];
    const chosen = callers.find((c) => c.chosen);
    if (callers.length > 1 && chosen && calls[0])
      lenses.unshift(
        new vscode.CodeLens(toRange(calls[0].range), {
          title: `$(call-incoming) job of ${chosen.file}`,
          tooltip: `${callers.length} scripts call this helper, each a job of its own: click to choose whose job it shows`,
          command: COMMANDS.chooseWhatToEstimate,
          arguments: [document.uri],
        }),
      );
    if (leftOut)
      lenses.push(
        new vscode.CodeLens(toRange(leftOut.range), {
          title:
            `no lens on this and the ${(leftOut.count - 1).toLocaleString('en-US')} wrap calls after it ` +
            `(lenses stop at ${EDITOR_CALLS.toLocaleString('en-US')} a file) · the panel shows every unit`,
          tooltip: 'Click to open the FSDP footprint panel',
          command: COMMANDS.estimateFootprint,
          arguments: [document.uri],
        }),
      );
    return lenses;
  }
}
