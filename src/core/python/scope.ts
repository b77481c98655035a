/**
 * Bindings and scopes of Python code read statically: the binding visible at a point, enclosing functions, the
 * conditions a statement runs under.
 */
import { sibling, up } from '../parsing/python';
import type { Node, Tree } from '../parsing/python';
import type { SourceFile } from '../parsing/source';

/** How a name got its value at some point of a file. */
export type Binding =
  | { kind: 'assign'; name: Node; value: Node | null; statement: Node; scope: Node | null }
  | { kind: 'param'; name: Node; default: Node | null; function: Node; index: number }
  | { kind: 'loop'; name: Node; loop: Node; scope: Node | null }
  | { kind: 'with'; name: Node; value: Node; scope: Node | null }
  | { kind: 'def' | 'class'; name: Node; definition: Node; scope: Node | null };

const FUNCTION = 'function_definition';

/** The nearest enclosing `def` (lambdas are expressions, not scopes we read). */
export function enclosingFunction(node: Node): Node | null {
  // Each step up the tree crosses into WebAssembly, and a scan asks about many nodes of the same few statements:
  // the answer is remembered for every node passed on the way up (per tree, by node id), so later walks stop
  // where an earlier one went.
  let known = ENCLOSING.get(node.tree);
  if (!known) ENCLOSING.set(node.tree, (known = new Map()));
  const cached = known.get(node.id);
  if (cached !== undefined) return cached;
  const passed = [node.id];
  let found: Node | null = null;
  for (let p = up(node); p; p = up(p)) {
    if (p.type === FUNCTION) {
      found = p;
      break;
    }
    const above = known.get(p.id);
    if (above !== undefined) {
      found = above;
      break;
    }
    passed.push(p.id);
  }
  for (const id of passed) known.set(id, found);
  return found;
}

const ENCLOSING = new WeakMap<Tree, Map<number, Node | null>>();

/** `Trainer.setup` for a method, `main.apply` for a nested function, `apply_fsdp` for a plain one. */
export function qualifiedName(def: Node): string {
  const parts: string[] = [];
  for (let p: Node | null = def; p; p = up(p)) {
    if (p.type === FUNCTION || p.type === 'class_definition') {
      const n = p.childForFieldName('name');
      if (n) parts.unshift(n.text);
    }
  }
  return parts.join('.');
}

/** The statement (a direct child of a block or of the module) that contains `node`. */
export function enclosingStatement(node: Node): Node {
  let n = node;
  for (let p = up(node); p; p = up(p)) {
    if (p.type === 'block' || p.type === 'module') return n;
    n = p;
  }
  return n;
}

/** Ancestors from the parent outwards, stopping at `stop` (exclusive) when given. */
export function ancestors(node: Node, stop?: Node | null): Node[] {
  const out: Node[] = [];
  for (let p = up(node); p; p = up(p)) {
    if (stop && p.id === stop.id) break;
    out.push(p);
  }
  return out;
}

/** One `if` test a node runs under: the condition, negated for `else` / later `elif` branches. */
export interface ConditionPart {
  node: Node;
  negated: boolean;
  /**
   * Every other arm of the `if` raises (`else: raise ValueError(...)`): the test holds on every run that goes on,
   * so it is no choice between plans (its narrowing, `isinstance` included, still applies).
   */
  othersRaise?: true;
}

/** The `if` tests under which `node` runs inside `scope`, outermost first. */
export function conditionParts(node: Node, scope: Node | null): ConditionPart[] {
  const parts: ConditionPart[] = [];
  let child = node;
  for (let p = up(node); p && (!scope || p.id !== scope.id); p = up(p)) {
    if (p.type === FUNCTION || p.type === 'class_definition') break;
    if (p.type === 'block' && (up(p)?.type === 'for_statement' || up(p)?.type === 'while_statement'))
      parts.unshift(...guardsBefore(child));
    if (p.type === 'if_statement') {
      const cond = unwrapped(p.childForFieldName('condition'));
      const consequence = p.childForFieldName('consequence');
      const here: ConditionPart[] = [];
      if (cond && consequence && consequence.id === child.id) here.push({ node: cond, negated: false });
      else if (child.type === 'else_clause' || child.type === 'elif_clause') {
        if (cond) here.push({ node: cond, negated: true });
        for (const alt of p.childrenForFieldName('alternative')) {
          if (alt.id === child.id) break;
          const c = unwrapped(alt.childForFieldName('condition'));
          if (c) here.push({ node: c, negated: true });
        }
        const c = child.type === 'elif_clause' ? unwrapped(child.childForFieldName('condition')) : null;
        if (c) here.push({ node: c, negated: false });
      }
      if (here.length && otherArmsRaise(p, child)) for (const h of here) h.othersRaise = true;
      parts.unshift(...here);
    }
    child = p;
  }
  return parts;
}

/** A test written in parentheses (`if (\n a and b\n):`, to span lines) is the test inside them. */
function unwrapped(cond: Node | null): Node | null {
  let c = cond;
  for (let i = 0; c?.type === 'parenthesized_expression' && i < 8; i++) {
    const inner = c.namedChildren.filter((n) => n.type !== 'comment');
    if (inner.length !== 1) break;
    c = inner[0]!;
  }
  return c;
}

/**
 * `if C: continue` (or `break`) earlier in the same loop body: the statements after it run only when C is false.
 * At most 64 statements back are read.
 */
function guardsBefore(statement: Node): ConditionPart[] {
  const out: ConditionPart[] = [];
  let s = sibling(statement, -1, true);
  for (let i = 0; s && i < 64; i++, s = sibling(s, -1, true)) {
    if (s.type !== 'if_statement' || s.childForFieldName('alternative')) continue;
    const cond = s.childForFieldName('condition');
    const body = s.childForFieldName('consequence');
    const exits = body?.namedChildren.filter((c) => c.type !== 'comment') ?? [];
    if (cond && exits.length === 1 && /^(continue|break)_statement$/.test(exits[0]!.type))
      out.unshift({ node: cond, negated: true });
  }
  return out;
}

/** Conditions under which `node` runs inside `scope`, as source text (`not (...)` for else branches). */
export function conditionsOf(node: Node, scope: Node | null): string[] {
  return conditionParts(node, scope)
    .filter((c) => !c.othersRaise)
    .map((c) => (c.negated ? `not (${c.node.text})` : c.node.text));
}

/**
 * Whether every arm of `ifStatement` but the one holding `arm` raises, an `else` included (without one, a run
 * where no test holds goes on past the `if`).
 */
function otherArmsRaise(ifStatement: Node, arm: Node): boolean {
  const alternatives = ifStatement.childrenForFieldName('alternative');
  if (!alternatives.some((a) => a.type === 'else_clause')) return false;
  const bodies = [ifStatement.childForFieldName('consequence'), ...alternatives].filter(
    (b): b is Node => !!b && b.id !== arm.id,
  );
  return bodies.every((b) =>
    alwaysRaises(
      b.type === 'block' ? b : (b.childForFieldName('consequence') ?? b.childForFieldName('body')),
    ),
  );
}

/**
 * A block whose statements, in order, reach a `raise` with nothing before it that can leave the block another
 * way (a `return`, `break`, `continue`, or a compound statement that might hold one).
 */
function alwaysRaises(block: Node | null): boolean {
  for (const st of block?.namedChildren ?? []) {
    if (st.type === 'raise_statement') return true;
    if (st.type === 'comment' || st.type === 'expression_statement' || st.type === 'pass_statement') continue;
    return false;
  }
  return false;
}

/**
 * The binding of `name` visible at `at`: the last assignment before it in the same function, else a parameter
 * of that function, else the enclosing functions', else the module's (for code inside functions, the last
 * module-level binding anywhere, since module code has run by the time a function is called).
 */
export function findBinding(file: SourceFile, name: string, at: Node): Binding | null {
  const own = enclosingFunction(at);
  let scope = own;
  for (;;) {
    // Nodes are compared by id: the tree hands out a new wrapper object for the same node on each access.
    const found = bindingIn(
      file,
      name,
      scope,
      (scope?.id ?? null) === (own?.id ?? null) ? at.startIndex : Infinity,
      at,
    );
    if (found) return found;
    if (scope) {
      const param = parameterOf(scope, name);
      if (param) return param;
    }
    if (!scope) return null;
    scope = enclosingFunction(scope);
  }
}

/** Bindings of `name` in `scope` (a function, or null for module level) that start before `before`. */
function bindingIn(
  file: SourceFile,
  name: string,
  scope: Node | null,
  before: number,
  at: Node,
): Binding | null {
  const from = scope ? scope.startIndex : 0;
  const to = Math.min(scope ? scope.endIndex : file.text.length, before);
  // The candidates of a name and the function each sits in, found once per file: a file that asks about the same
  // name from many places (a condition in every nested block) does not walk the tree again for each.
  const sites = file.memo(`binding-sites:${name}`, () =>
    file.bindingCandidates(name).map((id) => {
      // A def's own name belongs to the scope around the def.
      const p = up(id);
      const fn =
        p?.type === FUNCTION && p.childForFieldName('name')?.id === id.id
          ? enclosingFunction(p)
          : enclosingFunction(id);
      return { id, fnId: fn?.id ?? null };
    }),
  );
  let moduleBefore: Binding | null = null;
  let last: Binding | null = null;
  for (const { id, fnId } of sites) {
    if (id.startIndex < from || id.startIndex >= to) continue;
    if (fnId !== (scope?.id ?? null)) continue;
    const b = asBinding(id, scope);
    if (!b) continue;
    // `model = model.decoder`: the right side reads the binding before this one (Python evaluates it first).
    const rhs = b.kind === 'assign' ? b.value : null;
    if (rhs && at.startIndex >= rhs.startIndex && at.endIndex <= rhs.endIndex) continue;
    last = b;
    if (id.startIndex < at.startIndex) moduleBefore = b;
  }
  // Inside the same scope only earlier bindings count; at module level prefer one before the use.
  return scope ? last : (moduleBefore ?? last);
}

function asBinding(id: Node, scope: Node | null): Binding | null {
  const p = up(id);
  if (!p) return null;
  switch (p.type) {
    case 'assignment':
      if (p.childForFieldName('left')?.id === id.id)
        return { kind: 'assign', name: id, value: p.childForFieldName('right'), statement: p, scope };
      return null;
    case 'for_statement':
    case 'for_in_clause':
      if (p.childForFieldName('left')?.id === id.id) return { kind: 'loop', name: id, loop: p, scope };
      return null;
    case 'pattern_list':
    case 'tuple_pattern': {
      const owner = up(p);
      if (owner && (owner.type === 'for_statement' || owner.type === 'for_in_clause'))
        return { kind: 'loop', name: id, loop: owner, scope };
      if (owner?.type === 'assignment')
        return { kind: 'assign', name: id, value: null, statement: owner, scope };
      return null;
    }
    case 'as_pattern_target': {
      // `with open(path) as f`: the value is the expression before `as` (the with item holds the whole pattern).
      const item = up(up(p));
      const whole = item?.childForFieldName('value') ?? null;
      const value = whole?.type === 'as_pattern' ? whole.namedChild(0) : (whole ?? up(p)?.namedChild(0));
      return value ? { kind: 'with', name: id, value, scope } : null;
    }
    case 'function_definition':
      return p.childForFieldName('name')?.id === id.id
        ? { kind: 'def', name: id, definition: p, scope }
        : null;
    case 'class_definition':
      return p.childForFieldName('name')?.id === id.id
        ? { kind: 'class', name: id, definition: p, scope }
        : null;
    default:
      return null;
  }
}

/** The parameter `name` of a function, with its default value and position. */
export function parameterOf(fn: Node, name: string): Binding | null {
  const params = fn.childForFieldName('parameters');
  if (!params) return null;
  let index = 0;
  for (const p of params.namedChildren) {
    let id: Node | null = null;
    let def: Node | null = null;
    if (p.type === 'identifier') id = p;
    else if (p.type === 'default_parameter' || p.type === 'typed_default_parameter') {
      id = p.childForFieldName('name');
      def = p.childForFieldName('value');
    } else if (p.type === 'typed_parameter') id = p.namedChild(0);
    if (id?.type === 'identifier' && id.text === name)
      return { kind: 'param', name: id, default: def, function: fn, index };
    index++;
  }
  return null;
}

/** Parameter names of a function, in order (`self` included). */
export function parameterNames(fn: Node): string[] {
  const params = fn.childForFieldName('parameters');
  if (!params) return [];
  const out: string[] = [];
  for (const p of params.namedChildren) {
    const id =
      p.type === 'identifier'
        ? p
        : p.type === 'typed_parameter'
          ? p.namedChild(0)
          : (p.childForFieldName('name') ?? null);
    if (id?.type === 'identifier') out.push(id.text);
  }
  return out;
}

/** `a.b.c` for an attribute chain of identifiers (whitespace and comments removed). */
export function dottedText(node: Node): string {
  if (node.type === 'identifier') return node.text;
  if (node.type === 'attribute') {
    const o = node.childForFieldName('object');
    const a = node.childForFieldName('attribute');
    if (o && a) return `${dottedText(o)}.${a.text}`;
  }
  return node.text.replace(/\s+/g, '');
}

/**
 * The module-level bindings of a file, name to the statement that binds it last: classes, functions and plain
 * assignments, including those under `if TYPE_CHECKING:` or in a `try:` (what the module namespace holds once
 * it has run). The interpreter reads module names through this table; `findBinding` answers for one point.
 */
export function moduleBindings(root: Node): Map<string, Node> {
  const scope = new Map<string, Node>();
  const visit = (stmts: Node[]) => {
    for (const stmt of stmts) {
      const s = stmt.type === 'decorated_definition' ? (stmt.childForFieldName('definition') ?? stmt) : stmt;
      if (s.type === 'class_definition' || s.type === 'function_definition') {
        const n = s.childForFieldName('name')?.text;
        if (n) scope.set(n, stmt);
      } else if (s.type === 'expression_statement') {
        const a = s.namedChild(0);
        if (a?.type === 'assignment') {
          const left = a.childForFieldName('left');
          if (left?.type === 'identifier') scope.set(left.text, a);
        }
      } else if (s.type === 'if_statement' || s.type === 'try_statement') {
        for (const b of s
          .descendantsOfType('block')
          .filter((x) => up(up(x))?.id === s.id || up(x)?.id === s.id))
          visit(b.namedChildren);
      }
    }
  };
  visit(root.namedChildren);
  return scope;
}

/**
 * Calls of methods on the object a name holds (`model.apply_fsdp(mesh)` after `model = ...`), from offset `from`
 * on, while the name is still that binding (`bound` is the assignment's name node).
 */
export function methodCallsOn(file: SourceFile, bound: Node, from: number): { call: Node; method: string }[] {
  const out: { call: Node; method: string }[] = [];
  for (const use of file.identifiers(bound.text, from)) {
    const attr = up(use);
    const call =
      attr?.type === 'attribute' && attr.childForFieldName('object')?.id === use.id ? up(attr) : null;
    const method = attr?.childForFieldName('attribute')?.text;
    if (!method || call?.type !== 'call' || call.childForFieldName('function')?.id !== attr!.id) continue;
    if (findBinding(file, bound.text, use)?.name.id !== bound.id) continue;
    out.push({ call, method });
  }
  return out;
}
