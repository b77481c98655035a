/**
 * OmegaConf's config calls as the code that builds a model sees them (omegaconf/omegaconf.py): `from_cli()` is the
 * script's command line as a dotlist, `load(path)` a YAML file of the project, `structured(Args())` the dataclass
 * instance, `merge(a, b, ...)` each layer merged over the ones before it key by key, `to_object`/`to_container`
 * the same keys. A layer not known makes the merged config unknown, with the layer's reason.
 */
import { fromData, stringItems } from '../analysis/evaluator';
import { fromDotlist } from '../python/dotlist';
import { setEntry, UNKNOWN, type ClassV, type Value } from '../python/values';

export interface ConfigContext {
  /** The script's command line, when the analysis was given it. */
  argv?: readonly string[];
  /** The data of a config file named as the code names it, or undefined. */
  readData?: (file: string) => unknown;
  note(s: string): void;
  /** An input the code reads that was not given. */
  missing(s: string): void;
  instantiate(cls: ClassV): Value;
}

const PREFIX = 'omegaconf.OmegaConf.';
/** How deep nested configs are merged or copied. */
const MAX_DEPTH = 12;

/** The value of an OmegaConf call, or undefined when `q` is not one this file models. */
export function omegaconfCall(q: string, args: Value[], text: string, ctx: ConfigContext): Value | undefined {
  if (!q.startsWith(PREFIX)) return undefined;
  const fn = q.slice(PREFIX.length);
  const [first] = args;
  switch (fn) {
    case 'from_cli':
    case 'from_dotlist': {
      const items = fn === 'from_cli' && !first ? ctx.argv : first && stringItems(first);
      if (!items) {
        const why =
          fn === 'from_cli'
            ? `the script's command line, which ${text.slice(0, 40)} reads, was not given (give it after \`--\`, as \`-- config=PATH key=value\`, or in the script as \`# fsdp: args="config=PATH"\`)`
            : 'a dotlist not known statically';
        if (fn === 'from_cli') ctx.missing(why);
        return UNKNOWN(text, why);
      }
      const used: string[] = [];
      const data = fromData(fromDotlist(items, used), 0);
      if (fn === 'from_cli' && used.length)
        ctx.note(`\`${text.slice(0, 60)}\` read from the script's arguments (${used.join(' ')})`);
      return data;
    }
    case 'load': {
      if (first?.k !== 'str')
        return UNKNOWN(text, first?.k === 'unknown' ? first.why : 'a path not known statically');
      const data = ctx.readData?.(first.v);
      if (data === undefined) return UNKNOWN(text, `${first.v} could not be read`);
      ctx.note(`${first.v} read by \`${text.slice(0, 60)}\``);
      return fromData(data, 0);
    }
    case 'create':
      return !first ? { k: 'dict', entries: [] } : mapping(first) ? deepCopy(first, 0) : undefined;
    case 'structured':
      if (first?.k === 'cls') return ctx.instantiate(first);
      return first && mapping(first) ? deepCopy(first, 0) : undefined;
    case 'merge': {
      if (!first) return { k: 'dict', entries: [] };
      let out = first.k === 'unknown' ? first : deepCopy(first, 0);
      for (const layer of args.slice(1)) out = mergeOver(out, layer, 0);
      return out;
    }
    case 'to_object':
    case 'to_container':
      return first;
  }
  return undefined;
}

/** A dict or a config object: merged key by key. */
function mapping(v: Value): v is Extract<Value, { k: 'dict' | 'obj' }> {
  return v.k === 'dict' || v.k === 'obj';
}

function keys(v: Extract<Value, { k: 'dict' | 'obj' }>): [string, Value][] {
  if (v.k === 'obj') return [...v.fields];
  return v.entries.flatMap((e) => (e.key.k === 'str' ? [[e.key.v, e.value] as [string, Value]] : []));
}

function get(v: Extract<Value, { k: 'dict' | 'obj' }>, key: string): Value | undefined {
  if (v.k === 'obj') return v.fields.get(key);
  return v.entries.find((e) => e.key.k === 'str' && e.key.v === key)?.value;
}

/** `source` merged over `target` (OmegaConf.merge): mappings key by key, anything else replacing what was there. */
function mergeOver(target: Value, source: Value, depth: number): Value {
  if (target.k === 'unknown') return target;
  if (source.k === 'unknown' || !mapping(target) || !mapping(source) || depth > MAX_DEPTH)
    return depth > MAX_DEPTH ? UNKNOWN('', 'configs nested too deeply') : source;
  const out = deepCopy(target, depth) as Extract<Value, { k: 'dict' | 'obj' }>;
  for (const [k, v] of keys(source)) {
    const t = get(out, k);
    const value = t && mapping(t) && mapping(v) ? mergeOver(t, v, depth + 1) : v;
    if (out.k === 'obj') out.fields.set(k, value);
    else setEntry(out.entries, { key: { k: 'str', v: k }, value });
  }
  return out;
}

/** A config copied with its nested configs, so that code changing one (`args.model.vocab = n`) changes only it. */
export function deepCopy(v: Value, depth: number): Value {
  if (depth > MAX_DEPTH) return v;
  if (v.k === 'obj')
    return { ...v, fields: new Map([...v.fields].map(([k, x]) => [k, deepCopy(x, depth + 1)])) };
  if (v.k === 'dict')
    return { k: 'dict', entries: v.entries.map((e) => ({ ...e, value: deepCopy(e.value, depth + 1) })) };
  return v;
}
