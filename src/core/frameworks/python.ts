/**
 * Framework constructors in a script (TrainingArguments, the Accelerate plugin, Lightning strategies) read as a
 * framework plan, and Accelerate's precision.
 */
import * as path from 'node:path';
import type { FileFacts, FrameworkCallFact } from '../analysis/facts';
import type { DType } from '../vocabulary/dtypes';
import type { PinnedVersions } from '../vocabulary/versions';
import type { SetupValues } from '../inputs/table';
import { ACCELERATE_PRECISION, acceleratePlan, pluginSettings } from './accelerate';
import { readConfigText, refDtype, type ConfigDoc } from './configDoc';
import { lightningPlan } from './lightning';
import { trainingArgumentsPlan } from './transformers';
import type { FrameworkPlan } from './types';

export interface FrameworkContext {
  versions?: PinnedVersions;
  /** Reads a file of the project (an `fsdp_config` JSON the script names). */
  readFile?: (file: string) => string | undefined;
}

/**
 * The FSDP configuration a script makes through a framework instead of wrap calls of its own: Lightning's
 * `FSDPStrategy` / `Trainer(strategy="fsdp")`, Transformers' and TRL's `TrainingArguments(fsdp=...)`,
 * Accelerate's `FullyShardedDataParallelPlugin(...)`.
 */
export function frameworkFromFacts(
  facts: FileFacts,
  file: string,
  ctx: FrameworkContext = {},
): FrameworkPlan | undefined {
  if (!facts.frameworkCalls.length) return undefined;
  const lightning = lightningPlan(facts, file);
  if (lightning) return lightning;
  const versions = ctx.versions ?? {};
  for (const call of facts.frameworkCalls) {
    if (call.kind === 'TrainingArguments') {
      const readJson = (rel: string): { data: Record<string, unknown>; doc?: ConfigDoc } | undefined => {
        const abs = path.resolve(path.dirname(facts.path), rel);
        const text = ctx.readFile?.(abs);
        if (text === undefined) return undefined;
        const doc = readConfigText(abs, text);
        return 'error' in doc ? undefined : { data: doc.data, doc };
      };
      const plan = trainingArgumentsPlan(call, file, versions, readJson);
      if (plan) return plan;
    }
    if (call.kind === 'FullyShardedDataParallelPlugin') {
      const plan = acceleratePlan(
        pluginSettings(call.kwargs as Record<string, unknown>, call.kwargLines, file, call.range),
        'Accelerate',
        versions.accelerate,
      );
      const mp = pluginPrecision(call, acceleratorCall(facts), file);
      Object.assign(plan.values, mp.values);
      Object.assign(plan.details, mp.details);
      plan.notes.push(...mp.notes);
      return plan;
    }
  }
  return undefined;
}

/** The script's `Accelerator(...)` call from accelerate, if any. */
export function acceleratorCall(facts: FileFacts): FrameworkCallFact | undefined {
  return facts.frameworkCalls.find((c) => c.kind === 'Accelerator');
}

type Precision = {
  values: Pick<SetupValues, 'paramDtype' | 'reduceDtype' | 'masterDtype'>;
  details: FrameworkPlan['details'];
  notes: string[];
};

/**
 * `Accelerator(mixed_precision="bf16")`: Accelerate's state hands the plugin `set_mixed_precision("bf16")`, which
 * gathers and reduces in bf16 when the plugin has no policy of its own, and the FSDP2 path upcasts trainable
 * parameters to fp32 master weights (`mixed_precision != "no"`). `"no"` keeps everything in the model's dtype.
 */
export function acceleratorPrecision(
  call: FrameworkCallFact | undefined,
  file: string,
): Precision | undefined {
  const m = call?.kwargs.mixed_precision;
  if (typeof m !== 'string') return undefined;
  const where = `mixed_precision="${m}" at ${path.basename(file)}:${call!.kwargLines.mixed_precision ?? call!.line}`;
  const key = m.trim().toLowerCase();
  if (key === 'no')
    return {
      values: { paramDtype: null, reduceDtype: null },
      details: { paramDtype: where, reduceDtype: where },
      notes: [],
    };
  const d = ACCELERATE_PRECISION[key];
  if (!d)
    return {
      values: {},
      details: {},
      notes: [`Accelerator mixed_precision="${m}" is not one Accelerate accepts (no, fp16, bf16, fp8)`],
    };
  return {
    values: { paramDtype: d, reduceDtype: d, masterDtype: 'float32' },
    details: { paramDtype: where, reduceDtype: where, masterDtype: where },
    notes: [],
  };
}

/**
 * The precision of a `FullyShardedDataParallelPlugin(mixed_precision_policy=...)` as Accelerate reads it
 * (utils/dataclasses.py): a string (fp8, fp16, bf16, fp32) sets param_dtype and reduce_dtype to that dtype; a
 * dict or a `MixedPrecision` / `MixedPrecisionPolicy` gives them itself (an unset reduce_dtype reduces in
 * param_dtype); an explicit policy wins over `Accelerator(mixed_precision=...)`, which otherwise decides.
 */
function pluginPrecision(
  plugin: FrameworkCallFact,
  accelerator: FrameworkCallFact | undefined,
  file: string,
): Precision {
  const acc = acceleratorPrecision(accelerator, file);
  const out: Precision = { values: {}, details: {}, notes: [...(acc?.notes ?? [])] };
  // The FSDP2 upcast to fp32 master weights follows the Accelerator's mixed precision, whatever the policy.
  if (acc?.values.masterDtype) {
    out.values.masterDtype = acc.values.masterDtype;
    out.details.masterDtype = acc.details.masterDtype;
  }
  const mp = plugin.kwargs.mixed_precision_policy;
  const where = `mixed_precision_policy= at ${path.basename(file)}:${plugin.kwargLines.mixed_precision_policy ?? plugin.line}`;
  const set = (param: DType | null | undefined, reduce: DType | null | undefined) => {
    out.values.paramDtype = param ?? null;
    out.values.reduceDtype = reduce ?? null;
    out.details.paramDtype = out.details.reduceDtype = where;
  };
  if (typeof mp === 'string') {
    const d = ACCELERATE_PRECISION[mp.trim().toLowerCase()];
    if (d) set(d, d);
    else
      out.notes.push(
        `mixed_precision_policy="${mp}" is not one Accelerate accepts (fp8, fp16, bf16, fp32): Accelerate raises`,
      );
  } else if (
    typeof mp === 'object' &&
    mp !== null &&
    !Array.isArray(mp) &&
    ('dict' in mp || ('call' in mp && /MixedPrecision(Policy)?$/.test(mp.call)))
  ) {
    const kw = 'dict' in mp ? mp.dict : mp.kwargs;
    const param = refDtype(kw.param_dtype);
    const reduce = refDtype(kw.reduce_dtype);
    const unread = (['param_dtype', 'reduce_dtype'] as const).filter(
      (k) => kw[k] !== undefined && kw[k] !== null && !refDtype(kw[k]),
    );
    if (unread.length)
      out.notes.push(`mixed_precision_policy ${unread.join(', ')} not read statically: assumed unset`);
    set(param, reduce);
  } else if (mp !== undefined && mp !== null) {
    out.notes.push('mixed_precision_policy not read statically: the precision is the default');
  } else if (acc) {
    Object.assign(out.values, acc.values);
    Object.assign(out.details, acc.details);
  }
  return out;
}
