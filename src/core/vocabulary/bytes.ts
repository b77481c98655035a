/**
 * Byte units and number formatting: how sizes, counts and times are written on every surface (decimal GB by
 * default, binary GiB as a setting; never both in one view), three significant figures throughout.
 */

/** Decimal gigabytes (10^9 bytes, as GPU vendors quote memory) or binary gibibytes (2^30, as PyTorch reports). */
export type ByteUnit = 'GB' | 'GiB';

const DECIMAL: [number, string][] = [
  [1e12, 'TB'],
  [1e9, 'GB'],
  [1e6, 'MB'],
  [1e3, 'KB'],
];
const BINARY: [number, string][] = [
  [2 ** 40, 'TiB'],
  [2 ** 30, 'GiB'],
  [2 ** 20, 'MiB'],
  [2 ** 10, 'KiB'],
];

/** Three significant figures, without exponent notation: 16.1, 0.436, 141, 1130. */
export function sig3(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  if (x === 0) return '0';
  const abs = Math.abs(x);
  const digits = Math.max(0, 2 - Math.floor(Math.log10(abs)));
  let s = x.toFixed(digits);
  // Rounding can carry into a new digit (99.96 -> "100.0"): drop what is now a fourth significant figure.
  if (digits > 0 && Math.abs(Number(s)) >= 10 ** (3 - digits)) s = x.toFixed(digits - 1);
  return s;
}

/**
 * A byte count with its unit: 16.1 GB, 0.436 GB, 1.13 TB. Sizes from a tenth of the unit up stay in GB (as the
 * worked examples write 0.436 GB); smaller ones step down to MB and KB.
 */
export function fmtBytes(bytes: number, unit: ByteUnit = 'GB'): string {
  const scale = unit === 'GB' ? DECIMAL : BINARY;
  const abs = Math.abs(bytes);
  if (abs >= scale[0]![0]) return `${sig3(bytes / scale[0]![0])} ${scale[0]![1]}`;
  if (abs >= scale[1]![0] / 10) return `${sig3(bytes / scale[1]![0])} ${scale[1]![1]}`;
  for (const [factor, name] of scale.slice(2)) if (abs >= factor) return `${sig3(bytes / factor)} ${name}`;
  return `${Math.round(bytes)} B`;
}

/** 8,030,261,248 */
export function fmtCount(n: number): string {
  // Digit grouping by hand: `toLocaleString` builds a number formatter per call, slow enough to show in a profile.
  const s = String(Math.round(n));
  return /e/.test(s) ? s : s.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** 8.03B, 218M, 4.1K: a parameter count at a glance. */
export function fmtParams(n: number): string {
  if (n >= 1e9) return `${sig3(n / 1e9)}B`;
  if (n >= 1e6) return `${sig3(n / 1e6)}M`;
  if (n >= 1e3) return `${sig3(n / 1e3)}K`;
  return String(n);
}

/** 12.3 ms, 1.05 s */
export function fmtSeconds(s: number): string {
  if (s >= 1) return `${sig3(s)} s`;
  if (s >= 1e-3) return `${sig3(s * 1e3)} ms`;
  return `${sig3(s * 1e6)} µs`;
}
