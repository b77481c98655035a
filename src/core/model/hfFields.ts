/** Reading config.json fields as the model builders need them: counts with plausible bounds, flags, sub-configs. */
import type { HfConfig } from './catalog';
import { ModelError } from './tree';

/** A config.json that cannot be read as a model: the message says which field and why. */
export class ConfigError extends ModelError {}

/**
 * The largest value a count may take, far past every published model (the largest have 126 layers, 384 experts,
 * a vocabulary of 262,208 and a hidden size of 18,432) and small enough that the tree is built at once. A larger
 * value is a mistake or a trap, refused with the field's name.
 */
const PLAUSIBLE_MAX: Record<string, number> = {
  num_hidden_layers: 2048,
  n_layer: 2048,
  num_layers: 2048,
  num_decoder_layers: 2048,
  num_local_experts: 4096,
  num_experts: 4096,
  decoder_sparse_step: 2048,
  interleave_moe_layer_step: 2048,
  no_rope_layer_interval: 2048,
  n_routed_experts: 4096,
  n_shared_experts: 64,
  num_experts_per_tok: 256,
  num_attention_heads: 4096,
  num_key_value_heads: 4096,
  num_heads: 4096,
  n_head: 4096,
  head_dim: 8192,
  d_kv: 8192,
  qk_nope_head_dim: 8192,
  qk_rope_head_dim: 8192,
  v_head_dim: 8192,
  kv_lora_rank: 65_536,
  q_lora_rank: 65_536,
  first_k_dense_replace: 2048,
  moe_layer_freq: 2048,
  relative_attention_num_buckets: 65_536,
  hidden_size: 262_144,
  d_model: 262_144,
  n_embd: 262_144,
  intermediate_size: 2_097_152,
  intermediate_size_mlp: 2_097_152,
  moe_intermediate_size: 2_097_152,
  d_ff: 2_097_152,
  n_inner: 2_097_152,
  vocab_size: 16_777_216,
  n_positions: 16_777_216,
  // Vision towers: pixels per side, pixels per patch side, colour channels, projector widths.
  image_size: 65_536,
  patch_size: 4096,
  num_channels: 64,
  projector_input_dim: 262_144,
  projector_output_dim: 262_144,
  vision_output_dim: 262_144,
};

/** Reads a positive integer field; `dflt` applies when absent (or null). */
export function int(config: HfConfig, key: string, dflt?: number): number {
  const v = config[key];
  if (v === undefined || v === null) {
    if (dflt === undefined) throw new ConfigError(`config.json has no "${key}"`);
    return dflt;
  }
  if (typeof v !== 'number' || !Number.isFinite(v))
    throw new ConfigError(`config.json "${key}" must be a number, not ${JSON.stringify(v)}`);
  if (!Number.isInteger(v) || v < 1)
    throw new ConfigError(`config.json "${key}" must be a positive integer, not ${v}`);
  const max = PLAUSIBLE_MAX[key] ?? 2 ** 24;
  if (v > max)
    throw new ConfigError(
      `config.json "${key}" is ${v}, implausibly large: more than any real model has (at most ${max.toLocaleString('en-US')} is read)`,
    );
  return v;
}

/** A positive integer field, or null when the config omits it or sets it to null. */
export function optInt(config: HfConfig, key: string): number | null {
  const v = config[key];
  return v === undefined || v === null ? null : int(config, key);
}

/** A positive number field, `dflt` when absent; null when the config sets it to null (the feature is off). */
export function optPositive(config: HfConfig, key: string, dflt: number | null): number | null {
  const v = config[key];
  if (v === undefined) return dflt;
  if (v === null) return null;
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0)
    throw new ConfigError(`config.json "${key}" must be a positive number or null, not ${JSON.stringify(v)}`);
  return v;
}

/** A fraction in (0, 1] (`rotary_pct`), `dflt` when absent or null. */
export function fraction(config: HfConfig, key: string, dflt: number): number {
  const v = config[key];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0 || v > 1)
    throw new ConfigError(`config.json "${key}" must be a number in (0, 1], not ${JSON.stringify(v)}`);
  return v;
}

export function bool(config: HfConfig, key: string, dflt: boolean): boolean {
  const v = config[key];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'boolean')
    throw new ConfigError(`config.json "${key}" must be true or false, not ${JSON.stringify(v)}`);
  return v;
}

/** A string field (`feed_forward_proj`), `dflt` when absent or null. */
export function str(config: HfConfig, key: string, dflt: string): string {
  const v = config[key];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'string')
    throw new ConfigError(`config.json "${key}" must be a string, not ${JSON.stringify(v)}`);
  return v;
}

/**
 * A nested config (`text_config`, `vision_config`) as its own config: an empty one when absent, as the wrapping
 * config class then builds the sub-config from its defaults.
 */
export function subConfig(config: HfConfig, key: string): HfConfig {
  const v = config[key];
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v))
    throw new ConfigError(`config.json "${key}" must be an object`);
  return v as HfConfig;
}

/**
 * Layer indices listed by an integer array field (`mlp_only_layers`, `moe_layers`), or null when the field is
 * absent, null or not an array.
 */
export function indexList(config: HfConfig, key: string): number[] | null {
  const v = config[key];
  if (!Array.isArray(v)) return null;
  return v.filter((x): x is number => Number.isInteger(x));
}

/** The expert fields of a dense model's shape (`ArchShape`): no experts, every layer's MLP its own. */
export const DENSE = { expertsPerToken: 0, experts: 0, moeIntermediate: 0, sharedExperts: 0 } as const;
