/** "Did you mean": the names closest to one that was mistyped, for every surface that refuses a name. */

/** Levenshtein distance between two strings (insertions, deletions and substitutions each cost one). */
export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++)
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length]!;
}

/** The longest name a suggestion is computed for: past it, a typed word is not a typo of a name. */
const MAX_TYPED = 200;

/**
 * The candidates within a few typos of `typed` (a third of its length, at least 1 and at most 3; case ignored),
 * closest first, at most `max`. A candidate that starts with what was typed (`--form` for `--format`) counts too.
 */
export function closest(typed: string, candidates: readonly string[], max = 3): string[] {
  const t = typed.toLowerCase();
  if (!t || t.length > MAX_TYPED) return [];
  const limit = Math.min(3, Math.max(1, Math.floor(t.length / 3)));
  const scored: { name: string; score: number }[] = [];
  for (const c of new Set(candidates)) {
    const k = c.toLowerCase();
    if (c === typed) continue;
    const d = editDistance(t, k);
    const prefix = t.length >= 3 && k.startsWith(t);
    if (d <= limit || prefix) scored.push({ name: c, score: prefix ? Math.min(d, 1) : d });
  }
  return scored
    .sort((a, b) => a.score - b.score || a.name.localeCompare(b.name))
    .slice(0, max)
    .map((s) => s.name);
}

/** ` (did you mean "x"?)`, ` (did you mean "x" or "y"?)`, or nothing when no candidate is close. */
export function didYouMean(typed: string, candidates: readonly string[], quote = '"'): string {
  const c = closest(typed, candidates, 2).map((x) => `${quote}${x}${quote}`);
  return c.length ? ` (did you mean ${c.join(' or ')}?)` : '';
}
