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

/** A string literal's value. */
export function parseString(node: Node): Value {
  let out = '';
  let raw = false;
  let bytes = false;
  for (const c of node.children) {
    switch (c.type) {
      case 'string_start':
        raw = /r/i.test(c.text);
        bytes = /b/i.test(c.text);
        if (/f/i.test(c.text) && node.namedChildren.some((x) => x.type === 'interpolation'))
          return UNKNOWN(node.text, 'an f-string');
        break;
      case 'string_content': {
        // Escape sequences are children of the content (tree-sitter-python 0.21 and later).
        const escapes = raw ? [] : c.namedChildren.filter((x) => x.type === 'escape_sequence');
        let at = c.startIndex;
        const text = c.text;
        for (const e of escapes) {
          out += text.slice(at - c.startIndex, e.startIndex - c.startIndex) + decodeEscape(e.text, bytes);
          at = e.endIndex;
        }
        out += text.slice(at - c.startIndex);
        break;
      }
      case 'escape_sequence':
        out += raw ? c.text : decodeEscape(c.text, bytes);
        break;
      case 'interpolation':
        return UNKNOWN(node.text, 'an f-string');
      default:
        break;
    }
  }
  return strOf(out, node.text);
}
