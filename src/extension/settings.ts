import * as vscode from 'vscode';

export const SECTION = 'fsdpLens';

/** The extension's settings for one resource, read in one place. */
export interface Settings {
  codeLensEnabled: boolean;
  maxFileSizeKB: number;
  analysisDelayMs: number;
}

export function readSettings(scope?: vscode.ConfigurationScope): Settings {
  const c = vscode.workspace.getConfiguration(SECTION, scope);
  return {
    codeLensEnabled: c.get<boolean>('codeLens.enabled', true),
    maxFileSizeKB: clamp(c.get<number>('maxFileSizeKB', 4096), 1, 1024 * 1024),
    analysisDelayMs: clamp(c.get<number>('analysisDelayMs', 250), 0, 10_000),
  };
}

function clamp(n: number, lo: number, hi: number): number {
  return Number.isFinite(n) ? Math.min(hi, Math.max(lo, n)) : lo;
}
