/**
 * One exploration of a plan under a what-if, as the footprint panel shows it: the estimate under the changed
 * values (or why PyTorch would refuse the change), the GPU fit matrix, the unit-granularity curve and the advice.
 * Every number comes from the estimator; presenters only render the result.
 */
import type { Estimate } from '../estimator/types';
import { MeshError } from '../estimator/mesh';
import { GPUS } from '../hardware/catalog';
import type { ByteUnit } from '../vocabulary/bytes';
import { advise, type Advice } from './advice';
import type { FitMatrix, GranularityPoint, MinGpus, WhatIf, WhatIfModel } from './model';

export interface Exploration {
  /** The estimate under the what-if; absent when the what-if makes a mesh PyTorch refuses (`error` says why). */
  estimate?: Estimate;
  error?: string;
  fitMatrix?: FitMatrix;
  granularity?: GranularityPoint[];
  advice?: Advice[];
  /** The smallest world size that fits the estimate's GPU. */
  minGpus?: MinGpus;
}

export function explore(model: WhatIfModel, w: WhatIf, base: Estimate, unit: ByteUnit): Exploration {
  let e: Estimate;
  try {
    e = Object.keys(w).length ? model.run(w) : base;
  } catch (err) {
    if (err instanceof MeshError) return { error: err.message };
    throw err;
  }
  const fitMatrix = model.fitMatrix(GPUS, w);
  return {
    estimate: e,
    fitMatrix,
    granularity: model.granularity({ ...w, blocksPerUnit: undefined }),
    advice: advise(model, w, e, unit),
    minGpus: fitMatrix.gpus.find((g) => g.id === e.gpu.id)?.minGpus,
  };
}
