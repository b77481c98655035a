/**
 * The one entry of the core: a document (a Python script or a framework configuration) analysed for the editor
 * and the command line alike: its facts, its estimate (or why there is none) and its findings. File system and
 * environment come in through `AnalyzeOptions` (the host, the project); nothing here reads the disk itself.
 */
import type { Project } from '../project/project';
import type { Range } from '../vocabulary/range';
import type { Layer } from '../inputs/layers';
import { adapterUndecided } from '../frameworks/argumentsFile';
import { expandedCommands, flags, pythonScriptOf } from '../parsing/commandLine';
import { emptyFacts, type FileFacts } from '../analysis/facts';
import { scanText } from '../analysis/input';
import type { PythonGrammar } from '../parsing/python';
import { lintFacts } from '../lint/lint';
import { RULES } from '../lint/registry';
import { planOfCalledFunction } from '../resolve/entryPlan';
import type { Finding, LintOptions } from '../lint/types';
import { formatOf } from '../frameworks/configDoc';
import type { ConfigReading } from '../frameworks/read';
import {
  annotationLayer,
  estimateFile,
  launchArguments,
  launchLayerOf,
  trainsThroughTrainer,
  type AnalyzeOptions,
  type EstimateResult,
} from '../resolve/analyze';
import { launchedJob, type LaunchedJob } from '../resolve/launcher';
import { registryEstimate, titanEntryEstimate } from '../resolve/titanJob';
import { titanHelperJob } from './titanHelperJob';
import { helperPlan } from '../resolve/helpers';
import { helperJobEstimate } from './helperJob';
import { launchScriptEstimate } from './launchJob';
import type { ModelChoice } from '../inputs/model';
import type { WhatIf } from '../whatif/model';
import { verlRun } from '../frameworks/verl';
import {
  companionScript,
  configFacts,
  fromCompanion,
  launchedConfig,
  launchedConfigPath,
  readConfigInProject,
} from '../resolve/configFile';
import * as path from 'node:path';
import { scanFile, type ScanOptions } from '../analysis/scan';
import { projectReaders } from '../frameworks/scriptConfigs';
import { SourceFile } from '../parsing/source';
import type { Tree } from '../parsing/python';
import { withBudget, WorkBudget, type BudgetLimits } from '../vocabulary/budget';
import { collectFaults, fault, type Fault } from '../vocabulary/faults';
import { clip } from '../vocabulary/words';
import { isConfigPath } from '../vocabulary/files';
import { launchCommands } from '../frameworks/shell';
import { pinnedVersions } from '../project/versions';

/** Everything the surfaces show for one file: its facts, its estimate (or why none), its findings. */
export interface FileAnalysis {
  facts: FileFacts;
  /** Undefined when the file has nothing to estimate (no wrap call, no model). */
  estimate?: EstimateResult;
  findings: Finding[];
}

/** Estimates a scanned file and lints it, the model-aware rules reading the estimate. Never throws on bad input. */
export function analyzeFacts(
  facts: FileFacts,
  text: string,
  opts: { lint: LintOptions | null; estimate: AnalyzeOptions },
): FileAnalysis {
  let estimate: EstimateResult | undefined;
  // An `Accelerator()` alone (plain data parallelism, or a model made elsewhere) is no FSDP plan to estimate.
  const project = opts.estimate.project;
  const job =
    project && !opts.estimate.framework && !helperPlan(project, facts).calls.length
      ? launchedJob(project, facts)
      : undefined;
  // torchtitan's jobs in Python: its entry reading --module/--config, or a model's config_registry.py.
  const pyFile =
    project && !opts.estimate.framework && !facts.calls.length ? project.file(facts.path) : undefined;
  const titan = pyFile
    ? (titanEntryEstimate(project, pyFile, facts, opts.estimate) ??
      // A registry job that leaves the parallelism at its defaults names no ParallelismConfig.
      (facts.jobConfigs?.length || pyFile.source.text.includes('Trainer.Config')
        ? registryEstimate(project, pyFile, facts, opts.estimate.plan, facts.argv ?? [], opts.estimate)
        : undefined))
    : undefined;
  if (titan) estimate = clipped(titan);
  else if (project && job) estimate = launchedEstimate(project, facts, job, opts.estimate);
  else if (
    facts.calls.length ||
    facts.models.length ||
    facts.frameworkCalls.some((c) => c.kind !== 'Accelerator') ||
    opts.estimate.framework ||
    opts.estimate.flags?.model ||
    // Wraps made through a helper of another file of the project (followed, or found and said why not).
    (project && (helperPlan(project, facts).calls.length > 0 || helperPlan(project, facts).notes.length > 0))
  ) {
    try {
      // A helper whose wraps scripts of the project call: the job is theirs (its inputs the helper's too).
      const asJob =
        project && !opts.estimate.framework && !opts.estimate.forHelper && !opts.estimate.plan
          ? (helperJobEstimate(
              project,
              facts,
              (f, t) =>
                analyzeFacts(f, t, { lint: null, estimate: { ...opts.estimate, forHelper: true } }).estimate,
            ) ??
            // torchtitan's parallelize file: the job of a launch that trains its package's model.
            titanHelperJob(
              project,
              facts,
              text,
              (file, t) =>
                analyzeConfigText(file, t, {
                  lint: null,
                  estimate: { ...opts.estimate, forHelper: true },
                }).estimate,
            ))
          : undefined;
      estimate = clipped(asJob ?? estimateFile(facts, opts.estimate));
    } catch (e) {
      estimate = { ok: false, reason: fault('the estimate', e) };
    }
  } else if (facts.jobConfigs?.length) {
    // A job configured by a framework's Python objects: a plan whose model and degrees are not read here.
    const named = facts.jobConfigs
      .slice(0, 3)
      .map((j) => `${j.callee}(...) at line ${j.line}`)
      .join(', ');
    estimate = {
      ok: false,
      unknownModel: true,
      reason: clip(`the job is configured by Python objects the analysis does not read yet (${named})`),
      hint: 'estimate its plan with --model ORG/NAME (or --config path/to/config.json), and --world-size N',
    };
  }
  const model = estimate?.ok
    ? {
        estimate: estimate.estimate,
        root: estimate.input.model.root,
        minGpus: () => estimate.minGpus,
        whatIf: (change: WhatIf) => {
          try {
            return estimate.whatIf.run(change);
          } catch {
            return undefined;
          }
        },
      }
    : undefined;
  // The framework's plan, estimated or not: its traps (FSDP016) are the configuration's, whatever model it trains.
  const plan = (estimate?.ok ? estimate.framework : undefined) ?? opts.estimate.framework;
  const framework = plan ? { framework: plan } : {};
  // A file of several plans: the rules that read the model see the plan that was estimated, the others the file.
  const planFacts =
    model && estimate?.plans
      ? planOfCalledFunction(opts.estimate.project, facts, opts.estimate.plan).facts
      : undefined;
  const findings = !opts.lint
    ? []
    : planFacts
      ? [
          ...lintFacts(
            { facts, text, options: opts.lint, ...framework },
            RULES.filter((r) => !r.readsModel),
          ),
          ...lintFacts(
            { facts: planFacts, text, options: opts.lint, model, ...framework },
            RULES.filter((r) => r.readsModel),
          ),
        ]
      : lintFacts({ facts, text, options: opts.lint, ...(model ? { model } : {}), ...framework });
  return { facts, ...(estimate ? { estimate } : {}), findings };
}

/**
 * The estimate of the job a launcher runs (`fire.Fire(main)` of an imported `main`): that file read with the
 * launcher's command line (given, written, or its launch file's) and estimated with the launcher's launch file,
 * said so first.
 */
function launchedEstimate(
  project: Project,
  facts: FileFacts,
  job: LaunchedJob,
  opts: AnalyzeOptions,
): EstimateResult {
  const target = scanFile(project.grammar, job.file.source, {
    ...(facts.argv ? { argv: facts.argv } : {}),
    ...(facts.argvFrom ? { argvFrom: facts.argvFrom } : {}),
    ...projectReaders(project, job.file.path),
  });
  const launch = launchLayerOf(project, facts.path);
  const inner = analyzeFacts(target, job.file.source.text, {
    lint: null,
    estimate: {
      ...opts,
      extraLayers: [...(opts.extraLayers ?? []), ...(launch ? [launch.layer] : [])],
    },
  }).estimate;
  const where = path.relative(path.dirname(facts.path), job.file.path) || path.basename(job.file.path);
  const said = `the job is ${job.fn}() of ${where}, which this script runs (${job.how})`;
  if (!inner) return { ok: false, reason: `${said}: it has nothing to estimate` };
  if (!inner.ok) return { ...inner, reason: `${said}: ${inner.reason}` };
  inner.estimate.notes.unshift(said);
  return inner;
}

/** An estimate whose words quote the file at bounded length: a reason, a hint, a note of any source. */
function clipped(r: EstimateResult): EstimateResult {
  if (!r.ok) return { ...r, reason: clip(r.reason), ...(r.hint ? { hint: clip(r.hint) } : {}) };
  const e = r.estimate;
  e.notes = e.notes.map((n) => clip(n));
  e.plan.notes = e.plan.notes.map((n) => clip(n));
  return r;
}

/** A configuration file's analysis: what it is, the plan's estimate, and the findings of its traps. */
export interface ConfigFileAnalysis extends FileAnalysis {
  reading: ConfigReading;
  /** The script the model and training arguments came from, when the configuration does not name them. */
  companion?: string;
}

/**
 * Analyses an Accelerate, Transformers, torchtune, torchtitan or DeepSpeed configuration file: its FSDP plan on
 * the model it names (or its companion script's), estimated and linted as a script's own plan is. Never throws.
 */
export function analyzeConfigText(
  file: string,
  text: string,
  opts: { lint: LintOptions | null; estimate: AnalyzeOptions },
): ConfigFileAnalysis {
  const facts = configFacts(file, text);
  let reading: ConfigReading;
  let scriptModel: ModelChoice | undefined;
  let scriptFile: string | undefined;
  try {
    if (/\.(sh|bash|slurm|sbatch)$/.test(file)) {
      // A launch script: `accelerate launch --fsdp_* ...` or `python train.py --fsdp "full_shard auto_wrap"`.
      const project = opts.estimate.project;
      const root = project?.roots[0];
      const versions =
        project && root ? project.memo(`versions:${root}`, () => pinnedVersions(project.fs, root)) : {};
      const cmd = launchCommands(
        file,
        text,
        versions,
        project ? { readFile: (abs) => project.fs.readFile(abs), roots: project.roots } : undefined,
      )[0];
      const verl = cmd ? undefined : verlRun(file, text);
      reading = cmd
        ? { kind: 'plan', plan: cmd.plan }
        : verl
          ? 'api' in verl
            ? { kind: 'plan', plan: verl }
            : { kind: 'problem', problem: verl }
          : { kind: 'none' };
      if (cmd?.model)
        scriptModel = {
          id: cmd.model,
          source: {
            kind: 'config',
            detail: `--model_name_or_path at ${path.basename(file)}:${cmd.line + 1}`,
          },
        };
      if (cmd?.script) scriptFile = path.resolve(path.dirname(file), cmd.script);
    } else reading = readConfigInProject(file, text, opts.estimate.project);
  } catch (e) {
    reading = {
      kind: 'problem',
      problem: {
        framework: 'Accelerate',
        file,
        range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } },
        message: fault('reading the configuration', e),
      },
    };
  }
  const shell = /\.(sh|bash|slurm|sbatch)$/.test(file);
  // A launch script that configures no plan is still linted for what its text does (a command cut short).
  const shellFindings = () => (opts.lint && shell ? lintFacts({ facts, text, options: opts.lint }) : []);
  // One that runs a Python script of the project: the job is that script's, with this command's inputs.
  const project0 = opts.estimate.project;
  if (reading.kind === 'none' && shell && project0) {
    // Its own `# fsdp:` annotations (what "Apply to file" writes) stand above the script's inputs.
    const own = annotationLayer(facts, path.basename(file));
    const mine = 'layer' in own ? [own.layer] : [];
    const job = launchScriptEstimate(
      project0,
      file,
      text,
      (f, t, layers) =>
        analyzeFacts(f, t, {
          lint: null,
          estimate: {
            ...opts.estimate,
            extraLayers: [...mine, ...(opts.estimate.extraLayers ?? []), ...layers],
          },
        }).estimate,
    );
    // A script the analysis cannot estimate alone (its model made in a helper from its own flags), launched with
    // an Accelerate config: the config's estimate, which reads this command's flags to the script.
    const viaConfig = !job?.estimate.ok
      ? acceleratedConfigEstimate(project0, file, text, job?.range, opts)
      : undefined;
    if (viaConfig)
      return {
        facts,
        estimate: clipped(viaConfig.estimate),
        findings: shellFindings(),
        reading: { kind: 'launch', script: viaConfig.script, range: viaConfig.range },
      };
    if (job)
      return {
        facts,
        estimate: clipped(job.estimate),
        findings: shellFindings(),
        reading: { kind: 'launch', script: job.script, range: job.range },
      };
  }
  if (reading.kind !== 'plan') return { facts, findings: shellFindings(), reading };
  let plan = reading.plan;
  if (scriptModel && !plan.model) plan = { ...plan, model: scriptModel };
  const project = opts.estimate.project;
  // An Accelerate config a launch file runs a script with, and the argument file that script is given.
  const launched =
    project && plan.framework === 'Accelerate' && !scriptFile
      ? launchedConfig(project, file, opts.estimate.launchFile)
      : undefined;
  if (launched?.script) scriptFile = launched.script;
  const recipe = launched?.recipe;
  if (recipe) {
    if (!plan.model && !facts.annotations.some((a) => a.values.model))
      plan = { ...plan, model: recipe.model };
    if (recipe.fineTune && !plan.fineTune)
      plan = {
        ...plan,
        fineTune: recipe.fineTune,
        fineTuneWhere: recipe.flags
          ? `--use_peft at ${launched!.where}`
          : `use_peft in ${path.basename(recipe.file)}`,
      };
    // Flags the script reads itself that may make it an adapter or quantised job: which job it is stays
    // undecided, and so does the verdict; the figures are a full fine-tune's.
    if (recipe.unread && !plan.fineTune)
      plan = {
        ...plan,
        undecided: [...(plan.undecided ?? []), adapterUndecided(recipe.unread, launched!.where)],
      };
    // An argument file is TrainingArguments' (HfArgumentParser, TrlParser): the script trains through the Trainer.
    plan = {
      ...plan,
      throughTrainer: true,
      notes: [
        ...plan.notes,
        recipe.flags
          ? `launched by ${launched!.where}, whose flags to the script are read`
          : `launched by ${launched!.where} with ${path.basename(recipe.file)}, whose settings are read`,
      ],
    };
  }
  const companion =
    project && !plan.builtModel && !facts.annotations.some((a) => a.values.model)
      ? companionScript(project, file, scriptFile)
      : undefined;
  const c = fromCompanion(companion);
  if (c.model && !plan.model) plan = { ...plan, model: c.model };
  // The launcher's `--num_processes` / `--num_machines`: `accelerate launch` takes them over the config's.
  const counts = launched?.counts;
  const countLayer: Layer | undefined = counts && {
    source: { kind: 'launch', detail: counts.where },
    values: {
      worldSize: counts.worldSize,
      ...(counts.gpusPerNode ? { gpusPerNode: counts.gpusPerNode } : {}),
    },
    details: {
      worldSize: counts.where,
      ...(counts.gpusPerNode
        ? { gpusPerNode: `--num_processes / --num_machines at ${launched!.where}` }
        : {}),
    },
  };
  const extra = [
    ...(countLayer ? [countLayer] : []),
    ...(recipe ? [recipe.layer] : []),
    ...(c.layer ? [c.layer] : []),
  ];
  const a = analyzeFacts(facts, text, {
    lint: opts.lint,
    estimate: {
      ...opts.estimate,
      framework: plan,
      ...(extra.length ? { extraLayers: extra } : {}),
      ...(companion && trainsThroughTrainer(companion) ? { companionTrainer: true } : {}),
    },
  });
  // JSON has no comments: no "# noqa" fix there.
  const findings =
    formatOf(file) === 'json'
      ? a.findings.map((f) => ({ ...f, fixes: f.fixes.filter((x) => !/noqa/i.test(x.title)) }))
      : a.findings;
  return { ...a, findings, reading, ...(companion ? { companion: companion.path } : {}) };
}

/**
 * The estimate of the Accelerate config that a launch command passes with `--config_file` (the one at `range`, else
 * the file's first), read for this launch file (its flags to the script), said so; undefined when there is none or
 * it gives no estimate.
 */
function acceleratedConfigEstimate(
  project: Project,
  file: string,
  text: string,
  range: Range | undefined,
  opts: { estimate: AnalyzeOptions },
): { estimate: EstimateResult; script: string; range: Range } | undefined {
  const launch = (c: { cmd: string }) => /\baccelerate\s+launch\b/.test(c.cmd) && /--config_file/.test(c.cmd);
  const at = range
    ? expandedCommands(text).find((c) => c.line === range.start.line)
    : expandedCommands(text).find(launch);
  const cmd = at?.cmd;
  if (!at || !cmd || !launch(at)) return undefined;
  const line = text.split('\n')[at.line] ?? '';
  const where = range ?? {
    start: { line: at.line, character: 0 },
    end: { line: at.line, character: line.replace(/\r$/, '').length },
  };
  const script = pythonScriptOf(cmd) ?? path.basename(file);
  const given = flags(cmd)
    .get('--config_file')
    ?.replace(/^["']|["']$/g, '');
  if (!given) return undefined;
  const cfgFile = launchedConfigPath(project, given, file);
  const cfgText = cfgFile ? project.fs.readFile(cfgFile) : undefined;
  if (!cfgFile || !cfgText || !isConfigPath(cfgFile)) return undefined;
  const a = analyzeConfigText(cfgFile, cfgText, {
    lint: null,
    estimate: { ...opts.estimate, launchFile: file },
  });
  if (!a.estimate) return undefined;
  const config = path.relative(path.dirname(file), cfgFile);
  // No estimate from the config either: why, said of the job this line launches.
  if (!a.estimate.ok)
    return {
      estimate: {
        ...a.estimate,
        reason: `the job is launched at line ${at.line + 1} with the Accelerate config ${config}: ${a.estimate.reason}`,
      },
      script,
      range: where,
    };
  a.estimate.estimate.notes.unshift(
    `the job is launched at line ${at.line + 1} with the Accelerate config ${config}: estimated from that config with this command's flags to the script`,
  );
  return { estimate: a.estimate, script, range: where };
}

export type DocumentAnalysis = FileAnalysis &
  Partial<Pick<ConfigFileAnalysis, 'reading' | 'companion'>> & {
    /** Set when the analysis stopped at its budget: why, and that the rest is unknown. */
    incomplete?: string;
    /** Exceptions a stage did not expect (the stage's result is missing, the rest stands). */
    faults: Fault[];
  };

/**
 * What the run gives a script besides its text: its own arguments (given, else a launch file's of the project) and
 * a reader of the configuration files it loads by a path it writes.
 */
export function scanContext(
  project: Project | undefined,
  file: string,
  argv?: readonly string[],
): ScanOptions {
  const launch = argv ? undefined : launchArguments(project, file);
  return {
    ...(argv ? { argv } : launch ? { launchArgv: launch } : {}),
    ...(project ? projectReaders(project, file) : {}),
  };
}

/**
 * Analyses one document: a configuration by what it configures, a Python file by its facts (scanned here from its
 * text, or from the tree of a caller that keeps its own incremental tree). Without a file, the model of the flags
 * alone. The whole analysis runs under one work budget and never throws: what a stage did not expect is a fault.
 */
export function analyzeDocument(
  grammar: PythonGrammar,
  doc: { file?: string; text: string; facts?: FileFacts; tree?: Tree },
  opts: {
    lint: LintOptions | null;
    estimate: AnalyzeOptions;
    limits?: BudgetLimits;
    /** Asked now and then: true once the result is no longer wanted (the analysis then ends early). */
    cancelled?: () => boolean;
  },
): DocumentAnalysis {
  const work = new WorkBudget(opts.limits, undefined, opts.cancelled);
  const { value, faults } = collectFaults(() =>
    withBudget(work, (): FileAnalysis & Partial<Pick<ConfigFileAnalysis, 'reading' | 'companion'>> => {
      if (doc.file && isConfigPath(doc.file)) return analyzeConfigText(doc.file, doc.text, opts);
      let facts: FileFacts;
      try {
        const context = doc.file && !doc.facts ? scanContext(opts.estimate.project, doc.file) : {};
        facts =
          doc.facts ??
          (doc.tree
            ? scanFile(grammar, new SourceFile(doc.file ?? '(no file)', doc.text, doc.tree), context)
            : doc.file
              ? scanText(grammar, doc.file, doc.text, context)
              : emptyFacts('(no file)'));
      } catch (e) {
        fault('the scan', e);
        facts = emptyFacts(doc.file ?? '(no file)');
      }
      return analyzeFacts(facts, doc.text, opts);
    }),
  );
  return { ...value, ...(work.spent ? { incomplete: work.spent } : {}), faults };
}
