/** `fsdp-lens defaults`: what each framework does where its configuration is silent, and where it says so. */
import { DEFAULTS, renderDefaultsDoc, type FrameworkDefault } from '../../core/frameworks/defaults';
import { parseOptions } from '../args';
import { EXIT, UsageError, type Streams } from '../io';
import { EXIT_TEXT } from '../help';
import type { CommandSpec } from '../spec';

export const defaultsSpec = {
  name: 'defaults',
  args: '[FRAMEWORK]',
  summary: "The frameworks' defaults the configuration readers apply, with their sources.",
  options: { markdown: { type: 'boolean' } },
  flags: () => [{ flag: '--markdown', text: 'The whole table as Markdown (docs/defaults.md).' }],
  examples: [
    { line: 'fsdp-lens defaults', does: "Every framework's defaults: topic, key, value, source." },
    { line: 'fsdp-lens defaults torchtitan', does: "torchtitan's only." },
  ],
  exits: { ok: EXIT_TEXT.ok, usage: EXIT_TEXT.usage },
} satisfies CommandSpec;

export function defaultsCommand(argv: string[], io: Streams): number {
  const { values, positionals } = parseOptions(argv, defaultsSpec);
  if (positionals.length > 1) throw new UsageError('defaults takes at most one framework');
  if (values.markdown) {
    if (positionals.length) throw new UsageError('--markdown prints the whole table: give no framework');
    io.out.write(renderDefaultsDoc());
    return EXIT.ok;
  }
  const names = Object.keys(DEFAULTS);
  const want = positionals[0]?.toLowerCase();
  const picked = want ? names.filter((n) => n.toLowerCase() === want) : names;
  if (!picked.length) throw new UsageError(`no framework "${positionals[0]}": one of ${names.join(', ')}`);
  for (const name of picked) {
    io.out.write(`${name}\n`);
    for (const e of Object.values(DEFAULTS[name as keyof typeof DEFAULTS]) as FrameworkDefault[])
      io.out.write(`  ${e.topic.padEnd(13)} ${e.key} = ${String(e.value)}  (${e.source})\n`);
  }
  return EXIT.ok;
}
