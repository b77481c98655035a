/**
 * Which parameters each FSDP unit owns, assigned as PyTorch assigns them: units in order, inner ones first, a tied
 * parameter to the first unit reaching it.
 */
import { joinPath, moduleAt, walk, type ModuleNode } from '../model/tree';
import { type DType, DTYPE_BYTES } from '../vocabulary/dtypes';
import type { ParamGroup, Plan, Unit, UnitPlan } from './types';

/** The units with the parameters each owns, and what no unit owns. */
export interface Ownership {
  units: Unit[];
  /** Parameters in no unit: replicated on every rank, gradients never reduced by FSDP. */
  unowned: { params: number; groups: ParamGroup[]; modules: string[] };
}

/**
 * Assigns parameters to units exactly as PyTorch does: units are applied in order (inner ones first), and each
 * owns the parameters of its modules' subtrees except those of modules an earlier unit wrapped and those already
 * owned (a tied parameter belongs to the first unit that reaches it).
 */
export function assignParameters(root: ModuleNode, plan: Plan, masterDtype: DType): Ownership {
  const owned = new Set<string>();
  const wrapped = new Set<string>();
  const units: Unit[] = [];
  // Each parameter's last user in forward order (depth-first, parents before children): its gradient appears
  // there first in backward.
  // A parameter's last user is the module that holds it, except for tied ones: only those are looked up.
  const tiedTargets = new Map<string, Set<string>>();
  for (const m of walk(root))
    for (const p of m.params) {
      if (!p.tiedTo) continue;
      const dot = p.tiedTo.lastIndexOf('.');
      const owner = dot < 0 ? '' : p.tiedTo.slice(0, dot);
      const names = tiedTargets.get(owner) ?? new Set<string>();
      names.add(dot < 0 ? p.tiedTo : p.tiedTo.slice(dot + 1));
      tiedTargets.set(owner, names);
    }
  const lastUser = new Map<string, string>();
  if (tiedTargets.size)
    for (const m of walk(root)) {
      const targets = tiedTargets.get(m.path);
      for (const p of m.params)
        if (p.tiedTo) lastUser.set(p.tiedTo, m.path);
        else if (targets?.has(p.name)) lastUser.set(joinPath(m.path, p.name), m.path);
    }
  plan.units.forEach((u, index) => {
    const acc = new Accumulator(masterDtype, lastUser);
    const classNames = new Set<string>();
    for (const path of u.modules) {
      const node = moduleAt(root, path);
      if (!node) continue;
      classNames.add(node.className);
      collect(node, wrapped, owned, acc);
    }
    // Gradients appearing at different times matter only for a unit whose modules are not one piece of forward.
    const gradsAt = u.modules.length > 1 || acc.skippedWrapped ? acc.gradsAtRecord() : {};
    for (const path of u.modules) wrapped.add(path);
    units.push({
      index,
      name: unitName(root, u),
      modules: u.modules,
      classNames: [...classNames],
      isRoot: u.isRoot,
      params: acc.params,
      trainableParams: acc.trainable,
      groups: acc.groups(),
      bufferBytes: acc.bufferBytes,
      gradsAt,
      reshardAfterForward: u.reshardAfterForward,
      offload: u.offload,
      origin: u.origin,
      site: u.site,
    });
  });
  // What no unit owns: walk the whole model, skipping wrapped subtrees.
  const rest = new Accumulator(masterDtype);
  const modules = new Set<string>();
  collect(root, wrapped, owned, rest, modules);
  return { units, unowned: { params: rest.params, groups: rest.groups(), modules: [...modules] } };
}

function unitName(root: ModuleNode, u: UnitPlan): string {
  if (u.modules.length === 1 && u.modules[0] === '') return `${root.className} (root)`;
  return u.modules.join(' + ');
}

class Accumulator {
  params = 0;
  trainable = 0;
  bufferBytes = 0;
  /** Trainable parameters' last users and sizes, in order (made into a record only when a unit needs it). */
  private readonly gradUsers: string[] = [];
  private readonly gradNumels: number[] = [];
  /** A wrapped module inside this unit's modules was skipped (its forward splits this unit's). */
  skippedWrapped = false;
  private readonly byKey = new Map<string, ParamGroup>();

  constructor(
    private readonly masterDtype: DType,
    private readonly lastUser?: Map<string, string>,
  ) {}

  add(
    shape: number[],
    numel: number,
    dtype: DType | undefined,
    trainable: boolean,
    param?: string,
    module?: string,
    gathersAs?: DType,
    expertParallel?: number,
  ): void {
    const at = param !== undefined && this.lastUser ? (this.lastUser.get(param) ?? module) : undefined;
    if (trainable && at !== undefined) {
      this.gradUsers.push(at);
      this.gradNumels.push(numel);
    }
    const dim0 = shape[0] ?? 1;
    const rest = shape.length > 1 ? numel / dim0 : 1;
    const dt = dtype ?? this.masterDtype;
    const key = `${dim0}|${rest}|${dt}|${trainable}|${gathersAs ?? ''}|${expertParallel ?? ''}`;
    const g = this.byKey.get(key);
    if (g) g.count++;
    else
      this.byKey.set(key, {
        dim0,
        rest,
        count: 1,
        dtype: dt,
        trainable,
        ...(gathersAs ? { gathersAs } : {}),
        ...(expertParallel ? { expertParallel } : {}),
      });
    this.params += numel;
    if (trainable) this.trainable += numel;
  }

  /** Trainable parameters by the module whose backward first produces their gradient. */
  gradsAtRecord(): Record<string, number> {
    const out: Record<string, number> = {};
    this.gradUsers.forEach((at, i) => (out[at] = (out[at] ?? 0) + this.gradNumels[i]!));
    return out;
  }

  groups(): ParamGroup[] {
    return [...this.byKey.values()];
  }
}

/** Adds the not-yet-owned parameters under `node` to `acc`, not descending into wrapped modules. */
function collect(
  node: ModuleNode,
  wrapped: Set<string>,
  owned: Set<string>,
  acc: Accumulator,
  modules?: Set<string>,
): void {
  const stack: ModuleNode[] = [node];
  const shapes = new Map<string, number[]>();
  while (stack.length) {
    const m = stack.pop()!;
    if (m !== node && wrapped.has(m.path)) {
      acc.skippedWrapped = true;
      continue;
    }
    let any = false;
    for (const p of m.params) {
      const key = p.tiedTo ?? joinPath(m.path, p.name);
      if (owned.has(key)) continue;
      owned.add(key);
      any = true;
      shapes.set(key, p.shape);
      acc.add(p.shape, p.numel, p.dtype, p.trainable, key, m.path, p.gathersAs, p.expertParallel);
    }
    if (any) modules?.add(m.path);
    for (const b of m.buffers) acc.bufferBytes += Math.ceil(b.numel * DTYPE_BYTES[b.dtype]);
    for (let i = m.children.length - 1; i >= 0; i--) stack.push(m.children[i]!);
  }
}
