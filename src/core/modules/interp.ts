import { castMethodDtype, isFloat, torchDtype, type DType } from '../vocabulary/dtypes';
import {
  arithmetic,
  asNumber,
  dottedText,
  foldBuiltin,
  parseFloatLit,
  parseInteger,
  parseString,
  sameKey,
  truthy,
  type DictEntry,
  type Val,
} from '../analysis/values';
import { numelOf, type ModuleNode } from '../model/tree';
import type { Node } from '../parsing/python';
import type { Project, PyFile } from '../project/project';
import { bindLayerArgs, COMPOSITES, CONTAINERS, factoryDtype, isTorchLayer, layerParams } from './torchnn';

/**
 * A small abstract interpreter for the Python that builds `nn.Module`s: constructors and helper functions are run
 * statement by statement over statically known values (dataclass configs, dicts of named configs, arithmetic,
 * loops over ranges), producing the module tree with real names and shapes. Anything it cannot know becomes
 * `unknown` with a reason, and hard limits on steps, depth and loop iterations keep pathological code from hanging.
 */

/** An instance of a user class that is not a module (a config, a dataclass). */
export interface ObjV {
  k: 'obj';
  cls: ClassV | null;
  fields: Map<string, V>;
}

/** An `nn.Module` under construction. */
export interface ModV {
  k: 'mod';
  className: string;
  /** Registered submodules and parameters, in registration order. */
  children: Map<string, ModV>;
  params: Map<string, TensorV | null>;
  buffers: Map<string, { t: TensorV; persistent: boolean }>;
  attrs: Map<string, V>;
  cls: ClassV | null;
  /** The constructor arguments a project class was built with (rendered for exact mode). */
  ctor?: { args: V[]; kwargs: Record<string, V> };
}

export interface ClassV {
  k: 'cls';
  file: PyFile;
  node: Node;
  name: string;
}

export interface FnV {
  k: 'fn';
  file: PyFile;
  node: Node;
  name: string;
  /** The instance (or class, for classmethods) a method is bound to. */
  self?: V;
  /** The class the method was found in (for `super()`). */
  owner?: ClassV;
}

export interface TensorV {
  k: 'tensor';
  shape: number[] | null;
  dtype: DType;
  param: boolean;
  trainable: boolean;
  /** The dtype was set by the code (a `dtype=` argument, a cast), not left at PyTorch's float32 default. */
  cast?: boolean;
  /** `nn.Buffer(t, persistent=...)` (PyTorch 2.5): registered as a buffer when assigned to a module. */
  buffer?: { persistent: boolean };
}

/** A Python module of the project (`import models.llama as ml`). */
export interface PyModV {
  k: 'pymod';
  file: PyFile;
}

export type V = Val | ObjV | ModV | ClassV | FnV | TensorV | PyModV;

const U = (text: string, why: string): V => ({ k: 'unknown', text: text.slice(0, 80), why });

export class Budget extends Error {}

export interface Limits {
  steps: number;
  depth: number;
  loop: number;
}

const LIMITS: Limits = { steps: 2_000_000, depth: 64, loop: 10_000 };

interface Frame {
  file: PyFile;
  env: Map<string, V>;
  /** The class whose method runs (for `super()`) and the instance. */
  owner?: ClassV;
  self?: V;
}

class Return {
  constructor(readonly value: V) {}
}

/** `break` and `continue`, unwinding to the innermost loop. */
class Break {}
class Continue {}

/** Classes from torch.nn the interpreter constructs itself. */
function torchLayerName(q: string): string | null {
  for (const prefix of ['torch.nn.modules.linear.', 'torch.nn.modules.', 'torch.nn.']) {
    if (q.startsWith(prefix)) {
      const name = q.slice(q.lastIndexOf('.') + 1);
      return isTorchLayer(name) ? name : null;
    }
  }
  return null;
}

const TENSOR_FACTORIES = new Set([
  'ones',
  'zeros',
  'empty',
  'randn',
  'rand',
  'full',
  'arange',
  'tril',
  'triu',
  'eye',
  'ones_like',
  'zeros_like',
  'tensor',
]);

export class Interpreter {
  private steps = 0;
  private depth = 0;
  readonly notes: string[] = [];
  private readonly moduleScopes = new Map<string, Map<string, Node>>();
  private readonly moduleValues = new Map<string, V>();
  private readonly evaluating = new Set<string>();

  constructor(
    readonly project: Project,
    private readonly limits: Limits = LIMITS,
  ) {}

  private note(s: string): void {
    if (!this.notes.includes(s) && this.notes.length < 50) this.notes.push(s);
  }

  private tick(): void {
    if (++this.steps > this.limits.steps)
      throw new Budget('the model code is too complex to analyse statically');
  }

  // ---- names --------------------------------------------------------------------------------------------------

  /** The top-level bindings of a file: name -> the statement that binds it (last one wins). */
  private scopeOf(file: PyFile): Map<string, Node> {
    let scope = this.moduleScopes.get(file.path);
    if (scope) return scope;
    scope = new Map();
    const visit = (stmts: Node[]) => {
      for (const stmt of stmts) {
        const s =
          stmt.type === 'decorated_definition' ? (stmt.childForFieldName('definition') ?? stmt) : stmt;
        if (s.type === 'class_definition' || s.type === 'function_definition') {
          const n = s.childForFieldName('name')?.text;
          if (n) scope!.set(n, stmt);
        } else if (s.type === 'expression_statement') {
          const a = s.namedChild(0);
          if (a?.type === 'assignment') {
            const left = a.childForFieldName('left');
            if (left?.type === 'identifier') scope!.set(left.text, a);
          }
        } else if (s.type === 'if_statement' || s.type === 'try_statement') {
          // Definitions under `if TYPE_CHECKING:` or `try: import x` count as bindings too.
          for (const b of s
            .descendantsOfType('block')
            .filter((x) => x.parent?.parent?.id === s.id || x.parent?.id === s.id))
            visit(b.namedChildren);
        }
      }
    };
    visit(file.source.root.namedChildren);
    this.moduleScopes.set(file.path, scope);
    return scope;
  }

  /** A name at module level of `file`: its binding there, an import, or a builtin. */
  moduleName(file: PyFile, name: string): V {
    const key = `${file.path}\u0000${name}`;
    const cached = this.moduleValues.get(key);
    if (cached) return cached;
    if (this.evaluating.has(key)) return U(name, 'defined in terms of itself');
    this.evaluating.add(key);
    try {
      const v = this.resolveModuleName(file, name);
      this.moduleValues.set(key, v);
      return v;
    } finally {
      this.evaluating.delete(key);
    }
  }

  private resolveModuleName(file: PyFile, name: string): V {
    const binding = this.scopeOf(file).get(name);
    if (binding) {
      const def =
        binding.type === 'decorated_definition' ? binding.childForFieldName('definition')! : binding;
      if (def.type === 'class_definition') return { k: 'cls', file, node: binding, name };
      if (def.type === 'function_definition') return { k: 'fn', file, node: def, name };
      if (def.type === 'assignment') {
        const right = def.childForFieldName('right');
        return right ? this.eval(right, { file, env: new Map() }) : U(name, 'no value');
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
  private importValue(file: PyFile, qualified: string, isModule: boolean): V {
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

  private lookup(name: string, frame: Frame): V {
    const local = frame.env.get(name);
    if (local !== undefined) return local;
    return this.moduleName(frame.file, name);
  }

  // ---- expressions --------------------------------------------------------------------------------------------

  eval(node: Node, frame: Frame): V {
    this.tick();
    if (++this.depth > this.limits.depth * 4) {
      this.depth--;
      return U(node.text, 'nested too deeply');
    }
    try {
      return this.evalNode(node, frame);
    } finally {
      this.depth--;
    }
  }

  private evalNode(node: Node, frame: Frame): V {
    switch (node.type) {
      case 'integer':
        return parseInteger(node.text);
      case 'float':
        return parseFloatLit(node.text);
      case 'true':
        return { k: 'bool', v: true };
      case 'false':
        return { k: 'bool', v: false };
      case 'none':
        return { k: 'none' };
      case 'string':
        return parseString(node);
      case 'concatenated_string': {
        let s = '';
        for (const c of node.namedChildren) {
          const v = this.eval(c, frame);
          if (v.k !== 'str') return U(node.text, 'not a constant string');
          s += v.v;
        }
        return { k: 'str', v: s };
      }
      case 'parenthesized_expression': {
        const inner = node.namedChild(0);
        return inner ? this.eval(inner, frame) : U(node.text, 'empty');
      }
      case 'identifier':
        return this.lookup(node.text, frame);
      case 'tuple':
      case 'list':
      case 'set':
      case 'expression_list':
        return {
          k: 'seq',
          kind: node.type === 'list' ? 'list' : node.type === 'set' ? 'set' : 'tuple',
          items: node.namedChildren
            .filter((c) => c.type !== 'comment')
            .flatMap((c) => this.spreadItem(c, frame)) as Val[],
        };
      case 'dictionary': {
        const entries: DictEntry[] = [];
        for (const c of node.namedChildren) {
          if (c.type === 'pair') {
            const k = c.childForFieldName('key');
            const v = c.childForFieldName('value');
            if (k && v) setKey(entries, this.eval(k, frame) as Val, this.eval(v, frame));
          } else if (c.type === 'dictionary_splat') {
            const inner = c.namedChild(0);
            const v = inner ? this.eval(inner, frame) : undefined;
            if (v?.k === 'dict') for (const e of v.entries) setKey(entries, e.key, e.value);
          }
        }
        return { k: 'dict', entries };
      }
      case 'list_comprehension':
      case 'generator_expression':
        return this.comprehension(node, frame);
      case 'attribute': {
        const obj = node.childForFieldName('object');
        const attr = node.childForFieldName('attribute')?.text;
        if (!obj || !attr) return U(node.text, 'incomplete');
        return this.getattr(this.eval(obj, frame), attr, node.text);
      }
      case 'subscript': {
        const value = node.childForFieldName('value');
        const sub = node.childForFieldName('subscript');
        if (!value || !sub) return U(node.text, 'incomplete');
        return this.getitem(
          this.eval(value, frame),
          sub.type === 'slice' ? U(sub.text, 'a slice') : this.eval(sub, frame),
          node.text,
        );
      }
      case 'unary_operator': {
        const arg = node.childForFieldName('argument');
        const op = node.childForFieldName('operator')?.text;
        const v = arg ? this.eval(arg, frame) : U(node.text, 'empty');
        if (v.k === 'tensor') return { ...v, param: false };
        if (v.k !== 'num') return U(node.text, 'not a number');
        return op === '-' ? { ...v, v: -v.v } : v;
      }
      case 'not_operator': {
        const arg = node.childForFieldName('argument');
        const t = arg ? truthy(this.eval(arg, frame) as Val) : undefined;
        return t === undefined ? U(node.text, 'unknown condition') : { k: 'bool', v: !t };
      }
      case 'binary_operator': {
        const l = node.childForFieldName('left');
        const r = node.childForFieldName('right');
        const op = node.childForFieldName('operator')?.text;
        if (!l || !r || !op) return U(node.text, 'incomplete');
        const a = this.eval(l, frame);
        const b = this.eval(r, frame);
        if (a.k === 'str' && b.k === 'str' && op === '+') return { k: 'str', v: a.v + b.v };
        if (a.k === 'seq' && b.k === 'seq' && op === '+')
          return { k: 'seq', kind: a.kind, items: [...a.items, ...b.items] };
        if (
          a.k === 'seq' &&
          op === '*' &&
          b.k === 'num' &&
          b.int &&
          b.v >= 0 &&
          b.v * a.items.length <= this.limits.loop
        )
          return { k: 'seq', kind: a.kind, items: Array.from({ length: b.v }, () => a.items).flat() };
        if (a.k === 'tensor' || b.k === 'tensor') return tensorArithmetic(a, b, op);
        const x = asNumber(a as Val);
        const y = asNumber(b as Val);
        if (!x || !y) return U(node.text, 'not a constant number');
        return arithmetic(op, x, y, node.text);
      }
      case 'boolean_operator': {
        const l = node.childForFieldName('left');
        const r = node.childForFieldName('right');
        const op = node.childForFieldName('operator')?.text;
        if (!l || !r) return U(node.text, 'incomplete');
        const lv = this.eval(l, frame);
        const t = truthy(lv as Val);
        if (t === undefined) return U(node.text, 'unknown condition');
        if (op === 'and') return t ? this.eval(r, frame) : lv;
        return t ? lv : this.eval(r, frame);
      }
      case 'comparison_operator':
        return this.compare(node, frame);
      case 'conditional_expression': {
        const [a, cond, b] = node.namedChildren;
        if (!a || !cond || !b) return U(node.text, 'incomplete');
        const t = this.condition(cond, frame);
        return this.eval(t ? a : b, frame);
      }
      case 'call':
        return this.evalCall(node, frame);
      case 'lambda':
        return { k: 'lambda', text: node.text, node };
      default:
        return U(node.text, `a ${node.type.replace(/_/g, ' ')}`);
    }
  }

  private spreadItem(c: Node, frame: Frame): V[] {
    if (c.type === 'list_splat') {
      const inner = c.namedChild(0);
      const v = inner ? this.eval(inner, frame) : undefined;
      return v?.k === 'seq' ? v.items : [U(c.text, 'unknown sequence')];
    }
    return [this.eval(c, frame)];
  }

  private compare(node: Node, frame: Frame): V {
    const operands = node.namedChildren;
    const ops = node.children.filter((c) => !c.isNamed).map((c) => c.text);
    if (operands.length !== 2) return U(node.text, 'chained comparison');
    const a = this.eval(operands[0]!, frame);
    const b = this.eval(operands[1]!, frame);
    const op = ops.join(' ');
    if (op === 'is' || op === 'is not') {
      const known = (v: V) => v.k !== 'unknown' && v.k !== 'param';
      if (!known(a) || !known(b)) return U(node.text, 'identity of an unknown value');
      const same = (a.k === 'none') === (b.k === 'none') && (a.k === 'none' || a === b);
      return { k: 'bool', v: op === 'is' ? same : !same };
    }
    if (op === 'in' || op === 'not in') {
      if (b.k === 'seq' || b.k === 'dict') {
        const items = b.k === 'seq' ? b.items : b.entries.map((e) => e.key);
        if (a.k === 'unknown') return U(node.text, 'unknown member');
        const found = items.some((x) => sameKey(x, a as Val));
        return { k: 'bool', v: op === 'in' ? found : !found };
      }
      return U(node.text, 'membership in an unknown container');
    }
    const x = asNumber(a as Val);
    const y = asNumber(b as Val);
    if (x && y) {
      const r = {
        '<': x.v < y.v,
        '<=': x.v <= y.v,
        '>': x.v > y.v,
        '>=': x.v >= y.v,
        '==': x.v === y.v,
        '!=': x.v !== y.v,
      }[op];
      if (r !== undefined) return { k: 'bool', v: r };
    }
    if (a.k === 'str' && b.k === 'str' && (op === '==' || op === '!='))
      return { k: 'bool', v: (a.v === b.v) === (op === '==') };
    if (
      (a.k === 'none') !== (b.k === 'none') &&
      (op === '==' || op === '!=') &&
      a.k !== 'unknown' &&
      b.k !== 'unknown'
    )
      return { k: 'bool', v: op === '!=' };
    return U(node.text, 'comparison of unknown values');
  }

  /** A condition's truth; unknown ones are taken as true (the code's main path), with a note. */
  private condition(cond: Node, frame: Frame): boolean {
    const t = truthy(this.eval(cond, frame) as Val);
    if (t !== undefined) return t;
    this.note(`condition \`${cond.text.slice(0, 60)}\` is not known statically: assumed true`);
    return true;
  }

  private comprehension(node: Node, frame: Frame): V {
    const body = node.childForFieldName('body');
    const clauses = node.namedChildren.filter((c) => c.type === 'for_in_clause' || c.type === 'if_clause');
    if (!body) return U(node.text, 'incomplete');
    const out: V[] = [];
    const env = new Map(frame.env);
    const inner: Frame = { ...frame, env };
    const run = (i: number): boolean => {
      if (i === clauses.length) {
        out.push(this.eval(body, inner));
        return out.length <= this.limits.loop;
      }
      const c = clauses[i]!;
      if (c.type === 'if_clause') {
        const cond = c.namedChild(0);
        return cond && !truthy(this.eval(cond, inner) as Val) ? true : run(i + 1);
      }
      const left = c.childForFieldName('left');
      const right = c.childForFieldName('right');
      if (!left || !right) return false;
      const items = this.iterate(this.eval(right, inner));
      if (!items) return false;
      for (const it of items) {
        this.assignTarget(left, it, inner);
        if (!run(i + 1)) return false;
      }
      return true;
    };
    if (!run(0)) return U(node.text, 'a comprehension over unknown values');
    return { k: 'seq', kind: 'list', items: out as Val[] };
  }

  /** Items of an iterable, or null when unknown. */
  private iterate(v: V): V[] | null {
    if (v.k === 'seq') return v.items;
    if (v.k === 'dict') return v.entries.map((e) => e.key);
    if (v.k === 'mod' && (v.className === 'ModuleList' || v.className === 'Sequential'))
      return [...v.children.values()];
    if (v.k === 'mod' && v.className === 'ModuleDict')
      return [...v.children.keys()].map((k) => ({ k: 'str', v: k }));
    if (v.k === 'str') return [...v.v].map((c) => ({ k: 'str', v: c }));
    return null;
  }

  private getattr(obj: V, attr: string, text: string): V {
    switch (obj.k) {
      case 'ref':
        return { k: 'ref', name: `${obj.name}.${attr}`, bound: obj.bound };
      case 'pymod':
        return this.moduleName(obj.file, attr);
      case 'obj': {
        const f = obj.fields.get(attr);
        if (f !== undefined) return f;
        if (obj.cls)
          return this.classAttr(obj.cls, attr, obj) ?? U(text, `${obj.cls.name} has no attribute ${attr}`);
        return U(text, `no attribute ${attr}`);
      }
      case 'mod': {
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
        return this.classAttr(obj, attr, obj) ?? U(text, `${obj.name} has no attribute ${attr}`);
      case 'dict': {
        const e = obj.entries.find((x) => x.key.k === 'str' && x.key.v === attr);
        if (e) return e.value;
        return { k: 'ref', name: `dict.${attr}`, bound: false };
      }
      case 'call': {
        const v = obj.kwargs[attr];
        return v ?? U(text, `attribute of ${obj.callee}(...)`);
      }
      case 'tensor':
        return tensorAttr(obj, attr, text);
      default:
        return U(text, `attribute ${attr} of an unknown value`);
    }
  }

  /** A class attribute, class-body constant or method (bound to `self` when given), searching the bases. */
  private classAttr(cls: ClassV, attr: string, self: V, seen = new Set<string>()): V | undefined {
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
        if (right) return this.eval(right, { file: cls.file, env: new Map() });
      }
    }
    for (const base of this.bases(cls)) if (base.k === 'cls') return this.classAttr(base, attr, self, seen);
    return undefined;
  }

  private getitem(container: V, key: V, text: string): V {
    if (container.k === 'dict') {
      const e = container.entries.find((x) => sameKey(x.key, key as Val));
      return e ? e.value : U(text, 'key not found');
    }
    if (container.k === 'seq' && key.k === 'num' && key.int) {
      const i = key.v < 0 ? container.items.length + key.v : key.v;
      return container.items[i] ?? U(text, 'index out of range');
    }
    if (container.k === 'mod') {
      const name =
        key.k === 'num'
          ? String(key.v < 0 ? container.children.size + key.v : key.v)
          : key.k === 'str'
            ? key.v
            : null;
      const c = name !== null ? container.children.get(name) : undefined;
      return c ?? U(text, 'no such submodule');
    }
    return U(text, 'an item of an unknown container');
  }

  // ---- calls --------------------------------------------------------------------------------------------------

  private evalCall(node: Node, frame: Frame): V {
    const fnNode = node.childForFieldName('function');
    const argList = node.childForFieldName('arguments');
    if (!fnNode) return U(node.text, 'incomplete');
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
    const callee = this.eval(fnNode, frame);
    const { args, kwargs } = this.readArgs(argList, frame);
    return this.call(callee, args, kwargs, node.text, fnNode, frame);
  }

  private readArgs(argList: Node | null, frame: Frame): { args: V[]; kwargs: Record<string, V> } {
    const args: V[] = [];
    const kwargs: Record<string, V> = {};
    if (argList?.type === 'generator_expression') return { args: [this.eval(argList, frame)], kwargs };
    for (const a of argList?.namedChildren ?? []) {
      if (a.type === 'keyword_argument') {
        const n = a.childForFieldName('name');
        const v = a.childForFieldName('value');
        if (n && v) kwargs[n.text] = this.eval(v, frame);
      } else if (a.type === 'dictionary_splat') {
        const inner = a.namedChild(0);
        const v = inner ? this.eval(inner, frame) : undefined;
        if (v?.k === 'dict') for (const e of v.entries) if (e.key.k === 'str') kwargs[e.key.v] = e.value;
        if (v?.k === 'obj') for (const [k, x] of v.fields) kwargs[k] = x;
      } else if (a.type === 'list_splat') {
        const inner = a.namedChild(0);
        const v = inner ? this.eval(inner, frame) : undefined;
        if (v?.k === 'seq') args.push(...v.items);
        else if (v?.k === 'mod') args.push(...v.children.values());
        else args.push(U(a.text, 'unknown splat'));
      } else if (a.type !== 'comment') args.push(this.eval(a, frame));
    }
    return { args, kwargs };
  }

  call(callee: V, args: V[], kwargs: Record<string, V>, text: string, fnNode?: Node, frame?: Frame): V {
    this.tick();
    if (callee.k === 'cls') return this.instantiate(callee, args, kwargs);
    if (callee.k === 'fn') return this.callFunction(callee, args, kwargs);
    if (callee.k === 'ref') return this.callRef(callee.name, args, kwargs, text, fnNode, frame);
    return U(text, 'a call of an unknown function');
  }

  /** Calls of names outside the project: torch layers and tensor factories, builtins, container methods. */
  private callRef(
    q: string,
    args: V[],
    kwargs: Record<string, V>,
    text: string,
    fnNode?: Node,
    frame?: Frame,
  ): V {
    const layer = torchLayerName(q);
    if (layer) return this.torchLayer(layer, args, kwargs, text);
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
    if (q.startsWith('torch.') && TENSOR_FACTORIES.has(last)) return this.tensorFactory(last, args, kwargs);
    // Methods called on values (`self.layers.append(block)` reaches here as `<ModuleList>.append`).
    if (fnNode?.type === 'attribute' && frame) {
      const obj = fnNode.childForFieldName('object');
      if (obj) {
        const target = this.eval(obj, frame);
        const r = this.method(target, last, args, kwargs, text);
        if (r) return r;
      }
    }
    switch (q) {
      case 'range': {
        const n = args.map((a) => (a.k === 'num' && a.int ? a.v : null));
        if (n.some((x) => x === null) || !n.length) return U(text, 'a range of unknown size');
        const [start, stop, step] = n.length === 1 ? [0, n[0]!, 1] : [n[0]!, n[1]!, n[2] ?? 1];
        if (!step || Math.abs((stop! - start!) / step) > this.limits.loop)
          return U(text, 'a range too long to follow');
        const items: Val[] = [];
        for (let i = start!; step > 0 ? i < stop! : i > stop!; i += step)
          items.push({ k: 'num', v: i, int: true });
        return { k: 'seq', kind: 'list', items };
      }
      case 'enumerate': {
        const items = args[0] ? this.iterate(args[0]) : null;
        return items
          ? {
              k: 'seq',
              kind: 'list',
              items: items.map((it, i) => ({
                k: 'seq',
                kind: 'tuple',
                items: [{ k: 'num', v: i, int: true }, it as Val],
              })),
            }
          : U(text, 'enumerate of unknown');
      }
      case 'zip': {
        const lists = args.map((a) => this.iterate(a));
        if (lists.some((l) => !l)) return U(text, 'zip of unknown');
        const n = Math.min(...lists.map((l) => l!.length));
        return {
          k: 'seq',
          kind: 'list',
          items: Array.from(
            { length: n },
            (_, i) => ({ k: 'seq', kind: 'tuple', items: lists.map((l) => l![i] as Val) }) as Val,
          ),
        };
      }
      case 'getattr': {
        const [o, n, d] = args;
        if (o && n?.k === 'str') {
          const v = this.getattr(o, n.v, text);
          return v.k === 'unknown' && d ? d : v;
        }
        return U(text, 'getattr of unknown');
      }
      case 'hasattr':
        return U(text, 'hasattr');
      case 'isinstance':
        return U(text, 'isinstance');
      case 'OrderedDict':
      case 'collections.OrderedDict': {
        const items = args[0] ? this.iterate(args[0]) : [];
        const entries: DictEntry[] = [];
        for (const it of items ?? [])
          if (it.k === 'seq' && it.items.length === 2) setKey(entries, it.items[0]!, it.items[1]!);
        return { k: 'dict', entries };
      }
      case 'dataclasses.replace':
      case 'replace': {
        const base = args[0];
        if (base?.k === 'obj')
          return { ...base, fields: new Map([...base.fields, ...Object.entries(kwargs)]) };
        return U(text, 'replace of unknown');
      }
      case 'copy.deepcopy':
      case 'copy.copy':
      case 'deepcopy':
        // A shallow copy of a module shares its parameters; a deep copy has its own.
        if (args[0]?.k === 'mod' && q === 'copy.copy') return args[0];
        return args[0] ? cloneValue(args[0]) : U(text, 'copy');
    }
    if (q === 'len' && args[0]?.k === 'mod') return { k: 'num', v: args[0].children.size, int: true };
    const folded = foldBuiltin(q, args as Val[], kwargs as Record<string, Val>);
    if (folded) return folded;
    if (q === 'dict') {
      const entries: DictEntry[] = [];
      if (args[0]?.k === 'dict') entries.push(...args[0].entries);
      for (const [k, v] of Object.entries(kwargs)) setKey(entries, { k: 'str', v: k }, v);
      return { k: 'dict', entries };
    }
    return U(text, `a call of ${q}`);
  }

  /** Methods on values the interpreter tracks; undefined when not one of them. */
  private method(target: V, name: string, args: V[], kwargs: Record<string, V>, text: string): V | undefined {
    if (target.k === 'mod') {
      switch (name) {
        case 'append':
          if (args[0]?.k === 'mod') this.register(target, String(target.children.size), args[0]);
          return { k: 'none' };
        case 'extend':
          for (const m of (args[0] && this.iterate(args[0])) ?? [])
            if (m.k === 'mod') this.register(target, String(target.children.size), m);
          return { k: 'none' };
        case 'add_module':
        case 'register_module':
          if (args[0]?.k === 'str' && args[1]?.k === 'mod') this.register(target, args[0].v, args[1]);
          return { k: 'none' };
        case 'register_buffer': {
          const n = args[0];
          const t = args[1] ?? kwargs.tensor;
          const persistent = kwargs.persistent ?? args[2];
          if (n?.k === 'str') {
            if (t?.k === 'tensor' && t.shape)
              target.buffers.set(n.v, { t, persistent: !(persistent?.k === 'bool' && !persistent.v) });
            else if (t?.k !== 'none')
              this.note(`buffer ${n.v} of ${target.className} has a shape not known statically: not counted`);
          }
          return { k: 'none' };
        }
        case 'register_parameter':
          if (args[0]?.k === 'str' && args[1]?.k === 'tensor') target.params.set(args[0].v, args[1]);
          return { k: 'none' };
        case 'items':
          return {
            k: 'seq',
            kind: 'list',
            items: [...target.children].map(([k, m]) => ({
              k: 'seq',
              kind: 'tuple',
              items: [{ k: 'str', v: k }, m as unknown as Val],
            })),
          };
        case 'values':
        case 'children':
          return { k: 'seq', kind: 'list', items: [...target.children.values()] as unknown as Val[] };
        case 'keys':
          return {
            k: 'seq',
            kind: 'list',
            items: [...target.children.keys()].map((k) => ({ k: 'str', v: k })),
          };
        case 'to':
        case 'type':
        case 'half':
        case 'bfloat16':
        case 'float':
        case 'double': {
          // Module._apply: floating-point parameters and buffers take the dtype; integer buffers keep theirs.
          const dt =
            name === 'to' || name === 'type'
              ? (dtypeOf(kwargs.dtype) ?? args.map(dtypeOf).find((x) => x))
              : castMethodDtype(name);
          if (dt) castModule(target, dt);
          else if (kwargs.dtype && kwargs.dtype.k !== 'none')
            // A positional argument is usually a device (`model.to(device)`); only `dtype=` is surely a cast.
            this.note(`${text.slice(0, 60)}: the dtype it casts to is not known statically`);
          return target;
        }
        case 'apply':
        case 'init_weights':
        case '_init_weights':
        case 'reset_parameters':
          return { k: 'none' };
        case 'cuda':
        case 'cpu':
        case 'train':
        case 'eval':
        case 'requires_grad_':
          if (name === 'requires_grad_' && args[0]?.k === 'bool' && !args[0].v) freeze(target);
          return target;
        default:
          return undefined;
      }
    }
    if (target.k === 'dict') {
      if (name === 'get') {
        const e = target.entries.find((x) => sameKey(x.key, args[0] as Val));
        return e ? e.value : (args[1] ?? { k: 'none' });
      }
      if (name === 'items')
        return {
          k: 'seq',
          kind: 'list',
          items: target.entries.map((e) => ({ k: 'seq', kind: 'tuple', items: [e.key, e.value] })),
        };
      if (name === 'values') return { k: 'seq', kind: 'list', items: target.entries.map((e) => e.value) };
      if (name === 'keys') return { k: 'seq', kind: 'list', items: target.entries.map((e) => e.key) };
      if (name === 'copy') return { k: 'dict', entries: [...target.entries] };
      return undefined;
    }
    if (target.k === 'seq' && (name === 'append' || name === 'extend') && target.kind === 'list') {
      if (name === 'append' && args[0]) target.items.push(args[0] as Val);
      if (name === 'extend' && args[0]) target.items.push(...((this.iterate(args[0]) ?? []) as Val[]));
      return { k: 'none' };
    }
    if (target.k === 'str' && name === 'format') return U(text, 'str.format');
    if (target.k === 'tensor') return tensorMethod(target, name, args, kwargs);
    return undefined;
  }

  private tensorFactory(name: string, args: V[], kwargs: Record<string, V>): V {
    const t = this.newTensor(name, args, kwargs);
    // `torch.zeros(..., dtype=torch.float32)` in a model cast to bf16 stays float32: the dtype was chosen.
    return t.k === 'tensor' && dtypeOf(kwargs.dtype) ? { ...t, cast: true } : t;
  }

  private newTensor(name: string, args: V[], kwargs: Record<string, V>): V {
    const dtypeV = kwargs.dtype;
    const dt =
      dtypeV?.k === 'ref' && dtypeV.name.startsWith('torch.')
        ? (torchDtype(dtypeV.name.slice(6)) ?? dtypeV.name.slice(6))
        : undefined;
    const dtype = factoryDtype(name, dt);
    if (name === 'tril' || name === 'triu' || name === 'ones_like' || name === 'zeros_like') {
      const t = args[0];
      return t?.k === 'tensor'
        ? { ...t, dtype: name.endsWith('like') && dt ? dtype : t.dtype, param: false }
        : { k: 'tensor', shape: null, dtype, param: false, trainable: false };
    }
    if (name === 'arange') {
      const n = args.map((a) => (a.k === 'num' ? a.v : null));
      const [start, end, step] = n.length === 1 ? [0, n[0], 1] : [n[0], n[1], n[2] ?? 1];
      const len =
        start !== null && end !== null && step ? Math.max(0, Math.ceil((end! - start!) / step!)) : null;
      return {
        k: 'tensor',
        shape: len === null ? null : [len],
        dtype: dt ? dtype : args.some((a) => a.k === 'num' && !a.int) ? 'float32' : 'int64',
        param: false,
        trainable: false,
      };
    }
    if (name === 'eye') {
      const a = args[0];
      const b = args[1] ?? a;
      return {
        k: 'tensor',
        shape: a?.k === 'num' && b?.k === 'num' ? [a.v, b.v] : null,
        dtype,
        param: false,
        trainable: false,
      };
    }
    if (name === 'tensor')
      return {
        k: 'tensor',
        shape: args[0]?.k === 'seq' ? [args[0].items.length] : [],
        dtype,
        param: false,
        trainable: false,
      };
    // ones(*size) / ones(size_tuple); full(size, value)
    const sizeArgs = name === 'full' ? args.slice(0, 1) : args;
    return { k: 'tensor', shape: shapeOf(sizeArgs), dtype, param: false, trainable: false };
  }

  // ---- modules and classes ------------------------------------------------------------------------------------

  private torchLayer(name: string, args: V[], kwargs: Record<string, V>, text: string): V {
    const m = newModule(name, null);
    if (CONTAINERS.has(name)) {
      const first = args[0];
      if (name === 'Sequential') {
        const items =
          args.length === 1 && first?.k === 'dict'
            ? first.entries.map((e) => [e.key, e.value] as const)
            : args.map((a, i) => [{ k: 'str', v: String(i) } as Val, a] as const);
        for (const [k, v] of items) if (v.k === 'mod' && k.k === 'str') this.register(m, k.v, v);
      } else if (name === 'ModuleList') {
        const items = first ? this.iterate(first) : [];
        if (first && !items) this.note(`${text.slice(0, 60)}: the list of modules is not known statically`);
        (items ?? []).forEach((v, i) => v.k === 'mod' && this.register(m, String(i), v));
      } else if (name === 'ModuleDict') {
        if (first?.k === 'dict')
          for (const e of first.entries)
            if (e.key.k === 'str' && (e.value as V).k === 'mod')
              this.register(m, e.key.v, e.value as unknown as ModV);
      }
      return m;
    }
    const plain = (v: V): number | boolean | string | number[] | null | undefined =>
      v.k === 'num'
        ? v.v
        : v.k === 'bool'
          ? v.v
          : v.k === 'str'
            ? v.v
            : v.k === 'none'
              ? null
              : v.k === 'seq' && v.items.every((x) => x.k === 'num')
                ? v.items.map((x) => (x as { v: number }).v)
                : undefined;
    const bound = bindLayerArgs(
      name,
      args.map(plain),
      Object.fromEntries(Object.entries(kwargs).map(([k, v]) => [k, plain(v)])),
    );
    if (COMPOSITES.has(name)) {
      const c = this.compositeLayer(name, bound, args, kwargs, text);
      const dt = dtypeOf(kwargs.dtype);
      if (dt && c.k === 'mod') castModule(c, dt);
      return c;
    }
    const spec = layerParams(name, bound);
    if (!spec.params) {
      this.note(`${text.slice(0, 60)}: ${spec.unknown}; its parameters are not counted`);
      return m;
    }
    // `nn.Linear(..., dtype=torch.bfloat16)`: the factory kwarg every torch.nn layer takes.
    const dtype = dtypeOf(kwargs.dtype);
    for (const p of spec.params)
      m.params.set(p.name, {
        k: 'tensor',
        shape: p.shape,
        dtype: dtype ?? 'float32',
        param: true,
        trainable: true,
        ...(dtype ? { cast: true } : {}),
      });
    for (const b of spec.buffers ?? [])
      m.buffers.set(b.name, {
        t: {
          k: 'tensor',
          shape: b.shape,
          dtype: dtype && isFloat(b.dtype) ? dtype : b.dtype,
          param: false,
          trainable: false,
        },
        persistent: true,
      });
    if (name === 'MultiheadAttention') {
      const e = bound.embed_dim as number;
      const out = newModule('NonDynamicallyQuantizableLinear', null);
      out.params.set('weight', {
        k: 'tensor',
        shape: [e, e],
        dtype: 'float32',
        param: true,
        trainable: true,
      });
      if (bound.bias !== false)
        out.params.set('bias', { k: 'tensor', shape: [e], dtype: 'float32', param: true, trainable: true });
      if (dtype) castModule(out, dtype);
      this.register(m, 'out_proj', out);
    }
    return m;
  }

  /**
   * torch.nn's transformer layers, built from their parts as PyTorch's transformer.py does. An encoder layer holds
   * `self_attn` (MultiheadAttention), `linear1` [ff, d], `linear2` [d, ff], `norm1`, `norm2`; a decoder layer adds
   * `multihead_attn` and `norm3`. TransformerEncoder/Decoder hold `num_layers` deep copies of the layer given and
   * an optional final `norm`; nn.Transformer builds one of each with a final LayerNorm.
   */
  private compositeLayer(
    name: string,
    a: Record<string, unknown>,
    args: V[],
    kwargs: Record<string, V>,
    text: string,
  ): V {
    const m = newModule(name, null);
    const num = (k: string, dflt: number): number | null => {
      const v = a[k];
      if (v === undefined || v === null) return dflt;
      return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : null;
    };
    const bias = a.bias === undefined ? true : a.bias;
    const lin = (i: number, o: number) =>
      this.torchLayer('Linear', [], { ...num3(i, o), bias: bool(bias) }, text);
    const norm = (d: number) =>
      this.torchLayer('LayerNorm', [], { normalized_shape: int(d), bias: bool(bias) }, text);
    const layer = (decoder: boolean, d: number, h: number, ff: number): ModV => {
      const l = newModule(decoder ? 'TransformerDecoderLayer' : 'TransformerEncoderLayer', null);
      const attn = () =>
        this.torchLayer('MultiheadAttention', [int(d), int(h)], { bias: bool(bias) }, text) as ModV;
      this.register(l, 'self_attn', attn());
      if (decoder) this.register(l, 'multihead_attn', attn());
      this.register(l, 'linear1', lin(d, ff) as ModV);
      this.register(l, 'dropout', newModule('Dropout', null));
      this.register(l, 'linear2', lin(ff, d) as ModV);
      for (const n of decoder ? ['norm1', 'norm2', 'norm3'] : ['norm1', 'norm2'])
        this.register(l, n, norm(d) as ModV);
      for (const n of decoder ? ['dropout1', 'dropout2', 'dropout3'] : ['dropout1', 'dropout2'])
        this.register(l, n, newModule('Dropout', null));
      return l;
    };
    const unknown = (why: string) => {
      this.note(`${text.slice(0, 60)}: ${why}; its parameters are not counted`);
      return m;
    };
    const stack = (
      kind: string,
      proto: V | undefined,
      n: number | null,
      final: V | undefined,
    ): ModV | null => {
      if (proto?.k !== 'mod' || n === null || n > this.limits.loop) return null;
      const s = newModule(kind, null);
      const list = newModule('ModuleList', null);
      for (let i = 0; i < n; i++) this.register(list, String(i), cloneModule(proto));
      this.register(s, 'layers', list);
      if (final?.k === 'mod') this.register(s, 'norm', final);
      return s;
    };
    if (name === 'TransformerEncoderLayer' || name === 'TransformerDecoderLayer') {
      const d = num('d_model', -1);
      const h = num('nhead', -1);
      const ff = num('dim_feedforward', 2048);
      if (d === null || d < 0 || h === null || h < 0 || ff === null || typeof bias !== 'boolean')
        return unknown(`${name} sizes unknown`);
      const l = layer(name === 'TransformerDecoderLayer', d, h, ff);
      return l;
    }
    if (name === 'TransformerEncoder' || name === 'TransformerDecoder') {
      const proto = args[0] ?? kwargs.encoder_layer ?? kwargs.decoder_layer;
      const s = stack(name, proto, num('num_layers', -1), args[2] ?? kwargs.norm);
      return s ?? unknown(`${name} with a layer or count not known statically`);
    }
    // nn.Transformer
    const d = num('d_model', 512);
    const h = num('nhead', 8);
    const ne = num('num_encoder_layers', 6);
    const nd = num('num_decoder_layers', 6);
    const ff = num('dim_feedforward', 2048);
    if (d === null || h === null || ne === null || nd === null || ff === null || typeof bias !== 'boolean')
      return unknown('Transformer sizes unknown');
    if (
      (kwargs.custom_encoder && kwargs.custom_encoder.k !== 'none') ||
      (kwargs.custom_decoder && kwargs.custom_decoder.k !== 'none') ||
      args.length > 7
    )
      return unknown('Transformer with a custom encoder or decoder');
    const enc = stack('TransformerEncoder', layer(false, d, h, ff), ne, norm(d));
    const dec = stack('TransformerDecoder', layer(true, d, h, ff), nd, norm(d));
    if (!enc || !dec) return unknown('Transformer too deep to follow');
    this.register(m, 'encoder', enc);
    this.register(m, 'decoder', dec);
    return m;
  }

  /** Registers `child` as `name` under `parent` (PyTorch's `__setattr__` for modules). */
  private register(parent: ModV, name: string, child: ModV): void {
    parent.children.delete(name);
    parent.children.set(name, child);
  }

  /** The classes a class derives from (project classes, or references to library classes). */
  bases(cls: ClassV): V[] {
    const def = classDef(cls);
    const list = def.childForFieldName('superclasses');
    return (list?.namedChildren ?? [])
      .filter((c) => c.type !== 'keyword_argument')
      .map((b) => this.eval(b, { file: cls.file, env: new Map() }));
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
  instantiate(cls: ClassV, args: V[], kwargs: Record<string, V>): V {
    if (++this.depth > this.limits.depth) {
      // Only this instance is unknown: the modules around it are still built.
      this.depth--;
      this.note(`${cls.name}(...) is built too deep in nested calls to follow: it is not counted`);
      return U(cls.name, 'classes nest too deeply to analyse');
    }
    try {
      const isModule = this.isModuleClass(cls);
      const layer = isModule ? this.torchBase(cls) : null;
      const self: V = isModule
        ? layer
          ? { ...(this.torchLayer(layer, args, kwargs, cls.name) as ModV), className: cls.name, cls }
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

  private dataclassInit(cls: ClassV, self: ObjV, args: V[], kwargs: Record<string, V>): void {
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
      let v: V | undefined = i < args.length ? args[i] : kwargs[f.name];
      if (v === undefined && f.dflt) {
        v = this.eval(f.dflt, { file: cls.file, env: new Map() });
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
              ? this.call(fk.default_factory, [], {}, 'default_factory')
              : U(f.name, 'no default'));
        }
      }
      self.fields.set(f.name, v ?? U(f.name, 'a required field not given'));
    });
  }

  /** Runs a function or method with bound arguments; its return value. */
  callFunction(fn: FnV, args: V[], kwargs: Record<string, V>): V {
    if (++this.depth > this.limits.depth) {
      this.depth--;
      this.note(`${fn.name}() is called too deep in nested calls to follow: its result is not known`);
      return U(fn.name, 'calls nest too deeply to analyse');
    }
    try {
      const env = new Map<string, V>();
      const params = fn.node.childForFieldName('parameters')?.namedChildren ?? [];
      let i = 0;
      const positional = fn.self !== undefined ? [fn.self, ...args] : args;
      const rest: V[] = [];
      for (const p of params) {
        if (p.type === 'list_splat_pattern' || p.type === 'dictionary_splat_pattern') {
          const n = p.namedChild(0)?.text;
          if (n && p.type === 'list_splat_pattern')
            env.set(n, { k: 'seq', kind: 'tuple', items: positional.slice(i) as Val[] });
          if (n && p.type === 'dictionary_splat_pattern')
            env.set(n, {
              k: 'dict',
              entries: Object.entries(kwargs)
                .filter(([k]) => !env.has(k))
                .map(([k, v]) => ({ key: { k: 'str', v: k }, value: v as Val })),
            });
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
        let v: V | undefined = kwargs[name] ?? (i < positional.length ? positional[i] : undefined);
        if (v === undefined)
          v = dflt ? this.eval(dflt, { file: fn.file, env: new Map() }) : U(name, 'argument not given');
        env.set(name, v);
        i++;
      }
      void rest;
      const frame: Frame = {
        file: fn.file,
        env,
        ...(fn.owner ? { owner: fn.owner } : {}),
        ...(fn.self !== undefined ? { self: fn.self } : {}),
      };
      try {
        this.execBlock(fn.node.childForFieldName('body'), frame);
      } catch (e) {
        if (e instanceof Return) return e.value;
        if (e instanceof Break || e instanceof Continue) return U(fn.name, '`break` outside a loop');
        throw e;
      }
      return { k: 'none' };
    } finally {
      this.depth--;
    }
  }

  // ---- statements ---------------------------------------------------------------------------------------------

  execBlock(block: Node | null, frame: Frame): void {
    for (const stmt of block?.namedChildren ?? []) this.exec(stmt, frame);
  }

  private exec(stmt: Node, frame: Frame): void {
    this.tick();
    switch (stmt.type) {
      case 'expression_statement': {
        const e = stmt.namedChild(0);
        if (!e) return;
        if (e.type === 'assignment') this.assign(e, frame);
        else if (e.type === 'augmented_assignment') this.augAssign(e, frame);
        else this.eval(e, frame);
        return;
      }
      case 'return_statement': {
        const v = stmt.namedChild(0);
        throw new Return(v ? this.eval(v, frame) : { k: 'none' });
      }
      case 'if_statement': {
        const cond = stmt.childForFieldName('condition');
        if (cond && this.condition(cond, frame))
          return this.execBlock(stmt.childForFieldName('consequence'), frame);
        for (const alt of stmt.childrenForFieldName('alternative')) {
          if (alt.type === 'elif_clause') {
            const c = alt.childForFieldName('condition');
            if (c && this.condition(c, frame))
              return this.execBlock(alt.childForFieldName('consequence'), frame);
          } else return this.execBlock(alt.childForFieldName('body'), frame);
        }
        return;
      }
      case 'for_statement': {
        const left = stmt.childForFieldName('left');
        const right = stmt.childForFieldName('right');
        if (!left || !right) return;
        const items = this.iterate(this.eval(right, frame));
        if (!items) {
          this.note(
            `loop \`for ${left.text} in ${right.text.slice(0, 40)}\` runs over values not known statically: skipped`,
          );
          this.forget(stmt, frame);
          return;
        }
        if (items.length > this.limits.loop) {
          this.note(
            `loop \`for ${left.text} in ${right.text.slice(0, 40)}\` runs more than ${this.limits.loop} times: skipped, what it builds is not counted`,
          );
          this.forget(stmt, frame);
          return;
        }
        for (const it of items) {
          this.assignTarget(left, it, frame);
          const r = this.loopBody(stmt, frame);
          if (r === 'break') return;
        }
        return this.execBlock(
          stmt.childForFieldName('alternative')?.childForFieldName('body') ?? null,
          frame,
        );
      }
      case 'while_statement': {
        const cond = stmt.childForFieldName('condition');
        if (!cond) return;
        for (let n = 0; ; n++) {
          const t = truthy(this.eval(cond, frame) as Val);
          if (t === undefined || n >= this.limits.loop) {
            // Neither the number of turns nor what they build is known: what the loop assigns becomes unknown.
            this.note(
              t === undefined
                ? `loop \`while ${cond.text.slice(0, 40)}\` depends on values not known statically: what it builds is not counted`
                : `loop \`while ${cond.text.slice(0, 40)}\` runs more than ${this.limits.loop} times: stopped, what it builds is not counted`,
            );
            this.forget(stmt, frame);
            return;
          }
          if (!t) break;
          if (this.loopBody(stmt, frame) === 'break') return;
        }
        return this.execBlock(
          stmt.childForFieldName('alternative')?.childForFieldName('body') ?? null,
          frame,
        );
      }
      case 'break_statement':
        throw new Break();
      case 'continue_statement':
        throw new Continue();
      case 'with_statement':
        return this.execBlock(stmt.childForFieldName('body'), frame);
      case 'try_statement':
        return this.execBlock(stmt.childForFieldName('body'), frame);
      case 'function_definition': {
        const n = stmt.childForFieldName('name')?.text;
        if (n) frame.env.set(n, { k: 'fn', file: frame.file, node: stmt, name: n });
        return;
      }
      case 'import_from_statement':
      case 'import_statement':
        return;
      default:
        return;
    }
  }

  /** One turn of a loop's body: 'break' when it breaks out, else 'next' (after a `continue` too). */
  private loopBody(stmt: Node, frame: Frame): 'break' | 'next' {
    try {
      this.execBlock(stmt.childForFieldName('body'), frame);
    } catch (e) {
      if (e instanceof Break) return 'break';
      if (e instanceof Continue) return 'next';
      throw e;
    }
    return 'next';
  }

  /** The local names a statement assigns, made unknown (a loop that could not be followed). */
  private forget(stmt: Node, frame: Frame): void {
    for (const a of stmt.descendantsOfType(['assignment', 'augmented_assignment'])) {
      const left = a.childForFieldName('left');
      const names = left?.type === 'identifier' ? [left] : (left?.descendantsOfType('identifier') ?? []);
      for (const n of names)
        if (n.parent?.type !== 'attribute' && n.parent?.type !== 'subscript')
          frame.env.set(n.text, U(n.text, 'assigned in a loop that could not be followed'));
    }
    for (const f of stmt.descendantsOfType('for_statement')) {
      const l = f.childForFieldName('left');
      for (const n of l?.type === 'identifier' ? [l] : (l?.descendantsOfType('identifier') ?? []))
        frame.env.set(n.text, U(n.text, 'assigned in a loop that could not be followed'));
    }
  }

  private assign(a: Node, frame: Frame): void {
    const left = a.childForFieldName('left');
    const right = a.childForFieldName('right');
    if (!left || !right) return;
    const v = this.eval(right, frame);
    this.assignTarget(left, v, frame);
  }

  private augAssign(a: Node, frame: Frame): void {
    const left = a.childForFieldName('left');
    const right = a.childForFieldName('right');
    const op = a.childForFieldName('operator')?.text.replace('=', '');
    if (!left || !right || !op) return;
    const x = asNumber(this.eval(left, frame) as Val);
    const y = asNumber(this.eval(right, frame) as Val);
    this.assignTarget(left, x && y ? arithmetic(op, x, y, a.text) : U(a.text, 'unknown'), frame);
  }

  assignTarget(target: Node, v: V, frame: Frame): void {
    switch (target.type) {
      case 'identifier':
        frame.env.set(target.text, v);
        return;
      case 'pattern_list':
      case 'tuple_pattern':
      case 'list_pattern': {
        const names = target.namedChildren;
        const items = v.k === 'seq' ? v.items : null;
        names.forEach((n, i) =>
          this.assignTarget(n, items?.[i] ?? U(n.text, 'unpacked from an unknown value'), frame),
        );
        return;
      }
      case 'attribute': {
        const obj = target.childForFieldName('object');
        const attr = target.childForFieldName('attribute')?.text;
        if (!obj || !attr) return;
        this.setattr(this.eval(obj, frame), attr, v);
        return;
      }
      case 'subscript': {
        const obj = target.childForFieldName('value');
        const key = target.childForFieldName('subscript');
        if (!obj || !key) return;
        const container = this.eval(obj, frame);
        const k = this.eval(key, frame);
        if (container.k === 'mod') {
          const name = k.k === 'str' ? k.v : k.k === 'num' ? String(k.v) : null;
          if (name !== null && v.k === 'mod') this.register(container, name, v);
        } else if (container.k === 'dict' && k.k !== 'unknown') setKey(container.entries, k as Val, v);
        else if (container.k === 'seq' && k.k === 'num' && k.int) container.items[k.v] = v as Val;
        return;
      }
      default:
        return;
    }
  }

  /** `obj.attr = v`: modules register submodules and parameters as PyTorch's `__setattr__` does. */
  private setattr(obj: V, attr: string, v: V): void {
    if (obj.k === 'mod') {
      if (v.k === 'mod') {
        obj.params.delete(attr);
        this.register(obj, attr, v);
      } else if (v.k === 'tensor' && (v.param || obj.params.has(attr))) {
        obj.children.delete(attr);
        obj.params.set(attr, v.param ? v : { ...v, param: true });
      } else if (v.k === 'none' && obj.params.has(attr)) obj.params.set(attr, null);
      else if (v.k === 'tensor' && v.buffer) {
        // Registered, it is a plain tensor again: `self.y = self.x` does not make a second buffer.
        if (v.shape)
          obj.buffers.set(attr, { t: { ...v, buffer: undefined }, persistent: v.buffer.persistent });
        else this.note(`buffer ${attr} of ${obj.className} has a shape not known statically: not counted`);
      } else if (v.k === 'tensor' && obj.buffers.has(attr))
        obj.buffers.set(attr, { t: v, persistent: obj.buffers.get(attr)!.persistent });
      else obj.attrs.set(attr, v);
    } else if (obj.k === 'obj') obj.fields.set(attr, v);
    else if (obj.k === 'dict') setKey(obj.entries, { k: 'str', v: attr }, v);
  }

  // ---- results ------------------------------------------------------------------------------------------------

  /** Evaluates an expression of `file` with the names in `env` bound (the rest at module level). */
  evalWith(file: PyFile, node: Node, env: Map<string, V>): V {
    try {
      return this.eval(node, { file, env: new Map(env) });
    } catch (e) {
      if (e instanceof Budget) return U(node.text, e.message);
      throw e;
    }
  }

  /** Evaluates the expression at `node` as the code would see it: its function's body run up to it first. */
  evalAt(file: PyFile, node: Node): V {
    let fn: Node | null = null;
    for (let p = node.parent; p; p = p.parent) if (p.type === 'function_definition') fn = fn ?? p;
    const frame: Frame = { file, env: new Map() };
    if (fn) {
      for (const p of fn.childForFieldName('parameters')?.namedChildren ?? []) {
        const name =
          p.type === 'identifier'
            ? p.text
            : p.type === 'typed_parameter'
              ? p.namedChild(0)?.text
              : p.childForFieldName('name')?.text;
        const dflt = p.childForFieldName('value');
        if (name)
          frame.env.set(
            name,
            dflt
              ? this.eval(dflt, frame)
              : {
                  k: 'param',
                  name,
                  function: fn.childForFieldName('name')?.text ?? '',
                  index: 0,
                  default: null,
                },
          );
      }
      const body = fn.childForFieldName('body');
      this.runUntil(body, node, frame);
    } else this.runUntil(file.source.root, node, frame, true);
    return this.eval(node, frame);
  }

  /** Runs the statements of `block` that come before the one holding `node` (entering blocks that hold it). */
  private runUntil(block: Node | null, node: Node, frame: Frame, moduleLevel = false): void {
    for (const stmt of block?.namedChildren ?? []) {
      if (stmt.startIndex <= node.startIndex && node.endIndex <= stmt.endIndex) {
        for (const b of stmt.namedChildren.filter(
          (c) => c.type === 'block' || c.type === 'else_clause' || c.type === 'elif_clause',
        )) {
          const inner =
            b.type === 'block' ? b : (b.childForFieldName('body') ?? b.childForFieldName('consequence'));
          if (inner && inner.startIndex <= node.startIndex && node.endIndex <= inner.endIndex)
            this.runUntil(inner, node, frame, moduleLevel);
        }
        return;
      }
      if (
        moduleLevel &&
        (stmt.type === 'class_definition' ||
          stmt.type === 'function_definition' ||
          stmt.type === 'decorated_definition')
      )
        continue;
      try {
        this.exec(stmt, frame);
      } catch (e) {
        // A `break` or `continue` here belongs to a loop around the point of interest: stop where it is.
        if (e instanceof Return || e instanceof Break || e instanceof Continue) return;
        throw e;
      }
    }
  }
}

function classDef(cls: ClassV): Node {
  return cls.node.type === 'decorated_definition'
    ? (cls.node.childForFieldName('definition') ?? cls.node)
    : cls.node;
}

function isDataclass(cls: ClassV): boolean {
  if (cls.node.type !== 'decorated_definition') return false;
  return cls.node.namedChildren.some(
    (d) => d.type === 'decorator' && /^@\s*(\w+\.)*dataclass\b/.test(d.text),
  );
}

function newModule(className: string, cls: ClassV | null): ModV {
  return {
    k: 'mod',
    className,
    children: new Map(),
    params: new Map(),
    buffers: new Map(),
    attrs: new Map(),
    cls,
  };
}

function setKey(entries: DictEntry[], key: Val, value: V): void {
  const i = entries.findIndex((e) => sameKey(e.key, key));
  const e = { key, value: value as Val };
  if (i >= 0) entries[i] = e;
  else entries.push(e);
}

function shapeOf(args: V[]): number[] | null {
  const a = args.length === 1 && args[0]?.k === 'seq' ? args[0].items : args;
  const out: number[] = [];
  for (const x of a) {
    if (x.k !== 'num' || !x.int || x.v < 0) return null;
    out.push(x.v);
  }
  return out;
}

/** A torch dtype value (`torch.bfloat16`, `torch.long`) as a DType; undefined when it is not one. */
export function dtypeOf(v: V | undefined): DType | undefined {
  return v?.k === 'ref' && v.name.startsWith('torch.') ? torchDtype(v.name.slice(6)) : undefined;
}

/** Attributes of a tensor: its shape and dtype when known, else a reference its methods are called through. */
function tensorAttr(t: TensorV, attr: string, text: string): V {
  switch (attr) {
    case 'shape':
      return t.shape
        ? { k: 'seq', kind: 'tuple', items: t.shape.map((v) => ({ k: 'num', v, int: true })) }
        : U(text, 'a shape not known statically');
    case 'ndim':
      return t.shape ? { k: 'num', v: t.shape.length, int: true } : U(text, 'a shape not known statically');
    case 'dtype':
      return { k: 'ref', name: `torch.${t.dtype}`, bound: true };
    case 'T':
    case 'mT':
      return { ...t, shape: t.shape ? [...t.shape].reverse() : null, param: false, buffer: undefined };
    case 'data':
      return { ...t, param: false, buffer: undefined };
    default:
      // `buf.view(...)` reaches `method` through this reference.
      return { k: 'ref', name: `<tensor>.${attr}`, bound: false };
  }
}

/**
 * Tensor methods that keep or reshape the storage a buffer is built from (`torch.tril(...).view(1, 1, n, n)`):
 * reshapes, dimension inserts and removals, transposes, dtype casts. Any other method gives a tensor of unknown
 * shape, so a buffer made from it is reported rather than counted wrongly.
 */
function tensorMethod(t: TensorV, name: string, args: V[], kwargs: Record<string, V>): V {
  const out = (shape: number[] | null, dtype: DType = t.dtype): TensorV => ({
    ...t,
    shape,
    dtype,
    param: false,
    buffer: undefined,
  });
  const ints = (vs: V[]): number[] | null => {
    const a = vs.length === 1 && vs[0]?.k === 'seq' ? vs[0].items : vs;
    return a.every((x) => x.k === 'num' && x.int) ? a.map((x) => (x as { v: number }).v) : null;
  };
  const dim = (d: V | undefined, n: number): number | null =>
    d?.k === 'num' && d.int && d.v >= -n && d.v < n ? (d.v + n) % n : null;
  const shape = t.shape;
  switch (name) {
    case 'view':
    case 'reshape': {
      if (args.length === 1 && dtypeOf(args[0])) return out(null); // view(dtype) reinterprets the bytes
      const s = ints(args);
      if (!s || !shape) return out(null);
      const total = shape.reduce((a, b) => a * b, 1);
      const free = s.filter((x) => x === -1).length;
      if (free > 1 || s.some((x) => x < -1)) return out(null);
      const known = s.filter((x) => x !== -1).reduce((a, b) => a * b, 1);
      if (free === 1)
        return known > 0 && total % known === 0
          ? out(s.map((x) => (x === -1 ? total / known : x)))
          : out(null);
      return known === total ? out(s) : out(null);
    }
    case 'expand': {
      // -1 keeps a dimension; new leading dimensions come first.
      const s = ints(args);
      if (!s || !shape || s.length < shape.length) return out(null);
      const off = s.length - shape.length;
      const r = s.map((x, i) => (x === -1 && i >= off ? shape[i - off]! : x));
      return out(r.some((x) => x < 0) ? null : r);
    }
    case 'unsqueeze': {
      if (!shape) return out(null);
      const d = dim(args[0] ?? kwargs.dim, shape.length + 1);
      return d === null ? out(null) : out([...shape.slice(0, d), 1, ...shape.slice(d)]);
    }
    case 'squeeze': {
      if (!shape) return out(null);
      if (!args.length && !kwargs.dim) return out(shape.filter((x) => x !== 1));
      const d = dim(args[0] ?? kwargs.dim, shape.length);
      return d === null ? out(null) : out(shape[d] === 1 ? shape.filter((_, i) => i !== d) : shape);
    }
    case 'flatten':
      return args.length || Object.keys(kwargs).length || !shape
        ? out(null)
        : out([shape.reduce((a, b) => a * b, 1)]);
    case 't':
      return out(shape && shape.length <= 2 ? [...shape].reverse() : null);
    case 'transpose': {
      if (!shape) return out(null);
      const a = dim(args[0], shape.length);
      const b = dim(args[1], shape.length);
      if (a === null || b === null) return out(null);
      const s = [...shape];
      [s[a], s[b]] = [s[b]!, s[a]!];
      return out(s);
    }
    case 'permute': {
      const p = ints(args);
      if (!p || !shape || p.length !== shape.length) return out(null);
      const idx = p.map((x) => (x < 0 ? x + shape.length : x));
      return new Set(idx).size === shape.length && idx.every((x) => x >= 0 && x < shape.length)
        ? out(idx.map((x) => shape[x]!))
        : out(null);
    }
    case 'repeat': {
      const r = ints(args);
      if (!r || !shape || r.length < shape.length) return out(null);
      const s = [...Array<number>(r.length - shape.length).fill(1), ...shape];
      return out(s.map((x, i) => x * r[i]!));
    }
    case 'to':
    case 'type': {
      // to(dtype), to(device), to(device, dtype), to(other_tensor), to(dtype=...)
      const dt = dtypeOf(kwargs.dtype) ?? args.map(dtypeOf).find((x) => x);
      const other = args.find((a): a is TensorV => a.k === 'tensor');
      if (dt) return out(shape, dt);
      if (other) return out(shape, other.dtype);
      return out(shape); // a device
    }
    case 'float':
    case 'half':
    case 'bfloat16':
    case 'double':
    case 'long':
    case 'bool':
      return out(shape, castMethodDtype(name));
    case 'clone':
    case 'contiguous':
    case 'detach':
    case 'cuda':
    case 'cpu':
    case 'requires_grad_':
    case 'pin_memory':
    case 'fill_':
    case 'zero_':
    case 'normal_':
    case 'uniform_':
    case 'masked_fill':
    case 'masked_fill_':
      return out(shape);
    case 'mul':
    case 'mul_':
    case 'add':
    case 'add_':
    case 'div':
    case 'div_':
    case 'exp':
    case 'log':
    case 'sqrt':
    case 'cos':
    case 'sin':
    case 'neg':
    case 'abs': {
      const other = args[0]?.k === 'tensor' ? args[0] : undefined;
      return other ? out(broadcast(shape, other.shape)) : out(shape);
    }
    default:
      return out(null);
  }
}

/** `t * 2`, `1.0 / t`, `a + b` on tensors: the broadcast shape; a float result for true division. */
function tensorArithmetic(a: V, b: V, op: string): TensorV {
  const t = (a.k === 'tensor' ? a : b) as TensorV;
  const shapeOfV = (v: V): number[] | null =>
    v.k === 'tensor' ? v.shape : v.k === 'num' || v.k === 'bool' ? [] : null;
  const shape = op === '@' ? null : broadcast(shapeOfV(a), shapeOfV(b));
  const floats = (v: V) => (v.k === 'tensor' ? isFloat(v.dtype) : v.k === 'num' && !v.int);
  const dtype: DType =
    op === '/' && !floats(a) && !floats(b)
      ? 'float32'
      : a.k === 'tensor' && b.k === 'tensor'
        ? a.dtype === b.dtype
          ? a.dtype
          : isFloat(a.dtype)
            ? a.dtype
            : b.dtype
        : !isFloat(t.dtype) && (floats(a) || floats(b))
          ? 'float32'
          : t.dtype;
  return { k: 'tensor', shape, dtype, param: false, trainable: false };
}

/** The shape two tensors broadcast to; null when unknown or incompatible. */
export function broadcast(a: number[] | null, b: number[] | null): number[] | null {
  if (!a || !b) return null;
  const n = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const x = a[a.length - n + i] ?? 1;
    const y = b[b.length - n + i] ?? 1;
    if (x !== y && x !== 1 && y !== 1) return null;
    out.push(x === 1 ? y : x);
  }
  return out;
}

function cloneValue(v: V): V {
  if (v.k === 'obj') return { ...v, fields: new Map(v.fields) };
  if (v.k === 'dict') return { k: 'dict', entries: v.entries.map((e) => ({ ...e })) };
  if (v.k === 'mod') return cloneModule(v);
  return v;
}

const int = (v: number): V => ({ k: 'num', v, int: true });
const bool = (v: unknown): V => ({ k: 'bool', v: v !== false });
const num3 = (i: number, o: number): Record<string, V> => ({ in_features: int(i), out_features: int(o) });

/** A deep copy of a module with its own tensors (`copy.deepcopy(layer)`: the copies share nothing). */
function cloneModule(m: ModV): ModV {
  return {
    ...m,
    children: new Map([...m.children].map(([k, c]) => [k, cloneModule(c)])),
    params: new Map([...m.params].map(([k, t]) => [k, t ? { ...t } : t])),
    buffers: new Map([...m.buffers].map(([k, b]) => [k, { ...b, t: { ...b.t } }])),
    attrs: new Map(m.attrs),
  };
}

/** `requires_grad_(False)`, in place: a parameter shared with another module is frozen there too, as in PyTorch. */
function freeze(m: ModV): void {
  for (const p of m.params.values()) if (p) p.trainable = false;
  for (const c of m.children.values()) freeze(c);
}

/**
 * `module.to(dtype)`: every floating-point parameter and buffer below the module takes the dtype, in place (PyTorch
 * converts `param.data`, so a parameter shared with a module outside this one is cast there too). The dtype is
 * marked as set, so a cast back to float32 is kept apart from the model's default.
 */
function castModule(m: ModV, dtype: DType): void {
  for (const p of m.params.values())
    if (p && isFloat(p.dtype)) {
      p.dtype = dtype;
      p.cast = true;
    }
  for (const b of m.buffers.values()) if (isFloat(b.t.dtype)) b.t = { ...b.t, dtype };
  for (const c of m.children.values()) castModule(c, dtype);
}

/** A module value standing for a built module tree (its children and class names; no tensors): for `len(model.layers)`. */
export function moduleFromTree(node: ModuleNode): ModV {
  const m = newModule(node.className, null);
  for (const c of node.children) m.children.set(c.name, moduleFromTree(c));
  return m;
}

/** The module tree of a constructed model: paths, shapes, and tied parameters marked as PyTorch dedups them. */
export function toModuleTree(m: ModV): { root: ModuleNode; unknownParams: string[] } {
  const seen = new Map<TensorV, string>();
  const unknownParams: string[] = [];
  const build = (mod: ModV, name: string, path: string): ModuleNode => {
    const node: ModuleNode = { name, path, className: mod.className, params: [], buffers: [], children: [] };
    for (const [pname, t] of mod.params) {
      if (!t) continue;
      const full = path ? `${path}.${pname}` : pname;
      if (!t.shape) {
        unknownParams.push(full);
        continue;
      }
      const tied = seen.get(t);
      node.params.push({
        name: pname,
        shape: t.shape,
        numel: numelOf(t.shape),
        trainable: t.trainable,
        ...(t.dtype !== 'float32' || t.cast ? { dtype: t.dtype } : {}),
        ...(tied ? { tiedTo: tied } : {}),
      });
      if (!tied) seen.set(t, full);
    }
    for (const [bname, b] of mod.buffers)
      if (b.t.shape)
        node.buffers.push({
          name: bname,
          shape: b.t.shape,
          numel: numelOf(b.t.shape),
          dtype: b.t.dtype,
          persistent: b.persistent,
        });
    for (const [cname, c] of mod.children)
      node.children.push(build(c, cname, path ? `${path}.${cname}` : cname));
    return node;
  };
  return { root: build(m, '', ''), unknownParams };
}

export { dottedText };
