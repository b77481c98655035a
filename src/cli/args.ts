/** Command-line options parsed with node's parseArgs, its errors reported as usage errors. */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { UsageError } from './io';

/** `util.parseArgs` with usage errors the CLI reports as such. */
export function parseOptions<T extends NonNullable<ParseArgsConfig['options']>>(
  args: string[],
  options: T,
  command: string,
) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (e) {
    throw new UsageError(`${command}: ${e instanceof Error ? e.message.replace(/^.*?: /, '') : String(e)}`);
  }
}
