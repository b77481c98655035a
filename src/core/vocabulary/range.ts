/** Positions and ranges in a document, as VS Code counts them: 0-based lines, UTF-16 columns. */

export interface Position {
  line: number;
  character: number;
}

export interface Range {
  start: Position;
  end: Position;
}

/** The empty range at the start of a file (where findings and lenses about a whole file go). */
export const FILE_START: Range = { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } };
