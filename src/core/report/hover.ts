/**
 * The hover over a wrap call or a configuration: what it makes and costs, the formula of each figure, the
 * assumptions, as Markdown with user text escaped.
 */
import { describeCall } from '../analysis/describe';
import { shortDtype } from '../vocabulary/dtypes';
import type { WrapCall } from '../analysis/facts';
import type { Estimate, UnitEstimate, Term } from '../estimator/types';
import { trafficBytes } from '../estimator/collectives';
import { fmtBytes, fmtCount, fmtParams, fmtSeconds, type ByteUnit } from '../vocabulary/bytes';
import type { FrameworkPlan } from '../frameworks/types';
import { isOffPath, unitsOfCall } from './summary';
import { atLeast, clip, peakWhere, spaced, undecidedWhy, unitsWords } from '../vocabulary/words';
import { planLabel } from '../vocabulary/fsdp';
import { sourceText } from './text';

/** Command links the hover offers (URIs the editor supplies; absent ones are left out). */
export interface HoverLinks {
  openPanel?: string;
  setWorldSize?: string;
  setGpu?: string;
  measureExactly?: string;
  chooseModel?: string;
  /** Choose the script's arguments (the path it takes) or the plan of the file. */
  chooseArguments?: string;
}

/**
 * Line breaks and other control characters (a carriage return alone ends a Markdown line too): none of them may
 * reach the Markdown, where one would end a code span or a table row and let the text after it be read as markup.
 */
// eslint-disable-next-line no-control-regex -- control characters are what it finds
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;

/** The most characters of one piece of user text a hover shows. */
const MAX_QUOTE = 200;

/** Text from a user's file or a config, made inert in Markdown (no links, no images, no HTML, no emphasis). */
export function mdEscape(s: string): string {
  return clip(s, MAX_QUOTE)
    .replace(CONTROL, ' ')
    .replace(/[\\`*_{}[\]()#+\-.!|<>~&:]/g, (c) => `\\${c}`);
}

/** A finding's text as Markdown: its code spans kept, every other Markdown character taken literally. */
export function mdProse(text: string): string {
  return text
    .split(/(`[^`]*`)/)
    .map((part, i) =>
      i % 2
        ? part
        : part
            .replace(/([\\*_[\]<>#|~])/g, '\\$1')
            // Bare addresses would become links: their `://` and `www.` are taken literally.
            .replace(/:\/\//g, '\\:\\/\\/')
            .replace(/\bwww\./gi, (w) => `${w.slice(0, 3)}\\.`),
    )
    .join('');
}

/** Text shown as inline code: backslash escapes do not apply inside code spans, so backticks are replaced. */
export function mdCode(s: string): string {
  return `\`${clip(s, MAX_QUOTE).replace(CONTROL, ' ').replace(/`/g, "'")}\``;
}

/** Terms as a short table's rows: name and bytes (their formulas are in the panel and the CLI's text). */
function termRows(terms: Term[], b: (n: number) => string): string[] {
  return terms.map((t) => `| ${mdEscape(t.name)} | ${b(t.bytes)} |`);
}

function residencyWords(u: UnitEstimate): string {
  return u.residency.kind === 'keep'
    ? 'kept gathered from forward to backward'
    : u.residency.kind === 'slice'
      ? `keeps a 1/${u.residency.ranks} slice after forward, gathers from it in backward`
      : 'freed after forward, gathered again in backward';
}

/**
 * The plan's figures, verdict first: whether it fits with the peak and where, the persistent state and the
 * traffic, the actions, then the mesh and the terms as short tables.
 */
function planSection(e: Estimate, b: (n: number) => string, links: HoverLinks): string[] {
  const W = e.mesh.shardGroup;
  const fit = e.targetFit;
  const on = `${e.mesh.worldSize} x ${mdEscape(e.gpu.name)}`;
  const peak = `**Peak ${atLeast(e.gaps.length > 0 || e.uncounted.length > 0)}${b(e.perGpu.peakBytes)}**${mdEscape(spaced(peakWhere(e.perGpu.peakAt)))}`;
  const verdict =
    fit.verdict === 'fits'
      ? `✓ **Fits** ${on} · ${peak} · ${b(fit.headroomBytes)} to spare`
      : fit.verdict === 'short'
        ? `✗ **Does not fit** ${on} · ${peak} · ${b(-fit.headroomBytes)} short`
        : e.unmodelled.length
          ? `? **Fit undecided** on ${on} · ${peak} · ${mdEscape(undecidedWhy(e))}`
          : `? **Fit undecided** on ${on} · ${peak} · ${b(fit.headroomBytes)} left for the parts not counted`;
  return [
    verdict,
    '',
    `Persistent ${b(e.perGpu.persistentBytes)}/GPU · traffic ${b(trafficBytes(e.comms.perStep))}/step, ${fmtSeconds(e.comms.commSeconds)} on ${mdEscape(e.comms.shardLink.name)} against ${fmtSeconds(e.comms.computeSeconds)} of compute`,
    ...actionLine(links),
    '',
    `${unitsWords(e.plan.api, e.units.length)} over ${fmtCount(e.model.params)} parameters · ${on}` +
      (e.mesh.hsdp ? ` (HSDP: ${e.mesh.replicas} replicas x ${W})` : '') +
      (e.mesh.tp > 1 ? ` · FSDP ${W} x tensor parallel ${e.mesh.tp}` : '') +
      (e.mesh.cp > 1 ? ` · context parallel ${e.mesh.cp}` : '') +
      (e.pipeline
        ? ` · pipeline parallel ${e.pipeline.degree} (${mdEscape(e.pipeline.schedule)}, ${e.pipeline.microbatches} micro-batches): the figures are rank ${e.pipeline.worstRank}'s, the highest peak`
        : ''),
    ...gapLines(e),
    '',
    '| per GPU | bytes |',
    '|---|--:|',
    ...termRows(e.perGpu.persistent.terms, b),
    '',
    '| at the peak | bytes |',
    '|---|--:|',
    ...termRows(e.perGpu.peak.terms, b),
  ];
}

/** The command links, on one line near the top (a hover's end is often below the fold). */
function actionLine(links: HoverLinks): string[] {
  const actions = [
    links.openPanel && `[Open the footprint panel](${links.openPanel})`,
    links.setWorldSize && `[World size…](${links.setWorldSize})`,
    links.setGpu && `[GPU…](${links.setGpu})`,
    links.measureExactly && `[Measure exactly](${links.measureExactly})`,
  ].filter(Boolean);
  return actions.length ? ['', actions.join(' · ')] : [];
}

/** The parts of the model not counted, for a hover: what would make them known. */
function gapLines(e: Estimate): string[] {
  const all = [...e.gaps, ...e.uncounted];
  if (!all.length) return [];
  return [
    '',
    `**Not counted** (${e.gaps.length ? 'every figure is' : 'the peak is'} a lower bound): ${all.slice(0, 3).map(mdEscape).join('; ')}${all.length > 3 ? ` and ${all.length - 3} more` : ''}.${e.gaps.length ? ' Measure the model exactly with PyTorch, or name it with `# fsdp: model=`, to count them.' : ''}`,
  ];
}

/** Keys of the assumptions a hover lists (the rest are in the panel). */
const HOVER_ASSUMPTIONS = [
  'model',
  'fineTune',
  'worldSize',
  'replicas',
  'gpu',
  'microBatch',
  'seqLen',
  'checkpointing',
  'optimizer',
  'paramDtype',
];

/**
 * The hover over a wrap call: what the call makes and what it costs, with the formula behind each figure, the
 * assumptions and where each came from, and links to change them. Markdown; every string from user files escaped.
 */
export function hoverMarkdown(
  call: WrapCall,
  e: Estimate | undefined,
  units: ByteUnit,
  links: HoverLinks,
  why?: string,
): string {
  const b = (n: number) => fmtBytes(n, units);
  const L: string[] = [];
  L.push(`**${mdEscape(describeCall(call))}**`, '');
  if (!e) {
    L.push(`No estimate${why ? `: ${mdEscape(why)}` : ''}.`);
    const actions = [
      links.chooseModel && `[Choose the model](${links.chooseModel})`,
      links.measureExactly && `[Measure exactly with PyTorch](${links.measureExactly})`,
    ].filter(Boolean);
    if (actions.length) L.push('', actions.join(' · '));
    return L.join('\n');
  }
  const mine = unitsOfCall(e, call);
  const gather = shortDtype(e.comms.gatherDtype);
  const W = e.mesh.shardGroup;
  if (isOffPath(call, e)) {
    // Off the path the defaults take (a root wrap too): why, and the arguments that take it.
    L.push(
      `Not in this estimate: off the path the script's defaults take (${mdEscape(call.offByDefault ?? '')}).`,
      ...(call.runsWith ? ['', `${mdCode(call.runsWith.join(' '))} takes it.`] : []),
      ...(links.chooseArguments ? ['', `[Choose the script's arguments](${links.chooseArguments})`] : []),
    );
  } else if (call.isRoot) {
    L.push(...planSection(e, b, links));
  } else if (mine.length) {
    const u = mine[0]!;
    const peaks = mine.map((x) => e.timeline?.perUnit[x.name]).filter((p): p is number => p !== undefined);
    const shard = u.shard.params + u.shard.grads + u.shard.optimizer;
    const c = u.traffic.collectives;
    const each = mine.length > 1 ? ' each' : '';
    L.push(
      `**${mine.length} unit${mine.length > 1 ? 's' : ''}** (${mdEscape(u.classNames.join(', '))}): ` +
        `${mdCode(u.name)}${mine.length > 1 ? ` … ${mdCode(mine[mine.length - 1]!.name)}` : ''} · ${residencyWords(u)}`,
      ...actionLine(links),
      '',
      '| | |',
      '|---|--:|',
      `| parameters${each} | ${fmtCount(u.params)}${u.trainableParams < u.params ? ` (${fmtCount(u.trainableParams)} trainable)` : ''} |`,
      `| gathered${each} | ${b(u.gatheredBytes)} |`,
      `| shard on each GPU${each} | ${b(shard)} |`,
      `| traffic${each} per micro-batch | ${b(trafficBytes(u.traffic))} |`,
      ...(peaks.length
        ? [`| peak while ${mine.length > 1 ? 'they run' : 'it runs'} | ${b(Math.max(...peaks))} |`]
        : []),
      '',
      `${fmtParams(u.params)} params gathered in ${gather}; the shard is 1/${W} of the unit (parameters ${b(u.shard.params)}, gradients ${b(u.shard.grads)}, optimizer ${b(u.shard.optimizer)}); ${c.allGather} all-gather${c.allGather === 1 ? '' : 's'} + ${c.reduceScatter} reduce-scatter${c.allReduce ? ` + ${c.allReduce} all-reduce` : ''} per micro-batch. The step's peak is ${b(e.perGpu.peakBytes)}${mdEscape(spaced(peakWhere(e.perGpu.peakAt)))}.`,
    );
  } else {
    L.push(`Matches no module of ${mdEscape(e.model.name)}.`);
  }
  L.push(...footer(e));
  return L.join('\n');
}

/** The assumptions the figures rest on, each with where it came from. */
function footer(e: Estimate): string[] {
  const L = ['', '---', '', '**Assumptions**', ''];
  for (const key of HOVER_ASSUMPTIONS) {
    const a = e.assumptions.find((x) => x.key === key);
    if (a) L.push(`- ${mdEscape(a.label)}: ${mdEscape(a.value)} _(${mdEscape(sourceText(a.source))})_`);
  }
  return L;
}

/** The hover over a framework's FSDP configuration: the plan it makes, its figures, and what was read. */
export function frameworkHoverMarkdown(
  fw: FrameworkPlan,
  e: Estimate,
  units: ByteUnit,
  links: HoverLinks,
): string {
  const b = (n: number) => fmtBytes(n, units);
  const api = planLabel(fw.api, e.plan.strategy);
  const L = [`**${mdEscape(fw.framework)} → ${api}**`, ''];
  for (const n of e.plan.notes.slice(0, 6)) L.push(`- ${mdEscape(n)}`);
  L.push('', ...planSection(e, b, links), ...footer(e));
  return L.join('\n');
}
