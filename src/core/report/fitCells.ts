/** The answers of the fit solver as the cells of a table: the CLI's and the panel's "Where it fits". */
import type { LargestOn, SmallestOn } from '../whatif/solve';
import { fmtCount } from '../vocabulary/bytes';

/** A search's answer in a cell of the per-GPU table. */
export function largestCell(a: LargestOn): string {
  switch (a.status) {
    case 'found':
      return a.nextNeedsBytes === null ? `>= ${fmtCount(a.value)}` : fmtCount(a.value);
    case 'not found':
      return 'not solved';
    default:
      return a.status;
  }
}

/** The smallest world size in a cell: `9 (16 on 2 nodes)` when the count leaves a node part-filled. */
export function smallestCell(s: SmallestOn): string {
  if (s.status !== 'found') return s.status === 'not found' ? 'not solved' : s.status;
  const n = s.wholeNodes;
  return n ? `${s.worldSize} (${n.worldSize} on ${n.nodes} nodes)` : String(s.worldSize);
}
