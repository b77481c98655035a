/** torchtitan's job TOML: model flavor, batch and sequence, mixed precision, parallelism degrees, checkpointing. */
import { DEFAULTS } from './defaults';
import type { DType } from '../vocabulary/dtypes';
import { count as counted } from '../vocabulary/words';
import { TITAN_LOSS_CHUNKS } from '../inputs/parse';
import { parseInput, type SetupValues } from '../inputs/table';
import { at, bool, countSetting, isRecord, setupFrom, str, strList, type ConfigDoc } from './configDoc';
import { deepseekNative, TITAN_DEEPSEEK_V3 } from './deepseekNative';
import { llamaNative, TITAN_QWEN3, titanDims } from './llamaNative';
import type { FrameworkPlan, FrameworkProblem } from './types';

const DTYPES: Record<string, DType> = { float32: 'float32', bfloat16: 'bfloat16', float16: 'float16' };

/** A torchtitan job config: `[model]` with a flavor, and `[training]` or `[parallelism]` settings. */
export function isTorchtitan(doc: ConfigDoc): boolean {
  const d = doc.data;
  return (
    doc.format === 'toml' &&
    isRecord(d.model) &&
    (typeof d.model.flavor === 'string' || typeof d.model.name === 'string') &&
    (isRecord(d.training) || isRecord(d.parallelism))
  );
}

/**
 * A torchtitan job config (TOML, v0.1 and v0.2) as an FSDP plan. torchtitan's `apply_fsdp` makes one unit of the
 * token embeddings, one of each block, one of `[norm, output]` together and the root (v0.2); before its
 * "reshard_after_forward logic" change (July 2025), each block and the root, and the last block kept gathered.
 * Parameters are kept in `training.dtype` (fp32), gathered in `mixed_precision_param` (bf16) and reduced in
 * `mixed_precision_reduce` (fp32). Every micro-batch reduce-scatters.
 */
/**
 * Float8 training as torchtitan's model converters apply it: `model.converters` naming the float8 Linear
 * converter (`quantize.linear.float8` in its registry, `float8` in older releases), with the float8 all-gather,
 * the recipe and the skipped modules from `[quantize.linear.float8]` (`[float8]` before). A recipe (`rowwise`)
 * excludes the float8 all-gather (`Float8LinearConverter.__init__` asserts it); MX and grouped-matmul converters
 * are named, not modelled.
 */
function readFloat8(doc: ConfigDoc, set: ReturnType<typeof setupFrom>['set'], notes: string[]): void {
  const converters = strList(at(doc.data, ['model', 'converters'])) ?? [];
  const linear = converters.find((c) => c === 'float8' || c === 'quantize.linear.float8');
  for (const c of converters.filter((c) => c !== linear))
    notes.push(
      `the model converter "${c}" (${doc.where(['model', 'converters'])}) is not modelled: the figures are those of unconverted layers`,
    );
  if (!linear) return;
  const section = isRecord(at(doc.data, ['quantize', 'linear', 'float8']))
    ? ['quantize', 'linear', 'float8']
    : ['float8'];
  const allGather =
    bool(at(doc.data, [...section, 'enable_fsdp_float8_all_gather'])) === true &&
    str(at(doc.data, [...section, 'recipe_name'])) === undefined;
  set(
    'float8',
    allGather ? 'all-gather' : 'linear',
    allGather ? [...section, 'enable_fsdp_float8_all_gather'] : ['model', 'converters'],
  );
  const skip = strList(at(doc.data, [...section, 'filter_fqns']));
  if (skip?.includes('auto_filter_small_kn'))
    notes.push(
      `filter_fqns "auto_filter_small_kn" (${doc.where([...section, 'filter_fqns'])}): torchao's size filter for the recipe is not read; every qualifying Linear is taken as converted`,
    );
  const named = skip?.filter((f) => f !== 'auto_filter_small_kn');
  if (named?.length) set('float8Skip', named.join(','), [...section, 'filter_fqns']);
}

/**
 * torch.compile: `[compile] enable` with its `components` (default ["model", "loss"]: `CompileConfig` in
 * torchtitan/config/configs.py; the loss is compiled in `build_cross_entropy_loss`, each block in `apply_compile`),
 * or before August 2025 `[training] compile`, which compiled both from February 2025 (`TrainSpec.loss_fn`) and the
 * blocks alone before: read as both, whose floor (estimate.ts `certainPeakBytes`) is the lower.
 */
function readCompile(doc: ConfigDoc, set: ReturnType<typeof setupFrom>['set']): void {
  const d = doc.data;
  const enable = bool(at(d, ['compile', 'enable']));
  if (enable === undefined) {
    if (bool(at(d, ['training', 'compile'])) === true) set('compile', 'model+loss', ['training', 'compile']);
    return;
  }
  if (!enable) return;
  const parts = strList(at(d, ['compile', 'components'])) ?? ['model', 'loss'];
  const model = parts.includes('model');
  const loss = parts.includes('loss');
  if (model || loss)
    set('compile', model && loss ? 'model+loss' : model ? 'model' : 'loss', [
      'compile',
      at(d, ['compile', 'components']) !== undefined ? 'components' : 'enable',
    ]);
}

export function torchtitanPlan(doc: ConfigDoc): FrameworkPlan | FrameworkProblem {
  const d = doc.data;
  const name = str(at(d, ['model', 'name'])) ?? 'llama3';
  const flavor = str(at(d, ['model', 'flavor'])) ?? 'debugmodel';
  const file = doc.file;
  const range = doc.rangeOf(['model']);
  // Before March 2025 the parallelism keys lived under [training], the pipeline's and context parallelism's under
  // [experimental]; before June 2025 the batch was `batch_size`.
  const par = (key: string): { v: unknown; path: string[] } => {
    for (const section of ['parallelism', 'training', 'experimental']) {
      const v = at(d, [section, key]);
      if (v !== undefined) return { v, path: [section, key] };
    }
    return { v: undefined, path: ['parallelism', key] };
  };
  const legacy = !isRecord(d.parallelism) || at(d, ['training', 'batch_size']) !== undefined;
  const notes: string[] = [];
  const { values, details, keys, set } = setupFrom(doc);
  const qwen3 = name === 'qwen3';
  const deepseek = name === 'deepseek_v3';
  if (!/^llama3/.test(name) && !qwen3 && !deepseek)
    return {
      framework: 'torchtitan',
      file,
      range,
      message: `model "${name}" is not a torchtitan model fsdp-lens knows (llama3, qwen3, deepseek_v3)`,
    };
  const known = deepseek ? TITAN_DEEPSEEK_V3 : qwen3 ? TITAN_QWEN3 : null;
  const llama = deepseek ? undefined : qwen3 ? TITAN_QWEN3[flavor] : titanDims(flavor);
  const dsv3 = deepseek ? TITAN_DEEPSEEK_V3[flavor] : undefined;
  const dims = llama ?? (dsv3 ? { tied: false } : undefined);
  if (!dims)
    return {
      framework: 'torchtitan',
      file,
      range,
      message: known
        ? `flavor "${flavor}" is not one of torchtitan's ${deepseek ? 'DeepSeek-V3' : 'Qwen3'} flavors (${Object.keys(known).join(', ')})`
        : `flavor "${flavor}" is not one of torchtitan's Llama 3 flavors (debugmodel, 8B, 70B, 405B)`,
    };

  // torchtitan's config manager refuses these when they are not integers; fsdp-lens notes them and uses the
  // defaults so the figures stay those of a job torchtitan could run.
  const count = (path: string[], dflt: number, allow?: number[]) =>
    countSetting(at(d, path), path.join('.'), notes, `torchtitan's default ${dflt} used`, {
      ...(allow ? { allow } : {}),
    }) ?? dflt;
  const degree = (key: string, dflt: number, allow?: number[]) => {
    const { v, path } = par(key);
    return (
      countSetting(v, path.join('.'), notes, `torchtitan's default ${dflt} used`, {
        max: 1 << 16,
        ...(allow ? { allow } : {}),
      }) ?? dflt
    );
  };
  const batchKey = at(d, ['training', 'local_batch_size']) !== undefined ? 'local_batch_size' : 'batch_size';
  const local = count(['training', batchKey], DEFAULTS.torchtitan.localBatchSize.value);
  set('microBatch', local, ['training', batchKey]);
  set('seqLen', count(['training', 'seq_len'], DEFAULTS.torchtitan.seqLen.value), ['training', 'seq_len']);
  // A dtype key of [training], or torchtitan's default for it (a name it does not know: the default too).
  const dtype = (key: string, dflt: DType) => DTYPES[str(at(d, ['training', key])) ?? dflt] ?? dflt;
  set('masterDtype', dtype('dtype', DEFAULTS.torchtitan.dtype.value), ['training', 'dtype']);
  set('paramDtype', dtype('mixed_precision_param', DEFAULTS.torchtitan.mixedPrecisionParam.value), [
    'training',
    'mixed_precision_param',
  ]);
  set('reduceDtype', dtype('mixed_precision_reduce', DEFAULTS.torchtitan.mixedPrecisionReduce.value), [
    'training',
    'mixed_precision_reduce',
  ]);
  // torchtitan never skips the reduce-scatter of a micro-batch.
  values.syncEveryMicroBatch = true;

  const shard = degree('data_parallel_shard_degree', DEFAULTS.torchtitan.dataParallelShardDegree.value, [-1]);
  const replicate = degree('data_parallel_replicate_degree', 1);
  const tp = degree('tensor_parallel_degree', 1);
  const pp = degree('pipeline_parallel_degree', 1);
  const cp = degree('context_parallel_degree', 1);
  // Expert parallelism borrows its ranks from dp_shard x cp x tp (`ParallelDims`); the world is unchanged.
  const ep = degree('expert_parallel_degree', 1);
  if (ep > 1) set('expertParallel', ep, par('expert_parallel_degree').path);
  // Tensor parallelism is modelled as torchtitan shards its dense decoders (model/tensorParallel.ts), with
  // sequence parallelism (`enable_sequence_parallel`, on by default; without it the activations differ and it is
  // not), and with or without loss parallel (`disable_loss_parallel`, off by default: the head's output
  // `Replicate()` when set: `apply_tp` in torchtitan/models/llama3/infra/parallelize.py).
  const sp = bool(par('enable_sequence_parallel').v) ?? true;
  const lossParallel = !(bool(par('disable_loss_parallel').v) ?? false);
  if (tp > 1 && sp) {
    set('tensorParallel', tp, par('tensor_parallel_degree').path);
    if (!lossParallel) set('lossParallel', false, par('disable_loss_parallel').path);
  }
  // Context parallelism splits each sequence C ways; ring attention's all-gather rotation is torchtitan's default
  // (`context_parallel_rotate_method`), the one modelled.
  const rotate = str(par('context_parallel_rotate_method').v) ?? 'allgather';
  if (cp > 1 && rotate === 'allgather') set('contextParallel', cp, par('context_parallel_degree').path);
  readCompile(doc, set);
  readFloat8(doc, set, notes);
  const asyncTp =
    bool(par('enable_async_tensor_parallel').v) ??
    bool(at(d, ['compile', 'enable_async_tensor_parallel'])) ??
    false;
  if (tp > 1 && asyncTp)
    notes.push(
      "async tensor parallelism overlaps TP's collectives with the projections (needs compile): the time counted as not hidden is an upper bound",
    );
  const ppProblem = pp > 1 ? readPipeline(par, set, local) : null;
  const commBackend = str(par('expert_parallel_comm_backend').v);
  const unmodelled = [
    ...(tp > 1 && !sp ? [`tensor parallelism (degree ${tp}) without sequence parallelism`] : []),
    ...(ppProblem ? [`pipeline parallelism (degree ${pp}; ${ppProblem})`] : []),
    ...(cp > 1 && rotate !== 'allgather' ? [`context parallelism with the ${rotate} rotation`] : []),
    // DeepSeek-V3's multi-token prediction modules (`num_mtp_layers`) are not in the model built here.
    ...(typeof at(d, ['model', 'mtp_layers']) === 'number' && (at(d, ['model', 'mtp_layers']) as number) > 0
      ? [
          `multi-token prediction (${counted(at(d, ['model', 'mtp_layers']) as number, 'layer')}, ${doc.where(['model', 'mtp_layers'])})`,
        ]
      : []),
    // DeepEP and HybridEP preallocate their communication buffers, whose size the figures do not know.
    ...(commBackend && commBackend !== 'standard'
      ? [
          `the ${commBackend} all-to-all backend (its preallocated buffers, ${doc.where(par('expert_parallel_comm_backend').path)})`,
        ]
      : []),
  ];
  // The world is every dimension's product (`ParallelDims`: pp x dp_replicate x dp_shard x cp x tp); FSDP shards
  // over dp_shard x cp within each pipeline stage.
  if (shard > 0) {
    set('worldSize', shard * replicate * tp * cp * pp, par('data_parallel_shard_degree').path);
    if (replicate > 1) set('replicas', replicate, par('data_parallel_replicate_degree').path);
  } else if (replicate > 1) {
    // dp_shard = -1: the ranks left after the others; the world size comes from the launcher.
    set('replicas', replicate, par('data_parallel_replicate_degree').path);
  }
  // Gradient accumulation: global_batch_size // (local_batch_size x dp_replicate x dp_shard), once the world
  // size (and so dp_shard = -1) is known.
  const globalBatch = count(['training', 'global_batch_size'], -1, [-1]);
  if (globalBatch > 0) set('globalBatch', globalBatch, ['training', 'global_batch_size']);

  const mode = str(at(d, ['activation_checkpoint', 'mode'])) ?? DEFAULTS.torchtitan.acMode.value;
  const option =
    str(at(d, ['activation_checkpoint', 'selective_ac_option'])) ??
    DEFAULTS.torchtitan.selectiveAcOption.value;
  const ck: SetupValues['checkpointing'] =
    mode === 'full'
      ? 'full'
      : mode === 'none'
        ? 'none'
        : /^\d+$/.test(option) && Number(option) >= 1
          ? Number(option) === 1
            ? 'full'
            : { everyN: Number(option) }
          : 'selective';
  set('checkpointing', ck, ['activation_checkpoint', 'mode']);
  // One `wqkv` matmul or three (`fuse_qkv`, read from the model package beside a Python registry): the per-op
  // policy keeps every other matmul's output, so the count decides which outputs are kept.
  const fusedQkv = at(d, ['model', 'fuse_qkv']);
  if (fusedQkv === undefined && ck === 'selective' && doc.file.endsWith('.py') && !deepseek)
    notes.push(
      "q, k and v counted as three matmuls under selective checkpointing: whether the flavor fuses them (`fuse_qkv`, torchtitan's default since June 2026) is set in the model package's __init__.py, which is not in the project",
    );
  // The registry's `ChunkedLossWrapper` (config_registry.py jobs since June 2026): the head and the loss per chunk.
  const chunks = at(d, ['loss', 'chunks']);
  if (chunks !== undefined) {
    set('loss', 'head-chunked', ['loss', 'chunks']);
    if (chunks !== TITAN_LOSS_CHUNKS)
      notes.push(
        `ChunkedLossWrapper num_chunks=${String(chunks)} (${doc.where(['loss', 'chunks'])}): counted as torchtitan's default of ${TITAN_LOSS_CHUNKS} chunks`,
      );
  }
  const opt = (str(at(d, ['optimizer', 'name'])) ?? 'AdamW').toLowerCase();
  if (opt === 'adamw' || opt === 'adam') set('optimizer', opt, ['optimizer', 'name']);
  const impl = str(at(d, ['optimizer', 'implementation'])) ?? 'fused';
  if (impl === 'fused' || impl === 'foreach' || impl === 'for-loop')
    set('optimizerImpl', impl, ['optimizer', 'implementation']);

  const policy = str(par('fsdp_reshard_after_forward').v) ?? 'default';
  const reshard = policy === 'never' ? false : policy === 'always' ? true : pp <= 1;
  const offload = bool(at(d, ['training', 'enable_cpu_offload'])) ?? false;
  notes.push(
    legacy
      ? 'torchtitan before July 2025: a unit per block (the last kept gathered after forward) and the root'
      : dims.tied
        ? 'torchtitan: units [tok_embeddings, norm] with the tied head, each block, and the root'
        : 'torchtitan 0.2: units tok_embeddings, each block, [norm, output] together, and the root',
  );
  return {
    framework: 'torchtitan',
    file,
    range,
    api: 'fsdp2',
    strategy: replicate > 1 ? 'HYBRID_SHARD' : 'FULL_SHARD',
    wrap: legacy
      ? { kind: 'blocks', before: [], after: [], lastBlockReshard: policy === 'default' ? false : reshard }
      : dims.tied
        ? // Tied weights (`apply_fsdp_to_decoder` with `enable_weight_tying`): the embedding, the final norm and the
          // head are one unit, kept gathered unless the policy is "always".
          {
            kind: 'blocks',
            before: [],
            after: [['tok_embeddings', 'norm']],
            afterReshard: policy === 'always',
          }
        : {
            kind: 'blocks',
            before: [['tok_embeddings']],
            after: [['norm', 'output']],
            afterReshard: policy === 'always',
          },
    reshardAfterForward: reshard,
    offload,
    values,
    details,
    keys,
    // `[activation_checkpoint] mode = "full"`: `apply_ac` wraps each block in `checkpoint_wrapper` (a TOML job; a
    // Python registry job sets `ActivationCheckpointConfig(mode=...)` in code).
    ...(doc.format === 'toml'
      ? { checkpointingKey: { path: ['activation_checkpoint', 'mode'], value: 'full' } }
      : {}),
    builtModel: {
      loaded: dsv3
        ? deepseekNative(dsv3, `torchtitan ${name} ${flavor}`)
        : llamaNative(
            fusedQkv === true ? { ...llama!, fusedQkv: true } : llama!,
            'torchtitan',
            `torchtitan ${name} ${flavor}`,
            values.seqLen ?? 2048,
          ),
      source: { kind: 'config', detail: `flavor "${flavor}" at ${doc.where(['model', 'flavor'])}` },
    },
    naming: 'torchtitan',
    notes,
    ...(unmodelled.length ? { unmodelled } : {}),
    traps: [],
  };
}

/**
 * torchtitan's pipeline: the degree, the schedule (`pipeline_parallel_schedule`, "1F1B" by default) and the
 * micro-batches each data-parallel rank's batch is split into: `num_pp_microbatches` (2026), else
 * `local_batch_size // pipeline_parallel_microbatch_size` (`build_pipeline_schedule`, 2025, a micro-batch of 1 by
 * default), else `pipeline_parallel_microbatches` or the degree (`experimental`, 2024). The stages are
 * torchtitan's default split (`_generate_llm_fqn_per_model_part`, one or two per rank by schedule); a split or
 * schedule given otherwise is a reason the pipeline is not modelled, returned.
 */
function readPipeline(
  par: (key: string) => { v: unknown; path: string[] },
  set: ReturnType<typeof setupFrom>['set'],
  local: number,
): string | null {
  const degree = par('pipeline_parallel_degree');
  set('pipelineParallel', Number(degree.v), degree.path);
  const custom = [
    'module_fqns_per_model_part',
    'pipeline_parallel_split_points',
    'pipeline_parallel_layers_per_stage',
  ]
    .map((k) => ({ k, ...par(k) }))
    .find((c) => c.v !== undefined && c.v !== null && !(Array.isArray(c.v) && c.v.length === 0));
  if (custom) return `its own stage split, ${custom.k}`;
  if (str(par('pipeline_parallel_schedule_csv').v)) return 'a schedule from a CSV file';
  for (const k of ['pipeline_parallel_first_stage_less_layers', 'pipeline_parallel_last_stage_less_layers']) {
    const v = par(k).v;
    if (v !== undefined && v !== 1) return `${k} = ${String(v)}, where only its default of 1 is modelled`;
  }
  const schedule = str(par('pipeline_parallel_schedule').v);
  if (schedule) {
    try {
      set(
        'ppSchedule',
        parseInput('ppSchedule', schedule, 'pipeline_parallel_schedule'),
        par('pipeline_parallel_schedule').path,
      );
    } catch {
      return `the schedule "${schedule}"`;
    }
  }
  const n = par('num_pp_microbatches');
  const size = par('pipeline_parallel_microbatch_size');
  const older = par('pipeline_parallel_microbatches');
  if (typeof n.v === 'number') set('ppMicrobatches', n.v, n.path);
  else if (typeof size.v === 'number' && size.v >= 1)
    set('ppMicrobatches', Math.max(1, Math.floor(local / size.v)), size.path);
  else if (typeof older.v === 'number') set('ppMicrobatches', older.v, older.path);
  // The 2024 releases (the degree under [experimental]) split into as many micro-batches as stages.
  else if (degree.path[0] === 'experimental') set('ppMicrobatches', Number(degree.v), degree.path);
  return null;
}

/**
 * The command line's `--section.key V` / `--section.key=V` written into a TOML's data, as torchtitan's
 * ConfigManager overrides the file's values with them (integers and booleans as such); the arguments read.
 */
export function applyTomlOverrides(data: Record<string, unknown>, argv: readonly string[]): string[] {
  const used: string[] = [];
  for (let i = 0; i < argv.length && used.length < 256; i++) {
    const a = argv[i]!;
    const m = /^--([a-z_][\w-]*)\.([a-z_][\w-]*)(?:=(.*))?$/.exec(a);
    if (!m) continue;
    const raw = m[3] ?? argv[i + 1];
    if (raw === undefined || (m[3] === undefined && raw.startsWith('--'))) continue;
    if (m[3] === undefined) i++;
    const section = m[1]!.replace(/-/g, '_');
    const key = m[2]!.replace(/-/g, '_');
    const v = /^-?\d+$/.test(raw)
      ? Number(raw)
      : /^(true|false)$/i.test(raw)
        ? raw.toLowerCase() === 'true'
        : raw.replace(/^["']|["']$/g, '');
    const table = isRecord(data[section]) ? data[section] : (data[section] = {});
    (table as Record<string, unknown>)[key] = v;
    used.push(m[3] === undefined ? `${a} ${raw}` : a);
  }
  return used;
}
