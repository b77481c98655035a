/**
 * Python's `str` methods that tests of module names use (`name.endswith("mlp")`, `name.split(".")[-2] ==
 * "layers"`, `str.isdigit(part)`), folded on known strings as CPython's do; anything else stays unknown.
 */
import { seqOf, str, type Value } from './values';

/** The strings of a `str` or a tuple of them (`endswith(("a", "b"))`), or undefined. */
function strings(v: Value | undefined): string[] | undefined {
  if (v?.k === 'str') return [v.v];
  if (v?.k === 'seq' && v.items.every((i) => i.k === 'str'))
    return v.items.map((i) => (i as { v: string }).v);
  return undefined;
}

/** `s.split(sep)` as CPython splits: on runs of whitespace without a separator, at most `maxsplit` times. */
function split(s: string, sep: string | undefined, maxsplit: number): string[] {
  if (sep === undefined) {
    const parts = s.trim() === '' ? [] : s.trim().split(/\s+/);
    return maxsplit < 0 || parts.length <= maxsplit + 1
      ? parts
      : [...parts.slice(0, maxsplit), parts.slice(maxsplit).join(' ')];
  }
  const parts = s.split(sep);
  return maxsplit < 0 || parts.length <= maxsplit + 1
    ? parts
    : [...parts.slice(0, maxsplit), parts.slice(maxsplit).join(sep)];
}

/** `s.<name>(*args)`, or undefined when the method or its arguments are not ones folded here. */
export function stringMethod(s: string, name: string, args: Value[], text: string): Value | undefined {
  const a0 = args[0];
  const bool = (v: boolean): Value => ({ k: 'bool', v });
  switch (name) {
    case 'split':
    case 'rsplit': {
      const sep = a0 === undefined || a0.k === 'none' ? undefined : a0.k === 'str' ? a0.v : null;
      const max = args[1]?.k === 'num' ? args[1].v : args[1] === undefined ? -1 : null;
      if (sep === null || sep === '' || max === null) return undefined;
      // rsplit differs from split only when a maximum is given.
      if (name === 'rsplit' && max >= 0) {
        const rev = split([...s].reverse().join(''), sep && [...sep].reverse().join(''), max);
        return seqOf(
          'list',
          rev.reverse().map((p) => str([...p].reverse().join(''))),
          text,
        );
      }
      return seqOf(
        'list',
        split(s, sep, max).map((p) => str(p)),
        text,
      );
    }
    case 'endswith':
    case 'startswith': {
      const xs = strings(a0);
      if (!xs || args.length > 1) return undefined;
      return bool(xs.some((x) => (name === 'endswith' ? s.endsWith(x) : s.startsWith(x))));
    }
    case 'isdigit':
    case 'isdecimal':
    case 'isnumeric':
      return args.length ? undefined : bool(/^[0-9]+$/.test(s));
    case 'isalpha':
      return args.length ? undefined : bool(/^[A-Za-z]+$/.test(s));
    case 'lower':
      return args.length ? undefined : str(s.toLowerCase());
    case 'upper':
      return args.length ? undefined : str(s.toUpperCase());
    case 'strip':
    case 'lstrip':
    case 'rstrip': {
      if (args.length > 1 || (a0 && a0.k !== 'str' && a0.k !== 'none')) return undefined;
      const chars = a0?.k === 'str' ? a0.v : undefined;
      const strip = (c: string) => (chars === undefined ? /\s/.test(c) : chars.includes(c));
      let from = 0;
      let to = s.length;
      if (name !== 'rstrip') while (from < to && strip(s[from]!)) from++;
      if (name !== 'lstrip') while (to > from && strip(s[to - 1]!)) to--;
      return str(s.slice(from, to));
    }
    case 'replace':
      return a0?.k === 'str' && args[1]?.k === 'str' && args.length === 2 && a0.v !== ''
        ? str(s.split(a0.v).join(args[1].v))
        : undefined;
    case 'count':
      return a0?.k === 'str' && args.length === 1 && a0.v !== ''
        ? { k: 'num', v: s.split(a0.v).length - 1, int: true }
        : undefined;
    case 'find':
      return a0?.k === 'str' && args.length === 1 ? { k: 'num', v: s.indexOf(a0.v), int: true } : undefined;
    case 'join': {
      const xs = a0?.k === 'seq' && a0.items.every((i) => i.k === 'str') ? strings(a0) : undefined;
      return xs && args.length === 1 ? str(xs.join(s)) : undefined;
    }
    default:
      return undefined;
  }
}
