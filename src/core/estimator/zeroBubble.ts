/**
 * The order of actions a zero-bubble pipeline schedule gives one rank, and what its stage chunks hold along it:
 * forwards whose backward has not run, and input gradients (`stage_backward_input`) whose weight gradient
 * (`stage_backward_weight`) waits.
 */
import type { PipelineSchedule } from '../model/pipelineStages';

/** One action on a local stage: forward, input gradient, weight gradient, or both gradients at once. */
type Kind = 'F' | 'I' | 'W' | 'B';
interface Action {
  kind: Kind;
  /** 0 for the rank's first local stage (in model order), 1 for its second. */
  local: number;
}

/**
 * What a rank holds just before one of its backwards starts: stage chunks whose forward has run and whose weight
 * gradient has not (`inFlight`, the running one included), and of those, chunks whose input gradient has run
 * (`pending`: the retained graph and the gradients kept at each weight's use), `pendingLast` of them on the
 * model's last stage.
 */
export interface BackwardPoint {
  inFlight: number;
  pending: number;
  pendingLast: number;
  /**
   * The backward about to run is an input-gradient step (`stage_backward_input`, `retain_graph=True`): its chunk
   * keeps its activations through it and ends it holding its own weight-gradient inputs; a full backward frees
   * them as it goes.
   */
  inputStep: boolean;
}

/** The most actions a rank's order is built with: a step of 4,096 micro-batches over 2 stages. */
const MAX_ACTIONS = 3 * 2 * 4096;

/**
 * ScheduleInterleavedZeroBubble's order (`_calculate_single_rank_operations`, torch/distributed/pipelining/
 * schedules.py): `_get_warmup_ops` with a factor of 1 gives `(v - 1) x mpr + (p - 1 - r)` warm-up forwards, then
 * each step a forward and an input gradient (`_get_1f1b_rank_ops` with `enable_zero_bubble`), the weight gradient
 * of the oldest waiting one once `r` input gradients have run, and the remaining weight gradients at the end.
 * Stages are taken round by round (`forward_stage_index`, `backward_stage_index`).
 */
function interleavedOrder(r: number, p: number, v: number, m: number): Action[] {
  const rounds = Math.max(1, Math.floor(m / p));
  const perRound = Math.floor(m / rounds);
  const warmup = Math.min((v - 1) * perRound + (p - 1 - r), m * v);
  // Warm-up forwards, then m·v - warm-up steps of a forward and a backward, then warm-up backwards alone.
  const total = m * v + warmup;
  const fwdLocal = (step: number) => Math.floor(step / perRound) % v;
  const bwdLocal = (step: number) => v - 1 - (Math.floor((step - warmup) / perRound) % v);
  const out: Action[] = [];
  const backwards: number[] = [];
  let weights = 0;
  for (let op = 0; op < total && out.length < MAX_ACTIONS; op++) {
    if (op < warmup) {
      out.push({ kind: 'F', local: fwdLocal(op) });
      continue;
    }
    if (op < m * v) out.push({ kind: 'F', local: fwdLocal(op) });
    out.push({ kind: 'I', local: bwdLocal(op) });
    backwards.push(op);
    if (op - warmup >= r) out.push({ kind: 'W', local: bwdLocal(backwards[weights++]!) });
  }
  while (weights < backwards.length && out.length < MAX_ACTIONS)
    out.push({ kind: 'W', local: bwdLocal(backwards[weights++]!) });
  return out;
}

/**
 * ScheduleZBVZeroBubble's order for rank r of p over its V stages (local 0 is stage r, local 1 stage 2p - 1 - r):
 * `2(p - r) - 1` forwards of the first, `r` pairs of forwards, `p - r` forwards of the second each followed at once
 * by its input and weight gradients, then steady steps of F0 I0 W0 F1 I1 W1 while forwards remain, a cool-down of
 * `r` pairs of input gradients, `p - r` of I0 W0, and the weight gradients left. The order is built for
 * max(2p - 1, m) micro-batches, those beyond m left out.
 */
function zbvOrder(r: number, p: number, m: number): Action[] {
  const n = Math.max(2 * p - 1, m);
  const out: Action[] = [];
  const count = { F0: 0, F1: 0, I0: 0, I1: 0, W0: 0, W1: 0 };
  const add = (kind: 'F' | 'I' | 'W', local: 0 | 1) => {
    const key = `${kind}${local}` as keyof typeof count;
    if (count[key]++ < m) out.push({ kind, local });
  };
  for (let i = 0; i < 2 * (p - r) - 1; i++) add('F', 0);
  for (let i = 0; i < r; i++) {
    add('F', 1);
    add('F', 0);
  }
  for (let i = 0; i < p - r; i++) {
    add('F', 1);
    add('I', 1);
    add('W', 1);
  }
  while ((count.F1 < count.F0 || count.F0 < n) && out.length < MAX_ACTIONS) {
    if (count.F0 < n) add('F', 0);
    add('I', 0);
    add('W', 0);
    add('F', 1);
    add('I', 1);
    add('W', 1);
  }
  for (let i = 0; i < r; i++) {
    add('I', 0);
    add('I', 1);
  }
  for (let i = 0; i < p - r; i++) {
    add('I', 0);
    add('W', 0);
  }
  while (count.W1 < count.I1) add('W', 1);
  while (count.W0 < count.I0) add('W', 0);
  return out;
}

/**
 * ScheduleDualPipeV's order for rank r of p (`_calculate_single_rank_operations`): F0 x 2(p - r - 1); F0 F1 x
 * (r + 1); I1, the oldest waiting weight gradient, F1 x (p - r - 1); overlapped F0 with B1 and F1 with B0 x
 * (m - 2p + r + 1) (run forward first); B1 with F1+B0 x (p - r - 1); B1 B0 x (r + 1), input gradients only from
 * the middle on; W then a backward of the first stage x (p - r - 1); the weight gradients left.
 */
function dualPipeVOrder(r: number, p: number, m: number): Action[] {
  const out: Action[] = [];
  const queue: number[] = [];
  const add = (kind: Kind, local: number) => {
    out.push({ kind, local });
    if (kind === 'I') queue.push(local);
  };
  const weight = () => {
    const local = queue.shift();
    if (local !== undefined) out.push({ kind: 'W', local });
  };
  for (let i = 0; i < 2 * (p - r - 1); i++) add('F', 0);
  for (let i = 0; i < r + 1; i++) {
    add('F', 0);
    add('F', 1);
  }
  for (let i = 0; i < p - r - 1; i++) {
    add('I', 1);
    weight();
    add('F', 1);
  }
  for (let i = 0; i < m - 2 * p + r + 1 && out.length < MAX_ACTIONS; i++) {
    add('F', 0);
    add('B', 1);
    add('F', 1);
    add('B', 0);
  }
  for (let i = 0; i < p - r - 1; i++) {
    add('B', 1);
    add('F', 1);
    add('B', 0);
  }
  let zb = false;
  const steps = r + 1;
  for (let i = 0; i < steps; i++) {
    if (i === Math.floor(steps / 2) && r % 2 === 1) zb = true;
    add(zb ? 'I' : 'B', 1);
    if (i === Math.floor(steps / 2) && r % 2 === 0) zb = true;
    add(zb ? 'I' : 'B', 0);
  }
  for (let i = 0; i < p - r - 1; i++) {
    weight();
    add(zb ? 'I' : 'B', 0);
  }
  for (let i = 0; i < r + 1; i++) weight();
  return out;
}

/**
 * The states of rank r just before each of its backwards under a zero-bubble schedule, reduced to those no other
 * exceeds in both counts: a rank's peak is at one of them, whichever its bytes per chunk make largest. `lastLocal`
 * is the local stage that is the model's last, if the rank holds it.
 */
export function zeroBubblePoints(
  schedule: PipelineSchedule,
  r: number,
  p: number,
  v: number,
  m: number,
  lastLocal: number | null,
): BackwardPoint[] {
  const order =
    schedule === 'InterleavedZeroBubble'
      ? interleavedOrder(r, p, v, m)
      : schedule === 'ZBVZeroBubble'
        ? zbvOrder(r, p, m)
        : schedule === 'DualPipeV'
          ? dualPipeVOrder(r, p, m)
          : [];
  const forwards = new Array<number>(v).fill(0);
  const waiting = new Array<number>(v).fill(0);
  const seen = new Map<string, BackwardPoint>();
  for (const a of order) {
    if (a.kind === 'I' || a.kind === 'B') {
      const point = {
        inFlight: forwards.reduce((s, x) => s + x, 0),
        pending: waiting.reduce((s, x) => s + x, 0),
        pendingLast: lastLocal === null ? 0 : waiting[lastLocal]!,
        inputStep: a.kind === 'I',
      };
      seen.set(`${point.inFlight}/${point.pending}/${point.pendingLast}/${point.inputStep}`, point);
    }
    if (a.kind === 'F') forwards[a.local]!++;
    else if (a.kind === 'I') waiting[a.local]!++;
    else if (a.kind === 'W') {
      forwards[a.local]!--;
      waiting[a.local]!--;
    } else forwards[a.local]!--;
  }
  const points = [...seen.values()];
  const covers = (y: BackwardPoint, x: BackwardPoint) =>
    y !== x &&
    y.inFlight >= x.inFlight &&
    y.pending >= x.pending &&
    y.pendingLast >= x.pendingLast &&
    (y.inputStep || !x.inputStep);
  return points.filter((x) => !points.some((y) => covers(y, x)));
}
