/** `fsdp-lens scan`: what each wrap call of a file does, as text or JSON. */
import { scanText } from '../../core/analysis/input';
import { loadPython } from '../../host/grammar';
import { parseOptions } from '../args';
import { EXIT, UsageError, type Streams } from '../io';
import { readPythonFile } from '../files';
import { formatScanText } from '../format';

export async function scanCommand(argv: string[], io: Streams): Promise<number> {
  const { values, positionals } = parseOptions(argv, { json: { type: 'boolean' } }, 'scan');
  if (!positionals.length) throw new UsageError('scan needs at least one FILE');
  const grammar = await loadPython();
  const results = [];
  let failed = false;
  for (const f of positionals) {
    const read = readPythonFile(f);
    if ('error' in read) {
      io.err.write(`fsdp-lens: ${read.error}\n`);
      failed = true;
      continue;
    }
    results.push(scanText(grammar, f, read.text));
  }
  if (values.json) io.out.write(JSON.stringify({ files: results }, null, 2) + '\n');
  else for (const r of results) io.out.write(formatScanText(r));
  return failed ? EXIT.usage : EXIT.ok;
}
