/**
 * The scan of one Python file: every call it cares about is found by searching the text for the few names that
 * matter (and the local aliases of them), classified by what it resolves to through the imports, and read into
 * facts with source ranges. Never throws on odd input: what it cannot read is reported.
 */
import { sibling, up } from '../parsing/python';
import type { Node, PythonGrammar } from '../parsing/python';
import { rangeOf, type SourceFile } from '../parsing/source';
import { clip } from '../vocabulary/words';
import { tokens } from '../parsing/commandLine';
import { type ImportTable, readImports } from '../python/imports';
import { dottedText, findBinding } from '../python/scope';
import { SEARCH_WORDS, UNBOUND_FALLBACKS, classifyApi } from './apis';
import { callOf } from './arguments';
import { readAnnotations, readNoqa } from './comments';
import { Evaluator, type ScriptContext } from './evaluator';
import { type FileFacts, type ModelFact, type TrainingFact, type WrapCall, emptyFacts } from './facts';
import { methodWraps } from './methodWraps';
import { FRAMEWORK_WORDS, frameworkCallFact, frameworkKind } from './frameworkCalls';
import { fsdp1Calls } from './fsdp1Calls';
import { importFacts } from './importFacts';
import { constructionAt, modelAssignments, modelFact, repeatedBlockClasses } from './models';
import { lastSegment } from './options';
import { checkpointFact, meshFact, mixedPrecisionFact, optimizerFact } from './setupCalls';
import {
  castCalls,
  compileDecorators,
  frozenAssignments,
  linearReplacements,
  modelLossReads,
  trainingFact,
} from './training';
import { functionFacts, incompleteWrapCall, linkRoots, wrapCall } from './wrapCalls';

/** Classes whose `from_pretrained` loads something beside the model: tokenizers, processors, configs. */
const NOT_A_MODEL = /(Tokenizer(Fast)?|Processor|FeatureExtractor|Config)\.from_(pretrained|config)$/;

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
  set_modules_to_forward_prefetch: 'forward_prefetch',
  set_reshard_after_backward: 'set_reshard_after_backward',
  clip_grad_norm_: 'clip_grad_norm',
  // How a checkpoint is gathered: DCP's `StateDictOptions` (FSDP2) and FSDP1's `FullStateDictConfig`.
  StateDictOptions: 'state_dict_options',
  FullStateDictConfig: 'state_dict_options',
  // The batch each process loads: the micro-batch per GPU.
  // Token ids a script makes up for the model: their shape is the micro-batch and the sequence.
  randint: 'model_input',
  DataLoader: 'data_loader',
  StatefulDataLoader: 'data_loader',
  bfloat16: 'cast',
  half: 'cast',
  gradient_checkpointing_enable: 'checkpointing',
  // Tensor parallelism applied to the model (torch.distributed.tensor.parallel.parallelize_module).
  parallelize_module: 'tensor_parallel',
  // `torch.compile(model)`, `block.compile()`: what is compiled is decided where the model's names are known.
  compile: 'compile',
  // torchtune's optimizer in backward: a post-accumulate-grad hook steps each parameter as FSDP2 makes its shard.
  register_optim_in_bwd_hooks: 'optimizer_in_backward',
  // Saved activations packed to the CPU: PyTorch's saved-tensor hooks and torchtune's context manager.
  save_on_cpu: 'activation_offload',
  OffloadActivations: 'activation_offload',
};

/** Scans one parsed file for everything later stages need. Never throws on odd input: problems are reported. */
export interface ScanOptions {
  /** The script's own command line (`--batch-size 8`): its argparse options read from it instead of defaults. */
  argv?: readonly string[];
  /** Reads a configuration file the code loads by a path it writes; without it, none is read. */
  readData?: (file: string) => unknown;
  /** Reads a class or function the file imports from the project (a config dataclass); without it, none is. */
  readDefinition?: ScriptContext['readDefinition'];
  /** Where that command line is written, when it is not the user's own (a launch file's). */
  argvFrom?: string;
  /** The command line a launch file of the project gives, below a `# fsdp: args=...` comment of the script. */
  launchArgv?: { argv: readonly string[]; from: string };
}

export function scanFile(grammar: PythonGrammar, file: SourceFile, options: ScanOptions = {}): FileFacts {
  const imports = readImports(grammar, file);
  const annotations = readAnnotations(file);
  // The script's arguments: those given (after `--`), else a `# fsdp: args="--strategy fsdp"` comment, else a
  // launch file's.
  const written = options.argv ? undefined : annotations.find((a) => a.values.args !== undefined);
  if (written)
    options = {
      ...options,
      argv: tokens(written.values.args!).map((t) => t.replace(/^(["'])(.*)\1$/s, '$2')),
      argvFrom: `the # fsdp: args comment at line ${written.line}`,
    };
  else if (!options.argv && options.launchArgv)
    options = { ...options, argv: options.launchArgv.argv, argvFrom: options.launchArgv.from };
  const ev = new Evaluator(file, imports, undefined, {
    ...(options.argv ? { argv: options.argv } : {}),
    ...(options.readData ? { readData: options.readData } : {}),
    ...(options.readDefinition ? { readDefinition: options.readDefinition } : {}),
  });
  const facts: FileFacts = {
    ...emptyFacts(file.path),
    annotations,
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
      ...(err ? { syntax: { range: rangeOf(err), found: syntaxFound(err) } } : {}),
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
      } else if (!call && up(id)?.type === 'ERROR' && sibling(id, 1)?.type === '(') partial.push(id);
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
      // `AutoTokenizer.from_pretrained(...)`, a processor or a config: loaded beside the model, never the model.
      if (NOT_A_MODEL.test(qualified)) continue;
      const m = modelFact(file, ev, call, qualified, fn);
      facts.models.push(m);
      if (m.variable) modelVars.add(m.variable);
    } else {
      // `re.compile(...)` and other imported modules' `compile`: not a module's.
      if (kind === 'compile' && qualified !== 'torch.compile' && imports.qualify(dottedText(fn)).bound)
        continue;
      const t = trainingFact(file, ev, call, kind, fn, qualified);
      if (t) facts.training.push(t);
    }
  }
  facts.training.push(
    ...frozenAssignments(file, ev),
    ...linearReplacements(file, ev),
    ...castCalls(file, ev),
    ...modelLossReads(file),
    ...compileDecorators(file, imports),
  );

  const byPosition = (a: WrapCall, b: WrapCall) =>
    a.range.start.line - b.range.start.line || a.range.start.character - b.range.start.character;
  facts.calls.sort(byPosition);
  // Calls of the file's own wrapping methods (`block.apply_fsdp(mesh)` wrapping `self`) wrap their receivers.
  const viaMethods = methodWraps(file, facts.calls);
  facts.calls.push(...viaMethods.calls);
  facts.calls.sort(byPosition);
  facts.methodNotes = viaMethods.notes;
  linkRoots(file, facts.calls);
  facts.functions = functionFacts(file, facts.calls);
  // FSDP1's runtime calls around the wraps (no_sync, clip_grad_norm_, state dicts): what a migration rewrites.
  const fsdp1 = fsdp1Calls(
    file,
    ev,
    imports,
    facts.calls,
    (n) => classify(file, imports, ev.calleeName(n), n)?.kind === 'FSDP',
  );
  if (fsdp1.length) facts.fsdp1Calls = fsdp1;
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
  const jobs = jobConfigCalls(file);
  if (jobs.length) facts.jobConfigs = jobs;
  const reads = inputReads(file, ev);
  if (reads.length) facts.inputReads = reads;
  if (ev.filesRead.length) facts.configsRead = [...new Set(ev.filesRead)];
  if (options.argv) {
    facts.argv = options.argv;
    if (options.argvFrom) facts.argvFrom = options.argvFrom;
    facts.argsRead = [...new Set(ev.argsRead)];
  }
  return facts;
}

/** Config fields that name a batch size or a sequence length per process. */
const INPUT_FIELDS: Record<string, 'batch' | 'seq'> = {
  batch_size: 'batch',
  micro_batch_size: 'batch',
  per_device_train_batch_size: 'batch',
  seq_len: 'seq',
  seq_length: 'seq',
  max_seq_len: 'seq',
  max_seq_length: 'seq',
  context_length: 'seq',
};

/**
 * Where the file reads field `field` of a config: `cfg.data.batch_size`, or `args["batch_size"]` (a dict of the
 * command line's options, as fastcore scripts pass them on).
 */
function fieldReads(file: SourceFile, field: string): Node[] {
  const out: Node[] = [];
  for (const off of file.wordOffsets(field)) {
    const n = file.root.descendantForIndex(off, off + field.length);
    if (!n) continue;
    if (n.type === 'identifier') {
      const attr = up(n);
      if (attr?.type === 'attribute' && attr.childForFieldName('attribute')?.id === n.id) out.push(attr);
    } else if (n.type === 'string_content' && n.text === field) {
      const str = up(n);
      const sub = str && up(str);
      if (sub?.type === 'subscript' && sub.childForFieldName('subscript')?.id === str!.id) out.push(sub);
    }
    if (out.length >= 8) break;
  }
  return out;
}

/** `cfg.data.batch_size` and the like the file reads, where their value is known (at most 8 of each name). */
function inputReads(file: SourceFile, ev: Evaluator): NonNullable<FileFacts['inputReads']> {
  const out: NonNullable<FileFacts['inputReads']> = [];
  for (const [field, kind] of Object.entries(INPUT_FIELDS)) {
    for (const attr of fieldReads(file, field)) {
      // Read, not set: `cfg.batch_size = 4` is no value the config gives.
      const p = up(attr);
      if (
        (p?.type === 'assignment' || p?.type === 'augmented_assignment') &&
        p.childForFieldName('left')?.id === attr.id
      )
        continue;
      if (out.some((o) => o.text === attr.text)) continue;
      const v = ev.eval(attr);
      if (v.k === 'num' && v.int && v.v > 0)
        out.push({ kind, text: attr.text, value: v.v, line: file.line(attr) });
    }
  }
  return out;
}

/** Class names of job configuration objects that set the parallelism (torchtitan's, OLMo-core's and the like). */
const JOB_CONFIG = /\b(\w*(?:DataParallel|Parallelism|Parallel)\w*Config)\s*\(/g;

/** Calls of job configuration classes that set the parallelism, at most a few, in order. */
function jobConfigCalls(file: SourceFile): { callee: string; line: number }[] {
  const names = new Set<string>();
  for (const m of file.text.matchAll(JOB_CONFIG)) if (names.size < 8) names.add(m[1]!);
  const out: { callee: string; line: number }[] = [];
  for (const name of names)
    for (const id of file.identifiers(name)) {
      const call = callOf(id);
      if (call && out.length < 8)
        out.push({ callee: call.childForFieldName('function')!.text, line: file.line(call) });
    }
  return out.sort((a, b) => a.line - b.line);
}

/** `alias` in `alias = name` or `alias = module.name`, where `id` is that `name`. */
function aliasOf(id: Node): string | null {
  let value: Node = id;
  const p = up(id);
  if (p?.type === 'attribute' && p.childForFieldName('attribute')?.id === id.id) value = p;
  const assign = up(value);
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

/** What the parser found where it failed: `missing ")"`, or `unexpected "print x"` (its first line, clipped). */
function syntaxFound(err: Node): string {
  if (err.isMissing) return `missing "${err.type}"`;
  const text = err.text.split(/\r?\n/)[0]!.trim();
  return text ? `unexpected "${clip(text, 40)}"` : 'unexpected input';
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
