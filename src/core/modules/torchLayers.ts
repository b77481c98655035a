/**
 * torch.nn layers built by the interpreter: containers (Sequential, ModuleList, ModuleDict), every layer of
 * `torchnn.ts`'s table with PyTorch's parameter names and shapes, `dtype=` factory arguments, and the composite
 * transformer layers built from their parts as PyTorch's transformer.py does.
 */
import { MAX_TENSOR_ELEMENTS, numelOf } from '../model/tree';
import { dtypeOf } from '../python/plain';
import type { ModV, Value } from '../python/values';
import { isFloat } from '../vocabulary/dtypes';
import { castModule, cloneModule, newModule, register } from './moduleValues';
import { bindLayerArgs, COMPOSITES, CONTAINERS, isTorchLayer, layerParams } from './torchnn';

/** What building a layer needs from the interpreter: its notes, how to iterate values, the loop limit. */
export interface LayerContext {
  note(s: string): void;
  iterate(v: Value): Value[] | null;
  loop: number;
}

/** The torch.nn class a qualified name is (`torch.nn.Linear`), when the interpreter builds it itself. */
export function torchLayerName(q: string): string | null {
  for (const prefix of ['torch.nn.modules.linear.', 'torch.nn.modules.', 'torch.nn.']) {
    if (q.startsWith(prefix)) {
      const name = q.slice(q.lastIndexOf('.') + 1);
      return isTorchLayer(name) ? name : null;
    }
  }
  return null;
}

const int = (v: number): Value => ({ k: 'num', v, int: true });
const bool = (v: unknown): Value => ({ k: 'bool', v: v !== false });
const num3 = (i: number, o: number): Record<string, Value> => ({ in_features: int(i), out_features: int(o) });

/** A torch.nn layer the interpreter builds itself: its parameters and buffers as PyTorch's constructor makes them. */
export function torchLayer(
  ctx: LayerContext,
  name: string,
  args: Value[],
  kwargs: Record<string, Value>,
  text: string,
): Value {
  const m = newModule(name, null);
  if (CONTAINERS.has(name)) {
    const first = args[0];
    if (name === 'Sequential') {
      const items =
        args.length === 1 && first?.k === 'dict'
          ? first.entries.map((e) => [e.key, e.value] as const)
          : args.map((a, i) => [{ k: 'str', v: String(i) } as Value, a] as const);
      for (const [k, v] of items) if (v.k === 'mod' && k.k === 'str') register(m, k.v, v);
    } else if (name === 'ModuleList') {
      const items = first ? ctx.iterate(first) : [];
      if (first && !items)
        m.gaps = [
          `its modules are not known statically (\`${text.slice(0, 60)}\`${first.k === 'unknown' ? `: ${first.why}` : ''})`,
        ];
      (items ?? []).forEach((v, i) => v.k === 'mod' && register(m, String(i), v));
    } else if (name === 'ModuleDict') {
      if (first?.k === 'dict')
        for (const e of first.entries)
          if (e.key.k === 'str' && e.value.k === 'mod') register(m, e.key.v, e.value);
    }
    return m;
  }
  const plain = (v: Value): number | boolean | string | number[] | null | undefined =>
    v.k === 'num'
      ? v.v
      : v.k === 'bool'
        ? v.v
        : v.k === 'str'
          ? v.v
          : v.k === 'none'
            ? null
            : v.k === 'seq' && v.items.every((x) => x.k === 'num')
              ? v.items.map((x) => (x as { v: number }).v)
              : undefined;
  const bound = bindLayerArgs(
    name,
    args.map(plain),
    Object.fromEntries(Object.entries(kwargs).map(([k, v]) => [k, plain(v)])),
  );
  if (COMPOSITES.has(name)) {
    const c = compositeLayer(ctx, name, bound, args, kwargs, text);
    const dt = dtypeOf(kwargs.dtype);
    if (dt && c.k === 'mod') castModule(c, dt);
    return c;
  }
  const spec = layerParams(name, bound);
  if (!spec.params) {
    m.gaps = [`\`${text.slice(0, 60)}\`: ${spec.unknown}`];
    return m;
  }
  const huge = spec.params.find((p) => numelOf(p.shape) > MAX_TENSOR_ELEMENTS);
  if (huge) {
    m.gaps = [
      `\`${text.slice(0, 60)}\`: a ${huge.shape.join(' x ')} ${huge.name} is implausibly large (more than ${MAX_TENSOR_ELEMENTS.toExponential(1)} elements)`,
    ];
    return m;
  }
  // `nn.Linear(..., dtype=torch.bfloat16)`: the factory kwarg every torch.nn layer takes.
  const dtype = dtypeOf(kwargs.dtype);
  for (const p of spec.params)
    m.params.set(p.name, {
      k: 'tensor',
      shape: p.shape,
      dtype: dtype ?? 'float32',
      param: true,
      trainable: true,
      ...(dtype ? { cast: true } : {}),
    });
  for (const b of spec.buffers ?? [])
    m.buffers.set(b.name, {
      t: {
        k: 'tensor',
        shape: b.shape,
        dtype: dtype && isFloat(b.dtype) ? dtype : b.dtype,
        param: false,
        trainable: false,
      },
      persistent: true,
    });
  if (name === 'MultiheadAttention') {
    const e = bound.embed_dim as number;
    const out = newModule('NonDynamicallyQuantizableLinear', null);
    out.params.set('weight', {
      k: 'tensor',
      shape: [e, e],
      dtype: 'float32',
      param: true,
      trainable: true,
    });
    if (bound.bias !== false)
      out.params.set('bias', { k: 'tensor', shape: [e], dtype: 'float32', param: true, trainable: true });
    if (dtype) castModule(out, dtype);
    register(m, 'out_proj', out);
  }
  return m;
}

/**
 * torch.nn's transformer layers, built from their parts as PyTorch's transformer.py does. An encoder layer holds
 * `self_attn` (MultiheadAttention), `linear1` [ff, d], `linear2` [d, ff], `norm1`, `norm2`; a decoder layer adds
 * `multihead_attn` and `norm3`. TransformerEncoder/Decoder hold `num_layers` deep copies of the layer given and
 * an optional final `norm`; nn.Transformer builds one of each with a final LayerNorm.
 */
function compositeLayer(
  ctx: LayerContext,
  name: string,
  a: Record<string, unknown>,
  args: Value[],
  kwargs: Record<string, Value>,
  text: string,
): Value {
  const m = newModule(name, null);
  const num = (k: string, dflt: number): number | null => {
    const v = a[k];
    if (v === undefined || v === null) return dflt;
    return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : null;
  };
  const bias = a.bias === undefined ? true : a.bias;
  const lin = (i: number, o: number) =>
    torchLayer(ctx, 'Linear', [], { ...num3(i, o), bias: bool(bias) }, text);
  const norm = (d: number) =>
    torchLayer(ctx, 'LayerNorm', [], { normalized_shape: int(d), bias: bool(bias) }, text);
  const layer = (decoder: boolean, d: number, h: number, ff: number): ModV => {
    const l = newModule(decoder ? 'TransformerDecoderLayer' : 'TransformerEncoderLayer', null);
    const attn = () =>
      torchLayer(ctx, 'MultiheadAttention', [int(d), int(h)], { bias: bool(bias) }, text) as ModV;
    register(l, 'self_attn', attn());
    if (decoder) register(l, 'multihead_attn', attn());
    register(l, 'linear1', lin(d, ff) as ModV);
    register(l, 'dropout', newModule('Dropout', null));
    register(l, 'linear2', lin(ff, d) as ModV);
    for (const n of decoder ? ['norm1', 'norm2', 'norm3'] : ['norm1', 'norm2'])
      register(l, n, norm(d) as ModV);
    for (const n of decoder ? ['dropout1', 'dropout2', 'dropout3'] : ['dropout1', 'dropout2'])
      register(l, n, newModule('Dropout', null));
    return l;
  };
  const unknown = (why: string) => {
    ctx.note(`${text.slice(0, 60)}: ${why}; its parameters are not counted`);
    return m;
  };
  const stack = (
    kind: string,
    proto: Value | undefined,
    n: number | null,
    final: Value | undefined,
  ): ModV | null => {
    if (proto?.k !== 'mod' || n === null || n > ctx.loop) return null;
    const s = newModule(kind, null);
    const list = newModule('ModuleList', null);
    for (let i = 0; i < n; i++) register(list, String(i), cloneModule(proto));
    register(s, 'layers', list);
    if (final?.k === 'mod') register(s, 'norm', final);
    return s;
  };
  if (name === 'TransformerEncoderLayer' || name === 'TransformerDecoderLayer') {
    const d = num('d_model', -1);
    const h = num('nhead', -1);
    const ff = num('dim_feedforward', 2048);
    if (d === null || d < 0 || h === null || h < 0 || ff === null || typeof bias !== 'boolean')
      return unknown(`${name} sizes unknown`);
    const l = layer(name === 'TransformerDecoderLayer', d, h, ff);
    return l;
  }
  if (name === 'TransformerEncoder' || name === 'TransformerDecoder') {
    const proto = args[0] ?? kwargs.encoder_layer ?? kwargs.decoder_layer;
    const s = stack(name, proto, num('num_layers', -1), args[2] ?? kwargs.norm);
    return s ?? unknown(`${name} with a layer or count not known statically`);
  }
  // nn.Transformer
  const d = num('d_model', 512);
  const h = num('nhead', 8);
  const ne = num('num_encoder_layers', 6);
  const nd = num('num_decoder_layers', 6);
  const ff = num('dim_feedforward', 2048);
  if (d === null || h === null || ne === null || nd === null || ff === null || typeof bias !== 'boolean')
    return unknown('Transformer sizes unknown');
  if (
    (kwargs.custom_encoder && kwargs.custom_encoder.k !== 'none') ||
    (kwargs.custom_decoder && kwargs.custom_decoder.k !== 'none') ||
    args.length > 7
  )
    return unknown('Transformer with a custom encoder or decoder');
  const enc = stack('TransformerEncoder', layer(false, d, h, ff), ne, norm(d));
  const dec = stack('TransformerDecoder', layer(true, d, h, ff), nd, norm(d));
  if (!enc || !dec) return unknown('Transformer too deep to follow');
  register(m, 'encoder', enc);
  register(m, 'decoder', dec);
  return m;
}
