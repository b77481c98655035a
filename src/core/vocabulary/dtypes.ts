/**
 * Element types of parameters, buffers and collectives: one table with each dtype's size, whether it is floating
 * point, and every name it is written under (torch attributes, tensor and module cast methods, the short names
 * frameworks use). Every reader of a dtype name goes through this table.
 */

export type DType =
  | 'float32'
  | 'bfloat16'
  | 'float16'
  | 'float64'
  | 'float8_e4m3fn'
  | 'float8_e5m2'
  | 'int8'
  | 'uint8'
  | 'int64'
  | 'bool'
  | 'nf4'
  | 'nf4-torchao';

interface DTypeInfo {
  /** Bytes per element. */
  bytes: number;
  /** Floating point: the dtypes FSDP's mixed precision casts to `param_dtype`. */
  float: boolean;
  /** Attribute names under `torch.` (`torch.half` is `torch.float16`). */
  torch: readonly string[];
  /** Module and tensor methods that cast to it (`.half()`, `.bfloat16()`). */
  methods: readonly string[];
  /** Short names configurations and flags write (`bf16`), the first one used for display. */
  short: readonly string[];
}

const DTYPES: Record<DType, DTypeInfo> = {
  float32: { bytes: 4, float: true, torch: ['float32', 'float'], methods: ['float'], short: ['fp32'] },
  bfloat16: { bytes: 2, float: true, torch: ['bfloat16'], methods: ['bfloat16'], short: ['bf16'] },
  float16: { bytes: 2, float: true, torch: ['float16', 'half'], methods: ['half'], short: ['fp16'] },
  float64: { bytes: 8, float: true, torch: ['float64', 'double'], methods: ['double'], short: ['fp64'] },
  float8_e4m3fn: { bytes: 1, float: false, torch: ['float8_e4m3fn'], methods: [], short: [] },
  float8_e5m2: { bytes: 1, float: false, torch: ['float8_e5m2'], methods: [], short: [] },
  int8: { bytes: 1, float: false, torch: ['int8'], methods: [], short: [] },
  uint8: { bytes: 1, float: false, torch: ['uint8'], methods: [], short: [] },
  int64: { bytes: 8, float: false, torch: ['int64', 'long'], methods: ['long'], short: [] },
  bool: { bytes: 1, float: false, torch: ['bool'], methods: ['bool'], short: [] },
  // bitsandbytes NF4 (`Params4bit`): two values per byte in the parameter's storage. Its absmax per block of 64
  // values is quantisation state outside the parameter, replicated on every rank (see model/finetune.ts).
  nf4: { bytes: 0.5, float: false, torch: [], methods: [], short: [] },
  // torchao's `NF4Tensor` (torchtune's QLoRA): 4-bit values, an int8 scaler per block of 64 and an fp32 factor per
  // 256 scalers (`NF4Tensor.from_tensor`, block_size 64, scaler_block_size 256), all inside the tensor FSDP2
  // shards and gathers (torchao's `fsdp_pre_all_gather` for NF4Tensor).
  'nf4-torchao': { bytes: 0.5 + 1 / 64 + 4 / (64 * 256), float: false, torch: [], methods: [], short: [] },
};

/** Bytes per element of each dtype. */
export const DTYPE_BYTES: Readonly<Record<DType, number>> = Object.fromEntries(
  Object.entries(DTYPES).map(([d, info]) => [d, info.bytes]),
) as Record<DType, number>;

export function isDType(s: string): s is DType {
  return Object.prototype.hasOwnProperty.call(DTYPES, s);
}

export function isFloat(d: DType): boolean {
  return DTYPES[d].float;
}

/** Bytes of a tensor of `numel` elements, rounded up (a fractional size per value, like NF4's, ends in a whole byte). */
export function tensorBytes(numel: number, dtype: DType): number {
  return Math.ceil(numel * DTYPES[dtype].bytes);
}

const BY_TORCH_NAME = new Map<string, DType>();
const BY_METHOD = new Map<string, DType>();
const BY_SHORT = new Map<string, DType>();
for (const [d, info] of Object.entries(DTYPES) as [DType, DTypeInfo][]) {
  for (const n of info.torch) BY_TORCH_NAME.set(n, d);
  for (const n of info.methods) BY_METHOD.set(n, d);
  for (const n of info.short) BY_SHORT.set(n, d);
}

/** The dtype a `torch.<name>` attribute is (`half` → float16, `long` → int64); undefined for other names. */
export function torchDtype(attribute: string): DType | undefined {
  return BY_TORCH_NAME.get(attribute);
}

/** The dtype a module or tensor cast method casts to (`.half()` → float16); undefined for other methods. */
export function castMethodDtype(method: string): DType | undefined {
  return BY_METHOD.get(method);
}

/**
 * A dtype written as text, as configurations, flags and `torch_dtype="..."` arguments write it: `bfloat16`,
 * `torch.bfloat16`, `bf16`, `half` (any case). Undefined for anything else (`auto`, `16-mixed`).
 */
export function dtypeFromText(text: string): DType | undefined {
  const t = text
    .trim()
    .toLowerCase()
    .replace(/^torch\./, '');
  return BY_TORCH_NAME.get(t) ?? BY_SHORT.get(t) ?? (t === 'nf4' ? 'nf4' : undefined);
}

/** `bf16`, `fp32`: the short name, or the dtype itself when it has none; `?` when unknown. */
export function shortDtype(d: string | null | undefined): string {
  if (!d) return '?';
  return isDType(d) ? (DTYPES[d].short[0] ?? d) : d;
}
