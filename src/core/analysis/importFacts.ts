/** The import bindings as facts the rules read: legacy FSDP2 paths with the rewrite a fix may write, fallbacks in `try`/`except ImportError` and behind a PyTorch version check. */
import { up } from '../parsing/python';
import type { Node } from '../parsing/python';
import { type SourceFile, rangeOf } from '../parsing/source';
import type { ImportTable } from '../python/imports';
import { FSDP2_MODULE, LEGACY_FSDP2_MODULES, classifyApi } from './apis';
import { arms } from './branches';
import type { ImportFact } from './facts';

export function importFacts(file: SourceFile, imports: ImportTable): ImportFact[] {
  const out: ImportFact[] = [];
  const at: number[] = [];
  for (const b of imports.bindings) {
    const api = classifyApi(b.qualified);
    const fromText = b.fromNode?.text.replace(/\s+/g, '');
    const fromLegacy = !!fromText && LEGACY_FSDP2_MODULES.includes(fromText);
    // `from torch.distributed._composable import fsdp`: the name bound is the legacy module itself.
    const namesLegacyModule = !!fromText && !b.isModule && LEGACY_FSDP2_MODULES.includes(b.qualified);
    const imported = b.imported ?? b.qualified;
    const moduleLegacy = b.isModule && LEGACY_FSDP2_MODULES.includes(imported);
    const fact: ImportFact = {
      local: b.local,
      qualified: b.qualified,
      line: b.line,
      endLine: b.statement.endLine,
      topLevel: b.statement.topLevel,
      legacy: !!(api?.legacy || fromLegacy || moduleLegacy || namesLegacyModule),
      ...(b.fallback ? { fallback: true } : {}),
    };
    if (fromLegacy && fromText.startsWith(LEGACY_FSDP2_MODULES[0]!)) fact.rewrite = FSDP2_MODULE;
    else if (namesLegacyModule && fromText === 'torch.distributed._composable')
      fact.rewrite = 'torch.distributed';
    // `import torch.distributed._composable.fsdp as F` can be rewritten; without `as`, the calls spell the path.
    else if (moduleLegacy && !b.imported) fact.rewrite = FSDP2_MODULE;
    if (b.fromNode) {
      const node = file.root.descendantForIndex(b.fromNode.start, b.fromNode.end);
      if (node) fact.from = { ...b.fromNode, range: rangeOf(node) };
    } else if (moduleLegacy) {
      const stmt = file.root.descendantForIndex(b.statement.start, b.statement.start + 1);
      const dotted = stmt ? findDotted(stmt, imported) : null;
      if (dotted)
        fact.from = {
          start: dotted.startIndex,
          end: dotted.endIndex,
          text: dotted.text,
          range: rangeOf(dotted),
        };
    }
    out.push(fact);
    at.push(b.statement.start);
  }
  markVersionFallbacks(file, out, at);
  return out;
}

/**
 * A legacy import in one arm of an `if` that checks the PyTorch version or a feature (`torch.__version__ < "2.6"`,
 * `version.parse(...) >= ...`, `TORCH_VERSION >= (2, 6)`, `hasattr(torch.distributed.fsdp, "fully_shard")`), where
 * another arm of that `if` imports the same name from the public path: code that supports older releases on
 * purpose. A legacy import under any other `if`, or with no public import beside it, is left as it is.
 */
function markVersionFallbacks(file: SourceFile, facts: ImportFact[], at: number[]): void {
  const isPublic = (f: ImportFact) =>
    !f.legacy && (f.qualified === FSDP2_MODULE || f.qualified.startsWith(`${FSDP2_MODULE}.`));
  facts.forEach((fact, i) => {
    if (!fact.legacy || fact.fallback) return;
    const start = at[i]!;
    let child: Node | null = file.root.descendantForIndex(start, start + 1);
    for (let p = up(child); p && child; child = p, p = up(p)) {
      if (p.type === 'function_definition' || p.type === 'class_definition') break;
      if (p.type !== 'if_statement') continue;
      const all = arms(p);
      const mine = all.findIndex((a) => a.id === child!.id);
      if (mine < 0 || !checksVersion(p)) continue;
      const others = all.filter((_, k) => k !== mine);
      const publicBeside = facts.some(
        (f, j) =>
          f.local === fact.local &&
          isPublic(f) &&
          others.some((a) => at[j]! >= a.startIndex && at[j]! < a.endIndex),
      );
      if (publicBeside) {
        fact.fallback = true;
        return;
      }
    }
  });
}

/** Names that read the installed release (`torch.__version__`, `packaging.version.Version`, `TORCH_VERSION`). */
const VERSION_WORDS =
  /__version__|\bversion\s*\.\s*(parse|Version)\b|\bVersion\s*\(|\bparse_version\b|\btorch_version\b|\bis_torch_version\b|\bhasattr\s*\(/i;

/** Whether the conditions of an `if` statement (its `elif`s included) check the PyTorch version or a feature. */
function checksVersion(stmt: Node): boolean {
  const conditions = [stmt, ...stmt.childrenForFieldName('alternative')]
    .map((s) => s.childForFieldName('condition'))
    .filter((c): c is Node => !!c);
  return conditions.some(
    (c) =>
      VERSION_WORDS.test(c.text) ||
      [c, ...c.descendantsOfType('comparison_operator')].some(
        (cmp) => cmp.type === 'comparison_operator' && cmp.namedChildren.some(isVersionLiteral),
      ),
  );
}

/** A release written as a literal: `(2, 6)` or `"2.6.0"`. */
function isVersionLiteral(n: Node): boolean {
  if (n.type === 'tuple') {
    const items = n.namedChildren.filter((c) => c.type !== 'comment');
    return items.length >= 2 && items.every((c) => c.type === 'integer');
  }
  return n.type === 'string' && /^[rbuf]*['"]\d+(\.\d+)+/i.test(n.text);
}

export function findDotted(stmt: Node, text: string): Node | null {
  let s: Node | null = stmt;
  while (s && s.type !== 'import_statement') s = up(s);
  if (!s) return null;
  return s.descendantsOfType('dotted_name').find((d) => d.text.replace(/\s+/g, '') === text) ?? null;
}
