/** The lint vocabulary: findings, fixes, rules and what a rule reads. */
import type { FileFacts } from '../analysis/facts';
import type { Estimate } from '../estimator/types';
import type { MinGpus, WhatIf } from '../whatif/model';
import type { FrameworkPlan } from '../frameworks/types';
import type { ModuleNode } from '../model/tree';
import type { Range } from '../vocabulary/range';

export type Severity = 'error' | 'warning' | 'info' | 'hint';
export type SeveritySetting = Severity | 'off';

/** A replacement of a range of the original text. */
export interface TextEdit {
  range: Range;
  newText: string;
}

/** A fix a user can choose; never applied without them. */
export interface Fix {
  title: string;
  edits: TextEdit[];
  /** The fix an editor offers first (one per finding). */
  preferred?: boolean;
}

export interface Finding {
  rule: string;
  severity: Severity;
  range: Range;
  /** The whole explanation: what is wrong, why, and what to do (Markdown code spans allowed). */
  message: string;
  /**
   * The finding in a line, verdict first, plain text of at most `SUMMARY_MAX` characters: the Problems view's
   * entry. The runner takes the message's first sentence when a rule gives none.
   */
  summary: string;
  fixes: Fix[];
  /** Other places that explain the finding (the blocks wrapped, the optimizer line...). */
  related?: { range: Range; message: string }[];
}

/** Options every rule may read; each comes from a setting, a flag or its default. */
export interface LintOptions {
  /** The oldest PyTorch the project must run on (`2.4`); decides whether the legacy FSDP2 path is a finding. */
  minTorchVersion: string;
  /** Per-rule severity or `off`. */
  rules: Record<string, SeveritySetting>;
  /** Rethrow a rule's exception instead of skipping the rule (tests). */
  strict?: boolean;
  /** The editor runs the rules: those the editor's own Python support already reports are skipped. */
  editor?: boolean;
}

export const DEFAULT_LINT_OPTIONS: LintOptions = { minTorchVersion: '2.6', rules: {} };

export interface RuleContext {
  facts: FileFacts;
  text: string;
  options: LintOptions;
  /** The estimate of the file, when the model is known: rules about the model read it. */
  /** `minGpus` searches world sizes (a dozen estimates): rules call it only when they need it. */
  model?: {
    estimate: Estimate;
    root: ModuleNode;
    minGpus?: () => MinGpus;
    /** The estimate with a change made (a fix's preview), or undefined when PyTorch would refuse it. */
    whatIf?: (change: WhatIf) => Estimate | undefined;
  };
  /** The framework configuration the file makes (a config file's, or a constructor call's), when there is one. */
  framework?: FrameworkPlan;
}

/** A draft finding: the runner adds the rule id, the severity in force and the suppression fix. */
export type Draft = Omit<Finding, 'rule' | 'severity' | 'summary'> & { summary?: string };

/** The longest summary a finding shows where one line is read (the Problems view). */
export const SUMMARY_MAX = 120;

export interface Rule {
  /** FSDP001 … */
  id: string;
  /** kebab-case name (`missing-root-wrap`), also the documentation anchor's suffix. */
  name: string;
  title: string;
  defaultSeverity: Severity;
  /** Reads the model and the estimate (`ctx.model`): run on the plan that was estimated, when a file has several. */
  readsModel?: true;
  /** Why it matters: what goes wrong at run time and what it costs (Markdown). */
  rationale: string;
  /** A minimal wrong example and its correction, in Python unless it says (a config, a launch script). */
  example: { bad: string; good: string; language?: 'python' | 'yaml' | 'bash' };
  /** What the quick fix does, if there is one. */
  fix?: string;
  /** Reported on the command line only: in the editor, its Python language support already shows it. */
  commandLineOnly?: boolean;
  check(ctx: RuleContext): Draft[];
}
