/**
 * A small abstract interpreter for the Python that builds `nn.Module`s: constructors and helper functions are run
 * statement by statement over statically known values (dataclass configs, dicts of named configs, arithmetic,
 * loops over ranges), producing the module tree with real names and shapes. Expressions are evaluated by the
 * value model's shared evaluator (src/core/python); this engine adds frames, classes and calls, statements, and
 * the torch.nn layers and tensors of `torchLayers.ts` and `tensors.ts`. Anything it cannot know becomes unknown
 * with a reason, and hard limits on steps, depth and loop iterations keep pathological code from hanging.
 */
import type { Node } from '../parsing/python';
import type { Project } from '../project/project';
import { callBuiltin } from '../python/builtins';
import { stringMethod } from '../python/strings';
import { kwargsOf } from '../python/expressions';
import { moduleBindings } from '../python/scope';
import {
  sameKey,
  setEntry,
  UNKNOWN,
  type ClassV,
  type DictEntry,
  type FnV,
  type ModuleFile,
  type ModV,
  type ObjV,
  type TensorV,
  type Value,
} from '../python/values';
import { classDef, cloneValue, isDataclass, newModule } from './moduleValues';
import { TENSOR_FACTORIES, tensorArithmetic, tensorAttr, tensorFactory } from './tensors';
import { torchLayer, torchLayerName, type LayerContext } from './torchLayers';
import { valueMethod } from './methods';
import { omegaconfCall } from './omegaconf';

/**
 * The key under which a call's `**mapping` not known statically is kept among its keyword arguments: a parameter
 * or dataclass field the call does not name is then not known (the mapping may set it), not its default.
 */
const OPAQUE_KWARGS = '**';
import {
  StepLimit,
  Undecided,
  LIMITS,
  Return,
  Break,
  Continue,
  Statements,
  type Frame,
  type Limits,
} from './statements';

export { StepLimit, type Limits };

export type { ClassV, FnV, ModV, ObjV, TensorV, Value };
export { moduleFromTree, toModuleTree } from './moduleValues';

/** Methods of list and dict that change the container in place. */
const IN_PLACE = new Set([
  'append',
  'extend',
  'insert',
  'pop',
  'remove',
  'clear',
  'sort',
  'reverse',
  'update',
  'setdefault',
  'popitem',
]);

/** Library calls that return the module passed first, with the same parameters. */
const RETURNS_ITS_MODULE = new Set([
  'torch.distributed.tensor.parallel.parallelize_module',
  'torch.distributed.tensor.parallel.api.parallelize_module',
  'torch.compile',
]);

export class Interpreter extends Statements {
  private readonly moduleScopes = new Map<string, Map<string, Node>>();
  private readonly moduleValues = new Map<string, Value>();
  private readonly evaluating = new Set<string>();
  protected readonly layers: LayerContext;

  constructor(
    readonly project: Project,
    limits: Limits = LIMITS,
  ) {
    super(limits);
    this.layers = { note: (s) => this.note(s), iterate: (v) => this.iterate(v), loop: limits.loop };
  }

  // ---- the shared evaluator's hooks ---------------------------------------------------------------------------

  protected name(node: Node, frame: Frame): Value {
    return this.lookup(node.text, frame);
  }

  protected attribute(obj: Value, attr: string, node: Node, frame?: Frame): Value {
    const v = this.getattr(obj, attr, node.text);
    // `args.dim` of `args = parser.parse_args()`: the option's default (or the script's argument), as the scan reads it.
    if (v.k === 'unknown' && frame && !frame.self) {
      const d = this.fromFile(node, frame);
      if (d && (d.value.k === 'num' || d.value.k === 'str' || d.value.k === 'bool' || d.value.k === 'none')) {
        this.note(
          d.given
            ? `\`${node.text.slice(0, 60)}\` read from the script's arguments (${d.given})`
            : `\`${node.text.slice(0, 60)}\` is ${d.defaults}`,
        );
        return d.value;
      }
    }
    return v;
  }

  protected item(container: Value, key: Value, node: Node): Value {
    return this.getitem(container, key, node.text);
  }

  /** A condition of an `if` expression not known statically: decided as an `if` statement's is. */
  protected override undecided(cond: Node, frame: Frame): boolean {
    return this.decide(cond, frame);
  }

  protected override extendedOperator(op: string, a: Value, b: Value | undefined): Value | undefined {
    if (b === undefined) return a.k === 'tensor' ? { ...a, param: false } : undefined;
    return a.k === 'tensor' || b.k === 'tensor' ? tensorArithmetic(a, b, op) : undefined;
  }

  /** Items of an iterable, or null when unknown: module containers iterate as PyTorch's do. */
  override iterate(v: Value): Value[] | null {
    if (v.k === 'mod' && (v.className === 'ModuleList' || v.className === 'Sequential'))
      return [...v.children.values()];
    if (v.k === 'mod' && v.className === 'ModuleDict')
      return [...v.children.keys()].map((k) => ({ k: 'str', v: k }));
    return super.iterate(v);
  }

  /** `**obj` passes a config object's fields too. */
  protected override mapping(v: Value): DictEntry[] | null {
    if (v.k === 'obj') return [...v.fields].map(([k, x]) => ({ key: { k: 'str', v: k }, value: x }));
    return super.mapping(v);
  }

  /** Evaluates an expression in a frame (for callers outside this class). */
  eval(node: Node, frame: Frame): Value {
    return this.evaluate(node, frame);
  }

  // ---- names --------------------------------------------------------------------------------------------------

  /** The top-level bindings of a file: name -> the statement that binds it (last one wins). */
  private scopeOf(file: ModuleFile): Map<string, Node> {
    let scope = this.moduleScopes.get(file.path);
    if (!scope) this.moduleScopes.set(file.path, (scope = moduleBindings(file.source.root)));
    return scope;
  }

  /** A name at module level of `file`: its binding there, an import, or a builtin. */
  moduleName(file: ModuleFile, name: string): Value {
    const key = `${file.path}\u0000${name}`;
    const cached = this.moduleValues.get(key);
    if (cached) return cached;
    if (this.evaluating.has(key)) return UNKNOWN(name, 'defined in terms of itself');
    this.evaluating.add(key);
    try {
      const v = this.resolveModuleName(file, name);
      this.moduleValues.set(key, v);
      return v;
    } finally {
      this.evaluating.delete(key);
    }
  }

  private resolveModuleName(file: ModuleFile, name: string): Value {
    const binding = this.scopeOf(file).get(name);
    if (binding) {
      const def =
        binding.type === 'decorated_definition' ? binding.childForFieldName('definition')! : binding;
      if (def.type === 'class_definition') return { k: 'cls', file, node: binding, name };
      if (def.type === 'function_definition') return { k: 'fn', file, node: def, name };
      if (def.type === 'assignment') {
        const right = def.childForFieldName('right');
        return right ? this.evaluate(right, { file, env: new Map() }) : UNKNOWN(name, 'no value');
      }
    }
    const imp = file.imports.bindings.filter((b) => b.local === name).pop();
    if (imp) return this.importValue(file, imp.qualified, imp.isModule);
    for (const w of file.imports.wildcards) {
      const target = this.project.resolveModule(file.path, w.module);
      const f = target ? this.project.file(target) : undefined;
      if (f && this.scopeOf(f).has(name)) return this.moduleName(f, name);
    }
    return { k: 'ref', name, bound: false };
  }

  /** What an import binds: a project module, a name from one, or a reference to an outside library. */
  private importValue(file: ModuleFile, qualified: string, isModule: boolean): Value {
    if (isModule) {
      const target = this.project.resolveModule(file.path, qualified);
      const f = target ? this.project.file(target) : undefined;
      return f ? { k: 'pymod', file: f } : { k: 'ref', name: qualified, bound: true };
    }
    const dot = qualified.lastIndexOf('.');
    const mod = qualified.slice(0, dot);
    const name = qualified.slice(dot + 1);
    const target = this.project.resolveModule(file.path, mod.endsWith('.') ? mod : mod || '.');
    const f = target ? this.project.file(target) : undefined;
    if (f) {
      if (this.scopeOf(f).has(name) || f.imports.bindings.some((b) => b.local === name))
        return this.moduleName(f, name);
      // `from pkg import submodule`
      const sub = this.project.resolveModule(file.path, qualified);
      const sf = sub ? this.project.file(sub) : undefined;
      if (sf) return { k: 'pymod', file: sf };
    }
    return { k: 'ref', name: qualified.replace(/^\.+/, ''), bound: true };
  }

  private lookup(name: string, frame: Frame): Value {
    const local = frame.env.get(name);
    if (local !== undefined) return local;
    return this.moduleName(frame.file, name);
  }

  /**
   * `isinstance(module, Cls)` / `isinstance(module, (A, B))` of a module value: by class name (as the plan's
   * class filters match modules), through the bases of a class of the project when the module has one; unknown
   * where a class is not known by name.
   */
  private isInstance(m: Extract<Value, { k: 'mod' }>, classes: Value, text: string): Value {
    const items = classes.k === 'seq' ? classes.items : [classes];
    const names = items.map((c) =>
      c.k === 'ref' || c.k === 'cls' ? c.name.slice(c.name.lastIndexOf('.') + 1) : undefined,
    );
    if (names.some((n) => n === undefined)) return UNKNOWN(text, 'isinstance of a class not known by name');
    const own = new Set<string>([m.className]);
    for (let cls = m.cls, i = 0; cls && i < 16; i++) {
      own.add(cls.name);
      const base = this.bases(cls).find((b) => b.k === 'cls' || b.k === 'ref');
      if (base?.k === 'ref') own.add(base.name.slice(base.name.lastIndexOf('.') + 1));
      cls = base?.k === 'cls' ? base : null;
    }
    return { k: 'bool', v: names.some((n) => own.has(n!)) };
  }

  private getattr(obj: Value, attr: string, text: string): Value {
    // A class's or function's name (`type(m).__name__`, `nn.Linear.__name__`).
    if (attr === '__name__' && (obj.k === 'ref' || obj.k === 'cls'))
      return { k: 'str', v: obj.name.slice(obj.name.lastIndexOf('.') + 1) };
    switch (obj.k) {
      case 'ref':
        return { k: 'ref', name: `${obj.name}.${attr}`, bound: obj.bound };
      case 'str':
        // A method of a string, called through callRef (`name.endswith("mlp")`).
        return { k: 'ref', name: `<str>.${attr}`, bound: false };
      case 'seq':
        // A method of a list or tuple, called through callRef (`plan.append(entry)`).
        return { k: 'ref', name: `<${obj.kind}>.${attr}`, bound: false };
      case 'pymod':
        return this.moduleName(obj.file, attr);
      case 'obj': {
        const f = obj.fields.get(attr);
        if (f !== undefined) return f;
        if (obj.cls)
          return (
            this.classAttr(obj.cls, attr, obj) ?? UNKNOWN(text, `${obj.cls.name} has no attribute ${attr}`)
          );
        return UNKNOWN(text, `no attribute ${attr}`);
      }
      case 'mod': {
        if (attr === '__class__') return classOfModule(obj);
        // Module.__init__ sets `self.training = True`; only `.eval()` / `.train(False)` clears it.
        if (attr === 'training' && !obj.attrs.has('training')) return { k: 'bool', v: true };
        const c = obj.children.get(attr);
        if (c) return c;
        const p = obj.params.get(attr);
        if (p) return p;
        if (p === null) return { k: 'none' };
        const b = obj.buffers.get(attr);
        if (b) return b.t;
        const a = obj.attrs.get(attr);
        if (a !== undefined) return a;
        if (obj.cls) {
          const ca = this.classAttr(obj.cls, attr, obj);
          if (ca) return ca;
        }
        return { k: 'ref', name: `<${obj.className}>.${attr}`, bound: false };
      }
      case 'cls':
        return this.classAttr(obj, attr, obj) ?? UNKNOWN(text, `${obj.name} has no attribute ${attr}`);
      case 'dict': {
        const e = obj.entries.find((x) => x.key.k === 'str' && x.key.v === attr);
        if (e) return e.value;
        return { k: 'ref', name: `dict.${attr}`, bound: false };
      }
      case 'call': {
        const v = obj.kwargs[attr];
        return v ?? UNKNOWN(text, `attribute of ${obj.callee}(...)`);
      }
      case 'tensor':
        return tensorAttr(obj, attr, text);
      default:
        return UNKNOWN(text, `attribute ${attr} of an unknown value`);
    }
  }

  /** A class attribute, class-body constant or method (bound to `self` when given), searching the bases. */
  private classAttr(cls: ClassV, attr: string, self: Value, seen = new Set<string>()): Value | undefined {
    const key = `${cls.file.path}:${cls.name}`;
    if (seen.has(key)) return undefined;
    seen.add(key);
    const def = classDef(cls);
    const body = def.childForFieldName('body');
    for (const stmt of body?.namedChildren ?? []) {
      const s = stmt.type === 'decorated_definition' ? stmt.childForFieldName('definition') : stmt;
      if (s?.type === 'function_definition' && s.childForFieldName('name')?.text === attr) {
        const isStatic =
          stmt.type === 'decorated_definition' &&
          /@staticmethod/.test(stmt.text.slice(0, stmt.text.indexOf('def')));
        const isClassMethod =
          stmt.type === 'decorated_definition' &&
          /@classmethod/.test(stmt.text.slice(0, stmt.text.indexOf('def')));
        return {
          k: 'fn',
          file: cls.file,
          node: s,
          name: attr,
          ...(isStatic ? {} : { self: isClassMethod ? cls : self }),
          owner: cls,
        };
      }
      const a = s?.type === 'expression_statement' ? s.namedChild(0) : null;
      if (a?.type === 'assignment' && a.childForFieldName('left')?.text === attr) {
        const right = a.childForFieldName('right');
        if (right) return this.evaluate(right, { file: cls.file, env: new Map() });
      }
    }
    for (const base of this.bases(cls)) if (base.k === 'cls') return this.classAttr(base, attr, self, seen);
    return undefined;
  }

  private getitem(container: Value, key: Value, text: string): Value {
    if (container.k === 'dict') {
      const e = container.entries.find((x) => sameKey(x.key, key));
      return e ? e.value : UNKNOWN(text, 'key not found');
    }
    if (container.k === 'seq' && key.k === 'num' && key.int) {
      const i = key.v < 0 ? container.items.length + key.v : key.v;
      return container.items[i] ?? UNKNOWN(text, 'index out of range');
    }
    if (container.k === 'mod') {
      const name =
        key.k === 'num'
          ? String(key.v < 0 ? container.children.size + key.v : key.v)
          : key.k === 'str'
            ? key.v
            : null;
      const c = name !== null ? container.children.get(name) : undefined;
      return c ?? UNKNOWN(text, 'no such submodule');
    }
    return UNKNOWN(text, 'an item of an unknown container');
  }

  // ---- calls --------------------------------------------------------------------------------------------------

  protected call(node: Node, frame: Frame): Value {
    const fnNode = node.childForFieldName('function');
    const argList = node.childForFieldName('arguments');
    if (!fnNode) return UNKNOWN(node.text, 'incomplete');
    // super().__init__(...) and super().method(...)
    if (fnNode.type === 'attribute' && fnNode.childForFieldName('object')?.type === 'call') {
      const inner = fnNode.childForFieldName('object')!;
      if (inner.childForFieldName('function')?.text === 'super' && frame.owner && frame.self) {
        const attr = fnNode.childForFieldName('attribute')!.text;
        const base = this.bases(frame.owner).find((b): b is ClassV => b.k === 'cls');
        const { args, kwargs } = this.readArgs(argList, frame);
        if (!base) return { k: 'none' }; // nn.Module.__init__ and friends
        const m = this.classAttr(base, attr, frame.self);
        return m?.k === 'fn' ? this.callFunction(m, args, kwargs) : { k: 'none' };
      }
    }
    const callee = this.evaluate(fnNode, frame);
    const { args, kwargs } = this.readArgs(argList, frame);
    return this.callValue(callee, args, kwargs, node.text, fnNode, frame);
  }

  private readArgs(argList: Node | null, frame: Frame): { args: Value[]; kwargs: Record<string, Value> } {
    const { args, keywords, splats } = this.callArguments(argList, frame);
    const kwargs = kwargsOf(keywords);
    // `f(**d)` of a mapping not known statically: any parameter may come from it (`OPAQUE_KWARGS`).
    const opaque = argList?.namedChildren.find((a) => a.type === 'dictionary_splat');
    if (opaque && splats.length)
      kwargs[OPAQUE_KWARGS] = UNKNOWN(opaque.text, 'keyword arguments from a mapping not known statically');
    return { args, kwargs };
  }

  /** Calls a value: a class is instantiated, a function run, a library name looked up. */
  callValue(
    callee: Value,
    args: Value[],
    kwargs: Record<string, Value>,
    text: string,
    fnNode?: Node,
    frame?: Frame,
  ): Value {
    this.tick();
    if (callee.k === 'cls') return this.instantiate(callee, args, kwargs);
    if (callee.k === 'fn') return this.callFunction(callee, args, kwargs);
    if (callee.k === 'ref') return this.callRef(callee.name, args, kwargs, text, fnNode, frame);
    return UNKNOWN(text, 'a call of an unknown function');
  }

  /** Calls of names outside the project: torch layers and tensor factories, builtins, container methods. */
  private callRef(
    q: string,
    args: Value[],
    kwargs: Record<string, Value>,
    text: string,
    fnNode?: Node,
    frame?: Frame,
  ): Value {
    const layer = torchLayerName(q);
    if (layer) return torchLayer(this.layers, layer, args, kwargs, text);
    // Calls that return the module they are given, its parameters unchanged in number: tensor parallelism's
    // `parallelize_module` (torch/distributed/tensor/parallel/api.py: "returns the parallelized module", the same
    // object, its parameters turned into DTensors) and `torch.compile` (an OptimizedModule around the same module).
    const module = args[0] ?? kwargs.module ?? kwargs.model;
    if (RETURNS_ITS_MODULE.has(q) && module?.k === 'mod') {
      if (q !== 'torch.compile') {
        this.note(
          'tensor parallelism (parallelize_module) is not modelled: the figures hold every parameter on the FSDP mesh, as if the tensor-parallel degree were 1',
        );
        if (!this.unmodelled.includes('tensor parallelism (parallelize_module)'))
          this.unmodelled.push('tensor parallelism (parallelize_module)');
      }
      return module;
    }
    const last = q.slice(q.lastIndexOf('.') + 1);
    if (q === 'torch.nn.Module' || q === 'torch.nn.modules.module.Module') return newModule('Module', null);
    if (/^torch\.nn\.(modules\.[\w.]+\.)?[A-Z]\w*$/.test(q) && !/^(Parameter|Module|Buffer)$/.test(last)) {
      // A torch.nn layer the interpreter does not know: kept in the tree, with a note that it counts nothing.
      this.note(`nn.${last} not modelled: its parameters are not counted`);
      return newModule(last, null);
    }
    if (q === 'torch.nn.Parameter' || q === 'torch.nn.parameter.Parameter' || q === 'nn.Parameter') {
      const t = args[0];
      const rg = kwargs.requires_grad;
      if (t?.k === 'tensor') return { ...t, param: true, trainable: !(rg?.k === 'bool' && !rg.v) };
      return { k: 'tensor', shape: null, dtype: 'float32', param: true, trainable: true };
    }
    if (q === 'torch.nn.Buffer' || q === 'torch.nn.parameter.Buffer') {
      const t = args[0] ?? kwargs.data;
      const p = args[1] ?? kwargs.persistent;
      const persistent = !(p?.k === 'bool' && !p.v);
      return t?.k === 'tensor'
        ? { ...t, param: false, buffer: { persistent } }
        : {
            k: 'tensor',
            shape: null,
            dtype: 'float32',
            param: false,
            trainable: false,
            buffer: { persistent },
          };
    }
    if (q.startsWith('torch.') && TENSOR_FACTORIES.has(last)) return tensorFactory(last, args, kwargs);
    // `str.isdigit(part)`: the method called on its first argument.
    if (q.startsWith('str.') && args[0]?.k === 'str') {
      const r = stringMethod(args[0].v, q.slice(4), args.slice(1), text);
      if (r) return r;
    }
    // Methods called on values (`self.layers.append(block)` reaches here as `<ModuleList>.append`).
    if (fnNode?.type === 'attribute' && frame) {
      const obj = fnNode.childForFieldName('object');
      if (obj) {
        const target = this.evaluate(obj, frame);
        const r = valueMethod(this.layers, target, last, args, kwargs, text);
        if (r) return r;
        // A container changed in place in a way not followed (`names.sort()`, `plan.insert(0, x)`): what it holds
        // from here on is not known.
        if (
          obj.type === 'identifier' &&
          (target.k === 'seq' || target.k === 'dict') &&
          IN_PLACE.has(last) &&
          frame.env.has(obj.text)
        )
          frame.env.set(obj.text, UNKNOWN(obj.text, `changed in place by ${text.slice(0, 40)}`));
      }
    }
    const config = omegaconfCall(q, args, text, {
      ...(this.script?.context.argv ? { argv: this.script.context.argv } : {}),
      ...(this.script?.context.readData ? { readData: this.script.context.readData } : {}),
      note: (s) => this.note(s),
      missing: (s) => {
        if (!this.missing.includes(s)) this.missing.push(s);
      },
      instantiate: (cls) => this.instantiate(cls, [], {}),
    });
    if (config) return config;
    switch (q) {
      case 'getattr': {
        const [o, n, d] = args;
        if (o && n?.k === 'str') {
          const v = this.getattr(o, n.v, text);
          return v.k === 'unknown' && d ? d : v;
        }
        return UNKNOWN(text, 'getattr of unknown');
      }
      case 'hasattr':
        return UNKNOWN(text, 'hasattr');
      case 'functools.partial':
      case 'partial': {
        // A function of the project with some arguments bound (functools.partial); others stay unknown.
        const [f, ...bound] = args;
        if (f?.k !== 'fn') return UNKNOWN(text, 'partial of a function not followed');
        return {
          ...f,
          partial: {
            args: [...(f.partial?.args ?? []), ...bound],
            kwargs: { ...f.partial?.kwargs, ...kwargs },
          },
        };
      }
      case 'type':
        return args.length === 1 && args[0]!.k === 'mod' ? classOfModule(args[0]!) : UNKNOWN(text, 'type');
      case 'isinstance': {
        const [o, c] = args;
        return o?.k === 'mod' && c ? this.isInstance(o, c, text) : UNKNOWN(text, 'isinstance');
      }
      case 'OrderedDict':
      case 'collections.OrderedDict': {
        const items = args[0] ? this.iterate(args[0]) : [];
        const entries: DictEntry[] = [];
        for (const it of items ?? [])
          if (it.k === 'seq' && it.items.length === 2)
            setEntry(entries, { key: it.items[0]!, value: it.items[1]! });
        return { k: 'dict', entries };
      }
      case 'dataclasses.replace':
      case 'replace': {
        const base = args[0];
        if (base?.k === 'obj')
          return { ...base, fields: new Map([...base.fields, ...Object.entries(kwargs)]) };
        return UNKNOWN(text, 'replace of unknown');
      }
      case 'copy.deepcopy':
      case 'copy.copy':
      case 'deepcopy':
        // A shallow copy of a module shares its parameters; a deep copy has its own.
        if (args[0]?.k === 'mod' && q === 'copy.copy') return args[0];
        return args[0] ? cloneValue(args[0]) : UNKNOWN(text, 'copy');
    }
    const folded = callBuiltin(
      q,
      { args, kwargs },
      { iterate: (v) => this.iterate(v), maxRange: this.limits.loop },
      text,
    );
    if (folded) return folded;
    // A model loaded by id (`AutoModelForCausalLM.from_pretrained("ORG/NAME")`): kept as the call, for the estimate
    // to load that id's config.
    if (last === 'from_pretrained' && args[0]?.k === 'str' && fnNode)
      return { k: 'call', callee: q, args, kwargs, splats: [], node: fnNode };
    return UNKNOWN(text, `a call of ${q}`);
  }

  /** The classes a class derives from (project classes, or references to library classes). */
  bases(cls: ClassV): Value[] {
    const def = classDef(cls);
    const list = def.childForFieldName('superclasses');
    return (list?.namedChildren ?? [])
      .filter((c) => c.type !== 'keyword_argument')
      .map((b) => this.evaluate(b, { file: cls.file, env: new Map() }));
  }

  /** Whether instances of a class are `nn.Module`s. */
  isModuleClass(cls: ClassV, depth = 0): boolean {
    if (depth > 16) return false;
    return this.bases(cls).some(
      (b) =>
        (b.k === 'ref' &&
          (/^torch\.nn\.(modules\.module\.)?Module$/.test(b.name) || torchLayerName(b.name) !== null)) ||
        (b.k === 'cls' && this.isModuleClass(b, depth + 1)),
    );
  }

  /** The torch.nn layer a project class extends (`class MyLinear(nn.Linear)`), if any. */
  private torchBase(cls: ClassV, depth = 0): string | null {
    if (depth > 16) return null;
    for (const b of this.bases(cls)) {
      if (b.k === 'ref') {
        const l = torchLayerName(b.name);
        if (l) return l;
      } else if (b.k === 'cls') {
        const l = this.torchBase(b, depth + 1);
        if (l) return l;
      }
    }
    return null;
  }

  /** Constructs an instance: runs `__init__` (dataclasses get their generated one) over the arguments. */
  instantiate(cls: ClassV, args: Value[], kwargs: Record<string, Value>): Value {
    if (++this.depth > this.limits.depth) {
      // Only this instance is unknown: the modules around it are still built.
      this.depth--;
      this.note(`${cls.name}(...) is built too deep in nested calls to follow: it is not counted`);
      return UNKNOWN(cls.name, 'classes nest too deeply to analyse');
    }
    try {
      const isModule = this.isModuleClass(cls);
      const layer = isModule ? this.torchBase(cls) : null;
      const self: Value = isModule
        ? layer
          ? { ...(torchLayer(this.layers, layer, args, kwargs, cls.name) as ModV), className: cls.name, cls }
          : newModule(cls.name, cls)
        : { k: 'obj', cls, fields: new Map() };
      if (layer) {
        // Subclasses of a torch layer usually only add behaviour; their own __init__ still runs below.
        const init = this.classAttr(cls, '__init__', self);
        if (init?.k === 'fn' && init.owner !== cls) return self;
      }
      if (!isModule && isDataclass(cls)) {
        this.dataclassInit(cls, self as ObjV, args, kwargs);
        const post = this.classAttr(cls, '__post_init__', self);
        if (post?.k === 'fn') this.callFunction(post, [], {});
        return self;
      }
      if (self.k === 'mod') self.ctor = { args, kwargs };
      const init = this.classAttr(cls, '__init__', self);
      if (init?.k === 'fn') this.callFunction(init, args, kwargs);
      return self;
    } finally {
      this.depth--;
    }
  }

  private dataclassInit(cls: ClassV, self: ObjV, args: Value[], kwargs: Record<string, Value>): void {
    const fields: { name: string; dflt: Node | null }[] = [];
    const collect = (c: ClassV, depth: number) => {
      if (depth > 8) return;
      for (const b of this.bases(c)) if (b.k === 'cls' && isDataclass(b)) collect(b, depth + 1);
      for (const stmt of classDef(c).childForFieldName('body')?.namedChildren ?? []) {
        const a = stmt.type === 'expression_statement' ? stmt.namedChild(0) : null;
        if (a?.type !== 'assignment' || !a.childForFieldName('type')) continue;
        const name = a.childForFieldName('left')?.text;
        if (!name) continue;
        const i = fields.findIndex((f) => f.name === name);
        const f = { name, dflt: a.childForFieldName('right') };
        if (i >= 0) fields[i] = f;
        else fields.push(f);
      }
    };
    collect(cls, 0);
    fields.forEach((f, i) => {
      let v: Value | undefined = i < args.length ? args[i] : kwargs[f.name];
      // A field a `**mapping` not known statically may set is not its default.
      if (v === undefined && kwargs[OPAQUE_KWARGS])
        v = UNKNOWN(f.name, 'may come from a mapping not known statically');
      if (v === undefined && f.dflt) {
        v = this.evaluate(f.dflt, { file: cls.file, env: new Map() });
        // field(default=..., default_factory=...)
        if (
          v.k === 'unknown' &&
          f.dflt.type === 'call' &&
          /(^|\.)field$/.test(f.dflt.childForFieldName('function')?.text ?? '')
        ) {
          const { kwargs: fk } = this.readArgs(f.dflt.childForFieldName('arguments'), {
            file: cls.file,
            env: new Map(),
          });
          v =
            fk.default ??
            (fk.default_factory
              ? this.callValue(fk.default_factory, [], {}, 'default_factory')
              : UNKNOWN(f.name, 'no default'));
        }
      }
      self.fields.set(f.name, v ?? UNKNOWN(f.name, 'a required field not given'));
    });
  }

  /** Runs a function or method with bound arguments; its return value. */
  callFunction(fn: FnV, given: Value[], givenKwargs: Record<string, Value>): Value {
    if (!this.decisions || this.decisions.fork) return this.runFunction(fn, given, givenKwargs);
    // Code before a test, where nothing is assumed: a call whose path turns on a condition not known statically
    // returns what is not known.
    try {
      return this.runFunction(fn, given, givenKwargs);
    } catch (e) {
      if (e instanceof Undecided) return UNKNOWN(fn.name, 'depends on a condition not known statically');
      throw e;
    }
  }

  private runFunction(fn: FnV, given: Value[], givenKwargs: Record<string, Value>): Value {
    // `partial(fn, a, k=v)(x)` is `fn(a, x, k=v)`.
    const args = fn.partial ? [...fn.partial.args, ...given] : given;
    const kwargs = fn.partial ? { ...fn.partial.kwargs, ...givenKwargs } : givenKwargs;
    if (++this.depth > this.limits.depth) {
      this.depth--;
      this.note(`${fn.name}() is called too deep in nested calls to follow: its result is not known`);
      return UNKNOWN(fn.name, 'calls nest too deeply to analyse');
    }
    try {
      const env = new Map<string, Value>();
      const params = fn.node.childForFieldName('parameters')?.namedChildren ?? [];
      let i = 0;
      const positional = fn.self !== undefined ? [fn.self, ...args] : args;
      const rest: Value[] = [];
      for (const p of params) {
        if (p.type === 'list_splat_pattern' || p.type === 'dictionary_splat_pattern') {
          const n = p.namedChild(0)?.text;
          if (n && p.type === 'list_splat_pattern')
            env.set(n, { k: 'seq', kind: 'tuple', items: positional.slice(i) });
          if (n && p.type === 'dictionary_splat_pattern')
            env.set(
              n,
              kwargs[OPAQUE_KWARGS] ?? {
                k: 'dict',
                entries: Object.entries(kwargs)
                  .filter(([k]) => !env.has(k))
                  .map(([k, v]) => ({ key: { k: 'str', v: k }, value: v as Value })),
              },
            );
          i = positional.length;
          continue;
        }
        const nameNode =
          p.type === 'identifier'
            ? p
            : p.type === 'typed_parameter'
              ? p.namedChild(0)
              : p.childForFieldName('name');
        const name = nameNode?.text;
        if (!name || p.type === 'keyword_separator' || p.type === 'positional_separator') continue;
        const dflt = p.childForFieldName('value');
        let v: Value | undefined = kwargs[name] ?? (i < positional.length ? positional[i] : undefined);
        if (v === undefined && kwargs[OPAQUE_KWARGS] && dflt)
          v = UNKNOWN(name, 'may come from a mapping not known statically');
        if (v === undefined)
          v = dflt
            ? this.evaluate(dflt, { file: fn.file, env: new Map() })
            : UNKNOWN(name, 'argument not given');
        env.set(name, v);
        i++;
      }
      void rest;
      const frame: Frame = {
        file: fn.file,
        env,
        ...(fn.owner ? { owner: fn.owner } : {}),
        ...(fn.self !== undefined ? { self: fn.self } : {}),
        called: true,
      };
      try {
        this.execBlock(fn.node.childForFieldName('body'), frame);
      } catch (e) {
        if (e instanceof Return) return e.value;
        if (e instanceof Break || e instanceof Continue) return UNKNOWN(fn.name, '`break` outside a loop');
        throw e;
      }
      return { k: 'none' };
    } finally {
      this.depth--;
    }
  }
}

/** `type(module)` / `module.__class__`: the class of the project when the module has one, else its name. */
function classOfModule(m: Extract<Value, { k: 'mod' }>): Value {
  return m.cls ?? { k: 'ref', name: m.className, bound: true };
}
