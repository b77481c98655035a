/**
 * Configuration files as plain data with the line of each key (YAML, JSON, TOML), and the readers of setting
 * values the framework readers share.
 */
import { findNodeAtLocation, getNodeValue, parseTree, type ParseError } from 'jsonc-parser';
import { parse as parseToml } from 'smol-toml';
import { isMap, LineCounter, parseDocument } from 'yaml';
import type { PlainValue } from '../python/plain';
import { torchDtype, type DType } from '../vocabulary/dtypes';
import type { Range } from '../vocabulary/range';
import type { SetupValues } from '../inputs/table';
import type { FrameworkPlan } from './types';

export type ConfigFormat = 'yaml' | 'json' | 'toml';

/** A configuration file as plain data, with the line of each key for lenses and findings. */
export interface ConfigDoc {
  file: string;
  format: ConfigFormat;
  text: string;
  data: Record<string, unknown>;
  /** 0-based line of the key at `path` (`['fsdp_config', 'fsdp_version']`), or undefined when absent. */
  line(path: string[]): number | undefined;
  /** The range of the key's line, or the file's first line when the key is absent. */
  rangeOf(path: string[]): Range;
  /** `file:line` (1-based) of a key, for assumptions. */
  where(path: string[]): string;
}

/** Files larger than this are not read as configurations. */
export const MAX_CONFIG_BYTES = 1024 * 1024;

export function formatOf(file: string): ConfigFormat | undefined {
  if (/\.ya?ml$/i.test(file)) return 'yaml';
  if (/\.jsonc?$/i.test(file)) return 'json';
  if (/\.toml$/i.test(file)) return 'toml';
  return undefined;
}

function lineOfOffset(text: string, offset: number): number {
  let line = 0;
  for (let i = text.indexOf('\n'); i >= 0 && i < offset; i = text.indexOf('\n', i + 1)) line++;
  return line;
}

function base(file: string, format: ConfigFormat, text: string, data: Record<string, unknown>) {
  const name = file.split(/[\\/]/).pop() ?? file;
  return (line: (path: string[]) => number | undefined): ConfigDoc => ({
    file,
    format,
    text,
    data,
    line,
    rangeOf(path) {
      const l = line(path) ?? 0;
      const lineText = text.split('\n')[l] ?? '';
      return { start: { line: l, character: 0 }, end: { line: l, character: lineText.length } };
    },
    where(path) {
      const l = line(path);
      return l === undefined ? name : `${name}:${l + 1}`;
    },
  });
}

/** Parses a YAML, JSON or TOML configuration; a syntax error comes back in words with its line. */
export function readConfigText(file: string, text: string): ConfigDoc | { error: string } {
  const format = formatOf(file);
  if (!format) return { error: 'not a YAML, JSON or TOML file' };
  if (text.length > MAX_CONFIG_BYTES) return { error: `larger than ${MAX_CONFIG_BYTES / 1024} KiB` };
  try {
    if (format === 'yaml') {
      const lc = new LineCounter();
      // YAML 1.1, as PyYAML reads it (`yaml.safe_load`, and OmegaConf's loader built on it), which every Python
      // framework here uses: `500_000` is an integer and `yes`/`on` are booleans there, a string and a string in
      // YAML 1.2.
      const doc = parseDocument(text, {
        lineCounter: lc,
        uniqueKeys: false,
        prettyErrors: false,
        version: '1.1',
      });
      if (doc.errors.length) {
        const e = doc.errors[0]!;
        return {
          error: `YAML syntax error at line ${lc.linePos(e.pos[0]).line}: ${e.message.split('\n')[0]}`,
        };
      }
      const data = doc.toJS({ maxAliasCount: 100 }) as unknown;
      if (!isRecord(data)) return { error: 'the YAML document is not a mapping' };
      return base(
        file,
        format,
        text,
        data,
      )((path) => {
        let node: unknown = doc.contents;
        let keyOffset: number | undefined;
        for (const key of path) {
          if (!isMap(node)) return undefined;
          const pair = node.items.find((p) => {
            const k = p.key as { value?: unknown } | null;
            return k !== null && typeof k === 'object' && String(k.value) === key;
          });
          if (!pair) return undefined;
          keyOffset = (pair.key as { range?: [number, number, number] }).range?.[0];
          node = pair.value;
        }
        return keyOffset === undefined ? undefined : lc.linePos(keyOffset).line - 1;
      });
    }
    if (format === 'json') {
      const errors: ParseError[] = [];
      const tree = parseTree(text, errors, { allowTrailingComma: true, disallowComments: false });
      if (!tree || errors.length)
        return {
          error: `JSON syntax error at line ${lineOfOffset(text, errors[0]?.offset ?? 0) + 1}`,
        };
      const data = getNodeValue(tree) as unknown;
      if (!isRecord(data)) return { error: 'the JSON document is not an object' };
      return base(
        file,
        format,
        text,
        data,
      )((path) => {
        const node = findNodeAtLocation(tree, path);
        const at = node?.parent?.type === 'property' ? node.parent.offset : node?.offset;
        return at === undefined ? undefined : lineOfOffset(text, at);
      });
    }
    const data = parseToml(text) as Record<string, unknown>;
    const lines = text.split('\n');
    return base(
      file,
      format,
      text,
      data,
    )((path) => {
      // `[a.b]` headers then `key = value` lines; dotted keys under a shorter header are matched too.
      const table = path.slice(0, -1).join('.');
      const key = path[path.length - 1]!;
      let current = '';
      for (let i = 0; i < lines.length; i++) {
        const l = lines[i]!.trim();
        const close = l.startsWith('[') ? l.indexOf(']') : -1;
        if (close > 0) {
          current = l
            .slice(l.startsWith('[[') ? 2 : 1, close)
            .replace(/\s+/g, '')
            .replace(/"/g, '');
          if (current === path.join('.')) return i;
          continue;
        }
        const m = /^("?)([\w.-]+)\1\s*=/.exec(l);
        if (!m) continue;
        const full = current ? `${current}.${m[2]}` : m[2]!;
        if (full === `${table ? `${table}.` : ''}${key}`) return i;
      }
      return undefined;
    });
  } catch (e) {
    if (e instanceof RangeError) return { error: `${format.toUpperCase()} nested too deeply to read` };
    const msg = e instanceof Error ? e.message.split('\n')[0]!.slice(0, 200) : String(e);
    return { error: `${format.toUpperCase()} syntax error: ${msg}` };
  }
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A value at a key path, or undefined. */
export function at(data: unknown, path: string[]): unknown {
  let cur = data;
  for (const k of path) {
    if (!isRecord(cur)) return undefined;
    cur = cur[k];
  }
  return cur;
}

/** A finite number (numbers written as strings in YAML included), or undefined; NaN and infinities are not. */
export function num(v: unknown): number | undefined {
  const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : NaN;
  return Number.isFinite(n) ? n : undefined;
}

/** A positive whole number within `max`, or undefined. */
export function posInt(v: unknown, max = 1 << 20): number | undefined {
  const n = num(v);
  return n !== undefined && Number.isInteger(n) && n >= 1 && n <= max ? n : undefined;
}

/** A value as the configuration writes it, for messages (`"many"`, `1e+308`, `NaN`). */
export function shown(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}...` : v);
  if (typeof v === 'number' || typeof v === 'boolean' || v === null) return String(v);
  return Array.isArray(v) ? 'a list' : 'a table';
}

/**
 * A count setting (a world size, a degree, a batch size): a positive whole number within `max`. A value that is
 * present but not one (NaN, 2.5, -3, 1e308, "many", a list) is noted in `notes` as ignored, with `fallback` saying
 * what is used instead, and gives undefined; an absent one gives undefined silently. `allow` lists values the
 * framework gives a meaning of its own (torchtitan's -1), returned as they are.
 */
export function countSetting(
  v: unknown,
  label: string,
  notes: string[],
  fallback: string,
  opts: { max?: number; allow?: number[] } = {},
): number | undefined {
  if (v === undefined || v === null) return undefined;
  const max = opts.max ?? 1 << 20;
  const n = posInt(v, max);
  if (n !== undefined) return n;
  const x = num(v);
  if (x !== undefined && opts.allow?.includes(x)) return x;
  notes.push(
    `${label} = ${shown(v)} is not a whole number from 1 to ${max.toLocaleString('en-US')}` +
      `${opts.allow?.length ? ` (or ${opts.allow.join(', ')})` : ''}: ignored, ${fallback}`,
  );
  return undefined;
}

/** YAML and JSON booleans, and the strings frameworks accept for them ("true", "True", "1"). */
export function bool(v: unknown): boolean | undefined {
  if (typeof v === 'boolean') return v;
  if (typeof v === 'number') return v !== 0;
  if (typeof v === 'string') {
    const t = v.trim().toLowerCase();
    if (['true', 'yes', '1', 'on'].includes(t)) return true;
    if (['false', 'no', '0', 'off', ''].includes(t)) return false;
  }
  return undefined;
}

export function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : undefined;
}

/** A list of strings from a YAML list or a comma-separated string. */
export function strList(v: unknown): string[] | undefined {
  if (Array.isArray(v)) return v.map((x) => str(x)).filter((x): x is string => !!x && x.trim() !== '');
  if (typeof v === 'string')
    return v
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  return undefined;
}

/** Setup values read from a configuration, each with where in the file it was written. */
/** Inputs whose value is the number written at their key (a world size is a product of degrees, not one key). */
const EDITABLE = new Set<keyof SetupValues>(['microBatch', 'seqLen', 'gradAccum']);

export function setupFrom(doc: ConfigDoc): {
  values: SetupValues;
  details: FrameworkPlan['details'];
  keys: NonNullable<FrameworkPlan['keys']>;
  set: <K extends keyof SetupValues>(k: K, v: SetupValues[K] | undefined, path: string[]) => void;
} {
  const values: SetupValues = {};
  const details: FrameworkPlan['details'] = {};
  const keys: NonNullable<FrameworkPlan['keys']> = {};
  const set = <K extends keyof SetupValues>(k: K, v: SetupValues[K] | undefined, path: string[]) => {
    if (v === undefined) return;
    values[k] = v;
    // A number read from a number (not from `${variables.x}` or an expression): an edit may write another there.
    const written = at(doc.data, path);
    if (EDITABLE.has(k) && typeof v === 'number' && (written === undefined || typeof written === 'number'))
      keys[k] = path;
    // A value the file does not write is the framework's default, and said so.
    // (A reader whose `where` already says so, torchtitan's Python registry, keeps its words.)
    const w = doc.where(path);
    details[k] =
      doc.line(path) === undefined && !/\s/.test(w)
        ? `the framework's default: ${path.join('.')} is not set in ${w}`
        : w;
  };
  return { values, details, keys, set };
}

/** `torch.bfloat16` (a name) as a dtype. */
export function refDtype(v: PlainValue | undefined): DType | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && 'ref' in v
    ? torchDtype(v.ref.split('.').pop()!)
    : undefined;
}
