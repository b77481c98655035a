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

/** What the allocator must reserve for an allocated peak: the peak and its fragmentation allowance (a default). */
function withFragmentation(peak: number): number {
  return Math.ceil(peak * (1 + FIT_RESERVE.fragmentation));
}

/**
 * What the caching allocator holds reserved over a step on a GPU with room (what
 * `memory_stats()["reserved_bytes.all.peak"]` shows): each stream's pool grows to the most it ever holds live,
 * since a freed block is reused only by the stream that allocated it (`get_free_block` searches by stream), so
 * the pools of FSDP's side streams add up with the compute stream's rather than overlap; the compute stream's
 * pool gets the fragmentation allowance. Without the pools (no timeline), the peak and its allowance.
 */
export function reservedBytes(
  peak: number,
  pools?: { compute: number; gather: number; reduce: number },
): number {
  return pools ? withFragmentation(pools.compute) + pools.gather + pools.reduce : withFragmentation(peak);
}

/**
 * What a peak needs of a GPU: the allocated peak with the allowance, and the CUDA context. Not the side streams'
 * caches: before it raises out-of-memory the allocator frees every cached segment and retries
 * (`release_cached_blocks` in `DeviceCachingAllocator::malloc`), so a block cached for another stream costs a
 * retry, not the run.
 */
export function requiredBytes(peak: number): number {
  return withFragmentation(peak) + FIT_RESERVE.contextBytes;
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
