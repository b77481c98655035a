/**
 * The configuration `@hydra.main(config_path=..., config_name=...)` hands the decorated function, composed as
 * Hydra composes it from the primary config and its defaults list (hydra/_internal/config_loader_impl.py,
 * `ConfigLoaderImpl._compose_config_from_defaults_list`): each entry's config merged in list order, a group entry
 * (`- model: llama`) placed under its package (the group's path, `model`), `_self_` where the primary config's own
 * keys go (last when it is not listed, since Hydra 1.1), `override`/`optional` read as plain entries. Command-line
 * overrides and interpolations are not applied. Bounded in depth and entries.
 */
import * as path from 'node:path';
import { scalar } from '../python/dotlist';

/** How deep defaults lists are followed, and how many entries one may have. */
const MAX_DEPTH = 4;
const MAX_ENTRIES = 32;

type Data = Record<string, unknown>;

const isObject = (v: unknown): v is Data => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The composed config of `configName` in `configDir` (a path the reader takes, relative to the script), or
 * undefined when the primary config cannot be read; `read` lists what it reads in `files`.
 */
export function composeHydra(
  read: (file: string) => unknown,
  configDir: string,
  configName: string,
  files: string[],
  overrides: readonly string[] = [],
  used: string[] = [],
): Data | undefined {
  // `model=llama8b` picks a group's option; `trainer.micro_batch=8` (perhaps `+`/`++`) sets a value afterwards.
  const choices = new Map<string, string>();
  const values: [string[], unknown][] = [];
  for (const o of overrides.slice(0, MAX_ENTRIES * 4)) {
    const m = /^(\+{0,2})([A-Za-z_][\w./-]*)=(.*)$/s.exec(o);
    if (!m || o.startsWith('~')) continue;
    const [, , key, raw] = m as unknown as [string, string, string, string];
    if (!key.includes('.') && !m[1]) choices.set(key, raw);
    else values.push([key.split('.'), scalar(raw)]);
  }
  const out = compose(read, configDir, configDir, configName, files, 0, choices, used);
  if (!out) return undefined;
  for (const [keys, v] of values) {
    let at: Data = out;
    for (const k of keys.slice(0, -1)) at = isObject(at[k]) ? (at[k] as Data) : (at[k] = {});
    at[keys[keys.length - 1]!] = v;
    used.push(`${keys.join('.')}=${String(v)}`);
  }
  // A choice that named no group of the defaults list is a value of the primary config (`seed=1`).
  for (const [k, v] of choices) {
    if (used.includes(`${k}=${v}`)) continue;
    out[k] = scalar(v);
    used.push(`${k}=${v}`);
  }
  return out;
}

function compose(
  read: (file: string) => unknown,
  root: string,
  dir: string,
  name: string,
  files: string[],
  depth: number,
  choices: ReadonlyMap<string, string>,
  used: string[],
): Data | undefined {
  if (depth > MAX_DEPTH) return undefined;
  const file = path.join(dir, name.endsWith('.yaml') ? name : `${name}.yaml`);
  const data = read(file);
  if (!isObject(data)) return undefined;
  files.push(file);
  const { defaults, ...own } = data;
  const out: Data = {};
  let selfMerged = false;
  for (const entry of Array.isArray(defaults) ? defaults.slice(0, MAX_ENTRIES) : []) {
    if (entry === '_self_') {
      merge(out, own);
      selfMerged = true;
    } else if (typeof entry === 'string') {
      // `- base_config`: another config of the same folder, at the same package.
      const sub = compose(
        read,
        root,
        entry.startsWith('/') ? root : dir,
        entry.replace(/^\//, ''),
        files,
        depth + 1,
        choices,
        used,
      );
      if (sub) merge(out, sub);
    } else if (isObject(entry)) {
      for (const [rawKey, option] of Object.entries(entry).slice(0, 1)) {
        if (option === null || option === undefined) continue;
        const key = rawKey.replace(/^(override|optional)\s+/, '').replace(/^(override|optional)\s+/, '');
        const [groupPart, pkg] = key.split('@') as [string, string | undefined];
        const absolute = groupPart.startsWith('/');
        const group = groupPart.replace(/^\//, '');
        const base = absolute ? root : dir;
        const packagePath =
          pkg === '_global_' ? [] : (pkg ?? group).replace(/^_group_\.?/, group).split(/[./]/);
        // The command line's choice of the primary config's group (`model=llama8b`) replaces the default.
        const chosen = depth === 0 ? choices.get(group) : undefined;
        if (chosen !== undefined) used.push(`${group}=${chosen}`);
        const picked = chosen !== undefined ? chosen : option;
        for (const o of (Array.isArray(picked) ? picked : [picked]).slice(0, MAX_ENTRIES)) {
          if (typeof o !== 'string') continue;
          const sub = compose(read, root, path.join(base, group), o, files, depth + 1, choices, used);
          if (sub) merge(out, nestUnder(packagePath.filter(Boolean), sub));
        }
      }
    }
  }
  if (!selfMerged) merge(out, own);
  return out;
}

function nestUnder(keys: string[], value: Data): Data {
  return keys.reduceRight<Data>((acc, k) => ({ [k]: acc }), value);
}

/** `source` merged into `target` as OmegaConf.merge does: mappings key by key, anything else replaced. */
function merge(target: Data, source: Data): void {
  for (const [k, v] of Object.entries(source)) {
    const t = target[k];
    if (isObject(t) && isObject(v)) merge(t, v);
    else target[k] = isObject(v) ? structuredClone(v) : v;
  }
}
