/** The classes an activation-checkpointing `check_fn` admits, read from its text. */

/**
 * `lambda m: isinstance(m, Block)`, `lambda m: isinstance(m, (A, B))` or tests of one name joined by `or`: the
 * class names admitted (last segments). Null for anything else (a named function, other tests, an `and`), whose
 * admitted modules are not known.
 */
export function checkFnClasses(text: string): string[] | null {
  const m = /^\s*lambda\s+(\w+)\s*:\s*(.+?)\s*$/s.exec(text);
  if (!m) return null;
  const [, arg, body] = m as unknown as [string, string, string];
  const out: string[] = [];
  for (const part of body.split(/\s+or\s+/)) {
    const t = new RegExp(
      `^\\(?\\s*isinstance\\(\\s*${arg}\\s*,\\s*\\(?([\\w.\\s,]+?)\\)?\\s*\\)\\s*\\)?$`,
    ).exec(part.trim());
    if (!t) return null;
    const names = t[1]!
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    if (!names.length || names.some((n) => !/^[A-Za-z_][\w.]*$/.test(n))) return null;
    out.push(...names.map((n) => n.split('.').pop()!));
  }
  return out.length ? [...new Set(out)] : null;
}
