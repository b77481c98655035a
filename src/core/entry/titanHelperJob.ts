/**
 * torchtitan's parallelize file as the job that runs it: no script calls `parallelize_llama` by name, torchtitan's
 * trainer takes it from the model package's train spec (`parallelize_fn=`), so the job is the launch file that
 * trains a model of that package, and the parallelize file shows that launch's plan and verdict.
 */
import * as path from 'node:path';
import type { FileFacts } from '../analysis/facts';
import type { Project } from '../project/project';
import type { EstimateResult } from '../resolve/analyze';

/** At most this many launch files of a root are analysed for a parallelize file's job. */
const MAX_LAUNCH_FILES = 6;

/** The package whose spec names a function of this file as its `parallelize_fn`, and where it says so. */
interface SpecSite {
  /** The package's folder name: the model name a job's `[model] name` or `--module` gives. */
  name: string;
  fn: string;
  where: string;
}

/**
 * The model package of a parallelize file: a folder above it (up to three) whose `__init__.py` builds a train spec
 * (`TrainSpec(...)`, `ModelSpec(...)`) with `parallelize_fn=F`, F a function this file defines. torchtitan's
 * trainer calls that function on the model it builds (`Trainer.__init__`: `self.train_spec.parallelize_fn(model,
 * parallel_dims, job_config)`).
 */
function specSite(project: Project, facts: FileFacts, text: string): SpecSite | undefined {
  let dir = path.dirname(path.resolve(facts.path));
  for (let i = 0; i < 3 && project.roots.some((r) => dir.startsWith(r)); i++, dir = path.dirname(dir)) {
    const init = path.join(dir, '__init__.py');
    const spec = project.fs.readFile(init);
    const m = spec ? /\bparallelize_fn\s*=\s*([A-Za-z_]\w*)/.exec(spec) : null;
    if (!m || !spec || !/\b(TrainSpec|ModelSpec)\s*\(/.test(spec)) continue;
    const fn = m[1]!;
    if (!new RegExp(`^def\\s+${fn}\\s*\\(`, 'm').test(text)) return undefined;
    const line = spec.slice(0, m.index).split('\n').length;
    return {
      name: path.basename(dir),
      fn,
      where: `${path.basename(dir)}/__init__.py:${line}`,
    };
  }
  return undefined;
}

/**
 * The estimate of the job that runs this parallelize file: the first launch file at a root of the project (by name,
 * or the one `# fsdp: caller=NAME` names) whose estimate is of a torchtitan model of this package, said so with the
 * other launch files; undefined when the file is no package's `parallelize_fn` or no launch trains its model.
 */
export function titanHelperJob(
  project: Project,
  facts: FileFacts,
  text: string,
  analyzeLaunch: (file: string, text: string) => EstimateResult | undefined,
): EstimateResult | undefined {
  const calls = facts.calls;
  if (!calls.length || calls.some((c) => c.function === null)) return undefined;
  const site = specSite(project, facts, text);
  if (!site) return undefined;
  const root = project.roots.find((r) => path.resolve(facts.path).startsWith(r));
  if (!root) return undefined;
  const launches = project.fs
    .entries(root)
    .filter((e) => e.kind === 'file' && /\.(sh|bash|slurm|sbatch)$/.test(e.name))
    .map((e) => e.name)
    .sort()
    .filter((name) => /\btorchtitan[./]train\b/.test(project.fs.readFile(path.join(root, name)) ?? ''));
  const self = path.dirname(path.resolve(facts.path));
  const rel = (name: string) => path.relative(self, path.join(root, name));
  // `# fsdp: caller=` names the launch file by its path from this file's folder (as the editor writes it) or its name.
  const asked = facts.annotations.find((a) => a.values.caller !== undefined);
  const wanted = launches.find((l) => asked && (asked.values.caller === l || asked.values.caller === rel(l)));
  const ordered = wanted ? [wanted, ...launches.filter((l) => l !== wanted)] : launches;
  for (const name of ordered.slice(0, MAX_LAUNCH_FILES)) {
    const file = path.join(root, name);
    const r = analyzeLaunch(file, project.fs.readFile(file) ?? '');
    // The launch trains a model of this package (`torchtitan llama3 8B`), not another's.
    if (!r?.ok || !r.estimate.model.name.startsWith(`torchtitan ${site.name} `)) continue;
    const others = ordered.filter((l) => l !== name);
    r.estimate.notes.unshift(
      `the job is ${rel(name)}'s: torchtitan runs ${site.fn}() of this file on the ${site.name} model it trains (parallelize_fn at ${site.where})` +
        (name === wanted ? ` (# fsdp: caller= at line ${asked!.line})` : '') +
        (others.length
          ? `; ${others.length === 1 ? 'another launch file runs' : 'other launch files run'} torchtitan too (${others.join(', ')}), each its own job (# fsdp: caller=NAME picks one)`
          : ''),
      ...(asked && !wanted
        ? [`no launch file of the project is ${asked.values.caller} (# fsdp: caller= at line ${asked.line})`]
        : []),
    );
    return {
      ...r,
      jobCallers: ordered.map((l) => ({ file: rel(l), line: 1, chosen: l === name })),
    };
  }
  return undefined;
}
