/**
 * The editor's side of the analysis worker: starts the thread with a memory limit, sends requests and matches
 * their answers, cancels, and replaces a worker that stops answering or dies (out of memory, a fatal error), so
 * that no input can block the extension host or take it down.
 */
import * as path from 'node:path';
import { Worker } from 'node:worker_threads';
import type * as vscode from 'vscode';
import type { FromWorker, Notice, Request } from '../worker/protocol';

/** The heap a worker may use before it is stopped (the extension host itself is left alone). */
export const WORKER_HEAP_MB = 1536;

/** Cancelled request ids the worker can see at once (queued requests included). */
export const CANCEL_SLOTS = 64;

/** The answer of a request the worker did not give: it stopped, ran past its time, or failed. */
export class WorkerStopped extends Error {}

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
  timer: ReturnType<typeof setTimeout>;
}

export class AnalysisWorker {
  private worker?: Worker;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  /** Ids of cancelled requests, one slot per id modulo the length: the worker reads it while it analyses. */
  private readonly cancelFlag = new SharedArrayBuffer(4 * CANCEL_SLOTS);
  /** Increases each time a new worker starts: what the old one held (trees, projects) is gone. */
  generation = 0;
  private readonly restarted: (() => void)[] = [];

  constructor(
    private readonly distDir: string,
    private readonly log?: vscode.LogOutputChannel,
  ) {}

  /** Called when a new worker replaces one that stopped (callers send full texts again). */
  onRestart(listener: () => void): void {
    this.restarted.push(listener);
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    this.generation++;
    const w = new Worker(path.join(this.distDir, 'worker.js'), {
      workerData: { wasmDir: this.distDir, cancelFlag: this.cancelFlag },
      resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB },
    });
    w.on('message', (m: FromWorker) => this.onMessage(m));
    w.on('error', (e: Error & { code?: string }) => {
      const why =
        e.code === 'ERR_WORKER_OUT_OF_MEMORY'
          ? `it needed more than ${WORKER_HEAP_MB / 1024} GB of memory`
          : `it failed: ${e.message}`;
      this.log?.error(`the analysis worker stopped: ${why}`);
      this.stopped(w, `the analysis stopped: ${why}`);
    });
    w.on('exit', (code) => this.stopped(w, `the analysis worker exited (${code})`));
    this.worker = w;
    return w;
  }

  private onMessage(m: FromWorker): void {
    if (m.kind === 'log') {
      this.log?.[m.level](m.message);
      return;
    }
    if (m.kind === 'ready') return;
    const p = this.pending.get(m.id);
    if (!p) return;
    this.pending.delete(m.id);
    clearTimeout(p.timer);
    if (m.kind === 'reply') p.resolve(m.value);
    else p.reject(new WorkerStopped(m.message));
  }

  /** Every request of a worker that stopped fails with the reason; the next request starts a new worker. */
  private stopped(w: Worker, why: string): void {
    if (this.worker !== w) return;
    this.worker = undefined;
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(new WorkerStopped(why));
    }
    this.pending.clear();
    void w.terminate();
    for (const l of this.restarted) l();
  }

  /**
   * Sends a request; its answer, or a WorkerStopped error. A request that takes longer than `timeoutMs` stops the
   * worker (an analysis is bounded well below that: this is for what the bounds did not foresee).
   */
  request<T>(req: Request, timeoutMs: number, onId?: (id: number) => void): Promise<T> {
    const w = this.start();
    const id = this.nextId++;
    onId?.(id);
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.log?.error(
          `the analysis worker took longer than ${timeoutMs / 1000} s on ${req.kind} ${'uri' in req ? req.uri : ''}: restarted`,
        );
        this.stopped(w, `the analysis ran past ${timeoutMs / 1000} s and was stopped`);
      }, timeoutMs);
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject, timer });
      w.postMessage({ ...req, id });
    });
  }

  /** Cancels a request: an analysis ends at its next look at the budget, exact mode stops its process. */
  cancel(id: number): void {
    Atomics.store(new Int32Array(this.cancelFlag), id % CANCEL_SLOTS, id);
    this.notify({ kind: 'cancel', id });
  }

  /** A message that needs no answer (sent only to a running worker: a new one knows nothing to forget). */
  notify(n: Notice): void {
    this.worker?.postMessage(n);
  }

  dispose(): void {
    const w = this.worker;
    this.worker = undefined;
    for (const p of this.pending.values()) clearTimeout(p.timer);
    this.pending.clear();
    void w?.terminate();
  }
}
