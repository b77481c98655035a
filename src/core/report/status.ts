/** The status bar entry of a file's estimate: its text, tooltip and what a screen reader says. */
import type { Estimate, Verdict } from '../estimator/types';
import { fmtBytes, type ByteUnit } from '../vocabulary/bytes';
import { gpuBytes } from '../hardware/catalog';
import { atLeast, peakWhere, shortGpu, spaced, undecidedWhy, verdictWords } from '../vocabulary/words';

export interface StatusSummary {
  verdict: Verdict;
  /** The entry's text (`$(check)` / `$(warning)` / `$(question)` are the editor's icons). */
  text: string;
  /** Markdown paragraphs of the tooltip. */
  tooltip: string[];
  accessibilityLabel: string;
}

const ICON: Record<Verdict, string> = { fits: '$(check)', short: '$(warning)', undecided: '$(question)' };

export function statusSummary(e: Estimate, unit: ByteUnit): StatusSummary {
  const b = (n: number) => fmtBytes(n, unit);
  const fit = e.targetFit;
  const least = atLeast(e.gaps.length > 0 || e.uncounted.length > 0);
  const where = `${e.mesh.worldSize} x ${e.gpu.name}`;
  return {
    verdict: fit.verdict,
    // The peak per GPU against what the target GPU holds, and which GPU: the verdict at a glance.
    text: `${ICON[fit.verdict]} FSDP ${e.gaps.length || e.uncounted.length ? '≥' : ''}${b(e.perGpu.peakBytes)}/GPU of ${b(gpuBytes(e.gpu))} · ${e.mesh.worldSize}x ${shortGpu(e.gpu.name)}`,
    tooltip: [
      `**FSDP peak per GPU: ${least}${b(e.perGpu.peakBytes)}**${spaced(peakWhere(e.perGpu.peakAt))}`,
      fit.verdict === 'fits'
        ? `Fits ${where} with ${b(fit.headroomBytes)} to spare.`
        : fit.verdict === 'short'
          ? `Does not fit ${where}: ${b(-fit.headroomBytes)} short.`
          : e.unmodelled.length || e.undecided.length || (e.overcounted.length && fit.headroomBytes < 0)
            ? `Fit on ${where} undecided: ${undecidedWhy(e)}.`
            : `Fit on ${where} undecided: ${undecidedWhy(e)}, ${b(fit.headroomBytes)} left for them.`,
      ...(e.colocated
        ? [
            `${e.colocated.by} shares the GPUs between phases: ${e.colocated.phases.map((p) => `${p.name} needs ${b(p.needBytes)}`).join(', ')}.`,
          ]
        : []),
      `Persistent ${least}${b(e.perGpu.persistentBytes)} per GPU. Click to open the footprint panel.`,
    ],
    accessibilityLabel: `FSDP peak ${least}${b(e.perGpu.peakBytes)} per GPU, ${verdictWords(fit.verdict)} ${e.gpu.name}`,
  };
}
