/**
 * Recognises the training configurations fsdp-lens understands and reads each as an FSDP plan; anything else is
 * `none`.
 */
import { fault } from '../vocabulary/faults';
import type { FrameworkName } from './types';
import { accelerateConfigPlan, isAccelerate } from './accelerate';
import { axolotlPlan, axolotlWithoutFsdp, isAxolotl, isAxolotlWithoutFsdp } from './axolotl';
import { argumentsFilePlan, isArgumentsFile } from './argumentsFile';
import type { VersionPin } from '../vocabulary/versions';
import { formatOf, readConfigText, type ConfigDoc } from './configDoc';
import { accelerateDeepSpeedPlan, deepspeedPlan, isAccelerateDeepSpeed, isDeepSpeed } from './deepspeed';
import { isLlmFoundry, llmFoundryPlan } from './llmFoundry';
import { applyTomlOverrides, isTorchtitan, torchtitanPlan } from './torchtitan';
import { isTorchtune, torchtunePlan } from './torchtune';
import { isTrainerArgsJson, trainerArgsJsonPlan } from './transformers';
import type { Range } from '../vocabulary/range';
import type { FrameworkPlan, FrameworkProblem } from './types';

export type ConfigReading =
  | { kind: 'plan'; plan: FrameworkPlan; doc?: ConfigDoc }
  | { kind: 'problem'; problem: FrameworkProblem }
  /** A launch script that runs a Python script of the project: the job is that script's (`script`, from here). */
  | { kind: 'launch'; script: string; range: Range }
  | { kind: 'none' };

/** Words that make a file worth reporting a syntax error for: it looks like a training configuration. */
const LOOKS_LIKE =
  /fsdp|distributed_type|zero_optimization|_component_:\s*torchtune|\[parallelism\]|\[model\]/;

/**
 * Recognises the training configurations fsdp-lens understands (Accelerate, a Transformers `fsdp_config` JSON,
 * axolotl, llm-foundry, torchtune, torchtitan, DeepSpeed) and reads each as an FSDP plan; anything else is `none`. Never throws.
 */
export function readFrameworkConfig(
  file: string,
  text: string,
  ctx: {
    versions?: { transformers?: VersionPin; accelerate?: VersionPin };
    /**
     * A launch command's overrides of a torchtitan TOML (`--training.seq_len 4096` after `--job.config_file`), and
     * where it is: the job that command runs.
     */
    launch?: { args: readonly string[]; where: string };
  } = {},
): ConfigReading {
  const versions = ctx.versions ?? {};
  if (!formatOf(file)) return { kind: 'none' };
  const doc = readConfigText(file, text);
  if ('error' in doc) {
    if (!LOOKS_LIKE.test(text.slice(0, 200_000))) return { kind: 'none' };
    return {
      kind: 'problem',
      problem: {
        framework: /zero_optimization/.test(text)
          ? 'DeepSpeed'
          : /torchtune/.test(text)
            ? 'torchtune'
            : /\[model\]/.test(text)
              ? 'torchtitan'
              : 'Accelerate',
        file,
        range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } },
        message: doc.error,
      },
    };
  }
  const readers: [
    FrameworkName,
    (d: ConfigDoc) => boolean,
    (d: ConfigDoc) => FrameworkPlan | FrameworkProblem | null,
  ][] = [
    ['axolotl', isAxolotl, (d) => axolotlPlan(d, versions)],
    ['axolotl', isAxolotlWithoutFsdp, axolotlWithoutFsdp],
    ['llm-foundry', isLlmFoundry, llmFoundryPlan],
    ['Accelerate', isAccelerate, (d) => accelerateConfigPlan(d, versions.accelerate)],
    ['torchtune', isTorchtune, torchtunePlan],
    ['torchtitan', isTorchtitan, torchtitanPlan],
    ['DeepSpeed', isDeepSpeed, deepspeedPlan],
    ['DeepSpeed', isAccelerateDeepSpeed, accelerateDeepSpeedPlan],
    ['Transformers', isTrainerArgsJson, (d) => trainerArgsJsonPlan(d, versions)],
    ['Transformers', isArgumentsFile, (d) => argumentsFilePlan(d, versions)],
  ];
  // A TOML a launch command names with overrides after it: read as ConfigManager.parse_args leaves it.
  let launched: string[] = [];
  if (ctx.launch && isTorchtitan(doc)) launched = applyTomlOverrides(doc.data, ctx.launch.args);
  for (const [framework, is, read] of readers) {
    if (!is(doc)) continue;
    try {
      const r = read(doc);
      if (!r) return { kind: 'none' };
      if (!('message' in r) && launched.length)
        r.notes.unshift(
          `read with the overrides of the launch command at ${ctx.launch!.where}: ${launched.join(' ')}`,
        );
      return 'message' in r ? { kind: 'problem', problem: r } : { kind: 'plan', plan: r, doc };
    } catch (e) {
      return {
        kind: 'problem',
        problem: { framework, file, range: doc.rangeOf([]), message: fault(`the ${framework} reader`, e) },
      };
    }
  }
  return { kind: 'none' };
}
