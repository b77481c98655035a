/**
 * What torch.compile changes about the figures: the terms it makes upper bounds, or the verdicts it leaves
 * undecided because what it allocates is not modelled.
 */
import type { CompileMode } from '../inputs/parse';

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
 * graphs keep between runs, which the figures do not model.
 */
export function compileBounds(mode: CompileMode): { overcounted: string[]; unmodelled: string[] } {
  switch (mode) {
    case 'off':
      return { overcounted: [], unmodelled: [] };
    case 'cudagraphs':
      return {
        overcounted: [],
        unmodelled: ['torch.compile with CUDA graphs (their private memory pool)'],
      };
    case 'loss':
      return {
        overcounted: ["torch.compile of the loss (its temporaries counted as eager PyTorch's)"],
        unmodelled: [],
      };
    case 'model':
      return {
        overcounted: ['torch.compile of the model (its activations counted as eager PyTorch keeps them)'],
        unmodelled: [],
      };
    case 'model+loss':
      return {
        overcounted: [
          'torch.compile of the model and the loss (activations counted as eager PyTorch keeps them)',
        ],
        unmodelled: [],
      };
  }
}
