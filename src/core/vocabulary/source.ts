/**
 * Where each input of an estimate came from, and the assumption list every surface shows: the vocabulary the
 * project readers, the framework readers, the resolver and the presenters share.
 */

/** Where an input came from, highest precedence first (docs/estimator.md). */
export type SourceKind =
  'flag' | 'annotation' | 'pyproject' | 'launch' | 'setting' | 'detected' | 'measured' | 'config' | 'default';

export interface Source {
  kind: SourceKind;
  /** `train.py:12`, `--world-size`, `fsdpLens.worldSize`, `torchrun --nproc_per_node in run.sh:3`. */
  detail?: string;
}

/** One input the numbers rest on, with where it came from. */
export interface Assumption {
  key: string;
  label: string;
  value: string;
  source: Source;
}
