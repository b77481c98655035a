/** The loss Transformers computes for a causal LM, by the release a project pins (what it keeps of the logits). */
import type { LossImpl } from '../inputs/parse';
import { versionAtLeast, type VersionPin } from '../vocabulary/versions';

/**
 * Causal LMs whose loss code followed Llama's through these releases (`# Copied from
 * transformers.models.llama.modeling_llama.LlamaForCausalLM` before 4.46, `self.loss_function` from 4.46 on).
 */
const LLAMA_LOSS = /^(Llama|Mistral|Mixtral|Qwen2)ForCausalLM$/;

/**
 * What the pinned Transformers release keeps of the logits when the model computes its loss from `labels`:
 * - before 4.46, `LlamaForCausalLM.forward` runs `logits = logits.float()` and
 *   `shift_logits = logits[..., :-1, :].contiguous()` before `CrossEntropyLoss`: `fp32-logits`;
 * - 4.46 to 4.48, `ForCausalLMLoss` (`loss/loss_utils.py`) upcasts and still copies the shifted logits:
 *   `upcast-shifted`;
 * - from 4.49 on it pads the labels instead of shifting the logits (PR 35646): `upcast`, the default.
 * A lower bound (`transformers>=4.40`) is not the release that runs: the default stands, with a note.
 */
export function transformersLoss(
  pin: VersionPin | undefined,
  rootClass: string,
): { loss: LossImpl; detail: string } | { note: string } | undefined {
  if (!pin || !LLAMA_LOSS.test(rootClass) || versionAtLeast(pin.version, '4.49')) return undefined;
  if (pin.floor)
    return {
      note: `the project allows transformers ${pin.version} and later (${pin.where}); the loss is counted as 4.49 and later compute it: releases before 4.49 keep more of the logits (set "# fsdp: loss=fp32-logits" for one before 4.46, "loss=upcast-shifted" for 4.46 to 4.48)`,
    };
  const at = `transformers ${pin.version} pinned at ${pin.where}`;
  return versionAtLeast(pin.version, '4.46')
    ? { loss: 'upcast-shifted', detail: `${at}: ForCausalLMLoss copies the shifted fp32 logits` }
    : {
        loss: 'fp32-logits',
        detail: `${at}: ${rootClass}.forward upcasts the logits to fp32 and copies the shifted ones`,
      };
}
