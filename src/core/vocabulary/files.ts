/**
 * Which files the analysis reads and which folders it never walks: Python sources, framework configurations and
 * launch scripts, version pins; virtual environments, build output and the output of training runs.
 */

/** Folders that hold no project source: version control, environments, caches, build output. */
export const SKIP_DIRS: ReadonlySet<string> = new Set([
  '.git',
  'node_modules',
  '__pycache__',
  '.venv',
  'venv',
  'env',
  '.tox',
  'site-packages',
  'build',
  'dist',
  '.mypy_cache',
]);

/** Folders of run output a training job rewrites as it goes (logs, checkpoints): never an analysis's input. */
const RUN_OUTPUT = /^(wandb|lightning_logs|mlruns|checkpoint-\d+)$/;

/**
 * The files analyses read besides Python sources, as a watcher glob and as a test of one path: framework
 * configurations (Accelerate YAML, torchtune YAML, torchtitan TOML, DeepSpeed and Transformers JSON), launch files
 * (shell, SLURM, Makefile, launch.json) and version pins (requirements, pyproject.toml, setup.py, lock files).
 */
export const PROJECT_INPUTS_GLOB =
  '**/{*.py,*.yaml,*.yml,*.json,*.toml,*.sh,*.bash,*.slurm,*.sbatch,Makefile,requirements*.txt,requirements*.in,*.lock,setup.cfg}';
const PROJECT_INPUT =
  /\.(py|ya?ml|json|toml|sh|bash|slurm|sbatch|lock)$|(^|[\\/])(Makefile|setup\.cfg|requirements[^\\/]*\.(txt|in))$/;

export function isProjectInput(file: string): boolean {
  if (!PROJECT_INPUT.test(file)) return false;
  const dirs = file.split(/[\\/]/).slice(0, -1);
  return !dirs.some((d) => SKIP_DIRS.has(d) || RUN_OUTPUT.test(d));
}

/** Files read as framework configurations or launch scripts rather than Python. */
const CONFIG_FILE = /\.(ya?ml|jsonc?|toml|sh|bash|slurm|sbatch)$/i;

/** Whether a file is read as a framework configuration (or a launch script) rather than as Python. */
export function isConfigPath(file: string): boolean {
  return CONFIG_FILE.test(file);
}
