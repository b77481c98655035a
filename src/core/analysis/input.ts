import type { PythonGrammar } from '../parsing/python';
import { SourceFile } from '../parsing/source';
import type { FileFacts } from './facts';
import { scanFile } from './scan';

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
  try {
    let text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    return { ok: true, text };
  } catch {
    return { ok: false, reason: 'not valid UTF-8 text, not Python source' };
  }
}

/** Rejects text the editor holds that is too large to analyse without making the user wait. */
export function checkTextSize(text: string, maxBytes = DEFAULT_MAX_BYTES): string | null {
  // UTF-16 length is a lower bound of the UTF-8 size, and close to it for Python source.
  return text.length > maxBytes
    ? `file is ${formatSize(text.length)}, over the ${formatSize(maxBytes)} analysis limit`
    : null;
}

/** Parses and scans one file's text. */
export function scanText(grammar: PythonGrammar, path: string, text: string): FileFacts {
  const tree = grammar.parse(text);
  try {
    return scanFile(grammar, new SourceFile(path, text, tree));
  } finally {
    tree.delete();
  }
}

function formatSize(n: number): string {
  return n >= 1024 * 1024 ? `${(n / 1024 / 1024).toFixed(1)} MiB` : `${Math.ceil(n / 1024)} KiB`;
}
