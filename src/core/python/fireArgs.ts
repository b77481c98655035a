/** A command line as Python Fire hands it to a function: keyword flags, positional values and their parsed values. */
import { UNKNOWN, type Value } from './values';

/** The keyword and positional arguments of a command line, as `fire.core._ParseKeywordArgs` splits them. */
export interface FireArgs {
  /** `--name value`, `--name=value`, `--flag` (True), `--noflag` (False), by the parameter name. */
  keywords: Map<string, { raw: string; text: string }>;
  /** The values not taken by a keyword, in order: fire passes them to the parameters not named. */
  positional: string[];
}

/** `-x` / `--name` but not a negative number (fire.core._IsFlag). */
function isFlag(a: string): boolean {
  return /^-[a-zA-Z]$/.test(a) || /^-[a-zA-Z]=/.test(a) || a.startsWith('--') || /^-[a-zA-Z]/.test(a);
}

/**
 * Splits `argv` for a function with parameters `params` (and `**kwargs` when `varkw`) as fire.core._ParseKeywordArgs
 * does: hyphens in names become underscores; a flag with no value after it (the last argument, or one followed by a
 * flag) is boolean, `--noname` False when `name` is a parameter; a one-letter flag names the one parameter of that
 * initial. Arguments after a lone `--` are fire's own flags (`-- --help`) and pass no value.
 */
export function fireArgs(argv: readonly string[], params: readonly string[], varkw: boolean): FireArgs {
  const keywords = new Map<string, { raw: string; text: string }>();
  const positional: string[] = [];
  const end = argv.indexOf('--');
  const args = end >= 0 ? argv.slice(0, end) : argv;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (!isFlag(a)) {
      positional.push(a);
      continue;
    }
    const stripped = a.replace(/^-+/, '');
    const eq = stripped.indexOf('=');
    let key = (eq >= 0 ? stripped.slice(0, eq) : stripped).replace(/-/g, '_');
    let raw: string | undefined = eq >= 0 ? stripped.slice(eq + 1) : undefined;
    const bool = eq < 0 && (i + 1 === args.length || isFlag(args[i + 1]!));
    let keyword = '';
    if (params.includes(key) || (bool && key.startsWith('no') && params.includes(key.slice(2))) || varkw)
      keyword = key;
    else if (key.length === 1) {
      const matching = params.filter((p) => p[0] === key);
      if (matching.length === 1) keyword = matching[0]!;
    }
    if (!keyword) {
      if (eq < 0 && !bool) i++;
      continue;
    }
    if (raw === undefined && bool) {
      if (params.includes(keyword)) raw = 'True';
      else if (keyword.startsWith('no')) {
        keyword = keyword.slice(2);
        raw = 'False';
      } else raw = 'True';
    } else if (raw === undefined) raw = args[++i]!;
    key = keyword;
    keywords.set(key, { raw, text: eq >= 0 || bool ? a : `${a} ${raw}` });
  }
  return { keywords, positional };
}

/**
 * A command-line string as fire.parser.DefaultParseValue reads it: a Python literal (`8`, `1e-5`, `True`, `None`,
 * `'x'`), else, for a bare word or path (`lora`, `meta-llama/Llama-3.1-8B`), the string itself. Containers are not
 * read.
 */
export function fireValue(raw: string): Value {
  const t = raw.trim();
  if (t === 'True' || t === 'False') return { k: 'bool', v: t === 'True' };
  if (t === 'None') return { k: 'none' };
  if (/^[+-]?(?:\d[\d_]*)$/.test(t)) return { k: 'num', v: Number(t.replace(/_/g, '')), int: true };
  if (/^[+-]?(?:\d[\d_]*\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/.test(t))
    return { k: 'num', v: Number(t.replace(/_/g, '')), int: false };
  const quoted = /^(['"])(.*)\1$/s.exec(t);
  if (quoted && !quoted[2]!.includes(quoted[1]!) && !quoted[2]!.includes('\\'))
    return { k: 'str', v: quoted[2]! };
  if (/^[[{(]/.test(t)) return UNKNOWN(raw, 'a container on the command line');
  return { k: 'str', v: raw };
}
