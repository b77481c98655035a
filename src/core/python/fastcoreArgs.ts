/** fastcore's `@call_parse` command lines: how an option's annotation types the value argparse reads. */
import type { Node } from '../parsing/python';
import { UNKNOWN, type Value } from './values';

/** How `anno_parser` (fastcore/script.py) reads a parameter: as a flag, a boolean, a number or a string. */
export type FastcoreType = 'flag' | 'bool' | 'int' | 'float' | 'str';

/**
 * The type of a parameter from its annotation: `store_true` / `store_false` (flags), `bool_arg` (`str2bool`),
 * `int`, `float`, or `Param(help, type, ...)` / `Param(..., type=...)` (`Param.kwargs`); anything else a string.
 */
export function fastcoreType(annotation: Node | null): FastcoreType {
  if (!annotation) return 'str';
  let t = annotation.text;
  if (
    annotation.type === 'call' &&
    /(^|\.)Param$/.test(annotation.childForFieldName('function')?.text ?? '')
  ) {
    const args = annotation.childForFieldName('arguments')?.namedChildren ?? [];
    const kw = args.find(
      (a) => a.type === 'keyword_argument' && a.childForFieldName('name')?.text === 'type',
    );
    const positional = args.filter((a) => a.type !== 'keyword_argument' && a.type !== 'comment');
    t = kw?.childForFieldName('value')?.text ?? positional[1]?.text ?? 'str';
  }
  if (t === 'store_true' || t === 'store_false') return 'flag';
  if (t === 'bool_arg') return 'bool';
  return t === 'int' || t === 'float' ? t : 'str';
}

/** A command line's string as the annotation converts it (`str2bool` accepts y/yes/t/true/on/1 and n/no/f/false/off/0). */
export function fastcoreValue(v: Value, type: FastcoreType): Value {
  if (v.k !== 'str') return v;
  if (type === 'bool') {
    const s = v.v.toLowerCase();
    if (['y', 'yes', 't', 'true', 'on', '1'].includes(s)) return { k: 'bool', v: true };
    if (['n', 'no', 'f', 'false', 'off', '0'].includes(s)) return { k: 'bool', v: false };
    return UNKNOWN(v.v, `bool_arg("${v.v}")`);
  }
  if (type !== 'int' && type !== 'float') return v;
  const n = Number(v.v);
  return Number.isFinite(n) && (type === 'float' || Number.isInteger(n))
    ? { k: 'num', v: n, int: type === 'int' }
    : UNKNOWN(v.v, `${type}("${v.v}")`);
}
