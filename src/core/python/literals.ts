/**
 * Python literals as values: integers in every base, floats, and strings with their escapes decoded as Python
 * decodes them (raw strings kept as written, f-strings with fields unknown).
 */
import type { Node } from '../parsing/python';
import { num, strOf, UNKNOWN, type Value } from './values';

export function parseInteger(text: string): Value {
  const t = text.replace(/_/g, '').toLowerCase();
  let v: number;
  if (t.startsWith('0x')) v = parseInt(t.slice(2), 16);
  else if (t.startsWith('0o')) v = parseInt(t.slice(2), 8);
  else if (t.startsWith('0b')) v = parseInt(t.slice(2), 2);
  else if (/^\d+$/.test(t)) v = Number(t);
  else return UNKNOWN(text, 'not an integer literal');
  return num(v, true, text);
}

export function parseFloatLit(text: string): Value {
  const t = text.replace(/_/g, '');
  if (/[jJ]$/.test(t)) return UNKNOWN(text, 'a complex number');
  const v = Number(t);
  return Number.isNaN(v) ? UNKNOWN(text, 'not a number') : num(v, false, text);
}

const SIMPLE_ESCAPES: Record<string, string> = {
  n: '\n',
  t: '\t',
  r: '\r',
  '\\': '\\',
  "'": "'",
  '"': '"',
  a: '\x07',
  b: '\b',
  f: '\f',
  v: '\v',
  '\n': '',
};

/** One escape sequence of a (non-raw) string literal, decoded; as written when Python keeps it so. */
export function decodeEscape(seq: string, bytes: boolean): string {
  const body = seq.slice(1);
  const simple = SIMPLE_ESCAPES[body] ?? (body === '\r\n' ? '' : undefined);
  if (simple !== undefined) return simple;
  if (/^[0-7]{1,3}$/.test(body)) return String.fromCharCode(parseInt(body, 8));
  const hex = /^x([0-9a-fA-F]{2})$/.exec(body);
  if (hex) return String.fromCharCode(parseInt(hex[1]!, 16));
  if (!bytes) {
    const u = /^(?:u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8}))$/.exec(body);
    const cp = u ? parseInt(u[1] ?? u[2]!, 16) : NaN;
    if (u && cp <= 0x10ffff) return String.fromCodePoint(cp);
  }
  // `\N{NAME}` and unknown escapes: Python keeps unknown ones as written; named ones are left as written too.
  return seq;
}

/**
 * `str(v)` of a value, as an f-string field shows it, where Python and this model print it alike: strings, ints,
 * booleans, None, and floats in plain positional form. Undefined for anything else.
 */
export function pythonStr(v: Value): string | undefined {
  if (v.k === 'str') return v.v;
  if (v.k === 'bool') return v.v ? 'True' : 'False';
  if (v.k === 'none') return 'None';
  if (v.k !== 'num' || !Number.isFinite(v.v)) return undefined;
  if (v.int) return Number.isSafeInteger(v.v) ? String(v.v) : undefined;
  if (Number.isInteger(v.v)) return Math.abs(v.v) < 1e16 ? `${v.v}.0` : undefined;
  const s = String(v.v);
  return /e/i.test(s) || Math.abs(v.v) < 1e-4 ? undefined : s;
}

/**
 * A string literal's value. An f-string's fields are the text `interpolate` gives each expression (a plain `{x}`
 * or `{x!s}`; a format spec or another conversion is not followed), unknown without it.
 */
export function parseString(node: Node, interpolate?: (expr: Node) => string | undefined): Value {
  let out = '';
  let raw = false;
  let bytes = false;
  let formatted = false;
  for (const c of node.children) {
    switch (c.type) {
      case 'string_start':
        raw = /r/i.test(c.text);
        bytes = /b/i.test(c.text);
        formatted = /f/i.test(c.text);
        if (formatted && !interpolate && node.namedChildren.some((x) => x.type === 'interpolation'))
          return UNKNOWN(node.text, 'an f-string');
        break;
      case 'string_content': {
        // Escape sequences are children of the content (tree-sitter-python 0.21 and later); `{{` and `}}` of an
        // f-string are one brace.
        const escapes = c.namedChildren.filter(
          (x) => (!raw && x.type === 'escape_sequence') || (formatted && x.type === 'escape_interpolation'),
        );
        let at = c.startIndex;
        const text = c.text;
        for (const e of escapes) {
          const decoded = e.type === 'escape_interpolation' ? e.text.slice(1) : decodeEscape(e.text, bytes);
          out += text.slice(at - c.startIndex, e.startIndex - c.startIndex) + decoded;
          at = e.endIndex;
        }
        out += text.slice(at - c.startIndex);
        break;
      }
      case 'escape_sequence':
        out += raw ? c.text : decodeEscape(c.text, bytes);
        break;
      case 'interpolation': {
        const expr = c.childForFieldName('expression') ?? c.namedChildren[0];
        const conversion = c.namedChildren.find((x) => x.type === 'type_conversion');
        const spec = c.namedChildren.some((x) => x.type === 'format_specifier');
        const text =
          interpolate && expr && !spec && (!conversion || conversion.text === '!s')
            ? interpolate(expr)
            : undefined;
        if (text === undefined) return UNKNOWN(node.text, 'an f-string');
        out += text;
        break;
      }
      default:
        break;
    }
  }
  return strOf(out, node.text);
}
