/** Fine-tuning and training facts: LoRA and quantisation configs, frozen modules, dtype casts, gradient-sync toggles and gradient clipping. */
import { oneLine } from '../vocabulary/words';
import { up } from '../parsing/python';
import type { Node } from '../parsing/python';
import { type SourceFile, rangeOf } from '../parsing/source';
import { dtypeOf } from '../python/plain';
import { conditionParts, dottedText, enclosingFunction, qualifiedName } from '../python/scope';
import type { ImportTable } from '../python/imports';
import { meshOption, readArgs, readOptions } from './arguments';
import { branchPath, typeTestsOf } from './branches';
import { type Evaluator } from './evaluator';
import type { TensorParallelEntry, TensorParallelFact, TrainingFact } from './facts';
import type { Value } from '../python/values';
import { lastSegment } from './options';
import { loopsOf } from './context';
import { offPathArguments } from './otherPath';
import { decidedBy } from './decidedBy';

export function trainingFact(
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
  if (kind === 'model_input' && qualified !== 'torch.randint') return null;
  // `torch.compile(m)` compiles its first argument; `m.compile()` (nn.Module.compile) its receiver. Python's own
  // `compile(source, ...)` and other libraries' functions are neither.
  if (kind === 'compile') {
    if (qualified === 'torch.compile')
      target = (args.positional[0] ?? args.keywords.get('model'))?.text ?? null;
    else if (!obj || fn.type !== 'attribute') return null;
    if (call.parent?.type === 'decorator') return null;
  }
  const typeTests = typeTestsOf(ev, call, scope);
  const gate = runsWhen(ev, call, scope);
  const takenWith = gate?.off ? offPathArguments(file, ev, call, scope) : undefined;
  const before = ev.defaultsRead.length;
  const options = readOptions(ev, args, null, []).options;
  const defaults = ev.defaultsRead.slice(before).map((d) => `${d.what} at line ${d.line}`);
  return {
    kind,
    line: file.line(call),
    range: rangeOf(call),
    text: call.text.length > 200 ? call.text.slice(0, 200) + '…' : call.text,
    options,
    positional: args.positional.map((a) => a.text),
    target,
    qualified,
    ...(castDtype ? { dtype: castDtype } : {}),
    function: scope ? qualifiedName(scope) : null,
    branch: branchPath(call, scope),
    ...(typeTests.length ? { typeTests } : {}),
    ...(gate ? { runsWhen: takenWith ? { ...gate, runsWith: takenWith } : gate } : {}),
    ...(defaults.length ? { defaults: [...new Set(defaults)].join(', ') } : {}),
    ...(kind === 'model_input' ? inputShape(file, ev, call, args) : {}),
    ...(kind === 'tensor_parallel' ? { tensorParallel: tensorParallelOf(ev, args) } : {}),
  };
}

/** The styles of `torch.distributed.tensor.parallel` (and torchao's Float8 variants) by class name. */
const TP_STYLES: Record<string, TensorParallelEntry['style']> = {
  ColwiseParallel: 'colwise',
  Float8ColwiseParallel: 'colwise',
  RowwiseParallel: 'rowwise',
  Float8RowwiseParallel: 'rowwise',
  SequenceParallel: 'sequence',
  PrepareModuleInput: 'prepare',
  PrepareFloat8ModuleInput: 'prepare',
  PrepareModuleOutput: 'prepare',
  PrepareModuleInputOutput: 'prepare',
};

/**
 * `parallelize_module(module, device_mesh, parallelize_plan)` (torch/distributed/tensor/parallel/api.py): the
 * plan is one style for the module itself or a dict of submodule names to styles.
 */
function tensorParallelOf(ev: Evaluator, args: ReturnType<typeof readArgs>): TensorParallelFact {
  const module = args.keywords.get('module') ?? args.positional[0];
  const meshNode = args.keywords.get('device_mesh') ?? args.positional[1];
  const planNode = args.keywords.get('parallelize_plan') ?? args.positional[2];
  const mesh = meshNode ? meshOption(ev, meshNode) : null;
  const base = { module: module?.text ?? null, mesh };
  if (!planNode) return { ...base, plan: null, planWhy: 'no plan given' };
  const v = ev.eval(planNode);
  const entry = (key: string, style: Value): TensorParallelEntry | string => {
    if (style.k !== 'call') return `${key || 'the plan'} is not a style written in the file`;
    const callee = lastSegment(style.callee);
    const out = style.kwargs.output_layouts;
    const outName = out?.k === 'call' ? lastSegment(out.callee) : null;
    return {
      key,
      style: TP_STYLES[callee] ?? 'other',
      callee,
      outputs: outName === 'Replicate' ? 'replicate' : outName === 'Shard' ? 'shard' : null,
    };
  };
  const entries: (TensorParallelEntry | string)[] =
    v.k === 'dict'
      ? v.entries.map((e) => (e.key.k === 'str' ? entry(e.key.v, e.value) : 'a key not known statically'))
      : [entry('', v)];
  const why = entries.find((e): e is string => typeof e === 'string');
  if (why) return { ...base, plan: null, planWhy: `${planNode.text.slice(0, 40)}: ${why}` };
  return { ...base, plan: entries as TensorParallelEntry[] };
}

/**
 * `torch.randint(low, high, size)` or `torch.randint(high, size)`: the size when every dimension is known, and the
 * calls the result goes into (directly, or through the name it is assigned to, as the first argument or
 * `input_ids=`).
 */
function inputShape(
  file: SourceFile,
  ev: Evaluator,
  call: Node,
  args: ReturnType<typeof readArgs>,
): Pick<TrainingFact, 'shape' | 'fedTo'> {
  const sizeNode =
    args.keywords.get('size') ?? (args.positional.length >= 2 ? args.positional.at(-1) : undefined);
  const v = sizeNode ? ev.eval(sizeNode) : undefined;
  const shape =
    v?.k === 'seq' && v.items.every((i) => i.k === 'num' && Number.isInteger(i.v) && i.v > 0)
      ? v.items.map((i) => (i as { v: number }).v)
      : undefined;
  const fedTo: string[] = [];
  const calleeTaking = (value: Node): string | null => {
    let arg: Node = value;
    const kw = up(value);
    if (kw?.type === 'keyword_argument') {
      if (kw.childForFieldName('name')?.text !== 'input_ids') return null;
      arg = kw;
    }
    const list = up(arg);
    if (list?.type !== 'argument_list') return null;
    if (
      arg.type !== 'keyword_argument' &&
      list.namedChildren.find((c) => c.type !== 'comment')?.id !== arg.id
    )
      return null;
    return up(list)?.childForFieldName('function')?.text ?? null;
  };
  const direct = calleeTaking(call);
  if (direct) fedTo.push(direct);
  const assign = up(call);
  const left = assign?.type === 'assignment' ? assign.childForFieldName('left') : null;
  if (left?.type === 'identifier' && assign?.childForFieldName('right')?.id === call.id) {
    const scope = enclosingFunction(call);
    for (const id of file.identifiers(left.text, assign.endIndex, scope?.endIndex ?? file.text.length)) {
      const callee = calleeTaking(id);
      if (callee) fedTo.push(callee);
    }
  }
  return { ...(shape ? { shape } : {}), fedTo: [...new Set(fedTo)] };
}

/**
 * The `if` conditions a training fact runs under that are not known to hold: each undecided one (`if cfg.lora:`),
 * or one false as written or by a default a command line may change. Undefined when every condition holds (or
 * there is none): then the fact runs whenever its function does.
 */
function runsWhen(ev: Evaluator, call: Node, scope: Node | null): TrainingFact['runsWhen'] {
  const undecided: string[] = [];
  for (const part of conditionParts(call, scope)) {
    const d = decidedBy(ev, part.node);
    const text = oneLine(part.negated ? `not (${part.node.text})` : part.node.text, 120);
    if (d.value === undefined) undecided.push(text);
    else if (d.value === part.negated) {
      if (d.defaults.length) return { off: `${text} is false by default` };
      // A config file's value (a Hydra config, a YAML the script loads) or the given arguments: off this path.
      if (d.files().length) return { off: `${text} is false by ${d.files().join(', ')}` };
      if (d.args.length) return { off: `${text} is false by the script's arguments` };
      return { off: `${text} is always false` };
    }
  }
  return undecided.length ? { undecided } : undefined;
}

/** `model` in `model.parameters()` (or a comprehension / filter over it). */
export function parametersOwner(node: Node | undefined): string | null {
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

/** `module.to(torch.bfloat16)` / `.to(dtype=torch.float16)`: the module's parameters change dtype. */
export function castCalls(file: SourceFile, ev: Evaluator): TrainingFact[] {
  const out: TrainingFact[] = [];
  for (const word of ['bfloat16', 'float16', 'half', 'float32']) {
    for (const id of file.identifiers(word)) {
      const attr = up(id);
      if (attr?.type !== 'attribute' || attr.childForFieldName('attribute')?.id !== id.id) continue;
      const arg = up(attr)?.type === 'keyword_argument' ? up(attr) : attr;
      const call = up(arg)?.type === 'argument_list' ? up(up(arg)) : null;
      const fn = call?.type === 'call' ? call.childForFieldName('function') : null;
      if (fn?.type !== 'attribute' || fn.childForFieldName('attribute')?.text !== 'to') continue;
      const dtype = dtypeOf(ev.eval(attr));
      if (!dtype) continue;
      const scope = enclosingFunction(call!);
      // Only where its tests hold: `if cfg.pure_bf16: model.to(torch.bfloat16)` off by default casts nothing.
      const gate = runsWhen(ev, call!, scope);
      const takenWith = gate?.off ? offPathArguments(file, ev, call!, scope) : undefined;
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
        branch: branchPath(call!, scope),
        ...(gate ? { runsWhen: takenWith ? { ...gate, runsWith: takenWith } : gate } : {}),
      });
    }
  }
  return out;
}

/**
 * `outputs.loss` or `outputs["loss"]` (or `model(**batch).loss`) read: the loss is the one the model computes from `labels`, as
 * Transformers' causal LMs do (`LlamaForCausalLM.forward` → `self.loss_function`). The first read only; `self.loss`
 * (a module's own attribute), a config's or argument namespace's, and assignments to `.loss` are not reads of a
 * model's output.
 * `held`: how long a name keeps the output (its logits) when it is read in a loop of the function that calls
 * `backward()` there: through backward and the optimizer step when the loop deletes it (`del outputs`,
 * `outputs = None`) after the backward call, else until the next step's `outputs = model(...)` rebinds it.
 */
export function modelLossReads(file: SourceFile): TrainingFact[] {
  let first: TrainingFact | undefined;
  for (const { read, obj } of lossReads(file)) {
    // A module's own attribute, or a setting of a config or argument namespace, is not a model's output.
    if (/^(self|args|opts?|cfg|hparams)$|config$|args$/i.test(obj.text)) continue;
    const parent = up(read);
    if (parent?.type === 'assignment' && parent.childForFieldName('left')?.id === read.id) continue;
    const scope = enclosingFunction(read);
    const held = obj.type === 'identifier' ? heldFor(file, read, obj.text, scope) : undefined;
    const fact: TrainingFact = {
      kind: 'model_loss',
      line: file.line(read),
      range: rangeOf(read),
      text: read.text.length > 200 ? read.text.slice(0, 200) + '…' : read.text,
      options: {},
      positional: [],
      qualified: 'loss',
      target: obj.text.length > 80 ? null : obj.text,
      function: scope ? qualifiedName(scope) : null,
      branch: branchPath(read, scope),
      ...(held ? { held } : {}),
    };
    // The training loop's read, where one keeps the output; else the first (an evaluation loop's keeps nothing).
    if (held) return [fact];
    first ??= fact;
  }
  return first ? [first] : [];
}

/** `X.loss` and `X["loss"]` reads, in the order they are written: the read and the object read from. */
function lossReads(file: SourceFile): { read: Node; obj: Node }[] {
  const out: { read: Node; obj: Node }[] = [];
  for (const off of file.wordOffsets('loss')) {
    const n = file.root.descendantForIndex(off, off + 4);
    if (!n) continue;
    if (n.type === 'identifier') {
      const attr = up(n);
      const obj = attr?.type === 'attribute' ? attr.childForFieldName('object') : null;
      if (attr && obj && attr.childForFieldName('attribute')?.id === n.id) out.push({ read: attr, obj });
    } else if (n.type === 'string_content' && n.text === 'loss') {
      const str = up(n);
      const sub = str?.type === 'string' ? up(str) : null;
      const obj = sub?.type === 'subscript' ? sub.childForFieldName('value') : null;
      if (sub && obj && sub.childForFieldName('subscript')?.id === str!.id) out.push({ read: sub, obj });
    }
  }
  return out;
}

/**
 * How long `name`, read at `node` in a loop of `scope` that calls `backward()`, keeps what it holds: released
 * before the backward call (undefined), after it (`backward`), or not in the loop (`step`).
 */
function heldFor(
  file: SourceFile,
  node: Node,
  name: string,
  scope: Node | null,
): 'backward' | 'step' | undefined {
  let loop: Node | null = null;
  for (let p = up(node); p && p.id !== scope?.id; p = up(p))
    if (p.type === 'for_statement' || p.type === 'while_statement') loop = p;
  if (!loop) return undefined;
  const inLoop = (n: Node) => n.startIndex >= loop!.startIndex && n.endIndex <= loop!.endIndex;
  const backward = file.identifiers('backward').find((b) => {
    const a = up(b);
    return a?.type === 'attribute' && up(a)?.type === 'call' && inLoop(b) && b.startIndex > node.startIndex;
  });
  if (!backward) return undefined;
  // `del outputs` (alone or in a list) or `outputs = None` in the loop, after the read.
  const release = file.identifiers(name).find((n) => {
    if (!inLoop(n) || n.startIndex < node.startIndex) return false;
    const p = up(n);
    if (p?.type === 'delete_statement' || up(p)?.type === 'delete_statement') return true;
    return (
      p?.type === 'assignment' &&
      p.childForFieldName('left')?.id === n.id &&
      p.childForFieldName('right')?.type === 'none'
    );
  });
  if (!release) return 'step';
  return release.startIndex < backward.startIndex ? undefined : 'backward';
}

/** `p.requires_grad = False` in a loop over `X.parameters()`: X is frozen, under the conditions it runs in. */
export function frozenAssignments(file: SourceFile, ev: Evaluator): TrainingFact[] {
  const out: TrainingFact[] = [];
  for (const id of file.identifiers('requires_grad')) {
    const attr = up(id);
    const assign = up(attr);
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
      branch: branchPath(assign, scope),
      ...gateOf(runsWhen(ev, assign, scope)),
    });
  }
  return out;
}

/** A fact's gate, as an optional field. */
function gateOf(gate: TrainingFact['runsWhen']): { runsWhen?: NonNullable<TrainingFact['runsWhen']> } {
  return gate ? { runsWhen: gate } : {};
}

/**
 * Functions decorated with `@torch.compile` (or `@torch.compile(mode=...)`): compiled where they are called, the
 * function's name as the target (a loss function is told from the model by its name where the plan is resolved).
 */
export function compileDecorators(file: SourceFile, imports: ImportTable): TrainingFact[] {
  const out: TrainingFact[] = [];
  for (const off of file.wordOffsets('compile')) {
    const n = file.root.descendantForIndex(off, off + 7);
    let deco: Node | null = n;
    for (let i = 0; deco && deco.type !== 'decorator' && i < 4; i++) deco = up(deco);
    if (deco?.type !== 'decorator') continue;
    const expr = deco.namedChildren[0];
    const callee = expr?.type === 'call' ? expr.childForFieldName('function') : expr;
    if (!callee || imports.qualify(dottedText(callee)).qualified !== 'torch.compile') continue;
    const def = up(deco)?.childForFieldName('definition');
    const name = def?.type === 'function_definition' ? def.childForFieldName('name')?.text : undefined;
    if (!name) continue;
    const mode = expr?.type === 'call' ? keywordString(expr, 'mode') : undefined;
    const scope = enclosingFunction(deco);
    out.push({
      kind: 'compile',
      line: file.line(deco),
      range: rangeOf(deco),
      text: oneLine(deco.text, 200),
      options: mode ? { mode: { value: mode, text: JSON.stringify(mode), range: rangeOf(deco) } } : {},
      positional: [],
      qualified: 'torch.compile',
      target: name,
      function: scope ? qualifiedName(scope) : null,
      branch: branchPath(deco, scope),
    });
  }
  return out;
}

/** The value of a call's `name="..."` keyword written as a plain string literal. */
function keywordString(call: Node, name: string): string | undefined {
  for (const a of call.childForFieldName('arguments')?.namedChildren ?? []) {
    if (a.type !== 'keyword_argument' || a.childForFieldName('name')?.text !== name) continue;
    const v = a.childForFieldName('value');
    const m = v?.type === 'string' ? /^(['"])([\w-]*)\1$/.exec(v.text) : null;
    return m?.[2];
  }
  return undefined;
}

/**
 * bitsandbytes' `Linear4bit` handed to a function that swaps the model's linear layers for it (Answer.AI's
 * `replace_linear(model.model, Linear4bit, quant_type="nf4", ...)`): a 4-bit base, as `BitsAndBytesConfig(
 * load_in_4bit=True)` makes one. `Linear4bit`'s `compress_statistics` (double quantisation) defaults to True
 * (bitsandbytes/nn/modules.py), unlike `BitsAndBytesConfig`'s `bnb_4bit_use_double_quant`; a keyword of the call
 * passed on to it says otherwise.
 */
export function linearReplacements(file: SourceFile, ev: Evaluator): TrainingFact[] {
  const out: TrainingFact[] = [];
  for (const id of file.identifiers('Linear4bit')) {
    const arg = up(id)?.type === 'attribute' ? up(id)! : id;
    const list = up(arg);
    const call = list?.type === 'argument_list' ? up(list) : null;
    if (call?.type !== 'call' || ev.calleeName(arg) !== 'bitsandbytes.nn.Linear4bit') continue;
    // A type test (`issubclass(cls, Linear4bit)`) names the class without making one.
    if (/^(isinstance|issubclass|type)$/.test(call.childForFieldName('function')?.text ?? '')) continue;
    const scope = enclosingFunction(call);
    const args = readArgs(file, call);
    const compress = args.keywords.get('compress_statistics');
    const double = compress ? truthyOf(ev.eval(compress)) : true;
    out.push({
      kind: 'quantization',
      line: file.line(call),
      range: rangeOf(call),
      text: oneLine(call.text, 120),
      options: {
        load_in_4bit: { text: 'Linear4bit', value: true, range: rangeOf(arg) },
        ...(double !== undefined
          ? {
              bnb_4bit_use_double_quant: {
                text: compress?.text ?? 'compress_statistics=True (Linear4bit default)',
                value: double,
                range: rangeOf(compress ?? arg),
              },
            }
          : {}),
      },
      positional: [],
      qualified: 'bitsandbytes.nn.Linear4bit',
      target: null,
      function: scope ? qualifiedName(scope) : null,
      branch: branchPath(call, scope),
      ...gateOf(runsWhen(ev, call, scope)),
    });
  }
  return out;
}

function truthyOf(v: Value): boolean | undefined {
  return v.k === 'bool' ? v.v : undefined;
}
