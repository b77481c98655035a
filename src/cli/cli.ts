import * as fs from 'node:fs';
import { decodeSource, scanText } from '../core/analysis/input';
import { loadPython } from '../core/parsing/python';
import { formatScanText } from './format';

export interface Streams {
  out: { write(s: string): unknown };
  err: { write(s: string): unknown };
}

/** Exit codes: 0 clean, 1 findings (lint), 2 bad input or usage. */
export const EXIT = { ok: 0, findings: 1, usage: 2 } as const;

const USAGE = `Usage: fsdp-lens <command> [options]

Commands:
  scan FILE...        List the FSDP wrap calls, meshes, optimizers, models and checkpointing in Python files.

Options:
  --json              Print JSON instead of text.
  -h, --help          Show this help.
  --version           Print the version.
`;

export class UsageError extends Error {}

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
  try {
    switch (command) {
      case 'scan':
        return await scanCommand(rest, io);
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } catch (e) {
    if (e instanceof UsageError) {
      io.err.write(`fsdp-lens: ${e.message}\n\n${USAGE}`);
      return EXIT.usage;
    }
    throw e;
  }
}

declare const __VERSION__: string | undefined;
const VERSION = typeof __VERSION__ === 'string' ? __VERSION__ : '0.0.0-dev';

/** Reads a Python file for analysis; a message for the user when it cannot be. */
export function readPythonFile(file: string): { text: string } | { error: string } {
  let bytes: Buffer;
  try {
    const st = fs.statSync(file);
    if (st.isDirectory()) return { error: `${file}: is a directory` };
    bytes = fs.readFileSync(file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return {
      error: `${file}: ${code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : 'cannot be read'}`,
    };
  }
  const decoded = decodeSource(bytes);
  if (!decoded.ok) return { error: `${file}: ${decoded.reason}` };
  return { text: decoded.text };
}

async function scanCommand(args: string[], io: Streams): Promise<number> {
  const json = args.includes('--json');
  const files = args.filter((a) => a !== '--json');
  const unknown = files.find((f) => f.startsWith('-'));
  if (unknown) throw new UsageError(`unknown option "${unknown}" for scan`);
  if (!files.length) throw new UsageError('scan needs at least one FILE');
  const grammar = await loadPython();
  const results = [];
  let failed = false;
  for (const f of files) {
    const read = readPythonFile(f);
    if ('error' in read) {
      io.err.write(`fsdp-lens: ${read.error}\n`);
      failed = true;
      continue;
    }
    results.push(scanText(grammar, f, read.text));
  }
  if (json) io.out.write(JSON.stringify({ files: results }, null, 2) + '\n');
  else for (const r of results) io.out.write(formatScanText(r));
  return failed ? EXIT.usage : EXIT.ok;
}
