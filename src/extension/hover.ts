/** The hover provider over wrap calls and configurations, with the command links the extension writes itself. */
import * as vscode from 'vscode';
import { frameworkHoverMarkdown, hoverMarkdown, mdProse, type HoverLinks } from '../core/report/hover';
import { describeCall } from '../core/analysis/describe';
import { otherPlanOf, planName } from '../core/vocabulary/planChoices';
import type { DocumentAnalyses } from './analyses';
import { COMMANDS } from './commands';
import { toRange } from './convert';

function commandUri(id: string, args: unknown[]): string {
  return `command:${id}?${encodeURIComponent(JSON.stringify(args))}`;
}

/** The hover over a wrap call's lines: the breakdown behind its lens, the assumptions, links to change them. */
export class WrapHoverProvider implements vscode.HoverProvider {
  constructor(private readonly analyses: DocumentAnalyses) {}

  async provideHover(
    document: vscode.TextDocument,
    position: vscode.Position,
    token: vscode.CancellationToken,
  ): Promise<vscode.Hover | undefined> {
    const analysis = (await this.analyses.analyze(document, token)) ?? this.analyses.latest(document.uri);
    if (!analysis || token.isCancellationRequested) return undefined;
    // A file that wraps through a helper of another file: the helper's wraps, placed at the calls of it.
    const calls = analysis.facts.calls.length ? analysis.facts.calls : (analysis.estimate?.helperCalls ?? []);
    const index = calls.findIndex(
      (c) => position.line >= c.range.start.line && position.line <= c.range.end.line,
    );
    const call = calls[index];
    const r = analysis.estimate;
    const uri = document.uri.toString();
    const fw = r?.ok ? r.framework : undefined;
    if (!call && fw && r?.ok && !analysis.facts.calls.length) {
      if (position.line < fw.range.start.line || position.line > fw.range.end.line) return undefined;
      const md = new vscode.MarkdownString(
        frameworkHoverMarkdown(fw, r.estimate, analysis.units, {
          openPanel: commandUri(COMMANDS.estimateFootprint, [uri]),
          setWorldSize: commandUri(COMMANDS.setWorldSize, [uri]),
          setGpu: commandUri(COMMANDS.setGpu, [uri]),
        }),
      );
      md.isTrusted = {
        enabledCommands: [COMMANDS.estimateFootprint, COMMANDS.setWorldSize, COMMANDS.setGpu],
      };
      return new vscode.Hover(md, toRange(fw.range));
    }
    if (!call) return undefined;
    // A call of another plan of the file: its figures are not those of the estimate shown.
    const other = otherPlanOf(call.line, r?.plans);
    if (other) {
      const md = new vscode.MarkdownString(
        `**${describeCall(call)}**\n\nThis wrap belongs to the plan of ${planName(other)}; the file is estimated for ` +
          `the plan of ${r!.plans!.chosen}. [Estimate this plan](${commandUri(COMMANDS.chooseWhatToEstimate, [uri])})`,
      );
      md.isTrusted = { enabledCommands: [COMMANDS.chooseWhatToEstimate] };
      return new vscode.Hover(md, toRange(call.range));
    }
    const links: HoverLinks = {
      openPanel: commandUri(COMMANDS.estimateFootprint, [uri, index]),
      setWorldSize: commandUri(COMMANDS.setWorldSize, [uri]),
      setGpu: commandUri(COMMANDS.setGpu, [uri]),
      chooseModel: commandUri(COMMANDS.chooseModel, [uri]),
      chooseArguments: commandUri(COMMANDS.chooseWhatToEstimate, [uri]),
      ...(vscode.workspace.isTrusted ? { measureExactly: commandUri(COMMANDS.measureExactly, [uri]) } : {}),
    };
    const md = new vscode.MarkdownString(
      hoverMarkdown(
        call,
        r?.ok ? r.estimate : undefined,
        analysis.units,
        links,
        r && !r.ok ? r.reason : undefined,
      ),
    );
    md.isTrusted = {
      enabledCommands: [
        COMMANDS.estimateFootprint,
        COMMANDS.setWorldSize,
        COMMANDS.setGpu,
        COMMANDS.chooseModel,
        COMMANDS.chooseWhatToEstimate,
        COMMANDS.measureExactly,
      ],
    };
    md.supportHtml = false;
    return new vscode.Hover(md, toRange(call.range));
  }
}

/**
 * The whole explanation of the findings under the cursor: the Problems view shows each in a line, the hover what
 * is wrong, why, and what to do, with its code spans drawn as code.
 */
export class FindingHoverProvider implements vscode.HoverProvider {
  constructor(private readonly analyses: DocumentAnalyses) {}

  provideHover(document: vscode.TextDocument, position: vscode.Position): vscode.Hover | undefined {
    const analysis = this.analyses.latest(document.uri);
    if (!analysis || analysis.version !== document.version) return undefined;
    const here = analysis.findings.filter((f) => toRange(f.range).contains(position));
    if (!here.length) return undefined;
    const md = new vscode.MarkdownString(here.map((f) => `**${f.rule}** ${mdProse(f.message)}`).join('\n\n'));
    md.isTrusted = false;
    md.supportHtml = false;
    return new vscode.Hover(md, toRange(here[0]!.range));
  }
}
