/** A reserve measured on a cluster's GPUs: what a fit on that GPU keeps beside the peak, as measured there. */

/** A reserve measured on a cluster's GPUs (`fsdp-lens calibrate --save`), for the GPU it was measured on. */
export interface Calibration {
  cluster: string;
  /** The catalog id of the GPU it was measured on. */
  gpu: string;
  fragmentation: number;
  /** Measured beside the allocator's reserve, when the run recorded it; else the default. */
  contextBytes?: number;
  /** The file that keeps it, and the run it was measured from. */
  file: string;
  from: string;
}
