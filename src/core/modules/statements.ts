/**
 * Statement execution for the interpreter: blocks, `if`, `for` and `while` with `break` / `continue` and
 * `else`, assignments to names, attributes, items and unpacked targets, comprehensions, and running a function
 * body up to a point of interest. Bounded: a step budget for the whole run, a limit on loop turns, and what a
 * loop that cannot be followed assigns becomes unknown.
 */
import { up } from '../parsing/python';
import { budget } from '../vocabulary/budget';
import type { Node } from '../parsing/python';
import { Evaluator, type ScriptContext } from '../analysis/evaluator';
import { Expressions } from '../python/expressions';
import { arithmetic, asNumber, truthy } from '../python/operators';
import {
  dictOf,
  seqOf,
  setEntry,
  UNKNOWN,
  type ClassV,
  type DictEntry,
  type ModuleFile,
  type Value,
} from '../python/values';
import { setAttribute } from './methods';
import { register } from './moduleValues';
import { deepCopy } from './omegaconf';
import type { LayerContext } from './torchLayers';

/** The interpreter ran past its step limit or the analysis's budget (the model code is too large or loops without end). */
export class StepLimit extends Error {}

/**
 * A condition not known statically, met where nothing may be assumed of it (a test of each module): the caller
 * may run again with it decided each way (`decisions`). `again` is set when it was met twice in one run, where
 * one decision for both would not be sound.
 */
export class Undecided extends Error {
  constructor(
    readonly condition: number,
    readonly again = false,
  ) {
    super('a condition not known statically');
  }
}

/** Conditions decided for one run by the caller, by node id; the rest raise Undecided. */
export interface Decisions {
  forced: ReadonlyMap<number, boolean>;
  used: Set<number>;
  /**
   * Whether an undecided condition is raised for the caller to decide each way (while the test itself runs);
   * otherwise (the code before it, a call's arguments) what its arms bind is unknown after it.
   */
  fork: boolean;
}

export interface Limits {
  steps: number;
  depth: number;
  loop: number;
}

export const LIMITS: Limits = { steps: 2_000_000, depth: 64, loop: 10_000 };

export interface Frame {
  file: ModuleFile;
  env: Map<string, Value>;
  /** The class whose method runs (for `super()`) and the instance. */
  owner?: ClassV;
  self?: Value;
  /** The body of a function the code calls (not a method, not the code being read itself). */
  called?: true;
}

export class Return {
  constructor(readonly value: Value) {}
}

/** `break` and `continue`, unwinding to the innermost loop. */
export class Break {}
export class Continue {}

/** Runs statements over frames; the interpreter adds names, calls and classes. */
export abstract class Statements extends Expressions<Frame> {
  private steps = 0;
  readonly notes: string[] = [];
  /** Inputs the code reads that the analysis was not given (the script's command line), in words. */
  readonly missing: string[] = [];
  /** Parallelism the code applies to the model that the figures do not model (see EstimateInput.unmodelled). */
  readonly unmodelled: string[] = [];
  /** Set while nothing may be assumed of an undecided condition (see Undecided). */
  decisions: Decisions | undefined;
  /** What layers and methods need of the interpreter (notes, iteration, the loop limit). */
  protected abstract readonly layers: LayerContext;

  constructor(protected readonly limits: Limits) {
    super();
  }

  protected note(s: string): void {
    if (!this.notes.includes(s) && this.notes.length < 50) this.notes.push(s);
  }

  protected tick(): void {
    if (++this.steps > this.limits.steps)
      throw new StepLimit('the model code is too complex to analyse statically');
    if (!budget().step()) throw new StepLimit(budget().spent!);
  }

  protected guard(node: Node): Value | undefined {
    this.tick();
    return this.depth + 1 > this.limits.depth * 4 ? UNKNOWN(node.text, 'nested too deeply') : undefined;
  }

  /** A condition's truth; unknown ones are taken as true (the code's main path), with a note. */
  private condition(cond: Node, frame: Frame): boolean {
    const t = truthy(this.evaluate(cond, frame));
    if (t !== undefined) return t;
    return this.decide(cond, frame);
  }

  /**
   * A condition the values of the run do not decide: decided by the file's defaults or the script's arguments,
   * as the plan is, with a note; else taken as true (the code's main path), with a note.
   */
  protected decide(cond: Node, frame: Frame): boolean {
    if (this.decisions) {
      const f = this.decisions.forced.get(cond.id);
      if (f === undefined) throw new Undecided(cond.id);
      if (this.decisions.used.has(cond.id)) throw new Undecided(cond.id, true);
      this.decisions.used.add(cond.id);
      return f;
    }
    const d = this.fromFile(cond, frame);
    const t = d && truthy(d.value);
    const text = cond.text.slice(0, 60);
    if (d && t !== undefined) {
      this.note(
        d.given
          ? `condition \`${text}\` is ${t} with the script's arguments (${d.given})`
          : `condition \`${text}\` is ${t} by default (${d.defaults}); the script's arguments after \`--\` take the other path`,
      );
      return t;
    }
    // In a function the code calls on its way (`setup_env(args)`, `init_logger(path)`), not a model's method: one
    // note for all of them, so that the model's own tests stay readable.
    if (frame.called && !frame.self) {
      const flat = text.replace(/\s+/g, ' ');
      if (!this.assumedInCalls.includes(flat)) this.assumedInCalls.push(flat);
      const n = this.assumedInCalls.length;
      const summary = `${n} condition${n === 1 ? '' : 's'} in functions the code calls before the point read ${n === 1 ? 'is' : 'are'} not known statically and taken as true: ${this.assumedInCalls
        .slice(0, 3)
        .map((t) => `\`${t}\``)
        .join(', ')}${n > 3 ? ', …' : ''}`;
      const at = this.notes.findIndex((x) => x.includes('in functions the code calls before the point read'));
      if (at >= 0) this.notes[at] = summary;
      else this.note(summary);
      return true;
    }
    this.note(`condition \`${text}\` is not known statically: assumed true`);
    return true;
  }

  /** Conditions taken as true in functions the code calls (see decide). */
  private readonly assumedInCalls: string[] = [];

  /**
   * What the file says of an expression through its argparse options and dataclass defaults (or the script's
   * arguments), read as the scan reads it, so that the model is built on the path the plan takes. Undefined when
   * neither decides it.
   */
  protected fromFile(
    node: Node,
    frame: Frame,
  ): { value: Value; given?: string; defaults?: string } | undefined {
    let ev = this.byDefault.get(frame.file.path);
    const context = this.script?.file === frame.file.path ? this.script.context : {};
    if (!ev)
      this.byDefault.set(
        frame.file.path,
        (ev = new Evaluator(frame.file.source, frame.file.imports, undefined, context)),
      );
    const before = ev.defaultsRead.length;
    const given = ev.argsRead.length;
    const value = ev.eval(node);
    if (value.k === 'unknown') return undefined;
    if (ev.argsRead.length > given) return { value, given: ev.argsRead.slice(given).join(' ') };
    const read = ev.defaultsRead.slice(before);
    if (!read.length) return undefined;
    return { value, defaults: [...new Set(read.map((r) => `${r.what} at line ${r.line}`))].join(', ') };
  }

  /** One evaluator of defaults per file. */
  private readonly byDefault = new Map<string, Evaluator>();
  /** The entry script's own command line and configuration files, when the analysis was given them. */
  script?: { file: string; context: ScriptContext };

  protected override comprehension(node: Node, frame: Frame): Value {
    const body = node.childForFieldName('body');
    const clauses = node.namedChildren.filter((c) => c.type === 'for_in_clause' || c.type === 'if_clause');
    if (!body) return UNKNOWN(node.text, 'incomplete');
    const out: Value[] = [];
    // `{str(i): Block(c) for i in range(n)}`: the body is a `key: value` pair.
    const entries: DictEntry[] = [];
    const pair = body.type === 'pair' ? body : null;
    const env = new Map(frame.env);
    const inner: Frame = { ...frame, env };
    const run = (i: number): boolean => {
      if (i === clauses.length) {
        const k = pair?.childForFieldName('key');
        const v = pair?.childForFieldName('value');
        if (pair && k && v)
          setEntry(entries, { key: this.evaluate(k, inner), value: this.evaluate(v, inner) });
        else out.push(this.evaluate(body, inner));
        return out.length + entries.length <= this.limits.loop;
      }
      const c = clauses[i]!;
      if (c.type === 'if_clause') {
        const cond = c.namedChild(0);
        return cond && !truthy(this.evaluate(cond, inner)) ? true : run(i + 1);
      }
      const left = c.childForFieldName('left');
      const right = c.childForFieldName('right');
      if (!left || !right) return false;
      const items = this.iterate(this.evaluate(right, inner));
      if (!items) return false;
      for (const it of items) {
        this.assignTarget(left, it, inner);
        if (!run(i + 1)) return false;
      }
      return true;
    };
    if (!run(0)) return UNKNOWN(node.text, 'a comprehension over unknown values');
    return pair ? dictOf(entries, node.text) : seqOf('list', out, node.text);
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
        else this.evaluate(e, frame);
        return;
      }
      case 'return_statement': {
        const v = stmt.namedChild(0);
        throw new Return(v ? this.evaluate(v, frame) : { k: 'none' });
      }
      case 'if_statement': {
        try {
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
        } catch (e) {
          // Nothing assumed of an undecided test of this statement, whose arms only bind names: what they bind
          // is unknown after it (an arm that returns or leaves a loop is decided each way by the caller).
          if (!(e instanceof Undecided) || e.again || !this.decisions) throw e;
          // Before the point of interest, an arm that returns or raises is one the code there did not take.
          if (this.decisions.fork && leavesFlow(stmt)) throw e;
          const own = [
            stmt.childForFieldName('condition'),
            ...stmt.childrenForFieldName('alternative').map((a) => a.childForFieldName('condition')),
          ];
          if (!own.some((c) => c?.id === e.condition)) throw e;
          this.forget(stmt, frame, 'changed where a test is undecided');
          return;
        }
      }
      case 'for_statement': {
        const left = stmt.childForFieldName('left');
        const right = stmt.childForFieldName('right');
        if (!left || !right) return;
        const items = this.iterate(this.evaluate(right, frame));
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
          const t = truthy(this.evaluate(cond, frame));
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
  private forget(stmt: Node, frame: Frame, why = 'changed in a loop that could not be followed'): void {
    // A container changed in place there (`names.append(x)`) is unknown too: it holds what the loop added.
    for (const c of stmt.descendantsOfType('call')) {
      const fn = c.childForFieldName('function');
      const obj = fn?.type === 'attribute' ? fn.childForFieldName('object') : null;
      const held = obj?.type === 'identifier' ? frame.env.get(obj.text) : undefined;
      if (held && (held.k === 'seq' || held.k === 'dict' || held.k === 'obj'))
        frame.env.set(obj!.text, UNKNOWN(obj!.text, why));
    }
    for (const a of stmt.descendantsOfType(['assignment', 'augmented_assignment'])) {
      const left = a.childForFieldName('left');
      const names = left?.type === 'identifier' ? [left] : (left?.descendantsOfType('identifier') ?? []);
      for (const n of names)
        if (up(n)?.type !== 'attribute' && up(n)?.type !== 'subscript')
          frame.env.set(n.text, UNKNOWN(n.text, 'assigned in a loop that could not be followed'));
    }
    for (const f of stmt.descendantsOfType('for_statement')) {
      const l = f.childForFieldName('left');
      for (const n of l?.type === 'identifier' ? [l] : (l?.descendantsOfType('identifier') ?? []))
        frame.env.set(n.text, UNKNOWN(n.text, 'assigned in a loop that could not be followed'));
    }
  }

  private assign(a: Node, frame: Frame): void {
    const left = a.childForFieldName('left');
    const right = a.childForFieldName('right');
    if (!left || !right) return;
    const v = this.evaluate(right, frame);
    this.assignTarget(left, v, frame);
  }

  private augAssign(a: Node, frame: Frame): void {
    const left = a.childForFieldName('left');
    const right = a.childForFieldName('right');
    const op = a.childForFieldName('operator')?.text.replace('=', '');
    if (!left || !right || !op) return;
    const x = asNumber(this.evaluate(left, frame));
    const y = asNumber(this.evaluate(right, frame));
    this.assignTarget(left, x && y ? arithmetic(op, x, y, a.text) : UNKNOWN(a.text, 'unknown'), frame);
  }

  assignTarget(target: Node, v: Value, frame: Frame): void {
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
          this.assignTarget(n, items?.[i] ?? UNKNOWN(n.text, 'unpacked from an unknown value'), frame),
        );
        return;
      }
      case 'attribute': {
        const obj = target.childForFieldName('object');
        const attr = target.childForFieldName('attribute')?.text;
        if (!obj || !attr) return;
        setAttribute(this.layers, this.evaluate(obj, frame), attr, v);
        return;
      }
      case 'subscript': {
        const obj = target.childForFieldName('value');
        const key = target.childForFieldName('subscript');
        if (!obj || !key) return;
        const container = this.evaluate(obj, frame);
        const k = this.evaluate(key, frame);
        if (container.k === 'mod') {
          const name = k.k === 'str' ? k.v : k.k === 'num' ? String(k.v) : null;
          if (name !== null && v.k === 'mod') register(container, name, v);
        } else if (container.k === 'dict' && k.k !== 'unknown')
          setEntry(container.entries, { key: k, value: v });
        else if (container.k === 'seq' && k.k === 'num' && k.int) container.items[k.v] = v;
        return;
      }
      default:
        return;
    }
  }

  // ---- results ------------------------------------------------------------------------------------------------

  /** Evaluates an expression of `file` with the names in `env` bound (the rest at module level). */
  evalWith(file: ModuleFile, node: Node, env: Map<string, Value>): Value {
    try {
      return this.evaluate(node, { file, env: new Map(env) });
    } catch (e) {
      if (e instanceof StepLimit) return UNKNOWN(node.text, e.message);
      throw e;
    }
  }

  /** Evaluates the expression at `node` as the code would see it: its function's body run up to it first. */
  evalAt(file: ModuleFile, node: Node, bound?: Map<string, Value>, paramsUnknown = false): Value {
    return this.evalManyAt(file, node, [node], bound, paramsUnknown)[0]!;
  }

  /** Evaluates several expressions at one point (`anchor`): the code before it is run once for all of them. */
  evalManyAt(
    file: ModuleFile,
    node: Node,
    nodes: Node[],
    bound?: Map<string, Value>,
    paramsUnknown = false,
  ): Value[] {
    let fn: Node | null = null;
    for (let p = up(node); p; p = up(p)) if (p.type === 'function_definition') fn = fn ?? p;
    const frame: Frame = { file, env: new Map() };
    if (fn) {
      const params = fn.childForFieldName('parameters')?.namedChildren ?? [];
      params.forEach((p, index) => {
        const name =
          p.type === 'identifier'
            ? p.text
            : p.type === 'typed_parameter'
              ? p.namedChild(0)?.text
              : p.childForFieldName('name')?.text;
        const dflt = p.childForFieldName('value');
        if (!name || p.type.includes('splat')) return;
        // What the function's one caller in this file passes (`train(cfg)` in `main()`), when known.
        // Keyword-only parameters (after `*`) are never passed by position.
        const position = params
          .slice(0, index)
          .some((q) => q.type === 'keyword_separator' || q.type === 'list_splat_pattern')
          ? -1
          : index;
        const passed = bound?.has(name) ? undefined : this.fromCaller(file, fn!, position, name);
        frame.env.set(
          name,
          passed ??
            // A parameter's default is its value only where its callers are known not to pass it.
            (dflt && !paramsUnknown
              ? this.evaluate(dflt, frame)
              : {
                  k: 'param',
                  name,
                  function: fn!.childForFieldName('name')?.text ?? '',
                  index: 0,
                  default: null,
                }),
        );
      });
      // Names the caller binds (a loop's variables, the module it runs over), over the parameters.
      for (const [k, v] of bound ?? []) frame.env.set(k, v);
      const body = fn.childForFieldName('body');
      this.before(() => this.runUntil(body, node, frame));
    } else {
      for (const [k, v] of bound ?? []) frame.env.set(k, v);
      this.before(() => this.runUntil(file.source.root, node, frame, true));
    }
    return nodes.map((n) => this.evaluate(n, frame));
  }

  /** Arguments found by fromCaller, by function and parameter (undefined while one is being found). */
  private readonly passed = new Map<string, Value | null | undefined>();

  /**
   * The value a top-level function's parameter has where the function is called once in its file (`train(cfg)` in
   * `main()`), as the code before that call computes it: unknown values, several calls, a call through `*args` or
   * one made inside the function itself give none. A copy each time: code run later may change what it holds.
   */
  private fromCaller(file: ModuleFile, fn: Node, index: number, name: string): Value | undefined {
    const parent = up(fn)?.type === 'decorated_definition' ? up(up(fn)) : up(fn);
    const own = fn.childForFieldName('name')?.text;
    if (parent?.type !== 'module' || !own) return undefined;
    // Where nothing may be assumed (`decisions`), what was found by assuming is not reused.
    const key = `${file.path}:${fn.startIndex}:${name}:${this.decisions ? 'decided' : 'assumed'}`;
    if (this.passed.has(key)) {
      const v = this.passed.get(key);
      return v ? deepCopy(v, 0) : undefined;
    }
    this.passed.set(key, undefined);
    let found: Value | null = null;
    const sites = file.source.identifiers(own).flatMap((id) => {
      const call = up(id);
      const inside = id.startIndex >= fn.startIndex && id.endIndex <= fn.endIndex;
      return call?.type === 'call' && call.childForFieldName('function')?.id === id.id && !inside
        ? [call]
        : [];
    });
    const args = sites.length === 1 ? sites[0]!.childForFieldName('arguments') : null;
    const items =
      args?.type === 'argument_list' ? args.namedChildren.filter((a) => a.type !== 'comment') : [];
    if (args && !items.some((a) => a.type === 'list_splat' || a.type === 'dictionary_splat')) {
      const kw = items.find(
        (a) => a.type === 'keyword_argument' && a.childForFieldName('name')?.text === name,
      );
      const arg = kw
        ? kw.childForFieldName('value')
        : index >= 0
          ? items.filter((a) => a.type !== 'keyword_argument')[index]
          : undefined;
      if (arg) {
        try {
          const v = this.evalAt(file, arg);
          if (v.k !== 'unknown' && v.k !== 'param') found = v;
        } catch (e) {
          if (!(e instanceof StepLimit) && !(e instanceof Undecided)) throw e;
        }
      }
    }
    this.passed.set(key, found);
    if (found)
      this.note(
        `\`${name}\` of ${own}() is what its call at line ${file.source.line(sites[0]!)} of ${file.path.split(/[\\/]/).pop()} passes`,
      );
    return found ? deepCopy(found, 0) : undefined;
  }

  /** Runs the code before a point of interest: where nothing is assumed, its undecided tests are not forked. */
  private before(run: () => void): void {
    const d = this.decisions;
    if (d) this.decisions = { ...d, fork: false };
    try {
      run();
    } finally {
      if (d) this.decisions = d;
    }
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

/** Whether a statement may return, raise or leave a loop from within (not counting nested functions). */
function leavesFlow(stmt: Node): boolean {
  for (const n of stmt.descendantsOfType([
    'return_statement',
    'raise_statement',
    'break_statement',
    'continue_statement',
  ])) {
    let inner = false;
    for (let p = up(n); p && p.id !== stmt.id; p = up(p))
      if (p.type === 'function_definition' || p.type === 'lambda' || p.type === 'class_definition')
        inner = true;
    if (!inner) return true;
  }
  return false;
}
