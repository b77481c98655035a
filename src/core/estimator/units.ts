import type { WrapPolicyValue } from '../analysis/options';
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
  ): void {
    const at = param !== undefined && this.lastUser ? (this.lastUser.get(param) ?? module) : undefined;
    if (trainable && at !== undefined) {
      this.gradUsers.push(at);
      this.gradNumels.push(numel);
    }
    const dim0 = shape[0] ?? 1;
    const rest = shape.length > 1 ? numel / dim0 : 1;
    const dt = dtype ?? this.masterDtype;
    const key = `${dim0}|${rest}|${dt}|${trainable}`;
    const g = this.byKey.get(key);
    if (g) g.count++;
    else this.byKey.set(key, { dim0, rest, count: 1, dtype: dt, trainable });
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
      acc.add(p.shape, p.numel, p.dtype, p.trainable, key, m.path);
    }
    if (any) modules?.add(m.path);
    for (const b of m.buffers) acc.bufferBytes += Math.ceil(b.numel * DTYPE_BYTES[b.dtype]);
    for (let i = m.children.length - 1; i >= 0; i--) stack.push(m.children[i]!);
  }
}

/** Parameters in a module's subtree (tied ones once), as FSDP1's policies count `nonwrapped_numel`. */
function subtreeNumel(node: ModuleNode, excluded: Set<string>): number {
  const seen = new Set<string>();
  let n = 0;
  const stack: ModuleNode[] = [node];
  while (stack.length) {
    const m = stack.pop()!;
    for (const p of m.params) {
      const key = p.tiedTo ?? joinPath(m.path, p.name);
      if (seen.has(key) || excluded.has(key)) continue;
      seen.add(key);
      n += p.numel;
    }
    for (const c of m.children) stack.push(c);
  }
  return n;
}

/** Modules FSDP1's size policy never recurses into (`FORCE_LEAF_MODULES`) or never wraps (`EXCLUDE_WRAP_MODULES`). */
const FORCE_LEAF = new Set(['MultiheadAttention']);
const EXCLUDE_WRAP = new Set(['ModuleList', 'ModuleDict']);

/**
 * The units an FSDP1 auto-wrap policy creates, in the order `_recursive_wrap` creates them (bottom-up), then the
 * root, which the outer FullyShardedDataParallel always wraps.
 */
export function unitsFromPolicy(
  root: ModuleNode,
  policy: WrapPolicyValue | null,
  opts: { fallbackClasses: string[]; origin: string; offload: boolean; reshardAfterForward: boolean },
): { units: UnitPlan[]; notes: string[] } {
  const notes: string[] = [];
  const units: UnitPlan[] = [];
  const make = (path: string, isRoot = false): UnitPlan => ({
    modules: [path],
    isRoot,
    reshardAfterForward: isRoot ? false : opts.reshardAfterForward,
    offload: opts.offload,
    origin: opts.origin,
  });
  let classes: Set<string> | null = null;
  let minParams: number | null = null;
  if (policy) {
    switch (policy.policy) {
      case 'transformer':
      case 'module':
        classes = new Set(policy.classes);
        if (policy.unresolved?.length)
          notes.push(`wrap policy classes not read statically: ${policy.unresolved.join(', ')}`);
        break;
      case 'size':
        minParams = policy.minNumParams ?? 100_000_000;
        if (policy.minNumParams === null)
          notes.push('size-based policy threshold not read statically: assumed 100,000,000');
        break;
      case 'always':
        break;
      case 'lambda':
      case 'custom':
        classes = new Set(policy.classes?.length ? policy.classes : opts.fallbackClasses);
        notes.push(
          policy.classes?.length
            ? `${policy.policy} policy read as wrapping ${policy.classes.join(', ')}`
            : `${policy.policy} policy not evaluated: assumed to wrap each ${opts.fallbackClasses.join(', ') || 'block'}`,
        );
        break;
      case 'unknown':
        classes = new Set(opts.fallbackClasses);
        notes.push(
          `auto_wrap_policy ${policy.text} not read statically: assumed to wrap each ${opts.fallbackClasses.join(', ') || 'block'}`,
        );
        break;
    }
  }
  if (policy) {
    const wrappedParams = new Set<string>();
    const policyFn = (m: ModuleNode, recurse: boolean, nonwrapped: number): boolean => {
      if (minParams !== null) {
        const large = nonwrapped >= minParams;
        return recurse ? large && !FORCE_LEAF.has(m.className) : large && !EXCLUDE_WRAP.has(m.className);
      }
      if (recurse) return true;
      return classes ? classes.has(m.className) : policy.policy === 'always';
    };
    // _recursive_wrap(root, only_wrap_children=True): the root itself is wrapped by the outer FSDP.
    const recursiveWrap = (m: ModuleNode, onlyChildren: boolean): number => {
      const nonwrapped = subtreeNumel(m, wrappedParams);
      if (!policyFn(m, true, nonwrapped)) return 0;
      let total = 0;
      for (const c of m.children) total += recursiveWrap(c, false);
      const remainder = nonwrapped - total;
      if (!onlyChildren && policyFn(m, false, remainder)) {
        units.push(make(m.path));
        markParams(m, wrappedParams);
        return nonwrapped;
      }
      return total;
    };
    recursiveWrap(root, true);
    if (!units.length)
      notes.push('the auto_wrap_policy wraps no module of this model: the root holds every parameter');
  }
  units.push(make('', true));
  return { units, notes };
}

function markParams(node: ModuleNode, set: Set<string>): void {
  const stack: ModuleNode[] = [node];
  while (stack.length) {
    const m = stack.pop()!;
    for (const p of m.params) set.add(p.tiedTo ?? joinPath(m.path, p.name));
    for (const c of m.children) stack.push(c);
  }
}

/** Modules matching a path pattern (`*` one level, `**` any depth including none), optionally by class. */
export function matchModules(root: ModuleNode, pattern: string[], classes: string[] | null): string[] {
  const out: string[] = [];
  const visit = (node: ModuleNode, i: number) => {
    if (i === pattern.length) {
      if (!classes || classes.includes(node.className)) out.push(node.path);
      return;
    }
    const seg = pattern[i]!;
    if (seg === '**') {
      // Every module of the subtree (named_modules() yields the module itself first).
      const stack = [node];
      while (stack.length) {
        const m = stack.pop()!;
        visit(m, i + 1);
        for (let c = m.children.length - 1; c >= 0; c--) stack.push(m.children[c]!);
      }
      return;
    }
    for (const c of node.children) if (seg === '*' || c.name === seg) visit(c, i + 1);
  };
  visit(root, 0);
  return [...new Set(out)];
}

/** The default plan when a file has none: one unit per decoder block, then the root (FSDP2 defaults). */
export function defaultUnits(root: ModuleNode, blockClass: string | undefined, origin: string): UnitPlan[] {
  const blocks: string[] = [];
  if (blockClass) {
    const stack = [root];
    while (stack.length) {
      const m = stack.pop()!;
      if (m.className === blockClass) {
        blocks.push(m.path);
        continue;
      }
      for (let i = m.children.length - 1; i >= 0; i--) stack.push(m.children[i]!);
    }
  }
  return [
    ...blocks.map((path): UnitPlan => ({
      modules: [path],
      isRoot: false,
      reshardAfterForward: null,
      offload: false,
      origin,
    })),
    { modules: [''], isRoot: true, reshardAfterForward: null, offload: false, origin },
  ];
}
