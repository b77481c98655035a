/** A model as its fine-tuning trains it: LoRA adapters (as PEFT adds them), frozen modules and NF4 base weights. */
import { joinPath, numelOf, type ModuleNode, type ParamInfo } from './tree';
import type { DType } from '../vocabulary/dtypes';

/** A fine-tuning setup: LoRA adapters, frozen modules, a quantised base. */
export interface FineTune {
  /** PEFT LoRA: rank and the module names it targets (`q_proj`, or `all-linear`). */
  lora?: { rank: number; targets: string[] };
  /** Module paths (or path suffixes) frozen with `requires_grad_(False)`. */
  frozen?: string[];
  /** Base linear weights stored as NF4 (4-bit, QLoRA). */
  baseDtype?: 'nf4';
  /**
   * Who quantises them: bitsandbytes (Transformers' `load_in_4bit`, the default) or torchao (torchtune's QLoRA);
   * and whether bitsandbytes quantises its absmax again (`bnb_4bit_use_double_quant`, False by default).
   */
  quantizer?: 'bitsandbytes' | 'torchao';
  doubleQuant?: boolean;
}

/** Modules `target_modules="all-linear"` leaves alone: the output head. */
const NOT_ALL_LINEAR = new Set(['lm_head', 'output', 'embed_out']);

const LINEAR = new Set(['Linear', 'Conv1D']);

/**
 * The model as the fine-tuning setup trains it. LoRA (as PEFT's `get_peft_model` does) freezes every base
 * parameter and adds `lora_A.default` (rank x in) and `lora_B.default` (out x rank) to each targeted linear; NF4
 * stores the frozen linear weights at half a byte per value, with bitsandbytes' absmax kept whole on every rank or
 * torchao's scalers inside the sharded tensor (the head stays in its dtype, as Transformers skips it).
 */
export function applyFineTune(root: ModuleNode, ft: FineTune): ModuleNode {
  if (!ft.lora && !ft.frozen?.length && !ft.baseDtype) return root;
  const targets = new Set(ft.lora?.targets ?? []);
  const allLinear = targets.has('all-linear');
  const frozen = (ft.frozen ?? []).map(basePath).filter(Boolean);
  const isFrozen = (path: string) =>
    frozen.some(
      (f) => path === f || path.startsWith(`${f}.`) || path.endsWith(`.${f}`) || path.includes(`.${f}.`),
    );
  const copy = (m: ModuleNode, frozenAbove: boolean): ModuleNode => {
    const freezeHere = frozenAbove || isFrozen(m.path);
    const linear = LINEAR.has(m.className);
    const targeted = !!ft.lora && linear && (allLinear ? !NOT_ALL_LINEAR.has(m.name) : targets.has(m.name));
    const quantized = ft.baseDtype === 'nf4' && m.className === 'Linear' && !NOT_ALL_LINEAR.has(m.name);
    const params: ParamInfo[] = m.params.map((p) => {
      const q: ParamInfo = { ...p, trainable: p.trainable && !freezeHere && !ft.lora };
      // 4-bit weights take no gradient.
      if (quantized && p.name === 'weight')
        Object.assign(q, { dtype: ft.quantizer === 'torchao' ? 'nf4-torchao' : 'nf4', trainable: false });
      return q;
    });
    // bitsandbytes keeps each weight's absmax in its `quant_state`, not a parameter: every rank holds it whole.
    // One fp32 per block of 64 values, or with double quantisation one uint8 per block and an fp32 per 256 blocks.
    const w = quantized && ft.quantizer !== 'torchao' ? m.params.find((p) => p.name === 'weight') : undefined;
    const blocks = w ? Math.ceil(w.numel / 64) : 0;
    const stateBytes = ft.doubleQuant ? blocks + 4 * Math.ceil(blocks / 256) : 4 * blocks;
    const buffers = w
      ? [
          ...m.buffers,
          {
            name: 'weight.quant_state',
            shape: [stateBytes],
            numel: stateBytes,
            dtype: 'uint8' as const,
            persistent: true,
          },
        ]
      : m.buffers;
    const children = m.children.map((c) => copy(c, freezeHere));
    if (targeted) {
      const w = m.params.find((p) => p.name === 'weight');
      // nn.Linear weight is [out, in]; GPT-2's Conv1D is [in, out].
      const [out, inp] =
        m.className === 'Conv1D'
          ? [w?.shape[1] ?? 0, w?.shape[0] ?? 0]
          : [w?.shape[0] ?? 0, w?.shape[1] ?? 0];
      const r = ft.lora!.rank;
      const adapter = (name: string, shape: number[]): ModuleNode => ({
        name,
        path: joinPath(m.path, name),
        className: 'ModuleDict',
        params: [],
        buffers: [],
        children: [
          {
            name: 'default',
            path: joinPath(joinPath(m.path, name), 'default'),
            className: 'Linear',
            params: [{ name: 'weight', shape, numel: numelOf(shape), trainable: true }],
            buffers: [],
            children: [],
          },
        ],
      });
      children.push(adapter('lora_A', [r, inp]), adapter('lora_B', [out, r]));
    }
    return { ...m, params, buffers, children };
  };
  return copy(root, false);
}

/**
 * A frozen module's path as the base model's tree names it: `layers[0]` is `layers.0`, and PEFT's wrappers
 * (`base_model.model.`) are not part of the base model.
 */
function basePath(p: string): string {
  const dotted = p.replace(/\[(\d+)\]/g, '.$1');
  if (dotted === 'base_model' || dotted === 'base_model.model') return '';
  return dotted.replace(/^base_model\.model\./, '');
}

/** NF4 storage: 4 bits per value and an fp32 absmax per block of 64 values (no double quantisation). */
export const NF4_BYTES_PER_PARAM = 0.5 + 4 / 64;

/** The model with its frozen parameters of no dtype of their own stored in `dtype` (kept as they were loaded). */
export function frozenIn(root: ModuleNode, dtype: DType): ModuleNode {
  const copy = (m: ModuleNode): ModuleNode => ({
    ...m,
    params: m.params.map((p) => (!p.trainable && !p.dtype ? { ...p, dtype } : p)),
    children: m.children.map(copy),
  });
  return copy(root);
}
