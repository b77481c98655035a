/**
 * The PyTorch (and neighbouring) APIs the scan recognises, by fully qualified name. One table, so that every
 * import form (`from x import y as z`, `import x as m; m.y`, the legacy composable path) resolves to one kind.
 */
import type { OptimizerFamily } from '../inputs/parse';

export type ApiKind =
  | 'fully_shard'
  | 'FSDP'
  | 'wrap'
  | 'enable_wrap'
  | 'MixedPrecisionPolicy'
  | 'MixedPrecision'
  | 'CPUOffloadPolicy'
  | 'OffloadPolicy'
  | 'CPUOffload'
  | 'ShardingStrategy'
  | 'BackwardPrefetch'
  | 'transformer_auto_wrap_policy'
  | 'size_based_auto_wrap_policy'
  | 'lambda_auto_wrap_policy'
  | '_or_policy'
  | 'ModuleWrapPolicy'
  | 'CustomPolicy'
  | 'always_wrap_policy'
  | 'init_device_mesh'
  | 'DeviceMesh'
  | 'checkpoint_wrapper'
  | 'apply_activation_checkpointing'
  | 'checkpoint'
  | 'checkpoint_sequential'
  | 'optimizer'
  | 'partial';

export interface ApiMatch {
  kind: ApiKind;
  /** The module the name was imported from, e.g. `torch.distributed.fsdp`. */
  module: string;
  /** Imported through `torch.distributed._composable.fsdp` (PyTorch 2.4 and 2.5; FSDP2 moved in 2.6). */
  legacy: boolean;
}

/** Modules that export FSDP2 and FSDP1 names (private submodules included: users import from them too). */
const FSDP_MODULES = [
  'torch.distributed.fsdp',
  'torch.distributed.fsdp._fully_shard',
  'torch.distributed.fsdp._fully_shard._fully_shard',
  'torch.distributed.fsdp._fully_shard._fsdp_api',
  'torch.distributed.fsdp.fully_sharded_data_parallel',
  'torch.distributed.fsdp.api',
  'torch.distributed.fsdp.wrap',
];
export const LEGACY_FSDP2_MODULES = [
  'torch.distributed._composable.fsdp',
  'torch.distributed._composable.fsdp.fully_shard',
  'torch.distributed._composable.fsdp._fsdp_api',
];
/** The module FSDP2 lives in from PyTorch 2.6 on. */
export const FSDP2_MODULE = 'torch.distributed.fsdp';

const FSDP_NAMES: Partial<Record<string, ApiKind>> = {
  fully_shard: 'fully_shard',
  FullyShardedDataParallel: 'FSDP',
  wrap: 'wrap',
  enable_wrap: 'enable_wrap',
  MixedPrecisionPolicy: 'MixedPrecisionPolicy',
  MixedPrecision: 'MixedPrecision',
  CPUOffloadPolicy: 'CPUOffloadPolicy',
  OffloadPolicy: 'OffloadPolicy',
  CPUOffload: 'CPUOffload',
  ShardingStrategy: 'ShardingStrategy',
  BackwardPrefetch: 'BackwardPrefetch',
  transformer_auto_wrap_policy: 'transformer_auto_wrap_policy',
  size_based_auto_wrap_policy: 'size_based_auto_wrap_policy',
  lambda_auto_wrap_policy: 'lambda_auto_wrap_policy',
  _or_policy: '_or_policy',
  ModuleWrapPolicy: 'ModuleWrapPolicy',
  CustomPolicy: 'CustomPolicy',
  always_wrap_policy: 'always_wrap_policy',
};

const OTHER: Record<string, ApiKind> = {
  'torch.distributed.device_mesh.init_device_mesh': 'init_device_mesh',
  'torch.distributed.init_device_mesh': 'init_device_mesh',
  'torch.distributed.device_mesh.DeviceMesh': 'DeviceMesh',
  'torch.distributed.DeviceMesh': 'DeviceMesh',
  'torch.distributed.algorithms._checkpoint.checkpoint_wrapper.checkpoint_wrapper': 'checkpoint_wrapper',
  'torch.distributed.algorithms._checkpoint.checkpoint_wrapper.apply_activation_checkpointing':
    'apply_activation_checkpointing',
  'torch.utils.checkpoint.checkpoint': 'checkpoint',
  'torch.utils.checkpoint.checkpoint_sequential': 'checkpoint_sequential',
  'functools.partial': 'partial',
};

/** Optimizer classes and the number of states each keeps per parameter (read by the estimator). */
export const OPTIMIZERS: Record<string, { name: string; family: OptimizerFamily }> = {
  'torch.optim.AdamW': { name: 'AdamW', family: 'adamw' },
  'torch.optim.Adam': { name: 'Adam', family: 'adam' },
  'torch.optim.SGD': { name: 'SGD', family: 'sgd' },
  'torch.optim.Adagrad': { name: 'Adagrad', family: 'sgd-momentum' },
  'torch.optim.RMSprop': { name: 'RMSprop', family: 'sgd-momentum' },
  'torch.optim.Adafactor': { name: 'Adafactor', family: 'adafactor' },
  'torch.optim.Lion': { name: 'Lion', family: 'sgd-momentum' },
  'transformers.optimization.Adafactor': { name: 'Adafactor', family: 'adafactor' },
  'transformers.Adafactor': { name: 'Adafactor', family: 'adafactor' },
  'bitsandbytes.optim.AdamW8bit': { name: 'AdamW8bit', family: 'adam8bit' },
  'bitsandbytes.optim.Adam8bit': { name: 'Adam8bit', family: 'adam8bit' },
  'bitsandbytes.optim.PagedAdamW8bit': { name: 'PagedAdamW8bit', family: 'adam8bit' },
  'bitsandbytes.optim.PagedAdamW': { name: 'PagedAdamW', family: 'adamw' },
  'bitsandbytes.optim.PagedAdamW32bit': { name: 'PagedAdamW32bit', family: 'adamw' },
  'bitsandbytes.optim.PagedAdam': { name: 'PagedAdam', family: 'adam' },
  'bitsandbytes.optim.PagedAdam8bit': { name: 'PagedAdam8bit', family: 'adam8bit' },
  'bitsandbytes.optim.AdamW': { name: 'AdamW', family: 'adamw' },
  'torchao.optim.AdamW8bit': { name: 'AdamW8bit', family: 'adam8bit' },
};

/** Last segments worth searching the text for: every call the scan cares about contains one of them. */
export const SEARCH_WORDS: readonly string[] = [
  ...Object.keys(FSDP_NAMES),
  'FSDP',
  ...Object.keys(OTHER).map((q) => q.slice(q.lastIndexOf('.') + 1)),
  ...new Set(Object.keys(OPTIMIZERS).map((q) => q.slice(q.lastIndexOf('.') + 1))),
];

/** Classifies a fully qualified name. */
export function classifyApi(qualified: string): ApiMatch | undefined {
  const dot = qualified.lastIndexOf('.');
  if (dot < 0) return undefined;
  const module = qualified.slice(0, dot);
  const name = qualified.slice(dot + 1);
  const fsdpKind = FSDP_NAMES[name];
  if (fsdpKind) {
    if (FSDP_MODULES.includes(module)) return { kind: fsdpKind, module, legacy: false };
    if (LEGACY_FSDP2_MODULES.includes(module)) return { kind: fsdpKind, module, legacy: true };
  }
  // `torch.distributed._composable.fully_shard` is the first composable API (2.1-2.3), also legacy.
  if (qualified === 'torch.distributed._composable.fully_shard')
    return { kind: 'fully_shard', module, legacy: true };
  const other = OTHER[qualified];
  if (other) return { kind: other, module, legacy: false };
  if (OPTIMIZERS[qualified]) return { kind: 'optimizer', module, legacy: false };
  return undefined;
}

/**
 * Names that mean an FSDP API when nothing in the file binds them (a snippet, half-typed code, or a star import
 * from a module the scan cannot see).
 */
export const UNBOUND_FALLBACKS: Record<string, ApiKind> = {
  fully_shard: 'fully_shard',
  FullyShardedDataParallel: 'FSDP',
  FSDP: 'FSDP',
  MixedPrecisionPolicy: 'MixedPrecisionPolicy',
  MixedPrecision: 'MixedPrecision',
  transformer_auto_wrap_policy: 'transformer_auto_wrap_policy',
  size_based_auto_wrap_policy: 'size_based_auto_wrap_policy',
  init_device_mesh: 'init_device_mesh',
};

/** Positional parameters of the wrap APIs, in order, after the module (from PyTorch's signatures). */
export const POSITIONAL_PARAMS: Partial<Record<ApiKind, string[]>> = {
  // fully_shard(module, *, mesh, reshard_after_forward, shard_placement_fn, mp_policy, offload_policy, ...)
  fully_shard: ['module'],
  FSDP: [
    'module',
    'process_group',
    'sharding_strategy',
    'cpu_offload',
    'auto_wrap_policy',
    'backward_prefetch',
    'mixed_precision',
    'ignored_modules',
    'param_init_fn',
    'device_id',
    'sync_module_states',
    'forward_prefetch',
    'limit_all_gathers',
    'use_orig_params',
    'ignored_states',
    'device_mesh',
  ],
  wrap: ['module'],
  MixedPrecisionPolicy: ['param_dtype', 'reduce_dtype', 'output_dtype', 'cast_forward_inputs'],
  MixedPrecision: [
    'param_dtype',
    'reduce_dtype',
    'buffer_dtype',
    'keep_low_precision_grads',
    'cast_forward_inputs',
  ],
  CPUOffloadPolicy: ['pin_memory'],
  CPUOffload: ['offload_params'],
  init_device_mesh: ['device_type', 'mesh_shape'],
  transformer_auto_wrap_policy: ['module', 'recurse', 'nonwrapped_numel', 'transformer_layer_cls'],
  size_based_auto_wrap_policy: ['module', 'recurse', 'nonwrapped_numel', 'min_num_params'],
  lambda_auto_wrap_policy: ['module', 'recurse', 'nonwrapped_numel', 'lambda_fn'],
  ModuleWrapPolicy: ['module_classes'],
  CustomPolicy: ['lambda_fn'],
  apply_activation_checkpointing: ['model', 'checkpoint_wrapper_fn', 'check_fn', 'auto_wrap_policy'],
  checkpoint_wrapper: ['module', 'checkpoint_impl', 'checkpoint_fn'],
};
