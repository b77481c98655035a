/** The command-line tool: its usage text and the dispatch to each command. */
import { VERSION } from '../core/vocabulary/meta';
import { EXIT, UsageError, type Streams } from './io';

export { EXIT, UsageError, type Streams };
import { estimateFlagsHelp } from './help';
import { estimateCommand } from './commands/estimate';
import { lintCommand } from './commands/lint';
import { gpusCommand, modelsCommand } from './commands/models';
import { rulesCommand } from './commands/rules';
import { scanCommand } from './commands/scan';

export const USAGE = `Usage: fsdp-lens <command> [options]

Commands:
  scan FILE...              What each FSDP wrap call does, with meshes, optimizers, models, checkpointing.
      --json                JSON instead of text.

  lint FILE|DIR...          Wrapping mistakes (rules in docs/rules.md).
      --format F            text (default: file:line:col: CODE message), json or sarif.
      --min-torch V         Oldest PyTorch the code must run on (default 2.6).
      --rule ID=LEVEL       Severity of a rule: error, warning, info, hint or off (repeatable).

  estimate [FILE]           Per-GPU memory and traffic per step of the FSDP plan in FILE (or the default plan).
${estimateFlagsHelp()}
      --exact               Build the model with PyTorch on the meta device for exact counts (runs your code).
      --python PATH         The Python for --exact (default python3); --exact-timeout S (default 120).
      --units GB|GiB        Decimal GB (default) or binary GiB.
      --json                JSON with exact bytes, the terms of each figure and every assumption.

  models                    The built-in model catalog: id, model_type, parameter count.
      --json                JSON instead of text.

  gpus                      The GPUs --gpu takes: memory, dense bf16 compute, links.
      --json                JSON instead of text.

  rules                     The lint rules with their default severities.
      --markdown            The full rules documentation (docs/rules.md).

  -h, --help                This help.    --version    The version.

Exit status: 0 clean, 1 a lint warning or error, 2 bad input or usage.
`;

/** Runs the command line; resolves to the exit code. */
export async function runCli(argv: string[], io: Streams): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === '-h' || command === '--help' || command === 'help') {
    io.out.write(USAGE);
    return command ? EXIT.ok : EXIT.usage;
  }
  if (command === '--version') {
    io.out.write(`${VERSION}\n`);
    return EXIT.ok;
  }
  // `fsdp-lens <command> --help`: the usage, as for `fsdp-lens --help`.
  if (rest.includes('--help') || rest.includes('-h')) {
    io.out.write(USAGE);
    return EXIT.ok;
  }
  try {
    switch (command) {
      case 'scan':
        return await scanCommand(rest, io);
      case 'lint':
        return await lintCommand(rest, io);
      case 'estimate':
        return await estimateCommand(rest, io);
      case 'rules':
        return rulesCommand(rest, io);
      case 'models':
        return modelsCommand(rest, io);
      case 'gpus':
        return gpusCommand(rest, io);
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } catch (e) {
    if (e instanceof UsageError) {
      io.err.write(`fsdp-lens: ${e.message}\n\nRun "fsdp-lens --help" for usage.\n`);
      return EXIT.usage;
    }
    throw e;
  }
}
