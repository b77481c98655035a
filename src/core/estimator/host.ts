/**
 * Host (CPU) memory of one node: offloaded state of every process, the spike of `from_pretrained` before
 * sharding (on every rank, or on local rank 0 only), and a checkpoint being saved.
 */
import { fmtBytes, fmtCount } from '../vocabulary/bytes';
import { bytesOf } from './shards';
import type { Estimate, EstimateInput, Figure, Term } from './types';

/**
 * Host memory per node: the larger of the loading spike (before sharding) and every process's offloaded state
 * plus a checkpoint being saved (during training).
 */
export function hostPerNode(
  e: Estimate,
  loading: EstimateInput['loading'],
  stateDict?: EstimateInput['stateDict'],
): Figure {
  const G = Math.min(e.setup.gpusPerNode, e.mesh.worldSize);
  const terms: Term[] = [];
  if (e.perGpu.hostBytes > 0)
    terms.push({
      name: 'CPU offload',
      bytes: e.perGpu.hostBytes * G,
      formula: `${G} processes x ${fmtBytes(e.perGpu.hostBytes)} of offloaded state`,
    });
  if (loading?.fromPretrained && !loading.meta && loading.rank0Only) {
    const dt = loading.dtype ?? e.setup.masterDtype;
    const each = e.model.params * bytesOf(dt);
    terms.push({
      name: 'loading (from_pretrained on local rank 0 only)',
      bytes: each,
      formula: `one process per node materialises the whole model in ${dt} (${fmtBytes(each)}); the other ${G - 1} start on the meta device and receive their shards (${loading.rank0Only.detail})`,
    });
  } else if (loading?.fromPretrained && !loading.meta) {
    const dt = loading.dtype ?? e.setup.masterDtype;
    const each = e.model.params * bytesOf(dt);
    terms.push({
      name: 'loading (from_pretrained on every rank)',
      bytes: each * G,
      formula: `${G} processes each materialise the whole model in ${dt} (${fmtBytes(each)}) before sharding, when nothing is offloaded yet${loading.line ? ` (${loading.line})` : ''}; load on the meta device or on rank 0 only to avoid it`,
    });
  }
  if (stateDict?.kind === 'sharded') {
    const W = e.mesh.worldSize;
    const shard = Math.ceil(e.model.params / W) * bytesOf(e.setup.masterDtype);
    terms.push({
      name: 'saving a sharded state dict',
      bytes: shard * G,
      formula: `${G} processes each copy their 1/${W} shard (${fmtBytes(shard)}) to host memory; no full state dict is gathered (${stateDict.detail})`,
    });
  } else if (stateDict?.kind === 'full')
    terms.push({
      name: 'saving a full state dict on rank 0',
      bytes: e.model.params * bytesOf(e.setup.masterDtype),
      formula: `${fmtCount(e.model.params)} params x ${bytesOf(e.setup.masterDtype)} B gathered on one rank in CPU memory (${stateDict.detail}); sharded checkpoints avoid it`,
    });
  // `from_pretrained` on every rank runs before fully_shard exists, so nothing is offloaded yet; saving a
  // checkpoint happens during training, beside the offloaded state. The node needs the larger of the two moments.
  const hostTerm = (name: string) => terms.find((t) => t.name.startsWith(name))?.bytes ?? 0;
  return {
    bytes: Math.max(hostTerm('loading'), hostTerm('CPU offload') + hostTerm('saving')),
    terms,
  };
}
