/**
 * Python's operators over the value model: truthiness, arithmetic, sequence and string operators, comparisons
 * (chained ones too), equality, identity and membership, as Python 3 defines them. An operation whose outcome
 * depends on what is not known gives `undefined` (truthiness) or an unknown value; one Python would raise on
 * (1 / 0, [1] + (2,)) gives an unknown value with the reason.
 */
import { torchDtype } from '../vocabulary/dtypes';
import {
  dictOf,
  isObjectKind,
  LIMITS,
  num,
  seqOf,
  setEntry,
  strOf,
  tooLong,
  UNKNOWN,
  type Value,
} from './values';

/** Python truthiness where known. */
export function truthy(v: Value): boolean | undefined {
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
    case 'lambda':
    case 'cls':
    case 'fn':
    case 'pymod':
      return true;
    case 'mod':
      // Containers define __len__ (ModuleList, ModuleDict, Sequential); other modules are always true.
      return /^(ModuleList|ModuleDict|Sequential|ParameterList|ParameterDict)$/.test(v.className)
        ? v.children.size + v.params.size > 0
        : true;
    default:
      return undefined;
  }
}

/** A number (a bool counts as 0 or 1, as in Python), or undefined. */
export function asNumber(v: Value): { v: number; int: boolean } | undefined {
  if (v.k === 'num') return v;
  if (v.k === 'bool') return { v: v.v ? 1 : 0, int: true };
  return undefined;
}

/** Arithmetic on two numbers, Python's way: `/` gives a float, `//` and `%` floor, `**` of a negative int power a float. */
export function arithmetic(
  op: string,
  x: { v: number; int: boolean },
  y: { v: number; int: boolean },
  text: string,
): Value {
  const isInt = x.int && y.int;
  switch (op) {
    case '+':
      return num(x.v + y.v, isInt, text);
    case '-':
      return num(x.v - y.v, isInt, text);
    case '*':
      return num(x.v * y.v, isInt, text);
    case '/':
      return y.v === 0 ? UNKNOWN(text, 'division by zero') : num(x.v / y.v, false, text);
    case '//':
      return y.v === 0 ? UNKNOWN(text, 'division by zero') : num(Math.floor(x.v / y.v), isInt, text);
    case '%':
      return y.v === 0
        ? UNKNOWN(text, 'division by zero')
        : num(x.v - y.v * Math.floor(x.v / y.v), isInt, text);
    case '**':
      if (isInt && y.v < 0) return num(Math.pow(x.v, y.v), false, text);
      if (Math.abs(y.v) > 4096) return UNKNOWN(text, 'exponent too large');
      return num(Math.pow(x.v, y.v), isInt, text);
    case '<<':
      return isInt && y.v >= 0 && y.v < 64 ? num(x.v * Math.pow(2, y.v), true, text) : UNKNOWN(text, 'shift');
    case '>>':
      return isInt && y.v >= 0 ? num(Math.floor(x.v / Math.pow(2, y.v)), true, text) : UNKNOWN(text, 'shift');
    case '&':
    case '|':
    case '^': {
      if (!isInt) return UNKNOWN(text, `${op} of a float`);
      // Exact on the 53-bit integers the model keeps, through BigInt.
      const a = BigInt(x.v);
      const b = BigInt(y.v);
      return num(Number(op === '&' ? a & b : op === '|' ? a | b : a ^ b), true, text);
    }
    default:
      return UNKNOWN(text, `operator ${op}`);
  }
}

/** `a op b` for the operators of a `binary_operator` node. */
export function binary(op: string, a: Value, b: Value, text: string): Value {
  if (op === '+') {
    if (a.k === 'str' && b.k === 'str') return strOf(a.v + b.v, text);
    if (a.k === 'seq' && b.k === 'seq') {
      if (a.kind !== b.kind || a.kind === 'set')
        return UNKNOWN(text, `${a.kind} + ${b.kind} raises TypeError`);
      if (a.items.length + b.items.length > LIMITS.items) return tooLong(a.kind, text);
      return seqOf(a.kind, [...a.items, ...b.items], text);
    }
  }
  if (op === '*') {
    const [s, n] = a.k === 'seq' || a.k === 'str' ? [a, b] : [b, a];
    if ((s.k === 'seq' || s.k === 'str') && (n.k === 'num' || n.k === 'bool') && asNumber(n)!.int) {
      const times = Math.max(0, asNumber(n)!.v);
      if (s.k === 'str')
        return s.v.length * times > LIMITS.chars
          ? UNKNOWN(text, 'a string too long')
          : strOf(s.v.repeat(times), text);
      if (s.kind === 'set') return UNKNOWN(text, 'set * int raises TypeError');
      if (s.items.length * times > LIMITS.items) return tooLong(s.kind, text);
      const items: Value[] = [];
      for (let i = 0; i < times; i++) for (const x of s.items) items.push(x);
      return seqOf(s.kind, items, text);
    }
  }
  if (op === '|' && a.k === 'dict' && b.k === 'dict') {
    const entries = [...a.entries];
    for (const e of b.entries) setEntry(entries, e);
    return dictOf(entries, text);
  }
  if (op === '%' && a.k === 'str') return UNKNOWN(text, 'string formatting');
  const x = asNumber(a);
  const y = asNumber(b);
  if (!x || !y) return UNKNOWN(text, 'not a constant number');
  if ((op === '&' || op === '|' || op === '^') && a.k === 'bool' && b.k === 'bool') {
    const r = op === '&' ? a.v && b.v : op === '|' ? a.v || b.v : a.v !== b.v;
    return { k: 'bool', v: r };
  }
  return arithmetic(op, x, y, text);
}

/** `-x`, `+x`, `~x`. */
export function unary(op: string, v: Value, text: string): Value {
  const x = asNumber(v);
  if (!x) return UNKNOWN(text, 'not a number');
  if (op === '-') return num(-x.v, x.int, text);
  if (op === '+') return num(x.v, x.int, text);
  if (op === '~' && x.int) return num(-x.v - 1, true, text);
  return UNKNOWN(text, `unary ${op}`);
}

/** `a == b` where Python's answer is known; undefined otherwise. */
export function equals(a: Value, b: Value, depth = 0): boolean | undefined {
  if (depth > 32) return undefined;
  const x = asNumber(a);
  const y = asNumber(b);
  if (x && y) return x.v === y.v;
  if (a.k === 'str' && b.k === 'str') return a.v === b.v;
  if (a.k === 'none' || b.k === 'none') {
    const other = a.k === 'none' ? b : a;
    if (other.k === 'none') return true;
    // Values whose type compares unequal to None (dataclass __eq__ compares to its own class only).
    return ['num', 'bool', 'str', 'seq', 'dict', 'lambda', 'cls', 'fn', 'pymod', 'mod', 'obj'].includes(
      other.k,
    )
      ? false
      : undefined;
  }
  if (
    (x && (b.k === 'str' || b.k === 'seq' || b.k === 'dict')) ||
    (y && (a.k === 'str' || a.k === 'seq' || a.k === 'dict'))
  )
    return false;
  if (a.k === 'str' && (b.k === 'seq' || b.k === 'dict')) return false;
  if (b.k === 'str' && (a.k === 'seq' || a.k === 'dict')) return false;
  if (a.k === 'seq' && b.k === 'seq') {
    if (a.kind !== b.kind) return a.kind === 'set' || b.kind === 'set' ? undefined : false;
    if (a.kind === 'set') return undefined;
    if (a.items.length !== b.items.length) return false;
    let all = true;
    for (let i = 0; i < a.items.length; i++) {
      const e = equals(a.items[i]!, b.items[i]!, depth + 1);
      if (e === false) return false;
      if (e === undefined) all = false;
    }
    return all ? true : undefined;
  }
  if (a.k === 'dict' && b.k === 'dict') {
    if (a.entries.length !== b.entries.length) return false;
    let all = true;
    for (const e of a.entries) {
      const other = b.entries.find((f) => equals(f.key, e.key, depth + 1) === true);
      if (!other) return undefined;
      const v = equals(e.value, other.value, depth + 1);
      if (v === false) return false;
      if (v === undefined) all = false;
    }
    return all ? true : undefined;
  }
  if (a.k === 'ref' && b.k === 'ref') {
    if (a.name === b.name) return true;
    // torch.half == torch.float16: the same dtype object under two names.
    const da = a.name.startsWith('torch.') ? torchDtype(a.name.slice(6)) : undefined;
    const db = b.name.startsWith('torch.') ? torchDtype(b.name.slice(6)) : undefined;
    if (da && db) return da === db;
    return undefined;
  }
  if (isObjectKind(a) && isObjectKind(b)) return a === b ? true : undefined;
  return undefined;
}

/** `a is b`: None against a known value, and the identity of objects the interpreter built. */
export function identical(a: Value, b: Value): boolean | undefined {
  const known = (v: Value) => v.k !== 'unknown' && v.k !== 'param' && v.k !== 'ref' && v.k !== 'call';
  if (a.k === 'none' || b.k === 'none') {
    const other = a.k === 'none' ? b : a;
    return other.k === 'none' ? true : known(other) ? false : undefined;
  }
  if (a.k === 'bool' && b.k === 'bool') return a.v === b.v; // True and False are singletons
  if (isObjectKind(a) && isObjectKind(b)) return a === b;
  return undefined;
}

/** `a in b` for lists, tuples, sets, dict keys and substrings. */
export function contains(container: Value, item: Value): boolean | undefined {
  if (container.k === 'str') return item.k === 'str' ? container.v.includes(item.v) : undefined;
  const items =
    container.k === 'seq'
      ? container.items
      : container.k === 'dict'
        ? container.entries.map((e) => e.key)
        : null;
  if (!items) return undefined;
  let unsure = false;
  for (const x of items) {
    const e = equals(x, item);
    if (e === true) return true;
    if (e === undefined) unsure = true;
  }
  return unsure ? undefined : false;
}

/** One comparison of a chain (`<`, `==`, `in`, `is not`, ...). */
export function compare(op: string, a: Value, b: Value): boolean | undefined {
  switch (op) {
    case '==':
      return equals(a, b);
    case '!=': {
      const e = equals(a, b);
      return e === undefined ? undefined : !e;
    }
    case 'is':
      return identical(a, b);
    case 'is not': {
      const i = identical(a, b);
      return i === undefined ? undefined : !i;
    }
    case 'in':
      return contains(b, a);
    case 'not in': {
      const c = contains(b, a);
      return c === undefined ? undefined : !c;
    }
    case '<':
    case '<=':
    case '>':
    case '>=': {
      const x = asNumber(a);
      const y = asNumber(b);
      let c: number | undefined;
      if (x && y) c = x.v < y.v ? -1 : x.v > y.v ? 1 : 0;
      else if (a.k === 'str' && b.k === 'str') c = a.v < b.v ? -1 : a.v > b.v ? 1 : 0;
      if (c === undefined) return undefined;
      return op === '<' ? c < 0 : op === '<=' ? c <= 0 : op === '>' ? c > 0 : c >= 0;
    }
    default:
      return undefined;
  }
}

/** A chained comparison `a < b <= c`: true when every link holds, false at the first known false. */
export function compareChain(ops: string[], operands: Value[]): boolean | undefined {
  let unsure = false;
  for (let i = 0; i < ops.length; i++) {
    const r = compare(ops[i]!, operands[i]!, operands[i + 1]!);
    if (r === false) return false;
    if (r === undefined) unsure = true;
  }
  return unsure ? undefined : true;
}
