/**
 * torchtitan jobs configured in Python: a function of a model's `config_registry.py`, estimated as torchtitan
 * runs it, either from that file (`--plan NAME` picks the function) or from `torchtitan/train.py`, whose
 * `ConfigManager().parse_args()` reads `--module M --config NAME` and the overrides after them.
 */
import * as path from 'node:path';
import { up } from '../parsing/python';
import type { FileFacts } from '../analysis/facts';
import { Evaluator } from '../analysis/evaluator';
import { projectReaders } from '../frameworks/scriptConfigs';
import { applyTomlOverrides, torchtitanPlan } from '../frameworks/torchtitan';
import { registryFunctions, titanJob } from '../frameworks/torchtitanPython';
import { readConfigText } from '../frameworks/configDoc';
import { launchedConfigPath } from './configFile';
import type { Project, PyFile } from '../project/project';
import { estimateFile, type AnalyzeOptions, type EstimateResult } from './analyze';
import type { PlanChoices } from '../vocabulary/planChoices';

/** How the estimate of a registry function was reached, for its first note. */
interface Reached {
  /** `torchtitan.train --module llama3 --config llama3_8b`, when from the entry. */
  via?: string;
}

/**
 * The estimate of a torchtitan registry file's job: the function `plan` names, or its only one. Undefined for a
 * file that defines no registry function.
 */
export function registryEstimate(
  project: Project | undefined,
  file: PyFile,
  facts: FileFacts,
  plan: string | undefined,
  argv: readonly string[],
  opts: AnalyzeOptions,
  reached: Reached = {},
): EstimateResult | undefined {
  const fns = registryFunctions(file.source);
  if (!fns.length) return undefined;
  // `--plan NAME`, else a `# fsdp: plan=NAME` comment (the editor's "Choose what to estimate" writes one).
  plan ??= reached.via ? undefined : facts.annotations.find((a) => a.values.plan !== undefined)?.values.plan;
  const fn = plan ? fns.find((f) => f.name === plan) : fns.length === 1 ? fns[0] : undefined;
  const names = fns.map((f) => f.name);
  // The job configs, for a surface that offers them (the editor's "Choose what to estimate in this file").
  const plans: PlanChoices | undefined = reached.via
    ? undefined
    : {
        chosen: fn?.name ?? '',
        plans: fns.map((f) => ({
          name: f.name,
          kind: 'function',
          line: f.line,
          end: f.node.endPosition.row + 1,
        })),
      };
  const withPlans = (r: EstimateResult): EstimateResult => (plans ? { ...r, plans } : r);
  if (!fn)
    return withPlans({
      ok: false,
      unknownModel: true,
      reason: plan
        ? `${path.basename(file.path)} defines no job config ${plan}() (it defines ${shortList(names)})`
        : `${path.basename(file.path)} defines ${fns.length} torchtitan job configs (${shortList(names)}): which one runs is chosen on the command line`,
      hint: `estimate one with --plan NAME or a "# fsdp: plan=NAME" comment (for example --plan ${names.find((n) => /8b/i.test(n)) ?? names[0]})`,
    });
  const ev = new Evaluator(file.source, file.imports, undefined, {
    ...(project ? projectReaders(project, file.path) : {}),
  });
  // The model package beside the registry says whether its flavors fuse q, k and v.
  const init = project?.file(path.join(path.dirname(file.path), '__init__.py'))?.source.text;
  const job = titanJob(ev, file.source, fn, argv, init);
  const titan = torchtitanPlan(job.doc);
  if ('message' in titan)
    return withPlans({
      ok: false,
      unknownModel: true,
      reason: `${fn.name}() at line ${fn.line}: ${titan.message}`,
    });
  titan.notes.unshift(
    reached.via
      ? `the job is ${fn.name}() of ${path.basename(path.dirname(file.path))}/${path.basename(file.path)}, which ${reached.via} selects`
      : `the job config ${fn.name}() at line ${fn.line}`,
    ...job.notes,
    ...(job.used.length ? [`read from the command line: ${job.used.join(' ')}`] : []),
  );
  return withPlans(estimateFile(facts, { ...opts, framework: titan }));
}

/**
 * The estimate of torchtitan's entry (`torchtitan/train.py`): the registry function its command line selects.
 * Undefined for a file that does not read its job through torchtitan's ConfigManager.
 */
export function titanEntryEstimate(
  project: Project | undefined,
  file: PyFile,
  facts: FileFacts,
  opts: AnalyzeOptions,
): EstimateResult | undefined {
  const use = configManagerUse(file);
  if (!use) return undefined;
  const argv = facts.argv ?? [];
  // Before the job registries, ConfigManager read a TOML: `--job.config_file PATH` (JobConfig's `config_file`,
  // `ConfigManager.parse_args` loads it, then applies the `--section.key` overrides after it).
  const toml = flag(argv, '--job.config_file') ?? flag(argv, '--job.config-file');
  if (toml !== undefined) return tomlEntryEstimate(project, file, facts, toml, argv, opts);
  const module = flag(argv, '--module');
  const config = flag(argv, '--config');
  if (!module || !config) {
    // A ConfigManager of the TOML era reads `--job.config_file` instead.
    const manager = project?.resolveModule(file.path, 'torchtitan.config.manager');
    if (manager && /\bconfig[_-]file\b/.test(project!.file(manager)?.source.text ?? ''))
      return {
        ok: false,
        unknownModel: true,
        reason: `torchtitan reads the job from the TOML that --job.config_file names (ConfigManager().parse_args() at line ${use}), which ${facts.argv ? 'it does not name' : 'was not given'}`,
        hint: 'give it after `--`, as `-- --job.config_file path/to/job.toml` (or in the script as `# fsdp: args="--job.config_file path/to/job.toml"`)',
      };
    return {
      ok: false,
      unknownModel: true,
      reason: `torchtitan reads the job from --module and --config on the command line (ConfigManager().parse_args() at line ${use}), which ${facts.argv ? 'does not name both' : 'was not given'}`,
      hint: 'give them after `--`, as `-- --module llama3 --config llama3_8b` (or in the script as `# fsdp: args="--module llama3 --config llama3_8b"`)',
    };
  }
  // ConfigManager._load_config: a short module name is looked up under torchtitan.models, then experiments; a
  // dotted one is imported as `NAME.config_registry`, then as NAME itself.
  const candidates = module.includes('.')
    ? [`${module}.config_registry`, module]
    : [`torchtitan.models.${module}.config_registry`, `torchtitan.experiments.${module}.config_registry`];
  const where = candidates.map((m) => project?.resolveModule(file.path, m)).find(Boolean);
  const registry = where ? project?.file(where) : undefined;
  if (!registry)
    return {
      ok: false,
      unknownModel: true,
      reason: `--module ${module}: no config_registry of that module is in the project (${candidates.join(', ')})`,
    };
  const rest = withoutFlags(argv, ['--module', '--config']);
  // The command line is read here, not by the script's own options.
  const read = { ...facts, argsRead: [`--module ${module}`, `--config ${config}`, ...rest] };
  return (
    registryEstimate(project, registry, read, config, rest, opts, {
      via: `the command line (--module ${module} --config ${config})`,
    }) ?? {
      ok: false,
      unknownModel: true,
      reason: `${path.relative(path.dirname(file.path), registry.path)} defines no torchtitan job config`,
    }
  );
}

/**
 * The job of a TOML that torchtitan's entry reads through `--job.config_file`, with the command line's
 * `--section.key V` overrides (`ConfigManager.parse_args`: the file's values, then the flags), estimated as the
 * TOML itself is: the path is taken from the launch file's folder, the entry's or a root of the project.
 */
function tomlEntryEstimate(
  project: Project | undefined,
  file: PyFile,
  facts: FileFacts,
  given: string,
  argv: readonly string[],
  opts: AnalyzeOptions,
): EstimateResult {
  const unquoted = given.replace(/^["']|["']$/g, '');
  const fail = (reason: string, hint?: string): EstimateResult => ({
    ok: false,
    unknownModel: true,
    reason: `torchtitan reads the job from --job.config_file ${unquoted}: ${reason}`,
    ...(hint ? { hint } : {}),
  });
  if (unquoted.includes('$'))
    return fail(
      'a path the environment gives',
      'give the path after `--`, as `-- --job.config_file path/to/job.toml`',
    );
  const found = project ? launchedConfigPath(project, unquoted, file.path) : undefined;
  const text = found ? project!.fs.readFile(found) : undefined;
  if (!found || text === undefined) return fail('no such file in the project');
  const doc = readConfigText(found, text);
  if ('error' in doc) return fail(doc.error);
  const used = applyTomlOverrides(doc.data, withoutFlags(argv, ['--job.config_file', '--job.config-file']));
  const titan = torchtitanPlan(doc);
  if ('message' in titan) return fail(titan.message);
  const rel = project ? path.relative(project.roots[0] ?? path.dirname(found), found) : found;
  titan.notes.unshift(
    `the job is ${rel}, which the command line's --job.config_file names`,
    ...(used.length ? [`read from the command line: ${used.join(' ')}`] : []),
  );
  const read = { ...facts, argsRead: [`--job.config_file ${unquoted}`, ...used] };
  return estimateFile(read, { ...opts, framework: titan });
}

/** The 1-based line of `ConfigManager().parse_args()` (torchtitan.config.ConfigManager), if the file calls it. */
function configManagerUse(file: PyFile): number | undefined {
  if (!/^torchtitan\.config\b/.test(file.imports.qualify('ConfigManager').qualified)) return undefined;
  for (const id of file.source.identifiers('ConfigManager')) {
    const call = up(id);
    if (call?.type === 'call' && call.childForFieldName('function')?.id === id.id)
      return file.source.line(id);
  }
  return undefined;
}

/** The value of `--name V` / `--name=V` on a command line. */
function flag(argv: readonly string[], name: string): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === name) return argv[i + 1];
    if (a.startsWith(`${name}=`)) return a.slice(name.length + 1);
  }
  return undefined;
}

function withoutFlags(argv: readonly string[], names: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (names.includes(a)) i++;
    else if (!names.some((n) => a.startsWith(`${n}=`))) out.push(a);
  }
  return out;
}

function shortList(names: string[]): string {
  return names.length <= 6
    ? names.join(', ')
    : `${names.slice(0, 5).join(', ')} and ${names.length - 5} more`;
}
