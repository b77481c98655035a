/** Where the model is built: `from_pretrained` and `from_config`, constructors behind the wrapped variables, assignments to a `model`, builds under `with torch.device("meta")`, and the block classes a ModuleList repeats. */
import { up } from '../parsing/python';
import type { Node } from '../parsing/python';
import { type SourceFile, rangeOf } from '../parsing/source';
import { dtypeOf } from '../python/plain';
import { dottedText, enclosingFunction, qualifiedName } from '../python/scope';
import { classifyApi } from './apis';
import { callOf, readArgs, readOptions } from './arguments';
import { type Evaluator } from './evaluator';
import type { ModelFact } from './facts';
import { lastSegment } from './options';
import { withCalls } from './wrapCalls';

/** `x = f(...)` statements directly in a block: (target, call) pairs. */
export function blockAssignments(file: SourceFile, block: Node): { target: Node; value: Node }[] {
  const out: { target: Node; value: Node }[] = [];
  for (const m of file.matches('blocks', block)) {
    const target = m.captures.find((c) => c.name === 'target')?.node;
    const value = m.captures.find((c) => c.name === 'value')?.node;
    if (target && value && up(up(up(target)))?.id === block.id) out.push({ target, value });
  }
  return out;
}

/** A `with torch.device("meta")` / `with init_empty_weights()` block. */
export function isMetaBlock(file: SourceFile, ev: Evaluator, stmt: Node): boolean {
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

export function isMetaDevice(file: SourceFile, ev: Evaluator, call: Node): boolean {
  for (let p = up(call); p; p = up(p))
    if (p.type === 'with_statement' && isMetaBlock(file, ev, p)) return true;
  return false;
}

export function modelFact(
  file: SourceFile,
  ev: Evaluator,
  call: Node,
  qualified: string,
  fn: Node,
): ModelFact {
  const args = readArgs(file, call);
  const idNode = args.keywords.get('pretrained_model_name_or_path') ?? args.positional[0] ?? null;
  const before = ev.defaultsRead.length;
  const id = idNode ? ev.eval(idNode) : null;
  // An id that is a default (`--model` of argparse, a dataclass field): a command line may change it.
  const defaults = ev.defaultsRead.slice(before);
  const { options } = readOptions(ev, args, null, []);
  const dtypeNode = args.keywords.get('torch_dtype') ?? args.keywords.get('dtype');
  const dtypeValue = dtypeNode ? ev.eval(dtypeNode) : null;
  const parent = up(call);
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
    ...(id?.k === 'str' && defaults.length
      ? { pretrainedVia: defaults.map((d) => `${d.what} at line ${d.line}`).join(', ') }
      : {}),
    meta: isMetaDevice(file, ev, call),
    dtype: dtypeValue ? (dtypeOf(dtypeValue) ?? null) : null,
    ...(dtypeValue?.k === 'str' && dtypeValue.v === 'auto' ? { dtypeAuto: true as const } : {}),
    args: options,
    function: scope ? qualifiedName(scope) : null,
  };
}

/** A model class constructed by `call` (`Transformer(args)`, `GPT.from_config(cfg).to(dev)`), if it is one. */
export function constructionAt(
  file: SourceFile,
  ev: Evaluator,
  value: Node,
  variable: string,
): ModelFact | null {
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
export function modelAssignments(file: SourceFile, ev: Evaluator): { call: Node; variable: string }[] {
  const out: { call: Node; variable: string }[] = [];
  for (const id of file.identifiers('model')) {
    let left: Node = id;
    const p = up(id);
    if (p?.type === 'attribute' && p.childForFieldName('attribute')?.id === id.id) left = p;
    const assign = up(left);
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
    while (w && w.type !== 'with_statement' && w.type !== 'block' && w.type !== 'module') w = up(w);
    const body =
      w?.type === 'with_statement' && isMetaBlock(file, ev, w) ? w.childForFieldName('body') : null;
    if (body)
      for (const { target, value } of blockAssignments(file, body))
        out.push({ call: value, variable: target.text });
  }
  return out;
}

/** Classes repeated by `nn.ModuleList([Block(cfg) for _ in range(n)])` and the `Sequential` equivalent. */
export function repeatedBlockClasses(file: SourceFile, ev: Evaluator): string[] {
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
