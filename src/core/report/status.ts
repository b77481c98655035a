/** The status bar entry of a file's estimate: its text, tooltip and what a screen reader says. */
import type { Estimate } from '../estimator/types';
import { fmtBytes, type ByteUnit } from '../vocabulary/bytes';
import { peakWhere, spaced } from '../vocabulary/words';

export interface StatusSummary {
  fits: boolean;
  /** The entry's text (`$(check)` / `$(warning)` are the editor's icons). */
  text: string;
  /** Markdown paragraphs of the tooltip. */
  tooltip: string[];
  accessibilityLabel: string;
}

export function statusSummary(e: Estimate, unit: ByteUnit): StatusSummary {
  const b = (n: number) => fmtBytes(n, unit);
  const fit = e.targetFit;
  return {
    fits: fit.fits,
    text: `${fit.fits ? '$(check)' : '$(warning)'} FSDP ${b(e.perGpu.peakBytes)}/GPU`,
    tooltip: [
      `**FSDP peak per GPU: ${b(e.perGpu.peakBytes)}**${spaced(peakWhere(e.perGpu.peakAt))}`,
      fit.fits
        ? `Fits ${e.mesh.worldSize} x ${e.gpu.name} with ${b(fit.headroomBytes)} to spare.`
        : `Does not fit ${e.mesh.worldSize} x ${e.gpu.name}: ${b(-fit.headroomBytes)} short.`,
      `Persistent ${b(e.perGpu.persistentBytes)} per GPU. Click to open the footprint panel.`,
    ],
    accessibilityLabel: `FSDP peak ${b(e.perGpu.peakBytes)} per GPU, ${fit.fits ? 'fits' : 'does not fit'} ${e.gpu.name}`,
  };
}
