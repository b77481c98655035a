/**
 * `# fsdp: key=value` annotations and `# noqa` comments: how their text is read (shared by Python files, where
 * the tree's comment nodes are asked, and YAML and TOML configurations, where a `#` after whitespace starts one).
 */
import { type SourceFile, rangeOf } from '../parsing/source';
import type { AnnotationFact } from './facts';
import { annotationValues } from '../vocabulary/annotations';

/** `noqa` and `noqa: FSDP001, FSDP004` at the start of a comment's text (after `#`). */
const NOQA = /^\s*noqa\b(?::\s*([A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?/i;

/** The codes a `# noqa` comment lists, null for a bare `# noqa`, undefined when the comment is not one. */
export function noqaCodes(commentBody: string): string[] | null | undefined {
  const m = NOQA.exec(commentBody);
  if (!m) return undefined;
  return m[1]
    ? m[1]
        .split(/[\s,]+/)
        .filter(Boolean)
        .map((c) => c.toUpperCase())
    : null;
}

export function readAnnotations(file: SourceFile): AnnotationFact[] {
  const out: AnnotationFact[] = [];
  const re = /#\s*fsdp:/g;
  for (let m = re.exec(file.text); m; m = re.exec(file.text)) {
    const node = file.root.descendantForIndex(m.index, m.index + 1);
    if (node?.type !== 'comment') continue;
    const body = node.text.slice(node.text.indexOf(':') + 1);
    out.push({ line: file.line(node), range: rangeOf(node), ...annotationValues(body) });
  }
  return out;
}

/** `# noqa` and `# noqa: FSDP001, FSDP004` comments by 0-based line. */
export function readNoqa(file: SourceFile): Record<number, string[] | null> {
  const out: Record<number, string[] | null> = {};
  const re = /#\s*noqa\b/gi;
  for (let m = re.exec(file.text); m; m = re.exec(file.text)) {
    const node = file.root.descendantForIndex(m.index, m.index + 1);
    if (node?.type !== 'comment') continue;
    const codes = noqaCodes(file.text.slice(m.index + 1, node.endIndex));
    if (codes === undefined) continue;
    const line = node.startPosition.row;
    const prev = out[line];
    out[line] = codes === null || prev === null ? null : [...(prev ?? []), ...codes];
  }
  return out;
}
