/** How a minimum GPU count that spans part-filled nodes is said. */
import type { MinGpus } from './whatif';

/** `; 16 GPUs on 2 whole nodes of 8` when the smallest count leaves a node part-filled. */
export function wholeNodesText(min: Pick<MinGpus, 'wholeNodes'>, lead: string): string {
  const n = min.wholeNodes;
  return n ? `${lead}${n.worldSize} GPUs on ${n.nodes} whole nodes of ${n.gpusPerNode}` : '';
}
