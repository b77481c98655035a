/**
 * Whole-tree commands on several cores: the files split into chunks that worker threads take in turn (each
 * thread keeps its own parsed project between chunks), the results returned in the order of the files.
 */
import * as os from 'node:os';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

/** A job a thread runs over a chunk of files: one result per file, in order. */
export type FileJob<A, R> = (files: string[], args: A) => Promise<R[]>;

/** The script threads run (the command-line bundle itself); unset where the tool runs inside another program. */
let workerScript: string | undefined;

/** Called by the command-line entry point with its own path, so that threads can run it. */
export function enableThreads(script: string): void {
  workerScript = script;
}

/** Files per chunk, and the fewest files worth a second thread (its start and parser cost about 60 ms). */
const CHUNK = 16;
const MIN_FILES = 64;

/** How many threads a run over `n` files uses: one per core, at most 4, none below `MIN_FILES`. */
export function threadsFor(n: number): number {
  if (!workerScript || n < MIN_FILES) return 0;
  const cores = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
  return Math.min(4, cores, Math.ceil(n / CHUNK));
}

interface Request {
  chunk: number;
  files: string[];
}

/** Runs `job` over the files: on threads when the machine has cores to spare, else here. */
export async function mapFiles<A, R>(
  name: string,
  job: FileJob<A, R>,
  files: string[],
  args: A,
): Promise<R[]> {
  const n = threadsFor(files.length);
  if (!n) return job(files, args);
  const chunks: string[][] = [];
  for (let i = 0; i < files.length; i += CHUNK) chunks.push(files.slice(i, i + CHUNK));
  const results: R[][] = new Array<R[]>(chunks.length);
  let next = 0;
  const run = (w: Worker) =>
    new Promise<void>((resolve, reject) => {
      let done = false;
      const give = () => {
        if (next >= chunks.length) {
          done = true;
          void w.terminate();
          resolve();
          return;
        }
        const chunk = next++;
        w.postMessage({ chunk, files: chunks[chunk]! } satisfies Request);
      };
      w.on('message', (m: { chunk: number; results?: R[]; error?: string }) => {
        if (m.error !== undefined) {
          done = true;
          void w.terminate();
          reject(new Error(m.error));
          return;
        }
        results[m.chunk] = m.results!;
        give();
      });
      w.on('error', reject);
      w.on('exit', (code) => {
        if (!done) reject(new Error(`a thread exited early (${code})`));
      });
      give();
    });
  const workers = Array.from(
    { length: n },
    () => new Worker(workerScript!, { workerData: { fsdpLensJob: name, args } }),
  );
  await Promise.all(workers.map(run));
  return results.flat();
}

/** In a thread: serves chunks of `job` until the main thread ends it. True when this is such a thread. */
export function serveThread(jobs: Record<string, FileJob<unknown, unknown>>): boolean {
  const data = workerData as { fsdpLensJob?: string; args?: unknown } | undefined;
  if (isMainThread || !parentPort || !data?.fsdpLensJob) return false;
  const job = jobs[data.fsdpLensJob];
  const port = parentPort;
  port.on('message', (m: Request) => {
    if (!job) {
      port.postMessage({ chunk: m.chunk, error: `unknown job ${data.fsdpLensJob}` });
      return;
    }
    job(m.files, data.args).then(
      (results) => port.postMessage({ chunk: m.chunk, results }),
      (e: unknown) =>
        port.postMessage({ chunk: m.chunk, error: e instanceof Error ? (e.stack ?? e.message) : String(e) }),
    );
  });
  return true;
}
