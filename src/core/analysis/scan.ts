import type { Node, PythonGrammar } from '../parsing/python';
import { rangeOf, type SourceFile } from '../parsing/source';
import type { Position } from '../vocabulary/range';
import {
  classifyApi,
  FSDP2_MODULE,
  LEGACY_FSDP2_MODULES,
  OPTIMIZERS,
  POSITIONAL_PARAMS,
  SEARCH_WORDS,
  UNBOUND_FALLBACKS,
  type ApiKind,
} from './apis';
import {
  emptyFacts,
  type AnnotationFact,
  type CheckpointFact,
  type FrameworkCallFact,
  type FileFacts,
  type FunctionFact,
  type ImportFact,
  type LoopFact,
  type MeshFact,
  type MixedPrecisionFact,
  type ModelFact,
  type OptimizerFact,
  type OptionFact,
  type TrainingFact,
  type WrapCall,
} from './facts';
import { dtypeOf, toPlain, type PlainValue } from '../python/plain';
import { readImports, type ImportTable } from '../python/imports';
import { describe, interpretOption, lastSegment } from './options';
import {
  conditionParts,
  conditionsOf,
  enclosingFunction,
  enclosingStatement,
  findBinding,
  parameterNames,
  qualifiedName,
  dottedText,
} from '../python/scope';
import { Evaluator } from './evaluator';
import { truthy } from '../python/operators';
import type { Value } from '../python/values';

/** Calls that are facts of the training setup rather than of FSDP itself. */
const TRAINING_WORDS: Record<string, TrainingFact['kind'] | 'model' | 'checkpointing'> = {
  from_pretrained: 'model',
  from_config: 'model',
  LoraConfig: 'lora',
  get_peft_model: 'peft',
  BitsAndBytesConfig: 'quantization',
  requires_grad_: 'freeze',
  no_sync: 'no_sync',
  set_requires_gradient_sync: 'requires_gradient_sync',
  set_reshard_after_backward: 'set_reshard_after_backward',
  clip_grad_norm_: 'clip_grad_norm',
  bfloat16: 'cast',
  half: 'cast',
  gradient_checkpointing_enable: 'checkpointing',
};

/** Scans one parsed file for everything later stages need. Never throws on odd input: problems are reported. */
export function scanFile(grammar: PythonGrammar, file: SourceFile): FileFacts {
  const imports = readImports(grammar, file);
  const ev = new Evaluator(file, imports);
  const facts: FileFacts = {
    ...emptyFacts(file.path),
    annotations: readAnnotations(file),
    noqa: readNoqa(file),
    imports: importFacts(file, imports),
    blockClasses: repeatedBlockClasses(file, ev),
  };
  if (file.root.hasError) {
    const err = firstError(file.root);
    facts.problems.push({
      message: 'The file has syntax errors; the analysis reads the parts that parse.',
      line: err ? err.startPosition.row + 1 : null,
      severity: 'info',
    });
  }

  const words = new Set<string>([
    ...SEARCH_WORDS,
    ...Object.keys(TRAINING_WORDS),
    ...Object.keys(FRAMEWORK_WORDS),
  ]);
  // Local aliases of the APIs (`import ... as fs`, `fs = fully_shard`) are searched for too.
  for (const b of imports.bindings) if (!b.isModule && classifyApi(b.qualified)) words.add(b.local);

  file.prefetchWords(words);
  const seen = new Set<number>();
  const callNodes: Node[] = [];
  const partial: Node[] = [];
  // Names assigned one of the words (`shard = fully_shard`) are searched for in turn.
  const queue = [...words];
  for (let i = 0; i < queue.length && i < words.size + 64; i++) {
    for (const id of file.identifiers(queue[i]!)) {
      const call = callOf(id);
      if (call && !seen.has(call.startIndex)) {
        seen.add(call.startIndex);
        callNodes.push(call);
      } else if (!call && id.parent?.type === 'ERROR' && id.nextSibling?.type === '(') partial.push(id);
      else if (!call) {
        const alias = aliasOf(id);
        if (alias && !words.has(alias)) {
          words.add(alias);
          queue.push(alias);
        }
      }
    }
  }
  for (const id of partial) {
    const api = classify(file, imports, ev.calleeName(id), id);
    if (api && (api.kind === 'fully_shard' || api.kind === 'FSDP' || api.kind === 'wrap'))
      facts.calls.push(incompleteWrapCall(file, id, api.kind, api.module, api.legacy));
  }
  callNodes.sort((a, b) => a.startIndex - b.startIndex);

  const modelVars = new Set<string>();
  for (const call of callNodes) {
    const fn = call.childForFieldName('function');
    if (!fn) continue;
    const qualified = ev.calleeName(fn);
    const api = classify(file, imports, qualified, fn);
    const last = lastSegment(dottedText(fn));
    if (api) {
      switch (api.kind) {
        case 'fully_shard':
        case 'FSDP':
        case 'wrap':
          facts.calls.push(wrapCall(file, ev, call, fn, api.kind, api.module, api.legacy));
          continue;
        case 'init_device_mesh':
        case 'DeviceMesh':
          facts.meshes.push(meshFact(file, ev, call, api.kind));
          continue;
        case 'optimizer':
          facts.optimizers.push(optimizerFact(file, ev, call, qualified));
          continue;
        case 'MixedPrecisionPolicy':
        case 'MixedPrecision':
          facts.mixedPrecision.push(mixedPrecisionFact(file, call, api.kind));
          continue;
        case 'checkpoint_wrapper':
        case 'apply_activation_checkpointing':
        case 'checkpoint':
        case 'checkpoint_sequential':
          facts.checkpointing.push(checkpointFact(file, ev, call, api.kind));
          continue;
        default:
          continue;
      }
    }
    const framework = frameworkKind(last, qualified);
    if (framework) {
      facts.frameworkCalls.push(frameworkCallFact(file, ev, call, framework, qualified));
      continue;
    }
    const kind = TRAINING_WORDS[last];
    if (!kind) continue;
    if (kind === 'checkpointing') {
      facts.checkpointing.push(checkpointFact(file, ev, call, 'gradient_checkpointing_enable'));
    } else if (kind === 'model') {
      const m = modelFact(file, ev, call, qualified, fn);
      facts.models.push(m);
      if (m.variable) modelVars.add(m.variable);
    } else {
      const t = trainingFact(file, ev, call, kind, fn, qualified);
      if (t) facts.training.push(t);
    }
  }
  facts.training.push(...frozenAssignments(file), ...castCalls(file, ev));

  facts.calls.sort(
    (a, b) => a.range.start.line - b.range.start.line || a.range.start.character - b.range.start.character,
  );
  linkRoots(file, facts.calls);
  facts.functions = functionFacts(file, facts.calls);
  // Model construction sites: behind the wrapped variables, assigned to a `model`, or built on the meta device.
  const modelLines = new Set(facts.models.map((m) => m.line));
  const addModel = (m: ModelFact | null) => {
    if (m && !modelLines.has(m.line)) {
      modelLines.add(m.line);
      facts.models.push(m);
    }
  };
  for (const c of facts.calls) {
    const base = c.paths[0]?.[0];
    if (!base || modelVars.has(base) || base === 'self') continue;
    const at = file.root.descendantForIndex(c.statement.start, c.statement.start + 1);
    const b = at ? findBinding(file, base, at) : null;
    if (b?.kind === 'assign' && b.value?.type === 'call') addModel(constructionAt(file, ev, b.value, base));
  }
  for (const { call, variable } of modelAssignments(file, ev))
    addModel(constructionAt(file, ev, call, variable));
  facts.models.sort((a, b) => a.line - b.line);
  return facts;
}

/** `alias` in `alias = name` or `alias = module.name`, where `id` is that `name`. */
function aliasOf(id: Node): string | null {
  let value: Node = id;
  const p = id.parent;
  if (p?.type === 'attribute' && p.childForFieldName('attribute')?.id === id.id) value = p;
  const assign = value.parent;
  if (assign?.type !== 'assignment' || assign.childForFieldName('right')?.id !== value.id) return null;
  const left = assign.childForFieldName('left');
  return left?.type === 'identifier' ? left.text : null;
}

function classify(file: SourceFile, imports: ImportTable, qualified: string, fn: Node) {
  const api = classifyApi(qualified);
  if (api) return api;
  // Unimported names that can only mean the FSDP API (snippets, half-typed code, star imports).
  const head = dottedText(fn).split('.')[0]!;
  if (fn.type !== 'identifier' || imports.qualify(head).bound) return undefined;
  const fallback = UNBOUND_FALLBACKS[fn.text];
  if (!fallback) return undefined;
  const b = findBinding(file, fn.text, fn);
  if (b && b.kind !== 'loop') return undefined;
  const star = imports.wildcards.find((w) => classifyApi(`${w.module}.${fn.text}`));
  if (star) return classifyApi(`${star.module}.${fn.text}`);
  return { kind: fallback, module: '', legacy: false };
}

/** The call whose callee ends with `id` (`fully_shard(...)`, `tdf.fully_shard(...)`), if any. */
function callOf(id: Node): Node | null {
  let callee: Node = id;
  const p = id.parent;
  if (p?.type === 'attribute' && p.childForFieldName('attribute')?.id === id.id) callee = p;
  const call = callee.parent;
  if (call?.type === 'call' && call.childForFieldName('function')?.id === callee.id) return call;
  return null;
}

interface Args {
  positional: Node[];
  keywords: Map<string, Node>;
  splats: Node[];
}

/** A call's arguments: keywords and splats from the `arguments` query, positional ones in order. */
function readArgs(file: SourceFile, call: Node): Args {
  const out: Args = { positional: [], keywords: new Map(), splats: [] };
  const list = call.childForFieldName('arguments');
  if (list?.type !== 'argument_list') {
    if (list) out.positional.push(list); // `f(x for x in y)`: a generator argument
    return out;
  }
  const own = (n: Node) => n.parent?.parent?.id === list.id;
  for (const m of file.matches('arguments', list)) {
    const keyword = m.captures.find((c) => c.name === 'keyword')?.node;
    const value = m.captures.find((c) => c.name === 'value')?.node;
    const kwsplat = m.captures.find((c) => c.name === 'kwsplat')?.node;
    if (keyword && value && own(keyword)) out.keywords.set(keyword.text, value);
    else if (kwsplat && own(kwsplat)) out.splats.push(kwsplat);
  }
  for (const a of list.namedChildren)
    if (!['keyword_argument', 'dictionary_splat', 'list_splat', 'comment'].includes(a.type))
      out.positional.push(a);
  return out;
}

/** Options of a call by parameter name: positional arguments mapped through the API's signature, keywords, and `**dict` keys. */
function readOptions(
  ev: Evaluator,
  args: Args,
  kind: ApiKind | null,
  skip: string[],
): { options: Record<string, OptionFact>; unresolvedSplats: string[] } {
  const options: Record<string, OptionFact> = {};
  const names = (kind && POSITIONAL_PARAMS[kind]) ?? [];
  const put = (name: string, node: Node, extra: Partial<OptionFact> = {}, val?: Value) => {
    if (skip.includes(name)) return;
    const value =
      name === 'mesh' || name === 'device_mesh'
        ? meshOption(ev, node)
        : interpretOption(name, val ?? ev.eval(node));
    options[name] = { text: node.text, value, range: rangeOf(node), ...extra };
  };
  args.positional.forEach((node, i) => {
    const name = names[i];
    if (name) put(name, node);
  });
  const unresolvedSplats: string[] = [];
  for (const splat of args.splats) {
    const v = ev.eval(splat);
    if (v.k !== 'dict') {
      unresolvedSplats.push(splat.text);
      continue;
    }
    for (const e of v.entries) {
      if (e.key.k !== 'str') continue;
      const node = e.valueNode;
      const extra: Partial<OptionFact> = { via: `**${splat.text}` };
      if (e.conditions) extra.conditions = e.conditions;
      if (node) put(e.key.v, node, extra, e.value);
      else if (!skip.includes(e.key.v))
        options[e.key.v] = {
          text: describe(e.value),
          value: interpretOption(e.key.v, e.value),
          range: rangeOf(splat),
          ...extra,
        };
    }
  }
  for (const [name, node] of args.keywords) put(name, node);
  return { options, unresolvedSplats };
}

function statementInfo(file: SourceFile, stmt: Node) {
  return { start: stmt.startIndex, end: stmt.endIndex, range: rangeOf(stmt), indent: file.indentOf(stmt) };
}

function wrapCall(
  file: SourceFile,
  ev: Evaluator,
  call: Node,
  fn: Node,
  api: 'fully_shard' | 'FSDP' | 'wrap',
  module: string,
  legacy: boolean,
): WrapCall {
  const args = readArgs(file, call);
  const targetNode = args.keywords.get('module') ?? args.positional[0] ?? null;
  const { options, unresolvedSplats } = readOptions(ev, args, api, ['module']);
  const scope = enclosingFunction(call);
  const loops = loopsOf(file, call, scope);
  const targets =
    targetNode?.type === 'list' || targetNode?.type === 'tuple'
      ? targetNode.namedChildren.filter((c) => c.type !== 'comment')
      : targetNode
        ? [targetNode]
        : [];
  const parent = call.parent;
  const assignedTo =
    parent?.type === 'assignment' && parent.childForFieldName('right')?.id === call.id
      ? (parent.childForFieldName('left')?.text ?? null)
      : null;
  const stmt = enclosingStatement(call);
  const outerLoop = loops[0] ? outermostLoopStatement(call, scope) : null;
  const fact: WrapCall = {
    api,
    line: file.line(call),
    range: rangeOf(call),
    callee: fn.text,
    calleeRange: rangeOf(fn),
    target: targetNode?.text ?? '',
    targetRange: targetNode ? rangeOf(targetNode) : null,
    argumentsEnd: lastArgumentEnd(call),
    targets: targets.map((t) => t.text),
    paths: targets.map((t) => pathOf(file, t, loops.length ? call : null)),
    loop: loops[loops.length - 1] ?? null,
    loops,
    conditions: conditionsOf(call, scope),
    function: scope ? qualifiedName(scope) : null,
    importPath: module || null,
    legacy,
    options,
    unresolvedSplats,
    assignedTo,
    isRoot: false,
    children: [],
    statement: statementInfo(file, stmt),
    loopStatement: outerLoop ? statementInfo(file, outerLoop) : null,
    classFilter: classFilterOf(ev, call, scope, targetNode),
  };
  const enable = enableWrapOptions(file, ev, call, scope);
  if (enable) {
    fact.enableWrap = enable;
    // `wrap(m, **overrides)` runs FSDP with `{**enable_wrap_kwargs, **overrides}` (torch/distributed/fsdp/wrap.py).
    if (api === 'wrap')
      for (const [name, o] of Object.entries(enable))
        if (!(name in fact.options)) fact.options[name] = { ...o, inherited: 'enable_wrap' };
  }
  const never = neverRunsReason(ev, call, scope);
  if (never) fact.neverRuns = never;
  return fact;
}

/** Classes named by `isinstance(<target>, Cls)` / `isinstance(<target>, (A, B))` around a call. */
function classFilterOf(ev: Evaluator, call: Node, scope: Node | null, target: Node | null): string[] | null {
  if (target?.type !== 'identifier') return null;
  for (const part of conditionParts(call, scope)) {
    // `not isinstance(m, Block)` negated (a guard `if not isinstance(...): continue`) is `isinstance(m, Block)`.
    let node: Node | null = part.node;
    let negated = part.negated;
    while (node?.type === 'not_operator' || node?.type === 'parenthesized_expression') {
      if (node.type === 'not_operator') negated = !negated;
      node = node.type === 'not_operator' ? node.childForFieldName('argument') : node.namedChild(0);
    }
    if (negated || node?.type !== 'call' || node.childForFieldName('function')?.text !== 'isinstance')
      continue;
    const [subject, cls] = node.childForFieldName('arguments')?.namedChildren ?? [];
    if (subject?.text !== target.text || !cls) continue;
    const items = cls.type === 'tuple' || cls.type === 'parenthesized_expression' ? cls.namedChildren : [cls];
    return items.map((i) =>
      lastSegment(i.type === 'identifier' || i.type === 'attribute' ? ev.calleeName(i) : i.text),
    );
  }
  return null;
}

/** Methods whose iteration yields `(name, value)` pairs, not modules. */
const PAIR_ITERATORS = /\.(named_modules|named_children|named_parameters|named_buffers|items)\(\)$/;

/** Why a call can never run: an enclosing condition that is always false. */
function neverRunsReason(ev: Evaluator, call: Node, scope: Node | null): string | null {
  for (const part of conditionParts(call, scope)) {
    const v = truthy(ev.eval(part.node));
    if (v !== undefined && v === part.negated)
      return `the condition \`${part.node.text}\` is always ${v ? 'true' : 'false'} here`;
    if (part.negated || part.node.type !== 'call') continue;
    // `for m in model.named_modules(): if isinstance(m, Block)`: m is a (name, module) pair, never a Block.
    const fn = part.node.childForFieldName('function');
    const subject = part.node.childForFieldName('arguments')?.namedChild(0);
    if (fn?.text !== 'isinstance' || subject?.type !== 'identifier') continue;
    for (let p = call.parent; p && p.id !== scope?.id; p = p.parent) {
      if (p.type !== 'for_statement') continue;
      const left = p.childForFieldName('left');
      const right = p.childForFieldName('right');
      if (left?.type === 'identifier' && left.text === subject.text && right) {
        const it = right.text.trim();
        if (PAIR_ITERATORS.test(it) || /^enumerate\(/.test(it))
          return `\`for ${left.text} in ${it}\` yields (name, module) pairs, so \`${part.node.text}\` is never true`;
      }
    }
  }
  return null;
}

/** A wrap call in code that does not parse yet (`fully_shard(layer, mesh=` being typed): callee and target only. */
function incompleteWrapCall(
  file: SourceFile,
  id: Node,
  api: 'fully_shard' | 'FSDP' | 'wrap',
  module: string,
  legacy: boolean,
): WrapCall {
  const open = id.nextSibling!;
  const targetNode =
    open.nextNamedSibling && ['identifier', 'attribute', 'subscript'].includes(open.nextNamedSibling.type)
      ? open.nextNamedSibling
      : null;
  const errorNode = id.parent!;
  const loopNode = errorNode.parent?.type === 'for_statement' ? errorNode.parent : null;
  const loops: LoopFact[] = [];
  if (loopNode) {
    const left = loopNode.childForFieldName('left');
    const right = loopNode.childForFieldName('right');
    if (left && right) loops.push(loopFact(file, loopNode, left, right));
  }
  const end = targetNode ?? open;
  const range = { start: rangeOf(id).start, end: rangeOf(end).end };
  const stmt = loopNode ?? errorNode;
  const scope = enclosingFunction(id);
  return {
    api,
    line: file.line(id),
    range,
    callee: id.text,
    calleeRange: rangeOf(id),
    target: targetNode?.text ?? '',
    targetRange: targetNode ? rangeOf(targetNode) : null,
    argumentsEnd: targetNode ? rangeOf(targetNode).end : null,
    targets: targetNode ? [targetNode.text] : [],
    paths: targetNode
      ? [
          loopNode && targetNode.type === 'identifier' && loops[0]?.target === targetNode.text
            ? iterablePath(file, loopNode, 0)
            : pathOf(file, targetNode, null),
        ]
      : [],
    loop: loops[0] ?? null,
    loops,
    conditions: [],
    function: scope ? qualifiedName(scope) : null,
    importPath: module || null,
    legacy,
    options: {},
    unresolvedSplats: [],
    assignedTo: null,
    isRoot: false,
    children: [],
    statement: statementInfo(file, stmt),
    loopStatement: loopNode ? statementInfo(file, loopNode) : null,
    classFilter: null,
    incomplete: true,
  };
}

function lastArgumentEnd(call: Node): Position | null {
  const args = call.childForFieldName('arguments');
  const last =
    args?.type === 'argument_list' ? args.namedChildren.filter((c) => c.type !== 'comment').pop() : undefined;
  return last ? rangeOf(last).end : null;
}

/** The options of an enclosing `with enable_wrap(wrapper_cls=FSDP, **kwargs):` block. */
function enableWrapOptions(
  file: SourceFile,
  ev: Evaluator,
  call: Node,
  scope: Node | null,
): Record<string, OptionFact> | undefined {
  for (let p = call.parent; p && p.id !== scope?.id; p = p.parent) {
    if (p.type !== 'with_statement') continue;
    for (const manager of withCalls(file, p)) {
      const f = manager.childForFieldName('function');
      if (f && classifyApi(ev.calleeName(f))?.kind === 'enable_wrap')
        return readOptions(ev, readArgs(file, manager), 'FSDP', ['wrapper_cls', 'module']).options;
    }
  }
  return undefined;
}

/** The context-manager calls of one `with` statement (`torch.device("meta")`, `enable_wrap(...)`). */
function withCalls(file: SourceFile, stmt: Node): Node[] {
  const out: Node[] = [];
  for (const m of file.matches('blocks', stmt)) {
    if (!m.captures.some((c) => c.name === 'with' && c.node.id === stmt.id)) continue;
    const call = m.captures.find((c) => c.name === 'manager')?.node.parent;
    if (call) out.push(call);
  }
  return out;
}

/** `x = f(...)` statements directly in a block: (target, call) pairs. */
function blockAssignments(file: SourceFile, block: Node): { target: Node; value: Node }[] {
  const out: { target: Node; value: Node }[] = [];
  for (const m of file.matches('blocks', block)) {
    const target = m.captures.find((c) => c.name === 'target')?.node;
    const value = m.captures.find((c) => c.name === 'value')?.node;
    if (target && value && target.parent?.parent?.parent?.id === block.id) out.push({ target, value });
  }
  return out;
}

/** A `with torch.device("meta")` / `with init_empty_weights()` block. */
function isMetaBlock(file: SourceFile, ev: Evaluator, stmt: Node): boolean {
  // Asked once per model call inside the block and once per `meta` word: answered once per statement.
  return file.memo(`meta-block:${stmt.id}`, () =>
    withCalls(file, stmt).some((manager) => {
      const f = manager.childForFieldName('function');
      const name = f ? ev.calleeName(f) : '';
      if (lastSegment(name) === 'init_empty_weights') return true;
      if (name !== 'torch.device') return false;
      const a = readArgs(file, manager).positional[0];
      const v = a ? ev.eval(a) : null;
      return v?.k === 'str' && v.v === 'meta';
    }),
  );
}

function loopFact(file: SourceFile, loop: Node, left: Node, right: Node): LoopFact {
  return {
    target: left.text,
    iterable: right.text,
    line: file.line(loop),
    range: rangeOf(loop),
    targetRange: rangeOf(left),
  };
}

function loopsOf(file: SourceFile, node: Node, scope: Node | null): LoopFact[] {
  const loops: LoopFact[] = [];
  let child = node;
  for (let p = node.parent; p && p.id !== scope?.id; p = p.parent) {
    if (p.type === 'for_statement') {
      const body = p.childForFieldName('body');
      const left = p.childForFieldName('left');
      const right = p.childForFieldName('right');
      if (body && child.id === body.id && left && right) loops.unshift(loopFact(file, p, left, right));
    } else if (
      p.type === 'list_comprehension' ||
      p.type === 'generator_expression' ||
      p.type === 'set_comprehension'
    ) {
      const bodyNode = p.childForFieldName('body');
      if (bodyNode && child.id === bodyNode.id) {
        for (const clause of p.namedChildren.filter((c) => c.type === 'for_in_clause')) {
          const left = clause.childForFieldName('left');
          const right = clause.childForFieldName('right');
          if (left && right) loops.unshift(loopFact(file, clause, left, right));
        }
      }
    } else if (p.type === 'function_definition' || p.type === 'class_definition') break;
    child = p;
  }
  return loops;
}

function outermostLoopStatement(node: Node, scope: Node | null): Node | null {
  let found: Node | null = null;
  for (let p = node.parent; p && p.id !== scope?.id; p = p.parent) if (p.type === 'for_statement') found = p;
  return found;
}

/**
 * The module path a wrapped expression denotes, relative to a variable: `model.layers[3]` → model/layers/3,
 * a loop variable over `model.layers.items()` → model/layers/*, over `model.named_modules()` → model/**.
 */
function pathOf(file: SourceFile, expr: Node, inLoopAt: Node | null, depth = 0): string[] {
  if (depth > 8) return [expr.text];
  switch (expr.type) {
    case 'identifier': {
      const b = findBinding(file, expr.text, expr);
      if (b?.kind === 'loop' && inLoopAt) return iterablePath(file, b.loop, depth);
      if (
        b?.kind === 'assign' &&
        b.value &&
        ['attribute', 'subscript', 'call'].includes(b.value.type) &&
        b.statement.startIndex < expr.startIndex
      ) {
        const v = b.value.type === 'call' ? unwrapCall(b.value) : b.value;
        if (v) return pathOf(file, v, inLoopAt, depth + 1);
      }
      return [expr.text];
    }
    case 'attribute': {
      const o = expr.childForFieldName('object');
      const a = expr.childForFieldName('attribute');
      return o && a ? [...pathOf(file, o, inLoopAt, depth + 1), a.text] : [expr.text];
    }
    case 'subscript': {
      const v = expr.childForFieldName('value');
      const s = expr.childForFieldName('subscript');
      if (!v) return [expr.text];
      let key = '*';
      if (s?.type === 'integer') key = s.text;
      else if (s?.type === 'string') key = stripQuotes(s.text);
      return [...pathOf(file, v, inLoopAt, depth + 1), key];
    }
    case 'call': {
      const viaGetattr = getattrPath(file, expr, inLoopAt, depth);
      if (viaGetattr) return viaGetattr;
      const inner = unwrapCall(expr);
      return inner ? pathOf(file, inner, inLoopAt, depth + 1) : [expr.text];
    }
    default:
      return [expr.text];
  }
}

/** `checkpoint_wrapper(block, ...)` / `FSDP(block)` style calls pass their module through. */
function unwrapCall(call: Node): Node | null {
  const fn = call.childForFieldName('function');
  const args = call.childForFieldName('arguments');
  const first =
    args?.type === 'argument_list'
      ? args.namedChildren.find((c) => c.type !== 'keyword_argument' && c.type !== 'comment')
      : undefined;
  if (!fn || !first) return null;
  const name = lastSegment(dottedText(fn));
  return /checkpoint_wrapper|^wrap$|^FSDP$|FullyShardedDataParallel/.test(name) ? first : null;
}

/** `getattr(model, "layers")`: the attribute named by a constant string. */
function getattrPath(file: SourceFile, call: Node, inLoopAt: Node | null, depth: number): string[] | null {
  const fn = call.childForFieldName('function');
  const args = call.childForFieldName('arguments')?.namedChildren ?? [];
  if (fn?.type !== 'identifier' || fn.text !== 'getattr' || args.length < 2) return null;
  const [obj, attr] = args;
  if (!obj || attr?.type !== 'string') return null;
  return [...pathOf(file, obj, inLoopAt, depth + 1), stripQuotes(attr.text)];
}

function stripQuotes(text: string): string {
  return text.replace(/^[rbuf]*['"]{1,3}|['"]{1,3}$/gi, '');
}

function iterablePath(file: SourceFile, loop: Node, depth: number): string[] {
  const it = loop.childForFieldName('right');
  return it ? elementPath(file, it, depth) : ['*'];
}

/** The path of the elements of a sequence expression (`model.layers` → `model.layers.*`). */
function elementPath(file: SourceFile, expr: Node, depth: number): string[] {
  if (depth > 8) return [expr.text, '*'];
  let it: Node | undefined = expr;
  // enumerate(X), reversed(X), list(X), zip(X, ...)
  for (let i = 0; i < 4 && it?.type === 'call'; i++) {
    const fn = it.childForFieldName('function');
    const name = fn ? lastSegment(dottedText(fn)) : '';
    const args = it.childForFieldName('arguments');
    const first: Node | undefined = args?.namedChildren.find((c) => c.type !== 'keyword_argument');
    if (fn?.type === 'attribute') {
      const obj = fn.childForFieldName('object');
      if (!obj) break;
      if (name === 'named_modules' || name === 'modules')
        return [...pathOf(file, obj, null, depth + 1), '**'];
      if (['items', 'values', 'named_children', 'children', 'keys'].includes(name))
        return [...pathOf(file, obj, null, depth + 1), '*'];
      break;
    }
    if (['enumerate', 'reversed', 'list', 'zip', 'tuple', 'sorted', 'iter'].includes(name) && first) {
      it = first;
      continue;
    }
    if (name === 'range') return ['*'];
    break;
  }
  if (!it) return ['*'];
  if (COMPREHENSIONS.includes(it.type)) return comprehensionPath(file, it, depth);
  // `blocks = list(model.layers)` / `blocks = [m for m in model.modules() if ...]`, then `for b in blocks`.
  if (it.type === 'identifier') {
    const b = findBinding(file, it.text, it);
    if (
      b?.kind === 'assign' &&
      b.value &&
      b.statement.startIndex < it.startIndex &&
      (b.value.type === 'call' || COMPREHENSIONS.includes(b.value.type))
    )
      return elementPath(file, b.value, depth + 1);
  }
  if (it.type === 'subscript' && it.childForFieldName('subscript')?.type === 'slice') {
    const v = it.childForFieldName('value');
    return v ? [...pathOf(file, v, null, depth + 1), '*'] : ['*'];
  }
  return [...pathOf(file, it, null, depth + 1), '*'];
}

const COMPREHENSIONS = ['list_comprehension', 'generator_expression', 'set_comprehension'];

/**
 * The elements of `[m for m in X if ...]` (X's elements) or `[b.attn for b in X]` (an attribute of each); anything
 * else is opaque, a path no module path starts with.
 */
function comprehensionPath(file: SourceFile, comp: Node, depth: number): string[] {
  const opaque = [comp.text, '*'];
  const clauses = comp.namedChildren.filter((c) => c.type === 'for_in_clause');
  let body = comp.childForFieldName('body');
  const clause = clauses[0];
  const left = clause?.childForFieldName('left');
  const right = clause?.childForFieldName('right');
  if (clauses.length !== 1 || !body || !left || !right) return opaque;
  const attrs: string[] = [];
  while (body?.type === 'attribute') {
    attrs.unshift(body.childForFieldName('attribute')?.text ?? '');
    body = body.childForFieldName('object');
  }
  // `for m in X`, or the module of `for name, m in X.named_modules()`.
  const names =
    left.type === 'identifier' ? [left] : left.namedChildren.filter((c) => c.type === 'identifier');
  if (body?.type !== 'identifier' || body.text !== names[names.length - 1]?.text) return opaque;
  return [...elementPath(file, right, depth + 1), ...attrs];
}

/** A path is under another when the other is a strict prefix (`**` matches any depth). */
export function isUnder(path: string[], root: string[]): boolean {
  if (root.length >= path.length && !path.includes('**')) return false;
  for (let i = 0; i < root.length; i++) {
    if (path[i] === undefined) return false;
    if (root[i] === '**') return true;
    if (path[i] !== root[i] && path[i] !== '*' && root[i] !== '*') return false;
  }
  return path.length > root.length;
}

/**
 * Marks which calls wrap the object whose children other calls wrap (the roots of the plan). A child is wrapped
 * in the same function as the root, or in a function the root's function calls before the root call.
 */
function linkRoots(file: SourceFile, calls: WrapCall[]): void {
  const reaches = (root: WrapCall, child: WrapCall): boolean => {
    if (root.function === child.function) return true;
    const name = child.function?.split('.').pop();
    if (!name) return false;
    const from = root.function ? functionStart(file, root) : 0;
    const to = offsetOf(file, root.range.start);
    return file.identifiers(name, from, to).some((id) => callOf(id) !== null);
  };
  calls.forEach((c, i) => {
    if (c.paths.length !== 1 || !c.paths[0]) return;
    const p = c.paths[0];
    calls.forEach((d, j) => {
      if (i !== j && d.paths.some((q) => isUnder(q, p)) && reaches(c, d)) c.children.push(j);
    });
  });
  const isChild = new Set(calls.flatMap((c) => c.children));
  calls.forEach((c, i) => {
    const p = c.paths[0];
    const standalone =
      c.paths.length === 1 &&
      p &&
      c.loops.length === 0 &&
      (p.length === 1 || (p.length === 2 && p[0] === 'self'));
    c.isRoot = !isChild.has(i) && (c.children.length > 0 || !!standalone);
  });
}

/** What a `mesh=` argument denotes: a mesh from `init_device_mesh`, or some of its named dimensions. */
export interface MeshValue {
  shape: (number | null)[] | null;
  dimNames: string[] | null;
  /** The whole mesh when FSDP is given a slice of it (`world_mesh["dp"]` of a `("dp", "tp")` mesh). */
  full?: { shape: (number | null)[] | null; dimNames: string[] | null };
  /** Line of the `init_device_mesh` call. */
  line: number;
}

function meshOption(ev: Evaluator, node: Node): MeshValue | null {
  let base = node;
  let dims: string[] | null = null;
  if (node.type === 'subscript') {
    const v = node.childForFieldName('value');
    const k = node.childForFieldName('subscript');
    if (!v || !k) return null;
    const key = ev.eval(k);
    if (key.k === 'str') dims = [key.v];
    else if (key.k === 'seq' && key.items.every((i) => i.k === 'str'))
      dims = key.items.map((i) => (i as { v: string }).v);
    else return null;
    base = v;
  }
  const v = ev.eval(base);
  if (v.k !== 'call' || classifyApi(v.callee)?.kind !== 'init_device_mesh') return null;
  const shapeVal = v.kwargs.mesh_shape ?? v.args[1];
  const namesVal = v.kwargs.mesh_dim_names ?? v.args[2];
  let shape: (number | null)[] | null = null;
  if (shapeVal?.k === 'seq') shape = shapeVal.items.map((x) => (x.k === 'num' && x.int ? x.v : null));
  else if (shapeVal?.k === 'num') shape = [shapeVal.v];
  const names =
    namesVal?.k === 'seq' && namesVal.items.every((x) => x.k === 'str')
      ? namesVal.items.map((x) => (x as { v: string }).v)
      : null;
  if (dims) {
    if (!names) return { shape: dims.map(() => null), dimNames: dims, line: v.node.startPosition.row + 1 };
    const idx = dims.map((d) => names.indexOf(d));
    return {
      shape: idx.map((i) => (i >= 0 && shape ? (shape[i] ?? null) : null)),
      dimNames: dims,
      full: { shape, dimNames: names },
      line: v.node.startPosition.row + 1,
    };
  }
  return { shape, dimNames: names, line: v.node.startPosition.row + 1 };
}

function offsetOf(file: SourceFile, pos: { line: number; character: number }): number {
  let off = 0;
  for (let l = 0; l < pos.line; l++) off = file.text.indexOf('\n', off) + 1;
  return off + pos.character;
}

function functionStart(file: SourceFile, c: WrapCall): number {
  const node = file.root.descendantForIndex(c.statement.start, c.statement.start + 1);
  return (node && enclosingFunction(node)?.startIndex) ?? 0;
}

function meshFact(
  file: SourceFile,
  ev: Evaluator,
  call: Node,
  api: 'init_device_mesh' | 'DeviceMesh',
): MeshFact {
  const args = readArgs(file, call);
  const shapeNode =
    args.keywords.get('mesh_shape') ?? args.keywords.get('mesh') ?? args.positional[1] ?? null;
  const deviceNode = args.keywords.get('device_type') ?? args.positional[0] ?? null;
  const namesNode = args.keywords.get('mesh_dim_names') ?? null;
  let shape: (number | null)[] | null = null;
  if (shapeNode && api === 'init_device_mesh') {
    const v = ev.eval(shapeNode);
    if (v.k === 'seq') shape = v.items.map((x) => (x.k === 'num' && x.int ? x.v : null));
    else if (v.k === 'num' && v.int) shape = [v.v];
  }
  let dimNames: string[] | null = null;
  if (namesNode) {
    const v = ev.eval(namesNode);
    if (v.k === 'seq' && v.items.every((x) => x.k === 'str'))
      dimNames = v.items.map((x) => (x as { v: string }).v);
    else if (v.k === 'str') dimNames = [v.v];
  }
  const device = deviceNode ? ev.eval(deviceNode) : null;
  const parent = call.parent;
  const scope = enclosingFunction(call);
  return {
    name:
      parent?.type === 'assignment' && parent.childForFieldName('right')?.id === call.id
        ? (parent.childForFieldName('left')?.text ?? null)
        : null,
    line: file.line(call),
    range: rangeOf(call),
    api,
    deviceType: device?.k === 'str' ? device.v : null,
    shape,
    shapeText: shapeNode?.text ?? '',
    dimNames,
    function: scope ? qualifiedName(scope) : null,
  };
}

function optimizerFact(file: SourceFile, ev: Evaluator, call: Node, qualified: string): OptimizerFact {
  const args = readArgs(file, call);
  const paramsNode = args.keywords.get('params') ?? args.positional[0] ?? null;
  const info = OPTIMIZERS[qualified];
  let target: string | null = null;
  if (paramsNode) {
    const calls =
      paramsNode.type === 'call'
        ? [paramsNode, ...paramsNode.descendantsOfType('call')]
        : paramsNode.descendantsOfType('call');
    for (const c of calls) {
      const f = c.childForFieldName('function');
      const attr = f?.type === 'attribute' ? f.childForFieldName('attribute')?.text : undefined;
      if (f && (attr === 'parameters' || attr === 'named_parameters')) {
        target = f.childForFieldName('object')?.text ?? null;
        break;
      }
    }
    if (!target && paramsNode.type === 'identifier') {
      // `params = model.parameters(); AdamW(params)`
      const b = findBinding(file, paramsNode.text, paramsNode);
      if (b?.kind === 'assign' && b.value) {
        const f = b.value.type === 'call' ? b.value.childForFieldName('function') : null;
        if (
          f?.type === 'attribute' &&
          /^(named_)?parameters$/.test(f.childForFieldName('attribute')?.text ?? '')
        )
          target = f.childForFieldName('object')?.text ?? null;
      }
    }
  }
  const scope = enclosingFunction(call);
  let family = info?.family ?? 'adamw';
  if (family === 'sgd') {
    // SGD keeps a momentum buffer only when momentum is non-zero.
    const momentum = args.keywords.get('momentum') ?? args.positional[2];
    const v = momentum ? ev.eval(momentum) : null;
    if (v && !(v.k === 'num' && v.v === 0)) family = 'sgd-momentum';
  }
  return {
    name: info?.name ?? lastSegment(qualified),
    qualified,
    family,
    line: file.line(call),
    range: rangeOf(call),
    statement: statementInfo(file, enclosingStatement(call)),
    paramsText: paramsNode?.text ?? '',
    target,
    function: scope ? qualifiedName(scope) : null,
    options: readOptions(ev, { ...args, positional: [] }, null, ['params']).options,
  };
}

function checkpointFact(
  file: SourceFile,
  ev: Evaluator,
  call: Node,
  api: CheckpointFact['api'],
): CheckpointFact {
  const scope = enclosingFunction(call);
  const loops = loopsOf(file, call, scope);
  return {
    api,
    line: file.line(call),
    range: rangeOf(call),
    text: call.text.length > 200 ? call.text.slice(0, 200) + '…' : call.text,
    loop: loops[loops.length - 1] ?? null,
    function: scope ? qualifiedName(scope) : null,
    options: readOptions(ev, readArgs(file, call), api === 'gradient_checkpointing_enable' ? null : api, [])
      .options,
  };
}

function isMetaDevice(file: SourceFile, ev: Evaluator, call: Node): boolean {
  for (let p = call.parent; p; p = p.parent)
    if (p.type === 'with_statement' && isMetaBlock(file, ev, p)) return true;
  return false;
}

function modelFact(file: SourceFile, ev: Evaluator, call: Node, qualified: string, fn: Node): ModelFact {
  const args = readArgs(file, call);
  const idNode = args.keywords.get('pretrained_model_name_or_path') ?? args.positional[0] ?? null;
  const id = idNode ? ev.eval(idNode) : null;
  const { options } = readOptions(ev, args, null, []);
  const dtypeNode = args.keywords.get('torch_dtype') ?? args.keywords.get('dtype');
  const parent = call.parent;
  const scope = enclosingFunction(call);
  return {
    variable:
      parent?.type === 'assignment' && parent.childForFieldName('right')?.id === call.id
        ? (parent.childForFieldName('left')?.text ?? null)
        : null,
    line: file.line(call),
    range: rangeOf(call),
    callee: fn.text,
    qualified,
    pretrained: id?.k === 'str' ? id.v : null,
    meta: isMetaDevice(file, ev, call),
    dtype: dtypeNode ? (dtypeOf(ev.eval(dtypeNode)) ?? null) : null,
    args: options,
    function: scope ? qualifiedName(scope) : null,
  };
}

/** A model class constructed by `call` (`Transformer(args)`, `GPT.from_config(cfg).to(dev)`), if it is one. */
function constructionAt(file: SourceFile, ev: Evaluator, value: Node, variable: string): ModelFact | null {
  let call: Node = value;
  // `Transformer(args).to(device)` chains: find the constructor.
  for (let i = 0; i < 4; i++) {
    const f = call.childForFieldName('function');
    const obj = f?.type === 'attribute' ? f.childForFieldName('object') : null;
    if (obj?.type === 'call') call = obj;
    else break;
  }
  const fn = call.childForFieldName('function');
  if (!fn || (fn.type !== 'identifier' && fn.type !== 'attribute')) return null;
  const qualified = ev.calleeName(fn);
  if (classifyApi(qualified)) return null;
  // A class (`GPT`), or a class method on one (`Transformer.from_model_args`).
  const segments = dottedText(fn).split('.');
  const last = segments[segments.length - 1]!;
  const owner = segments[segments.length - 2];
  if (!/^[A-Z]/.test(last) && !(owner && /^[A-Z]/.test(owner))) return null;
  const m = modelFact(file, ev, call, qualified, fn);
  m.variable = variable;
  if (!/^from_(pretrained|config)$/.test(last)) m.pretrained = null;
  return m;
}

/** `model = X(...)` / `self.model = X(...)` and every `v = X(...)` inside `with torch.device("meta")`. */
function modelAssignments(file: SourceFile, ev: Evaluator): { call: Node; variable: string }[] {
  const out: { call: Node; variable: string }[] = [];
  for (const id of file.identifiers('model')) {
    let left: Node = id;
    const p = id.parent;
    if (p?.type === 'attribute' && p.childForFieldName('attribute')?.id === id.id) left = p;
    const assign = left.parent;
    const right = assign?.childForFieldName('right');
    if (
      assign?.type === 'assignment' &&
      assign.childForFieldName('left')?.id === left.id &&
      right?.type === 'call'
    )
      out.push({ call: right, variable: left.text });
  }
  for (const off of file.wordOffsets('meta')) {
    let w: Node | null = file.root.descendantForIndex(off, off + 4);
    while (w && w.type !== 'with_statement' && w.type !== 'block' && w.type !== 'module') w = w.parent;
    const body =
      w?.type === 'with_statement' && isMetaBlock(file, ev, w) ? w.childForFieldName('body') : null;
    if (body)
      for (const { target, value } of blockAssignments(file, body))
        out.push({ call: value, variable: target.text });
  }
  return out;
}

function trainingFact(
  file: SourceFile,
  ev: Evaluator,
  call: Node,
  kind: TrainingFact['kind'],
  fn: Node,
  qualified: string,
): TrainingFact | null {
  const args = readArgs(file, call);
  const scope = enclosingFunction(call);
  const obj = fn.type === 'attribute' ? fn.childForFieldName('object') : null;
  let target: string | null = obj?.text ?? null;
  // `.bfloat16()` / `.half()` casts are method calls on a module.
  if (kind === 'cast' && !obj) return null;
  if (kind === 'freeze') {
    const a = args.positional[0] ?? args.keywords.get('requires_grad');
    const v = a ? ev.eval(a) : ({ k: 'bool', v: true } as const);
    if (!(v.k === 'bool' && v.v === false)) return null;
  }
  if (kind === 'peft') target = args.positional[0]?.text ?? null;
  const castDtype =
    kind === 'cast' ? (lastSegment(qualified) === 'half' ? 'float16' : 'bfloat16') : undefined;
  if (kind === 'clip_grad_norm' && !qualified.startsWith('torch.')) target = obj?.text ?? null;
  else if (kind === 'clip_grad_norm')
    target = parametersOwner(args.keywords.get('parameters') ?? args.positional[0]);
  return {
    kind,
    line: file.line(call),
    range: rangeOf(call),
    text: call.text.length > 200 ? call.text.slice(0, 200) + '…' : call.text,
    options: readOptions(ev, args, null, []).options,
    positional: args.positional.map((a) => a.text),
    target,
    qualified,
    ...(castDtype ? { dtype: castDtype } : {}),
    function: scope ? qualifiedName(scope) : null,
  };
}

/** `model` in `model.parameters()` (or a comprehension / filter over it). */
function parametersOwner(node: Node | undefined): string | null {
  if (!node) return null;
  const calls =
    node.type === 'call' ? [node, ...node.descendantsOfType('call')] : node.descendantsOfType('call');
  for (const c of calls) {
    const f = c.childForFieldName('function');
    const attr = f?.type === 'attribute' ? f.childForFieldName('attribute')?.text : undefined;
    if (f && (attr === 'parameters' || attr === 'named_parameters'))
      return f.childForFieldName('object')?.text ?? null;
  }
  return null;
}

function mixedPrecisionFact(
  file: SourceFile,
  call: Node,
  api: 'MixedPrecisionPolicy' | 'MixedPrecision',
): MixedPrecisionFact {
  const parent = call.parent;
  const left =
    parent?.type === 'assignment' && parent.childForFieldName('right')?.id === call.id
      ? parent.childForFieldName('left')
      : null;
  const variable = left?.type === 'identifier' ? left.text : null;
  let used = true;
  if (variable && parent) {
    const scope = enclosingFunction(call);
    const end = scope ? scope.endIndex : file.text.length;
    // Read again after the assignment (module-level variables may be read by functions defined earlier, too).
    const from = scope ? parent.endIndex : 0;
    used = file
      .identifiers(variable, from, end)
      .some((id) => id.startIndex !== left!.startIndex && !isAssignedName(id));
  }
  return { api, variable, line: file.line(call), range: rangeOf(call), used };
}

function isAssignedName(id: Node): boolean {
  const p = id.parent;
  return p?.type === 'assignment' && p.childForFieldName('left')?.id === id.id;
}

/** Classes repeated by `nn.ModuleList([Block(cfg) for _ in range(n)])` and the `Sequential` equivalent. */
function repeatedBlockClasses(file: SourceFile, ev: Evaluator): string[] {
  const out = new Set<string>();
  for (const word of ['ModuleList', 'Sequential']) {
    for (const id of file.identifiers(word)) {
      const call = callOf(id);
      const arg = call && readArgs(file, call).positional[0];
      const comp =
        arg?.type === 'list_comprehension' || arg?.type === 'generator_expression'
          ? arg
          : call?.childForFieldName('arguments')?.type === 'generator_expression'
            ? call.childForFieldName('arguments')
            : null;
      const body = comp?.childForFieldName('body');
      const fn = body?.type === 'call' ? body.childForFieldName('function') : null;
      if (!fn) continue;
      const name = lastSegment(ev.calleeName(fn));
      if (/^[A-Z]/.test(name)) out.add(name);
    }
  }
  return [...out];
}

/** The functions holding wrap calls: their parameters and whether this file calls them. */
function functionFacts(file: SourceFile, calls: WrapCall[]): Record<string, FunctionFact> {
  const out: Record<string, FunctionFact> = {};
  for (const c of calls) {
    if (!c.function || out[c.function]) continue;
    const node = file.root.descendantForIndex(c.statement.start, c.statement.start + 1);
    const fn = node && enclosingFunction(node);
    const name = fn?.childForFieldName('name')?.text;
    if (!fn || !name) continue;
    const calledInFile = file
      .identifiers(name)
      .some((id) => (id.startIndex < fn.startIndex || id.startIndex >= fn.endIndex) && callOf(id) !== null);
    out[c.function] = { line: file.line(fn), parameters: parameterNames(fn), calledInFile };
  }
  return out;
}

/** `module.to(torch.bfloat16)` / `.to(dtype=torch.float16)`: the module's parameters change dtype. */
function castCalls(file: SourceFile, ev: Evaluator): TrainingFact[] {
  const out: TrainingFact[] = [];
  for (const word of ['bfloat16', 'float16', 'half', 'float32']) {
    for (const id of file.identifiers(word)) {
      const attr = id.parent;
      if (attr?.type !== 'attribute' || attr.childForFieldName('attribute')?.id !== id.id) continue;
      const arg = attr.parent?.type === 'keyword_argument' ? attr.parent : attr;
      const call = arg.parent?.type === 'argument_list' ? arg.parent.parent : null;
      const fn = call?.type === 'call' ? call.childForFieldName('function') : null;
      if (fn?.type !== 'attribute' || fn.childForFieldName('attribute')?.text !== 'to') continue;
      const dtype = dtypeOf(ev.eval(attr));
      if (!dtype) continue;
      const scope = enclosingFunction(call!);
      out.push({
        kind: 'cast',
        line: file.line(call!),
        range: rangeOf(call!),
        text: call!.text.length > 200 ? call!.text.slice(0, 200) + '…' : call!.text,
        options: {},
        positional: [],
        target: fn.childForFieldName('object')?.text ?? null,
        qualified: 'to',
        dtype,
        function: scope ? qualifiedName(scope) : null,
      });
    }
  }
  return out;
}

/** `p.requires_grad = False` in a loop over `X.parameters()`: X is frozen. */
function frozenAssignments(file: SourceFile): TrainingFact[] {
  const out: TrainingFact[] = [];
  for (const id of file.identifiers('requires_grad')) {
    const attr = id.parent;
    const assign = attr?.parent;
    if (
      attr?.type !== 'attribute' ||
      assign?.type !== 'assignment' ||
      assign.childForFieldName('left')?.id !== attr.id
    )
      continue;
    if (assign.childForFieldName('right')?.type !== 'false') continue;
    const scope = enclosingFunction(assign);
    const loops = loopsOf(file, assign, scope);
    const loop = loops[loops.length - 1];
    const target = loop
      ? loop.iterable.replace(/\.(named_)?parameters\(\)$/, '')
      : (attr.childForFieldName('object')?.text ?? null);
    out.push({
      kind: 'freeze',
      line: file.line(assign),
      range: rangeOf(assign),
      text: loop ? `for ${loop.target} in ${loop.iterable}: ${assign.text}` : assign.text,
      options: {},
      positional: [],
      qualified: 'requires_grad',
      target,
      function: scope ? qualifiedName(scope) : null,
    });
  }
  return out;
}

function importFacts(file: SourceFile, imports: ImportTable): ImportFact[] {
  const out: ImportFact[] = [];
  for (const b of imports.bindings) {
    const api = classifyApi(b.qualified);
    const fromText = b.fromNode?.text.replace(/\s+/g, '');
    const fromLegacy = !!fromText && LEGACY_FSDP2_MODULES.includes(fromText);
    // `from torch.distributed._composable import fsdp`: the name bound is the legacy module itself.
    const namesLegacyModule = !!fromText && !b.isModule && LEGACY_FSDP2_MODULES.includes(b.qualified);
    const imported = b.imported ?? b.qualified;
    const moduleLegacy = b.isModule && LEGACY_FSDP2_MODULES.includes(imported);
    const fact: ImportFact = {
      local: b.local,
      qualified: b.qualified,
      line: b.line,
      endLine: b.statement.endLine,
      topLevel: b.statement.topLevel,
      legacy: !!(api?.legacy || fromLegacy || moduleLegacy || namesLegacyModule),
      ...(b.fallback ? { fallback: true } : {}),
    };
    if (fromLegacy && fromText.startsWith(LEGACY_FSDP2_MODULES[0]!)) fact.rewrite = FSDP2_MODULE;
    else if (namesLegacyModule && fromText === 'torch.distributed._composable')
      fact.rewrite = 'torch.distributed';
    // `import torch.distributed._composable.fsdp as F` can be rewritten; without `as`, the calls spell the path.
    else if (moduleLegacy && !b.imported) fact.rewrite = FSDP2_MODULE;
    if (b.fromNode) {
      const node = file.root.descendantForIndex(b.fromNode.start, b.fromNode.end);
      if (node) fact.from = { ...b.fromNode, range: rangeOf(node) };
    } else if (moduleLegacy) {
      const stmt = file.root.descendantForIndex(b.statement.start, b.statement.start + 1);
      const dotted = stmt ? findDotted(stmt, imported) : null;
      if (dotted)
        fact.from = {
          start: dotted.startIndex,
          end: dotted.endIndex,
          text: dotted.text,
          range: rangeOf(dotted),
        };
    }
    out.push(fact);
  }
  return out;
}

function findDotted(stmt: Node, text: string): Node | null {
  let s: Node | null = stmt;
  while (s && s.type !== 'import_statement') s = s.parent;
  if (!s) return null;
  return s.descendantsOfType('dotted_name').find((d) => d.text.replace(/\s+/g, '') === text) ?? null;
}

function firstError(node: Node): Node | null {
  const errs = node.descendantsOfType('ERROR');
  if (errs[0]) return errs[0];
  // Missing nodes are not ERROR nodes: descend into the subtrees that have errors.
  let n: Node | null = node;
  while (n) {
    const next: Node | undefined = n.children.find((c) => c.hasError || c.isMissing);
    if (!next) break;
    if (next.isMissing) return next;
    n = next;
  }
  return n;
}

/** `# fsdp: model=path:Class world_size=8 gpu=h100-sxm-80gb` comments. */
/** Constructors of frameworks that configure FSDP, by class name. */
const FRAMEWORK_WORDS: Record<string, FrameworkCallFact['kind']> = {
  TrainingArguments: 'TrainingArguments',
  Seq2SeqTrainingArguments: 'TrainingArguments',
  SFTConfig: 'TrainingArguments',
  DPOConfig: 'TrainingArguments',
  GRPOConfig: 'TrainingArguments',
  ORPOConfig: 'TrainingArguments',
  KTOConfig: 'TrainingArguments',
  CPOConfig: 'TrainingArguments',
  RewardConfig: 'TrainingArguments',
  PPOConfig: 'TrainingArguments',
  FullyShardedDataParallelPlugin: 'FullyShardedDataParallelPlugin',
  FSDPStrategy: 'FSDPStrategy',
  ModelParallelStrategy: 'ModelParallelStrategy',
  Trainer: 'LightningTrainer',
  Fabric: 'Fabric',
  Accelerator: 'Accelerator',
  SFTTrainer: 'TrlTrainer',
  DPOTrainer: 'TrlTrainer',
  GRPOTrainer: 'TrlTrainer',
  ORPOTrainer: 'TrlTrainer',
  KTOTrainer: 'TrlTrainer',
  CPOTrainer: 'TrlTrainer',
  RewardTrainer: 'TrlTrainer',
  PPOTrainer: 'TrlTrainer',
  OnlineDPOTrainer: 'TrlTrainer',
  RLOOTrainer: 'TrlTrainer',
};

/** A framework constructor, told apart from same-named classes by where it is imported from. */
function frameworkKind(last: string, qualified: string): FrameworkCallFact['kind'] | undefined {
  const kind = FRAMEWORK_WORDS[last];
  if (!kind) return undefined;
  const lightning = /^(lightning|pytorch_lightning|lightning_fabric)\b/.test(qualified);
  switch (kind) {
    case 'LightningTrainer':
    case 'Fabric':
    case 'ModelParallelStrategy':
      return lightning ? kind : undefined;
    case 'FSDPStrategy':
      return lightning || qualified === last ? kind : undefined;
    case 'TrainingArguments':
      return /^(transformers|trl)\b/.test(qualified) || qualified === last ? kind : undefined;
    case 'FullyShardedDataParallelPlugin':
      return /^accelerate\b/.test(qualified) || qualified === last ? kind : undefined;
    case 'Accelerator':
      return /^accelerate\b/.test(qualified) ? kind : undefined;
    case 'TrlTrainer':
      return /^trl\b/.test(qualified) ? kind : undefined;
  }
}

function frameworkCallFact(
  file: SourceFile,
  ev: Evaluator,
  call: Node,
  kind: FrameworkCallFact['kind'],
  callee: string,
): FrameworkCallFact {
  const kwargs: Record<string, PlainValue> = {};
  const kwargLines: Record<string, number> = {};
  for (const a of call.childForFieldName('arguments')?.namedChildren ?? []) {
    if (a.type !== 'keyword_argument') continue;
    const name = a.childForFieldName('name')?.text;
    const value = a.childForFieldName('value');
    if (!name || !value) continue;
    kwargs[name] = toPlain(ev.eval(value), { params: 'default' });
    kwargLines[name] = file.line(a);
  }
  // TRL's trainers take the model first (all but PPOTrainer, whose first parameter is `args`).
  const first = call.childForFieldName('arguments')?.namedChildren[0];
  if (
    kind === 'TrlTrainer' &&
    !('model' in kwargs) &&
    !/PPOTrainer$/.test(callee) &&
    first &&
    first.type !== 'keyword_argument' &&
    first.type !== 'list_splat' &&
    first.type !== 'dictionary_splat'
  ) {
    kwargs.model = toPlain(ev.eval(first), { params: 'default' });
    kwargLines.model = file.line(first);
  }
  return { kind, callee, line: file.line(call), range: rangeOf(call), kwargs, kwargLines };
}

function readAnnotations(file: SourceFile): AnnotationFact[] {
  const out: AnnotationFact[] = [];
  const re = /#\s*fsdp:/g;
  for (let m = re.exec(file.text); m; m = re.exec(file.text)) {
    const node = file.root.descendantForIndex(m.index, m.index + 1);
    if (node?.type !== 'comment') continue;
    const body = node.text.slice(node.text.indexOf(':') + 1).trim();
    const values: Record<string, string> = {};
    const invalid: string[] = [];
    for (const tok of body.split(/\s+/).filter(Boolean)) {
      const eq = tok.indexOf('=');
      if (eq > 0 && eq < tok.length - 1) values[tok.slice(0, eq)] = tok.slice(eq + 1);
      else invalid.push(tok);
    }
    out.push({ line: file.line(node), range: rangeOf(node), values, invalid });
  }
  return out;
}

/** `# noqa` and `# noqa: FSDP001, FSDP004` comments by line. */
function readNoqa(file: SourceFile): Record<number, string[] | null> {
  const out: Record<number, string[] | null> = {};
  const re = /#\s*noqa\b(?::\s*([A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?/gi;
  for (let m = re.exec(file.text); m; m = re.exec(file.text)) {
    const node = file.root.descendantForIndex(m.index, m.index + 1);
    if (node?.type !== 'comment') continue;
    const line = node.startPosition.row;
    const codes = m[1]
      ? m[1]
          .split(/[\s,]+/)
          .filter(Boolean)
          .map((c) => c.toUpperCase())
      : null;
    const prev = out[line];
    out[line] = codes === null || prev === null ? null : [...(prev ?? []), ...codes];
  }
  return out;
}
