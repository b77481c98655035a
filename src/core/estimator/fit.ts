/**
 * The fit test, written once: a peak fits a GPU when the peak plus the caching allocator's reserve and the CUDA
 * context is at most the memory the driver reports (docs/estimator.md, "Fit").
 */
import { GPUS, gpuBytes, type Gpu } from '../hardware/catalog';
import type { Calibration } from '../hardware/calibration';

export type { Calibration };
import type { FitResult } from './types';

/** What a GPU holds beside the allocated peak: the allocator's allowance and the CUDA context. */
export interface FitReserve {
  /** CUDA context, cuBLAS workspaces and NCCL buffers, bytes. */
  contextBytes: number;
  /** The caching allocator reserves more than it hands out (fragmentation): a fraction of the peak. */
  fragmentation: number;
  /** Where a measured reserve comes from (`cluster a100-pod, .fsdp-lens/calibration.json`); absent for defaults. */
  measured?: string;
}

/** Usable memory check: the peak plus allocator overhead and the CUDA context must fit the GPU (defaults). */
export const FIT_RESERVE: FitReserve = {
  contextBytes: 2 ** 30,
  fragmentation: 0.1,
};

/** The reserve a fit on GPU `gpu` uses: the first calibration measured on that GPU, else the defaults. */
export function reserveOn(gpu: string, calibrations: readonly Calibration[] = []): FitReserve {
  const c = calibrations.find((x) => x.gpu === gpu);
  return c
    ? {
        contextBytes: c.contextBytes ?? FIT_RESERVE.contextBytes,
        fragmentation: c.fragmentation,
        measured: `cluster ${c.cluster}, ${c.file}`,
      }
    : FIT_RESERVE;
}

/** What the allocator must reserve for an allocated peak: the peak and its fragmentation allowance. */
function withFragmentation(peak: number, r: FitReserve = FIT_RESERVE): number {
  return Math.ceil(peak * (1 + r.fragmentation));
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
  r: FitReserve = FIT_RESERVE,
): number {
  return pools
    ? withFragmentation(pools.compute, r) + pools.gather + pools.reduce
    : withFragmentation(peak, r);
}

/**
 * What a peak needs of a GPU: the allocated peak with the allowance, and the CUDA context. Not the side streams'
 * caches: before it raises out-of-memory the allocator frees every cached segment and retries
 * (`release_cached_blocks` in `DeviceCachingAllocator::malloc`), so a block cached for another stream costs a
 * retry, not the run.
 */
export function requiredBytes(peak: number, r: FitReserve = FIT_RESERVE): number {
  return withFragmentation(peak, r) + r.contextBytes;
}

/** The largest peak a GPU of `capacity` bytes holds: the inverse of `requiredBytes`. */
export function usableBytes(capacity: number, r: FitReserve = FIT_RESERVE): number {
  return Math.max(0, Math.floor((capacity - r.contextBytes) / (1 + r.fragmentation)));
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
  calibrations: readonly Calibration[] = [],
): FitResult {
  const capacity = gpuBytes(g);
  const r = reserveOn(g.id, calibrations);
  const need = requiredBytes(peakBytes, r);
  return {
    gpu: g.id,
    name: g.name,
    verdict:
      partial === 'any'
        ? 'undecided'
        : need > capacity
          ? partial === 'upper' && requiredBytes(floorBytes, r) <= capacity
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
  calibrations: readonly Calibration[] = [],
): FitResult[] {
  return GPUS.map((g) => fitOn(peakBytes, g, partial, floorBytes, calibrations));
}
