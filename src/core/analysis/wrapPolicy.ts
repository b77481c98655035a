/**
 * FSDP1 auto-wrap policies as the code writes them: by class, by size, always, `_or_policy` of several, and a
 * lambda's test of each module compiled into a predicate the plan evaluates on the model's modules
 * (`lambda_auto_wrap_policy`, `CustomPolicy`), through the project's helpers that build them.
 */
import type { Node } from '../parsing/python';
import { conditionParts, findBinding, parameterNames } from '../python/scope';
import { truthy } from '../python/operators';
import type { Value } from '../python/values';
import { classifyApi } from './apis';
import type { Evaluator } from './evaluator';
import { describe, lastSegment } from './options';
import { returnedValue } from './returns';

/**
 * A test of one module, as a policy's lambda writes it. `leaf`: no child modules (`len(list(m.named_children()))
 * == 0`); `has`: a parameter of that name (`getattr(m, "weight", None) is not None`, `hasattr(m, "weight")`);
 * `trainable`: that parameter requires grad (`m.weight.requires_grad`); `class`: the module's class is one of
 * `names` (`isinstance`, `type(m).__name__`).
 */
export type ModulePredicate =
  | { is: 'const'; value: boolean }
  | { is: 'leaf' }
  | { is: 'has'; attr: string }
  | { is: 'trainable'; attr: string }
  | { is: 'class'; names: string[] }
  | { is: 'not'; of: ModulePredicate }
  | { is: 'and' | 'or'; of: ModulePredicate[] }
  | { is: 'if'; test: ModulePredicate; then: ModulePredicate; else: ModulePredicate };

export type WrapPolicyValue =
  | { policy: 'transformer'; classes: string[]; unresolved?: string[] }
  | { policy: 'size'; minNumParams: number | null }
  | { policy: 'lambda'; text: string; classes?: string[]; predicate?: ModulePredicate; unread?: string }
  | { policy: 'module'; classes: string[]; unresolved?: string[] }
  | { policy: 'custom'; text: string; classes?: string[]; predicate?: ModulePredicate; unread?: string }
  | { policy: 'or'; text: string; policies: WrapPolicyValue[] }
  | { policy: 'always' }
  | { policy: 'unknown'; text: string };

/**
 * The test of PEFT's `fsdp_auto_wrap_policy` (peft/utils/other.py, `lambda_policy_fn`), which Transformers'
 * Trainer sets for a LoRA model (`Trainer._fsdp_qlora_plugin_updates`) and llama-recipes writes out: a leaf module
 * whose `weight` requires grad (each LoRA matrix) is a unit of its own.
 */
export const TRAINABLE_LEAF: ModulePredicate = {
  is: 'and',
  of: [{ is: 'leaf' }, { is: 'has', attr: 'weight' }, { is: 'trainable', attr: 'weight' }],
};

/** How deep policies nest through helpers and `_or_policy` lists before the rest is not read. */
const MAX_DEPTH = 6;

/**
 * The policy a value denotes. With an evaluator, a project helper's call is read through its `return`, and a
 * lambda's (or a named function's) test is compiled into a predicate; without one, only the value itself.
 */
export function wrapPolicy(v: Value, ev?: Evaluator, depth = 0): WrapPolicyValue {
  if (v.k === 'none') return { policy: 'unknown', text: 'None' };
  if (v.k === 'ref') {
    const kind = classifyApi(v.name)?.kind ?? lastSegment(v.name);
    if (kind === 'always_wrap_policy') return { policy: 'always' };
    if (kind === 'size_based_auto_wrap_policy') return { policy: 'size', minNumParams: 100_000_000 };
    return { policy: 'unknown', text: v.name };
  }
  if (v.k === 'lambda') return lambdaPolicy('lambda', v.text, v, undefined, ev);
  if (v.k !== 'call') return { policy: 'unknown', text: describe(v) };
  const kind = classifyApi(v.callee)?.kind ?? lastSegment(v.callee);
  if (kind === 'partial') {
    const fn = v.args[0];
    const fnKind = fn?.k === 'ref' ? (classifyApi(fn.name)?.kind ?? lastSegment(fn.name)) : undefined;
    if (fnKind === 'transformer_auto_wrap_policy')
      return { policy: 'transformer', ...classNames(v.kwargs.transformer_layer_cls ?? v.args[4]) };
    if (fnKind === 'size_based_auto_wrap_policy') {
      const n = v.kwargs.min_num_params ?? v.args[4];
      return { policy: 'size', minNumParams: n === undefined ? 100_000_000 : n.k === 'num' ? n.v : null };
    }
    if (fnKind === 'lambda_auto_wrap_policy') {
      const fnv = v.kwargs.lambda_fn ?? v.args[4];
      return lambdaPolicy(
        'lambda',
        fnv ? describe(fnv) : v.node.text,
        fnv,
        argumentNode(v, 'lambda_fn', 4),
        ev,
      );
    }
    // torch/distributed/fsdp/wrap.py `_or_policy`: a module is wrapped (and recursed into) when any policy says so.
    if (fnKind === '_or_policy') {
      const list = v.kwargs.policies ?? v.args[4];
      if (list?.k !== 'seq' || depth >= MAX_DEPTH) return { policy: 'unknown', text: v.node.text };
      return {
        policy: 'or',
        text: v.node.text,
        policies: list.items.map((p) => wrapPolicy(p, ev, depth + 1)),
      };
    }
    return { policy: 'unknown', text: v.node.text };
  }
  if (kind === 'ModuleWrapPolicy')
    return { policy: 'module', ...classNames(v.kwargs.module_classes ?? v.args[0]) };
  if (kind === 'CustomPolicy') {
    const fnv = v.kwargs.lambda_fn ?? v.args[0];
    return lambdaPolicy('custom', v.node.text, fnv, argumentNode(v, 'lambda_fn', 0), ev);
  }
  // A helper of the project that builds the policy (`fsdp_auto_wrap_policy(model, [LlamaDecoderLayer])`).
  if (ev && depth < MAX_DEPTH && !classifyApi(v.callee)) {
    const r = returnedValue(ev, v);
    if (r && r.value.k !== 'unknown') return wrapPolicy(r.value, r.ev, depth + 1);
  }
  return { policy: 'unknown', text: v.node.text };
}

function classNames(v: Value | undefined): { classes: string[]; unresolved?: string[] } {
  if (!v) return { classes: [] };
  const items = v.k === 'seq' ? v.items : [v];
  const classes: string[] = [];
  const unresolved: string[] = [];
  for (const it of items) {
    if (it.k === 'ref') classes.push(lastSegment(it.name));
    else if (it.k === 'str') classes.push(it.v);
    else unresolved.push(describe(it));
  }
  return unresolved.length ? { classes, unresolved } : { classes };
}

/** The source node of a call's argument, by keyword or position. */
function argumentNode(v: Value & { k: 'call' }, name: string, index: number): Node | undefined {
  const list = v.node.childForFieldName('arguments')?.namedChildren.filter((c) => c.type !== 'comment') ?? [];
  const kw = list.find((a) => a.type === 'keyword_argument' && a.childForFieldName('name')?.text === name);
  if (kw) return kw.childForFieldName('value') ?? undefined;
  const positional = list.filter((a) => a.type !== 'keyword_argument' && a.type !== 'dictionary_splat');
  return positional[index];
}

/** A lambda (or custom) policy: its test compiled where it can be, else the classes its `isinstance` calls name. */
function lambdaPolicy(
  policy: 'lambda' | 'custom',
  text: string,
  fn: Value | undefined,
  at: Node | undefined,
  ev: Evaluator | undefined,
): WrapPolicyValue {
  const def =
    fn?.k === 'lambda'
      ? fn.node
      : fn?.k === 'ref' && at?.type === 'identifier' && ev
        ? definitionAt(ev, at)
        : undefined;
  const compiled = def && ev ? compilePredicate(ev, def) : undefined;
  if (compiled && 'predicate' in compiled) return { policy, text, predicate: compiled.predicate };
  const out = withClasses({ policy, text }, def);
  return compiled ? { ...out, unread: compiled.unread } : out;
}

/**
 * The function a name refers to where it is used: its `def`, when every test the definition sits under is known
 * to hold.
 */
function definitionAt(ev: Evaluator, id: Node): Node | undefined {
  const b = findBinding(ev.file, id.text, id);
  if (b?.kind !== 'def' || b.definition.type !== 'function_definition') return undefined;
  for (const c of conditionParts(b.definition, null)) {
    const t = truthy(ev.eval(c.node));
    if (t === undefined || t === c.negated) return undefined;
  }
  return b.definition;
}

/** The classes a lambda tests with `isinstance(m, Cls)` / `isinstance(m, (A, B))`, read from its tree. */
function withClasses<T extends { policy: 'lambda' | 'custom'; text: string }>(
  p: T,
  fn: Node | undefined,
): T & { classes?: string[] } {
  if (!fn) return p;
  const classes: string[] = [];
  for (const call of fn.descendantsOfType('call')) {
    if (call.childForFieldName('function')?.text !== 'isinstance') continue;
    const second = call.childForFieldName('arguments')?.namedChildren[1];
    const items =
      second?.type === 'tuple' || second?.type === 'parenthesized_expression'
        ? second.namedChildren
        : second
          ? [second]
          : [];
    for (const it of items)
      if (it.type === 'identifier' || it.type === 'attribute') classes.push(lastSegment(it.text));
  }
  return classes.length ? { ...p, classes } : p;
}

/** Most predicate nodes one function compiles to (each `if` copies the statements after it into both arms). */
const MAX_NODES = 256;

class Unread extends Error {}

/**
 * A lambda's or a function's test of its module argument, as a predicate; `unread` names the first part that is
 * not one of the tests above.
 */
export function compilePredicate(
  ev: Evaluator,
  fn: Node,
): { predicate: ModulePredicate } | { unread: string } {
  const param =
    fn.type === 'lambda' ? fn.childForFieldName('parameters')?.namedChildren[0]?.text : parameterNames(fn)[0];
  if (!param || !/^\w+$/.test(param)) return { unread: fn.text.slice(0, 80) };
  let nodes = 0;
  const unread = (n: Node): never => {
    throw new Unread(n.text.slice(0, 80));
  };
  const count = (n: Node) => {
    if (++nodes > MAX_NODES) unread(n);
  };
  const isParam = (n: Node | null | undefined) => n?.type === 'identifier' && n.text === param;
  const str = (n: Node | null | undefined): string | undefined => {
    if (!n || n.type !== 'string') return undefined;
    const v = ev.eval(n);
    return v.k === 'str' ? v.v : undefined;
  };
  const args = (call: Node) =>
    call.childForFieldName('arguments')?.namedChildren.filter((c) => c.type !== 'comment') ?? [];

  const classesOf = (n: Node): string[] => {
    const v = ev.eval(n);
    const items = v.k === 'seq' ? v.items : [v];
    if (!items.length || items.some((i) => i.k !== 'ref' && i.k !== 'str')) unread(n);
    return items.map((i) => (i.k === 'ref' ? lastSegment(i.name) : (i as { v: string }).v));
  };

  /** `len(list(m.named_children()))`, `len(list(m.children()))`, `len(m._modules)`: the module's children count. */
  const childCount = (n: Node): boolean => {
    if (n.type !== 'call' || n.childForFieldName('function')?.text !== 'len') return false;
    let inner = args(n)[0];
    if (inner?.type === 'call' && inner.childForFieldName('function')?.text === 'list')
      inner = args(inner)[0];
    if (inner?.type === 'attribute')
      return (
        isParam(inner.childForFieldName('object')) &&
        inner.childForFieldName('attribute')?.text === '_modules'
      );
    const f = inner?.type === 'call' ? inner.childForFieldName('function') : null;
    return (
      f?.type === 'attribute' &&
      isParam(f.childForFieldName('object')) &&
      ['children', 'named_children'].includes(f.childForFieldName('attribute')?.text ?? '') &&
      args(inner!).length === 0
    );
  };
  /** `type(m).__name__` / `m.__class__.__name__`. */
  const className = (n: Node): boolean => {
    if (n.type !== 'attribute' || n.childForFieldName('attribute')?.text !== '__name__') return false;
    const o = n.childForFieldName('object');
    if (o?.type === 'call') return o.childForFieldName('function')?.text === 'type' && isParam(args(o)[0]);
    return (
      o?.type === 'attribute' &&
      o.childForFieldName('attribute')?.text === '__class__' &&
      isParam(o.childForFieldName('object'))
    );
  };
  /** `getattr(m, "weight", None)` / `m.weight`: the attribute's name. */
  const attrOf = (n: Node): string | undefined => {
    if (n.type === 'attribute' && isParam(n.childForFieldName('object')))
      return n.childForFieldName('attribute')?.text;
    if (n.type === 'call' && n.childForFieldName('function')?.text === 'getattr') {
      const a = args(n);
      if (a.length === 3 && isParam(a[0]) && a[2]?.type === 'none') return str(a[1]);
    }
    return undefined;
  };

  const expr = (n: Node | null | undefined): ModulePredicate => {
    if (!n) throw new Unread('');
    count(n);
    switch (n.type) {
      case 'parenthesized_expression':
        return expr(n.namedChildren.find((c) => c.type !== 'comment'));
      case 'true':
        return { is: 'const', value: true };
      case 'false':
      case 'none':
        return { is: 'const', value: false };
      case 'not_operator':
        return { is: 'not', of: expr(n.childForFieldName('argument')) };
      case 'boolean_operator': {
        const op = n.childForFieldName('operator')?.text;
        if (op !== 'and' && op !== 'or') return unread(n);
        return { is: op, of: [expr(n.childForFieldName('left')), expr(n.childForFieldName('right'))] };
      }
      case 'attribute': {
        // `m.weight.requires_grad`
        const o = n.childForFieldName('object');
        const attr = o ? attrOf(o) : undefined;
        if (n.childForFieldName('attribute')?.text === 'requires_grad' && attr)
          return { is: 'trainable', attr };
        return unread(n);
      }
      case 'call': {
        const f = n.childForFieldName('function')?.text;
        const a = args(n);
        if (f === 'isinstance' && a.length === 2 && isParam(a[0]))
          return { is: 'class', names: classesOf(a[1]!) };
        if (f === 'hasattr' && a.length === 2 && isParam(a[0])) {
          const attr = str(a[1]);
          if (attr) return { is: 'has', attr };
        }
        if (f === 'bool' && a.length === 1) return expr(a[0]);
        return unread(n);
      }
      case 'comparison_operator':
        return comparison(n);
      default:
        return unread(n);
    }
  };

  const comparison = (n: Node): ModulePredicate => {
    const operands = n.namedChildren.filter((c) => c.type !== 'comment');
    const ops = n.children.filter((c) => !c.isNamed).map((c) => c.type);
    const op = ops.join(' ');
    if (operands.length !== 2) return unread(n);
    const [left, right] = operands as [Node, Node];
    if (childCount(left) && right.type === 'integer' && right.text === '0') {
      if (op === '==' || op === '<=') return { is: 'leaf' };
      if (op === '!=' || op === '>') return { is: 'not', of: { is: 'leaf' } };
    }
    const attr = attrOf(left);
    if (attr && right.type === 'none') {
      if (op === 'is not' || op === '!=') return { is: 'has', attr };
      if (op === 'is' || op === '==') return { is: 'not', of: { is: 'has', attr } };
    }
    if (className(left)) {
      if (op === '==' || op === 'in') {
        const names = op === '==' ? [str(right)] : classesOf(right);
        if (names.every((x): x is string => typeof x === 'string')) return { is: 'class', names };
      }
      if (op === '!=' || op === 'not in') {
        const names = op === '!=' ? [str(right)] : classesOf(right);
        if (names.every((x): x is string => typeof x === 'string'))
          return { is: 'not', of: { is: 'class', names } };
      }
    }
    return unread(n);
  };

  /** A body's statements: its returns, each `if` splitting into arms that go on with the statements after it. */
  const statements = (list: Node[]): ModulePredicate => {
    for (let i = 0; i < list.length; i++) {
      const st = list[i]!;
      count(st);
      if (st.type === 'comment' || st.type === 'pass_statement') continue;
      if (st.type === 'expression_statement' && st.namedChildren.every((c) => c.type === 'string')) continue;
      if (st.type === 'return_statement') {
        const e = st.namedChild(0);
        return e ? expr(e) : { is: 'const', value: false };
      }
      if (st.type !== 'if_statement') return unread(st);
      const rest = list.slice(i + 1);
      return ifChain(
        st,
        st.childForFieldName('condition'),
        st.childForFieldName('consequence'),
        st.childrenForFieldName('alternative'),
        rest,
      );
    }
    return { is: 'const', value: false };
  };
  const ifChain = (
    st: Node,
    cond: Node | null,
    body: Node | null,
    alternatives: Node[],
    rest: Node[],
  ): ModulePredicate => {
    if (!cond || !body) return unread(st);
    const [alt, ...more] = alternatives;
    const otherwise = !alt
      ? statements(rest)
      : alt.type === 'else_clause'
        ? statements([...(alt.childForFieldName('body')?.namedChildren ?? []), ...rest])
        : ifChain(alt, alt.childForFieldName('condition'), alt.childForFieldName('consequence'), more, rest);
    return {
      is: 'if',
      test: expr(cond),
      then: statements([...body.namedChildren, ...rest]),
      else: otherwise,
    };
  };

  try {
    if (fn.type === 'lambda') return { predicate: expr(fn.childForFieldName('body')) };
    return { predicate: statements(fn.childForFieldName('body')?.namedChildren ?? []) };
  } catch (e) {
    if (e instanceof Unread) return { unread: e.message };
    throw e;
  }
}
