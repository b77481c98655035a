/**
 * Methods called on values the interpreter tracks: a module's registration methods (`append`, `add_module`,
 * `register_buffer`), its casts (`to`, `half`) and freezing, dict and list methods, and tensor methods.
 */
import { stringMethod } from '../python/strings';
import { dtypeOf } from '../python/plain';
import { LIMITS, sameKey, type Value, setEntry } from '../python/values';
import { castMethodDtype } from '../vocabulary/dtypes';
import { castModule, freeze, register } from './moduleValues';
import { tensorMethod } from './tensors';
import type { LayerContext } from './torchLayers';

/** Methods on values the interpreter tracks; undefined when not one of them. */
export function valueMethod(
  ctx: LayerContext,
  target: Value,
  name: string,
  args: Value[],
  kwargs: Record<string, Value>,
  text: string,
): Value | undefined {
  if (target.k === 'str') return stringMethod(target.v, name, args, text);
  if (target.k === 'mod') {
    switch (name) {
      case 'append':
        if (args[0]?.k === 'mod') register(target, String(target.children.size), args[0]);
        return { k: 'none' };
      case 'extend':
        for (const m of (args[0] && ctx.iterate(args[0])) ?? [])
          if (m.k === 'mod') register(target, String(target.children.size), m);
        return { k: 'none' };
      case 'add_module':
      case 'register_module':
        if (args[0]?.k === 'str' && args[1]?.k === 'mod') register(target, args[0].v, args[1]);
        return { k: 'none' };
      case 'register_buffer': {
        const n = args[0];
        const t = args[1] ?? kwargs.tensor;
        const persistent = kwargs.persistent ?? args[2];
        if (n?.k === 'str') {
          if (t?.k === 'tensor' && t.shape)
            target.buffers.set(n.v, { t, persistent: !(persistent?.k === 'bool' && !persistent.v) });
          else if (t?.k !== 'none')
            ctx.note(`buffer ${n.v} of ${target.className} has a shape not known statically: not counted`);
        }
        return { k: 'none' };
      }
      case 'register_parameter':
        if (args[0]?.k === 'str' && args[1]?.k === 'tensor') target.params.set(args[0].v, args[1]);
        return { k: 'none' };
      case 'items':
        return {
          k: 'seq',
          kind: 'list',
          items: [...target.children].map(([k, m]) => ({
            k: 'seq',
            kind: 'tuple',
            items: [{ k: 'str', v: k }, m],
          })),
        };
      case 'values':
      case 'children':
        return { k: 'seq', kind: 'list', items: [...target.children.values()] };
      case 'keys':
        return {
          k: 'seq',
          kind: 'list',
          items: [...target.children.keys()].map((k) => ({ k: 'str', v: k })),
        };
      case 'to':
      case 'type':
      case 'half':
      case 'bfloat16':
      case 'float':
      case 'double': {
        // Module._apply: floating-point parameters and buffers take the dtype; integer buffers keep theirs.
        const dt =
          name === 'to' || name === 'type'
            ? (dtypeOf(kwargs.dtype) ?? args.map(dtypeOf).find((x) => x))
            : castMethodDtype(name);
        if (dt) castModule(target, dt);
        else if (kwargs.dtype && kwargs.dtype.k !== 'none')
          // A positional argument is usually a device (`model.to(device)`); only `dtype=` is surely a cast.
          ctx.note(`${text.slice(0, 60)}: the dtype it casts to is not known statically`);
        return target;
      }
      case 'apply':
      case 'init_weights':
      case '_init_weights':
      case 'reset_parameters':
        return { k: 'none' };
      case 'cuda':
      case 'cpu':
      case 'train':
      case 'eval':
      case 'requires_grad_':
        if (name === 'requires_grad_' && args[0]?.k === 'bool' && !args[0].v) freeze(target);
        return target;
      default:
        return undefined;
    }
  }
  if (target.k === 'dict') {
    if (name === 'get') {
      const e = target.entries.find((x) => args[0] !== undefined && sameKey(x.key, args[0]));
      return e ? e.value : (args[1] ?? { k: 'none' });
    }
    if (name === 'items')
      return {
        k: 'seq',
        kind: 'list',
        items: target.entries.map((e) => ({ k: 'seq', kind: 'tuple', items: [e.key, e.value] })),
      };
    if (name === 'values') return { k: 'seq', kind: 'list', items: target.entries.map((e) => e.value) };
    if (name === 'keys') return { k: 'seq', kind: 'list', items: target.entries.map((e) => e.key) };
    if (name === 'copy') return { k: 'dict', entries: [...target.entries] };
    return undefined;
  }
  if (target.k === 'seq' && (name === 'append' || name === 'extend') && target.kind === 'list') {
    const more = name === 'append' ? (args[0] ? [args[0]] : []) : ((args[0] && ctx.iterate(args[0])) ?? []);
    // A list grown past the value model's limit stops growing (what it holds is then not all there is).
    if (target.items.length + more.length <= LIMITS.items) target.items.push(...more);
    else ctx.note(`${text.slice(0, 60)}: a list grown past ${LIMITS.items} items is not followed`);
    return { k: 'none' };
  }
  if (target.k === 'tensor') return tensorMethod(target, name, args, kwargs);
  return undefined;
}

/** `obj.attr = v`: modules register submodules and parameters as PyTorch's `__setattr__` does. */
export function setAttribute(ctx: LayerContext, obj: Value, attr: string, v: Value): void {
  if (obj.k === 'mod') {
    if (v.k === 'mod') {
      obj.params.delete(attr);
      register(obj, attr, v);
    } else if (v.k === 'tensor' && (v.param || obj.params.has(attr))) {
      obj.children.delete(attr);
      obj.params.set(attr, v.param ? v : { ...v, param: true });
    } else if (v.k === 'none' && obj.params.has(attr)) obj.params.set(attr, null);
    else if (v.k === 'tensor' && v.buffer) {
      // Registered, it is a plain tensor again: `self.y = self.x` does not make a second buffer.
      if (v.shape) obj.buffers.set(attr, { t: { ...v, buffer: undefined }, persistent: v.buffer.persistent });
      else ctx.note(`buffer ${attr} of ${obj.className} has a shape not known statically: not counted`);
    } else if (v.k === 'tensor' && obj.buffers.has(attr))
      obj.buffers.set(attr, { t: v, persistent: obj.buffers.get(attr)!.persistent });
    else obj.attrs.set(attr, v);
  } else if (obj.k === 'obj') obj.fields.set(attr, v);
  else if (obj.k === 'dict') setEntry(obj.entries, { key: { k: 'str', v: attr }, value: v });
}
