/**
 * Configuration files in a project: their annotations, the training script beside them, and the Accelerate config
 * a script is launched with.
 */
import { commandLines, expandedCommands, flags, programArgs, pythonScriptOf } from '../parsing/commandLine';
import { hfHome } from '../model/load';
import type { Host } from '../vocabulary/host';
import * as path from 'node:path';
import { emptyFacts, type AnnotationFact, type FileFacts } from '../analysis/facts';
import { noqaCodes } from '../analysis/comments';
import { annotationValues } from '../vocabulary/annotations';
import { scanFile } from '../analysis/scan';
import { formatOf, posInt, readConfigText } from '../frameworks/configDoc';
import { argumentsFileInputs, isArgumentsFile, scriptAdapterFlags } from '../frameworks/argumentsFile';
import type { FineTune } from '../model/finetune';
import { readFrameworkConfig, type ConfigReading } from '../frameworks/read';
import { acceleratorCall, acceleratorPrecision } from '../frameworks/python';
import { trainingArgumentValues } from '../frameworks/transformers';
import { scriptFlagsCall } from '../frameworks/shell';
import type { FrameworkPlan } from '../frameworks/types';
import type { Project } from '../project/project';
import { pinnedVersions } from '../project/versions';
import { launchFacts, launchOf } from '../project/settings';
import type { ModelChoice } from '../inputs/model';
import type { Layer } from '../inputs/layers';

/** `# fsdp: key=value` and `# noqa` comments of a YAML or TOML configuration (JSON has no comments). */
export function configComments(file: string, text: string): Pick<FileFacts, 'annotations' | 'noqa'> {
  const annotations: AnnotationFact[] = [];
  const noqa: FileFacts['noqa'] = {};
  if (formatOf(file) === 'json') return { annotations, noqa };
  text.split('\n').forEach((line, i) => {
    // A comment starts a line or follows whitespace (a `#` inside a value is not one).
    const m = /(^|\s)#(.*)$/.exec(line);
    if (!m) return;
    const body = m[2]!;
    const a = /^\s*fsdp:(.*)$/.exec(body);
    if (a)
      annotations.push({
        line: i + 1,
        range: { start: { line: i, character: m.index }, end: { line: i, character: line.length } },
        ...annotationValues(a[1]!),
      });
    const codes = noqaCodes(body);
    if (codes !== undefined) noqa[i] = codes;
  });
  return { annotations, noqa };
}

const MAX_SCRIPTS = 40;

/**
 * The training script a configuration sits beside, for its model and training arguments: a script of the same
 * folder (or the project root) that names the configuration, else one that loads a model with `from_pretrained`.
 */
export function companionScript(project: Project, configFile: string, named?: string): FileFacts | undefined {
  const grammar = project.grammar;
  if (named) {
    // The script a launch command runs, or nothing: another script's settings would not apply.
    const f = project.file(named);
    return f ? scanFile(grammar, f.source) : undefined;
  }
  const dirs = [...new Set([path.dirname(configFile), ...project.roots])];
  const base = path.basename(configFile);
  const candidates: { file: string; score: number }[] = [];
  for (const dir of dirs)
    for (const name of fileNames(project, dir)) {
      if (!name.endsWith('.py')) continue;
      const file = path.join(dir, name);
      const text = project.fs.readFile(file);
      if (!text || !/from_pretrained\s*\(|TrainingArguments|SFTConfig|Trainer\s*\(/.test(text)) continue;
      candidates.push({
        file,
        score: (text.includes(base) ? 2 : 0) + (/from_pretrained\s*\(/.test(text) ? 1 : 0),
      });
      if (candidates.length >= MAX_SCRIPTS) break;
    }
  candidates.sort((a, b) => b.score - a.score);
  for (const c of candidates) {
    const f = project.file(c.file);
    if (!f) continue;
    const facts = scanFile(grammar, f.source);
    if (facts.models.some((m) => m.pretrained) || facts.frameworkCalls.length) return facts;
  }
  return undefined;
}

/** The model and training arguments a companion script gives a configuration. */
export function fromCompanion(script: FileFacts | undefined): { model?: ModelChoice; layer?: Layer } {
  if (!script) return {};
  const name = path.basename(script.path);
  const out: { model?: ModelChoice; layer?: Layer } = {};
  const pretrained = script.models.find((m) => m.pretrained);
  if (pretrained?.pretrained)
    out.model = {
      id: pretrained.pretrained,
      source: { kind: 'detected', detail: `${name}:${pretrained.line}` },
    };
  const args = script.frameworkCalls.find((c) => c.kind === 'TrainingArguments');
  if (args) {
    const t = trainingArgumentValues(args, script.path);
    out.layer = { source: { kind: 'detected' }, values: t.values, details: t.details };
  }
  // `Accelerator(mixed_precision=...)` in the script takes precedence over the config's `mixed_precision`.
  const acc = acceleratorPrecision(acceleratorCall(script), script.path);
  if (acc && Object.keys(acc.values).length) {
    const layer = out.layer ?? { source: { kind: 'detected' }, values: {}, details: {} };
    Object.assign(layer.values, acc.values);
    layer.details = { ...layer.details, ...acc.details };
    out.layer = layer;
  }
  return out;
}

/** Reads a configuration file as a framework's FSDP plan, with the project's pinned versions. */
export function readConfigInProject(file: string, text: string, project?: Project): ConfigReading {
  const root = project?.roots[0];
  const versions =
    project && root ? project.memo(`versions:${root}`, () => pinnedVersions(project.fs, root)) : {};
  // A torchtitan TOML that a launch command of the project names (`--job.config_file`): that command's overrides.
  const launch =
    project && root && file.endsWith('.toml')
      ? launchOf(
          project.memo(`launch-files:${root}`, () => launchFacts(project.fs, root)),
          file,
        )
      : undefined;
  return readFrameworkConfig(file, text, {
    versions,
    ...(launch?.scriptArgs?.length
      ? { launch: { args: launch.scriptArgs, where: `${path.relative(root!, launch.file)}:${launch.line}` } }
      : {}),
  });
}

/**
 * An Accelerate (or Transformers `fsdp_config`) configuration beside a script that trains through a framework
 * but configures no FSDP itself: what `accelerate launch --config_file` would apply to it.
 */
export function nearbyFrameworkConfig(
  project: Project,
  script: string,
  host?: Pick<Host, 'env' | 'home'>,
): FrameworkPlan | undefined {
  return project.memo(`nearby-config:${script}`, () => {
    const dirs = [...new Set([path.dirname(script), ...project.roots])];
    // A launch script that runs this script with `accelerate launch --config_file X`.
    for (const dir of dirs)
      for (const name of fileNames(project, dir)) {
        if (!/\.(sh|bash|slurm|sbatch)$/.test(name)) continue;
        const text = project.fs.readFile(path.join(dir, name));
        if (!text || !text.includes(path.basename(script)) || !text.includes('--config_file')) continue;
        const given = commandLines(text)
          .filter((c) => c.cmd.includes(path.basename(script)))
          .map((c) =>
            flags(c.cmd)
              .get('--config_file')
              ?.replace(/^["']|["']$/g, ''),
          )
          .find((f) => !!f);
        if (!given) continue;
        const file = path.resolve(dir, given);
        const cfg = project.fs.readFile(file);
        if (!cfg) continue;
        const r = readConfigInProject(file, cfg, project);
        if (r.kind === 'plan') return r.plan;
      }
    for (const dir of dirs)
      for (const name of fileNames(project, dir)) {
        if (!/\.(ya?ml|json)$/i.test(name)) continue;
        const file = path.join(dir, name);
        const text = project.fs.readFile(file);
        if (!text || !/distributed_type|fsdp_config/.test(text)) continue;
        const r = readConfigInProject(file, text, project);
        if (r.kind === 'plan' && r.plan.framework === 'Accelerate') return r.plan;
      }
    // What `accelerate launch` uses without --config_file: $HF_HOME/accelerate/default_config.yaml.
    if (host) {
      const file = path.join(hfHome(host), 'accelerate', 'default_config.yaml');
      const text = project.fs.readFile(file);
      if (text) {
        const r = readConfigInProject(file, text, project);
        if (r.kind === 'plan' && r.plan.framework === 'Accelerate') return r.plan;
      }
    }
    return undefined;
  });
}

const MAX_LAUNCH_FILES = 40;

/**
 * The launch command that runs `accelerate launch --config_file <configFile> SCRIPT ...` in a launch file of the
 * config's folder, its parent or a project root: the script, and the argument file it passes (`--config
 * recipe.yaml`, as TRL's scripts take it, or a YAML/JSON given first, as `HfArgumentParser.parse_yaml_file` reads
 * `sys.argv[1]`) with what that file sets.
 */
export function launchedConfig(
  project: Project,
  configFile: string,
  prefer?: string,
):
  | {
      where: string;
      /** The launcher's own process counts (`--num_processes`, `--num_machines`), which override the config's. */
      counts?: { worldSize: number; gpusPerNode?: number; where: string };
      script?: string;
      recipe?: {
        file: string;
        model: ModelChoice;
        layer: Layer;
        fineTune?: FineTune;
        /** Read from the script's flags on the launch line rather than from an argument file. */
        flags?: true;
        /** The script's own flags that may train an adapter or quantise the model, not read (`scriptAdapterFlags`). */
        unread?: string;
      };
    }
  | undefined {
  return project.memo(`launched-config:${configFile}:${prefer ?? ''}`, () => {
    const dirs = [
      ...new Set([path.dirname(configFile), path.dirname(path.dirname(configFile)), ...project.roots]),
    ];
    // The launch file the estimate is for, first: its command is the job's.
    const candidates = (dir: string) =>
      prefer && path.dirname(prefer) === dir
        ? [path.basename(prefer), ...fileNames(project, dir).filter((n) => n !== path.basename(prefer))]
        : fileNames(project, dir);
    let seen = 0;
    for (const dir of dirs)
      for (const name of candidates(dir)) {
        if (!/\.(sh|bash|slurm|sbatch)$/.test(name) || ++seen > MAX_LAUNCH_FILES) continue;
        const text = project.fs.readFile(path.join(dir, name));
        if (!text || !text.includes('--config_file') || !text.includes(path.basename(configFile))) continue;
        for (const c of expandedCommands(text)) {
          if (!/\baccelerate\s+launch\b/.test(c.cmd)) continue;
          const given = flags(c.cmd)
            .get('--config_file')
            ?.replace(/^["']|["']$/g, '');
          if (!given) continue;
          const roots = [dir, ...project.roots];
          if (
            !roots.some((r) => path.resolve(r, given) === configFile) &&
            !sameTail(given, configFile, roots)
          )
            continue;
          const where = `${name}:${c.line + 1}${c.expanded ? ' (as the shell expands it)' : ''}`;
          // `accelerate launch --num_processes N --num_machines M` stands above the config's own counts.
          const scriptAt = c.cmd.search(/\S+\.py\b/);
          const launcher = flags(scriptAt > 0 ? c.cmd.slice(0, scriptAt) : c.cmd);
          const procs = posInt(launcher.get('--num_processes')?.replace(/^["']|["']$/g, ''));
          const machines = posInt(launcher.get('--num_machines')?.replace(/^["']|["']$/g, '')) ?? 1;
          const script = pythonScriptOf(c.cmd) ?? undefined;
          const resolve = (rel: string) =>
            roots.map((r) => path.resolve(r, rel)).find((f) => project.fs.readFile(f) !== undefined);
          const out: NonNullable<ReturnType<typeof launchedConfig>> = { where };
          if (procs)
            out.counts = {
              worldSize: procs,
              ...(procs % machines === 0 ? { gpusPerNode: procs / machines } : {}),
              where: `--num_processes at ${where}`,
            };
          const scriptFile = script ? resolve(script) : undefined;
          if (scriptFile) out.script = scriptFile;
          const args = script ? (programArgs(c.cmd, script) ?? []) : [];
          const i = args.findIndex((a) => a === '--config' || a.startsWith('--config='));
          const named =
            i >= 0
              ? args[i]!.includes('=')
                ? args[i]!.slice(args[i]!.indexOf('=') + 1)
                : args[i + 1]
              : args[0] && /\.(ya?ml|json)$/i.test(args[0])
                ? args[0]
                : undefined;
          const recipeFile = named ? resolve(named) : undefined;
          const recipeText = recipeFile ? project.fs.readFile(recipeFile) : undefined;
          const doc = recipeFile && recipeText ? readConfigText(recipeFile, recipeText) : undefined;
          // Or the script's own flags (`--model_name_or_path X --per_device_train_batch_size 4 ...`), as
          // HfArgumentParser reads them into TrainingArguments.
          const call =
            script && !named
              ? scriptFlagsCall(args.join(' '), c.line + 1, {
                  start: { line: c.line, character: 0 },
                  end: { line: c.line, character: 0 },
                })
              : undefined;
          const model =
            call && typeof call.kwargs.model_name_or_path === 'string'
              ? call.kwargs.model_name_or_path
              : undefined;
          if (call && model) {
            const t = trainingArgumentValues(call, path.join(dir, name), true);
            const adapter = scriptAdapterFlags(call.kwargs);
            out.recipe = {
              ...(adapter.fineTune ? { fineTune: adapter.fineTune } : {}),
              ...(adapter.unread ? { unread: adapter.unread } : {}),
              file: path.join(dir, name),
              model: {
                id: model,
                source: { kind: 'config', detail: `--model_name_or_path at ${where}` },
              },
              layer: { source: { kind: 'config', detail: where }, values: t.values, details: t.details },
              flags: true,
            };
          }
          if (doc && !('error' in doc) && isArgumentsFile(doc)) {
            const r = argumentsFileInputs(doc);
            out.recipe = {
              file: recipeFile!,
              model: {
                id: r.model.id,
                source: {
                  kind: 'config',
                  detail: `model_name_or_path at ${r.model.where} (launched by ${where})`,
                },
              },
              layer: {
                source: { kind: 'config', detail: path.basename(recipeFile!) },
                values: r.values,
                details: r.details,
              },
              ...(r.fineTune ? { fineTune: r.fineTune } : {}),
            };
          }
          return out;
        }
      }
    return undefined;
  });
}

/**
 * A config path written under a directory the environment gives (`${ACCELERATE_DIR}/examples/slurm/x.yaml`, its
 * shell default not in the project): the same file when its last three parts are the config's, inside a root.
 */
function sameTail(given: string, configFile: string, roots: readonly string[]): boolean {
  if (roots.some((r) => path.resolve(r, given) === configFile)) return true;
  const parts = given.split('/').filter((p) => p && p !== '.');
  if (parts.length < 3 || parts.slice(-3).some((p) => p.includes('$') || p === '..')) return false;
  const tail = parts.slice(-3).join(path.sep);
  return configFile.endsWith(path.sep + tail) && roots.some((r) => configFile.startsWith(r + path.sep));
}

/**
 * The project file a launch command's config path names: relative to the launch file's folder or a root, or, for
 * a path under a directory the environment gives, the file with the same last three parts under a root or a folder
 * above the launch file.
 */
export function launchedConfigPath(project: Project, given: string, launchFile: string): string | undefined {
  const exists = (f: string) => project.fs.readFile(f) !== undefined;
  const direct = [path.dirname(launchFile), ...project.roots].map((r) => path.resolve(r, given)).find(exists);
  if (direct) return direct;
  const parts = given.split('/').filter((p) => p && p !== '.');
  if (parts.length < 3 || parts.slice(-3).some((p) => p.includes('$') || p === '..')) return undefined;
  const tail = parts.slice(-3).join(path.sep);
  const bases = new Set(project.roots);
  for (let d = path.dirname(launchFile), i = 0; i < 8 && project.roots.some((r) => d.startsWith(r)); i++) {
    bases.add(d);
    d = path.dirname(d);
  }
  return [...bases].map((b) => path.join(b, tail)).find(exists);
}

export function configFacts(file: string, text: string): FileFacts {
  return { ...emptyFacts(file), ...configComments(file, text) };
}

/** The names of the files directly in `dir`, in name order. */
function fileNames(project: Project, dir: string): string[] {
  return project.fs
    .entries(dir)
    .filter((e) => e.kind === 'file')
    .map((e) => e.name)
    .sort();
}
