/**
 * The Python value model: what a statically known Python value is, shared by the scan's constant evaluation and
 * the `nn.Module` interpreter. Literals, containers and names are plain data; modules under construction,
 * tensors, classes and functions are the interpreter's kinds of the same union; anything not known is `unknown`
 * with a reason. Every value built through `seqOf`, `strOf` and `dictOf` stays within `LIMITS`: past a limit the
 * value becomes unknown, never an allocation.
 */
import type { Node } from '../parsing/python';
import type { SourceFile } from '../parsing/source';
import type { DType } from '../vocabulary/dtypes';
import type { ImportTable } from './imports';
import { budget } from '../vocabulary/budget';

/** How large a value the model builds: longer sequences, strings and dicts become unknown. */
export const LIMITS = {
  /** Items of one list, tuple or set. */
  items: 100_000,
  /** Characters of one string. */
  chars: 1_000_000,
  /** Entries of one dict. */
  entries: 10_000,
  /** Integers beyond this magnitude lose exactness as doubles and are unknown. */
  integer: Number.MAX_SAFE_INTEGER,
};

export interface NumV {
  k: 'num';
  v: number;
  int: boolean;
}
export interface StrV {
  k: 'str';
  v: string;
}
export interface BoolV {
  k: 'bool';
  v: boolean;
}
export interface NoneV {
  k: 'none';
}
export interface SeqV {
  k: 'seq';
  kind: 'list' | 'tuple' | 'set';
  items: Value[];
}
export interface DictV {
  k: 'dict';
  entries: DictEntry[];
}
/** A name the analysis does not follow (an import from outside the project, a builtin), by qualified name. */
export interface RefV {
  k: 'ref';
  name: string;
  /** Bound by an import or a definition of the file (false: a builtin or a name not defined). */
  bound: boolean;
}
/** A call kept as a call (a constructor of a library class, `MixedPrecisionPolicy(...)`), with its arguments. */
export interface CallV {
  k: 'call';
  callee: string;
  args: Value[];
  kwargs: Record<string, Value>;
  splats: Value[];
  node: Node;
}
export interface LambdaV {
  k: 'lambda';
  text: string;
  node: Node;
}
/** A function parameter whose value depends on the caller. */
export interface ParamV {
  k: 'param';
  name: string;
  function: string;
  index: number;
  default: Value | null;
}
export interface UnknownV {
  k: 'unknown';
  text: string;
  why: string;
}

/** A parsed Python file of the project, as classes and functions record where they are defined. */
export interface ModuleFile {
  path: string;
  source: SourceFile;
  imports: ImportTable;
}

/** An instance of a user class that is not a module (a config, a dataclass). */
export interface ObjV {
  k: 'obj';
  cls: ClassV | null;
  fields: Map<string, Value>;
}

/** An `nn.Module` under construction. */
export interface ModV {
  k: 'mod';
  className: string;
  /** Registered submodules and parameters, in registration order. */
  children: Map<string, ModV>;
  params: Map<string, TensorV | null>;
  buffers: Map<string, { t: TensorV; persistent: boolean }>;
  attrs: Map<string, Value>;
  cls: ClassV | null;
  /** The constructor arguments a project class was built with (rendered for exact mode). */
  ctor?: { args: Value[]; kwargs: Record<string, Value> };
  /** Parts of this module that are not known statically (`ModuleList(xs)` of an unknown `xs`), in words. */
  gaps?: string[];
}

export interface ClassV {
  k: 'cls';
  file: ModuleFile;
  node: Node;
  name: string;
}

export interface FnV {
  k: 'fn';
  file: ModuleFile;
  node: Node;
  name: string;
  /** The instance (or class, for classmethods) a method is bound to. */
  self?: Value;
  /** The class the method was found in (for `super()`). */
  owner?: ClassV;
  /** Arguments bound ahead by `functools.partial(fn, ...)`. */
  partial?: { args: Value[]; kwargs: Record<string, Value> };
}

export interface TensorV {
  k: 'tensor';
  shape: number[] | null;
  dtype: DType;
  param: boolean;
  trainable: boolean;
  /** The dtype was set by the code (a `dtype=` argument, a cast), not left at PyTorch's float32 default. */
  cast?: boolean;
  /** `nn.Buffer(t, persistent=...)` (PyTorch 2.5): registered as a buffer when assigned to a module. */
  buffer?: { persistent: boolean };
  /** A parameter of a built model that keeps the model's dtype, which is not known where it is read. */
  dtypeUnknown?: true;
}

/** A Python module of the project (`import models.llama as ml`). */
export interface PyModV {
  k: 'pymod';
  file: ModuleFile;
}

/** A statically known value, or what is known of it. */
export type Value =
  | NumV
  | StrV
  | BoolV
  | NoneV
  | SeqV
  | DictV
  | RefV
  | CallV
  | LambdaV
  | ParamV
  | UnknownV
  | ObjV
  | ModV
  | ClassV
  | FnV
  | TensorV
  | PyModV;

export interface DictEntry {
  key: Value;
  value: Value;
  /** The value's source, when it is written in the file. */
  valueNode?: Node;
  /** Set when the key is added under an `if` (source text of the conditions). */
  conditions?: string[];
  line?: number;
}

/** An unknown value: the source text it stands for (bounded) and why it is not known. */
export function UNKNOWN(text: string, why: string): UnknownV {
  return { k: 'unknown', text: text.length > 80 ? text.slice(0, 80) : text, why };
}

export const NONE: NoneV = { k: 'none' };
export const bool = (v: boolean): BoolV => ({ k: 'bool', v });
export const int = (v: number): NumV => ({ k: 'num', v, int: true });
export const str = (v: string): StrV => ({ k: 'str', v });

/** A number, unknown when not finite or an integer past exact doubles. */
export function num(v: number, isInt: boolean, text: string): Value {
  if (!Number.isFinite(v)) return UNKNOWN(text, 'not a finite number');
  if (isInt && Math.abs(v) > LIMITS.integer) return UNKNOWN(text, 'integer too large');
  // Python's integers have no negative zero.
  return { k: 'num', v: isInt && v === 0 ? 0 : v, int: isInt };
}

/** A sequence, unknown past the item limit or the analysis's budget. */
export function seqOf(kind: SeqV['kind'], items: Value[], text = ''): Value {
  if (items.length > LIMITS.items) return tooLong(kind, text);
  return budget().build(items.length) ? { k: 'seq', kind, items } : spent(text);
}

/** The unknown value of a sequence past the item limit. */
export function tooLong(kind: SeqV['kind'], text: string): UnknownV {
  return UNKNOWN(text, `a ${kind} of more than ${LIMITS.items.toLocaleString('en-US')} items`);
}

/** A string, unknown past the length limit or the analysis's budget. */
export function strOf(v: string, text = ''): Value {
  if (v.length > LIMITS.chars)
    return UNKNOWN(text, `a string of more than ${LIMITS.chars.toLocaleString('en-US')} characters`);
  return budget().build(v.length) ? { k: 'str', v } : spent(text);
}

/** A dict, unknown past the entry limit or the analysis's budget. */
export function dictOf(entries: DictEntry[], text = ''): Value {
  if (entries.length > LIMITS.entries)
    return UNKNOWN(text, `a dict of more than ${LIMITS.entries.toLocaleString('en-US')} entries`);
  return budget().build(entries.length) ? { k: 'dict', entries } : spent(text);
}

/** The unknown value of an evaluation past the analysis's budget. */
export function spent(text: string): UnknownV {
  return UNKNOWN(text, budget().spent ?? 'past the analysis budget');
}

/** Sets `key` in a dict's entries (a later write replaces an earlier one, keeping its place, as Python does). */
export function setEntry(entries: DictEntry[], e: DictEntry): void {
  const i = entries.findIndex((x) => sameKey(x.key, e.key));
  if (i >= 0) entries[i] = e;
  else entries.push(e);
}

/** Whether two keys are the same dict key (hashable constants and names). */
export function sameKey(a: Value, b: Value): boolean {
  if ((a.k === 'num' || a.k === 'bool') && (b.k === 'num' || b.k === 'bool'))
    return Number(a.v) === Number(b.v);
  if (a.k === 'str' && b.k === 'str') return a.v === b.v;
  if (a.k === 'none' && b.k === 'none') return true;
  if (a.k === 'ref' && b.k === 'ref') return a.name === b.name;
  if (a.k === 'seq' && b.k === 'seq' && a.kind === 'tuple' && b.kind === 'tuple')
    return a.items.length === b.items.length && a.items.every((x, i) => sameKey(x, b.items[i]!));
  return false;
}

/** The kinds whose identity is the object itself (`is` compares them by reference). */
export function isObjectKind(v: Value): boolean {
  return (
    v.k === 'obj' || v.k === 'mod' || v.k === 'cls' || v.k === 'fn' || v.k === 'pymod' || v.k === 'tensor'
  );
}
