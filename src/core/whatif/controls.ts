/**
 * The what-if controls of the footprint panel, derived from the table of inputs (each input with a `control`)
 * and the plan's own changes (unit granularity, sharding strategy): their descriptions for the webview, the
 * values in force, and the parse of what the webview sends back into a what-if, with the same parsers as flags.
 */
import { checkpointingText } from '../inputs/parse';
import { INPUT_KEYS, inputSpec, type InputKey, type TrainingSetup } from '../inputs/table';
import type { Estimate } from '../estimator/types';
import type { PlanChanges, WhatIf } from './model';

/** Control values as the webview shows and sends them: numbers as numbers, choices as their text. */
export type WhatIfValues = Record<string, string | number>;

/** One control: a number field or a select. */
export interface ControlDescription {
  key: string;
  label: string;
  kind: 'number' | 'select';
  options?: { value: string; label: string }[];
}

const STRATEGIES = ['FULL_SHARD', 'SHARD_GRAD_OP', 'HYBRID_SHARD'] as const;

/**
 * The strategies in FSDP2's own words: `fully_shard(reshard_after_forward=...)` and a 2-D mesh, which is how the
 * what-if model applies them to an FSDP2 plan.
 */
const FSDP2_STRATEGY: Record<string, string> = {
  FULL_SHARD: 'reshard after forward',
  SHARD_GRAD_OP: 'no reshard after forward',
  HYBRID_SHARD: 'HSDP (2-D mesh)',
};

/** The inputs the panel controls, in the table's order. */
export const CONTROL_INPUTS: readonly InputKey[] = INPUT_KEYS.filter((k) => inputSpec(k).control);

/** A value as the control shows it. */
function shown(key: InputKey, v: unknown): string | number {
  if (key === 'checkpointing') return checkpointingText(v as TrainingSetup['checkpointing']);
  return typeof v === 'number' ? v : String(v);
}

/** The control values an estimate was made with. */
export function controlValues(e: Estimate, blocksPerUnit: number): WhatIfValues {
  const out: WhatIfValues = {};
  for (const k of CONTROL_INPUTS) out[k] = shown(k, e.setup[k]);
  out.blocksPerUnit = blocksPerUnit;
  out.strategy = strategyOf(e);
  out.offload = offloadValue(e);
  return out;
}

/**
 * The plan's sharding as the control names it: HYBRID_SHARD on a 2-D mesh, and for FSDP2, whose plans are all
 * FULL_SHARD by name, SHARD_GRAD_OP where every unit but the root stays gathered from forward to backward
 * (`reshard_after_forward=False` on each).
 */
function strategyOf(e: Estimate): string {
  if (e.mesh.hsdp) return 'HYBRID_SHARD';
  const blocks = e.units.filter((u) => !u.isRoot && u.params > 0);
  if (e.plan.api === 'fsdp2' && blocks.length && blocks.every((u) => u.residency.kind === 'keep'))
    return 'SHARD_GRAD_OP';
  return e.plan.strategy;
}

/** Whether the plan's units keep their shards in host memory: every unit, none, or some (as the file says). */
function offloadValue(e: Estimate): string {
  const n = e.units.filter((u) => u.offload).length;
  return n === 0 ? 'off' : n === e.units.length ? 'on' : 'some';
}

/**
 * The controls, for a plan whose blocks can be regrouped `blockUnits` ways and whose strategy is `current`; an
 * FSDP2 plan's sharding choices are named as FSDP2 writes them.
 */
export function controlDescriptions(
  blockUnits: number,
  current: string,
  base: WhatIfValues,
  api: 'fsdp1' | 'fsdp2' | 'none' = 'fsdp1',
): ControlDescription[] {
  const out: ControlDescription[] = CONTROL_INPUTS.map((k) => {
    const c = inputSpec(k).control!;
    const options = c.options?.();
    const value = base[k];
    // A value the file uses that the list does not offer (every-3) is offered too.
    if (options && value !== undefined && !options.some((o) => o.value === String(value)))
      options.push({ value: String(value), label: String(value).replace('-', ' ') });
    return { key: k, label: c.label, kind: c.kind, ...(options ? { options } : {}) };
  });
  out.push({
    key: 'strategy',
    label: 'Sharding',
    kind: 'select',
    options: [...new Set([current, ...STRATEGIES])].map((s) => ({
      value: s,
      label: api === 'fsdp2' ? (FSDP2_STRATEGY[s] ?? s) : s,
    })),
  });
  out.push({
    key: 'offload',
    label: 'CPU offload',
    kind: 'select',
    options: [
      { value: 'off', label: 'off' },
      { value: 'on', label: api === 'fsdp2' ? 'CPUOffloadPolicy' : 'offload_params=True' },
      ...(base.offload === 'some' ? [{ value: 'some', label: 'some units (as the file says)' }] : []),
    ],
  });
  if (blockUnits > 1) {
    const options: { value: string; label: string }[] = [];
    for (let k = 1; k <= blockUnits; k++)
      if (blockUnits % k === 0)
        options.push({ value: String(k), label: k === 1 ? '1 block (as planned)' : `${k} blocks` });
    out.push({ key: 'blocksPerUnit', label: 'Unit granularity', kind: 'select', options });
  }
  return out;
}

/**
 * The what-if a set of control values makes: only the values that differ from `base`, each parsed as a flag of
 * the same input would be. What does not parse (nonsense from the webview) is dropped, not trusted.
 */
export function whatIfFrom(values: WhatIfValues, base?: WhatIfValues): WhatIf {
  const w: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(values)) {
    if (base && String(base[k]) === String(v)) continue;
    if ((CONTROL_INPUTS as readonly string[]).includes(k)) {
      try {
        w[k] = inputSpec(k as InputKey).parse(v, k);
      } catch {
        // Not a value of this input: ignored.
      }
    } else if (k === 'blocksPerUnit') {
      const n = Number(v);
      if (Number.isInteger(n) && n > 1 && n <= 1 << 16) w.blocksPerUnit = n;
    } else if (k === 'strategy' && (STRATEGIES as readonly unknown[]).includes(v))
      w.strategy = v as PlanChanges['strategy'];
    else if (k === 'offload' && (v === 'on' || v === 'off')) w.offload = v === 'on';
  }
  return w as WhatIf;
}

/** A change the panel shows: a control's label, its value and the file's, and the annotation key that says it. */
export interface ControlChange {
  key: string;
  label: string;
  value: string;
  file: string;
  annotation: string | null;
}

/** The controls whose values differ from the file's, in the controls' order. */
export function controlChanges(
  controls: readonly ControlDescription[],
  values: WhatIfValues,
  base: WhatIfValues,
): ControlChange[] {
  const label = (c: ControlDescription, v: string) => c.options?.find((o) => o.value === v)?.label ?? v;
  return controls
    .filter((c) => values[c.key] !== undefined && String(values[c.key]) !== String(base[c.key]))
    .map((c) => ({
      key: c.key,
      label: c.label,
      value: label(c, String(values[c.key])),
      file: label(c, String(base[c.key])),
      // An input's first annotation key (the one the table writes); the plan's own changes have none.
      annotation: (CONTROL_INPUTS as readonly string[]).includes(c.key)
        ? (inputSpec(c.key as InputKey).keys?.[0] ?? null)
        : null,
    }));
}
