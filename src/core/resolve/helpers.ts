/**
 * Wraps made through a helper of another file of the project: `parallelize(model, mesh)` imported from
 * `pkg/parallel.py`, or `training.shard_model(model)` through its module. The helper's wrap calls, with its
 * parameter replaced by what the caller passes, become the caller's plan, placed at the call.
 */
import * as path from 'node:path';
import {
  exclusive,
  type CheckpointFact,
  type FileFacts,
  type FunctionFact,
  type OptionFact,
  type WrapCall,
} from '../analysis/facts';
import { listed, oneLine } from '../vocabulary/words';
import { scanFile } from '../analysis/scan';
import { mentionsFsdp } from '../analysis/relevance';
import { up, type Node } from '../parsing/python';
import { rangeOf, type SourceFile } from '../parsing/source';
import type { Project, PyFile } from '../project/project';
import {
  conditionsOf,
  dottedText,
  enclosingFunction,
  findBinding,
  methodCallsOn,
  parameterNames,
  qualifiedName,
} from '../python/scope';
import { Evaluator } from '../analysis/evaluator';
import { branchPath, isPresenceTest } from '../analysis/branches';
import { functionFact, neverRunsReason } from '../analysis/wrapCalls';
import {
  callAtLine,
  conditionsByCall,
  testPerModule,
  type CallSite,
  type ModuleTest,
} from '../modules/perModuleTest';
import { readArgs, readOptions } from '../analysis/arguments';
import { projectReaders } from '../frameworks/scriptConfigs';
import { MAX_REEXPORTS } from '../project/definitions';
import { walk as walkModules, type ModuleNode } from '../model/tree';
import { interpretOption } from '../analysis/options';
import { argumentFor, meshOption } from '../analysis/arguments';
import { truthy } from '../python/operators';
import { castMethods, castSites, type CastSite } from './castMethods';
import { planEntries, type PlanFallback } from './namedPlan';
import { reshardValue } from '../modules/perIteration';
import { namedByParameterNodes } from '../analysis/paths';
import type { Value } from '../python/values';

/** The most helper calls of one file followed (each scans the helper's file once). */
const MAX_HELPERS = 16;

/** A helper the file calls whose wraps are found but not planned, and why. */
export interface UnfollowedHelper {
  /** 1-based line of the call in this file. */
  line: number;
  helper: string;
  /** The helper's file, relative to this file's folder. */
  where: string;
  /** The helper's own wrap calls, in its own names. */
  wraps: { line: number; api: WrapCall['api']; target: string }[];
  reason: string;
  /** The function of this file that makes the call, and the `if` arms it runs in. */
  function: string | null;
  branch: WrapCall['branch'];
  /** The call is off the path the script takes (a default, its arguments or a config turn it off). */
  offPath?: true;
}

export interface HelperPlan {
  calls: WrapCall[];
  /** Activation checkpointing the followed helpers apply in the functions the file calls. */
  checkpointing?: CheckpointFact[];
  /** Helpers found whose wraps the plan does not take (not reached, or chosen by a test not decided). */
  unfollowed?: UnfollowedHelper[];
  /** How each helper was followed, or where the chain breaks. */
  notes: string[];
  /** The functions of this file whose calls of helpers make wraps (a helper that calls a helper in turn). */
  functions: Record<string, FunctionFact>;
}

/** How many helpers deep a chain is followed (`train.py` → `setup.prepare()` → `parallel.shard()`). */
const MAX_CHAIN = 3;

/**
 * The wrap calls a file makes through helpers it imports from the project, in the caller's names; empty when it
 * calls none. Only top-level functions whose wraps start from one of their parameters are followed.
 */
export function helperPlan(project: Project, facts: FileFacts, span?: LineSpan): HelperPlan {
  // The entry asks whether there is one before estimating, and the estimate asks again: one search per facts.
  const key = span ? `${span.line}-${span.end}` : '';
  const known = searched.get(facts);
  const memo = known?.project === project ? known.plans : new Map<string, HelperPlan>();
  if (!known || known.project !== project) searched.set(facts, { project, plans: memo });
  const hit = memo.get(key);
  if (hit) return hit;
  const plan = searchHelpers(project, facts, 0, new Set(), span);
  memo.set(key, plan);
  return plan;
}

/** 1-based first and last lines: the part of a file whose helper calls make one plan (a class, a function). */
export interface LineSpan {
  line: number;
  end: number;
}

const searched = new WeakMap<FileFacts, { project: Project; plans: Map<string, HelperPlan> }>();

function searchHelpers(
  project: Project,
  facts: FileFacts,
  depth = 0,
  stack = new Set<string>(),
  span?: LineSpan,
): HelperPlan {
  const out: HelperPlan = { calls: [], notes: [], functions: {} };
  const file = project.file(facts.path);
  if (!file) return out;
  stack.add(path.resolve(facts.path));
  let followed = 0;
  const sites: Site[] = [];
  const casts: CastSite[] = [];
  for (const b of file.imports.bindings) {
    for (const id of file.source.identifiers(b.local)) {
      const p = up(id);
      const dot = b.qualified.lastIndexOf('.');
      // `apply_fsdp(model)` of `from pkg.parallel import apply_fsdp`.
      if (!b.isModule && dot > 0 && p?.type === 'call' && p.childForFieldName('function')?.id === id.id) {
        sites.push({ call: p, module: b.qualified.slice(0, dot), fn: b.qualified.slice(dot + 1) });
        // `model = Model(...)` of `from pkg.model import Model`, then `model.apply_fsdp(mesh)`.
        sites.push(...methodSites(file.source, p, b.qualified.slice(0, dot), b.qualified.slice(dot + 1)));
      }
      // `block = cast(BlockBase, block)` of `from pkg.block import BlockBase`, then `block.apply_fsdp(...)`.
      else if (!b.isModule && dot > 0 && p?.type === 'argument_list')
        casts.push(...castSites(file.source, id, b.qualified.slice(0, dot), b.qualified.slice(dot + 1)));
      // `parallel.apply_fsdp(model)` of `import pkg.parallel as parallel` or `from pkg import parallel`.
      else if (p?.type === 'attribute' && p.childForFieldName('object')?.id === id.id) {
        const call = up(p);
        const fn = p.childForFieldName('attribute')?.text;
        if (fn && call?.type === 'call' && call.childForFieldName('function')?.id === p.id)
          sites.push({ call, module: b.qualified, fn });
      }
    }
  }
  // The caller read as the scan reads it: with the script's arguments and the config files its code loads.
  const ev = new Evaluator(file.source, file.imports, undefined, {
    ...(facts.argv ? { argv: facts.argv } : {}),
    ...projectReaders(project, facts.path),
  });
  sites.push(...registrySites(file, ev, out.notes));
  const inSpan = (site: { call: Node }) => {
    const line = file.source.line(site.call);
    return !span || (line >= span.line && line <= span.end);
  };
  for (const cast of casts.filter(inSpan).slice(0, MAX_HELPERS)) {
    const found = castMethods(project, facts.path, cast);
    const wrapping = found?.definers.filter((d) => found.wraps.get(d)?.length) ?? [];
    if (!found || !wrapping.length) continue;
    const rel = shownPath(project, facts.path, found.where);
    const line = file.source.line(cast.call);
    const method = `${cast.method}()`;
    if (found.definers.length === 1)
      sites.push({
        call: cast.call,
        module: cast.module,
        fn: `${wrapping[0]!}.${cast.method}`,
        receiver: cast.receiver,
        where: found.where,
        chosenBy: `\`${cast.written}\` cast to ${cast.cls}, whose only class in ${rel} that defines ${method} is ${wrapping[0]!}`,
      });
    else {
      // Several classes of the family define it: which runs depends on the class of each object, which the
      // model's code chooses (a config's block type), not the call.
      const reason = `\`${cast.written}\` is cast to ${cast.cls}, and ${found.definers.length} classes of ${rel} (it and its subclasses) define ${method} (${listed(found.definers.slice(0, 4))}${found.definers.length > 4 ? ', …' : ''}): which one runs depends on the class of each object, not known statically`;
      out.notes.push(`${cast.written}.${method} (line ${line}) is not followed: ${reason}`);
      (out.unfollowed ??= []).push({
        line,
        helper: `${cast.cls}.${method}`,
        where: rel,
        wraps: wrapping.flatMap((d) =>
          found.wraps.get(d)!.map((c) => ({ line: c.line, api: c.api, target: c.target })),
        ),
        reason,
        function: callerFunction(cast.call),
        branch: branchPath(cast.call, enclosingFunction(cast.call)),
        ...(neverRunsReason(ev, cast.call, enclosingFunction(cast.call)) ? { offPath: true as const } : {}),
      });
    }
  }
  for (const site of sites.filter(inSpan)) {
    if (followed >= MAX_HELPERS) return out;
    // A helper that wraps nothing itself is followed into the helpers it calls only when the call may pass the
    // model: a model the file builds, a name that says so, or (deeper) a parameter passed on.
    const chain = depth + 1 < MAX_CHAIN && passesModel(facts, site.call, depth > 0);
    const found = site.where
      ? { where: site.where, helper: castMethodsFacts(project, site.where) }
      : definition(project, facts.path, site.module, site.fn, chain ? depth : MAX_CHAIN, stack);
    if (!found || path.resolve(found.where) === path.resolve(facts.path)) continue;
    const { where, helper } = found;
    const fnFact = helper.functions[site.fn];
    const wraps = helper.calls.filter((c) => c.function === site.fn && !c.incomplete && !c.neverRuns);
    if (!fnFact || !wraps.length) continue;
    // A sharding helper wraps the object it is given (its root), besides any parts: one that only rewraps a part
    // (a resized embedding) is no plan of the model.
    if (!wraps.some((c) => c.paths.some((p) => p.length === 1 && fnFact.parameters.includes(p[0]!))))
      continue;
    // Which modules a loop over `modules()` wraps under a test of its own (`if any(cond(n, m) for ...)`), with no
    // class filter the analysis reads, is not known: no plan is made of a guess.
    // A test the helper writes of each module alone (`if name.endswith("mlp")`, `if type(m).__name__ in NAMES`)
    // is decided module by module once the model is known; one over what the caller passes is not.
    const callSite = {
      file: facts.path,
      range: rangeOf(site.call),
      ...(facts.argv ? { argv: facts.argv } : {}),
    };
    const perModule = new Map(
      wraps.map((c) => [c, decidedPerModule(project, c, fnFact.parameters, callSite)]),
    );
    // Tests of the helper's parameters the call decides (`if tie_embeddings:` of `shard(model, tie_embeddings=False)`):
    // a wrap under a test the call makes false never runs from here, and one made true is no choice.
    const byCall = new Map(wraps.map((c) => [c, conditionsByCall(project, c, callSite)]));
    const live = wraps.filter((c) => byCall.get(c)?.holds !== false);
    const selective = live.find(
      (c) =>
        c.paths.some((p) => p.includes('**')) &&
        !c.classFilter &&
        (c.conditions.length > 0 || c.pickedBy !== undefined) &&
        !perModule.get(c),
    );
    // An installed package's file by its place in site-packages (`torchtune/training/_distributed.py`).
    const rel = shownPath(project, facts.path, where);
    const unfollowed = (reason: string) =>
      (out.unfollowed ??= []).push({
        line: file.source.line(site.call),
        helper: `${site.fn}()`,
        where: rel,
        wraps: wraps.map((c) => ({ line: c.line, api: c.api, target: c.target })),
        reason,
        function: callerFunction(site.call),
        branch: branchPath(site.call, enclosingFunction(site.call)),
        ...(neverRunsReason(ev, site.call, enclosingFunction(site.call)) ? { offPath: true as const } : {}),
      });
    // Which of its wraps run depends on tests of its own the call does not decide (`if model.enable_weight_tying:`,
    // per-block `if block.moe_enabled:` arms): all of them together are no plan. A test that a module exists
    // (`if model.norm is not None`) is no choice: an absent module is wrapped by nobody.
    const choice = live.find(
      (c) =>
        c.conditions.some(
          (t) => !isPresenceTest(t) && !perModule.get(c)?.texts.includes(t) && byCall.get(c)?.holds !== true,
        ) || live.some((d) => d !== c && exclusive(c.branch, d.branch)),
    );
    if (!selective && choice) {
      const test = choice.conditions.find((t) => !isPresenceTest(t)) ?? choice.conditions[0] ?? '';
      const reason = `which of its wraps run depends on \`${oneLine(test, 80)}\`, which the call does not decide`;
      out.notes.push(`${site.fn}() (line ${file.source.line(site.call)}) is not followed: ${reason}`);
      unfollowed(reason);
      continue;
    }
    if (selective) {
      const reason = `which modules it wraps depends on \`${oneLine([...selective.conditions, ...(selective.pickedBy ? [selective.pickedBy] : [])].join(' and '), 120)}\`, which the analysis cannot decide`;
      out.notes.push(`${site.fn}() (line ${file.source.line(site.call)}) is not followed: ${reason}`);
      unfollowed(reason);
      continue;
    }
    followed++;
    const at = `${site.fn}() in ${rel}`;
    // Whether the call runs, as the scan decides it for a wrap call of the file: a condition false as written or
    // by a default keeps it out.
    const never = neverRunsReason(ev, site.call, enclosingFunction(site.call));
    const runs = never?.byDefault ? { offByDefault: never.reason } : never ? { neverRuns: never.reason } : {};
    const why: string[] = [];
    const mapped = live.map((c) => {
      if (c.namedBy) return remapNamed(project, facts, file, c, fnFact.parameters, site, runs, ev, why);
      const one = remap(
        c,
        fnFact.parameters,
        site.call,
        runs,
        site.receiver,
        ev,
        boundOptions(project, c, fnFact.parameters, site, ev),
      );
      return one ? [one] : null;
    });
    const lost = live.filter((_, i) => !mapped[i]);
    // A helper followed in part would show a plan it does not make: all of its wraps, or none.
    if (lost.length) {
      const which = lost.map((c) => `\`${c.callee}(${oneLine(c.target, 40)})\` at line ${c.line}`);
      const reason = why.length
        ? why.join('; ')
        : `${lost.length} of its ${live.length} wrap calls (${listed(which)}) ${lost.length === 1 ? 'wraps' : 'wrap'} something not reached from what the call passes`;
      out.notes.push(`${at} (line ${file.source.line(site.call)}) is not followed: ${reason}`);
      unfollowed(reason);
      continue;
    }
    // Children indices point into the helper's calls: renumber them into this plan's (a wrap of a plan's names is
    // one call per entry).
    const positions = new Map<number, number[]>();
    const kept: WrapCall[] = [];
    live.forEach((c, i) => {
      const m = mapped[i]!;
      positions.set(
        helper.calls.indexOf(c),
        m.map((_, j) => out.calls.length + kept.length + j),
      );
      kept.push(...m);
    });
    live.forEach((c, i) => {
      for (const k of mapped[i]!) k.children = c.children.flatMap((x) => positions.get(x) ?? []);
    });
    out.calls.push(...kept);
    // The checkpointing the helper applies in the same function (`apply_activation_checkpointing(model)` before its
    // wraps): the file's job checkpoints.
    // Its tests of the helper's parameters are decided by what the call passes (`if args.ac:` of `args.ac`
    // false in the caller's config): one the call makes false never checkpoints from here.
    const ac = helper.checkpointing.flatMap((a) => {
      if (a.function !== site.fn || a.neverRuns) return [];
      const file = a.file ?? where;
      const holds = conditionsByCall(project, { file, line: a.line, callee: a.callee }, callSite).holds;
      if (holds === false) return [];
      const { undecided, offByDefault, ...rest } = a;
      const open =
        holds === true
          ? {}
          : { ...(undecided ? { undecided } : {}), ...(offByDefault ? { offByDefault } : {}) };
      return [{ ...rest, ...open, file, function: callerFunction(site.call) }];
    });
    // In this file's terms: made by the function that calls the helper.
    if (ac.length) (out.checkpointing ??= []).push(...ac);
    // The function of this file that makes the call: a helper of its own callers in turn.
    const within = enclosingFunction(site.call);
    const name = within ? qualifiedName(within) : null;
    if (within && name && !out.functions[name])
      out.functions[name] = functionFact(file.source, within, false);
    out.notes.push(
      `the wraps of ${at}, called at line ${file.source.line(site.call)}${site.chosenBy ? `, ${site.chosenBy}` : ''}`,
      ...helper.methodNotes.map((n) => `${rel}: ${n}`),
    );
  }
  return out;
}

/** A helper's file as notes show it: relative to the caller's folder, or by its place in site-packages. */
function shownPath(project: Project, from: string, where: string): string {
  const library = project.libraryOf(where);
  return library
    ? `${path.relative(library, where)} (installed)`
    : path.relative(path.dirname(from), where) || path.basename(where);
}

/** The facts of a class's file read for a cast site (see castMethods). */
function castMethodsFacts(project: Project, where: string): FileFacts {
  const file = project.file(where);
  return project.memo(`cast-facts:${where}`, () => scanFile(project.grammar, file!.source));
}

/**
 * Whether a call passes what may be the model: a variable the file builds a model into, a name that says so, or in
 * a helper, one of its parameters passed on.
 */
function passesModel(facts: FileFacts, call: Node, helper: boolean): boolean {
  const built = new Set(facts.models.map((m) => m.variable).filter((v): v is string => !!v));
  const within = helper ? enclosingFunction(call) : null;
  const params = new Set(within ? parameterNames(within) : []);
  return (call.childForFieldName('arguments')?.namedChildren ?? []).some((a) => {
    const v = a.type === 'keyword_argument' ? a.childForFieldName('value') : a;
    const name = v?.type === 'identifier' || v?.type === 'attribute' ? dottedText(v) : null;
    return !!name && (built.has(name) || params.has(name.split('.')[0]!) || /model|net|module/i.test(name));
  });
}

/** The most calls through a registry one file has read. */
const MAX_REGISTRY_CALLS = 16;

/**
 * Calls of a function taken from a dict by a key the file decides (`PARALLELIZE[args.dp](model)` with an argparse
 * default, or `fn = PARALLELIZE["fsdp"]` then `fn(model)`): the imported function the key selects. A key the file
 * does not decide is named in `notes`.
 */
function registrySites(file: PyFile, ev: Evaluator, notes: string[]): Site[] {
  const out: Site[] = [];
  const candidates: Node[] = [];
  for (const m of file.source.text.matchAll(/\]\s*\(/g)) {
    if (candidates.length >= MAX_REGISTRY_CALLS) break;
    const n = file.source.root.descendantForIndex(m.index, m.index + 1);
    const sub = n?.type === 'subscript' ? n : n && up(n)?.type === 'subscript' ? up(n) : null;
    const call = sub ? up(sub) : null;
    if (call?.type === 'call' && call.childForFieldName('function')?.id === sub!.id) candidates.push(call);
  }
  // `fn = PARALLELIZE[key]` on a line of its own, then `fn(model)`.
  const picked = new Set<string>();
  for (const m of file.source.text.matchAll(/^[ \t]*([A-Za-z_]\w*)\s*=\s*[A-Za-z_][\w.]*\[[^\]\n]+\]\s*$/gm))
    if (picked.size < MAX_REGISTRY_CALLS) picked.add(m[1]!);
  for (const name of picked)
    for (const id of file.source.identifiers(name)) {
      const call = up(id);
      if (
        candidates.length < MAX_REGISTRY_CALLS &&
        call?.type === 'call' &&
        call.childForFieldName('function')?.id === id.id
      )
        candidates.push(call);
    }
  for (const call of candidates) {
    const fn = call.childForFieldName('function')!;
    // The dict a name was taken from, for the note when its key is not known.
    const bound = fn.type === 'identifier' ? findBinding(file.source, fn.text, fn) : null;
    const taken = bound?.kind === 'assign' && bound.value?.type === 'subscript' ? bound.value : fn;
    const table = taken.childForFieldName('value');
    const before = ev.defaultsRead.length;
    const v = ev.eval(fn);
    const defaults = ev.defaultsRead.slice(before).map((d) => `${d.what} at line ${d.line}`);
    if (v.k === 'ref' && v.bound) {
      const dot = v.name.lastIndexOf('.');
      const chosenBy = `chosen by ${taken.text}${defaults.length ? ` (${[...new Set(defaults)].join(', ')}: a command line may change it)` : ''}`;
      if (dot > 0) out.push({ call, module: v.name.slice(0, dot), fn: v.name.slice(dot + 1), chosenBy });
    } else if (table && ev.eval(table).k === 'dict')
      notes.push(
        `${fn.text}(...) (line ${file.source.line(call)}) is not followed: the key ${taken.childForFieldName('subscript')?.text ?? ''} is not known statically`,
      );
  }
  return out;
}

interface Site {
  call: Node;
  module: string;
  /** The helper function, or `Class.method` for a method called on an instance of an imported class. */
  fn: string;
  /** The object a method is called on (`model` of `model.apply_fsdp(mesh)`), in the caller's names. */
  receiver?: string;
  /** How a function taken from a registry was chosen (`chosen by PARALLELIZE[args.dp] (the default of ...)`). */
  chosenBy?: string;
  /** The file that defines it, when already known (a cast's class). */
  where?: string;
}

/**
 * Calls of methods on the object `construct` builds and assigns to a name (`model = Model(cfg)`, then
 * `model.apply_fsdp(mesh)`), while that name still holds it.
 */
function methodSites(source: SourceFile, construct: Node, module: string, cls: string): Site[] {
  const assign = up(construct);
  const left = assign?.type === 'assignment' ? assign.childForFieldName('left') : null;
  if (left?.type !== 'identifier' || assign?.childForFieldName('right')?.id !== construct.id) return [];
  return methodCallsOn(source, left, assign.endIndex).map(({ call, method }) => ({
    call,
    module,
    fn: `${cls}.${method}`,
    receiver: left.text,
  }));
}

/**
 * The file that defines `fn` of `module` (a function, or `Class.method`) and its facts, following re-exports
 * (`from ._dist import shard_model` in the package's `__init__.py`).
 */
function definition(
  project: Project,
  from: string,
  module: string,
  fn: string,
  depth: number,
  stack: Set<string>,
): { where: string; helper: FileFacts } | undefined {
  let file = project.resolveModule(from, module);
  // `Model.apply_fsdp` is exported as `Model`.
  const exported = fn.split('.')[0]!;
  const word = new RegExp(`\\b${exported.replace(/[^\w]/g, '')}\\b`);
  for (let hop = 0; file && hop <= MAX_REEXPORTS; hop++) {
    const where = file;
    // Read before parsing: a file that never names the function neither defines nor re-exports it, and one that
    // mentions no FSDP API can only re-export it.
    const read = project.memo(`helper-text:${where}`, () => {
      const text = project.fs.readFile(where);
      return text === undefined ? null : { text, fsdp: mentionsFsdp(text) };
    });
    if (!read || !word.test(read.text)) return undefined;
    const text = read.text;
    // A file that mentions no FSDP API may still call a helper that wraps (a chain), for a function it defines.
    const chain = depth + 1 < MAX_CHAIN && !stack.has(path.resolve(where)) && !fn.includes('.');
    if (read.fsdp || chain) {
      const helper = project.memo(`helper-facts:${where}:${chain}`, () => {
        const f = project.file(where);
        if (!f) return null;
        const own = scanFile(project.grammar, f.source);
        if (!chain) return own;
        // Its own calls of helpers, placed at its calls, in its own names.
        const deeper = searchHelpers(project, own, depth + 1, new Set(stack));
        const offset = own.calls.length;
        return {
          ...own,
          calls: [
            ...own.calls,
            ...deeper.calls.map((c) => ({ ...c, children: c.children.map((i) => i + offset) })),
          ],
          functions: { ...deeper.functions, ...own.functions },
          // Checkpointing a deeper helper applies counts for the function of this file that calls it.
          checkpointing: [...own.checkpointing, ...(deeper.checkpointing ?? [])],
          methodNotes: [...own.methodNotes, ...deeper.notes.filter((n) => /is not followed/.test(n))],
        };
      });
      if (!helper) return undefined;
      if (helper.functions[fn] || helper.calls.some((c) => c.function === fn)) return { where, helper };
    }
    if (!/\bimport\b/.test(text)) return undefined;
    const reexport = project.file(where)?.imports.bindings.find((b) => b.local === exported && !b.isModule);
    const dot = reexport?.qualified.lastIndexOf('.') ?? -1;
    if (!reexport || dot <= 0 || reexport.qualified.slice(dot + 1) !== exported) return undefined;
    file = project.resolveModule(where, reexport.qualified.slice(0, dot));
  }
  return undefined;
}

/**
 * A helper's wrap call as the caller's: each path that starts at a parameter starts at the argument passed for it
 * (`model` in `apply_fsdp(model, mesh)`); placed at the caller's call. Null when the wrapped object is not reached
 * from a parameter the call passes by name or position.
 */
function remap(
  c: WrapCall,
  params: string[],
  call: Node,
  runs: Pick<WrapCall, 'neverRuns' | 'offByDefault'>,
  receiver?: string,
  ev?: Evaluator,
  rebound?: Record<string, OptionFact>,
): WrapCall | null {
  // A method called on an object binds its first parameter to the object and the arguments to the rest.
  if (receiver) params = params.slice(1);
  const argNode = (name: string): Node | undefined => argumentFor(call, params, name);
  const argFor = (name: string): string | null => {
    if (receiver && name === 'self') return receiver;
    const node = argNode(name);
    return node && (node.type === 'identifier' || node.type === 'attribute') ? dottedText(node) : null;
  };
  const paths: string[][] = [];
  for (const p of c.paths) {
    const head = p[0];
    if (!head || !(params.includes(head) || (receiver && head === 'self'))) return null;
    const arg = argFor(head);
    if (!arg) return null;
    paths.push([...arg.split('.'), ...p.slice(1)]);
  }
  if (!paths.length) return null;
  const alt = c.unlessRebound?.paths.map((p) => {
    const arg = p[0] ? argFor(p[0]) : null;
    return arg ? [...arg.split('.'), ...p.slice(1)] : null;
  });
  const range = rangeOf(call);
  const stmt = up(call)?.type === 'expression_statement' ? up(call)! : call;
  return {
    ...c,
    // What it wraps, in the caller's names (`model.model.layers.*`).
    target: paths.map((p) => p.join('.')).join(', '),
    targets:
      c.targets.length > 1 ? paths.map((p) => p.join('.')) : [paths.map((p) => p.join('.')).join(', ')],
    // Its own file and line (each wrap a unit of its own), placed at the caller's call.
    range,
    calleeRange: range,
    targetRange: null,
    argumentsEnd: null,
    paths,
    unlessRebound:
      alt && c.unlessRebound && alt.every((p) => p !== null)
        ? { ...c.unlessRebound, paths: alt as string[][] }
        : undefined,
    // The helper's root wrap of a method's `self`, called on each block of a loop, is a block's unit.
    ...(c.isRoot && paths.some((p) => p.includes('*')) ? { isRoot: false } : {}),
    statement: { start: stmt.startIndex, end: stmt.endIndex, range: rangeOf(stmt), indent: '' },
    loopStatement: null,
    // Options the helper passes on from its parameters (`reshard_after_forward=reshard`, `**fsdp_kwargs` of
    // them), read from what the call passes, and those it sets under a test of a parameter decided by it.
    options: ev ? optionsFromCall(rebound ?? c.options, params, argNode, ev) : c.options,
    // A class filter naming one of the helper's parameters (`isinstance(m, layer_cls)`) is the class the call
    // passes: decided module by module at the plan, not read as a class of that name.
    ...(c.classFilter?.some((n) => params.includes(n)) ? { classFilter: null } : {}),
    ...(c.classExclude?.some((n) => params.includes(n)) ? { classExclude: [] } : {}),
    // The helper's own loops and conditions are not the caller's: its options were read in its own scope.
    loop: null,
    loops: [],
    // The helper's own conditions were read in its scope; the call's are the caller's, and decide whether it runs.
    conditions: conditionsOf(call, enclosingFunction(call)),
    undecided: undefined,
    branch: branchPath(call, enclosingFunction(call)),
    ...runs,
    // The caller's function that makes the call: the helper it is, for its own callers.
    function: callerFunction(call),
  };
}

/**
 * A helper's wrap of the modules a plan names (`for path, reshard in plan: fully_shard(get_module(model, path),
 * reshard_after_forward=reshard)`), as the caller's: one wrap per entry of the plan the call passes, evaluated where
 * the call stands, each with its entry's `reshard_after_forward` when the wrap takes it from the entry. Null, with
 * the reason in `why`, when the plan is not known.
 */
function remapNamed(
  project: Project,
  facts: FileFacts,
  file: PyFile,
  c: WrapCall,
  params: string[],
  site: Site,
  runs: Pick<WrapCall, 'neverRuns' | 'offByDefault'>,
  ev: Evaluator,
  why: string[],
): WrapCall[] | null {
  const named = c.namedBy!;
  const arg = argumentFor(site.call, site.receiver ? params.slice(1) : params, named.param);
  const own = `\`${c.callee}(${oneLine(c.target, 40)})\` at line ${c.line} wraps the modules named by \`${named.param}\``;
  if (!arg) {
    why.push(`${own}, which the call does not pass`);
    return null;
  }
  const found = planEntries(project, facts, file, arg, named.place, planFallback(project, c, params, site));
  if ('reason' in found) {
    why.push(`${own}, and ${found.reason}`);
    return null;
  }
  const base = remap(
    { ...c, paths: [named.base] },
    params,
    site.call,
    runs,
    site.receiver,
    ev,
    boundOptions(project, c, params, site, ev),
  );
  if (!base?.paths[0]) return null;
  const root = base.paths[0];
  const option = c.options.reshard_after_forward;
  const place = option ? named.targets.indexOf(option.text) : -1;
  return found.entries.map((e) => {
    const path = [...root, ...e.name.split('.')];
    const text = path.join('.');
    const raf = place >= 0 ? reshardValue(e.parts[place]) : undefined;
    const options =
      option && raf !== undefined
        ? {
            ...base.options,
            reshard_after_forward: {
              ...option,
              value: raf,
              via: `the entry of "${e.name}" in ${oneLine(arg.text, 60)}`,
            },
          }
        : base.options;
    return { ...base, target: text, targets: [text], paths: [path], options, isRoot: false };
  });
}

/** The plan a helper makes itself where its call passes None for the plan (see PlanFallback), or undefined. */
function planFallback(project: Project, c: WrapCall, params: string[], site: Site): PlanFallback | undefined {
  const helper = project.file(c.file);
  const node = helper ? callAtLine(helper.source.root, c.line, c.callee) : null;
  const target = node
    ?.childForFieldName('arguments')
    ?.namedChildren.find((a) => a.type !== 'keyword_argument' && a.type !== 'comment');
  const found = helper && target ? namedByParameterNodes(helper.source, target) : null;
  if (!helper || !found?.fallback) return undefined;
  const own = site.receiver ? params.slice(1) : params;
  const passed = own.flatMap((name) => {
    const a = argumentFor(site.call, own, name);
    return a ? [{ name, node: a }] : [];
  });
  return { file: helper, expr: found.fallback, passed };
}

/**
 * A helper's wrap options read again with its parameters bound to what the call passes, in the caller's terms
 * (`mp_policy=MixedPrecisionPolicy(param_dtype=dtypes[distributed_args.model_dtype])` of `args.distributed`, a
 * config the caller reads): the options the helper computes from them. Undefined when the call passes nothing
 * known, or the wrap is not found.
 */
function boundOptions(
  project: Project,
  c: WrapCall,
  params: string[],
  site: Site,
  ev: Evaluator,
): Record<string, OptionFact> | undefined {
  const helper = project.file(c.file);
  const node = helper ? callAtLine(helper.source.root, c.line, c.callee) : null;
  const scope = node ? enclosingFunction(node) : null;
  if (!helper || !node || !scope || (c.function && qualifiedName(scope) !== c.function)) return undefined;
  const own = site.receiver ? params.slice(1) : params;
  const values = new Map<string, Value>();
  for (const name of own) {
    const arg = argumentFor(site.call, own, name);
    const v = arg ? ev.eval(arg) : undefined;
    if (v && v.k !== 'unknown' && v.k !== 'param') values.set(name, v);
  }
  if (!values.size) return undefined;
  const bound = new Evaluator(helper.source, helper.imports, undefined, {
    passed: { function: scope, values },
  });
  const api = c.api === 'fully_shard' ? 'fully_shard' : c.api === 'wrap' ? 'wrap' : 'FSDP';
  const read = readOptions(bound, readArgs(helper.source, node), api, ['module']).options;
  // What the helper's own reading knew stays; what it did not, the call's values may now say.
  const out: Record<string, OptionFact> = { ...c.options };
  for (const [k, o] of Object.entries(read)) {
    const before = c.options[k];
    if (!before || JSON.stringify(before.value) !== JSON.stringify(o.value))
      out[k] = {
        ...o,
        ...(before?.conditions ? { conditions: before.conditions } : {}),
        via: o.via ?? 'what the call passes',
      };
  }
  return out;
}

function callerFunction(call: Node): string | null {
  const fn = enclosingFunction(call);
  return fn ? qualifiedName(fn) : null;
}

/**
 * A small model every helper's loop can run over: a stack of blocks with a child each, named and classed as
 * real ones are.
 */
const PROBE: ModuleNode = (() => {
  const node = (name: string, path: string, className: string, children: ModuleNode[] = []): ModuleNode => ({
    name,
    path,
    className,
    params: [],
    buffers: [],
    children,
  });
  const block = (i: number) =>
    node(String(i), `layers.${i}`, 'Block', [node('mlp', `layers.${i}.mlp`, 'Linear')]);
  return node('', '', 'Model', [
    node('embed', 'embed', 'Embedding'),
    node('layers', 'layers', 'ModuleList', [block(0), block(1)]),
  ]);
})();

/**
 * A helper's loop tests, when they decide modules of a probe model (they read the module, not only what the call
 * passes): decided again on the real model once it is known.
 */
function decidedPerModule(
  project: Project,
  c: WrapCall,
  parameters: string[],
  site: CallSite,
): ModuleTest | undefined {
  const base = c.paths.find((p) => p.includes('**') || p.includes('*'));
  if (!base || !parameters.includes(base[0]!)) return undefined;
  const test = testPerModule(project, c, PROBE, [base[0]!], site);
  if (!test) return undefined;
  // Decided for some modules whatever the call passes (torchtune's layer test holds for `layers.N` whatever
  // names it is also given): followed, and the plan names the modules it cannot decide.
  return [...walkModules(PROBE)].some((m) => test.holds(m.path) !== undefined) ? test : undefined;
}

/** A helper wrap's options with those its parameters give read from the caller's arguments (see remap). */
function optionsFromCall(
  options: Record<string, OptionFact>,
  params: string[],
  argNode: (name: string) => Node | undefined,
  ev: Evaluator,
): Record<string, OptionFact> {
  const out: Record<string, OptionFact> = {};
  const param = (text: string) =>
    /^[A-Za-z_]\w*$/.test(text) && params.includes(text) ? argNode(text) : undefined;
  for (const [name, o] of Object.entries(options)) {
    // Set only under tests of parameters (`if cpu_offload:`): decided by what the call passes.
    let conditions = o.conditions;
    if (conditions?.length) {
      const decided = conditions.map((t) => {
        const m = /^(not\s+)?([A-Za-z_]\w*)$/.exec(t.trim());
        const node = m ? param(m[2]!) : undefined;
        const v = node ? truthy(ev.eval(node)) : undefined;
        return v === undefined ? undefined : m![1] ? !v : v;
      });
      if (decided.some((d) => d === false)) continue;
      if (decided.every((d) => d === true)) conditions = undefined;
    }
    const node = param(o.text);
    const value = node
      ? name === 'mesh' || name === 'device_mesh'
        ? meshOption(ev, node)
        : interpretOption(name, ev.eval(node))
      : o.value;
    const { conditions: _, ...rest } = o;
    out[name] = {
      ...rest,
      ...(node ? { text: node.text, value, via: `${o.text} of the call` } : {}),
      ...(conditions?.length ? { conditions } : {}),
    };
  }
  return out;
}
