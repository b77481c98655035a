/**
 * What a framework's FSDP configuration is, ready to plan: which modules become units, the strategy, the inputs it
 * sets, its traps.
 */
import type { FsdpApi, ShardingStrategyName } from '../vocabulary/fsdp';
import type { Range } from '../vocabulary/range';
import type { Source } from '../vocabulary/source';
import type { FineTune } from '../model/finetune';
import type { LoadedModel } from '../model/load';
import type { ModelChoice } from '../inputs/model';
import type { SetupValues } from '../inputs/table';
import type { Colocation } from '../estimator/colocated';

/**
 * A colocated job as its configuration says it: the phases' settings, and a critic model whose state is counted
 * once the actor's model is known (a critic of the same model: its backbone and a one-output value head).
 */
export interface ColocationSpec extends Omit<Colocation, 'resident'> {
  critic?: {
    model: string;
    where: string;
    sameAsActor: boolean;
    offloadParams: boolean;
    offloadOptimizer: boolean;
  };
}

export type FrameworkName =
  | 'Accelerate'
  | 'Transformers'
  | 'TRL'
  | 'Lightning'
  | 'Lightning Fabric'
  | 'torchtune'
  | 'torchtitan'
  | 'DeepSpeed'
  | 'axolotl'
  | 'llm-foundry'
  | 'verl';

/**
 * Which modules a framework makes FSDP units of, in the order it wraps them (the root last, always).
 *  - `policy`: FSDP1's recursive auto-wrap (or Accelerate's FSDP2 reading of the same policy) by classes or size;
 *  - `blocks`: one unit per decoder block (the model's block class), plus `extra` unit groups (module names, each
 *    group one unit: torchtitan's `[norm, output]`, torchtune's custom sharded layers);
 *  - `root`: the whole model as one unit.
 */
export type WrapSpec =
  | {
      kind: 'policy';
      /** Classes to wrap; null: the model's decoder block (its `_no_split_modules`). */
      classes: string[] | null;
      minParams?: number;
      /** Accelerate's FSDP2 extras: the input embedding, and the final norm with the head (kept gathered). */
      hfExtras?: boolean;
      /** Each leaf module with a trainable weight a unit of its own too (PEFT's policy under Trainer). */
      trainableLeaves?: boolean;
      /** The input embedding a unit of its own unless tied to the head (verl's `apply_fsdp2`). */
      embedUnit?: boolean;
      /** FSDP2 reshard_after_forward of the root, when the framework passes it (verl passes its setting). */
      rootReshard?: boolean;
    }
  | {
      kind: 'blocks';
      before: string[][];
      after: string[][];
      /** reshard_after_forward of the `after` groups (torchtitan keeps `[norm, output]` gathered by default). */
      afterReshard?: boolean | null;
      /** reshard_after_forward of the last block (older torchtitan keeps it gathered). */
      lastBlockReshard?: boolean | null;
    }
  | { kind: 'root' }
  /** No FSDP at all: the model whole on one GPU (a single-device recipe). */
  | { kind: 'none' };

/** A framework's FSDP configuration, read from its config file or constructor call, ready to plan. */
export interface FrameworkPlan {
  framework: FrameworkName;
  /** The file and the range the lens and findings go on (the start of a config file, a constructor call). */
  file: string;
  range: Range;
  api: FsdpApi;
  strategy: ShardingStrategyName;
  wrap: WrapSpec;
  /** FSDP2 reshard_after_forward of the non-root units (null: the default). */
  reshardAfterForward: boolean | null;
  offload: boolean;
  /** Training inputs the configuration sets, with where (`accelerate.yaml:7`). */
  values: SetupValues;
  details: Partial<Record<keyof SetupValues, string>>;
  /**
   * The key of this configuration file each numeric input is read from (`['training', 'seq_len']`), written or
   * not, where the value is a number there: what an edit that changes the input writes.
   */
  keys?: Partial<Record<keyof SetupValues, string[]>>;
  /** The model the configuration names (`model_name_or_path`, a Hugging Face id). */
  model?: ModelChoice;
  /** Why the model the configuration names is not read (a path from the environment), when it is not. */
  modelUnknown?: string;
  /** The model the configuration defines itself (a torchtune component, a torchtitan flavor). */
  builtModel?: { loaded: LoadedModel; source: Source };
  /** Module naming of the framework's own model classes (torchtune, torchtitan), mapped from Hugging Face's. */
  naming?: 'torchtune' | 'torchtitan';
  fineTune?: FineTune;
  /** Where the fine-tuning is written, when not at the plan's own range (an argument file the launch passes). */
  fineTuneWhere?: string;
  /**
   * Host memory the configuration decides at load and save time: `rank0Loading` (where it is said) when only local
   * rank 0 materialises `from_pretrained`'s weights (Accelerate's cpu_ram_efficient_loading); `stateDict` the
   * checkpoint format (a full state dict gathered on rank 0, or each rank's shard).
   */
  host?: { rank0Loading?: string; stateDict?: { kind: 'full' | 'sharded'; where: string } };
  /** What was read and assumed, in words, for the assumptions list. */
  notes: string[];
  /** Parallelism the configuration sets that the figures do not model (see EstimateInput.unmodelled). */
  unmodelled?: string[];
  /**
   * Accelerate's context parallelism, which splits the sequence only inside `maybe_context_parallel`: the entry of
   * `unmodelled` it is, and the degree a script that trains through Transformers' Trainer applies.
   */
  trainerContextParallel?: { degree: number; unmodelled: string; where: string };
  /** What the configuration turns on that keeps less than the figures count (see EstimateInput.overcounted). */
  overcounted?: string[];
  /** Conditions of the job its configuration leaves undecided (see EstimateInput.undecided): no fit verdict holds. */
  undecided?: string[];
  /** Mistakes the configuration makes (lint findings of the config file). */
  traps: FrameworkTrap[];
  /** What shares the GPUs with the step between its phases (an RL trainer's rollout engine, reference and critic). */
  colocated?: ColocationSpec;
  /** Trained through Transformers' Trainer (axolotl), which puts a LoRA model under PEFT's wrap policy. */
  throughTrainer?: boolean;
  /**
   * The key of this configuration file that turns on activation checkpointing of every block (a fix for a plan
   * that does not fit writes it), when the framework has one.
   */
  checkpointingKey?: ConfigSetting;
  /**
   * Values the configuration suggests without setting them (the launch line in its comments), below every other
   * source but the defaults.
   */
  suggested?: { values: SetupValues; details: Partial<Record<keyof SetupValues, string>> };
}

/** A key of a configuration file and a value for it: what a fix writes to turn a setting on. */
export interface ConfigSetting {
  /** The key's path from the top (`['fsdp_config', 'fsdp_activation_checkpointing']`). */
  path: string[];
  value: boolean | string | number;
}

export interface FrameworkTrap {
  rule: string;
  range: Range;
  message: string;
  /** The trap in one line, for the Problems view (the finding's `summary`). */
  summary?: string;
}

/** A recognised configuration that cannot be planned (a parse error, FSDP turned off), said in words. */
export interface FrameworkProblem {
  framework: FrameworkName;
  file: string;
  range: Range;
  message: string;
}
