/** The command-line tool's entry point: runs the CLI with the process's arguments and streams. */
import { runCli } from './cli';

runCli(process.argv.slice(2), { out: process.stdout, err: process.stderr }).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(
      `fsdp-lens: internal error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`,
    );
    process.exitCode = 70;
  },
);
