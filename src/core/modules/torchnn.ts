import type { DType } from '../model/tree';

/**
 * The parameters `torch.nn` layers create, from their constructor arguments (PyTorch's own definitions: a
 * weight of `[out, in]` for Linear, `[num, dim]` for Embedding, an affine weight and bias for LayerNorm).
 */
export interface LayerSpec {
  className: string;
  /** Parameter names and shapes; null when an argument is unknown. */
  params: { name: string; shape: number[] }[] | null;
  /** Why the shapes are unknown. */
  unknown?: string;
}

type Arg = number | boolean | string | number[] | null | undefined;

/** Positional parameter names of the layers, in order, as their constructors declare them. */
const SIGNATURES: Record<string, string[]> = {
  Linear: ['in_features', 'out_features', 'bias'],
  Bilinear: ['in1_features', 'in2_features', 'out_features', 'bias'],
  Embedding: ['num_embeddings', 'embedding_dim', 'padding_idx'],
  EmbeddingBag: ['num_embeddings', 'embedding_dim'],
  LayerNorm: ['normalized_shape', 'eps', 'elementwise_affine', 'bias'],
  RMSNorm: ['normalized_shape', 'eps', 'elementwise_affine'],
  GroupNorm: ['num_groups', 'num_channels', 'eps', 'affine'],
  BatchNorm1d: ['num_features', 'eps', 'momentum', 'affine', 'track_running_stats'],
  BatchNorm2d: ['num_features', 'eps', 'momentum', 'affine', 'track_running_stats'],
  Conv1d: ['in_channels', 'out_channels', 'kernel_size', 'stride', 'padding', 'dilation', 'groups', 'bias'],
  Conv2d: ['in_channels', 'out_channels', 'kernel_size', 'stride', 'padding', 'dilation', 'groups', 'bias'],
  Conv3d: ['in_channels', 'out_channels', 'kernel_size', 'stride', 'padding', 'dilation', 'groups', 'bias'],
  ConvTranspose2d: [
    'in_channels',
    'out_channels',
    'kernel_size',
    'stride',
    'padding',
    'output_padding',
    'groups',
    'bias',
  ],
  MultiheadAttention: [
    'embed_dim',
    'num_heads',
    'dropout',
    'bias',
    'add_bias_kv',
    'add_zero_attn',
    'kdim',
    'vdim',
    'batch_first',
  ],
  PReLU: ['num_parameters'],
};

/** Layers without parameters (and containers, handled by the interpreter). */
export const PARAMETERLESS = new Set([
  'Dropout',
  'Dropout1d',
  'Dropout2d',
  'Identity',
  'ReLU',
  'GELU',
  'SiLU',
  'Sigmoid',
  'Tanh',
  'Softmax',
  'LogSoftmax',
  'Mish',
  'LeakyReLU',
  'ELU',
  'Softplus',
  'Flatten',
  'Unflatten',
  'MaxPool1d',
  'MaxPool2d',
  'AvgPool1d',
  'AvgPool2d',
  'AdaptiveAvgPool1d',
  'AdaptiveAvgPool2d',
  'Upsample',
  'PixelShuffle',
  'CrossEntropyLoss',
  'MSELoss',
]);

export const CONTAINERS = new Set([
  'ModuleList',
  'ModuleDict',
  'Sequential',
  'ParameterList',
  'ParameterDict',
]);

export function isTorchLayer(name: string): boolean {
  return name in SIGNATURES || PARAMETERLESS.has(name) || CONTAINERS.has(name);
}

/** Binds positional and keyword arguments to a layer's parameter names. */
export function bindLayerArgs(name: string, args: Arg[], kwargs: Record<string, Arg>): Record<string, Arg> {
  const sig = SIGNATURES[name] ?? [];
  const out: Record<string, Arg> = {};
  sig.forEach((p, i) => {
    if (i < args.length) out[p] = args[i];
  });
  for (const [k, v] of Object.entries(kwargs)) out[k] = v;
  return out;
}

const dims = (v: Arg): number[] | null => {
  if (typeof v === 'number' && Number.isInteger(v) && v > 0) return [v];
  if (Array.isArray(v) && v.every((x) => Number.isInteger(x) && x > 0)) return v;
  return null;
};
const int = (v: Arg): number | null => (typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : null);
const flag = (v: Arg, dflt: boolean): boolean | null =>
  v === undefined ? dflt : typeof v === 'boolean' ? v : null;

/** The parameters a `torch.nn` layer creates. */
export function layerParams(name: string, a: Record<string, Arg>): LayerSpec {
  const unknown = (why: string): LayerSpec => ({ className: name, params: null, unknown: why });
  switch (name) {
    case 'Linear': {
      const i = int(a.in_features);
      const o = int(a.out_features);
      const b = flag(a.bias, true);
      if (i === null || o === null || b === null) return unknown('Linear with sizes not known statically');
      return {
        className: name,
        params: [{ name: 'weight', shape: [o, i] }, ...(b ? [{ name: 'bias', shape: [o] }] : [])],
      };
    }
    case 'Bilinear': {
      const [i1, i2, o] = [int(a.in1_features), int(a.in2_features), int(a.out_features)];
      if (i1 === null || i2 === null || o === null) return unknown('Bilinear sizes unknown');
      return {
        className: name,
        params: [
          { name: 'weight', shape: [o, i1, i2] },
          ...(flag(a.bias, true) ? [{ name: 'bias', shape: [o] }] : []),
        ],
      };
    }
    case 'Embedding':
    case 'EmbeddingBag': {
      const n = int(a.num_embeddings);
      const d = int(a.embedding_dim);
      if (n === null || d === null) return unknown('Embedding sizes unknown');
      return { className: name, params: [{ name: 'weight', shape: [n, d] }] };
    }
    case 'LayerNorm':
    case 'RMSNorm': {
      const s = dims(a.normalized_shape);
      const affine = flag(a.elementwise_affine, true);
      const bias = name === 'LayerNorm' ? flag(a.bias, true) : false;
      if (!s || affine === null || bias === null) return unknown(`${name} shape unknown`);
      if (!affine) return { className: name, params: [] };
      return {
        className: name,
        params: [{ name: 'weight', shape: s }, ...(bias ? [{ name: 'bias', shape: s }] : [])],
      };
    }
    case 'GroupNorm': {
      const c = int(a.num_channels);
      if (c === null) return unknown('GroupNorm channels unknown');
      return {
        className: name,
        params: flag(a.affine, true)
          ? [
              { name: 'weight', shape: [c] },
              { name: 'bias', shape: [c] },
            ]
          : [],
      };
    }
    case 'BatchNorm1d':
    case 'BatchNorm2d': {
      const c = int(a.num_features);
      if (c === null) return unknown('BatchNorm features unknown');
      return {
        className: name,
        params: flag(a.affine, true)
          ? [
              { name: 'weight', shape: [c] },
              { name: 'bias', shape: [c] },
            ]
          : [],
      };
    }
    case 'Conv1d':
    case 'Conv2d':
    case 'Conv3d':
    case 'ConvTranspose2d': {
      const i = int(a.in_channels);
      const o = int(a.out_channels);
      const n = name === 'Conv1d' ? 1 : name === 'Conv3d' ? 3 : 2;
      const k =
        typeof a.kernel_size === 'number' ? Array<number>(n).fill(a.kernel_size) : dims(a.kernel_size);
      const g = a.groups === undefined ? 1 : int(a.groups);
      if (i === null || o === null || !k || g === null || g === 0) return unknown(`${name} sizes unknown`);
      const w = name === 'ConvTranspose2d' ? [i, o / g, ...k] : [o, i / g, ...k];
      return {
        className: name,
        params: [{ name: 'weight', shape: w }, ...(flag(a.bias, true) ? [{ name: 'bias', shape: [o] }] : [])],
      };
    }
    case 'MultiheadAttention': {
      const e = int(a.embed_dim);
      if (e === null) return unknown('MultiheadAttention size unknown');
      const kd = a.kdim === undefined || a.kdim === null ? e : int(a.kdim);
      const vd = a.vdim === undefined || a.vdim === null ? e : int(a.vdim);
      const bias = flag(a.bias, true);
      if (kd === null || vd === null || bias === null) return unknown('MultiheadAttention sizes unknown');
      const same = kd === e && vd === e;
      const proj = same
        ? [{ name: 'in_proj_weight', shape: [3 * e, e] }]
        : [
            { name: 'q_proj_weight', shape: [e, e] },
            { name: 'k_proj_weight', shape: [e, kd] },
            { name: 'v_proj_weight', shape: [e, vd] },
          ];
      const extra = flag(a.add_bias_kv, false)
        ? [
            { name: 'bias_k', shape: [1, 1, e] },
            { name: 'bias_v', shape: [1, 1, e] },
          ]
        : [];
      // out_proj is a child Linear (NonDynamicallyQuantizableLinear); the interpreter adds it.
      return {
        className: name,
        params: [...proj, ...(bias ? [{ name: 'in_proj_bias', shape: [3 * e] }] : []), ...extra],
      };
    }
    case 'PReLU':
      return { className: name, params: [{ name: 'weight', shape: [int(a.num_parameters) ?? 1] }] };
    default:
      if (PARAMETERLESS.has(name)) return { className: name, params: [] };
      return unknown(`${name} is not modelled`);
  }
}

/** torch dtypes of tensor factories (`torch.ones(..., dtype=torch.int64)`); float32 unless told. */
export function factoryDtype(name: string, dtype: string | undefined): DType {
  if (
    dtype === 'bfloat16' ||
    dtype === 'float16' ||
    dtype === 'float64' ||
    dtype === 'int8' ||
    dtype === 'uint8'
  )
    return dtype;
  if (dtype === 'int64' || dtype === 'long') return 'int64';
  if (dtype === 'bool') return 'bool';
  return name === 'arange' ? 'int64' : 'float32';
}
