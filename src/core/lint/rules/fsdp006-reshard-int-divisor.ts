/** Rule FSDP006: `reshard_after_forward` as an int that the shard group cannot use. */
import type { MeshValue } from '../../analysis/options';
import type { Draft, Rule } from '../types';

export const reshardIntDivisor: Rule = {
  id: 'FSDP006',
  name: 'reshard-after-forward-int',
  title: '`reshard_after_forward` as an int that the shard group cannot use',
  defaultSeverity: 'error',
  rationale: `\`reshard_after_forward=k\` (an int) keeps a 1/k slice of each unsharded parameter after forward, so the
backward all-gather runs over k ranks instead of the whole shard group. PyTorch requires k to divide the size of the
mesh's shard dimension (\`_get_post_forward_mesh_info\` raises \`ValueError: ... should be a factor of W\`).
\`k == 1\` is accepted but means *do not reshard* (the same as \`False\`, which keeps the whole unit gathered from
forward to backward), not \`True\`; \`k == W\` is the same as \`True\`.`,
  example: {
    bad: `mesh = init_device_mesh("cuda", (8,))
fully_shard(layer, mesh=mesh, reshard_after_forward=3)`,
    good: `mesh = init_device_mesh("cuda", (8,))
fully_shard(layer, mesh=mesh, reshard_after_forward=4)`,
  },
  check(ctx) {
    const out: Draft[] = [];
    for (const c of ctx.facts.calls) {
      const raf = c.options.reshard_after_forward;
      if (c.api !== 'fully_shard' || !raf || typeof raf.value !== 'number') continue;
      const k = raf.value;
      const mesh = c.options.mesh?.value as MeshValue | null | undefined;
      // The shard dimension is the mesh's last (dim 1 of an HSDP (replicate, shard) mesh).
      const W = mesh?.shape?.length ? mesh.shape[mesh.shape.length - 1] : null;
      if (k === 1) {
        out.push({
          range: raf.range,
          summary:
            'reshard_after_forward=1 never reshards, as False does: write False (or True) if that is meant',
          message:
            'reshard_after_forward=1 (an int) means resharding to 1 rank, i.e. not resharding at all: the unit stays gathered from forward ' +
            'to backward like reshard_after_forward=False. Write True (or False) if that is what you mean.',
          fixes: [],
        });
        continue;
      }
      if (!W) continue;
      if (k < 1 || k > W || W % k !== 0) {
        out.push({
          range: raf.range,
          summary: `reshard_after_forward=${k} does not divide the shard group of ${W}: PyTorch raises ValueError`,
          message:
            `reshard_after_forward=${k} does not divide the shard group size ${W} of the mesh (line ${mesh!.line}): ` +
            `PyTorch raises ValueError ("should be a factor of ${W}"). Use a divisor of ${W} (${divisors(W).join(', ')}).`,
          fixes: [],
        });
      }
    }
    return out;
  },
};

function divisors(n: number): number[] {
  const out: number[] = [];
  for (let i = 2; i < n && out.length < 8; i++) if (n % i === 0) out.push(i);
  return out.length ? out : [n];
}
