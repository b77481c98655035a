/**
 * Parsers of input values as flags, `# fsdp:` annotations, `[tool.fsdp-lens]` and editor settings write them.
 * Each throws an Error whose message names the input and what it accepts.
 */
import { findGpu, GPUS } from '../hardware/catalog';
import { didYouMean } from '../vocabulary/suggest';
import { dtypeFromText, shortDtype, type DType } from '../vocabulary/dtypes';

/** Activation checkpointing: none, every block, torchtitan's selective per-op policy, or every N-th block. */
export type CheckpointMode = 'none' | 'full' | 'selective' | { everyN: number };

/** Optimizer families, by the state each keeps per trainable parameter (docs/estimator.md). */
export type OptimizerFamily = 'adamw' | 'adam' | 'sgd' | 'sgd-momentum' | 'adam8bit' | 'adafactor';

/**
 * How the loss turns the head's output into a scalar, by what it keeps of the b·s·V logits (activations.ts
 * `lossTransient` sizes each):
 * - `upcast`: an fp32 copy inside the loss, the logits left in the compute dtype (Transformers 4.49 and later,
 *   `ForCausalLMLoss`; torchtitan's `cross_entropy_loss`);
 * - `upcast-shifted`: as `upcast`, plus a contiguous copy of the shifted fp32 logits (Transformers 4.46 to 4.48);
 * - `fp32-logits`: the model's forward upcasts the logits and copies the shifted ones (Transformers before 4.46);
 * - `chunked`: the head's output in chunks, each upcast in turn (torchtune's `CEWithChunkedOutputLoss`);
 * - `linear-chunked`: the head applied inside the loss, chunk by chunk (torchtune's `LinearCrossEntropyLoss`);
 * - `fused`: Liger's fused linear cross-entropy, head and loss chunk by chunk in forward, the gradients kept;
 * - `cut`: Apple's cut cross-entropy (axolotl's `cut_cross_entropy`), the logits never formed: a log-sum-exp per
 *   token in forward, the head's and its input's gradients made block by block in backward;
 * - `plain`: `cross_entropy` on the logits as they are, in the compute dtype, with no upcast and no autocast;
 * - `head-chunked`: torchtitan's `ChunkedLossWrapper`, the head and the loss applied to one chunk of the final
 *   hidden states at a time, each chunk's backward run at once into an fp32 accumulator;
 * - `inplace`: flash-attn's Triton cross-entropy with `inplace_backward=True` (verl's `logprobs_from_logits`): the
 *   logits kept as they are with an fp32 log-sum-exp per token, their gradient written over them.
 */
export type LossImpl =
  | 'upcast'
  | 'upcast-shifted'
  | 'fp32-logits'
  | 'chunked'
  | 'linear-chunked'
  | 'head-chunked'
  | 'fused'
  | 'cut'
  | 'plain'
  | 'inplace';
export const LOSS_IMPLS: readonly LossImpl[] = [
  'upcast',
  'upcast-shifted',
  'fp32-logits',
  'chunked',
  'linear-chunked',
  'head-chunked',
  'fused',
  'cut',
  'plain',
  'inplace',
];

/** The chunks torchtitan's `ChunkedLossWrapper` splits the final hidden states into (`num_chunks=8`). */
export const TITAN_LOSS_CHUNKS = 8;

/**
 * What `torch.compile` covers, by what it changes of the figures (estimator/compile.ts):
 * - `model` / `loss` / `model+loss`: compiled with Inductor's default mode, the activations (and the loss's
 *   temporaries) counted as eager PyTorch keeps them, an upper bound;
 * - `cudagraphs`: a mode that records CUDA graphs (`reduce-overhead`, `max-autotune`), whose private memory pool
 *   the figures do not model.
 */
export type CompileMode = 'off' | 'model' | 'loss' | 'model+loss' | 'cudagraphs';
export const COMPILE_MODES: readonly CompileMode[] = ['off', 'model', 'loss', 'model+loss', 'cudagraphs'];

/** Dtypes mixed precision gathers (`param_dtype`) and reduces (`reduce_dtype`) in. */
export const TRAINING_DTYPES: readonly DType[] = ['float32', 'bfloat16', 'float16'];
/** Dtypes of the sharded parameters the optimizer updates: fp32 master weights, or pure-bf16 training. */
export const MASTER_DTYPES: readonly DType[] = ['float32', 'bfloat16'];

/** The largest count any input takes (a world size of a million GPUs is already beyond any cluster). */
export const MAX_COUNT = 1_000_000;

export function positiveInt(name: string, v: string | number): number {
  const n = typeof v === 'number' ? v : Number(v);
  if (!Number.isInteger(n) || n < 1 || n > MAX_COUNT)
    throw new Error(`${name} must be a positive whole number, not "${v}"`);
  return n;
}

/**
 * A floating-point dtype among `allowed`. Mixed precision gathers and reduces in fp32, bf16 or fp16 (FSDP2's
 * `MixedPrecisionPolicy` and FSDP1's `MixedPrecision` take floating dtypes); the sharded parameters the optimizer
 * updates are fp32 (mixed precision) or bf16 (pure-bf16 training, as torchtune runs it). Integer and 4-bit types
 * are storage formats of frozen quantized weights (`--base-dtype nf4`), never training dtypes.
 */
export function dtype(name: string, v: string, allowed: readonly DType[] = TRAINING_DTYPES): DType {
  const d = dtypeFromText(v);
  const names = allowed.map(shortDtype);
  const list = names.length > 1 ? `${names.slice(0, -1).join(', ')} or ${names[names.length - 1]}` : names[0];
  if (!d || !allowed.includes(d)) {
    const why =
      d === 'nf4' || d === 'int8' || d === 'uint8' || d === 'float8_e4m3fn' || d === 'float8_e5m2'
        ? ` (${shortDtype(d)} is a storage format for frozen quantized weights, not a training dtype; for QLoRA use --base-dtype nf4)`
        : '';
    throw new Error(`${name} must be ${list}, not "${v}"${why || didYouMean(v, [...names, ...allowed])}`);
  }
  return d;
}

export function checkpointing(name: string, v: string): CheckpointMode {
  const t = v.toLowerCase();
  if (t === 'none' || t === 'full' || t === 'selective') return t;
  const m = /^every-?(\d+)$/.exec(t);
  if (m) return { everyN: positiveInt(name, m[1]!) };
  throw new Error(
    `${name} must be none, full, selective or every-N (e.g. every-2), not "${v}"${didYouMean(v, ['none', 'full', 'selective'])}`,
  );
}

/** `none`, `full`, `selective`, `every-2`: checkpointing as every surface writes it. */
export function checkpointingText(c: CheckpointMode): string {
  return typeof c === 'object' ? `every-${c.everyN}` : c;
}

const OPTIMIZER_NAMES: Record<string, OptimizerFamily> = {
  adamw: 'adamw',
  adam: 'adam',
  sgd: 'sgd',
  'sgd-momentum': 'sgd-momentum',
  momentum: 'sgd-momentum',
  adam8bit: 'adam8bit',
  adamw8bit: 'adam8bit',
  'adam-8bit': 'adam8bit',
  adafactor: 'adafactor',
};

export function optimizer(name: string, v: string): OptimizerFamily {
  const o = OPTIMIZER_NAMES[v.toLowerCase().replace(/_/g, '-')];
  if (!o)
    throw new Error(
      `${name} must be adamw, adam, sgd, sgd-momentum, adam8bit or adafactor, not "${v}"${didYouMean(v, Object.keys(OPTIMIZER_NAMES))}`,
    );
  return o;
}

export function gpu(name: string, v: string): string {
  const g = findGpu(v);
  if (!g)
    throw new Error(
      `${name}: unknown GPU "${v}"${didYouMean(
        v,
        GPUS.map((x) => x.id),
      )} ("fsdp-lens gpus" lists the IDs)`,
    );
  return g.id;
}

/**
 * The attention kind a Transformers `attn_implementation` selects: `eager` materialises the s x s scores; SDPA,
 * FlashAttention and flex attention are fused kernels that do not keep them. Undefined for names not known.
 */
export function attentionKind(implementation: string): 'fused' | 'eager' | undefined {
  const t = implementation.toLowerCase().replace(/-/g, '_');
  if (t === 'eager') return 'eager';
  if (
    t === 'fused' ||
    t === 'sdpa' ||
    t === 'flex_attention' ||
    t === 'flash' ||
    /^flash_attention_\d$/.test(t) ||
    // Hub kernels (`kernels-community/flash-attn`) are fused too.
    /^kernels_community\//.test(t)
  )
    return 'fused';
  return undefined;
}

export function attention(name: string, v: string): 'fused' | 'eager' {
  const a = attentionKind(v);
  if (!a)
    throw new Error(
      `${name} must be fused or eager (sdpa, flash_attention_2 and flex_attention are fused), not "${v}"`,
    );
  return a;
}

export function fraction(name: string, v: string | number): number {
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0 || n > 1)
    throw new Error(`${name} must be a fraction between 0 and 1, not "${v}"`);
  return n;
}

export function choice<T extends string>(name: string, v: string, options: readonly T[]): T {
  const t = v.trim().toLowerCase();
  const o = options.find((x) => x === t);
  if (!o) throw new Error(`${name} must be ${options.join(', ')}, not "${v}"${didYouMean(t, options)}`);
  return o;
}

/** A switch as flags and annotations write it: `on` / `true`, or `off` / `false`. */
export function onOff(name: string, v: string | number): boolean {
  return ['on', 'true'].includes(choice(name, String(v), ['on', 'off', 'true', 'false']));
}

/** A release like `2.8` or `2.8.0` (a local suffix such as `+cu126` dropped). */
export function release(name: string, v: string | number): string {
  const t = String(v).trim().replace(/\+.*$/, '');
  if (!/^\d+\.\d+(\.\d+)?$/.test(t)) throw new Error(`${name} must be a release like 2.8, not "${v}"`);
  return t;
}
