/**
 * Activation memory of a transformer block as PyTorch keeps it for backward, per checkpointing mode, and the
 * tensors of the tail and the loss.
 */
import type { ArchShape } from '../model/hf';
import { TITAN_LOSS_CHUNKS, type CheckpointMode, type LossImpl } from '../inputs/parse';

/**
 * Activation memory per micro-batch, written as the list of tensors each block kind keeps for backward. Every
 * entry is an element count times bytes for b sequences of s tokens (bf16 = 2 bytes per element unless noted).
 *
 * Llama-style block (Hugging Face `LlamaDecoderLayer`, fused SDPA / FlashAttention that takes grouped K/V):
 *   input_layernorm (RMSNorm upcasts): fp32 copy of its input 4·sbh + normalized output 2·sbh (input of q/k/v)
 *   q after RoPE 2·sbh; k and v 2·sb·h_kv each (what the attention kernel saves)
 *   attention output 2·sbh (input of o_proj) and the kernel's fp32 log-sum-exp 4·b·a·s
 *   post_attention_layernorm: 4·sbh + 2·sbh (input of gate/up)
 *   SwiGLU: gate output 2·sbI, SiLU output 2·sbI, up output 2·sbI, their product 2·sbI (input of down_proj)
 *   = (16h + 4h_kv + 8I)·sb + 4·a·sb
 * Qwen3 (`Qwen3Attention`: `q_norm(q_proj(x).view(.., head_dim))`, likewise k) adds two per-head RMSNorms before
 *   RoPE, each keeping the fp32 copy of its input and its normalized output: (4 + 2)·sb·a·hd + (4 + 2)·sb·h_kv.
 * Gemma 2 (`Gemma2DecoderLayer`): four norms, and `Gemma2RMSNorm` computes `(x.float() normalized) * (1 + w)` in
 *   fp32 before casting back, so each keeps the fp32 copy of its input 4·sbh and the fp32 normalized tensor the
 *   weight's gradient needs 4·sbh; input_layernorm and pre_feedforward_layernorm also hand their output (2·sbh)
 *   to the q/k/v and gate/up matmuls, while post_attention_layernorm (on o_proj's output) and
 *   post_feedforward_layernorm (on down_proj's output) feed the residual add, which keeps nothing:
 *   norms (4+4+2) + (4+4) + (4+4+2) + (4+4) = 36·sbh instead of the Llama block's 12·sbh. Its GELU-tanh MLP keeps
 *   the same four I-sized tensors as SwiGLU. Eager attention with `attn_logit_softcapping` also keeps the tanh
 *   output of the scores (2 bytes per score) for tanh's backward.
 * GPT-2 block (LayerNorm, fused attention, dropout p>0): ln_1 input 2·sbh, normalized 2·sbh, q/k/v 6·sbh,
 *   attention output 2·sbh, residual dropout mask sbh, ln_2 input 2·sbh, normalized 2·sbh, c_fc output (GELU
 *   input) 8·sbh, GELU output 8·sbh, residual dropout mask sbh, log-sum-exp 4·a·sb = 34·sbh + 4·a·sb (Korthikanti
 *   et al.'s 34 sbh, with the fused kernel keeping no s x s scores). Eager attention adds the scores, their softmax
 *   and its dropout mask: 5·a·s²·b.
 * MoE block: attention as above; router logits fp32 4·sb·E; each token's hidden state is dispatched to its top-k
 *   experts (2·sbh·k) and each active expert keeps the SwiGLU tensors for its tokens (8·sb·k·I_expert); shared
 *   experts keep 8·sb·I_shared; the combined output 2·sbh.
 * DeepSeek multi-head latent attention: q_a output and its norm (2 + 4 + 2)·sb·q_lora, kv_a output and norm
 *   (2 + 4 + 2)·sb·kv_lora, q and k 2·sb·a·(d_nope + d_rope) each, v 2·sb·a·d_v, output 2·sb·a·d_v, log-sum-exp.
 *
 * A model whose step this does not describe (`ArchShape.activationsNotModelled`: T5's encoder-decoder, Llama 4's
 *   MoE that runs every expert on every token) keeps none of these here: no block tensors, tail, logits or loss
 *   are counted for it, and the model lists what that leaves out among the parts not counted, so that every
 *   figure is a lower bound said to be one rather than a decoder-only figure that does not hold.
 *
 * Checkpointing: `full` keeps only each block's input (2·sbh) and rebuilds the block's tensors in its backward;
 * `selective` is torchtitan's per-op policy: it keeps the outputs of every other matmul, of the attention
 * kernel and of expert parallelism's all-to-alls (plus the block input) and recomputes the rest, a MoE layer's
 * routed experts included (`selectiveKept`); `every-N` checkpoints every N-th block fully.
 */
export interface BlockActivations {
  /** How this block is checkpointed. */
  kind: 'none' | 'full' | 'selective';
  /** Bytes kept from a block's forward until its backward. */
  saved: number;
  /** Bytes all of the block's tensors take (what forward builds, and what recomputation rebuilds). */
  full: number;
  /** Largest transient tensor pair during the block's forward or backward (gradients of activations). */
  transient: number;
  /** Extra forward passes of the block in backward (1 for full recomputation). */
  recompute: number;
  tensors: { name: string; bytes: number }[];
}

export interface ActivationInputs {
  microBatch: number;
  seqLen: number;
  attention: 'fused' | 'eager';
  /** Bytes per element of activations (the compute dtype). */
  bytes: number;
  /**
   * Tensor-parallel degree T under torchtitan's plan with sequence parallelism: every tensor of a block is split
   * T ways (the residual stream and norms by sequence, attention and the MLP by heads and features), but the
   * inputs of the column-wise projections are all-gathered whole and kept by their matmuls.
   */
  tp?: number;
  /**
   * Under tensor parallelism, whether the head's logits stay sharded by vocabulary for the loss (loss parallel,
   * torchtitan's default), or are all-gathered whole on every GPU (a head with `output_layouts=Replicate()`).
   */
  lossParallel?: boolean;
  /**
   * Under tensor parallelism, whether the norms and the residual stream are split by sequence (sequence
   * parallelism, torchtitan's plan), or whole on every GPU (Transformers' tp_plan): only attention and the MLP are
   * split then.
   */
  sequenceParallel?: boolean;
  /**
   * Context-parallel degree C: `seqLen` is then each GPU's 1/C of the sequence (PyTorch's `context_parallel`
   * shards every sequence-dimension buffer), and the running block holds K and V all-gathered from the others.
   */
  cp?: number;
  /**
   * Ulysses instead of ring attention (DeepSpeed-Ulysses, verl's `ulysses_sequence_parallel_size`): around each
   * attention q, k and v are exchanged by all-to-all for the whole sequence and 1/C of the heads, and the output
   * back; no K and V are gathered.
   */
  ulysses?: boolean;
  /**
   * Expert-parallel degree E_p: above 1, a MoE layer's tokens reach their experts by all-to-all (torchtitan's
   * `ExpertParallel`), whose outputs selective checkpointing keeps.
   */
  ep?: number;
}

/** All tensors of one block kept for backward without checkpointing, by name. */
export function blockTensors(
  shape: ArchShape,
  x: ActivationInputs,
  moe: boolean,
): { name: string; bytes: number }[] {
  if (shape.activationsNotModelled) return [];
  const sb = x.microBatch * x.seqLen;
  const e = x.bytes;
  const h = shape.hidden;
  const a = shape.heads;
  const hkv = shape.kvHeads * shape.headDim;
  const lse = { name: 'attention log-sum-exp (fp32)', bytes: 4 * a * sb };
  // Eager attention keeps the heads x s x s scores. GPT-2 (softmax in the compute dtype, attention dropout 0.1):
  // softmax output 2 B, dropout mask 1 B and dropout output 2 B per score (Korthikanti et al.). The Llama family
  // (transformers' eager_attention_forward): softmax in fp32 saves its 4-byte output and the matmul with V saves
  // the 2-byte cast; dropout is 0 and saves nothing. Grouped-query attention also saves K and V expanded to every
  // head (repeat_kv copies) for the two matmuls.
  const perScore = shape.mlp === 'gelu' ? 1 + 2 * e : 4 + e + (shape.attnLogitSoftcap ? e : 0);
  const expandedKv = shape.mlp === 'gelu' ? 0 : 2 * e * sb * (a - shape.kvHeads) * shape.headDim;
  const scores =
    x.attention === 'eager'
      ? [
          {
            name:
              shape.mlp === 'gelu'
                ? 'attention scores: softmax output, dropout mask and output'
                : `attention scores: fp32 softmax output and its cast${shape.attnLogitSoftcap ? ', the soft-capping tanh output' : ''}, and K and V expanded to every head`,
            bytes: perScore * a * x.seqLen * x.seqLen * x.microBatch + expandedKv,
          },
        ]
      : [];
  if (shape.mlp === 'gelu') {
    return [
      { name: 'ln_1 input', bytes: e * sb * h },
      { name: 'ln_1 output (input of c_attn)', bytes: e * sb * h },
      { name: 'q, k, v', bytes: 3 * e * sb * h },
      { name: 'attention output', bytes: e * sb * h },
      { name: 'residual dropout masks', bytes: 2 * sb * h },
      { name: 'ln_2 input', bytes: e * sb * h },
      { name: 'ln_2 output (input of c_fc)', bytes: e * sb * h },
      { name: 'c_fc output (GELU input)', bytes: e * sb * shape.intermediate },
      { name: 'GELU output (input of c_proj)', bytes: e * sb * shape.intermediate },
      lse,
      ...scores,
    ];
  }
  /**
   * An upcasting RMSNorm over `width` features: the fp32 copy of its input, and what the weight's gradient needs
   * (the normalized tensor: in fp32 when the norm scales in fp32, else the compute-dtype output, which is also
   * the next matmul's input). `feedsMatmul`: a norm that scales in fp32 hands a separate compute-dtype output to
   * a matmul that keeps it.
   */
  const norm = (n: string, width = h, feedsMatmul = true) =>
    shape.normScalesInFp32
      ? [
          { name: `${n} input (fp32 copy)`, bytes: 4 * sb * width },
          { name: `${n} normalized (fp32, for the weight's gradient)`, bytes: 4 * sb * width },
          ...(feedsMatmul ? [{ name: `${n} output`, bytes: e * sb * width }] : []),
        ]
      : [
          { name: `${n} input (fp32 copy)`, bytes: 4 * sb * width },
          { name: `${n} output`, bytes: e * sb * width },
        ];
  const attn = shape.mla
    ? [
        ...(shape.mla.qLoraRank
          ? [
              {
                name: 'q_a_proj output, its RMSNorm (fp32) and output',
                bytes: (e + 4 + e) * sb * shape.mla.qLoraRank,
              },
            ]
          : []),
        {
          name: 'kv_a_proj output, its RMSNorm (fp32) and output',
          bytes: (e + 4 + e) * sb * shape.mla.kvLoraRank,
        },
        { name: 'q and k after RoPE', bytes: 2 * e * sb * a * (shape.mla.qkNope + shape.mla.qkRope) },
        { name: 'v', bytes: e * sb * a * shape.mla.vHead },
        { name: 'attention output', bytes: e * sb * a * shape.mla.vHead },
      ]
    : [
        ...(shape.qkNorm ? [...norm('q_norm', a * shape.headDim), ...norm('k_norm', hkv)] : []),
        { name: 'q after RoPE', bytes: e * sb * a * shape.headDim },
        { name: 'k and v', bytes: 2 * e * sb * hkv },
        { name: 'attention output', bytes: e * sb * a * shape.headDim },
      ];
  const mlp = moe
    ? [
        { name: 'router logits (fp32)', bytes: 4 * sb * shape.experts },
        { name: 'tokens dispatched to experts', bytes: e * sb * h * shape.expertsPerToken },
        {
          name: 'active experts: gate, SiLU, up, product',
          bytes: 4 * e * sb * shape.expertsPerToken * shape.moeIntermediate,
        },
        ...(shape.sharedExperts
          ? [
              {
                name: 'shared experts: gate, SiLU, up, product',
                bytes: 4 * e * sb * shape.moeIntermediate * shape.sharedExperts,
              },
            ]
          : []),
        { name: 'combined expert output', bytes: e * sb * h },
      ]
    : [{ name: 'SwiGLU: gate, SiLU, up, product', bytes: 4 * e * sb * shape.intermediate }];
  if (shape.normsPerBlock === 4)
    // Gemma 2's sandwich: post_attention_layernorm normalizes the attention output before the residual add,
    // pre_feedforward_layernorm feeds the MLP, post_feedforward_layernorm normalizes the MLP output.
    return [
      ...norm('input_layernorm'),
      ...attn,
      lse,
      ...scores,
      ...norm('post_attention_layernorm', h, false),
      ...norm('pre_feedforward_layernorm'),
      ...mlp,
      ...norm('post_feedforward_layernorm', h, false),
    ];
  return [...norm('input_layernorm'), ...attn, lse, ...scores, ...norm('post_attention_layernorm'), ...mlp];
}

/**
 * Each matmul of a block in the order its forward calls it (`aten.mm` / `aten.linear`), with its output width per
 * token: attention's projections, then the dense MLP's, or a MoE layer's shared experts (the routed experts run
 * `_grouped_mm`, the router's gate is left to the caller).
 */
function blockMatmuls(shape: ArchShape, moe: boolean): [string, number][] {
  const h = shape.hidden;
  const a = shape.heads;
  const hkv = shape.kvHeads * shape.headDim;
  const attention: [string, number][] =
    shape.mlp === 'gelu'
      ? [
          ['c_attn (q, k, v)', 3 * h],
          ['attention c_proj', h],
        ]
      : shape.mla
        ? [
            ...(shape.mla.qLoraRank
              ? ([
                  ['q_a_proj', shape.mla.qLoraRank],
                  ['q_b_proj', a * (shape.mla.qkNope + shape.mla.qkRope)],
                ] as [string, number][])
              : ([['q_proj', a * (shape.mla.qkNope + shape.mla.qkRope)]] as [string, number][])),
            ['kv_a_proj', shape.mla.kvLoraRank + shape.mla.qkRope],
            ['kv_b_proj', a * (shape.mla.qkNope + shape.mla.vHead)],
            ['o_proj', h],
          ]
        : shape.fusedQkv
          ? // FusedQKVLinear.forward: one `wqkv` matmul, split into q, k and v after it.
            [
              ['wqkv (q, k, v)', a * shape.headDim + 2 * hkv],
              ['o_proj', h],
            ]
          : [
              ['q_proj', a * shape.headDim],
              ['k_proj', hkv],
              ['v_proj', hkv],
              ['o_proj', h],
            ];
  const shared = shape.moeIntermediate * shape.sharedExperts;
  const mlp: [string, number][] =
    shape.mlp === 'gelu'
      ? [
          ['c_fc', shape.intermediate],
          ['mlp c_proj', h],
        ]
      : !moe
        ? [
            ['gate_proj', shape.intermediate],
            ['up_proj', shape.intermediate],
            ['down_proj', h],
          ]
        : shared
          ? [
              ['shared experts gate_proj', shared],
              ['shared experts up_proj', shared],
              ['shared experts down_proj', h],
            ]
          : [];
  return [...attention, ...mlp];
}

/**
 * What torchtitan's selective (per-op) policy keeps of a block (`SelectiveAC._wrap_block`'s policy in
 * torchtitan/distributed/activation_checkpoint.py, `_apply_op_sac` before 2026): the block's input (what the
 * checkpoint holds), the outputs of the ops in its save list, except every second matmul (a per-block count of
 * `aten.mm` / `aten.linear` calls: the 1st, 3rd, 5th... are kept), and everything else recomputed. The save list
 * holds the attention kernels (output and fp32 log-sum-exp) and the all-to-alls (`_c10d_functional.
 * all_to_all_single`), not `aten._grouped_mm`, PyTorch's compute-intensive op list (`get_default_op_list`) and
 * torchtitan's own both leave it out: a MoE layer's routed experts keep nothing and are rebuilt in backward.
 * The router's gate is recomputed without being counted (`force_recompute_mm_shapes_by_fqns`, default
 * `["moe.router.gate"]`). Under expert parallelism (torchtitan's `ExpertParallel._token_dispatch` and
 * `_token_combine`) the dispatch and the combine all-to-all outputs are kept: each k·h per token with routing
 * balanced over the experts.
 */
function selectiveKept(
  shape: ArchShape,
  x: ActivationInputs,
  moe: boolean,
): { name: string; bytes: number }[] {
  const sb = x.microBatch * x.seqLen;
  const e = x.bytes;
  const h = shape.hidden;
  const a = shape.heads;
  const lse = { name: 'attention log-sum-exp (fp32)', bytes: 4 * a * sb };
  const input = { name: 'block input (checkpoint)', bytes: e * sb * h };
  const matmuls = blockMatmuls(shape, moe)
    .filter((_, i) => i % 2 === 0)
    .map(([name, width]) => ({ name: `${name} output`, bytes: e * sb * width }));
  const attnOut = {
    name: 'attention output',
    bytes: e * sb * (shape.mlp === 'gelu' ? h : shape.mla ? a * shape.mla.vHead : a * shape.headDim),
  };
  const k = shape.expertsPerToken;
  const a2a =
    moe && (x.ep ?? 1) > 1
      ? [{ name: 'expert-parallel dispatch and combine all-to-all outputs', bytes: 2 * e * sb * k * h }]
      : [];
  return [input, ...matmuls, attnOut, lse, ...a2a];
}

/**
 * Extra forward passes of block `index` in backward: 1 when it is checkpointed fully (`full`, or every N-th block
 * under `every-N`), 0.5 under `selective` (every other matmul and the cheap ops between are recomputed: about
 * half of the block's forward), 0 without checkpointing.
 */
export function recomputeOf(mode: CheckpointMode, index: number): number {
  if (mode === 'none') return 0;
  if (mode === 'full') return 1;
  if (mode === 'selective') return 0.5;
  return index % mode.everyN === 0 ? 1 : 0;
}

/** Activations of one block under a checkpointing mode (`index` decides every-N). */
export function blockActivations(
  shape: ArchShape,
  x: ActivationInputs,
  mode: CheckpointMode,
  moe: boolean,
  index: number,
): BlockActivations {
  if (shape.activationsNotModelled) {
    // Nothing counted; the recomputation (compute, not memory) follows the mode as for any block.
    const recompute = recomputeOf(mode, index);
    const kind = mode === 'selective' ? 'selective' : recompute ? 'full' : 'none';
    return { kind, saved: 0, full: 0, transient: 0, recompute, tensors: [] };
  }
  const T = x.tp ?? 1;
  const sb = x.microBatch * x.seqLen;
  const sequenceParallel = x.sequenceParallel !== false;
  // Sequence parallelism (torchtitan's `enable_sp`, the default with TP): the norms work on 1/T of the sequence;
  // the attention input and the MLP input are all-gathered (`PrepareModuleInput` to `Replicate`) and each kept
  // whole by the projections that read it (q, k, v; gate, up); what those projections produce is 1/T of the heads
  // or features, and the row-wise outputs are reduce-scattered back to 1/T of the sequence. Without it
  // (Transformers' tp_plan) only attention and the MLP are split: the norms, their outputs (the projections'
  // inputs) and the block's input stay whole on every GPU.
  const split = (t: { name: string; bytes: number }) => ({ name: `${t.name} (1/${T})`, bytes: t.bytes / T });
  const tensors =
    T === 1
      ? blockTensors(shape, x, moe)
      : sequenceParallel
        ? [
            ...blockTensors(shape, x, moe).map(split),
            { name: 'attention input, all-gathered for q, k and v', bytes: x.bytes * sb * shape.hidden },
            { name: 'MLP input, all-gathered for gate and up', bytes: x.bytes * sb * shape.hidden },
          ]
        : blockTensors(shape, x, moe).map((t) => (BLOCK_NORM.test(t.name) ? t : split(t)));
  const full = tensors.reduce((s, t) => s + t.bytes, 0);
  const inner = moe ? shape.moeIntermediate * shape.expertsPerToken : shape.intermediate;
  // Gradients of activations: the incoming gradient and the one being produced, at the widest tensor (1/T of it
  // under tensor parallelism, whose widest tensors are split by features; the residual stream's whole without
  // sequence parallelism).
  // Context parallel's ring attention with the all-gather rotation (`_AllGatherRotater`, torchtitan's default
  // `context_parallel_rotate_method`) holds the other C - 1 ranks' K and V while the block's attention runs,
  // forward and backward.
  const C = x.cp ?? 1;
  // Ulysses (`verl/utils/ulysses.py`, `gather_seq_scatter_heads` and back) holds each all-to-all's output beside
  // its input: q, k, v re-laid for all tokens and 1/C of the heads, then the attention's output, the same elements
  // as the local ones.
  const kvWidth = shape.kvHeads * shape.headDim;
  const gatheredKv =
    C <= 1
      ? 0
      : x.ulysses
        ? (x.bytes * sb * (2 * shape.hidden + 2 * kvWidth)) / T
        : (2 * x.bytes * sb * (C - 1) * kvWidth) / T;
  const transient =
    2 *
      x.bytes *
      sb *
      (sequenceParallel ? Math.max(shape.hidden, inner) / T : Math.max(shape.hidden, inner / T)) +
    gatheredKv;
  // A checkpointed block keeps its input: 1/T of the sequence under sequence parallelism.
  const input = (x.bytes * sb * shape.hidden) / (sequenceParallel ? T : 1);
  if (mode === 'none') return { kind: 'none', saved: full, full, transient, recompute: 0, tensors };
  if (mode === 'full' || (typeof mode === 'object' && index % mode.everyN === 0))
    return {
      kind: 'full',
      saved: input,
      full,
      transient,
      recompute: recomputeOf(mode, index),
      tensors: [{ name: 'block input (checkpoint)', bytes: input }],
    };
  if (typeof mode === 'object') return { kind: 'none', saved: full, full, transient, recompute: 0, tensors };
  // Under tensor parallelism, 1/T of what it keeps (an approximation the estimate declares: torchtitan's policy
  // also keeps the reduce-scatter outputs, and what it recomputes includes collectives).
  const kept = selectiveKept(shape, x, moe).map((t) => (T === 1 ? t : split(t)));
  const saved = kept.reduce((s, t) => s + t.bytes, 0);
  // Every other matmul is recomputed: about half of the block's forward compute again.
  return { kind: 'selective', saved, full, transient, recompute: recomputeOf(mode, index), tensors: kept };
}

/**
 * What a zero-bubble pipeline keeps of a block for a micro-batch between its input gradient and its weight
 * gradient, beside the saved activations (the graph is retained, `retain_graph=True`): `stage_backward_input`
 * (torch/distributed/pipelining/_backward.py) stores, at each autograd node where a weight's path meets the
 * input's (`get_param_groups`: each matmul, each norm's scale), the gradient flowing into it for
 * `stage_backward_weight`. That is the output gradient of every matmul and norm of the block, in the compute
 * dtype: its projections, a MoE layer's router and routed experts, q and k norms.
 */
export function weightGradInputs(shape: ArchShape, x: ActivationInputs, moe: boolean): number {
  if (shape.activationsNotModelled) return 0;
  const routed = moe ? shape.experts + shape.expertsPerToken * (2 * shape.moeIntermediate + shape.hidden) : 0;
  const T = x.tp ?? 1;
  // Under tensor parallelism a column-wise projection's output is 1/T of its features; a row-wise one's output
  // gradient reaches its matmul whole (DTensor's `Redistribute.backward` turns the Partial output's gradient into
  // Replicate); the norms are 1/T of the sequence under sequence parallelism, whole without it.
  const rowWise = /(^|\s)(o_proj|down_proj|c_proj)$/;
  const matmuls = blockMatmuls(shape, moe).reduce((s, [name, w]) => s + (rowWise.test(name) ? w : w / T), 0);
  const norms =
    (shape.normsPerBlock * shape.hidden) / (x.sequenceParallel !== false ? T : 1) +
    (shape.qkNorm ? (shape.heads + shape.kvHeads) * shape.headDim : 0) / T;
  return x.bytes * x.microBatch * x.seqLen * (matmuls + routed / T + norms);
}

/** A decoder norm's tensors (`input_layernorm`, `post_attention_layernorm`, ...): whole without sequence parallelism. */
const BLOCK_NORM =
  /^(input_layernorm|post_attention_layernorm|pre_feedforward_layernorm|post_feedforward_layernorm) /;

/** The final norm and the head's input, kept from the end of forward to the start of backward. */
export function tailActivations(shape: ArchShape, x: ActivationInputs): number {
  if (shape.activationsNotModelled) return 0;
  const sb = x.microBatch * x.seqLen;
  const T = x.tp ?? 1;
  // Under tensor parallelism the final norm is sequence-parallel (1/T) and the head's input is all-gathered
  // whole for the vocabulary-sharded head (torchtitan's `lm_head` input `Replicate`); without sequence
  // parallelism the final norm is whole, as without tensor parallelism.
  if (T > 1 && x.sequenceParallel !== false)
    return ((4 + (shape.normScalesInFp32 ? 4 : 0)) * sb * shape.hidden) / T + x.bytes * sb * shape.hidden;
  if (shape.norm !== 'rmsnorm') return 2 * x.bytes * sb * shape.hidden;
  // An fp32-scaling norm (Gemma 2) also keeps its fp32 normalized tensor; a tanh soft-cap of the normalized
  // hidden states (torchtune's `Gemma2FinalNorm`) keeps the tanh output for its backward.
  return (
    (4 + (shape.normScalesInFp32 ? 4 : 0) + x.bytes + (shape.finalNormSoftcap ? x.bytes : 0)) *
    sb *
    shape.hidden
  );
}

/**
 * Model types Liger patches (`MODEL_TYPE_TO_APPLY_LIGER_FN` in liger_kernel/transformers/monkey_patch.py, the text
 * models); for others `_apply_liger_kernel_to_instance` warns and leaves the model's own loss.
 */
export const LIGER_MODEL_TYPES: ReadonlySet<string> = new Set([
  'llama',
  'llama4_text',
  'mistral',
  'ministral',
  'mixtral',
  'qwen2',
  'qwen3',
  'qwen3_moe',
  'gemma',
  'gemma2',
  'gemma3_text',
  'phi3',
  'granite',
  'olmo2',
  'olmo3',
  'glm4',
  'smollm3',
  'nemotron',
  'gpt_oss',
]);

/** The chunks torchtune's `CEWithChunkedOutputLoss` splits the head's output into (`num_output_chunks=8`). */
export const TORCHTUNE_LOSS_CHUNKS = 8;

/**
 * The logits and loss at the turn from forward to backward, n = b·s·V elements of logits, e bytes each in the
 * compute dtype. What the loss keeps depends on how it is written (`impl`, the loss input):
 * - `upcast` (Transformers 4.49 and later, `ForCausalLMLoss`: `logits.float()`, labels padded instead of the
 *   logits shifted; torchtitan's `cross_entropy_loss` the same): forward holds the logits (e·n), their fp32 copy
 *   (4n) and the fp32 log-softmax `cross_entropy` keeps for backward (4n);
 * - `upcast-shifted` (Transformers 4.46 to 4.48, `ForCausalLMLoss` before `logits[..., :-1, :].contiguous()` was
 *   dropped): the same and the contiguous copy of the shifted fp32 logits (4n more);
 * - `fp32-logits` (Transformers before 4.46, `LlamaForCausalLM.forward`: `logits = logits.float()` frees the
 *   compute-dtype logits, then the shifted copy): fp32 logits, shifted copy and log-softmax (12n);
 * - `chunked` (torchtune's `CEWithChunkedOutputLoss.forward`: k = 8 chunks of the head's output, each passed
 *   through `F.cross_entropy(chunk.float())`): the chunks (e·n), every chunk's log-softmax by the last (4n) and
 *   the last chunk's fp32 copy (4n/k);
 * - `linear-chunked` (torchtune's `LinearCrossEntropyLoss.compute_cross_entropy`: for each of k = 8 chunks of the
 *   final hidden states, the tokens with a label selected, projected by the head, upcast, cross-entropy): every
 *   chunk's log-softmax by the last (4n), the last chunk's logits and fp32 copy ((e + 4)·n/k), and the selected
 *   hidden states the head's linear keeps for backward (e·b·s·h, every token counted as labelled: an upper bound).
 *   The head's weight is gathered for it (timeline.ts counts that);
 * - `fused` (Liger's `fused_linear_cross_entropy_forward`, which `LigerFusedLinearCrossEntropyFunction` runs in the
 *   model's forward): the head and the loss over chunks of C = nextPow2(ceil(b·s / ceil(V / h))) tokens, each
 *   chunk's logits (e·C·V) turned into their gradient in place and multiplied back: the input's gradient
 *   (e·b·s·h, kept for backward), one chunk's product (e·C·h), the fp32 per-token loss (4·b·s); a trainable head
 *   adds its gradient (e·V·h, kept) and each chunk's `torch.mm(...).float()` (e·V·h and 4·V·h);
 * - `plain` (`F.cross_entropy(logits, labels)` on compute-dtype logits, outside autocast): the logits and the
 *   log-softmax, both in the compute dtype (2e·n).
 * With fp32 logits (no mixed precision) `.float()` returns them: there is no copy.
 * Backward starts with the log-softmax, the gradient with respect to it and the gradient with respect to its
 * input (12n; the caller has dropped the model's output by then: Transformers' `Trainer.compute_loss` returns the
 * loss alone, torchtitan and torchtune `del` the logits before `backward()`); chunked, one chunk's two gradients
 * beside every chunk's log-softmax (4n + 8n/k); linear-chunked the same and the selected hidden states; fused, the input's gradient (and a trainable head's)
 * it made in forward, which its backward only scales; plain, the three in the compute dtype (3e·n). Casting the gradient back and the shift's backward hold less.
 * `output`: the logits the model returns, which a script that keeps its output in a variable (`outputs =
 * model(**batch)` in the training loop, never deleted) holds through backward and the next step's forward.
 * Gemma 2's final soft-capping (`logits = tanh(logits / cap) * cap` in `Gemma2ForCausalLM.forward`, in the compute
 * dtype, before the loss upcasts) keeps tanh's output (b·s·V in the compute dtype) for tanh's backward, from the
 * head's forward until the gradient reaches it: one more compute-dtype tensor in both.
 * `fused`: the loss compiled (`bounds.ts` `lossFused`), counted by `compiledLoss`. `head-chunked`: torchtitan's
 * `ChunkedLossWrapper`, counted by `headChunkedLoss` (`headGradBytes`: bytes per element of the head's unsharded
 * gradient as FSDP2 accumulates it, the reduce dtype's when it differs from the compute dtype).
 */
export function lossTransient(
  shape: ArchShape,
  x: ActivationInputs,
  impl: LossImpl = 'upcast',
  headTrainable = false,
  fused = false,
  headGradBytes = 4,
): { forward: number; backward: number; output: number; kept: number } {
  if (shape.activationsNotModelled) return { forward: 0, backward: 0, output: 0, kept: 0 };
  if (impl === 'head-chunked') return headChunkedLoss(shape, x, headTrainable, fused, headGradBytes);
  if (impl === 'inplace') return inplaceLoss(shape, x);
  if (fused) return compiledLoss(shape, x);
  // Loss parallel (torchtitan's default with TP) keeps the head's logits sharded by vocabulary: 1/T of them. A head
  // whose output is `Replicate()` all-gathers them whole (`ColwiseParallel._prepare_output_fn` redistributes the
  // vocabulary shards), and the loss runs on every GPU as without tensor parallelism.
  const lossParallel = (x.tp ?? 1) > 1 && x.lossParallel !== false;
  const n = (x.microBatch * x.seqLen * shape.vocab) / (lossParallel ? x.tp! : 1);
  const softcap = shape.finalLogitSoftcap ? n * x.bytes : 0;
  const k = TORCHTUNE_LOSS_CHUNKS;
  // `.float()` of fp32 logits returns them: no copy (`Tensor.to` returns self when nothing changes).
  const copy = x.bytes === 4 ? 0 : 4;
  const selected = x.bytes * x.microBatch * x.seqLen * shape.hidden;
  if (impl === 'fused') {
    const bt = x.microBatch * x.seqLen;
    const h = shape.hidden;
    const chunk = Math.min(bt, 2 ** Math.ceil(Math.log2(Math.ceil(bt / Math.ceil(shape.vocab / h)))));
    const grads = x.bytes * bt * h + (headTrainable ? x.bytes * shape.vocab * h : 0);
    const forward =
      grads +
      x.bytes * chunk * (shape.vocab + h) +
      4 * bt +
      (headTrainable ? (x.bytes + 4) * shape.vocab * h : 0);
    return { forward, backward: grads, output: 0, kept: grads };
  }
  // Apple's cut cross-entropy (axolotl's fork, cut_cross_entropy/cce.py `LinearCrossEntropyFunction`): forward
  // computes an fp32 log-sum-exp per token (`cce_lse_forward_kernel`), the target logits' fp32 dot products
  // (`indexed_neg_dot_forward_kernel`) and, with gradient filtering (its default `filter_eps="auto"`), an fp32
  // average logit per vocabulary entry, and keeps the log-sum-exp and the averages; backward
  // (`cce_backward_kernel`) makes the input's gradient and a trainable head's in their own dtypes (`accum_e_fp32`
  // and `accum_c_fp32` default off), block by block: no b·s·V tensor exists.
  if (impl === 'cut') {
    const bt = x.microBatch * x.seqLen;
    const kept = 4 * bt + 4 * shape.vocab;
    const grads = x.bytes * bt * shape.hidden + (headTrainable ? x.bytes * shape.vocab * shape.hidden : 0);
    return { forward: kept + 4 * bt, backward: kept + grads, output: 0, kept };
  }
  // Loss parallel (vocabulary-sharded logits, `torch.distributed.tensor.parallel.loss`): `_log_softmax` keeps
  // the fp32 input, `shifted = x - max` and `exp(shifted)` at once before `result = shifted - logsumexp`, and
  // `_nll_loss_and_log_softmax_backward` builds `zeros_like(x)`, `exp(x)` and their sum beside the saved
  // log-softmax: 4 fp32 tensors of the local logits.
  if (lossParallel && (impl === 'upcast' || impl === 'plain'))
    return {
      forward: n * (x.bytes + copy + 8) + softcap,
      backward: 16 * n + softcap,
      output: x.bytes * n,
      kept: n * (x.bytes + 4) + softcap,
    };
  const forward =
    impl === 'upcast'
      ? n * (x.bytes + copy + 4)
      : impl === 'upcast-shifted'
        ? n * (x.bytes + copy + 4 + 4)
        : impl === 'fp32-logits'
          ? n * (4 + 4 + 4)
          : impl === 'plain'
            ? 2 * n * x.bytes
            : impl === 'linear-chunked'
              ? 4 * n + Math.ceil(((x.bytes + copy) * n) / k) + selected
              : n * (x.bytes + 4) + Math.ceil((copy * n) / k);
  const backward =
    impl === 'chunked' || impl === 'linear-chunked'
      ? 4 * n + Math.ceil((8 * n) / k) + (impl === 'linear-chunked' ? selected : 0)
      : impl === 'plain'
        ? 3 * n * x.bytes
        : n * (4 + 4 + 4);
  // The logits the model returns: fp32 when its forward upcasts them, else in the compute dtype; chunked losses
  // have their chunks deleted by the recipe before backward.
  const output =
    impl === 'fp32-logits' ? 4 * n : impl === 'chunked' || impl === 'linear-chunked' ? 0 : x.bytes * n;
  // What a micro-batch's loss keeps from its forward to its backward, with the logits its stage returns (a pipeline's
  // last stage keeps them in `fwd_cache`): the log-softmax's fp32 output (`log_softmax` saves its result; the
  // upcast copy it read is freed), beside the logits.
  const kept =
    impl === 'fp32-logits'
      ? 8 * n
      : impl === 'plain'
        ? 2 * n * x.bytes
        : impl === 'linear-chunked'
          ? forward
          : n * (x.bytes + 4);
  return { forward: forward + softcap, backward: backward + softcap, output, kept: kept + softcap };
}

/**
 * A cross-entropy of the logits (`F.cross_entropy(logits.float(), labels)`, torchtitan's `cross_entropy_loss`)
 * under torch.compile: AOTAutograd's `min_cut_rematerialization_partition` (torch/_functorch/partitioners.py)
 * recomputes the upcast, the subtraction and the exponential (pointwise, `default_recomputable_ops`) rather than
 * save an fp32 b·s·V tensor, so what forward saves is the cheapest cut: the logits, which are the graph's input,
 * and the per-token max and log-sum-exp (fp32). Inductor fuses the upcast and the log-softmax into the reductions
 * and the whole backward into one kernel that writes the logits' gradient in their dtype (the upcast's backward
 * casts it back). So: forward the logits (e·n) and 8 B per token, backward the logits and their gradient (2e·n).
 * Measured: DeepSeek-V3 16B on torchtitan with the loss compiled (docs/calibration.md).
 */
function compiledLoss(
  shape: ArchShape,
  x: ActivationInputs,
): { forward: number; backward: number; output: number; kept: number } {
  const { tokens, n, softcap, kept } = logitsKept(shape, x);
  return { forward: kept, backward: 2 * x.bytes * n + 8 * tokens + softcap, output: x.bytes * n, kept };
}

/**
 * What a loss that reads the logits as they are keeps of them: the b·s·V logits (with Gemma 2's soft-cap output)
 * and two fp32 values per token (a max and a log-sum-exp, or a log-sum-exp and a loss).
 */
function logitsKept(
  shape: ArchShape,
  x: ActivationInputs,
): { tokens: number; n: number; softcap: number; kept: number } {
  const tokens = x.microBatch * x.seqLen;
  const n = tokens * shape.vocab;
  const softcap = shape.finalLogitSoftcap ? n * x.bytes : 0;
  return { tokens, n, softcap, kept: x.bytes * n + 8 * tokens + softcap };
}

/**
 * flash-attn's Triton cross-entropy (`CrossEntropyLossFunction` in flash_attn/ops/triton/cross_entropy.py) as
 * verl's `logprobs_from_logits` runs it, with `inplace_backward=True`: forward reads the logits as the model made
 * them and writes three fp32 values per token (the losses, the log-sum-exp, the z-losses), saving the logits and
 * the log-sum-exp; backward writes the gradient over the saved logits (`dlogits = logits`). So the logits (e·n)
 * and a few fp32 values per token, in forward and backward alike.
 */
function inplaceLoss(
  shape: ArchShape,
  x: ActivationInputs,
): { forward: number; backward: number; output: number; kept: number } {
  const { tokens, n, kept } = logitsKept(shape, x);
  return { forward: kept + 4 * tokens, backward: kept, output: x.bytes * n, kept };
}

/**
 * torchtitan's `ChunkedLossWrapper.__call__` (torchtitan/components/loss.py): the model returns the final hidden
 * states (T = b·s tokens of h); they are split into k = 8 chunks, each copied (`c.contiguous()`) and detached as a
 * leaf; a `GradAccumulator` of T x h in fp32 gathers their gradients; for each chunk in turn the head (kept
 * gathered, `set_reshard_after_forward(False)`) makes its logits, the inner cross-entropy runs (compiled when the
 * loss is: `compiledLoss`'s fused form, else eager's upcast, 4 + 4 B per logit more in forward, 12 B in
 * backward), and the chunk's backward runs at once, making the chunk's gradient and a trainable head's. With
 * gradient sync off until the last chunk (`set_requires_gradient_sync(False)`), FSDP2 accumulates the head's
 * unsharded gradient across chunks (`to_accumulated_grad_if_needed`) in the reduce dtype. So at one chunk's
 * forward: the chunk copies, the accumulator, the head's accumulated gradient and that chunk's loss; at its
 * backward, the same with the chunk's gradients.
 */
function headChunkedLoss(
  shape: ArchShape,
  x: ActivationInputs,
  headTrainable: boolean,
  fused: boolean,
  headGradBytes: number,
): { forward: number; backward: number; output: number; kept: number } {
  const k = TITAN_LOSS_CHUNKS;
  const T = x.microBatch * x.seqLen;
  const h = shape.hidden;
  // Loss parallel keeps the head and its logits split by vocabulary.
  const vocab = (x.tp ?? 1) > 1 && x.lossParallel !== false ? shape.vocab / x.tp! : shape.vocab;
  const perChunk = (T * vocab) / k;
  const copy = x.bytes === 4 ? 0 : 4;
  const base = x.bytes * T * h + 4 * T * h + (headTrainable ? headGradBytes * vocab * h : 0);
  const ceForward = fused ? x.bytes * perChunk + (8 * T) / k : (x.bytes + copy + 4) * perChunk;
  const ceBackward = fused ? 2 * x.bytes * perChunk + (8 * T) / k : 12 * perChunk;
  const grads = (x.bytes * T * h) / k + (headTrainable ? x.bytes * vocab * h : 0);
  const softcap = shape.finalLogitSoftcap ? x.bytes * perChunk : 0;
  const forward = Math.ceil(base + ceForward + softcap);
  return { forward, backward: Math.ceil(base + ceBackward + grads + softcap), output: 0, kept: forward };
}
