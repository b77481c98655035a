/** Runs every enabled rule over a file's facts; `# noqa` comments suppress findings. */
import { fault } from '../vocabulary/faults';
import { clip, plainText } from '../vocabulary/words';
import { TextIndex } from './edits';
import { RULES } from './registry';
import { SUMMARY_MAX, type Finding, type Fix, type Rule, type RuleContext } from './types';

/**
 * Runs every enabled rule over a file's facts; `# noqa` comments suppress findings. A rule that throws is skipped
 * so that linting never fails as a whole, and the exception is recorded as a fault (`strict` options rethrow it).
 */
export function lintFacts(ctx: RuleContext, rules: readonly Rule[] = RULES): Finding[] {
  const findings: Finding[] = [];
  const index = new TextIndex(ctx.text);
  // One finding of a rule at one range: a rule that reaches a call twice (a loop wrapping two containers) says it once.
  const seen = new Set<string>();
  for (const rule of rules) {
    const severity = ctx.options.rules[rule.id] ?? rule.defaultSeverity;
    if (severity === 'off' || (rule.commandLineOnly && ctx.options.editor)) continue;
    let drafts;
    try {
      drafts = rule.check(ctx);
    } catch (e) {
      if (ctx.options.strict) throw e;
      fault(`rule ${rule.id}`, e);
      continue;
    }
    for (const d of drafts) {
      if (isSuppressed(ctx, rule.id, d.range.start.line, d.range.end.line)) continue;
      const key = [
        rule.id,
        d.range.start.line,
        d.range.start.character,
        d.range.end.line,
        d.range.end.character,
      ].join(':');
      if (seen.has(key)) continue;
      seen.add(key);
      findings.push({
        ...d,
        message: clip(d.message, 1000),
        summary: summaryOf(d.summary ?? d.message),
        rule: rule.id,
        severity,
        fixes: [...d.fixes, noqaFix(index, rule.id, d.range.start.line)],
      });
    }
  }
  return findings.sort(
    (a, b) => a.range.start.line - b.range.start.line || a.range.start.character - b.range.start.character,
  );
}

/**
 * A finding in one line of plain text: its first sentence, or the part before its first colon when that is too
 * long, and cut at a word only as a last resort.
 */
export function summaryOf(text: string): string {
  const plain = plainText(text).replace(/\s+/g, ' ').trim();
  const sentence = /^(.+?[.!?])(\s|$)/.exec(plain)?.[1] ?? plain;
  if (sentence.length <= SUMMARY_MAX) return sentence.replace(/\.$/, '');
  const clause = /^(.+?):\s/.exec(sentence)?.[1];
  if (clause && clause.length <= SUMMARY_MAX) return clause;
  const cut = sentence.slice(0, SUMMARY_MAX - 1);
  return `${cut.slice(0, Math.max(cut.lastIndexOf(' '), SUMMARY_MAX / 2))}…`;
}

function isSuppressed(ctx: RuleContext, id: string, first: number, last: number): boolean {
  for (let l = first; l <= last; l++) {
    const codes = ctx.facts.noqa[l];
    if (codes === null) return true;
    if (codes?.includes(id)) return true;
  }
  return false;
}

/** Adds `# noqa: ID` at the end of the line (or the id to an existing `# noqa: ...` list). */
export function noqaFix(index: TextIndex, id: string, line: number): Fix {
  const text = index.lineText(line);
  const m = /#\s*noqa:\s*([A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)/i.exec(text);
  if (m) {
    const end = { line, character: m.index + m[0].length };
    return {
      title: `Suppress ${id} on this line`,
      edits: [{ range: { start: end, end }, newText: `, ${id}` }],
    };
  }
  const end = index.lineEnd(line);
  const sep = text.trimEnd().length < text.length ? '' : '  ';
  return {
    title: `Suppress ${id} on this line (# noqa: ${id})`,
    edits: [{ range: { start: end, end }, newText: `${sep}# noqa: ${id}` }],
  };
}
