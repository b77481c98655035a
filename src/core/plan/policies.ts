/**
 * The units a plan makes on a model, as PyTorch makes them: FSDP1's recursive auto-wrap policies (by class, by
 * size, always, a lambda), path patterns of wrap calls matched against the module tree, and the default plan of
 * one unit per decoder block and the root.
 */
import type { ModulePredicate, WrapPolicyValue } from '../analysis/wrapPolicy';
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

/** One policy as `_recursive_wrap` calls it: `policy(module, recurse, nonwrapped_numel)`. */
type PolicyFn = (m: ModuleNode, recurse: boolean, nonwrapped: number) => boolean;

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
  if (policy) {
    const policyFn = policyFunction(root, policy, opts.fallbackClasses, notes);
    const wrappedParams = new Set<string>();
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
    if (!units.length) {
      const present = new Set([...walk(root)].map((m) => m.className));
      const missing = [...new Set(namedClasses(policy))].filter((c) => !present.has(c));
      notes.push(
        `the auto_wrap_policy wraps no module of this model${missing.length ? ` (it names ${missing.join(', ')}, not a class of this model)` : ''}: the root holds every parameter`,
      );
    }
  }
  units.push(make('', true));
  return { units, notes };
}

/** The policy function PyTorch runs for a policy value (torch/distributed/fsdp/wrap.py). */
function policyFunction(
  root: ModuleNode,
  policy: WrapPolicyValue,
  fallbackClasses: string[],
  notes: string[],
): PolicyFn {
  const byClass =
    (classes: Set<string>): PolicyFn =>
    (m, recurse) =>
      recurse || classes.has(m.className);
  const fallback = (what: string): PolicyFn => {
    notes.push(`${what}: assumed to wrap each ${fallbackClasses.join(', ') || 'block'}`);
    return byClass(new Set(fallbackClasses));
  };
  switch (policy.policy) {
    case 'transformer':
    case 'module':
      // `_module_wrap_policy`: recurse always, wrap an instance of the classes.
      if (policy.unresolved?.length)
        notes.push(`wrap policy classes not read statically: ${policy.unresolved.join(', ')}`);
      return byClass(new Set(policy.classes));
    case 'size': {
      // `size_based_auto_wrap_policy`: recurse into and wrap modules of at least min_num_params not yet wrapped.
      const min = policy.minNumParams ?? 100_000_000;
      if (policy.minNumParams === null)
        notes.push('size-based policy threshold not read statically: assumed 100,000,000');
      return (m, recurse, nonwrapped) =>
        recurse
          ? nonwrapped >= min && !FORCE_LEAF.has(m.className)
          : nonwrapped >= min && !EXCLUDE_WRAP.has(m.className);
    }
    case 'always':
      return () => true;
    case 'or': {
      // `_or_policy`: any of the policies.
      const fns = policy.policies.map((p) => policyFunction(root, p, fallbackClasses, notes));
      return (m, recurse, nonwrapped) => fns.some((f) => f(m, recurse, nonwrapped));
    }
    case 'lambda':
    case 'custom': {
      // `lambda_auto_wrap_policy`: recurse always, wrap where `lambda_fn(module)` holds; `CustomPolicy` wraps every
      // module its lambda_fn returns a truthy value for.
      const test = policy.predicate;
      if (test) {
        const open = undecidedAt(root, test);
        if (!open) {
          if (reads(test, 'trainable') && ![...walk(root)].some((m) => m.params.some((x) => !x.trainable)))
            notes.push(
              `the ${policy.policy} policy's test reads requires_grad, and no parameter of this model is frozen: every module it tests that way is wrapped (with an adapter, only its trainable matrices would be)`,
            );
          return (m, recurse) => recurse || holds(test, m) === true;
        }
        return fallback(
          `the ${policy.policy} policy's test is not decided for ${open.path || 'the root'} (${open.className})`,
        );
      }
      if (policy.classes?.length) {
        notes.push(`${policy.policy} policy read as wrapping ${policy.classes.join(', ')}`);
        return byClass(new Set(policy.classes));
      }
      return fallback(
        `${policy.policy} policy not evaluated${policy.unread ? ` (${oneLine(policy.unread, 60)} is not a test the analysis reads)` : ''}`,
      );
    }
    case 'unknown':
      return fallback(`auto_wrap_policy ${oneLine(policy.text)} not read statically`);
  }
}

/**
 * A policy's test of one module, in three values: null where it depends on what the model tree does not say (a
 * `requires_grad` of a module without that parameter, which raises in Python unless an earlier test guards it).
 */
export function holds(p: ModulePredicate, m: ModuleNode): boolean | null {
  switch (p.is) {
    case 'const':
      return p.value;
    case 'leaf':
      return m.children.length === 0;
    case 'has':
      return m.params.some((x) => x.name === p.attr);
    case 'trainable': {
      const x = m.params.find((q) => q.name === p.attr);
      // A weight tied to another module's is counted with the module that owns it (the estimate places a shared
      // parameter once), so it makes no unit of its own.
      return x ? x.trainable && !x.tiedTo : null;
    }
    case 'class':
      return p.names.includes(m.className);
    case 'not': {
      const v = holds(p.of, m);
      return v === null ? null : !v;
    }
    case 'and':
    case 'or': {
      // Kleene's logic: one operand equal to the deciding value decides; else an open one leaves it open.
      const decides = p.is === 'or';
      let open = false;
      for (const q of p.of) {
        const v = holds(q, m);
        if (v === decides) return decides;
        if (v === null) open = true;
      }
      return open ? null : !decides;
    }
    case 'if': {
      const t = holds(p.test, m);
      if (t === null) return null;
      return holds(t ? p.then : p.else, m);
    }
  }
}

/** The classes a policy wraps by name. */
function namedClasses(p: WrapPolicyValue): string[] {
  if (p.policy === 'transformer' || p.policy === 'module') return p.classes;
  if (p.policy === 'or') return p.policies.flatMap(namedClasses);
  return [];
}

/** Whether a test reads a property of the module (`trainable`: a parameter's requires_grad). */
function reads(p: ModulePredicate, is: ModulePredicate['is']): boolean {
  if (p.is === is) return true;
  if (p.is === 'not') return reads(p.of, is);
  if (p.is === 'and' || p.is === 'or') return p.of.some((q) => reads(q, is));
  if (p.is === 'if') return reads(p.test, is) || reads(p.then, is) || reads(p.else, is);
  return false;
}

/** The first module of the tree the test is not decided for, if any. */
function undecidedAt(root: ModuleNode, p: ModulePredicate): ModuleNode | undefined {
  for (const m of walk(root)) if (holds(p, m) === null) return m;
  return undefined;
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
