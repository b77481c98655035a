/** Rule FSDP016: A framework setting that FSDP does not use as written. */
import type { Draft, Rule } from '../types';

export const frameworkSettingIgnored: Rule = {
  id: 'FSDP016',
  name: 'framework-setting-ignored',
  title: 'A framework setting that FSDP does not use as written',
  defaultSeverity: 'warning',
  rationale: `Frameworks that configure FSDP for you read some settings only in one FSDP version. The common trap is
Accelerate's FSDP1 path: \`FullyShardedDataParallelPlugin\` always runs \`fsdp_sharding_strategy\`, which
\`accelerate launch\` fills with FULL_SHARD when the config omits it, so a strategy name written only under
\`fsdp_reshard_after_forward\` (what \`accelerate config\` saves since Accelerate 1.6, and what Transformers 5 passes
for \`fsdp="shard_grad_op"\` with \`fsdp_config={"version": 1}\`) is never applied: the run is FULL_SHARD, with
another all-gather per unit in backward and less memory than planned. Under FSDP2 the same key must be true or
false, and Accelerate raises on a strategy name. Under FSDP2, \`fsdp_forward_prefetch: true\` in a config (or
Transformers' \`fsdp_config\`) is ignored: the plugin reads it from the environment only under FSDP1, so no unit
is gathered ahead in forward; FSDP2 prefetches with \`set_modules_to_forward_prefetch\` in code. On a launch line,
\`accelerate launch --multi_gpu --use_fsdp\` is refused: the launcher takes one of \`--multi_gpu\`, \`--use_fsdp\`,
\`--use_deepspeed\`, \`--cpu\` and \`--tpu\`, and raises before the job starts.`,
  example: {
    language: 'yaml',
    bad: `distributed_type: FSDP
fsdp_config:
  fsdp_version: 1
  fsdp_reshard_after_forward: SHARD_GRAD_OP  # runs as FULL_SHARD`,
    good: `distributed_type: FSDP
fsdp_config:
  fsdp_version: 1
  fsdp_sharding_strategy: SHARD_GRAD_OP`,
  },
  check(ctx) {
    return (ctx.framework?.traps ?? [])
      .filter((t) => t.rule === 'FSDP016')
      .map((t): Draft => ({
        range: t.range,
        message: t.message,
        ...(t.summary ? { summary: t.summary } : {}),
        fixes: [],
      }));
  },
};
