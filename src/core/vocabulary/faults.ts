/**
 * Exceptions the analysis did not expect. A stage that fails is caught where the analysis can go on without its
 * result, and the failure is recorded here rather than swallowed: the entry returns the faults with the result, the
 * CLI reports them and exits with status 70, and the tests fail on any.
 */

/** One unexpected exception: the stage it stopped, and its message and stack. */
export interface Fault {
  stage: string;
  message: string;
  stack?: string;
}

let active: Fault[] | null = null;

/** Records an unexpected exception of `stage`; returns the message to show in place of the stage's result. */
export function fault(stage: string, e: unknown): string {
  const message = e instanceof Error ? e.message : String(e);
  const f: Fault = { stage, message: message.slice(0, 300) };
  if (e instanceof Error && e.stack) f.stack = e.stack.split('\n').slice(0, 12).join('\n');
  if (active && active.length < 20) active.push(f);
  return `${stage} failed: ${f.message}`;
}

/** Runs `fn`, collecting the faults recorded meanwhile (a nested call shares its caller's collection). */
export function collectFaults<T>(fn: () => T): { value: T; faults: Fault[] } {
  if (active) return { value: fn(), faults: [] };
  const faults: Fault[] = [];
  active = faults;
  try {
    return { value: fn(), faults };
  } finally {
    active = null;
  }
}
