/** Rule FSDP005: FSDP2 imported from the legacy composable path. */
import { FSDP2_MODULE, LEGACY_FSDP2_MODULES } from '../../analysis/apis';
import type { Draft, Rule } from '../types';

export const legacyImport: Rule = {
  id: 'FSDP005',
  name: 'legacy-import-path',
  title: 'FSDP2 imported from the legacy composable path',
  defaultSeverity: 'warning',
  rationale: `FSDP2 was introduced under \`torch.distributed._composable.fsdp\` (PyTorch 2.4 and 2.5) and moved to the
public \`torch.distributed.fsdp\` in PyTorch 2.6. The private path is kept only for compatibility and may go away.
Import from \`torch.distributed.fsdp\`, unless the project must still run on PyTorch older than 2.6: set
\`fsdpLens.minTorchVersion\` (or \`--min-torch\`) to that release and this rule stays quiet. A deliberate fallback is
left alone too: the import in \`except ImportError:\`, or in the arm of a version check (\`torch.__version__ < "2.6"\`,
\`hasattr(torch.distributed.fsdp, "fully_shard")\`) whose other arm imports the same name from \`torch.distributed.fsdp\`.`,
  example: {
    bad: 'from torch.distributed._composable.fsdp import fully_shard, MixedPrecisionPolicy',
    good: 'from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy',
  },
  fix: 'Rewrites the module path to `torch.distributed.fsdp`.',
  check(ctx) {
    if (compareVersions(ctx.options.minTorchVersion, '2.6') < 0) return [];
    const out: Draft[] = [];
    const seen = new Set<number>();
    for (const imp of ctx.facts.imports) {
      // A fallback (`except ImportError:`, a version check's other arm) supports older releases on purpose.
      if (!imp.legacy || !imp.from || imp.fallback || seen.has(imp.from.start)) continue;
      seen.add(imp.from.start);
      const original = imp.from.text.replace(/\s+/g, '');
      // `torch.distributed._composable.fully_shard` (2.1-2.3) is a different API: no mechanical rewrite.
      const fsdp2 = original.startsWith('torch.distributed._composable.fsdp') || !!imp.rewrite;
      const where = LEGACY_FSDP2_MODULES.includes(imp.qualified) ? imp.qualified : original;
      out.push({
        range: imp.from.range,
        summary: fsdp2
          ? `Legacy FSDP2 import: ${where} moved to ${FSDP2_MODULE} in PyTorch 2.6`
          : `${original} is the first composable fully_shard (PyTorch 2.1-2.3), superseded by FSDP2`,
        message: fsdp2
          ? `\`${where}\` is FSDP2's pre-2.6 location; since PyTorch 2.6 it is \`${FSDP2_MODULE}\`.` +
            (imp.rewrite ? '' : ' Change the import and the calls that spell the old path.')
          : `\`${original}\` is the first composable fully_shard (PyTorch 2.1-2.3), superseded by FSDP2 in \`${FSDP2_MODULE}\`.`,
        fixes: imp.rewrite
          ? [
              {
                title: `Import from ${imp.rewrite}`,
                edits: [{ range: imp.from.range, newText: imp.rewrite }],
                preferred: true,
              },
            ]
          : [],
      });
    }
    return out;
  },
};

/** Compares dotted release numbers (`2.6` < `2.10`); a missing part counts as 0. */
export function compareVersions(a: string, b: string): number {
  const pa = a.split(/[.+-]/).map((x) => parseInt(x, 10) || 0);
  const pb = b.split(/[.+-]/).map((x) => parseInt(x, 10) || 0);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d) return Math.sign(d);
  }
  return 0;
}
