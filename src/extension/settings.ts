import * as vscode from 'vscode';
import { DEFAULT_LINT_OPTIONS, type LintOptions, type SeveritySetting } from '../core/lint/types';

export const SECTION = 'fsdpLens';

/** The extension's settings for one resource, read in one place. */
export interface Settings {
  codeLensEnabled: boolean;
  maxFileSizeKB: number;
  analysisDelayMs: number;
  lint: LintOptions & { enabled: boolean };
}

export function readSettings(scope?: vscode.ConfigurationScope): Settings {
  const c = vscode.workspace.getConfiguration(SECTION, scope);
  return {
    codeLensEnabled: c.get<boolean>('codeLens.enabled', true),
    maxFileSizeKB: clamp(c.get<number>('maxFileSizeKB', 4096), 1, 1024 * 1024),
    analysisDelayMs: clamp(c.get<number>('analysisDelayMs', 250), 0, 10_000),
    lint: {
      enabled: c.get<boolean>('lint.enabled', true),
      minTorchVersion: c.get<string>('minTorchVersion', DEFAULT_LINT_OPTIONS.minTorchVersion),
      rules: severities(c.get<Record<string, unknown>>('lint.rules', {})),
    },
  };
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
