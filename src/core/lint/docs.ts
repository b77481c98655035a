/** The rules' documentation (docs/rules.md), rendered from the rules themselves. */
import type { Rule } from './types';

/** The anchor of a rule's section in docs/rules.md (GitHub's heading slugs). */
export function ruleAnchor(rule: Rule): string {
  return `${rule.id}-${rule.name}`.toLowerCase();
}

/** docs/rules.md, generated from the registry (a test keeps the file in step). */
export function renderRulesDoc(rules: readonly Rule[]): string {
  const out: string[] = [
    '# FSDP Lens rules',
    '',
    '<!-- Generated from src/core/lint/rules by `npm run docs:rules`; edit the rules, not this file. -->',
    '',
    'Each rule has an id, a default severity, and a quick fix where one is safe. Change a severity or turn a rule off',
    'with the `fsdpLens.lint.rules` setting (`{"FSDP004": "warning", "FSDP005": "off"}`) or `--rule ID=SEVERITY` on',
    'the command line; suppress one finding with `# noqa: FSDP001` (or a bare `# noqa`) on its line.',
    '',
    '| Rule | Title | Default | Quick fix |',
    '|---|---|---|---|',
    ...rules.map(
      (r) => `| [${r.id}](#${ruleAnchor(r)}) | ${r.title} | ${r.defaultSeverity} | ${r.fix ? 'yes' : 'no'} |`,
    ),
    '',
  ];
  for (const r of rules) {
    out.push(
      `## ${r.id} ${r.name}`,
      '',
      `**${r.title}.** Default severity: ${r.defaultSeverity}.`,
      '',
      r.rationale,
      '',
    );
    out.push(
      'Wrong:',
      '',
      `\`\`\`${r.example.language ?? 'python'}`,
      r.example.bad,
      '```',
      '',
      'Right:',
      '',
      `\`\`\`${r.example.language ?? 'python'}`,
      r.example.good,
      '```',
      '',
    );
    if (r.fix) out.push(`Quick fix: ${r.fix}`, '');
    if (r.commandLineOnly) out.push('Reported by the command line only.', '');
  }
  out.push(
    '## Patterns checked and not reported',
    '',
    'Mistakes users ask about that PyTorch handles; a rule would speak falsely on them.',
    '',
    ...NOT_RULES.flatMap((n) => [`**${n.pattern}.** ${n.why}`, '']),
  );
  return out.join('\n');
}

/** Patterns a rule was considered for, and what PyTorch does that makes them correct code. */
const NOT_RULES: readonly { pattern: string; why: string }[] = [
  {
    pattern: '`model.to(torch.bfloat16)`, `model.half()` or `model.cuda()` after wrapping',
    why:
      "FSDP1 reads the FlatParameter's dtype and device at lazy initialization, in the first forward " +
      '(`FlatParamHandle.init_flat_param_attributes` in `torch/distributed/fsdp/_flat_param.py`, which exists "to ' +
      'give users the chance to move the parameter appropriately after the FSDP constructor" and takes a changed ' +
      "dtype as the new parameter dtype unless mixed precision sets one). FSDP2's `FSDPModule._apply` re-registers the " +
      'sharded parameters after `nn.Module._apply` (`FSDPParam.reset_sharded_param`). The estimate takes such a cast ' +
      'as the parameter dtype.',
  },
];
