/** What every command writes to and exits with: its streams, exit statuses, usage errors and analysis gaps. */
import type { Fault } from '../core/vocabulary/faults';

export interface Streams {
  out: { write(s: string): unknown };
  err: { write(s: string): unknown };
}

/**
 * Exit codes: 0 clean, 1 findings (lint), 2 bad input or usage, 3 a plan whose model's size is not known
 * (estimate), 70 an internal error.
 */
export const EXIT = { ok: 0, findings: 1, usage: 2, unknownModel: 3, internal: 70 } as const;

/** A command line the tool cannot run: exit status 2 with a message. */
export class UsageError extends Error {}

/**
 * Writes what an analysis left out: where it stopped at its budget (the result is partial, and says so) and the
 * stages that failed unexpectedly. True when a stage failed (an internal error, exit status 70).
 */
export function reportGaps(io: Streams, file: string, a: { incomplete?: string; faults: Fault[] }): boolean {
  if (a.incomplete) io.err.write(`fsdp-lens: ${file}: partial result: ${a.incomplete}\n`);
  for (const f of a.faults)
    io.err.write(`fsdp-lens: ${file}: internal error: ${f.stage} failed: ${f.message} (please report it)\n`);
  return a.faults.length > 0;
}
