/**
 * Solving for what fits: the largest micro-batch and the longest sequence whose estimate fits the target GPU
 * (found by doubling, then halving the gap, each step a full re-estimate), and the changes that make a plan fit
 * ranked by the step time they cost.
 */
import type { Estimate } from '../estimator/types';
import type { WhatIf } from './model';

/** At most this many re-estimates per search. */
const MAX_RUNS = 48;

/** The largest value of `key` whose estimate fits, with the estimate that says so and the next value's verdict. */
export interface Largest {
  value: number;
  /** What the value after it needs, per GPU (the reason it is the largest), or null when the search hit its cap. */
  nextNeedsBytes: number | null;
  cap: number;
}

const fits = (e: Estimate | undefined) => e?.targetFit?.verdict === 'fits';
const needs = (e: Estimate | undefined) =>
  e?.targetFit ? e.targetFit.memoryBytes - e.targetFit.headroomBytes : null;

/**
 * The largest `key` in [1, cap] whose estimate fits, searched from `from`: null when even 1 does not fit, or when a
 * verdict is undecided along the way (the fit cannot be solved for then). Assumes more of it never needs less.
 */
export function largestFitting(
  run: (w: WhatIf) => Estimate | undefined,
  key: 'microBatch' | 'seqLen',
  from: number,
  cap: number,
): Largest | null {
  let runs = 0;
  const at = (v: number) => {
    runs++;
    return run({ [key]: v });
  };
  const verdict = (e: Estimate | undefined) => e?.targetFit?.verdict;
  let lo = 0;
  let hi = 0;
  let start = Math.max(1, Math.min(cap, Math.floor(from)));
  let e = at(start);
  if (verdict(e) === 'undecided' || !e) return null;
  if (fits(e)) {
    lo = start;
    // Double until it stops fitting (or the cap).
    while (lo < cap && runs < MAX_RUNS) {
      const next = Math.min(cap, lo * 2);
      e = at(next);
      if (verdict(e) === 'undecided') return null;
      if (!fits(e)) {
        hi = next;
        break;
      }
      lo = next;
    }
    if (!hi) return { value: lo, nextNeedsBytes: null, cap };
  } else {
    hi = start;
    // Halve until it fits (or 1 does not).
    while (hi > 1 && runs < MAX_RUNS) {
      start = Math.max(1, Math.floor(hi / 2));
      e = at(start);
      if (verdict(e) === 'undecided') return null;
      if (fits(e)) {
        lo = start;
        break;
      }
      hi = start;
    }
    if (!lo) return null;
  }
  // Between lo (fits) and hi (does not): halve the gap.
  while (hi - lo > 1 && runs < MAX_RUNS) {
    const mid = Math.floor((lo + hi) / 2);
    e = at(mid);
    if (verdict(e) === 'undecided') return null;
    if (fits(e)) lo = mid;
    else hi = mid;
  }
  return { value: lo, nextNeedsBytes: needs(at(lo + 1)), cap };
}

/** A change's cost: the step time it leads to (compute, recomputation included, and transfers left exposed). */
export function stepSeconds(e: Estimate): number {
  return e.comms.computeSeconds + e.comms.exposedSeconds;
}
