/** Help text derived from the table of estimate inputs: one entry per flag, with its default. */
import { MODEL_INPUTS } from '../core/inputs/model';
import { DEFAULTS, INPUT_KEYS, inputSpec, showInput } from '../core/inputs/table';

/** Where the descriptions start (as in the rest of the usage) and how wide a line may get. */
const INDENT = 6;
const COLUMN = 28;
const WIDTH = 112;

/** A flag and its description, the description wrapped under its column. */
export function helpEntry(flag: string, text: string): string {
  const head = `${' '.repeat(INDENT)}${flag}`;
  const words = text.split(' ');
  const lines: string[] = [];
  let cur = '';
  for (const w of words) {
    if (cur && COLUMN + cur.length + 1 + w.length > WIDTH) {
      lines.push(cur);
      cur = w;
    } else cur = cur ? `${cur} ${w}` : w;
  }
  if (cur) lines.push(cur);
  const pad = ' '.repeat(COLUMN);
  const first =
    head.length < COLUMN ? `${head.padEnd(COLUMN)}${lines[0] ?? ''}` : `${head}\n${pad}${lines[0] ?? ''}`;
  return [first, ...lines.slice(1).map((l) => pad + l)].join('\n');
}

/** The flags of `estimate` that set its inputs: the model's first, then every input of the table. */
export function estimateFlagsHelp(): string {
  const out: string[] = [];
  for (const m of Object.values(MODEL_INPUTS))
    out.push(helpEntry(`--${m.flag.name} ${m.flag.value}`, `${m.summary}.`));
  for (const key of INPUT_KEYS) {
    const spec = inputSpec(key);
    if (!spec.flag) continue;
    const dflt = showInput(key, DEFAULTS[key] as never, DEFAULTS);
    const ids = key === 'gpu' ? ' (IDs: fsdp-lens gpus)' : '';
    out.push(helpEntry(`--${spec.flag.name} ${spec.flag.value}`, `${spec.summary}${ids}. Default: ${dflt}.`));
  }
  return out.join('\n');
}
