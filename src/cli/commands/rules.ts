/** `fsdp-lens rules`: the lint rules with their severities, or their documentation (docs/rules.md). */
import { renderRulesDoc } from '../../core/lint/docs';
import { RULES } from '../../core/lint/registry';
import { parseOptions } from '../args';
import { EXIT, UsageError, type Streams } from '../io';
import { EXIT_TEXT } from '../help';
import type { CommandSpec } from '../spec';

export const rulesSpec = {
  name: 'rules',
  args: '',
  summary: 'The lint rules with their default severities.',
  options: { markdown: { type: 'boolean' } },
  flags: () => [{ flag: '--markdown', text: 'The full rules documentation (docs/rules.md).' }],
  examples: [
    {
      line: 'fsdp-lens rules',
      does: 'Each rule: ID, default severity, name, and whether it has a quick fix.',
    },
  ],
  exits: { ok: EXIT_TEXT.ok, usage: EXIT_TEXT.usage },
} satisfies CommandSpec;

export function rulesCommand(argv: string[], io: Streams): number {
  const { values, positionals } = parseOptions(argv, rulesSpec);
  if (positionals.length) throw new UsageError('rules takes no arguments');
  if (values.markdown) io.out.write(renderRulesDoc(RULES));
  else
    for (const r of RULES)
      io.out.write(
        `${r.id}  ${r.defaultSeverity.padEnd(7)}  ${r.name}: ${r.title}${r.fix ? ' (quick fix)' : ''}\n`,
      );
  return EXIT.ok;
}
