/**
 * `fsdp-lens lint`: the rules over files and folders, as text, JSON or SARIF, through the same core entry the
 * editor uses.
 */
import * as path from 'node:path';
import { analyzeDocument } from '../../core/entry/analyze';
import { isConfigPath } from '../../core/vocabulary/files';
import { projectAt, type Project } from '../../core/project/project';
import type { Host } from '../../core/vocabulary/host';
import { RULES, ruleById } from '../../core/lint/registry';
import { toSarif, type FileFindings } from '../../core/lint/sarif';
import { DEFAULT_LINT_OPTIONS, type LintOptions, type SeveritySetting } from '../../core/lint/types';
import { RULES_DOC_URL, VERSION } from '../../core/vocabulary/meta';
import { loadPython } from '../../host/grammar';
import { parseOptions } from '../args';
import { EXIT_TEXT } from '../help';
import type { CommandSpec } from '../spec';
import { EXIT, reportGaps, UsageError, type Streams } from '../io';
import { didYouMean } from '../../core/vocabulary/suggest';
import { collectPythonFiles, commandLineHosts, readConfigFile, readPythonFile } from '../files';
import { mentionsFsdp } from '../../core/analysis/relevance';

const LEVELS: SeveritySetting[] = ['error', 'warning', 'info', 'hint', 'off'];
const FORMATS = ['text', 'json', 'sarif'] as const;

export const lintSpec = {
  name: 'lint',
  args: 'FILE|DIR...',
  summary: 'Wrapping mistakes (rules in docs/rules.md).',
  about:
    'Reads Python files and framework configurations (Accelerate, Transformers fsdp_config, axolotl, llm-foundry, torchtune, torchtitan, DeepSpeed); a folder: every .py file under it and every YAML, JSON or TOML file that mentions FSDP, skipping virtual environments and build folders (a configuration no framework reads is passed over). A Python file that does not mention FSDP is not analysed. A syntax error in an analysed file is a finding (FSDP000): the code after it may be read wrongly.',
  options: {
    format: { type: 'string', default: 'text' },
    'min-torch': { type: 'string' },
    rule: { type: 'string', multiple: true },
  },
  flags: () => [
    {
      flag: '--format F',
      text: 'text (default: file:line:col: CODE message), json or sarif (for code scanning).',
    },
    { flag: '--min-torch V', text: 'Oldest PyTorch the code must run on (default 2.6).' },
    { flag: '--rule ID=LEVEL', text: 'Severity of a rule: error, warning, info, hint or off (repeatable).' },
  ],
  examples: [
    { line: 'fsdp-lens lint src/', does: 'Every Python file under src/, as file:line:col: CODE message.' },
    { line: 'fsdp-lens lint . --format sarif > fsdp.sarif', does: 'SARIF for GitHub code scanning.' },
    {
      line: 'fsdp-lens lint train.py --rule FSDP015=error',
      does: 'Fail (exit 1) when the plan does not fit.',
    },
    { line: 'fsdp-lens lint accelerate_config.yaml', does: 'A framework configuration.' },
  ],
  exits: {
    ok: 'no finding of severity error or warning',
    findings: EXIT_TEXT.findings,
    usage: EXIT_TEXT.usage,
    internal: EXIT_TEXT.internal,
  },
} satisfies CommandSpec;

export async function lintCommand(argv: string[], io: Streams): Promise<number> {
  const { values, positionals } = parseOptions(argv, lintSpec);
  const format = values.format;
  if (format !== 'text' && format !== 'json' && format !== 'sarif')
    throw new UsageError(
      `lint: --format must be text, json or sarif, not "${format}"${didYouMean(format, FORMATS)}`,
    );
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
      throw new UsageError(
        `lint: unknown rule "${id}"${didYouMean(id ?? '', [...RULES.map((x) => x.id), ...RULES.map((x) => x.name)])} (rules: ${RULES.map((x) => x.id).join(', ')})`,
      );
    if (!level || !LEVELS.includes(level as SeveritySetting))
      throw new UsageError(
        `lint: --rule ${id}= takes ${LEVELS.join(', ')}${didYouMean(level ?? '', LEVELS)}`,
      );
    options.rules[id.toUpperCase()] = level as SeveritySetting;
  }

  const { files, missing, empty, found } = collectPythonFiles(positionals);
  let bad = missing.length > 0;
  for (const m of missing) io.err.write(`fsdp-lens: ${m}: no such file or directory\n`);
  for (const d of empty)
    io.err.write(`fsdp-lens: ${d}: no .py files or FSDP configurations in this directory\n`);
  // One thread: files that mention FSDP are few, and their analyses share one parsed project (threads would each
  // parse the files a search of callers reads).
  const outcomes = await lintFiles(files, options, found);
  disposeProjects();
  const results: (FileFindings & { path: string })[] = [];
  let internal = false;
  for (const o of outcomes) {
    for (const m of o.messages) io.err.write(m);
    if (o.bad) bad = true;
    if (o.internal) internal = true;
    if (o.result) results.push(o.result);
  }

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
        summary: f.summary,
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

/** What linting one file gave: its findings, or the messages saying why there are none. */
interface LintOutcome {
  result?: FileFindings & { path: string };
  messages: string[];
  bad?: boolean;
  internal?: boolean;
}

/** The projects of the files linted so far in this thread, by root: parsed once, shared by every file. */
let projects = new Map<string, { project: Project; host: Host }>();
let hostOf = commandLineHosts();

function disposeProjects(): void {
  for (const p of projects.values()) p.project.dispose();
  projects = new Map();
  hostOf = commandLineHosts();
}

/** Lints files in order, through the same entry the editor calls. */
export async function lintFiles(
  files: string[],
  options: LintOptions,
  /** Configuration files found in a folder, not named: one no framework reads is passed over quietly. */
  found: ReadonlySet<string> = new Set(),
): Promise<LintOutcome[]> {
  const grammar = await loadPython();
  const out: LintOutcome[] = [];
  for (const file of files) {
    const abs = path.resolve(file);
    const config = isConfigPath(file);
    const read = config ? readConfigFile(file) : readPythonFile(file);
    if ('error' in read) {
      out.push({ messages: [`fsdp-lens: ${read.error}\n`], bad: true });
      continue;
    }
    const entry = { path: file, uri: path.relative(process.cwd(), abs).split(path.sep).join('/') };
    // A Python file that mentions neither FSDP nor a framework that configures it can have no finding: it is read
    // but not parsed.
    if (!config && !mentionsFsdp(read.text)) {
      out.push({ result: { ...entry, findings: [] }, messages: [] });
      continue;
    }
    const here = hostOf(abs);
    const root = here.projectRoot!;
    if (!projects.has(root))
      projects.set(root, { project: projectAt(root, grammar, here.host), host: here.host });
    const { project, host } = projects.get(root)!;
    // Parsed once: the project's tree of the file serves its own analysis and the searches of other files.
    const parsed = config ? undefined : project.file(abs);
    const same = parsed?.source.text === read.text;
    const a = analyzeDocument(
      grammar,
      { file: abs, text: read.text, ...(same ? { tree: parsed.source.tree } : {}) },
      { lint: options, estimate: { project, host } },
    );
    const messages: string[] = [];
    const internal = reportGaps(
      { out: { write: () => undefined }, err: { write: (m) => messages.push(m) } },
      file,
      a,
    );
    // A launch script that configures nothing the analysis reads may still have findings of its own text.
    if ((a.reading?.kind === 'none' || a.reading?.kind === 'problem') && a.findings.length) {
      out.push({ result: { ...entry, findings: a.findings }, messages: [], internal });
      continue;
    }
    if ((a.reading?.kind === 'none' || a.reading?.kind === 'problem') && found.has(file)) {
      out.push({ messages: [], internal });
      continue;
    }
    if (a.reading?.kind === 'none') {
      messages.push(
        `fsdp-lens: ${file}: not a configuration fsdp-lens knows (Accelerate, Transformers fsdp_config, axolotl, llm-foundry, torchtune, torchtitan, DeepSpeed)\n`,
      );
      out.push({ messages, bad: true, internal });
      continue;
    }
    if (a.reading?.kind === 'problem') {
      messages.push(`fsdp-lens: ${file}: ${a.reading.problem.message}\n`);
      out.push({ messages, bad: true, internal });
      continue;
    }
    out.push({ result: { ...entry, findings: a.findings }, messages, internal });
  }
  return out;
}
