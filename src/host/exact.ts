/**
 * Runs exact mode's helper (python/fsdp_lens_measure.py) in the user's Python: it imports the model's module and
 * builds the model on the meta device, so nothing is allocated and no training code runs. Bounded by a time
 * limit, cancellable, and its output read by the core (`helperResult`).
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { helperResult, type ExactRequest, type ExactResult } from '../core/exact/exact';

/** The helper script shipped beside the bundles (dist/), or in python/ of a source checkout. */
export const HELPER = 'fsdp_lens_measure.py';

export function helperPath(): string {
  const candidates = [
    path.join(__dirname, HELPER),
    path.join(__dirname, '..', 'python', HELPER),
    path.join(__dirname, '..', '..', '..', 'python', HELPER),
  ];
  return candidates.find((p) => fs.existsSync(p)) ?? candidates[0]!;
}

export function runExactHelper(req: ExactRequest): Promise<ExactResult> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'fsdp-lens-exact-'));
  const reqFile = path.join(tmp, 'request.json');
  fs.writeFileSync(
    reqFile,
    JSON.stringify({ roots: req.roots, file: req.file, cls: req.cls, ctor: req.ctor ?? null }),
  );
  const started = Date.now();
  return new Promise<ExactResult>((resolve) => {
    let out = '';
    let err = '';
    let settled = false;
    const finish = (r: ExactResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.signal?.removeEventListener('abort', onAbort);
      fs.rmSync(tmp, { recursive: true, force: true });
      resolve(r);
    };
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn(req.python, [helperPath(), reqFile], {
        cwd: req.roots[0] ?? path.dirname(req.file),
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
      });
    } catch (e) {
      finish({ ok: false, error: `cannot run ${req.python}: ${e instanceof Error ? e.message : String(e)}` });
      return;
    }
    const onAbort = () => {
      child.kill('SIGKILL');
      finish({ ok: false, error: 'cancelled' });
    };
    req.signal?.addEventListener('abort', onAbort);
    // Node's timers take at most 2^31 - 1 ms; longer limits would fire at once.
    const timer = setTimeout(
      () => {
        child.kill('SIGKILL');
        finish({
          ok: false,
          error: `measuring took longer than ${Math.round(req.timeoutMs / 1000)} s and was stopped`,
        });
      },
      Math.min(req.timeoutMs, 2 ** 31 - 1),
    );
    child.stdout!.on('data', (b: Buffer) => {
      if (out.length < 64 * 1024 * 1024) out += b.toString();
    });
    child.stderr!.on('data', (b: Buffer) => {
      err = (err + b.toString()).slice(-8000);
    });
    child.on('error', (e: NodeJS.ErrnoException) =>
      finish({
        ok: false,
        error:
          e.code === 'ENOENT' ? `Python not found: ${req.python}` : `cannot run ${req.python}: ${e.message}`,
      }),
    );
    child.on('close', () => finish(helperResult(out, err, (Date.now() - started) / 1000)));
  });
}
