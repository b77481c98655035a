/**
 * The units a plan makes on a model, as PyTorch makes them: FSDP1's recursive auto-wrap policies (by class, by
 * size, always, a lambda), path patterns of wrap calls matched against the module tree, and the default plan of
 * one unit per decoder block and the root.
 */
import type { WrapPolicyValue } from '../analysis/options';
import type { UnitPlan } from '../estimator/types';
import { oneLine } from '../vocabulary/words';
import { joinPath, outermostOfClass, walk, type ModuleNode } from '../model/tree';

/** Parameters in a module's subtree (tied ones once), as FSDP1's policies count `nonwrapped_numel`. */
function subtreeNumel(node: ModuleNode, excluded: Set<string>): number {
  const seen = new Set<string>();
  let n = 0;
  for (const m of walk(node)) {
    for (const p of m.params) {
      const key = p.tiedTo ?? joinPath(m.path, p.name);
      if (seen.has(key) || excluded.has(key)) continue;
      seen.add(key);
      n += p.numel;
    }
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
  opts: {
    fallbackClasses: string[];
    origin: string;
    site?: UnitPlan['site'];
    offload: boolean;
    reshardAfterForward: boolean;
    /**
     * PEFT's `fsdp_auto_wrap_policy` (peft/utils/other.py), which Transformers' Trainer sets for a LoRA model
     * (`Trainer._fsdp_qlora_plugin_updates`): `_or_policy` of the policy and a `lambda_auto_wrap_policy` that wraps
     * every leaf module whose `weight` requires grad, so each LoRA matrix is a unit of its own.
     */
    trainableLeaves?: boolean;
  },
): { units: UnitPlan[]; notes: string[] } {
  const notes: string[] = [];
  const units: UnitPlan[] = [];
  const make = (path: string, isRoot = false): UnitPlan => ({
    modules: [path],
    isRoot,
    reshardAfterForward: isRoot ? false : opts.reshardAfterForward,
    offload: opts.offload,
    origin: opts.origin,
    site: opts.site ?? null,
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
          `auto_wrap_policy ${oneLine(policy.text)} not read statically: assumed to wrap each ${opts.fallbackClasses.join(', ') || 'block'}`,
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
      if (
        opts.trainableLeaves &&
        !m.children.length &&
        m.params.some((p) => p.name === 'weight' && p.trainable && !p.tiedTo)
      )
        return true;
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
  for (const m of walk(node)) for (const p of m.params) set.add(p.tiedTo ?? joinPath(m.path, p.name));
}

/** Modules matching a path pattern (`*` one level, `**` any depth including none), optionally by class. */
export function matchModules(
  root: ModuleNode,
  pattern: string[],
  classes: string[] | null,
  excluded: string[] = [],
): string[] {
  const out: string[] = [];
  const visit = (node: ModuleNode, i: number) => {
    if (i === pattern.length) {
      if ((!classes || classes.includes(node.className)) && !excluded.includes(node.className))
        out.push(node.path);
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
  const blocks = outermostOfClass(root, blockClass).map((m) => m.path);
  return [
    ...blocks.map((path): UnitPlan => ({
      modules: [path],
      isRoot: false,
      reshardAfterForward: null,
      offload: false,
      origin,
      site: null,
    })),
    { modules: [''], isRoot: true, reshardAfterForward: null, offload: false, origin, site: null },
  ];
}
