// Training logs read for their memory lines. Each log here is written for this test in the exact format the
// framework's source prints (the function is named above each), with the figures derived by hand.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { MeasuredRun } from '../../src/core/report/measured';
import { TrainingLogReader } from '../../src/core/report/trainingLog';

const GiB = 2 ** 30;
const MiB = 2 ** 20;
const ESC = String.fromCharCode(27);

function read(lines: string[], skippedBytes = 0): MeasuredRun {
  const r = new TrainingLogReader();
  for (const l of lines) r.line(l);
  const run = r.finish({ skippedBytes });
  if ('error' in run) throw new Error(run.error);
  return run;
}

// torchtitan/components/metrics.py: build_device_memory_monitor logs the capacity line, MetricsProcessor.log the
// step line (colours from torchtitan/tools/utils.py Color unless disable_color_printing), log_validation the
// "validate step" line; torchtitan/tools/logging.py formats each as "[titan] %(asctime)s - %(name)s - %(levelname)s
// - %(message)s".
const TITAN = [
  '[titan] 2025-03-02 10:14:03,112 - root - INFO - Starting job: Llama 3 8B training',
  '[titan] 2025-03-02 10:14:03,118 - root - INFO - CUDA capacity: NVIDIA H100 80GB HBM3 with 79.11GiB memory',
  '[titan] 2025-03-02 10:15:40,005 - root - INFO - step:  1  loss: 12.0183  grad_norm:  3.9211  memory: 41.27GiB(52.17%)  tps: 1,204  tflops: 70.12  mfu: 7.09%',
  `[titan] 2025-03-02 10:16:31,772 - root - INFO - ${ESC}[31mstep: 10  ${ESC}[32mloss:  9.4410  ${ESC}[38;2;180;60;0mgrad_norm:  1.2208  ${ESC}[36mmemory: 61.50GiB(77.74%)  ${ESC}[34mtps: 6,811  ${ESC}[36mtflops: 396.71  ${ESC}[35mmfu: 40.11%${ESC}[39m`,
  '[titan] 2025-03-02 10:16:40,101 - root - INFO - validate step: 10  loss:  9.3001  memory: 70.00GiB(88.49%)  tps: 9,000',
  '[titan] 2025-03-02 10:17:22,630 - root - INFO - step: 20  loss:  8.1276  grad_norm:  0.9132  memory: 61.25GiB(77.43%)  tps: 6,822  tflops: 397.35  mfu: 40.18%',
];

// torchtune/training/memory.py log_memory_stats (through torchtune.utils.get_logger's default format), then the
// recipe's metric logger, training/metric_logging.py StdoutLogger.log_dict: "Step {step} | " and "{name}:{data} ".
const TUNE = [
  'INFO:torchtune.utils._logging:Memory stats after model init:',
  '\tGPU peak memory allocation: 16.15 GiB',
  '\tGPU peak memory reserved: 16.21 GiB',
  '\tGPU peak memory active: 16.15 GiB',
  '1|1|Loss: 1.8451969623565674:   0%|          | 1/1000 [00:04<1:07:00,  4.02s/it]',
  'Step 1 | loss:1.8451969623565674 lr:2e-05 tokens_per_second_per_gpu:2213.846435546875 peak_memory_active:25.604712009429932 peak_memory_alloc:25.604712009429932 peak_memory_reserved:29.703125 ',
  'Step 2 | loss:1.7002 lr:2e-05 tokens_per_second_per_gpu:2390.1 peak_memory_active:27.25 peak_memory_alloc:27.125 peak_memory_reserved:29.5 ',
];

// transformers/trainer.py: train() logs its metrics (TrainerMemoryTracker.update_metrics adds the memory ones, in
// bytes) as a dict, and Trainer.log_metrics prints them under "***** train metrics *****" formatted by
// trainer_pt_utils.metrics_format (f"{v >> 20}MB" for keys with "_mem_").
const TRAINER_DICT =
  "{'train_runtime': 120.5012, 'train_samples_per_second': 8.299, 'train_steps_per_second': 0.519, 'train_loss': 1.2345, 'init_mem_cpu_alloc_delta': 1171456, 'init_mem_gpu_alloc_delta': 16060055552, 'init_mem_cpu_peaked_delta': 0, 'init_mem_gpu_peaked_delta': 0, 'train_mem_cpu_alloc_delta': 245760000, 'train_mem_gpu_alloc_delta': 32120111104, 'train_mem_cpu_peaked_delta': 0, 'train_mem_gpu_peaked_delta': 9663676416, 'before_init_mem_cpu': 1293942784, 'before_init_mem_gpu': 0, 'epoch': 1.0}";
const TRAINER_BLOCK = [
  '***** train metrics *****',
  '  before_init_mem_cpu        =     1234MB',
  '  before_init_mem_gpu        =      512MB',
  '  epoch                      =        1.0',
  '  init_mem_cpu_alloc_delta   =        1MB',
  '  init_mem_cpu_peaked_delta  =        0MB',
  '  init_mem_gpu_alloc_delta   =    15316MB',
  '  init_mem_gpu_peaked_delta  =        0MB',
  '  train_loss                 =     1.2345',
  '  train_mem_cpu_alloc_delta  =      234MB',
  '  train_mem_cpu_peaked_delta =        0MB',
  '  train_mem_gpu_alloc_delta  =    30632MB',
  '  train_mem_gpu_peaked_delta =     9216MB',
  '  train_runtime              = 0:02:00.50',
];

describe('a training log read for its memory lines', () => {
  it("torchtitan: the step lines' reserved peak (GiB), not the validation line's; allocated is not printed", () => {
    const run = read(TITAN);
    assert.deepEqual(run.phases, { step: { allocated: null, reserved: Math.round(61.5 * GiB) } });
    assert.equal(run.device, 'NVIDIA H100 80GB HBM3');
    assert.equal(run.source, 'log');
    assert.equal(run.settings.framework, 'torchtitan');
    const notes = run.notes.join('\n');
    assert.match(notes, /3 step lines \(steps 1 to 20\)/);
    assert.match(notes, /61\.50GiB at step 10, is the reserved peak/);
    assert.match(notes, /prints no allocated peak/);
  });

  it("torchtune: each metric line's peak_memory_alloc and peak_memory_reserved (GiB), the highest of each", () => {
    const run = read(TUNE);
    assert.deepEqual(run.phases, {
      step: { allocated: Math.round(27.125 * GiB), reserved: Math.round(29.703125 * GiB) },
    });
    const notes = run.notes.join('\n');
    assert.match(notes, /2 metric lines \(steps 1 to 2\)/);
    assert.match(
      notes,
      /peak_memory_alloc 27\.125 GiB at step 2 and peak_memory_reserved 29\.703125 GiB at step 1/,
    );
    assert.match(
      notes,
      /Memory stats after model init: 16\.15 GiB allocated, 16\.21 GiB reserved, 16\.15 GiB active \(not a training step's/,
    );
  });

  it("torchtune's memory stats after model init alone: not a step, so nothing is compared", () => {
    const run = read(TUNE.slice(0, 4));
    assert.deepEqual(run.phases, {});
    assert.match(
      run.notes.join('\n'),
      /only "Memory stats after model init": 16\.15 GiB allocated.*not of a training step/,
    );
  });

  it("the Trainer's logged dict: the peak is train()'s start plus its two deltas, the start labelled an assumption", () => {
    const run = read(['  0%|          | 0/58 [00:00<?, ?it/s]', TRAINER_DICT]);
    // before_init_mem_gpu + init_mem_gpu_alloc_delta + train_mem_gpu_alloc_delta + train_mem_gpu_peaked_delta.
    assert.deepEqual(run.phases, {
      step: { allocated: 0 + 16060055552 + 32120111104 + 9663676416, reserved: null },
    });
    const notes = run.notes.join('\n');
    assert.match(
      notes,
      /assuming nothing else was allocated on the GPU between the Trainer's construction and train\(\)/,
    );
    assert.match(notes, /reports no reserved figure/);
    assert.doesNotMatch(notes, /rounded down/);
  });

  it("the Trainer's metrics block: whole MiB rounded down, and said so", () => {
    const run = read(TRAINER_BLOCK);
    assert.deepEqual(run.phases, { step: { allocated: (512 + 15316 + 30632 + 9216) * MiB, reserved: null } });
    assert.match(run.notes.join('\n'), /whole MiB rounded down \(metrics_format's v >> 20\)/);
  });

  it('the Trainer with its deltas only: the absolute peak is not known, and no delta is given as one', () => {
    const run = read([
      '***** train metrics *****',
      '  train_mem_gpu_alloc_delta  =    30632MB',
      '  train_mem_gpu_peaked_delta =     9216MB',
    ]);
    assert.deepEqual(run.phases, { step: { allocated: null, reserved: null } });
    assert.match(run.notes.join('\n'), /the absolute peak is not known/);
  });

  it("a log of several ranks (torchrun's [rankN]: prefix): the lowest rank's lines, the others named", () => {
    const run = read([
      `[rank1]:${TITAN[2]!}`,
      `[rank0]:${TITAN[1]!}`,
      `[rank0]:${TITAN[3]!}`,
      `[rank1]:${TITAN[3]!.replace('61.50GiB', '63.00GiB')}`,
    ]);
    assert.equal(run.rank, 0);
    assert.deepEqual(run.phases, { step: { allocated: null, reserved: Math.round(61.5 * GiB) } });
    assert.match(run.notes.join('\n'), /\[rank1\] also hold memory figures: not shown/);
  });

  it('says what was not read: the start of a long log, and what is not recorded', () => {
    const run = read(TITAN, 5 * 2 ** 30);
    const notes = run.notes.join('\n');
    assert.match(notes, /its first 5\.37 GB were left/);
    assert.match(notes, /does not say which rank wrote it/);
    assert.match(notes, /does not record the world size/);
  });

  it('finds nothing in a log without memory lines, and says which lines it looks for', () => {
    const r = new TrainingLogReader();
    r.line('epoch 1: loss 2.3');
    r.line('step 5 loss 1.9 memory 12GB');
    const run = r.finish();
    assert.ok('error' in run);
    assert.match(run.error, /no memory line of torchtitan .* torchtune .* or the Hugging Face Trainer/);
  });

  it('reads only the start of a very long line', () => {
    const r = new TrainingLogReader();
    r.line(`${'x'.repeat(100_000)} ${TITAN[2]!}`);
    r.line(TITAN[3]!);
    const run = r.finish();
    assert.ok(!('error' in run));
    assert.match(run.notes.join('\n'), /1 line longer than 16384 characters was read in part/);
  });
});
