/** `fsdp-lens models` and `fsdp-lens gpus`: the built-in model catalog and the GPUs `--gpu` takes. */
import { fmtCount, fmtParams } from '../../core/vocabulary/bytes';
import { GPUS, LINKS } from '../../core/hardware/catalog';
import { ALIASES, CATALOG } from '../../core/model/catalog';
import { modelFromHfConfig } from '../../core/model/hf';
import { countParams } from '../../core/model/tree';
import { parseOptions } from '../args';
import { UsageError, EXIT, type Streams } from '../io';
import { EXIT_TEXT } from '../help';
import type { CommandSpec } from '../spec';

/** One built-in model: its Hugging Face id, architecture and parameter count as the estimator builds it. */
export interface CatalogRow {
  id: string;
  modelType: string;
  params: number;
}

export function catalogRows(): CatalogRow[] {
  return Object.entries(CATALOG).map(([id, config]) => ({
    id,
    modelType: String(config.model_type),
    params: countParams(modelFromHfConfig(config).root),
  }));
}

/** Left-aligned columns, two spaces apart. */
function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return (
    rows.map((r) => r.map((c, i) => (i < r.length - 1 ? c.padEnd(widths[i]!) : c)).join('  ')).join('\n') +
    '\n'
  );
}

export const modelsSpec = {
  name: 'models',
  args: '',
  summary: 'The built-in model catalog: id, model_type, parameter count.',
  options: { json: { type: 'boolean' } },
  flags: () => [{ flag: '--json', text: 'JSON instead of text.' }],
  examples: [
    { line: 'fsdp-lens models', does: 'The ids --model takes without a Hugging Face cache.' },
    { line: 'fsdp-lens estimate --model meta-llama/Llama-3.1-70B', does: 'An estimate for one of them.' },
  ],
  exits: { ok: EXIT_TEXT.ok, usage: EXIT_TEXT.usage },
} satisfies CommandSpec;

export const gpusSpec = {
  name: 'gpus',
  args: '',
  summary: 'The GPUs --gpu takes: memory, dense bf16 compute, links.',
  options: { json: { type: 'boolean' } },
  flags: () => [{ flag: '--json', text: 'JSON instead of text.' }],
  examples: [
    { line: 'fsdp-lens gpus', does: 'Each GPU id with its memory, compute and links.' },
    { line: 'fsdp-lens estimate train.py --gpu h200-141gb', does: 'An estimate on one of them.' },
  ],
  exits: { ok: EXIT_TEXT.ok, usage: EXIT_TEXT.usage },
} satisfies CommandSpec;

/** `fsdp-lens models`: the built-in catalog `--model` reads when the Hugging Face cache does not have an id. */
export function modelsCommand(argv: string[], io: Streams): number {
  const { values, positionals } = parseOptions(argv, modelsSpec);
  if (positionals.length) throw new UsageError('models takes no arguments');
  const rows = catalogRows();
  const aliases = Object.entries(ALIASES).map(([id, of]) => ({ id, architectureOf: of }));
  if (values.json) io.out.write(JSON.stringify({ models: rows, aliases }, null, 2) + '\n');
  else
    io.out.write(
      table([
        ['ID', 'MODEL_TYPE', 'PARAMETERS'],
        ...rows.map((r) => [r.id, r.modelType, `${fmtParams(r.params)} (${fmtCount(r.params)})`]),
      ]) +
        '\nAlso read, with the architecture their config.json shares with an entry above:\n' +
        table([['ID', 'ARCHITECTURE OF'], ...aliases.map((a) => [a.id, a.architectureOf])]),
    );
  return EXIT.ok;
}

/** `fsdp-lens gpus`: the GPUs `--gpu` takes, with the memory, compute and links the estimate uses. */
export function gpusCommand(argv: string[], io: Streams): number {
  const { values, positionals } = parseOptions(argv, gpusSpec);
  if (positionals.length) throw new UsageError('gpus takes no arguments');
  const link = (id: string) => LINKS.find((l) => l.id === id);
  if (values.json)
    io.out.write(
      JSON.stringify(
        {
          gpus: GPUS.map((g) => ({
            ...g,
            memoryBytes: g.memoryMiB * 1024 * 1024,
            intraNodeGBsPerDirection: link(g.intraNode)?.perDirectionGBs ?? null,
            interNodeGBsPerDirection: link(g.interNode)?.perDirectionGBs ?? null,
          })),
        },
        null,
        2,
      ) + '\n',
    );
  else
    io.out.write(
      table([
        ['ID', 'NAME', 'MEMORY', 'BF16 DENSE', 'IN A NODE (each way)', 'BETWEEN NODES (each way)'],
        ...GPUS.map((g) => [
          g.id,
          g.name,
          `${fmtCount(g.memoryMiB)} MiB`,
          `${fmtCount(g.bf16Tflops)} TFLOP/s`,
          `${link(g.intraNode)?.name ?? g.intraNode} ${link(g.intraNode)?.perDirectionGBs ?? '?'} GB/s`,
          `${link(g.interNode)?.name ?? g.interNode} ${link(g.interNode)?.perDirectionGBs ?? '?'} GB/s`,
        ]),
      ]) +
        GPUS.filter((g) => g.aliases?.length)
          .map((g) => `${g.id} is also named ${g.aliases!.map((a) => `"${a}"`).join(', ')}\n`)
          .join(''),
    );
  return EXIT.ok;
}
