/**
 * The model an estimate is for, as a caller names it (a flag, a setting, an annotation, pyproject.toml, a
 * framework's configuration), and the model-side inputs: the model id or config path, LoRA adapters and a 4-bit
 * base, with every name each has.
 */
import type { FineTune } from '../model/finetune';
import type { LoadedModel } from '../model/load';
import type { Source } from '../vocabulary/source';
import { positiveInt } from './parse';

/** Where the model comes from when the caller names it (a flag or a setting). */
export interface ModelChoice {
  /** A Hugging Face id (`meta-llama/Llama-3.1-8B`). */
  id?: string;
  /** A config.json path. */
  config?: string;
  /** A class of the project (`models/llama/model.py:Transformer`), with a named config (`8B`). */
  classRef?: { file: string; name: string };
  configKey?: string;
  /** The model the script's own code builds (static analysis). */
  code?: boolean;
  /** A model already built (a framework's own definition: a torchtune component, a torchtitan flavor). */
  loaded?: LoadedModel;
  source: Source;
}

/** A Hugging Face id as the hub spells it: `NAME` or `ORG/NAME` (a config path has a `.json`, a `./` or more slashes). */
export function isModelId(s: string): boolean {
  return /^[\w-][\w.-]*(\/[\w-][\w.-]*)?$/.test(s) && !s.endsWith('.json');
}

/** The model a setting names (`fsdpLens.model`): a Hugging Face id or a config.json path, as its text says. */
export function settingModel(value: string, source: Source): ModelChoice {
  return { ...(isModelId(value) ? { id: value } : { config: value }), source };
}

/** Names and help of the model-side inputs, as the command line, annotations and settings spell them. */
export const MODEL_INPUTS = {
  model: {
    summary:
      'A Hugging Face model (local cache, else the built-in catalog: fsdp-lens models), or path/to/model.py:Class',
    flag: { name: 'model', value: 'ORG/NAME' },
    keys: ['model'],
    setting: 'model',
  },
  config: {
    summary: 'A config.json path (or, beside model=path:Class, the name of a config in a dict of configs)',
    flag: { name: 'config', value: 'PATH' },
    keys: ['config'],
  },
  loraRank: {
    summary: 'LoRA adapters of this rank (the base frozen)',
    flag: { name: 'lora-rank', value: 'R' },
  },
  loraTargets: {
    summary: 'Modules LoRA adapts (default q_proj,v_proj; all-linear for every linear layer)',
    flag: { name: 'lora-targets', value: 'q_proj,v_proj' },
  },
  baseDtype: {
    summary: '4-bit NF4 base weights (QLoRA)',
    flag: { name: 'base-dtype', value: 'nf4' },
  },
} as const;

/** `path/to/model.py:Class` names project code; anything else a Hugging Face id. */
export function modelChoiceOf(raw: string, source: Source, resolvePath: (p: string) => string): ModelChoice {
  const m = /^(.+\.py):([A-Za-z_]\w*)$/.exec(raw);
  return m ? { classRef: { file: resolvePath(m[1]!), name: m[2]! }, source } : { id: raw, source };
}

/** The fine-tuning the LoRA and base-dtype flags describe; throws a message for values they do not take. */
export function fineTuneFromFlags(flags: {
  loraRank?: string;
  loraTargets?: string;
  baseDtype?: string;
}): FineTune | undefined {
  if (flags.loraRank === undefined && flags.loraTargets === undefined && flags.baseDtype === undefined)
    return undefined;
  const ft: FineTune = {};
  if (flags.loraRank !== undefined || flags.loraTargets !== undefined) {
    const rank = positiveInt('--lora-rank', flags.loraRank ?? 8);
    const targets = (flags.loraTargets ?? 'q_proj,v_proj')
      .split(',')
      .map((t) => t.trim())
      .filter(Boolean);
    ft.lora = { rank, targets };
  }
  if (flags.baseDtype !== undefined) {
    if (flags.baseDtype !== 'nf4') throw new Error(`--base-dtype takes nf4, not "${flags.baseDtype}"`);
    ft.baseDtype = 'nf4';
  }
  return ft;
}
