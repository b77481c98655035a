/** The command-line tool: its commands, their help, and the dispatch to each. */
import { VERSION } from '../core/vocabulary/meta';
import { didYouMean } from '../core/vocabulary/suggest';
import { EXIT, UsageError, type Streams } from './io';
import { commandHelp, usage } from './help';
import type { CommandSpec } from './spec';
import { estimateCommand, estimateSpec } from './commands/estimate';
import { lintCommand, lintSpec } from './commands/lint';
import { gpusCommand, gpusSpec, modelsCommand, modelsSpec } from './commands/models';
import { rulesCommand, rulesSpec } from './commands/rules';
import { defaultsCommand, defaultsSpec } from './commands/defaults';
import { diffCommand, diffSpec } from './commands/diff';
import { migrateCommand, migrateSpec } from './commands/migrate';
import { fitCommand, fitSpec } from './commands/fit';
import { calibrateCommand, calibrateSpec } from './commands/calibrate';
import { scanCommand, scanSpec } from './commands/scan';

export { EXIT, UsageError, type Streams };

/** Every command, in the order the usage lists them, with what runs it. */
const COMMANDS: { spec: CommandSpec; run: (argv: string[], io: Streams) => number | Promise<number> }[] = [
  { spec: scanSpec, run: scanCommand },
  { spec: lintSpec, run: lintCommand },
  { spec: estimateSpec, run: estimateCommand },
  { spec: modelsSpec, run: modelsCommand },
  { spec: gpusSpec, run: gpusCommand },
  { spec: rulesSpec, run: rulesCommand },
  { spec: defaultsSpec, run: defaultsCommand },
  { spec: diffSpec, run: diffCommand },
  { spec: migrateSpec, run: migrateCommand },
  { spec: fitSpec, run: fitCommand },
  { spec: calibrateSpec, run: calibrateCommand },
];

export const USAGE = usage(COMMANDS.map((c) => c.spec));

/** Runs the command line; resolves to the exit code. */
export async function runCli(argv: string[], io: Streams): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === '-h' || command === '--help') {
    io.out.write(USAGE);
    return command ? EXIT.ok : EXIT.usage;
  }
  if (command === '--version' || command === '-V') {
    io.out.write(`${VERSION}\n`);
    return EXIT.ok;
  }
  // `fsdp-lens help lint` as `fsdp-lens lint --help`.
  const asked = command === 'help' ? rest[0] : undefined;
  const name = asked ?? command;
  const entry = COMMANDS.find((c) => c.spec.name === name);
  try {
    if (command === 'help' && !asked) {
      io.out.write(USAGE);
      return EXIT.ok;
    }
    if (!entry)
      throw new UsageError(
        `unknown command "${name}"${didYouMean(
          name,
          COMMANDS.map((c) => c.spec.name),
        )}`,
      );
    // Help before anything else is read: `fsdp-lens lint --help` prints lint's own help.
    const dashdash = rest.indexOf('--');
    const flags = dashdash < 0 ? rest : rest.slice(0, dashdash);
    if (asked || flags.includes('--help') || flags.includes('-h')) {
      io.out.write(commandHelp(entry.spec));
      return EXIT.ok;
    }
    return await entry.run(rest, io);
  } catch (e) {
    if (e instanceof UsageError) {
      const hint = entry ? `fsdp-lens ${entry.spec.name} --help` : 'fsdp-lens --help';
      io.err.write(`fsdp-lens: ${e.message}\n\nRun "${hint}" for usage.\n`);
      return EXIT.usage;
    }
    throw e;
  }
}
