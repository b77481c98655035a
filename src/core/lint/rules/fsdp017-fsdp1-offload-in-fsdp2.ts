/** Rule FSDP017: FSDP1's `CPUOffload` passed as FSDP2's `offload_policy`, where it offloads nothing. */
import type { OffloadValue } from '../../analysis/options';
import type { Draft, Rule } from '../types';

export const fsdp1OffloadInFsdp2: Rule = {
  id: 'FSDP017',
  name: 'fsdp1-offload-in-fsdp2',
  title: "FSDP1's CPUOffload passed to fully_shard, which does not offload for it",
  defaultSeverity: 'warning',
  rationale: `FSDP2 offloads a unit's sharded parameters, gradients and optimizer step to the CPU only when its
\`offload_policy\` is a \`CPUOffloadPolicy\`: PyTorch tests \`isinstance(offload_policy, CPUOffloadPolicy)\` (in
\`FSDPParam\` and \`FSDPParamGroup._validate_cpu_offload_params\`). FSDP1's \`CPUOffload(offload_params=True)\`,
the object \`FullyShardedDataParallel(cpu_offload=...)\` takes, is accepted without an error and offloads nothing:
the sharded state stays on the GPU, and a plan sized for offload can run out of memory. The estimate models it as
PyTorch runs it, without offload.`,
  example: {
    bad: `from torch.distributed.fsdp import CPUOffload, fully_shard
for layer in model.layers:
    fully_shard(layer, offload_policy=CPUOffload(offload_params=True))`,
    good: `from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard
for layer in model.layers:
    fully_shard(layer, offload_policy=CPUOffloadPolicy())`,
  },
  fix: 'Writes `CPUOffloadPolicy()` in place of an inline `CPUOffload(offload_params=True)`, when the file imports `CPUOffloadPolicy` from `torch.distributed.fsdp`.',
  check(ctx) {
    const out: Draft[] = [];
    // The name `CPUOffloadPolicy` is bound to PyTorch's class by an import of this file.
    const policyName = ctx.facts.imports.find((i) =>
      /^torch\.distributed(\._composable)?\.fsdp(\.[\w.]+)?\.CPUOffloadPolicy$/.test(i.qualified),
    )?.local;
    for (const c of ctx.facts.calls) {
      if (c.api !== 'fully_shard') continue;
      const o = c.options.offload_policy;
      const v = o?.value as OffloadValue | null | undefined;
      // `CPUOffload(offload_params=False)` asks for no offload and gets none: no finding.
      if (!o || !v || typeof v !== 'object' || !v.fsdp1Object || v.asked === false) continue;
      const inline = /^\s*(\w+\.)*CPUOffload\(\s*(offload_params\s*=\s*)?True\s*\)\s*$/.test(o.text);
      out.push({
        range: o.range,
        summary:
          "FSDP1's CPUOffload passed to fully_shard: nothing is offloaded (FSDP2 takes CPUOffloadPolicy)",
        message:
          `\`offload_policy=${o.text}\`${o.via ? ` (${o.via})` : ''} is FSDP1's CPUOffload: fully_shard offloads only ` +
          'for a CPUOffloadPolicy, so this unit keeps its sharded state on the GPU. Pass CPUOffloadPolicy() to offload.',
        fixes:
          inline && policyName && !o.via
            ? [
                {
                  title: `Use ${policyName}()`,
                  edits: [{ range: o.range, newText: `${policyName}()` }],
                  preferred: true,
                },
              ]
            : [],
      });
    }
    return out;
  },
};
