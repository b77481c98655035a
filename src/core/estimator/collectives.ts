/**
 * Collectives and their time: traffic totals added once, per-step scaling with gradient accumulation, what each
 * link carries, and the threshold past which transfers count as not hiding behind compute.
 */
import type { Link } from '../hardware/catalog';
import type { LinkLoad, Traffic } from './types';

/** Transfers count as exposed when more than this share of compute waits on them. */
export const EXPOSED_SHARE = 0.05;

/** Whether a step's exposed transfer time hides behind its compute (under EXPOSED_SHARE of it). */
export function transfersHide(comms: { exposedSeconds: number; computeSeconds: number }): boolean {
  return comms.exposedSeconds <= EXPOSED_SHARE * comms.computeSeconds;
}

/** Collectives of a traffic record, all kinds together. */
export function collectiveCount(t: Traffic): number {
  return t.collectives.allGather + t.collectives.reduceScatter + t.collectives.allReduce;
}

export function linkLoads(
  t: Traffic,
  shard: Link,
  replica: Link | null,
  bw: (l: Link) => number,
): LinkLoad[] {
  const sharded = t.allGatherBytes + t.reduceScatterBytes;
  const out: LinkLoad[] = [];
  if (sharded > 0 || !replica)
    out.push({
      link: shard,
      role: 'shard group',
      collectives: t.collectives.allGather + t.collectives.reduceScatter,
      bytes: sharded,
      seconds: sharded / bw(shard),
    });
  // Without HSDP, all-reduces (NO_SHARD) run within the one group, over the same link.
  const arLink = replica ?? shard;
  if (t.allReduceBytes > 0) {
    if (!replica && out[0]) {
      out[0].collectives += t.collectives.allReduce;
      out[0].bytes += t.allReduceBytes;
      out[0].seconds += t.allReduceBytes / bw(arLink);
    } else
      out.push({
        link: arLink,
        role: 'replicas',
        collectives: t.collectives.allReduce,
        bytes: t.allReduceBytes,
        seconds: t.allReduceBytes / bw(arLink),
      });
  }
  return out;
}

export function addTraffic(ts: Traffic[]): Traffic {
  const out: Traffic = {
    allGatherBytes: 0,
    reduceScatterBytes: 0,
    allReduceBytes: 0,
    collectives: { allGather: 0, reduceScatter: 0, allReduce: 0 },
  };
  for (const t of ts) {
    out.allGatherBytes += t.allGatherBytes;
    out.reduceScatterBytes += t.reduceScatterBytes;
    out.allReduceBytes += t.allReduceBytes;
    out.collectives.allGather += t.collectives.allGather;
    out.collectives.reduceScatter += t.collectives.reduceScatter;
    out.collectives.allReduce += t.collectives.allReduce;
  }
  return out;
}

export function scaleTraffic(t: Traffic, k: number): Traffic {
  return {
    allGatherBytes: t.allGatherBytes * k,
    reduceScatterBytes: t.reduceScatterBytes * k,
    allReduceBytes: t.allReduceBytes * k,
    collectives: {
      allGather: t.collectives.allGather * k,
      reduceScatter: t.collectives.reduceScatter * k,
      allReduce: t.collectives.allReduce * k,
    },
  };
}

/** Total bytes moved per step by this plan's collectives. */
export function trafficBytes(t: Traffic): number {
  return t.allGatherBytes + t.reduceScatterBytes + t.allReduceBytes;
}

/** The loads of the parallelisms around FSDP (tensor, context, pipeline): their bytes and seconds per step. */
export function modelParallelLinks(links: LinkLoad[]): LinkLoad[] {
  return links.filter(
    (l) =>
      l.role === 'tensor parallel' ||
      l.role === 'context parallel' ||
      l.role === 'pipeline parallel' ||
      l.role === 'expert parallel',
  );
}
