/** What a command is: its name, arguments, flags with their help, examples and what its exit statuses mean. */
import type { ParseArgsConfig } from 'node:util';

export type Options = NonNullable<ParseArgsConfig['options']>;

/** One command of the tool, as its help shows it and its parser reads it. */
export interface CommandSpec<O extends Options = Options> {
  name: string;
  /** The arguments after the flags: `FILE|DIR...`, `[FILE]`, or empty. */
  args: string;
  /** One line: what the command answers. */
  summary: string;
  /** A paragraph under the usage line, when one line is not enough. */
  about?: string;
  /** The flags parseArgs reads. */
  options: O;
  /** Each flag as help shows it (`--format F`) with its description; built on demand from the inputs table. */
  flags: () => { flag: string; text: string }[];
  /** Command lines a user would type, each with what it does. */
  examples: { line: string; does: string }[];
  /** What each exit status means for this command. */
  exits: Partial<Record<'ok' | 'findings' | 'usage' | 'unknownModel' | 'internal', string>>;
}
