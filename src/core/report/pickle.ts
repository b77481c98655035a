/** A streaming reader of Python pickles of plain data (protocols 2 to 5) that keeps memory bounded by folding. */

// Bytes arrive in chunks, never as a whole file. Each finished list, tuple or dict goes through a fold as it enters
// its parent (or as the result): the fold may keep it, replace it with something smaller, or drop it, so a reader
// that needs only aggregates holds one entry at a time. The memo, the stack and what stays held are capped, and a
// pickle past a cap is refused with the cap named. Opcodes that build Python objects (GLOBAL, REDUCE, BUILD...)
// are refused: nothing is imported or called, as pickle.loads would.

/** A pickle that is malformed, truncated, holds Python objects, or passes a cap: its message says which, and where. */
export class PickleError extends Error {}

/** A dict as a pickle holds it, keys in the order they were set. */
export type PyDict = Map<unknown, unknown>;

/** A list, tuple or set (as an array) or a dict. */
export type PyContainer = unknown[] | PyDict;

/** What a fold returns to leave a finished value out of its parent. */
export const DROP: unique symbol = Symbol('drop');

/**
 * Called on each finished container as it enters its parent (null for the pickle's result): what to hold in its
 * place (itself, something smaller) or DROP. The memo then holds the same: a later reference to it gets that.
 */
export type Fold = (value: PyContainer, parent: PyContainer | null) => unknown;

export interface PickleLimits {
  /** Bytes the memo may hold: strings and bytes at their length, anything else at a fixed cost. */
  memoBytes: number;
  /** Items held in containers that no fold has replaced or dropped. */
  liveItems: number;
  /** Values on the stack, those under every open mark included. */
  stack: number;
  /** Marks open at once. */
  marks: number;
  /** Bytes of one string or bytes value. */
  stringBytes: number;
}

export const PICKLE_LIMITS: PickleLimits = {
  memoBytes: 256 * 2 ** 20,
  liveItems: 8_000_000,
  stack: 1_000_000,
  marks: 10_000,
  stringBytes: 64 * 2 ** 20,
};

// Opcodes (CPython's Lib/pickle.py names them; pickletools.py documents each).
const OP = {
  MARK: 0x28,
  STOP: 0x2e,
  POP: 0x30,
  POP_MARK: 0x31,
  DUP: 0x32,
  BINBYTES: 0x42,
  SHORT_BINBYTES: 0x43,
  BINFLOAT: 0x47,
  BININT: 0x4a,
  BININT1: 0x4b,
  BININT2: 0x4d,
  NONE: 0x4e,
  BINSTRING: 0x54,
  SHORT_BINSTRING: 0x55,
  BINUNICODE: 0x58,
  APPEND: 0x61,
  APPENDS: 0x65,
  BINGET: 0x68,
  LONG_BINGET: 0x6a,
  LIST: 0x6c,
  BINPUT: 0x71,
  LONG_BINPUT: 0x72,
  SETITEM: 0x73,
  TUPLE: 0x74,
  SETITEMS: 0x75,
  DICT: 0x64,
  EMPTY_TUPLE: 0x29,
  EMPTY_LIST: 0x5d,
  EMPTY_DICT: 0x7d,
  PROTO: 0x80,
  TUPLE1: 0x85,
  TUPLE2: 0x86,
  TUPLE3: 0x87,
  NEWTRUE: 0x88,
  NEWFALSE: 0x89,
  LONG1: 0x8a,
  LONG4: 0x8b,
  SHORT_BINUNICODE: 0x8c,
  BINUNICODE8: 0x8d,
  BINBYTES8: 0x8e,
  EMPTY_SET: 0x8f,
  ADDITEMS: 0x90,
  FROZENSET: 0x91,
  MEMOIZE: 0x94,
  FRAME: 0x95,
  BYTEARRAY8: 0x96,
} as const;

/** Opcodes that build or reach Python objects: refused by name. */
const OBJECT_OPS: Record<number, string> = {
  0x63: 'GLOBAL',
  0x93: 'STACK_GLOBAL',
  0x52: 'REDUCE',
  0x62: 'BUILD',
  0x81: 'NEWOBJ',
  0x92: 'NEWOBJ_EX',
  0x69: 'INST',
  0x6f: 'OBJ',
  0x50: 'PERSID',
  0x51: 'BINPERSID',
  0x82: 'EXT1',
  0x83: 'EXT2',
  0x84: 'EXT4',
  0x97: 'NEXT_BUFFER',
  0x98: 'READONLY_BUFFER',
};

/** The text opcodes of protocols 0 and 1, which pickle.dump has not written by default since Python 3.0. */
const TEXT_OPS: Record<number, string> = {
  0x49: 'INT',
  0x4c: 'LONG',
  0x46: 'FLOAT',
  0x53: 'STRING',
  0x56: 'UNICODE',
  0x70: 'PUT',
  0x67: 'GET',
};

/** A long of `n` bytes, little-endian two's complement (LONG1, LONG4): a number where it is exact, else a bigint. */
function longLE(buf: Uint8Array, start: number, n: number): number | bigint {
  if (n === 0) return 0;
  const negative = (buf[start + n - 1]! & 0x80) !== 0;
  if (n <= 6) {
    let v = 0;
    for (let i = n - 1; i >= 0; i--) v = v * 256 + buf[start + i]!;
    return negative ? v - 2 ** (8 * n) : v;
  }
  let v = 0n;
  for (let i = n - 1; i >= 0; i--) v = (v << 8n) | BigInt(buf[start + i]!);
  if (negative) v -= 1n << BigInt(8 * n);
  return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
}

/** A copy of bytes (a Node Buffer's slice would share them, and the caller may reuse its chunk). */
const copy = (bytes: Uint8Array) => new Uint8Array(bytes);

/** A cap in words: "256 MiB", "1000 bytes". */
const capBytes = (n: number) => (n >= 2 ** 20 && n % 2 ** 20 === 0 ? `${n / 2 ** 20} MiB` : `${n} bytes`);

/** What the memo is charged for holding a value: strings and bytes by their length, anything else a fixed cost. */
const memoCost = (v: unknown) =>
  typeof v === 'string' ? v.length + 32 : v instanceof Uint8Array ? v.length + 32 : 32;

const isContainer = (v: unknown): v is PyContainer => Array.isArray(v) || v instanceof Map;
const sizeOf = (v: PyContainer) => (Array.isArray(v) ? v.length : v.size);

/** A pickle read chunk by chunk: `write` each chunk until it returns true (STOP was read), then `result()`. */
export class PickleReader {
  private stack: unknown[] = [];
  private readonly metastack: unknown[][] = [];
  private stackCount = 0;
  private readonly memo = new Map<number, unknown>();
  /** The memo index each open container was stored at, until it is folded. */
  private readonly memoOf = new Map<object, number>();
  private memoLength = 0;
  private memoBytes = 0;
  private live = 0;
  /** Bytes not yet parsed (an opcode cut by the end of a chunk), and how many a next attempt needs. */
  private pending: Uint8Array[] = [];
  private pendingLength = 0;
  private need = 1;
  /** Bytes of the stream before `pending`. */
  private consumed = 0;
  private done = false;
  private value: unknown = undefined;
  private readonly limits: PickleLimits;
  private readonly utf8 = new TextDecoder('utf-8');

  constructor(
    private readonly fold: Fold = (v) => v,
    limits: Partial<PickleLimits> = {},
  ) {
    this.limits = { ...PICKLE_LIMITS, ...limits };
  }

  /** Whether STOP has been read. */
  get finished(): boolean {
    return this.done;
  }

  /** Bytes parsed so far. */
  get offset(): number {
    return this.consumed;
  }

  /** Parses the next bytes (the chunk is not kept: the caller may reuse it); true once STOP has been read. */
  write(chunk: Uint8Array): boolean {
    if (this.done || chunk.length === 0) return this.done;
    if (this.pendingLength + chunk.length < this.need) {
      this.pending.push(copy(chunk));
      this.pendingLength += chunk.length;
      return false;
    }
    let buf = chunk;
    if (this.pending.length) {
      buf = new Uint8Array(this.pendingLength + chunk.length);
      let o = 0;
      for (const p of this.pending) {
        buf.set(p, o);
        o += p.length;
      }
      buf.set(chunk, o);
    }
    this.pending = [];
    this.pendingLength = 0;
    const used = this.run(buf);
    this.consumed += used;
    if (!this.done && used < buf.length) {
      const rest = copy(buf.subarray(used));
      this.pending.push(rest);
      this.pendingLength = rest.length;
    }
    return this.done;
  }

  /** The pickle's value, as the fold left it; an error when the bytes ended before STOP. */
  result(): unknown {
    if (!this.done)
      throw new PickleError(
        `the pickle ends after ${this.consumed + this.pendingLength} bytes without its STOP opcode: it is truncated`,
      );
    return this.value;
  }

  private fail(at: number, message: string): never {
    throw new PickleError(`byte ${this.consumed + at}: ${message}`);
  }

  private push(v: unknown, at: number): void {
    if (++this.stackCount > this.limits.stack)
      this.fail(at, `more than ${this.limits.stack} values on the pickle's stack`);
    this.stack.push(v);
  }

  private pop(at: number): unknown {
    if (!this.stack.length) this.fail(at, 'the stack is empty (a malformed pickle)');
    this.stackCount--;
    return this.stack.pop();
  }

  private popMark(at: number): unknown[] {
    const items = this.stack;
    const below = this.metastack.pop();
    if (!below) this.fail(at, 'no MARK to pop to (a malformed pickle)');
    this.stack = below;
    this.stackCount -= items.length;
    return items;
  }

  private top(at: number): unknown {
    if (!this.stack.length) this.fail(at, 'the stack is empty (a malformed pickle)');
    return this.stack[this.stack.length - 1];
  }

  private grow(at: number, n: number): void {
    this.live += n;
    if (this.live > this.limits.liveItems)
      this.fail(
        at,
        `more than ${this.limits.liveItems} items to hold at once (a larger pickle than this reader keeps)`,
      );
  }

  /** A value entering `parent` (null: the result): containers go through the fold, and the memo follows. */
  private take(v: unknown, parent: PyContainer | null): unknown {
    if (!isContainer(v)) return v;
    const out = this.fold(v, parent);
    const index = this.memoOf.get(v);
    if (index !== undefined) {
      this.memoOf.delete(v);
      if (out === DROP) {
        this.memo.delete(index);
        this.memoBytes -= memoCost(v);
      } else if (out !== v) {
        this.memo.set(index, out);
        this.memoBytes += memoCost(out) - memoCost(v);
      }
    }
    if (out !== v) this.live -= sizeOf(v);
    return out;
  }

  private append(list: unknown, v: unknown, at: number): void {
    if (!Array.isArray(list)) this.fail(at, 'APPEND onto something that is not a list');
    const kept = this.take(v, list);
    if (kept === DROP) return;
    list.push(kept);
    this.grow(at, 1);
  }

  private setItem(dict: unknown, k: unknown, v: unknown, at: number): void {
    if (!(dict instanceof Map)) this.fail(at, 'SETITEM on something that is not a dict');
    const key = this.take(k, dict);
    const kept = this.take(v, dict);
    if (key === DROP || kept === DROP) return;
    if (!dict.has(key)) this.grow(at, 1);
    dict.set(key, kept);
  }

  private tuple(items: unknown[], at: number): unknown[] {
    const t: unknown[] = [];
    for (const v of items) {
      const kept = this.take(v, t);
      if (kept !== DROP) t.push(kept);
    }
    this.grow(at, t.length);
    return t;
  }

  private memoPut(index: number, at: number): void {
    const v = this.top(at);
    this.memoBytes += memoCost(v) - (this.memo.has(index) ? memoCost(this.memo.get(index)) : 0);
    this.memo.set(index, v);
    this.memoLength = Math.max(this.memoLength, index + 1);
    if (this.memoBytes > this.limits.memoBytes)
      this.fail(
        at,
        `the memo passes ${capBytes(this.limits.memoBytes)} (a larger pickle than this reader keeps)`,
      );
    if (isContainer(v)) this.memoOf.set(v, index);
  }

  private memoGet(index: number, at: number): void {
    if (!this.memo.has(index))
      this.fail(
        at,
        `a reference to memo entry ${index}, which was never stored or was a value this reader folded away`,
      );
    this.push(this.memo.get(index), at);
  }

  private text(buf: Uint8Array, start: number, end: number): string {
    if (end - start <= 128) {
      let ascii = true;
      for (let i = start; i < end; i++)
        if (buf[i]! > 0x7f) {
          ascii = false;
          break;
        }
      if (ascii) return String.fromCharCode(...buf.subarray(start, end));
    }
    return this.utf8.decode(buf.subarray(start, end));
  }

  private latin1(buf: Uint8Array, start: number, end: number): string {
    let s = '';
    for (let i = start; i < end; i += 4096)
      s += String.fromCharCode(...buf.subarray(i, Math.min(end, i + 4096)));
    return s;
  }

  /** A length that the chunks to come must hold, checked against the cap before any byte of it is waited for. */
  private length(n: number, at: number): number {
    if (n > this.limits.stringBytes)
      this.fail(
        at,
        `a string or bytes value of ${n} bytes, over the ${capBytes(this.limits.stringBytes)} this reader takes`,
      );
    return n;
  }

  /** Parses whole opcodes from `buf`; returns how many bytes it used (the rest is an opcode cut short). */
  private run(buf: Uint8Array): number {
    const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    const len = buf.length;
    let pos = 0;
    // Whether `n` bytes from the opcode at `at` are here; if not, parsing waits for them.
    const has = (at: number, n: number) => {
      if (at + n <= len) return true;
      this.need = n;
      return false;
    };
    while (pos < len) {
      const at = pos;
      const op = buf[at]!;
      this.need = 1;
      switch (op) {
        case OP.PROTO: {
          if (!has(at, 2)) return at;
          const v = buf[at + 1]!;
          if (v < 2 || v > 5) this.fail(at, `pickle protocol ${v}: this reader takes protocols 2 to 5`);
          pos = at + 2;
          break;
        }
        case OP.FRAME:
          // Framing (protocol 4) only groups opcodes: the opcodes inside read the same without it.
          if (!has(at, 9)) return at;
          pos = at + 9;
          break;
        case OP.STOP:
          this.value = this.take(this.pop(at), null);
          if (this.stack.length || this.metastack.length)
            this.fail(at, 'STOP with values still on the stack');
          this.done = true;
          this.memo.clear();
          this.memoOf.clear();
          return at + 1;
        case OP.MARK:
          if (this.metastack.length >= this.limits.marks)
            this.fail(at, `more than ${this.limits.marks} marks open at once`);
          this.metastack.push(this.stack);
          this.stack = [];
          pos = at + 1;
          break;
        case OP.POP: {
          if (this.stack.length) {
            const v = this.pop(at);
            if (isContainer(v)) this.memoOf.delete(v);
          } else this.popMark(at);
          pos = at + 1;
          break;
        }
        case OP.POP_MARK:
          for (const v of this.popMark(at)) if (isContainer(v)) this.memoOf.delete(v);
          pos = at + 1;
          break;
        case OP.DUP:
          this.push(this.top(at), at);
          pos = at + 1;
          break;
        case OP.NONE:
          this.push(null, at);
          pos = at + 1;
          break;
        case OP.NEWTRUE:
        case OP.NEWFALSE:
          this.push(op === OP.NEWTRUE, at);
          pos = at + 1;
          break;
        case OP.BININT:
          if (!has(at, 5)) return at;
          this.push(view.getInt32(at + 1, true), at);
          pos = at + 5;
          break;
        case OP.BININT1:
          if (!has(at, 2)) return at;
          this.push(buf[at + 1]!, at);
          pos = at + 2;
          break;
        case OP.BININT2:
          if (!has(at, 3)) return at;
          this.push(view.getUint16(at + 1, true), at);
          pos = at + 3;
          break;
        case OP.LONG1:
        case OP.LONG4: {
          const head = op === OP.LONG1 ? 2 : 5;
          if (!has(at, head)) return at;
          const n = op === OP.LONG1 ? buf[at + 1]! : view.getUint32(at + 1, true);
          if (n > 1024) this.fail(at, `an integer of ${n} bytes`);
          if (!has(at, head + n)) return at;
          this.push(longLE(buf, at + head, n), at);
          pos = at + head + n;
          break;
        }
        case OP.BINFLOAT:
          if (!has(at, 9)) return at;
          this.push(view.getFloat64(at + 1, false), at);
          pos = at + 9;
          break;
        case OP.SHORT_BINUNICODE:
        case OP.SHORT_BINSTRING:
        case OP.SHORT_BINBYTES:
        case OP.BINUNICODE:
        case OP.BINSTRING:
        case OP.BINBYTES:
        case OP.BINUNICODE8:
        case OP.BINBYTES8:
        case OP.BYTEARRAY8: {
          const short = op === OP.SHORT_BINUNICODE || op === OP.SHORT_BINSTRING || op === OP.SHORT_BINBYTES;
          const wide = op === OP.BINUNICODE8 || op === OP.BINBYTES8 || op === OP.BYTEARRAY8;
          const head = short ? 2 : wide ? 9 : 5;
          if (!has(at, head)) return at;
          let n: number;
          if (short) n = buf[at + 1]!;
          else if (!wide) n = view.getUint32(at + 1, true);
          else {
            const hi = view.getUint32(at + 5, true);
            if (hi > 0) this.fail(at, 'a string or bytes value of more than 4 GiB');
            n = view.getUint32(at + 1, true);
          }
          if (op === OP.BINSTRING && n > 0x7fffffff) this.fail(at, 'a BINSTRING of negative length');
          this.length(n, at);
          if (!has(at, head + n)) return at;
          const s = at + head;
          const e = s + n;
          if (op === OP.SHORT_BINUNICODE || op === OP.BINUNICODE || op === OP.BINUNICODE8)
            this.push(this.text(buf, s, e), at);
          else if (op === OP.SHORT_BINSTRING || op === OP.BINSTRING) this.push(this.latin1(buf, s, e), at);
          else this.push(copy(buf.subarray(s, e)), at);
          pos = e;
          break;
        }
        case OP.EMPTY_LIST:
        case OP.EMPTY_TUPLE:
        case OP.EMPTY_SET:
          this.push([], at);
          pos = at + 1;
          break;
        case OP.EMPTY_DICT:
          this.push(new Map(), at);
          pos = at + 1;
          break;
        case OP.APPEND: {
          const v = this.pop(at);
          this.append(this.top(at), v, at);
          pos = at + 1;
          break;
        }
        case OP.APPENDS:
        case OP.ADDITEMS: {
          const items = this.popMark(at);
          const list = this.top(at);
          for (const v of items) this.append(list, v, at);
          pos = at + 1;
          break;
        }
        case OP.LIST: {
          const items = this.popMark(at);
          const list: unknown[] = [];
          for (const v of items) this.append(list, v, at);
          this.push(list, at);
          pos = at + 1;
          break;
        }
        case OP.SETITEM: {
          const v = this.pop(at);
          const k = this.pop(at);
          this.setItem(this.top(at), k, v, at);
          pos = at + 1;
          break;
        }
        case OP.SETITEMS:
        case OP.DICT: {
          const items = this.popMark(at);
          if (items.length % 2) this.fail(at, 'a dict with a key and no value');
          const dict = op === OP.DICT ? new Map<unknown, unknown>() : this.top(at);
          for (let i = 0; i < items.length; i += 2) this.setItem(dict, items[i], items[i + 1], at);
          if (op === OP.DICT) this.push(dict, at);
          pos = at + 1;
          break;
        }
        case OP.TUPLE:
        case OP.FROZENSET:
          this.push(this.tuple(this.popMark(at), at), at);
          pos = at + 1;
          break;
        case OP.TUPLE1:
        case OP.TUPLE2:
        case OP.TUPLE3: {
          const n = op - OP.TUPLE1 + 1;
          const items: unknown[] = [];
          for (let i = 0; i < n; i++) items.unshift(this.pop(at));
          this.push(this.tuple(items, at), at);
          pos = at + 1;
          break;
        }
        case OP.MEMOIZE:
          this.memoPut(this.memoLength, at);
          pos = at + 1;
          break;
        case OP.BINPUT:
        case OP.LONG_BINPUT: {
          const n = op === OP.BINPUT ? 2 : 5;
          if (!has(at, n)) return at;
          this.memoPut(op === OP.BINPUT ? buf[at + 1]! : view.getUint32(at + 1, true), at);
          pos = at + n;
          break;
        }
        case OP.BINGET:
        case OP.LONG_BINGET: {
          const n = op === OP.BINGET ? 2 : 5;
          if (!has(at, n)) return at;
          this.memoGet(op === OP.BINGET ? buf[at + 1]! : view.getUint32(at + 1, true), at);
          pos = at + n;
          break;
        }
        default: {
          const object = OBJECT_OPS[op];
          if (object)
            this.fail(
              at,
              `${object}: the pickle holds Python objects, not plain data (this reader builds dicts, lists, strings and numbers only, and runs no code)`,
            );
          const text = TEXT_OPS[op];
          if (text)
            this.fail(
              at,
              `${text}, a text opcode of pickle protocol 0 or 1: this reader takes protocols 2 to 5`,
            );
          this.fail(
            at,
            `unknown opcode 0x${op.toString(16).padStart(2, '0')}: not a pickle, or a damaged one`,
          );
        }
      }
    }
    return pos;
  }
}
