/**
 * What inputs of the setup make the figures upper bounds (torch.compile, activation offloading), lower bounds
 * (activations not modelled) or leave the verdicts undecided because
 * what they allocate is not modelled (CUDA graphs).
 */
import type { CompileMode } from '../inputs/parse';
import type { TrainingSetup } from '../inputs/table';
import type { ArchShape } from '../model/hf';
import { lossParallelOf } from './mesh';

/**
 * Memory the peak leaves out though the model is counted whole, in words for `uncounted`: the activations of a
 * model the activation model does not describe, or of a part it leaves out.
 */
export function uncountedOf(shape: ArchShape | undefined): string[] {
  return [
    ...(shape?.activationsNotModelled
      ? [`activations, logits and loss: ${shape.activationsNotModelled}`]
      : []),
    ...(shape?.activationsLeftOut ?? []),
  ];
}

/**
 * Whether the loss runs compiled as `lossTransient` counts it fused: torch.compile of the loss (torchtitan's
 * `compile.components` with "loss") over a cross-entropy of the logits as they come, upcast in the loss or not,
 * whole or a chunk at a time inside torchtitan's `ChunkedLossWrapper`;
 * a loss-parallel one (DTensor logits) or one written another way keeps eager's figures, an upper bound.
 */
export function lossFused(
  setup: Pick<TrainingSetup, 'compile' | 'loss' | 'tensorParallel' | 'lossParallel' | 'tpPlan'>,
): boolean {
  return (
    (setup.compile === 'loss' || setup.compile === 'model+loss') &&
    (setup.loss === 'upcast' || setup.loss === 'plain' || setup.loss === 'head-chunked') &&
    !(setup.tensorParallel > 1 && lossParallelOf(setup))
  );
}

/** The bounds the setup puts on an estimate, in words for `overcounted` and `unmodelled`. */
export function setupBounds(
  setup: Pick<
    TrainingSetup,
    'compile' | 'activationOffload' | 'loss' | 'tensorParallel' | 'lossParallel' | 'tpPlan'
  >,
): {
  overcounted: string[];
  unmodelled: string[];
} {
  const c = compileBounds(setup.compile, lossFused(setup));
  // Saved activations moved to the CPU as they are saved (torch.autograd.graph.save_on_cpu's pack hook,
  // torchtune's OffloadActivations, Composer's activation_cpu_offload), brought back for backward: the figures
  // keep them on the GPU.
  if (setup.activationOffload)
    c.overcounted.push(
      'activation offloading (saved activations counted on the GPU, where they do not stay)',
    );
  return c;
}

/**
 * The bounds a compile mode puts on an estimate, in words for `overcounted` and `unmodelled`.
 *
 * Inductor's default mode: AOTAutograd splits each compiled graph's joint forward and backward with
 * `min_cut_rematerialization_partition` (torch/_functorch/partitioners.py), which saves for backward a cut of the
 * graph it picks by size, recomputing fusible pointwise ops (`default_recomputable_ops`, `pointwise_ops()`) in
 * backward instead of keeping their outputs, and fuses the elementwise temporaries eager PyTorch allocates op by
 * op. The figures keep what eager keeps: an upper bound (torchtitan measured its 8B job at 82.4 GiB eager, 77.0
 * GiB compiled, benchmarks/llama3_h100_202412_torchtitan.md Table 1). Modes that record CUDA graphs
 * (`reduce-overhead`, `max-autotune`: torch/_inductor/cudagraph_trees.py) allocate from a private pool the
 * graphs keep between runs, which the figures do not model. A compiled loss that `lossFused` describes is counted
 * as it runs (`lossTransient`), not bounded.
 */
export function compileBounds(
  mode: CompileMode,
  fused = false,
): { overcounted: string[]; unmodelled: string[] } {
  switch (mode) {
    case 'off':
      return { overcounted: [], unmodelled: [] };
    case 'cudagraphs':
      return {
        overcounted: [],
        unmodelled: ['torch.compile with CUDA graphs (their private memory pool)'],
      };
    case 'loss':
      return { overcounted: fused ? [] : [COMPILED_LOSS], unmodelled: [] };
    case 'model':
      return { overcounted: [COMPILED_MODEL], unmodelled: [] };
    case 'model+loss':
      return { overcounted: [fused ? COMPILED_MODEL : COMPILED_MODEL_AND_LOSS], unmodelled: [] };
  }
}

/** The words for a compiled loss counted as eager's. */
/**
 * How an `overcounted` entry begins when the sequences are counted at their full length though the job packs them
 * without padding (verl's `use_remove_padding`): the activations and the logits are then upper bounds.
 */
export const FULL_LENGTH = 'sequences counted at full length';

export const COMPILED_LOSS = "torch.compile of the loss (its temporaries counted as eager PyTorch's)";
/** The words for a compiled model. */
const COMPILED_MODEL = 'torch.compile of the model (its activations counted as eager PyTorch keeps them)';
/** The words for a compiled model and a compiled loss counted as eager's. */
export const COMPILED_MODEL_AND_LOSS =
  'torch.compile of the model and the loss (activations counted as eager PyTorch keeps them)';
