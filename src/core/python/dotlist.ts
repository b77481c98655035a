/**
 * Dotted `key=value` command lines as OmegaConf and Hydra read them (`python train.py config=a.yaml model.dim=512`):
 * OmegaConf.from_cli() is `from_dotlist(sys.argv[1:])` (omegaconf/omegaconf.py), which splits each item at its first
 * `=` and parses the value with OmegaConf's YAML loader (`DictConfig.merge_with_dotlist`). Bounded in items and depth.
 */

/** The most items of one command line read, and the deepest dotted key. */
const MAX_ITEMS = 256;
const MAX_KEY_DEPTH = 16;

type Data = Record<string, unknown>;

const isObject = (v: unknown): v is Data => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A command-line value as the YAML grammar reads the common cases: numbers, booleans, null, text. */
export function scalar(raw: string): unknown {
  if (/^[-+]?\d+(_\d+)*$/.test(raw)) return Number(raw.replace(/_/g, ''));
  if (/^[-+]?(\d+\.\d*|\.\d+|\d+)(e[-+]?\d+)?$/i.test(raw)) return Number(raw);
  if (/^(true|false)$/i.test(raw)) return raw.toLowerCase() === 'true';
  if (/^(null|~)$/i.test(raw)) return null;
  return raw.replace(/^(["'])(.*)\1$/s, '$2');
}

/**
 * The config a dotlist makes (`["model.dim=512", "steps=10"]` → `{model: {dim: 512}, steps: 10}`), each item used
 * listed in `used`. An item without `=` sets its key to null, as `merge_with_dotlist` does; Hydra's `+`/`~`
 * prefixes are not OmegaConf's and are skipped.
 */
export function fromDotlist(items: readonly string[], used: string[] = []): Data {
  const out: Data = {};
  for (const item of items.slice(0, MAX_ITEMS)) {
    const eq = item.indexOf('=');
    const key = eq < 0 ? item : item.slice(0, eq);
    if (!/^[A-Za-z_][\w-]*(\.[\w-]+)*$/.test(key)) continue;
    const keys = key.split('.');
    if (keys.length > MAX_KEY_DEPTH) continue;
    let at = out;
    for (const k of keys.slice(0, -1)) at = isObject(at[k]) ? (at[k] as Data) : (at[k] = {});
    at[keys[keys.length - 1]!] = eq < 0 ? null : scalar(item.slice(eq + 1));
    used.push(item);
  }
  return out;
}
