/** The FSDP plan a file's wrap calls describe, mapped onto the model's modules in the order the calls run. */
import * as path from 'node:path';
import { takesPathWords } from '../vocabulary/commandLine';
import type { ShardingStrategyName, ReshardAfterForward } from '../vocabulary/fsdp';
import { exclusive, type FileFacts, type WrapCall } from '../analysis/facts';
import type { OffloadValue } from '../analysis/options';
import type { WrapPolicyValue } from '../analysis/wrapPolicy';
import type { ArchShape } from '../model/hf';
import { hasModuleNamed, moduleAt, type ModuleNode } from '../model/tree';
import type { Plan, UnitPlan } from '../estimator/types';
import { modelVariable } from '../analysis/paths';
import { listed, oneLine } from '../vocabulary/words';
import { defaultUnits, matchModules, unitsFromPolicy } from './policies';

function stripPrefix(path: string[], prefix: string[]): string[] | null {
  if (path.length < prefix.length) return null;
  for (let i = 0; i < prefix.length; i++) if (path[i] !== prefix[i]) return null;
  return path.slice(prefix.length);
}

/**
 * A path through PEFT's wrappers, as a path of the base model's tree. `get_peft_model` returns a `PeftModel` whose
 * `base_model` is the LoRA model and whose `base_model.model` is the model it adapts, so
 * `model.base_model.model.model.layers` names the base model's `model.layers`; the wrappers hold no parameters of
 * their own, so wrapping `model.base_model` is wrapping the whole model. Paths of a model that has a module named
 * `base_model` itself are left alone.
 */
function throughPeft(p: string[]): string[] {
  const i = p.indexOf('base_model', 1);
  if (i < 0) return p;
  return [...p.slice(0, i), ...p.slice(p[i + 1] === 'model' ? i + 2 : i + 1)];
}

/** A call's `reshard_after_forward`: its value, or `'unknown'` when written but not known statically. */
function reshardOf(c: WrapCall): ReshardAfterForward | 'unknown' {
  const o = c.options.reshard_after_forward;
  if (!o) return null;
  if (typeof o.value === 'boolean' || typeof o.value === 'number') return o.value;
  if (o.value === null && o.text === 'None') return null;
  return 'unknown';
}

/** Evaluates a wrap call's `reshard_after_forward` for one module it wraps in a loop (see reshardPerIteration). */
export type ReshardPerModule = (
  call: WrapCall,
  modelVariable: string[],
) => ((modulePath: string) => ReshardAfterForward | undefined) | undefined;

function offloadOf(c: WrapCall, notes: string[], where: string): boolean {
  const o = c.options.offload_policy ?? c.options.cpu_offload;
  const v = o?.value as OffloadValue | null | undefined;
  if (o && v === null && o.text !== 'None' && !o.conditions?.length) {
    // `cpu_offload=cpu_offload`, bound to `None if role == "actor" else CPUOffload(...)`: not taken as on.
    const name = c.options.offload_policy ? 'offload_policy' : 'cpu_offload';
    notes.push(`${where}: ${name}=${oneLine(o.text)} is not known statically; estimated without CPU offload`);
    return false;
  }
  if (!o || !v || typeof v !== 'object') return false;
  if (o.conditions?.length) {
    notes.push(`${where}: CPU offload only when ${o.conditions.join(' and ')}; estimated without it`);
    return false;
  }
  return v.offloadParams;
}

/**
 * The FSDP plan a file describes, mapped onto the model's modules: FSDP2 wrap calls in the order they run, an
 * FSDP1 auto-wrap policy applied as `wrap.py` does, or (no wrap call) one unit per decoder block plus the root.
 */
/**
 * The wrap calls the estimate follows: those that can run, on the default path (a call a default keeps from
 * running is left out). When every wrap is off by default (`if args.fsdp:`), the plan is the one those wraps make.
 */
export function callsThatRun(facts: FileFacts): WrapCall[] {
  const live = facts.calls.filter((c) => !c.incomplete && !c.neverRuns && !c.expandedAt);
  const onDefaultPath = live.filter((c) => !c.offByDefault);
  return onDefaultPath.length ? onDefaultPath : live;
}

/** The tests a wrap call's loop applies to each module (see modules/perModuleTest.ts), when it has any. */
export type TestPerModule = (
  call: WrapCall,
  modelVariable: string[],
) => { tests: string[]; holds: (modulePath: string) => boolean | undefined } | undefined;

/**
 * The wrap's paths on this model: those it names, or, when they name no module of the model and the paths as if a
 * rebinding under its own tests had not run do (`if hasattr(model, "module"): model = model.module`), those: on a
 * model without the attribute the rebinding reads, its test cannot hold on a run that reaches the wrap.
 */
function pathsOnThisModel(
  c: WrapCall,
  root: ModuleNode,
  prefix: string[],
  notes: string[],
  where: string,
): string[][] {
  const alt = c.unlessRebound;
  if (!alt) return c.paths;
  const found = (ps: string[][]) =>
    ps.every((p) => {
      const rel = stripPrefix(p, prefix);
      return !!rel && matchModules(root, rel, c.classFilter, c.classExclude).length > 0;
    });
  if (found(c.paths) || !found(alt.paths)) return c.paths;
  // Said once for each rebinding, at its first wrap.
  if (!notes.some((n) => n.includes(`: the rebinding at line ${alt.line}, under`)))
    notes.push(
      `${where}: the rebinding at line ${alt.line}, under \`${oneLine(alt.test, 80)}\`, cannot have run on this model, which has no ${c.paths.map((p) => `\`${p.join('.')}\``).join(', ')}: the wrap is read as of ${alt.paths.map((p) => p.join('.')).join(', ')}`,
    );
  return alt.paths;
}

export function planFromFacts(
  facts: FileFacts,
  root: ModuleNode,
  shape: ArchShape | undefined,
  file: string,
  perModule?: ReshardPerModule,
  testPerModule?: TestPerModule,
): Plan {
  const peft =
    facts.calls.some((c) => c.paths.some((p) => p.indexOf('base_model', 1) > 0)) &&
    !hasModuleNamed(root, 'base_model');
  const notes: string[] = [];
  /** Why the plan is not known (a wrap whose modules are undecided throughout), once one is found. */
  let planUnknown: string | undefined;
  /** An unconditional wrap naming a module the model lacks. */
  let missing: string | undefined;
  /** A wrap under tests naming a module the model lacks, and whether any non-root wrap names one it has. */
  let missingUnderTests: string | undefined;
  let namesAModule = false;
  /** `train.py:12`, or for a wrap of a helper in another file, that file and line. */
  const placeOf = (c: WrapCall) =>
    `${path.resolve(c.file) === path.resolve(facts.path) ? file : path.basename(c.file)}:${c.line}`;
  // A method's wrap of `self` that calls of the method expand is planned at those calls.
  const live = facts.calls.filter((c) => !c.incomplete && !c.neverRuns && !c.expandedAt);
  const onDefaultPath = live.filter((c) => !c.offByDefault);
  const chosen = callsThatRun(facts);
  for (const c of live)
    if (c.offByDefault)
      notes.push(
        onDefaultPath.length
          ? `${file}:${c.line}: ${c.callee}(${c.target}) is left out: ${c.offByDefault}; ${
              c.runsWith
                ? takesPathWords(c.runsWith)
                : "the script's arguments after `--` may take the other path"
            }`
          : `${file}:${c.line}: ${c.callee}(${c.target}) runs only off the default path (${c.offByDefault}); estimated as if it ran`,
      );
  // Wraps of one API in arms of an `if` the analysis cannot decide (`if strategy == "fine": ... else: ...`): one
  // plan runs, not both. The first arm's wraps are estimated, and the notes say which were left out.
  const inArms: WrapCall[] = [];
  const rivals = new Map<WrapCall, WrapCall>();
  // (Arms of a test inside the calls' loop are a choice per module, read module by module: no rivals.) Only calls
  // under tests are compared, each with the kept calls under tests: linear in the calls outside `if`s.
  const kept: { c: WrapCall; branch: WrapCall['branch'] }[] = [];
  // An arm whose wraps name modules the model has is the one that runs on it, over an earlier arm for a model of
  // other names (`if hasattr(model, "transformer"): ... model.transformer.h` then `else: ... model.model.layers`).
  const early =
    modelVariable(
      chosen,
      facts.models.map((m) => m.variable).filter((v): v is string => !!v),
    ) ?? [];
  const literalOf = (p: string[]) => {
    const rel = stripPrefix(p, early);
    const wild = rel ? rel.findIndex((x) => x === '*' || x === '**') : -1;
    return rel && (wild < 0 ? rel : rel.slice(0, wild));
  };
  const names = (literal: string[] | null) =>
    !!literal?.length && matchModules(root, literal, null).length > 0;
  // Fits: it names modules of the model, and none it lacks (a wrap of the model itself says nothing either way).
  const fits = (c: WrapCall) =>
    c.paths.some((p) => names(literalOf(p))) &&
    c.paths.every((p) => !literalOf(p)?.length || names(literalOf(p)));
  const misses = (c: WrapCall) => c.paths.some((p) => !!literalOf(p)?.length && !names(literalOf(p)));
  /** The arms chosen over an earlier one for that reason. */
  const preferred = new Set<WrapCall>();
  for (const c of chosen) {
    const branch = c.branch.filter((b) => !c.loopStatement || b.at < c.loopStatement.start);
    const rival = branch.length
      ? kept.find((k) => k.c.api === c.api && exclusive(k.branch, branch))?.c
      : undefined;
    if (rival && misses(rival) && fits(c) && !preferred.has(rival)) {
      // Every kept wrap of the other arms gives way to this one.
      for (const k of kept.filter((k) => k.c.api === c.api && exclusive(k.branch, branch))) {
        rivals.set(k.c, c);
        inArms.splice(inArms.indexOf(k.c), 1);
        kept.splice(kept.indexOf(k), 1);
      }
      preferred.add(c);
      inArms.push(c);
      kept.push({ c, branch });
    } else if (rival) rivals.set(c, rival);
    else {
      inArms.push(c);
      if (branch.length) kept.push({ c, branch });
    }
  }
  // The tests of the first arm, already named by the note on the arms.
  const armsSaid = new Set([...rivals.values()].map((r) => r.undecided?.join(' and ') ?? ''));
  // One note per test: the wraps of its first arm kept, those of the other arms left out.
  const byTest = new Map<string, { first: WrapCall; out: WrapCall[] }>();
  for (const [c, first] of rivals) {
    const key = first.undecided?.join(' and ') ?? placeOf(first);
    const g = byTest.get(key) ?? { first, out: [] };
    g.out.push(c);
    byTest.set(key, g);
  }
  for (const [test, g] of byTest)
    notes.push(
      `the wraps at ${listed([...new Set([g.first, ...g.out].map(placeOf))])} are in arms of an \`if\` the analysis cannot decide${g.first.undecided?.length ? ` (\`${oneLine(test, 80)}\`)` : ''}: ${preferred.has(g.first) ? `the arm whose modules the model has (${placeOf(g.first)}) is estimated, the others name modules it does not have` : `the first arm's (${placeOf(g.first)}) are estimated, the others left out`}`,
    );
  const calls = inArms.map((c) => (peft ? { ...c, paths: c.paths.map(throughPeft) } : c));
  if (!calls.length) {
    return {
      api: 'fsdp2',
      strategy: 'FULL_SHARD',
      units: defaultUnits(root, shape?.blockClass, 'default plan'),
      source: {
        kind: 'default',
        detail: 'no wrap call in the file: one unit per decoder block, then the root',
      },
      notes,
    };
  }
  const fsdp2 = calls.some((c) => c.api === 'fully_shard');
  const prefix =
    modelVariable(
      calls,
      facts.models.map((m) => m.variable).filter((v): v is string => !!v),
    ) ?? [];
  const units: UnitPlan[] = [];
  // In the order they run: by the call's place in this file (a helper's wraps at its call), then the helper's lines.
  const ordered = [...calls].sort(
    (a, b) =>
      a.range.start.line - b.range.start.line ||
      (path.resolve(a.file) === path.resolve(facts.path) ? 0 : a.line) -
        (path.resolve(b.file) === path.resolve(facts.path) ? 0 : b.line),
  );
  // FSDP1 and FSDP2 wraps both live: arms of an `if` the analysis cannot decide (`if strategy == "fsdp2":`).
  const fsdp1Calls = calls.filter((c) => c.api !== 'fully_shard');
  if (fsdp2 && fsdp1Calls.length) {
    const exclusiveArms = fsdp1Calls.every((a) =>
      calls.filter((b) => b.api === 'fully_shard').every((b) => exclusive(a.branch, b.branch)),
    );
    notes.push(
      `${exclusiveArms ? 'FSDP1 and FSDP2 wraps are in arms of an `if` the analysis cannot decide' : 'the file wraps with FSDP1 and with FSDP2'} (FSDP1 at ${[...new Set(fsdp1Calls.map(placeOf))].join(', ')}${exclusiveArms && fsdp1Calls[0]!.conditions.length ? `, when ${fsdp1Calls[0]!.conditions.join(' and ')}` : ''}): estimated as FSDP2`,
    );
  }
  let strategy: ShardingStrategyName = 'FULL_SHARD';
  let policyRoot: WrapCall | undefined;
  const undecidedSaid = new Set<string>();

  for (const c of ordered) {
    if (fsdp2 && c.api !== 'fully_shard') continue;
    const where = placeOf(c);
    // A helper's wrap (another file) keeps its own file and line: each of its calls is a unit of its own.
    const site = { file: c.file, line: c.line };
    if (c.api !== 'fully_shard') {
      const ss = c.options.sharding_strategy?.value;
      if (c.isRoot && typeof ss === 'string') strategy = ss as ShardingStrategyName;
      if (c.isRoot && c.options.auto_wrap_policy && !c.children.length) {
        policyRoot = c;
        continue;
      }
    }
    const raf = c.api === 'fully_shard' ? reshardOf(c) : null;
    const reshard = raf === 'unknown' ? null : raf;
    const offload = offloadOf(c, notes, where);
    // Tests the analysis cannot decide around the call (not arms of the two APIs, said above): taken as holding,
    // and said so, once for the wraps under the same tests.
    const undecidedTests =
      c.undecided?.length && !(fsdp2 && fsdp1Calls.length) ? c.undecided.join(' and ') : '';
    if (undecidedTests && !undecidedSaid.has(undecidedTests) && !armsSaid.has(undecidedTests)) {
      undecidedSaid.add(undecidedTests);
      notes.push(
        `${where}: ${c.callee}(${c.target}) runs only when ${c.undecided!.map((t) => `\`${oneLine(t, 80)}\``).join(' and ')}, which the analysis cannot decide; estimated as if it runs`,
      );
    }
    // A wrap of a parameter of a function that calls itself (on each child), or that is handed to another call to
    // run: the modules it wraps are those the recursion or that call passes, not the one its callers give.
    const fn = c.function ? facts.functions[c.function] : undefined;
    const ofParam = fn && c.paths.some((p) => fn.parameters.includes(p[0]!));
    if (ofParam && fn.recursive)
      planUnknown ??= `${where}: ${c.callee}(${c.target}) wraps a parameter of ${c.function}(), which calls itself: which modules it wraps is not followed`;
    if (ofParam && fn.handedTo)
      planUnknown ??= `${where}: ${c.callee}(${c.target}) runs in ${c.function}(), which is handed to \`${fn.handedTo}\`: the modules it wraps are those that call passes, not known statically`;
    const matched: string[][] = [];
    let callMissing = false;
    for (const p of pathsOnThisModel(c, root, prefix, notes, where)) {
      const rel = stripPrefix(p, prefix);
      if (!rel) {
        // Of an object computed from the model by a call the analysis does not follow (`lm = get_lm(model)`): a
        // part of the model whose place is not known, so neither is the plan.
        const head = p[0];
        if (head && prefix[0] && c.baseDerivedFrom?.includes(prefix[0]))
          planUnknown ??= `${where}: ${c.callee}(${c.target}) wraps a part of \`${prefix[0]}\` through \`${head}\`, which a call computes from it; where that part sits in the model is not known statically`;
        notes.push(`${where}: ${c.target} is not part of ${prefix.join('.') || 'the model'}; not counted`);
        continue;
      }
      const mods = matchModules(root, rel, c.classFilter, c.classExclude);
      if (!mods.length) {
        const named = [...prefix, ...rel].join('.');
        notes.push(`${where}: ${c.target} (${named}) matches no module of the model`);
        // A named attribute the model does not have (`model.layers` of a LlamaForCausalLM, whose blocks are at
        // `model.model.layers`), not kept off by a test that it exists (`if hasattr(model, "norm"):`;
        // `model.norm is not None` raises on a model without it). Where no test or `try` keeps the wrap off, the
        // code wraps a model of other module names than the one estimated. Under a test the arm may be one that
        // does not run on this model (`if isinstance(model, GPT2LMHeadModel):`), unless no wrap of the file names
        // a module the model has (below). A class filter that picks nothing, or an empty `**`, is the plan's own.
        const wild = rel.findIndex((s) => s === '*' || s === '**');
        const literal = wild < 0 ? rel : rel.slice(0, wild);
        const attr = literal.at(-1);
        const guarded =
          attr !== undefined && c.conditions.some((t) => t.includes(`"${attr}"`) || t.includes(`'${attr}'`));
        if (literal.length && !guarded && !matchModules(root, literal, null).length) {
          const why = `${where}: ${c.callee}(${c.target}) wraps \`${named}\`, which ${root.className || 'the model'} does not have: the code wraps a model with other module names than the one estimated`;
          if (!c.conditions.length && !c.undecided?.length && !c.inTry) {
            planUnknown ??= why;
            missing ??= why;
          } else missingUnderTests ??= why;
          callMissing = true;
        }
      }
      matched.push(mods);
    }
    // (A list wrap with one element missing raises as a whole: `[model.tok_embeddings, model.lm_head]`.)
    if (!c.isRoot && !callMissing && matched.some((m) => m.length)) namesAModule = true;
    let all = matched.flat();
    // A loop's own tests of each module (`if name.endswith("mlp"):`), evaluated module by module: only those
    // for which they hold are wrapped, and none is taken where they cannot be decided.
    const test = all.length ? testPerModule?.(c, prefix) : undefined;
    if (!test && c.pickedBy && all.length) {
      // A list picked under tests the plan cannot evaluate: none of its modules is taken as picked.
      const why = `${where}: ${c.callee}(${c.target}) wraps the modules a list holds where ${oneLine(c.pickedBy, 80)}, which is not evaluated here`;
      notes.push(`${why}; estimated without this wrap`);
      planUnknown ??= why;
      all = [];
    }
    if (test) {
      const verdicts = all.map((m) => test.holds(m));
      const unknown = all.filter((_, i) => verdicts[i] === undefined);
      const kept = all.filter((_, i) => verdicts[i] === true);
      const tests = test.tests.join(' and ');
      const some = (xs: string[]) =>
        `${xs
          .slice(0, 3)
          .map((x) => x || 'the model itself')
          .join(', ')}${xs.length > 3 ? ', …' : ''}`;
      // The shallowest first (the embedding and the head say more than a projection inside a block), the
      // model itself last.
      const depth = (m: string) => (m ? m.split('.').length : Infinity);
      const shallowFirst = (xs: string[]) => [...xs].sort((a, b) => depth(a) - depth(b));
      // Undecided for every module it may wrap: what the wrap adds is not known at all, so neither is the plan.
      if (unknown.length === all.length)
        planUnknown ??= `${where}: which modules ${c.callee}(${c.target}) wraps depends on ${tests}, which is not known statically for any of the ${all.length} modules it may wrap`;
      if (unknown.length)
        notes.push(
          `${where}: ${c.callee}(${c.target}) runs where ${tests}, which is not known statically for ${unknown.length} of ${all.length} modules (${some(shallowFirst(unknown))}); estimated without ${unknown.length === all.length ? 'this wrap' : 'those'}`,
        );
      else if (kept.length < all.length)
        notes.push(
          `${where}: ${tests} evaluated for each module: ${c.callee}(${c.target}) wraps ${kept.length} of ${all.length}${kept.length ? ` (${some(kept)})` : ''}`,
        );
      all = kept;
    }
    if (raf === 'unknown') {
      // Written per loop iteration (`int(layer_id) < len(model.layers) - 1`): evaluated for each module wrapped.
      const at = c.targets.length === 1 ? perModule?.(c, prefix) : undefined;
      const values = at && all.length ? all.map((m) => at(m)) : [];
      if (values.length && values.every((v) => v !== undefined)) {
        const kept = all.filter((_, i) => values[i] === false);
        notes.push(
          `${where}: reshard_after_forward=${c.options.reshard_after_forward!.text} evaluated for each module: ` +
            (kept.length
              ? `kept gathered after forward: ${kept.slice(0, 3).join(', ')}${kept.length > 3 ? ', …' : ''}`
              : 'all reshard'),
        );
        all.forEach((m, i) =>
          units.push({
            modules: [m],
            isRoot: m === '',
            reshardAfterForward: values[i] as ReshardAfterForward,
            offload,
            origin: where,
            site,
          }),
        );
        continue;
      }
      notes.push(
        `${where}: reshard_after_forward=${c.options.reshard_after_forward!.text} is not known statically; assumed the default (reshard unless root)`,
      );
    }
    if (!all.length) continue;
    const isRoot = all.length === 1 && all[0] === '';
    // FSDP1 with an auto_wrap_policy around a part (`FSDP(child, auto_wrap_policy=p)` per child): the policy wraps
    // inside each part as it does inside a root (`_recursive_wrap` over the part's children), the part a unit.
    const partPolicy = c.api !== 'fully_shard' && !isRoot ? c.options.auto_wrap_policy : undefined;
    if (partPolicy && c.targets.length === 1) {
      for (const m of all) {
        const part = moduleAt(root, m);
        if (!part) continue;
        const r = unitsFromPolicy(part, partPolicy.value as WrapPolicyValue | null, {
          fallbackClasses: shape ? [shape.blockClass] : [],
          origin: where,
          site,
          offload,
          reshardAfterForward: true,
        });
        // Its own root unit is the part itself, a unit of the plan like any other.
        units.push(
          ...r.units.map((u) =>
            u.isRoot ? { ...u, modules: [m], isRoot: false, reshardAfterForward: true } : u,
          ),
        );
        if (m === all[0]) notes.push(...r.notes.map((n) => `${where}: ${n} (inside each ${c.target})`));
      }
      continue;
    }
    if (c.targets.length > 1) {
      // fully_shard([a, b]) makes one unit of both.
      units.push({ modules: all, isRoot: false, reshardAfterForward: reshard, offload, origin: where, site });
    } else {
      for (const m of all)
        units.push({
          modules: [m],
          isRoot: m === '' || isRoot,
          reshardAfterForward: reshard,
          offload,
          origin: where,
          site,
        });
    }
  }

  if (!fsdp2) {
    // The root's strategy, else (each part wrapped on its own) the first wrap's.
    const root0 = policyRoot ?? ordered.find((c) => c.isRoot) ?? ordered.find((c) => c.api !== 'fully_shard');
    const option = root0?.options.sharding_strategy;
    const ss = option?.value;
    if (typeof ss === 'string') strategy = ss as ShardingStrategyName;
    // Passed but not read (`sharding_strategy=pick(cfg)`): FSDP's default is an assumption, and said to be one.
    else if (option && root0)
      notes.push(
        `${placeOf(root0)}: sharding_strategy=${option.text} is not known statically; estimated with FSDP1's default, FULL_SHARD (\`# fsdp: replicas=R\` or \`--replicas R\` models HYBRID_SHARD)`,
      );
    if (policyRoot) {
      const where = `${file}:${policyRoot.line}`;
      const policy = policyRoot.options.auto_wrap_policy?.value as WrapPolicyValue | null;
      const r = unitsFromPolicy(root, policy, {
        fallbackClasses: shape ? [shape.blockClass] : [],
        origin: where,
        site: { file: policyRoot.file, line: policyRoot.line },
        offload: offloadOf(policyRoot, notes, where),
        reshardAfterForward: true,
      });
      units.push(...r.units);
      notes.push(...r.notes.map((n) => `${where}: ${n}`));
    }
  }
  // Every non-root wrap names modules the model does not have: whichever arms run, the plan is not this model's.
  if (!namesAModule && missingUnderTests) planUnknown ??= missingUnderTests;
  const why = planUnknown;
  return {
    api: fsdp2 ? 'fsdp2' : 'fsdp1',
    strategy,
    units,
    source: { kind: 'detected', detail: placeOf(ordered[0]!) },
    notes,
    ...(why ? { unknown: why } : {}),
    ...(why && (why === missing || why === missingUnderTests) ? { unknownModel: true as const } : {}),
  };
}
