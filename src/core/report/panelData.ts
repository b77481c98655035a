/**
 * The footprint panel's data, from one analysis: the core's exploration under the what-if values (estimate, fit
 * matrix, granularity curve, advice) turned into the plain data of the panel protocol. Nothing here estimates.
 */
import { describeCall } from '../analysis/describe';
import type { FileFacts } from '../analysis/facts';
import type { EstimateResult } from '../resolve/analyze';
import type { ByteUnit } from '../vocabulary/bytes';
import {
  controlChanges,
  controlDescriptions,
  controlValues,
  whatIfFrom,
  type WhatIfValues,
} from '../whatif/controls';
import { explore } from '../whatif/explore';
import { fitReport } from '../whatif/fitReport';
import { estimateDelta, onModelOf } from '../whatif/delta';
import type { WhatIf } from '../whatif/model';
import { estimateJson } from './json';
import { AGREE, compareMeasured, type MeasuredRun } from './measured';
import type { MeasuredComparison, PanelData, ReadProgress } from './panelProtocol';
import { lensTitle, unitsOfCall } from './summary';

export type { PanelData, PanelRequest, PanelUpdate, WhatIfValues } from './panelProtocol';
export { whatIfFrom };

export interface PanelInput {
  facts: FileFacts;
  uri: string;
  focusUnit: number | null;
  units: ByteUnit;
  estimate?: EstimateResult;
  notice?: string;
  /** Control values the user changed in the panel. */
  whatIf?: Partial<WhatIfValues>;
  /** Solve for what fits on every GPU of the catalog (`fitReport`). */
  fit?: boolean;
  /** Another version of the job (the last commit, another file) and its estimate, to explain the change from it. */
  compare?: { label: string; estimate?: EstimateResult; error?: string };
  /** A measured run (read by the caller from `file`), or why it could not be read, or how far its reading is. */
  measured?: { file: string } & ({ run: MeasuredRun } | { error: string } | { reading: ReadProgress });
}

/** Everything the footprint panel shows, from one analysis. */
export function buildPanelData(input: PanelInput): PanelData {
  const r = input.estimate;
  const data: PanelData = {
    file: input.facts.path,
    uri: input.uri,
    focusUnit: input.focusUnit,
    units: input.units,
    calls: [],
  };
  if (input.notice) data.notice = input.notice;
  if (input.measured) data.measured = measuredData(input.measured, r);
  // A script that wraps through a helper of another file: the helper's wraps, placed at its calls of it.
  const calls = input.facts.calls.length ? input.facts.calls : (r?.helperCalls ?? []);
  const callsOf = (e: Parameters<typeof lensTitle>[1]) =>
    calls.map((c) => ({
      // Where it stands in this file: a helper's wrap is placed at this file's call of the helper.
      line: c.range.start.line + 1,
      api: c.api,
      target: c.target,
      description: describeCall(c),
      lens: lensTitle(c, e, input.units),
      units: e ? unitsOfCall(e, c).map((u) => u.name) : [],
    }));
  if (!r?.ok) {
    if (r) data.noEstimate = { reason: r.reason, ...(r.hint ? { hint: r.hint } : {}) };
    data.calls = callsOf(undefined);
    return data;
  }
  const base = controlValues(r.estimate, 1);
  const w = whatIfFrom((input.whatIf ?? {}) as WhatIfValues, base);
  const x = explore(r.whatIf, w, r.estimate, input.units);
  const blockUnits = r.whatIf.blockUnits();
  const values = x.estimate ? controlValues(x.estimate, w.blocksPerUnit ?? 1) : { ...base, ...input.whatIf };
  const controls = controlDescriptions(blockUnits, String(base.strategy), base, r.estimate.plan.api);
  data.whatIf = {
    controls,
    values: values as WhatIfValues,
    base,
    blockUnits,
    changed: controlChanges(controls, values as WhatIfValues, base),
  };
  if (r.framework)
    data.framework = {
      name: r.framework.framework,
      file: r.framework.file.split(/[\\/]/).pop() ?? r.framework.file,
      line: r.framework.range.start.line + 1,
    };
  if (!x.estimate) {
    data.noEstimate = { reason: x.error ?? 'the changed values make no estimate' };
    data.calls = callsOf(undefined);
    return data;
  }
  data.calls = callsOf(x.estimate);
  data.estimate = estimateJson(x.estimate, r.model, x.minGpus);
  if (x.fitMatrix) data.fitMatrix = x.fitMatrix;
  if (x.granularity) data.granularity = x.granularity;
  if (x.advice) data.advice = x.advice;
  if (input.fit) data.fit = fitReport(r.whatIf, x.estimate, w);
  if (input.compare) data.compare = comparison(input.compare, r);
  return data;
}

/**
 * The change from another version of the job to this file as it is (its own inputs, not the what-if values),
 * attributed cause by cause on the other version's plan (`estimateDelta`); or why there is no comparison.
 */
function comparison(
  c: NonNullable<PanelInput['compare']>,
  r: Extract<EstimateResult, { ok: true }>,
): NonNullable<PanelData['compare']> {
  const other = c.estimate;
  if (c.error) return { label: c.label, reason: c.error };
  if (!other) return { label: c.label, reason: 'it has nothing to estimate' };
  if (!other.ok) return { label: c.label, reason: `it has no estimate: ${other.reason}` };
  const run = (w: WhatIf) => {
    try {
      return other.whatIf.run(w);
    } catch {
      return undefined;
    }
  };
  return {
    label: c.label,
    delta: estimateDelta(other.estimate, r.estimate, run, onModelOf(other.input, r.input)),
  };
}

/**
 * A measured run beside the file's own estimate (its inputs, not the what-if values: the run ran the file), phase
 * by phase as `compareMeasured` puts them.
 */
function measuredData(
  m: NonNullable<PanelInput['measured']>,
  r: EstimateResult | undefined,
): NonNullable<PanelData['measured']> {
  if ('error' in m) return { file: m.file, error: m.error };
  if ('reading' in m) return { file: m.file, reading: m.reading };
  if (!r?.ok) return { file: m.file, error: 'the file has no estimate to compare it with' };
  const e = r.estimate;
  const run = m.run;
  const c = compareMeasured(e, run);
  const pools = e.timeline?.pools;
  const out: MeasuredComparison = {
    file: m.file,
    source: run.source,
    ...(typeof run.settings.framework === 'string' ? { framework: run.settings.framework } : {}),
    rank: run.rank,
    worldSize: run.worldSize,
    device: run.device,
    notes: run.notes,
    phases: c.phases,
    reserved: pools
      ? { ...c.reserved, pools: { compute: pools.compute, gather: pools.gather, reduce: pools.reduce } }
      : c.reserved,
    unknownPhases: c.unknownPhases,
    agree: AGREE,
    against: {
      worldSize: e.mesh.worldSize,
      gpu: e.gpu.name,
      microBatch: e.setup.microBatch,
      seqLen: e.setup.seqLen,
    },
  };
  return out;
}
