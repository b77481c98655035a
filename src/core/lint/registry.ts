/** Every lint rule, in order, by id. */
import { syntaxError } from './rules/fsdp000-syntax-error';
import { missingRootWrap } from './rules/fsdp001-missing-root-wrap';
import { rootBeforeChildren } from './rules/fsdp002-root-before-children';
import { fsdp1WithoutPolicy } from './rules/fsdp003-fsdp1-without-policy';
import { optimizerBeforeWrap } from './rules/fsdp004-optimizer-before-wrap';
import { legacyImport } from './rules/fsdp005-legacy-import';
import { reshardIntDivisor } from './rules/fsdp006-reshard-int-divisor';
import { unusedMixedPrecision } from './rules/fsdp007-unused-mixed-precision';
import { wrapNeverRuns } from './rules/fsdp008-wrap-never-runs';
import { fsdp1ClipGradNorm } from './rules/fsdp009-fsdp1-clip-grad-norm';
import { policyWrapsNothing } from './rules/fsdp010-policy-wraps-nothing';
import { paramsOutsideUnits } from './rules/fsdp011-params-outside-units';
import { containerWrap } from './rules/fsdp012-container-wrap';
import { tiedSplit } from './rules/fsdp013-tied-split';
import { mixedDtypes } from './rules/fsdp014-mixed-dtypes';
import { peakDoesNotFit } from './rules/fsdp015-peak-does-not-fit';
import { frameworkSettingIgnored } from './rules/fsdp016-framework-setting-ignored';
import { fsdp1OffloadInFsdp2 } from './rules/fsdp017-fsdp1-offload-in-fsdp2';
import { fsdp1ClipOnFsdp2 } from './rules/fsdp018-fsdp1-clip-on-fsdp2';
import { gradientSyncNeverRestored } from './rules/fsdp019-gradient-sync-never-restored';
import { checkpointingMatchesNothing } from './rules/fsdp020-checkpointing-matches-nothing';
import { frozenAndTrainableFlatParam } from './rules/fsdp021-frozen-and-trainable-flat-param';
import { launchCommandCut } from './rules/fsdp022-launch-command-cut';
import type { Rule } from './types';

/** Every lint rule, in id order. A rule joins by being listed here; its documentation is generated from it. */
export const RULES: readonly Rule[] = [
  syntaxError,
  missingRootWrap,
  rootBeforeChildren,
  fsdp1WithoutPolicy,
  optimizerBeforeWrap,
  legacyImport,
  reshardIntDivisor,
  unusedMixedPrecision,
  wrapNeverRuns,
  fsdp1ClipGradNorm,
  policyWrapsNothing,
  paramsOutsideUnits,
  containerWrap,
  tiedSplit,
  mixedDtypes,
  peakDoesNotFit,
  frameworkSettingIgnored,
  fsdp1OffloadInFsdp2,
  fsdp1ClipOnFsdp2,
  gradientSyncNeverRestored,
  checkpointingMatchesNothing,
  frozenAndTrainableFlatParam,
  launchCommandCut,
];

export function ruleById(id: string): Rule | undefined {
  return RULES.find((r) => r.id === id);
}
