/** FSDP1's runtime calls a file makes around its wraps (no_sync, clip_grad_norm_, state dicts), with the `with` blocks they open. */
import { up } from '../parsing/python';
import type { Node } from '../parsing/python';
import { rangeOf, type SourceFile } from '../parsing/source';
import type { ImportTable } from '../python/imports';
import { toPlain } from '../python/plain';
import { dottedText, enclosingFunction, findBinding, qualifiedName } from '../python/scope';
import type { Evaluator } from './evaluator';
import type { Fsdp1ArgumentFact, Fsdp1CallFact, WithBlockFact, WrapCall } from './facts';

/**
 * Methods of FSDP1's `FullyShardedDataParallel` (torch/distributed/fsdp/fully_sharded_data_parallel.py) that
 * FSDP2's `fully_shard` modules do not have: called on a module, or through the class with the module first.
 */
const FSDP1_METHODS = [
  'no_sync',
  'clip_grad_norm_',
  'state_dict_type',
  'set_state_dict_type',
  'summon_full_params',
  'optim_state_dict',
  'full_optim_state_dict',
  'sharded_optim_state_dict',
  'optim_state_dict_to_load',
  'shard_full_optim_state_dict',
  'scatter_full_optim_state_dict',
  'flatten_sharded_optim_state_dict',
  'rekey_optim_state_dict',
];
/**
 * `nn.Module` methods whose result FSDP1's state-dict type decides: read on the modules the file wraps, and on a
 * module an FSDP1 class call names in the same function (`FSDP.state_dict_type(model, ...)` in a helper that is
 * handed the wrapped model).
 */
const MODULE_METHODS = ['state_dict', 'load_state_dict'];
/**
 * Class methods whose module is not their first argument (torch/distributed/fsdp/fully_sharded_data_parallel.py):
 * `shard_full_optim_state_dict(full_optim_state_dict, model, ...)`, `scatter_full_optim_state_dict(full_optim_state_dict,
 * model, ...)`, `flatten_sharded_optim_state_dict(sharded_optim_state_dict, model, ...)` and
 * `rekey_optim_state_dict(optim_state_dict, optim_state_key_type, model, ...)`.
 */
const MODULE_POSITION: Record<string, number> = {
  shard_full_optim_state_dict: 1,
  scatter_full_optim_state_dict: 1,
  flatten_sharded_optim_state_dict: 1,
  rekey_optim_state_dict: 2,
};

/** Calls read at most (a file with more is not one a migration rewrites by hand anyway). */
const MAX_CALLS = 256;
/** Nodes of one `with` body read at most; past it the body is unread. */
const MAX_BODY_NODES = 20_000;
/** Reads of the module's names one body may hold before it is unread. */
const MAX_READS = 64;

const SCOPES = ['function_definition', 'class_definition', 'lambda'];
const LOOPS = ['for_statement', 'while_statement'];

/**
 * The calls, in file order. `isFsdpClass` says whether an expression names FSDP1's class (as the scan resolves
 * imports); `wraps` are the file's wrap calls, whose `FullyShardedDataParallel` targets and results name the
 * modules whose `state_dict()` / `load_state_dict()` are read, as do the modules FSDP1's class calls name in the
 * function that makes them.
 */
export function fsdp1Calls(
  file: SourceFile,
  ev: Evaluator,
  imports: ImportTable,
  wraps: WrapCall[],
  isFsdpClass: (node: Node) => boolean,
): Fsdp1CallFact[] {
  const wrapped = new Set<string>();
  for (const w of wraps)
    if (w.api === 'FSDP')
      for (const n of [w.target, w.assignedTo])
        if (n && /^[\w.\s]+$/.test(n)) wrapped.add(n.replace(/\s+/g, ''));
  file.prefetchWords([...FSDP1_METHODS, ...MODULE_METHODS]);
  const found: { call: Node; fact: Fsdp1CallFact }[] = [];
  for (const word of FSDP1_METHODS) collect(file, ev, imports, word, isFsdpClass, found, () => true);
  // The modules FSDP1's class calls name, by function: `FSDP.state_dict_type(model, ...)` makes `model` FSDP1's there.
  const named = new Set(
    found.filter((f) => f.fact.onClass && f.fact.module).map((f) => scoped(f.fact.function, f.fact.module!)),
  );
  if (wrapped.size || named.size)
    for (const word of MODULE_METHODS)
      collect(file, ev, imports, word, isFsdpClass, found, (receiver, call) => {
        if (wrapped.has(receiver)) return true;
        const fn = enclosingFunction(call);
        return named.has(scoped(fn ? qualifiedName(fn) : null, receiver));
      });
  found.sort((a, b) => a.call.startIndex - b.call.startIndex);
  // Which block holds each call: the nearest `with` body around it whose item is one of these calls.
  const byStatement = new Map<number, number>();
  found.forEach((f, i) => {
    const stmt = f.fact.use === 'with' ? withStatementOf(f.call) : null;
    if (stmt) byStatement.set(stmt.id, i);
  });
  const roots = new Set([...wrapped].map((n) => n.split('.')[0]!));
  found.forEach((f, i) => {
    const held = holdingBlock(f.call, byStatement);
    if (held !== undefined && held !== i) f.fact.heldBy = held;
    const stmt = f.fact.use === 'with' ? withStatementOf(f.call) : null;
    if (stmt) {
      const own = f.fact.module ? new Set([...roots, f.fact.module.split('.')[0]!]) : roots;
      f.fact.block = withBlock(file, ev, stmt, f.call, own);
    }
  });
  return found.map((f) => f.fact);
}

/** Appends the calls of `word` as a method (`accept` says which receivers count for MODULE_METHODS). */
function collect(
  file: SourceFile,
  ev: Evaluator,
  imports: ImportTable,
  word: string,
  isFsdpClass: (node: Node) => boolean,
  found: { call: Node; fact: Fsdp1CallFact }[],
  accept: (receiver: string, call: Node) => boolean,
): void {
  for (const id of file.identifiers(word)) {
    if (found.length >= MAX_CALLS) return;
    const attr = up(id);
    if (attr?.type !== 'attribute' || attr.childForFieldName('attribute')?.id !== id.id) continue;
    const call = up(attr);
    if (call?.type !== 'call' || call.childForFieldName('function')?.id !== attr.id) continue;
    const object = attr.childForFieldName('object');
    if (!object) continue;
    const onClass = (object.type === 'identifier' || object.type === 'attribute') && isFsdpClass(object);
    if (!onClass) {
      if (MODULE_METHODS.includes(word) ? !accept(dottedText(object), call) : moduleFunction(object, imports))
        continue;
    }
    found.push({ call, fact: callFact(file, ev, call, attr, object, word, onClass) });
  }
}

/** A module name within its function (null: module level). */
function scoped(fn: string | null, module: string): string {
  return `${fn ?? ''}\0${module.replace(/\s+/g, '')}`;
}

/** `torch.nn.utils.clip_grad_norm_(...)`: a function of an imported module, not a method of a module object. */
function moduleFunction(object: Node, imports: ImportTable): boolean {
  let root: Node | null = object;
  while (root?.type === 'attribute') root = root.childForFieldName('object');
  return root?.type === 'identifier' && imports.qualify(root.text).bound;
}

function callFact(
  file: SourceFile,
  ev: Evaluator,
  call: Node,
  callee: Node,
  object: Node,
  method: string,
  onClass: boolean,
): Fsdp1CallFact {
  const list = call.childForFieldName('arguments');
  const items = list?.type === 'argument_list' ? list.namedChildren.filter((c) => c.type !== 'comment') : [];
  let moduleNode: Node | null = onClass ? null : object;
  const args: Fsdp1ArgumentFact[] = [];
  // A class call's module: at its place among the positional arguments, or `module=` / `model=`.
  const position = MODULE_POSITION[method] ?? 0;
  let positional = 0;
  for (const a of items) {
    let name: string | null = null;
    let value: Node = a;
    if (a.type === 'keyword_argument') {
      name = a.childForFieldName('name')?.text ?? null;
      value = a.childForFieldName('value') ?? a;
    } else if (a.type === 'list_splat') name = '*';
    else if (a.type === 'dictionary_splat') name = '**';
    const at = name === null ? positional++ : -1;
    if (onClass && !moduleNode && (at === position || name === 'module' || name === 'model')) {
      moduleNode = value;
      continue;
    }
    args.push({ name, text: value.text, range: rangeOf(value), value: toPlain(ev.eval(value)) });
  }
  const open = list?.type === 'argument_list' ? list.startPosition : call.endPosition;
  const use = useOf(call);
  const fn = enclosingFunction(call);
  return {
    method,
    onClass,
    module: moduleNode ? dottedText(moduleNode) : null,
    moduleRange: moduleNode ? rangeOf(moduleNode) : null,
    callee: callee.text,
    calleeRange: rangeOf(callee),
    args,
    argumentsStart: { line: open.row, character: open.column + 1 },
    line: file.line(call),
    range: rangeOf(call),
    use,
    function: fn ? qualifiedName(fn) : null,
  };
}

function unparen(node: Node): Node {
  let n = node;
  for (let p = up(n); p?.type === 'parenthesized_expression'; p = up(p)) n = p;
  return n;
}

/** The `with_item` the call is, or is an arm of a conditional that is (`call if test else other`). */
function withItemOf(call: Node): Node | null {
  let n = unparen(call);
  let p = up(n);
  if (p?.type === 'conditional_expression' && p.namedChildren[1]?.id !== n.id) {
    n = unparen(p);
    p = up(n);
  }
  if (p?.type === 'as_pattern' && p.namedChildren[0]?.id === n.id) p = up(p);
  return p?.type === 'with_item' ? p : null;
}

function withStatementOf(call: Node): Node | null {
  const clause = up(withItemOf(call));
  const stmt = up(clause);
  return clause?.type === 'with_clause' && stmt?.type === 'with_statement' ? stmt : null;
}

function useOf(call: Node): Fsdp1CallFact['use'] {
  if (withStatementOf(call)) return 'with';
  const n = unparen(call);
  const p = up(n);
  if (p?.type === 'expression_statement' && p.namedChildren.length === 1) return 'statement';
  if (
    p?.type === 'assignment' &&
    p.childForFieldName('right')?.id === n.id &&
    up(p)?.type === 'expression_statement'
  )
    return 'assigned';
  return 'expression';
}

/** Index of the call whose `with` body holds `call`, stopping at a `def`, `class` or `lambda`. */
function holdingBlock(call: Node, byStatement: Map<number, number>): number | undefined {
  for (let p = up(call); p; p = up(p)) {
    if (SCOPES.includes(p.type)) return undefined;
    const stmt = up(p);
    if (p.type === 'block' && stmt?.type === 'with_statement') {
      const i = byStatement.get(stmt.id);
      if (i !== undefined) return i;
    }
  }
  return undefined;
}

function withBlock(
  file: SourceFile,
  ev: Evaluator,
  stmt: Node,
  call: Node,
  names: Set<string>,
): WithBlockFact {
  const clause = stmt.namedChildren.find((c) => c.type === 'with_clause');
  const item = withItemOf(call)!;
  const colon = stmt.children.find((c) => c?.type === ':') ?? null;
  const body = stmt.childForFieldName('body');
  const first = body?.namedChildren.find((c) => c.type !== 'comment') ?? body;
  const headerEnd = colon ? colon.endPosition : stmt.startPosition;
  const inline = !!first && first.startPosition.row === headerEnd.row;
  const value = item.childForFieldName('value');
  const out: WithBlockFact = {
    items: clause?.namedChildren.filter((c) => c.type === 'with_item').length ?? 1,
    alias: value?.type === 'as_pattern',
    async: stmt.children.some((c) => c?.type === 'async'),
    start: stmt.startPosition.row,
    indent: file.indentOf(stmt),
    headerEnd: { line: headerEnd.row, character: headerEnd.column },
    body: {
      start: { line: (first ?? stmt).startPosition.row, character: (first ?? stmt).startPosition.column },
      end: { line: (body ?? stmt).endPosition.row, character: (body ?? stmt).endPosition.column },
      indent: first && !inline ? file.indentOf(first) : '',
      inline,
    },
    multilineString: false,
    exits: false,
    defines: false,
    reads: [],
  };
  const conditional = conditionalOf(file, ev, call);
  if (conditional) out.conditional = conditional;
  if (!body || body.descendantCount > MAX_BODY_NODES) {
    out.unread = true;
    return out;
  }
  out.multilineString = body
    .descendantsOfType('string')
    .some((s) => s.startPosition.row !== s.endPosition.row);
  out.defines = body.descendantsOfType(SCOPES).length > 0;
  out.exits = body
    .descendantsOfType(['return_statement', 'break_statement', 'continue_statement'])
    .some((n) => !within(n, body, n.type === 'return_statement' ? SCOPES : [...SCOPES, ...LOOPS]));
  for (const id of body.descendantsOfType('identifier')) {
    if (!names.has(id.text)) continue;
    const p = up(id);
    // A name's own uses: not `x.model` (an attribute called so) nor `f(model=...)` (a keyword).
    if (p?.type === 'attribute' && p.childForFieldName('attribute')?.id === id.id) continue;
    if (p?.type === 'keyword_argument' && p.childForFieldName('name')?.id === id.id) continue;
    let chain = id;
    for (
      let q = up(chain);
      q?.type === 'attribute' && q.childForFieldName('object')?.id === chain.id;
      q = up(q)
    )
      chain = q;
    const parent = up(chain);
    const called = parent?.type === 'call' && parent.childForFieldName('function')?.id === chain.id;
    if (out.reads.length >= MAX_READS) {
      out.readsCut = true;
      break;
    }
    out.reads.push({ text: dottedText(chain), called, range: rangeOf(chain) });
  }
  return out;
}

/** Inside one of `types` between `node` and `body` (a nested function, or a loop the `break` belongs to). */
function within(node: Node, body: Node, types: string[]): boolean {
  for (let p = up(node); p && p.id !== body.id; p = up(p)) if (types.includes(p.type)) return true;
  return false;
}

/** `call if test else other`, or the reverse, as the `with` item: the test and which arm enters the call. */
function conditionalOf(
  file: SourceFile,
  ev: Evaluator,
  call: Node,
): WithBlockFact['conditional'] | undefined {
  const arm = unparen(call);
  const cond = up(arm);
  if (cond?.type !== 'conditional_expression') return undefined;
  const [consequence, test, alternative] = cond.namedChildren.filter((c) => c.type !== 'comment');
  if (!consequence || !test || !alternative) return undefined;
  const callWhen = consequence.id === arm.id;
  let other = callWhen ? alternative : consequence;
  while (other.type === 'parenthesized_expression' && other.namedChildren.length === 1)
    other = other.namedChild(0)!;
  const fn = other.type === 'call' ? other.childForFieldName('function') : null;
  const noArgs =
    other.childForFieldName('arguments')?.namedChildren.every((c) => c.type === 'comment') ?? false;
  const nullcontext = !!fn && noArgs && ev.calleeName(fn) === 'contextlib.nullcontext';
  const operand = test.type === 'not_operator' ? test.childForFieldName('argument') : null;
  return {
    test: test.text,
    testType: test.type,
    testIsBool: isBool(file, test),
    ...(operand ? { notOperand: { text: operand.text, isBool: isBool(file, operand) } } : {}),
    callWhen,
    nullcontext,
  };
}

/** Node types whose value is a `bool` as written. */
const BOOLEAN = ['comparison_operator', 'not_operator', 'true', 'false'];

/** A `bool` as written, or a name whose binding there is an assignment of one (`last = i == n - 1`). */
function isBool(file: SourceFile, node: Node): boolean {
  let n = node;
  while (n.type === 'parenthesized_expression' && n.namedChildren.length === 1) n = n.namedChild(0)!;
  if (BOOLEAN.includes(n.type)) return true;
  if (n.type !== 'identifier') return false;
  const b = findBinding(file, n.text, n);
  let v = b?.kind === 'assign' ? b.value : null;
  while (v?.type === 'parenthesized_expression' && v.namedChildren.length === 1) v = v.namedChild(0);
  return !!v && BOOLEAN.includes(v.type);
}
