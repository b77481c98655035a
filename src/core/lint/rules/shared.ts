/** What the wrap rules share: groups of block wraps without a root, a call's options written again for a fix. */
import type { FileFacts, WrapCall } from '../../analysis/facts';

/** Unit wraps of parts of one object (`model`), in one function, with no wrap of the object itself. */
export interface UnrootedGroup {
  base: string[];
  function: string | null;
  calls: WrapCall[];
}

/** The expression that denotes the object a path starts from: `model`, or `self.model` inside a method. */
export function rootExpression(base: string[]): string {
  return base.join('.');
}

function basePath(c: WrapCall): string[] | null {
  const p = c.paths[0];
  if (!p?.length) return null;
  const n = p[0] === 'self' ? 2 : 1;
  if (p.length <= n) return null;
  const base = p.slice(0, n);
  return base.every((s) => /^[A-Za-z_]\w*$/.test(s)) ? base : null;
}

/**
 * Groups of wraps of blocks (in a loop, or of an attribute of a variable) that no call in the file wraps as a root.
 * A group in a function that takes the object as a parameter and that nothing in this file calls is left alone:
 * its callers, in other files, may wrap the root. So is a loop over the object's `modules()` that wraps the object
 * itself too, and a lone attribute wrapped and stored back in place (`holder.model = FSDP(holder.model)`): like
 * `self.model = FSDP(self.model)`, the attribute is the model and the object holding it only holds it.
 */
export function unitCallsWithoutRoot(facts: FileFacts): UnrootedGroup[] {
  const childOfRoot = new Set(facts.calls.flatMap((c) => c.children));
  const groups = new Map<string, UnrootedGroup>();
  facts.calls.forEach((c, i) => {
    // A method's wraps that its calls expand are judged at those calls.
    if (c.isRoot || childOfRoot.has(i) || c.incomplete || c.neverRuns || c.expandedAt) return;
    const base = basePath(c);
    if (!base) return;
    if (c.wrapsBase && c.paths.length === 1 && c.paths[0]!.length === base.length + 1) return;
    const fn = c.function ? facts.functions[c.function] : undefined;
    if (fn && !fn.calledInFile && base[0] !== 'self' && fn.parameters.includes(base[0]!)) return;
    const key = `${c.function ?? ''}\u0000${base.join('.')}`;
    const g = groups.get(key);
    if (g) g.calls.push(c);
    else groups.set(key, { base, function: c.function, calls: [c] });
  });
  // Blocks of an object computed from another by a call (`decoder = find_decoder(net)`), where the other is wrapped
  // whole in the same function: that wrap may well be their root, which the file cannot tell.
  const wrappedWhole = new Set(
    facts.calls
      .filter((c) => !c.neverRuns && c.paths.length === 1 && c.paths[0]!.length === 1)
      .map((c) => `${c.function ?? ''}\u0000${c.paths[0]![0]}`),
  );
  const rootedElsewhere = (g: UnrootedGroup) =>
    g.calls.some((c) => c.baseDerivedFrom?.some((v) => wrappedWhole.has(`${c.function ?? ''}\u0000${v}`)));
  return [...groups.values()].filter(
    (g) => (g.calls.length > 1 || !storedBack(g.calls[0]!, g.base)) && !rootedElsewhere(g),
  );
}

/** `holder.net = FSDP(holder.net)`: one attribute of the base, not in a loop, assigned the wrapped module. */
function storedBack(c: WrapCall, base: string[]): boolean {
  const p = c.paths[0];
  return (
    c.loops.length === 0 &&
    c.paths.length === 1 &&
    p?.length === base.length + 1 &&
    c.assignedTo === c.target &&
    c.target === [...base, p[base.length]].join('.')
  );
}

/** A call's options as they would be written again (`mesh=mesh`, `**fsdp_config`), minus `exclude`. */
export function callOptionsText(c: WrapCall, exclude: string[]): string[] {
  const out: string[] = [];
  const splats = new Set<string>();
  for (const [name, o] of Object.entries(c.options)) {
    // The enclosing `enable_wrap` block sets it for the new call too.
    if (o.inherited) continue;
    if (o.via) {
      splats.add(o.via);
      continue;
    }
    if (!exclude.includes(name)) out.push(`${name}=${o.text}`);
  }
  for (const s of c.unresolvedSplats) splats.add(`**${s}`);
  return [...out, ...splats];
}
