/**
 * Wraps made through methods of the file's own classes: `block.apply_fsdp(mesh)`, whose body calls
 * `fully_shard(self, ...)`, wraps `block`. Each call of such a method gets the method's wraps with `self` standing
 * for the receiver, placed at the call; a method whose receiver's class cannot be told is named, not guessed.
 */
import { up, type Node } from '../parsing/python';
import { rangeOf, type SourceFile } from '../parsing/source';
import { conditionsOf, enclosingFunction, findBinding, qualifiedName } from '../python/scope';
import { callOf } from './arguments';
import { branchPath } from './branches';
import { loopsOf, outermostLoopStatement, statementInfo } from './context';
import type { WrapCall } from './facts';
import { pathsOf } from './paths';
import { article } from '../vocabulary/words';

/** How deep calls of methods inside methods are followed (`model.apply_fsdp` calling `block.apply_fsdp`). */
const MAX_DEPTH = 4;
/** The most calls of wrapping methods one file expands (a generated file may call thousands). */
const MAX_SITES = 256;

export interface MethodWraps {
  /** The wraps the calls of wrapping methods make, placed at each call. */
  calls: WrapCall[];
  /** Calls of wrapping methods not followed, and why. */
  notes: string[];
}

interface Method {
  cls: string;
  name: string;
  /** Its own wrap calls, all of `self` or parts of it. */
  wraps: WrapCall[];
}

interface Site {
  call: Node;
  receiver: Node;
  method: Method;
  /** The qualified name of the function the call is in (`Model.apply_fsdp`), or null at module level. */
  function: string | null;
  /** The class (qualified) when that function is one of its methods. */
  inClass: string | null;
  /** How the receiver's class was told, when not by its construction or by `self`. */
  inferred?: string;
}

/**
 * The wraps that calls of the file's wrapping methods make, with `self` replaced by each receiver; the method's own
 * wraps (`calls` entries) get `expandedAt`, the lines of the calls that expand them.
 */
export function methodWraps(file: SourceFile, calls: WrapCall[]): MethodWraps {
  const out: MethodWraps = { calls: [], notes: [] };
  const methods = wrappingMethods(file, calls);
  if (!methods.size) return out;
  let sites: Site[] = [];
  // A method that wraps only by calling wrapping methods on parts of `self` (`for l in self.layers: l.shard()`) is
  // a wrapping method too: found round by round, as deep as calls are followed.
  for (let round = 0; round < MAX_DEPTH; round++) {
    out.notes = [];
    sites = findSites(file, methods, out.notes);
    const added = callingMethods(file, calls, sites, methods);
    if (!added) break;
  }
  if (!sites.length) return out;
  // Each method's wraps with those of the wrapping methods it calls, in terms of its own `self`.
  const memo = new Map<string, WrapCall[]>();
  const expand = (m: Method, depth: number, stack: Set<string>): WrapCall[] => {
    const key = `${m.cls}.${m.name}`;
    const known = memo.get(key);
    if (known) return known;
    if (depth > MAX_DEPTH || stack.has(key)) return m.wraps;
    stack.add(key);
    const inner = sites
      .filter((s) => s.function === key)
      .flatMap((s) => atSite(file, s, expand(s.method, depth + 1, stack)));
    stack.delete(key);
    const all = [...m.wraps, ...inner].sort((a, b) => a.line - b.line);
    memo.set(key, all);
    return all;
  };
  const expandedAt = new Map<string, number[]>();
  for (const s of sites) {
    out.calls.push(...atSite(file, s, expand(s.method, 1, new Set())));
    const key = `${s.method.cls}.${s.method.name}`;
    expandedAt.set(key, [...(expandedAt.get(key) ?? []), file.line(s.call)]);
    if (s.inferred)
      out.notes.push(`${s.receiver.text}.${s.method.name}() (line ${file.line(s.call)}): ${s.inferred}`);
  }
  // The wraps a called method makes, its own and those of the methods it calls, stand at its calls.
  for (const c of [...calls, ...out.calls]) {
    const lines = c.function ? expandedAt.get(c.function) : undefined;
    if (lines) c.expandedAt = lines;
  }
  return out;
}

/**
 * Adds to `methods` the methods that call wrapping methods on `self` or its parts and wrap nothing else
 * themselves; whether any was added.
 */
function callingMethods(
  file: SourceFile,
  calls: WrapCall[],
  sites: Site[],
  methods: Map<string, Map<string, Method>>,
): boolean {
  let added = false;
  const wrapping = new Set(calls.map((c) => c.function));
  for (const s of sites) {
    if (!s.inClass || !s.function) continue;
    const cls = s.inClass;
    const name = s.function.slice(cls.length + 1);
    // One that wraps something not of `self` itself is no method of `self`'s plan.
    if (methods.get(name)?.has(cls) || wrapping.has(s.function)) continue;
    const base = s.receiver.text.split('.')[0];
    const inLoop = s.receiver.type === 'identifier' ? findBinding(file, s.receiver.text, s.receiver) : null;
    const fromSelf =
      base === 'self' ||
      (inLoop?.kind === 'loop' && /^self\b/.test(inLoop.loop.childForFieldName('right')?.text ?? ''));
    if (!fromSelf) continue;
    let byClass = methods.get(name);
    if (!byClass) methods.set(name, (byClass = new Map()));
    byClass.set(cls, { cls, name, wraps: [] });
    added = true;
  }
  return added;
}

/** Calls `x.method(...)` of the wrapping methods, each with the class whose method it runs. */
function findSites(file: SourceFile, methods: Map<string, Map<string, Method>>, notes: string[]): Site[] {
  const sites: Site[] = [];
  for (const [name, byClass] of methods) {
    for (const id of file.identifiers(name)) {
      if (sites.length >= MAX_SITES) break;
      const attr = up(id);
      if (attr?.type !== 'attribute' || attr.childForFieldName('attribute')?.id !== id.id) continue;
      const call = callOf(id);
      const receiver = attr.childForFieldName('object');
      if (!call || call.childForFieldName('function')?.id !== attr.id || !receiver) continue;
      const scope = enclosingFunction(call);
      const fn = scope ? qualifiedName(scope) : null;
      const told = receiverClass(file, receiver, fn, byClass);
      if ('why' in told) {
        if (told.why)
          notes.push(`${receiver.text}.${name}() (line ${file.line(call)}) is not followed: ${told.why}`);
        continue;
      }
      sites.push({
        call,
        receiver,
        method: byClass.get(told.cls)!,
        function: fn,
        inClass: scope ? methodClass(scope) : null,
        ...(told.inferred ? { inferred: told.inferred } : {}),
      });
    }
  }
  return sites;
}

/** Methods (functions directly in a class) whose every wrap call wraps `self` or a part of it, by name and class. */
function wrappingMethods(file: SourceFile, calls: WrapCall[]): Map<string, Map<string, Method>> {
  const byFunction = new Map<string, WrapCall[]>();
  for (const c of calls) {
    if (!c.function || c.incomplete || c.neverRuns) continue;
    const list = byFunction.get(c.function);
    if (list) list.push(c);
    else byFunction.set(c.function, [c]);
  }
  const out = new Map<string, Map<string, Method>>();
  for (const [fn, wraps] of byFunction) {
    const node = file.root.descendantForIndex(wraps[0]!.statement.start, wraps[0]!.statement.start + 1);
    const def = node && enclosingFunction(node);
    const cls = def && methodClass(def);
    const name = def?.childForFieldName('name')?.text;
    if (!cls || !name || fn !== `${cls}.${name}`) continue;
    if (!wraps.every((w) => w.paths.length > 0 && w.paths.every((p) => p[0] === 'self'))) continue;
    // A method that wraps the object itself (a module's `apply_fsdp`), not only attributes of it (a trainer's
    // `self.model = FSDP(self.model)`, whose plan its own method already states).
    if (!wraps.some((w) => w.paths.some((p) => p.length === 1))) continue;
    let byClass = out.get(name);
    if (!byClass) out.set(name, (byClass = new Map()));
    byClass.set(cls, { cls, name, wraps });
  }
  return out;
}

/**
 * The class whose method a call runs: the class the receiver was constructed from (`model = Model(...)`, `block =
 * cast(Block, block)`), or the only class of the file that defines the method besides the caller's own. `why` is
 * null for a call that is no call of these methods (another object's method of that name) or needs none (`self`).
 */
function receiverClass(
  file: SourceFile,
  receiver: Node,
  fn: string | null,
  byClass: Map<string, Method>,
): { cls: string; inferred?: string } | { why: string | null } {
  const own = fn?.includes('.') ? fn.slice(0, fn.lastIndexOf('.')) : null;
  const names = [...byClass.keys()];
  // `self.method()`: the same object, the same paths; the method's own wraps already say it.
  if (receiver.type === 'identifier' && receiver.text === 'self') return { why: null };
  if (receiver.type === 'identifier' || receiver.type === 'call') {
    // `model.apply_fsdp()` of `model = Model(...)`, or `Model(...).apply_fsdp()` itself.
    const b = receiver.type === 'identifier' ? findBinding(file, receiver.text, receiver) : null;
    const value = receiver.type === 'call' ? receiver : b?.kind === 'assign' ? b.value : null;
    const built = value ? constructedClass(value) : null;
    if (built && byClass.has(built)) return { cls: built };
    // Built from something else (a function, another class): not a call of these methods. Cast to a class that does
    // not define it (a base class), it runs a subclass's.
    if (built && value?.childForFieldName('function')?.text !== 'cast') return { why: null };
    // Cast to a class another file defines (`cast(TransformerBlockBase, block)`): which of its classes' methods runs
    // is read there, by the project (resolve/castMethods.ts).
    if (built && !new RegExp(`^[ \\t]*class[ \\t]+${built}\\b`, 'm').test(file.text)) return { why: null };
  }
  const others = names.filter((n) => n !== own);
  const method = byClass.get(names[0]!)!.name;
  if (others.length === 1)
    return {
      cls: others[0]!,
      inferred: `\`${receiver.text}\` taken as ${article(others[0]!)}, the only${own ? ' other' : ''} class of this file that defines ${method}()`,
    };
  return {
    why: others.length
      ? `${others.join(', ')} define ${method}() and the class of \`${receiver.text}\` is not known statically`
      : `the class of \`${receiver.text}\` is not known statically, and no other class of this file defines ${method}()`,
  };
}

/** The qualified name of the class a function is a method of (defined directly in its body), or null. */
function methodClass(def: Node): string | null {
  const owner = up(up(def)?.type === 'decorated_definition' ? up(def)! : def);
  const cls = owner?.type === 'block' ? up(owner) : null;
  return cls?.type === 'class_definition' ? qualifiedName(cls) : null;
}

/** `Cls(...)`, `Cls.from_config(...)` or `cast(Cls, x)`: the class, or null. */
function constructedClass(value: Node): string | null {
  if (value.type !== 'call') return null;
  const f = value.childForFieldName('function');
  if (f?.type === 'identifier' && f.text === 'cast') {
    const first = value.childForFieldName('arguments')?.namedChildren[0];
    return first?.type === 'identifier' || first?.type === 'attribute' ? lastName(first) : null;
  }
  if (f?.type === 'identifier') return /^[A-Z]/.test(f.text) ? f.text : '';
  if (f?.type === 'attribute') {
    const o = f.childForFieldName('object');
    if (o?.type === 'identifier' && /^[A-Z]/.test(o.text)) return o.text;
  }
  return null;
}

function lastName(n: Node): string {
  return n.text.split('.').pop()!;
}

/** A method's wraps as the call's: `self` replaced by the receiver's path, placed at the call, in its loops. */
function atSite(file: SourceFile, s: Site, wraps: WrapCall[]): WrapCall[] {
  const scope = enclosingFunction(s.call);
  const loops = loopsOf(file, s.call, scope);
  const bases = pathsOf(file, s.receiver, loops.length ? s.call : null);
  const stmt = up(s.call)?.type === 'expression_statement' ? up(s.call)! : s.call;
  const outer = loops[0] ? outermostLoopStatement(s.call, scope) : null;
  const range = rangeOf(s.call);
  const conditions = conditionsOf(s.call, scope);
  const branch = branchPath(s.call, scope);
  return wraps.map((w) => ({
    ...w,
    line: file.line(s.call),
    range,
    calleeRange: rangeOf(s.call.childForFieldName('function')!),
    targetRange: null,
    argumentsEnd: null,
    target: w.targets.map((t, i) => targetAt(t, w.paths[i], s.receiver.text, bases[0])).join(', '),
    targets: w.targets.map((t, i) => targetAt(t, w.paths[i], s.receiver.text, bases[0])),
    paths: bases.flatMap((b) => w.paths.map((p) => [...b, ...p.slice(1)])),
    loop: loops[loops.length - 1] ?? null,
    loops,
    // One file: the `if`s of the call and of the method are told apart by their offsets.
    conditions: [...conditions, ...w.conditions],
    branch: [...branch, ...w.branch],
    function: s.function,
    assignedTo: null,
    isRoot: false,
    children: [],
    statement: statementInfo(file, stmt),
    loopStatement: outer ? statementInfo(file, outer) : null,
    classFilter: w.classFilter,
    via: { method: `${s.method.cls}.${s.method.name}`, line: w.via?.line ?? w.line },
    expandedAt: undefined,
  }));
}

/**
 * A wrapped expression as the call sees it: `self.attn` of a method called on `block` is `block.attn`; one that a
 * call deeper in the method wraps (`layer.attn` in `for layer in self.layers`) is written as its path
 * (`model.layers.*.attn`).
 */
function targetAt(
  text: string,
  p: string[] | undefined,
  receiver: string,
  base: string[] | undefined,
): string {
  if (/^self\b/.test(text)) return text.replace(/^self\b/, receiver);
  return p && base ? [...base, ...p.slice(1)].join('.') : text;
}
