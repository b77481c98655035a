/**
 * `fsdp-lens lint`: the rules over files and folders, as text, JSON or SARIF, through the same core entry the
 * editor uses.
 */
import * as path from 'node:path';
import { analyzeDocument } from '../../core/entry/analyze';
import { isConfigPath } from '../../core/vocabulary/files';
import { Project } from '../../core/project/project';
import type { Host } from '../../core/vocabulary/host';
import { RULES, ruleById } from '../../core/lint/registry';
import { toSarif, type FileFindings } from '../../core/lint/sarif';
import { DEFAULT_LINT_OPTIONS, type LintOptions, type SeveritySetting } from '../../core/lint/types';
import { RULES_DOC_URL, VERSION } from '../../core/vocabulary/meta';
import { loadPython } from '../../host/grammar';
import { parseOptions } from '../args';
import { EXIT, reportGaps, UsageError, type Streams } from '../io';
import { collectPythonFiles, commandLineHost, readConfigFile, readPythonFile } from '../files';

const LEVELS: SeveritySetting[] = ['error', 'warning', 'info', 'hint', 'off'];

export async function lintCommand(argv: string[], io: Streams): Promise<number> {
  const { values, positionals } = parseOptions(
    argv,
    {
      format: { type: 'string', default: 'text' },
      'min-torch': { type: 'string' },
      rule: { type: 'string', multiple: true },
    },
    'lint',
  );
  const format = values.format;
  if (format !== 'text' && format !== 'json' && format !== 'sarif')
    throw new UsageError(`lint: --format must be text, json or sarif, not "${format}"`);
  if (!positionals.length) throw new UsageError('lint needs at least one FILE or DIR');
  const options: LintOptions = { ...DEFAULT_LINT_OPTIONS, rules: {} };
  if (values['min-torch'] !== undefined) {
    if (!/^\d+(\.\d+)*$/.test(values['min-torch']))
      throw new UsageError(`lint: --min-torch takes a release like 2.4, not "${values['min-torch']}"`);
    options.minTorchVersion = values['min-torch'];
  }
  for (const r of values.rule ?? []) {
    const [id, level] = r.split('=');
    if (!id || !ruleById(id.toUpperCase()))
      throw new UsageError(`lint: unknown rule "${id}" (rules: ${RULES.map((x) => x.id).join(', ')})`);
    if (!level || !LEVELS.includes(level as SeveritySetting))
      throw new UsageError(`lint: --rule ${id}= takes ${LEVELS.join(', ')}`);
    options.rules[id.toUpperCase()] = level as SeveritySetting;
  }

  const { files, missing, empty } = collectPythonFiles(positionals);
  let bad = missing.length > 0;
  let internal = false;
  for (const m of missing) io.err.write(`fsdp-lens: ${m}: no such file or directory\n`);
  for (const d of empty) io.err.write(`fsdp-lens: ${d}: no .py files in this directory\n`);
  const grammar = await loadPython();
  const projects = new Map<string, { project: Project; host: Host }>();
  const results: (FileFindings & { path: string })[] = [];
  for (const file of files) {
    const here = commandLineHost(path.resolve(file));
    const root = here.projectRoot!;
    if (!projects.has(root))
      projects.set(root, { project: new Project([root], grammar, here.host.fs), host: here.host });
    const { project, host } = projects.get(root)!;
    const config = isConfigPath(file);
    const read = config ? readConfigFile(file) : readPythonFile(file);
    if ('error' in read) {
      io.err.write(`fsdp-lens: ${read.error}\n`);
      bad = true;
      continue;
    }
    // The same entry the editor calls.
    const a = analyzeDocument(
      grammar,
      { file: path.resolve(file), text: read.text },
      { lint: options, estimate: { project, host } },
    );
    if (reportGaps(io, file, a)) internal = true;
    if (a.reading?.kind === 'none') {
      io.err.write(
        `fsdp-lens: ${file}: not a configuration fsdp-lens knows (Accelerate, Transformers fsdp_config, torchtune, torchtitan, DeepSpeed)\n`,
      );
      bad = true;
      continue;
    }
    if (a.reading?.kind === 'problem') {
      io.err.write(`fsdp-lens: ${file}: ${a.reading.problem.message}\n`);
      bad = true;
      continue;
    }
    results.push({
      path: file,
      uri: path.relative(process.cwd(), path.resolve(file)).split(path.sep).join('/'),
      findings: a.findings,
    });
  }
  for (const p of projects.values()) p.project.dispose();

  if (format === 'sarif')
    io.out.write(
      JSON.stringify(
        toSarif(results, RULES, { version: VERSION, docsUrl: RULES_DOC_URL, srcRoot: process.cwd() }),
        null,
        2,
      ) + '\n',
    );
  else if (format === 'json') {
    const rows = results.flatMap((r) =>
      r.findings.map((f) => ({
        file: r.path,
        line: f.range.start.line + 1,
        column: f.range.start.character + 1,
        endLine: f.range.end.line + 1,
        endColumn: f.range.end.character + 1,
        code: f.rule,
        severity: f.severity,
        message: f.message,
      })),
    );
    io.out.write(JSON.stringify(rows, null, 2) + '\n');
  } else {
    for (const r of results)
      for (const f of r.findings)
        io.out.write(
          `${r.path}:${f.range.start.line + 1}:${f.range.start.character + 1}: ${f.rule} ${f.message}\n`,
        );
    const n = results.reduce((s, r) => s + r.findings.length, 0);
    io.err.write(
      n
        ? `${n} finding${n === 1 ? '' : 's'} in ${results.filter((r) => r.findings.length).length} of ${results.length} files\n`
        : '',
    );
  }
  if (internal) return EXIT.internal;
  if (bad) return EXIT.usage;
  return results.some((r) => r.findings.some((f) => f.severity === 'error' || f.severity === 'warning'))
    ? EXIT.findings
    : EXIT.ok;
}
