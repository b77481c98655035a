/** `fsdp-lens scan`: what each wrap call of a file does, as text or JSON. */
import { scanText } from '../../core/analysis/input';
import { loadPython } from '../../host/grammar';
import { parseOptions } from '../args';
import { EXIT_TEXT } from '../help';
import type { CommandSpec } from '../spec';
import { EXIT, UsageError, type Streams } from '../io';
import { commandLineHosts, readPythonFile } from '../files';
import { formatScanText } from '../format';
import { mapFiles } from '../pool';
import type { FileFacts } from '../../core/analysis/facts';
import { helperPlan } from '../../core/resolve/helpers';
import type { ThroughHelpers } from '../format';
import { projectAt, type Project } from '../../core/project/project';
import { scanContext } from '../../core/entry/analyze';
import * as path from 'node:path';

export const scanSpec = {
  name: 'scan',
  args: 'FILE... [-- SCRIPT_ARGS...]',
  summary: 'What each FSDP wrap call does, with meshes, optimizers, models, checkpointing.',
  about:
    "For up to 32 files, the wraps each makes through helpers of its project are listed at its calls too, and helpers found but not estimated are named with the reason. Arguments after `--` are the script's own (one FILE), as it would be launched: its argparse options and OmegaConf command line take them.",
  options: { json: { type: 'boolean' } },
  flags: () => [{ flag: '--json', text: 'JSON instead of text: every fact with its source range.' }],
  examples: [
    { line: 'fsdp-lens scan train.py', does: 'Each wrap call: its target, options, loop and conditions.' },
    { line: 'fsdp-lens scan train.py --json', does: 'The same facts as JSON, for scripts.' },
    {
      line: 'fsdp-lens scan train.py -- config=conf/7b.yaml',
      does: 'The wraps the script makes when launched with that command line.',
    },
  ],
  exits: { ok: EXIT_TEXT.ok, usage: EXIT_TEXT.usage, internal: EXIT_TEXT.internal },
} satisfies CommandSpec;

export async function scanCommand(argv: string[], io: Streams): Promise<number> {
  // After `--`: the script's own command line.
  const dashdash = argv.indexOf('--');
  const scriptArgs = dashdash >= 0 ? argv.slice(dashdash + 1) : undefined;
  const { values, positionals } = parseOptions(dashdash >= 0 ? argv.slice(0, dashdash) : argv, scanSpec);
  if (!positionals.length) throw new UsageError('scan needs at least one FILE');
  if (scriptArgs && positionals.length > 1)
    throw new UsageError("scan takes one FILE when the script's arguments follow `--`");
  // Helpers are followed for the scripts a person names, not across a whole tree (`lint DIR` is for that): each
  // follow reads the project around the file.
  const outcomes = await mapFiles('scan', scanFiles, positionals, {
    helpers: positionals.length <= MAX_FOLLOWED,
    ...(scriptArgs ? { argv: scriptArgs } : {}),
  });
  const results = [];
  let failed = false;
  for (const o of outcomes) {
    if (o.facts) results.push(o.facts);
    else {
      io.err.write(`fsdp-lens: ${o.error}\n`);
      failed = true;
    }
  }
  if (values.json) io.out.write(JSON.stringify({ files: results }, null, 2) + '\n');
  else for (const r of results) io.out.write(formatScanText(r));
  return failed ? EXIT.usage : EXIT.ok;
}

/** Scans files in order: the job each thread runs on its share. */
/** The most files one scan follows into their helpers. */
const MAX_FOLLOWED = 32;

export async function scanFiles(
  files: string[],
  args: { helpers: boolean; argv?: string[] } | null = null,
): Promise<({ facts: ScannedFile; error?: never } | { error: string; facts?: never })[]> {
  const grammar = await loadPython();
  const hosts = commandLineHosts();
  const projects = new Map<string, Project>();
  try {
    return files.map((f) => {
      const read = readPythonFile(f);
      if ('error' in read) return { error: read.error };
      // A file may wrap through helpers of its project, besides or instead of its own calls: those wraps, at its calls.
      const { host, projectRoot } = hosts(f);
      let project = projectRoot ? projects.get(projectRoot) : undefined;
      if (args?.helpers && projectRoot && !project)
        projects.set(projectRoot, (project = projectAt(projectRoot, grammar, host)));
      // Read as the estimate reads it: with the script's arguments (after `--`, else a launch file's) and the
      // config files its code loads.
      const facts: ScannedFile = project
        ? scanText(grammar, f, read.text, scanContext(project, path.resolve(f), args?.argv))
        : scanText(grammar, f, read.text);
      if (args?.helpers && project) {
        const helpers = helperPlan(project, facts);
        if (helpers.calls.length || helpers.notes.length)
          facts.throughHelpers = {
            calls: helpers.calls,
            notes: helpers.notes,
            ...(helpers.unfollowed ? { unfollowed: helpers.unfollowed } : {}),
          };
      }
      return { facts };
    });
  } finally {
    for (const p of projects.values()) p.dispose();
  }
}

/** A file's facts, with the wraps it makes through helpers of its project when it writes none itself. */
export type ScannedFile = FileFacts & { throughHelpers?: ThroughHelpers };
