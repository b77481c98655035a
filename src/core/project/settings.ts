/**
 * Project-level inputs of an estimate, in the precedence of docs/estimator.md: `[tool.fsdp-lens]` in
 * pyproject.toml, then what launch files say (torchrun, SLURM batch scripts, VS Code launch configurations).
 */
import { parse as parseJsonc } from 'jsonc-parser';
import { flags, programArgs, pythonScriptOf, shellAssignment } from '../parsing/commandLine';
import { walkFiles } from './walk';
import * as path from 'node:path';
import { parse as parseToml } from 'smol-toml';
import type { ModelChoice } from '../inputs/model';
import { INPUT_BY_KEY, parseInput, type SetupValues } from '../inputs/table';
import type { Layer } from '../inputs/layers';
import type { ProjectFS } from './project';

export interface ProjectLayer {
  layer: Layer;
  model?: ModelChoice;
  problems: string[];
}

/** `[tool.fsdp-lens]` of the pyproject.toml nearest above `file` (up to `root`). */
export function pyprojectLayer(fsys: ProjectFS, file: string, root: string): ProjectLayer | undefined {
  let dir = path.dirname(path.resolve(file));
  const stop = path.resolve(root);
  for (let i = 0; i < 16; i++) {
    const candidate = path.join(dir, 'pyproject.toml');
    const text = fsys.readFile(candidate);
    if (text !== undefined) return fromPyproject(text, candidate);
    if (dir === stop || path.dirname(dir) === dir) break;
    dir = path.dirname(dir);
  }
  return undefined;
}

export function fromPyproject(text: string, file: string): ProjectLayer | undefined {
  let doc: Record<string, unknown>;
  try {
    doc = parseToml(text) as Record<string, unknown>;
  } catch (e) {
    return {
      layer: { source: { kind: 'pyproject', detail: file }, values: {} },
      problems: [`${file}: not valid TOML (${e instanceof Error ? e.message.split('\n')[0] : String(e)})`],
    };
  }
  const tool = (doc.tool as Record<string, unknown> | undefined)?.['fsdp-lens'];
  if (!tool || typeof tool !== 'object') return undefined;
  const values: SetupValues = {};
  const problems: string[] = [];
  let model: ModelChoice | undefined;
  const where = `${path.basename(file)} [tool.fsdp-lens]`;
  for (const [k, raw] of Object.entries(tool as Record<string, unknown>)) {
    if (k === 'model' && typeof raw === 'string') {
      const m = /^(.+\.py):([A-Za-z_]\w*)$/.exec(raw);
      model = {
        ...(m ? { classRef: { file: path.resolve(path.dirname(file), m[1]!), name: m[2]! } } : { id: raw }),
        ...(model?.configKey ? { configKey: model.configKey } : {}),
        source: { kind: 'pyproject', detail: where },
      };
      continue;
    }
    if (k === 'config' && typeof raw === 'string') {
      if (/\.json$|[\\/]/.test(raw))
        model = {
          config: path.resolve(path.dirname(file), raw),
          source: { kind: 'pyproject', detail: where },
        };
      else model = { ...(model ?? { source: { kind: 'pyproject', detail: where } }), configKey: raw };
      continue;
    }
    const key = INPUT_BY_KEY[k];
    if (!key) {
      problems.push(`${where}: unknown key "${k}"`);
      continue;
    }
    try {
      (values as Record<string, unknown>)[key] = parseInput(key, String(raw), `${k} (${where})`);
    } catch (e) {
      problems.push(e instanceof Error ? e.message : String(e));
    }
  }
  return {
    layer: { source: { kind: 'pyproject', detail: where }, values },
    ...(model ? { model } : {}),
    problems,
  };
}

/** What one launch command says about the run. */
export interface LaunchFact {
  file: string;
  line: number;
  /** The script it launches (basename), when named. */
  script: string | null;
  /** The script's path as the command writes it (`./finetuning.py`, `pkg/train.py` of `-m pkg.train`). */
  program?: string;
  /**
   * The file that path names, where one exists from the launch file's folder or the project root (a job is
   * started from either): the command launches that file and no other of the same name.
   */
  resolved?: string;
  nprocPerNode?: number;
  nnodes?: number;
  gpusPerNode?: number;
  /** Counts taken from a shell default (`--nproc_per_node=${2:-4}`): the text, for the source to say so. */
  shellDefaults?: string[];
  /** The arguments the command passes to the script (`--use_peft --lr 1e-4`), when it names one. */
  scriptArgs?: string[];
  /** Shell defaults those arguments take (`CONFIG=${CONFIG:-"llama3_debugmodel"}`): the environment may change them. */
  argDefaults?: string[];
}

/**
 * Launch commands in shell scripts, SLURM batch files and `.vscode/launch.json`: `torchrun --nproc_per_node 8
 * --nnodes 2 train.py`, `python -m torch.distributed.run ...`, `tune run --nproc_per_node 8 RECIPE --config
 * CONFIG` (for the config), `#SBATCH --nodes=2` / `--gpus-per-node=8`.
 */
export function readLaunchFile(file: string, text: string): LaunchFact[] {
  const out: LaunchFact[] = [];
  if (file.endsWith('.json')) return readLaunchJson(file, text);
  const lines = text.split('\n');
  let sbatch: Partial<LaunchFact> = {};
  // `--gres=gpu:8` or `--gpus-per-node=8` counts GPUs; `--ntasks-per-node` counts processes (one torchrun per
  // node runs 8), taken only without a GPU count.
  let gpus: number | undefined;
  let tasks: number | undefined;
  let perTask: number | undefined;
  // Whether the file runs a program at all (`srun ...`, `python ...`, `$CMD`): an environment-setup batch job
  // (`conda create`, `pip install`) launches no training.
  let runs = false;
  let joined = '';
  let start = 0;
  // Variables the script sets before its command (`NGPU=${NGPU:-"8"}`, `CONFIG=llama3_8b`): what `${NGPU}` in the
  // command is when the script runs with nothing set, the `:-` ones said to be shell defaults.
  const vars = new Map<string, { value: string; text: string | null }>();
  const argDefaults: string[] = [];
  lines.forEach((raw, i) => {
    const line = raw.replace(/\r$/, '');
    const assign = shellAssignment(line);
    if (assign && !joined) {
      vars.set(assign.name, { value: assign.value, text: assign.isDefault ? line.trim() : null });
      return;
    }
    const sb = /^#SBATCH\s+(.*)$/.exec(line.trim());
    if (sb) {
      const opts = flags(sb[1]!);
      const nodes = num(opts.get('--nodes') ?? opts.get('-N'));
      gpus = num(opts.get('--gpus-per-node') ?? gres(opts.get('--gres'))) ?? gpus;
      tasks = num(opts.get('--ntasks-per-node')) ?? tasks;
      perTask = num(opts.get('--gpus-per-task')) ?? perTask;
      if (nodes) sbatch.nnodes = nodes;
      return;
    }
    if (
      /^\s*(?:\w+=\S*\s+)*(?:srun|python3?|torchrun|accelerate|deepspeed|mpirun|\$\{?\w+\}?)(?:\s|$)/.test(
        line,
      )
    )
      runs = true;
    // A comment (`# torchrun --nproc_per_node 8 train.py` left from an older run) launches nothing.
    if (!joined && /^\s*#/.test(line)) return;
    if (!joined) start = i;
    joined += line.replace(/\\$/, ' ');
    if (line.endsWith('\\')) return;
    // The shell defaults the counts take (`--nproc_per_node=${NGPU}`) and those the script's arguments take.
    const counted = [
      flags(joined).get('--nproc_per_node') ?? flags(joined).get('--nproc-per-node'),
      flags(joined).get('--nnodes'),
    ].join(' ');
    const expanded: string[] = [];
    const cmd = joined.replace(/\$\{(\w+)\}|\$(\w+)\b/g, (all, a?: string, b?: string) => {
      const name = (a ?? b)!;
      const v = vars.get(name);
      if (!v) return all;
      if (v.text && new RegExp(`\\$\\{?${name}\\b`).test(counted)) expanded.push(v.text);
      else if (v.text) argDefaults.push(v.text);
      return /^[\w./:=-]*$/.test(v.value) ? v.value : all;
    });
    joined = '';
    const tune = /\btune\s+run\b/.test(cmd);
    // `axolotl train CONFIG [--launcher torchrun -- TORCHRUN_OPTIONS]`: axolotl launches CONFIG's job.
    const axolotl = /\baxolotl\s+train\s+(["']?)([^\s"']+\.ya?ml)\1/.exec(cmd)?.[2];
    if (
      !tune &&
      !axolotl &&
      !/\btorchrun\b|torch\.distributed\.(run|launch)\b|\baccelerate\s+launch\b/.test(cmd)
    )
      return;
    const opts = flags(cmd);
    const nnodes = num(opts.get('--nnodes') ?? opts.get('--num_machines'));
    // `accelerate launch --num_processes` counts every process of every machine; torchrun's is per node.
    const total = num(opts.get('--num_processes'));
    const nproc =
      num(opts.get('--nproc_per_node') ?? opts.get('--nproc-per-node')) ??
      (total && total % (nnodes ?? 1) === 0 ? total / (nnodes ?? 1) : total);
    // `tune run [torchrun options] RECIPE --config CONFIG`: torchtune hands the options to torchrun and the
    // recipe reads CONFIG, the file the figures are for.
    const tuneConfig = tune ? opts.get('--config')?.replace(/^["']|["']$/g, '') : undefined;
    const program = cmd.replace(/^.*?(torchrun|launch|torch\.distributed\.run)\b/, '');
    // `torchrun -m pkg.train`: the module's file, `train.py`.
    const module = /(?:^|\s)-m\s+([\w.]+)/.exec(program)?.[1];
    const pyScript = tune || axolotl ? null : pythonScriptOf(program);
    const script = axolotl
      ? axolotl
      : tune
        ? tuneConfig
          ? `${tuneConfig}${/\.ya?ml$/.test(tuneConfig) ? '' : '.yaml'}`
          : null
        : (pyScript ?? (module ? `${module.slice(module.lastIndexOf('.') + 1)}.py` : null));
    const args = pyScript || module ? programArgs(program, (pyScript ?? module)!) : null;
    const shellDefaults = [
      ...[opts.get('--nproc_per_node') ?? opts.get('--nproc-per-node'), opts.get('--nnodes')]
        .filter((v): v is string => !!v && /\$\{\w+:?-\d+\}/.test(v))
        .map((v) => v.replace(/^["']|["']$/g, '')),
      ...new Set(expanded),
    ];
    out.push({
      file,
      line: start + 1,
      script: script ? path.basename(script) : null,
      ...(!tune && !axolotl && (pyScript || module)
        ? { program: pyScript ?? `${module!.replace(/\./g, '/')}.py` }
        : {}),
      ...(shellDefaults.length ? { shellDefaults } : {}),
      ...(nproc ? { nprocPerNode: nproc } : {}),
      ...(nnodes ? { nnodes } : {}),
      ...(args?.length ? { scriptArgs: args } : {}),
      ...(args?.length && argDefaults.length ? { argDefaults: [...new Set(argDefaults)] } : {}),
    });
    // torchtitan's entry reading a TOML (`-m torchtitan.train --job.config_file X.toml`): the command launches X's
    // job too, with the same counts (ConfigManager.parse_args loads X).
    const tomlAt = args?.findIndex((a) => /^--job\.config[_-]file(=|$)/.test(a)) ?? -1;
    const toml =
      tomlAt >= 0
        ? args![tomlAt]!.includes('=')
          ? args![tomlAt]!.slice(args![tomlAt]!.indexOf('=') + 1)
          : args![tomlAt + 1]
        : undefined;
    if (toml && /\.toml["']?$/.test(toml))
      out.push({
        file,
        line: start + 1,
        script: path.basename(toml.replace(/^["']|["']$/g, '')),
        program: toml,
        // The overrides after it, which ConfigManager applies over the TOML's values.
        ...((rest) => (rest.length ? { scriptArgs: rest } : {}))(
          args!.filter((_, i) => i !== tomlAt && (i !== tomlAt + 1 || args![tomlAt]!.includes('='))),
        ),
        // The TOML itself may be a shell default (`CONFIG_FILE=${CONFIG_FILE:-...}`): said with the counts'.
        ...((d) => (d.length ? { shellDefaults: d } : {}))([
          ...new Set([
            ...shellDefaults,
            ...argDefaults.filter((t) => t.includes(path.basename(toml.replace(/^["']|["']$/g, '')))),
          ]),
        ]),
        ...(nproc ? { nprocPerNode: nproc } : {}),
        ...(nnodes ? { nnodes } : {}),
      });
    argDefaults.length = 0;
  });
  // The GPUs of a node: `--gpus-per-node` / `--gres`, else `--gpus-per-task` x tasks. Tasks alone count processes:
  // the GPUs of a lone `srun python train.py`, not of a torchrun-style launcher, which starts its own processes.
  const perNode = gpus ?? (perTask ? perTask * (tasks ?? 1) : undefined);
  if (perNode) sbatch.gpusPerNode = perNode;
  else if (tasks && !out.length) sbatch.gpusPerNode = tasks;
  if (sbatch.nnodes || sbatch.gpusPerNode) {
    if (out.length)
      out.forEach((o) =>
        Object.assign(o, {
          ...(o.nnodes ? {} : sbatch.nnodes ? { nnodes: sbatch.nnodes } : {}),
          ...(sbatch.gpusPerNode ? { gpusPerNode: sbatch.gpusPerNode } : {}),
        }),
      );
    else if (runs) out.push({ file, line: 1, script: null, ...sbatch });
  }
  sbatch = {};
  return out;
}

/** launch.json (JSON with comments and trailing commas): whatever shape it has, what a torchrun configuration says. */
function readLaunchJson(file: string, text: string): LaunchFact[] {
  let json: unknown;
  try {
    json = parseJsonc(text, [], { allowTrailingComma: true });
  } catch {
    // Nested past the parser's stack (a file of `[[[[...`): nothing to read.
    return [];
  }
  const configs = isRecord(json) && Array.isArray(json.configurations) ? json.configurations : [];
  const out: LaunchFact[] = [];
  for (const c of configs.slice(0, 200)) {
    if (!isRecord(c)) continue;
    const program = `${typeof c.module === 'string' ? c.module : ''} ${typeof c.program === 'string' ? c.program : ''}`;
    if (!/torch\.distributed\.(run|launch)|torchrun/.test(program)) continue;
    const args = Array.isArray(c.args)
      ? c.args.filter((a) => typeof a === 'string' || typeof a === 'number').join(' ')
      : typeof c.args === 'string'
        ? c.args
        : '';
    const opts = flags(args);
    const nproc = num(opts.get('--nproc_per_node') ?? opts.get('--nproc-per-node'));
    const nnodes = num(opts.get('--nnodes'));
    const script = pythonScriptOf(args);
    out.push({
      file,
      line: 1,
      script: script ? path.basename(script) : null,
      ...(nproc ? { nprocPerNode: nproc } : {}),
      ...(nnodes ? { nnodes } : {}),
    });
  }
  return out;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function num(s: string | undefined): number | undefined {
  if (!s) return undefined;
  // A shell default (`${2:-4}`, `${NGPU:-8}`): the value the script runs with when nothing overrides it.
  const t = s.replace(/^["']|["']$/g, '');
  const shellDefault = /^\$\{\w+:?-(\d+)\}$/.exec(t);
  const n = Number(shellDefault ? shellDefault[1] : t);
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

function gres(s: string | undefined): string | undefined {
  return s ? /gpu(?::[\w-]+)?:(\d+)/.exec(s)?.[1] : undefined;
}

const LAUNCH_FILE = /\.(sh|bash|slurm|sbatch)$|^Makefile$|^launch\.json$/;

/** The launch commands of every launch file of the project (shell and Slurm scripts, Makefiles, launch.json). */
export function launchFacts(fsys: ProjectFS, root: string, maxFiles = 400): LaunchFact[] {
  const facts: LaunchFact[] = [];
  const { files } = walkFiles(fsys, root, {
    enter: (name) =>
      name === '.vscode' ||
      (!name.startsWith('.') && !['node_modules', 'venv', '.venv', '__pycache__'].includes(name)),
    take: (name) => LAUNCH_FILE.test(name),
    maxDepth: 4,
    maxFiles,
  });
  for (const p of files) {
    const text = fsys.readFile(p);
    if (!text || text.length >= 512 * 1024) continue;
    facts.push(...resolvedLaunchFile(fsys, root, p, text));
  }
  return facts;
}

/**
 * The launch commands of one launch file, each with the file its program names where one exists from the launch
 * file's folder or the project root (a job is started from either).
 */
export function resolvedLaunchFile(fsys: ProjectFS, root: string, file: string, text: string): LaunchFact[] {
  return readLaunchFile(file, text).map((f) => {
    const prog = f.program?.replace(/^["']|["']$/g, '');
    const resolved =
      prog && !/\$/.test(prog)
        ? [path.resolve(path.dirname(file), prog), path.resolve(root, prog)].find(
            (c) => fsys.version(c) !== undefined,
          )
        : undefined;
    return resolved ? { ...f, resolved } : f;
  });
}

/** The launch layer for `script`: launch files of the project that name it (or, failing that, the only one). */
/**
 * The launch command of `script`: the first that runs it. A launch file for another program (`eval.sh` running
 * evaluate.py) says nothing of this script; only a lone one whose program is not written out (a `#SBATCH` header)
 * is taken as this one's.
 */
export function launchOf(facts: readonly LaunchFact[], script: string): LaunchFact | undefined {
  const base = path.basename(script);
  const abs = path.resolve(script);
  const mine = facts.filter((f) => f.script === base && (!f.resolved || f.resolved === abs));
  return mine[0] ?? (facts.length === 1 && facts[0]!.script === null ? facts[0] : undefined);
}

export function launchLayer(
  facts: readonly LaunchFact[],
  root: string,
  script: string,
): ProjectLayer | undefined {
  const pick = launchOf(facts, script);
  if (!pick) return undefined;
  // Other launch commands of the same script that count GPUs differently: the first is taken, and said.
  const base = path.basename(script);
  const gpus = (f: LaunchFact) => (f.nprocPerNode ?? f.gpusPerNode ?? 0) * (f.nnodes ?? 1);
  const others = facts.filter(
    (f) =>
      f !== pick &&
      f.script === base &&
      (!f.resolved || f.resolved === path.resolve(script)) &&
      gpus(f) > 0 &&
      gpus(f) !== gpus(pick),
  );
  const detail =
    `${path.relative(root, pick.file) || path.basename(pick.file)}:${pick.line}` +
    (pick.shellDefaults
      ? ` (the shell default of ${pick.shellDefaults.join(', ')}: the environment or an argument may change it)`
      : '');
  const gpn = pick.nprocPerNode ?? pick.gpusPerNode;
  if (!gpn) return undefined;
  // The limits every other source of these inputs has (an annotation, a flag, a setting).
  const values: SetupValues = {};
  const problems: string[] = [];
  try {
    values.gpusPerNode = parseInput('gpusPerNode', gpn, `GPUs per node at ${detail}`);
    values.worldSize = parseInput('worldSize', gpn * (pick.nnodes ?? 1), `the world size at ${detail}`);
  } catch (e) {
    problems.push(`${e instanceof Error ? e.message : String(e)}; ignored`);
    return { layer: { source: { kind: 'launch', detail }, values: {} }, problems };
  }
  if (others.length)
    problems.push(
      `${others.length + 1} launch commands run this script on different numbers of GPUs (${[pick, ...others]
        .slice(0, 4)
        .map((f) => `${gpus(f)} at ${path.relative(root, f.file) || path.basename(f.file)}:${f.line}`)
        .join(', ')}): the first is taken (--world-size N for another)`,
    );
  return { layer: { source: { kind: 'launch', detail }, values }, problems };
}
