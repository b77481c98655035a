/**
 * The analysis worker's entry: a thread of the extension host that loads the grammar, runs the analysis service
 * and answers the editor's messages one at a time. An analysis the editor no longer wants is cancelled through a
 * shared flag the work budget reads, since a running analysis leaves no turn for a message.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { loadPython } from '../host/grammar';
import type { FromWorker, ToWorker } from './protocol';
import { AnalysisService } from './service';

const port = parentPort!;
const { wasmDir, cancelFlag } = workerData as { wasmDir: string; cancelFlag: SharedArrayBuffer };
/** The ids of the requests the editor cancelled, each in the slot of its id modulo the length. */
const cancelled = new Int32Array(cancelFlag);
const send = (m: FromWorker) => port.postMessage(m);
const aborts = new Map<number, AbortController>();

async function main(): Promise<void> {
  const service = new AnalysisService(await loadPython(wasmDir));
  const handle = async (m: ToWorker): Promise<void> => {
    switch (m.kind) {
      case 'close':
        return service.close(m.uri);
      case 'invalidate':
        return service.invalidate(m.file, m.contentOnly);
      case 'forgetExact':
        return service.forgetExact(m.uri);
      case 'reset':
        return service.reset();
      case 'cancel':
        aborts.get(m.id)?.abort();
        return;
    }
    try {
      let value: unknown;
      if (m.kind === 'analyze')
        value = service.analyze(m, () => Atomics.load(cancelled, m.id % cancelled.length) === m.id);
      else if (m.kind === 'panel') value = await service.panel(m);
      else if (m.kind === 'models') value = service.models(m.uri);
      else if (m.kind === 'measuredRun') value = await service.measuredRunRead(m.file);
      else {
        const abort = new AbortController();
        aborts.set(m.id, abort);
        try {
          value = await service.measure(m, abort.signal);
        } finally {
          aborts.delete(m.id);
        }
      }
      send({ kind: 'reply', id: m.id, value });
    } catch (e) {
      send({ kind: 'failed', id: m.id, message: e instanceof Error ? (e.stack ?? e.message) : String(e) });
    }
  };
  port.on('message', (m: ToWorker) => void handle(m));
  send({ kind: 'ready' });
}

main().catch((e: unknown) => {
  send({ kind: 'log', level: 'error', message: `the analysis worker could not start: ${String(e)}` });
  process.exit(1);
});
