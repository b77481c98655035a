/**
 * The fit test, written once: a peak fits a GPU when the peak plus the caching allocator's reserve and the CUDA
 * context is at most the memory the driver reports (docs/estimator.md, "Fit").
 */
import { GPUS, gpuBytes, type Gpu } from '../hardware/catalog';
import type { FitResult } from './types';

/** Usable memory check: the peak plus allocator overhead and the CUDA context must fit the GPU. */
export const FIT_RESERVE = {
  /** CUDA context, cuBLAS workspaces and NCCL buffers, bytes. */
  contextBytes: 2 ** 30,
  /** The caching allocator reserves more than it hands out (fragmentation): a fraction of the peak. */
  fragmentation: 0.1,
};

/**
 * What the caching allocator reserves for an allocated peak (what `memory_stats()["reserved_bytes.all.peak"]`
 * shows): the peak and its fragmentation allowance, a default fraction rather than a model of the allocator.
 */
export function reservedBytes(peak: number): number {
  return Math.ceil(peak * (1 + FIT_RESERVE.fragmentation));
}

/** What a peak needs of a GPU: the memory the allocator reserves for it, and the CUDA context. */
export function requiredBytes(peak: number): number {
  return reservedBytes(peak) + FIT_RESERVE.contextBytes;
}

/** The largest peak a GPU of `capacity` bytes holds: the inverse of `requiredBytes`. */
export function usableBytes(capacity: number): number {
  return Math.max(0, Math.floor((capacity - FIT_RESERVE.contextBytes) / (1 + FIT_RESERVE.fragmentation)));
}

/**
 * Whether a peak fits one GPU, with the headroom left (negative when short). `partial`: the peak leaves parts of
 * the model out (true), so a peak that fits is not a verdict; it counts more than the job keeps (`upper`), so a
 * peak that does not fit is not one, unless `floorBytes`, what the step holds whatever is overcounted, does not
 * fit either; or neither holds (`any`).
 */
export function fitOn(
  peakBytes: number,
  g: Gpu,
  partial: boolean | 'any' | 'upper' = false,
  floorBytes = 0,
): FitResult {
  const capacity = gpuBytes(g);
  const need = requiredBytes(peakBytes);
  return {
    gpu: g.id,
    name: g.name,
    verdict:
      partial === 'any'
        ? 'undecided'
        : need > capacity
          ? partial === 'upper' && requiredBytes(floorBytes) <= capacity
            ? 'undecided'
            : 'short'
          : partial === true
            ? 'undecided'
            : 'fits',
    headroomBytes: capacity - need,
    memoryBytes: capacity,
  };
}

/** The fit of a peak on every GPU of the catalog. */
export function fitAll(
  peakBytes: number,
  partial: boolean | 'any' | 'upper' = false,
  floorBytes = 0,
): FitResult[] {
  return GPUS.map((g) => fitOn(peakBytes, g, partial, floorBytes));
}
