/** What one `fully_shard` / `FSDP` / `wrap` call does: its target and the module path it denotes, its options, the loops and conditions around it, an enclosing `enable_wrap` block, and whether it can ever run; and calls in code that does not parse yet. */
import { sibling, up } from '../parsing/python';
import type { Node } from '../parsing/python';
import { type SourceFile, rangeOf } from '../parsing/source';
import { truthy } from '../python/operators';
import {
  conditionParts,
  conditionsOf,
  enclosingFunction,
  enclosingStatement,
  findBinding,
  parameterNames,
  qualifiedName,
} from '../python/scope';
import type { Position } from '../vocabulary/range';
import { classifyApi } from './apis';
import { callOf, readArgs, readOptions } from './arguments';
import { offPathArguments } from './otherPath';
import { decidedBy } from './decidedBy';
import { branchPath, isPresenceTest } from './branches';
import { functionStart, loopFact, loopsOf, offsetOf, outermostLoopStatement, statementInfo } from './context';
import { type Evaluator } from './evaluator';
import { oneLine } from '../vocabulary/words';
import type { FunctionFact, LoopFact, OptionFact, WrapCall } from './facts';
import { lastSegment } from './options';
import {
  boundModuleList,
  derivedFrom,
  isUnder,
  iterablePath,
  namedByParameter,
  pathOf,
  pathsOf,
  pathsUnlessRebound,
  pickedList,
} from './paths';

export function wrapCall(
  file: SourceFile,
  ev: Evaluator,
  call: Node,
  fn: Node,
  api: 'fully_shard' | 'FSDP' | 'wrap',
  module: string,
  legacy: boolean,
): WrapCall {
  const args = readArgs(file, call);
  const targetNode = args.keywords.get('module') ?? args.positional[0] ?? null;
  const { options, unresolvedSplats } = readOptions(ev, args, api, ['module']);
  const scope = enclosingFunction(call);
  const loops = loopsOf(file, call, scope);
  // `fully_shard(modules)` of `modules = [model.norm, model.lm_head]`: one unit of the listed modules.
  const listed = targetNode && !loops.length ? boundModuleList(file, targetNode) : null;
  const targets =
    targetNode?.type === 'list' || targetNode?.type === 'tuple'
      ? targetNode.namedChildren.filter((c) => c.type !== 'comment')
      : listed && listed.length > 1
        ? listed
        : targetNode
          ? [targetNode]
          : [];
  const parent = up(call);
  const assignedTo =
    parent?.type === 'assignment' && parent.childForFieldName('right')?.id === call.id
      ? (parent.childForFieldName('left')?.text ?? null)
      : null;
  const stmt = enclosingStatement(call);
  const outerLoop = loops[0] ? outermostLoopStatement(call, scope) : null;
  const fact: WrapCall = {
    api,
    file: file.path,
    line: file.line(call),
    range: rangeOf(call),
    callee: fn.text,
    calleeRange: rangeOf(fn),
    target: targetNode?.text ?? '',
    targetRange: targetNode ? rangeOf(targetNode) : null,
    argumentsEnd: lastArgumentEnd(call),
    targets: targets.map((t) => t.text),
    paths: targets.flatMap((t) => pathsOf(file, t, loops.length ? call : null)),
    loop: loops[loops.length - 1] ?? null,
    loops,
    conditions: conditionsOf(call, scope),
    branch: branchPath(call, scope),
    function: scope ? qualifiedName(scope) : null,
    importPath: module || null,
    legacy,
    options,
    unresolvedSplats,
    assignedTo,
    isRoot: false,
    children: [],
    statement: statementInfo(file, stmt),
    loopStatement: outerLoop ? statementInfo(file, outerLoop) : null,
    classFilter: classFilterOf(ev, call, scope, targetNode),
  };
  // A loop over a list picked under tests: which modules it holds is for the plan to decide, test by test.
  const loopNode = loops.length && targetNode?.type === 'identifier' ? innermostFor(call, scope) : null;
  const picked = loopNode?.childForFieldName('right')
    ? pickedList(file, loopNode.childForFieldName('right')!, scope)
    : undefined;
  if (picked?.parts.length) fact.pickedBy = picked.parts.map((p) => p.node.text).join(' and ');
  const excluded = classesExcluded(ev, call, scope, targetNode);
  if (excluded.length) fact.classExclude = excluded;
  if (wrapsLoopBase(file, call, scope, targetNode)) fact.wrapsBase = true;
  const enable = enableWrapOptions(file, ev, call, scope);
  if (enable) {
    fact.enableWrap = enable;
    // `wrap(m, **overrides)` runs FSDP with `{**enable_wrap_kwargs, **overrides}` (torch/distributed/fsdp/wrap.py).
    if (api === 'wrap')
      for (const [name, o] of Object.entries(enable))
        if (!(name in fact.options)) fact.options[name] = { ...o, inherited: 'enable_wrap' };
  }
  if (insideTry(call, scope)) fact.inTry = true;
  const namedBy = loops.length && targets.length === 1 ? namedByParameter(file, targets[0]!) : null;
  if (namedBy) fact.namedBy = namedBy;
  const rebound =
    targets.length === 1 ? pathsUnlessRebound(file, targets[0]!, loops.length ? call : null) : null;
  if (rebound) fact.unlessRebound = rebound;
  const head = fact.paths[0]?.[0];
  const from = head ? derivedFrom(file, head, call) : [];
  if (from.length) fact.baseDerivedFrom = from;
  const never = neverRunsReason(ev, call, scope);
  if (never?.byDefault) {
    fact.offByDefault = never.reason;
    // The arguments that take the path it is on, read again with them.
    const taken = offPathArguments(file, ev, call, scope);
    if (taken) fact.runsWith = taken;
  } else if (never) fact.neverRuns = never.reason;
  else {
    // Tests around the call, outside its own loops (whose tests of each module are read module by module), that
    // cannot be decided: the estimate takes the call as running, and says so.
    const undecided = undecidedTests(ev, call, scope, loops.length > 0);
    if (undecided.length) fact.undecided = undecided;
  }
  return fact;
}

/**
 * The tests around a call, outside its own loops (whose tests of each module are read module by module), that
 * cannot be decided: a test that another arm raises, or that a module exists, is no choice.
 */
export function undecidedTests(ev: Evaluator, call: Node, scope: Node | null, inLoop: boolean): string[] {
  const loopsAround = inLoop ? outermostLoopStatement(call, scope) : null;
  return conditionParts(call, scope)
    .filter((p) => !p.othersRaise && !(loopsAround && p.node.startIndex >= loopsAround.startIndex))
    .filter((p) => truthy(ev.eval(p.node)) === undefined)
    .map((p) => (p.negated ? `not (${p.node.text})` : p.node.text))
    .filter((t) => !isPresenceTest(t));
}

/**
 * Classes an `isinstance(<target>, Cls)` test around a call admits: `isinstance(<target>, (A, B))`, and tests joined
 * by `or` (`isinstance(m, A) or isinstance(m, B)`: A or B, each perhaps `and`-ed with another test). Null when no
 * test restricts the target's class.
 */
export function classFilterOf(
  ev: Evaluator,
  call: Node,
  scope: Node | null,
  target: Node | null,
): string[] | null {
  if (target?.type !== 'identifier') return null;
  for (const part of conditionParts(call, scope)) {
    // `not isinstance(m, Block)` negated (a guard `if not isinstance(...): continue`) is `isinstance(m, Block)`.
    const classes = admittedClasses(ev, part.node, part.negated, target.text);
    if (classes) return [...new Set(classes)];
  }
  return null;
}

/**
 * Classes an `isinstance(<target>, Cls)` test keeps out of a call: it runs where the test is false (`if
 * isinstance(m, nn.ModuleList): continue`, `if not isinstance(m, (A, B)):`).
 */
export function classesExcluded(
  ev: Evaluator,
  call: Node,
  scope: Node | null,
  target: Node | null,
): string[] {
  if (target?.type !== 'identifier') return [];
  const out: string[] = [];
  for (const part of conditionParts(call, scope)) {
    // Where `isinstance(m, A) or isinstance(m, B)` is false, m is neither.
    const classes = part.negated ? admittedClasses(ev, part.node, false, target.text) : null;
    if (classes) out.push(...classes);
  }
  return [...new Set(out)];
}

/**
 * The classes `subject` must be of where `node` is true (false when `negated`), or null for no restriction. An `or`
 * (a negated `and`) admits the union of its operands' classes, and only when each operand restricts; an `and` (a
 * negated `or`) admits no more than one of its restricting operands.
 */
function admittedClasses(ev: Evaluator, node: Node, negated: boolean, subject: string): string[] | null {
  if (node.type === 'parenthesized_expression') {
    const inner = node.namedChild(0);
    return inner ? admittedClasses(ev, inner, negated, subject) : null;
  }
  if (node.type === 'not_operator') {
    const arg = node.childForFieldName('argument');
    return arg ? admittedClasses(ev, arg, !negated, subject) : null;
  }
  if (node.type === 'boolean_operator') {
    const left = node.childForFieldName('left');
    const right = node.childForFieldName('right');
    if (!left || !right) return null;
    const a = admittedClasses(ev, left, negated, subject);
    const b = admittedClasses(ev, right, negated, subject);
    const either = (node.childForFieldName('operator')?.type === 'or') !== negated;
    if (either) return a && b ? [...a, ...b] : null;
    return a ?? b;
  }
  if (negated || node.type !== 'call' || node.childForFieldName('function')?.text !== 'isinstance')
    return null;
  const [s, cls] =
    node.childForFieldName('arguments')?.namedChildren.filter((c) => c.type !== 'comment') ?? [];
  if (s?.text !== subject || !cls) return null;
  const items = cls.type === 'tuple' || cls.type === 'parenthesized_expression' ? cls.namedChildren : [cls];
  return items
    .filter((i) => i.type !== 'comment')
    .map((i) => lastSegment(i.type === 'identifier' || i.type === 'attribute' ? ev.calleeName(i) : i.text));
}

/**
 * Whether the call wraps the module a loop over `X.modules()` / `X.named_modules()` runs over, not only its
 * descendants. `Module.named_modules()` yields `(prefix, self)` before any submodule, and `Module.modules()` yields
 * the modules of `named_modules()` (torch/nn/modules/module.py), so `for m in reversed(list(model.modules())):
 * fully_shard(m)` wraps `model` last. Said only where nothing can keep X out: the loop is the innermost around the
 * call, binds the wrapped name, has no `break` or `return`, and every test inside it that the call runs under is
 * an `isinstance` exclusion (`if isinstance(m, nn.ModuleList): continue`), which admits the model.
 */
export function wrapsLoopBase(
  file: SourceFile,
  call: Node,
  scope: Node | null,
  target: Node | null,
): boolean {
  if (target?.type !== 'identifier') return false;
  let loop: Node | null = null;
  for (let p = up(call); p && p.id !== scope?.id; p = up(p)) {
    if (p.type === 'function_definition' || p.type === 'class_definition' || p.type === 'lambda')
      return false;
    if (p.type === 'for_statement' || p.type === 'while_statement') {
      loop = p;
      break;
    }
  }
  const body = loop?.type === 'for_statement' ? loop.childForFieldName('body') : null;
  const right = loop?.childForFieldName('right');
  const pairs = right ? modulesAndSelfPairs(file, right) : null;
  if (!loop || !body || pairs === null || moduleName(loop.childForFieldName('left'), pairs) !== target.text)
    return false;
  if (exitsLoop(body)) return false;
  // A `continue` read as a guard is among the condition parts; one anywhere else before the call may skip X.
  for (const c of body.descendantsOfType('continue_statement')) {
    if (c.startIndex > call.startIndex || innerLoopOrScope(c, body)) continue;
    const consequence = up(c);
    const stmt = up(consequence);
    const alone = consequence?.namedChildren.filter((n) => n.type !== 'comment').length === 1;
    if (
      stmt?.type !== 'if_statement' ||
      up(stmt)?.id !== body.id ||
      !alone ||
      stmt.childForFieldName('alternative')
    )
      return false;
  }
  return conditionParts(call, scope).every(
    (part) =>
      part.node.startIndex < body.startIndex || isinstanceExclusion(part.node, part.negated, target.text),
  );
}

/**
 * The name a `for` target binds to the module when each element is the module nested in `pairs` pairs (`m`;
 * `name, m` for `named_modules()`; `i, (name, m)` for `enumerate(named_modules())`).
 */
function moduleName(left: Node | null, pairs: number): string | null {
  if (!left) return null;
  if (pairs === 0) return left.type === 'identifier' ? left.text : null;
  if (!['pattern_list', 'tuple_pattern', 'parenthesized_expression'].includes(left.type)) return null;
  const items = left.namedChildren.filter((c) => c.type !== 'comment');
  return items.length === 2 ? moduleName(items[1]!, pairs - 1) : null;
}

/**
 * How many pairs a loop over `expr` nests each module in, when it runs over `X.modules()` (0) or
 * `X.named_modules()` (1, without a `memo`, which may hold X), perhaps through `reversed`, `list`, `tuple`, `iter`,
 * `enumerate` (one more pair), or a name bound to such a call; null for anything else.
 */
export function modulesAndSelfPairs(file: SourceFile, expr: Node, depth = 0): number | null {
  if (depth > 6) return null;
  if (expr.type === 'identifier') {
    const b = findBinding(file, expr.text, expr);
    return b?.kind === 'assign' && b.value?.type === 'call' && b.statement.startIndex < expr.startIndex
      ? modulesAndSelfPairs(file, b.value, depth + 1)
      : null;
  }
  if (expr.type !== 'call') return null;
  const fn = expr.childForFieldName('function');
  const args = expr.childForFieldName('arguments')?.namedChildren.filter((c) => c.type !== 'comment') ?? [];
  if (fn?.type === 'identifier' && ['reversed', 'list', 'tuple', 'iter', 'enumerate'].includes(fn.text)) {
    const inner = args.length === 1 && args[0] ? modulesAndSelfPairs(file, args[0], depth + 1) : null;
    return inner === null ? null : inner + (fn.text === 'enumerate' ? 1 : 0);
  }
  const method = fn?.type === 'attribute' ? fn.childForFieldName('attribute')?.text : undefined;
  if (method === 'modules') return args.length === 0 ? 0 : null;
  if (method === 'named_modules')
    return args.every((a) => a.type === 'keyword_argument' && a.childForFieldName('name')?.text !== 'memo')
      ? 1
      : null;
  return null;
}

/** A `break` of this loop, or a `return`, in its body (not in a nested function, nor a `break` of a nested loop). */
function exitsLoop(body: Node): boolean {
  for (const b of body.descendantsOfType('break_statement')) if (!innerLoopOrScope(b, body)) return true;
  for (const r of body.descendantsOfType('return_statement')) if (!innerScope(r, body)) return true;
  return false;
}

function innerLoopOrScope(node: Node, body: Node): boolean {
  for (let p = up(node); p && p.id !== body.id; p = up(p))
    if (
      ['for_statement', 'while_statement', 'function_definition', 'class_definition', 'lambda'].includes(
        p.type,
      )
    )
      return true;
  return false;
}

function innerScope(node: Node, body: Node): boolean {
  for (let p = up(node); p && p.id !== body.id; p = up(p))
    if (['function_definition', 'class_definition', 'lambda'].includes(p.type)) return true;
  return false;
}

/**
 * A test that holds wherever `subject` is of none of some classes: `not isinstance(m, A)` (or `isinstance` under a
 * negation), `and`-ed with others of its kind, or `or`-ed with anything.
 */
function isinstanceExclusion(node: Node, negated: boolean, subject: string): boolean {
  if (node.type === 'parenthesized_expression') {
    const inner = node.namedChild(0);
    return !!inner && isinstanceExclusion(inner, negated, subject);
  }
  if (node.type === 'not_operator') {
    const arg = node.childForFieldName('argument');
    return !!arg && isinstanceExclusion(arg, !negated, subject);
  }
  if (node.type === 'boolean_operator') {
    const left = node.childForFieldName('left');
    const right = node.childForFieldName('right');
    if (!left || !right) return false;
    const a = isinstanceExclusion(left, negated, subject);
    const b = isinstanceExclusion(right, negated, subject);
    return (node.childForFieldName('operator')?.type === 'or') !== negated ? a || b : a && b;
  }
  if (!negated || node.type !== 'call' || node.childForFieldName('function')?.text !== 'isinstance')
    return false;
  const args = node.childForFieldName('arguments')?.namedChildren.filter((c) => c.type !== 'comment') ?? [];
  return args.length === 2 && args[0]!.text === subject;
}

/** Methods whose iteration yields `(name, value)` pairs, not modules. */
export const PAIR_ITERATORS = /\.(named_modules|named_children|named_parameters|named_buffers|items)\(\)$/;

/**
 * Why a call can never run: an enclosing condition that is always false. A condition false only by a default a
 * command line may change (`if args.fsdp1:` with `--fsdp1` a `store_true` option) is `byDefault`: the call is
 * off on the default path, not dead code.
 */
export function neverRunsReason(
  ev: Evaluator,
  call: Node,
  scope: Node | null,
): { reason: string; byDefault: boolean } | null {
  for (const part of conditionParts(call, scope)) {
    const d = decidedBy(ev, part.node);
    const v = d.value;
    if (v !== undefined && v === part.negated) {
      // Decided by the script's arguments (`# fsdp: args=`, a launch file, after `--`): off this path, not dead.
      if (d.args.length && !d.defaults.length)
        return {
          reason: `\`${part.node.text}\` is ${v ? 'true' : 'false'} by the script's arguments (${d.args.join(' ')})`,
          byDefault: true,
        };
      if (d.defaults.length)
        return {
          reason: `\`${part.node.text}\` is ${v ? 'true' : 'false'} by ${d.defaults.map((x) => `${x.what} (line ${x.line})`).join(', ')}`,
          byDefault: true,
        };
      // Decided by a config file the script reads (a Hydra config, a YAML it loads): a value its command line or
      // the file may change, not code that never runs.
      if (d.files().length)
        return {
          reason: `\`${part.node.text}\` is ${v ? 'true' : 'false'} by ${d.files().join(', ')}`,
          byDefault: true,
        };
      return {
        reason: `the condition \`${part.node.text}\` is always ${v ? 'true' : 'false'} here`,
        byDefault: false,
      };
    }
    if (part.negated || part.node.type !== 'call') continue;
    // `for m in model.named_modules(): if isinstance(m, Block)`: m is a (name, module) pair, never a Block.
    const fn = part.node.childForFieldName('function');
    const subject = part.node.childForFieldName('arguments')?.namedChild(0);
    if (fn?.text !== 'isinstance' || subject?.type !== 'identifier') continue;
    for (let p = up(call); p && p.id !== scope?.id; p = up(p)) {
      if (p.type !== 'for_statement') continue;
      const left = p.childForFieldName('left');
      const right = p.childForFieldName('right');
      if (left?.type === 'identifier' && left.text === subject.text && right) {
        const it = right.text.trim();
        if (PAIR_ITERATORS.test(it) || /^enumerate\(/.test(it))
          return {
            reason: `\`for ${left.text} in ${it}\` yields (name, module) pairs, so \`${part.node.text}\` is never true`,
            byDefault: false,
          };
      }
    }
  }
  return null;
}

/** A wrap call in code that does not parse yet (`fully_shard(layer, mesh=` being typed): callee and target only. */
export function incompleteWrapCall(
  file: SourceFile,
  id: Node,
  api: 'fully_shard' | 'FSDP' | 'wrap',
  module: string,
  legacy: boolean,
): WrapCall {
  const open = sibling(id, 1)!;
  const next = sibling(open, 1, true);
  const targetNode = next && ['identifier', 'attribute', 'subscript'].includes(next.type) ? next : null;
  const errorNode = up(id)!;
  const loopNode = up(errorNode)?.type === 'for_statement' ? up(errorNode) : null;
  const loops: LoopFact[] = [];
  if (loopNode) {
    const left = loopNode.childForFieldName('left');
    const right = loopNode.childForFieldName('right');
    if (left && right) loops.push(loopFact(file, loopNode, left, right));
  }
  const end = targetNode ?? open;
  const range = { start: rangeOf(id).start, end: rangeOf(end).end };
  const stmt = loopNode ?? errorNode;
  const scope = enclosingFunction(id);
  return {
    api,
    file: file.path,
    line: file.line(id),
    range,
    callee: id.text,
    calleeRange: rangeOf(id),
    target: targetNode?.text ?? '',
    targetRange: targetNode ? rangeOf(targetNode) : null,
    argumentsEnd: targetNode ? rangeOf(targetNode).end : null,
    targets: targetNode ? [targetNode.text] : [],
    paths: targetNode
      ? [
          loopNode && targetNode.type === 'identifier' && loops[0]?.target === targetNode.text
            ? iterablePath(file, loopNode, 0)
            : pathOf(file, targetNode, null),
        ]
      : [],
    loop: loops[0] ?? null,
    loops,
    conditions: [],
    branch: [],
    function: scope ? qualifiedName(scope) : null,
    importPath: module || null,
    legacy,
    options: {},
    unresolvedSplats: [],
    assignedTo: null,
    isRoot: false,
    children: [],
    statement: statementInfo(file, stmt),
    loopStatement: loopNode ? statementInfo(file, loopNode) : null,
    classFilter: null,
    incomplete: true,
  };
}

export function lastArgumentEnd(call: Node): Position | null {
  const args = call.childForFieldName('arguments');
  const last =
    args?.type === 'argument_list' ? args.namedChildren.filter((c) => c.type !== 'comment').pop() : undefined;
  return last ? rangeOf(last).end : null;
}

/** The options of an enclosing `with enable_wrap(wrapper_cls=FSDP, **kwargs):` block. */
export function enableWrapOptions(
  file: SourceFile,
  ev: Evaluator,
  call: Node,
  scope: Node | null,
): Record<string, OptionFact> | undefined {
  for (let p = up(call); p && p.id !== scope?.id; p = up(p)) {
    if (p.type !== 'with_statement') continue;
    for (const manager of withCalls(file, p)) {
      const f = manager.childForFieldName('function');
      if (f && classifyApi(ev.calleeName(f))?.kind === 'enable_wrap')
        return readOptions(ev, readArgs(file, manager), 'FSDP', ['wrapper_cls', 'module']).options;
    }
  }
  return undefined;
}

/** The context-manager calls of one `with` statement (`torch.device("meta")`, `enable_wrap(...)`). */
export function withCalls(file: SourceFile, stmt: Node): Node[] {
  const out: Node[] = [];
  for (const m of file.matches('blocks', stmt)) {
    if (!m.captures.some((c) => c.name === 'with' && c.node.id === stmt.id)) continue;
    const call = up(m.captures.find((c) => c.name === 'manager')?.node);
    if (call) out.push(call);
  }
  return out;
}

/**
 * Marks which calls wrap the object whose children other calls wrap (the roots of the plan). A child is wrapped
 * in the same function as the root, or in a function the root's function calls before the root call.
 */
export function linkRoots(file: SourceFile, calls: WrapCall[]): void {
  const reaches = (root: WrapCall, child: WrapCall): boolean => {
    if (root.function === child.function) return true;
    const name = child.function?.split('.').pop();
    if (!name) return false;
    const from = root.function ? functionStart(file, root) : 0;
    const to = offsetOf(file, root.range.start);
    return file.identifiers(name, from, to).some((id) => callOf(id) !== null);
  };
  const index = new PathIndex(calls);
  // A method's wrap of `self` that the file's calls of the method expand is neither root nor child: each call is.
  const template = (c: WrapCall) => !!c.expandedAt;
  calls.forEach((c, i) => {
    if (c.paths.length !== 1 || !c.paths[0] || template(c)) return;
    const p = c.paths[0];
    for (const j of index.candidatesUnder(p)) {
      const d = calls[j]!;
      if (i !== j && !template(d) && d.paths.some((q) => isUnder(q, p)) && reaches(c, d)) c.children.push(j);
    }
  });
  const standalone = (c: WrapCall) => {
    const p = c.paths[0];
    return (
      c.paths.length === 1 &&
      !!p &&
      c.loops.length === 0 &&
      (p.length === 1 || (p.length === 2 && p[0] === 'self'))
    );
  };
  // A name bound to a part of another wrapped object (`emb = model.get_input_embeddings()`, `tail = [model.norm,
  // model.lm_head]`) is a unit of that object, not a root of its own.
  calls.forEach((c, i) => {
    const v = c.paths[0]?.[0];
    if (!standalone(c) || template(c) || c.paths[0]!.length !== 1 || !v) return;
    const at = file.root.descendantForIndex(offsetOf(file, c.range.start));
    const b = at ? findBinding(file, v, at) : null;
    if (b?.kind !== 'assign' || !b.value) return;
    // Objects whose attributes the value reads (`model` of `model.norm`, `model.get_input_embeddings()`); not the
    // arguments of a call (`copy.deepcopy(model)` is a new object), nor the name itself (`model = FSDP(model)`).
    const named = new Set(
      b.value
        .descendantsOfType('attribute')
        .map((a) => a.childForFieldName('object'))
        .filter((o): o is Node => o?.type === 'identifier')
        .map((o) => o.text),
    );
    named.delete(v);
    const owner = calls.findIndex(
      (d, j) =>
        j !== i &&
        !template(d) &&
        standalone(d) &&
        d.paths[0]!.length === 1 &&
        named.has(d.paths[0]![0]!) &&
        reaches(d, c),
    );
    if (owner >= 0 && !calls[owner]!.children.includes(i)) calls[owner]!.children.push(i);
  });
  const isChild = new Set(calls.flatMap((c) => c.children));
  // A wrap of each element of a loop (`for layer in model.layers: fully_shard(layer)`) is a unit per element, never
  // the model's root, whatever it wraps below it.
  const perElement = (c: WrapCall) => c.paths.some((p) => p.includes('*'));
  calls.forEach((c, i) => {
    c.isRoot = !template(c) && !perElement(c) && !isChild.has(i) && (c.children.length > 0 || standalone(c));
  });
}

/** One level of the calls' paths: the calls whose path ends here, and the next segments. */
interface PathNode {
  calls: number[];
  next: Map<string, PathNode>;
}

/**
 * The wrap calls' paths as a trie, so that finding the calls under a root path costs the calls found rather than
 * every call of the file (a generated file wraps thousands of blocks). It yields candidates, a superset of the
 * calls `isUnder` accepts, in call order.
 */
export class PathIndex {
  private readonly top: PathNode = { calls: [], next: new Map() };

  constructor(calls: WrapCall[]) {
    calls.forEach((c, i) => {
      for (const q of c.paths) {
        let n = this.top;
        for (const seg of q) {
          let m = n.next.get(seg);
          if (!m) n.next.set(seg, (m = { calls: [], next: new Map() }));
          n = m;
        }
        n.calls.push(i);
      }
    });
  }

  candidatesUnder(root: string[]): number[] {
    const out = new Set<number>();
    const below = (n: PathNode) => {
      const stack = [...n.next.values()];
      while (stack.length) {
        const m = stack.pop()!;
        for (const i of m.calls) out.add(i);
        for (const k of m.next.values()) stack.push(k);
      }
    };
    const visit = (n: PathNode, i: number) => {
      if (i === root.length) return below(n);
      const seg = root[i]!;
      if (seg === '*' || seg === '**') return below(n);
      const exact = n.next.get(seg);
      if (exact) visit(exact, i + 1);
      const any = n.next.get('*');
      if (any) visit(any, i + 1);
      // A path that names every module below it (`model.**`) is decided by isUnder.
      const all = n.next.get('**');
      if (all) for (const j of all.calls) out.add(j);
    };
    visit(this.top, 0);
    return [...out].sort((a, b) => a - b);
  }
}

/** The functions holding wrap calls: their parameters and whether this file calls them. */
export function functionFacts(file: SourceFile, calls: WrapCall[]): Record<string, FunctionFact> {
  const out: Record<string, FunctionFact> = {};
  for (const c of calls) {
    if (!c.function || out[c.function]) continue;
    const node = file.root.descendantForIndex(c.statement.start, c.statement.start + 1);
    const fn = node && enclosingFunction(node);
    const name = fn?.childForFieldName('name')?.text;
    if (!fn || !name) continue;
    const uses = file.identifiers(name).filter((id) => id.id !== fn.childForFieldName('name')?.id);
    const inside = (id: Node) => id.startIndex >= fn.startIndex && id.startIndex < fn.endIndex;
    const calledInFile = uses.some((id) => !inside(id) && callOf(id) !== null);
    const fact = functionFact(file, fn, calledInFile);
    // `walk(child)` in its own body (a function's; `block.apply_fsdp()` in a method is another object's method).
    if (
      !fact.owner &&
      uses.some((id) => inside(id) && callOf(id)?.childForFieldName('function')?.id === id.id)
    )
      fact.recursive = true;
    // `applier(module, wrap)`: passed to another call as a value (positionally: a strategy's `parallelize_fn=`
    // keyword is read where the strategy is), whatever direct calls it also has.
    const handed = uses.find((id) => !inside(id) && up(id)?.type === 'argument_list');
    const handedCall = handed ? up(up(handed)!) : null;
    if (handedCall?.type === 'call') fact.handedTo = oneLine(handedCall.text, 80);
    out[c.function] = fact;
  }
  return out;
}

/** What a function is: its lines, its parameters, the class it is a method of, whether the file calls it. */
export function functionFact(file: SourceFile, fn: Node, calledInFile: boolean): FunctionFact {
  // A method: the function sits in a class body, perhaps under decorators.
  const holder = up(fn)?.type === 'decorated_definition' ? up(up(fn)) : up(fn);
  const cls = holder?.type === 'block' ? up(holder) : null;
  const lastLine = (n: Node) => n.endPosition.row + 1;
  return {
    line: file.line(fn),
    end: lastLine(fn),
    ...(cls?.type === 'class_definition'
      ? { owner: { name: qualifiedName(cls), line: file.line(cls), end: lastLine(cls) } }
      : {}),
    parameters: parameterNames(fn),
    calledInFile,
  };
}

/** The innermost `for` statement around a node, within its function. */
function innermostFor(node: Node, scope: Node | null): Node | null {
  for (let p = up(node); p && p.id !== scope?.id; p = up(p)) {
    if (p.type === 'function_definition' || p.type === 'lambda') return null;
    if (p.type === 'for_statement') return p;
  }
  return null;
}

/** Whether a node runs in the body of a `try` (not its handlers) within its function. */
function insideTry(node: Node, scope: Node | null): boolean {
  let child = node;
  for (let p = up(node); p && (!scope || p.id !== scope.id); child = p, p = up(p)) {
    if (p.type === 'function_definition' || p.type === 'class_definition') return false;
    if (p.type === 'try_statement' && p.childForFieldName('body')?.id === child.id) return true;
  }
  return false;
}
