/**
 * Values as plain data, for facts, JSON and the framework readers: the one conversion out of the value model,
 * bounded in depth and size so that a value built from shared parts (`x = [x, x]` repeated) converts in bounded
 * time. `toJson` is the view of the same data the command line prints as an option's value.
 */
import { dtypeFromText, torchDtype, type DType } from '../vocabulary/dtypes';
import type { Value } from './values';

/** A value as the scan could read it: plain data, a reference to a name, a call, or unknown. */
export type PlainValue =
  | string
  | number
  | boolean
  | null
  | PlainValue[]
  | { ref: string }
  | { call: string; args: PlainValue[]; kwargs: Record<string, PlainValue> }
  | { dict: Record<string, PlainValue> }
  | { lambda: string }
  | { unknown: string };

export interface PlainOptions {
  /**
   * A parameter whose value depends on the caller: `unknown`, or its `default` (the framework readers read a
   * `def main(batch=8)` default as the value the script runs with unless told otherwise).
   */
  params: 'unknown' | 'default';
}

/** Containers longer than this convert to their first items only. */
const MAX_ITEMS = 256;
/** Nodes one conversion visits at most. */
const MAX_NODES = 10_000;

/** The value as plain data. */
export function toPlain(v: Value, opts: PlainOptions = { params: 'unknown' }): PlainValue {
  let nodes = 0;
  const go = (x: Value, depth: number): PlainValue => {
    if (depth > 8 || ++nodes > MAX_NODES) return { unknown: 'nested too deeply' };
    switch (x.k) {
      case 'num':
      case 'str':
      case 'bool':
        return x.v;
      case 'none':
        return null;
      case 'seq':
        return x.items.slice(0, MAX_ITEMS).map((y) => go(y, depth + 1));
      case 'dict': {
        const o: Record<string, PlainValue> = {};
        for (const e of x.entries.slice(0, MAX_ITEMS))
          o[e.key.k === 'str' ? e.key.v : JSON.stringify(jsonOf(go(e.key, depth + 1)))] = go(
            e.value,
            depth + 1,
          );
        return { dict: o };
      }
      case 'ref':
        return { ref: x.name };
      case 'call':
        return {
          call: x.callee,
          args: x.args.slice(0, 32).map((y) => go(y, depth + 1)),
          kwargs: Object.fromEntries(Object.entries(x.kwargs).map(([k, y]) => [k, go(y, depth + 1)])),
        };
      case 'param':
        return opts.params === 'default' && x.default ? go(x.default, depth + 1) : { unknown: x.name };
      case 'lambda':
        return { lambda: x.text };
      case 'unknown':
        return { unknown: x.text.slice(0, 80) };
      default:
        return { unknown: x.k };
    }
  };
  return go(v, 0);
}

/** Plain data as JSON: names as their dtype or dotted name, dicts as objects, what is not known as null. */
export function jsonOf(p: PlainValue): unknown {
  if (p === null || typeof p !== 'object') return p;
  if (Array.isArray(p)) return p.map(jsonOf);
  if ('ref' in p) return (p.ref.startsWith('torch.') ? torchDtype(p.ref.slice(6)) : undefined) ?? p.ref;
  if ('dict' in p) return Object.fromEntries(Object.entries(p.dict).map(([k, x]) => [k, jsonOf(x)]));
  if ('call' in p)
    return {
      call: p.call,
      args: p.args.map(jsonOf),
      kwargs: Object.fromEntries(Object.entries(p.kwargs).map(([k, x]) => [k, jsonOf(x)])),
    };
  if ('lambda' in p) return { lambda: p.lambda };
  return null;
}

/** A plain JSON view of a value: what the command line prints as an option's `value`. */
export function toJson(v: Value): unknown {
  return jsonOf(toPlain(v));
}

/** `torch.bfloat16` → bfloat16; also the strings configurations write (`"bf16"`, `"float16"`). */
export function dtypeOf(v: Value | undefined): DType | undefined {
  if (v?.k === 'ref' && v.name.startsWith('torch.')) return torchDtype(v.name.slice(6));
  if (v?.k === 'str') return dtypeFromText(v.v);
  return undefined;
}

/** `torch.bfloat16` (a name, as plain data) as a dtype. */
export function plainDtype(v: PlainValue | undefined): DType | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && 'ref' in v
    ? torchDtype(v.ref.split('.').pop()!)
    : undefined;
}
