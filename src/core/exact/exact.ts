/**
 * Exact mode: the model measured by PyTorch on the meta device, in the user's own Python (only where the
 * workspace is trusted). The core finds the class and its constructor and reads the helper's answer; the edge
 * runs the process.
 */
import type { FileFacts } from '../analysis/facts';
import { countParams, numelOf, type ModuleNode } from '../model/tree';
import { isDType, torchDtype } from '../vocabulary/dtypes';
import { modelFromScript } from '../modules/resolveModel';
import type { Project } from '../project/project';

export interface ExactRequest {
  python: string;
  /** Directories to put on sys.path (the project roots). */
  roots: string[];
  /** The file defining the model class, and the class. */
  file: string;
  cls: string;
  /** The constructor as a Python expression (may use `_cls(file, name)`), or undefined for `cls()`. */
  ctor?: string;
  timeoutMs: number;
  signal?: AbortSignal;
}

export type ExactResult =
  | {
      ok: true;
      root: ModuleNode;
      torch: string;
      python: string;
      seconds: number;
      /** FSDP names this PyTorch lacks that the model's code imports, given placeholders to build the model. */
      stubbed?: string[];
    }
  | { ok: false; error: string; detail?: string };

interface HelperModule {
  path: string;
  cls: string;
  params: { name: string; shape: number[]; dtype: string; requires_grad: boolean; tied_to?: string }[];
  buffers: { name: string; shape: number[]; dtype: string; persistent: boolean }[];
}

/** Runs the measuring helper for a request (the edge spawns the user's Python: src/host/exact.ts). */
export type ExactRunner = (req: ExactRequest) => Promise<ExactResult>;

/** The last JSON line of the helper's output (and its stderr, for failures) as a result. */
export function helperResult(stdout: string, stderr: string, seconds: number): ExactResult {
  const line = stdout.trim().split('\n').pop() ?? '';
  let json: {
    ok: boolean;
    error?: string;
    detail?: string;
    torch?: string;
    python?: string;
    modules?: HelperModule[];
    stubbed?: string[];
  };
  try {
    json = JSON.parse(line);
  } catch {
    const last = stderr.trim().split('\n').pop();
    return { ok: false, error: last ? `the helper failed: ${last}` : 'the helper printed no result' };
  }
  if (!json.ok || !json.modules) {
    // One bounded line each: the error, and where in the user's code it came from (not the error again).
    const error = bounded(json.error?.trim().split('\n')[0] || 'the helper failed');
    const detail = json.detail ? bounded(lastLine(json.detail)) : undefined;
    return { ok: false, error, ...(detail && !error.includes(detail) ? { detail } : {}) };
  }
  return {
    ok: true,
    root: treeFromHelper(json.modules),
    torch: json.torch ?? '?',
    python: json.python ?? '?',
    seconds,
    ...(json.stubbed?.length ? { stubbed: json.stubbed.slice(0, 20).map((n) => bounded(n, 120)) } : {}),
  };
}

function lastLine(traceback: string): string {
  return traceback.trim().split('\n').filter(Boolean).pop() ?? traceback;
}

function bounded(s: string, max = 400): string {
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

/** The module tree the helper reported (modules in `named_modules()` order, tied parameters marked). */
export function treeFromHelper(modules: HelperModule[]): ModuleNode {
  const byPath = new Map<string, ModuleNode>();
  let root: ModuleNode | undefined;
  for (const m of modules) {
    const name = m.path.includes('.') ? m.path.slice(m.path.lastIndexOf('.') + 1) : m.path;
    const node: ModuleNode = {
      name,
      path: m.path,
      className: m.cls,
      params: m.params.map((p) => {
        const dt = torchDtype(p.dtype) ?? p.dtype;
        return {
          name: p.name,
          shape: p.shape,
          numel: numelOf(p.shape),
          trainable: p.requires_grad,
          ...(isDType(dt) && dt !== 'float32' ? { dtype: dt } : {}),
          ...(p.tied_to ? { tiedTo: p.tied_to } : {}),
        };
      }),
      buffers: m.buffers.map((b) => {
        const dt = torchDtype(b.dtype) ?? b.dtype;
        return {
          name: b.name,
          shape: b.shape,
          numel: numelOf(b.shape),
          dtype: isDType(dt) ? dt : 'float32',
          persistent: b.persistent,
        };
      }),
      children: [],
    };
    byPath.set(m.path, node);
    if (!m.path) root = node;
    else {
      const parent = byPath.get(m.path.includes('.') ? m.path.slice(0, m.path.lastIndexOf('.')) : '');
      parent?.children.push(node);
    }
  }
  // A module reached twice (shared) appears once in named_modules(): its second parent keeps no child here.
  return root ?? { name: '', path: '', className: 'Module', params: [], buffers: [], children: [] };
}

/** What exact mode measured, ready for the estimate, and how it compares with the static reading. */
export interface ExactModel {
  root: ModuleNode;
  origin: string;
  /** Parameters the static analysis found, for the comparison note. */
  staticParams: number | null;
}

/**
 * Exact mode for a script: the model class and constructor come from the static reading (the script's wrap calls
 * followed to the model's construction), the counts from PyTorch.
 */
export async function exactForScript(
  project: Project,
  facts: FileFacts,
  opts: { python: string; timeoutMs: number; signal?: AbortSignal; choice?: string; run: ExactRunner },
): Promise<{ ok: true; model: ExactModel } | { ok: false; error: string; detail?: string }> {
  const r = modelFromScript(project, facts, opts.choice ? { choice: opts.choice } : {});
  if (!r.ok) return { ok: false, error: `the model class was not found: ${r.reason}` };
  const m = r.model;
  const res = await opts.run({
    python: opts.python,
    roots: project.roots,
    file: m.classRef.file,
    cls: m.classRef.name,
    ...(m.constructor ? { ctor: m.constructor } : {}),
    timeoutMs: opts.timeoutMs,
    ...(opts.signal ? { signal: opts.signal } : {}),
  });
  if (!res.ok) return res;
  return {
    ok: true,
    model: {
      root: res.root,
      origin:
        `${m.className} built by PyTorch ${res.torch} (Python ${res.python}, ${opts.python}) on the meta device in ${res.seconds.toFixed(1)} s` +
        (res.stubbed
          ? `; ${res.stubbed.join(', ')} not in this PyTorch, given placeholders (counting parameters needs no FSDP)`
          : ''),
      staticParams: countParams(m.root),
    },
  };
}
