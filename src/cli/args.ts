/** Command-line options parsed with node's parseArgs, its errors reported as usage errors with suggestions. */
import { parseArgs } from 'node:util';
import { didYouMean } from '../core/vocabulary/suggest';
import { UsageError } from './io';
import type { CommandSpec, Options } from './spec';

/** `util.parseArgs` over a command's flags; an unknown flag names the closest ones. */
export function parseOptions<O extends Options>(args: string[], spec: CommandSpec<O>) {
  const names = Object.keys(spec.options).map((n) => `--${n}`);
  for (const a of args) {
    if (a === '--') break;
    if (!a.startsWith('-') || a === '-') continue;
    const name = a.startsWith('--') ? a.replace(/=.*$/s, '') : a;
    if (names.includes(name)) continue;
    const short = Object.entries(spec.options).find(([, o]) => o.short && `-${o.short}` === name);
    if (short) continue;
    // A negative number is a value, as in `--mfu -1` (which the value's own check refuses).
    if (/^-\d/.test(a)) continue;
    throw new UsageError(`${spec.name}: unknown flag ${name}${didYouMean(name, names, '')}`);
  }
  try {
    return parseArgs({ args, options: spec.options, allowPositionals: true, strict: true });
  } catch (e) {
    const m = e instanceof Error ? e.message : String(e);
    // Node's wording (`Option '--format <value>' argument missing`), shortened to the flag and what it needs.
    const missing =
      /^Option '(-\S+)(?:, (--\S+))? <value>' argument missing/.exec(m) ??
      /^Option '(-\S+)(?:, (--\S+))?' argument is ambiguous/.exec(m);
    if (missing) throw new UsageError(`${spec.name}: ${missing[2] ?? missing[1]} needs a value`);
    const noValue = /^Option '(-\S+)(?:, (--\S+))?' does not take an argument/.exec(m);
    if (noValue) throw new UsageError(`${spec.name}: ${noValue[2] ?? noValue[1]} takes no value`);
    throw new UsageError(`${spec.name}: ${m.replace(/\. To specify a positional argument.*$/s, '')}`);
  }
}
