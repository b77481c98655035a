/**
 * The tests a wrap call in a loop over modules sits under, evaluated for each module the loop visits: `for name, m
 * in model.named_modules(): if name.endswith("mlp"): fully_shard(m)` wraps only the modules whose name ends so,
 * and `if type(m).__name__ in NAMES` only those classes. Each module of the tree is bound to the loop's variables
 * as PyTorch yields it (`Module.named_modules()` gives the relative dotted name and the module, the module itself
 * first, as `""`; `named_children()` and `ModuleDict.items()` the child's name; `enumerate` its position), and the
 * function's body is run up to the test.
 */
import type { WrapCall } from '../analysis/facts';
import { modulesAndSelfPairs } from '../analysis/wrapCalls';
import { pickedList } from '../analysis/paths';
import { argumentFor } from '../analysis/arguments';
import { up } from '../parsing/python';
import type { Node } from '../parsing/python';
import { truthy } from '../python/operators';
import { conditionParts, enclosingFunction, parameterNames } from '../python/scope';
import type { Range } from '../vocabulary/range';
import type { ModV, Value } from '../python/values';
import { moduleAt, type ModuleNode } from '../model/tree';
import type { Project } from '../project/project';
import { Interpreter } from './interpreter';
import { scriptInterpreter } from './scriptRun';
import { Evaluator } from '../analysis/evaluator';
import { moduleFromTree } from './moduleValues';
import { StepLimit, Undecided } from './statements';
import { oneLine } from '../vocabulary/words';

/** The most modules a loop's tests are evaluated for (a large model's named_modules()). */
const MAX_MODULES = 4096;

/** One element the loop yields: the module, under the names the loop's target binds. */
interface Yielded {
  path: string;
  /** `named_modules()`: the name relative to the loop's base; a child's attribute name otherwise. */
  name: string;
  index: number;
}

/**
 * For a wrap call under tests of its loop's variables: a function from a wrapped module's path to whether the
 * tests hold for it (undefined where they are not known for it). Undefined when the call has no such test or the
 * loop is not one over modules that is read here.
 */
export function testPerModule(
  project: Project,
  call: WrapCall,
  root: ModuleNode,
  modelVariable: string[],
  site?: CallSite,
): ModuleTest | undefined {
  const file = project.file(call.file);
  // A helper's wrap placed at its call keeps its own file and line, where its loop is found.
  if (!file) return undefined;
  const node = callAtLine(file.source.root, call.line, call.callee);
  if (!node) return undefined;
  const scope = enclosingFunction(node);
  let loop: Node | null = up(node);
  while (loop && loop.type !== 'for_statement' && loop.id !== scope?.id) loop = up(loop);
  const body = loop?.type === 'for_statement' ? loop.childForFieldName('body') : null;
  const wrapLeft = loop?.childForFieldName('left');
  const wrapRight = loop?.childForFieldName('right');
  if (!loop || !body || !wrapLeft || !wrapRight) return undefined;
  // The tests written inside the loop (those around it are decided for the whole loop elsewhere).
  const own = conditionParts(node, scope).filter(
    (p) => p.node.startIndex >= body.startIndex && p.node.endIndex <= body.endIndex,
  );
  // A loop over a list of modules picked before (`[m for m in model.modules() if ...]`, or appended to under a
  // test): the modules the list's own loop visits, under its tests.
  const picked = pickedList(file.source, wrapRight, scope);
  const left = picked?.left ?? wrapLeft;
  const right = picked?.right ?? wrapRight;
  const parts = [...(picked?.parts ?? []), ...own];
  // Tests of the class alone are the scan's class filters already (read from the facts' own text).
  if (!parts.length || (!site && !picked && parts.every((p) => classOnly(p.node.text)))) return undefined;
  const shape = loopShape(file.source, right);
  if (!shape) return undefined;
  // The module the loop runs over, by the call's wrapped path: `model/**` or `model/layers/*`.
  const wrapped = call.paths.find((p) => p.includes(shape.over === 'subtree' ? '**' : '*'));
  if (!wrapped || modelVariable.some((v, i) => wrapped[i] !== v)) return undefined;
  const basePath = wrapped.slice(
    modelVariable.length,
    wrapped.indexOf(shape.over === 'subtree' ? '**' : '*'),
  );
  const base = moduleAt(root, basePath.join('.'));
  if (!base) return undefined;
  const yielded = yieldedBy(base, shape.over);
  if (shape.reversed) yielded.reverse();
  yielded.forEach((y, i) => (y.index = i));
  const byPath = new Map(yielded.map((y) => [y.path, y]));
  const baseVar = shape.baseVariable;
  // A container another function fills in (`NAMES.update(...)` in a setup function) holds, when the loop runs,
  // what that call put there: its literal says nothing (the scan's evaluator knows which these are).
  const ev = new Evaluator(file.source, file.imports);
  const bound = new Set(left.descendantsOfType('identifier').map((n) => n.text));
  const filledElsewhere = parts.some((p) =>
    [p.node, ...p.node.descendantsOfType('identifier')].some((id) => {
      if (id.type !== 'identifier' || bound.has(id.text)) return false;
      const v = ev.evalName(id.text, id);
      return v.k === 'unknown' && /changed in place elsewhere/.test(v.why);
    }),
  );
  const interp = site ? scriptInterpreter(project, site.file, site.argv) : new Interpreter(project);
  // A helper's parameters as its call passes them (`shard(model, LlamaDecoderLayer)`): its tests read them.
  const passed =
    site && scope ? siteBindings(project, site, scope, call.file, interp) : new Map<string, Value>();
  const memo = new Map<string, boolean | undefined>();
  const tests = parts.map((p) => `${p.negated ? 'not ' : ''}${oneLine(p.node.text, 60)}`);
  // One value of the module the loop runs over, built once: each yielded module is its part (the same object, as
  // in PyTorch), not a fresh copy of a subtree per module.
  let baseValue: ModV | undefined;
  const valueAt = (modulePath: string, mod: ModuleNode): ModV => {
    baseValue ??= moduleFromTree(base);
    const rel = !base.path
      ? modulePath
      : modulePath === base.path
        ? ''
        : modulePath.slice(base.path.length + 1);
    let v: ModV | undefined = baseValue;
    for (const seg of rel ? rel.split('.') : []) v = v?.children.get(seg);
    return v ?? moduleFromTree(mod);
  };
  const holdsFor = (modulePath: string) => {
    if (memo.has(modulePath)) return memo.get(modulePath);
    const y = byPath.get(modulePath);
    const mod = moduleAt(root, modulePath);
    let result: boolean | undefined;
    if (y && mod && !filledElsewhere && memo.size < MAX_MODULES) {
      const env = new Map<string, Value>(passed);
      if (baseVar) env.set(baseVar, valueAt(base.path, base));
      // A helper's parameters are what its call passes (or their defaults where it passes none).
      // The wrap's own loop variable is the same module (`for b in blocks:`).
      if (picked && wrapLeft.type === 'identifier') env.set(wrapLeft.text, valueAt(modulePath, mod));
      if (bind(left, shape.element(y, valueAt(modulePath, mod)), env))
        result = holds(interp, file, parts, env, site !== undefined);
    }
    memo.set(modulePath, result);
    return result;
  };
  return { tests, texts: parts.map((p) => p.node.text), holds: holdsFor };
}

/** A loop's tests of each module, as written, and whether they hold for a module (undefined: not known). */
export interface ModuleTest {
  tests: string[];
  /** The tests' source texts, as a wrap call's `conditions` hold them. */
  texts: string[];
  holds: (modulePath: string) => boolean | undefined;
}

/** How many conditions not known statically one module's tests are run both ways for (2^4 runs at most). */
const MAX_FORKS = 4;

/**
 * Whether every test holds (false at the first that fails), with the names in `env` bound. Nothing is assumed
 * of a condition the run does not decide (`if names_to_match and name in names_to_match: return True`): the
 * tests are run again with it true and with it false, and hold when both runs agree.
 */
function holds(
  interp: Interpreter,
  file: NonNullable<ReturnType<Project['file']>>,
  parts: { node: Node; negated: boolean }[],
  env: Map<string, Value>,
  paramsUnknown: boolean,
  forced: ReadonlyMap<number, boolean> = new Map(),
): boolean | undefined {
  let unsure = false;
  interp.decisions = { forced, used: new Set(), fork: true };
  try {
    for (const p of parts) {
      const v = truthy(interp.evalAt(file, p.node, env, paramsUnknown));
      if (v === undefined) unsure = true;
      else if (v === p.negated) return false;
    }
  } catch (e) {
    if (e instanceof StepLimit) return undefined;
    if (!(e instanceof Undecided)) throw e;
    if (e.again || forced.size >= MAX_FORKS) return undefined;
    const yes = holds(interp, file, parts, env, paramsUnknown, new Map([...forced, [e.condition, true]]));
    if (yes === undefined) return undefined;
    const no = holds(interp, file, parts, env, paramsUnknown, new Map([...forced, [e.condition, false]]));
    return yes === no ? yes : undefined;
  } finally {
    interp.decisions = undefined;
  }
  return unsure ? undefined : true;
}

type Element = Value | { pair: [Element, Element] };

/** How a loop's iterable hands out modules: over which modules, in which order, and as what element. */
interface LoopShape {
  over: 'subtree' | 'children';
  reversed: boolean;
  /** The variable the iterable starts from (`model` in `model.named_modules()`), bound to the base module. */
  baseVariable?: string;
  element: (y: Yielded, module: Value) => Element;
}

function loopShape(file: Parameters<typeof modulesAndSelfPairs>[0], right: Node): LoopShape | undefined {
  let expr: Node | null = right;
  let reversed = false;
  let enumerated = false;
  for (let i = 0; expr?.type === 'call' && i < 4; i++) {
    const fn = expr.childForFieldName('function');
    const args: Node[] =
      expr.childForFieldName('arguments')?.namedChildren.filter((c) => c.type !== 'comment') ?? [];
    if (fn?.type !== 'identifier' || !['reversed', 'list', 'tuple', 'iter', 'enumerate'].includes(fn.text))
      break;
    // enumerate counts what it is given: only the outermost wrapper is read.
    if (fn.text === 'enumerate') {
      if (i > 0) return undefined;
      enumerated = true;
    }
    if (fn.text === 'reversed') reversed = true;
    if (args.length !== 1) return undefined;
    expr = args[0]!;
  }
  if (!expr) return undefined;
  const fn = expr.type === 'call' ? expr.childForFieldName('function') : null;
  const method = fn?.type === 'attribute' ? fn.childForFieldName('attribute')?.text : undefined;
  const object = fn?.type === 'attribute' ? fn.childForFieldName('object') : expr;
  const baseVariable = object?.type === 'identifier' ? object.text : undefined;
  const str = (s: string): Value => ({ k: 'str', v: s });
  const idx = (i: number): Value => ({ k: 'num', v: i, int: true });
  let over: LoopShape['over'];
  let element: LoopShape['element'];
  const pairs = expr.type === 'call' ? modulesAndSelfPairs(file, expr) : null;
  if (pairs === 1) {
    over = 'subtree';
    element = (y, m) => ({ pair: [str(y.name), m] });
  } else if (pairs === 0) {
    over = 'subtree';
    element = (_y, m) => m;
  } else if (method === 'named_children' || method === 'items') {
    over = 'children';
    element = (y, m) => ({ pair: [str(y.name), m] });
  } else if (method === 'children' || method === 'values' || expr.type !== 'call') {
    over = 'children';
    element = (_y, m) => m;
  } else return undefined;
  const inner = element;
  if (enumerated) element = (y, m) => ({ pair: [idx(y.index), inner(y, m)] });
  return { over, reversed, ...(baseVariable ? { baseVariable } : {}), element };
}

/** The modules a loop over `base` visits, in PyTorch's order (named_modules: preorder, the base first). */
function yieldedBy(base: ModuleNode, over: LoopShape['over']): Yielded[] {
  if (over === 'children') return base.children.map((c) => ({ path: c.path, name: c.name, index: 0 }));
  const out: Yielded[] = [];
  const prefix = base.path ? base.path.length + 1 : 0;
  const stack = [base];
  while (stack.length && out.length < MAX_MODULES) {
    const m = stack.pop()!;
    out.push({ path: m.path, name: m.path.slice(prefix), index: 0 });
    for (let c = m.children.length - 1; c >= 0; c--) stack.push(m.children[c]!);
  }
  return out;
}

/** Binds a `for` target (`m`, `name, m`, `i, (name, m)`) to an element; false when the shapes differ. */
function bind(target: Node, e: Element, env: Map<string, Value>): boolean {
  if (target.type === 'identifier') {
    if ('pair' in e) return false;
    env.set(target.text, e);
    return true;
  }
  if (!['pattern_list', 'tuple_pattern', 'parenthesized_expression', 'list_pattern'].includes(target.type))
    return false;
  const items = target.namedChildren.filter((c) => c.type !== 'comment');
  if (target.type === 'parenthesized_expression' && items.length === 1) return bind(items[0]!, e, env);
  if (!('pair' in e) || items.length !== 2) return false;
  return bind(items[0]!, e.pair[0], env) && bind(items[1]!, e.pair[1], env);
}

/** The call of `callee` that starts on a 1-based line. */
export function callAtLine(root: Node, line: number, callee: string): Node | null {
  for (const c of root.descendantsOfType('call', { row: line - 1, column: 0 }, { row: line, column: 0 }))
    if (c.startPosition.row === line - 1 && c.childForFieldName('function')?.text === callee) return c;
  return null;
}

/** A test made only of `isinstance(...)` calls joined by `and`, `or` and `not`. */
function classOnly(text: string): boolean {
  const rest = text
    .replace(/isinstance\((?:[^()]|\([^()]*\))*\)/g, '')
    .replace(/\b(and|or|not)\b/g, '')
    .replace(/[()\s]/g, '');
  return rest === '';
}

/** Where a helper is called: the caller's file and the call's range there. */
export interface CallSite {
  file: string;
  range: Range;
  /** The caller's command line, when the analysis was given it. */
  argv?: readonly string[];
}

/**
 * The values a call passes a helper's parameters, evaluated in the caller's file as the code there sees them;
 * only those known (a class, a constant, a list of functions).
 */
function siteBindings(
  project: Project,
  site: CallSite,
  helper: Node,
  helperPath: string,
  interp: Interpreter,
): Map<string, Value> {
  // Once per call of the helper, for all of its wraps (the caller's code before the call is run for it).
  const key = `site-bindings:${site.file}:${site.range.start.line}:${site.range.start.character}:${helperPath}:${helper.startIndex}:${(site.argv ?? []).join(' ')}`;
  return project.memo(key, () => bindingsOfCall(project, site, helper, helperPath, interp));
}

function bindingsOfCall(
  project: Project,
  site: CallSite,
  helper: Node,
  helperPath: string,
  interp: Interpreter,
): Map<string, Value> {
  const out = new Map<string, Value>();
  const file = project.file(site.file);
  if (!file) return out;
  const { start, end } = site.range;
  const call = file.source.root
    .descendantsOfType('call', { row: start.line, column: 0 }, { row: end.line + 1, column: 0 })
    .find(
      (c) =>
        c.startPosition.row === start.line &&
        c.startPosition.column === start.character &&
        c.endPosition.row === end.line &&
        c.endPosition.column === end.character,
    );
  // The call must be of this helper (not of one that calls it in turn, through a chain of helpers).
  const fn = call?.childForFieldName('function');
  const called = fn?.type === 'attribute' ? fn.childForFieldName('attribute')?.text : fn?.text;
  if (!call || called !== helper.childForFieldName('name')?.text) return out;
  const params = parameterNames(helper);
  // A method called on its receiver (`model.apply_fsdp(mesh)`): the receiver is `self`.
  const offset = params[0] === 'self' ? 1 : 0;
  const passedTo = params.slice(offset);
  const defaults = new Map<string, Node>();
  for (const p of helper.childForFieldName('parameters')?.namedChildren ?? []) {
    const d = p.childForFieldName('value');
    const n = p.childForFieldName('name');
    if (d && n) defaults.set(n.text, d);
  }
  const helperFile = project.file(helperPath);
  // The arguments evaluated together, at the call: the caller's code before it runs once.
  const given: { name: string; node: Node }[] = [];
  params.forEach((name, i) => {
    const node = i >= offset ? argumentFor(call, passedTo, name) : undefined;
    if (node) {
      given.push({ name, node });
      return;
    }
    // Not passed: its default, as the helper's file writes it.
    const d = defaults.get(name);
    const v = d && helperFile ? interp.evalWith(helperFile, d, new Map()) : undefined;
    if (v && v.k !== 'unknown') out.set(name, v);
  });
  if (!given.length) return out;
  // Nothing assumed of the caller's undecided conditions either: an argument they change is not bound.
  interp.decisions = { forced: new Map(), used: new Set(), fork: false };
  try {
    const values = interp.evalManyAt(
      file,
      call,
      given.map((g) => g.node),
      undefined,
      true,
    );
    given.forEach((g, i) => {
      const v = values[i]!;
      if (v.k !== 'unknown' && v.k !== 'param') out.set(g.name, v);
    });
  } catch (e) {
    if (!(e instanceof StepLimit) && !(e instanceof Undecided)) throw e;
  } finally {
    interp.decisions = undefined;
  }
  return out;
}

/**
 * The tests a helper's wrap runs under outside any loop (`if tie_embeddings:`, `elif strategy == "full":`),
 * decided with what one call of the helper passes: true when they all hold, false when one fails, undefined when
 * they read what the call does not decide.
 */
export function conditionsByCall(
  project: Project,
  call: Pick<WrapCall, 'file' | 'line' | 'callee'>,
  site: CallSite,
): { holds: boolean | undefined } {
  const none = { holds: undefined };
  const file = project.file(call.file);
  const node = file ? callAtLine(file.source.root, call.line, call.callee) : null;
  const scope = node ? enclosingFunction(node) : null;
  if (!file || !node || !scope) return none;
  // Outside every loop around the call: those inside are tests of each module.
  const loops: Node[] = [];
  for (let p = up(node); p && p.id !== scope.id; p = up(p)) if (p.type === 'for_statement') loops.push(p);
  const parts = conditionParts(node, scope).filter(
    (p) => !loops.some((l) => p.node.startIndex >= l.startIndex && p.node.endIndex <= l.endIndex),
  );
  if (!parts.length) return none;
  const interp = scriptInterpreter(project, site.file, site.argv);
  const passed = siteBindings(project, site, scope, call.file, interp);
  if (!passed.size) return none;
  return { holds: holds(interp, file, parts, new Map(passed), true) };
}
