/**
 * The grammar of a `# fsdp: key=value ...` annotation's text after `fsdp:`: pairs, a value quoted when it holds
 * spaces (`args="--batch-size 8 --use-lora"`), and stray words. Parser-free, so the editor's own code reads it too.
 */

/** One pair (key, value) or a stray word. */
const TOKEN = /([^\s=]+)=("[^"]*"|'[^']*'|\S+)|\S+/g;

/** The `key=value` pairs of an annotation's text, quotes removed, and the tokens that are not pairs. */
export function annotationValues(body: string): { values: Record<string, string>; invalid: string[] } {
  const values: Record<string, string> = {};
  const invalid: string[] = [];
  for (const m of body.trim().matchAll(TOKEN)) {
    if (m[1] && m[2]) values[m[1]] = m[2].replace(/^(["'])(.*)\1$/s, '$2');
    else invalid.push(m[0]);
  }
  return { values, invalid };
}

/** Where the pair of `key` stands in an annotation's text (offsets of `key=value`), or undefined. */
export function annotationPairAt(body: string, key: string): { start: number; end: number } | undefined {
  for (const m of body.matchAll(TOKEN))
    if (m[1] === key && m[2]) return { start: m.index, end: m.index + m[0].length };
  return undefined;
}
