import * as path from 'node:path';
import type { FileFacts } from '../analysis/facts';
import type { PinnedVersions } from '../project/versions';
import { acceleratePlan, pluginSettings } from './accelerate';
import { readConfigText, type ConfigDoc } from './configDoc';
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
      const mp = call.kwargs.mixed_precision_policy;
      if (typeof mp === 'string') plan.notes.push(`mixed_precision_policy="${mp}"`);
      return plan;
    }
  }
  return undefined;
}
