/**
 * Modules under construction as the interpreter builds them: creating, registering, copying, freezing and
 * casting `nn.Module` values the way PyTorch's own methods do, and turning a built module into the module tree
 * the estimator reads.
 */
import type { Node } from '../parsing/python';
import type { ClassV, ModV, TensorV, Value } from '../python/values';
import { MAX_TENSOR_ELEMENTS, type ModuleNode, numelOf } from '../model/tree';
import { isFloat, type DType } from '../vocabulary/dtypes';

/** Registers `child` as `name` under `parent` (PyTorch's `__setattr__` for modules). */
export function register(parent: ModV, name: string, child: ModV): void {
  // `nn.Module.add_module` raises KeyError for an empty name or one with a dot: the script would stop there.
  if (!name || name.includes('.')) {
    (parent.gaps ??= []).push(
      `a submodule named \`${name.slice(0, 40)}\`, which PyTorch refuses (add_module raises KeyError)`,
    );
    return;
  }
  parent.children.delete(name);
  parent.children.set(name, child);
}

export function classDef(cls: ClassV): Node {
  return cls.node.type === 'decorated_definition'
    ? (cls.node.childForFieldName('definition') ?? cls.node)
    : cls.node;
}

export function isDataclass(cls: ClassV): boolean {
  if (cls.node.type !== 'decorated_definition') return false;
  return cls.node.namedChildren.some(
    (d) => d.type === 'decorator' && /^@\s*(\w+\.)*dataclass\b/.test(d.text),
  );
}

export function newModule(className: string, cls: ClassV | null): ModV {
  return {
    k: 'mod',
    className,
    children: new Map(),
    params: new Map(),
    buffers: new Map(),
    attrs: new Map(),
    cls,
  };
}

export function cloneValue(v: Value): Value {
  if (v.k === 'obj') return { ...v, fields: new Map(v.fields) };
  if (v.k === 'dict') return { k: 'dict', entries: v.entries.map((e) => ({ ...e })) };
  if (v.k === 'mod') return cloneModule(v);
  return v;
}

/** A deep copy of a module with its own tensors (`copy.deepcopy(layer)`: the copies share nothing). */
export function cloneModule(m: ModV): ModV {
  return {
    ...m,
    children: new Map([...m.children].map(([k, c]) => [k, cloneModule(c)])),
    params: new Map([...m.params].map(([k, t]) => [k, t ? { ...t } : t])),
    buffers: new Map([...m.buffers].map(([k, b]) => [k, { ...b, t: { ...b.t } }])),
    attrs: new Map(m.attrs),
  };
}

/** `requires_grad_(False)`, in place: a parameter shared with another module is frozen there too, as in PyTorch. */
export function freeze(m: ModV): void {
  for (const p of m.params.values()) if (p) p.trainable = false;
  for (const c of m.children.values()) freeze(c);
}

/**
 * `module.to(dtype)`: every floating-point parameter and buffer below the module takes the dtype, in place (PyTorch
 * converts `param.data`, so a parameter shared with a module outside this one is cast there too). The dtype is
 * marked as set, so a cast back to float32 is kept apart from the model's default.
 */
export function castModule(m: ModV, dtype: DType): void {
  for (const p of m.params.values())
    if (p && isFloat(p.dtype)) {
      p.dtype = dtype;
      p.cast = true;
    }
  for (const b of m.buffers.values()) if (isFloat(b.t.dtype)) b.t = { ...b.t, dtype };
  for (const c of m.children.values()) castModule(c, dtype);
}

/** A module value standing for a built module tree (its children and class names; no tensors): for `len(model.layers)`. */
export function moduleFromTree(node: ModuleNode): ModV {
  const m = newModule(node.className, null);
  for (const c of node.children) m.children.set(c.name, moduleFromTree(c));
  // Its parameters as tensors: their shapes and whether they train (`m.weight.requires_grad`); the dtype of a
  // parameter that keeps the model's is not known here.
  for (const p of node.params)
    m.params.set(p.name, {
      k: 'tensor',
      shape: p.shape,
      dtype: p.dtype ?? 'float32',
      param: true,
      trainable: p.trainable,
      ...(p.dtype ? { cast: true } : { dtypeUnknown: true }),
    });
  return m;
}

/**
 * Whether an unknown value an attribute holds may be a module with parameters: a call of a class or a model
 * factory outside the project (`timm.create_model(...)`, `CLIPVisionModel(...)`), not a plain setting or a
 * tokenizer, config or processor.
 */
function mayBeModule(v: Value): v is Extract<Value, { k: 'unknown' }> {
  if (v.k !== 'unknown') return false;
  const q = /^a call of (\S+)$/.exec(v.why)?.[1];
  if (!q || (q.startsWith('torch.') && !q.startsWith('torch.nn.'))) return false;
  const last = q.split('.').pop() ?? '';
  if (
    /(Config|Tokenizer|TokenizerFast|Processor|FeatureExtractor|Logger|Path|Generator|Lock|Event)$/.test(last)
  )
    return false;
  return /^[A-Z]/.test(last) || /^(from_pretrained|from_config|create_model|build_model)$/.test(last);
}

/** The module tree of a constructed model: paths, shapes, and tied parameters marked as PyTorch dedups them. */
export function toModuleTree(m: ModV): { root: ModuleNode; unknownParams: string[]; gaps: string[] } {
  const seen = new Map<TensorV, string>();
  const unknownParams: string[] = [];
  const gaps: string[] = [];
  const build = (mod: ModV, name: string, path: string): ModuleNode => {
    const node: ModuleNode = { name, path, className: mod.className, params: [], buffers: [], children: [] };
    for (const g of mod.gaps ?? []) gaps.push(`${path || 'the model'}: ${g}`);
    for (const [attr, v] of mod.attrs)
      if (mayBeModule(v))
        gaps.push(
          `${path ? `${path}.` : ''}${attr} = \`${v.text.slice(0, 60)}\`, ${v.why} outside the project`,
        );
    for (const [pname, t] of mod.params) {
      if (!t) continue;
      const full = path ? `${path}.${pname}` : pname;
      if (!t.shape) {
        unknownParams.push(full);
        continue;
      }
      if (numelOf(t.shape) > MAX_TENSOR_ELEMENTS) {
        gaps.push(`parameter ${full} of ${t.shape.join(' x ')} is implausibly large`);
        continue;
      }
      const tied = seen.get(t);
      node.params.push({
        name: pname,
        shape: t.shape,
        numel: numelOf(t.shape),
        trainable: t.trainable,
        ...(t.dtype !== 'float32' || t.cast ? { dtype: t.dtype } : {}),
        ...(tied ? { tiedTo: tied } : {}),
      });
      if (!tied) seen.set(t, full);
    }
    for (const [bname, b] of mod.buffers)
      if (!b.t.shape) gaps.push(`buffer ${path ? `${path}.` : ''}${bname} has a shape not known statically`);
      else if (numelOf(b.t.shape) > MAX_TENSOR_ELEMENTS)
        gaps.push(
          `buffer ${path ? `${path}.` : ''}${bname} of ${b.t.shape.join(' x ')} is implausibly large`,
        );
      else
        node.buffers.push({
          name: bname,
          shape: b.t.shape,
          numel: numelOf(b.t.shape),
          dtype: b.t.dtype,
          persistent: b.persistent,
        });
    for (const [cname, c] of mod.children)
      node.children.push(build(c, cname, path ? `${path}.${cname}` : cname));
    return node;
  };
  return { root: build(m, '', ''), unknownParams, gaps };
}
