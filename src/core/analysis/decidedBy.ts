/** What decides a test of the script: its value, and the defaults, given arguments or config files it was read from. */
import type { Node } from '../parsing/python';
import { truthy } from '../python/operators';
import type { Evaluator } from './evaluator';

export interface Decision {
  /** The test's truth, or undefined where it is not known statically. */
  value: boolean | undefined;
  /** The defaults it read (`the default of --strategy` at its line): a command line may change them. */
  defaults: { what: string; line: number }[];
  /** The options it read from the script's given command line (`--strategy fsdp`). */
  args: string[];
  /**
   * The config files it read (a Hydra config, a YAML the script loads), read again afresh on first ask: the
   * evaluator remembers what it read once, and says so only the first time.
   */
  files: () => string[];
}

export function decidedBy(ev: Evaluator, node: Node): Decision {
  const defaults = ev.defaultsRead.length;
  const given = ev.argsRead.length;
  const value = truthy(ev.eval(node));
  let files: string[] | undefined;
  return {
    value,
    defaults: ev.defaultsRead.slice(defaults),
    args: [...new Set(ev.argsRead.slice(given))],
    files: () => {
      if (!files) {
        const fresh = ev.withArgv(ev.argv ?? []);
        fresh.eval(node);
        files = [...new Set(fresh.filesRead)];
      }
      return files;
    },
  };
}
