/**
 * Models by name or path: a Hugging Face id from the local hub cache (what `from_pretrained` would read) or the
 * built-in catalog, and a config.json at a path, read through the host's file system.
 */
import * as path from 'node:path';
import type { FileSystem, Host } from '../vocabulary/host';
import { catalogConfig, type HfConfig } from './catalog';
import { ConfigError, modelFromHfConfig, type HfModel } from './hf';
import { dtypeFromText, type DType } from '../vocabulary/dtypes';

/** A model and where it came from, in words a person recognises. */
export interface LoadedModel {
  root: HfModel['root'];
  /** The architecture's dimensions, when known (for activations and compute). */
  shape?: HfModel['shape'];
  name: string;
  /** `built-in catalog`, `config.json at PATH`, `Hugging Face cache (PATH)`. */
  origin: string;
  id?: string;
  /** Parts of the model not known (a code model read statically), so not counted: the figures are lower bounds. */
  gaps?: string[];
  /** Parallelism applied to the model in its code that the figures do not model (`parallelize_module`). */
  unmodelled?: string[];
  /** The dtype its checkpoint was saved in (config.json's `torch_dtype`, or `dtype` from Transformers 5 on). */
  checkpointDtype?: DType;
}

/** config.json's `torch_dtype` (or Transformers 5's `dtype`) as a floating dtype, when it names one. */
function checkpointDtypeOf(config: HfConfig): { checkpointDtype?: DType } {
  const v = config.torch_dtype ?? config.dtype;
  const d = typeof v === 'string' ? dtypeFromText(v) : undefined;
  return d && (d === 'float32' || d === 'bfloat16' || d === 'float16') ? { checkpointDtype: d } : {};
}

/** The Hugging Face home folder (`huggingface_hub.constants.HF_HOME`): $HF_HOME, else ~/.cache/huggingface. */
export function hfHome(host: Pick<Host, 'env' | 'home'>): string {
  return host.env.HF_HOME || path.join(host.home, '.cache', 'huggingface');
}

/** The local Hugging Face hub cache: $HF_HUB_CACHE, else the home folder's `hub`. */
export function hfHubCache(host: Pick<Host, 'env' | 'home'>): string {
  return host.env.HF_HUB_CACHE || path.join(hfHome(host), 'hub');
}

/** The config.json of `ORG/NAME` in the hub cache (the snapshot `refs/main` names), if downloaded. */
export function cachedConfigPath(id: string, cache: string, fs: FileSystem): string | undefined {
  if (!/^[\w.-]+\/[\w.-]+$/.test(id)) return undefined;
  const repo = path.join(cache, `models--${id.replace('/', '--')}`);
  const ref = fs.readFile(path.join(repo, 'refs', 'main'))?.trim();
  if (!ref || !/^[\w.-]+$/.test(ref)) return undefined;
  const file = path.join(repo, 'snapshots', ref, 'config.json');
  return fs.version(file) !== undefined ? file : undefined;
}

/** Reads and parses a config.json (or the config.json of a folder); a ConfigError says what is wrong with it. */
export function readConfigFile(file: string, fs: FileSystem): HfConfig {
  if (fs.isDirectory(file)) file = path.join(file, 'config.json');
  const text = fs.readFile(file);
  if (text === undefined) throw new ConfigError(`cannot read ${file}: ${fs.refusal(file) ?? 'no such file'}`);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    // V8's message quotes the text around the error: only where it is, never what the file holds.
    throw new ConfigError(`${file} is not valid JSON${jsonErrorPlace(text, e)}`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw new ConfigError(`${file} is not a JSON object`);
  // Multimodal wrappers keep the language model's config under text_config.
  const cfg = json as HfConfig;
  if (!cfg.model_type && typeof cfg.text_config === 'object' && cfg.text_config)
    return cfg.text_config as HfConfig;
  return cfg;
}

/** Where a JSON syntax error is, as ` (line L, column C)`, from the offset V8 reports; empty when it says none. */
function jsonErrorPlace(text: string, e: unknown): string {
  const at = /position (\d+)/.exec(e instanceof Error ? e.message : '');
  if (!at) return '';
  const offset = Math.min(Number(at[1]), text.length);
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  return ` (line ${line}, column ${offset - before.lastIndexOf('\n')})`;
}

/** The model a config.json describes, with the dtype of its checkpoint. */
function fromConfig(config: HfConfig): HfModel & { checkpointDtype?: DType } {
  return { ...modelFromHfConfig(config), ...checkpointDtypeOf(config) };
}

/** Loads a model from a config.json path. */
export function loadConfigPath(file: string, fs: FileSystem): LoadedModel {
  return memo(`${file}\u0000${fs.version(file) ?? ''}`, () => ({
    ...fromConfig(readConfigFile(file, fs)),
    name: path.basename(path.dirname(path.resolve(file))) || file,
    origin: `config.json at ${file}`,
  }))!;
}

/**
 * Loads `ORG/NAME`: the local Hugging Face cache first (what `from_pretrained` would read), then the built-in
 * catalog. Undefined when neither knows it.
 */
export function loadHubModel(id: string, cache: string, fs: FileSystem): LoadedModel | undefined {
  const cached = cachedConfigPath(id, cache, fs);
  return memo(`${id}\u0000${cached ?? 'catalog'}\u0000${cached ? (fs.version(cached) ?? '') : ''}`, () => {
    if (cached)
      return {
        ...fromConfig(readConfigFile(cached, fs)),
        name: id,
        id,
        origin: `Hugging Face cache (${cached})`,
      };
    const entry = catalogConfig(id);
    if (entry)
      return {
        ...fromConfig(entry.config),
        name: entry.id,
        id: entry.id,
        origin: entry.architectureOf
          ? `built-in catalog: the architecture of ${entry.architectureOf}, which its config.json shares`
          : 'built-in catalog',
      };
    return undefined;
  });
}

/** Loaded models are reused while their config file is unchanged (editing a script re-estimates often). */
const MEMO = new Map<string, LoadedModel | undefined>();
const MEMO_SIZE = 8;

function memo(key: string, load: () => LoadedModel | undefined): LoadedModel | undefined {
  if (MEMO.has(key)) {
    const v = MEMO.get(key);
    MEMO.delete(key);
    MEMO.set(key, v);
    return v;
  }
  const v = load();
  MEMO.set(key, v);
  if (MEMO.size > MEMO_SIZE) MEMO.delete(MEMO.keys().next().value!);
  return v;
}
