import type { Node } from '../parsing/python';
import type { SourceFile } from '../parsing/source';
import { dtypeFromText, torchDtype, type DType } from '../vocabulary/dtypes';
import type { ImportTable } from './imports';
import { conditionParts, enclosingFunction, findBinding, type Binding } from './scope';

/** A statically known value, or what is known of it. */
export type Val =
  | { k: 'num'; v: number; int: boolean }
  | { k: 'str'; v: string }
  | { k: 'bool'; v: boolean }
  | { k: 'none' }
  | { k: 'seq'; kind: 'list' | 'tuple' | 'set'; items: Val[] }
  | { k: 'dict'; entries: DictEntry[] }
  | { k: 'ref'; name: string; bound: boolean }
  | { k: 'call'; callee: string; args: Val[]; kwargs: Record<string, Val>; splats: Val[]; node: Node }
  | { k: 'lambda'; text: string; node: Node }
  | { k: 'param'; name: string; function: string; index: number; default: Val | null }
  | { k: 'unknown'; text: string; why: string };

export interface DictEntry {
  key: Val;
  value: Val;
  /** The value's source, when it is written in the file. */
  valueNode?: Node;
  /** Set when the key is added under an `if` (source text of the conditions). */
  conditions?: string[];
  line?: number;
}

export const UNKNOWN = (text: string, why: string): Val => ({ k: 'unknown', text, why });

export interface EvalLimits {
  /** Nodes visited per top-level evaluation. */
  maxSteps: number;
  /** Nesting of name lookups and sub-expressions. */
  maxDepth: number;
}

const DEFAULT_LIMITS: EvalLimits = { maxSteps: 4000, maxDepth: 48 };

/**
 * Evaluates Python expressions of one file as far as they are statically known: literals, arithmetic, names
 * bound earlier in the same function or the module, dict literals grown with `d[k] = v`, calls kept as calls.
 * Bounded in steps and depth: pathological input yields `unknown`, never a hang or an exception.
 */
export class Evaluator {
  private steps = 0;
  private depth = 0;
  private readonly active = new Set<number>();
  /** Times an evaluation was cut short (budget, depth or a cycle): a result reached that way depends on context. */
  private cutShort = 0;
  /** Parameters' values from their call sites, by function and name (each wrap call asks about the same ones). */
  private readonly callSiteValues = new Map<string, Val | null>();

  constructor(
    readonly file: SourceFile,
    readonly imports: ImportTable,
    private readonly limits: EvalLimits = DEFAULT_LIMITS,
  ) {}

  /** Evaluates `node`; each call has its own step budget. */
  eval(node: Node): Val {
    this.steps = 0;
    this.depth = 0;
    return this.ev(node);
  }

  /** Evaluates a name as seen from `at` (the last binding before it). */
  evalName(name: string, at: Node): Val {
    this.steps = 0;
    this.depth = 0;
    return this.lookup(name, at);
  }

  private ev(node: Node): Val {
    if (++this.steps > this.limits.maxSteps) {
      this.cutShort++;
      return UNKNOWN(node.text.slice(0, 80), 'too complex to evaluate');
    }
    if (this.depth >= this.limits.maxDepth) {
      this.cutShort++;
      return UNKNOWN(node.text.slice(0, 80), 'nested too deeply');
    }
    this.depth++;
    try {
      return this.evalNode(node);
    } finally {
      this.depth--;
    }
  }

  private evalNode(node: Node): Val {
    switch (node.type) {
      case 'integer':
        return parseInteger(node.text);
      case 'float':
        return parseFloatLit(node.text);
      case 'true':
        return { k: 'bool', v: true };
      case 'false':
        return { k: 'bool', v: false };
      case 'none':
        return { k: 'none' };
      case 'string':
        return parseString(node);
      case 'concatenated_string': {
        let s = '';
        for (const c of node.namedChildren) {
          const v = this.ev(c);
          if (v.k !== 'str') return UNKNOWN(node.text, 'not a constant string');
          s += v.v;
        }
        return { k: 'str', v: s };
      }
      case 'parenthesized_expression': {
        const inner = node.namedChild(0);
        return inner ? this.ev(inner) : UNKNOWN(node.text, 'empty');
      }
      case 'tuple':
      case 'list':
      case 'set':
      case 'expression_list':
        return {
          k: 'seq',
          kind: node.type === 'list' ? 'list' : node.type === 'set' ? 'set' : 'tuple',
          items: node.namedChildren.filter((c) => c.type !== 'comment').map((c) => this.ev(c)),
        };
      case 'dictionary':
        return this.evalDict(node);
      case 'identifier':
        return this.lookup(node.text, node);
      case 'attribute':
        return this.evalAttribute(node);
      case 'subscript':
        return this.evalSubscript(node);
      case 'unary_operator': {
        const arg = node.childForFieldName('argument');
        const op = node.childForFieldName('operator')?.text;
        const v = arg ? this.ev(arg) : UNKNOWN(node.text, 'empty');
        if (v.k !== 'num') return UNKNOWN(node.text, 'not a number');
        if (op === '-') return { ...v, v: -v.v };
        if (op === '+') return v;
        if (op === '~' && v.int) return { k: 'num', v: -v.v - 1, int: true };
        return UNKNOWN(node.text, 'unsupported operator');
      }
      case 'not_operator': {
        const arg = node.childForFieldName('argument');
        const v = arg ? truthy(this.ev(arg)) : undefined;
        return v === undefined ? UNKNOWN(node.text, 'unknown condition') : { k: 'bool', v: !v };
      }
      case 'binary_operator':
        return this.evalBinary(node);
      case 'boolean_operator': {
        const l = node.childForFieldName('left');
        const r = node.childForFieldName('right');
        const op = node.childForFieldName('operator')?.text;
        if (!l || !r) return UNKNOWN(node.text, 'incomplete');
        const lv = this.ev(l);
        const lt = truthy(lv);
        if (lt === undefined) return UNKNOWN(node.text, 'unknown condition');
        if (op === 'and') return lt ? this.ev(r) : lv;
        return lt ? lv : this.ev(r);
      }
      case 'comparison_operator':
        return this.evalComparison(node);
      case 'conditional_expression': {
        const [a, cond, b] = node.namedChildren;
        if (!a || !cond || !b) return UNKNOWN(node.text, 'incomplete');
        const t = truthy(this.ev(cond));
        if (t === undefined) return UNKNOWN(node.text, `depends on ${cond.text}`);
        return this.ev(t ? a : b);
      }
      case 'call':
        return this.evalCall(node);
      case 'lambda':
        return { k: 'lambda', text: node.text, node };
      default:
        return UNKNOWN(node.text.slice(0, 80), `a ${node.type.replace(/_/g, ' ')}`);
    }
  }

  private lookup(name: string, at: Node): Val {
    const binding = findBinding(this.file, name, at);
    if (!binding) {
      const q = this.imports.qualify(name);
      return { k: 'ref', name: q.qualified, bound: q.bound };
    }
    return this.fromBinding(name, binding, at);
  }

  private fromBinding(name: string, b: Binding, at: Node): Val {
    const key = b.name.startIndex;
    if (this.active.has(key)) {
      this.cutShort++;
      return UNKNOWN(name, 'defined in terms of itself');
    }
    this.active.add(key);
    try {
      switch (b.kind) {
        case 'assign': {
          if (!b.value) return UNKNOWN(name, 'unpacked from a sequence');
          const v = this.ev(b.value);
          return v.k === 'dict' ? this.grownDict(name, v, b, at) : v;
        }
        case 'param':
          return (
            this.fromCallSitesOnce(name, b) ?? {
              k: 'param',
              name,
              function: b.function.childForFieldName('name')?.text ?? '',
              index: b.index,
              default: b.default ? this.ev(b.default) : null,
            }
          );
        case 'loop':
          return UNKNOWN(name, 'a loop variable');
        case 'with':
          return this.ev(b.value);
        case 'def':
        case 'class':
          return { k: 'ref', name, bound: true };
      }
    } finally {
      this.active.delete(key);
    }
  }

  /** `fromCallSites`, remembered unless the evaluation was cut short (then the answer depends on where it began). */
  private fromCallSitesOnce(name: string, b: Binding & { kind: 'param' }): Val | null {
    const key = `${b.function.id}:${name}`;
    const known = this.callSiteValues.get(key);
    if (known !== undefined) return known;
    const before = this.cutShort;
    const v = this.fromCallSites(name, b);
    if (this.cutShort === before) this.callSiteValues.set(key, v);
    return v;
  }

  /**
   * A parameter's value from the calls of its function in this file, when every call passes the same constant
   * (or leaves the default). Methods called as `obj.f(...)` skip `self`.
   */
  private fromCallSites(name: string, b: Binding & { kind: 'param' }): Val | null {
    const fnName = b.function.childForFieldName('name')?.text;
    if (!fnName) return null;
    const isMethod = b.function.parent?.parent?.type === 'class_definition';
    let agreed: Val | null = null;
    let key: string | null = null;
    let sites = 0;
    for (const id of this.file.identifiers(fnName)) {
      const p = id.parent;
      const callee = p?.type === 'attribute' && p.childForFieldName('attribute')?.id === id.id ? p : id;
      const call = callee.parent;
      if (call?.type !== 'call' || call.childForFieldName('function')?.id !== callee.id) continue;
      if (call.startIndex >= b.function.startIndex && call.endIndex <= b.function.endIndex) continue; // recursion
      if (++sites > 8) return null;
      const args = call.childForFieldName('arguments');
      if (args?.type !== 'argument_list') return null;
      const positional = args.namedChildren.filter(
        (a) => a.type !== 'keyword_argument' && a.type !== 'comment',
      );
      if (args.namedChildren.some((a) => a.type === 'list_splat' || a.type === 'dictionary_splat'))
        return null;
      const kw = args.namedChildren.find(
        (a) => a.type === 'keyword_argument' && a.childForFieldName('name')?.text === name,
      );
      const index = b.index - (isMethod && callee.type === 'attribute' ? 1 : 0);
      const node = kw?.childForFieldName('value') ?? positional[index] ?? b.default;
      if (!node) return null;
      const v = this.ev(node);
      if (v.k === 'unknown' || v.k === 'param') return null;
      const k = JSON.stringify(toJson(v)) + (v.k === 'call' ? v.node.text : '');
      if (key !== null && k !== key) return null;
      key = k;
      agreed = v;
    }
    return agreed;
  }

  /** A dict bound by `name = {...}` plus the keys set with `name[k] = v` or `name.update(...)` before `at`. */
  private grownDict(name: string, dict: Val & { k: 'dict' }, b: Binding & { kind: 'assign' }, at: Node): Val {
    const scope = b.scope;
    const entries = [...dict.entries];
    const from = b.statement.endIndex;
    const to = at.startIndex;
    if (to <= from) return dict;
    for (const id of this.file.identifiers(name, from, to)) {
      if ((enclosingFunction(id)?.id ?? null) !== (scope?.id ?? null)) continue;
      const p = id.parent;
      // Keys set under a condition known to be false are dropped; known-true conditions are not shown.
      const parts = conditionParts(id, scope);
      const known = parts.map((c) => {
        const t = truthy(this.ev(c.node));
        return t === undefined ? undefined : t !== c.negated;
      });
      if (known.some((k) => k === false)) continue;
      const conds = parts
        .filter((_, i) => known[i] === undefined)
        .map((c) => (c.negated ? `not (${c.node.text})` : c.node.text));
      const extra = conds.length ? { conditions: conds } : {};
      const line = id.startPosition.row + 1;
      if (p?.type === 'subscript' && p.childForFieldName('value')?.id === id.id) {
        const assign = p.parent;
        const keyNode = p.childForFieldName('subscript');
        const valueNode = assign?.childForFieldName('right');
        if (
          assign?.type === 'assignment' &&
          assign.childForFieldName('left')?.id === p.id &&
          keyNode &&
          valueNode
        ) {
          setEntry(entries, { key: this.ev(keyNode), value: this.ev(valueNode), valueNode, line, ...extra });
        }
      } else if (p?.type === 'attribute' && p.childForFieldName('attribute')?.text === 'update') {
        const call = p.parent;
        if (call?.type === 'call') {
          const argList = call.childForFieldName('arguments');
          const a = argList?.type === 'argument_list' ? this.callArguments(argList) : undefined;
          if (a) {
            for (const x of a.args)
              if (x.k === 'dict') for (const e of x.entries) setEntry(entries, { ...e, line, ...extra });
            for (const e of a.keywords) setEntry(entries, { ...e, line, ...extra });
          }
        }
      } else if (p?.type === 'assignment' && p.childForFieldName('left')?.id === id.id) {
        // Rebound: the later binding wins (findBinding would have returned it); stop growing this one.
        break;
      }
    }
    return { k: 'dict', entries };
  }

  private evalDict(node: Node): Val {
    const entries: DictEntry[] = [];
    for (const c of node.namedChildren) {
      if (c.type === 'pair') {
        const k = c.childForFieldName('key');
        const v = c.childForFieldName('value');
        if (k && v)
          setEntry(entries, {
            key: this.ev(k),
            value: this.ev(v),
            valueNode: v,
            line: v.startPosition.row + 1,
          });
      } else if (c.type === 'dictionary_splat') {
        const inner = c.namedChild(0);
        const v = inner ? this.ev(inner) : undefined;
        if (v?.k === 'dict') for (const e of v.entries) setEntry(entries, e);
        else return UNKNOWN(node.text.slice(0, 80), `merges ${inner?.text ?? '?'}`);
      }
    }
    return { k: 'dict', entries };
  }

  private evalAttribute(node: Node): Val {
    const obj = node.childForFieldName('object');
    const attr = node.childForFieldName('attribute')?.text;
    if (!obj || !attr) return UNKNOWN(node.text, 'incomplete');
    const base = this.ev(obj);
    if (base.k === 'ref') return { k: 'ref', name: `${base.name}.${attr}`, bound: base.bound };
    if (base.k === 'dict') {
      const e = base.entries.find((x) => x.key.k === 'str' && x.key.v === attr);
      if (e) return e.value;
    }
    if (base.k === 'call') {
      // An object built by keyword arguments (a config or a dataclass instance): its field, when passed.
      const v = base.kwargs[attr];
      if (v) return v;
    }
    return UNKNOWN(node.text, `attribute of ${obj.text}`);
  }

  private evalSubscript(node: Node): Val {
    const value = node.childForFieldName('value');
    const sub = node.childForFieldName('subscript');
    if (!value || !sub) return UNKNOWN(node.text, 'incomplete');
    const base = this.ev(value);
    const key = this.ev(sub);
    if (base.k === 'dict') {
      const e = base.entries.find((x) => sameKey(x.key, key));
      if (e) return e.value;
      return UNKNOWN(node.text, 'key not found');
    }
    if (base.k === 'seq' && key.k === 'num' && key.int) {
      const i = key.v < 0 ? base.items.length + key.v : key.v;
      return base.items[i] ?? UNKNOWN(node.text, 'index out of range');
    }
    if (base.k === 'ref') return UNKNOWN(node.text, `an item of ${value.text}`);
    return UNKNOWN(node.text, 'not a constant container');
  }

  private evalBinary(node: Node): Val {
    const l = node.childForFieldName('left');
    const r = node.childForFieldName('right');
    const op = node.childForFieldName('operator')?.text;
    if (!l || !r || !op) return UNKNOWN(node.text, 'incomplete');
    const a = this.ev(l);
    const b = this.ev(r);
    if (a.k === 'str' && b.k === 'str' && op === '+') return { k: 'str', v: a.v + b.v };
    if (a.k === 'seq' && b.k === 'seq' && op === '+' && a.kind === b.kind)
      return { k: 'seq', kind: a.kind, items: [...a.items, ...b.items] };
    if (a.k === 'dict' && b.k === 'dict' && op === '|') {
      const entries = [...a.entries];
      for (const e of b.entries) setEntry(entries, e);
      return { k: 'dict', entries };
    }
    const x = asNumber(a);
    const y = asNumber(b);
    if (!x || !y) return UNKNOWN(node.text.slice(0, 80), 'not a constant number');
    return arithmetic(op, x, y, node.text);
  }

  private evalComparison(node: Node): Val {
    const operands = node.namedChildren;
    const ops = node.children.filter((c) => !c.isNamed).map((c) => c.text);
    if (operands.length !== 2 || ops.length < 1) return UNKNOWN(node.text, 'chained comparison');
    const a = this.ev(operands[0]!);
    const b = this.ev(operands[1]!);
    const op = ops.join(' ');
    if (op === 'is' || op === 'is not') {
      if (b.k === 'none' && a.k !== 'unknown' && a.k !== 'param')
        return { k: 'bool', v: (a.k === 'none') === (op === 'is') };
      return UNKNOWN(node.text, 'identity of an unknown value');
    }
    const x = asNumber(a);
    const y = asNumber(b);
    if (x && y) {
      const r =
        op === '<'
          ? x.v < y.v
          : op === '<='
            ? x.v <= y.v
            : op === '>'
              ? x.v > y.v
              : op === '>='
                ? x.v >= y.v
                : op === '=='
                  ? x.v === y.v
                  : op === '!='
                    ? x.v !== y.v
                    : undefined;
      if (r !== undefined) return { k: 'bool', v: r };
    }
    if (a.k === 'str' && b.k === 'str' && (op === '==' || op === '!='))
      return { k: 'bool', v: (a.v === b.v) === (op === '==') };
    return UNKNOWN(node.text, 'comparison of unknown values');
  }

  /** A call: builtins that fold (int, min, max, ...) are folded; everything else is kept as a call value. */
  private evalCall(node: Node, keepAsCall = false): Val {
    const fn = node.childForFieldName('function');
    const argList = node.childForFieldName('arguments');
    if (!fn) return UNKNOWN(node.text, 'incomplete');
    const calleeVal = fn.type === 'identifier' || fn.type === 'attribute' ? this.calleeName(fn) : undefined;
    const callee = calleeVal ?? fn.text;
    const { args, keywords, splats } =
      argList?.type === 'argument_list'
        ? this.callArguments(argList)
        : { args: [], keywords: [] as DictEntry[], splats: [] };
    const kwargs: Record<string, Val> = {};
    for (const e of keywords) if (e.key.k === 'str') kwargs[e.key.v] = e.value;
    if (!keepAsCall) {
      if (callee === 'dict') {
        const d = dictCall(args, keywords, splats);
        if (d) return d;
        if (splats.length) return UNKNOWN(node.text.slice(0, 80), 'merges a mapping that is not known');
      }
      const folded = foldBuiltin(callee, args, kwargs);
      if (folded) return folded;
    }
    return { k: 'call', callee, args, kwargs, splats, node };
  }

  /**
   * The arguments of a call: positional values, keyword arguments as dict entries that keep the node where each
   * value is written (`dict(k=v)`, `cfg.update(k=v)`, keys merged from `**mapping`), and splats not known.
   */
  private callArguments(argList: Node): { args: Val[]; keywords: DictEntry[]; splats: Val[] } {
    const args: Val[] = [];
    const keywords: DictEntry[] = [];
    const splats: Val[] = [];
    for (const a of argList.namedChildren) {
      if (a.type === 'keyword_argument') {
        const n = a.childForFieldName('name');
        const v = a.childForFieldName('value');
        if (n && v)
          setEntry(keywords, {
            key: { k: 'str', v: n.text },
            value: this.ev(v),
            valueNode: v,
            line: v.startPosition.row + 1,
          });
      } else if (a.type === 'dictionary_splat') {
        const inner = a.namedChild(0);
        const v = inner ? this.ev(inner) : UNKNOWN('**', 'empty');
        if (v.k === 'dict') {
          for (const e of v.entries) if (e.key.k === 'str') setEntry(keywords, e);
        } else splats.push(v);
      } else if (a.type === 'list_splat') {
        const inner = a.namedChild(0);
        const v = inner ? this.ev(inner) : UNKNOWN('*', 'empty');
        if (v.k === 'seq') args.push(...v.items);
        else splats.push(v);
      } else if (a.type !== 'comment') args.push(this.ev(a));
    }
    return { args, keywords, splats };
  }

  /** The qualified name a callee expression refers to, through imports and local aliases. */
  calleeName(fn: Node): string {
    if (fn.type === 'identifier') {
      const b = findBinding(this.file, fn.text, fn);
      if (
        b?.kind === 'assign' &&
        b.value &&
        (b.value.type === 'identifier' || b.value.type === 'attribute')
      ) {
        // `fs = fully_shard` style aliases.
        const v = this.ev(b.value);
        if (v.k === 'ref') return v.name;
      }
      return this.imports.qualify(fn.text).qualified;
    }
    return this.imports.qualify(dottedText(fn)).qualified;
  }
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
 * `dict(k=v, ...)` and `dict(mapping, k=v, ...)` as a dict whose entries keep where each value is written; null
 * when the call is not a constant mapping.
 */
function dictCall(args: Val[], keywords: DictEntry[], splats: Val[]): Val | null {
  if (splats.length || args.length > 1) return null;
  const first = args[0];
  if (first && first.k !== 'dict') return null;
  const entries: DictEntry[] = first ? [...first.entries] : [];
  for (const e of keywords) setEntry(entries, e);
  return { k: 'dict', entries };
}

function setEntry(entries: DictEntry[], e: DictEntry): void {
  const i = entries.findIndex((x) => sameKey(x.key, e.key));
  if (i >= 0) entries[i] = e;
  else entries.push(e);
}

export function sameKey(a: Val, b: Val): boolean {
  if (a.k === 'str' && b.k === 'str') return a.v === b.v;
  if (a.k === 'num' && b.k === 'num') return a.v === b.v;
  if (a.k === 'bool' && b.k === 'bool') return a.v === b.v;
  if (a.k === 'ref' && b.k === 'ref') return a.name === b.name;
  return false;
}

/** Python truthiness where known. */
export function truthy(v: Val): boolean | undefined {
  switch (v.k) {
    case 'bool':
      return v.v;
    case 'num':
      return v.v !== 0;
    case 'str':
      return v.v.length > 0;
    case 'none':
      return false;
    case 'seq':
      return v.items.length > 0;
    case 'dict':
      return v.entries.length > 0;
    default:
      return undefined;
  }
}

export function asNumber(v: Val): { v: number; int: boolean } | undefined {
  if (v.k === 'num') return v;
  if (v.k === 'bool') return { v: v.v ? 1 : 0, int: true };
  return undefined;
}

const MAX_SAFE = Number.MAX_SAFE_INTEGER;

function num(v: number, int: boolean, text: string): Val {
  if (!Number.isFinite(v)) return UNKNOWN(text.slice(0, 80), 'not a finite number');
  if (int && Math.abs(v) > MAX_SAFE) return UNKNOWN(text.slice(0, 80), 'integer too large');
  return { k: 'num', v, int };
}

export function arithmetic(
  op: string,
  x: { v: number; int: boolean },
  y: { v: number; int: boolean },
  text: string,
): Val {
  const int = x.int && y.int;
  switch (op) {
    case '+':
      return num(x.v + y.v, int, text);
    case '-':
      return num(x.v - y.v, int, text);
    case '*':
      return num(x.v * y.v, int, text);
    case '/':
      return y.v === 0 ? UNKNOWN(text, 'division by zero') : num(x.v / y.v, false, text);
    case '//':
      return y.v === 0 ? UNKNOWN(text, 'division by zero') : num(Math.floor(x.v / y.v), int, text);
    case '%':
      return y.v === 0
        ? UNKNOWN(text, 'division by zero')
        : num(x.v - y.v * Math.floor(x.v / y.v), int, text);
    case '**':
      if (int && y.v < 0) return num(Math.pow(x.v, y.v), false, text);
      if (Math.abs(y.v) > 4096) return UNKNOWN(text.slice(0, 80), 'exponent too large');
      return num(Math.pow(x.v, y.v), int, text);
    case '<<':
      return int && y.v >= 0 && y.v < 64 ? num(x.v * Math.pow(2, y.v), true, text) : UNKNOWN(text, 'shift');
    case '>>':
      return int && y.v >= 0 ? num(Math.floor(x.v / Math.pow(2, y.v)), true, text) : UNKNOWN(text, 'shift');
    default:
      return UNKNOWN(text.slice(0, 80), `operator ${op}`);
  }
}

export function foldBuiltin(callee: string, args: Val[], kwargs: Record<string, Val>): Val | undefined {
  const nums = args.map(asNumber);
  const allNums = nums.every((n) => n !== undefined) && nums.length > 0;
  const text = callee;
  switch (callee) {
    case 'int': {
      const a = args[0];
      if (a?.k === 'num') return num(Math.trunc(a.v), true, text);
      if (a?.k === 'str' && /^\s*[-+]?\d+\s*$/.test(a.v)) return num(parseInt(a.v, 10), true, text);
      return undefined;
    }
    case 'float': {
      const a = args[0];
      if (a?.k === 'num') return { k: 'num', v: a.v, int: false };
      if (a?.k === 'str' && a.v.trim() !== '' && !Number.isNaN(Number(a.v)))
        return num(Number(a.v), false, text);
      return undefined;
    }
    case 'str': {
      const a = args[0];
      if (a?.k === 'num') return { k: 'str', v: String(a.v) };
      if (a?.k === 'str') return a;
      return undefined;
    }
    case 'bool': {
      const t = args[0] ? truthy(args[0]) : false;
      return t === undefined ? undefined : { k: 'bool', v: t };
    }
    case 'abs':
      return allNums && nums.length === 1 ? num(Math.abs(nums[0]!.v), nums[0]!.int, text) : undefined;
    case 'min':
    case 'max': {
      const list = args.length === 1 && args[0]?.k === 'seq' ? args[0].items.map(asNumber) : nums;
      if (!list.length || !list.every((n) => n !== undefined)) return undefined;
      const vs = list.map((n) => n!.v);
      return num(
        callee === 'min' ? Math.min(...vs) : Math.max(...vs),
        list.every((n) => n!.int),
        text,
      );
    }
    case 'round':
      return allNums && nums.length === 1 ? num(Math.round(nums[0]!.v), true, text) : undefined;
    case 'len': {
      const a = args[0];
      if (a?.k === 'seq') return { k: 'num', v: a.items.length, int: true };
      if (a?.k === 'str') return { k: 'num', v: a.v.length, int: true };
      if (a?.k === 'dict') return { k: 'num', v: a.entries.length, int: true };
      return undefined;
    }
    case 'math.ceil':
    case 'math.floor':
      return allNums && nums.length === 1
        ? num(callee === 'math.ceil' ? Math.ceil(nums[0]!.v) : Math.floor(nums[0]!.v), true, text)
        : undefined;
    case 'math.sqrt':
      return allNums && nums.length === 1 && nums[0]!.v >= 0
        ? num(Math.sqrt(nums[0]!.v), false, text)
        : undefined;
    case 'dict':
      if (args.length === 0)
        return {
          k: 'dict',
          entries: Object.entries(kwargs).map(([k, v]) => ({ key: { k: 'str', v: k } as Val, value: v })),
        };
      return undefined;
    case 'list':
    case 'tuple':
    case 'set':
      if (args.length === 0) return { k: 'seq', kind: callee, items: [] };
      if (args[0]?.k === 'seq') return { k: 'seq', kind: callee, items: args[0].items };
      return undefined;
    default:
      return undefined;
  }
}

export function parseInteger(text: string): Val {
  const t = text.replace(/_/g, '').toLowerCase();
  let v: number;
  if (t.startsWith('0x')) v = parseInt(t.slice(2), 16);
  else if (t.startsWith('0o')) v = parseInt(t.slice(2), 8);
  else if (t.startsWith('0b')) v = parseInt(t.slice(2), 2);
  else if (/^\d+$/.test(t)) v = Number(t);
  else return UNKNOWN(text, 'not an integer literal');
  return num(v, true, text);
}

export function parseFloatLit(text: string): Val {
  const t = text.replace(/_/g, '');
  if (/[jJ]$/.test(t)) return UNKNOWN(text, 'a complex number');
  const v = Number(t);
  return Number.isNaN(v) ? UNKNOWN(text, 'not a number') : num(v, false, text);
}

const ESCAPES: Record<string, string> = {
  n: '\n',
  t: '\t',
  r: '\r',
  '\\': '\\',
  "'": "'",
  '"': '"',
  '0': '\0',
};

export function parseString(node: Node): Val {
  let out = '';
  let raw = false;
  for (const c of node.children) {
    switch (c.type) {
      case 'string_start':
        raw = /r/i.test(c.text);
        if (/f/i.test(c.text) && node.namedChildren.some((x) => x.type === 'interpolation'))
          return UNKNOWN(node.text, 'an f-string');
        break;
      case 'string_content':
        out += c.text;
        break;
      case 'escape_sequence':
        out += raw ? c.text : (ESCAPES[c.text.slice(1)] ?? c.text);
        break;
      case 'interpolation':
        return UNKNOWN(node.text, 'an f-string');
      default:
        break;
    }
  }
  return { k: 'str', v: out };
}

/** A plain JSON view of a value: what the command line prints as an option's `value`. */
export function toJson(v: Val): unknown {
  switch (v.k) {
    case 'num':
    case 'str':
    case 'bool':
      return v.v;
    case 'none':
      return null;
    case 'seq':
      return v.items.map(toJson);
    case 'dict': {
      const o: Record<string, unknown> = {};
      for (const e of v.entries)
        o[e.key.k === 'str' ? e.key.v : JSON.stringify(toJson(e.key))] = toJson(e.value);
      return o;
    }
    case 'ref':
      return dtypeOf(v) ?? v.name;
    case 'call':
      return {
        call: v.callee,
        args: v.args.map(toJson),
        kwargs: Object.fromEntries(Object.entries(v.kwargs).map(([k, x]) => [k, toJson(x)])),
      };
    case 'lambda':
      return { lambda: v.text };
    case 'param':
      return null;
    case 'unknown':
      return null;
  }
}

/** `torch.bfloat16` → `bfloat16`; also the strings configurations write (`"bf16"`, `"float16"`). */
export function dtypeOf(v: Val): DType | undefined {
  if (v.k === 'ref' && v.name.startsWith('torch.')) return torchDtype(v.name.slice(6));
  if (v.k === 'str') return dtypeFromText(v.v);
  return undefined;
}
