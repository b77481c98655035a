import type { OptimizerFamily } from '../analysis/apis';
import { DEFAULT_GPU, findGpu } from '../hardware/catalog';
import { dtypeFromText, shortDtype, type DType } from '../vocabulary/dtypes';
import type { Assumption, Source } from '../vocabulary/source';
import type { CheckpointMode, TrainingSetup } from '../estimator/types';

/** Inputs a layer (a flag, an annotation, the code, a setting) may set; each is a string or number as given. */
export interface SetupValues {
  worldSize?: number;
  gpusPerNode?: number;
  replicas?: number;
  gpu?: string;
  microBatch?: number;
  seqLen?: number;
  gradAccum?: number;
  syncEveryMicroBatch?: boolean;
  checkpointing?: CheckpointMode;
  optimizer?: OptimizerFamily;
  optimizerImpl?: 'foreach' | 'fused' | 'for-loop';
  masterDtype?: DType;
  paramDtype?: DType | null;
  reduceDtype?: DType | null;
  attention?: 'fused' | 'eager';
  linkEfficiency?: number;
  mfu?: number;
}

/** One source of inputs; layers are listed highest precedence first. */
export interface Layer {
  source: Source;
  values: SetupValues;
  /** Per-key source detail (`train.py:12` for the mesh, another line for the dtype). */
  details?: Partial<Record<keyof SetupValues, string>>;
}

/** What each input is when nothing says (ESTIMATOR.md's table). */
export const DEFAULTS: Required<SetupValues> = {
  worldSize: 8,
  gpusPerNode: 8,
  replicas: 1,
  gpu: DEFAULT_GPU,
  microBatch: 1,
  seqLen: 4096,
  gradAccum: 1,
  syncEveryMicroBatch: true,
  checkpointing: 'none',
  optimizer: 'adamw',
  optimizerImpl: 'foreach',
  masterDtype: 'float32',
  paramDtype: 'bfloat16',
  reduceDtype: null,
  attention: 'fused',
  linkEfficiency: 0.8,
  mfu: 0.4,
};

const LABELS: Record<keyof SetupValues, string> = {
  worldSize: 'world size',
  gpusPerNode: 'GPUs per node',
  replicas: 'HSDP replicas',
  gpu: 'GPU',
  microBatch: 'micro-batch',
  seqLen: 'sequence length',
  gradAccum: 'gradient accumulation steps',
  syncEveryMicroBatch: 'gradient sync',
  checkpointing: 'activation checkpointing',
  optimizer: 'optimizer',
  optimizerImpl: 'optimizer implementation',
  masterDtype: 'parameter dtype (sharded, master)',
  paramDtype: 'mixed precision param_dtype',
  reduceDtype: 'mixed precision reduce_dtype',
  attention: 'attention',
  linkEfficiency: 'collective efficiency',
  mfu: 'compute efficiency (MFU)',
};

function describeValue(key: keyof SetupValues, v: unknown, setup: TrainingSetup): string {
  switch (key) {
    case 'gpu':
      return findGpu(String(v))?.name ?? String(v);
    case 'checkpointing':
      return typeof v === 'object' && v ? `every ${(v as { everyN: number }).everyN} blocks` : String(v);
    case 'paramDtype':
      return v === null ? 'none (no mixed precision: gathered in the parameter dtype)' : String(v);
    case 'reduceDtype':
      return v === null ? `= param_dtype (${setup.paramDtype ?? setup.masterDtype})` : String(v);
    case 'syncEveryMicroBatch':
      return v ? 'every micro-batch' : 'last micro-batch only (no_sync / set_requires_gradient_sync(False))';
    case 'attention':
      return v === 'fused' ? 'fused kernel (SDPA / FlashAttention)' : 'eager (keeps the s x s scores)';
    case 'linkEfficiency':
    case 'mfu':
      return `${Math.round(Number(v) * 100)}%`;
    default:
      return String(v);
  }
}

/** Resolves every input by precedence, recording where each came from. */
export function resolveSetup(layers: Layer[]): { setup: TrainingSetup; assumptions: Assumption[] } {
  const all: Layer[] = [...layers, { source: { kind: 'default' }, values: DEFAULTS }];
  const chosen = {} as Record<keyof SetupValues, { value: unknown; source: Source }>;
  for (const key of Object.keys(DEFAULTS) as (keyof SetupValues)[]) {
    for (const layer of all) {
      const v = layer.values[key];
      if (v === undefined) continue;
      const detail = layer.details?.[key] ?? layer.source.detail;
      chosen[key] = {
        value: v,
        source: detail ? { kind: layer.source.kind, detail } : { kind: layer.source.kind },
      };
      break;
    }
  }
  const setup = Object.fromEntries(
    Object.entries(chosen).map(([k, c]) => [k, c.value]),
  ) as unknown as TrainingSetup;
  // The world is whole replicas of whole shard groups: replicas that do not divide it are not used.
  const askedReplicas = setup.replicas;
  if (!replicasDivide(setup.worldSize, setup.replicas)) setup.replicas = 1;
  const assumptions: Assumption[] = (Object.keys(LABELS) as (keyof SetupValues)[])
    .filter((k) => !(k === 'replicas' && setup.replicas === 1 && chosen[k].source.kind === 'default'))
    .map((k) => ({
      key: k,
      label: LABELS[k],
      value:
        k === 'replicas' && setup.replicas !== askedReplicas
          ? `1 (${askedReplicas} replicas do not divide ${setup.worldSize} GPUs: not used)`
          : describeValue(k, chosen[k].value, setup),
      source: chosen[k].source,
    }));
  return { setup, assumptions };
}

/** Whether `replicas` HSDP replicas split `worldSize` GPUs into whole shard groups. */
export function replicasDivide(worldSize: number, replicas: number): boolean {
  return replicas >= 1 && worldSize % replicas === 0;
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

/** Dtypes mixed precision gathers (`param_dtype`) and reduces (`reduce_dtype`) in. */
export const TRAINING_DTYPES: readonly DType[] = ['float32', 'bfloat16', 'float16'];
/** Dtypes of the sharded parameters the optimizer updates: fp32 master weights, or pure-bf16 training. */
export const MASTER_DTYPES: readonly DType[] = ['float32', 'bfloat16'];

/** Parses the value forms flags, annotations and settings use; throws a message naming what is accepted. */
export const PARSE = {
  positiveInt(name: string, v: string | number): number {
    const n = typeof v === 'number' ? v : Number(v);
    if (!Number.isInteger(n) || n < 1 || n > 1_000_000)
      throw new Error(`${name} must be a positive whole number, not "${v}"`);
    return n;
  },
  /**
   * A floating-point dtype among `allowed`. Mixed precision gathers and reduces in fp32, bf16 or fp16 (FSDP2's
   * `MixedPrecisionPolicy` and FSDP1's `MixedPrecision` take floating dtypes); the sharded parameters the optimizer
   * updates are fp32 (mixed precision) or bf16 (pure-bf16 training, as torchtune runs it). Integer and 4-bit types
   * are storage formats of frozen quantized weights (`--base-dtype nf4`), never training dtypes.
   */
  dtype(name: string, v: string, allowed: readonly DType[] = TRAINING_DTYPES): DType {
    const d = dtypeFromText(v);
    const names = allowed.map(shortDtype);
    const list =
      names.length > 1 ? `${names.slice(0, -1).join(', ')} or ${names[names.length - 1]}` : names[0];
    if (!d || !allowed.includes(d)) {
      const why =
        d === 'nf4' || d === 'int8' || d === 'uint8' || d === 'float8_e4m3fn' || d === 'float8_e5m2'
          ? ` (${shortDtype(d)} is a storage format for frozen quantized weights, not a training dtype; for QLoRA use --base-dtype nf4)`
          : '';
      throw new Error(`${name} must be ${list}, not "${v}"${why}`);
    }
    return d;
  },
  checkpointing(name: string, v: string): CheckpointMode {
    const t = v.toLowerCase();
    if (t === 'none' || t === 'full' || t === 'selective') return t;
    const m = /^every-?(\d+)$/.exec(t);
    if (m) return { everyN: PARSE.positiveInt(name, m[1]!) };
    throw new Error(`${name} must be none, full, selective or every-N (e.g. every-2), not "${v}"`);
  },
  optimizer(name: string, v: string): OptimizerFamily {
    const t = v.toLowerCase().replace(/_/g, '-');
    const map: Record<string, OptimizerFamily> = {
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
    const o = map[t];
    if (!o)
      throw new Error(`${name} must be adamw, adam, sgd, sgd-momentum, adam8bit or adafactor, not "${v}"`);
    return o;
  },
  gpu(name: string, v: string): string {
    const g = findGpu(v);
    if (!g) throw new Error(`${name}: unknown GPU "${v}"`);
    return g.id;
  },
  attention(name: string, v: string): 'fused' | 'eager' {
    const a = attentionKind(v);
    if (!a)
      throw new Error(
        `${name} must be fused or eager (sdpa, flash_attention_2 and flex_attention are fused), not "${v}"`,
      );
    return a;
  },
  fraction(name: string, v: string | number): number {
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0 || n > 1)
      throw new Error(`${name} must be a fraction between 0 and 1, not "${v}"`);
    return n;
  },
};

/** Parses one `key=value` input as flags and annotations write it. */
export function parseSetupValue(
  key: keyof SetupValues,
  raw: string,
  name: string,
): SetupValues[keyof SetupValues] {
  switch (key) {
    case 'worldSize':
    case 'gpusPerNode':
    case 'replicas':
    case 'microBatch':
    case 'seqLen':
    case 'gradAccum':
      return PARSE.positiveInt(name, raw);
    case 'gpu':
      return PARSE.gpu(name, raw);
    case 'checkpointing':
      return PARSE.checkpointing(name, raw);
    case 'optimizer':
      return PARSE.optimizer(name, raw);
    case 'paramDtype':
    case 'reduceDtype':
      return PARSE.dtype(name, raw, TRAINING_DTYPES);
    case 'masterDtype':
      return PARSE.dtype(name, raw, MASTER_DTYPES);
    case 'attention':
      return PARSE.attention(name, raw);
    case 'linkEfficiency':
    case 'mfu':
      return PARSE.fraction(name, raw);
    default:
      throw new Error(`${name} cannot be set here`);
  }
}
