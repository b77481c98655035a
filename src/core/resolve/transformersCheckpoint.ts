/** Whether Transformers' gradient checkpointing is reentrant, by the release a project pins. */
import { versionAtLeast, type VersionPin } from '../vocabulary/versions';

/**
 * `PreTrainedModel.gradient_checkpointing_enable` with `gradient_checkpointing_kwargs` unset checkpoints each
 * layer's call with `use_reentrant=True` before Transformers 5 (PR 28538) and `False` from 5 on (PR 43203); TRL set
 * its own default to False in January 2026 (PR 4811). What matters is FSDP1: a reentrant checkpoint around a frozen
 * unit keeps the unit's input and its gradient until backward ends (estimator/timeline.ts). A pinned 4.x release
 * under Transformers' own Trainer decides it; otherwise the default (off) stands and the note says what would
 * change it.
 */
export function transformersReentrant(
  pin: VersionPin | undefined,
  trl: boolean,
): { reentrant: true; detail: string } | { note: string } | undefined {
  if (pin && !pin.floor && versionAtLeast(pin.version, '5')) return undefined;
  if (pin && !pin.floor && !trl)
    return {
      reentrant: true,
      detail: `transformers ${pin.version} pinned at ${pin.where}: gradient checkpointing without gradient_checkpointing_kwargs uses use_reentrant=True`,
    };
  return {
    note: `gradient checkpointing without gradient_checkpointing_kwargs is reentrant in Transformers 4${trl ? ' with TRL releases before January 2026' : ''}: under FSDP1 each frozen unit then keeps its input and its gradient until backward ends, which the estimate leaves out (the default of Transformers 5); set "# fsdp: use_reentrant=on" if the job runs such a release`,
  };
}
