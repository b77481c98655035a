/**
 * How every surface says the same things (the CLI, the lens, the hover, the status bar, the advice and the
 * webview import these): where a peak happens, a GPU's short name, a count on whole nodes. Pure, with no import
 * but types, so the webview uses it as it is.
 */
import type { Phase, Verdict } from './fsdp';

export type { Verdict };

/** Where the step's peak happens, short: `at the loss`, `in backward of block 3`, `in the optimizer step`. */
export function peakWhere(at: { unit: string; phase: Phase } | null): string {
  if (!at) return '';
  if (at.phase === 'optimizer') return 'in the optimizer step';
  if (at.phase === 'loss') return 'at the loss';
  return `in ${at.phase} of ${at.unit || 'modules outside every unit'}`;
}

/** Where the peak happens, in full (the CLI's peak line). */
export function peakWhereInFull(at: { unit: string; phase: Phase } | null): string {
  if (!at) return '';
  if (at.phase === 'optimizer') return 'during the optimizer step';
  const what =
    at.phase === 'loss' ? 'the loss (logits at the turn from forward to backward)' : `the ${at.phase}`;
  return `during ${what}${at.unit ? ` of ${at.unit}` : ''}`;
}

/** `H100 SXM 80GB` for `NVIDIA H100 SXM 80GB`: a GPU's name without its vendor. */
export function shortGpu(name: string): string {
  return name.replace(/^NVIDIA (GeForce )?|^AMD Instinct /, '');
}

/** ` text` when there is text: for words that follow another. */
export function spaced(text: string): string {
  return text ? ` ${text}` : '';
}

/** `; 16 GPUs on 2 whole nodes of 8` when the smallest count leaves a node part-filled. */
export function wholeNodesText(
  min: { wholeNodes?: { worldSize: number; nodes: number; gpusPerNode: number } },
  lead: string,
): string {
  const n = min.wholeNodes;
  return n ? `${lead}${n.worldSize} GPUs on ${n.nodes} whole nodes of ${n.gpusPerNode}` : '';
}

/** Text a message quotes from a file or builds from one: at most `max` characters, an ellipsis marking the cut. */
export function clip(text: string, max = 400): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** A fit verdict in words: `fits`, `does not fit`, or `fit undecided` (parts of the model not counted). */
export function verdictWords(v: Verdict): string {
  return v === 'fits' ? 'fits' : v === 'short' ? 'does not fit' : 'fit undecided';
}

/** `at least ` before a figure that leaves parts of the model out. */
export function atLeast(partial: boolean): string {
  return partial ? 'at least ' : '';
}

/** `1 GPU`, `8 GPUs`: a count with its noun, plural when it is not one (`plural` for nouns not made with -s). */
export function count(n: number, noun: string, plural = `${noun}s`): string {
  return `${n.toLocaleString('en-US')} ${n === 1 ? noun : plural}`;
}

/** A plan's units in words: `33 units`, or `no FSDP` for a job that shards nothing (one GPU). */
export function unitsWords(api: string, n: number): string {
  return api === 'none' ? 'no FSDP' : count(n, 'unit');
}

/**
 * `a` or `an` before a name, by how it is said: `an NVIDIA H100`, `an AMD Instinct MI300X`, `an H200`,
 * `a GPU`, `a B200`. A leading letter said as a letter name starting with a vowel sound (F, H, L, M, N, R, S, X,
 * and the vowels) takes `an` in an acronym or model number; in a word, a leading vowel does.
 */
export function article(name: string): string {
  const word = name.trim().split(/\s+/)[0] ?? '';
  const acronym = word.length > 1 && (/^[A-Z0-9-]+$/.test(word) || /^[A-Z]\d/.test(word));
  const an = acronym ? /^[AEFHILMNORSX8]/.test(word) : /^[aeiou]/i.test(word);
  return `${an ? 'an' : 'a'} ${name}`;
}

/** Source text on one line (`(\n  a\n  if b\n)` → `(a if b)`), at most `max` characters: for a line of words. */
export function oneLine(text: string, max = 80): string {
  return clip(
    text
      .replace(/\s+/g, ' ')
      .replace(/([([{]) /g, '$1')
      .replace(/ ([)\]}])/g, '$1')
      .trim(),
    max,
  );
}

/** Items as a sentence lists them: `a`, `a and b`, `a, b and c`. */
export function listed(items: readonly string[]): string {
  return items.length < 2
    ? (items[0] ?? '')
    : `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`;
}

/**
 * Why a fit is undecided, in words: parallelism the figures do not model (then no verdict holds either way), or
 * parts of the model not counted (then a peak that fits is only a lower bound).
 */
export function undecidedWhy(e: {
  unmodelled?: readonly string[];
  undecided?: readonly string[];
  gaps: readonly string[];
  uncounted?: readonly string[];
  overcounted?: readonly string[];
  targetFit?: { headroomBytes: number };
}): string {
  if (e.undecided?.length)
    return `the analysis cannot decide ${listed(e.undecided)}: the figures are one arm's`;
  const left = [
    ...(e.gaps.length ? [`${count(e.gaps.length, 'part')} of the model not counted`] : []),
    ...(e.uncounted?.length ? [`${count(e.uncounted.length, 'part')} of the step's memory not counted`] : []),
  ];
  // Figures that fit as counted: what they count beyond the job does not matter, what they leave out does.
  const fitsAsCounted = (e.targetFit?.headroomBytes ?? -1) >= 0 && left.length > 0;
  if (!e.unmodelled?.length && e.overcounted?.length && !fitsAsCounted)
    return `the figures count more ${e.overcounted.every((o) => /paged optimizer/.test(o)) ? '' : 'activations '}than the job keeps on the GPU (${listed(e.overcounted)}): a peak this high may still fit${left.length ? `, and ${listed(left)}` : ''}`;
  return e.unmodelled?.length
    ? `${listed(e.unmodelled)} ${e.unmodelled.length === 1 ? 'is' : 'are'} not modelled: ${
        e.unmodelled.every((u) => /parallel/i.test(u))
          ? "the figures are FSDP's alone, with whole layers on each GPU"
          : 'the figures leave out what it changes'
      }`
    : listed(left);
}

/** Micro-batches in flight, whole or to a tenth (an interleaved rank's share of its stages: `5.5`). */
export function fmtInFlight(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
}

/** Pipeline stages' blocks `[from, to)` as a person reads them: `0-14, 63-70`, or `7` for one block. */
export function blockRanges(stages: readonly { from: number; to: number }[]): string {
  return stages.map((s) => (s.to - s.from > 1 ? `${s.from}-${s.to - 1}` : `${s.from}`)).join(', ');
}

/** Markdown's inline code spans as plain text (`model.layers` → model.layers), for places that show no Markdown. */
export function plainText(text: string): string {
  return text.replace(/`([^`\n]+)`/g, '$1');
}
