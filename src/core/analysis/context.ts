/** Where a call sits: the loops around it, its statement, its function's start, offsets of positions. */
import { up } from '../parsing/python';
import type { Node } from '../parsing/python';
import { rangeOf, type SourceFile } from '../parsing/source';
import { enclosingFunction } from '../python/scope';
import type { LoopFact, WrapCall } from './facts';

export function loopFact(file: SourceFile, loop: Node, left: Node, right: Node): LoopFact {
  return {
    target: left.text,
    iterable: right.text,
    line: file.line(loop),
    range: rangeOf(loop),
    targetRange: rangeOf(left),
  };
}

export function loopsOf(file: SourceFile, node: Node, scope: Node | null): LoopFact[] {
  const loops: LoopFact[] = [];
  let child = node;
  for (let p = up(node); p && p.id !== scope?.id; p = up(p)) {
    if (p.type === 'for_statement') {
      const body = p.childForFieldName('body');
      const left = p.childForFieldName('left');
      const right = p.childForFieldName('right');
      if (body && child.id === body.id && left && right) loops.unshift(loopFact(file, p, left, right));
    } else if (
      p.type === 'list_comprehension' ||
      p.type === 'generator_expression' ||
      p.type === 'set_comprehension'
    ) {
      const bodyNode = p.childForFieldName('body');
      if (bodyNode && child.id === bodyNode.id) {
        for (const clause of p.namedChildren.filter((c) => c.type === 'for_in_clause')) {
          const left = clause.childForFieldName('left');
          const right = clause.childForFieldName('right');
          if (left && right) loops.unshift(loopFact(file, clause, left, right));
        }
      }
    } else if (p.type === 'function_definition' || p.type === 'class_definition') break;
    child = p;
  }
  return loops;
}

export function outermostLoopStatement(node: Node, scope: Node | null): Node | null {
  let found: Node | null = null;
  for (let p = up(node); p && p.id !== scope?.id; p = up(p)) if (p.type === 'for_statement') found = p;
  return found;
}

export function offsetOf(file: SourceFile, pos: { line: number; character: number }): number {
  let off = 0;
  for (let l = 0; l < pos.line; l++) off = file.text.indexOf('\n', off) + 1;
  return off + pos.character;
}

export function functionStart(file: SourceFile, c: WrapCall): number {
  const node = file.root.descendantForIndex(c.statement.start, c.statement.start + 1);
  return (node && enclosingFunction(node)?.startIndex) ?? 0;
}

export function statementInfo(file: SourceFile, stmt: Node) {
  return { start: stmt.startIndex, end: stmt.endIndex, range: rangeOf(stmt), indent: file.indentOf(stmt) };
}
