/**
 * Python builtins that fold to a value when their arguments are known: conversions (int, float, str, bool),
 * arithmetic helpers (abs, min, max, round, sum, math.*), containers (len, list, tuple, set, dict, range,
 * enumerate, zip, reversed, sorted) and any / all. Anything else is not a builtin here (undefined).
 */
import { asNumber, compare, truthy } from './operators';
import {
  dictOf,
  int,
  LIMITS,
  num,
  seqOf,
  setEntry,
  str,
  UNKNOWN,
  type DictEntry,
  type Value,
} from './values';

export interface BuiltinContext {
  /** The items of an iterable value (the interpreter adds module containers), or null when not known. */
  iterate(v: Value): Value[] | null;
  /** The longest range built (a loop over a longer one is not followed). */
  maxRange: number;
}

export interface BuiltinArgs {
  args: Value[];
  kwargs: Record<string, Value>;
  /** Keyword arguments as dict entries, keeping where each value is written (for `dict(k=v)`). */
  keywords?: DictEntry[];
  /** `*x` / `**x` arguments not known. */
  splats?: Value[];
}

/** Folds a call of builtin `name`; undefined when it is not a builtin this model folds, or folds to nothing known. */
export function callBuiltin(
  name: string,
  a: BuiltinArgs,
  ctx: BuiltinContext,
  text: string,
): Value | undefined {
  const { args, kwargs } = a;
  if (a.splats?.length)
    return name === 'dict' ? UNKNOWN(text, 'merges a mapping that is not known') : undefined;
  const nums = args.map(asNumber);
  const allNums = nums.length > 0 && nums.every((n) => n !== undefined);
  const one = nums.length === 1 && allNums ? nums[0]! : undefined;
  switch (name) {
    case 'int': {
      const x = args[0];
      if (x?.k === 'num' || x?.k === 'bool') return num(Math.trunc(asNumber(x)!.v), true, text);
      if (x?.k === 'str' && /^\s*[-+]?\d[\d_]*\s*$/.test(x.v))
        return num(parseInt(x.v.replace(/_/g, ''), 10), true, text);
      return undefined;
    }
    case 'float': {
      const x = args[0];
      if (x?.k === 'num' || x?.k === 'bool') return { k: 'num', v: asNumber(x)!.v, int: false };
      if (x?.k === 'str' && x.v.trim() !== '' && !Number.isNaN(Number(x.v)))
        return num(Number(x.v), false, text);
      return undefined;
    }
    case 'str': {
      const x = args[0];
      if (x?.k === 'num') return str(x.int || !Number.isInteger(x.v) ? String(x.v) : `${x.v}.0`);
      if (x?.k === 'bool') return str(x.v ? 'True' : 'False');
      if (x?.k === 'none') return str('None');
      if (x?.k === 'str') return x;
      return args.length ? undefined : str('');
    }
    case 'bool': {
      const t = args[0] ? truthy(args[0]) : false;
      return t === undefined ? undefined : { k: 'bool', v: t };
    }
    case 'abs':
      return one ? num(Math.abs(one.v), one.int, text) : undefined;
    case 'round': {
      if (!allNums || nums.length > 2) return undefined;
      const [x, d] = nums as { v: number; int: boolean }[];
      if (!d) return num(roundHalfEven(x!.v), true, text);
      // round(x, n) rounds the binary value's exact decimal expansion: only integers are exact here.
      return x!.int && d.int ? num(x!.v, true, text) : undefined;
    }
    case 'min':
    case 'max':
    case 'sum': {
      const items = args.length === 1 ? ctx.iterate(args[0]!) : name === 'sum' ? null : args;
      const list = items?.map(asNumber);
      if (!list || !list.every((n) => n !== undefined)) return undefined;
      if (!list.length) return name === 'sum' ? int(0) : undefined;
      const vs = list.map((n) => n!.v);
      const isInt = list.every((n) => n!.int);
      const v =
        name === 'sum' ? vs.reduce((s, x) => s + x, 0) : name === 'min' ? Math.min(...vs) : Math.max(...vs);
      return num(v, isInt, text);
    }
    case 'any':
    case 'all': {
      const items = args[0] ? ctx.iterate(args[0]) : null;
      if (!items) return undefined;
      let unsure = false;
      for (const x of items) {
        const t = truthy(x);
        if (t === undefined) unsure = true;
        else if (t === (name === 'any')) return { k: 'bool', v: t };
      }
      return unsure ? undefined : { k: 'bool', v: name === 'all' };
    }
    case 'len': {
      const x = args[0];
      if (x?.k === 'str') return int(x.v.length);
      if (x?.k === 'dict') return int(x.entries.length);
      const items = x ? ctx.iterate(x) : null;
      return items ? int(items.length) : undefined;
    }
    case 'math.ceil':
    case 'math.floor':
      return one ? num(name === 'math.ceil' ? Math.ceil(one.v) : Math.floor(one.v), true, text) : undefined;
    case 'math.sqrt':
      return one && one.v >= 0 ? num(Math.sqrt(one.v), false, text) : undefined;
    case 'dict': {
      if (args.length > 1) return undefined;
      const first = args[0];
      let entries: DictEntry[] = [];
      if (first?.k === 'dict') entries = [...first.entries];
      else if (first) {
        // dict(pairs)
        const items = ctx.iterate(first);
        if (!items) return undefined;
        for (const it of items) {
          if (it.k !== 'seq' || it.items.length !== 2) return undefined;
          setEntry(entries, { key: it.items[0]!, value: it.items[1]! });
        }
      }
      const keywords = a.keywords ?? Object.entries(kwargs).map(([k, v]) => ({ key: str(k), value: v }));
      for (const e of keywords) setEntry(entries, e);
      return dictOf(entries, text);
    }
    case 'list':
    case 'tuple':
    case 'set': {
      if (!args.length) return seqOf(name, [], text);
      const items = ctx.iterate(args[0]!);
      return items ? seqOf(name, name === 'set' ? unique(items) : [...items], text) : undefined;
    }
    case 'reversed': {
      const items = args[0] ? ctx.iterate(args[0]) : null;
      return items ? seqOf('list', [...items].reverse(), text) : undefined;
    }
    case 'sorted': {
      const items = args[0] ? ctx.iterate(args[0]) : null;
      if (!items || Object.keys(kwargs).length) return undefined;
      const sorted = [...items];
      let unsure = false;
      sorted.sort((x, y) => {
        const lt = compare('<', x, y);
        const gt = compare('>', x, y);
        if (lt === undefined || gt === undefined) unsure = true;
        return lt ? -1 : gt ? 1 : 0;
      });
      return unsure ? undefined : seqOf('list', sorted, text);
    }
    case 'range': {
      const n = args.map((x) => (x.k === 'num' && x.int ? x.v : null));
      if (!n.length || n.length > 3 || n.some((x) => x === null))
        return UNKNOWN(text, 'a range of unknown size');
      const [start, stop, step] = n.length === 1 ? [0, n[0]!, 1] : [n[0]!, n[1]!, n[2] ?? 1];
      if (!step) return UNKNOWN(text, 'range() arg 3 must not be zero');
      const count = Math.max(0, Math.ceil((stop! - start!) / step));
      if (count > Math.min(ctx.maxRange, LIMITS.items)) return UNKNOWN(text, 'a range too long to follow');
      const items: Value[] = [];
      for (let i = 0; i < count; i++) items.push(int(start! + i * step));
      return seqOf('list', items, text);
    }
    case 'enumerate': {
      const items = args[0] ? ctx.iterate(args[0]) : null;
      const from = args[1] && args[1].k === 'num' ? args[1].v : 0;
      return items
        ? seqOf(
            'list',
            items.map((it, i) => ({ k: 'seq', kind: 'tuple', items: [int(from + i), it] }) as Value),
            text,
          )
        : UNKNOWN(text, 'enumerate of unknown');
    }
    case 'zip': {
      const lists = args.map((x) => ctx.iterate(x));
      if (!lists.length || lists.some((l) => !l)) return UNKNOWN(text, 'zip of unknown');
      const n = Math.min(...lists.map((l) => l!.length));
      const items: Value[] = [];
      for (let i = 0; i < n; i++) items.push({ k: 'seq', kind: 'tuple', items: lists.map((l) => l![i]!) });
      return seqOf('list', items, text);
    }
    default:
      return undefined;
  }
}

/** Python 3's round(): halves to the even neighbour. */
function roundHalfEven(x: number): number {
  const f = Math.floor(x);
  const d = x - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

function unique(items: Value[]): Value[] {
  const out: Value[] = [];
  for (const x of items) if (!out.some((y) => compare('==', x, y) === true)) out.push(x);
  return out;
}

/** The items of plain iterables: sequences, a dict's keys, a string's characters. */
export function plainItems(v: Value): Value[] | null {
  if (v.k === 'seq') return v.items;
  if (v.k === 'dict') return v.entries.map((e) => e.key);
  if (v.k === 'str') return v.v.length <= LIMITS.items ? [...v.v].map(str) : null;
  return null;
}
