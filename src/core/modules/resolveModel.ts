/**
 * The model a script wraps, built by reading its nn.Module code: the wrapped variable followed to its
 * construction, through the project's callers.
 */
import { up } from '../parsing/python';
import * as path from 'node:path';
import type { FileFacts } from '../analysis/facts';
import type { ArchShape } from '../model/hf';
import { countParams, walk, type ModuleNode } from '../model/tree';
import type { Node } from '../parsing/python';
import type { Project, PyFile } from '../project/project';
import { isTestFile } from '../project/testFiles';
import { findBinding, enclosingFunction, parameterOf, dottedText } from '../python/scope';
import { modelVariable } from '../analysis/paths';
import { StepLimit, Interpreter } from './interpreter';
import { scriptInterpreter } from './scriptRun';
import { toModuleTree } from './moduleValues';
import { type ModV, type Value } from '../python/values';

/** A model built by reading its `nn.Module` code. */
export interface CodeModel {
  root: ModuleNode;
  className: string;
  /** The class's file and where the model is constructed, in words. */
  origin: string;
  shape?: ArchShape;
  notes: string[];
  /** Parts of the model not known statically, so not counted: the figures are lower bounds when any. */
  gaps: string[];
  /** Parallelism applied to it that the figures do not model (tensor parallelism by `parallelize_module`). */
  unmodelled: string[];
  /** The file and class, as `path:Class` (what exact mode imports). */
  classRef: { file: string; name: string };
  /** The constructor call rendered as Python, when its arguments are known (for exact mode). */
  constructor?: string;
}

export type CodeModelResult =
  | { ok: true; model: CodeModel; candidates: string[] }
  | {
      ok: false;
      reason: string;
      candidates?: string[];
      /**
       * The model is loaded by id where it is built (`from_pretrained("ORG/NAME")` in the caller): that id, and the
       * other ids other callers load, each with where (the figures are the first caller's).
       */
      pretrained?: { id: string; where: string; others?: string[] };
    };

/** Finds and builds the model a script wraps: the variable its wrap calls shard, followed to its construction. */
export function modelFromScript(
  project: Project,
  facts: FileFacts,
  opts: { choice?: string } = {},
): CodeModelResult {
  const file = project.file(facts.path);
  if (!file) return { ok: false, reason: `cannot read ${facts.path}` };
  // A method's wraps that its calls expand stand at those calls.
  const calls = facts.calls.filter((c) => !c.incomplete && !c.expandedAt);
  const variable = modelVariable(calls)?.join('.') ?? facts.models.find((m) => m.variable)?.variable;
  if (!variable) return { ok: false, reason: 'no wrap call or model construction names the model variable' };
  const anchor = calls.find((c) => c.isRoot) ?? calls[0];
  const interp = scriptInterpreter(project, facts.path, facts.argv);
  try {
    const at = anchor ? nodeAt(file, anchor.statement.start) : nodeAtLine(file, facts.models[0]?.line ?? 1);
    if (!at) return { ok: false, reason: 'the wrap call could not be located' };
    const head = variable.split('.')[0]!;
    const values: { v: Value; where: string }[] = [];
    const b = findBinding(file.source, head, at);
    if (b?.kind === 'param') {
      // The model arrives as an argument: follow the function's callers across the project, and their callers in
      // turn when they pass on an argument of their own (`parallelize_llama(model)` calling `apply_fsdp(model)`).
      const fnName = b.function.childForFieldName('name')?.text ?? '';
      // A special method (`__init__`, `__call__`) is never called by its name: `Wrapper(model)` constructs, and
      // `super().__init__(...)` calls another class's. Searching for `__init__(` would read unrelated calls.
      if (/^__\w+__$/.test(fnName))
        return {
          ok: false,
          reason: `${fnName}() receives the model as \`${head}\`; the calls that construct or call its class are not followed`,
        };
      // Handed to a strategy that calls it (`ModelParallelStrategy(parallelize_fn=fn)`): the model is the module
      // the script gives Fabric to set up.
      const handed =
        b.index === 0 ? strategyCallback(project, interp, file, fnName, variable.split('.').slice(1)) : null;
      const found = handed
        ? { values: handed, callers: handed.length }
        : callersPassing(project, interp, file, b.function, b.index, head, at, variable.split('.').slice(1));
      values.push(...found.values);
      if (!found.callers)
        return {
          ok: false,
          reason: found.testsOnly
            ? `${fnName}() receives the model as \`${head}\`, and only tests call it (${found.testsOnly}), with models of their own`
            : `${fnName}() receives the model as \`${head}\` and nothing in the project calls it`,
        };
    } else if (!anchor) {
      // No wrap call: the model's construction site itself.
      const m = facts.models.find((x) => x.variable === variable) ?? facts.models[0]!;
      const call = nodeAtPosition(file, m.range.start.line, m.range.start.character);
      let c: Node | null = call;
      while (c && c.type !== 'call') c = up(c);
      if (c)
        values.push({ v: interp.evalAt(file, c), where: `built at ${rel(project, file.path)}:${m.line}` });
    } else {
      // The name in the wrap's statement, or in the loop around it (`for layer in model.layers:`).
      const id =
        file.source.identifiers(head, anchor.statement.start, anchor.statement.end)[0] ??
        (anchor.loopStatement &&
          file.source.identifiers(head, anchor.loopStatement.start, anchor.loopStatement.end)[0]) ??
        at;
      const line = b?.kind === 'assign' ? b.statement.startPosition.row + 1 : at.startPosition.row + 1;
      values.push({
        v: follow(interp.evalAt(file, id), variable.split('.').slice(1), interp),
        where: `built at ${rel(project, file.path)}:${line}`,
      });
    }
    const mods = values.filter((x): x is { v: ModV; where: string } => x.v.k === 'mod');
    if (!mods.length) {
      const first = values[0]?.v;
      // `AutoModelForCausalLM.from_pretrained("ORG/NAME")` where the caller builds it: a model of the Hub.
      const byId = values.find(
        (x) =>
          x.v.k === 'call' &&
          /\.from_pretrained$/.test(x.v.callee) &&
          x.v.args[0]?.k === 'str' &&
          /^[\w.-]+(\/[\w.-]+)?$/.test(x.v.args[0].v),
      );
      const id = byId?.v.k === 'call' && byId.v.args[0]?.k === 'str' ? byId.v.args[0].v : undefined;
      // Other callers that load another model: named, since the figures are this caller's.
      const others = values
        .filter(
          (x) =>
            x !== byId &&
            x.v.k === 'call' &&
            /\.from_pretrained$/.test(x.v.callee) &&
            x.v.args[0]?.k === 'str' &&
            x.v.args[0].v !== id,
        )
        .map((x) => `${x.v.k === 'call' && x.v.args[0]?.k === 'str' ? x.v.args[0].v : '?'} (${x.where})`);
      if (byId && id && values.every((x) => x === byId || x.v.k !== 'mod'))
        return {
          ok: false,
          reason: `the model behind \`${variable}\` is loaded from the Hub as "${id}" (${byId.where})`,
          pretrained: { id, where: byId.where, ...(others.length ? { others: [...new Set(others)] } : {}) },
        };
      return {
        ok: false,
        reason: `the model behind \`${variable}\` is not known statically${first?.k === 'unknown' ? ` (${first.why})` : ''}`,
      };
    }
    const names = [...new Set(mods.map((m) => m.v.className))];
    const chosen = (opts.choice && mods.find((m) => m.v.className === opts.choice)) || mods[0]!;
    const notes = [...interp.notes];
    if (names.length > 1)
      notes.push(
        `\`${variable}\` is ${names.join(' or ')} depending on the caller; estimated for ${chosen.v.className} (choose with the model command)`,
      );
    return { ok: true, model: finish(project, interp, chosen.v, chosen.where, notes), candidates: names };
  } catch (e) {
    if (e instanceof StepLimit) return { ok: false, reason: e.message };
    throw e;
  }
}

/** Builds `Class` from `file` (an annotation's `model=path:Class`), with a named config (`config=8B`) when it takes one. */
export function modelFromClass(
  project: Project,
  file: string,
  className: string,
  configKey?: string,
): CodeModelResult {
  const f = project.file(file);
  if (!f) return { ok: false, reason: `cannot read ${file}` };
  const interp = new Interpreter(project);
  try {
    const cls = interp.moduleName(f, className);
    if (cls.k !== 'cls') return { ok: false, reason: `${className} is not a class of ${rel(project, file)}` };
    const args: Value[] = [];
    if (configKey) {
      const cfg = namedConfig(interp, f, configKey);
      if (!cfg)
        return {
          ok: false,
          reason: `no dict of named configs with a "${configKey}" entry next to ${className}`,
        };
      args.push(cfg);
    }
    const m = interp.instantiate(cls, args, {});
    if (m.k !== 'mod') return { ok: false, reason: `${className} is not an nn.Module` };
    return {
      ok: true,
      model: finish(
        project,
        interp,
        m,
        `built from ${rel(project, file)}${configKey ? ` with config ${configKey}` : ''}`,
        [...interp.notes],
      ),
      candidates: [className],
    };
  } catch (e) {
    if (e instanceof StepLimit) return { ok: false, reason: e.message };
    throw e;
  }
}

/** A module-level dict (in the file or the files it imports) whose `key` entry is a config object. */
function namedConfig(interp: Interpreter, f: PyFile, key: string): Value | undefined {
  const files = [
    f,
    ...f.imports.bindings
      .map((b) =>
        interp.project.resolveModule(
          f.path,
          b.qualified.slice(0, b.qualified.lastIndexOf('.')) || b.qualified,
        ),
      )
      .filter((p): p is string => !!p)
      .map((p) => interp.project.file(p))
      .filter((x): x is PyFile => !!x),
  ];
  for (const file of files) {
    for (const stmt of file.source.root.namedChildren) {
      const a = stmt.type === 'expression_statement' ? stmt.namedChild(0) : null;
      const right = a?.type === 'assignment' ? a.childForFieldName('right') : null;
      const left = a?.childForFieldName('left');
      if (right?.type !== 'dictionary' || left?.type !== 'identifier') continue;
      const d = interp.moduleName(file, left.text);
      if (d.k !== 'dict') continue;
      const e = d.entries.find((x) => x.key.k === 'str' && x.key.v === key);
      if (e && (e.value as Value).k === 'obj') return e.value as Value;
    }
  }
  return undefined;
}

function finish(project: Project, interp: Interpreter, m: ModV, where: string, notes: string[]): CodeModel {
  const { root, unknownParams, gaps } = toModuleTree(m);
  if (unknownParams.length)
    gaps.unshift(
      `${unknownParams.length} parameter${unknownParams.length === 1 ? ' has a shape' : 's have shapes'} not known statically (${unknownParams.slice(0, 3).join(', ')}${unknownParams.length > 3 ? ', …' : ''})`,
    );
  // What is not known may come from an input the analysis was not given: said first.
  if (gaps.length) gaps.unshift(...interp.missing);
  const cls = m.cls;
  const file = cls ? rel(project, cls.file.path) : '?';
  const shape = inferShapeFromTree(root, collectFields(m));
  if (shape)
    notes.push(
      `activations are modelled from the module structure: ${shape.layers} x ${shape.blockClass}, hidden ${shape.hidden}, ${shape.heads} heads`,
    );
  return {
    root,
    className: m.className,
    origin: `${m.className} in ${file} (read statically), ${where}`,
    ...(shape ? { shape } : {}),
    notes,
    gaps,
    unmodelled: [...interp.unmodelled],
    classRef: { file: cls?.file.path ?? '', name: m.className },
    ...(cls ? { constructor: renderConstructor(m) } : {}),
  };
}

/**
 * A function passed as Lightning's `ModelParallelStrategy(parallelize_fn=fn)` in `file`: the strategy calls it with
 * the module given to `fabric.setup_module(module)` or `fabric.setup(module, ...)` (lightning/fabric/strategies/
 * model_parallel.py, `ModelParallelStrategy.setup_module` runs `self._parallelize_fn(module, self.device_mesh)`).
 * The values of those modules, or null when the function is handed to no such strategy.
 */
function strategyCallback(
  project: Project,
  interp: Interpreter,
  file: PyFile,
  fnName: string,
  attrs: string[],
): { v: Value; where: string }[] | null {
  const handedAt = file.source.identifiers(fnName).find((id) => {
    const kw = up(id);
    const call = up(up(kw));
    return (
      kw?.type === 'keyword_argument' &&
      kw.childForFieldName('value')?.id === id.id &&
      kw.childForFieldName('name')?.text === 'parallelize_fn' &&
      call?.type === 'call' &&
      /(^|\.)ModelParallelStrategy$/.test(call.childForFieldName('function')?.text ?? '')
    );
  });
  if (!handedAt) return null;
  const strategyLine = handedAt.startPosition.row + 1;
  const out: { v: Value; where: string }[] = [];
  for (const method of ['setup_module', 'setup'])
    for (const id of file.source.identifiers(method)) {
      const attr = up(id);
      const call = attr?.type === 'attribute' ? up(attr) : null;
      if (call?.type !== 'call' || call.childForFieldName('function')?.id !== attr!.id) continue;
      const arg = call.childForFieldName('arguments')?.namedChildren.find((a) => a.type !== 'comment');
      if (!arg || arg.type === 'keyword_argument') continue;
      out.push({
        v: follow(interp.evalAt(file, arg), attrs, interp),
        where: `given to ${attr!.text}() at ${rel(project, file.path)}:${call.startPosition.row + 1}, which runs ${fnName}() through ModelParallelStrategy (line ${strategyLine})`,
      });
    }
  return out;
}

/** How many functions deep the model may be passed along before the search stops. */
const MAX_CALLER_DEPTH = 6;

/**
 * The values the callers of `fn` pass for its parameter `index` (named `name`), with `attrs` followed below each.
 * A caller that passes one of its own parameters on is followed to its callers in turn: bounded in depth and in
 * callers per level, and each function visited once, so recursive or mutually calling helpers end.
 */
function callersPassing(
  project: Project,
  interp: Interpreter,
  file: PyFile,
  fn: Node,
  index: number,
  name: string,
  exclude: Node | null,
  attrs: string[],
  depth = 0,
  seen = new Set<string>(),
  via: string[] = [],
): { values: { v: Value; where: string }[]; callers: number; testsOnly?: string } {
  const values: { v: Value; where: string }[] = [];
  const fnName = fn.childForFieldName('name')?.text ?? '';
  seen.add(`${file.path}:${fn.startIndex}`);
  const method = isMethod(fn);
  const reaching = project
    .callersOf(fnName)
    .filter((c) => !exclude || c.call.startIndex !== exclude.startIndex || c.file.path !== file.path)
    .filter((c) => callReaches(project, c.file, c.call, file.path, fnName, method));
  // A test builds a toy model to exercise the function: its size says nothing of the job (unless the file
  // analysed is itself a test).
  const callers = reaching.filter(
    (c) => isTestFile(rel(project, file.path)) || !isTestFile(rel(project, c.file.path)),
  );
  const fromTests = reaching.find((c) => !callers.includes(c));
  const then = via.length ? ` (then ${via.join(', ')})` : '';
  for (const c of callers.slice(0, 8)) {
    const arg = argumentFor(c.call, index, name, method);
    if (!arg) continue;
    const where = `passed to ${fnName}() at ${rel(project, c.file.path)}:${c.call.startPosition.row + 1}${then}`;
    // `outer(model)` where `model` is the caller's own parameter: the model comes from the caller's callers.
    const dotted = arg.type === 'identifier' || arg.type === 'attribute' ? dottedText(arg) : null;
    const argHead = dotted?.split('.')[0];
    const ab = argHead ? findBinding(c.file.source, argHead, arg) : null;
    // (Not `self.model` in a method: its callers pass the instance, whose attributes are not followed here.)
    if (ab?.kind === 'param' && dotted && !(ab.index === 0 && isMethod(ab.function))) {
      const key = `${c.file.path}:${ab.function.startIndex}`;
      if (seen.has(key)) continue;
      if (depth + 1 >= MAX_CALLER_DEPTH) {
        values.push({
          v: { k: 'unknown', text: dotted, why: `passed through more than ${MAX_CALLER_DEPTH} functions` },
          where,
        });
        continue;
      }
      const inner = callersPassing(
        project,
        interp,
        c.file,
        ab.function,
        ab.index,
        argHead!,
        null,
        [...dotted.split('.').slice(1), ...attrs],
        depth + 1,
        seen,
        [`${fnName}()`, ...via],
      );
      values.push(...inner.values);
      continue;
    }
    values.push({ v: follow(interp.evalAt(c.file, arg), attrs, interp), where });
  }
  return {
    values,
    callers: callers.length,
    ...(fromTests && !callers.length
      ? { testsOnly: `${rel(project, fromTests.file.path)}:${fromTests.call.startPosition.row + 1}` }
      : {}),
  };
}

/** The argument a call passes for parameter `index` / `name` of the callee. */
function argumentFor(call: Node, index: number, name: string, method: boolean): Node | undefined {
  const args = call.childForFieldName('arguments')?.namedChildren ?? [];
  const kw = args.find((a) => a.type === 'keyword_argument' && a.childForFieldName('name')?.text === name);
  if (kw) return kw.childForFieldName('value') ?? undefined;
  const positional = args.filter((a) => a.type !== 'keyword_argument' && a.type !== 'comment');
  const viaAttribute = call.childForFieldName('function')?.type === 'attribute';
  return positional[index - (method && viaAttribute ? 1 : 0)];
}

/**
 * Whether a call named like the function calls this very function: a call in the defining file, a name imported
 * from the defining module (`from pkg.parallelize import apply_fsdp`), the module imported and its attribute
 * called, or a method called on an object. Another file's function of the same name is not it.
 */
export function callReaches(
  project: Project,
  caller: PyFile,
  call: Node,
  defFile: string,
  fnName: string,
  method: boolean,
): boolean {
  const fn = call.childForFieldName('function');
  if (!fn) return false;
  const resolvesTo = (module: string) => {
    const target = project.resolveModule(caller.path, module);
    return !!target && path.resolve(target) === path.resolve(defFile);
  };
  if (fn.type === 'identifier') {
    const imported = caller.imports.bindings.find((x) => x.local === fnName && !x.isModule);
    if (imported) return resolvesTo(imported.qualified.slice(0, imported.qualified.lastIndexOf('.')) || '.');
    if (path.resolve(caller.path) === path.resolve(defFile)) return true;
    return caller.imports.wildcards.some((w) => resolvesTo(w.module));
  }
  if (fn.type === 'attribute') {
    const head = fn.childForFieldName('object');
    // `import pkg.setup as setup`, or `from pkg import setup` (a name that may be a module: it is when it resolves).
    const mod = head && caller.imports.bindings.find((x) => x.local === head.text);
    if (mod && resolvesTo(mod.qualified)) return true;
    if (mod?.isModule) return false;
    // `self.apply_fsdp(model)`, `trainer.apply_fsdp(model)`: a method, when the function is one.
    return method;
  }
  return false;
}

function isMethod(fn: Node): boolean {
  return up(up(fn))?.type === 'class_definition' || up(up(up(fn)))?.type === 'class_definition';
}

/** `model.module` style attribute chains below the variable. */
function follow(v: Value, attrs: string[], interp: Interpreter): Value {
  let cur = v;
  for (const a of attrs) {
    if (cur.k !== 'mod') return cur;
    cur = cur.children.get(a) ?? cur.attrs.get(a) ?? { k: 'unknown', text: a, why: 'no such submodule' };
  }
  void interp;
  return cur;
}

function nodeAt(file: PyFile, offset: number): Node | null {
  return file.source.root.descendantForIndex(offset, offset + 1);
}

function nodeAtPosition(file: PyFile, line: number, character: number): Node | null {
  let off = 0;
  for (let l = 0; l < line; l++) off = file.source.text.indexOf('\n', off) + 1;
  return nodeAt(file, off + character);
}

function nodeAtLine(file: PyFile, line: number): Node | null {
  let off = 0;
  for (let l = 1; l < line; l++) off = file.source.text.indexOf('\n', off) + 1;
  return nodeAt(file, off);
}

function rel(project: Project, p: string): string {
  const root = project.roots.find((r) => p.startsWith(r + path.sep));
  return root ? path.relative(root, p) : path.basename(p);
}

/**
 * The shape the activation model needs, read from the module tree: the repeated block (the class repeated in a
 * ModuleList or ModuleDict), hidden size and vocabulary from the embedding, the MLP width from the block's widest
 * linear, heads from the attributes the modules keep (`n_heads`, `num_heads`), the norm kind from class names.
 */
export function inferShapeFromTree(
  root: ModuleNode,
  fields: Record<string, number> = {},
): ArchShape | undefined {
  const counts = new Map<string, number>();
  for (const n of walk(root)) {
    if (n.className !== 'ModuleList' && n.className !== 'ModuleDict' && n.className !== 'Sequential')
      continue;
    for (const c of n.children)
      if (countParams(c) > 0) counts.set(c.className, (counts.get(c.className) ?? 0) + 1);
  }
  const [blockClass, layers] = [...counts].sort((a, b) => b[1] - a[1])[0] ?? [];
  if (!blockClass || !layers || layers < 2) return undefined;
  const block = [...walk(root)].find((n) => n.className === blockClass)!;
  const linears: number[][] = [];
  let rms = false;
  for (const n of walk(block)) {
    if (/rms/i.test(n.className)) rms = true;
    const w = n.params.find((p) => p.name === 'weight');
    if (w?.shape.length === 2 && /Linear|Conv1D/.test(n.className))
      linears.push(n.className === 'Conv1D' ? [w.shape[1]!, w.shape[0]!] : w.shape);
    if (w?.shape.length === 1 && !/norm/i.test(n.className) && n.params.length === 1 && /norm/i.test(n.name))
      rms = true;
  }
  const emb = [...walk(root)].find((n) => /Embedding/.test(n.className))?.params[0]?.shape;
  const hidden = emb?.[1] ?? linears[0]?.[1];
  if (!hidden) return undefined;
  const intermediate = Math.max(...linears.map((s) => Math.max(s[0]!, s[1]!)));
  const swiglu = linears.filter((s) => s[0] === intermediate && s[1] === hidden).length >= 2;
  const heads =
    fields.n_heads ??
    fields.num_heads ??
    fields.n_head ??
    fields.num_attention_heads ??
    Math.max(1, Math.round(hidden / 128));
  const kvHeads = fields.n_kv_heads ?? fields.num_key_value_heads ?? fields.n_kv_head ?? heads;
  const headDim = fields.head_dim ?? Math.floor(hidden / heads);
  return {
    modelType: 'static',
    hidden,
    layers,
    heads,
    kvHeads,
    headDim,
    intermediate,
    vocab: emb?.[0] ?? 0,
    expertsPerToken: 0,
    experts: 0,
    denseLayers: layers,
    moeIntermediate: 0,
    sharedExperts: 0,
    mlp: swiglu ? 'swiglu' : 'gelu',
    norm: rms ? 'rmsnorm' : 'layernorm',
    normsPerBlock: 2,
    blockClass,
    tiedEmbeddings: false,
  };
}

/** Numeric attributes modules and their configs keep (`self.n_heads = args.n_heads`), first found wins. */
function collectFields(m: ModV): Record<string, number> {
  const out: Record<string, number> = {};
  const seen = new Set<object>();
  const visit = (v: Value, depth: number) => {
    if (depth > 6 || seen.has(v)) return;
    seen.add(v);
    const entries = v.k === 'mod' ? v.attrs : v.k === 'obj' ? v.fields : null;
    if (!entries) return;
    for (const [k, x] of entries) {
      if (x.k === 'num' && x.int && !(k in out)) out[k] = x.v;
      else if (x.k === 'obj' || x.k === 'mod') visit(x, depth + 1);
    }
    if (v.k === 'mod') for (const c of v.children.values()) visit(c, depth + 1);
  };
  visit(m, 0);
  return out;
}

/**
 * The constructor call as Python, for exact mode: `GPT(_cls("/abs/model.py", "GPTConfig")(n_layer=12, ...))`, with
 * project classes reached through the helper's `_cls(file, name)`. Undefined when an argument is not a literal.
 */
function renderConstructor(m: ModV): string | undefined {
  if (!m.ctor || !m.cls) return undefined;
  const parts = [
    ...m.ctor.args.map((a) => pyLiteral(a)),
    ...Object.entries(m.ctor.kwargs).map(([k, v]) => {
      const r = pyLiteral(v);
      return r === undefined ? undefined : `${k}=${r}`;
    }),
  ];
  if (parts.some((p) => p === undefined)) return undefined;
  return `_cls(${JSON.stringify(m.cls.file.path)}, ${JSON.stringify(m.cls.name)})(${parts.join(', ')})`;
}

function pyLiteral(v: Value, depth = 0): string | undefined {
  if (depth > 8) return undefined;
  switch (v.k) {
    case 'num':
      return Number.isFinite(v.v)
        ? v.int
          ? String(v.v)
          : String(v.v).includes('.') || String(v.v).includes('e')
            ? String(v.v)
            : `${v.v}.0`
        : undefined;
    case 'str':
      return JSON.stringify(v.v);
    case 'bool':
      return v.v ? 'True' : 'False';
    case 'none':
      return 'None';
    case 'seq': {
      const items = v.items.map((x) => pyLiteral(x, depth + 1));
      if (items.some((x) => x === undefined)) return undefined;
      return v.kind === 'list'
        ? `[${items.join(', ')}]`
        : `(${items.join(', ')}${items.length === 1 ? ',' : ''})`;
    }
    case 'dict': {
      const items = v.entries.map((e) => [pyLiteral(e.key, depth + 1), pyLiteral(e.value, depth + 1)]);
      if (items.some(([a, b]) => a === undefined || b === undefined)) return undefined;
      return `{${items.map(([a, b]) => `${a}: ${b}`).join(', ')}}`;
    }
    case 'obj': {
      if (!v.cls) return undefined;
      const fields = [...v.fields].map(([k, x]) => [k, pyLiteral(x, depth + 1)] as const);
      if (fields.some(([, x]) => x === undefined)) return undefined;
      return `_cls(${JSON.stringify(v.cls.file.path)}, ${JSON.stringify(v.cls.name)})(${fields.map(([k, x]) => `${k}=${x}`).join(', ')})`;
    }
    default:
      return undefined;
  }
}

export { enclosingFunction, parameterOf };

/** The nn.Module classes defined in the project (for the user to choose from), as `file:Class`, bounded. */
export function moduleClasses(project: Project, max = 500): { file: string; name: string }[] {
  const out: { file: string; name: string }[] = [];
  const interp = new Interpreter(project);
  for (const file of project.pythonFiles()) {
    const text = project.fs.readFile(file);
    if (!text || !/\bclass\s+\w+\s*\(/.test(text)) continue;
    const f = project.file(file);
    if (!f) continue;
    for (const [name] of f.classes) {
      try {
        const v = interp.moduleName(f, name);
        if (v.k === 'cls' && interp.isModuleClass(v)) out.push({ file, name });
      } catch {
        // A class whose bases cannot be read is skipped.
      }
      if (out.length >= max) return out;
    }
  }
  return out;
}
