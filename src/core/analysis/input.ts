/**
 * Source text for the analysis: decoding bytes as Python source (PEP 263 coding lines, binary and size refusals)
 * and scanning one file's text.
 */
import { withBudget, WorkBudget } from '../vocabulary/budget';
import type { PythonGrammar } from '../parsing/python';
import { SourceFile } from '../parsing/source';
import type { FileFacts } from './facts';
import { scanFile, type ScanOptions } from './scan';

/** Files larger than this are not analysed unless a caller raises the cap (editor setting, CLI flag). */
export const DEFAULT_MAX_BYTES = 4 * 1024 * 1024;

export type DecodeResult = { ok: true; text: string } | { ok: false; reason: string };

/** Decodes file bytes as UTF-8 Python source, refusing binary and over-size input with a clear reason. */
export function decodeSource(bytes: Uint8Array, maxBytes = DEFAULT_MAX_BYTES): DecodeResult {
  if (bytes.length > maxBytes) {
    return {
      ok: false,
      reason: `file is ${formatSize(bytes.length)}, over the ${formatSize(maxBytes)} analysis limit`,
    };
  }
  const head = bytes.subarray(0, 8192);
  if (head.includes(0)) return { ok: false, reason: 'binary file (contains NUL bytes), not Python source' };
  const declared = declaredEncoding(bytes);
  try {
    let text = new TextDecoder(declared ?? 'utf-8', { fatal: true }).decode(bytes);
    if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    return { ok: true, text };
  } catch (e) {
    if (declared && e instanceof RangeError)
      return { ok: false, reason: `declares the encoding ${declared}, which fsdp-lens cannot decode` };
    return {
      ok: false,
      reason: declared
        ? `not valid ${declared} text as its coding line declares`
        : 'not valid UTF-8 text (and no coding line declares another encoding), not Python source',
    };
  }
}

/**
 * The encoding a `# -*- coding: latin-1 -*-` line declares in the first two lines (PEP 263), or null for
 * Python's default, UTF-8.
 */
/** Python's codec names as the WHATWG labels TextDecoder knows (`latin-1` → `latin1`, `cp1252` → `windows-1252`). */
function whatwgLabel(codec: string): string {
  const c = codec.toLowerCase().replace(/_/g, '-');
  if (/^(latin-?1|latin|l1|8859|iso-?8859-1)$/.test(c)) return 'latin1';
  const cp = /^cp-?(125\d)$/.exec(c);
  if (cp) return `windows-${cp[1]}`;
  return c;
}

function declaredEncoding(bytes: Uint8Array): string | null {
  const head = new TextDecoder('latin1').decode(bytes.subarray(0, 400)).split(/\r?\n|\r/, 2);
  for (const line of head) {
    const m = /^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)/.exec(line);
    if (m) return /^utf[-_]?8(?:[-_].*)?$/i.test(m[1]!) ? null : whatwgLabel(m[1]!);
    // The declaration may be on the second line only when the first is a comment or blank (a shebang).
    if (!/^[ \t\f]*(?:#.*)?$/.test(line)) break;
  }
  return null;
}

/** Rejects text the editor holds that is too large to analyse without making the user wait. */
export function checkTextSize(text: string, maxBytes = DEFAULT_MAX_BYTES): string | null {
  // UTF-16 length is a lower bound of the UTF-8 size, and close to it for Python source.
  return text.length > maxBytes
    ? `file is ${formatSize(text.length)}, over the ${formatSize(maxBytes)} analysis limit`
    : null;
}

/** Parses and scans one file's text, under the work budget of the analysis in progress (or one of its own). */
export function scanText(
  grammar: PythonGrammar,
  path: string,
  text: string,
  options: ScanOptions = {},
): FileFacts {
  const tree = grammar.parse(text);
  try {
    return withBudget(new WorkBudget(), () => scanFile(grammar, new SourceFile(path, text, tree), options));
  } finally {
    tree.delete();
  }
}

function formatSize(n: number): string {
  return n >= 1024 * 1024 ? `${(n / 1024 / 1024).toFixed(1)} MiB` : `${Math.ceil(n / 1024)} KiB`;
}
