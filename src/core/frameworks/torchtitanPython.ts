/**
 * torchtitan's job configs in Python (`config_registry.py`, since February 2026): a registry function's
 * `Trainer.Config(...)`, with torchtitan's own command-line overrides, read as the data of a job TOML so that one
 * reader (torchtitan.ts) holds torchtitan's semantics.
 */
import * as path from 'node:path';
import type { Node } from '../parsing/python';
import type { SourceFile } from '../parsing/source';
import { rangeOf } from '../parsing/source';
import type { Evaluator } from '../analysis/evaluator';
import { toPlain } from '../python/plain';
import type { Value } from '../python/values';
import type { ConfigDoc } from './configDoc';

/** The most registry functions one derives from (`config = llama3_debugmodel()` then changes). */
const MAX_BASES = 4;

/** A registry function: a module-level `def NAME() -> Trainer.Config` that returns a job config. */
export interface RegistryFunction {
  name: string;
  node: Node;
  line: number;
}

/** The job configs a `config_registry.py` defines: functions annotated or returning `Trainer.Config`. */
export function registryFunctions(file: SourceFile): RegistryFunction[] {
  const out: RegistryFunction[] = [];
  for (const st of file.root.namedChildren) {
    const def = st.type === 'decorated_definition' ? st.childForFieldName('definition') : st;
    if (def?.type !== 'function_definition') continue;
    const name = def.childForFieldName('name')?.text;
    const ret = def.childForFieldName('return_type')?.text ?? '';
    if (!name || name.startsWith('_')) continue;
    if (!/\bTrainer\.Config\b/.test(ret) && !/return\s+Trainer\.Config\s*\(/.test(def.text)) continue;
    out.push({ name, node: def, line: file.line(def) });
  }
  return out;
}

/** What a registry function sets, by the key of torchtitan's config (`training.max_context_length`). */
interface Settings {
  values: Map<string, unknown>;
  /** Where each was set, for the assumptions. */
  nodes: Map<string, Node>;
  /** What could not be read. */
  notes: string[];
}

/** The sections of Trainer.Config read here, by their keyword. */
const SECTIONS = ['training', 'parallelism', 'compile'] as const;

/**
 * The settings of registry function `fn` as Trainer.Config builds them: its `Trainer.Config(...)` keywords, or
 * another registry function's config changed by `config.a.b = v` statements.
 */
function settingsOf(ev: Evaluator, file: SourceFile, fn: Node, depth = 0): Settings {
  const s: Settings = { values: new Map(), nodes: new Map(), notes: [] };
  const body = fn.childForFieldName('body')?.namedChildren ?? [];
  const ret = [...body]
    .reverse()
    .find((n) => n.type === 'return_statement')
    ?.namedChild(0);
  if (!ret) {
    s.notes.push(`${fn.childForFieldName('name')?.text}() returns no config the analysis reads`);
    return s;
  }
  if (ret.type === 'call' && /(^|\.)Trainer\.Config$/.test(ret.childForFieldName('function')?.text ?? '')) {
    readTrainerConfig(ev, ret, s);
    return s;
  }
  // `config = llama3_debugmodel()`, then `config.x.y = v`, then `return config`.
  const base = ret.type === 'identifier' ? assignedCall(body, ret.text) : undefined;
  const baseName = base?.childForFieldName('function')?.text;
  const baseFn = baseName && depth < MAX_BASES ? topLevelFunction(file, baseName) : undefined;
  if (!base || !baseFn) {
    s.notes.push(
      `${fn.childForFieldName('name')?.text}() builds its config in a way the analysis does not read`,
    );
    return s;
  }
  const inherited = settingsOf(ev, file, baseFn, depth + 1);
  for (const st of body) {
    const a = st.type === 'expression_statement' ? st.namedChild(0) : null;
    const left = a?.type === 'assignment' ? a.childForFieldName('left') : null;
    const right = a?.childForFieldName('right');
    if (!left || !right || left.type !== 'attribute') continue;
    const dotted = left.text.split('.');
    if (dotted[0] !== ret.text) continue;
    const key = dotted.slice(1).join('.');
    if (key === 'model_spec') readModelSpec(ev, right, inherited);
    else if (key === 'activation_checkpoint') readCheckpointing(ev, right, inherited);
    else if (key === 'loss') readLoss(ev, right, inherited);
    else if (dotted.length === 3 && (SECTIONS as readonly string[]).includes(dotted[1]!)) {
      inherited.values.set(key, plain(ev.eval(right)));
      inherited.nodes.set(key, a!);
    } else if (dotted.length === 2 && (SECTIONS as readonly string[]).includes(key)) {
      // `config.compile = CompileConfig(enable=True, ...)`: a new section, the base's values of it replaced.
      const v = ev.eval(right);
      for (const k of [...inherited.values.keys()])
        if (k.startsWith(`${key}.`)) {
          inherited.values.delete(k);
          inherited.nodes.delete(k);
        }
      if (v.k !== 'call') {
        inherited.notes.push(
          `${left.text} = ${right.text.slice(0, 60)} is not read statically: torchtitan's defaults used`,
        );
        continue;
      }
      for (const [k, x] of Object.entries(v.kwargs)) {
        inherited.values.set(`${key}.${k}`, plain(x));
        inherited.nodes.set(`${key}.${k}`, a!);
      }
    }
  }
  return inherited;
}

/** The keywords of `Trainer.Config(...)` that decide memory. */
function readTrainerConfig(ev: Evaluator, call: Node, s: Settings): void {
  for (const kw of call.childForFieldName('arguments')?.namedChildren ?? []) {
    if (kw.type !== 'keyword_argument') continue;
    const name = kw.childForFieldName('name')?.text ?? '';
    const value = kw.childForFieldName('value');
    if (!value) continue;
    if (name === 'model_spec') readModelSpec(ev, value, s);
    else if (name === 'activation_checkpoint') readCheckpointing(ev, value, s);
    else if (name === 'loss') readLoss(ev, value, s);
    else if ((SECTIONS as readonly string[]).includes(name)) {
      const v = ev.eval(value);
      if (v.k !== 'call') {
        s.notes.push(`${name}=${value.text.slice(0, 60)} is not read statically: torchtitan's defaults used`);
        continue;
      }
      for (const [k, x] of Object.entries(v.kwargs)) {
        s.values.set(`${name}.${k}`, plain(x));
        s.nodes.set(`${name}.${k}`, kw);
      }
    }
  }
}

/**
 * `model_registry(..., converters=[...])` as the TOML's `model.converters` and `[quantize.linear.float8]`:
 * `Float8LinearConverter.Config(recipe_name=..., filter_fqns=...)` is Float8 training with a recipe (rowwise by
 * default, torchtitan/components/quantization/float8.py), which gathers in the parameter dtype; other converters
 * (MX, NVFP4, grouped matmuls) are named, not modelled.
 */
function readConverters(list: Value, node: Node, s: Settings): void {
  const line = node.startPosition.row + 1;
  if (list.k !== 'seq') {
    s.notes.push(
      `model_registry(..., converters=...) at line ${line} is not read statically: the figures are those of unconverted layers`,
    );
    return;
  }
  const names: string[] = [];
  for (const c of list.items) {
    const callee = c.k === 'call' ? c.callee : '';
    if (c.k === 'call' && /(^|\.)Float8LinearConverter\.Config$/.test(callee)) {
      names.push('quantize.linear.float8');
      const recipe = c.kwargs.recipe_name;
      s.values.set('quantize.linear.float8.recipe_name', recipe?.k === 'str' ? recipe.v : 'rowwise');
      // The head is `lm_head` in torchtitan's 2026 decoder (models/common/decoder.py), `output` in the tree the
      // estimate builds (torchtitan's earlier name).
      const skip = c.kwargs.filter_fqns ? plain(c.kwargs.filter_fqns) : undefined;
      if (Array.isArray(skip))
        s.values.set(
          'quantize.linear.float8.filter_fqns',
          skip.map((f) => (f === 'lm_head' ? 'output' : f)),
        );
      for (const key of ['recipe_name', 'filter_fqns']) s.nodes.set(`quantize.linear.float8.${key}`, node);
    } else names.push(callee.replace(/\.Config$/, '') || 'a converter not read statically');
  }
  s.values.set('model.converters', names);
  s.nodes.set('model.converters', node);
}

/** `model_spec=model_registry("8B", ...)` (or a name bound to it): the flavor. */
function readModelSpec(ev: Evaluator, node: Node, s: Settings): void {
  const v = ev.eval(node);
  const flavor = v.k === 'call' && /(^|\.)model_registry$/.test(v.callee) ? v.args[0] : undefined;
  if (flavor?.k === 'str') {
    s.values.set('model.flavor', flavor.v);
    s.nodes.set('model.flavor', node);
    const converters = v.k === 'call' ? v.kwargs.converters : undefined;
    if (converters) readConverters(converters, node, s);
    // Multi-token prediction layers (DeepSeek-V3's `num_mtp_layers`) and the MoE all-to-all backend.
    for (const [kw, key] of [
      ['num_mtp_layers', 'model.mtp_layers'],
      ['moe_comm_backend', 'parallelism.expert_parallel_comm_backend'],
    ] as const) {
      const x = v.k === 'call' ? v.kwargs[kw] : undefined;
      s.values.delete(key);
      if (x) {
        s.values.set(key, plain(x));
        s.nodes.set(key, node);
      }
    }
  } else {
    s.values.delete('model.flavor');
    s.notes.push(`the model spec \`${node.text.slice(0, 60)}\` is not read statically`);
  }
}

/** `activation_checkpoint=FullAC.Config()`, `SelectiveAC.Config()` or `None`. */
function readCheckpointing(ev: Evaluator, node: Node, s: Settings): void {
  const v = ev.eval(node);
  const callee = v.k === 'call' ? v.callee : '';
  const mode =
    v.k === 'none'
      ? 'none'
      : /(^|\.)FullAC\.Config$/.test(callee)
        ? 'full'
        : /(^|\.)SelectiveAC\.Config$/.test(callee)
          ? 'selective'
          : undefined;
  if (mode) {
    s.values.set('activation_checkpoint.mode', mode);
    s.nodes.set('activation_checkpoint.mode', node);
  } else
    s.notes.push(
      `activation_checkpoint=${node.text.slice(0, 60)} is not a policy the analysis models: estimated with torchtitan's default, selective`,
    );
}

/**
 * `loss=ChunkedLossWrapper.Config(...)` (torchtitan/components/loss.py, the registry's default since June 2026):
 * the head and the loss run chunk by chunk, each chunk's backward at once. Another loss (`CrossEntropyLoss`,
 * `MTPLoss`) leaves the plain cross-entropy of the whole logits.
 */
function readLoss(ev: Evaluator, node: Node, s: Settings): void {
  const v = ev.eval(node);
  s.values.delete('loss.chunks');
  if (v.k !== 'call' || !/(^|\.)ChunkedLossWrapper\.Config$/.test(v.callee)) return;
  const chunks = v.kwargs.num_chunks;
  s.values.set('loss.chunks', chunks ? plain(chunks) : 8);
  s.nodes.set('loss.chunks', node);
}

function plain(v: Value): unknown {
  return toPlain(v);
}

function assignedCall(body: Node[], name: string): Node | undefined {
  for (const st of body) {
    const a = st.type === 'expression_statement' ? st.namedChild(0) : null;
    if (a?.type === 'assignment' && a.childForFieldName('left')?.text === name) {
      const r = a.childForFieldName('right');
      return r?.type === 'call' ? r : undefined;
    }
  }
  return undefined;
}

function topLevelFunction(file: SourceFile, name: string): Node | undefined {
  for (const st of file.root.namedChildren) {
    const def = st.type === 'decorated_definition' ? st.childForFieldName('definition') : st;
    if (def?.type === 'function_definition' && def.childForFieldName('name')?.text === name) return def;
  }
  return undefined;
}

/**
 * torchtitan's command-line overrides of a config (`--training.max_context_length 4096`,
 * `--parallelism.tensor-parallel-degree=2`, tyro's `section.key` flags): the keys of the sections read here, and
 * the arguments read.
 */
function applyOverrides(argv: readonly string[], s: Settings, used: string[]): void {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const m = /^--([a-z_-]+)\.([a-z_-]+)(?:=(.*))?$/.exec(a);
    if (!m) continue;
    const section = m[1]!.replace(/-/g, '_');
    const key = m[2]!.replace(/-/g, '_');
    if (!(SECTIONS as readonly string[]).includes(section)) continue;
    const raw = m[3] ?? argv[i + 1];
    if (raw === undefined) continue;
    if (m[3] === undefined) i++;
    const v = /^-?\d+$/.test(raw)
      ? Number(raw)
      : /^(true|false)$/i.test(raw)
        ? raw.toLowerCase() === 'true'
        : raw;
    s.values.set(`${section}.${key}`, v);
    used.push(m[3] === undefined ? `${a} ${raw}` : a);
  }
}

/** A registry function's job as the data of a job TOML (v0.2 keys), for torchtitanPlan. */
export interface TitanJob {
  doc: ConfigDoc;
  notes: string[];
  /** The overrides taken from the command line. */
  used: string[];
}

/**
 * Whether flavor `flavor` computes q, k and v in one matmul, from the model package's `__init__.py` beside the
 * registry: its builders take `fuse_qkv: bool = True` and its flavors pass `fuse_qkv=True` since June 2026
 * (torchtitan/models/common/config_utils.py `make_gqa_config` builds `FusedQKVLinear` then); the
 * `*_non_fused_qkv` flavors pass False, and a package that never names `fuse_qkv` predates it.
 */
export function fusesQkv(packageInit: string, flavor: string): boolean {
  if (/non_fused/.test(flavor)) return false;
  return /\bfuse_qkv\s*(?::\s*bool\s*)?=\s*True\b/.test(packageInit);
}

/**
 * The job of registry function `fn` of `file` (a model folder's `config_registry.py`: its folder names the model),
 * with torchtitan's command-line overrides `argv`, as a config document torchtitanPlan reads. The micro-batch is
 * `num_tokens_per_microbatch_per_dp_rank / max_context_length` sequences (torchtitan packs sequences to the
 * context length).
 */
export function titanJob(
  ev: Evaluator,
  file: SourceFile,
  fn: RegistryFunction,
  argv: readonly string[],
  packageInit?: string,
): TitanJob {
  const s = settingsOf(ev, file, fn.node);
  const used: string[] = [];
  applyOverrides(argv, s, used);
  const get = (k: string) => s.values.get(k);
  const training: Record<string, unknown> = {};
  const parallelism: Record<string, unknown> = {};
  const compile: Record<string, unknown> = {};
  for (const [k, v] of s.values) {
    const [section, key] = k.split('.') as [string, string];
    if (section === 'parallelism') parallelism[key] = v;
    if (section === 'compile') compile[key] = v;
  }
  // TrainingConfig's defaults (torchtitan/config/configs.py): 16384 tokens per micro-batch, a 2048 context.
  const context = get('training.max_context_length') ?? 2048;
  const tokens = get('training.num_tokens_per_microbatch_per_dp_rank') ?? 16384;
  const keyNodes = new Map<string, Node>();
  const setFrom = (toml: string, from: string[]) => {
    const n = from.map((f) => s.nodes.get(f)).find(Boolean);
    if (n) keyNodes.set(toml, n);
  };
  training.seq_len = context;
  setFrom('training.seq_len', ['training.max_context_length']);
  if (typeof context === 'number' && typeof tokens === 'number' && context > 0 && tokens % context === 0)
    training.local_batch_size = tokens / context;
  else
    s.notes.push(
      `training.num_tokens_per_microbatch_per_dp_rank (${String(tokens)}) is not a whole number of max_context_length (${String(context)}) sequences: the micro-batch is not taken from it`,
    );
  setFrom('training.local_batch_size', [
    'training.num_tokens_per_microbatch_per_dp_rank',
    'training.max_context_length',
  ]);
  const step = get('training.num_tokens_per_train_step');
  if (typeof step === 'number' && step > 0 && typeof context === 'number' && step % context === 0) {
    training.global_batch_size = step / context;
    setFrom('training.global_batch_size', ['training.num_tokens_per_train_step']);
  }
  for (const k of ['dtype', 'mixed_precision_param', 'mixed_precision_reduce', 'enable_cpu_offload']) {
    const v = get(`training.${k}`);
    if (v !== undefined) {
      training[k] = v;
      setFrom(`training.${k}`, [`training.${k}`]);
    }
  }
  for (const k of Object.keys(parallelism)) setFrom(`parallelism.${k}`, [`parallelism.${k}`]);
  for (const k of Object.keys(compile)) setFrom(`compile.${k}`, [`compile.${k}`]);
  const model: Record<string, unknown> = { name: path.basename(path.dirname(file.path)) };
  const flavor = get('model.flavor');
  if (flavor !== undefined) model.flavor = flavor;
  setFrom('model.flavor', ['model.flavor']);
  if (packageInit !== undefined && typeof flavor === 'string') model.fuse_qkv = fusesQkv(packageInit, flavor);
  setFrom('model', ['model.flavor']);
  const chunks = get('loss.chunks');
  const loss: Record<string, unknown> = chunks !== undefined ? { chunks } : {};
  setFrom('loss.chunks', ['loss.chunks']);
  const mtp = get('model.mtp_layers');
  if (mtp !== undefined) model.mtp_layers = mtp;
  setFrom('model.mtp_layers', ['model.mtp_layers']);
  setFrom('parallelism.expert_parallel_comm_backend', ['parallelism.expert_parallel_comm_backend']);
  const converters = get('model.converters');
  if (converters !== undefined) model.converters = converters;
  setFrom('model.converters', ['model.converters']);
  const float8: Record<string, unknown> = {};
  for (const key of ['recipe_name', 'filter_fqns']) {
    const v = get(`quantize.linear.float8.${key}`);
    if (v === undefined) continue;
    float8[key] = v;
    setFrom(`quantize.linear.float8.${key}`, [`quantize.linear.float8.${key}`]);
  }
  const data: Record<string, unknown> = {
    model,
    training,
    parallelism,
    // Trainer.Config's default policy is SelectiveAC (torchtitan/trainer.py).
    // SelectiveAC is per-op (its save list), not every N blocks.
    activation_checkpoint: {
      mode: get('activation_checkpoint.mode') ?? 'selective',
      selective_ac_option: 'op',
    },
    ...(Object.keys(compile).length ? { compile } : {}),
    ...(Object.keys(loss).length ? { loss } : {}),
    ...(Object.keys(float8).length ? { quantize: { linear: { float8 } } } : {}),
  };
  setFrom('activation_checkpoint.mode', ['activation_checkpoint.mode']);
  const name = path.basename(file.path);
  const nodeOf = (p: string[]) => keyNodes.get(p.join('.'));
  const doc: ConfigDoc = {
    file: file.path,
    format: 'toml',
    text: file.text,
    data,
    line: (p) => {
      const n = nodeOf(p);
      return n ? n.startPosition.row : undefined;
    },
    rangeOf: (p) => rangeOf(nodeOf(p) ?? fn.node.childForFieldName('name') ?? fn.node),
    where: (p) => {
      const n = nodeOf(p);
      return n ? `${name}:${n.startPosition.row + 1}` : `torchtitan's default (${fn.name}() does not set it)`;
    },
  };
  if (flavor === undefined) s.notes.push(`${fn.name}() does not say which model flavor it trains`);
  return { doc, notes: s.notes, used };
}
