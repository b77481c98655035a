// One plan, one answer: the CLI's text and JSON, the lens, the hover, the status bar, the panel's first data and
// the what-if at the file's own values must report the same peak, fit, units and mesh, because they all render
// one estimate from the one core entry. Plans: FSDP2, FSDP1 with an auto-wrap policy, HSDP on a 2-D mesh of 12
// GPUs, FSDP1 HYBRID_SHARD at 12 GPUs on nodes of 8 (PyTorch's ValueError, on every surface), CPU offload, LoRA,
// an Accelerate configuration, and a helper called from another file.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { analyzeDocument } from '../../src/core/entry/analyze';
import { DEFAULT_LINT_OPTIONS } from '../../src/core/lint/types';
import { findProjectRoot, Project } from '../../src/core/project/project';
import { hoverMarkdown, frameworkHoverMarkdown } from '../../src/core/report/hover';
import { buildPanelData } from '../../src/core/report/panelData';
import { statusSummary } from '../../src/core/report/status';
import { lensTitle } from '../../src/core/report/summary';
import { callSegments, frameworkSegments } from '../../src/core/report/lens';
import { fmtBytes } from '../../src/core/vocabulary/bytes';
import { gpuBytes } from '../../src/core/hardware/catalog';
import { plainText, shortGpu } from '../../src/core/vocabulary/words';
import { whatIfFrom } from '../../src/core/whatif/controls';
import { nodeHost } from '../../src/host/disk';
import { cli, FIXTURES, grammar } from './helpers';

interface Surfaces {
  peak: string;
  units: number;
  mesh: string;
  verdict: string;
}

/** The document as the editor analyses it: the one entry, with the project the CLI finds for it too. */
async function editor(file: string) {
  const g = await grammar();
  const host = nodeHost();
  const project = new Project([findProjectRoot(file, host)], g, host.fs);
  const text = fs.readFileSync(file, 'utf8');
  const a = analyzeDocument(g, { file, text }, { lint: DEFAULT_LINT_OPTIONS, estimate: { project, host } });
  return { a, project };
}

/** What each surface says, read from its own text, for one file. */
async function everySurface(rel: string): Promise<Surfaces[]> {
  const file = path.join(FIXTURES, rel);
  const json = await cli('estimate', file, '--json');
  assert.equal(json.code, 0, json.err);
  const j = JSON.parse(json.out) as {
    perGpu: { peakBytes: number };
    units: unknown[];
    mesh: { worldSize: number; shardGroup: number; replicas: number };
    targetFit: { verdict: string };
  };
  const text = (await cli('estimate', file)).out;
  const { a, project } = await editor(file);
  try {
    assert.ok(a.estimate?.ok, a.estimate && !a.estimate.ok ? a.estimate.reason : 'no estimate');
    const r = a.estimate;
    const e = r.estimate;
    const meshOf = (m: { worldSize: number; shardGroup: number; replicas: number }) =>
      `${m.worldSize} = ${m.replicas} x ${m.shardGroup}`;
    const out: Surfaces[] = [];
    // The CLI's JSON and text.
    out.push({
      peak: fmtBytes(j.perGpu.peakBytes),
      units: j.units.length,
      mesh: meshOf(j.mesh),
      verdict: j.targetFit.verdict,
    });
    const textPeak = /^Peak {6}(\S+ \S+) per GPU/m.exec(text)?.[1] ?? '';
    const textUnits = Number(/^Plan {6}.*? · (\d+) units/m.exec(text)?.[1]);
    const hsdp = /^Mesh {6}(\d+) GPUs as (\d+) replicas x (\d+)/m.exec(text);
    const flat = /^Mesh {6}(\d+) GPUs, shard group (\d+)/m.exec(text);
    const textMesh = hsdp
      ? `${hsdp[1]} = ${hsdp[2]} x ${hsdp[3]}`
      : flat
        ? `${flat[1]} = 1 x ${flat[2]}`
        : '';
    const textFit = /^Fit {7}(fits|does NOT fit|undecided) /m.exec(text)?.[1];
    const verdictOf = (w: string | undefined) =>
      w === 'fits' ? 'fits' : w === 'does not fit' || w === 'does NOT fit' ? 'short' : w ? 'undecided' : '?';
    out.push({ peak: textPeak, units: textUnits, mesh: textMesh, verdict: verdictOf(textFit) });
    // The lens over the root call (or the configuration's lens), the hover, the status bar.
    const root = a.facts.calls.find((c) => c.isRoot);
    // The lens: its segments, verdict first, each a lens of its own; the plan's totals in the plan's tooltip.
    const segments = root ? callSegments(root, e, 'GB') : frameworkSegments(r.framework!, e, 'GB');
    const hover = root ? hoverMarkdown(root, e, 'GB', {}) : frameworkHoverMarkdown(r.framework!, e, 'GB', {});
    const [verdictSeg, , planSeg] = segments;
    const lensFit = /^(fits|does not fit|fit undecided)/.exec(verdictSeg!.text);
    out.push({
      peak: / · peak (\S+ \S+)/.exec(planSeg!.tooltip)?.[1] ?? '',
      units: Number(/^(\d+) \S+ units?/.exec(planSeg!.text)?.[1]),
      mesh: out[0]!.mesh,
      verdict:
        verdictSeg!.icon === 'undecided' ||
        new RegExp(`^(fits|does not fit) ${e.mesh.worldSize} x `).test(verdictSeg!.text)
          ? verdictOf(lensFit?.[1])
          : '?',
    });
    // A line a person reads at a glance: about 80 characters, the verdict first.
    const line = segments.map((x) => (x.icon ? `$ ${x.text}` : x.text)).join(' | ');
    assert.ok(line.length <= 80, line);
    out.push({
      peak: /\*\*Peak (\S+ \S+)\*\*/.exec(hover)?.[1] ?? '',
      units: Number(/^(\d+) units over/m.exec(hover)?.[1]),
      mesh: /HSDP: (\d+) replicas x (\d+)/.test(hover)
        ? `${e.mesh.worldSize} = ${/HSDP: (\d+) replicas x (\d+)/.exec(hover)![1]} x ${/HSDP: (\d+) replicas x (\d+)/.exec(hover)![2]}`
        : `${/ · (\d+) x /.exec(hover)?.[1]} = 1 x ${/ · (\d+) x /.exec(hover)?.[1]}`,
      verdict: verdictOf(/^. \*\*(Fits|Does not fit|Fit undecided)\*\*/m.exec(hover)?.[1]?.toLowerCase()),
    });
    const status = statusSummary(e, 'GB');
    // The entry names the GPU it judges against, with what it holds, beside the peak.
    assert.ok(
      status.text.endsWith(
        `of ${fmtBytes(gpuBytes(e.gpu), 'GB')} · ${e.mesh.worldSize}x ${shortGpu(e.gpu.name)}`,
      ),
      status.text,
    );
    out.push({
      peak: /FSDP (\S+ \S+)\/GPU/.exec(status.text)?.[1] ?? '',
      units: e.units.length,
      mesh: meshOf(e.mesh),
      verdict: /^(Fits|Does not fit|Fit on)/.test(status.tooltip[1]!) ? status.verdict : '?',
    });
    // The panel's first data, and the what-if at the file's own values.
    const first = buildPanelData({ facts: a.facts, uri: file, focusUnit: null, units: 'GB', estimate: r });
    const own = buildPanelData({
      facts: a.facts,
      uri: file,
      focusUnit: null,
      units: 'GB',
      estimate: r,
      whatIf: first.whatIf!.base,
    });
    for (const d of [first, own])
      out.push({
        peak: fmtBytes(d.estimate!.perGpu.peakBytes),
        units: d.estimate!.units.length,
        mesh: meshOf(d.estimate!.mesh),
        verdict: d.estimate!.targetFit.verdict,
      });
    assert.deepEqual(whatIfFrom(first.whatIf!.base, first.whatIf!.base), {});
    const again = r.whatIf.run(whatIfFrom(first.whatIf!.base));
    out.push({
      peak: fmtBytes(again.perGpu.peakBytes),
      units: again.units.length,
      mesh: meshOf(again.mesh),
      verdict: again.targetFit.verdict,
    });
    return out;
  } finally {
    project.dispose();
  }
}

const PLANS: [string, string, Partial<Surfaces>][] = [
  ['FSDP2, a unit per decoder layer', 'workspace/train_fsdp2.py', { units: 33, mesh: '8 = 1 x 8' }],
  ['FSDP1 with a transformer auto-wrap policy', 'scan/hf_fsdp1.py', { units: 33 }],
  ['HSDP on a 2-D mesh of 12 GPUs', 'consistency/hsdp_mesh_12_gpus.py', { units: 17, mesh: '12 = 2 x 6' }],
  ['CPU offload', 'consistency/offload.py', { units: 33 }],
  ['LoRA through PEFT', 'finetune/peft_lora_llama.py', { units: 17 }],
  ['an Accelerate configuration', 'frameworks/accelerate/accelerate_fsdp2.yaml', {}],
  ['a helper called from another file', 'projects/titan/mypkg/parallelize.py', {}],
];

describe('every surface reports the same peak, fit, units and mesh', () => {
  for (const [name, rel, expected] of PLANS)
    it(name, { timeout: 60_000 }, async () => {
      const all = await everySurface(rel);
      for (const s of all.slice(1)) assert.deepEqual(s, all[0], `${rel}: ${JSON.stringify(all, null, 1)}`);
      const first = all[0]!;
      assert.ok(/^\d/.test(first.peak), first.peak);
      for (const [k, v] of Object.entries(expected)) assert.equal(first[k as keyof Surfaces], v, k);
    });

  it("FSDP1 HYBRID_SHARD at 12 GPUs on nodes of 8 is PyTorch's ValueError on every surface", async () => {
    const file = path.join(FIXTURES, 'consistency/hybrid_12_gpus.py');
    const why =
      /new_subgroups\(8\) raises ValueError \("The world size \(12\) must be divisible by 'group_size=8'"\)/;
    for (const args of [[file], [file, '--json']]) {
      const r = await cli('estimate', ...args);
      assert.equal(r.code, 2);
      assert.match(r.err, why);
    }
    const { a, project } = await editor(file);
    project.dispose();
    assert.ok(a.estimate && !a.estimate.ok);
    assert.match(a.estimate.reason, why);
    const root = a.facts.calls.find((c) => c.isRoot)!;
    assert.match(lensTitle(root, undefined, 'GB', { why: a.estimate.reason }), why);
    assert.match(hoverMarkdown(root, undefined, 'GB', {}, a.estimate.reason).replace(/\\/g, ''), why);
    const d = buildPanelData({
      facts: a.facts,
      uri: file,
      focusUnit: null,
      units: 'GB',
      estimate: a.estimate,
    });
    assert.match(d.noEstimate!.reason, why);
  });

  it("the panel's HYBRID_SHARD what-if at 12 GPUs on nodes of 8 says the same, and offers the controls back", async () => {
    const file = path.join(FIXTURES, 'workspace/train_fsdp2.py');
    const { a, project } = await editor(file);
    project.dispose();
    assert.ok(a.estimate?.ok);
    const d = buildPanelData({
      facts: a.facts,
      uri: file,
      focusUnit: null,
      units: 'GB',
      estimate: a.estimate,
      whatIf: { worldSize: 12, strategy: 'HYBRID_SHARD' },
    });
    assert.match(d.noEstimate!.reason, /The world size \(12\) must be divisible by 'group_size=8'/);
    assert.equal(d.whatIf!.values.worldSize, 12);
    assert.ok(d.whatIf!.controls.some((c) => c.key === 'worldSize'));
  });

  it('a wrap the defaults keep off: the lens and the hover say so and name the arguments, not "matches no module"', async () => {
    const file = path.join(FIXTURES, 'workspace/two_paths.py');
    const { a, project } = await editor(file);
    project.dispose();
    assert.ok(a.estimate?.ok);
    const fsdp1 = a.facts.calls.find((c) => c.api === 'FSDP')!;
    const lens = lensTitle(fsdp1, a.estimate.estimate, 'GB');
    assert.match(lens, /^off the default path, not estimated · --strategy fsdp takes it · FSDP1/);
    const hover = hoverMarkdown(fsdp1, a.estimate.estimate, 'GB', { chooseArguments: 'command:x' });
    assert.match(hover, /Not in this estimate: off the path the script's defaults take/);
    assert.match(hover, /`--strategy fsdp` takes it/);
    assert.match(hover, /\[Choose the script's arguments\]\(command:x\)/);
    assert.doesNotMatch(lens + hover, /matches no module/i);
  });

  it("a script that wraps through a helper: the panel lists the helper's wraps at its call", async () => {
    const file = path.join(FIXTURES, 'workspace/helper/run.py');
    const { a, project } = await editor(file);
    project.dispose();
    assert.ok(a.estimate?.ok);
    const d = buildPanelData({
      facts: a.facts,
      uri: file,
      focusUnit: null,
      units: 'GB',
      estimate: a.estimate,
    });
    // shard_decoder's two wraps (32 decoder layers, then the root), at the line of run.py that calls it.
    const line =
      fs
        .readFileSync(file, 'utf8')
        .split('\n')
        .findIndex((t) => t.startsWith('shard_decoder(')) + 1;
    assert.equal(d.calls.length, 2);
    assert.deepEqual(
      d.calls.map((c) => c.line),
      [line, line],
    );
    assert.equal(
      d.calls.reduce((n, c) => n + c.units.length, 0),
      33,
    );
  });
});

describe('messages shown where Markdown is not', () => {
  it('lose the backticks of their code spans, and nothing else', () => {
    assert.equal(
      plainText('Blocks of `model.model.layers` are wrapped but `model` itself never is.'),
      'Blocks of model.model.layers are wrapped but model itself never is.',
    );
    assert.equal(plainText('a lone ` stays'), 'a lone ` stays');
  });
});
