/**
 * One evaluator of Python expressions over the value model, shared by the scan's constant evaluation and the
 * `nn.Module` interpreter: literals, containers with their splats, operators, boolean logic, comparisons and
 * conditional expressions are evaluated here once. What differs between the two engines is how a name, an
 * attribute, an item and a call are found (a static binding or a running frame), which subclasses supply, and
 * what an undecidable condition becomes. Evaluation is bounded: a subclass's `guard` cuts it short with an
 * unknown value past its budget.
 */
import type { Node } from '../parsing/python';
import { plainItems } from './builtins';
import { parseFloatLit, parseInteger, parseString, pythonStr } from './literals';
import { binary, compareChain, truthy, unary } from './operators';
import {
  bool,
  dictOf,
  LIMITS,
  seqOf,
  setEntry,
  strOf,
  tooLong,
  UNKNOWN,
  type DictEntry,
  type Value,
} from './values';

export abstract class Expressions<F> {
  /** How deep the current evaluation is nested (subclasses bound it in `guard`). */
  protected depth = 0;

  /** The value of a name at `node`. */
  protected abstract name(node: Node, frame: F): Value;
  /** `obj.attr`. */
  protected abstract attribute(obj: Value, attr: string, node: Node, frame: F): Value;
  /**
   * `xs[start:stop:step]` of a list, tuple or string, as Python's `slice.indices` clamps it: negative bounds count
   * from the end, omitted ones take the ends. Unknown for other containers, bounds not known, or a step of 0.
   */
  private sliced(container: Value, slice: Node, frame: F, text: string): Value {
    const parts: (Node | null)[] = [null];
    for (const c of slice.children) {
      if (c.type === ':') parts.push(null);
      else if (c.isNamed && c.type !== 'comment') parts[parts.length - 1] = c;
    }
    const bound = (n: Node | null | undefined): number | null | undefined => {
      if (!n) return null;
      const v = this.evaluate(n, frame);
      if (v.k === 'none') return null;
      return v.k === 'num' && v.int ? v.v : v.k === 'bool' ? Number(v.v) : undefined;
    };
    const [start, stop, step] = [bound(parts[0]), bound(parts[1]), bound(parts[2])];
    const items: unknown[] | null =
      container.k === 'seq' ? container.items : container.k === 'str' ? [...container.v] : null;
    if (!items || start === undefined || stop === undefined || step === undefined || step === 0)
      return UNKNOWN(text, 'a slice not known statically');
    const n = items.length;
    const by = step ?? 1;
    const clamp = (i: number, lo: number, hi: number) => Math.min(Math.max(i, lo), hi);
    const at = (i: number | null, dflt: number) =>
      i === null ? dflt : by > 0 ? clamp(i < 0 ? i + n : i, 0, n) : clamp(i < 0 ? i + n : i, -1, n - 1);
    const from = at(start, by > 0 ? 0 : n - 1);
    const to = at(stop, by > 0 ? n : -1);
    const picked: unknown[] = [];
    for (let i = from; by > 0 ? i < to : i > to; i += by) picked.push(items[i]);
    if (container.k === 'str') return { k: 'str', v: (picked as string[]).join('') };
    return { k: 'seq', kind: (container as Extract<Value, { k: 'seq' }>).kind, items: picked as Value[] };
  }

  /** `container[key]` (`key` is unknown for a slice). */
  protected abstract item(container: Value, key: Value, node: Node, frame: F): Value;
  /** A call node. */
  protected abstract call(node: Node, frame: F): Value;
  /** Called before each node: an unknown value to cut the evaluation short (a step or depth budget), else undefined. */
  protected abstract guard(node: Node): Value | undefined;

  /** A comprehension; unknown unless the engine runs them. */
  protected comprehension(node: Node, _frame: F): Value {
    return UNKNOWN(node.text, 'a comprehension');
  }

  /** `a if cond else b` with a condition not known: the branch to take, or undefined for an unknown value. */
  protected undecided(_cond: Node, _frame: F): boolean | undefined {
    return undefined;
  }

  /** An operator on kinds the value model does not define operators for (the interpreter's tensors). */
  protected extendedOperator(
    _op: string,
    _a: Value,
    _b: Value | undefined,
    _text: string,
  ): Value | undefined {
    return undefined;
  }

  /** The items of an iterable value, or null when not known (the interpreter adds module containers). */
  iterate(v: Value): Value[] | null {
    return plainItems(v);
  }

  /** Evaluates `node` in `frame`. */
  evaluate(node: Node, frame: F): Value {
    const cut = this.guard(node);
    if (cut) return cut;
    this.depth++;
    try {
      return this.evaluateNode(node, frame);
    } finally {
      this.depth--;
    }
  }

  private evaluateNode(node: Node, frame: F): Value {
    switch (node.type) {
      case 'integer':
        return parseInteger(node.text);
      case 'float':
        return parseFloatLit(node.text);
      case 'true':
        return bool(true);
      case 'false':
        return bool(false);
      case 'none':
        return { k: 'none' };
      case 'string':
        return parseString(node, (e) => pythonStr(this.evaluate(e, frame)));
      case 'concatenated_string': {
        let s = '';
        for (const c of node.namedChildren) {
          const v = this.evaluate(c, frame);
          if (v.k !== 'str') return UNKNOWN(node.text, 'not a constant string');
          s += v.v;
        }
        return strOf(s, node.text);
      }
      case 'parenthesized_expression': {
        const inner = node.namedChild(0);
        return inner ? this.evaluate(inner, frame) : UNKNOWN(node.text, 'empty');
      }
      case 'identifier':
        return this.name(node, frame);
      case 'tuple':
      case 'list':
      case 'set':
      case 'expression_list':
        return this.sequence(node, frame);
      case 'dictionary':
        return this.dictionary(node, frame);
      case 'list_comprehension':
      case 'generator_expression':
      case 'set_comprehension':
      case 'dictionary_comprehension':
        return this.comprehension(node, frame);
      case 'attribute': {
        const obj = node.childForFieldName('object');
        const attr = node.childForFieldName('attribute')?.text;
        if (!obj || !attr) return UNKNOWN(node.text, 'incomplete');
        return this.attribute(this.evaluate(obj, frame), attr, node, frame);
      }
      case 'subscript': {
        const value = node.childForFieldName('value');
        const sub = node.childForFieldName('subscript');
        if (!value || !sub) return UNKNOWN(node.text, 'incomplete');
        if (sub.type === 'slice') return this.sliced(this.evaluate(value, frame), sub, frame, node.text);
        return this.item(this.evaluate(value, frame), this.evaluate(sub, frame), node, frame);
      }
      case 'unary_operator': {
        const arg = node.childForFieldName('argument');
        const op = node.childForFieldName('operator')?.text ?? '';
        const v = arg ? this.evaluate(arg, frame) : UNKNOWN(node.text, 'empty');
        return this.extendedOperator(op, v, undefined, node.text) ?? unary(op, v, node.text);
      }
      case 'not_operator': {
        const arg = node.childForFieldName('argument');
        const t = arg ? truthy(this.evaluate(arg, frame)) : undefined;
        return t === undefined ? UNKNOWN(node.text, 'unknown condition') : bool(!t);
      }
      case 'binary_operator': {
        const l = node.childForFieldName('left');
        const r = node.childForFieldName('right');
        const op = node.childForFieldName('operator')?.text;
        if (!l || !r || !op) return UNKNOWN(node.text, 'incomplete');
        const a = this.evaluate(l, frame);
        const b = this.evaluate(r, frame);
        return this.extendedOperator(op, a, b, node.text) ?? binary(op, a, b, node.text);
      }
      case 'boolean_operator': {
        const l = node.childForFieldName('left');
        const r = node.childForFieldName('right');
        const op = node.childForFieldName('operator')?.text;
        if (!l || !r) return UNKNOWN(node.text, 'incomplete');
        const lv = this.evaluate(l, frame);
        const t = truthy(lv);
        if (t === undefined) return UNKNOWN(node.text, 'unknown condition');
        if (op === 'and') return t ? this.evaluate(r, frame) : lv;
        return t ? lv : this.evaluate(r, frame);
      }
      case 'comparison_operator': {
        const operands = node.namedChildren
          .filter((c) => c.type !== 'comment')
          .map((c) => this.evaluate(c, frame));
        // `not in` and `is not` are two tokens between the same pair of operands.
        const ops: string[] = [];
        let gap = -1;
        for (const c of node.children) {
          if (c.type === 'comment') continue;
          if (c.isNamed) gap++;
          else if (ops.length === gap + 1) ops[gap] += ` ${c.text}`;
          else ops.push(c.text);
        }
        if (ops.length !== operands.length - 1) return UNKNOWN(node.text, 'a comparison');
        const r = compareChain(ops, operands);
        return r === undefined ? UNKNOWN(node.text, 'comparison of unknown values') : bool(r);
      }
      case 'conditional_expression': {
        const [a, cond, b] = node.namedChildren;
        if (!a || !cond || !b) return UNKNOWN(node.text, 'incomplete');
        const t = truthy(this.evaluate(cond, frame)) ?? this.undecided(cond, frame);
        if (t === undefined) return UNKNOWN(node.text, `depends on ${cond.text}`);
        return this.evaluate(t ? a : b, frame);
      }
      case 'call':
        return this.call(node, frame);
      case 'lambda':
        return { k: 'lambda', text: node.text, node };
      default:
        return UNKNOWN(node.text, `a ${node.type.replace(/_/g, ' ')}`);
    }
  }

  /** A tuple, list or set display; `*x` spreads a known iterable (an unknown one makes the whole unknown). */
  private sequence(node: Node, frame: F): Value {
    const kind = node.type === 'list' ? 'list' : node.type === 'set' ? 'set' : 'tuple';
    const items: Value[] = [];
    for (const c of node.namedChildren) {
      if (c.type === 'comment') continue;
      if (c.type === 'list_splat') {
        const inner = c.namedChild(0);
        const v = inner ? this.evaluate(inner, frame) : UNKNOWN(c.text, 'empty');
        const spread = this.iterate(v);
        if (!spread) return UNKNOWN(node.text, `spreads ${inner?.text ?? '?'}, not known`);
        if (items.length + spread.length > LIMITS.items) return tooLong(kind, node.text);
        for (const x of spread) items.push(x);
      } else items.push(this.evaluate(c, frame));
    }
    return seqOf(kind, items, node.text);
  }

  /** A dict display; entries keep where each value is written. `**x` merges a known dict. */
  private dictionary(node: Node, frame: F): Value {
    const entries: DictEntry[] = [];
    for (const c of node.namedChildren) {
      if (c.type === 'pair') {
        const k = c.childForFieldName('key');
        const v = c.childForFieldName('value');
        if (k && v)
          setEntry(entries, {
            key: this.evaluate(k, frame),
            value: this.evaluate(v, frame),
            valueNode: v,
            line: v.startPosition.row + 1,
          });
      } else if (c.type === 'dictionary_splat') {
        const inner = c.namedChild(0);
        const v = inner ? this.evaluate(inner, frame) : undefined;
        if (v?.k === 'dict') for (const e of v.entries) setEntry(entries, e);
        else return UNKNOWN(node.text, `merges ${inner?.text ?? '?'}`);
      }
    }
    return dictOf(entries, node.text);
  }

  /**
   * The arguments of a call: positional values (known `*x` spread), keyword arguments as dict entries keeping
   * where each value is written, keys merged from a known `**mapping`, and the splats that are not known.
   */
  protected callArguments(
    argList: Node | null,
    frame: F,
  ): { args: Value[]; keywords: DictEntry[]; splats: Value[] } {
    const args: Value[] = [];
    const keywords: DictEntry[] = [];
    const splats: Value[] = [];
    if (argList?.type === 'generator_expression')
      return { args: [this.evaluate(argList, frame)], keywords, splats };
    for (const a of argList?.namedChildren ?? []) {
      if (a.type === 'keyword_argument') {
        const n = a.childForFieldName('name');
        const v = a.childForFieldName('value');
        if (n && v)
          setEntry(keywords, {
            key: { k: 'str', v: n.text },
            value: this.evaluate(v, frame),
            valueNode: v,
            line: v.startPosition.row + 1,
          });
      } else if (a.type === 'dictionary_splat') {
        const inner = a.namedChild(0);
        const v = inner ? this.evaluate(inner, frame) : UNKNOWN('**', 'empty');
        const entries = this.mapping(v);
        if (entries) {
          for (const e of entries) if (e.key.k === 'str') setEntry(keywords, e);
        } else splats.push(v);
      } else if (a.type === 'list_splat') {
        const inner = a.namedChild(0);
        const v = inner ? this.evaluate(inner, frame) : UNKNOWN('*', 'empty');
        const spread = this.iterate(v);
        if (spread && args.length + spread.length <= LIMITS.items) for (const x of spread) args.push(x);
        else splats.push(spread ? UNKNOWN(inner?.text ?? '*', 'too many arguments') : v);
      } else if (a.type !== 'comment') args.push(this.evaluate(a, frame));
    }
    return { args, keywords, splats };
  }

  /** The keys and values `**v` passes (a dict; the interpreter adds objects' fields). */
  protected mapping(v: Value): DictEntry[] | null {
    return v.k === 'dict' ? v.entries : null;
  }
}

/** Keyword entries as a record of values by name. */
export function kwargsOf(keywords: DictEntry[]): Record<string, Value> {
  const out: Record<string, Value> = {};
  for (const e of keywords) if (e.key.k === 'str') out[e.key.v] = e.value;
  return out;
}
