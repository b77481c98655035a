/**
 * The estimate of one file: the model, the plan and every input resolved with its source, then estimated; or why
 * there is none.
 */
import { oneLine } from '../vocabulary/words';
import { count, listed } from '../vocabulary/words';
import { fmtCount, fmtParams } from '../vocabulary/bytes';
import * as path from 'node:path';
import { takesPathWords } from '../vocabulary/commandLine';
import { exclusive, type FileFacts, type TrainingFact, type WrapCall } from '../analysis/facts';
import type { MixedPrecisionValue, MeshValue } from '../analysis/options';
import type { Estimate, EstimateInput, Term } from '../estimator/types';
import type { Colocation } from '../estimator/colocated';
import type { ArchShape } from '../model/hf';
import type { TrainingSetup } from '../inputs/table';
import { lastSegment } from '../analysis/options';
import { WhatIfModel, type MinGpus } from '../whatif/model';
import type { Source } from '../vocabulary/source';
import { ModelError } from '../model/tree';
import { closeCatalogIds } from '../model/catalog';
import { applyFineTune, frozenIn, type FineTune } from '../model/finetune';
import { hfHubCache, loadConfigPath, loadHubModel, type LoadedModel } from '../model/load';
import { isDType, type DType } from '../vocabulary/dtypes';
import { versionAtLeast, type VersionPin } from '../vocabulary/versions';
import { callsThatRun, planFromFacts } from '../plan/fromFacts';
import { helperPlan, type HelperPlan } from './helpers';
import { oneModelPerName, planOfCalledFunction, type PlanChoices } from './entryPlan';
import { reshardPerIteration } from '../modules/perIteration';
import { testPerModule } from '../modules/perModuleTest';
import { acceleratorCall, acceleratorPrecision, frameworkFromFacts } from '../frameworks/python';
import { transformersLoss } from './transformersLoss';
import { transformersReentrant } from './transformersCheckpoint';
import { pinnedVersions } from '../project/versions';
import { trainingArgumentValues } from '../frameworks/transformers';
import { nearbyFrameworkConfig } from './configFile';
import { planForFramework } from '../plan/fromFramework';
import type { ColocationSpec, FrameworkPlan } from '../frameworks/types';
import { isRecord } from '../frameworks/configDoc';
import { modelFromClass, modelFromScript, inferShapeFromTree as staticShape } from '../modules/resolveModel';
import type { Project } from '../project/project';
import { launchFacts, launchLayer, launchOf, pyprojectLayer } from '../project/settings';
import { readCalibrations } from '../project/calibration';
import type { ExactModel } from '../exact/exact';
import { countParams, walk as walkModules, type ModuleNode } from '../model/tree';
import { planMismatch, type TensorParallelPlan } from '../model/tensorParallel';
import type { CompileMode } from '../inputs/parse';
import { checkFnClasses } from '../analysis/checkFn';
import { attentionKind } from '../inputs/parse';
import { INPUT_BY_KEY, parseInput, type SetupValues } from '../inputs/table';
import { resolveSetup, type Layer } from '../inputs/layers';
import type { ModelChoice } from '../inputs/model';
import { planLabel } from '../vocabulary/fsdp';
import { NO_HOST, type Host } from '../vocabulary/host';
import { fsdpMesh, MeshError, type Mesh } from '../estimator/mesh';

export interface AnalyzeOptions {
  /** Command-line flags (highest precedence). */
  flags?: { values: SetupValues; model?: ModelChoice; fineTune?: FineTune };
  /** Editor settings (below everything the workspace says). */
  settings?: SetupValues;
  /** The model to use when nothing in the file names one (an editor setting). */
  fallbackModel?: ModelChoice;
  /** Which plan of a file that makes several to estimate: the function or class that makes it (`--plan`). */
  plan?: string;
  /** The project around the file: model code is read from it (imports, callers). */
  project?: Project;
  /** The model class the user chose when the code allows several. */
  modelChoice?: string;
  /** The model as exact mode measured it (takes the place of the static reading). */
  exactModel?: ExactModel;
  /**
   * The machine: the file system model configs are read through and the environment that locates the Hugging
   * Face cache. Without one nothing outside the project (and its file system) is read.
   */
  host?: Host;
  /** The Hugging Face cache to read configs from (defaults to the host's). */
  hubCache?: string;
  /** A framework's FSDP configuration (a config file) to plan from instead of the file's wrap calls. */
  framework?: FrameworkPlan;
  /** Inputs from elsewhere (a configuration's companion script), above the framework's own. */
  extraLayers?: Layer[];
  /** The configuration's companion script trains through Transformers' Trainer (or TRL's trainers). */
  companionTrainer?: boolean;
  /** The file is analysed as a helper's caller, for the helper's job: its own callers are not searched again. */
  forHelper?: true;
  /** The launch file a configuration is estimated for: its command is the one read, before other launch files'. */
  launchFile?: string;
}

export type EstimateResult = (
  | {
      ok: true;
      input: EstimateInput;
      estimate: Estimate;
      model: LoadedModel;
      whatIf: WhatIfModel;
      minGpus: MinGpus;
      /** The framework configuration the plan comes from, when it is not the file's own wrap calls. */
      framework?: FrameworkPlan;
    }
  | {
      ok: false;
      reason: string;
      hint?: string;
      /** The plan is known but the model's size is not: what would make it known is in `hint`. */
      unknownModel?: true;
      /** Part of the plan is not known: wraps a helper makes on the same run are found but not followed. */
      unknownPlan?: true;
    }
) & {
  /** The wrap calls the file makes through helpers of other files, placed at its calls of them (for the lenses). */
  helperCalls?: WrapCall[];
  /** The file's plans when its wraps make several: which one is estimated, and the others. */
  plans?: PlanChoices;
  /**
   * A helper estimated as a calling script's job: the scripts that call it (paths from the helper's folder), the
   * one whose job this is marked, for a surface that offers the others (`# fsdp: caller=PATH`).
   */
  jobCallers?: JobCaller[];
};

/** A script that calls a helper, as `EstimateResult.jobCallers` lists it. */
export interface JobCaller {
  file: string;
  line: number;
  chosen: boolean;
}

/** The estimate for one scanned file, with every input's source; or why there is none. */
export function estimateFile(scanned: FileFacts, opts: AnalyzeOptions = {}): EstimateResult {
  // Several wrap functions, none calling another: the plan of the one the project calls.
  const chosen = opts.framework ? { facts: scanned } : planOfCalledFunction(opts.project, scanned, opts.plan);
  const own = chosen.facts;
  // A file may wrap through helpers of the project (`apply_fsdp(model, mesh)`), besides or instead of its own calls
  // (`FSDP(model)` in one arm of an `if`, `apply_fsdp2(model)` in the other): those the chosen plan's lines call.
  const found = opts.project && !opts.framework ? helperPlan(opts.project, scanned, chosen.span) : undefined;
  const helpers =
    chosen.note !== undefined
      ? { ...(found ?? { calls: [], functions: {} }), notes: [chosen.note, ...(found?.notes ?? [])] }
      : found;
  const plans = 'choices' in chosen && chosen.choices ? { plans: chosen.choices } : {};
  // A helper on the path the script takes whose wraps are found but not followed, run beside the plan's own wraps
  // (the same function, no arm apart) or instead of them (they are all off the path): the file's own wraps are not
  // the plan the job runs. (In an arm of a test the analysis cannot decide, the own arm is estimated and the
  // helper's named in the notes.)
  const onPath = (c: WrapCall) => !c.neverRuns && !c.offByDefault && !c.incomplete;
  const ownOnPath = own.calls.filter(onPath);
  // With no wraps of its own, such a helper makes the script's plan: a default plan would stand for one the code
  // does not make.
  const beside = found?.unfollowed?.find(
    (u) =>
      !u.offPath &&
      (!ownOnPath.length ||
        ownOnPath.some((c) => c.function === u.function && !exclusive(c.branch, u.branch))),
  );
  if (beside)
    return {
      ok: false,
      reason: `${own.calls.length ? 'part of the plan' : 'the plan'} is not known statically: ${beside.helper} (line ${beside.line}) in ${beside.where}, ${!own.calls.length ? 'which makes the wraps of the script' : ownOnPath.length ? "run beside the file's own wraps" : "run on the path the script takes instead of the file's own wraps"}, is not followed: ${beside.reason}`,
      hint: '`fsdp-lens scan` lists the wraps it may make; a plan written with the wraps themselves is estimated',
      unknownPlan: true,
      ...plans,
    };
  // A helper not followed in an arm the analysis cannot tell from the own wraps' arm: which of the two runs is said.
  for (const u of found?.unfollowed ?? [])
    if (!u.offPath && ownOnPath.some((c) => c.function === u.function && exclusive(c.branch, u.branch)))
      helpers?.notes.push(
        `the file's own wraps are estimated, in their arm; ${u.helper} (line ${u.line}) wraps in another arm of a test the analysis cannot decide, and is not followed: the job runs one of the two`,
      );
  if (!helpers?.calls.length) {
    const notes: string[] = [];
    const calls = oneModelPerName(own.calls, notes);
    const withNotes = notes.length
      ? { ...(helpers ?? { calls: [], functions: {} }), notes: [...(helpers?.notes ?? []), ...notes] }
      : helpers;
    return { ...estimateFacts(calls === own.calls ? own : { ...own, calls }, opts, withNotes), ...plans };
  }
  const scannedCalls = own.calls;
  const offset = scannedCalls.length;
  const merged = helpers.calls.map((c) => ({ ...c, children: c.children.map((i) => i + offset) }));
  const r = estimateFacts(
    {
      ...own,
      calls: oneModelPerName([...scannedCalls, ...merged], helpers.notes),
      checkpointing: [...own.checkpointing, ...(helpers.checkpointing ?? [])],
    },
    opts,
    helpers,
  );
  return { ...r, helperCalls: helpers.calls, ...plans };
}

/**
 * The arguments a launch file of the project passes to `script` (`torchrun ... train.py --use_peft`), and where
 * that command is: the script is read with them when no others are given.
 */
export function launchArguments(
  project: Project | undefined,
  script: string,
): { argv: string[]; from: string } | undefined {
  const root0 = project?.roots[0];
  if (!project || !root0) return undefined;
  const pick = launchOf(
    project.memo(`launch-files:${root0}`, () => launchFacts(project.fs, root0)),
    script,
  );
  if (!pick?.scriptArgs) return undefined;
  return {
    argv: pick.scriptArgs,
    from:
      `the launch command at ${path.relative(root0, pick.file) || path.basename(pick.file)}:${pick.line}` +
      (pick.argDefaults ? `, with the shell defaults ${pick.argDefaults.join(', ')}` : ''),
  };
}

/** The world size and GPUs per node a launch file of the project gives `script`, when one launches it. */
export function launchLayerOf(project: Project, script: string): ReturnType<typeof launchLayer> {
  const root0 = project.roots[0];
  if (!root0) return undefined;
  return project.memo(`launch:${root0}:${script}`, () =>
    launchLayer(
      project.memo(`launch-files:${root0}`, () => launchFacts(project.fs, root0)),
      root0,
      script,
    ),
  );
}

function estimateFacts(
  facts: FileFacts,
  opts: AnalyzeOptions,
  helpers: HelperPlan | undefined,
): EstimateResult {
  const file = path.basename(facts.path);
  const annotation = annotationLayer(facts, file);
  if ('error' in annotation) return { ok: false, reason: annotation.error };
  const root0 = opts.project?.roots[0];
  const pyproject = opts.project && root0 ? pyprojectLayer(opts.project.fs, facts.path, root0) : undefined;
  const project = opts.project;
  // The versions the project pins (requirements, pyproject.toml, lock files), read once per project root.
  const pins =
    project && root0 ? project.memo(`versions:${root0}`, () => pinnedVersions(project.fs, root0)) : undefined;
  const launch = project ? launchLayerOf(project, facts.path) : undefined;
  // A framework's configuration: a config file's, or a constructor call of the script when it wraps nothing itself.
  const fromScript = facts.calls.length
    ? undefined
    : frameworkFromFacts(facts, file, {
        ...(project && pins
          ? {
              versions: pins,
              readFile: (f: string) => project.fs.readFile(f),
            }
          : {}),
      });
  // A script that trains through Transformers or Accelerate without configuring FSDP itself: the Accelerate
  // configuration beside it (what `accelerate launch --config_file` applies).
  const nearby =
    !opts.framework && !fromScript && !facts.calls.length && project && trainsThroughFramework(facts)
      ? nearbyFrameworkConfig(project, facts.path, opts.host)
      : undefined;
  const fw = opts.framework ?? fromScript ?? nearby;
  const extraLayers = [...(opts.extraLayers ?? [])];
  const args = nearby && facts.frameworkCalls.find((c) => c.kind === 'TrainingArguments');
  if (args) {
    const t = trainingArgumentValues(args, facts.path);
    extraLayers.push({ source: { kind: 'detected' }, values: t.values, details: t.details });
  }
  // `Accelerator(mixed_precision=...)` takes precedence over the config's `mixed_precision`.
  const accelerator = nearby ? acceleratorPrecision(acceleratorCall(facts), facts.path) : undefined;
  if (accelerator) {
    extraLayers.push({
      source: { kind: 'detected' },
      values: accelerator.values,
      details: accelerator.details,
    });
  }
  // Accelerate's context parallelism under a script that trains through Transformers' Trainer (its
  // TrainingArguments, or TRL's trainers): the Trainer's training step enters `maybe_context_parallel`
  // (`Trainer._prepare_context_parallel_inputs`, Transformers 4.56+, PR 40205), so the sequence is split.
  const cp = fw?.trainerContextParallel;
  const viaTrainer = cp && (opts.companionTrainer || trainsThroughTrainer(facts));
  const oldTrainer =
    viaTrainer && pins?.transformers && !versionAtLeast(pins.transformers.version, '4.56')
      ? pins.transformers
      : undefined;
  const trainerCp = viaTrainer && !oldTrainer ? cp : undefined;
  if (trainerCp)
    extraLayers.push({
      source: { kind: 'config' },
      values: { contextParallel: trainerCp.degree },
      details: {
        contextParallel: `${trainerCp.where}, which the Trainer's training step applies (maybe_context_parallel)`,
      },
    });
  const configModel: ModelChoice | undefined = fw?.builtModel
    ? { loaded: fw.builtModel.loaded, source: fw.builtModel.source }
    : fw?.model;
  const model = resolveModel(facts, file, opts, annotation.model ?? configModel, pyproject?.model);
  if ('reason' in model)
    return {
      ok: false,
      // A configuration that names its model where the analysis cannot read it says where.
      reason: model.unknown && fw?.modelUnknown ? fw.modelUnknown : model.reason,
      ...(model.unknown && fw?.modelUnknown
        ? {
            hint: 'name the Hugging Face model with a "# fsdp: model=ORG/NAME" comment in the file, or pass --model',
          }
        : model.hint
          ? { hint: model.hint }
          : {}),
      ...(model.unknown ? { unknownModel: true as const } : {}),
    };
  // A model none of whose parameters is known is no result, not "0 parameters that fit".
  if (countParams(model.loaded.root) === 0) {
    const gaps = model.loaded.gaps ?? [];
    return {
      ok: false,
      reason:
        `no parameter of ${model.loaded.name} is known statically` +
        (gaps.length ? ` (${gaps.slice(0, 2).join('; ')}${gaps.length > 2 ? '; …' : ''})` : ''),
      hint: 'measure it exactly with PyTorch (--exact, or "FSDP: Measure model exactly with PyTorch"), or name it with "# fsdp: model=ORG/NAME" or --model',
      unknownModel: true,
    };
  }
  const layers: Layer[] = [];
  if (opts.flags) layers.push({ source: { kind: 'flag' }, values: opts.flags.values });
  layers.push(annotation.layer);
  layers.push(...extraLayers);
  if (fw)
    layers.push({
      source: { kind: /\.pyi?$/.test(fw.file) ? 'detected' : 'config' },
      values: fw.values,
      details: fw.details,
    });
  const loadRead = loadDtype(
    facts,
    model.loaded,
    pins?.transformers,
    !!fw && (fw.framework === 'Transformers' || fw.framework === 'TRL'),
  );
  const loadAs = loadRead && 'dtype' in loadRead ? loadRead : undefined;

  const detected = detectedLayer(facts, file, model.loaded.root, loadAs);
  layers.push(detected);
  // The PyTorch the project pins (requirements, pyproject.toml, lock files) decides semantics that changed.
  const torchPin = pins?.torch;
  const torchNotes: string[] = [];
  if (loadRead && 'note' in loadRead) torchNotes.push(loadRead.note);
  if (torchPin?.floor)
    // A lower bound is the oldest release allowed, not the one the job runs: the default stands, and the note says
    // how to say which release runs.
    torchNotes.push(
      `the project allows torch ${torchPin.version} and later (torch>=${torchPin.version} at ${torchPin.where}); the estimate assumes the default, 2.8 or later: set "# fsdp: torch=${torchPin.version}" if the job runs an older release`,
    );
  else if (torchPin) {
    try {
      layers.push({
        source: { kind: 'detected' },
        values: { torchVersion: parseInput('torchVersion', torchPin.version, torchPin.where) },
        details: { torchVersion: `torch ${torchPin.version} pinned at ${torchPin.where}` },
      });
    } catch {
      // A pin that is not a release (a URL, a local build) says nothing about semantics.
    }
  }
  // The loss: Transformers' own when the model computes it from `labels` (a Trainer, or `outputs.loss` read), and
  // what it keeps of the logits changed between releases.
  const hfLoss =
    (fw && ['Transformers', 'TRL', 'axolotl'].includes(fw.framework)) ||
    facts.frameworkCalls.some((c) => c.kind === 'TrainingArguments' || c.kind === 'TrlTrainer') ||
    facts.training.some((t) => t.kind === 'model_loss')
      ? transformersLoss(pins?.transformers, model.loaded.root.className)
      : undefined;
  // Transformers' gradient checkpointing under FSDP1, reentrant or not by the release (a flag or annotation says
  // otherwise above these layers).
  const trainerArgs = facts.frameworkCalls
    .filter((c) => c.kind === 'TrainingArguments')
    .map((c) => ({ trl: /Config$/.test(c.callee), v: trainingArgumentValues(c, facts.path).values }));
  const hfGc =
    fw && ['Transformers', 'TRL', 'axolotl'].includes(fw.framework)
      ? fw.values?.checkpointing === 'full' && fw.values.reentrantCheckpoint === undefined
        ? { trl: fw.framework === 'TRL' }
        : undefined
      : trainerArgs.find((a) => a.v.checkpointing === 'full' && a.v.reentrantCheckpoint === undefined);
  const hfCheckpoint =
    fw?.api === 'fsdp1' && hfGc ? transformersReentrant(pins?.transformers, hfGc.trl) : undefined;
  if (hfCheckpoint && 'note' in hfCheckpoint) torchNotes.push(hfCheckpoint.note);
  else if (hfCheckpoint)
    layers.push({
      source: { kind: 'detected' },
      values: { reentrantCheckpoint: true },
      details: { reentrantCheckpoint: hfCheckpoint.detail },
    });
  if (hfLoss && 'note' in hfLoss) torchNotes.push(hfLoss.note);
  else if (hfLoss)
    layers.push({
      source: { kind: 'detected' },
      values: { loss: hfLoss.loss },
      details: { loss: hfLoss.detail },
    });
  if (pyproject) layers.push(pyproject.layer);
  if (launch) layers.push(launch.layer);
  if (opts.settings) layers.push({ source: { kind: 'setting' }, values: opts.settings });
  if (fw?.suggested) layers.push({ source: { kind: 'config' }, ...fw.suggested });
  const fineTuneNotes: string[] = [];
  const fineTuneUndecided: string[] = [];
  const ft = opts.flags?.fineTune
    ? { ft: opts.flags.fineTune, source: { kind: 'flag' } as Source }
    : fw?.fineTune
      ? {
          ft: fw.fineTune,
          source: {
            kind: 'config',
            detail:
              fw.fineTuneWhere ??
              (fw.range ? `${path.basename(fw.file)}:${fw.range.start.line + 1}` : fw.file),
          } as Source,
        }
      : detectFineTune(facts, file, fineTuneNotes, fineTuneUndecided);
  const tuned = ft ? applyFineTune(model.loaded.root, ft.ft) : model.loaded.root;
  // Frozen weights stay in the dtype they were loaded in (`from_pretrained(..., torch_dtype=torch.bfloat16)`):
  // Accelerate upcasts only parameters that require grad to fp32 when mixed precision is on
  // (`Accelerator.prepare_model` for FSDP1, `fsdp2_prepare_model`), and nothing else casts them, short of a cast
  // the script writes.
  const loadedIn = facts.models.find((m) => m.dtype)?.dtype ?? loadAs?.dtype;
  const root =
    loadedIn &&
    isDType(loadedIn) &&
    (loadedIn === 'bfloat16' || loadedIn === 'float16') &&
    !facts.training.some((t) => t.kind === 'cast' && !t.runsWhen)
      ? frozenIn(tuned, loadedIn)
      : tuned;
  const plan = fw
    ? planForFramework(peftUnderTrainer(fw, facts, ft?.ft) ?? fw, root, model.loaded.shape)
    : planFromFacts(
        facts,
        root,
        model.loaded.shape,
        file,
        project ? (c, prefix) => reshardPerIteration(project, facts, c, root, prefix) : undefined,
        project
          ? (c, prefix) =>
              testPerModule(
                project,
                c,
                root,
                prefix,
                // A helper's wrap, placed at this file's call of it: its parameters are what the call passes.
                path.resolve(c.file) !== path.resolve(facts.path)
                  ? { file: facts.path, range: c.range }
                  : undefined,
              )
          : undefined,
      );
  // A wrap whose modules are not known for any module it may wrap: the plan is not known, and no figure is shown.
  if (plan.unknown)
    return {
      ok: false,
      reason: `the plan is not known statically: ${plan.unknown}`,
      hint: plan.unknownModel
        ? 'give the model the code builds: --model or "# fsdp: model=ORG/NAME" with a model of those module names, "# fsdp: model=path/to/model.py:Class", or --exact to build it with PyTorch'
        : '`fsdp-lens scan` lists its wraps and what each depends on; estimating the script that calls a helper reads what the call passes',
      unknownPlan: true,
    };
  plan.notes.unshift(
    ...(facts.configsRead?.length
      ? [`values read from ${listed([...new Set(facts.configsRead)])}, which the script loads`]
      : []),
    ...(facts.argsRead
      ? [
          facts.argsRead.length
            ? `read from the script's arguments${facts.argvFrom ? ` (${facts.argvFrom})` : ''}: ${facts.argsRead.join(' ')}`
            : `none of the script's arguments${facts.argvFrom ? ` (${facts.argvFrom})` : ''} is an option the analysis reads`,
        ]
      : []),
    ...(helpers?.notes ?? []),
    ...torchNotes,
    ...fineTuneNotes,
    // The script's own `parallelize_module` calls were read (modelled, or said why not): the model reader's
    // general caution about them is not repeated.
    ...model.notes.filter((n) => !(detected.tpRead && /^tensor parallelism \(parallelize_module\)/.test(n))),
    ...(pyproject?.problems ?? []),
    ...(launch?.problems ?? []),
    ...(detected.notes ?? []),
    ...(accelerator?.notes ?? []),
    ...(oldTrainer
      ? [
          `transformers ${oldTrainer.version} (${oldTrainer.where}) predates the Trainer's context parallelism (4.56): the config's cp_size is not applied by it`,
        ]
      : []),
  );
  const { setup, assumptions } = resolveSetup(layers);
  const hinted = inputHint(facts, assumptions);
  if (hinted) plan.notes.push(hinted);
  // The mesh: PyTorch refuses some (FSDP1's HYBRID_SHARD on part of a node): then there is no estimate, only why.
  let mesh: Mesh;
  try {
    mesh = fsdpMesh(setup, plan.strategy);
  } catch (e) {
    if (e instanceof MeshError) return { ok: false, reason: e.message };
    throw e;
  }
  if (mesh.derived)
    assumptions.push({
      key: 'replicas',
      label: 'HSDP replicas',
      value: String(mesh.replicas),
      source: { kind: 'detected', detail: mesh.derived },
    });
  assumptions.unshift(
    {
      key: 'model',
      label: 'model',
      // The origin once: a measured model's source already says how it was built.
      value:
        model.source.kind === 'measured' && model.source.detail === model.loaded.origin
          ? model.loaded.name
          : `${model.loaded.name} (${model.loaded.origin})`,
      source: model.source,
    },
    {
      key: 'plan',
      label: 'plan',
      value: `${planLabel(plan.api, plan.strategy)}, ${count(plan.units.length, 'unit')}`,
      source: plan.source,
    },
  );
  if (ft)
    assumptions.splice(2, 0, {
      key: 'fineTune',
      label: 'fine-tuning',
      value: describeFineTune(ft.ft),
      source: ft.source,
    });
  const loaded = facts.models.find((m) => m.pretrained);
  const unmodelled = [
    ...new Set([
      ...(fw?.unmodelled ?? []).filter((u) => u !== trainerCp?.unmodelled),
      ...(detected.unmodelled ?? []),
      // A degree the code does not say and no input sets.
      ...(detected.tpUnknown && setup.tensorParallel === 1 ? [detected.tpUnknown] : []),
      ...(model.loaded.unmodelled ?? []).filter(
        (u) => !(detected.tpRead && u === 'tensor parallelism (parallelize_module)'),
      ),
      ...loadingParallelism(facts, file),
    ]),
  ];
  const overcounted = fw?.overcounted ?? [];
  const colocated = fw?.colocated ? colocationOf(fw.colocated, root, model.loaded.shape, setup) : undefined;
  // Reserves measured on the project's clusters (`fsdp-lens calibrate --save`), read once per root.
  const calibrations =
    project && root0 ? project.memo(`calibration:${root0}`, () => readCalibrations(project.fs, root0)) : [];
  const input: EstimateInput = {
    ...(calibrations.length ? { calibrations } : {}),
    ...(colocated ? { colocated } : {}),
    ...(unmodelled.length ? { unmodelled } : {}),
    ...(fineTuneUndecided.length || fw?.undecided?.length
      ? { undecided: [...fineTuneUndecided, ...(fw?.undecided ?? [])] }
      : {}),
    ...(overcounted.length ? { overcounted } : {}),
    ...(loaded
      ? {
          loading: {
            fromPretrained: true,
            meta: loaded.meta,
            dtype: loaded.dtype && isDType(loaded.dtype) ? loaded.dtype : null,
            line: `${file}:${loaded.line}`,
            ...(fw?.host?.rank0Loading ? { rank0Only: { detail: fw.host.rank0Loading } } : {}),
          },
        }
      : {}),
    ...(fw?.host?.stateDict
      ? { stateDict: { kind: fw.host.stateDict.kind, detail: fw.host.stateDict.where } }
      : scriptStateDict(facts, file)),
    model: {
      name: model.loaded.name,
      root,
      shape: model.loaded.shape,
      source: model.source,
      gaps: model.loaded.gaps ?? [],
    },
    plan,
    setup,
    assumptions,
  };
  const whatIf = new WhatIfModel(input);
  const result = whatIf.run();
  let minGpus: MinGpus | undefined;
  return {
    ok: true,
    input,
    estimate: result,
    model: model.loaded,
    whatIf,
    ...(fw ? { framework: fw } : {}),
    // A search over world sizes (a dozen estimates): computed when a surface asks, not on every keystroke.
    get minGpus(): MinGpus {
      return (minGpus ??= whatIf.minGpus(setup.gpu));
    },
  };
}

/** Trains through Transformers' Trainer, TRL or Accelerate (the FSDP settings then live in their configuration). */
/**
 * A full state dict the script gathers into rank 0's CPU memory: DCP's `StateDictOptions(full_state_dict=True,
 * cpu_offload=True)` (torch.distributed.checkpoint.state_dict: with both set, "only the rank0 will get the
 * state_dict and all other ranks will get empty state_dict") or FSDP1's `FullStateDictConfig(offload_to_cpu=True,
 * rank0_only=True)`. Other settings gather on the GPU or on every rank, which the host figure does not model.
 */
function scriptStateDict(facts: FileFacts, file: string): { stateDict?: EstimateInput['stateDict'] } {
  for (const t of facts.training) {
    if (t.kind !== 'state_dict_options') continue;
    // (The option reader knows `cpu_offload` as FSDP1's CPUOffload: its text says True.)
    const on = (k: string) => t.options[k]?.value === true || t.options[k]?.text.trim() === 'True';
    const fsdp1 = lastSegment(t.qualified) === 'FullStateDictConfig';
    if (fsdp1 ? on('offload_to_cpu') && on('rank0_only') : on('full_state_dict') && on('cpu_offload'))
      return { stateDict: { kind: 'full', detail: `${lastSegment(t.qualified)} at ${file}:${t.line}` } };
  }
  return {};
}

/**
 * Transformers' Trainer (TRL's trainers derive from it) on a LoRA model under FSDP1 replaces the configured policy
 * with PEFT's `fsdp_auto_wrap_policy(model)` (`Trainer._fsdp_qlora_plugin_updates`, for a `LoraConfig`): the
 * decoder blocks and, as units of their own, the LoRA matrices. Undefined where that does not apply.
 */
function peftUnderTrainer(
  fw: FrameworkPlan,
  facts: FileFacts,
  ft: FineTune | undefined,
): FrameworkPlan | undefined {
  const trainer =
    fw.throughTrainer ||
    facts.frameworkCalls.some((c) => c.kind === 'TrainingArguments' || c.kind === 'TrlTrainer');
  if (
    !ft?.lora ||
    !trainer ||
    fw.api !== 'fsdp1' ||
    fw.wrap.kind !== 'policy' ||
    fw.wrap.minParams !== undefined
  )
    return undefined;
  return {
    ...fw,
    wrap: { ...fw.wrap, trainableLeaves: true },
    notes: [
      ...fw.notes,
      "Transformers' Trainer wraps a LoRA model with PEFT's fsdp_auto_wrap_policy: each LoRA matrix is an FSDP unit of its own, beside the decoder blocks",
    ],
  };
}

/** Whether the script trains through Transformers' Trainer: its TrainingArguments, or one of TRL's trainers. */
export function trainsThroughTrainer(facts: FileFacts): boolean {
  return facts.frameworkCalls.some((c) => c.kind === 'TrainingArguments' || c.kind === 'TrlTrainer');
}

function trainsThroughFramework(facts: FileFacts): boolean {
  return trainsThroughTrainer(facts) || facts.imports.some((i) => /^accelerate\b/.test(i.qualified));
}

function resolveModel(
  facts: FileFacts,
  file: string,
  opts: AnalyzeOptions,
  annotated: ModelChoice | undefined,
  projectModel?: ModelChoice,
):
  | { loaded: LoadedModel; source: Source; notes: string[] }
  | { reason: string; hint?: string; unknown?: true } {
  const host = opts.host ?? NO_HOST;
  const cache = opts.hubCache ?? hfHubCache(host);
  const candidates: ModelChoice[] = [];
  if (opts.flags?.model) candidates.push(opts.flags.model);
  if (annotated) candidates.push(annotated);
  const pretrained = facts.models.find((m) => m.pretrained);
  if (pretrained?.pretrained)
    candidates.push({
      id: pretrained.pretrained,
      source: {
        kind: 'detected',
        detail: `${file}:${pretrained.line}${pretrained.pretrainedVia ? ` (${pretrained.pretrainedVia}: a command line may change it)` : ''}`,
      },
    });
  // TRL's trainers load a model id themselves: `SFTTrainer(model="Qwen/Qwen2.5-7B", ...)`.
  const trl = facts.frameworkCalls.find((c) => c.kind === 'TrlTrainer' && typeof c.kwargs.model === 'string');
  if (trl && !pretrained?.pretrained)
    candidates.push({
      id: trl.kwargs.model as string,
      source: {
        kind: 'detected',
        detail: `${trl.callee.split('.').pop()}(model=...) at ${file}:${trl.kwargLines.model ?? trl.line}`,
      },
    });
  if (projectModel) candidates.push(projectModel);
  // A class the user picked for this file (`path/to/model.py:Class`).
  const picked = opts.modelChoice ? /^(.+\.py):([A-Za-z_]\w*)$/.exec(opts.modelChoice) : null;
  if (picked)
    candidates.push({
      classRef: { file: picked[1]!, name: picked[2]! },
      source: { kind: 'setting', detail: 'chosen with "FSDP: Choose the model"' },
    });
  if (opts.project && (facts.calls.length || facts.models.length))
    candidates.push({
      code: true,
      source: { kind: 'detected', detail: 'static analysis of the model code' },
    });
  if (opts.fallbackModel) candidates.push(opts.fallbackModel);
  if (opts.exactModel) {
    const x = opts.exactModel;
    const notes: string[] = [];
    const measured = countParams(x.root);
    if (x.staticParams !== null && x.staticParams !== measured)
      notes.push(
        `exact mode counts ${fmtCount(measured)} parameters where the static reading found ${fmtCount(x.staticParams)}`,
      );
    const shape = staticShape(x.root);
    return {
      loaded: { root: x.root, ...(shape ? { shape } : {}), name: x.root.className, origin: x.origin },
      source: { kind: 'measured', detail: x.origin },
      notes,
    };
  }
  let codeFailure: string | undefined;
  for (const c of candidates) {
    try {
      if (c.loaded) return { loaded: c.loaded, source: c.source, notes: [] };
      if (c.config) {
        // Relative to the file for an annotation, else to the workspace (an editor setting) or the working folder.
        const base =
          c.source.kind === 'annotation' ? path.dirname(facts.path) : (opts.project?.roots[0] ?? host.cwd);
        return { loaded: loadConfigPath(path.resolve(base, c.config), host.fs), source: c.source, notes: [] };
      }
      if (c.id) {
        const loaded = loadHubModel(c.id, cache, host.fs);
        if (loaded) return { loaded, source: c.source, notes: [] };
        const close = closeCatalogIds(c.id);
        return {
          reason: `model "${c.id}" is not in the Hugging Face cache (${cache}) nor in the built-in catalog${close.length ? `; did you mean ${close.map((k) => `"${k}"`).join(', ')}?` : ''}`,
          hint: '"fsdp-lens models" lists the built-in catalog; otherwise pass --config path/to/config.json, or download the config with huggingface-cli',
          // Named by the code or a framework's configuration: its size is unknown here. Named by the user (a flag,
          // a setting, an annotation), it is an input to correct.
          ...(c.source.kind === 'detected' || c.source.kind === 'config' ? { unknown: true as const } : {}),
        };
      }
      if ((c.classRef || c.code) && opts.project) {
        const r = c.classRef
          ? modelFromClass(
              opts.project,
              path.resolve(path.dirname(facts.path), c.classRef.file),
              c.classRef.name,
              c.configKey,
            )
          : modelFromScript(opts.project, facts, opts.modelChoice ? { choice: opts.modelChoice } : {});
        if (r.ok) {
          const m = r.model;
          const source: Source = c.code ? { kind: 'detected', detail: m.origin } : c.source;
          return {
            loaded: {
              root: m.root,
              ...(m.shape ? { shape: m.shape } : {}),
              name: m.className,
              origin: m.origin,
              ...(m.gaps.length ? { gaps: m.gaps } : {}),
              ...(m.unmodelled.length ? { unmodelled: m.unmodelled } : {}),
            },
            source,
            notes: m.notes,
          };
        }
        if (!r.ok && r.pretrained) {
          const loaded = loadHubModel(r.pretrained.id, cache, host.fs);
          if (loaded)
            return {
              loaded,
              source: { kind: 'detected', detail: `${r.pretrained.id}, ${r.pretrained.where}` },
              // Callers that pass other models: this file's figures are the first caller's job, not theirs.
              notes: r.pretrained.others?.length
                ? [
                    `the figures are for ${r.pretrained.id} (${r.pretrained.where}); other callers pass ${r.pretrained.others.join(', ')}: their own files estimate their jobs`,
                  ]
                : [],
            };
        }
        if (c.classRef) return { reason: r.reason };
        codeFailure = r.reason;
      }
    } catch (e) {
      if (e instanceof ModelError) return { reason: e.message };
      throw e;
    }
  }
  return {
    reason: codeFailure ?? 'the file does not say which model it trains',
    hint: 'load it with from_pretrained("ORG/NAME"), add a "# fsdp: model=path/to/model.py:Class" or "# fsdp: model=ORG/NAME" comment, or pass --model / --config',
    unknown: true,
  };
}

/** `# fsdp: key=value ...` comments of the file. */
export function annotationLayer(
  facts: FileFacts,
  file: string,
): { layer: Layer; model?: ModelChoice } | { error: string } {
  const values: SetupValues = {};
  const details: Layer['details'] = {};
  let model: ModelChoice | undefined;
  for (const a of facts.annotations) {
    const where = `# fsdp: at ${file}:${a.line}`;
    for (const [k, raw] of Object.entries(a.values)) {
      const key = k === 'model' || k === 'config' ? k : INPUT_BY_KEY[k];
      if (!key) continue; // Unknown keys are reported by the annotation lint rule, not fatal here.
      if (key === 'model' || key === 'config') {
        const source: Source = { kind: 'annotation', detail: where };
        if (key === 'model') {
          // `path/to/model.py:Class` names project code; `ORG/NAME` a Hugging Face model.
          const m = /^(.+\.py):([A-Za-z_]\w*)$/.exec(raw);
          model = {
            ...(m ? { classRef: { file: m[1]!, name: m[2]! } } : { id: raw }),
            ...(model?.configKey ? { configKey: model.configKey } : {}),
            source,
          };
        } else if (/\.json$|[\\/]/.test(raw)) model = { config: raw, source };
        else model = { ...(model ?? { source }), configKey: raw };
        continue;
      }
      try {
        (values as Record<string, unknown>)[key] = parseInput(key, raw, `${k} (${where})`);
        details[key] = where;
      } catch (e) {
        return { error: e instanceof Error ? e.message : String(e) };
      }
    }
  }
  return { layer: { source: { kind: 'annotation' }, values, details }, ...(model ? { model } : {}) };
}

/** What the code itself says: its mesh, mixed precision, dtype, optimizer, checkpointing and gradient sync. */
/**
 * The dtype `from_pretrained` loads the model in when the call does not name one the scan reads: the checkpoint's
 * (config.json's `torch_dtype`) for `dtype="auto"`, and for no dtype at all from Transformers 5 on, whose default
 * became "auto" (PR 42805); before 5, fp32, which is the estimate's own default. Without a pin, Transformers 5 is
 * what a Trainer job is read with (and said); a plain script keeps the fp32 default, with a note saying what
 * decides it.
 */
function loadDtype(
  facts: FileFacts,
  loaded: LoadedModel,
  transformers: VersionPin | undefined,
  trainer: boolean,
): { dtype: DType; detail: string } | { note: string } | undefined {
  const call = facts.models.find((m) => m.pretrained);
  if (!call || call.dtype || !loaded.checkpointDtype || loaded.checkpointDtype === 'float32')
    return undefined;
  const where = `${path.basename(facts.path)}:${call.line}`;
  const saved = loaded.checkpointDtype;
  if (call.dtypeAuto) return { dtype: saved, detail: `${where} (dtype="auto": its checkpoint's ${saved})` };
  if (transformers?.floor || (transformers && !versionAtLeast(transformers.version, '5'))) return undefined;
  if (!transformers && !trainer)
    return {
      note: `${where} loads the model without a dtype: Transformers 5 loads its checkpoint's ${saved}, Transformers 4 fp32; the estimate keeps fp32 (pin transformers, or pass dtype=, to decide it)`,
    };
  return {
    dtype: saved,
    detail: `${where} (no dtype: Transformers 5 loads the checkpoint's ${saved}; ${transformers ? `transformers ${transformers.version} at ${transformers.where}` : 'Transformers 5 assumed, not pinned in the workspace'})`,
  };
}

function detectedLayer(
  facts: FileFacts,
  file: string,
  root?: ModuleNode,
  loadAs?: { dtype: DType; detail: string },
): Layer & { notes?: string[]; unmodelled?: string[]; tpUnknown?: string; tpRead?: boolean } {
  const notes: string[] = [];
  const unmodelled: string[] = [];
  const values: SetupValues = {};
  const details: Layer['details'] = {};
  const at = (line: number) => `${file}:${line}`;
  // A wrap of a helper in another file is placed by that file's name.
  const atCall = (c: WrapCall) =>
    path.resolve(c.file) === path.resolve(facts.path) ? at(c.line) : `${path.basename(c.file)}:${c.line}`;
  const calls = callsThatRun(facts);

  // Mesh: the one the wrap calls use, else the file's only one.
  const meshCall = calls.find((c) => c.options.mesh?.value ?? c.options.device_mesh?.value);
  const mesh = (meshCall?.options.mesh?.value ?? meshCall?.options.device_mesh?.value) as
    MeshValue | undefined;
  const shape = mesh?.shape ?? (facts.meshes.length === 1 ? facts.meshes[0]!.shape : null);
  const meshLine = mesh?.line ?? facts.meshes[0]?.line;
  if (shape && shape.every((n): n is number => typeof n === 'number') && meshLine) {
    if (shape.length === 1) {
      values.worldSize = shape[0]!;
      details.worldSize = at(meshLine);
    } else if (shape.length === 2) {
      values.replicas = shape[0]!;
      values.worldSize = shape[0]! * shape[1]!;
      details.replicas = details.worldSize = at(meshLine);
    }
    // FSDP given a slice of a larger mesh: the other dimensions (tensor, context, pipeline parallelism) are not
    // modelled; the figures are those of the FSDP dimensions.
    const full = mesh?.full;
    if (full?.dimNames && mesh?.dimNames) {
      const other = full.dimNames
        .map((n, i) => ({ n, size: full.shape?.[i] }))
        .filter((d) => !mesh.dimNames!.includes(d.n));
      if (other.length) {
        const gpus = full.shape?.every((n): n is number => typeof n === 'number')
          ? full.shape.reduce((a, b) => a * b, 1)
          : null;
        notes.push(
          `FSDP runs over the ${mesh.dimNames.join(' x ')} dimension${mesh.dimNames.length > 1 ? 's' : ''} of a ` +
            `${full.dimNames.join(' x ')} mesh${gpus ? ` of ${gpus} GPUs` : ''}`,
        );
        // A tensor-parallel dimension the code's `parallelize_module` calls use is modelled (below); the world
        // is then the whole mesh.
        const tpDim = codeTensorParallel(facts, root, at)?.dim;
        for (const d of other)
          if (d.n !== tpDim) unmodelled.push(`the mesh's ${d.n} dimension (${d.size ?? '?'})`);
        if (tpDim && gpus) {
          values.worldSize = gpus;
          details.worldSize = at(meshLine);
        } else if (tpDim) {
          // FSDP's dimensions alone are not the world: it is they times the tensor-parallel degree.
          delete values.worldSize;
          delete details.worldSize;
          notes.push(
            `the world is the mesh's ${mesh.dimNames.join(' x ')} times its ${tpDim} dimension, whose size is not known statically`,
          );
        }
      }
    }
  }

  // `outputs = model(**batch)` in the training loop and `outputs.loss` backpropagated: the name keeps the output's
  // logits alive through backward, and through the next step's forward unless the loop releases it.
  const held = facts.training.find((t) => t.kind === 'model_loss' && t.held && !t.runsWhen);
  if (held?.held) {
    values.keepsOutput = held.held;
    details.keepsOutput =
      held.held === 'step'
        ? `${held.target} at ${at(held.line)} keeps the model's output until the next step rebinds it ("del ${held.target}" after backward frees it sooner)`
        : `${held.target} at ${at(held.line)} keeps the model's output through backward; the loop releases it after`;
  }

  // `parallelize_module(model, tp_mesh, plan)` where it runs: tensor parallelism, modelled when its plan is the
  // split model/tensorParallel.ts makes.
  let tpUnknown: string | undefined;
  const tp = codeTensorParallel(facts, root, at);
  if (tp?.problem) unmodelled.push(`tensor parallelism (${tp.where}): ${tp.problem}`);
  else if (tp) {
    if (tp.degree) {
      values.tensorParallel = tp.degree;
      details.tensorParallel = `the tp mesh of ${tp.where}`;
    } else
      tpUnknown = `tensor parallelism (${tp.where}) of a degree not known statically (set "# fsdp: tp=T")`;
    values.lossParallel = tp.lossParallel;
    details.lossParallel = tp.lossWhere;
    if (tp.plan === 'transformers') {
      values.tpPlan = 'transformers';
      details.tpPlan = `${tp.where}: the norms and the embedding left whole, no sequence parallelism`;
    }
    notes.push(`tensor parallelism read from ${tp.where}`);
  }

  // Lightning's ModelParallelStrategy: the fully_shard calls (the script's, or those of the parallelize function
  // it hands the strategy) shard over the mesh's data-parallel dimension, (num_nodes or data_parallel_size) x
  // (devices or tensor_parallel_size).
  const trainer = facts.frameworkCalls.find((c) => c.kind === 'LightningTrainer' || c.kind === 'Fabric');
  const mps = trainer?.kwargs.strategy;
  if (
    trainer &&
    typeof mps === 'object' &&
    mps !== null &&
    'call' in mps &&
    /ModelParallelStrategy$/.test(mps.call)
  ) {
    const devices = typeof trainer.kwargs.devices === 'number' ? trainer.kwargs.devices : undefined;
    const nodes = typeof trainer.kwargs.num_nodes === 'number' ? trainer.kwargs.num_nodes : 1;
    const dp = typeof mps.kwargs.data_parallel_size === 'number' ? mps.kwargs.data_parallel_size : nodes;
    const tp =
      typeof mps.kwargs.tensor_parallel_size === 'number' ? mps.kwargs.tensor_parallel_size : devices;
    if (!shape && dp >= 1) {
      values.worldSize = dp;
      details.worldSize = `ModelParallelStrategy's data-parallel size at ${at(trainer.line)}`;
      if (devices) {
        values.gpusPerNode = devices;
        details.gpusPerNode = at(trainer.line);
      }
    }
    if (tp && tp > 1) {
      notes.push(`ModelParallelStrategy: FSDP shards over the data-parallel dimension (${dp})`);
      unmodelled.push(`ModelParallelStrategy's tensor parallelism (${tp} GPUs)`);
    }
  }

  // Mixed precision of the root wrap (or the first that sets one).
  const mpCall =
    calls.find((c) => c.isRoot && (c.options.mp_policy ?? c.options.mixed_precision)) ??
    calls.find((c) => c.options.mp_policy ?? c.options.mixed_precision);
  if (mpCall) {
    const mp = (mpCall.options.mp_policy ?? mpCall.options.mixed_precision)!
      .value as MixedPrecisionValue | null;
    if (mp && typeof mp === 'object' && 'kind' in mp) {
      if (!mp.unresolved?.param_dtype) {
        values.paramDtype = asDType(mp.param_dtype);
        details.paramDtype = atCall(mpCall);
      }
      if (!mp.unresolved?.reduce_dtype) {
        values.reduceDtype = asDType(mp.reduce_dtype);
        details.reduceDtype = atCall(mpCall);
      }
      // A dtype the policy is given but the analysis cannot read: the default stands, and is said to.
      for (const [key, flag] of [
        ['param_dtype', 'param-dtype'],
        ['reduce_dtype', 'reduce-dtype'],
      ] as const) {
        const text = mp.unresolved?.[key];
        if (text)
          notes.push(
            `${atCall(mpCall)}: ${mp.kind}'s ${key}=${oneLine(text, 50)} is not known statically; the default stands (--${flag} D sets it)`,
          );
      }
    }
  } else if (calls.length && !calls.some((c) => c.unresolvedSplats.length)) {
    // Wrap calls without any mixed-precision policy gather and reduce in the parameters' own dtype.
    values.paramDtype = null;
    values.reduceDtype = null;
    details.paramDtype = details.reduceDtype = `${atCall(calls[0]!)} (no mp_policy / mixed_precision)`;
  }

  // The model's own dtype when it is loaded or cast in half precision.
  const loaded = facts.models.find((m) => m.dtype);
  const modelVar = calls.find((c) => c.isRoot)?.paths[0]?.join('.') ?? facts.models[0]?.variable;
  // A cast counts where its tests hold; one under a test the analysis cannot decide, or off, is said and left out.
  const casts = facts.training.filter(
    (t) => t.kind === 'cast' && t.dtype && (!modelVar || t.target === modelVar),
  );
  const cast = casts.find((t) => !t.runsWhen);
  for (const t of cast ? [] : casts.slice(0, 1)) {
    if (t.runsWhen?.undecided)
      notes.push(
        `the cast to ${t.dtype} at ${at(t.line)} runs only when ${t.runsWhen.undecided.join(' and ')}, which the analysis cannot decide; estimated without it`,
      );
    else if (t.runsWhen?.off)
      notes.push(
        `the cast to ${t.dtype} at ${at(t.line)} is left out: ${t.runsWhen.off}${t.runsWhen.runsWith ? `; ${takesPathWords(t.runsWhen.runsWith)}` : ''}`,
      );
  }
  if (loaded?.dtype && isDType(loaded.dtype)) {
    values.masterDtype = loaded.dtype;
    details.masterDtype = `${at(loaded.line)} (torch_dtype)`;
  } else if (loadAs && !(cast?.dtype && isDType(cast.dtype))) {
    values.masterDtype = loadAs.dtype;
    details.masterDtype = loadAs.detail;
  } else if (cast?.dtype && isDType(cast.dtype)) {
    values.masterDtype = cast.dtype;
    details.masterDtype = `${at(cast.line)} (cast)`;
  } else {
    // transformers' from_pretrained(torch_dtype="auto") loads in the dtype the checkpoint was saved in, which the
    // model's config.json records and the catalog does not.
    const auto = facts.models.find((m) => m.dtypeAuto);
    if (auto)
      notes.push(
        `${at(auto.line)} loads the model with torch_dtype="auto", in the dtype its checkpoint was saved in, which is not known here: the parameter dtype is the default (--param-dtype sets it)`,
      );
  }

  // `from_pretrained(..., attn_implementation="eager")` keeps the s x s scores; "sdpa" and FlashAttention do not.
  const attn = facts.models.find((m) => typeof m.args.attn_implementation?.value === 'string');
  const attnKind = attn && attentionKind(attn.args.attn_implementation!.value as string);
  if (attn && attnKind) {
    values.attention = attnKind;
    details.attention = `${at(attn.line)} (attn_implementation=${attn.args.attn_implementation!.text})`;
  }

  const opt = facts.optimizers[0];
  if (opt) {
    values.optimizer = opt.family as SetupValues['optimizer'];
    details.optimizer = `${at(opt.line)} (${opt.name})`;
    if (/^Paged/.test(opt.name)) {
      values.pagedOptimizer = true;
      details.pagedOptimizer = details.optimizer;
    }
    if (opt.options.fused?.value === true) values.optimizerImpl = 'fused';
    else if (opt.options.foreach?.value === false) values.optimizerImpl = 'for-loop';
    if (values.optimizerImpl) details.optimizerImpl = at(opt.line);
  }
  // The checkpointing the path takes: not one a test false as written or by a default keeps off.
  const onPath = facts.checkpointing.filter((a) => !a.neverRuns && !a.offByDefault);
  const off = facts.checkpointing.find((a) => a.offByDefault);
  if (!onPath.length && off)
    notes.push(
      `${off.file ? `${path.basename(off.file)}:${off.line}` : at(off.line)}: activation checkpointing (${off.api}) is off by default (${off.offByDefault}); estimated without it (--ac full for the other path)`,
    );
  const ac = onPath[0];
  if (ac?.undecided?.length)
    notes.push(
      `${ac.file ? `${path.basename(ac.file)}:${ac.line}` : at(ac.line)}: activation checkpointing runs where ${ac.undecided.join(' and ')}, which is not known statically; estimated with it (--ac none for the other path)`,
    );
  // `check_fn=lambda m: isinstance(m, GPT2Block)` on a model without that class checkpoints nothing
  // (apply_activation_checkpointing wraps only the modules check_fn admits).
  const admitted = ac?.options.check_fn ? checkFnClasses(ac.options.check_fn.text) : null;
  const present = root ? new Set([...walkModules(root)].map((m) => m.className)) : null;
  if (ac && admitted && present && !admitted.some((c) => present.has(c))) {
    values.checkpointing = 'none';
    details.checkpointing = `${at(ac.line)} (check_fn admits ${admitted.join(', ')}, which the model does not have)`;
    notes.push(
      `${at(ac.line)}: check_fn admits ${admitted.join(', ')}, which the model does not have: activation checkpointing applies to no module, and is estimated off`,
    );
  } else if (ac?.options.context_fn) {
    // A per-op policy (`context_fn=partial(create_selective_checkpoint_contexts, policy)`,
    // torch/utils/checkpoint.py) saves the ops the policy names, which the activation model does not follow: the
    // figures keep every activation, an upper bound.
    values.checkpointing = 'none';
    details.checkpointing = `${ac.file ? `${path.basename(ac.file)}:${ac.line}` : at(ac.line)} (${ac.api} with a per-op policy, not modelled: activations as without checkpointing, an upper bound)`;
  } else if (ac) {
    values.checkpointing = 'full';
    details.checkpointing = `${ac.file ? `${path.basename(ac.file)}:${ac.line}` : at(ac.line)} (${ac.api})`;
  }
  const noSync = facts.training.find(
    (t) => t.kind === 'no_sync' || (t.kind === 'requires_gradient_sync' && t.positional[0] === 'False'),
  );
  if (noSync) {
    values.syncEveryMicroBatch = false;
    details.syncEveryMicroBatch = at(noSync.line);
  }
  // Explicit forward prefetch: FSDP2's `set_modules_to_forward_prefetch(...)`, FSDP1's `forward_prefetch=True`.
  const prefetch =
    facts.training.find((t) => t.kind === 'forward_prefetch' && !t.runsWhen) ??
    facts.calls.find(
      (c) => !c.neverRuns && c.api !== 'fully_shard' && c.options.forward_prefetch?.value === true,
    );
  if (prefetch) {
    values.forwardPrefetch = true;
    details.forwardPrefetch = at(prefetch.line);
  }
  // The micro-batch: the batch each process's DataLoader loads (torch.utils.data.DataLoader's `batch_size`, per
  // process under DistributedSampler). Loaders that disagree (a larger evaluation batch) decide nothing.
  const loaders = facts.training.filter(
    (t) =>
      t.kind === 'data_loader' && !t.runsWhen && /DataLoader$/.test(t.qualified) && t.qualified.includes('.'),
  );
  // Without batch_size (and nothing that may pass one: **kwargs, a batch_sampler, a second positional argument),
  // DataLoader's own default, 1.
  const sizeOf = (t: TrainingFact): unknown =>
    t.options.batch_size
      ? t.options.batch_size.value
      : t.positional.length < 2 && !/\*\*/.test(t.text) && !t.options.batch_sampler
        ? 1
        : undefined;
  const sizes = [...new Set(loaders.map(sizeOf))];
  const b = sizes[0];
  if (loaders.length && sizes.length === 1 && typeof b === 'number' && Number.isInteger(b) && b > 0) {
    try {
      values.microBatch = parseInput('microBatch', b, `batch_size at ${at(loaders[0]!.line)}`);
      const d = loaders[0]!.defaults;
      details.microBatch = loaders[0]!.options.batch_size
        ? `${at(loaders[0]!.line)} (DataLoader batch_size${d ? `, ${d}: a command line may change it` : ''})`
        : `${at(loaders[0]!.line)} (DataLoader's default batch_size=1)`;
    } catch {
      // Past the limits every source of the micro-batch has: not taken.
    }
  } else if (loaders.length && sizes.length > 1)
    notes.push(
      `the DataLoaders at ${loaders.map((t) => at(t.line)).join(', ')} load different batch sizes: the micro-batch is not taken from them`,
    );
  else if (loaders.length)
    // torch.utils.data.DataLoader's own default is batch_size=1: only when nothing may pass another.
    notes.push(
      `the batch size of the DataLoader at ${at(loaders[0]!.line)} is not read statically${/\*\*/.test(loaders[0]!.text) ? ' (passed in **kwargs)' : ''}: the micro-batch is not taken from it (--batch B sets it)`,
    );
  // Token ids the script makes up and feeds the model (`x = torch.randint(0, V, (batch_size, seq_len))`, then
  // `model(x)`): batch by sequence. Inputs that disagree decide nothing.
  // The model under its own name, or the name a wrap's result is bound to (`sharded = fully_shard(model)`).
  const modelNames = new Set(
    modelVar
      ? [
          modelVar,
          ...calls
            .filter((c) => c.isRoot && c.paths[0]?.join('.') === modelVar && c.assignedTo)
            .map((c) => c.assignedTo!),
        ]
      : [],
  );
  const inBackward = facts.training.find(
    (t) => t.kind === 'optimizer_in_backward' && !t.runsWhen && /^torchtune\b/.test(t.qualified),
  );
  if (inBackward) {
    values.optimizerInBackward = true;
    details.optimizerInBackward = `${at(inBackward.line)} (register_optim_in_bwd_hooks)`;
  }
  // `with torch.autograd.graph.save_on_cpu():` / torchtune's `OffloadActivations()` around the forward.
  const offload = facts.training.find(
    (t) =>
      t.kind === 'activation_offload' &&
      !t.runsWhen &&
      /^(torch\.autograd\.graph\.save_on_cpu|torchtune\..*OffloadActivations)$/.test(t.qualified),
  );
  if (offload) {
    values.activationOffload = true;
    details.activationOffload = `${at(offload.line)} (${lastSegment(offload.qualified)})`;
  }
  const compiled = compileOf(facts, modelNames, calls, at);
  if (compiled.mode) {
    values.compile = compiled.mode;
    details.compile = compiled.where;
  }
  notes.push(...compiled.notes);
  const fed = facts.training.filter(
    (t) =>
      t.kind === 'model_input' &&
      !t.runsWhen &&
      t.shape?.length === 2 &&
      (t.fedTo ?? []).some((n) => modelNames.has(n)),
  );
  const shapes = [...new Set(fed.map((t) => t.shape!.join('x')))];
  if (fed.length && shapes.length === 1) {
    const [batch, seq] = fed[0]!.shape!;
    const d = fed[0]!.defaults;
    const why = `${at(fed[0]!.line)} (the input ${fed[0]!.positional.at(-1) ?? ''} fed to ${fed[0]!.fedTo!.find((n) => modelNames.has(n))}${d ? `, ${d}: a command line may change it` : ''})`;
    try {
      if (values.microBatch === undefined) {
        values.microBatch = parseInput('microBatch', batch!, why);
        details.microBatch = why;
      }
      values.seqLen = parseInput('seqLen', seq!, why);
      details.seqLen = why;
    } catch {
      // Past the limits every source of these inputs has: not taken.
    }
  }
  return {
    source: { kind: 'detected' },
    values,
    details,
    notes,
    ...(unmodelled.length ? { unmodelled } : {}),
    ...(tpUnknown ? { tpUnknown } : {}),
    ...(tp ? { tpRead: true } : {}),
  };
}

/**
 * What the file's `torch.compile` calls compile where they run: the model (its name, the name a wrap binds, or a
 * module a wrap call wraps: torchtitan's per-block `torch.compile(transformer_block)`), a loss function (by its
 * name), or something else (left out, with a note when it is `torch.compile` itself). A model that computes its
 * loss from `labels` compiles the loss with it. `mode="reduce-overhead"` and `"max-autotune"` record CUDA graphs
 * (torch/_inductor/config.py `triton.cudagraphs` under those modes).
 */
function compileOf(
  facts: FileFacts,
  modelNames: ReadonlySet<string>,
  calls: readonly WrapCall[],
  at: (line: number) => string,
): { mode?: CompileMode; where: string; notes: string[] } {
  const notes: string[] = [];
  let model: TrainingFact | undefined;
  let loss: TrainingFact | undefined;
  let graphs = false;
  for (const t of facts.training) {
    if (t.kind !== 'compile' || !t.target) continue;
    const head = t.target.split(/[.[(]/)[0]!;
    const what =
      modelNames.has(head) || calls.some((c) => c.target === t.target)
        ? 'model'
        : /loss|cross_?entropy/i.test(t.target)
          ? 'loss'
          : undefined;
    if (!what) {
      if (t.qualified === 'torch.compile')
        notes.push(
          `${at(t.line)}: torch.compile(${oneLine(t.target, 40)}) compiles something not known to be the model or the loss: not counted (--compile sets it)`,
        );
      continue;
    }
    if (t.runsWhen) {
      notes.push(
        `${at(t.line)}: torch.compile of the ${what} ${t.runsWhen.off ? `is off (${t.runsWhen.off})` : `runs where ${t.runsWhen.undecided!.join(' and ')}, which is not known statically`}; estimated eager (--compile ${what} for the other path)`,
      );
      continue;
    }
    if (what === 'model') model ??= t;
    else loss ??= t;
    const mode = t.options.mode?.value;
    if (mode === 'reduce-overhead' || mode === 'max-autotune') graphs = true;
  }
  if (!model && !loss) return { where: '', notes };
  const inModel = !!model && facts.training.some((t) => t.kind === 'model_loss');
  const where = [model, loss]
    .filter((t): t is TrainingFact => !!t)
    .map((t) => `torch.compile at ${at(t.line)}`)
    .join(', ');
  const mode: CompileMode = graphs
    ? 'cudagraphs'
    : model && (loss || inModel)
      ? 'model+loss'
      : model
        ? 'model'
        : 'loss';
  return {
    mode,
    where: inModel && !loss ? `${where} (the model computes its loss from labels)` : where,
    notes,
  };
}

/**
 * The tensor parallelism of the file's `parallelize_module` calls that run: their mesh dimension and degree (the
 * size of that dimension, when known), whether the head keeps its logits sharded (loss parallel: its
 * `output_layouts` is not `Replicate()`, as torchtitan's `apply_tp` writes it), and why their plans are not the
 * split the estimate models, if they are not.
 */
function codeTensorParallel(
  facts: FileFacts,
  root: ModuleNode | undefined,
  at: (line: number) => string,
):
  | {
      where: string;
      plan?: TensorParallelPlan;
      dim?: string;
      degree?: number;
      lossParallel: boolean;
      lossWhere: string;
      problem?: string;
    }
  | undefined {
  const calls = facts.training.filter(
    (t) => t.kind === 'tensor_parallel' && /^torch\.distributed\.tensor\.parallel\b/.test(t.qualified),
  );
  const running = calls.filter((t) => !t.runsWhen);
  if (!running.length) return undefined;
  const where = `parallelize_module at ${running.map((t) => at(t.line)).join(', ')}`;
  const fail = (problem: string) => ({ where, lossParallel: true, lossWhere: where, problem });
  if (running.length < calls.length) return fail('some of its calls run only under conditions not decided');
  const entries = running.flatMap((t) => t.tensorParallel?.plan ?? []);
  const unread = running.find((t) => !t.tensorParallel?.plan);
  if (unread)
    return fail(`the plan at ${at(unread.line)} is not read: ${unread.tensorParallel?.planWhy ?? 'unknown'}`);
  if (!root) return fail('the model is not known, so the plan cannot be checked against it');
  // torchtitan's split (sequence parallelism), else one that leaves the norms and the embedding whole as
  // Transformers' tp_plan does.
  const titan = planMismatch(root, entries);
  const plan: TensorParallelPlan =
    titan && !entries.some((e) => e.style === 'sequence') && !planMismatch(root, entries, 'transformers')
      ? 'transformers'
      : 'torchtitan';
  if (plan === 'torchtitan' && titan) return fail(titan);
  const meshes = running.map((t) => t.tensorParallel?.mesh);
  const dims = new Set(meshes.map((m) => (m?.dimNames?.length === 1 ? m.dimNames[0] : undefined)));
  const sizes = new Set(meshes.map((m) => (m?.shape?.length === 1 ? m.shape[0] : null)));
  const dim = dims.size === 1 ? [...dims][0] : undefined;
  const size = sizes.size === 1 ? [...sizes][0] : null;
  const head = entries.find((e) => /(^|\.)(output|lm_head)$/.test(e.key));
  const headAt = running.find((t) => t.tensorParallel?.plan?.includes(head!));
  return {
    where,
    plan,
    ...(dim ? { dim } : {}),
    ...(size && size > 0 ? { degree: size } : {}),
    lossParallel: head?.outputs !== 'replicate',
    lossWhere: `the head's ${head?.callee ?? 'style'}${head?.outputs === 'replicate' ? '(output_layouts=Replicate())' : ''} at ${headAt ? at(headAt.line) : where}`,
  };
}

/**
 * What the code reads as a batch size or sequence length (`args.data.batch_size`), when the estimate took the
 * default: named as a hint, never taken (it may count per process, per node or in all; only the input fed to the
 * model decides).
 */
function inputHint(
  facts: FileFacts,
  assumptions: readonly { key: string; source: Source }[],
): string | undefined {
  const byDefault = (key: string) => assumptions.find((a) => a.key === key)?.source.kind === 'default';
  const hint = (kind: 'batch' | 'seq') => {
    const reads = (facts.inputReads ?? []).filter((r) => r.kind === kind);
    const values = [...new Set(reads.map((r) => r.value))];
    return reads.length && values.length === 1 ? reads[0] : undefined;
  };
  const batchRead = byDefault('microBatch') ? hint('batch') : undefined;
  const seqRead = byDefault('seqLen') ? hint('seq') : undefined;
  const reads = [batchRead, seqRead].filter((r) => r !== undefined);
  if (!reads.length) return undefined;
  const flags = [batchRead ? `--batch ${batchRead.value}` : '', seqRead ? `--seq ${seqRead.value}` : ''];
  return (
    `the code reads ${reads.map((r) => `${r.text} (${r.value}, line ${r.line})`).join(' and ')}, but the input the model is fed is not seen: ` +
    `the default stands (${flags.filter(Boolean).join(' ')} estimates with ${reads.length > 1 ? 'them' : 'it'})`
  );
}

/**
 * Parallelism `from_pretrained` applies as it loads (Transformers' `PreTrainedModel.from_pretrained`): `tp_plan`
 * splits the model over a tensor-parallel mesh of the whole run (`initialize_tensor_parallelism`), and
 * `distributed_config=DistributedConfig(enable_expert_parallel=True)` places a MoE model's experts over it instead,
 * combining their outputs by all-reduce. Neither is modelled for a script's own loading: named, no verdict drawn.
 */
function loadingParallelism(facts: FileFacts, file: string): string[] {
  const out: string[] = [];
  for (const m of facts.models) {
    const plan = m.args.tp_plan;
    if (plan && plan.value !== null)
      out.push(`tensor parallelism (tp_plan=${oneLine(plan.text, 40)} at ${file}:${m.line})`);
    const dc = m.args.distributed_config?.value;
    const kwargs = isRecord(dc) && isRecord(dc.kwargs) ? dc.kwargs : undefined;
    if (kwargs?.enable_expert_parallel === true)
      out.push(`expert parallelism (DistributedConfig(enable_expert_parallel=True) at ${file}:${m.line})`);
  }
  return out;
}

function asDType(d: string | null | undefined): DType | null {
  return d && isDType(d) ? d : null;
}

/**
 * LoRA, a 4-bit base and frozen modules as the script sets them up, only where they are known to run: a setup
 * under a condition the analysis cannot decide (`if cfg.use_lora:`), or with a rank or targets it cannot read, is
 * left out and said so in `notes`, never filled in with a guess; an undecided condition also goes to `undecided`,
 * which leaves the fit undecided.
 */
function detectFineTune(
  facts: FileFacts,
  file: string,
  notes: string[],
  undecided: string[],
): { ft: FineTune; source: Source } | undefined {
  const ft: FineTune = {};
  const lines: number[] = [];
  const at = (t: { line: number }) => `${file}:${t.line}`;
  /** Whether a fact runs for sure; otherwise the note says why it is left out. */
  const runs = (t: TrainingFact, what: string, gate = t.runsWhen): boolean => {
    if (gate?.off)
      notes.push(
        `${what} at ${at(t)} is left out: ${gate.off}${gate.runsWith ? `; ${takesPathWords(gate.runsWith)}` : ''}`,
      );
    else if (gate?.undecided) {
      notes.push(
        `${what} at ${at(t)} runs only when ${gate.undecided.join(' and ')}, which the analysis cannot decide; estimated without it`,
      );
      // What is trained and how the base is stored change the state several-fold: no verdict rests on one arm.
      undecided.push(`whether ${what} at ${at(t)} runs (${oneLine(gate.undecided.join(' and '), 80)})`);
    }
    return !gate;
  };
  const lora = facts.training.find((t) => t.kind === 'lora');
  const peft = facts.training.find((t) => t.kind === 'peft');
  if (lora && runs(lora, 'LoRA', lora.runsWhen ?? peft?.runsWhen)) {
    const r = lora.options.r;
    const targets = lora.options.target_modules;
    // peft's LoraConfig defaults: r=8, and target_modules None, which selects q_proj and v_proj for the Llama
    // family (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING). A value passed but not known is no default.
    const rank = r ? r.value : 8;
    const names = !targets
      ? ['q_proj', 'v_proj']
      : Array.isArray(targets.value) && targets.value.every((x) => typeof x === 'string')
        ? (targets.value as string[])
        : typeof targets.value === 'string'
          ? [targets.value]
          : null;
    if (typeof rank !== 'number' || !Number.isInteger(rank) || rank <= 0) {
      notes.push(
        `LoRA at ${at(lora)} is left out: its rank \`${r?.text ?? '?'}\` is not known statically (--lora-rank R estimates with it)`,
      );
      undecided.push(`the rank of LoRA at ${at(lora)} (${oneLine(r?.text ?? '?', 60)})`);
    } else if (!names) {
      notes.push(
        `LoRA at ${at(lora)} is left out: its target modules \`${targets?.text ?? '?'}\` are not known statically (--lora-rank R --lora-targets M estimates with them)`,
      );
      undecided.push(`the modules LoRA at ${at(lora)} adapts (${oneLine(targets?.text ?? '?', 60)})`);
    } else {
      ft.lora = { rank, targets: names };
      lines.push(lora.line);
    }
  }
  // An adapter whose config is built elsewhere (`get_peft_model(model, generate_peft_config(cfg))`): not known.
  if (peft && !lora && !peft.runsWhen?.off)
    notes.push(
      `the adapter of ${oneLine(peft.text, 60)} at ${at(peft)} is left out: its config is not read statically${peft.runsWhen?.undecided ? ` (and it runs only when ${peft.runsWhen.undecided.join(' and ')})` : ''}; every parameter is estimated as trainable (--lora-rank R --lora-targets M estimates with LoRA)`,
    );
  const quant = facts.training.find(
    (t) => t.kind === 'quantization' && t.options.load_in_4bit?.value === true,
  );
  if (quant && runs(quant, '4-bit quantisation')) {
    ft.baseDtype = 'nf4';
    ft.quantizer = 'bitsandbytes';
    // `BitsAndBytesConfig(bnb_4bit_use_double_quant=...)`, False by default.
    if (quant.options.bnb_4bit_use_double_quant?.value === true) ft.doubleQuant = true;
    lines.push(quant.line);
  }
  const frozen = facts.training.filter(
    (t) => t.kind === 'freeze' && t.target && runs(t, `freezing ${t.target}`),
  );
  if (frozen.length) {
    // Paths relative to the model variable: `model.model.embed_tokens` -> `model.embed_tokens`.
    ft.frozen = frozen.map((t) => t.target!.split('.').slice(1).join('.')).filter(Boolean);
    lines.push(frozen[0]!.line);
  }
  if (!ft.lora && !ft.baseDtype && !ft.frozen?.length) return undefined;
  return { ft, source: { kind: 'detected', detail: lines.map((l) => `${file}:${l}`).join(', ') } };
}

export function describeFineTune(ft: FineTune): string {
  const parts: string[] = [];
  if (ft.lora) parts.push(`LoRA rank ${ft.lora.rank} on ${ft.lora.targets.join(', ')}`);
  if (ft.baseDtype) parts.push('NF4 base weights (QLoRA)');
  if (ft.frozen?.length) parts.push(`frozen: ${ft.frozen.join(', ')}`);
  return parts.join('; ');
}

/**
 * A colocated job's phases with the other models' state counted on the actor's model: a critic of the same model
 * is its backbone with a one-output value head (`AutoModelForTokenClassification`, `num_labels = 1`), its
 * parameters in fp32 with AdamW's two fp32 moments, sharded over the world size unless offloaded, its gradients
 * freed by the `zero_grad()` that ends verl's `update_critic`. Another model's state is not known here: said so.
 */
function colocationOf(
  spec: ColocationSpec,
  root: ModuleNode,
  shape: ArchShape | undefined,
  setup: TrainingSetup,
): Colocation {
  const { critic, ...rest } = spec;
  const resident: Term[] = [];
  const uncounted = [...rest.uncounted];
  if (critic && critic.sameAsActor && shape) {
    const head = shape.tiedEmbeddings ? 0 : shape.vocab * shape.hidden;
    const params = countParams(root) - head + shape.hidden + 1;
    const W = setup.worldSize;
    const onGpu = (critic.offloadParams ? 0 : 4) + (critic.offloadOptimizer ? 0 : 8);
    resident.push({
      name: "critic's state",
      bytes: Math.ceil((params * onGpu) / W),
      formula: `${fmtParams(params)} parameters x ${onGpu} B / ${W} (fp32 parameters${critic.offloadParams ? ' on the host' : ''} and AdamW's moments${critic.offloadOptimizer ? ' on the host' : ''}; ${critic.where})`,
    });
  } else if (critic)
    uncounted.push(
      `the critic's state (${critic.model}, ${critic.where}): ${critic.sameAsActor ? 'the model is not known' : 'a model other than the actor’s, not read'}`,
    );
  return { ...rest, resident, uncounted };
}
