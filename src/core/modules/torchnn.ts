/**
 * The torch.nn layers the interpreter builds: their parameters' and buffers' names and shapes from their
 * constructor arguments.
 */
import { isDType, torchDtype, type DType } from '../vocabulary/dtypes';

/**
 * The parameters `torch.nn` layers create, from their constructor arguments (PyTorch's own definitions: a
 * weight of `[out, in]` for Linear, `[num, dim]` for Embedding, an affine weight and bias for LayerNorm).
 */
export interface LayerSpec {
  className: string;
  /** Parameter names and shapes; null when an argument is unknown. */
  params: { name: string; shape: number[] }[] | null;
  /** Buffers the layer registers (BatchNorm's running statistics). */
  buffers?: { name: string; shape: number[]; dtype: DType }[];
  /** Why the shapes are unknown. */
  unknown?: string;
}

type Arg = number | boolean | string | number[] | null | undefined;

const NORM_SIG = ['num_features', 'eps', 'momentum', 'affine', 'track_running_stats'];
const CONV_TRANSPOSE_SIG = [
  'in_channels',
  'out_channels',
  'kernel_size',
  'stride',
  'padding',
  'output_padding',
  'groups',
  'bias',
  'dilation',
];
const TRANSFORMER_LAYER_SIG = [
  'd_model',
  'nhead',
  'dim_feedforward',
  'dropout',
  'activation',
  'layer_norm_eps',
  'batch_first',
  'norm_first',
  'bias',
];

/** Layers made of other layers, which the interpreter builds from their parts (`TransformerEncoderLayer`). */
export const COMPOSITES = new Set([
  'TransformerEncoderLayer',
  'TransformerDecoderLayer',
  'TransformerEncoder',
  'TransformerDecoder',
  'Transformer',
]);

/** Positional parameter names of the layers, in order, as their constructors declare them. */
const SIGNATURES: Record<string, string[]> = {
  Linear: ['in_features', 'out_features', 'bias'],
  Bilinear: ['in1_features', 'in2_features', 'out_features', 'bias'],
  Embedding: ['num_embeddings', 'embedding_dim', 'padding_idx'],
  EmbeddingBag: ['num_embeddings', 'embedding_dim'],
  LayerNorm: ['normalized_shape', 'eps', 'elementwise_affine', 'bias'],
  RMSNorm: ['normalized_shape', 'eps', 'elementwise_affine'],
  GroupNorm: ['num_groups', 'num_channels', 'eps', 'affine'],
  BatchNorm1d: NORM_SIG,
  BatchNorm2d: NORM_SIG,
  BatchNorm3d: NORM_SIG,
  SyncBatchNorm: NORM_SIG,
  InstanceNorm1d: NORM_SIG,
  InstanceNorm2d: NORM_SIG,
  InstanceNorm3d: NORM_SIG,
  // nn.RNN takes `nonlinearity` fourth in PyTorch 2.x (1.13 took it by keyword only, its fourth being `bias`).
  RNN: [
    'input_size',
    'hidden_size',
    'num_layers',
    'nonlinearity',
    'bias',
    'batch_first',
    'dropout',
    'bidirectional',
  ],
  LSTM: [
    'input_size',
    'hidden_size',
    'num_layers',
    'bias',
    'batch_first',
    'dropout',
    'bidirectional',
    'proj_size',
  ],
  GRU: ['input_size', 'hidden_size', 'num_layers', 'bias', 'batch_first', 'dropout', 'bidirectional'],
  RNNCell: ['input_size', 'hidden_size', 'bias', 'nonlinearity'],
  LSTMCell: ['input_size', 'hidden_size', 'bias'],
  GRUCell: ['input_size', 'hidden_size', 'bias'],
  TransformerEncoderLayer: TRANSFORMER_LAYER_SIG,
  TransformerDecoderLayer: TRANSFORMER_LAYER_SIG,
  TransformerEncoder: ['encoder_layer', 'num_layers', 'norm', 'enable_nested_tensor', 'mask_check'],
  TransformerDecoder: ['decoder_layer', 'num_layers', 'norm'],
  Transformer: [
    'd_model',
    'nhead',
    'num_encoder_layers',
    'num_decoder_layers',
    'dim_feedforward',
    'dropout',
    'activation',
    'custom_encoder',
    'custom_decoder',
    'layer_norm_eps',
    'batch_first',
    'norm_first',
    'bias',
  ],
  Conv1d: ['in_channels', 'out_channels', 'kernel_size', 'stride', 'padding', 'dilation', 'groups', 'bias'],
  Conv2d: ['in_channels', 'out_channels', 'kernel_size', 'stride', 'padding', 'dilation', 'groups', 'bias'],
  Conv3d: ['in_channels', 'out_channels', 'kernel_size', 'stride', 'padding', 'dilation', 'groups', 'bias'],
  ConvTranspose1d: CONV_TRANSPOSE_SIG,
  ConvTranspose2d: CONV_TRANSPOSE_SIG,
  ConvTranspose3d: CONV_TRANSPOSE_SIG,
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
  'AlphaDropout',
  'Dropout3d',
  'ReLU6',
  'SELU',
  'CELU',
  'GLU',
  'Hardswish',
  'Hardsigmoid',
  'Hardtanh',
  'LogSigmoid',
  'Softmin',
  'Softmax2d',
  'Softsign',
  'Tanhshrink',
  'Threshold',
  'MaxPool3d',
  'AvgPool3d',
  'AdaptiveMaxPool1d',
  'AdaptiveMaxPool2d',
  'AdaptiveMaxPool3d',
  'AdaptiveAvgPool3d',
  'PixelUnshuffle',
  'ChannelShuffle',
  'UpsamplingNearest2d',
  'UpsamplingBilinear2d',
  'ZeroPad2d',
  'ConstantPad1d',
  'ConstantPad2d',
  'ConstantPad3d',
  'ReflectionPad1d',
  'ReflectionPad2d',
  'ReplicationPad1d',
  'ReplicationPad2d',
  'CosineSimilarity',
  'PairwiseDistance',
  'NLLLoss',
  'L1Loss',
  'SmoothL1Loss',
  'HuberLoss',
  'KLDivLoss',
  'BCELoss',
]);

export const CONTAINERS = new Set([
  'ModuleList',
  'ModuleDict',
  'Sequential',
  'ParameterList',
  'ParameterDict',
]);

export function isTorchLayer(name: string): boolean {
  return name in SIGNATURES || PARAMETERLESS.has(name) || CONTAINERS.has(name) || COMPOSITES.has(name);
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
    case 'BatchNorm2d':
    case 'BatchNorm3d':
    case 'SyncBatchNorm':
    case 'InstanceNorm1d':
    case 'InstanceNorm2d':
    case 'InstanceNorm3d': {
      // _NormBase: weight and bias when affine; running_mean, running_var (float32) and num_batches_tracked (an
      // int64 scalar) as buffers when tracking running statistics. BatchNorm defaults both on, InstanceNorm off.
      const instance = name.startsWith('InstanceNorm');
      const c = int(a.num_features);
      const affine = flag(a.affine, !instance);
      const track = flag(a.track_running_stats, !instance);
      if (c === null || affine === null || track === null) return unknown(`${name} features unknown`);
      return {
        className: name,
        params: affine
          ? [
              { name: 'weight', shape: [c] },
              { name: 'bias', shape: [c] },
            ]
          : [],
        buffers: track
          ? [
              { name: 'running_mean', shape: [c], dtype: 'float32' },
              { name: 'running_var', shape: [c], dtype: 'float32' },
              { name: 'num_batches_tracked', shape: [], dtype: 'int64' },
            ]
          : [],
      };
    }
    case 'RNN':
    case 'LSTM':
    case 'GRU':
      return recurrent(name, a);
    case 'RNNCell':
    case 'LSTMCell':
    case 'GRUCell': {
      // RNNCellBase: weight_ih [gates·h, in], weight_hh [gates·h, h], and two biases of [gates·h].
      const i = int(a.input_size);
      const h = int(a.hidden_size);
      const bias = flag(a.bias, true);
      if (i === null || h === null || bias === null) return unknown(`${name} sizes unknown`);
      const g = GATES[name.replace('Cell', '')]! * h;
      return {
        className: name,
        params: [
          { name: 'weight_ih', shape: [g, i] },
          { name: 'weight_hh', shape: [g, h] },
          ...(bias
            ? [
                { name: 'bias_ih', shape: [g] },
                { name: 'bias_hh', shape: [g] },
              ]
            : []),
        ],
      };
    }
    case 'Conv1d':
    case 'Conv2d':
    case 'Conv3d':
    case 'ConvTranspose1d':
    case 'ConvTranspose2d':
    case 'ConvTranspose3d': {
      const i = int(a.in_channels);
      const o = int(a.out_channels);
      const n = name.endsWith('1d') ? 1 : name.endsWith('3d') ? 3 : 2;
      const k =
        typeof a.kernel_size === 'number' ? Array<number>(n).fill(a.kernel_size) : dims(a.kernel_size);
      const g = a.groups === undefined ? 1 : int(a.groups);
      if (i === null || o === null || !k || g === null || g === 0) return unknown(`${name} sizes unknown`);
      if (i % g || o % g) return unknown(`${name} channels not divisible by groups`);
      const w = name.startsWith('ConvTranspose') ? [i, o / g, ...k] : [o, i / g, ...k];
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

/** Gates per recurrent layer: the stacked weight is `gates·hidden` rows. */
const GATES: Record<string, number> = { RNN: 1, LSTM: 4, GRU: 3 };

/**
 * RNNBase's parameters, layer by layer and direction by direction as PyTorch registers them: `weight_ih_l{k}`
 * [gates·h, in_k], `weight_hh_l{k}` [gates·h, h_out], `bias_ih_l{k}`, `bias_hh_l{k}` [gates·h], and for an LSTM with
 * `proj_size` > 0 `weight_hr_l{k}` [proj, h], where h_out is proj_size (else h) and in_k is the input size for the
 * first layer and h_out·directions after it; the reverse direction's names end in `_reverse`.
 */
function recurrent(name: string, a: Record<string, Arg>): LayerSpec {
  const i = int(a.input_size);
  const h = int(a.hidden_size);
  const layers = a.num_layers === undefined ? 1 : int(a.num_layers);
  const bias = flag(a.bias, true);
  const bidir = flag(a.bidirectional, false);
  const proj = a.proj_size === undefined || name !== 'LSTM' ? 0 : int(a.proj_size);
  if (i === null || h === null || layers === null || bias === null || bidir === null || proj === null)
    return { className: name, params: null, unknown: `${name} sizes unknown` };
  if (layers > 10_000) return { className: name, params: null, unknown: `${name} with ${layers} layers` };
  const g = GATES[name]! * h;
  const hOut = proj > 0 ? proj : h;
  const dirs = bidir ? 2 : 1;
  const params: { name: string; shape: number[] }[] = [];
  for (let k = 0; k < layers; k++)
    for (let d = 0; d < dirs; d++) {
      const sfx = `_l${k}${d ? '_reverse' : ''}`;
      params.push(
        { name: `weight_ih${sfx}`, shape: [g, k === 0 ? i : hOut * dirs] },
        { name: `weight_hh${sfx}`, shape: [g, hOut] },
      );
      if (bias) params.push({ name: `bias_ih${sfx}`, shape: [g] }, { name: `bias_hh${sfx}`, shape: [g] });
      if (proj > 0) params.push({ name: `weight_hr${sfx}`, shape: [proj, h] });
    }
  return { className: name, params };
}

/** torch dtypes of tensor factories (`torch.ones(..., dtype=torch.int64)`); float32 unless told. */
export function factoryDtype(name: string, dtype: string | undefined): DType {
  const d = dtype === undefined ? undefined : (torchDtype(dtype) ?? (isDType(dtype) ? dtype : undefined));
  return d ?? (name === 'arange' ? 'int64' : 'float32');
}
