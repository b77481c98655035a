import hfConfigs from './hf-configs.json';

/** A published Hugging Face config.json (the fields the estimator reads; others are kept as they are). */
export type HfConfig = Record<string, unknown> & { model_type?: string };

/** The built-in catalog: published configs by Hugging Face id (`meta-llama/Llama-3.1-8B`). */
export const CATALOG: Readonly<Record<string, HfConfig>> = (hfConfigs as { models: Record<string, HfConfig> })
  .models;

/** The catalog entry for an id, matched case-insensitively (users type `meta-llama/llama-3.1-8b`). */
export function catalogConfig(id: string): { id: string; config: HfConfig } | undefined {
  const exact = CATALOG[id];
  if (exact) return { id, config: exact };
  const lower = id.toLowerCase();
  const key = Object.keys(CATALOG).find((k) => k.toLowerCase() === lower);
  return key ? { id: key, config: CATALOG[key]! } : undefined;
}

/** The Transformers classes of each supported `model_type`: the decoder block FSDP wraps, and where it lives. */
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
};

export const SUPPORTED_MODEL_TYPES = Object.keys(ARCHITECTURES);
