/** A script's command line with options set: earlier occurrences of an option replaced by the new one. */

/**
 * `argv` with `extra` added (`["--strategy", "fsdp2"]`): each option `extra` sets is first removed from `argv`,
 * its value with it (`--strategy fsdp` or `--strategy=fsdp`), so the command line says each option once.
 * An option of `extra` is a token that starts with `-` (a token after it that does not is its value), or a
 * Hydra-style `key=value` override.
 */
export function withArguments(argv: readonly string[], extra: readonly string[]): string[] {
  // Options (`--strategy`), and Hydra-style overrides (`model.strategy=fsdp`) by their key.
  const flags = new Set(
    extra.filter((t) => t.startsWith('-') || /^[\w.+~]+=/.test(t)).map((t) => t.split('=')[0]!),
  );
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const t = argv[i]!;
    const flag = t.split('=')[0]!;
    if (!flags.has(flag)) {
      out.push(t);
      continue;
    }
    // `--strategy fsdp`: the value goes too; `--strategy=fsdp`, `key=value` and a flag alone are one token.
    const next = argv[i + 1];
    if (!t.includes('=') && next !== undefined && !next.startsWith('-')) i++;
  }
  return [...out, ...extra];
}

/** How a note offers the arguments that take another path, where each surface takes them. */
export function takesPathWords(args: readonly string[]): string {
  return `the arguments \`${args.join(' ')}\` take that path (after \`--\` on the command line, or "# fsdp: args=" in the file)`;
}
