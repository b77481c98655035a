/** Rule FSDP000: a syntax error in a file the analysis reads, which may hide the plan after it. */
import type { Rule } from '../types';

export const syntaxError: Rule = {
  id: 'FSDP000',
  name: 'syntax-error',
  title: 'Syntax error in a file with FSDP code',
  defaultSeverity: 'warning',
  rationale: `The analysis reads what parses. After a syntax error, the parser recovers where it can, so wrap calls,
options and models after it may be missed or read wrongly, and every other finding and figure of the file is
uncertain. Python itself refuses to run the file. The command line reports it (\`fsdp-lens lint\`) for files that
mention FSDP or a framework that configures it; in the editor, the Python language server already underlines it as
you type, so the editor does not repeat it.`,
  example: {
    bad: `for layer in model.layers
    fully_shard(layer)
fully_shard(model)`,
    good: `for layer in model.layers:
    fully_shard(layer)
fully_shard(model)`,
  },
  commandLineOnly: true,
  check(ctx) {
    const p = ctx.facts.problems.find((x) => x.syntax);
    if (!p?.syntax) return [];
    return [
      {
        range: p.syntax.range,
        message: `Syntax error (${p.syntax.found}): the analysis reads only the parts that parse, so wrap calls and options after it may be missed.`,
        fixes: [],
      },
    ];
  },
};
