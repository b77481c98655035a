/** Training logs read for the memory lines torchtitan, torchtune and the Hugging Face Trainer print. */
import { fmtBytes } from '../vocabulary/bytes';
import type { MeasuredRun } from './measured';

const GIB = 2 ** 30;
const MIB = 2 ** 20;

/** The part of a line that is read: memory lines are short, and a longer line is cut here. */
export const LOG_LINE_CHARS = 16_384;
/** Lines read at most; the rest of a longer log is left, and the run says so. */
export const LOG_MAX_LINES = 16_000_000;
/** Ranks told apart by their prefix at most. */
const MAX_GROUPS = 4096;

const NUMBER = String.raw`\d+(?:\.\d+)?`;
/** Terminal colours (torchtitan colours its step line unless disable_color_printing). */
const ANSI = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g');
/** The prefix torchrun puts before each line of a rank's output ("[rank0]:", or "[default0]:" with --tee). */
const RANK_PREFIX = /^\[(rank|default)(\d+)\]:/;

// torchtitan, torchtitan/components/metrics.py: MetricsProcessor.log prints
//   f"step: {step:2}  loss: {loss:7.4f}  grad_norm: {grad_norm:7.4f}  memory: {max_reserved_gib:5.2f}GiB"
//   f"({max_reserved_pct:.2f}%)  tps: ..."
// where max_reserved_gib is DeviceMemoryMonitor.get_peak_stats()'s reserved_bytes.all.peak / 2**30, the peak since
// the line before (log() resets the peak stats); log_validation prints "validate step: ..." the same way.
const TITAN_STEP = new RegExp(
  String.raw`(?<!validate )\bstep:\s*(\d+)\s.*?\bmemory:\s*(${NUMBER})GiB\((${NUMBER})%\)`,
);
// build_device_memory_monitor: f"{device_type.upper()} capacity: {device_name} with {capacity_gib:.2f}GiB memory"
const TITAN_CAPACITY = new RegExp(String.raw`\b[A-Z]+ capacity: (.+?) with ${NUMBER}GiB memory`);

// torchtune, torchtune/training/memory.py: log_memory_stats logs
//   "Memory stats after model init:" f"\n\t{device_name} peak memory allocation: {peak_memory_alloc:.2f} GiB" ...
//   reserved, active (device_name "GPU" for CUDA; get_memory_stats divides by 1024**3);
// the recipes' metric loggers (training/metric_logging.py DiskLogger, StdoutLogger.log_dict) print
//   f"Step {step} | " then f"{name}:{data} " per metric, with get_memory_stats' peak_memory_active,
//   peak_memory_alloc and peak_memory_reserved (GiB) when log_peak_memory_stats is on, each the peak since the line
//   before (get_memory_stats resets the peaks).
const TUNE_HEADER = /\b(Memory stats[^:]*):\s*$/;
const TUNE_INIT = new RegExp(
  String.raw`\b[A-Z]{2,5} peak memory (allocation|reserved|active): (${NUMBER}) GiB\b`,
);
const TUNE_STEP = /\bStep (\d+) \| /;
const TUNE_METRIC = /\bpeak_memory_(alloc|reserved|active):(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)/g;

// Hugging Face Trainer, transformers/trainer_utils.py TrainerMemoryTracker.update_metrics: metrics
// f"{stage}_mem_gpu_{alloc|peaked}_delta" (bytes) and, with the first stage's metrics, before_init_mem_gpu. They
// are printed as the dict Trainer.log passes on ({'train_runtime': ..., 'train_mem_gpu_alloc_delta': 1234, ...},
// exact bytes) and by Trainer.log_metrics under "***** train metrics *****" as "  key = NMB", where
// trainer_pt_utils.metrics_format writes f"{v >> 20}MB" (whole MiB, rounded down).
const TRAINER_KEYS = String.raw`before_init_mem_gpu|(?:init|train)_mem_gpu_(?:alloc|peaked)_delta`;
const TRAINER_DICT = new RegExp(String.raw`'(${TRAINER_KEYS})': (-?\d+)\b`, 'g');
const TRAINER_BLOCK = new RegExp(String.raw`\b(${TRAINER_KEYS})\s*=\s*(-?\d+)MB\b`);

interface Titan {
  lines: number;
  firstStep: number;
  lastStep: number;
  /** The highest reserved peak, as printed and in bytes, and its step. */
  text: string;
  bytes: number;
  step: number;
}

interface Tune {
  steps: number;
  firstStep: number;
  lastStep: number;
  alloc: { text: string; bytes: number; step: number } | null;
  reserved: { text: string; bytes: number; step: number } | null;
  /** The last "Memory stats ...:" block: its message and its figures (GiB as printed). */
  init: { message: string; allocation?: string; reserved?: string; active?: string } | null;
}

interface Group {
  rank: number | null;
  label: string;
  device: string | null;
  titan: Titan | null;
  tune: Tune | null;
  /** Trainer metrics: exact bytes (the logged dict) and whole MiB rounded down (the metrics block). */
  exact: Map<string, number>;
  mib: Map<string, number>;
  header: string | null;
}

/** A training log fed line by line (`line`), then `finish` for the measured run it gives. */
export class TrainingLogReader {
  private lines = 0;
  private cut = 0;
  private stopped = false;
  private readonly groups = new Map<string, Group>();

  line(raw: string): void {
    if (this.lines >= LOG_MAX_LINES) {
      this.stopped = true;
      return;
    }
    this.lines++;
    let s = raw;
    if (s.length > LOG_LINE_CHARS) {
      this.cut++;
      s = s.slice(0, LOG_LINE_CHARS);
    }
    if (s.includes(String.fromCharCode(27))) s = s.replace(ANSI, '');
    const prefix = RANK_PREFIX.exec(s);
    if (prefix) s = s.slice(prefix[0].length);
    // Past MAX_GROUPS ranks, a new rank's lines are read as lines without a prefix.
    const label = prefix ? `${prefix[1]}${prefix[2]}` : '';
    const known = this.groups.has(label) || this.groups.size < MAX_GROUPS;
    const g = known && prefix ? this.group(label, Number(prefix[2])) : this.group('', null);
    if (!this.titan(g, s) && !this.tune(g, s)) this.trainer(g, s);
  }

  private group(label: string, rank: number | null): Group {
    let g = this.groups.get(label);
    if (!g) {
      g = {
        rank,
        label,
        device: null,
        titan: null,
        tune: null,
        exact: new Map(),
        mib: new Map(),
        header: null,
      };
      this.groups.set(label, g);
    }
    return g;
  }

  private titan(g: Group, s: string): boolean {
    const cap = TITAN_CAPACITY.exec(s);
    if (cap) {
      g.device = cap[1]!.trim();
      return true;
    }
    const m = TITAN_STEP.exec(s);
    if (!m) return false;
    const step = Number(m[1]);
    const bytes = Math.round(Number(m[2]) * GIB);
    const t = (g.titan ??= { lines: 0, firstStep: step, lastStep: step, text: m[2]!, bytes, step });
    t.lines++;
    t.lastStep = step;
    if (bytes > t.bytes) Object.assign(t, { text: m[2]!, bytes, step });
    return true;
  }

  private tune(g: Group, s: string): boolean {
    const header = TUNE_HEADER.exec(s);
    if (header) {
      g.header = header[1]!;
      return true;
    }
    const init = TUNE_INIT.exec(s);
    if (init) {
      const t = this.tuneOf(g);
      if (!t.init || g.header !== null) t.init = { message: g.header ?? 'Memory stats' };
      g.header = null;
      t.init[init[1] as 'allocation' | 'reserved' | 'active'] = init[2]!;
      return true;
    }
    const step = TUNE_STEP.exec(s);
    if (!step) return false;
    const n = Number(step[1]);
    let found = false;
    for (const m of s.matchAll(TUNE_METRIC)) {
      const v = Number(m[2]);
      if (!Number.isFinite(v) || m[1] === 'active') continue;
      found = true;
      const t = this.tuneOf(g);
      const bytes = Math.round(v * GIB);
      const key = m[1] === 'alloc' ? 'alloc' : 'reserved';
      const cur = t[key];
      if (!cur || bytes > cur.bytes) t[key] = { text: m[2]!, bytes, step: n };
    }
    if (!found) return false;
    const t = this.tuneOf(g);
    if (t.steps === 0) t.firstStep = n;
    t.steps++;
    t.lastStep = n;
    return true;
  }

  private tuneOf(g: Group): Tune {
    return (g.tune ??= { steps: 0, firstStep: 0, lastStep: 0, alloc: null, reserved: null, init: null });
  }

  private trainer(g: Group, s: string): boolean {
    let found = false;
    if (s.includes('{'))
      for (const m of s.matchAll(TRAINER_DICT)) {
        g.exact.set(m[1]!, Number(m[2]));
        found = true;
      }
    const block = TRAINER_BLOCK.exec(s);
    if (block) {
      g.mib.set(block[1]!, Number(block[2]));
      found = true;
    }
    return found;
  }

  /**
   * The measured run of the log's rank with memory lines (the lowest rank when several have), or an error when it
   * has none. `skippedBytes`: bytes of the log's start that were not read.
   */
  finish(info: { skippedBytes?: number } = {}): MeasuredRun | { error: string } {
    const withData = [...this.groups.values()].filter(
      (g) => g.titan || g.tune || g.exact.size || g.mib.size || g.device !== null,
    );
    const useful = withData.filter((g) => g.titan || g.tune || g.exact.size || g.mib.size);
    useful.sort((a, b) => (a.rank ?? -1) - (b.rank ?? -1));
    const g = useful[0];
    if (!g)
      return {
        error:
          'no memory line of torchtitan (a step line\'s "memory: ...GiB"), torchtune ("peak memory allocation: ... GiB", peak_memory_alloc:...) or the Hugging Face Trainer (train_mem_gpu_alloc_delta ...) in it',
      };
    const device = g.device ?? withData.find((x) => x.device !== null)?.device ?? null;
    const notes: string[] = [];
    const phases: MeasuredRun['phases'] = {};
    const frameworks: string[] = [];
    const trainerKeys = new Set([...g.exact.keys(), ...g.mib.keys()]);
    const hasTrainer = [...trainerKeys].some((k) => k.startsWith('train_'));
    if (g.titan) frameworks.push('torchtitan');
    if (g.tune?.steps) frameworks.push('torchtune');
    if (hasTrainer) frameworks.push('transformers');
    if (g.tune?.init && !g.tune.steps) frameworks.push('torchtune (init)');
    if (!hasTrainer && trainerKeys.size) frameworks.push('transformers (init)');
    const framework = frameworks[0]!;
    if (framework === 'torchtitan') this.titanRun(g.titan!, phases, notes);
    else if (framework === 'torchtune') this.tuneRun(g.tune!, phases, notes);
    else if (framework === 'transformers' || framework === 'transformers (init)')
      this.trainerRun(g, phases, notes);
    else this.tuneInitOnly(g.tune!, notes);
    for (const other of frameworks.slice(1))
      notes.push(`the log also has ${other} memory lines: not used (one framework's figures are compared)`);
    for (const other of useful.slice(1))
      notes.push(
        `the lines of ${other.label ? `[${other.label}]` : 'no rank prefix'} also hold memory figures: not shown`,
      );
    if (g.rank !== null && g.label.startsWith('default'))
      notes.push(`[${g.label}] is torchrun's prefix for local rank ${g.rank}`);
    if (info.skippedBytes)
      notes.push(`only the log's last part was read: its first ${fmtBytes(info.skippedBytes)} were left`);
    if (this.stopped) notes.push(`only the first ${LOG_MAX_LINES} lines were read`);
    if (this.cut)
      notes.push(
        `${this.cut} line${this.cut === 1 ? '' : 's'} longer than ${LOG_LINE_CHARS} characters ${this.cut === 1 ? 'was' : 'were'} read in part`,
      );
    if (g.rank === null) notes.push('the log does not say which rank wrote it');
    notes.push('the log does not record the world size');
    return {
      source: 'log',
      rank: g.rank !== null && !g.label.startsWith('default') ? g.rank : null,
      worldSize: null,
      device,
      phases,
      settings: { framework: framework.replace(/ \(init\)$/, '') },
      notes,
    };
  }

  private titanRun(t: Titan, phases: MeasuredRun['phases'], notes: string[]): void {
    phases.step = { allocated: null, reserved: t.bytes };
    notes.push(
      `torchtitan log: ${t.lines} step lines (steps ${t.firstStep} to ${t.lastStep}); each line's "memory:" is the reserved peak since the line before (torch.cuda.memory_stats' reserved_bytes.all.peak in GiB of 2^30 bytes, to 0.01 GiB): the highest, ${t.text}GiB at step ${t.step}, is the reserved peak`,
    );
    notes.push(
      'torchtitan prints no allocated peak (its max_active goes to TensorBoard or W&B, not to the log): allocated is not measured',
    );
  }

  private tuneRun(t: Tune, phases: MeasuredRun['phases'], notes: string[]): void {
    phases.step = { allocated: t.alloc?.bytes ?? null, reserved: t.reserved?.bytes ?? null };
    const peaks = [
      t.alloc && `peak_memory_alloc ${t.alloc.text} GiB at step ${t.alloc.step}`,
      t.reserved && `peak_memory_reserved ${t.reserved.text} GiB at step ${t.reserved.step}`,
    ].filter((x): x is string => !!x);
    notes.push(
      `torchtune log: ${t.steps} metric lines (steps ${t.firstStep} to ${t.lastStep}); peak_memory_alloc is torch.cuda.max_memory_allocated and peak_memory_reserved torch.cuda.max_memory_reserved, in GiB of 2^30 bytes, each the peak since the line before: the highest are ${peaks.join(' and ')}`,
    );
    if (t.init)
      notes.push(`${t.init.message}: ${this.initFigures(t.init)} (not a training step's: not compared)`);
  }

  private tuneInitOnly(t: Tune, notes: string[]): void {
    const init = t.init!;
    notes.push(
      `torchtune log with only "${init.message}": ${this.initFigures(init)}. These are the peaks of building the model, not of a training step, so nothing is compared: set log_peak_memory_stats: True to log each step's peaks`,
    );
  }

  private initFigures(init: NonNullable<Tune['init']>): string {
    return [
      init.allocation && `${init.allocation} GiB allocated`,
      init.reserved && `${init.reserved} GiB reserved`,
      init.active && `${init.active} GiB active`,
    ]
      .filter((x) => !!x)
      .join(', ');
  }

  /** TrainerMemoryTracker's figures: deltas, made a peak only where the log gives what they are deltas of. */
  private trainerRun(g: Group, phases: MeasuredRun['phases'], notes: string[]): void {
    const roundedDown: string[] = [];
    const get = (k: string): number | null => {
      const exact = g.exact.get(k);
      if (exact !== undefined) return exact;
      const mib = g.mib.get(k);
      if (mib === undefined) return null;
      roundedDown.push(k);
      return mib * MIB;
    };
    const b = (n: number) => fmtBytes(n);
    const alloc = get('train_mem_gpu_alloc_delta');
    const peaked = get('train_mem_gpu_peaked_delta');
    const before = get('before_init_mem_gpu');
    const init = get('init_mem_gpu_alloc_delta');
    const head =
      'Hugging Face Trainer memory metrics (TrainerMemoryTracker): train_mem_gpu_alloc_delta is what train() left allocated above what it began with, train_mem_gpu_peaked_delta how far torch.cuda.max_memory_allocated rose above that end, so the peak of train() is its start plus both';
    if (alloc === null || peaked === null) {
      phases.step = { allocated: null, reserved: null };
      const known = [
        alloc !== null && `train_mem_gpu_alloc_delta ${b(alloc)}`,
        peaked !== null && `train_mem_gpu_peaked_delta ${b(peaked)}`,
        before !== null && `before_init_mem_gpu ${b(before)}`,
        init !== null && `init_mem_gpu_alloc_delta ${b(init)}`,
      ].filter((x): x is string => !!x);
      notes.push(
        `${head}; the log has ${known.join(', ')} and not ${alloc === null ? 'train_mem_gpu_alloc_delta' : 'train_mem_gpu_peaked_delta'}: the peak is not known`,
      );
    } else if (before === null || init === null) {
      phases.step = { allocated: null, reserved: null };
      notes.push(
        `${head}. The log gives only these deltas: the peak of train() rose ${b(peaked)} above what train() left allocated at its end, which is ${b(alloc)} above its start; neither the start nor the end is in the log, so the absolute peak is not known (before_init_mem_gpu and init_mem_gpu_alloc_delta, which the Trainer reports with its first train() metrics, would give the start)`,
      );
    } else {
      const peak = before + init + alloc + peaked;
      phases.step = { allocated: peak, reserved: null };
      notes.push(
        `${head}. Its start is taken as before_init_mem_gpu (${b(before)}) plus init_mem_gpu_alloc_delta (${b(init)}), what the Trainer's construction began with and added, assuming nothing else was allocated on the GPU between the Trainer's construction and train(): ${b(before)} + ${b(init)} + ${b(alloc)} + ${b(peaked)} = ${b(peak)}`,
      );
      notes.push(
        "that peak is over the whole of train() (the model, the optimizer's states, every step): a step's peak when the steps repeat",
      );
    }
    if (roundedDown.length)
      notes.push(
        `${roundedDown.join(', ')} come from the metrics block, which prints whole MiB rounded down (metrics_format's v >> 20): each may be short by up to 1 MiB`,
      );
    notes.push('the Trainer reports no reserved figure: reserved is not measured');
  }
}
