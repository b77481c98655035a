// The lens line over a wrap: verdict first, short segments each a lens of its own, about 80 characters in all.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { analyzeDocument } from '../../src/core/entry/analyze';
import { applyEdits } from '../../src/core/lint/edits';
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
    // Its tooltip says where each input of the verdict comes from: the file, a launch file, or a default.
    assert.match(s[0]!.tooltip, /^world size 8 \(default\)$/m);
    assert.match(s[0]!.tooltip, /^micro-batch 1 \(detected: train_llama_fsdp2\.py:\d+ /m);
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

describe('fixes for a plan that does not fit', () => {
  // The example at batch 2 x 8,192 tokens: without checkpointing the activations do not fit 80 GB.
  const bigger = (t: string) =>
    t.replace('BATCH_SIZE = 1', 'BATCH_SIZE = 2').replace('SEQ_LEN = 4096', 'SEQ_LEN = 8192');

  it('enable activation checkpointing where the model is made, titled with the estimate it gives', async () => {
    const { a } = await example(bigger);
    const f = a.findings.find((x) => x.rule === 'FSDP015')!;
    const fix = f.fixes.find((x) => /^Enable activation checkpointing/.test(x.title))!;
    assert.match(
      fix.title,
      /model\.gradient_checkpointing_enable\(\) \(fits, needs ([\d.]+ GB) of 85\.5 GB per GPU\)$/,
    );
    assert.equal(fix.preferred, true);
    // Applied, the file is analysed again: checkpointing read from the new line, and the estimate the title gave.
    const text = applyEdits(
      bigger(fs.readFileSync(path.join(ROOT, 'examples', 'train_llama_fsdp2.py'), 'utf8')),
      fix.edits,
    );
    assert.match(
      text,
      /\n {8}model = AutoModelForCausalLM\.from_pretrained\(MODEL_ID\)\n {8}model\.gradient_checkpointing_enable\(\)\n/,
    );
    const again = await example(() => text);
    assert.equal(again.e.setup.checkpointing, 'full');
    assert.equal(again.e.targetFit.verdict, 'fits');
    const needs = again.e.targetFit.memoryBytes - again.e.targetFit.headroomBytes;
    assert.match(fix.title, new RegExp(`needs ${(needs / 1e9).toPrecision(3).replace('.', '\\.')} GB`));
    assert.ok(!again.a.findings.some((x) => x.rule === 'FSDP015'));
  });

  it('estimate on the fewest GPUs that fit, as an annotation, when nothing gives the world size', async () => {
    const { a } = await example((t) => `# fsdp: world_size=1\n${t}`);
    const fix = a.findings
      .find((x) => x.rule === 'FSDP015')!
      .fixes.find((x) => /^Estimate on/.test(x.title))!;
    assert.match(fix.title, /^Estimate on 3 GPUs, the fewest that fit: # fsdp: world_size=3 \(fits, /);
    const text = applyEdits(
      `# fsdp: world_size=1\n${fs.readFileSync(path.join(ROOT, 'examples', 'train_llama_fsdp2.py'), 'utf8')}`,
      fix.edits,
    );
    assert.ok(text.startsWith('# fsdp: world_size=3\n'));
  });
});
