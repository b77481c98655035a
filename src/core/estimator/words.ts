/** The estimate's terms in words: the peak's categories, dtype mixes, what each optimizer keeps. */
import type { TrainingSetup } from '../inputs/table';
import { fmtParams } from '../vocabulary/bytes';
import type { DType } from '../vocabulary/dtypes';
import { lossFused } from './bounds';
import { bytesOf } from './shards';
import type { Figure, LiveSet, Term, Unit } from './types';

/** What the loss holds, by implementation (activations.ts `lossTransient` sizes each). */
const LOSS_WORDS: Record<TrainingSetup['loss'], string> = {
  upcast: 'b·s·V logits, their fp32 copy and log-softmax, and the gradients at the turn to backward',
  'upcast-shifted':
    'b·s·V logits, their fp32 copy, the shifted fp32 copy and log-softmax, and their gradients',
  'fp32-logits': 'b·s·V fp32 logits from the model, the shifted copy and log-softmax, and their gradients',
  chunked: "the head's 8 chunks, every chunk's fp32 log-softmax and one chunk's fp32 copy, or its gradients",
  'linear-chunked':
    "every chunk's fp32 log-softmax, one chunk's logits, the hidden states the head keeps, or one chunk's gradients",
  'head-chunked':
    "the final hidden states' chunk copies and fp32 gradient, one chunk's logits and loss, the head's gradient",
  fused: "Liger's chunk of logits, the input's (and a trainable head's) gradient it makes in forward",
  cut: "cut cross-entropy's fp32 log-sum-exp per token, and the input's (and a trainable head's) gradient",
  plain: 'b·s·V logits and log-softmax in the compute dtype, and their gradients',
  inplace: 'b·s·V logits and an fp32 log-sum-exp per token, their gradient written over them',
};

/** The peak's composition, by category, with what each means. */
export function peakFigure(live: LiveSet, setup: TrainingSetup, plain = false): Figure {
  const ac =
    typeof setup.checkpointing === 'object'
      ? `every-${setup.checkpointing.everyN} checkpointing`
      : setup.checkpointing === 'none'
        ? 'no checkpointing'
        : `${setup.checkpointing} checkpointing`;
  const words: Record<keyof LiveSet, [string, string]> = {
    state: plain
      ? ['parameters and optimizer state', 'the whole model and its optimizer state, with buffers (no FSDP)']
      : [
          'sharded state',
          'parameters and optimizer state of this GPU (with buffers and replicated leftovers)',
        ],
    shardGrads: [
      'sharded gradients',
      setup.gradAccum > 1 && setup.syncEveryMicroBatch
        ? "this GPU's gradient shards, kept from the step's earlier micro-batches"
        : "this GPU's gradient shards of the units whose backward has run (none exist before backward)",
    ],
    gathered: [
      'gathered parameters',
      'units unsharded now: the running one, the root and units kept after forward',
    ],
    gatherBuffers: [
      'all-gather buffers',
      'the unit prefetched in backward, and in FSDP2 forward the last unit gathered (freed at the next copy-out)',
    ],
    activations: [
      'saved activations',
      setup.pipelineParallel > 1
        ? `kept for backward by this GPU's micro-batches in flight (${ac}, micro-batches of ${setup.microBatch} x ${setup.seqLen} tokens); not reduced by sharding`
        : `kept for backward (${ac}, micro-batch ${setup.microBatch} x ${setup.seqLen} tokens); not reduced by sharding`,
    ],
    working: [
      'running block',
      "the running block's tensors, rebuilt when checkpointed, and the gradients of its activations",
    ],
    gradients: plain
      ? ['gradients', "autograd's gradients of the parameters backward has reached"]
      : ['gradient buffers', 'unsharded gradients and reduce-scatter inputs in flight'],
    logits: [
      'logits and loss',
      lossFused(setup)
        ? "b·s·V logits, fp32 max and log-sum-exp per token, and the logits' gradient (the loss compiled)"
        : LOSS_WORDS[setup.loss],
    ],
    heldOutput: [
      'model output kept',
      `the logits of the model's output a variable of the script keeps ${setup.keepsOutput === 'step' ? "through backward and the next step's forward" : 'through backward and the optimizer step'}`,
    ],
    optimizer: ['optimizer step', 'temporaries of the optimizer step'],
    pipeline: [
      'pipeline buffers',
      'receive buffers of the stage inputs and their gradients (one per micro-batch, kept), and the stage outputs of the micro-batches in flight',
    ],
  };
  const terms: Term[] = (Object.keys(words) as (keyof LiveSet)[])
    .filter((k) => live[k] > 0)
    .map((k) => ({ name: words[k][0], bytes: live[k], formula: words[k][1] }));
  return { bytes: terms.reduce((s, t) => s + t.bytes, 0), terms };
}

/** `4 B (float32)`, or the mix of dtypes when parameters differ (NF4 base weights, a bf16 head). */
export function dtypeWords(units: Unit[], master: DType): string {
  const byType = new Map<DType, number>();
  for (const u of units)
    for (const g of u.groups) byType.set(g.dtype, (byType.get(g.dtype) ?? 0) + g.count * g.dim0 * g.rest);
  if (byType.size <= 1) {
    const d = [...byType.keys()][0] ?? master;
    return `${bytesOf(d)} B (${d})`;
  }
  return [...byType.entries()].map(([d, n]) => `${fmtParams(n)} in ${d} (${bytesOf(d)} B)`).join(' + ');
}

export function optimizerWords(s: TrainingSetup): string {
  switch (s.optimizer) {
    case 'adam':
    case 'adamw':
      return `${s.optimizer === 'adam' ? 'Adam' : 'AdamW'}: 2 states x ${bytesOf(s.masterDtype)} B (${s.masterDtype}) per trainable param`;
    case 'sgd-momentum':
      return `SGD with momentum: 1 state x ${bytesOf(s.masterDtype)} B per trainable param`;
    case 'sgd':
      return 'SGD: no state';
    case 'adam8bit':
      return '8-bit Adam: 2 one-byte states per trainable param';
    case 'adafactor':
      return 'Adafactor: factored second moment (a row and a column per matrix), 4 B each';
  }
}
