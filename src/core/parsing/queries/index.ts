import argumentsQuery from './arguments.scm';
import assignments from './assignments.scm';
import calls from './calls.scm';
import context from './context.scm';
import imports from './imports.scm';

/** The declarative queries of the scan, by name (each file documents its captures). */
export const QUERY_SOURCES = { arguments: argumentsQuery, assignments, calls, context, imports } as const;
export type QueryName = keyof typeof QUERY_SOURCES;
