/** `fsdp-lens rules`: the lint rules with their severities, or their documentation (docs/rules.md). */
import { renderRulesDoc } from '../../core/lint/docs';
import { RULES } from '../../core/lint/registry';
import { parseOptions } from '../args';
import { EXIT, type Streams } from '../io';

export function rulesCommand(argv: string[], io: Streams): number {
  const { values } = parseOptions(argv, { markdown: { type: 'boolean' } }, 'rules');
  if (values.markdown) io.out.write(renderRulesDoc(RULES));
  else
    for (const r of RULES)
      io.out.write(
        `${r.id}  ${r.defaultSeverity.padEnd(7)}  ${r.name}: ${r.title}${r.fix ? ' (quick fix)' : ''}\n`,
      );
  return EXIT.ok;
}
