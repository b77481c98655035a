/** Module paths of wrapped expressions: `model.layers[3]` is model/layers/3, a loop variable over `model.layers` is model/layers/*, over `model.named_modules()` model/**, through helpers, getattr and comprehensions. */
import { up } from '../parsing/python';
import type { Node } from '../parsing/python';
import type { SourceFile } from '../parsing/source';
import { conditionParts, dottedText, enclosingFunction, findBinding, type Binding } from '../python/scope';
import { parseString } from '../python/literals';
import { lastSegment } from './options';
import type { WrapCall } from './facts';

/**
 * The module path a wrapped expression denotes, relative to a variable: `model.layers[3]` → model/layers/3,
 * a loop variable over `model.layers.items()` → model/layers/*, over `model.named_modules()` → model/**.
 */
export function pathOf(file: SourceFile, expr: Node, inLoopAt: Node | null, depth = 0): string[] {
  if (depth > 8) return [expr.text];
  const next = (e: Node) => pathOf(file, e, inLoopAt, depth + 1);
  const unlessRebound = readingUnlessRebound;
  switch (expr.type) {
    case 'identifier': {
      let b = findBinding(file, expr.text, expr);
      // The path as if a rebinding under tests of its own (`if hasattr(model, "module"): model = model.module`)
      // had not run: the binding before it.
      const own =
        unlessRebound && b?.kind === 'assign' && !unlessRebound.test ? ownTests(b.statement, expr) : [];
      if (unlessRebound && b?.kind === 'assign' && own.length) {
        unlessRebound.test = own.join(' and ');
        unlessRebound.line = file.line(b.statement);
        b = findBinding(file, expr.text, b.statement);
      }
      if (b?.kind === 'loop' && inLoopAt) return iterablePath(file, b.loop, depth);
      if (
        b?.kind === 'assign' &&
        b.value &&
        ['attribute', 'subscript', 'call'].includes(b.value.type) &&
        b.statement.startIndex < expr.startIndex
      ) {
        // `ffn = getattr(block, "mlp", None)`: the module named by a constant string.
        const named = b.value.type === 'call' ? getattrPath(file, b.value, inLoopAt, depth + 1) : null;
        if (named) return named;
        const v = b.value.type === 'call' ? unwrapCall(b.value) : b.value;
        if (v) return next(v);
      }
      return [expr.text];
    }
    case 'attribute': {
      const o = expr.childForFieldName('object');
      const a = expr.childForFieldName('attribute');
      return o && a ? [...next(o), a.text] : [expr.text];
    }
    case 'subscript': {
      const v = expr.childForFieldName('value');
      const s = expr.childForFieldName('subscript');
      if (!v) return [expr.text];
      let key = '*';
      if (s?.type === 'integer') key = s.text;
      else if (s?.type === 'string') {
        // The key as Python reads it: escapes decoded (`"b\\r"` is `b` and a carriage return).
        const v = parseString(s);
        key = v.k === 'str' ? v.v : stripQuotes(s.text);
      }
      return [...next(v), key];
    }
    case 'call': {
      const viaGetattr = getattrPath(file, expr, inLoopAt, depth);
      if (viaGetattr) return viaGetattr;
      const inner = unwrapCall(expr);
      return inner ? pathOf(file, inner, inLoopAt, depth + 1) : [expr.text];
    }
    default:
      return [expr.text];
  }
}

/** A rebinding of the wrapped object's name under tests of its own, found while reading a path without it. */
export interface Rebinding {
  test?: string;
  line?: number;
}

/** The tests a statement runs under that `use` does not (an `if` arm around the statement only). */
function ownTests(statement: Node, use: Node): string[] {
  const scope = enclosingFunction(statement);
  if ((scope?.id ?? null) !== (enclosingFunction(use)?.id ?? null)) return [];
  const around = new Set(conditionParts(use, scope).map((c) => c.node.id));
  return conditionParts(statement, scope)
    .filter((c) => !around.has(c.node.id) && !c.othersRaise)
    .map((c) => (c.negated ? `not (${c.node.text})` : c.node.text));
}

/**
 * The paths of a wrapped expression as if the rebinding of its name under tests of its own had not run
 * (`if isinstance(model, Wrapper): model = model.decoder`), with that rebinding; null when there is none.
 */
export function pathsUnlessRebound(
  file: SourceFile,
  expr: Node,
  inLoopAt: Node | null,
): { paths: string[][]; test: string; line: number } | null {
  const r: Rebinding = {};
  readingUnlessRebound = r;
  try {
    const paths = pathsOf(file, expr, inLoopAt);
    return r.test && r.line ? { paths, test: r.test, line: r.line } : null;
  } finally {
    readingUnlessRebound = null;
  }
}

/** Set while `pathsUnlessRebound` reads a path: the first rebinding under its own tests is passed over. */
let readingUnlessRebound: Rebinding | null = null;

/** The most elements of a literal list a loop is followed through, one path each. */
const LITERAL_ELEMENTS = 64;

/**
 * The module paths a wrapped expression denotes: one, except for a loop variable over a list or tuple written out
 * (`for m in [model.embed, model.norm]`, or through a name bound to one, perhaps grown by `.append(...)`), which
 * denotes each element in turn.
 */
export function pathsOf(file: SourceFile, expr: Node, inLoopAt: Node | null): string[][] {
  const literal = expr.type === 'identifier' && inLoopAt ? loopLiteral(file, expr) : null;
  if (literal) return literal.map((e) => pathOf(file, e, null, 1));
  const byName = inLoopAt ? namedInLoop(file, expr) : null;
  return byName ?? [pathOf(file, expr, inLoopAt)];
}

/**
 * A module looked up by a name the loop hands out from a list of names written out: `for name in ["embed",
 * "norm"]: fully_shard(getattr(model, name))`, `model.get_submodule(path)`, through a name bound in the loop, and
 * with the name one part of each entry (`for path, reshard in [("layers.0", True), ...]`). One path per entry, or
 * null when the lookup or the list is of another shape.
 */
function namedInLoop(file: SourceFile, expr: Node): string[][] | null {
  return namedLoopEntries(file, expr)?.paths ?? null;
}

/** The entries of a loop over names written out (see namedInLoop): each entry, its path, and the loop's targets. */
export function namedLoopEntries(
  file: SourceFile,
  expr: Node,
): { paths: string[][]; entries: Node[]; targets: Node[] } | null {
  const found = lookupInLoop(file, expr);
  if (!found) return null;
  const { named, loop: b } = found;
  const left = b.loop.childForFieldName('left');
  // Where the name sits in each entry: the entry itself, or one place of a tuple the loop unpacks.
  const place =
    left?.type === 'identifier'
      ? -1
      : left?.type === 'pattern_list' || left?.type === 'tuple_pattern'
        ? left.namedChildren.findIndex((c) => c.type === 'identifier' && c.text === named.name.text)
        : null;
  if (place === null || (place < 0 && left?.type !== 'identifier')) return null;
  let it = b.loop.childForFieldName('right');
  if (it?.type === 'identifier') {
    const v = findBinding(file, it.text, it);
    it = v?.kind === 'assign' && v.statement.startIndex < it.startIndex ? v.value : null;
  }
  if (!it || (it.type !== 'list' && it.type !== 'tuple')) return null;
  const entries = it.namedChildren.filter((c) => c.type !== 'comment');
  if (!entries.length || entries.length > LITERAL_ELEMENTS) return null;
  const base = pathOf(file, named.object, null, 1);
  const out: string[][] = [];
  for (const e of entries) {
    const item =
      place < 0 ? e : e.type === 'tuple' ? e.namedChildren.filter((c) => c.type !== 'comment')[place] : null;
    if (item?.type !== 'string' || item.namedChildren.some((c) => c.type === 'interpolation')) return null;
    const name = stripQuotes(item.text);
    if (!/^[A-Za-z_0-9]+(\.[A-Za-z_0-9]+)*$/.test(name)) return null;
    out.push([...base, ...name.split('.')]);
  }
  const targets = left?.type === 'identifier' ? [left] : (left?.namedChildren ?? []);
  return { paths: out, entries, targets };
}

/**
 * A module looked up by a name a loop hands out (`getattr(model, name)`, `get_module(model, path)` with `name` or
 * `path` a target of an enclosing `for`), written at the wrap or bound to the name it wraps: the lookup and the loop.
 */
function lookupInLoop(
  file: SourceFile,
  expr: Node,
): { named: { object: Node; name: Node }; loop: Binding & { kind: 'loop' } } | null {
  let lookup: Node | null = expr;
  if (expr.type === 'identifier') {
    const b = findBinding(file, expr.text, expr);
    lookup = b?.kind === 'assign' && b.statement.startIndex < expr.startIndex ? b.value : null;
  }
  const named = lookup?.type === 'call' ? nameLookup(lookup, file) : null;
  if (!named || named.name.type !== 'identifier') return null;
  const loop = findBinding(file, named.name.text, named.name);
  return loop?.kind === 'loop' ? { named, loop } : null;
}

/**
 * `getattr(obj, name)` (a default after it allowed), `obj.get_submodule(name)`, `reduce(getattr, name.split("."),
 * obj)` (a dotted name, one attribute at a time), or a call of a function of this file that returns one of these of
 * its parameters (`get_module(model, path)`): the object and the name, as the call passes them.
 */
function nameLookup(call: Node, file?: SourceFile, depth = 0): { object: Node; name: Node } | null {
  const fn = call.childForFieldName('function');
  const args = (call.childForFieldName('arguments')?.namedChildren ?? []).filter((c) => c.type !== 'comment');
  if (fn?.type === 'identifier' && fn.text === 'getattr' && (args.length === 2 || args.length === 3))
    return args[0] && args[1] ? { object: args[0], name: args[1] } : null;
  const obj = fn?.type === 'attribute' ? fn.childForFieldName('object') : null;
  if (obj && fn?.childForFieldName('attribute')?.text === 'get_submodule' && args.length === 1 && args[0])
    return { object: obj, name: args[0] };
  if (!file || !fn || depth > 2) return null;
  const callee = dottedText(fn);
  if (
    (callee === 'reduce' || callee === 'functools.reduce') &&
    args.length === 3 &&
    args[0]?.text === 'getattr'
  ) {
    const name = dottedSplit(file, args[1]!);
    return name && args[2] ? { object: args[2], name } : null;
  }
  // A function of this file whose `return` is such a lookup of its parameters.
  const b = fn.type === 'identifier' ? findBinding(file, fn.text, call) : null;
  if (b?.kind !== 'def' || b.definition.type !== 'function_definition') return null;
  const body = b.definition.childForFieldName('body')?.namedChildren ?? [];
  const returned = body.length <= 4 ? body.find((st) => st.type === 'return_statement')?.namedChild(0) : null;
  const inner = returned?.type === 'call' ? nameLookup(returned, file, depth + 1) : null;
  if (!inner || inner.object.type !== 'identifier' || inner.name.type !== 'identifier') return null;
  const params = (b.definition.childForFieldName('parameters')?.namedChildren ?? []).map((p) =>
    p.type === 'identifier' ? p.text : (p.childForFieldName('name')?.text ?? p.namedChild(0)?.text ?? ''),
  );
  if (args.some((a) => a.type !== 'identifier' && a.type !== 'attribute' && a.type !== 'subscript'))
    return null;
  const pick = (id: Node) => {
    const i = params.indexOf(id.text);
    return i >= 0 && findBinding(file, id.text, id)?.kind === 'param' ? args[i] : undefined;
  };
  const object = pick(inner.object);
  const name = pick(inner.name);
  return object && name ? { object, name } : null;
}

/** The name `X` of `X.split(".")` (or of a name bound to it in the same function), or null. */
function dottedSplit(file: SourceFile, expr: Node): Node | null {
  let e: Node | null = expr;
  if (e.type === 'identifier') {
    const b = findBinding(file, e.text, e);
    e = b?.kind === 'assign' && b.statement.startIndex < expr.startIndex ? b.value : null;
  }
  const fn = e?.type === 'call' ? e.childForFieldName('function') : null;
  if (fn?.type !== 'attribute' || fn.childForFieldName('attribute')?.text !== 'split') return null;
  const sep = e!.childForFieldName('arguments')?.namedChildren.filter((c) => c.type !== 'comment') ?? [];
  const value =
    sep.length === 1
      ? sep[0]!.type === 'keyword_argument'
        ? sep[0]!.childForFieldName('value')
        : sep[0]!
      : null;
  if (value?.type !== 'string' || stripQuotes(value.text) !== '.') return null;
  return fn.childForFieldName('object');
}

/**
 * The modules a wrap looks up by names taken from a parameter (`for path, reshard in plan: fully_shard(get_module(
 * model, path))` with `plan` passed in): which parameter, the place of the name in each entry (-1: the entry
 * itself), the path the names are relative to, and the loop's targets. Their caller's argument names the modules.
 */
export function namedByParameter(
  file: SourceFile,
  expr: Node,
): { param: string; place: number; base: string[]; targets: string[] } | null {
  const found = namedByParameterNodes(file, expr);
  if (!found) return null;
  const { fallback: _, ...facts } = found;
  return facts;
}

/**
 * namedByParameter, with the plan the function makes itself when the caller passes None (`if plan is None: plan =
 * default_plan(model)`): that expression, or null.
 */
export function namedByParameterNodes(
  file: SourceFile,
  expr: Node,
): { param: string; place: number; base: string[]; targets: string[]; fallback: Node | null } | null {
  const found = lookupInLoop(file, expr);
  if (!found) return null;
  const { named, loop: b } = found;
  const left = b.loop.childForFieldName('left');
  const right = b.loop.childForFieldName('right');
  const names = left?.type === 'identifier' ? [left] : (left?.namedChildren ?? []);
  if (!left || !names.every((n) => n.type === 'identifier')) return null;
  const place = left.type === 'identifier' ? -1 : names.findIndex((n) => n.text === named.name.text);
  if (left.type !== 'identifier' && place < 0) return null;
  if (right?.type !== 'identifier') return null;
  let plan = findBinding(file, right.text, right);
  // `if plan is None: plan = default_plan(...)`: the parameter, wherever the caller passes one.
  const assigned = plan?.kind === 'assign' ? plan.value : null;
  const test = plan?.kind === 'assign' ? noneFallback(plan.statement, right.text) : null;
  if (test) plan = findBinding(file, right.text, test);
  if (plan?.kind !== 'param') return null;
  const base = pathOf(file, named.object, null, 1);
  return {
    param: right.text,
    place,
    base,
    targets: names.map((n) => n.text),
    fallback: test ? assigned : null,
  };
}

/** The `if name is None:` (or `if not name:`) statement, without other arms, whose body holds `statement`. */
function noneFallback(statement: Node, name: string): Node | null {
  const own = statement.type === 'assignment' && up(statement)?.type === 'expression_statement';
  const block = up(own ? up(statement)! : statement);
  const test = block ? up(block) : null;
  if (test?.type !== 'if_statement' || test.childForFieldName('consequence')?.id !== block!.id) return null;
  if (test.childrenForFieldName('alternative').length) return null;
  const cond = test.childForFieldName('condition')?.text.replace(/\s+/g, ' ');
  return cond === `${name} is None` || cond === `not ${name}` ? test : null;
}

/** The elements of the list or tuple literal a loop variable runs over, or null. */
function loopLiteral(file: SourceFile, name: Node): Node[] | null {
  const b = findBinding(file, name.text, name);
  if (b?.kind !== 'loop' || b.loop.childForFieldName('left')?.type !== 'identifier') return null;
  let it = b.loop.childForFieldName('right');
  const added: Node[] = [];
  if (it?.type === 'identifier') {
    const v = findBinding(file, it.text, it);
    const bound = v?.kind === 'assign' && v.value && v.statement.startIndex < it.startIndex ? v : null;
    const grown = bound ? listAdditions(file, it.text, bound.statement.endIndex, it.startIndex) : null;
    if (!bound || !grown) return null;
    added.push(...grown);
    it = bound.value;
  }
  if (!it || (it.type !== 'list' && it.type !== 'tuple')) return null;
  if (added.length && it.type !== 'list') return null;
  const elements = [...it.namedChildren.filter((c) => c.type !== 'comment'), ...added];
  if (!elements.length || elements.length > LITERAL_ELEMENTS) return null;
  return elements.every((e) => e.type === 'attribute' || e.type === 'subscript') ? elements : null;
}

/**
 * The elements `name.append(x)`, `name.insert(i, x)`, `name.extend([...])` and `name += [...]` add between two
 * offsets, or null when the name is used there in any other way (passed to a helper that may fill it, rebound).
 */
function listAdditions(file: SourceFile, name: string, from: number, to: number): Node[] | null {
  const out: Node[] = [];
  for (const id of file.identifiers(name, from, to)) {
    const p = up(id);
    if (p?.type === 'augmented_assignment' && p.childForFieldName('left')?.id === id.id) {
      const right = p.childForFieldName('right');
      if (
        p.childForFieldName('operator')?.text !== '+=' ||
        (right?.type !== 'list' && right?.type !== 'tuple')
      )
        return null;
      out.push(...right.namedChildren.filter((c) => c.type !== 'comment'));
      continue;
    }
    const call = up(p);
    const method = p?.type === 'attribute' && p.childForFieldName('object')?.id === id.id ? p : null;
    if (!method || call?.type !== 'call' || call.childForFieldName('function')?.id !== method.id) return null;
    const args = call.childForFieldName('arguments')?.namedChildren.filter((c) => c.type !== 'comment') ?? [];
    const verb = method.childForFieldName('attribute')?.text;
    if (verb === 'append' && args.length === 1) out.push(args[0]!);
    else if (verb === 'insert' && args.length === 2) out.push(args[1]!);
    else if (
      verb === 'extend' &&
      args.length === 1 &&
      (args[0]!.type === 'list' || args[0]!.type === 'tuple')
    )
      out.push(...args[0]!.namedChildren.filter((c) => c.type !== 'comment'));
    else return null;
  }
  return out;
}

/** `checkpoint_wrapper(block, ...)` / `FSDP(block)` style calls pass their module through. */
export function unwrapCall(call: Node): Node | null {
  const fn = call.childForFieldName('function');
  const args = call.childForFieldName('arguments');
  const first =
    args?.type === 'argument_list'
      ? args.namedChildren.find((c) => c.type !== 'keyword_argument' && c.type !== 'comment')
      : undefined;
  if (!fn || !first) return null;
  const name = lastSegment(dottedText(fn));
  return /checkpoint_wrapper|^wrap$|^FSDP$|FullyShardedDataParallel/.test(name) ? first : null;
}

/** `getattr(model, "layers")` or `model.get_submodule("model.norm")`: the module named by a constant string. */
export function getattrPath(
  file: SourceFile,
  call: Node,
  inLoopAt: Node | null,
  depth: number,
): string[] | null {
  const named = nameLookup(call, file);
  if (!named || named.name.type !== 'string') return null;
  const name = stripQuotes(named.name.text);
  if (!/^[A-Za-z_0-9]+(\.[A-Za-z_0-9]+)*$/.test(name)) return null;
  return [...pathOf(file, named.object, inLoopAt, depth + 1), ...name.split('.')];
}

export function stripQuotes(text: string): string {
  return text.replace(/^[rbuf]*['"]{1,3}|['"]{1,3}$/gi, '');
}

export function iterablePath(file: SourceFile, loop: Node, depth: number): string[] {
  const it = loop.childForFieldName('right');
  return it ? elementPath(file, it, depth) : ['*'];
}

/**
 * Whether a call constructs an object of a class (`nn.Sequential(...)`, `Net()`: a capitalised name, as classes are
 * named): a loop over `model = nn.Sequential(...)` iterates the module's children, named by the variable. Any other
 * call (`list(model.layers)`, `get_layers(model)`) is followed to what it iterates, or left unknown.
 */
function constructsModule(call: Node): boolean {
  const fn = call.childForFieldName('function');
  return !!fn && /^[A-Z]/.test(lastSegment(dottedText(fn)));
}

/** The path of the elements of a sequence expression (`model.layers` → `model.layers.*`). */
export function elementPath(file: SourceFile, expr: Node, depth: number): string[] {
  if (depth > 8) return [expr.text, '*'];
  let it: Node | undefined = expr;
  // enumerate(X), reversed(X), list(X), zip(X, ...)
  for (let i = 0; i < 4 && it?.type === 'call'; i++) {
    const fn = it.childForFieldName('function');
    const name = fn ? lastSegment(dottedText(fn)) : '';
    const args = it.childForFieldName('arguments');
    const first: Node | undefined = args?.namedChildren.find((c) => c.type !== 'keyword_argument');
    if (fn?.type === 'attribute') {
      const obj = fn.childForFieldName('object');
      if (!obj) break;
      if (name === 'named_modules' || name === 'modules')
        return [...pathOf(file, obj, null, depth + 1), '**'];
      if (['items', 'values', 'named_children', 'children', 'keys'].includes(name))
        return [...pathOf(file, obj, null, depth + 1), '*'];
      break;
    }
    if (['enumerate', 'reversed', 'list', 'zip', 'tuple', 'sorted', 'iter'].includes(name) && first) {
      it = first;
      continue;
    }
    if (name === 'range') return ['*'];
    break;
  }
  if (!it) return ['*'];
  if (COMPREHENSIONS.includes(it.type)) return comprehensionPath(file, it, depth);
  // `blocks = list(model.layers)` / `blocks = [m for m in model.modules() if ...]`, then `for b in blocks`.
  if (it.type === 'identifier') {
    const b = findBinding(file, it.text, it);
    if (
      b?.kind === 'assign' &&
      b.value &&
      b.statement.startIndex < it.startIndex &&
      ((b.value.type === 'call' && !constructsModule(b.value)) || COMPREHENSIONS.includes(b.value.type))
    )
      return elementPath(file, b.value, depth + 1);
    // `mods = []` grown by one `mods.append(m)` in a loop over modules: the modules that loop visits (which of
    // them, by its tests, is decided module by module at the plan).
    const appended = appendedInLoop(file, it);
    if (appended) return iterablePath(file, appended.loop, depth + 1);
    // A Python list or tuple whose elements were not read (`mods = []` filled by a helper): its elements are
    // unknown, and the name itself is never a module. Opaque, as for a comprehension.
    if (
      b?.kind === 'assign' &&
      b.value &&
      b.statement.startIndex < it.startIndex &&
      (b.value.type === 'list' || b.value.type === 'tuple')
    )
      return [b.value.text, '*'];
  }
  if (it.type === 'subscript' && it.childForFieldName('subscript')?.type === 'slice') {
    const v = it.childForFieldName('value');
    return v ? [...pathOf(file, v, null, depth + 1), '*'] : ['*'];
  }
  return [...pathOf(file, it, null, depth + 1), '*'];
}

export const COMPREHENSIONS = ['list_comprehension', 'generator_expression', 'set_comprehension'];

/**
 * The elements of `[m for m in X if ...]` (X's elements) or `[b.attn for b in X]` (an attribute of each); anything
 * else is opaque, a path no module path starts with.
 */
export function comprehensionPath(file: SourceFile, comp: Node, depth: number): string[] {
  const opaque = [comp.text, '*'];
  const clauses = comp.namedChildren.filter((c) => c.type === 'for_in_clause');
  let body = comp.childForFieldName('body');
  const clause = clauses[0];
  const left = clause?.childForFieldName('left');
  const right = clause?.childForFieldName('right');
  if (clauses.length !== 1 || !body || !left || !right) return opaque;
  const attrs: string[] = [];
  while (body?.type === 'attribute') {
    attrs.unshift(body.childForFieldName('attribute')?.text ?? '');
    body = body.childForFieldName('object');
  }
  // `for m in X`, or the module of `for name, m in X.named_modules()`.
  const names =
    left.type === 'identifier' ? [left] : left.namedChildren.filter((c) => c.type === 'identifier');
  if (body?.type !== 'identifier' || body.text !== names[names.length - 1]?.text) return opaque;
  return [...elementPath(file, right, depth + 1), ...attrs];
}

/** A path is under another when the other is a strict prefix (`**` matches any depth). */
export function isUnder(path: string[], root: string[]): boolean {
  if (root.length >= path.length && !path.includes('**')) return false;
  for (let i = 0; i < root.length; i++) {
    if (path[i] === undefined) return false;
    if (root[i] === '**') return true;
    if (path[i] !== root[i] && path[i] !== '*' && root[i] !== '*') return false;
  }
  return path.length > root.length;
}

/** The path of the variable that holds the model (`model`, `self.model`), from the root wrap or the units' base. */
export function modelVariable(calls: WrapCall[], modelVariables: string[] = []): string[] | null {
  // The variable a model is constructed into, when the wrapped paths start with it (`model.model.layers`).
  for (const v of modelVariables) {
    const parts = v.split('.');
    if (calls.some((c) => c.paths.some((p) => parts.every((s, i) => p[i] === s)))) return parts;
  }
  const root = calls.find((c) => c.isRoot && c.paths.length === 1);
  if (root?.paths[0]) return root.paths[0];
  const p = calls.find((c) => c.paths[0]?.length)?.paths[0];
  if (!p) return null;
  return p.slice(0, p[0] === 'self' ? 2 : 1);
}

/**
 * The modules a name bound to a written-out list denotes, when the name is passed whole (`fully_shard(modules)`,
 * one unit of them all): `modules = [model.norm, model.lm_head]`, or `[m for m in (model.norm, model.lm_head) if m
 * is not None]` (the modules that exist). Null for anything else, or a list changed between its binding and the
 * call (`.append`, `+=`).
 */
export function boundModuleList(file: SourceFile, name: Node): Node[] | null {
  if (name.type !== 'identifier') return null;
  const b = findBinding(file, name.text, name);
  if (b?.kind !== 'assign' || !b.value || b.statement.startIndex >= name.startIndex) return null;
  let list: Node | null = b.value;
  if (list.type === 'list_comprehension') {
    const body = list.childForFieldName('body');
    const clauses = list.namedChildren.filter((c) => c.type === 'for_in_clause' || c.type === 'if_clause');
    const loop = clauses[0];
    const left = loop?.type === 'for_in_clause' ? loop.childForFieldName('left') : null;
    // One `for m in (...)` and at most an `if m is not None`, whose body is `m` itself.
    const filter = clauses[1];
    if (!loop || !left || left.type !== 'identifier' || body?.text !== left.text || clauses.length > 2)
      return null;
    if (filter && !new RegExp(`^if\\s+${left.text}\\s+is\\s+not\\s+None$`).test(filter.text.trim()))
      return null;
    list = loop.childForFieldName('right');
  }
  if (!list || (list.type !== 'list' && list.type !== 'tuple')) return null;
  const elements = list.namedChildren.filter((c) => c.type !== 'comment');
  if (!elements.length || elements.length > LITERAL_ELEMENTS) return null;
  if (!elements.every((e) => e.type === 'attribute' || e.type === 'subscript')) return null;
  // Used only here between its binding and the call.
  const uses = file.identifiers(name.text, b.statement.endIndex, name.startIndex);
  return uses.length ? null : elements;
}

/**
 * The loop that picked the modules a list holds, when a wrap loop runs over such a list: a comprehension
 * `[m for m in X.modules() if test]` bound to the name, or an empty list grown by one `name.append(m)` in a loop
 * over modules under tests (`for n, m in model.named_modules(): if test: mods.append(m)`). Its target, its
 * iterable and the tests that pick.
 */
export function pickedList(
  file: SourceFile,
  iterable: Node,
  scope: Node | null,
): { left: Node; right: Node; parts: { node: Node; negated: boolean }[] } | undefined {
  let it: Node | null = iterable;
  // `for b in list(blocks)` / `reversed(blocks)`.
  while (
    it?.type === 'call' &&
    ['list', 'reversed', 'tuple', 'iter', 'enumerate'].includes(it.childForFieldName('function')?.text ?? '')
  )
    it = it.childForFieldName('arguments')?.namedChildren.filter((c) => c.type !== 'comment')[0] ?? null;
  if (it?.type !== 'identifier') return undefined;
  const b = findBinding(file, it.text, it);
  if (b?.kind !== 'assign' || !b.value || b.statement.startIndex >= it.startIndex) return undefined;
  const value = b.value;
  if (value.type === 'list_comprehension' || value.type === 'generator_expression') {
    const clauses = value.namedChildren.filter((c) => c.type === 'for_in_clause');
    const left = clauses[0]?.childForFieldName('left');
    const right = clauses[0]?.childForFieldName('right');
    const element = value.childForFieldName('body');
    const names =
      left?.type === 'identifier'
        ? [left]
        : (left?.namedChildren.filter((c) => c.type === 'identifier') ?? []);
    if (clauses.length !== 1 || !left || !right || element?.text !== names[names.length - 1]?.text)
      return undefined;
    const parts = value.namedChildren
      .filter((c) => c.type === 'if_clause')
      .map((c) => c.namedChild(0))
      .filter((n): n is Node => !!n)
      .map((n) => ({ node: n, negated: false }));
    return { left, right, parts };
  }
  const appended = appendedInLoop(file, it);
  if (!appended) return undefined;
  const { element, loop } = appended;
  const body = loop.childForFieldName('body');
  const left = loop.childForFieldName('left');
  const right = loop.childForFieldName('right');
  // The element appended is the module the loop hands out (`for name, m in ...: mods.append(m)`).
  const target =
    left?.type === 'identifier' ? left : left?.namedChildren.filter((c) => c.type === 'identifier').pop();
  if (!body || !left || !right || target?.text !== element.text || enclosingFunction(loop)?.id !== scope?.id)
    return undefined;
  const parts = conditionParts(element, scope).filter(
    (p) => p.node.startIndex >= body.startIndex && p.node.endIndex <= body.endIndex,
  );
  return { left, right, parts };
}

/**
 * A name bound to an empty list and grown, before `name` reads it, by one element that is a loop's variable
 * (`mods = []`, then `mods.append(m)` in `for n, m in model.named_modules():`): that element and its loop.
 */
function appendedInLoop(file: SourceFile, name: Node): { element: Node; loop: Node } | undefined {
  const b = findBinding(file, name.text, name);
  if (
    b?.kind !== 'assign' ||
    b.value?.type !== 'list' ||
    b.value.namedChildren.some((c) => c.type !== 'comment') ||
    b.statement.startIndex >= name.startIndex
  )
    return undefined;
  const added = listAdditions(file, name.text, b.statement.endIndex, name.startIndex);
  const element = added?.length === 1 ? added[0]! : undefined;
  const eb = element?.type === 'identifier' ? findBinding(file, element.text, element) : undefined;
  return element && eb?.kind === 'loop' ? { element, loop: eb.loop } : undefined;
}

/**
 * The variables a name is computed from by a call (`decoder = find_decoder(net)` → `net`, `lm = get_lm(model,
 * override=...)` → `model`): the object it holds may be part of theirs. Empty when the name is bound otherwise.
 */
export function derivedFrom(file: SourceFile, name: string, at: Node): string[] {
  const b = /^[A-Za-z_]\w*$/.test(name) ? findBinding(file, name, at) : null;
  if (b?.kind !== 'assign' || b.value?.type !== 'call' || b.statement.startIndex >= at.startIndex) return [];
  const out: string[] = [];
  for (const a of b.value.childForFieldName('arguments')?.namedChildren ?? []) {
    const v = a.type === 'keyword_argument' ? a.childForFieldName('value') : a;
    if (v?.type === 'identifier' || v?.type === 'attribute') out.push(dottedText(v).split('.')[0]!);
  }
  return out;
}
