/**
 * The scan's constant evaluation: Python expressions of one file as far as they are statically known, each name
 * read from the binding visible where it is used (the last assignment before it in the same function, a
 * parameter whose every call site passes the same constant, the module's binding), dicts grown with `d[k] = v`
 * and `d.update(...)`, library calls kept as calls. The value model and its operators are src/core/python's;
 * this engine adds how names are found. Bounded in steps and depth per evaluation: pathological input yields
 * unknown values, never a hang or an exception.
 */
import { up } from '../parsing/python';
import { budget } from '../vocabulary/budget';
import type { Node } from '../parsing/python';
import type { SourceFile } from '../parsing/source';
import { callBuiltin } from '../python/builtins';
import { Expressions, kwargsOf } from '../python/expressions';
import { spent } from '../python/values';
import type { ImportTable } from '../python/imports';
import { truthy } from '../python/operators';
import { toPlain } from '../python/plain';
import * as path from 'node:path';
import {
  conditionParts,
  dottedText,
  enclosingFunction,
  findBinding,
  parameterNames,
  type Binding,
  type ConditionPart,
} from '../python/scope';
import { oneLine } from '../vocabulary/words';
import { fireArgs, fireValue, type FireArgs } from '../python/fireArgs';
import { fastcoreType, fastcoreValue } from '../python/fastcoreArgs';
import { lastSegment } from './options';
import { classifyApi } from './apis';
import { returnedValue } from './returns';
import { composeHydra } from './hydra';
import { fromDotlist } from '../python/dotlist';
import { optionDeclarations } from './scriptOptions';
import { sameKey, setEntry, UNKNOWN, type DictEntry, type DictV, type Value } from '../python/values';

/** The callee of a value that is a named slice of a device mesh (`mesh["dp"]`, `mesh["dp", "cp"]`). */
export const MESH_SLICE = 'DeviceMesh.__getitem__';
export interface EvalLimits {
  /** Nodes visited per top-level evaluation. */
  maxSteps: number;
  /** Nesting of name lookups and sub-expressions. */
  maxDepth: number;
}

const DEFAULT_LIMITS: EvalLimits = { maxSteps: 4000, maxDepth: 48 };

/** Methods of list, set and dict that change the container in place. */
const MUTATORS = new Set([
  'add',
  'append',
  'extend',
  'insert',
  'update',
  'setdefault',
  'pop',
  'popitem',
  'remove',
  'discard',
  'clear',
  'sort',
  'reverse',
  'difference_update',
  'intersection_update',
  'symmetric_difference_update',
  '__setitem__',
]);

/** Calls of these names are folded by the value model when their arguments are known. */
const LOOP_BUILTIN_LIMIT = 10_000;

export class Evaluator extends Expressions<null> {
  private steps = 0;
  private readonly active = new Set<number>();
  /** Times an evaluation was cut short (budget, depth or a cycle): a result reached that way depends on context. */
  private cutShort = 0;
  /** Parameters' values from their call sites, by function and name (each wrap call asks about the same ones). */
  private readonly callSiteValues = new Map<
    string,
    { v: Value | null; args: string[]; defaults: { what: string; line: number }[] }
  >();

  constructor(
    readonly file: SourceFile,
    readonly imports: ImportTable,
    private readonly limits: EvalLimits = DEFAULT_LIMITS,
    private readonly given: ScriptContext = {},
  ) {
    super();
    // The first of each file that can read the project's other files.
    const known = OWNERS.get(file.root.tree);
    if (!known || (!known.given.readDefinition && given.readDefinition)) OWNERS.set(file.root.tree, this);
  }

  /** The script's own command line, when given: argparse options take their values from it. */
  get argv(): readonly string[] | undefined {
    return this.given.argv;
  }

  /** The same file read with another command line (to see which path other arguments take). */
  withArgv(argv: readonly string[]): Evaluator {
    return new Evaluator(this.file, this.imports, this.limits, { ...this.given, argv });
  }

  /** The configuration files this evaluator read (`configs/train.yaml` of `yaml.safe_load(open(...))`). */
  readonly filesRead: string[] = [];

  /** The options this evaluator read from the given command line, as `--batch-size 8`. */
  readonly argsRead: string[] = [];

  /** Evaluates `node`; each call has its own step budget. */
  eval(node: Node): Value {
    this.steps = 0;
    this.depth = 0;
    return this.evaluate(node, null);
  }

  /** Evaluates a name as seen from `at` (the last binding before it). */
  evalName(name: string, at: Node): Value {
    this.steps = 0;
    this.depth = 0;
    return this.lookup(name, at);
  }

  protected guard(node: Node): Value | undefined {
    if (!budget().step()) {
      this.cutShort++;
      return spent(node.text);
    }
    if (++this.steps > this.limits.maxSteps) {
      this.cutShort++;
      return UNKNOWN(node.text, 'too complex to evaluate');
    }
    if (this.depth >= this.limits.maxDepth) {
      this.cutShort++;
      return UNKNOWN(node.text, 'nested too deeply');
    }
    return undefined;
  }

  protected name(node: Node): Value {
    return this.lookup(node.text, node);
  }

  protected attribute(base: Value, attr: string, node: Node): Value {
    if (base.k === 'ref') {
      // `train_config.model_name` of a config class itself (`from configs import train_config`): the field's
      // default is the class attribute, unless this file sets it (`train_config.lr = ...`, `setattr(...)`).
      const object = node.childForFieldName('object');
      if (base.bound && object?.type === 'identifier' && !this.classAttributeSet(object.text)) {
        const d = this.dataclassDefault(
          { k: 'call', callee: base.name, args: [], kwargs: {}, splats: [], node },
          attr,
          node,
        );
        if (d) return d;
      }
      return { k: 'ref', name: `${base.name}.${attr}`, bound: base.bound };
    }
    // `self.config` in a method: what the class's one assignment of it holds (`self.config = config` in __init__).
    if (base.k === 'param' && base.index === 0 && base.name === 'self') {
      const v = this.selfAttribute(node, attr);
      if (v) return v;
    }
    // `args.model` of `args = parser.parse_args()`: the option's default, which a command line may change.
    if (base.k === 'call' && lastSegment(base.callee) === 'parse_args' && !base.args.length) {
      const d = this.argparseDefault(attr);
      if (d) return d;
    }
    // `cfg.model` of `cfg = OmegaConf.merge(defaults, file_cfg, cli)`: the last layer that sets it.
    if (base.k === 'call' && isConfigCall(base.callee)) {
      const v = this.configLookup(base, attr, node);
      return v === 'absent' ? UNKNOWN(node.text, `no key ${attr} in the merged config`) : v;
    }
    // `cfg.batch_size` of `cfg = Config()`, a dataclass of this file: the field's default.
    if (base.k === 'call' && !(attr in base.kwargs)) {
      const d = this.dataclassDefault(base, attr, node);
      if (d) return d;
    }

    if (base.k === 'dict') {
      const e = base.entries.find((x) => x.key.k === 'str' && x.key.v === attr);
      if (e) return e.value;
    }
    if (base.k === 'call') {
      // An object built by keyword arguments (a config or a dataclass instance): its field, when passed.
      const v = base.kwargs[attr];
      if (v) return v;
    }
    const obj = node.childForFieldName('object');
    return UNKNOWN(node.text, `attribute of ${obj?.text ?? '?'}`);
  }

  protected item(base: Value, key: Value, node: Node): Value {
    // `world_mesh["tp"]` of a mesh from `init_device_mesh`: a slice of it, kept as such for the mesh readers.
    if (base.k === 'call' && classifyApi(base.callee)?.kind === 'init_device_mesh')
      return { k: 'call', callee: MESH_SLICE, args: [base, key], kwargs: {}, splats: [], node };
    if (base.k === 'call' && isConfigCall(base.callee) && key.k === 'str') {
      const v = this.configLookup(base, key.v, node);
      return v === 'absent' ? UNKNOWN(node.text, `no key ${key.v} in the merged config`) : v;
    }
    if (base.k === 'dict') {
      const e = base.entries.find((x) => sameKey(x.key, key));
      // A parameter `locals()` holds: read again, so that where its value comes from is recorded.
      return e ? this.entryValue(e) : UNKNOWN(node.text, 'key not found');
    }
    if (base.k === 'seq' && key.k === 'num' && key.int) {
      const i = key.v < 0 ? base.items.length + key.v : key.v;
      return base.items[i] ?? UNKNOWN(node.text, 'index out of range');
    }
    if (base.k === 'ref')
      return UNKNOWN(node.text, `an item of ${node.childForFieldName('value')?.text ?? '?'}`);
    return UNKNOWN(node.text, 'not a constant container');
  }

  /** A call: builtins that fold (int, min, max, ...) are folded; everything else is kept as a call value. */
  protected call(node: Node): Value {
    const fn = node.childForFieldName('function');
    if (!fn) return UNKNOWN(node.text, 'incomplete');
    const callee = fn.type === 'identifier' || fn.type === 'attribute' ? this.calleeName(fn) : fn.text;
    if (callee === 'locals' && fn.type === 'identifier' && !findBinding(this.file, 'locals', fn))
      return this.localsAt(node);
    const { args, keywords, splats } = this.callArguments(node.childForFieldName('arguments'), null);
    const kwargs = kwargsOf(keywords);
    const folded = callBuiltin(
      callee,
      { args, kwargs, keywords, splats },
      { iterate: (v) => this.iterate(v), maxRange: LOOP_BUILTIN_LIMIT },
      node.text,
    );
    const loaded = folded
      ? undefined
      : (this.loadedConfig(callee, args) ??
        this.environmentDefault(callee, args, node) ??
        this.dotlistConfig(callee, args, node));
    return folded ?? loaded ?? { k: 'call', callee, args, kwargs, splats, node };
  }

  /**
   * `os.environ.get("BATCH", "8")` / `os.getenv("BATCH", "8")`: the default, which the environment the job runs in
   * may change (said where it is read). Without a default the variable is unknown.
   */
  private environmentDefault(callee: string, args: Value[], node: Node): Value | undefined {
    if (callee !== 'os.environ.get' && callee !== 'os.getenv') return undefined;
    const [name, dflt] = args;
    if (name?.k !== 'str') return undefined;
    if (!dflt) return UNKNOWN(node.text, `the environment variable ${name.v}`);
    this.defaultsRead.push({ what: `the default of $${name.v}`, line: node.startPosition.row + 1 });
    return dflt;
  }

  /**
   * A configuration file the code loads by a path it writes (`yaml.safe_load(open("configs/train.yaml"))`,
   * `json.load(f)` of `with open(path) as f`, `OmegaConf.load(path)`, `tomllib.load(open(path, "rb"))`), as data,
   * when the analysis was given a reader of the project's files.
   */
  private loadedConfig(callee: string, args: Value[]): Value | undefined {
    const read = this.given.readData;
    if (!read) return undefined;
    const first = args[0];
    let file: string | undefined;
    if (
      LOADS_FROM_STREAM.has(callee) &&
      first?.k === 'call' &&
      first.callee === 'open' &&
      first.args[0]?.k === 'str'
    )
      file = first.args[0].v;
    else if (LOADS_FROM_PATH.has(callee) && first?.k === 'str') file = first.v;
    if (!file) return undefined;
    const data = read(file);
    if (data === undefined) return undefined;
    this.filesRead.push(file);
    return fromData(data, 0);
  }

  /**
   * `OmegaConf.from_cli()`: the script's command line as a config (`config=a.yaml model.dim=512`), unknown when the
   * analysis was not given it; `OmegaConf.from_dotlist([...])` and `OmegaConf.create({...})` of written values.
   */
  private dotlistConfig(callee: string, args: Value[], node: Node): Value | undefined {
    if (callee === 'omegaconf.OmegaConf.from_cli' || callee === 'omegaconf.OmegaConf.from_dotlist') {
      const items = callee.endsWith('from_cli') && !args.length ? this.argv : args[0] && stringItems(args[0]);
      if (!items)
        return UNKNOWN(
          node.text,
          callee.endsWith('from_cli')
            ? `the script's command line, which ${node.text} reads, was not given (give it after \`--\`, as \`-- config=PATH key=value\`, or in the script as \`# fsdp: args="config=PATH"\`)`
            : 'a dotlist not known statically',
        );
      const used: string[] = [];
      const data = fromDotlist(items, used);
      if (callee.endsWith('from_cli')) this.argsRead.push(...used);
      return fromData(data, 0);
    }
    if (callee === 'omegaconf.OmegaConf.create')
      return !args.length ? { k: 'dict', entries: [] } : args[0]?.k === 'dict' ? args[0] : undefined;
    return undefined;
  }

  /**
   * A key of an OmegaConf config made by merging layers (`OmegaConf.merge(OmegaConf.structured(Args()), file_cfg,
   * cli)`, omegaconf/omegaconf.py `OmegaConf.merge`): the value of the last layer that sets it, mappings merged key
   * by key, through `to_object`/`structured`/`to_container` views. 'absent' when no layer sets it; unknown when a
   * layer that may set it is not known.
   */
  private configLookup(v: Value, attr: string, node: Node, depth = 0): Value | 'absent' {
    if (depth > 8) return UNKNOWN(node.text, 'configs nested too deeply');
    if (v.k === 'dict') {
      const e = v.entries.find((x) => x.key.k === 'str' && x.key.v === attr);
      return e ? e.value : 'absent';
    }
    if (v.k !== 'call') return v.k === 'unknown' ? v : UNKNOWN(node.text, `attribute of ${v.k}`);
    if (CONFIG_VIEWS.has(v.callee))
      return v.args[0] ? this.configLookup(v.args[0], attr, node, depth + 1) : 'absent';
    if (v.callee === MERGE) {
      const found: Value[] = [];
      for (let i = v.args.length - 1; i >= 0; i--) {
        const r = this.configLookup(v.args[i]!, attr, node, depth + 1);
        if (r === 'absent') continue;
        // A layer that may set the key, not known: what it holds is not known either, but for the keys of the
        // mappings merged over it.
        if (r.k === 'unknown') {
          if (!found.length) return r;
          found.unshift(r);
          break;
        }
        if (!configLike(r)) return found.length ? merged(found, v.node) : r;
        found.unshift(r);
      }
      return found.length ? merged(found, v.node) : 'absent';
    }
    // A dataclass instance (`Args()`, a structured config): the argument passed, else the field's default.
    const given = v.kwargs[attr];
    if (given) return given;
    return this.dataclassDefault(v, attr, node) ?? UNKNOWN(node.text, `attribute of ${v.callee}(...)`);
  }

  private lookup(name: string, at: Node): Value {
    const binding = findBinding(this.file, name, at);
    if (!binding) {
      const fire = this.fireKeywords(name, at);
      if (fire) return fire;
      const q = this.imports.qualify(name);
      return { k: 'ref', name: q.qualified, bound: q.bound };
    }
    return this.fromBinding(name, binding, at);
  }

  private fromBinding(name: string, b: Binding, at: Node): Value {
    const key = b.name.startIndex;
    if (this.active.has(key)) {
      this.cutShort++;
      return UNKNOWN(name, 'defined in terms of itself');
    }
    this.active.add(key);
    try {
      switch (b.kind) {
        case 'assign':
          return this.armOf(name, b, at) ?? this.assigned(name, b, at);
        case 'param':
          return (
            this.passedParam(name, b) ??
            this.clickOption(name, b) ??
            this.fireParameter(name, b) ??
            this.callParseParameter(name, b) ??
            this.hydraConfig(b) ??
            this.fromCallSitesOnce(name, b) ?? {
              k: 'param',
              name,
              function: b.function.childForFieldName('name')?.text ?? '',
              index: b.index,
              default: b.default ? this.evaluate(b.default, null) : null,
            }
          );
        case 'loop':
          return UNKNOWN(name, 'a loop variable');
        case 'with':
          return this.evaluate(b.value, null);
        case 'def':
        case 'class':
          return { k: 'ref', name, bound: true };
      }
    } finally {
      this.active.delete(key);
    }
  }

  /**
   * Whether `name`, bound in `b`'s scope, is changed in place in another scope of the file (or, `anyScope`, in
   * any): a mutating method
   * called on it (`add`, `update`, `append`...), an item set or deleted, an augmented assignment, or a `global`
   * statement that lets a function rebind it.
   */
  private mutatedElsewhere(name: string, b: Binding & { kind: 'assign' }, anyScope: boolean): boolean {
    const scope = b.scope?.id ?? null;
    // The same object: the name as read there is this binding (another function's own `kwargs` is another dict).
    const same = (id: Node) => {
      const r = findBinding(this.file, name, id);
      return r?.kind === 'assign' && r.statement.startIndex === b.statement.startIndex;
    };
    return this.file.memo(`mutated-elsewhere:${name}:${b.statement.startIndex}:${anyScope}`, () =>
      this.file.identifiers(name).some((id) => {
        if (!anyScope && (enclosingFunction(id)?.id ?? null) === scope) return false;
        const p = up(id);
        if (!p) return false;
        // `global NAME` / `nonlocal NAME` let a function rebind a name of the module or of an enclosing function.
        if (p.type === 'global_statement') return scope === null;
        if (p.type === 'nonlocal_statement') return scope !== null;
        if (p.type === 'augmented_assignment' && p.childForFieldName('left')?.id === id.id)
          return (enclosingFunction(id)?.id ?? null) === scope;
        if (p.type === 'subscript' && p.childForFieldName('value')?.id === id.id) {
          const q = up(p);
          return (
            (((q?.type === 'assignment' || q?.type === 'augmented_assignment') &&
              q.childForFieldName('left')?.id === p.id) ||
              q?.type === 'delete_statement') &&
            same(id)
          );
        }
        if (p.type === 'attribute' && p.childForFieldName('object')?.id === id.id) {
          const method = p.childForFieldName('attribute')?.text ?? '';
          const call = up(p);
          return (
            call?.type === 'call' &&
            call.childForFieldName('function')?.id === p.id &&
            MUTATORS.has(method) &&
            same(id)
          );
        }
        return false;
      }),
    );
  }

  /** The defaults this evaluator read for values (argparse options, dataclass fields): what they were and where. */
  readonly defaultsRead: { what: string; line: number }[] = [];

  /**
   * The default of the `add_argument` option whose destination is `dest`, as argparse computes it: `default=`
   * (a string default passed through `type=`, as argparse.ArgumentParser._get_values does for string defaults),
   * else False for `store_true`, True for `store_false`, None otherwise. Undefined when no option of the file has
   * that destination, or several disagree.
   */
  private argparseDefault(dest: string): Value | undefined {
    const found: { v: Value; option: string; line: number }[] = [];
    for (const { call, names, kw } of optionDeclarations(this.file)) {
      const explicit = kw('dest');
      const long = names.find((n) => n.startsWith('--'));
      const d =
        explicit?.type === 'string'
          ? explicit.text.replace(/^['"]|['"]$/g, '')
          : (long ?? names.find((n) => !n.startsWith('-')) ?? names[0] ?? '')
              .replace(/^-+/, '')
              .replace(/-/g, '_');
      if (d !== dest) continue;
      const action = kw('action')?.text.replace(/^['"]|['"]$/g, '');
      const type = kw('type')?.text;
      const given = this.argv ? fromArgv(this.argv, names, action) : undefined;
      if (given) {
        const v = typed(given.value, type);
        this.argsRead.push(given.text);
        return v;
      }
      const dflt = kw('default');
      let v: Value = dflt
        ? this.evaluate(dflt, null)
        : action === 'store_true'
          ? { k: 'bool', v: false }
          : action === 'store_false'
            ? { k: 'bool', v: true }
            : { k: 'none' };
      // A string default goes through `type=` too (argparse.ArgumentParser._get_values).
      v = typed(v, type);
      found.push({ v, option: long ?? names[0] ?? dest, line: call.startPosition.row + 1 });
    }
    const first = found[0];
    if (!first || found.some((f) => JSON.stringify(toPlain(f.v)) !== JSON.stringify(toPlain(first.v))))
      return undefined;
    this.defaultsRead.push({ what: `the default of ${first.option}`, line: first.line });
    return first.v;
  }

  /**
   * The class a call constructs, where the evaluator can read it: a class of this file, or one another file of the
   * project defines (`from pkg.configs import train_config`), with an evaluator of that file.
   */
  private classOf(callee: string): { ev: Evaluator; def: Node } | undefined {
    if (/^\w+$/.test(callee)) {
      const def = this.file
        .identifiers(callee)
        .map((id) => up(id))
        .find((p) => p?.type === 'class_definition' && p.childForFieldName('name')?.text === callee);
      if (def) return { ev: this, def };
    }
    const read = this.given.readDefinition;
    if (!read || (this.given.hops ?? 0) >= MAX_HOPS || !callee.includes('.')) return undefined;
    const found = read(callee, 'class');
    return found ? { ev: this.foreign(found), def: found.node } : undefined;
  }

  /**
   * The definition of the project function a call's callee names, with an evaluator of its file that reads its
   * parameters as `values` (the call's arguments, in the caller's terms): a function of this file, or of another
   * file of the project. Undefined for library calls and past the hop limit.
   */
  functionFor(
    call: Value & { k: 'call' },
    bind: (def: Node, defaults: Evaluator) => ReadonlyMap<string, Value> | undefined,
  ): { def: Node; ev: Evaluator } | undefined {
    // The call's own file: a value returned by a helper of another file is read there.
    const owner = call.node.tree === this.file.root.tree ? this : OWNERS.get(call.node.tree);
    if (owner !== this) return owner?.functionFor(call, bind);
    if ((this.given.inlined ?? 0) >= MAX_INLINED) return undefined;
    const fn = call.node.childForFieldName('function');
    if (!fn) return undefined;
    const local = fn.type === 'identifier' ? findBinding(this.file, fn.text, fn) : undefined;
    let target: { def: Node; home: Evaluator } | undefined;
    if (local?.kind === 'def' && local.definition.type === 'function_definition')
      target = { def: local.definition, home: this };
    else if (!local && (this.given.hops ?? 0) < MAX_HOPS) {
      // A name of no binding or import may come from a star import (`from pkg.policies import *`): the last one.
      const names = call.callee.includes('.')
        ? [call.callee]
        : this.imports.wildcards.map((w) => `${w.module}.${call.callee}`).reverse();
      for (const q of names) {
        const found = this.given.readDefinition?.(q, 'def');
        if (found?.node.type !== 'function_definition') continue;
        target = { def: found.node, home: this.foreign(found) };
        break;
      }
    }
    if (!target) return undefined;
    const { def, home } = target;
    const values = bind(def, home);
    if (!values) return undefined;
    return {
      def,
      ev: new Evaluator(home.file, home.imports, home.limits, {
        ...home.given,
        passed: { function: def, values },
        inlined: (this.given.inlined ?? 0) + 1,
      }),
    };
  }

  /** The value an assignment binds: its right side, read through updaters and changes made in place. */
  private assigned(name: string, b: Binding & { kind: 'assign' }, at: Node): Value {
    const right = b.value ?? unpackedFrom(b.statement, b.name);
    if (!right) return this.unpackedReturn(b) ?? UNKNOWN(name, 'unpacked from a sequence');
    let v = this.evaluate(right, null);
    // `update_config(cfg, **kwargs)` between the binding and the read sets the fields the keywords name.
    if (v.k === 'call') v = this.updated(name, v, b, at);
    // A list, set or dict changed in place in another function (`NAMES.update(...)` in a setup function)
    // holds, when this code runs, whatever those calls put in it: not the value it was bound to.
    // (A dict's own scope is read by grownDict; a list or set changed anywhere is not followed.)
    if (v.k === 'seq' && v.kind === 'list') {
      const grown = this.grownList(name, v, b, at);
      if (grown) return grown;
    }
    if ((v.k === 'seq' || v.k === 'dict') && this.mutatedElsewhere(name, b, v.k === 'seq'))
      return UNKNOWN(name, `changed in place elsewhere (${name} is a mutable container)`);
    return v.k === 'dict' ? this.grownDict(name, v, b, at) : v;
  }

  /**
   * A name bound in an arm of an `if` the read is not in (`if s == "full": strategy = FULL_SHARD elif ...`): the
   * binding runs only when the arm's tests hold. Known to hold: undefined (the binding's own value stands). Known
   * not to: the binding before it. Not known: the value when every binding it may be agrees, else unknown, with the
   * test that decides it. Arms whose alternatives all raise are no choice.
   */
  private armOf(name: string, b: Binding & { kind: 'assign' }, at: Node): Value | undefined {
    const readUnder = new Set(conditionParts(at, null).map((c) => `${c.node.id}:${c.negated}`));
    const tests = conditionParts(b.statement, null).filter(
      (c) => !c.othersRaise && !readUnder.has(`${c.node.id}:${c.negated}`),
    );
    if (!tests.length) return undefined;
    let open: ConditionPart | undefined;
    for (const c of tests) {
      const t = truthy(this.evaluate(c.node, null));
      if (t === undefined) open ??= c;
      else if (t === c.negated) return this.before(name, b, at);
    }
    if (!open) return undefined;
    const mine = this.assigned(name, b, at);
    const other = this.before(name, b, at);
    if (mine.k !== 'unknown' && JSON.stringify(toPlain(mine)) === JSON.stringify(toPlain(other))) return mine;
    const test = open.negated ? `not (${open.node.text})` : open.node.text;
    return UNKNOWN(name, `set where ${oneLine(test, 60)}, which is not known statically`);
  }

  /** The value a name has where `b` is reached without running it: the binding before it, or unknown. */
  private before(name: string, b: Binding & { kind: 'assign' }, at: Node): Value {
    const prev = findBinding(this.file, name, b.statement);
    if (!prev || prev.name.startIndex >= b.name.startIndex) return UNKNOWN(name, 'not bound on every path');
    return this.fromBinding(name, prev, at);
  }

  /**
   * `a, b = helper(...)` of a project function that returns a tuple of that length (`return mixed, wrapping`): the
   * item at the name's place, as the function's body returns it.
   */
  private unpackedReturn(b: Binding & { kind: 'assign' }): Value | undefined {
    const st = b.statement;
    const left = st.type === 'assignment' ? st.childForFieldName('left') : null;
    const right = st.childForFieldName('right');
    if (right?.type !== 'call' || (left?.type !== 'pattern_list' && left?.type !== 'tuple_pattern'))
      return undefined;
    const names = left.namedChildren.filter((c) => c.type !== 'comment');
    const i = names.findIndex((c) => c.id === b.name.id);
    if (i < 0 || names.some((c) => c.type !== 'identifier')) return undefined;
    const v = this.evaluate(right, null);
    const r = v.k === 'call' ? returnedValue(this, v) : undefined;
    return r?.value.k === 'seq' && r.value.items.length === names.length ? r.value.items[i] : undefined;
  }

  private readonly foreigners = new Map<string, Evaluator>();

  /** An evaluator of another file of the project, one per file, a hop further from the script. */
  private foreign(d: ForeignDefinition): Evaluator {
    let ev = this.foreigners.get(d.source.path);
    if (!ev) {
      const { readDefinition, readData } = this.given;
      ev = new Evaluator(d.source, d.imports, this.limits, {
        ...(readDefinition ? { readDefinition } : {}),
        ...(readData ? { readData } : {}),
        hops: (this.given.hops ?? 0) + 1,
      });
      this.foreigners.set(d.source.path, ev);
    }
    return ev;
  }

  /**
   * A field's default of a `@dataclass` (or pydantic) class constructed without it (`Config()`): `x: int = 4`, or
   * `field(default=4)`; the class of this file or of another file of the project. Undefined for other classes,
   * fields without a default and `default_factory` of a function.
   */
  private dataclassDefault(call: Value & { k: 'call' }, attr: string, at?: Node): Value | undefined {
    if (call.args.length) return undefined;
    const cls = this.classOf(call.callee);
    if (!cls || !isConfigClass(cls.def)) return undefined;
    const { ev, def } = cls;
    const name = def.childForFieldName('name')?.text ?? call.callee;
    for (const stmt of def.childForFieldName('body')?.namedChildren ?? []) {
      const a = stmt.type === 'expression_statement' ? stmt.namedChildren[0] : null;
      if (a?.type !== 'assignment' || a.childForFieldName('left')?.text !== attr) continue;
      const right = a.childForFieldName('right');
      if (!right) return undefined;
      let v = ev === this ? this.evaluate(right, null) : ev.eval(right);
      // `field(default=4)` of dataclasses, `Field(default=4)` / `Field(4)` of pydantic.
      if (v.k === 'call' && (lastSegment(v.callee) === 'field' || lastSegment(v.callee) === 'Field')) {
        const factory = v.kwargs.default_factory;
        // `field(default_factory=DataArgs)`: an instance of that class, built with its own defaults.
        const d =
          v.kwargs.default ??
          (lastSegment(v.callee) === 'Field' ? v.args[0] : undefined) ??
          (factory?.k === 'ref' && /^[A-Z]\w*$/.test(lastSegment(factory.name))
            ? ({ k: 'call', callee: factory.name, args: [], kwargs: {}, splats: [], node: right } as Value)
            : undefined);
        if (!d) return undefined;
        v = d;
      }
      const line = a.startPosition.row + 1;
      if (ev === this) this.defaultsRead.push({ what: `the default of ${name}.${attr}`, line });
      else
        this.defaultsRead.push({
          what: `the default of ${name}.${attr} at ${path.relative(path.dirname(this.file.path), ev.file.path)}:${line}`,
          line: (at ?? call.node).startPosition.row + 1,
        });
      return v;
    }
    return undefined;
  }

  /** Whether this file assigns an attribute of `name` or hands it to `setattr` (a class read for its defaults). */
  private classAttributeSet(name: string): boolean {
    // Asked at every attribute read of a name (`torch.nn...` too): searched once per name and file.
    return this.file.memo(`class-attribute-set:${name}`, () => this.searchClassAttributeSet(name));
  }

  private searchClassAttributeSet(name: string): boolean {
    const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    return new RegExp(
      `(^|[^\\w.])${escaped}\\.\\w+\\s*(=[^=]|[+*/-]=)|setattr\\(\\s*${escaped}\\b`,
      'm',
    ).test(this.file.text);
  }

  /** The fields a config class declares (`name: type = default`, `name = default`), for what setattr may change. */
  private fieldsOf(callee: string): { name: string; fields: Set<string> } | undefined {
    const cls = this.classOf(callee);
    if (!cls || !isConfigClass(cls.def)) return undefined;
    const fields = new Set<string>();
    for (const stmt of cls.def.childForFieldName('body')?.namedChildren ?? []) {
      const a = stmt.type === 'expression_statement' ? stmt.namedChildren[0] : null;
      const left = a?.type === 'assignment' ? a.childForFieldName('left') : null;
      if (left?.type === 'identifier') fields.add(left.text);
    }
    return { name: cls.def.childForFieldName('name')?.text ?? callee, fields };
  }

  /**
   * A config object as a call of an updater leaves it (`update_config(cfg, **kwargs)`, `update_config((train_cfg,
   * fsdp_cfg), **kwargs)` of llama-recipes and its descendants): a function that sets, for each `k, v` of its
   * `**` parameter's items, `setattr(config, k, v)`. Each keyword that names a field of the object's class (or
   * `Class.field`) is set; keywords not known make every field unknown. Calls between the binding and `at`, in
   * its scope, are read; anything else is left as bound.
   */
  private updated(name: string, v: Value & { k: 'call' }, b: Binding & { kind: 'assign' }, at: Node): Value {
    const from = b.statement.endIndex;
    if (at.startIndex <= from) return v;
    let out = v;
    for (const { call, splat } of this.updaterCalls(name, b)) {
      if (call.startIndex >= at.startIndex) break;
      const fields = this.fieldsOf(v.callee);
      if (!fields) continue;
      const given = this.evaluate(splat.namedChild(0)!, null);
      if (given.k !== 'dict')
        return UNKNOWN(
          name,
          `${call.text.slice(0, 80)} may set its fields, with keywords not known statically`,
        );
      const kwargs = { ...out.kwargs };
      for (const e of given.entries) {
        if (e.key.k !== 'str') continue;
        const [head, field, extra] = e.key.v.split('.');
        const f =
          field === undefined ? head! : head === fields.name && extra === undefined ? field : undefined;
        if (f && fields.fields.has(f)) kwargs[f] = e.value;
      }
      out = { ...out, kwargs };
    }
    return out;
  }

  /**
   * The calls of updaters that pass the object `name` is bound to by `b` (`update_config(cfg, **kwargs)`), in its
   * scope after the binding, in order; found once per binding (a file without `**` has none).
   */
  private updaterCalls(name: string, b: Binding & { kind: 'assign' }): { call: Node; splat: Node }[] {
    if (!this.file.memo('has-dict-splat', () => /\*\*\s*[A-Za-z_]/.test(this.file.text))) return [];
    return this.file.memo(`updater-calls:${name}:${b.statement.startIndex}`, () => {
      const scope = b.scope?.id ?? null;
      const end = b.scope ? b.scope.endIndex : this.file.text.length;
      const out: { call: Node; splat: Node }[] = [];
      for (const id of this.file.identifiers(name, b.statement.endIndex, end)) {
        if (out.length >= 8) break;
        let p = up(id);
        if (p?.type === 'tuple' || p?.type === 'list') p = up(p);
        const call = p?.type === 'argument_list' ? up(p) : null;
        if (call?.type !== 'call') continue;
        const splat = p!.namedChildren.find((a) => a.type === 'dictionary_splat');
        const fn = call.childForFieldName('function');
        if (!splat || !fn || (enclosingFunction(id)?.id ?? null) !== scope || !this.isUpdater(fn)) continue;
        out.push({ call, splat });
      }
      return out;
    });
  }

  /** Whether a callee is a function that sets attributes from its `**` parameter's items by `setattr`. */
  private isUpdater(fn: Node): boolean {
    const callee = this.calleeName(fn);
    const def =
      fn.type === 'identifier' && findBinding(this.file, fn.text, fn)?.kind === 'def'
        ? (findBinding(this.file, fn.text, fn) as Binding & { kind: 'def' }).definition
        : this.given.readDefinition?.(callee, 'def')?.node;
    if (!def) return false;
    const params = def.childForFieldName('parameters')?.namedChildren ?? [];
    const kw = params.find((x) => x.type === 'dictionary_splat_pattern')?.namedChild(0)?.text;
    if (!kw) return false;
    // `for k, v in kwargs.items(): ... setattr(config, k, v)`.
    return def.descendantsOfType('for_statement').some((loop) => {
      const names = loop.childForFieldName('left')?.namedChildren.map((n) => n.text) ?? [];
      const over = loop.childForFieldName('right');
      if (names.length !== 2 || over?.type !== 'call' || over.text.replace(/\s/g, '') !== `${kw}.items()`)
        return false;
      return loop.descendantsOfType('call').some((c) => {
        const args = c.childForFieldName('arguments')?.namedChildren ?? [];
        return (
          c.childForFieldName('function')?.text === 'setattr' &&
          args.length === 3 &&
          args[1]!.text === names[0] &&
          args[2]!.text === names[1]
        );
      });
    });
  }

  /** The functions this file hands to `fire.Fire(fn)` at module level, by name. */
  private fireTargets(): Map<string, Node> {
    return this.file.memo('fire-targets', () => {
      const out = new Map<string, Node>();
      if (!this.file.text.includes('Fire')) return out;
      for (const id of this.file.identifiers('Fire')) {
        const p = up(id);
        const callee = p?.type === 'attribute' && p.childForFieldName('attribute')?.id === id.id ? p : id;
        const call = up(callee);
        if (call?.type !== 'call' || call.childForFieldName('function')?.id !== callee.id) continue;
        if (enclosingFunction(call) || this.calleeName(callee) !== 'fire.Fire') continue;
        const arg = call.childForFieldName('arguments')?.namedChildren[0];
        if (arg?.type === 'identifier') out.set(arg.text, call);
      }
      return out;
    });
  }

  /** The command line as fire splits it for `fn`, or undefined when fire does not call `fn`. */
  private fireSplit(fn: Node): { args: FireArgs; params: string[]; call: Node } | undefined {
    if (!this.fireTargets().size) return undefined;
    if (enclosingFunction(fn) || up(up(fn))?.type === 'class_definition') return undefined;
    const own = fn.childForFieldName('name')?.text;
    const call = own ? this.fireTargets().get(own) : undefined;
    if (!call) return undefined;
    const params = parameterNames(fn);
    const varkw = (fn.childForFieldName('parameters')?.namedChildren ?? []).some(
      (x) => x.type === 'dictionary_splat_pattern',
    );
    return { args: fireArgs(this.argv ?? [], params, varkw), params, call };
  }

  /**
   * A parameter of a function the file hands to `fire.Fire(main)`: the command line's `--name value` (a literal, or
   * a bare word as a string), else the next value not taken by a keyword, else its default.
   */
  private fireParameter(name: string, b: Binding & { kind: 'param' }): Value | undefined {
    const split = this.fireSplit(b.function);
    if (!split) return undefined;
    const given = split.args.keywords.get(name);
    if (given) {
      this.argsRead.push(given.text);
      return fireValue(given.raw);
    }
    const free = split.params.filter((p) => !split.args.keywords.has(p));
    const raw = split.args.positional[free.indexOf(name)];
    if (raw !== undefined) {
      this.argsRead.push(raw);
      return fireValue(raw);
    }
    if (!b.default)
      return UNKNOWN(
        name,
        `--${name}, which fire.Fire(${split.call.namedChildren[1]?.text ?? ''}) reads from the command line`,
      );
    this.defaultsRead.push({ what: `the default of --${name}`, line: b.default.startPosition.row + 1 });
    return this.evaluate(b.default, null);
  }

  /** `kwargs` of `def main(**kwargs)` that fire calls: the command line's keywords no named parameter takes. */
  private fireKeywords(name: string, at: Node): Value | undefined {
    if (!this.fireTargets().size) return undefined;
    const fn = enclosingFunction(at);
    const params = fn?.childForFieldName('parameters')?.namedChildren ?? [];
    if (!fn || params.find((x) => x.type === 'dictionary_splat_pattern')?.namedChild(0)?.text !== name)
      return undefined;
    const split = this.fireSplit(fn);
    if (!split) return undefined;
    const entries: DictEntry[] = [];
    for (const [key, { raw, text }] of split.args.keywords) {
      if (split.params.includes(key)) continue;
      this.argsRead.push(text);
      entries.push({ key: { k: 'str', v: key }, value: fireValue(raw) });
    }
    return { k: 'dict', entries };
  }

  /**
   * A parameter of a click command (`@click.option("--batch-size", default=8)` above `def main(batch_size)`): click
   * passes the option's value, from the command line when given, else its `default` (None without one; False for
   * an `is_flag` option). Undefined for a parameter no option of the function names.
   */
  /**
   * The first parameter of a function decorated `@hydra.main(config_path="conf", config_name="train")`: the
   * config Hydra composes from `conf/train.yaml` and its defaults list (see hydra.ts), read from the project.
   */
  private hydraConfig(b: Binding & { kind: 'param' }): Value | undefined {
    const read = this.given.readData;
    const decorated = up(b.function);
    if (!read || b.index !== 0 || decorated?.type !== 'decorated_definition') return undefined;
    for (const d of decorated.namedChildren) {
      const call = d.type === 'decorator' ? d.namedChild(0) : null;
      const fn = call?.type === 'call' ? call.childForFieldName('function') : null;
      if (!fn || this.calleeName(fn) !== 'hydra.main') continue;
      const kwargs = kwargsOf(this.callArguments(call!.childForFieldName('arguments'), null).keywords);
      const dir = kwargs.config_path;
      const name = kwargs.config_name;
      if (dir?.k !== 'str' || name?.k !== 'str') return undefined;
      const files: string[] = [];
      const used: string[] = [];
      // The script's command line holds Hydra overrides (`model=llama8b trainer.micro_batch=8`).
      const data = composeHydra(read, dir.v, name.v, files, this.argv ?? [], used);
      if (!data) return undefined;
      this.filesRead.push(...files);
      this.argsRead.push(...used);
      return fromData(data, 0);
    }
    return undefined;
  }

  private clickOption(name: string, b: Binding & { kind: 'param' }): Value | undefined {
    const decorated = up(b.function);
    if (decorated?.type !== 'decorated_definition') return undefined;
    for (const d of decorated.namedChildren) {
      const call = d.type === 'decorator' ? d.namedChild(0) : null;
      if (call?.type !== 'call' || !/(^|\.)option$/.test(call.childForFieldName('function')?.text ?? ''))
        continue;
      if (!/^click\./.test(this.calleeName(call.childForFieldName('function')!))) continue;
      const args = call.childForFieldName('arguments')?.namedChildren ?? [];
      const names = args
        .filter((a) => a.type === 'string')
        .map((a) => a.text.replace(/^[rbuRBU]*['"]|['"]$/g, ''));
      const explicit = names.find((n) => !n.startsWith('-'));
      const longest = names.filter((n) => n.startsWith('-')).sort((x, y) => y.length - x.length)[0];
      const dest = explicit ?? longest?.replace(/^-+/, '').replace(/-/g, '_');
      if (dest !== name) continue;
      const kw = (k: string) =>
        args
          .find((a) => a.type === 'keyword_argument' && a.childForFieldName('name')?.text === k)
          ?.childForFieldName('value');
      const flag = kw('is_flag')?.text === 'True';
      const given = this.argv ? fromArgv(this.argv, names, flag ? 'store_true' : undefined) : undefined;
      if (given) {
        this.argsRead.push(given.text);
        return typed(given.value, kw('type')?.text);
      }
      const dflt = kw('default');
      this.defaultsRead.push({ what: `the default of ${longest ?? name}`, line: call.startPosition.row + 1 });
      return dflt ? this.evaluate(dflt, null) : flag ? { k: 'bool', v: false } : { k: 'none' };
    }
    return undefined;
  }

  /**
   * `self.<attr>` read in a method of a class of this file: the value of the one statement of the class that sets
   * it (`self.config = config`), evaluated where it stands; undefined when the class sets it in several places, by
   * an augmented assignment, or also as a class attribute (which of them a read sees depends on the run).
   */
  private selfAttribute(node: Node, attr: string): Value | undefined {
    let cls: Node | null = up(node);
    while (cls && cls.type !== 'class_definition') cls = up(cls);
    if (!cls) return undefined;
    const sets: Node[] = [];
    for (const id of this.file.identifiers(attr, cls.startIndex, cls.endIndex)) {
      const p = up(id);
      const q = p ? up(p) : null;
      const onSelf =
        p?.type === 'attribute' &&
        p.childForFieldName('attribute')?.id === id.id &&
        p.childForFieldName('object')?.text === 'self';
      if (
        onSelf &&
        (q?.type === 'assignment' || q?.type === 'augmented_assignment') &&
        q.childForFieldName('left')?.id === p!.id
      ) {
        if (q.type === 'augmented_assignment') return undefined;
        sets.push(q);
      }
      // A class attribute of that name: `attr = ...` in the class body itself.
      if (
        p?.type === 'assignment' &&
        p.childForFieldName('left')?.id === id.id &&
        up(up(p))?.id === cls.childForFieldName('body')?.id
      )
        return undefined;
    }
    const only = sets.length === 1 ? sets[0]!.childForFieldName('right') : null;
    return only ? this.evaluate(only, null) : undefined;
  }

  /**
   * A parameter of a function decorated `@call_parse` (fastcore/script.py `call_parse` → `anno_parser`: each
   * parameter with a default the option `--name`, typed by its annotation): the command line's value, else its
   * default.
   */
  private callParseParameter(name: string, b: Binding & { kind: 'param' }): Value | undefined {
    const decorated = up(b.function);
    if (decorated?.type !== 'decorated_definition') return undefined;
    const parsed = decorated.namedChildren.some((d) => {
      const e = d.type === 'decorator' ? d.namedChild(0) : null;
      const fn = e?.type === 'call' ? e.childForFieldName('function') : e;
      return (
        !!fn &&
        (fn.type === 'identifier' || fn.type === 'attribute') &&
        this.calleeName(fn) === 'fastcore.script.call_parse'
      );
    });
    if (!parsed) return undefined;
    const param = up(b.name);
    const type = fastcoreType(param?.childForFieldName('type') ?? null);
    const given = this.argv
      ? fromArgv(this.argv, [`--${name}`], type === 'flag' ? 'store_true' : undefined)
      : undefined;
    if (given) {
      this.argsRead.push(given.text);
      return fastcoreValue(given.value, type);
    }
    if (!b.default) return UNKNOWN(name, `--${name}, which call_parse reads from the command line`);
    this.defaultsRead.push({ what: `the default of --${name}`, line: b.default.startPosition.row + 1 });
    return this.evaluate(b.default, null);
  }

  /**
   * `locals()` in a function: its parameters by name, as they stand at the call (`args = dict(locals())`, then
   * `train(**locals())`). Unknown when the function binds other names before it, which the dict would hold too.
   */
  private localsAt(node: Node): Value {
    const known = this.localsMemo.get(node.id);
    if (known) return known;
    const before = this.cutShort;
    const v = this.readLocals(node);
    // Remembered unless a read was cut short (then the answer depends on where the evaluation began).
    if (v.k === 'dict' && this.cutShort === before) this.localsMemo.set(node.id, v);
    return v;
  }

  /** The dicts `localsAt` read, by the `locals()` call's node. */
  private readonly localsMemo = new Map<number, Value>();

  private readLocals(node: Node): Value {
    const fn = enclosingFunction(node);
    if (!fn) return UNKNOWN(node.text, 'locals() outside a function');
    const params = parameterNames(fn);
    const body = fn.childForFieldName('body');
    for (const a of body?.descendantsOfType(['assignment', 'for_statement', 'with_item']) ?? []) {
      if (a.endIndex > node.startIndex || enclosingFunction(a)?.id !== fn.id) continue;
      const left = a.type === 'with_item' ? a : (a.childForFieldName('left') ?? a);
      const names = left.type === 'identifier' ? [left] : left.descendantsOfType('identifier');
      if (names.some((id) => !params.includes(id.text)))
        return UNKNOWN(node.text, 'locals() of a function that binds names besides its parameters');
    }
    if (params.length > 64) return UNKNOWN(node.text, 'locals() of too many parameters');
    // Every parameter is read, but only the keys looked up later count as read from the command line or a default
    // (`item` reads an entry's parameter again for that): the rest would crowd the provenance of each value.
    const args = this.argsRead.length;
    const defaults = this.defaultsRead.length;
    const entries: DictEntry[] = params.map((p) => {
      const b = findBinding(this.file, p, node);
      const entry: DictEntry = {
        key: { k: 'str', v: p },
        value: b ? this.fromBinding(p, b, node) : UNKNOWN(p, 'not bound'),
      };
      if (b) LOCALS_ENTRIES.set(entry, { ev: this, name: p, binding: b, at: node });
      return entry;
    });
    this.argsRead.length = args;
    this.defaultsRead.length = defaults;
    return { k: 'dict', entries };
  }

  /**
   * The arguments `torch.multiprocessing.spawn(fn, args=(a, b), ...)` passes `fn` after the process index, when
   * `id` is that `fn`; undefined otherwise.
   */
  private spawnedWith(id: Node): Node[] | undefined {
    const list = up(id);
    const call = list?.type === 'argument_list' ? up(list) : null;
    const fn = call?.type === 'call' ? call.childForFieldName('function') : null;
    if (!fn || list!.namedChildren[0]?.id !== id.id) return undefined;
    if (this.calleeName(fn) !== 'torch.multiprocessing.spawn') return undefined;
    const kw = list!.namedChildren.find(
      (a) => a.type === 'keyword_argument' && a.childForFieldName('name')?.text === 'args',
    );
    const positional = list!.namedChildren.filter(
      (a) => a.type !== 'keyword_argument' && a.type !== 'comment',
    );
    const tuple = kw?.childForFieldName('value') ?? positional[1];
    if (!tuple) return [];
    return tuple.type === 'tuple' ? tuple.namedChildren.filter((a) => a.type !== 'comment') : undefined;
  }

  /**
   * A dict entry's value; an entry `locals()` made (a parameter) is read again where it was, so that where its value
   * comes from (the command line, a default) is recorded here.
   */
  private entryValue(e: DictEntry): Value {
    const sources = ENTRY_SOURCES.get(e);
    if (sources) {
      this.argsRead.push(...sources.args);
      this.defaultsRead.push(...sources.defaults);
    }
    const param = LOCALS_ENTRIES.get(e);
    if (!param) return e.value;
    const { ev } = param;
    const [args, defaults] = [ev.argsRead.length, ev.defaultsRead.length];
    const v = ev.fromBinding(param.name, param.binding, param.at);
    if (ev !== this) {
      this.argsRead.push(...ev.argsRead.slice(args));
      this.defaultsRead.push(...ev.defaultsRead.slice(defaults));
    }
    return v;
  }

  /** A parameter of the function the evaluator was given the call of (`given.passed`): what that call passes. */
  private passedParam(name: string, b: Binding & { kind: 'param' }): Value | undefined {
    const passed = this.given.passed;
    return passed && b.function.id === passed.function.id ? passed.values.get(name) : undefined;
  }

  /** `fromCallSites`, remembered unless the evaluation was cut short (then the answer depends on where it began). */
  private fromCallSitesOnce(name: string, b: Binding & { kind: 'param' }): Value | null {
    const key = `${b.function.id}:${name}`;
    const known = this.callSiteValues.get(key);
    // What the value was read from (the command line, defaults) is recorded again with it.
    if (known !== undefined) {
      this.argsRead.push(...known.args);
      this.defaultsRead.push(...known.defaults);
      return known.v;
    }
    const before = this.cutShort;
    const args = this.argsRead.length;
    const defaults = this.defaultsRead.length;
    const v = this.fromCallSites(name, b);
    if (this.cutShort === before)
      this.callSiteValues.set(key, {
        v,
        args: this.argsRead.slice(args),
        defaults: this.defaultsRead.slice(defaults),
      });
    return v;
  }

  /**
   * A parameter's value from the calls of its function in this file, when every call passes the same constant
   * (or leaves the default). Methods called as `obj.f(...)` skip `self`.
   */
  private fromCallSites(name: string, b: Binding & { kind: 'param' }): Value | null {
    const own = b.function.childForFieldName('name')?.text;
    if (!own) return null;
    const isMethod = up(up(b.function))?.type === 'class_definition';
    // `__init__` is called by constructing its class: `Trainer(config=cfg)` binds `config` (and not `self`).
    const constructs = isMethod && own === '__init__';
    const fnName = constructs ? up(up(b.function))!.childForFieldName('name')?.text : own;
    if (!fnName) return null;
    let agreed: Value | null = null;
    let key: string | null = null;
    let sites = 0;
    for (const id of this.file.identifiers(fnName)) {
      const p = up(id);
      const callee = p?.type === 'attribute' && p.childForFieldName('attribute')?.id === id.id ? p : id;
      const call = up(callee);
      // Started by `torch.multiprocessing.spawn(fn, args=(...))`: the process index, then the tuple's items.
      const spawned = callee === id ? this.spawnedWith(id) : undefined;
      if (spawned) {
        if (++sites > 8 || b.index === 0) return null;
        const node = spawned[b.index - 1] ?? b.default;
        if (!node) return null;
        const v = this.evaluate(node, null);
        if (v.k === 'unknown' || v.k === 'param') return null;
        const k = JSON.stringify(toPlain(v)) + (v.k === 'call' ? v.node.text : '');
        if (key !== null && k !== key) return null;
        key = k;
        agreed = v;
        continue;
      }
      if (call?.type !== 'call' || call.childForFieldName('function')?.id !== callee.id) continue;
      if (call.startIndex >= b.function.startIndex && call.endIndex <= b.function.endIndex) continue; // recursion
      if (++sites > 8) return null;
      const args = call.childForFieldName('arguments');
      if (args?.type !== 'argument_list') return null;
      const positional = args.namedChildren.filter(
        (a) => a.type !== 'keyword_argument' && a.type !== 'comment' && a.type !== 'dictionary_splat',
      );
      if (args.namedChildren.some((a) => a.type === 'list_splat')) return null;
      const kw = args.namedChildren.find(
        (a) => a.type === 'keyword_argument' && a.childForFieldName('name')?.text === name,
      );
      // `f(**d)` of a dict known whole (`**locals()`, `**{"k": v}`): its keys are keywords.
      let splatted: Value | undefined;
      for (const sp of args.namedChildren.filter((a) => a.type === 'dictionary_splat')) {
        const d = sp.namedChild(0) ? this.evaluate(sp.namedChild(0)!, null) : undefined;
        if (d?.k !== 'dict' || d.entries.some((e) => e.key.k !== 'str')) return null;
        const e = d.entries.find((x) => x.key.k === 'str' && x.key.v === name);
        if (e) splatted = this.entryValue(e);
      }
      const index = b.index - ((isMethod && callee.type === 'attribute') || constructs ? 1 : 0);
      const node = kw?.childForFieldName('value') ?? positional[index] ?? (splatted ? null : b.default);
      if (!node && !splatted) return null;
      const v = splatted && !kw && !positional[index] ? splatted : this.evaluate(node!, null);
      if (v.k === 'unknown' || v.k === 'param') return null;
      const k = JSON.stringify(toPlain(v)) + (v.k === 'call' ? v.node.text : '');
      if (key !== null && k !== key) return null;
      key = k;
      agreed = v;
    }
    return agreed;
  }

  /**
   * A list bound by `name = [...]` and grown only by `name.append(x)` / `name.extend(xs)` in its own scope, outside
   * loops (`policies = [a, b]`, then `if custom: policies.extend([c, d])`): its items at `at`, those under a
   * condition known false left out; unknown when a condition is not known. Undefined when anything else changes it
   * (the caller's general rule then applies).
   */
  private grownList(
    name: string,
    list: Value & { k: 'seq' },
    b: Binding & { kind: 'assign' },
    at: Node,
  ): Value | undefined {
    const scope = b.scope;
    const calls: { call: Node; method: string }[] = [];
    for (const id of this.file.identifiers(name)) {
      const r = findBinding(this.file, name, id);
      if (r?.kind !== 'assign' || r.statement.startIndex !== b.statement.startIndex) continue;
      const p = up(id);
      if (!p) continue;
      if (p.type === 'global_statement' || p.type === 'nonlocal_statement') return undefined;
      if (p.type === 'augmented_assignment' && p.childForFieldName('left')?.id === id.id) return undefined;
      if (p.type === 'subscript' && p.childForFieldName('value')?.id === id.id) {
        const q = up(p);
        if (q?.type === 'delete_statement' || q?.childForFieldName('left')?.id === p.id) return undefined;
        continue;
      }
      const call = p.type === 'attribute' && p.childForFieldName('object')?.id === id.id ? up(p) : null;
      const method = p.childForFieldName('attribute')?.text ?? '';
      if (call?.type !== 'call' || call.childForFieldName('function')?.id !== p.id || !MUTATORS.has(method))
        continue;
      if (method !== 'append' && method !== 'extend') return undefined;
      if ((enclosingFunction(id)?.id ?? null) !== (scope?.id ?? null)) return undefined;
      for (let q = up(call); q && q.id !== scope?.id; q = up(q))
        if (q.type === 'for_statement' || q.type === 'while_statement') return undefined;
      calls.push({ call, method });
    }
    if (!calls.length) return undefined;
    const items = [...list.items];
    for (const { call, method } of calls) {
      if (call.startIndex < b.statement.endIndex || call.endIndex > at.startIndex) continue;
      let runs = true;
      for (const c of conditionParts(call, scope)) {
        const t = truthy(this.evaluate(c.node, null));
        if (t === undefined)
          return UNKNOWN(name, `grown where ${oneLine(c.node.text, 60)}, which is not known statically`);
        if (t === c.negated) {
          runs = false;
          break;
        }
      }
      if (!runs) continue;
      const arg = call.childForFieldName('arguments')?.namedChildren.find((a) => a.type !== 'comment');
      if (!arg) return UNKNOWN(name, `${name}.${method}() without an argument`);
      const v = this.evaluate(arg, null);
      if (method === 'append') items.push(v);
      else {
        const more = this.iterate(v);
        if (!more) return UNKNOWN(name, `extended by ${oneLine(arg.text, 60)}, not known statically`);
        items.push(...more);
      }
    }
    return { ...list, items };
  }

  /** A dict bound by `name = {...}` plus the keys set with `name[k] = v` or `name.update(...)` before `at`. */
  private grownDict(name: string, dict: DictV, b: Binding & { kind: 'assign' }, at: Node): Value {
    const scope = b.scope;
    const entries = [...dict.entries];
    const from = b.statement.endIndex;
    const to = at.startIndex;
    if (to <= from) return dict;
    for (const id of this.file.identifiers(name, from, to)) {
      // What each statement's conditions and value were read from goes with the entries it sets (`entryValue`
      // records it where one is read), not with the dict: a key read later names its own sources.
      const [args0, defaults0] = [this.argsRead.length, this.defaultsRead.length];
      const had = new Set(entries);
      try {
        if ((enclosingFunction(id)?.id ?? null) !== (scope?.id ?? null)) continue;
        const p = up(id);
        // Keys set under a condition known to be false are dropped; known-true conditions are not shown.
        const parts = conditionParts(id, scope);
        const known = parts.map((c) => {
          const t = truthy(this.evaluate(c.node, null));
          return t === undefined ? undefined : t !== c.negated;
        });
        if (known.some((k) => k === false)) continue;
        const conds = parts
          .filter((_, i) => known[i] === undefined)
          .map((c) => (c.negated ? `not (${c.node.text})` : c.node.text));
        const extra = conds.length ? { conditions: conds } : {};
        const line = id.startPosition.row + 1;
        if (p?.type === 'subscript' && p.childForFieldName('value')?.id === id.id) {
          const assign = up(p);
          const keyNode = p.childForFieldName('subscript');
          const valueNode = assign?.childForFieldName('right');
          if (
            assign?.type === 'assignment' &&
            assign.childForFieldName('left')?.id === p.id &&
            keyNode &&
            valueNode
          ) {
            setEntry(entries, {
              key: this.evaluate(keyNode, null),
              value: this.evaluate(valueNode, null),
              valueNode,
              line,
              ...extra,
            });
          }
        } else if (p?.type === 'attribute' && p.childForFieldName('attribute')?.text === 'update') {
          const call = up(p);
          if (call?.type === 'call') {
            const argList = call.childForFieldName('arguments');
            const a = argList?.type === 'argument_list' ? this.callArguments(argList, null) : undefined;
            if (a) {
              for (const x of a.args)
                if (x.k === 'dict') for (const e of x.entries) setEntry(entries, { ...e, line, ...extra });
              for (const e of a.keywords) setEntry(entries, { ...e, line, ...extra });
            }
          }
        } else if (p?.type === 'assignment' && p.childForFieldName('left')?.id === id.id) {
          // Rebound: the later binding wins (findBinding would have returned it); stop growing this one.
          break;
        }
      } finally {
        const sources = { args: this.argsRead.slice(args0), defaults: this.defaultsRead.slice(defaults0) };
        for (const e of entries) if (!had.has(e)) ENTRY_SOURCES.set(e, sources);
        this.argsRead.length = args0;
        this.defaultsRead.length = defaults0;
      }
    }
    return { k: 'dict', entries } satisfies { k: 'dict'; entries: DictEntry[] };
  }

  /** The qualified name a callee expression refers to, through imports and local aliases. */
  calleeName(fn: Node): string {
    if (fn.type === 'identifier') {
      const b = findBinding(this.file, fn.text, fn);
      if (
        b?.kind === 'assign' &&
        b.value &&
        (b.value.type === 'identifier' || b.value.type === 'attribute')
      ) {
        // `fs = fully_shard` style aliases.
        const v = this.evaluate(b.value, null);
        if (v.k === 'ref') return v.name;
      }
      return this.imports.qualify(fn.text).qualified;
    }
    return this.imports.qualify(dottedText(fn)).qualified;
  }
}

/**
 * The entries of dicts `locals()` made (`Evaluator.localsAt`), with the parameter each holds and the evaluator that
 * read it: an entry looked up is read again there, so that where its value comes from is recorded.
 */
const LOCALS_ENTRIES = new WeakMap<DictEntry, { ev: Evaluator; name: string; binding: Binding; at: Node }>();

/** What the entries a dict's later statements set were read from (`Evaluator.grownDict`). */
const ENTRY_SOURCES = new WeakMap<
  DictEntry,
  { args: string[]; defaults: { what: string; line: number }[] }
>();

/**
 * An option's value on a command line as argparse reads it: the last `--name value` or `--name=value` of any of its
 * names; `True`/`False` for `store_true`/`store_false` flags present. Undefined when none is given (or its value is
 * missing).
 */
function fromArgv(
  argv: readonly string[],
  names: string[],
  action: string | undefined,
): { value: Value; text: string } | undefined {
  let found: { value: Value; text: string } | undefined;
  const flags = names.filter((n) => n.startsWith('-'));
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const eq = a.indexOf('=');
    const name = a.startsWith('--') && eq > 0 ? a.slice(0, eq) : a;
    if (!flags.includes(name)) continue;
    if (action === 'store_true' || action === 'store_false')
      found = { value: { k: 'bool', v: action === 'store_true' }, text: name };
    else {
      const raw = name !== a ? a.slice(eq + 1) : argv[i + 1];
      if (raw === undefined) continue;
      found = { value: { k: 'str', v: raw }, text: `${name} ${raw}` };
    }
  }
  return found;
}

/** A string from a command line through argparse's `type=int` / `type=float`. */
function typed(v: Value, type: string | undefined): Value {
  if (v.k !== 'str' || (type !== 'int' && type !== 'float')) return v;
  const n = Number(v.v);
  return Number.isFinite(n) && (type === 'float' || Number.isInteger(n))
    ? { k: 'num', v: n, int: type === 'int' }
    : UNKNOWN(v.v, `${type}("${v.v}")`);
}

/** What the scan is told of the run besides the file: the script's arguments and a reader of its config files. */
export interface ScriptContext {
  argv?: readonly string[];
  /** The data of a YAML, JSON or TOML file named as the code names it (relative to where it runs), or undefined. */
  readData?: (file: string) => unknown;
  /** A helper read for one call of it: its parameters' values as that call passes them (in the caller's terms). */
  passed?: { function: Node; values: ReadonlyMap<string, Value> };
  /**
   * A module-level class or function another file of the project defines, by the qualified name this file imports
   * it as (`pkg.configs.train_config`): the config classes and updaters a script reads its values through.
   */
  readDefinition?: (qualified: string, kind: 'class' | 'def') => ForeignDefinition | undefined;
  /** How many files away from the script this evaluator reads (a default of a class of an imported module). */
  hops?: number;
  /** How many helper calls deep this evaluator reads a function's body (`returnedValue`). */
  inlined?: number;
}

/** The most helper bodies one read goes through (a helper returning another helper's result). */
const MAX_INLINED = 4;

/** An evaluator of each parsed file, to read a value's call where its node was written. */
const OWNERS = new WeakMap<object, Evaluator>();

/** A definition in another file, with what is needed to evaluate there. */
export interface ForeignDefinition {
  source: SourceFile;
  imports: ImportTable;
  node: Node;
}

/** The most files a chain of class defaults crosses (a field whose default is a class of a third file). */
const MAX_HOPS = 3;

/** Loaders that read an open file: `yaml.safe_load(open(p))`. */
const LOADS_FROM_STREAM = new Set([
  'yaml.safe_load',
  'yaml.load',
  'yaml.full_load',
  'json.load',
  'tomllib.load',
  'tomli.load',
]);
/** Loaders that take the path itself. */
const LOADS_FROM_PATH = new Set(['omegaconf.OmegaConf.load', 'toml.load']);

const MERGE = 'omegaconf.OmegaConf.merge';
/** OmegaConf calls that return a view of the config they are given, with the same keys. */
const CONFIG_VIEWS = new Set([
  'omegaconf.OmegaConf.to_object',
  'omegaconf.OmegaConf.to_container',
  'omegaconf.OmegaConf.structured',
  'omegaconf.OmegaConf.create',
  'omegaconf.OmegaConf.masked_copy',
]);

function isConfigCall(callee: string): boolean {
  return callee === MERGE || CONFIG_VIEWS.has(callee);
}

/** A value OmegaConf merges key by key: a mapping, a merged config, a dataclass instance. */
function configLike(v: Value): boolean {
  return (
    v.k === 'dict' || (v.k === 'call' && (isConfigCall(v.callee) || /^[A-Z]\w*$/.test(lastSegment(v.callee))))
  );
}

/** Several layers of one key merged, as a merge call of them. */
function merged(layers: Value[], node: Node): Value {
  return layers.length === 1
    ? layers[0]!
    : { k: 'call', callee: MERGE, args: layers, kwargs: {}, splats: [], node };
}

/** The strings of a list or tuple of strings, or undefined. */
export function stringItems(v: Value): string[] | undefined {
  if (v.k !== 'seq' || v.items.some((i) => i.k !== 'str')) return undefined;
  return v.items.map((i) => (i as { v: string }).v);
}

/** Parsed configuration data as a value: mappings as dicts, lists as lists; bounded in depth and size. */
export function fromData(data: unknown, depth: number): Value {
  if (depth > 8) return UNKNOWN('', 'nested too deeply');
  if (data === null || data === undefined) return { k: 'none' };
  if (typeof data === 'boolean') return { k: 'bool', v: data };
  if (typeof data === 'number') return { k: 'num', v: data, int: Number.isInteger(data) };
  if (typeof data === 'string') return { k: 'str', v: data };
  if (Array.isArray(data))
    return { k: 'seq', kind: 'list', items: data.slice(0, 256).map((d) => fromData(d, depth + 1)) };
  if (typeof data === 'object')
    return {
      k: 'dict',
      entries: Object.entries(data as Record<string, unknown>)
        .slice(0, 256)
        .map(([key, v]) => ({ key: { k: 'str', v: key } as Value, value: fromData(v, depth + 1) })),
    };
  return UNKNOWN(String(data), 'not configuration data');
}

/** A `@dataclass` class, or a pydantic model (`class Config(BaseModel)`, `BaseSettings`): fields with defaults. */
function isConfigClass(def: Node): boolean {
  const decorated = up(def);
  if (
    decorated?.type === 'decorated_definition' &&
    decorated.namedChildren.some((d) => d.type === 'decorator' && /\bdataclass\b/.test(d.text))
  )
    return true;
  const bases = def.childForFieldName('superclasses')?.namedChildren.map((b) => lastSegment(b.text)) ?? [];
  return bases.some((b) => b === 'BaseModel' || b === 'BaseSettings');
}

/**
 * The right side's element for a name of a flat unpacking (`a, b = X(), Y()`), when both sides have the same
 * number of plain elements; else null.
 */
function unpackedFrom(statement: Node, name: Node): Node | null {
  if (statement.type !== 'assignment') return null;
  const left = statement.childForFieldName('left');
  const right = statement.childForFieldName('right');
  const plain = (n: Node | null | undefined) =>
    n &&
    ['pattern_list', 'tuple_pattern', 'expression_list', 'tuple', 'list_pattern', 'list'].includes(n.type)
      ? n.namedChildren.filter((c) => c.type !== 'comment')
      : null;
  const names = plain(left);
  const values = plain(right);
  if (!names || !values || names.length !== values.length) return null;
  if ([...names, ...values].some((c) => /splat/.test(c.type))) return null;
  const i = names.findIndex((c) => c.id === name.id);
  return i >= 0 ? values[i]! : null;
}
