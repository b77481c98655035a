/** Help text: the tool's usage, each command's flags and examples, and the flags derived from the inputs table. */
import { MODEL_INPUTS } from '../core/inputs/model';
import { DEFAULTS, INPUT_KEYS, inputSpec, showInput } from '../core/inputs/table';
import { EXIT } from './io';
import type { CommandSpec } from './spec';

/** Where the descriptions start (as in the rest of the usage) and how wide a line may get. */
const INDENT = 2;
const COLUMN = 28;
const WIDTH = 112;

/** Exit statuses, as every command uses them. */
export const EXIT_TEXT = {
  ok: 'success',
  findings: 'a lint finding of severity error or warning',
  usage: 'bad input or usage (a file that cannot be read, an unknown flag, nothing to estimate)',
  unknownModel:
    "the plan is read but the model's size, or part of the plan, is not known statically (the message says what would make it known)",
  internal: 'an internal error (the message names the stage; please report it)',
} as const;

/** A flag and its description, the description wrapped under its column. */
export function helpEntry(flag: string, text: string, indent = INDENT, column = COLUMN): string {
  const head = `${' '.repeat(indent)}${flag}`;
  const lines: string[] = [];
  let cur = '';
  for (const w of text.split(' ')) {
    if (cur && column + cur.length + 1 + w.length > WIDTH) {
      lines.push(cur);
      cur = w;
    } else cur = cur ? `${cur} ${w}` : w;
  }
  if (cur) lines.push(cur);
  const pad = ' '.repeat(column);
  const first =
    head.length < column - 1 ? `${head.padEnd(column)}${lines[0] ?? ''}` : `${head}\n${pad}${lines[0] ?? ''}`;
  return [first, ...lines.slice(1).map((l) => pad + l)].join('\n');
}

/** The flags of `estimate` that set its inputs: the model's first, then every input of the table. */
export function estimateFlags(): { flag: string; text: string }[] {
  const out: { flag: string; text: string }[] = [];
  for (const m of Object.values(MODEL_INPUTS))
    out.push({ flag: `--${m.flag.name} ${m.flag.value}`, text: `${m.summary}.` });
  for (const key of INPUT_KEYS) {
    const spec = inputSpec(key);
    if (!spec.flag) continue;
    const dflt = showInput(key, DEFAULTS[key] as never, DEFAULTS);
    const ids = key === 'gpu' ? ' (IDs: fsdp-lens gpus)' : '';
    out.push({
      flag: `--${spec.flag.name} ${spec.flag.value}`,
      text: `${spec.summary}${ids}. Default: ${dflt}.`,
    });
  }
  return out;
}

/** `fsdp-lens COMMAND --help`: usage, what it does, every flag, examples and exit statuses. */
export function commandHelp(spec: CommandSpec): string {
  const lines = [
    `Usage: fsdp-lens ${spec.name} [options]${spec.args ? ` ${spec.args}` : ''}`,
    '',
    `${spec.summary}`,
  ];
  if (spec.about) lines.push('', ...wrap(spec.about));
  const flags = [...spec.flags(), { flag: '-h, --help', text: 'This help.' }];
  lines.push('', 'Options:', ...flags.map((f) => helpEntry(f.flag, f.text)));
  if (spec.examples.length) {
    const column = Math.min(COLUMN + 18, Math.max(...spec.examples.map((e) => e.line.length)) + 4);
    lines.push('', 'Examples:', ...spec.examples.map((e) => helpEntry(e.line, e.does, INDENT, column)));
  }
  lines.push('', 'Exit status:', ...exitLines(spec.exits), '');
  return lines.join('\n');
}

/** `fsdp-lens --help`: every command with its summary. */
export function usage(specs: readonly CommandSpec[]): string {
  const lines = ['Usage: fsdp-lens <command> [options]', '', 'Commands:'];
  for (const s of specs) lines.push(helpEntry(`${s.name}${s.args ? ` ${s.args}` : ''}`, s.summary));
  lines.push(
    '',
    'Run "fsdp-lens <command> --help" for its flags and examples.',
    helpEntry('-h, --help', 'This help.'),
    helpEntry('--version', 'The version.'),
    '',
    'Exit status:',
    ...exitLines(EXIT_TEXT),
    '',
  );
  return lines.join('\n');
}

function exitLines(exits: Partial<Record<keyof typeof EXIT_TEXT, string>>): string[] {
  return (Object.keys(EXIT) as (keyof typeof EXIT)[])
    .filter((k) => exits[k])
    .map((k) => helpEntry(String(EXIT[k]), exits[k]!, INDENT, 6));
}

function wrap(text: string): string[] {
  const out: string[] = [];
  let cur = '';
  for (const w of text.split(' ')) {
    if (cur && cur.length + 1 + w.length > WIDTH) {
      out.push(cur);
      cur = w;
    } else cur = cur ? `${cur} ${w}` : w;
  }
  if (cur) out.push(cur);
  return out;
}
