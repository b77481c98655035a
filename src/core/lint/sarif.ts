/** Findings as SARIF 2.1.0, for code scanning in CI. */
import { pathToFileURL } from 'node:url';
import type * as Sarif from 'sarif';
import { ruleAnchor } from './docs';
import type { Finding, Rule, Severity } from './types';

export interface FileFindings {
  /** Path relative to the run's root (forward slashes), as code-scanning services expect. */
  uri: string;
  findings: Finding[];
}

const LEVEL: Record<Severity, Sarif.Result.level> = {
  error: 'error',
  warning: 'warning',
  info: 'note',
  hint: 'note',
};

/** A SARIF 2.1.0 log of lint findings, with every rule described and linked to its documentation. */
export function toSarif(
  files: FileFindings[],
  rules: readonly Rule[],
  tool: {
    version: string;
    docsUrl: string;
    /** The absolute directory the `uri`s are relative to. */ srcRoot?: string;
  },
): Sarif.Log {
  // SARIF 3.14.14: a base id's `uri` must be absolute, with a trailing slash.
  const base = tool.srcRoot ? pathToFileURL(tool.srcRoot).href.replace(/\/?$/, '/') : null;
  const ruleIndex = new Map(rules.map((r, i) => [r.id, i]));
  return {
    $schema: 'https://json.schemastore.org/sarif-2.1.0.json',
    version: '2.1.0',
    runs: [
      {
        tool: {
          driver: {
            name: 'fsdp-lens',
            version: tool.version,
            informationUri: tool.docsUrl.replace(/#.*$/, ''),
            rules: rules.map((r) => ({
              id: r.id,
              name: r.name,
              shortDescription: { text: r.title },
              fullDescription: { text: r.rationale.replace(/\s+/g, ' ').trim() },
              helpUri: `${tool.docsUrl}#${ruleAnchor(r)}`,
              help: { text: r.rationale, markdown: r.rationale },
              defaultConfiguration: { level: LEVEL[r.defaultSeverity] },
            })),
          },
        },
        columnKind: 'utf16CodeUnits',
        ...(base ? { originalUriBaseIds: { '%SRCROOT%': { uri: base } } } : {}),
        results: files.flatMap((f) =>
          f.findings.map((x): Sarif.Result => ({
            ruleId: x.rule,
            ...(ruleIndex.has(x.rule) ? { ruleIndex: ruleIndex.get(x.rule)! } : {}),
            level: LEVEL[x.severity],
            message: { text: x.message },
            locations: [
              {
                physicalLocation: {
                  artifactLocation: { uri: f.uri, uriBaseId: '%SRCROOT%' },
                  region: {
                    startLine: x.range.start.line + 1,
                    startColumn: x.range.start.character + 1,
                    endLine: x.range.end.line + 1,
                    endColumn: x.range.end.character + 1,
                  },
                },
              },
            ],
          })),
        ),
      },
    ],
  };
}
