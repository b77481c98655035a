/** What every command writes to and exits with: its streams, exit statuses and usage errors. */
export interface Streams {
  out: { write(s: string): unknown };
  err: { write(s: string): unknown };
}

/** Exit codes: 0 clean, 1 findings (lint), 2 bad input or usage. */
export const EXIT = { ok: 0, findings: 1, usage: 2 } as const;

/** A command line the tool cannot run: exit status 2 with a message. */
export class UsageError extends Error {}
