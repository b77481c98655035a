/** Rule FSDP022: a launch command whose line continuation is broken, so its later arguments never reach it. */
import type { Draft, Rule, TextEdit } from '../types';

/** A shell file the rule reads: launch scripts and batch files. */
const SHELL = /\.(sh|bash|slurm|sbatch)$/;

/** A command that launches a training job (its first line names the launcher or Python). */
const LAUNCH =
  /(?:^|[\s;&|(])(?:python3?|torchrun|accelerate\s+launch|deepspeed|tune\s+run|srun|mpirun|axolotl|composer|ray\s+job\s+submit)(?:\s|$)/;

/** A line that reads as the next argument of a continued command: indented, a flag, an override or a variable. */
const ARGUMENT = /^[ \t]+(?:--?[A-Za-z][\w.-]*|\+{0,2}[A-Za-z_][\w.]*=|\$\{?\w+)/;

/** Whether `line` leaves a quote open (the command's string goes on to the next line), from `open`. */
function quoteAfter(line: string, open: '"' | "'" | null): '"' | "'" | null {
  let q = open;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (q === "'") {
      if (c === "'") q = null;
    } else if (c === '\\') i++;
    else if (q === '"') {
      if (c === '"') q = null;
    } else if (c === '"' || c === "'") q = c;
    else if (c === '#' && (i === 0 || /\s/.test(line[i - 1]!))) break;
  }
  return q;
}

interface Cut {
  line: number;
  /** The command's first line. */
  start: number;
  /** `\` followed by a comment, by spaces only, or a comment line inside the command. */
  kind: 'comment-after' | 'spaces-after' | 'comment-line';
  /** Column of the backslash (comment-after, spaces-after). */
  column: number;
  comment: string;
  /** The first line that no longer reaches the command. */
  next: number;
}

/** The launch commands of a shell script whose continuation a comment or trailing spaces end early. */
export function cutCommands(text: string): Cut[] {
  const lines = text.split('\n').map((l) => l.replace(/\r$/, ''));
  const nextArgument = (i: number): number | undefined => {
    for (let j = i + 1; j < lines.length && j <= i + 3; j++) {
      if (!lines[j]!.trim()) continue;
      return ARGUMENT.test(lines[j]!) ? j : undefined;
    }
    return undefined;
  };
  const cuts: Cut[] = [];
  let start = -1;
  let quote: '"' | "'" | null = null;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (quote) {
      quote = quoteAfter(line, quote);
      continue;
    }
    if (start < 0) {
      if (!line.trim() || /^\s*#/.test(line)) continue;
      start = i;
    } else if (/^\s*#/.test(line)) {
      // A comment line inside a continued command ends it: the comment runs to the end of the joined line.
      const next = nextArgument(i);
      if (LAUNCH.test(lines[start]!) && next !== undefined)
        cuts.push({ line: i, start, kind: 'comment-line', column: 0, comment: line.trim(), next });
      start = -1;
      continue;
    }
    quote = quoteAfter(line, null);
    if (quote || line.endsWith('\\')) continue;
    const m = /\\([ \t]+)(#.*)?$/.exec(line);
    const next = m ? nextArgument(i) : undefined;
    if (m && next !== undefined && LAUNCH.test(lines[start]!))
      cuts.push({
        line: i,
        start,
        kind: m[2] ? 'comment-after' : 'spaces-after',
        column: m.index,
        comment: m[2] ?? '',
        next,
      });
    start = -1;
  }
  return cuts;
}

export const launchCommandCut: Rule = {
  id: 'FSDP022',
  name: 'launch-command-cut',
  title: "A launch command's line continuation is broken, so its later arguments never reach it",
  defaultSeverity: 'error',
  rationale: `A backslash continues a command only as the last character of its line. Followed by a space or a
comment (\`--fsdp_version 2 \\  # FSDP2\`), it escapes that space and the command ends at the comment; a comment
line between continued lines ends it the same way. The job starts with the arguments before that line only, at
its defaults for the rest (the world size, the model, the batch, the FSDP settings written below), and each later
line runs as a command of its own, which fails with "command not found" while the job goes on. Put the comment
above the command and end the line with the backslash.`,
  example: {
    language: 'bash',
    bad: `torchrun --nproc_per_node 8 train.py \\
    --fsdp_version 2 \\  # FSDP2
    --batch_size 4`,
    good: `# FSDP2
torchrun --nproc_per_node 8 train.py \\
    --fsdp_version 2 \\
    --batch_size 4`,
  },
  fix: 'Moves the comment above the command (or removes the spaces after the backslash), so the line continues.',
  check(ctx) {
    if (!SHELL.test(ctx.facts.path)) return [];
    const lines = ctx.text.split('\n').map((l) => l.replace(/\r$/, ''));
    return cutCommands(ctx.text).map((c): Draft => {
      const line = lines[c.line]!;
      const indent = /^\s*/.exec(lines[c.start]!)![0];
      const above = (comment: string): TextEdit => ({
        range: { start: { line: c.start, character: 0 }, end: { line: c.start, character: 0 } },
        newText: `${indent}${comment}\n`,
      });
      const edits: TextEdit[] =
        c.kind === 'comment-line'
          ? [
              above(c.comment),
              {
                range: { start: { line: c.line, character: 0 }, end: { line: c.line + 1, character: 0 } },
                newText: '',
              },
            ]
          : [
              ...(c.kind === 'comment-after' ? [above(c.comment)] : []),
              {
                range: {
                  start: { line: c.line, character: c.column + 1 },
                  end: { line: c.line, character: line.length },
                },
                newText: '',
              },
            ];
      const what =
        c.kind === 'comment-line'
          ? 'a comment line inside the command ends it'
          : c.kind === 'comment-after'
            ? 'the backslash is followed by a comment, so the command ends here'
            : 'the backslash is followed by spaces, so it escapes a space and the command ends here';
      return {
        range: {
          start: {
            line: c.line,
            character: c.kind === 'comment-line' ? /^\s*/.exec(line)![0].length : c.column,
          },
          end: { line: c.line, character: line.length },
        },
        summary: `The command of line ${c.start + 1} ends here: line ${c.next + 1} and those after it never reach it`,
        message: `The command started at line ${c.start + 1} is cut: ${what}. Its arguments from line ${c.next + 1} on (\`${lines[c.next]!.trim().replace(/\s*\\$/, '')}\` ...) never reach it, and each of those lines runs as a command of its own. ${c.kind === 'spaces-after' ? 'Remove the spaces after the backslash.' : 'Put the comment above the command.'}`,
        fixes: [
          {
            title:
              c.kind === 'spaces-after'
                ? 'Remove the spaces after the backslash'
                : 'Move the comment above the command',
            edits,
            preferred: true,
          },
        ],
      };
    });
  },
};
