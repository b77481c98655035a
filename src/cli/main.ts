/** The command-line tool's entry point: runs the CLI with the process's arguments, or serves a thread's share. */
import { runCli } from './cli';
import { scanFiles } from './commands/scan';
import { enableThreads, serveThread, type FileJob } from './pool';

const JOBS = { scan: scanFiles } as Record<string, FileJob<unknown, unknown>>;

if (!serveThread(JOBS)) {
  enableThreads(__filename);
  // Output cut short by its reader (`fsdp-lens estimate --json | head`) ends the run quietly, as for other tools.
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw e;
  });
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
}
