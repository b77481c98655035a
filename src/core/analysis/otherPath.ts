/** The arguments that take a script down the path its defaults keep off: options named by the test, tried and read again. */
import { up, type Node } from '../parsing/python';
import type { SourceFile } from '../parsing/source';
import { stripQuotes } from './paths';
import { optionDeclarations } from './scriptOptions';
import { decidedBy } from './decidedBy';
import type { Evaluator } from './evaluator';
import { withArguments } from '../vocabulary/commandLine';
import { conditionParts, dottedText, findBinding, type ConditionPart } from '../python/scope';

/** The most command lines tried for one call. */
const MAX_TRIES = 12;
/** The most options one path needs (`--fsdp --fsdp-version 2`). */
const MAX_OPTIONS = 3;

/** Whether a call is off the path, and the options whose defaults (or, with `byArgs`, given values) decide it. */
export interface RunState {
  off: boolean;
  options: string[];
  byArgs?: boolean;
}

/** One command-line option of the script: its flags, argparse `action` or click `is_flag`, and `choices`. */
interface ScriptOption {
  flags: string[];
  flag: boolean;
  choices: string[];
}

/**
 * The arguments that put `node` (a wrap call, a LoRA setup) on the path the script takes, where its defaults or
 * its given arguments keep it off; undefined when it is on the path or none are found.
 */
export function offPathArguments(
  file: SourceFile,
  ev: Evaluator,
  node: Node,
  scope: Node | null,
): string[] | undefined {
  const parts = conditionParts(node, scope);
  if (!parts.length) return undefined;
  const start = pathState(ev, parts);
  if (!start.off) return undefined;
  const test = parts.map((p) => p.node.text).join(' ');
  // Decided by no option: by a Hydra config's value, which an override on the command line sets.
  if (!start.options.length) return overrideThatTakes(file, ev, parts, test);
  return argumentsThatTake(file, ev, (e) => pathState(e, parts), test);
}

/**
 * A Hydra override (`model.strategy=fsdp`) that puts the node on the path: the keys are the config paths the tests
 * read (`cfg.model.strategy`, or a name bound to one), the values those the tests compare with (or true and false),
 * each tried by reading the file again with it. Only for a `@hydra.main` app.
 */
function overrideThatTakes(
  file: SourceFile,
  ev: Evaluator,
  parts: readonly ConditionPart[],
  test: string,
): string[] | undefined {
  if (!/@hydra\.main\b/.test(file.text)) return undefined;
  const chains: string[][] = [];
  for (const part of parts)
    for (const n of [part.node, ...part.node.descendantsOfType(['attribute', 'identifier'])]) {
      if (up(n)?.type === 'attribute') continue;
      let chain = n.type === 'attribute' ? dottedText(n) : null;
      // `fsdp_strategy == "fsdp"` of `fsdp_strategy = self.config.model.strategy`.
      if (n.type === 'identifier') {
        const b = findBinding(file, n.text, n);
        chain = b?.kind === 'assign' && b.value?.type === 'attribute' ? dottedText(b.value) : null;
      }
      if (chain?.includes('.')) chains.push(chain.split('.'));
    }
  const literals = [...test.matchAll(/(['"])([^'"\n]{1,60})\1|\b(\d+(?:\.\d+)?)\b/g)].map(
    (m) => m[2] ?? m[3]!,
  );
  const values = literals.length ? [...new Set(literals)] : ['true', 'false'];
  const base = ev.argv ?? [];
  let tries = 0;
  for (const segs of chains)
    for (let k = 1; k < segs.length; k++)
      for (const value of values) {
        if (++tries > MAX_TRIES * 2) return undefined;
        const override = `${segs.slice(k).join('.')}=${value}`;
        if (!pathState(ev.withArgv(withArguments(base, [override])), parts).off) return [override];
      }
  return undefined;
}

/** Whether the tests keep a node off the path, and the options whose defaults, or given values, decide it. */
function pathState(ev: Evaluator, parts: readonly ConditionPart[]): RunState {
  for (const part of parts) {
    const d = decidedBy(ev, part.node);
    if (d.value === undefined || d.value !== part.negated) continue;
    const byDefault = d.defaults
      .map((x) => /^the default of (-\S+)$/.exec(x.what)?.[1])
      .filter((o): o is string => !!o);
    if (byDefault.length) return { off: true, options: [...new Set(byDefault)] };
    const byArgs = d.args.map((a) => a.split(' ')[0]!);
    return byArgs.length
      ? { off: true, options: [...new Set(byArgs)], byArgs: true }
      : { off: true, options: [] };
  }
  return { off: false, options: [] };
}

/**
 * The arguments to add to the script's command line that make `runs(ev)` true where the defaults make it false:
 * for each option whose default decided it, its flag, its choices, or a value the test compares it with, each
 * tried by reading the file again. Undefined when no such arguments are found.
 */
function argumentsThatTake(
  file: SourceFile,
  ev: Evaluator,
  runs: (ev: Evaluator) => RunState,
  test: string,
): string[] | undefined {
  const base = ev.argv ?? [];
  let added: string[] = [];
  let state = runs(ev);
  for (let round = 0; state.off && round < MAX_OPTIONS; round++) {
    let tries = 0;
    let next: { added: string[]; state: RunState } | undefined;
    for (const name of state.options) {
      const option = scriptOption(file, name);
      if (!option) continue;
      for (const extra of candidates(option, test)) {
        if (++tries > MAX_TRIES) break;
        const argv = [...added, ...extra];
        const after = runs(ev.withArgv(withArguments(base, argv)));
        // Taken: the test holds now, or what decides it now is the default of an option not set yet.
        const set = new Set(argv.filter((t) => t.startsWith('-')));
        if (!after.off || (!after.byArgs && after.options.length && !after.options.some((o) => set.has(o)))) {
          next = { added: argv, state: after };
          break;
        }
      }
      if (next) break;
    }
    if (!next) return undefined;
    added = next.added;
    state = next.state;
  }
  return state.off || !added.length ? undefined : added;
}

/** The command lines to try for an option: a flag alone; each choice; each literal the test compares with. */
function candidates(option: ScriptOption, test: string): string[][] {
  const flag = option.flags.find((f) => f.startsWith('--')) ?? option.flags[0]!;
  if (option.flag) return [[flag]];
  const values = option.choices.length
    ? option.choices
    : [...test.matchAll(/(['"])([^'"\n]{1,60})\1|\b(\d+(?:\.\d+)?)\b/g)].map((m) => m[2] ?? m[3]!);
  return [...new Set(values)].map((v) => [flag, v]);
}

/** The argparse `add_argument` or click `@click.option` of the file that has flag `name` (`--strategy`). */
function scriptOption(file: SourceFile, name: string): ScriptOption | undefined {
  for (const word of ['add_argument', 'option']) {
    for (const { names: flags, kw } of optionDeclarations(file, word)) {
      if (!flags.includes(name)) continue;
      const action = kw('action') ? stripQuotes(kw('action')!.text) : undefined;
      const isFlag = action === 'store_true' || action === 'store_false' || kw('is_flag')?.text === 'True';
      // `choices=["a", "b"]` of argparse, `type=click.Choice(["a", "b"])` of click.
      const list = kw('choices') ?? kw('type')?.childForFieldName('arguments')?.namedChildren[0];
      const choices =
        list && (list.type === 'list' || list.type === 'tuple')
          ? list.namedChildren.filter((c) => c.type === 'string').map((c) => stripQuotes(c.text))
          : [];
      return { flags: flags.filter((f) => f.startsWith('-')), flag: isFlag, choices };
    }
  }
  return undefined;
}
