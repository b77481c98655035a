/**
 * Solving for what fits: the largest micro-batch and the longest sequence whose estimate fits each GPU of the
 * catalog, the smallest world size checked against the estimate there, and the changes that make a plan fit
 * ranked by the step time they cost. A setting's peak is the same whatever the GPU (only the capacity it is
 * checked against differs), so one estimate per value answers every GPU: its fit on each (`Estimate.fit`).
 */
import type { Estimate, FitResult } from '../estimator/types';
import type { Verdict } from '../vocabulary/fsdp';
import type { MinGpus, WhatIf } from './model';

/** At most this many new estimates per GPU and search (values another GPU's search estimated cost nothing). */
const MAX_RUNS = 64;

/** The largest value of a key whose estimate fits, and what the next value, which does not, needs. */
export interface Largest {
  value: number;
  /** What the value after it needs, per GPU (the reason it is the largest), or null when the search hit its cap. */
  nextNeedsBytes: number | null;
  cap: number;
}

/**
 * One GPU's answer: the largest value whose estimate fits it (that value's estimate fits, the next one's does
 * not), or why there is none: even 1 does not fit, a verdict on the way is undecided (the figures leave parts out
 * or count more than the job keeps, so the boundary is not known), a value has no estimate (a mesh PyTorch
 * refuses), or the search ran out of estimates between `lo` (fits) and `hi` (does not).
 */
export type LargestOn =
  | ({ status: 'found' } & Largest)
  | { status: 'none fits' }
  | { status: 'undecided'; at: number }
  | { status: 'no estimate'; at: number }
  | { status: 'not found'; lo: number; hi: number };

/** What a fit needs of its GPU: the peak with the allocator's allowance and the context (and a colocated share). */
const needs = (f: FitResult) => f.memoryBytes - f.headroomBytes;

/**
 * The largest `key` in [1, cap] whose fit (from `fitAt`) is `fits` with the next value's `short`, searched from
 * `from`: doubling or halving to a bracket, then between its ends by interpolating the bytes they need (the peak
 * grows about linearly with either key) alternated with bisection where that does not close in. `known` lists the
 * values estimated already, free to consult. Assumes more of the key never needs less: then a verdict undecided
 * anywhere leaves the boundary undecided (figures that count too little make every fit undecided; too much, the
 * values between a certain fit and a certain shortfall), so one met on the way ends the search.
 */
function solveOne(
  fitAt: (v: number) => FitResult | undefined,
  known: Iterable<number>,
  from: number,
  cap: number,
  estimates: () => number,
): LargestOn {
  const seen = new Map<number, FitResult | undefined>();
  const look = (v: number) => {
    if (!seen.has(v)) seen.set(v, fitAt(v));
    return seen.get(v);
  };
  const start = Math.max(1, Math.min(cap, Math.floor(from)));
  const first = look(start);
  if (!first) return { status: 'no estimate', at: start };
  if (first.verdict === 'undecided') return { status: 'undecided', at: start };
  for (const v of known) if (v >= 1 && v <= cap) look(v);
  const spent = estimates();
  // Interpolations since the last bisection, and the bracket's width when they began.
  let interpolated = 0;
  let widthBefore = Infinity;
  for (;;) {
    // The bracket: the largest value known to fit, and the smallest above it known not to.
    let lo = 0;
    for (const [v, f] of seen) if (f?.verdict === 'fits' && v > lo) lo = v;
    let hi = Infinity;
    for (const [v, f] of seen) if (v > lo && v < hi && f?.verdict !== 'fits') hi = v;
    const above = seen.get(hi);
    if (hi !== Infinity && above?.verdict === 'undecided') return { status: 'undecided', at: hi };
    if (hi === lo + 1) {
      if (!above) return { status: 'no estimate', at: hi };
      return lo === 0
        ? { status: 'none fits' }
        : { status: 'found', value: lo, nextNeedsBytes: needs(above), cap };
    }
    if (hi === Infinity && lo === cap) return { status: 'found', value: cap, nextNeedsBytes: null, cap };
    if (estimates() - spent >= MAX_RUNS) return { status: 'not found', lo, hi: Math.min(hi, cap + 1) };
    let next: number;
    if (hi === Infinity) next = Math.min(cap, lo * 2);
    else if (lo === 0) next = Math.max(1, Math.floor(hi / 2));
    else {
      const a = seen.get(lo)!;
      const rise = above ? needs(above) - needs(a) : 0;
      // Two interpolations that did not quarter the bracket between them: bisect once.
      const stalled = interpolated === 2 && (hi - lo) * 4 > widthBefore;
      if (interpolated === 2) interpolated = 0;
      if (interpolated === 0) widthBefore = hi - lo;
      if (rise <= 0 || stalled) {
        next = Math.floor((lo + hi) / 2);
        interpolated = 0;
      } else {
        // Where the need crosses the capacity on the line through the bracket's ends.
        const guess = lo + Math.floor(((a.memoryBytes - needs(a)) * (hi - lo)) / rise);
        next = Math.max(lo + 1, Math.min(hi - 1, guess));
        interpolated++;
      }
    }
    look(next);
  }
}

/** The values a search's answer rests on, with the verdict each must have. */
function grounds(a: LargestOn): [number, Verdict][] {
  switch (a.status) {
    case 'found':
      return a.nextNeedsBytes === null
        ? [[a.value, 'fits']]
        : [
            [a.value, 'fits'],
            [a.value + 1, 'short'],
          ];
    case 'none fits':
      return [[1, 'short']];
    case 'undecided':
      return [[a.at, 'undecided']];
    default:
      return [];
  }
}

/**
 * For each GPU of `gpus` (catalog ids), the largest `key` in [1, cap] whose estimate fits it, searched from
 * `from`. `run` estimates a what-if on the file's own GPU; each of its estimates answers every GPU (its `fit`), so
 * the GPUs' searches share them. Each answer is then checked against that GPU's own estimate (the what-if on that
 * GPU) at the values it rests on; where they disagree, that GPU is searched again on its own estimates.
 */
export function largestFittingOn(
  run: (w: WhatIf) => Estimate | undefined,
  key: 'microBatch' | 'seqLen',
  from: number,
  cap: number,
  gpus: readonly string[],
): Map<string, LargestOn> {
  const shared = new Map<number, Estimate | undefined>();
  let estimates = 0;
  const at = (v: number) => {
    if (!shared.has(v)) {
      estimates++;
      shared.set(v, run({ [key]: v }));
    }
    return shared.get(v);
  };
  const own = at(Math.max(1, Math.min(cap, Math.floor(from))))?.gpu.id;
  const out = new Map<string, LargestOn>();
  for (const gpu of gpus) {
    const answer = solveOne(
      (v) => at(v)?.fit.find((f) => f.gpu === gpu),
      [...shared.keys()],
      from,
      cap,
      () => estimates,
    );
    if (gpu === own) {
      out.set(gpu, answer);
      continue;
    }
    const onGpu = new Map<number, FitResult | undefined>();
    const ownFit = (v: number) => {
      if (!onGpu.has(v)) {
        estimates++;
        onGpu.set(v, run({ [key]: v, gpu })?.targetFit);
      }
      return onGpu.get(v);
    };
    const agrees = grounds(answer).every(([v, verdict]) => ownFit(v)?.verdict === verdict);
    out.set(gpu, agrees ? answer : solveOne(ownFit, [...onGpu.keys()], from, cap, () => estimates));
  }
  return out;
}

/** One GPU's smallest world size, or why there is none: none fits, undecided, or the count found does not fit. */
export type SmallestOn =
  | { status: 'found'; worldSize: number; wholeNodes?: NonNullable<MinGpus['wholeNodes']> }
  | { status: 'none fits' | 'undecided' | 'not found'; reason: string };

/**
 * The smallest world size's answer for one GPU, checked against that GPU's estimate there: the count the model's
 * search found (and the count on whole nodes) stands only where the estimate at it fits; where that estimate is
 * undecided (parts left out, or counted beyond what the job keeps), so is the answer.
 */
export function checkedMinGpus(
  min: MinGpus,
  fitAt: (worldSize: number) => FitResult | undefined,
): SmallestOn {
  if (min.worldSize === null)
    return { status: min.undecided ? 'undecided' : 'none fits', reason: min.reason ?? 'no world size fits' };
  for (const n of [min.worldSize, ...(min.wholeNodes ? [min.wholeNodes.worldSize] : [])]) {
    const v = fitAt(n)?.verdict;
    if (v === 'fits') continue;
    return v === 'undecided'
      ? { status: 'undecided', reason: `not decided: the fit at ${n} GPUs is undecided` }
      : {
          status: 'not found',
          reason: `the search found ${n} GPUs, whose estimate ${v ? 'does not fit' : 'cannot be made'}`,
        };
  }
  return {
    status: 'found',
    worldSize: min.worldSize,
    ...(min.wholeNodes ? { wholeNodes: min.wholeNodes } : {}),
  };
}

/** A change's cost: the step time it leads to (compute, recomputation included, and transfers left exposed). */
export function stepSeconds(e: Estimate): number {
  return e.comms.computeSeconds + e.comms.exposedSeconds;
}
