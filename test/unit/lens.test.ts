// The lens line over a wrap: verdict first, short segments each a lens of its own, about 80 characters in all.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { analyzeDocument } from '../../src/core/entry/analyze';
import { DEFAULT_LINT_OPTIONS } from '../../src/core/lint/types';
import { findProjectRoot, Project } from '../../src/core/project/project';
import { callSegments, keptSegments, type LensSegment } from '../../src/core/report/lens';
import { nodeHost } from '../../src/host/disk';
import { grammar, ROOT } from './helpers';

/** The example's analysis with some of its constants changed, as the editor runs it. */
async function example(edit: (text: string) => string = (t) => t) {
  const g = await grammar();
  const host = nodeHost();
  const file = path.join(ROOT, 'examples', 'train_llama_fsdp2.py');
  const project = new Project([findProjectRoot(file, host)], g, host.fs);
  const text = edit(fs.readFileSync(file, 'utf8'));
  const a = analyzeDocument(g, { file, text }, { lint: DEFAULT_LINT_OPTIONS, estimate: { project, host } });
  project.dispose();
  assert.ok(a.estimate?.ok);
  return { a, e: a.estimate.estimate };
}

/** The line as VS Code draws it: the segments side by side, a codicon taking about two characters. */
const line = (s: LensSegment[]) => s.map((x) => (x.icon ? `$ ${x.text}` : x.text)).join(' | ');

describe('the lens line', () => {
  it('over the root: the verdict, what each GPU needs of its memory, the units, the traffic', async () => {
    const { a, e } = await example();
    const root = a.facts.calls.find((c) => c.isRoot)!;
    const s = callSegments(root, e);
    assert.deepEqual(
      s.map((x) => x.part),
      ['verdict', 'memory', 'plan', 'traffic'],
    );
    assert.equal(s[0]!.icon, 'fits');
    assert.equal(s[0]!.text, 'fits 8 x H100 SXM');
    // Needs: the fit's own figure (capacity less headroom), against the driver's 81,559 MiB = 85.5 GB.
    const needs = e.targetFit.memoryBytes - e.targetFit.headroomBytes;
    assert.equal(s[1]!.text, `needs ${(needs / 1e9).toFixed(1)}/85.5 GB`);
    assert.equal(s[2]!.text, `${e.units.length} FSDP2 units`);
    assert.ok(line(s).length <= 80, line(s));
  });

  it('a plan that does not fit says so first, with its own icon', async () => {
    // One GPU holds the whole 8B model's fp32 state, 16 B x 8.03B = 128 GB: no 80 GB card holds it.
    const { a, e } = await example((t) => `# fsdp: world_size=1\n${t}`);
    const root = a.facts.calls.find((c) => c.isRoot)!;
    const s = callSegments(root, e);
    assert.equal(e.targetFit.verdict, 'short');
    assert.equal(s[0]!.icon, 'short');
    assert.match(s[0]!.text, /^does not fit 1 x H100 SXM$/);
    assert.match(s[0]!.tooltip, /short/);
  });

  it("over a block's wrap: its units and what each gathers, the rest in the tooltip", async () => {
    const { a, e } = await example();
    const block = a.facts.calls.find((c) => !c.isRoot)!;
    const s = callSegments(block, e);
    // Llama 3.1 8B's 32 decoder layers, 218,112,000 parameters each, gathered in bf16: 0.436 GB.
    assert.equal(s[0]!.text, 'FSDP2 32 units x 218M params (LlamaDecoderLayer)');
    assert.equal(s[1]!.text, '0.436 GB gathered each');
    assert.match(s[1]!.tooltip, /reshards after forward/);
    assert.ok(line(s).length <= 80, line(s));
  });

  it('shows the parts a setting keeps, in their order, and the verdict when it keeps none', async () => {
    const { a, e } = await example();
    const s = callSegments(
      a.facts.calls.find((c) => c.isRoot)!,
      e,
    );
    assert.deepEqual(
      keptSegments(s, ['verdict', 'traffic']).map((x) => x.part),
      ['verdict', 'traffic'],
    );
    assert.deepEqual(
      keptSegments(s, []).map((x) => x.part),
      ['verdict'],
    );
  });
});
