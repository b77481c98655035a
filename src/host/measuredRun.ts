/** Reads a measured run from disk: the probe's JSON, a memory snapshot (streamed), or a training log (its end). */
import * as fs from 'node:fs';
import { readMeasuredRun, type MeasuredRun } from '../core/report/measured';
import { SnapshotReader } from '../core/report/snapshot';
import { LOG_LINE_CHARS, TrainingLogReader } from '../core/report/trainingLog';
import { fmtBytes } from '../core/vocabulary/bytes';

/** A probe's file is small; anything larger is not one. */
export const MAX_PROBE_BYTES = 1 << 20;
/** The most of a training log that is read: its last 64 MiB (the latest steps). */
export const MAX_LOG_BYTES = 64 * 2 ** 20;
const CHUNK = 1 << 20;

/** The kinds of RUN calibrate reads, for its help and its errors. */
export const RUN_KINDS =
  "fsdp_lens_probe.py's JSON, a PyTorch memory snapshot (the pickle torch.cuda.memory._dump_snapshot writes), or a training log of torchtitan, torchtune or the Hugging Face Trainer with its memory lines";

export type RunResult = MeasuredRun | { error: string };

/** A read the reader asks for: `length` bytes at `pos`. It is answered with the bytes read (none at the file's end). */
interface Read {
  pos: number;
  length: number;
}

/**
 * The reader of a run, as a generator of the reads it needs: the same steps whether the file is read at once
 * (`readRunFile`) or a chunk at a time between other work (`readRunFileAsync`).
 */
type Reading = Generator<Read, RunResult, Uint8Array>;

/**
 * The file's bytes from `start`, a chunk at a time, handed to `take` until it says to stop: a read per chunk of what
 * the file held when it was opened, and one more to find its end.
 */
function* chunks(
  start: number,
  size: number,
  take: (chunk: Uint8Array) => boolean,
): Generator<Read, void, Uint8Array> {
  let pos = start;
  for (let i = 0, reads = Math.ceil((size - start) / CHUNK) + 1; i < reads; i++) {
    const chunk = yield { pos, length: CHUNK };
    if (chunk.length === 0) return;
    pos += chunk.length;
    if (take(chunk)) return;
  }
}

/** The log's last `maxBytes`, line by line, through the training log reader. */
function* readLog(size: number, maxBytes: number): Generator<Read, RunResult, Uint8Array> {
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
  yield* chunks(start, size, (chunk) => {
    feed(decoder.decode(chunk, { stream: true }), false);
    return false;
  });
  feed(decoder.decode(), true);
  return reader.finish({ skippedBytes: start });
}

/** The run in a file of `size` bytes, whichever of the three kinds it is; an error in words when it is none of them. */
function* readRun(size: number, maxLogBytes: number): Reading {
  const head = Buffer.from(yield { pos: 0, length: Math.min(size, 4096) });
  // Every pickle of protocol 2 or later opens with PROTO (0x80); JSON and text never do.
  if (head[0] === 0x80) {
    const snapshot = new SnapshotReader();
    yield* chunks(0, size, (chunk) => snapshot.write(chunk));
    const r = snapshot.finish();
    return 'error' in r ? r : r.run;
  }
  let why = '';
  if (head.toString('utf8').trimStart().startsWith('{')) {
    if (size <= MAX_PROBE_BYTES) {
      const text = Buffer.from(yield { pos: 0, length: size }).toString('utf8');
      try {
        JSON.parse(text);
        return readMeasuredRun(text);
      } catch (e) {
        why = `not JSON (${e instanceof Error ? e.message : String(e)}), `;
      }
    } else why = `larger than ${MAX_PROBE_BYTES >> 10} KiB for a probe's JSON, `;
  }
  const log = yield* readLog(size, maxLogBytes);
  if ('error' in log) return { error: `${why}${log.error}: RUN is ${RUN_KINDS}` };
  return log;
}

/** A failure while reading, in words: a read that failed says why; anything else is this reader's fault. */
function readFailure(e: unknown): { error: string } {
  if ((e as NodeJS.ErrnoException).code) return { error: (e as Error).message };
  return {
    error: `internal error while reading it: ${e instanceof Error ? e.message : String(e)} (please report it)`,
  };
}

/** What the file is when it is not one to read: FIFOs, sockets and devices are never opened (reading them can block or never end). */
function notRegular(st: fs.Stats): { error: string } | undefined {
  return st.isFile() ? undefined : { error: st.isDirectory() ? 'a directory' : 'not a regular file' };
}

/**
 * The run in `file`, whichever of the three kinds it is; an error in words when it is none of them. `maxLogBytes`:
 * how much of a log's end is read.
 */
export function readRunFile(file: string, maxLogBytes = MAX_LOG_BYTES): RunResult {
  let fd: number;
  try {
    const refused = notRegular(fs.statSync(file));
    if (refused) return refused;
    fd = fs.openSync(file, 'r');
  } catch (e) {
    return { error: e instanceof Error ? e.message : String(e) };
  }
  try {
    const reading = readRun(fs.fstatSync(fd).size, maxLogBytes);
    const chunk = Buffer.alloc(CHUNK);
    for (let next = reading.next(); ;) {
      if (next.done) return next.value;
      const { pos, length } = next.value;
      const buf = length === CHUNK ? chunk : Buffer.alloc(length);
      const n = length ? fs.readSync(fd, buf, 0, length, pos) : 0;
      next = reading.next(buf.subarray(0, n));
    }
  } catch (e) {
    return readFailure(e);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * `readRunFile` a chunk at a time, leaving the thread to other work between chunks. `signal` stops it: the result
 * is then an error that says the signal's reason. `onRead` is told how far it has read.
 */
export async function readRunFileAsync(
  file: string,
  opts: { maxLogBytes?: number; signal?: AbortSignal; onRead?: (bytes: number) => void } = {},
): Promise<RunResult> {
  const stopped = (): { error: string } => ({
    error: typeof opts.signal?.reason === 'string' ? opts.signal.reason : 'stopped',
  });
  let fh: fs.promises.FileHandle;
  try {
    const refused = notRegular(await fs.promises.stat(file));
    if (refused) return refused;
    fh = await fs.promises.open(file, 'r');
  } catch (e) {
    return { error: e instanceof Error ? e.message : String(e) };
  }
  try {
    const reading = readRun((await fh.stat()).size, opts.maxLogBytes ?? MAX_LOG_BYTES);
    const chunk = Buffer.alloc(CHUNK);
    for (let next = reading.next(); ;) {
      if (next.done) return next.value;
      if (opts.signal?.aborted) return stopped();
      const { pos, length } = next.value;
      const buf = length === CHUNK ? chunk : Buffer.alloc(length);
      const n = length ? (await fh.read(buf, 0, length, pos)).bytesRead : 0;
      opts.onRead?.(pos + n);
      next = reading.next(buf.subarray(0, n));
    }
  } catch (e) {
    return readFailure(e);
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/** The longest a run is read for the footprint panel; the command line reads it to its end. */
export const PANEL_READ_MS = 10 * 60_000;
/** Runs kept read (each is a few phases and notes), the last asked for kept longest. */
const KEPT = 4;

interface Entry {
  /** The file's version the run was read from: its inode, size and modification time. */
  version: string;
  size: number;
  /** Bytes read so far. */
  read: number;
  done?: RunResult;
  promise: Promise<RunResult>;
  abort: AbortController;
}

/** The run's file has not been read to its end yet: how far the read is. */
export interface RunReading {
  reading: { bytes: number; size: number };
}

/**
 * The measured runs the footprint panel compares with, each read once per version of its file (the panel asks on
 * every update, and a memory snapshot can be gigabytes), a chunk at a time so that analyses go on meanwhile.
 */
export class MeasuredRuns {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly maxReadMs = PANEL_READ_MS) {}

  /**
   * The run in `file`, read now or before from the file as it is; while the read goes on, how far it is (`settled`
   * says when it ends). A read this call starts is waited for up to `waitMs`; one under way already is not.
   */
  async get(file: string, waitMs: number): Promise<RunResult | RunReading> {
    let st: fs.Stats;
    try {
      st = await fs.promises.stat(file);
    } catch (e) {
      return { error: e instanceof Error ? e.message : String(e) };
    }
    const version = `${st.ino}:${st.size}:${st.mtimeMs}`;
    let entry = this.entries.get(file);
    if (entry?.version === version) {
      // The last asked for is kept longest.
      this.entries.delete(file);
      this.entries.set(file, entry);
      return entry.done ?? { reading: { bytes: entry.read, size: entry.size } };
    }
    entry?.abort.abort('the file changed while it was read');
    entry = this.start(file, version, st.size);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const waited = await Promise.race([
      entry.promise,
      new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), waitMs))),
    ]);
    clearTimeout(timer);
    return waited ?? { reading: { bytes: entry.read, size: entry.size } };
  }

  /** Resolves when the read of `file` under way ends (at once when there is none). */
  async settled(file: string): Promise<void> {
    await this.entries.get(file)?.promise;
  }

  dispose(): void {
    for (const e of this.entries.values()) e.abort.abort('stopped');
    this.entries.clear();
  }

  private start(file: string, version: string, size: number): Entry {
    const abort = new AbortController();
    const entry = { version, size, read: 0, abort } as Entry;
    const limit = setTimeout(
      () =>
        abort.abort(
          `reading stopped after ${this.maxReadMs >= 60_000 ? `${Math.round(this.maxReadMs / 60_000)} minutes` : `${Math.round(this.maxReadMs / 1000)} s`}, at ${fmtBytes(entry.read)} of ${fmtBytes(size)}: \`fsdp-lens calibrate\` reads it to its end`,
        ),
      this.maxReadMs,
    );
    entry.promise = readRunFileAsync(file, {
      signal: abort.signal,
      onRead: (bytes) => (entry.read = Math.max(entry.read, bytes)),
    }).then((r) => {
      clearTimeout(limit);
      entry.done = r;
      return r;
    });
    this.entries.delete(file);
    this.entries.set(file, entry);
    while (this.entries.size > KEPT) {
      const [oldest, e] = this.entries.entries().next().value as [string, Entry];
      e.abort.abort('stopped');
      this.entries.delete(oldest);
    }
    return entry;
  }
}
