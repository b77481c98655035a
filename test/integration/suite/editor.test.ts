import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { FsdpLensApi } from '../../../src/extension/extension';
import type { PanelData } from '../../../src/core/report/panelData';
import { codeLenses, eventually, EXTENSION_ID, open, sleep, workspaceFile, revertFile } from './util';

// Llama 3.1 8B (its config.json): hidden 4096, 32 layers, 32 heads / 8 KV heads of 128, intermediate 14336,
// vocab 128256, untied head. One decoder layer: attention 4096 x (4096 + 1024 + 1024 + 4096) = 41,943,040, MLP
// 3 x 4096 x 14336 = 176,160,768, two norms 8,192: 218,112,000. The model: 32 layers + embedding and head
// 2 x 128256 x 4096 + final norm 4096 = 8,030,261,248.
const LAYER = 218_112_000;
const PARAMS = 8_030_261_248;

function hoverText(hovers: vscode.Hover[]): string {
  return hovers
    .flatMap((h) => h.contents)
    .map((c) => (typeof c === 'string' ? c : 'value' in c ? c.value : ''))
    .join('\n');
}

async function api(): Promise<FsdpLensApi> {
  const ext = vscode.extensions.getExtension<FsdpLensApi>(EXTENSION_ID)!;
  return ext.activate();
}

async function openPanel(name: string): Promise<PanelData> {
  const editor = await open(name);
  await eventually(
    () => codeLenses(editor.document.uri),
    (l) => l.some((x) => /peak/.test(x.command?.tooltip ?? '')),
    'lenses with numbers',
  );
  await vscode.commands.executeCommand('fsdpLens.estimateFootprint', editor.document.uri);
  const a = await api();
  return eventually(
    () => a.panel()?.lastData,
    (d) => !!d?.estimate && d.uri === editor.document.uri.toString(),
    'the panel data',
  ) as Promise<PanelData>;
}

describe('lenses, hovers and the footprint panel', () => {
  it('the block lens gives the unit peak, the root lens the step peak and the fit', async () => {
    const editor = await open('train_fsdp2.py');
    const lenses = await eventually(
      () => codeLenses(editor.document.uri),
      (l) => l.filter((x) => /peak/.test(x.command?.tooltip ?? '')).length >= 2,
      'lenses with peaks',
    );
    const text = editor.document.getText().split('\n');
    // A line's segments: their titles, then their tooltips (where the peaks are).
    const title = (needle: string) => {
      const at = lenses.filter((l) => l.range.start.line === text.findIndex((t) => t.includes(needle)));
      return [...at.map((l) => l.command?.title ?? ''), ...at.map((l) => l.command?.tooltip ?? '')].join(
        '\n',
      );
    };
    const block = title('fully_shard(layer');
    const root = title('fully_shard(model');
    const d = await openPanel('train_fsdp2.py');
    const e = d.estimate!;
    const gb = (n: number) => `${(n / 1e9).toPrecision(3)} GB`;
    // The same numbers as the panel: one analysis feeds every surface.
    assert.ok(root.includes(`peak ${gb(e.perGpu.peakBytes)} at the loss`), root);
    assert.match(root, /^\$\(pass\) fits 8 x H100 SXM$/m);
    assert.match(root, /fits 8 x H100 SXM 80GB \([\d.]+ GB spare\)/);
    const blockPeak = Math.max(
      ...e.units
        .filter((u) => u.classNames[0] === 'LlamaDecoderLayer')
        .map((u) => e.perGpu.perUnitPeakBytes[u.name]!),
    );
    assert.ok(block.includes(`peak ${gb(blockPeak)} while they run`), block);
    // A block runs with the sharded state (8,030,261,248 x 16 B / 8 = 16.06 GB) and its gathered bf16 weights.
    assert.ok(
      blockPeak > PARAMS * 2 + LAYER * 2,
      'a block peak holds at least the state and its own weights',
    );
    assert.ok(blockPeak <= e.perGpu.peakBytes);
  });

  it('an entry script that wraps through a helper of another file shows the plan at its call', async () => {
    const editor = await open('helper/run.py');
    const line = editor.document
      .getText()
      .split('\n')
      .findIndex((t) => t.startsWith('shard_decoder('));
    const lenses = await eventually(
      () => codeLenses(editor.document.uri),
      (l) => l.some((x) => x.range.start.line === line && /FSDP2 units/.test(x.command?.title ?? '')),
      'the helper root lens at its call',
    );
    const titles = lenses.filter((l) => l.range.start.line === line).map((l) => l.command?.title ?? '');
    // The helper's two wraps, both at the call: 32 decoder layers of 218,112,000 parameters (2 segments), then
    // the root (verdict, memory, units, traffic).
    assert.equal(titles.length, 6, titles.join('\n'));
    assert.ok(
      titles.some((t) => /32 units x 218M params \(LlamaDecoderLayer\)/.test(t)),
      titles.join('\n'),
    );
    assert.ok(
      titles.some((t) => /33 FSDP2 units/.test(t)),
      titles.join('\n'),
    );
  });

  it("a file of two workers' plans: one estimated, the other chosen from the quick pick as a comment", async () => {
    const editor = await open('two_workers.py');
    const lineOf = (needle: string) =>
      editor.document
        .getText()
        .split('\n')
        .findIndex((t) => t.includes(needle));
    const titleAt = (lenses: vscode.CodeLens[], line: number) =>
      lenses
        .filter((l) => l.range.start.line === line)
        .map((l) => l.command?.title ?? '')
        .join(' | ');
    let lenses = await eventually(
      () => codeLenses(editor.document.uri),
      (l) => l.some((x) => /33 FSDP2 units/.test(x.command?.title ?? '')),
      'the lenses of the first plan',
    );
    // The scoring worker's root wrap is named as the other plan, not given the policy worker's figures.
    assert.match(
      titleAt(lenses, lineOf('fully_shard(model, offload_policy')),
      /plan of class ScoringWorker, not estimated \(estimating PolicyWorker\)/,
    );
    const chosen = vscode.commands.executeCommand('fsdpLens.chooseWhatToEstimate', editor.document.uri);
    await sleep(800);
    // The items: PolicyWorker (estimated now), ScoringWorker, the script's arguments.
    await vscode.commands.executeCommand('workbench.action.quickOpenSelectNext');
    await vscode.commands.executeCommand('workbench.action.acceptSelectedQuickOpenItem');
    await chosen;
    assert.equal(editor.document.lineAt(0).text, '# fsdp: plan=ScoringWorker');
    lenses = await eventually(
      () => codeLenses(editor.document.uri),
      (l) => /33 FSDP2 units/.test(titleAt(l, lineOf('fully_shard(model, offload_policy'))),
      'the lenses of the chosen plan',
    );
    assert.match(
      titleAt(lenses, lineOf('        fully_shard(model)')),
      /plan of class PolicyWorker, not estimated/,
    );
    await vscode.commands.executeCommand('workbench.action.revertAndCloseActiveEditor');
  });

  it('a wrap the defaults keep off says so, and the quick pick offers the arguments that take it', async () => {
    const editor = await open('two_paths.py');
    const fsdp1 = editor.document
      .getText()
      .split('\n')
      .findIndex((t) => t.includes('model = FSDP(model)'));
    const titleAt = (lenses: vscode.CodeLens[], line: number) =>
      lenses
        .filter((l) => l.range.start.line === line)
        .map((l) => l.command?.title ?? '')
        .join(' | ');
    let lenses = await eventually(
      () => codeLenses(editor.document.uri),
      (l) => l.some((x) => /33 FSDP2 units/.test(x.command?.title ?? '')),
      'the lenses of the default path',
    );
    // The FSDP1 arm: off by --strategy's default, and the arguments that take it, not "matches no module".
    assert.match(titleAt(lenses, fsdp1), /^off the default path, not estimated · --strategy fsdp takes it/);
    const chosen = vscode.commands.executeCommand('fsdpLens.chooseWhatToEstimate', editor.document.uri);
    await sleep(800);
    // The first item: the arguments that take the other path.
    await vscode.commands.executeCommand('workbench.action.acceptSelectedQuickOpenItem');
    await chosen;
    assert.equal(editor.document.lineAt(0).text, '# fsdp: args="--strategy fsdp"');
    lenses = await eventually(
      () => codeLenses(editor.document.uri),
      (l) => /1 FSDP1 unit\b/.test(titleAt(l, fsdp1 + 1)),
      'the lens of the FSDP1 plan',
    );
    // The FSDP2 arm is the one off the path now.
    assert.ok(lenses.some((l) => /^off the default path/.test(l.command?.title ?? '')));
    await vscode.commands.executeCommand('workbench.action.revertAndCloseActiveEditor');
  });

  it('hovers a fully_shard line with the breakdown, the assumptions and command links', async () => {
    const editor = await open('train_fsdp2.py');
    await eventually(
      () => codeLenses(editor.document.uri),
      (l) => l.some((x) => /peak/.test(x.command?.tooltip ?? '')),
      'the analysis',
    );
    const line = editor.document
      .getText()
      .split('\n')
      .findIndex((t) => t.includes('fully_shard(layer'));
    const col = editor.document.lineAt(line).text.indexOf('fully_shard') + 3;
    const hovers = await vscode.commands.executeCommand<vscode.Hover[]>(
      'vscode.executeHoverProvider',
      editor.document.uri,
      new vscode.Position(line, col),
    );
    const md = hoverText(hovers);
    assert.match(md, /parameters each \| 218,112,000/);
    // bf16 gather: 218,112,000 x 2 B = 0.436 GB. Each GPU's shard: 1/8 of the layer in fp32 for parameters and
    // gradients (2 x 109 MB) and two Adam states (218 MB): 0.436 GB.
    assert.match(md, /gathered each \| 0\\?\.436 GB/);
    assert.match(md, /shard on each GPU each \| 0\\?\.436 GB/);
    assert.match(md, /world size: 8 _\(default\)_/);
    assert.match(md, /command:fsdpLens\.estimateFootprint\?/);
    assert.match(md, /command:fsdpLens\.setWorldSize\?/);
    // The root's hover: the persistent terms with their formulas.
    const rootLine = editor.document
      .getText()
      .split('\n')
      .findIndex((t) => t.includes('fully_shard(model'));
    const rootHover = hoverText(
      await vscode.commands.executeCommand<vscode.Hover[]>(
        'vscode.executeHoverProvider',
        editor.document.uri,
        new vscode.Position(rootLine, 8),
      ),
    );
    assert.match(rootHover, /sharded parameters \| 4\\?\.02 GB/, '8,030,261,248 x 4 B / 8');
    assert.match(rootHover, /optimizer state \| 8\\?\.03 GB/, '8,030,261,248 x 8 B / 8');
  });

  it('the panel answers the questions, and what-if values re-estimate', async () => {
    const d = await openPanel('train_fsdp2.py');
    const e = d.estimate!;
    assert.equal(e.model.params, PARAMS);
    // fp32 parameters, gradients and two Adam states: 16 B per parameter over 8 GPUs (every dim divides by 8).
    assert.ok(
      Math.abs(e.perGpu.persistentBytes - (PARAMS * 16) / 8) < 4096,
      String(e.perGpu.persistentBytes),
    );
    assert.ok(e.timeline.length > 64, 'a timeline through 32 blocks forward and backward');
    assert.ok(d.fitMatrix!.gpus.some((g) => g.id === 'h100-sxm-80gb'));
    assert.equal(d.advice![0]!.level, 'ok');
    const p = (await api()).panel()!;
    const at16 = (await p.setWhatIf({ ...d.whatIf!.values, worldSize: 16 }))!;
    // Twice the GPUs: half the state.
    assert.ok(Math.abs(at16.estimate!.perGpu.persistentBytes - PARAMS) < 4096);
    assert.equal(at16.whatIf!.values.worldSize, 16);
    assert.equal(at16.whatIf!.base.worldSize, 8);
    const one = (await p.setWhatIf({ worldSize: 1 }))!;
    assert.equal(one.advice![0]!.id, 'fit', 'one GPU cannot hold 128 GB of state');
    assert.ok(one.advice![0]!.options.some((o) => o.verdict === 'fits' && o.label === '3 GPUs'));
    // Each advice option is an estimate under its change. On 3 GPUs FSDP2 pads each parameter's dim 0 to a
    // multiple of 3: a layer's shard is ceil(rows/3) rows of each weight, 2 x 1366 x 4096 (q, o) + 2 x 342 x 4096
    // (k, v) + 2 x 4779 x 4096 (gate, up) + 1366 x 14336 (down) + 2 x 1366 (norms) = 72,727,212 elements; with
    // embedding and head 2 x 42752 x 4096 and the final norm 1366, 2,677,496,534 elements x 16 B, plus the
    // rotary inv_freq buffer (64 x 4 B) = 42,839,944,800 bytes.
    const three = one.advice![0]!.options.find((o) => o.label === '3 GPUs')!;
    assert.equal(three.persistentBytes, (32 * 72_727_212 + 2 * 42_752 * 4096 + 1366) * 16 + 256);
    await p.setWhatIf({});
  });

  it('the panel compares the file with another open version, cause by cause, and solves what fits', async () => {
    const d = await openPanel('train_fsdp2.py');
    const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(d.uri));
    // The same job on 16 GPUs, in an unsaved document: the older version of the comparison.
    const other = await vscode.workspace.openTextDocument({
      language: 'python',
      content: `# fsdp: world_size=16\n${doc.getText()}`,
    });
    const p = (await api()).panel()!;
    try {
      const c = (await p.setComparing(other.uri.toString()))!;
      assert.ok(c.compareChoices!.some((x) => x.value === 'HEAD'));
      const delta = c.compare!.delta!;
      // From 16 GPUs to 8: each GPU holds twice the state, 16 B per parameter / 16 more: PARAMS bytes.
      assert.ok(Math.abs(delta.after.persistentBytes - delta.before.persistentBytes - PARAMS) < 8192);
      assert.deepEqual(
        delta.causes.map((x) => x.cause),
        ['world size'],
      );
      const sum = delta.causes.reduce((a, x) => a + x.peakBytes, 0);
      assert.equal(sum, delta.after.peakBytes - delta.before.peakBytes, 'the causes add up to the total');
      await p.setComparing('');
      const f = (await p.setFitOpen(true))!;
      assert.equal(f.fit!.target.worldSize, 8);
      assert.ok(
        f.fit!.perGpu.some((r) => r.gpu === 'h100-sxm-80gb' && r.largestMicroBatch.status === 'found'),
      );
    } finally {
      await p.setFitOpen(false);
      await p.setComparing('');
    }
  });

  it("the panel puts a measured run beside the file's own estimate, phase by phase", async () => {
    const d = await openPanel('train_fsdp2.py');
    const events = d.estimate!.timeline;
    const peak = (phases: string[]) =>
      Math.max(...events.filter((e) => phases.includes(e.phase)).map((e) => e.totalBytes));
    // What fsdp_lens_probe.py writes on rank 0: its forward is the estimate's forward peak (forward and loss), its
    // backward twice the estimate's.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fsdp-lens-run-'));
    const file = path.join(dir, 'run.rank0.json');
    fs.writeFileSync(
      file,
      JSON.stringify({
        fsdpLensProbe: 1,
        rank: 0,
        worldSize: 8,
        device: 'NVIDIA H100 80GB HBM3',
        phases: {
          forward: { allocated: peak(['forward', 'loss']), reserved: 40e9 },
          backward: { allocated: 2 * peak(['backward']), reserved: 50e9 },
        },
        settings: { micro_batch: 1 },
      }),
    );
    const p = (await api()).panel()!;
    try {
      const m = (await p.setMeasured(file))!.measured;
      assert.ok(m && 'phases' in m, JSON.stringify(m));
      assert.equal(m.file, file);
      assert.equal(m.source, 'probe');
      assert.deepEqual(
        m.phases.map((x) => [x.phase, x.ratio]),
        [
          ['forward', 1],
          ['backward', 0.5],
        ],
      );
      assert.equal(m.reserved.measuredBytes, 50e9);
      assert.equal(m.reserved.ratio, d.estimate!.perGpu.reservedBytes / 50e9);
      // A what-if changes the panel's figures, not the estimate the run is compared with.
      const w = (await p.setWhatIf({ ...d.whatIf!.values, worldSize: 16 }))!;
      assert.notEqual(w.estimate!.perGpu.peakBytes, d.estimate!.perGpu.peakBytes);
      assert.deepEqual(w.measured, m);
      await p.setWhatIf({});
      // A file that is no run says why.
      const notes = path.join(dir, 'notes.txt');
      fs.writeFileSync(notes, 'epoch 1 done\n');
      const bad = (await p.setMeasured(notes))!.measured;
      assert.ok(bad && 'error' in bad);
      assert.match(bad.error, /no memory line/);
      assert.equal((await p.setMeasured(''))!.measured, undefined);
    } finally {
      await p.setWhatIf({});
      await p.setMeasured('');
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('"Apply to file" writes the sharding and CPU offload into the wraps, and the file then says them', async () => {
    const d = await openPanel('train_fsdp2.py');
    const editor = vscode.window.visibleTextEditors.find((x) => x.document.uri.toString() === d.uri)!;
    const p = (await api()).panel()!;
    try {
      const w = (await p.setWhatIf({ ...d.whatIf!.values, strategy: 'SHARD_GRAD_OP', offload: 'on' }))!;
      // No annotation says either: each is a change of the code, with the fix that writes it.
      assert.deepEqual(
        w.whatIf!.changed.map((c) => [c.key, c.annotation, c.codeFix]),
        [
          ['strategy', null, 'Write reshard_after_forward=False'],
          ['offload', null, 'Write offload_policy=CPUOffloadPolicy()'],
        ],
      );
      assert.ok(await p.applyWhatIf());
      const text = editor.document.getText();
      // Every block's wrap keeps its units gathered and offloads; the root keeps its default reshard.
      assert.match(
        text,
        /\n {8}fully_shard\(layer, mp_policy=mp, reshard_after_forward=False, offload_policy=CPUOffloadPolicy\(\)\)\n/,
      );
      assert.match(text, /\n {4}fully_shard\(model, mp_policy=mp, offload_policy=CPUOffloadPolicy\(\)\)\n/);
      assert.match(text, /^from torch\.distributed\.fsdp import CPUOffloadPolicy$/m);
      // Analysed again, the file itself now keeps the blocks gathered and offloads every unit.
      const after = await eventually(
        async () => (await p.setWhatIf({})) ?? undefined,
        (x) => !!x && x.whatIf!.base.offload === 'on',
        'the panel to show the rewritten file',
      );
      assert.equal(after!.whatIf!.base.strategy, 'SHARD_GRAD_OP');
      assert.ok(
        after!.estimate!.units.filter((u) => !u.isRoot).every((u) => u.residency.kind === 'keep'),
        'the blocks are kept gathered from forward to backward',
      );
      assert.deepEqual(after!.whatIf!.changed, []);
    } finally {
      await revertFile(editor.document);
      // The panel back on the file as it was, for the tests after this one.
      await eventually(
        async () => (await p.setWhatIf({})) ?? undefined,
        (x) => !!x && x.whatIf!.base.offload === 'off',
        'the panel to show the reverted file',
      );
    }
  });

  it('a what-if says it is one, and "Apply to file" writes it as annotations', async () => {
    const d = await openPanel('train_fsdp2.py');
    const editor = vscode.window.visibleTextEditors.find((x) => x.document.uri.toString() === d.uri)!;
    const p = (await api()).panel()!;
    try {
      const w = (await p.setWhatIf({ ...d.whatIf!.values, worldSize: 16, checkpointing: 'full' }))!;
      // The banner's list: what differs from the file, with the file's value and the key that says it.
      assert.deepEqual(
        w.whatIf!.changed.map((c) => [c.key, c.value, c.file, c.annotation]),
        [
          ['worldSize', '16', '8', 'world_size'],
          ['checkpointing', 'full (every block)', 'none', 'ac'],
        ],
      );
      assert.ok(await p.applyWhatIf());
      // Each pair where a comment has it, else in a comment of its own at the top.
      assert.match(editor.document.getText(), /# fsdp: ac=full\n/);
      assert.match(editor.document.getText(), /# fsdp: [^\n]*world_size=16/);
      // Analysed again, the file itself now says 16 GPUs and full checkpointing: no what-if is left.
      const after = await eventually(
        async () => (await p.setWhatIf({})) ?? undefined,
        (x) => !!x && x.whatIf!.base.worldSize === 16,
        'the panel to show the annotated file',
      );
      assert.equal(after!.whatIf!.base.checkpointing, 'full');
      assert.deepEqual(after!.whatIf!.changed, []);
    } finally {
      await revertFile(editor.document);
      await p.setWhatIf({});
    }
  });

  it('"Apply to file" turns checkpointing on in the config, where the fix of a plan that does not fit does', async () => {
    const d = await openPanel('lint/fsdp015_accelerate.yaml');
    const editor = vscode.window.visibleTextEditors.find((x) => x.document.uri.toString() === d.uri)!;
    const p = (await api()).panel()!;
    try {
      assert.equal(d.estimate!.targetFit!.verdict, 'short');
      const w = (await p.setWhatIf({ ...d.whatIf!.values, checkpointing: 'full' }))!;
      const change = w.whatIf!.changed.find((c) => c.key === 'checkpointing')!;
      assert.match(
        change.codeFix ?? '',
        /^Enable activation checkpointing: fsdp_activation_checkpointing: true/,
      );
      assert.ok(await p.applyWhatIf());
      // The config's own key, not an annotation.
      assert.match(editor.document.getText(), /\nfsdp_config:\n {2}fsdp_activation_checkpointing: true\n/);
      assert.doesNotMatch(editor.document.getText(), /ac=full/);
      const after = await eventually(
        async () => (await p.setWhatIf({})) ?? undefined,
        (x) => !!x && x.whatIf!.base.checkpointing === 'full',
        'the panel to show the changed config',
      );
      assert.equal(after!.estimate!.targetFit!.verdict, 'fits');
      assert.deepEqual(after!.whatIf!.changed, []);
    } finally {
      await revertFile(editor.document);
      await p.setWhatIf({});
    }
  });

  it('"Apply to file" writes a world size to the config key its reader takes it from', async () => {
    const d = await openPanel('lint/fsdp015_accelerate.yaml');
    const editor = vscode.window.visibleTextEditors.find((x) => x.document.uri.toString() === d.uri)!;
    const p = (await api()).panel()!;
    try {
      const w = (await p.setWhatIf({ ...d.whatIf!.values, worldSize: 16 }))!;
      const change = w.whatIf!.changed.find((c) => c.key === 'worldSize')!;
      assert.equal(change.codeFix, 'Write num_processes: 16');
      assert.ok(await p.applyWhatIf());
      assert.match(editor.document.getText(), /\nnum_processes: 16\n/);
      assert.doesNotMatch(editor.document.getText(), /world_size=16/);
      const after = await eventually(
        async () => (await p.setWhatIf({})) ?? undefined,
        (x) => !!x && x.whatIf!.base.worldSize === 16,
        'the panel to show the changed config',
      );
      assert.deepEqual(after!.whatIf!.changed, []);
    } finally {
      await revertFile(editor.document);
      await p.setWhatIf({});
    }
  });

  it('shows the right lenses on each bundled example', async () => {
    const lensesOf = async (name: string, lines: number) => {
      const editor = await open(`examples/${name}`);
      const lenses = await eventually(
        () => codeLenses(editor.document.uri),
        (l) => l.length >= lines && l.some((x) => /GB/.test(x.command?.title ?? '')),
        `lenses with numbers on ${name}`,
      );
      // Each segment's title, and on the next lines its tooltip, where the details are.
      return lenses.map((l) => `${l.command?.title ?? ''}\n${l.command?.tooltip ?? ''}`);
    };
    // Llama 3.1 8B, a unit per layer and the root, 8 GPUs: 8,030,261,248 x 16 B / 8 = 16.1 GB per GPU.
    const llama = await lensesOf('train_llama_fsdp2.py', 2);
    assert.ok(llama.some((t) => /^FSDP2 32 units x 218M params \(LlamaDecoderLayer\)$/m.test(t)));
    assert.ok(llama.some((t) => /^0\.436 GB gathered each$/m.test(t)));
    // The root's line: the verdict first, with its icon; the plan's totals in the tooltip of its units.
    assert.ok(
      llama.some((t) => /^\$\(pass\) fits 8 x H100 SXM$/m.test(t)),
      llama.join('\n'),
    );
    assert.ok(
      llama.some((t) =>
        /^FSDP2 root: 33 units · 16\.1 GB\/GPU persistent · peak .* · fits 8 x H100/m.test(t),
      ),
    );
    // Llama 3.2 3B under FSDP1's transformer policy: 28 layers + the root; 3,212,749,824 x 16 B / 8 = 6.43 GB.
    const fsdp1 = await lensesOf('train_fsdp1_auto_wrap.py', 1);
    assert.ok(
      fsdp1.some((t) => /^FSDP1 root: 29 units · 6\.43 GB\/GPU persistent/m.test(t)),
      fsdp1.join('\n'),
    );
    // Qwen2.5 7B with its 28 blocks wrapped and no root: the blocks' 6,525,618,176 params x 16 B / 8 = 13.05 GB,
    // and the embedding, head and norm (2 x 152064 x 3584 + 3584 = 1,089,998,336) whole on every GPU with
    // gradients and Adam state (x 16 B = 17.44 GB): 30.5 GB.
    const noRoot = await lensesOf('missing_root_wrap.py', 1);
    assert.ok(
      noRoot.some((t) =>
        /^FSDP2 28 units x 233M params .*, and no root wrap: 28 units · 30\.5 GB\/GPU persistent/m.test(t),
      ),
      noRoot.join('\n'),
    );
  });

  it('shows the plan of framework configurations: Accelerate YAML, Lightning, torchtune, torchtitan', async () => {
    const lensOf = async (name: string) => {
      const doc = await vscode.workspace.openTextDocument(workspaceFile(`frameworks/${name}`));
      await vscode.window.showTextDocument(doc);
      const lenses = await eventually(
        () => codeLenses(doc.uri),
        (l) => l.some((x) => /GB/.test(x.command?.title ?? '')),
        `a lens with numbers on ${name}`,
      );
      return lenses.map((l) => `${l.command?.title ?? ''}\n${l.command?.tooltip ?? ''}`).join('\n');
    };
    // Llama 3.1 8B under Accelerate's FSDP2 on 8 GPUs: 32 blocks, the embedding, [norm, head], the root; fp32
    // state of 8,030,261,248 x 16 B / 8 = 16.1 GB per GPU. The model comes from the script beside the YAML.
    assert.match(
      await lensOf('accelerate/accelerate_fsdp2.yaml'),
      /^Accelerate → FSDP2: 35 units · 16\.1 GB\/GPU persistent · peak .* · fits 8 x H100/m,
    );
    // Llama 3.2 1B under Lightning's FSDPStrategy on 16 GPUs: 1,235,814,400 x 16 B / 16 = 1.24 GB.
    assert.match(
      await lensOf('lightning/train_lightning.py'),
      /^Lightning → FSDP1 FULL_SHARD: 17 units · 1\.24 GB\/GPU persistent/m,
    );
    // torchtune's 8B_full in pure bf16: 8,030,261,248 x 8 B / 8 = 8.03 GB.
    assert.match(
      await lensOf('torchtune/8B_full.yaml'),
      /^torchtune → FSDP2: 35 units · 8\.03 GB\/GPU persistent/m,
    );
    // torchtitan 8B: fp32 state 16.06 GB and the 4.2 MB freqs_cis table.
    assert.match(
      await lensOf('torchtitan/llama3_8b.toml'),
      /^torchtitan → FSDP2: 35 units · 16\.1 GB\/GPU persistent/m,
    );
    // The hover over the YAML's lens line gives the breakdown.
    const yaml = await vscode.workspace.openTextDocument(
      workspaceFile('frameworks/accelerate/accelerate_fsdp2.yaml'),
    );
    const line = yaml
      .getText()
      .split('\n')
      .findIndex((l) => l.startsWith('distributed_type'));
    const md = hoverText(
      await vscode.commands.executeCommand<vscode.Hover[]>(
        'vscode.executeHoverProvider',
        yaml.uri,
        new vscode.Position(line, 3),
      ),
    );
    assert.match(md, /Accelerate → FSDP2/);
    assert.match(md, /sharded parameters \| 4\\?\.02 GB/);
  });

  it('FSDP016 in an Accelerate YAML whose FSDP1 strategy is written where FSDP1 does not read it', async () => {
    const uri = workspaceFile('frameworks/accelerate/fsdp1_trap.yaml');
    await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(uri));
    const diags = await eventually(
      () => vscode.languages.getDiagnostics(uri),
      (ds) => ds.some((d) => typeof d.code === 'object' && d.code.value === 'FSDP016'),
      'the FSDP016 diagnostic',
    );
    const d = diags.find((x) => typeof x.code === 'object' && x.code.value === 'FSDP016')!;
    assert.equal(d.range.start.line, 5);
    // The Problems entry in a line, verdict first; what to do in the hover over it.
    assert.match(d.message, /^fsdp_reshard_after_forward sets no strategy under fsdp_version 1/);
    assert.ok(d.message.length <= 120, d.message);
    const md = hoverText(
      await vscode.commands.executeCommand<vscode.Hover[]>('vscode.executeHoverProvider', uri, d.range.start),
    );
    assert.match(md, /Set fsdp\\?_sharding\\?_strategy: SHARD\\?_GRAD\\?_OP/);
  });

  it('FSDP015 reports a plan whose peak does not fit, on the root wrap', async () => {
    const editor = await open('lint/fsdp015_bad.py');
    const diags = await eventually(
      () => vscode.languages.getDiagnostics(workspaceFile('lint/fsdp015_bad.py')),
      (ds) => ds.some((x) => typeof x.code === 'object' && x.code.value === 'FSDP015'),
      'the FSDP015 diagnostic',
    );
    const d = diags.find((x) => typeof x.code === 'object' && x.code.value === 'FSDP015')!;
    assert.equal(d.range.start.line, editor.document.lineCount - 2);
    // Verdict first, under 120 characters: how many GPUs it needs, and how many fit.
    assert.match(d.message, /^Does not fit \d+ x [^:]+: needs [\d.]+ GB per GPU of [\d.]+ GB; \d+ GPUs fit$/);
    assert.ok(d.message.length <= 120, d.message);
  });
});
