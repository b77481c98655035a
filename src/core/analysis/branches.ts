/** The `if` arms a statement runs in (and the arms an early `return` rules out), and the `isinstance` tests around it, so rules compare only code that can run in one pass. */
import { sibling, up } from '../parsing/python';
import type { Node } from '../parsing/python';
import { type ConditionPart, conditionParts, dottedText } from '../python/scope';
import type { Evaluator } from './evaluator';
import type { BranchStep, TypeTest } from './facts';

/**
 * The arms of the `if` statements that `node` can run in, from the enclosing function (or the module) down.
 * Inside an arm the step names that arm. After an `if` in the same block, one of whose arms always ends in
 * `return` or `raise`, the step names the arms that fall through (the implicit "no arm taken" of an `if` without
 * `else` is numbered after its last arm). `continue` and `break` are left out: the next iteration runs both sides.
 */
export function branchPath(node: Node, scope: Node | null): BranchStep[] {
  const steps: BranchStep[] = [];
  let child = node;
  for (let p = up(node); p && (!scope || p.id !== scope.id); p = up(p)) {
    if (p.type === 'function_definition' || p.type === 'class_definition' || p.type === 'lambda') break;
    if (p.type === 'if_statement') {
      const arm = armIndex(p, child);
      if (arm !== null) steps.unshift({ at: p.startIndex, arms: [arm] });
    } else if (p.type === 'block' || p.type === 'module') {
      steps.unshift(...exitsBefore(child));
    }
    child = p;
  }
  return steps;
}

/**
 * The tests an early exit before `node` implies: after `if C: ... return` (no other arm), the code below runs only
 * when C is false. Read in every block from `node` up to `scope`, at most 64 statements back in each.
 */
export function exitGuards(node: Node, scope: Node | null): ConditionPart[] {
  const out: ConditionPart[] = [];
  let child = node;
  for (let p = up(node); p && (!scope || p.id !== scope.id); p = up(p)) {
    if (p.type === 'function_definition' || p.type === 'class_definition' || p.type === 'lambda') break;
    if (p.type === 'block' || p.type === 'module') {
      let s = sibling(child, -1, true);
      for (let i = 0; s && i < 64; i++, s = sibling(s, -1, true)) {
        if (s.type !== 'if_statement' || s.childForFieldName('alternative')) continue;
        const cond = s.childForFieldName('condition');
        const body = s.childForFieldName('consequence');
        if (cond && body && alwaysExits(body)) out.unshift({ node: cond, negated: true });
      }
    }
    child = p;
  }
  return out;
}

/** The arms of an `if` statement in order: the consequence, then each `elif` and the `else`. */
export function arms(stmt: Node): Node[] {
  const first = stmt.childForFieldName('consequence');
  return [...(first ? [first] : []), ...stmt.childrenForFieldName('alternative')];
}

/** Which arm of `stmt` holds `child` (a direct child of the statement), or null for its condition. */
function armIndex(stmt: Node, child: Node): number | null {
  const i = arms(stmt).findIndex((a) => a.id === child.id);
  return i < 0 ? null : i;
}

/** Steps for the `if` statements before `statement` in its block that end in `return` / `raise` in some arm. */
function exitsBefore(statement: Node): BranchStep[] {
  const out: BranchStep[] = [];
  let s = sibling(statement, -1, true);
  for (let i = 0; s && i < 64; i++, s = sibling(s, -1, true)) {
    if (s.type !== 'if_statement') continue;
    const all = arms(s);
    const hasElse = all.some((a) => a.type === 'else_clause');
    // An `if` without `else` may take no arm at all: that possibility is numbered after the last arm.
    const through = all.map((a, k) => (alwaysExits(armBody(a)) ? -1 : k)).filter((k) => k >= 0);
    if (!hasElse) through.push(all.length);
    if (through.length < all.length + (hasElse ? 0 : 1)) out.unshift({ at: s.startIndex, arms: through });
  }
  return out;
}

function armBody(arm: Node): Node | null {
  return arm.type === 'block' ? arm : (arm.childForFieldName('consequence') ?? arm.childForFieldName('body'));
}

/** A block whose last statement is `return` / `raise`, or an `if` with `else` every arm of which always exits. */
function alwaysExits(block: Node | null): boolean {
  const last = block?.namedChildren.filter((c) => c.type !== 'comment').pop();
  if (!last) return false;
  if (last.type === 'return_statement' || last.type === 'raise_statement') return true;
  if (last.type !== 'if_statement') return false;
  const all = arms(last);
  return all.some((a) => a.type === 'else_clause') && all.every((a) => alwaysExits(armBody(a)));
}

/**
 * The `isinstance(x, Cls)` tests `node` runs under inside `scope`: those of the enclosing `if` arms and loop guards,
 * and those an early exit before it implies. `not` flips a test; the operands of a true `and` (or a false `or`) are
 * each known, those of a true `or` are not.
 */
export function typeTestsOf(ev: Evaluator, node: Node, scope: Node | null): TypeTest[] {
  const out: TypeTest[] = [];
  const read = (n: Node | null, negated: boolean): void => {
    if (!n) return;
    if (n.type === 'parenthesized_expression') return read(n.namedChild(0), negated);
    if (n.type === 'not_operator') return read(n.childForFieldName('argument'), !negated);
    if (n.type === 'boolean_operator') {
      const op = n.childForFieldName('operator')?.type;
      if ((op === 'and' && !negated) || (op === 'or' && negated)) {
        read(n.childForFieldName('left'), negated);
        read(n.childForFieldName('right'), negated);
      }
      return;
    }
    if (n.type !== 'call' || n.childForFieldName('function')?.text !== 'isinstance') return;
    const args = n.childForFieldName('arguments')?.namedChildren.filter((c) => c.type !== 'comment') ?? [];
    const [subject, cls] = args;
    if (args.length !== 2 || !subject || !cls) return;
    const items = cls.type === 'tuple' || cls.type === 'parenthesized_expression' ? cls.namedChildren : [cls];
    const classes = items
      .filter((i) => i.type !== 'comment')
      .map((i) => (i.type === 'identifier' || i.type === 'attribute' ? ev.calleeName(i) : i.text));
    out.push({ subject: dottedText(subject), classes, negated });
  };
  for (const part of [...conditionParts(node, scope), ...exitGuards(node, scope)])
    read(part.node, part.negated);
  return out;
}

/** A test that a module exists (`model.norm is not None`, `not (model.norm is None)`, and `and`s of them): no choice. */
const PRESENCE = /^(?:not \()?[\w.]+ is (?:not )?None\)?(?: and (?:not \()?[\w.]+ is (?:not )?None\)?)*$/;

export function isPresenceTest(text: string): boolean {
  return PRESENCE.test(text.trim());
}
