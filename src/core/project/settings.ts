/**
 * Project-level inputs of an estimate, in the precedence of docs/estimator.md: `[tool.fsdp-lens]` in
 * pyproject.toml, then what launch files say (torchrun, SLURM batch scripts, VS Code launch configurations).
 */
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
  nprocPerNode?: number;
  nnodes?: number;
  gpusPerNode?: number;
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
  let joined = '';
  let start = 0;
  lines.forEach((raw, i) => {
    const line = raw.replace(/\r$/, '');
    const sb = /^#SBATCH\s+(.*)$/.exec(line.trim());
    if (sb) {
      const opts = flags(sb[1]!);
      const nodes = num(opts.get('--nodes') ?? opts.get('-N'));
      const gpn = num(
        opts.get('--gpus-per-node') ?? opts.get('--ntasks-per-node') ?? gres(opts.get('--gres')),
      );
      if (nodes) sbatch.nnodes = nodes;
      if (gpn) sbatch.gpusPerNode = gpn;
      return;
    }
    if (!joined) start = i;
    joined += line.replace(/\\$/, ' ');
    if (line.endsWith('\\')) return;
    const cmd = joined;
    joined = '';
    const tune = /\btune\s+run\b/.test(cmd);
    if (!tune && !/\btorchrun\b|torch\.distributed\.(run|launch)\b|\baccelerate\s+launch\b/.test(cmd)) return;
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
    const script = tune
      ? tuneConfig
        ? `${tuneConfig}${/\.ya?ml$/.test(tuneConfig) ? '' : '.yaml'}`
        : null
      : (/(\S+\.py)\b/.exec(cmd.replace(/^.*?(torchrun|launch|torch\.distributed\.run)\b/, ''))?.[1] ?? null);
    out.push({
      file,
      line: start + 1,
      script: script ? path.basename(script) : null,
      ...(nproc ? { nprocPerNode: nproc } : {}),
      ...(nnodes ? { nnodes } : {}),
    });
  });
  if (sbatch.nnodes || sbatch.gpusPerNode) {
    if (out.length)
      out.forEach((o) =>
        Object.assign(o, {
          ...(o.nnodes ? {} : sbatch.nnodes ? { nnodes: sbatch.nnodes } : {}),
          ...(sbatch.gpusPerNode ? { gpusPerNode: sbatch.gpusPerNode } : {}),
        }),
      );
    else out.push({ file, line: 1, script: null, ...sbatch });
  }
  sbatch = {};
  return out;
}

function readLaunchJson(file: string, text: string): LaunchFact[] {
  let json: { configurations?: { module?: string; program?: string; args?: unknown[] }[] };
  try {
    // launch.json allows comments and trailing commas.
    json = JSON.parse(text.replace(/^\s*\/\/.*$/gm, '').replace(/,(\s*[}\]])/g, '$1'));
  } catch {
    return [];
  }
  const out: LaunchFact[] = [];
  for (const c of json.configurations ?? []) {
    if (!/torch\.distributed\.(run|launch)|torchrun/.test(`${c.module ?? ''} ${c.program ?? ''}`)) continue;
    const args = (c.args ?? []).map(String).join(' ');
    const opts = flags(args);
    const nproc = num(opts.get('--nproc_per_node') ?? opts.get('--nproc-per-node'));
    const nnodes = num(opts.get('--nnodes'));
    const script = /(\S+\.py)\b/.exec(args)?.[1] ?? null;
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

/** `--key value` and `--key=value` pairs of a command line. */
export function flags(cmd: string): Map<string, string> {
  const out = new Map<string, string>();
  const toks = cmd.match(/"[^"]*"|'[^']*'|\S+/g) ?? [];
  toks.forEach((t, i) => {
    if (!t.startsWith('-')) return;
    const eq = t.indexOf('=');
    if (eq > 0) out.set(t.slice(0, eq), t.slice(eq + 1));
    else if (toks[i + 1] && !toks[i + 1]!.startsWith('-')) out.set(t, toks[i + 1]!);
  });
  return out;
}

function num(s: string | undefined): number | undefined {
  if (!s) return undefined;
  const n = Number(s.replace(/^["']|["']$/g, ''));
  return Number.isInteger(n) && n > 0 && n < 1_000_000 ? n : undefined;
}

function gres(s: string | undefined): string | undefined {
  return s ? /gpu(?::[\w-]+)?:(\d+)/.exec(s)?.[1] : undefined;
}

const LAUNCH_FILE = /\.(sh|bash|slurm|sbatch)$|^Makefile$|^launch\.json$/;

/** The launch layer for `script`: launch files of the project that name it (or, failing that, the only one). */
export function launchLayer(
  fsys: ProjectFS,
  root: string,
  script: string,
  maxFiles = 400,
): Layer | undefined {
  const facts: LaunchFact[] = [];
  let seen = 0;
  const walk = (dir: string, depth: number) => {
    if (depth > 4 || seen > maxFiles) return;
    for (const name of fsys.listDir(dir)) {
      const p = path.join(dir, name);
      if (LAUNCH_FILE.test(name) && !fsys.isDirectory(p)) {
        seen++;
        const text = fsys.readFile(p);
        if (text && text.length < 512 * 1024) facts.push(...readLaunchFile(p, text));
      } else if (
        (name === '.vscode' ||
          (!name.startsWith('.') && !['node_modules', 'venv', '.venv', '__pycache__'].includes(name))) &&
        fsys.isDirectory(p)
      )
        walk(p, depth + 1);
    }
  };
  walk(root, 0);
  const base = path.basename(script);
  const mine = facts.filter((f) => f.script === base);
  const pick = mine[0] ?? (facts.length === 1 ? facts[0] : undefined);
  if (!pick) return undefined;
  const values: SetupValues = {};
  const gpn = pick.nprocPerNode ?? pick.gpusPerNode;
  if (gpn) {
    values.gpusPerNode = gpn;
    values.worldSize = gpn * (pick.nnodes ?? 1);
  }
  if (!values.worldSize) return undefined;
  const detail = `${path.relative(root, pick.file) || path.basename(pick.file)}:${pick.line}`;
  return { source: { kind: 'launch', detail }, values };
}
