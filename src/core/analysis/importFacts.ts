/** The import bindings as facts the rules read: legacy FSDP2 paths with the rewrite a fix may write, `try`/`except ImportError` fallbacks. */
import { up } from '../parsing/python';
import type { Node } from '../parsing/python';
import { type SourceFile, rangeOf } from '../parsing/source';
import type { ImportTable } from '../python/imports';
import { FSDP2_MODULE, LEGACY_FSDP2_MODULES, classifyApi } from './apis';
import type { ImportFact } from './facts';

export function importFacts(file: SourceFile, imports: ImportTable): ImportFact[] {
  const out: ImportFact[] = [];
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
  }
  return out;
}

export function findDotted(stmt: Node, text: string): Node | null {
  let s: Node | null = stmt;
  while (s && s.type !== 'import_statement') s = up(s);
  if (!s) return null;
  return s.descendantsOfType('dotted_name').find((d) => d.text.replace(/\s+/g, '') === text) ?? null;
}
