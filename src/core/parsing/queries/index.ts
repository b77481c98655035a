/** The declarative tree-sitter queries of the scan, by name. */
import argumentsQuery from './arguments.scm';
import blocks from './blocks.scm';
import imports from './imports.scm';

/** The declarative queries of the scan, by name (each file documents its captures). */
export const QUERY_SOURCES = { arguments: argumentsQuery, blocks, imports } as const;
export type QueryName = keyof typeof QUERY_SOURCES;
