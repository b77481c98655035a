/**
 * Loads the Python grammar once per process from the WebAssembly files the bundles ship beside themselves
 * (dist/), or from a folder given on the first call.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { PYTHON_WASM, PythonGrammar, RUNTIME_WASM } from '../core/parsing/python';

let shared: Promise<PythonGrammar> | undefined;
let sharedDir: string | undefined;

/** The process-wide grammar. */
export function loadPython(wasmDir?: string): Promise<PythonGrammar> {
  if (!shared) {
    const dir = (sharedDir = wasmDir ?? defaultWasmDir());
    shared = (async () => {
      const runtime = path.join(dir, RUNTIME_WASM);
      const grammar = path.join(dir, PYTHON_WASM);
      for (const f of [runtime, grammar])
        if (!fs.existsSync(f)) throw new Error(`missing ${path.basename(f)} in ${dir}: run "npm run build"`);
      return PythonGrammar.load(runtime, fs.readFileSync(grammar));
    })();
    shared.catch(() => {
      shared = undefined;
    });
  }
  return shared;
}

/** Where the WASM files were loaded from (for messages). */
export function loadedWasmDir(): string | undefined {
  return sharedDir;
}

function defaultWasmDir(): string {
  const candidates = [__dirname, path.join(__dirname, '..'), path.join(__dirname, '..', '..', 'dist')];
  return candidates.find((d) => fs.existsSync(path.join(d, PYTHON_WASM))) ?? __dirname;
}
