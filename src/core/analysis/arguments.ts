/** The arguments of a call as the scan reads them: positional, keyword and `**mapping` options mapped through the API's signature, each with its source range. */
import { up } from '../parsing/python';
import type { Node } from '../parsing/python';
import { type SourceFile, rangeOf } from '../parsing/source';
import type { Value } from '../python/values';
import { type ApiKind, POSITIONAL_PARAMS, classifyApi } from './apis';
import { MESH_SLICE, type Evaluator } from './evaluator';
import type { OptionFact } from './facts';
import { describe, interpretOption, type MeshValue } from './options';
import { wrapPolicy } from './wrapPolicy';

export interface Args {
  positional: Node[];
  keywords: Map<string, Node>;
  splats: Node[];
}

/** A call's arguments: keywords and splats from the `arguments` query, positional ones in order. */
export function readArgs(file: SourceFile, call: Node): Args {
  const out: Args = { positional: [], keywords: new Map(), splats: [] };
  const list = call.childForFieldName('arguments');
  if (list?.type !== 'argument_list') {
    if (list) out.positional.push(list); // `f(x for x in y)`: a generator argument
    return out;
  }
  const own = (n: Node) => up(up(n))?.id === list.id;
  for (const m of file.matches('arguments', list)) {
    const keyword = m.captures.find((c) => c.name === 'keyword')?.node;
    const value = m.captures.find((c) => c.name === 'value')?.node;
    const kwsplat = m.captures.find((c) => c.name === 'kwsplat')?.node;
    if (keyword && value && own(keyword)) out.keywords.set(keyword.text, value);
    else if (kwsplat && own(kwsplat)) out.splats.push(kwsplat);
  }
  for (const a of list.namedChildren)
    if (!['keyword_argument', 'dictionary_splat', 'list_splat', 'comment'].includes(a.type))
      out.positional.push(a);
  return out;
}

/** Options of a call by parameter name: positional arguments mapped through the API's signature, keywords, and `**dict` keys. */
export function readOptions(
  ev: Evaluator,
  args: Args,
  kind: ApiKind | null,
  skip: string[],
): { options: Record<string, OptionFact>; unresolvedSplats: string[] } {
  const options: Record<string, OptionFact> = {};
  const names = (kind && POSITIONAL_PARAMS[kind]) ?? [];
  const put = (name: string, node: Node, extra: Partial<OptionFact> = {}, val?: Value) => {
    if (skip.includes(name)) return;
    const value =
      name === 'mesh' || name === 'device_mesh'
        ? meshOption(ev, node)
        : name === 'auto_wrap_policy'
          ? wrapPolicy(val ?? ev.eval(node), ev)
          : interpretOption(name, val ?? ev.eval(node));
    options[name] = { text: node.text, value, range: rangeOf(node), ...extra };
  };
  args.positional.forEach((node, i) => {
    const name = names[i];
    if (name) put(name, node);
  });
  const unresolvedSplats: string[] = [];
  for (const splat of args.splats) {
    const v = ev.eval(splat);
    if (v.k !== 'dict') {
      unresolvedSplats.push(splat.text);
      continue;
    }
    for (const e of v.entries) {
      if (e.key.k !== 'str') continue;
      const node = e.valueNode;
      const extra: Partial<OptionFact> = { via: `**${splat.text}` };
      if (e.conditions) extra.conditions = e.conditions;
      if (node) put(e.key.v, node, extra, e.value);
      else if (!skip.includes(e.key.v))
        options[e.key.v] = {
          text: describe(e.value),
          value: e.key.v === 'auto_wrap_policy' ? wrapPolicy(e.value, ev) : interpretOption(e.key.v, e.value),
          range: rangeOf(splat),
          ...extra,
        };
    }
  }
  for (const [name, node] of args.keywords) put(name, node);
  return { options, unresolvedSplats };
}

/** The call whose callee ends with `id` (`fully_shard(...)`, `tdf.fully_shard(...)`), if any. */
export function callOf(id: Node): Node | null {
  let callee: Node = id;
  const p = up(id);
  if (p?.type === 'attribute' && p.childForFieldName('attribute')?.id === id.id) callee = p;
  const call = up(callee);
  if (call?.type === 'call' && call.childForFieldName('function')?.id === callee.id) return call;
  return null;
}

export function meshOption(ev: Evaluator, node: Node): MeshValue | null {
  let v = ev.eval(node);
  let dims: string[] | null = null;
  // A named slice, written in place or bound to a name (`tp_mesh = world_mesh["tp"]`).
  if (v.k === 'call' && v.callee === MESH_SLICE) {
    const key = v.args[1]!;
    if (key.k === 'str') dims = [key.v];
    else if (key.k === 'seq' && key.items.every((i) => i.k === 'str'))
      dims = key.items.map((i) => (i as { v: string }).v);
    else return null;
    v = v.args[0]!;
  }
  if (v.k !== 'call' || classifyApi(v.callee)?.kind !== 'init_device_mesh') return null;
  const shapeVal = v.kwargs.mesh_shape ?? v.args[1];
  const namesVal = v.kwargs.mesh_dim_names ?? v.args[2];
  let shape: (number | null)[] | null = null;
  if (shapeVal?.k === 'seq') shape = shapeVal.items.map((x) => (x.k === 'num' && x.int ? x.v : null));
  else if (shapeVal?.k === 'num') shape = [shapeVal.v];
  const names =
    namesVal?.k === 'seq' && namesVal.items.every((x) => x.k === 'str')
      ? namesVal.items.map((x) => (x as { v: string }).v)
      : null;
  if (dims) {
    if (!names) return { shape: dims.map(() => null), dimNames: dims, line: v.node.startPosition.row + 1 };
    const idx = dims.map((d) => names.indexOf(d));
    return {
      shape: idx.map((i) => (i >= 0 && shape ? (shape[i] ?? null) : null)),
      dimNames: dims,
      full: { shape, dimNames: names },
      line: v.node.startPosition.row + 1,
    };
  }
  return { shape, dimNames: names, line: v.node.startPosition.row + 1 };
}

/**
 * The argument a call passes for one parameter of the function it calls: by keyword, else by position, with
 * `params` as the call binds them (a method's `self` left out). Undefined when it passes none, or only through
 * `*args` / `**kwargs`.
 */
export function argumentFor(call: Node, params: readonly string[], name: string): Node | undefined {
  const args = call.childForFieldName('arguments')?.namedChildren.filter((c) => c.type !== 'comment') ?? [];
  const kw = args.find((a) => a.type === 'keyword_argument' && a.childForFieldName('name')?.text === name);
  if (kw) return kw.childForFieldName('value') ?? undefined;
  const i = params.indexOf(name);
  const node = i >= 0 ? args.filter((a) => a.type !== 'keyword_argument')[i] : undefined;
  return node && !node.type.includes('splat') ? node : undefined;
}
