/**
 * The edit that sets one key of a configuration file (YAML, JSON, TOML) to a value, for fixes that change a
 * framework's config rather than explain it: the value replaced where the key is written, else the key added
 * under its parent (the parent too when missing). The text only changes where the key goes; comments, order and
 * layout stay. Null when the file's shape gives no safe place (a flow mapping, several documents, a parse error).
 */
import { modify } from 'jsonc-parser';
import { isMap, isScalar, parseAllDocuments, type Pair, type YAMLMap } from 'yaml';
import { formatOf, type ConfigFormat } from '../frameworks/configDoc';
import type { ConfigSetting, FrameworkPlan } from '../frameworks/types';
import type { Assumption } from '../vocabulary/source';
import { TextIndex } from './edits';
import type { TextEdit } from './types';

/** The edit that makes `setting.path` hold `setting.value` in `text`, or null when it cannot be placed safely. */
export function setConfigValue(text: string, format: ConfigFormat, setting: ConfigSetting): TextEdit | null {
  if (!setting.path.length) return null;
  try {
    if (format === 'json') return jsonEdit(text, setting);
    if (format === 'toml') return tomlEdit(text, setting);
    return yamlEdit(text, setting);
  } catch {
    return null;
  }
}

/** The setting as it reads in the file, written as the file itself writes its booleans (`True` in torchtune's). */
export function configValueText(
  text: string,
  format: ConfigFormat,
  value: boolean | string | number,
): string {
  if (typeof value === 'number') return String(value);
  if (typeof value === 'string') return JSON.stringify(value);
  if (
    format === 'yaml' &&
    /:[ \t]*(True|False)[ \t]*(#.*)?$/m.test(text) &&
    !/:[ \t]*(true|false)[ \t]*(#.*)?$/m.test(text)
  )
    return value ? 'True' : 'False';
  return value ? 'true' : 'false';
}

function jsonEdit(text: string, s: ConfigSetting): TextEdit | null {
  const index = new TextIndex(text);
  const indent = /\n([ \t]+)"/.exec(text)?.[1] ?? '  ';
  const edits = modify(text, s.path, s.value, {
    formattingOptions: {
      insertSpaces: !indent.startsWith('\t'),
      tabSize: indent.startsWith('\t') ? 1 : indent.length,
      eol: index.eol(),
    },
  });
  if (edits.length !== 1) return null;
  const e = edits[0]!;
  return {
    range: { start: index.positionAt(e.offset), end: index.positionAt(e.offset + e.length) },
    newText: e.content,
  };
}

/** TOML as torchtitan writes its jobs: `[table]` headers and `key = value` lines (a path of two keys at most). */
function tomlEdit(text: string, s: ConfigSetting): TextEdit | null {
  if (s.path.length > 2) return null;
  const index = new TextIndex(text);
  const eol = index.eol();
  const key = s.path[s.path.length - 1]!;
  const table = s.path.length === 2 ? s.path[0]! : null;
  const value = configValueText(text, 'toml', s.value);
  const esc = (w: string) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const header = /^\s*\[\s*([^\]]*?)\s*\]\s*(#.*)?$/;
  const keyLine = new RegExp(`^(\\s*${esc(key)}\\s*=\\s*)(.*?)(\\s*(#.*)?)$`);
  let inTable = table === null;
  let headerLine = -1;
  for (let line = 0; line < index.lineCount(); line++) {
    const t = index.lineText(line);
    const h = header.exec(t);
    if (h) {
      if (inTable && headerLine >= 0) break;
      if (table === null) break;
      inTable = h[1] === table;
      if (inTable) headerLine = line;
      continue;
    }
    const k = inTable ? keyLine.exec(t) : null;
    // A value that continues on later lines (an array, a multi-line string) is not replaced.
    if (k && !/^[[{]|^"""|^'''/.test(k[2]!)) {
      const start = k[1]!.length;
      return {
        range: { start: { line, character: start }, end: { line, character: start + k[2]!.length } },
        newText: value,
      };
    }
  }
  const pair = `${key} = ${value}`;
  if (headerLine >= 0) {
    const at = index.lineEnd(headerLine);
    return { range: { start: at, end: at }, newText: `${eol}${pair}` };
  }
  // No such table: a new one at the end; a top-level key before the first table.
  if (table === null) {
    const first = text.search(/^\s*\[/m);
    if (first >= 0) {
      const at = index.positionAt(first);
      return { range: { start: at, end: at }, newText: `${pair}${eol}` };
    }
  }
  const end = index.lineEnd(index.lineCount() - 1);
  const lead = text.length && !text.endsWith('\n') ? eol : '';
  const body = table === null ? `${pair}${eol}` : `${text.length ? eol : ''}[${table}]${eol}${pair}${eol}`;
  return { range: { start: end, end }, newText: lead + body };
}

function yamlEdit(text: string, s: ConfigSetting): TextEdit | null {
  const docs = parseAllDocuments(text);
  if (!Array.isArray(docs) || docs.length !== 1) return null;
  const doc = docs[0]!;
  if (doc.errors.length) return null;
  const index = new TextIndex(text);
  const eol = index.eol();
  const value = configValueText(text, 'yaml', s.value);
  const top = doc.contents;
  if (top !== null && (!isMap(top) || top.flow)) return null;
  // The deepest map on the path that is written, and the pair that holds it.
  let map = top as YAMLMap | null;
  let holder: Pair | null = null;
  let depth = 0;
  for (; depth < s.path.length && map; depth++) {
    const pair = map.items.find((p) => isScalar(p.key) && String(p.key.value) === s.path[depth]);
    if (!pair) break;
    if (depth === s.path.length - 1) {
      const v = pair.value;
      if (v === null || v === undefined) {
        // `key:` with nothing after it: the value goes after the colon.
        const keyEnd = isScalar(pair.key) && pair.key.range ? pair.key.range[1] : -1;
        if (keyEnd < 0) return null;
        const colon = text.indexOf(':', keyEnd);
        if (colon < 0) return null;
        const at = index.positionAt(colon + 1);
        return { range: { start: at, end: at }, newText: ` ${value}` };
      }
      if (!isScalar(v) || !v.range) return null;
      const [start, end] = v.range;
      if (start === end) {
        const at = index.positionAt(start);
        return { range: { start: at, end: at }, newText: ` ${value}` };
      }
      return { range: { start: index.positionAt(start), end: index.positionAt(end) }, newText: value };
    }
    if (!isMap(pair.value) || pair.value.flow) return null;
    holder = pair;
    map = pair.value;
  }
  // What is missing, from `depth` down, as block lines.
  const missing = s.path.slice(depth);
  const indentOf = (m: YAMLMap | null): string | null => {
    const first = m?.items[0]?.key;
    if (!isScalar(first) || !first.range) return null;
    const p = index.positionAt(first.range[0]);
    return index.lineText(p.line).slice(0, p.character);
  };
  const own = depth === 0 ? '' : indentOf(map);
  if (own === null || (depth > 0 && !/^[ ]*$/.test(own))) return null;
  const step = '  ';
  const lines = missing.map(
    (k, i) => `${own}${step.repeat(i)}${k}:${i === missing.length - 1 ? ` ${value}` : ''}`,
  );
  if (depth > 0 && holder && isScalar(holder.key) && holder.key.range) {
    // The first lines of the parent's block: after the line that opens it.
    const line = index.positionAt(holder.key.range[0]).line;
    const at = index.lineEnd(line);
    return { range: { start: at, end: at }, newText: lines.map((l) => eol + l).join('') };
  }
  // A new top-level key: at the end of the file.
  const end = index.lineEnd(index.lineCount() - 1);
  const last = index.lineText(index.lineCount() - 1);
  const lead = last.length ? eol : '';
  return { range: { start: end, end }, newText: lead + lines.join(eol) + eol };
}

/**
 * The edit that makes a framework configuration say an input (`checkpointing` full, a micro-batch, a sequence
 * length, a world size) at the key its reader takes it from, and the setting as written (`micro_batch_size: 2`).
 * Null when `file` is not the configuration, the reader knows no key for the input, something above the file (an
 * annotation, a flag, a setting, another file) decides it so the edit would change nothing, or the file gives no
 * safe place.
 */
export function configInputEdit(
  plan: Pick<FrameworkPlan, 'file' | 'keys' | 'checkpointingKey'>,
  file: string,
  text: string,
  assumptions: readonly Assumption[],
  input: string,
  value: unknown,
): { edit: TextEdit; written: string } | null {
  const format = formatOf(plan.file);
  if (!format || plan.file !== file) return null;
  const setting: ConfigSetting | undefined =
    input === 'checkpointing'
      ? value === 'full'
        ? plan.checkpointingKey
        : undefined
      : typeof value === 'number' && Number.isSafeInteger(value) && value > 0
        ? (() => {
            const path = plan.keys?.[input as keyof NonNullable<FrameworkPlan['keys']>];
            return path ? { path, value } : undefined;
          })()
        : undefined;
  if (!setting) return null;
  const source = assumptions.find((a) => a.key === input)?.source;
  const name = plan.file.split(/[\\/]/).pop() ?? plan.file;
  const d = source?.detail ?? '';
  const here =
    source?.kind === 'config' && (d === name || d.startsWith(`${name}:`) || d.includes(` ${name}`));
  if (!source || (source.kind !== 'default' && !here)) return null;
  const edit = setConfigValue(text, format, setting);
  if (!edit) return null;
  const shown = configValueText(text, format, setting.value);
  const key = setting.path[setting.path.length - 1]!;
  const written =
    format === 'toml'
      ? `[${setting.path.slice(0, -1).join('.')}] ${key} = ${shown}`
      : format === 'json'
        ? `"${key}": ${shown}`
        : `${key}: ${shown}`;
  return { edit, written };
}
