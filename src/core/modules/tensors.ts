/**
 * Tensors as the interpreter tracks them: shapes and dtypes through the factories (`torch.ones`, `torch.arange`),
 * attributes (`.shape`, `.dtype`, `.T`), the methods that keep or reshape storage (`view`, `unsqueeze`, casts)
 * and arithmetic with broadcasting. What a method does to a shape that is not modelled gives an unknown shape, so
 * a buffer built from it is reported rather than counted wrongly.
 */
import { dtypeOf } from '../python/plain';
import { UNKNOWN, type TensorV, type Value } from '../python/values';
import { castMethodDtype, isFloat, torchDtype, type DType } from '../vocabulary/dtypes';
import { factoryDtype } from './torchnn';

/** Factories of `torch.` the interpreter builds tensors with. */
export const TENSOR_FACTORIES = new Set([
  'ones',
  'zeros',
  'empty',
  'randn',
  'rand',
  'full',
  'arange',
  'tril',
  'triu',
  'eye',
  'ones_like',
  'zeros_like',
  'tensor',
]);

/** `torch.ones(...)`, `torch.arange(...)` and the other tensor factories: a tensor of the shape and dtype asked for. */
export function tensorFactory(name: string, args: Value[], kwargs: Record<string, Value>): Value {
  const t = newTensor(name, args, kwargs);
  // `torch.zeros(..., dtype=torch.float32)` in a model cast to bf16 stays float32: the dtype was chosen.
  return t.k === 'tensor' && dtypeOf(kwargs.dtype) ? { ...t, cast: true } : t;
}

function newTensor(name: string, args: Value[], kwargs: Record<string, Value>): Value {
  const dtypeV = kwargs.dtype;
  const dt =
    dtypeV?.k === 'ref' && dtypeV.name.startsWith('torch.')
      ? (torchDtype(dtypeV.name.slice(6)) ?? dtypeV.name.slice(6))
      : undefined;
  const dtype = factoryDtype(name, dt);
  if (name === 'tril' || name === 'triu' || name === 'ones_like' || name === 'zeros_like') {
    const t = args[0];
    return t?.k === 'tensor'
      ? { ...t, dtype: name.endsWith('like') && dt ? dtype : t.dtype, param: false }
      : { k: 'tensor', shape: null, dtype, param: false, trainable: false };
  }
  if (name === 'arange') {
    const n = args.map((a) => (a.k === 'num' ? a.v : null));
    const [start, end, step] = n.length === 1 ? [0, n[0], 1] : [n[0], n[1], n[2] ?? 1];
    const len =
      start !== null && end !== null && step ? Math.max(0, Math.ceil((end! - start!) / step!)) : null;
    return {
      k: 'tensor',
      shape: len === null ? null : [len],
      dtype: dt ? dtype : args.some((a) => a.k === 'num' && !a.int) ? 'float32' : 'int64',
      param: false,
      trainable: false,
    };
  }
  if (name === 'eye') {
    const a = args[0];
    const b = args[1] ?? a;
    return {
      k: 'tensor',
      shape: a?.k === 'num' && b?.k === 'num' ? [a.v, b.v] : null,
      dtype,
      param: false,
      trainable: false,
    };
  }
  if (name === 'tensor')
    return {
      k: 'tensor',
      shape: args[0]?.k === 'seq' ? [args[0].items.length] : [],
      dtype,
      param: false,
      trainable: false,
    };
  // ones(*size) / ones(size_tuple); full(size, value)
  const sizeArgs = name === 'full' ? args.slice(0, 1) : args;
  return { k: 'tensor', shape: shapeOf(sizeArgs), dtype, param: false, trainable: false };
}

export function shapeOf(args: Value[]): number[] | null {
  const a = args.length === 1 && args[0]?.k === 'seq' ? args[0].items : args;
  const out: number[] = [];
  for (const x of a) {
    if (x.k !== 'num' || !x.int || x.v < 0) return null;
    out.push(x.v);
  }
  return out;
}

/** Attributes of a tensor: its shape and dtype when known, else a reference its methods are called through. */
export function tensorAttr(t: TensorV, attr: string, text: string): Value {
  switch (attr) {
    case 'shape':
      return t.shape
        ? { k: 'seq', kind: 'tuple', items: t.shape.map((v) => ({ k: 'num', v, int: true })) }
        : UNKNOWN(text, 'a shape not known statically');
    case 'ndim':
      return t.shape
        ? { k: 'num', v: t.shape.length, int: true }
        : UNKNOWN(text, 'a shape not known statically');
    case 'dtype':
      return t.dtypeUnknown
        ? UNKNOWN(text, "the model's dtype")
        : { k: 'ref', name: `torch.${t.dtype}`, bound: true };
    case 'T':
    case 'mT':
      return { ...t, shape: t.shape ? [...t.shape].reverse() : null, param: false, buffer: undefined };
    case 'data':
      return { ...t, param: false, buffer: undefined };
    case 'requires_grad':
      // A parameter's flag (frozen ones are false); other tensors' depends on how they were made.
      return t.param ? { k: 'bool', v: t.trainable } : UNKNOWN(text, 'requires_grad of a tensor');
    default:
      // `buf.view(...)` reaches `method` through this reference.
      return { k: 'ref', name: `<tensor>.${attr}`, bound: false };
  }
}

/**
 * Tensor methods that keep or reshape the storage a buffer is built from (`torch.tril(...).view(1, 1, n, n)`):
 * reshapes, dimension inserts and removals, transposes, dtype casts. Any other method gives a tensor of unknown
 * shape, so a buffer made from it is reported rather than counted wrongly.
 */
export function tensorMethod(t: TensorV, name: string, args: Value[], kwargs: Record<string, Value>): Value {
  const out = (shape: number[] | null, dtype: DType = t.dtype): TensorV => ({
    ...t,
    shape,
    dtype,
    param: false,
    buffer: undefined,
  });
  const ints = (vs: Value[]): number[] | null => {
    const a = vs.length === 1 && vs[0]?.k === 'seq' ? vs[0].items : vs;
    return a.every((x) => x.k === 'num' && x.int) ? a.map((x) => (x as { v: number }).v) : null;
  };
  const dim = (d: Value | undefined, n: number): number | null =>
    d?.k === 'num' && d.int && d.v >= -n && d.v < n ? (d.v + n) % n : null;
  const shape = t.shape;
  switch (name) {
    case 'view':
    case 'reshape': {
      if (args.length === 1 && dtypeOf(args[0])) return out(null); // view(dtype) reinterprets the bytes
      const s = ints(args);
      if (!s || !shape) return out(null);
      const total = shape.reduce((a, b) => a * b, 1);
      const free = s.filter((x) => x === -1).length;
      if (free > 1 || s.some((x) => x < -1)) return out(null);
      const known = s.filter((x) => x !== -1).reduce((a, b) => a * b, 1);
      if (free === 1)
        return known > 0 && total % known === 0
          ? out(s.map((x) => (x === -1 ? total / known : x)))
          : out(null);
      return known === total ? out(s) : out(null);
    }
    case 'expand': {
      // -1 keeps a dimension; new leading dimensions come first.
      const s = ints(args);
      if (!s || !shape || s.length < shape.length) return out(null);
      const off = s.length - shape.length;
      const r = s.map((x, i) => (x === -1 && i >= off ? shape[i - off]! : x));
      return out(r.some((x) => x < 0) ? null : r);
    }
    case 'unsqueeze': {
      if (!shape) return out(null);
      const d = dim(args[0] ?? kwargs.dim, shape.length + 1);
      return d === null ? out(null) : out([...shape.slice(0, d), 1, ...shape.slice(d)]);
    }
    case 'squeeze': {
      if (!shape) return out(null);
      if (!args.length && !kwargs.dim) return out(shape.filter((x) => x !== 1));
      const d = dim(args[0] ?? kwargs.dim, shape.length);
      return d === null ? out(null) : out(shape[d] === 1 ? shape.filter((_, i) => i !== d) : shape);
    }
    case 'flatten':
      return args.length || Object.keys(kwargs).length || !shape
        ? out(null)
        : out([shape.reduce((a, b) => a * b, 1)]);
    case 't':
      return out(shape && shape.length <= 2 ? [...shape].reverse() : null);
    case 'transpose': {
      if (!shape) return out(null);
      const a = dim(args[0], shape.length);
      const b = dim(args[1], shape.length);
      if (a === null || b === null) return out(null);
      const s = [...shape];
      [s[a], s[b]] = [s[b]!, s[a]!];
      return out(s);
    }
    case 'permute': {
      const p = ints(args);
      if (!p || !shape || p.length !== shape.length) return out(null);
      const idx = p.map((x) => (x < 0 ? x + shape.length : x));
      return new Set(idx).size === shape.length && idx.every((x) => x >= 0 && x < shape.length)
        ? out(idx.map((x) => shape[x]!))
        : out(null);
    }
    case 'repeat': {
      const r = ints(args);
      if (!r || !shape || r.length < shape.length) return out(null);
      const s = [...Array<number>(r.length - shape.length).fill(1), ...shape];
      return out(s.map((x, i) => x * r[i]!));
    }
    case 'to':
    case 'type': {
      // to(dtype), to(device), to(device, dtype), to(other_tensor), to(dtype=...)
      const dt = dtypeOf(kwargs.dtype) ?? args.map(dtypeOf).find((x) => x);
      const other = args.find((a): a is TensorV => a.k === 'tensor');
      if (dt) return out(shape, dt);
      if (other) return out(shape, other.dtype);
      return out(shape); // a device
    }
    case 'float':
    case 'half':
    case 'bfloat16':
    case 'double':
    case 'long':
    case 'bool':
      return out(shape, castMethodDtype(name));
    case 'clone':
    case 'contiguous':
    case 'detach':
    case 'cuda':
    case 'cpu':
    case 'requires_grad_':
    case 'pin_memory':
    case 'fill_':
    case 'zero_':
    case 'normal_':
    case 'uniform_':
    case 'masked_fill':
    case 'masked_fill_':
      return out(shape);
    case 'mul':
    case 'mul_':
    case 'add':
    case 'add_':
    case 'div':
    case 'div_':
    case 'exp':
    case 'log':
    case 'sqrt':
    case 'cos':
    case 'sin':
    case 'neg':
    case 'abs': {
      const other = args[0]?.k === 'tensor' ? args[0] : undefined;
      return other ? out(broadcast(shape, other.shape)) : out(shape);
    }
    default:
      return out(null);
  }
}

/** `t * 2`, `1.0 / t`, `a + b` on tensors: the broadcast shape; a float result for true division. */
export function tensorArithmetic(a: Value, b: Value, op: string): TensorV {
  const t = (a.k === 'tensor' ? a : b) as TensorV;
  const shapeOfV = (v: Value): number[] | null =>
    v.k === 'tensor' ? v.shape : v.k === 'num' || v.k === 'bool' ? [] : null;
  const shape = op === '@' ? null : broadcast(shapeOfV(a), shapeOfV(b));
  const floats = (v: Value) => (v.k === 'tensor' ? isFloat(v.dtype) : v.k === 'num' && !v.int);
  const dtype: DType =
    op === '/' && !floats(a) && !floats(b)
      ? 'float32'
      : a.k === 'tensor' && b.k === 'tensor'
        ? a.dtype === b.dtype
          ? a.dtype
          : isFloat(a.dtype)
            ? a.dtype
            : b.dtype
        : !isFloat(t.dtype) && (floats(a) || floats(b))
          ? 'float32'
          : t.dtype;
  return { k: 'tensor', shape, dtype, param: false, trainable: false };
}

/** The shape two tensors broadcast to; null when unknown or incompatible. */
export function broadcast(a: number[] | null, b: number[] | null): number[] | null {
  if (!a || !b) return null;
  const n = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const x = a[a.length - n + i] ?? 1;
    const y = b[b.length - n + i] ?? 1;
    if (x !== y && x !== 1 && y !== 1) return null;
    out.push(x === 1 ? y : x);
  }
  return out;
}
