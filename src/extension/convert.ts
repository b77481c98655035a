/** Core ranges to editor ranges. */
import * as vscode from 'vscode';
import type { Range } from '../core/vocabulary/range';

/** Core ranges (0-based lines, UTF-16 columns) to editor ranges. */
export function toRange(r: Range): vscode.Range {
  return new vscode.Range(r.start.line, r.start.character, r.end.line, r.end.character);
}
