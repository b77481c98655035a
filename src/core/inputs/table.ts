/**
 * The table of estimate inputs: every input an estimate rests on, declared once with its type (through its
 * parser), its default, its label and description, and every name it has: the command-line flag, the keys of
 * `# fsdp:` annotations and `[tool.fsdp-lens]`, the VS Code setting and the panel's what-if control. The CLI's
 * parser and help, the annotation and pyproject readers, the settings reader, package.json's settings, the
 * README's settings table, the panel's controls and the what-if model all derive from it. Adding an input is one
 * entry here plus its use in the estimator.
 */
import { DEFAULT_GPU, findGpu, gpuLabel, GPUS } from '../hardware/catalog';
import type { DType } from '../vocabulary/dtypes';
import * as parse from './parse';
import { FLOAT8_MODES, type Float8Mode } from '../model/float8';
import type { TensorParallelPlan } from '../model/tensorParallel';
import { PIPELINE_SCHEDULES, type PipelineSchedule } from '../model/pipelineStages';
import type { CheckpointMode, CompileMode, LossImpl, OptimizerFamily } from './parse';

/** A VS Code setting (`fsdpLens.<name>`): the JSON schema package.json declares, less the common parts. */
export interface SettingSpec {
  name: string;
  schema: Record<string, unknown>;
}

/** A what-if control of the footprint panel. */
export interface ControlSpec {
  label: string;
  kind: 'number' | 'select';
  /** The choices of a select, value and label. */
  options?: () => { value: string; label: string }[];
}

/** What a reader of the other inputs' values sees while describing one (the reduce dtype names the param dtype). */
export interface DescribeContext {
  paramDtype: DType | null;
  masterDtype: DType;
}

export interface InputSpec<T> {
  /** How the assumption list names it (`world size`). */
  label: string;
  /** One line: what it is, for help texts, setting descriptions and the README. */
  summary: string;
  default: T;
  /** Parses a value as flags, annotations, pyproject.toml and settings write it; throws a message naming `name`. */
  parse(raw: string | number, name: string): T;
  /** The value in words for the assumption list (default: as a string). */
  show?(v: T, ctx: DescribeContext): string;
  /** The command-line flag (`--world-size N`). */
  flag?: { name: string; value: string };
  /** Keys of `# fsdp:` annotations and `[tool.fsdp-lens]` in pyproject.toml (the first is the one to write). */
  keys?: readonly string[];
  setting?: SettingSpec;
  control?: ControlSpec;
}

function input<T>(spec: InputSpec<T>): InputSpec<T> {
  return spec;
}

const count = (v: string | number, name: string) => parse.positiveInt(name, v);
const pct = (v: number) => `${Math.round(v * 100)}%`;

/**
 * A setting that may be left unset, with the rest of its schema: unset is `0` for a count and the empty string
 * for a string (no value the input takes), so that the Settings editor shows a field rather than "Edit in
 * settings.json", as it does for a `null` default. An enum's unset choice is the empty string too.
 */
const nullable = (type: 'integer' | 'string', rest: Record<string, unknown>): Record<string, unknown> => {
  const description = String(rest.markdownDescription ?? '');
  return type === 'integer'
    ? { type, default: 0, ...rest, minimum: 0, markdownDescription: `${description} \`0\` leaves it unset.` }
    : {
        type,
        default: '',
        ...rest,
        ...(Array.isArray(rest.enum) ? { enum: rest.enum.map((v: unknown) => (v === null ? '' : v)) } : {}),
        ...(Array.isArray(rest.enum) ? {} : { markdownDescription: `${description} Empty leaves it unset.` }),
      };
};

const CHECKPOINTING_CHOICES = [
  { value: 'none', label: 'none', doc: 'No activation checkpointing' },
  { value: 'full', label: 'full (every block)', doc: 'Full: every block recomputed in backward' },
  {
    value: 'selective',
    label: 'selective (attention)',
    doc: 'Selective per-op checkpointing as torchtitan applies it',
  },
  { value: 'every-2', label: 'every 2nd block', doc: 'Every second block checkpointed' },
  { value: 'every-4', label: 'every 4th block', doc: 'Every fourth block checkpointed' },
];

/** Each loss implementation in a few words (the assumption list, the panel's choices). */
/** The panel's shorter names of the same choices (its select is a third of the panel wide). */
const LOSS_LABELS: Record<LossImpl, string> = {
  upcast: 'Transformers 4.49+',
  'upcast-shifted': 'Transformers 4.46-4.48',
  'fp32-logits': 'Transformers < 4.46',
  chunked: 'torchtune chunked',
  'linear-chunked': 'torchtune linear',
  'head-chunked': 'torchtitan chunked',
  fused: 'Liger fused',
  cut: 'cut cross-entropy',
  plain: 'plain, no upcast',
  inplace: 'flash-attn in place',
};

const LOSS_CHOICES: Record<LossImpl, string> = {
  upcast: 'fp32 copy inside the loss (Transformers 4.49+, torchtitan)',
  'upcast-shifted': 'fp32 copy and a shifted copy (Transformers 4.46-4.48)',
  'fp32-logits': 'fp32 logits from the model and a shifted copy (Transformers before 4.46)',
  chunked: "8 chunks, each upcast in turn (torchtune's CEWithChunkedOutputLoss)",
  'linear-chunked': "the head applied in 8 chunks inside the loss (torchtune's LinearCrossEntropyLoss)",
  'head-chunked':
    "the head and loss per chunk of 8, each chunk's backward at once (torchtitan's ChunkedLossWrapper)",
  fused: "Liger's fused linear cross-entropy (the logits a chunk at a time, gradients made in forward)",
  cut: "Apple's cut cross-entropy (the logits never formed, gradients made in backward)",
  plain: 'cross-entropy in the compute dtype, no upcast',
  inplace:
    "flash-attn's Triton cross-entropy, the gradient written over the logits (verl's log-probabilities)",
};

/** Each torch.compile choice in a few words (the assumption list, the panel's choices). */
const COMPILE_CHOICES: Record<CompileMode, string> = {
  off: 'off (eager PyTorch)',
  model: 'the model (activations counted as eager keeps them: an upper bound)',
  loss: 'the loss (a cross-entropy fused: the logits and their gradient; other losses as eager keeps them)',
  'model+loss':
    'the model and the loss (activations counted as eager keeps them: an upper bound; the loss fused)',
  cudagraphs: 'with CUDA graphs (reduce-overhead / max-autotune: their memory pool is not modelled)',
};

const COMPILE_LABELS: Record<CompileMode, string> = {
  off: 'off',
  model: 'model',
  loss: 'loss',
  'model+loss': 'model and loss',
  cudagraphs: 'CUDA graphs',
};

const OPTIMIZER_CHOICES: OptimizerFamily[] = [
  'adamw',
  'adam',
  'sgd',
  'sgd-momentum',
  'adam8bit',
  'adafactor',
];

/** A parallel degree around FSDP's shard group: a count, 1 (none) by default, set by a flag and annotation keys. */
function degree(label: string, summary: string, flag: string, value: string, keys: string[]) {
  return input<number>({ label, summary, default: 1, parse: count, flag: { name: flag, value }, keys });
}

/** Every estimate input, in the order the assumption list, the help and the settings show them. */
export const INPUTS = {
  worldSize: input<number>({
    label: 'world size',
    summary: 'Total GPUs (data-parallel world size)',
    default: 8,
    parse: count,
    flag: { name: 'world-size', value: 'N' },
    keys: ['world_size', 'nproc'],
    setting: {
      name: 'worldSize',
      schema: nullable('integer', {
        minimum: 1,
        markdownDescription:
          'Total number of GPUs (data-parallel world size). Unset: what the script, a `# fsdp:` comment or a launch file says, else 8.',
      }),
    },
    control: { label: 'World size', kind: 'number' },
  }),
  gpusPerNode: input<number>({
    label: 'GPUs per node',
    summary: 'GPUs per node: shard groups within a node use its GPU links, larger ones the network',
    default: 8,
    parse: count,
    flag: { name: 'gpus-per-node', value: 'G' },
    keys: ['gpus_per_node'],
    setting: {
      name: 'gpusPerNode',
      schema: nullable('integer', {
        minimum: 1,
        markdownDescription:
          "GPUs per node: shard groups that fit in a node use the GPUs' own link (NVLink), larger ones the network. Unset: 8.",
      }),
    },
    control: { label: 'GPUs per node', kind: 'number' },
  }),
  replicas: degree('HSDP replicas', 'HSDP replicas R: the shard group is world size / R', 'replicas', 'R', [
    'replicas',
  ]),
  tensorParallel: degree(
    'tensor-parallel degree',
    'Tensor-parallel degree T, as torchtitan shards a dense decoder (sequence parallel, loss parallel): FSDP shards over world size / (R x T)',
    'tp',
    'T',
    ['tp', 'tensor_parallel'],
  ),
  tpPlan: input<TensorParallelPlan>({
    label: 'tensor-parallel plan',
    summary:
      "Whose plan tensor parallelism follows: torchtitan's (sequence-parallel norms, the embedding split by vocabulary) or Transformers' tp_plan (norms, residual stream and embedding whole on every GPU, the logits gathered)",
    default: 'torchtitan',
    parse: (v, name) => parse.choice(name, String(v), ['torchtitan', 'transformers'] as const),
    show: (v) =>
      v === 'torchtitan'
        ? "torchtitan's (sequence parallelism, the embedding split)"
        : "Transformers' tp_plan (norms and embedding whole, no sequence parallelism)",
    flag: { name: 'tp-plan', value: 'torchtitan|transformers' },
    keys: ['tp_plan'],
  }),
  lossParallel: input<boolean>({
    label: 'loss parallel',
    summary:
      "Under tensor parallelism: the head's logits kept sharded by vocabulary for the loss (loss_parallel, torchtitan's default), or all-gathered whole on every GPU (a head with output_layouts=Replicate())",
    default: true,
    parse: (v, name) => parse.onOff(name, v),
    show: (v) =>
      v ? "on: the head's logits sharded by vocabulary" : "off: the head's logits all-gathered whole",
    flag: { name: 'loss-parallel', value: 'on|off' },
    keys: ['loss_parallel'],
  }),
  contextParallel: degree(
    'context-parallel degree',
    "Context-parallel degree C, as PyTorch's context_parallel splits the sequence (torchtitan's): each GPU keeps 1/C of every token's activations, K and V all-gathered per block",
    'cp',
    'C',
    ['cp', 'context_parallel'],
  ),
  cpMethod: input<'ring' | 'ulysses'>({
    label: 'context-parallel method',
    summary:
      "How context parallelism splits the sequence: PyTorch's ring attention (K and V all-gathered per block), or Ulysses (DeepSpeed-Ulysses, verl's ulysses_sequence_parallel_size: each attention's q, k, v and output exchanged by all-to-all, heads split instead of the sequence)",
    default: 'ring',
    parse: (v, name) => parse.choice(name, String(v), ['ring', 'ulysses'] as const),
    show: (v) =>
      v === 'ring'
        ? "ring attention (PyTorch's context_parallel)"
        : 'Ulysses: all-to-all of q, k, v and the output around attention',
    flag: { name: 'cp-method', value: 'ring|ulysses' },
    keys: ['cp_method'],
  }),
  expertParallel: degree(
    'expert-parallel degree',
    "Expert-parallel degree E_p, as torchtitan places a MoE model's experts: each GPU of an E_p group holds 1/E_p of every layer's experts, FSDP2 shards them over the shard group / E_p, and tokens reach their experts by all-to-all",
    'ep',
    'E_p',
    ['ep', 'expert_parallel'],
  ),
  pipelineParallel: degree(
    'pipeline-parallel degree',
    "Pipeline-parallel degree P, as torch.distributed.pipelining and torchtitan split a decoder into stages: each GPU holds its stages' blocks, FSDP shards them over world size / (P x R x T)",
    'pp',
    'P',
    ['pp', 'pipeline_parallel'],
  ),
  ppSchedule: input<PipelineSchedule>({
    label: 'pipeline schedule',
    summary:
      "The pipeline schedule (torch.distributed.pipelining's names): how many micro-batches each stage keeps in flight",
    default: '1F1B',
    parse: (v, name) => {
      const t = String(v)
        .trim()
        .replace(/^Schedule/i, '');
      const found = PIPELINE_SCHEDULES.find((s) => s.toLowerCase() === t.toLowerCase());
      return found ?? parse.choice(name, t, PIPELINE_SCHEDULES);
    },
    flag: { name: 'pp-schedule', value: PIPELINE_SCHEDULES.join('|') },
    keys: ['pp_schedule', 'pipeline_schedule'],
  }),
  ppMicrobatches: input<number | null>({
    label: 'pipeline micro-batches',
    summary:
      "Micro-batches the pipeline splits each GPU's batch into (the schedule's n_microbatches); unset: one sample each, torchtitan's default pipeline_parallel_microbatch_size of 1",
    default: null,
    parse: count,
    show: (v) => (v === null ? 'one per sample of the micro-batch' : String(v)),
    flag: { name: 'pp-microbatches', value: 'M' },
    keys: ['pp_microbatches', 'n_microbatches'],
  }),
  gpu: input<string>({
    label: 'GPU',
    summary: 'The GPU to check the fit against and take memory, compute and link speeds from',
    default: DEFAULT_GPU,
    parse: (v, name) => parse.gpu(name, String(v)),
    show: (v) => findGpu(v)?.name ?? v,
    flag: { name: 'gpu', value: 'ID' },
    keys: ['gpu'],
    setting: {
      name: 'gpu',
      schema: nullable('string', {
        enum: [null, ...GPUS.map((g) => g.id)],
        enumItemLabels: [
          `(default: ${findGpu(DEFAULT_GPU)!.name.replace(/^NVIDIA /, '')})`,
          ...GPUS.map(gpuLabel),
        ],
        markdownDescription:
          'The GPU to check the fit against and to take memory, compute and link speeds from.',
      }),
    },
    control: {
      label: 'GPU',
      kind: 'select',
      options: () => GPUS.map((g) => ({ value: g.id, label: gpuLabel(g) })),
    },
  }),
  microBatch: input<number>({
    label: 'micro-batch',
    summary: 'Sequences per GPU per micro-batch',
    default: 1,
    parse: count,
    flag: { name: 'batch', value: 'B' },
    keys: ['batch', 'micro_batch'],
    setting: {
      name: 'microBatch',
      schema: nullable('integer', {
        minimum: 1,
        markdownDescription: 'Sequences per GPU per micro-batch. Unset: 1.',
      }),
    },
    control: { label: 'Micro-batch', kind: 'number' },
  }),
  seqLen: input<number>({
    label: 'sequence length',
    summary: 'Sequence length in tokens',
    default: 4096,
    parse: count,
    flag: { name: 'seq', value: 'S' },
    keys: ['seq', 'seq_len'],
    setting: {
      name: 'seqLen',
      schema: nullable('integer', {
        minimum: 1,
        markdownDescription: 'Sequence length in tokens. Unset: 4096.',
      }),
    },
    control: { label: 'Sequence length', kind: 'number' },
  }),
  gradAccum: input<number>({
    label: 'gradient accumulation steps',
    summary: 'Micro-batches per optimizer step',
    default: 1,
    parse: count,
    flag: { name: 'grad-accum', value: 'K' },
    keys: ['grad_accum'],
  }),
  globalBatch: input<number | null>({
    label: 'global batch',
    summary:
      "Sequences per optimizer step over all data-parallel GPUs: without a gradient accumulation given, it is global / (micro-batch x data-parallel GPUs), rounded up (Composer's global_train_batch_size, torchtitan's global_batch_size)",
    default: null,
    parse: count,
    show: (v) => (v === null ? 'not given' : String(v)),
    flag: { name: 'global-batch', value: 'G' },
    keys: ['global_batch'],
  }),
  syncEveryMicroBatch: input<boolean>({
    label: 'gradient sync',
    summary:
      'Gradients reduced every micro-batch, or on the last only (no_sync / set_requires_gradient_sync(False))',
    default: true,
    parse: (v, name) => parse.choice(name, String(v), ['every', 'last']) === 'every',
    show: (v) =>
      v ? 'every micro-batch' : 'last micro-batch only (no_sync / set_requires_gradient_sync(False))',
    flag: { name: 'grad-sync', value: 'every|last' },
    keys: ['grad_sync'],
  }),
  forwardPrefetch: input<boolean>({
    label: 'forward prefetch',
    summary:
      'The next unit all-gathered while one runs forward (FSDP1 forward_prefetch=True, FSDP2 set_modules_to_forward_prefetch)',
    default: false,
    parse: (v, name) => parse.onOff(name, v),
    show: (v) => (v ? 'next unit gathered ahead' : 'none (FSDP1 and FSDP2 defaults)'),
    flag: { name: 'forward-prefetch', value: 'on|off' },
    keys: ['forward_prefetch'],
  }),
  checkpointing: input<CheckpointMode>({
    label: 'activation checkpointing',
    summary: 'Activation checkpointing: none, full, selective or every-N blocks',
    default: 'none',
    parse: (v, name) => parse.checkpointing(name, String(v)),
    show: (v) => (typeof v === 'object' ? `every ${v.everyN} blocks` : v),
    flag: { name: 'ac', value: 'none|full|selective|every-N' },
    keys: ['ac', 'checkpointing'],
    setting: {
      name: 'checkpointing',
      schema: nullable('string', {
        enum: [null, ...CHECKPOINTING_CHOICES.map((c) => c.value)],
        markdownEnumDescriptions: [
          'What the script says (none unless it applies activation checkpointing)',
          ...CHECKPOINTING_CHOICES.map((c) => c.doc),
        ],
        markdownDescription: 'Activation checkpointing mode, when the script does not say.',
      }),
    },
    control: {
      label: 'Activation checkpointing',
      kind: 'select',
      options: () => CHECKPOINTING_CHOICES.map(({ value, label }) => ({ value, label })),
    },
  }),
  reentrantCheckpoint: input<boolean>({
    label: 'reentrant checkpoint around FSDP1 units',
    summary:
      "Transformers' gradient checkpointing with use_reentrant=True (its default before Transformers 5), a checkpoint around each decoder layer's call: under FSDP1 a frozen unit's input and its gradient are then kept until backward ends",
    default: false,
    parse: (v, name) => parse.onOff(name, v),
    show: (v) =>
      v ? 'on (each frozen FSDP1 unit keeps its input and its gradient until backward ends)' : 'off',
    flag: { name: 'reentrant', value: 'on|off' },
    keys: ['use_reentrant', 'reentrant'],
  }),
  loss: input<LossImpl>({
    label: 'loss',
    summary:
      "What the loss keeps of the logits: upcast, upcast-shifted, fp32-logits (Transformers' releases), chunked, linear-chunked (torchtune), head-chunked (torchtitan's ChunkedLossWrapper), fused (Liger), cut (Apple's cut cross-entropy), plain or inplace (flash-attn's, verl)",
    default: 'upcast',
    parse: (v, name) => parse.choice(name, String(v), parse.LOSS_IMPLS),
    show: (v) => LOSS_CHOICES[v],
    flag: { name: 'loss', value: parse.LOSS_IMPLS.join('|') },
    keys: ['loss'],
    control: {
      label: 'Loss',
      kind: 'select',
      options: () => parse.LOSS_IMPLS.map((value) => ({ value, label: LOSS_LABELS[value] })),
    },
  }),
  keepsOutput: input<'none' | 'backward' | 'step'>({
    label: 'model output kept',
    summary:
      "How long the script keeps the model's output (its logits) in a variable: none, through backward, or the whole step",
    default: 'none',
    parse: (v, name) => parse.choice(name, String(v), ['none', 'backward', 'step'] as const),
    show: (v) =>
      v === 'none'
        ? 'dropped before backward (as Trainer and torchtune do)'
        : v === 'backward'
          ? 'kept through backward and the optimizer step'
          : "kept through backward and the next step's forward",
    flag: { name: 'keeps-output', value: 'none|backward|step' },
    keys: ['keeps_output'],
  }),
  optimizer: input<OptimizerFamily>({
    label: 'optimizer',
    summary: 'Optimizer when the script does not construct one the analysis recognises',
    default: 'adamw',
    parse: (v, name) => parse.optimizer(name, String(v)),
    flag: { name: 'optimizer', value: OPTIMIZER_CHOICES.join('|') },
    keys: ['optimizer'],
    setting: {
      name: 'optimizer',
      schema: nullable('string', {
        enum: [null, ...OPTIMIZER_CHOICES],
        markdownDescription:
          'Optimizer, when the script does not construct one the analysis recognises (AdamW keeps two fp32 states per trainable parameter).',
      }),
    },
  }),
  pagedOptimizer: input<boolean>({
    label: 'paged optimizer state',
    summary:
      "bitsandbytes' paged optimizers (PagedAdamW, Transformers' paged_adamw_*): the state in CUDA unified memory, which the driver moves to the CPU when the GPU runs short",
    default: false,
    parse: (v, name) => parse.onOff(name, v),
    show: (v) => (v ? 'paged (CUDA unified memory)' : 'on the GPU'),
    flag: { name: 'paged-optimizer', value: 'on|off' },
    keys: ['paged_optimizer'],
  }),
  optimizerImpl: input<'foreach' | 'fused' | 'for-loop'>({
    label: 'optimizer implementation',
    summary:
      "How the optimizer steps: foreach (PyTorch's default on CUDA) allocates temporaries the size of the shard",
    default: 'foreach',
    parse: (v, name) => parse.choice(name, String(v), ['foreach', 'fused', 'for-loop'] as const),
    flag: { name: 'optimizer-impl', value: 'foreach|fused|for-loop' },
    keys: ['optimizer_impl'],
  }),
  optimizerInBackward: input<boolean>({
    label: 'optimizer in backward',
    summary:
      "The optimizer steps each parameter as its gradient shard is made (torchtune's optimizer_in_bwd): no gradient shards kept until a step",
    default: false,
    parse: (v, name) => parse.onOff(name, v),
    show: (v) => (v ? 'each parameter stepped in backward, its gradient freed' : 'after backward'),
    flag: { name: 'optimizer-in-backward', value: 'on|off' },
    keys: ['optimizer_in_bwd'],
  }),
  masterDtype: input<DType>({
    label: 'parameter dtype (sharded, master)',
    summary: 'Sharded parameters the optimizer updates: fp32, or bf16 for pure-bf16 training',
    default: 'float32',
    parse: (v, name) => parse.dtype(name, String(v), parse.MASTER_DTYPES),
    flag: { name: 'master-dtype', value: 'fp32|bf16' },
    keys: ['master_dtype'],
  }),
  paramDtype: input<DType | null>({
    label: 'mixed precision param_dtype',
    summary: 'Mixed precision: the dtype parameters are gathered and computed in (fp32, bf16 or fp16)',
    default: 'bfloat16',
    parse: (v, name) => parse.dtype(name, String(v), parse.TRAINING_DTYPES),
    show: (v) => (v === null ? 'none (no mixed precision: gathered in the parameter dtype)' : v),
    flag: { name: 'param-dtype', value: 'D' },
    keys: ['param_dtype'],
  }),
  reduceDtype: input<DType | null>({
    label: 'mixed precision reduce_dtype',
    summary: 'Mixed precision: the dtype gradients are reduced in (fp32, bf16 or fp16)',
    default: null,
    parse: (v, name) => parse.dtype(name, String(v), parse.TRAINING_DTYPES),
    show: (v, ctx) => (v === null ? `= param_dtype (${ctx.paramDtype ?? ctx.masterDtype})` : v),
    flag: { name: 'reduce-dtype', value: 'D' },
    keys: ['reduce_dtype'],
  }),
  float8: input<Float8Mode>({
    label: 'Float8 training',
    summary:
      "Float8 training of the Linear layers (torchao, torchtitan's float8 converter): off, linear (their matmuls in float8), or all-gather (their weights also all-gathered by FSDP2 in float8, 1 byte each)",
    default: 'off',
    parse: (v, name) => parse.choice(name, String(v), FLOAT8_MODES),
    show: (v) =>
      v === 'off'
        ? 'off'
        : v === 'linear'
          ? "Linear layers' matmuls in float8 (weights all-gathered in the parameter dtype)"
          : 'Linear layers in float8, their weights all-gathered in float8',
    flag: { name: 'float8', value: FLOAT8_MODES.join('|') },
    keys: ['float8'],
  }),
  float8Skip: input<string>({
    label: 'Float8 skipped modules',
    summary:
      "Module names left in high precision under Float8 training: a comma-separated list of name fragments, as torchtitan's filter_fqns (a Linear whose name contains one is not converted)",
    default: '',
    parse: (v) =>
      String(v)
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean)
        .join(','),
    show: (v) => (v ? v.split(',').join(', ') : 'none'),
    flag: { name: 'float8-skip', value: 'NAMES' },
    keys: ['float8_skip'],
  }),
  compile: input<CompileMode>({
    label: 'torch.compile',
    summary:
      "What torch.compile covers: off, model, loss, model+loss (the activations are eager PyTorch's, an upper bound), or cudagraphs (a mode recording CUDA graphs, not modelled)",
    default: 'off',
    parse: (v, name) => parse.choice(name, String(v), parse.COMPILE_MODES),
    show: (v) => COMPILE_CHOICES[v],
    flag: { name: 'compile', value: parse.COMPILE_MODES.join('|') },
    keys: ['compile'],
    control: {
      label: 'torch.compile',
      kind: 'select',
      options: () => parse.COMPILE_MODES.map((value) => ({ value, label: COMPILE_LABELS[value] })),
    },
  }),
  activationOffload: input<boolean>({
    label: 'activation offloading',
    summary:
      "Saved activations moved to the CPU as they are saved (torch.autograd.graph.save_on_cpu, torchtune's enable_activation_offloading): the figures keep them on the GPU, an upper bound",
    default: false,
    parse: (v, name) => parse.onOff(name, v),
    show: (v) => (v ? 'to the CPU (counted on the GPU: an upper bound)' : 'off'),
    flag: { name: 'activation-offload', value: 'on|off' },
    keys: ['activation_offload'],
  }),
  attention: input<'fused' | 'eager'>({
    label: 'attention',
    summary: 'Attention kernel: fused (SDPA, FlashAttention) or eager (keeps the s x s scores)',
    default: 'fused',
    parse: (v, name) => parse.attention(name, String(v)),
    show: (v) => (v === 'fused' ? 'fused kernel (SDPA / FlashAttention)' : 'eager (keeps the s x s scores)'),
    flag: { name: 'attention', value: 'fused|eager' },
    keys: ['attention', 'attn_implementation'],
  }),
  torchVersion: input<string>({
    label: 'PyTorch version',
    summary:
      'The PyTorch release the job runs (FSDP2 keeps the root gathered whatever it is told before 2.8)',
    default: '2.8',
    parse: (v, name) => parse.release(name, v),
    show: (v) => (v === '2.8' ? '2.8 or later' : v),
    flag: { name: 'torch', value: 'V' },
    keys: ['torch'],
  }),
  linkEfficiency: input<number>({
    label: 'collective efficiency',
    summary: 'Fraction of the per-direction link bandwidth collectives reach',
    default: 0.8,
    parse: (v, name) => parse.fraction(name, v),
    show: pct,
    flag: { name: 'link-efficiency', value: 'F' },
    keys: ['link_efficiency'],
  }),
  mfu: input<number>({
    label: 'compute efficiency (MFU)',
    summary: 'Fraction of dense bf16 peak compute reaches (model FLOPs utilisation)',
    default: 0.4,
    parse: (v, name) => parse.fraction(name, v),
    show: pct,
    flag: { name: 'mfu', value: 'F' },
    keys: ['mfu'],
  }),
};

export type InputKey = keyof typeof INPUTS;

/** The value of every input: what the estimator computes from. */
export type TrainingSetup = { [K in InputKey]: (typeof INPUTS)[K] extends InputSpec<infer T> ? T : never };

/** Inputs one source sets (a flag, an annotation, the code, a setting); the rest come from below. */
export type SetupValues = Partial<TrainingSetup>;

export const INPUT_KEYS = Object.keys(INPUTS) as InputKey[];

export function inputSpec<K extends InputKey>(key: K): InputSpec<TrainingSetup[K]> {
  return INPUTS[key] as unknown as InputSpec<TrainingSetup[K]>;
}

/** Every input's default. */
export const DEFAULTS: TrainingSetup = Object.fromEntries(
  INPUT_KEYS.map((k) => [k, INPUTS[k].default]),
) as TrainingSetup;

/** The input each `# fsdp:` / `[tool.fsdp-lens]` key sets. */
export const INPUT_BY_KEY: Readonly<Record<string, InputKey>> = Object.fromEntries(
  INPUT_KEYS.flatMap((k) => (INPUTS[k] as InputSpec<unknown>).keys?.map((n) => [n, k] as const) ?? []),
);

/** The input each command-line flag sets (`world-size` → worldSize). */
export const INPUT_BY_FLAG: Readonly<Record<string, InputKey>> = Object.fromEntries(
  INPUT_KEYS.flatMap((k) => {
    const f = (INPUTS[k] as InputSpec<unknown>).flag;
    return f ? [[f.name, k] as const] : [];
  }),
);

/** Parses one input's value as a flag, an annotation, pyproject.toml or a setting writes it. */
export function parseInput<K extends InputKey>(key: K, raw: string | number, name: string): TrainingSetup[K] {
  return inputSpec(key).parse(raw, name);
}

/** An input's value in words, for the assumption list. */
export function showInput<K extends InputKey>(key: K, v: TrainingSetup[K], ctx: DescribeContext): string {
  const spec = inputSpec(key);
  return spec.show ? spec.show(v, ctx) : String(v);
}

/** The inputs an editor setting sets, with the setting. */
export const SETTING_INPUTS: readonly { key: InputKey; setting: SettingSpec }[] = INPUT_KEYS.flatMap(
  (key) => {
    const setting = (INPUTS[key] as InputSpec<unknown>).setting;
    return setting ? [{ key, setting }] : [];
  },
);
