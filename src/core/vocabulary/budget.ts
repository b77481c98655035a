/**
 * The work one analysis may do, whatever its input: evaluation steps, cells of the values it builds (items,
 * characters, entries) and wall time. The entry opens one budget per analysis; the Python value model and both
 * evaluators charge it; once it is spent every further evaluation is unknown with the reason, so a pathological
 * file ends in a partial result that says so, instead of a hang or an allocation the process cannot survive.
 */

export interface BudgetLimits {
  /** Expression nodes evaluated and statements run, in all. */
  steps: number;
  /** Items of sequences, characters of strings and entries of dicts built, in all. */
  cells: number;
  /** Wall time of the analysis, in milliseconds. */
  ms: number;
}

/** One analysis: a few hundred thousand steps cover the largest real model code; these are far past it. */
export const ANALYSIS_LIMITS: BudgetLimits = { steps: 10_000_000, cells: 20_000_000, ms: 3_000 };

/** How many steps pass between two looks at the clock. */
const CLOCK_EVERY = 4096;

export class WorkBudget {
  private steps = 0;
  private cells = 0;
  private readonly deadline: number;
  /** Why the budget is spent (once spent it stays so), or null. */
  spent: string | null = null;

  constructor(
    readonly limits: BudgetLimits = ANALYSIS_LIMITS,
    private readonly clock: () => number = () => performance.now(),
    /** Asked with the clock: true when the caller no longer wants the result (a newer edit arrived). */
    private readonly cancelled: () => boolean = () => false,
  ) {
    this.deadline = clock() + limits.ms;
  }

  /** Charges `n` steps; false once the budget is spent. */
  step(n = 1): boolean {
    if (this.spent) return false;
    const before = this.steps;
    this.steps += n;
    if (this.steps > this.limits.steps)
      return this.spend(`more than ${count(this.limits.steps)} evaluation steps`);
    if (Math.floor(before / CLOCK_EVERY) !== Math.floor(this.steps / CLOCK_EVERY)) {
      if (this.cancelled()) return this.spend('cancelled by a newer edit');
      if (this.clock() > this.deadline) return this.spend(`more than ${this.limits.ms / 1000} s`);
    }
    return true;
  }

  /** Charges `n` cells of a value about to be built; false (build nothing) once the budget is spent. */
  build(n: number): boolean {
    if (this.spent) return false;
    this.cells += n;
    if (this.cells > this.limits.cells)
      return this.spend(`values of more than ${count(this.limits.cells)} items`);
    return true;
  }

  private spend(why: string): false {
    this.spent = `the analysis stopped at its budget (${why}); what it had not reached is unknown`;
    return false;
  }
}

function count(n: number): string {
  return n.toLocaleString('en-US');
}

/** A budget that never runs out, for callers that open none (the charges are then only counted). */
const UNBOUNDED = new WorkBudget({ steps: Infinity, cells: Infinity, ms: Infinity });

let active: WorkBudget | null = null;

/** The budget of the analysis in progress. */
export function budget(): WorkBudget {
  return active ?? UNBOUNDED;
}

/**
 * Runs `fn` under `b`, unless an analysis is already in progress (a nested entry shares its caller's budget).
 * Analyses are synchronous, so the one in progress is the only one running on this thread.
 */
export function withBudget<T>(b: WorkBudget, fn: () => T): T {
  if (active) return fn();
  active = b;
  try {
    return fn();
  } finally {
    active = null;
  }
}
