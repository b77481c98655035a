/** Reads calibrate's RUN from disk: the probe's JSON, a memory snapshot (streamed), or a training log (its end). */
import * as fs from 'node:fs';
import { readMeasuredRun, type MeasuredRun } from '../core/report/measured';
import { readSnapshot } from '../core/report/snapshot';
import { LOG_LINE_CHARS, TrainingLogReader } from '../core/report/trainingLog';

/** A probe's file is small; anything larger is not one. */
export const MAX_PROBE_BYTES = 1 << 20;
/** The most of a training log that is read: its last 64 MiB (the latest steps). */
export const MAX_LOG_BYTES = 64 * 2 ** 20;
const CHUNK = 1 << 20;

/** The kinds of RUN calibrate reads, for its help and its errors. */
export const RUN_KINDS =
  "fsdp_lens_probe.py's JSON, a PyTorch memory snapshot (the pickle torch.cuda.memory._dump_snapshot writes), or a training log of torchtitan, torchtune or the Hugging Face Trainer with its memory lines";

/** The bytes of `fd` from `start`, a chunk at a time as they are asked for (the chunk's buffer is reused). */
function* chunks(fd: number, start: number, size: number): Generator<Uint8Array> {
  const buf = Buffer.alloc(CHUNK);
  let pos = start;
  // A read per chunk of what the file held when it was opened, and one more to find its end.
  for (let i = 0, reads = Math.ceil((size - start) / CHUNK) + 1; i < reads; i++) {
    const n = fs.readSync(fd, buf, 0, CHUNK, pos);
    if (n === 0) return;
    pos += n;
    yield buf.subarray(0, n);
  }
}

/** The log's last `maxBytes`, line by line, through the training log reader. */
function readLog(fd: number, size: number, maxBytes: number): MeasuredRun | { error: string } {
  const start = Math.max(0, size - maxBytes);
  const reader = new TrainingLogReader();
  const decoder = new TextDecoder('utf-8');
  // Started inside the file: what comes before the first line break is the end of a line that was not read.
  let skipping = start > 0;
  let carry = '';
  const feed = (text: string, last: boolean) => {
    const parts = (carry + text).split(/\r\n|\n|\r/);
    carry = last ? '' : parts.pop()!;
    for (const p of parts) {
      if (skipping) skipping = false;
      else reader.line(p);
    }
    // A line with no break in sight is kept only as far as the reader reads one (one character more says it is cut).
    if (carry.length > LOG_LINE_CHARS + 1) carry = carry.slice(0, LOG_LINE_CHARS + 1);
  };
  for (const chunk of chunks(fd, start, size)) feed(decoder.decode(chunk, { stream: true }), false);
  feed(decoder.decode(), true);
  return reader.finish({ skippedBytes: start });
}

/**
 * The run in `file`, whichever of the three kinds it is; an error in words when it is none of them. `maxLogBytes`:
 * how much of a log's end is read.
 */
export function readRunFile(file: string, maxLogBytes = MAX_LOG_BYTES): MeasuredRun | { error: string } {
  let fd: number;
  try {
    const st = fs.statSync(file);
    // FIFOs, sockets and devices are never opened: reading them can block or never end.
    if (!st.isFile()) return { error: st.isDirectory() ? 'a directory' : 'not a regular file' };
    fd = fs.openSync(file, 'r');
  } catch (e) {
    return { error: e instanceof Error ? e.message : String(e) };
  }
  try {
    const size = fs.fstatSync(fd).size;
    const head = Buffer.alloc(Math.min(size, 4096));
    fs.readSync(fd, head, 0, head.length, 0);
    // Every pickle of protocol 2 or later opens with PROTO (0x80); JSON and text never do.
    if (head[0] === 0x80) {
      const r = readSnapshot(chunks(fd, 0, size));
      return 'error' in r ? r : r.run;
    }
    let why = '';
    if (head.toString('utf8').trimStart().startsWith('{')) {
      if (size <= MAX_PROBE_BYTES) {
        const bytes = Buffer.alloc(size);
        fs.readSync(fd, bytes, 0, size, 0);
        const text = bytes.toString('utf8');
        try {
          JSON.parse(text);
          return readMeasuredRun(text);
        } catch (e) {
          why = `not JSON (${e instanceof Error ? e.message : String(e)}), `;
        }
      } else why = `larger than ${MAX_PROBE_BYTES >> 10} KiB for a probe's JSON, `;
    }
    const log = readLog(fd, size, maxLogBytes);
    if ('error' in log) return { error: `${why}${log.error}: RUN is ${RUN_KINDS}` };
    return log;
  } catch (e) {
    // A read that failed (the file went away, an I/O error) says why; anything else is this reader's fault.
    if ((e as NodeJS.ErrnoException).code) return { error: (e as Error).message };
    return {
      error: `internal error while reading it: ${e instanceof Error ? e.message : String(e)} (please report it)`,
    };
  } finally {
    fs.closeSync(fd);
  }
}
