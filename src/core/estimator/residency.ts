/**
 * What a unit holds between its forward and its backward: freed (resharded), kept gathered, or a 1/k slice kept,
 * from FSDP2's `reshard_after_forward`, FSDP1's strategy and the root's special case; and the integer values
 * `fully_shard` refuses.
 */
import { versionAtLeast } from '../vocabulary/versions';
import type { Plan, Residency, Unit } from './types';

/** Whether a unit is freed after forward (and gathered again for backward), kept, or kept as a 1/k slice. */
export function residencyOf(u: Unit, plan: Plan, keepAll: boolean, W: number, torch: string): Residency {
  // SHARD_GRAD_OP (FSDP1) keeps every unit gathered; an FSDP2 plan asked "what if SHARD_GRAD_OP" means
  // reshard_after_forward=False on every unit, the same thing.
  if (keepAll) return { kind: 'keep' };
  if (plan.api === 'fsdp1') return u.isRoot ? { kind: 'keep' } : { kind: 'reshard' };
  const r = u.reshardAfterForward;
  if (r === null) return u.isRoot ? { kind: 'keep' } : { kind: 'reshard' };
  // Before 2.8 the root is kept whatever it is told: `FSDPState._lazy_init` sets the root's
  // `post_forward_mesh_info = None`. From 2.8 only a root left at None is (PyTorch PRs 154704, 155319).
  if (u.isRoot && !versionAtLeast(torch, '2.8')) return { kind: 'keep' };
  if (r === false) return { kind: 'keep' };
  if (r === true) return { kind: 'reshard' };
  // k = W is True and k = 1 is False (`_get_post_forward_mesh_info`); other values out of 1..W are rejected
  // there, and are modelled as the nearer of the two (see `badReshardNotes`).
  if (r >= W) return { kind: 'reshard' };
  if (r <= 1) return { kind: 'keep' };
  return { kind: 'slice', ranks: r };
}

/**
 * FSDP2 units whose `reshard_after_forward` is an int that is not a factor of the shard group size W: PyTorch's
 * `_get_post_forward_mesh_info` raises `ValueError` ("If passing reshard_after_forward as an int, it should be a
 * factor of W, not k") when `fully_shard` is called, so the script stops before training. Say so, and how the
 * estimate modelled it: a 1/k slice after forward when 1 < k < W, as `True` above W, as `False` below 1.
 */
export function badReshardNotes(units: Unit[], W: number): string[] {
  const byK = new Map<number, string[]>();
  for (const u of units) {
    const k = u.reshardAfterForward;
    if (typeof k !== 'number' || (k >= 1 && k <= W && W % k === 0)) continue;
    byK.set(k, [...(byK.get(k) ?? []), u.name]);
  }
  return [...byK].map(([k, names]) => {
    const modelled =
      k > W
        ? 'as reshard_after_forward=True (freed after forward)'
        : k < 1
          ? 'as reshard_after_forward=False (kept gathered until backward)'
          : `as if each rank kept a 1/${k} slice after forward (backward all-gather over ${k} ranks)`;
    const where = `${names.slice(0, 3).join(', ')}${names.length > 3 ? `, … (${names.length} units)` : ''}`;
    return `reshard_after_forward=${k} (${where}) is not a factor of the shard group size ${W}: fully_shard raises ValueError ("it should be a factor of ${W}, not ${k}"), so the script stops before training; estimated ${modelled}. Use a divisor of ${W}, True or False.`;
  });
}

/** FSDP2 roots told to reshard after forward on a PyTorch that keeps the root gathered anyway (before 2.8). */
export function rootClampNotes(units: Unit[], torch: string): string[] {
  if (versionAtLeast(torch, '2.8')) return [];
  return units
    .filter((u) => u.isRoot && u.reshardAfterForward !== null && u.reshardAfterForward !== false)
    .map(
      (u) =>
        `${u.name}: reshard_after_forward=${String(u.reshardAfterForward)} on the root has no effect on PyTorch ${torch} (before 2.8, FSDPState._lazy_init keeps the root gathered): estimated kept from forward to backward`,
    );
}
