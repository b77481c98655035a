/**
 * The built-in model catalog: published Hugging Face configs by id, close-id suggestions, and the classes of each
 * supported architecture.
 */
import hfConfigs from './hf-configs.json';
import { editDistance } from '../vocabulary/suggest';

/** A published Hugging Face config.json (the fields the estimator reads; others are kept as they are). */
export type HfConfig = Record<string, unknown> & { model_type?: string };

/** The built-in catalog: published configs by Hugging Face id (`meta-llama/Llama-3.1-8B`). */
export const CATALOG: Readonly<Record<string, HfConfig>> = (hfConfigs as { models: Record<string, HfConfig> })
  .models;

/**
 * Releases whose published config has the same architecture fields as a catalog entry (an instruction-tuned
 * `-Instruct` of its base, a renamed repository), by id: the entry each reads.
 */
export const ALIASES: Readonly<Record<string, string>> =
  (hfConfigs as { aliases?: Record<string, string> }).aliases ?? {};

/**
 * The catalog entry for an id, matched case-insensitively (users type `meta-llama/llama-3.1-8b`); an alias gives
 * its own id with the entry it reads as `architectureOf`.
 */
export function catalogConfig(
  id: string,
): { id: string; config: HfConfig; architectureOf?: string } | undefined {
  const exact = CATALOG[id];
  if (exact) return { id, config: exact };
  const lower = id.toLowerCase();
  const key = Object.keys(CATALOG).find((k) => k.toLowerCase() === lower);
  if (key) return { id: key, config: CATALOG[key]! };
  const alias = Object.keys(ALIASES).find((k) => k.toLowerCase() === lower);
  const base = alias ? ALIASES[alias] : undefined;
  return alias && base && CATALOG[base]
    ? { id: alias, config: CATALOG[base], architectureOf: base }
    : undefined;
}

/**
 * Catalog ids close to one that is not there, closest first (at most `max`): ids whose name contains what was
 * typed or is contained in it (`llama-3.1-8b` -> `meta-llama/Llama-3.1-8B`), and ids within a few typos (a third
 * of the typed name's length, at least 2) of the whole id or of its name after the organisation.
 */
export function closeCatalogIds(id: string, max = 3): string[] {
  const typed = id.trim().toLowerCase();
  if (!typed) return [];
  const typedName = typed.includes('/') ? typed.slice(typed.lastIndexOf('/') + 1) : typed;
  const limit = Math.max(2, Math.floor(typedName.length / 3));
  const scored: { id: string; score: number }[] = [];
  for (const key of [...Object.keys(CATALOG), ...Object.keys(ALIASES)]) {
    const k = key.toLowerCase();
    const name = k.slice(k.lastIndexOf('/') + 1);
    const distance = Math.min(editDistance(typed, k), editDistance(typedName, name));
    // A name containing what was typed (or contained in it) scores the difference in length, as if the rest
    // were typed too, and is suggested however long that difference is.
    const contains = typedName.length >= 3 && (name.includes(typedName) || typedName.includes(name));
    const score = Math.min(distance, contains ? Math.abs(name.length - typedName.length) : Infinity);
    if (contains || distance <= limit) scored.push({ id: key, score });
  }
  return scored
    .sort((a, b) => a.score - b.score || a.id.localeCompare(b.id))
    .slice(0, max)
    .map((s) => s.id);
}

/**
 * The Transformers classes of each supported `model_type`: the block FSDP wraps (the decoder block; T5's
 * `T5Block`, which both of its stacks repeat), the module it lives in, and the class `from_pretrained` builds
 * (`causalLm`: the `*ForCausalLM` class, or the `*ForConditionalGeneration` class of a multimodal or
 * encoder-decoder model).
 */
export const ARCHITECTURES: Readonly<Record<string, { block: string; module: string; causalLm: string }>> = {
  llama: {
    block: 'LlamaDecoderLayer',
    module: 'transformers.models.llama.modeling_llama',
    causalLm: 'LlamaForCausalLM',
  },
  mistral: {
    block: 'MistralDecoderLayer',
    module: 'transformers.models.mistral.modeling_mistral',
    causalLm: 'MistralForCausalLM',
  },
  mixtral: {
    block: 'MixtralDecoderLayer',
    module: 'transformers.models.mixtral.modeling_mixtral',
    causalLm: 'MixtralForCausalLM',
  },
  qwen2: {
    block: 'Qwen2DecoderLayer',
    module: 'transformers.models.qwen2.modeling_qwen2',
    causalLm: 'Qwen2ForCausalLM',
  },
  qwen3: {
    block: 'Qwen3DecoderLayer',
    module: 'transformers.models.qwen3.modeling_qwen3',
    causalLm: 'Qwen3ForCausalLM',
  },
  qwen3_moe: {
    block: 'Qwen3MoeDecoderLayer',
    module: 'transformers.models.qwen3_moe.modeling_qwen3_moe',
    causalLm: 'Qwen3MoeForCausalLM',
  },
  gemma2: {
    block: 'Gemma2DecoderLayer',
    module: 'transformers.models.gemma2.modeling_gemma2',
    causalLm: 'Gemma2ForCausalLM',
  },
  phi3: {
    block: 'Phi3DecoderLayer',
    module: 'transformers.models.phi3.modeling_phi3',
    causalLm: 'Phi3ForCausalLM',
  },
  gpt2: { block: 'GPT2Block', module: 'transformers.models.gpt2.modeling_gpt2', causalLm: 'GPT2LMHeadModel' },
  deepseek_v3: {
    block: 'DeepseekV3DecoderLayer',
    module: 'transformers.models.deepseek_v3.modeling_deepseek_v3',
    causalLm: 'DeepseekV3ForCausalLM',
  },
  deepseek_v2: {
    block: 'DeepseekV2DecoderLayer',
    module: 'transformers.models.deepseek_v2.modeling_deepseek_v2',
    causalLm: 'DeepseekV2ForCausalLM',
  },
  olmo2: {
    block: 'Olmo2DecoderLayer',
    module: 'transformers.models.olmo2.modeling_olmo2',
    causalLm: 'Olmo2ForCausalLM',
  },
  gpt_neox: {
    block: 'GPTNeoXLayer',
    module: 'transformers.models.gpt_neox.modeling_gpt_neox',
    causalLm: 'GPTNeoXForCausalLM',
  },
  gemma3_text: {
    block: 'Gemma3DecoderLayer',
    module: 'transformers.models.gemma3.modeling_gemma3',
    causalLm: 'Gemma3ForCausalLM',
  },
  gemma3: {
    block: 'Gemma3DecoderLayer',
    module: 'transformers.models.gemma3.modeling_gemma3',
    causalLm: 'Gemma3ForConditionalGeneration',
  },
  llama4_text: {
    block: 'Llama4TextDecoderLayer',
    module: 'transformers.models.llama4.modeling_llama4',
    causalLm: 'Llama4ForCausalLM',
  },
  llama4: {
    block: 'Llama4TextDecoderLayer',
    module: 'transformers.models.llama4.modeling_llama4',
    causalLm: 'Llama4ForConditionalGeneration',
  },
  t5: {
    block: 'T5Block',
    module: 'transformers.models.t5.modeling_t5',
    causalLm: 'T5ForConditionalGeneration',
  },
};

export const SUPPORTED_MODEL_TYPES = Object.keys(ARCHITECTURES);
