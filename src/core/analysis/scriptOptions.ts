/** The command-line options a script declares: its argparse `add_argument(...)` calls, with their flags and keywords. */
import { up, type Node } from '../parsing/python';
import type { SourceFile } from '../parsing/source';
import { stripQuotes } from './paths';

/** One `parser.add_argument("--batch-size", "-b", type=int, default=8)`. */
export interface OptionDeclaration {
  call: Node;
  /** Its names as written, quotes removed (`--batch-size`, `-b`, or a positional's name). */
  names: string[];
  /** A keyword argument's value node (`default`, `action`, `type`, `choices`, `dest`). */
  kw: (name: string) => Node | undefined;
}

/** The file's `X.add_argument(...)` calls (`X.option(...)` too, for click's decorators, with `word`). */
export function optionDeclarations(file: SourceFile, word = 'add_argument'): OptionDeclaration[] {
  const out: OptionDeclaration[] = [];
  for (const id of file.identifiers(word)) {
    const attr = up(id);
    const call = up(attr);
    if (
      attr?.type !== 'attribute' ||
      call?.type !== 'call' ||
      call.childForFieldName('function')?.id !== attr.id
    )
      continue;
    const args = call.childForFieldName('arguments')?.namedChildren ?? [];
    out.push({
      call,
      names: args.filter((a) => a.type === 'string').map((a) => stripQuotes(a.text)),
      kw: (k) =>
        args
          .find((a) => a.type === 'keyword_argument' && a.childForFieldName('name')?.text === k)
          ?.childForFieldName('value') ?? undefined,
    });
  }
  return out;
}
