/**
 * Command lines as launch scripts and launch.json write them: tokens, `--key value` flags and the Python script a
 * command runs. Each reader here is linear in its input (no pattern that backtracks over a long token).
 */

/** The words of a command line: quoted strings whole, everything else split at whitespace. */
export function tokens(cmd: string): string[] {
  return cmd.match(/"[^"]*"|'[^']*'|\S+/g) ?? [];
}

/** `--key value` and `--key=value` pairs of a command line. */
export function flags(cmd: string): Map<string, string> {
  const out = new Map<string, string>();
  const toks = tokens(cmd);
  toks.forEach((t, i) => {
    if (!t.startsWith('-')) return;
    const eq = t.indexOf('=');
    if (eq > 0) out.set(t.slice(0, eq), t.slice(eq + 1));
    else if (toks[i + 1] && !toks[i + 1]!.startsWith('-')) out.set(t, toks[i + 1]!);
  });
  return out;
}

/**
 * The first word of `cmd` that names a Python file, up to its `.py` (`train.py`, `src/train.py` of
 * `src/train.py:main`), or null.
 */
export function pythonScriptOf(cmd: string): string | null {
  for (const word of cmd.split(/\s+/)) {
    // The last `.py` of the word that ends it or is followed by a character that is not part of a name.
    for (let i = word.lastIndexOf('.py'); i > 0; i = word.lastIndexOf('.py', i - 1))
      if (!/\w/.test(word[i + 3] ?? '')) return word.slice(0, i + 3);
  }
  return null;
}

/** The commands of a shell script, lines joined across backslash continuations, with the 0-based first line. */
export function commandLines(text: string): { line: number; cmd: string }[] {
  const out: { line: number; cmd: string }[] = [];
  let parts: string[] = [];
  let start = 0;
  text.split('\n').forEach((raw, i) => {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (!parts.length) start = i;
    const more = line.endsWith('\\');
    parts.push(more ? line.slice(0, -1) : line);
    if (more) return;
    out.push({ line: start, cmd: parts.join(' ') });
    parts = [];
  });
  if (parts.length) out.push({ line: start, cmd: parts.join(' ') });
  return out;
}

/**
 * The arguments a command passes to the program `program` names (`train.py` or a module run with `-m`): the words
 * after it, up to the end of the command (a pipe, a redirection, `;`, `&&`, `&`), quotes removed. Null when the
 * program is not in the command.
 */
export function programArgs(cmd: string, program: string): string[] | null {
  const words = tokens(cmd);
  const at = words.findIndex((w) => w === program || w.endsWith(`/${program}`));
  if (at < 0) return null;
  const out: string[] = [];
  for (const w of words.slice(at + 1)) {
    if (/^(\||\|\||;|&&|&|\d?>>?.*|<.*)$/.test(w)) break;
    // `c.toml;` ends the command at its `;`.
    const end = /^[^"']*?;$/.test(w);
    const arg = (end ? w.slice(0, -1) : w).replace(/^(["'])(.*)\1$/s, '$2');
    // `"$@"`: whatever the script itself was given, nothing the file says.
    if (!/^\$[@*]$/.test(arg)) out.push(arg);
    if (end) break;
  }
  return out;
}

/**
 * A shell assignment line (`NGPU=8`, `export MODEL="Qwen/Qwen3-8B"`, `NGPU=${NGPU:-"8"}`): the name, the value it
 * takes when the environment does not set it, and whether that value is a `:-` default the environment may change.
 * Undefined for any other line, and for values the shell computes (`$(...)`, other variables).
 */
export function shellAssignment(
  line: string,
): { name: string; value: string; isDefault: boolean } | undefined {
  const m =
    /^\s*(?:export\s+)?([A-Za-z_]\w*)=(?:\$\{\1:-(?:"([^"$`]*)"|'([^']*)'|([^\s}"'$`]*))\}|"([^"$`]*)"|'([^']*)'|([^\s"'$`;|&]*))\s*(?:#.*)?$/.exec(
      line,
    );
  if (!m) return undefined;
  const dflt = m[2] ?? m[3] ?? m[4];
  return { name: m[1]!, value: dflt ?? m[5] ?? m[6] ?? m[7] ?? '', isDefault: dflt !== undefined };
}

/**
 * The variables a shell script sets before offset `end`, in order: single-line assignments (`shellAssignment`)
 * and double-quoted values, over several lines too (`ACTOR_CONFIG="\n  key=value \\\n  ..."`), which scripts use
 * to assemble a command's arguments; a quoted value's `$VAR`s are expanded as the shell does. A variable set inside
 * a conditional or a loop (`if ... fi`, `case ... esac`, `for`/`while ... done`) is not known: it is left unset,
 * so what names it stays unexpanded. Linear in the text.
 */
export function shellVariables(text: string, end = text.length): Map<string, string> {
  const head = text.slice(0, end);
  const found: { at: number; name: string; value: string | null; quoted?: boolean }[] = [];
  // Offsets where a conditional or a loop opens and closes, for the depth at each assignment.
  const marks: { at: number; step: number }[] = [];
  let offset = 0;
  for (const raw of head.split('\n')) {
    const line = raw.replace(/\r$/, '');
    const code = line.replace(/(^|\s)#.*$/, '');
    for (const m of code.matchAll(/(?:^|[;&|]\s*|\bthen\s+|\bdo\s+|\belse\s+)(if|case|for|while|until)\b/g))
      marks.push({ at: offset + m.index, step: 1 });
    for (const m of code.matchAll(/(?:^|[;&\s])(fi|esac|done)\b/g))
      marks.push({ at: offset + m.index, step: -1 });
    const a = shellAssignment(line);
    if (a) found.push({ at: offset, name: a.name, value: a.value });
    offset += raw.length + 1;
  }
  for (const m of head.matchAll(/^[ \t]*(?:export[ \t]+)?([A-Za-z_]\w*)="([^"`]*)"[ \t]*(?:#.*)?$/gm))
    found.push({ at: m.index, name: m[1]!, value: m[2]!.replace(/\\\r?\n/g, ' '), quoted: true });
  marks.sort((x, y) => x.at - y.at);
  const vars = new Map<string, string>();
  let depth = 0;
  let next = 0;
  for (const f of found.sort((x, y) => x.at - y.at || Number(!!x.quoted) - Number(!!y.quoted))) {
    while (next < marks.length && marks[next]!.at < f.at) depth += marks[next++]!.step;
    if (depth > 0) vars.delete(f.name);
    else if (f.value !== null) vars.set(f.name, expandShell(f.value, vars));
  }
  return vars;
}

/**
 * `$VAR`, `${VAR}` and `${VAR:-default}` in `s` replaced by the values `vars` holds (a default where it holds
 * none); a variable neither gives is left as written. Three rounds at most, for values that name others.
 */
export function expandShell(s: string, vars: ReadonlyMap<string, string>): string {
  for (let round = 0; round < 3 && s.includes('$'); round++)
    s = s.replace(
      /\$\{(\w+)(?::-([^}$]*))?\}|\$(\w+)/g,
      (all, a?: string, dflt?: string, b?: string) =>
        vars.get((a ?? b)!) ?? dflt?.replace(/^(["'])(.*)\1$/, '$2') ?? all,
    );
  return s;
}

/**
 * `$((A * B))` arithmetic of whole numbers and names (`$((SLURM_NNODES * GPUS_PER_NODE))`, `+ - *`), each name
 * taken from `vars`; left as written when a name is not known or the expression is anything else.
 */
export function shellArithmetic(s: string, vars: ReadonlyMap<string, string>): string {
  return s.replace(/\$\(\(([^()]{1,200})\)\)/g, (all, expr: string) => {
    const words = expr.trim().split(/\s*([*+-])\s*/);
    let total: number | undefined;
    let op = '+';
    for (const [i, w] of words.entries()) {
      if (i % 2 === 1) {
        op = w;
        continue;
      }
      const name = w.replace(/^\$\{?|\}$/g, '');
      const v = /^\d+$/.test(name) ? Number(name) : Number(vars.get(name) ?? NaN);
      if (!Number.isSafeInteger(v)) return all;
      total = total === undefined ? v : op === '*' ? total * v : op === '+' ? total + v : total - v;
    }
    return total === undefined || !Number.isSafeInteger(total) ? all : String(total);
  });
}

/** The variables SLURM sets from a batch script's `#SBATCH --nodes=N` (`SLURM_NNODES`, `SLURM_JOB_NUM_NODES`). */
export function sbatchVariables(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of text.matchAll(/^#SBATCH\s+(?:--nodes[=\s]|-N\s*)(\d{1,5})\b/gm)) {
    out.set('SLURM_NNODES', m[1]!);
    out.set('SLURM_JOB_NUM_NODES', m[1]!);
  }
  return out;
}

const MAX_EXPANDED = 64;

/**
 * The commands of a shell script as it runs them: each command (not an assignment) with the variables set before
 * it expanded, `$((...))` arithmetic computed, SLURM's node count from the `#SBATCH` header; `srun $CMD` becomes
 * the command `CMD` holds. What is not known stays as written.
 */
export function expandedCommands(text: string): { line: number; cmd: string; expanded?: true }[] {
  const slurm = sbatchVariables(text);
  const lineStarts = [0];
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) lineStarts.push(i + 1);
  // Each expansion reads the script up to its command: a bounded number of them.
  let expansions = 0;
  return commandLines(text)
    .filter((c) => c.cmd.trim() && !/^\s*#/.test(c.cmd) && !/^\s*(?:export\s+)?[A-Za-z_]\w*=/.test(c.cmd))
    .map((c) => {
      if (!c.cmd.includes('$') || ++expansions > MAX_EXPANDED) return c;
      const vars = new Map([...slurm, ...shellVariables(text, lineStarts[c.line] ?? text.length)]);
      const cmd = shellArithmetic(expandShell(c.cmd, vars), vars);
      return cmd === c.cmd ? c : { line: c.line, cmd, expanded: true as const };
    });
}
