/**
 * The extension's settings for one resource, read in one place (the estimate inputs through the table of inputs).
 */
import * as vscode from 'vscode';
import type { ByteUnit } from '../core/vocabulary/bytes';
import { DEFAULT_LINT_OPTIONS, type LintOptions, type SeveritySetting } from '../core/lint/types';
import { parseInput, SETTING_INPUTS, type SetupValues } from '../core/inputs/table';
import { LENS_PARTS } from '../core/report/lens';

export const SECTION = 'fsdpLens';

/** The extension's settings for one resource, read in one place. */
export interface Settings {
  codeLensEnabled: boolean;
  /** Which parts a lens line shows (`LENS_PARTS`), in their order. */
  codeLensSegments: readonly string[];
  statusBarEnabled: boolean;
  maxFileSizeKB: number;
  analysisDelayMs: number;
  lint: LintOptions & { enabled: boolean };
  /** Estimate inputs the user set (unset ones are left to the script, annotations and defaults). */
  estimate: SetupValues;
  /** The model to fall back on when the script does not say: a Hugging Face id or a config.json path. */
  model: string | null;
  /** The model setting is the user's own (not a workspace's): a path it names may lie outside the workspace. */
  modelIsUsers: boolean;
  units: ByteUnit;
}

export function readSettings(scope?: vscode.ConfigurationScope): Settings {
  const c = vscode.workspace.getConfiguration(SECTION, scope);
  return {
    codeLensEnabled: c.get<boolean>('codeLens.enabled', true),
    codeLensSegments: stringList(c.get<unknown>('codeLens.segments'), LENS_PARTS),
    statusBarEnabled: c.get<boolean>('statusBar.enabled', true),
    maxFileSizeKB: clamp(c.get<number>('maxFileSizeKB', 4096), 1, 1024 * 1024),
    analysisDelayMs: clamp(c.get<number>('analysisDelayMs', 250), 0, 10_000),
    lint: {
      enabled: c.get<boolean>('lint.enabled', true),
      minTorchVersion: c.get<string>('minTorchVersion', DEFAULT_LINT_OPTIONS.minTorchVersion),
      rules: severities(c.get<Record<string, unknown>>('lint.rules', {})),
      editor: true,
    },
    estimate: estimateValues(c),
    model: nonEmpty(c.get<string | null>('model', null)),
    modelIsUsers: modelIsUsers(c),
    units: c.get<string>('units', 'GB') === 'GiB' ? 'GiB' : 'GB',
  };
}

/** Settings that feed the estimate (the inputs the table gives a setting); a value that does not parse is ignored. */
function estimateValues(c: vscode.WorkspaceConfiguration): SetupValues {
  const out: Record<string, unknown> = {};
  for (const { key, setting } of SETTING_INPUTS) {
    const v = c.get<unknown>(setting.name, null);
    // Unset: empty, or 0 for a count (no count input takes 0).
    if (v === null || v === undefined || v === '' || v === 0) continue;
    try {
      out[key] = parseInput(key, String(v), `fsdpLens.${setting.name}`);
    } catch {
      // An invalid value is as if unset; the settings editor shows the schema error.
    }
  }
  return out as SetupValues;
}

/** Whether the effective model setting is the user's: no workspace or folder value overrides the global one. */
function modelIsUsers(c: vscode.WorkspaceConfiguration): boolean {
  const i = c.inspect<string | null>('model');
  return !!i && i.workspaceValue === undefined && i.workspaceFolderValue === undefined && !!i.globalValue;
}

function nonEmpty(s: string | null | undefined): string | null {
  return s && s.trim() ? s.trim() : null;
}

const LEVELS = new Set<string>(['error', 'warning', 'info', 'hint', 'off']);

/** Rule severities from the setting, ignoring entries that are not a known level. */
function severities(raw: Record<string, unknown> | undefined): Record<string, SeveritySetting> {
  const out: Record<string, SeveritySetting> = {};
  for (const [id, level] of Object.entries(raw ?? {}))
    if (typeof level === 'string' && LEVELS.has(level)) out[id.toUpperCase()] = level as SeveritySetting;
  return out;
}

function clamp(n: number, lo: number, hi: number): number {
  return Number.isFinite(n) ? Math.min(hi, Math.max(lo, n)) : lo;
}

/** A list of strings from a setting, or the default when the setting holds anything else. */
function stringList(v: unknown, fallback: readonly string[]): readonly string[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'string') ? v : fallback;
}
