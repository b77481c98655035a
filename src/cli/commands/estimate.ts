/**
 * `fsdp-lens estimate`: the estimate of a script, a configuration or a model named by flags, as text with advice
 * or as JSON, through the same core entry the editor uses.
 */
import * as path from 'node:path';
import { scanText } from '../../core/analysis/input';
import { estimateJson } from '../../core/report/json';
import { advise } from '../../core/whatif/advice';
import { adviceText, estimateText } from '../../core/report/text';
import type { EstimateResult } from '../../core/resolve/analyze';
import { INPUT_BY_FLAG, parseInput, type SetupValues } from '../../core/inputs/table';
import { fineTuneFromFlags, type ModelChoice } from '../../core/inputs/model';
import { replicasDivide } from '../../core/inputs/layers';
import { loadPython } from '../../host/grammar';
import { projectAt } from '../../core/project/project';
import { exactForScript, type ExactModel } from '../../core/exact/exact';
import { runExactHelper } from '../../host/exact';
import type { FineTune } from '../../core/model/finetune';
import { parseOptions } from '../args';
import { estimateFlags, EXIT_TEXT } from '../help';
import type { CommandSpec } from '../spec';
import { EXIT, reportGaps, UsageError, type Streams } from '../io';
import { didYouMean } from '../../core/vocabulary/suggest';
import { commandLineHost } from '../files';
import { readInputFile } from '../analyzeFile';
import { analyzeDocument, scanContext } from '../../core/entry/analyze';
import { isConfigPath } from '../../core/vocabulary/files';

const OPTIONS = {
  json: { type: 'boolean' },
  units: { type: 'string' },
  model: { type: 'string' },
  config: { type: 'string' },
  'lora-rank': { type: 'string' },
  'lora-targets': { type: 'string' },
  'base-dtype': { type: 'string' },
  plan: { type: 'string' },
  exact: { type: 'boolean' },
  python: { type: 'string' },
  'exact-timeout': { type: 'string' },
  ...(Object.fromEntries(Object.keys(INPUT_BY_FLAG).map((k) => [k, { type: 'string' }])) as Record<
    string,
    { type: 'string' }
  >),
} as const;

export const estimateSpec = {
  name: 'estimate',
  args: '[FILE] [-- SCRIPT_ARGS...]',
  summary: 'Per-GPU memory and traffic per step of the FSDP plan in FILE (or the default plan).',
  about:
    "FILE is a training script or a framework configuration. Flags override what the file says; what neither says takes the default shown, and the output lists every assumption with where it came from. Arguments after `--` are the script's own, as it would be launched: its argparse options take them instead of their defaults.",
  options: OPTIONS,
  flags: () => [
    ...estimateFlags(),
    {
      flag: '--plan NAME',
      text: 'Of a file whose wraps make several plans (in different functions or classes), the one NAME makes.',
    },
    {
      flag: '--exact',
      text: 'Build the model with PyTorch on the meta device for exact parameter counts (runs your code).',
    },
    { flag: '--python PATH', text: 'The Python for --exact (default python3).' },
    { flag: '--exact-timeout S', text: 'Seconds --exact may take (default 120).' },
    { flag: '--units GB|GiB', text: 'Decimal GB (default) or binary GiB.' },
    { flag: '--json', text: 'JSON with exact bytes, the terms of each figure and every assumption.' },
  ],
  examples: [
    {
      line: 'fsdp-lens estimate train.py',
      does: 'Memory, peak, fit, traffic and advice for the plan in train.py.',
    },
    { line: 'fsdp-lens estimate train.py --world-size 64 --gpu h200-141gb', does: 'On 64 H200s.' },
    {
      line: 'fsdp-lens estimate --model meta-llama/Llama-3.1-8B --ac full',
      does: 'The default plan for a model.',
    },
    {
      line: 'fsdp-lens estimate train.py -- --batch-size 8 --use-lora',
      does: 'The path the script takes with these arguments of its own.',
    },
    {
      line: 'fsdp-lens estimate train.py --exact --python .venv/bin/python',
      does: 'Count with your PyTorch.',
    },
    {
      line: 'fsdp-lens estimate train.py --json | jq .targetFit.verdict',
      does: 'fits, short or undecided, for scripts.',
    },
  ],
  exits: {
    ok: 'an estimate was printed',
    usage: `${EXIT_TEXT.usage}; exact mode failing`,
    unknownModel: EXIT_TEXT.unknownModel,
    internal: EXIT_TEXT.internal,
  },
} satisfies CommandSpec;

export async function estimateCommand(argv: string[], io: Streams): Promise<number> {
  // After `--`: the script's own command line.
  const dashdash = argv.indexOf('--');
  const scriptArgs = dashdash >= 0 ? argv.slice(dashdash + 1) : undefined;
  const { values, positionals } = parseOptions(dashdash >= 0 ? argv.slice(0, dashdash) : argv, estimateSpec);
  if (positionals.length > 1) throw new UsageError('estimate takes at most one FILE');
  if (values.model && values.config) throw new UsageError('estimate: give --model or --config, not both');
  const flags: SetupValues = {};
  for (const [flag, key] of Object.entries(INPUT_BY_FLAG)) {
    const raw = (values as Record<string, unknown>)[flag];
    if (typeof raw !== 'string') continue;
    try {
      (flags as Record<string, unknown>)[key] = parseInput(key, raw, `--${flag}`);
    } catch (e) {
      throw new UsageError(`estimate: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  if (
    flags.replicas !== undefined &&
    flags.worldSize !== undefined &&
    !replicasDivide(flags.worldSize, flags.replicas)
  )
    throw new UsageError(
      `estimate: --replicas ${flags.replicas} does not divide --world-size ${flags.worldSize}: HSDP needs R replicas of world-size / R GPUs each`,
    );
  let fineTune: FineTune | undefined;
  try {
    fineTune = fineTuneFromFlags({
      loraRank: values['lora-rank'],
      loraTargets: values['lora-targets'],
      baseDtype: values['base-dtype'],
    });
  } catch (e) {
    throw new UsageError(`estimate: ${e instanceof Error ? e.message : String(e)}`);
  }
  const units = values.units ?? 'GB';
  if (units !== 'GB' && units !== 'GiB')
    throw new UsageError(
      `estimate: --units must be GB or GiB, not "${units}"${didYouMean(units, ['GB', 'GiB'])}`,
    );
  let model: ModelChoice | undefined;
  if (values.model) model = { id: values.model, source: { kind: 'flag', detail: '--model' } };
  if (values.config)
    model = { config: path.resolve(values.config), source: { kind: 'flag', detail: '--config' } };

  const file = positionals[0];
  if (!file && !model) throw new UsageError('estimate needs a FILE, --model ORG/NAME or --config PATH');
  const read = file ? readInputFile(file) : { text: '' };
  if ('error' in read) {
    io.err.write(`fsdp-lens: ${read.error}\n`);
    return EXIT.usage;
  }
  const grammar = await loadPython();
  const abs = file ? path.resolve(file) : undefined;
  const { host, projectRoot } = commandLineHost(abs, values.config ? [values.config] : []);
  const project = projectRoot ? projectAt(projectRoot, grammar, host) : undefined;
  try {
    // The Python file scanned once: exact mode reads the same facts the estimate does.
    // The script's arguments: those after `--`, else those a launch file of the project passes it.
    const facts =
      abs && !isConfigPath(abs)
        ? scanText(grammar, abs, read.text, scanContext(project, abs, scriptArgs))
        : undefined;
    let exactModel: ExactModel | undefined;
    if (values.exact) {
      if (!project || !facts)
        throw new UsageError('estimate: --exact needs a FILE whose model is defined in the project');
      const timeout = Number(values['exact-timeout'] ?? 120);
      if (!Number.isFinite(timeout) || timeout <= 0 || timeout > 86_400)
        throw new UsageError('estimate: --exact-timeout takes seconds, at most 86400 (a day)');
      const x = await exactForScript(project, facts, {
        python: values.python ?? 'python3',
        timeoutMs: timeout * 1000,
        run: runExactHelper,
      });
      if (!x.ok) {
        io.err.write(`fsdp-lens: ${file}: exact mode: ${x.error}${x.detail ? `\n  ${x.detail}` : ''}\n`);
        return EXIT.usage;
      }
      exactModel = x.model;
    }
    // The same entry the editor calls.
    const a = analyzeDocument(
      grammar,
      { ...(abs ? { file: abs } : {}), text: read.text, ...(facts ? { facts } : {}) },
      {
        lint: null,
        estimate: {
          flags: { values: flags, ...(model ? { model } : {}), ...(fineTune ? { fineTune } : {}) },
          host,
          ...(values.plan ? { plan: values.plan } : {}),
          ...(project ? { project } : {}),
          ...(exactModel ? { exactModel } : {}),
        },
      },
    );
    if (a.reading?.kind === 'none') {
      io.err.write(
        `fsdp-lens: ${file}: not a configuration fsdp-lens knows (Accelerate, Transformers fsdp_config, axolotl, llm-foundry, torchtune, torchtitan, DeepSpeed)\n`,
      );
      return EXIT.usage;
    }
    if (a.reading?.kind === 'problem') {
      io.err.write(`fsdp-lens: ${file}: ${a.reading.problem.framework}: ${a.reading.problem.message}\n`);
      return EXIT.usage;
    }
    const result = a.estimate;
    // --replicas against a world size the file, a launch script or the default sets.
    if (result?.ok) {
      const world = result.estimate.setup.worldSize;
      if (flags.replicas !== undefined && !replicasDivide(world, flags.replicas))
        throw new UsageError(
          `estimate: --replicas ${flags.replicas} does not divide the world size ${world} (${result.estimate.assumptions.find((x) => x.key === 'worldSize')?.source.kind ?? 'default'}): HSDP needs R replicas of world-size / R GPUs each`,
        );
    }
    const framework = a.reading?.kind === 'plan' ? a.reading.plan.framework : undefined;
    const failed = reportGaps(io, file ?? 'estimate', a);
    const code = writeEstimate(io, file, result, units, values.json === true, framework, a.incomplete);
    return failed ? EXIT.internal : code;
  } finally {
    project?.dispose();
  }
}

/** Prints an estimate (text with the advice, or JSON), or why there is none. */
function writeEstimate(
  io: Streams,
  file: string | undefined,
  result: EstimateResult | undefined,
  units: 'GB' | 'GiB',
  json: boolean,
  framework?: string,
  incomplete?: string,
): number {
  if (!result || !result.ok) {
    const why = result && !result.ok ? result : { reason: 'nothing to estimate', hint: undefined };
    io.err.write(
      `fsdp-lens: ${file ? `${file}: ` : ''}no estimate: ${why.reason}${why.hint ? `\n  ${why.hint}` : ''}\n`,
    );
    // A plan on a model of unknown size, or a plan not all known: no figure is printed, and the JSON says what is
    // unknown and why.
    const unknown =
      result && !result.ok ? (result.unknownModel ? 'model' : result.unknownPlan ? 'plan' : null) : null;
    if (result && !result.ok && unknown) {
      if (json)
        io.out.write(
          JSON.stringify(
            {
              ...(framework ? { framework } : {}),
              estimate: null,
              [unknown]: {
                known: false,
                reason: result.reason,
                ...(result.hint ? { toKnow: result.hint } : {}),
              },
            },
            null,
            2,
          ) + '\n',
        );
      return EXIT.unknownModel;
    }
    return EXIT.usage;
  }
  const advice = advise(result.whatIf, {}, result.estimate, units);
  if (json)
    io.out.write(
      JSON.stringify(
        {
          ...(framework ? { framework } : {}),
          ...(incomplete ? { incomplete } : {}),
          ...estimateJson(result.estimate, result.model, result.minGpus),
          advice,
        },
        null,
        2,
      ) + '\n',
    );
  else
    io.out.write(
      (framework ? `${framework} configuration\n` : '') +
        (incomplete ? `Partial result: ${incomplete}\n` : '') +
        estimateText(result.estimate, { units, minGpus: result.minGpus }) +
        adviceText(advice, units),
    );
  return EXIT.ok;
}
