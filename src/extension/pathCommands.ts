/**
 * "FSDP: Choose what to estimate in this file": another of the file's plans (an actor's or a reward model's
 * worker class), the calling script whose job a helper shows, or the command line the script runs with, which
 * decides the path it takes. The choice is written as a `# fsdp: plan=`, `# fsdp: caller=` or `# fsdp: args=`
 * comment, an edit the user can see and undo, read the same way by the command line.
 */
import * as vscode from 'vscode';
import { setAnnotation } from '../core/lint/annotationEdits';
import { withArguments } from '../core/vocabulary/commandLine';
import type { DocumentAnalyses } from './analyses';
import { toRange } from './convert';

interface Choice extends vscode.QuickPickItem {
  key: 'plan' | 'args' | 'caller';
  value?: string;
}

/** What a training set-up is called in the quick pick (`peft` → LoRA). */
const TRAINING_WORDS: Partial<Record<string, string>> = {
  lora: 'LoRA',
  peft: 'LoRA',
  quantization: 'quantization',
  freeze: 'frozen parameters',
  cast: 'the cast',
};

export async function chooseWhatToEstimate(analyses: DocumentAnalyses, uri?: vscode.Uri): Promise<void> {
  const doc = uri
    ? await vscode.workspace.openTextDocument(uri)
    : vscode.window.activeTextEditor?.document.languageId === 'python'
      ? vscode.window.activeTextEditor.document
      : undefined;
  if (!doc) {
    void vscode.window.showInformationMessage('Open the Python training script to choose what is estimated.');
    return;
  }
  const analysis = await analyses.analyze(doc);
  if (!analysis) return;
  const plans = analysis.estimate?.plans;
  const args = analysis.facts.annotations.find((a) => a.values.args !== undefined)?.values.args;
  const items: Choice[] = [];
  for (const p of plans?.plans ?? []) {
    const what = p.kind === 'class' ? `class ${p.name}` : `${p.name}()`;
    items.push({
      key: 'plan',
      value: p.name,
      label: `${p.kind === 'class' ? '$(symbol-class)' : '$(symbol-function)'} ${what}`,
      description: p.name === plans!.chosen ? 'estimated now' : `line ${p.line}`,
      detail: `Estimate the plan ${what} makes (writes "# fsdp: plan=${p.name}")`,
    });
  }
  // A helper estimated as a calling script's job: the other scripts that call it, each a job of its own.
  const callers = analysis.estimate?.jobCallers ?? [];
  if (callers.length > 1)
    for (const c of callers)
      items.push({
        key: 'caller',
        value: c.file,
        label: `$(call-incoming) the job of ${c.file}`,
        description: c.chosen ? 'estimated now' : `calls it at line ${c.line}`,
        detail: `Estimate this file as ${c.file}'s job: its model, batch, sequence and launch (writes "# fsdp: caller=${c.file}")`,
      });
  // The paths the defaults keep off, each with the arguments that take it (read again with them by the scan).
  const now = analysis.facts.argv ?? [];
  const taken = new Map<string, string[]>();
  const offer = (args: string[] | undefined, what: string) => {
    if (args) taken.set(args.join(' '), [...(taken.get(args.join(' ')) ?? []), what]);
  };
  for (const c of analysis.facts.calls) offer(c.runsWith, `${c.callee}(${c.target}) at line ${c.line}`);
  // Fine-tuning and training set-ups the defaults keep off (`if args.use_lora:`): LoRA, checkpointing, offload.
  for (const t of analysis.facts.training)
    offer(t.runsWhen?.runsWith, `${TRAINING_WORDS[t.kind] ?? t.text} at line ${t.line}`);
  for (const [extra, calls] of [...taken].slice(0, 6)) {
    const value = withArguments(now, extra.split(' ')).join(' ');
    items.push({
      key: 'args',
      value,
      label: `$(arrow-swap) ${extra}`,
      description: 'another path',
      detail: `Runs ${calls.slice(0, 2).join(', ')}${calls.length > 2 ? ', …' : ''}, off by default (writes "# fsdp: args=${value}")`,
    });
  }
  items.push({
    key: 'args',
    label: "$(terminal) The script's arguments…",
    description:
      args !== undefined
        ? `now: ${args || 'none'}`
        : analysis.facts.argvFrom
          ? `now: those of ${analysis.facts.argvFrom}`
          : 'now: its defaults',
    detail:
      'The command line decides the path the script takes (--use-lora, model=llama8b) (writes "# fsdp: args=...")',
  });
  const pick = await vscode.window.showQuickPick(items, {
    title: 'FSDP: what to estimate in this file',
    placeHolder: plans
      ? plans.chosen
        ? `Now: the plan of ${plans.chosen}`
        : 'Choose the plan to estimate'
      : 'The script takes the path its defaults decide',
    matchOnDetail: true,
  });
  if (!pick) return;
  let value: string | null | undefined = pick.value;
  if (pick.key === 'args' && pick.value === undefined) {
    // The options whose defaults keep a wrap off the estimated path (`--use-lora at line 12`), to name them.
    const deciding = [
      ...new Set(
        analysis.facts.calls.flatMap((c) =>
          [...(c.offByDefault ?? '').matchAll(/--[A-Za-z][\w-]*/g)].map((m) => m[0]),
        ),
      ),
    ];
    const typed = await vscode.window.showInputBox({
      title: "FSDP: the script's arguments",
      prompt: `As you would pass them to the script (its argparse, click or Hydra options). Empty: its defaults.${
        deciding.length ? ` Options that decide which wraps run: ${deciding.slice(0, 6).join(', ')}.` : ''
      }`,
      value: args ?? analysis.facts.argv?.join(' ') ?? '',
    });
    if (typed === undefined) return;
    value = typed.trim() === '' ? null : typed.trim();
  }
  const edit = setAnnotation(doc.getText(), pick.key, value ?? null);
  if (!edit) return;
  const we = new vscode.WorkspaceEdit();
  we.replace(doc.uri, toRange(edit.range), edit.newText);
  await vscode.workspace.applyEdit(we);
}
