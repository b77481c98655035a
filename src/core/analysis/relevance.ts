/**
 * Whether a Python file's text can hold anything the analysis reads: an FSDP name, a framework that configures
 * FSDP, or an `# fsdp:` annotation. Whole-tree runs read every file but parse only those that can.
 */
import { FRAMEWORK_WORDS } from './frameworkCalls';

/**
 * Every fact a finding or an estimate needs starts from one of these words: a wrap call or FSDP import (a name
 * from `torch.distributed.fsdp` or `torch.distributed._composable`, each spelling `fsdp`, `fully_shard`,
 * `FullyShardedDataParallel` or `_composable`), an `# fsdp:` annotation, a framework constructor
 * (`TrainingArguments`, `FSDPStrategy`, `Trainer`...) or an `accelerate` import, whose configuration beside the
 * script the estimate reads.
 */
const WORDS = [
  'fully_shard',
  'FullyShardedDataParallel',
  '_composable',
  'accelerate',
  ...Object.keys(FRAMEWORK_WORDS),
];
const PATTERN = new RegExp(WORDS.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'));
/** `fsdp` in any case: `FSDP(...)`, `fsdp_config`, `FSDPStrategy`, `--fsdp`, `# fsdp:`. */
const FSDP = /fsdp/i;

/** True when the text mentions FSDP or a framework that configures it; false means no finding is possible. */
export function mentionsFsdp(text: string): boolean {
  return FSDP.test(text) || PATTERN.test(text);
}
