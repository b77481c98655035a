import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as vscode from 'vscode';
import { codeLenses, eventually, open, workspaceFile, revertFile } from './util';

function fsdpDiagnostics(uri: vscode.Uri): vscode.Diagnostic[] {
  return vscode.languages.getDiagnostics(uri).filter((d) => d.source === 'fsdp-lens');
}

function codeOf(d: vscode.Diagnostic): string {
  return typeof d.code === 'object' ? String(d.code.value) : String(d.code);
}

async function diagnosticsFor(
  name: string,
  codes: string[],
): Promise<{ editor: vscode.TextEditor; diagnostics: vscode.Diagnostic[] }> {
  const editor = await open(name);
  const diagnostics = await eventually(
    () => fsdpDiagnostics(editor.document.uri),
    (d) => JSON.stringify(d.map(codeOf).sort()) === JSON.stringify([...codes].sort()),
    `diagnostics ${codes.join(', ')} on ${name}`,
  );
  return { editor, diagnostics };
}

/** Applies the preferred quick fix of a diagnostic through the editor, as a user choosing it would. */
async function applyPreferredFix(editor: vscode.TextEditor, d: vscode.Diagnostic): Promise<string> {
  const actions = await vscode.commands.executeCommand<vscode.CodeAction[]>(
    'vscode.executeCodeActionProvider',
    editor.document.uri,
    d.range,
  );
  // Only this extension contributes quick fixes in the test host, and the API returns actions without their
  // diagnostics: tell them apart by title.
  const mine = actions.filter((a) => !/Suppress/.test(a.title) || a.title.includes(codeOf(d)));
  const preferred = mine.filter((a) => a.isPreferred);
  assert.equal(
    preferred.length,
    1,
    `one preferred fix for ${codeOf(d)}: ${mine.map((a) => a.title).join(' | ')}`,
  );
  assert.ok(
    mine.some((a) => /Suppress/.test(a.title)),
    'a suppression fix is offered too',
  );
  assert.ok(await vscode.workspace.applyEdit(preferred[0]!.edit!));
  return editor.document.getText();
}

async function revert(editor: vscode.TextEditor): Promise<void> {
  await revertFile(editor.document);
}

describe('lint in the editor', () => {
  it('shows FSDP001 on a script that wraps its blocks but not the model, with a link to the rule', async () => {
    const { diagnostics } = await diagnosticsFor('lint/fsdp001_bad.py', ['FSDP001']);
    const d = diagnostics[0]!;
    assert.equal(d.severity, vscode.DiagnosticSeverity.Error);
    assert.equal(d.range.start.line, 7);
    assert.match(d.message, /^No root wrap: \S+ is never wrapped, only its blocks/);
    assert.ok(d.message.length <= 120, d.message);
    assert.ok(typeof d.code === 'object');
    const target = (d.code as { target: vscode.Uri }).target;
    assert.match(target.path, /docs\/rules\.md$/);
    assert.equal(target.fragment, 'fsdp001-missing-root-wrap');
    assert.ok(fs.existsSync(target.fsPath), 'the linked documentation ships with the extension');
  });

  it('the FSDP001 quick fix inserts the root wrap with the same options', async () => {
    const { editor, diagnostics } = await diagnosticsFor('lint/fsdp001_bad.py', ['FSDP001']);
    try {
      const text = await applyPreferredFix(editor, diagnostics[0]!);
      assert.match(
        text,
        /\n {8}fully_shard\(layer, mesh=mesh, mp_policy=mp, reshard_after_forward=True\)\n {4}fully_shard\(model, mesh=mesh, mp_policy=mp\)\n/,
      );
      await eventually(
        () => fsdpDiagnostics(editor.document.uri),
        (d) => d.length === 0,
        'the finding to clear after the fix',
      );
    } finally {
      await revert(editor);
    }
  });

  it('FSDP015: enabling activation checkpointing makes the plan fit, as its title previews', async () => {
    const { editor, diagnostics } = await diagnosticsFor('lint/fsdp015_activations.py', ['FSDP015']);
    try {
      // The preferred fix changes the code; its title gives the estimate it leads to.
      const actions = await vscode.commands.executeCommand<vscode.CodeAction[]>(
        'vscode.executeCodeActionProvider',
        editor.document.uri,
        diagnostics[0]!.range,
      );
      const title = actions.find((a) => /^Enable activation checkpointing/.test(a.title))?.title ?? '';
      const needs = /\(fits, needs ([\d.]+ GB) of 85\.5 GB per GPU\)$/.exec(title)?.[1];
      assert.ok(needs, title);
      const text = await applyPreferredFix(editor, diagnostics[0]!);
      assert.match(
        text,
        /\nmodel = AutoModelForCausalLM\.from_pretrained\("meta-llama\/Llama-3\.1-8B"\)\nmodel\.gradient_checkpointing_enable\(\)\n/,
      );
      // Analysed again: the finding clears, and the root's lens says it fits with the figure the title gave.
      await eventually(
        () => fsdpDiagnostics(editor.document.uri),
        (d) => d.length === 0,
        'the finding to clear after the fix',
      );
      const lenses = await eventually(
        () => codeLenses(editor.document.uri),
        (l) => l.some((x) => /fits 8 x H100 SXM/.test(x.command?.title ?? '')),
        'the lens to say it fits',
      );
      assert.ok(
        lenses.some((x) => x.command?.title === `needs ${needs!.replace(' GB', '')}/85.5 GB`),
        lenses.map((x) => x.command?.title).join(' | '),
      );
    } finally {
      await revert(editor);
    }
  });

  it('FSDP015: the CPU offload fix writes the policy on every wrap, and the plan fits', async () => {
    const { editor, diagnostics } = await diagnosticsFor('lint/fsdp015_offload.py', ['FSDP015']);
    try {
      const actions = await vscode.commands.executeCommand<vscode.CodeAction[]>(
        'vscode.executeCodeActionProvider',
        editor.document.uri,
        diagnostics[0]!.range,
      );
      const offload = actions.find((a) => /^Offload to CPU/.test(a.title));
      assert.ok(offload?.edit, actions.map((a) => a.title).join(' | '));
      assert.ok(await vscode.workspace.applyEdit(offload.edit));
      const text = editor.document.getText();
      assert.match(
        text,
        /\n {4}fully_shard\(layer, offload_policy=CPUOffloadPolicy\(\)\)\nfully_shard\(model, offload_policy=CPUOffloadPolicy\(\)\)\n/,
      );
      assert.match(text, /^from torch\.distributed\.fsdp import CPUOffloadPolicy$/m);
      await eventually(
        () => fsdpDiagnostics(editor.document.uri),
        (d) => d.length === 0,
        'the finding to clear after the fix',
      );
      await eventually(
        () => codeLenses(editor.document.uri),
        (l) => l.some((x) => /fits 2 x A100 SXM/.test(x.command?.title ?? '')),
        'the lens to say it fits',
      );
    } finally {
      await revert(editor);
    }
  });

  it("FSDP015 on an Accelerate config: the fix writes the config's own key and the plan fits", async () => {
    const { editor, diagnostics } = await diagnosticsFor('lint/fsdp015_accelerate.yaml', ['FSDP015']);
    try {
      const text = await applyPreferredFix(editor, diagnostics[0]!);
      assert.match(
        text,
        /\nfsdp_config:\n {2}fsdp_activation_checkpointing: true\n {2}fsdp_auto_wrap_policy/,
      );
      await eventually(
        () => fsdpDiagnostics(editor.document.uri),
        (d) => d.length === 0,
        'the finding to clear after the fix',
      );
      await eventually(
        () => codeLenses(editor.document.uri),
        (l) => l.some((x) => /fits 8 x A100 SXM/.test(x.command?.title ?? '')),
        'the lens to say it fits',
      );
    } finally {
      await revert(editor);
    }
  });

  it('offers the FSDP2 migration on an FSDP1 wrap, and the file analysed again is FSDP2 with the same units', async () => {
    const editor = await open('lint/fsdp1_migrate.py');
    const before = await eventually(
      () => codeLenses(editor.document.uri),
      (l) => l.some((x) => /GB/.test(x.command?.title ?? '')),
      'lenses with numbers',
    );
    assert.ok(before.length > 0);
    try {
      const actions = await vscode.commands.executeCommand<vscode.CodeAction[]>(
        'vscode.executeCodeActionProvider',
        editor.document.uri,
        new vscode.Range(12, 8, 12, 8),
        vscode.CodeActionKind.RefactorRewrite.value,
      );
      const migrate = actions.find((a) => /^Migrate to FSDP2/.test(a.title));
      assert.ok(migrate?.edit, actions.map((a) => a.title).join(' | '));
      assert.match(migrate.title, /1 note in the log/);
      assert.ok(await vscode.workspace.applyEdit(migrate.edit));
      const text = editor.document.getText();
      assert.match(
        text,
        /\nfor module in model\.modules\(\):\n {4}if isinstance\(module, LlamaDecoderLayer\):\n {8}fully_shard\(module, mp_policy=mp_policy\)\nfully_shard\(model, mp_policy=mp_policy\)\n$/,
      );
      // Analysed again: FSDP2 wraps, one lens per call, the root's unit count as before.
      await eventually(
        () => codeLenses(editor.document.uri),
        (l) =>
          l.some((x) => /fully_shard|FSDP2/.test(`${x.command?.title ?? ''} ${x.command?.tooltip ?? ''}`)),
        'lenses of the FSDP2 wraps',
      );
    } finally {
      await revert(editor);
    }
  });

  const fixes: [string, string, (text: string) => void][] = [
    [
      'fsdp002_bad.py',
      'FSDP002',
      (t) =>
        assert.match(t, /for layer in model\.layers:\n {4}fully_shard\(layer\)\nfully_shard\(model\)\n$/),
    ],
    [
      'fsdp003_bad.py',
      'FSDP003',
      (t) => {
        assert.match(
          t,
          /auto_wrap_policy=functools\.partial\(transformer_auto_wrap_policy, transformer_layer_cls=\{MistralDecoderLayer\}\)/,
        );
        assert.match(t, /^from transformers\.models\.mistral\.modeling_mistral import MistralDecoderLayer$/m);
      },
    ],
    [
      'fsdp004_bad.py',
      'FSDP004',
      (t) => assert.equal(t, fs.readFileSync(workspaceFile('lint/fsdp004_good.py').fsPath, 'utf8')),
    ],
    [
      'fsdp005_bad.py',
      'FSDP005',
      (t) => assert.match(t, /^from torch\.distributed\.fsdp import fully_shard, MixedPrecisionPolicy$/m),
    ],
    [
      'fsdp007_bad.py',
      'FSDP007',
      (t) =>
        assert.match(
          t,
          /fully_shard\(block, mp_policy=mp_policy\)\nfully_shard\(model, mp_policy=mp_policy\)/,
        ),
    ],
    ['fsdp008_bad.py', 'FSDP008', (t) => assert.match(t, /for _, m in model\.named_modules\(\):/)],
    ['fsdp009_bad.py', 'FSDP009', (t) => assert.match(t, /\nmodel\.clip_grad_norm_\(max_norm=1\.0\)\n$/)],
    [
      'fsdp001_fsdp1_bad.py',
      'FSDP001',
      // FSDP1 in a method: the fix assigns the root wrap after the blocks, before the optimizer.
      (t) =>
        assert.match(t, /\n {8}self\.model = FSDP\(self\.model, use_orig_params=True\)\n {8}self\.optimizer/),
    ],
  ];
  for (const [file, code, check] of fixes) {
    it(`the ${code} quick fix gives the corrected text`, async () => {
      const editor = await open(`lint/${file}`);
      const d = await eventually(
        () => fsdpDiagnostics(editor.document.uri).filter((x) => codeOf(x) === code),
        (ds) => ds.length > 0,
        `${code} on ${file}`,
      );
      try {
        check(await applyPreferredFix(editor, d[0]!));
      } finally {
        await revert(editor);
      }
    });
  }

  it('the suppression fix adds # noqa and the finding goes away', async () => {
    const { editor, diagnostics } = await diagnosticsFor('lint/fsdp007_bad.py', ['FSDP007']);
    try {
      const actions = await vscode.commands.executeCommand<vscode.CodeAction[]>(
        'vscode.executeCodeActionProvider',
        editor.document.uri,
        diagnostics[0]!.range,
      );
      const suppress = actions.find((a) => /Suppress FSDP007/.test(a.title));
      assert.ok(suppress?.edit);
      await vscode.workspace.applyEdit(suppress.edit);
      assert.match(editor.document.lineAt(3).text, /# noqa: FSDP007$/);
      await eventually(
        () => fsdpDiagnostics(editor.document.uri),
        (d) => d.length === 0,
        'the suppressed finding to clear',
      );
    } finally {
      await revert(editor);
    }
  });

  it('a rule turned off in settings disappears, and its severity follows the setting', async () => {
    const config = vscode.workspace.getConfiguration('fsdpLens');
    const editor = await open('lint/fsdp007_bad.py');
    try {
      await config.update('lint.rules', { FSDP007: 'error' }, vscode.ConfigurationTarget.Workspace);
      await eventually(
        () => fsdpDiagnostics(editor.document.uri),
        (d) => d.length === 1 && d[0]!.severity === vscode.DiagnosticSeverity.Error,
        'FSDP007 as an error',
      );
      await config.update('lint.rules', { FSDP007: 'off' }, vscode.ConfigurationTarget.Workspace);
      await eventually(
        () => fsdpDiagnostics(editor.document.uri),
        (d) => d.length === 0,
        'FSDP007 off',
      );
    } finally {
      await config.update('lint.rules', undefined, vscode.ConfigurationTarget.Workspace);
    }
  });

  it('clears the diagnostics of a closed file', async () => {
    const { editor } = await diagnosticsFor('lint/fsdp002_bad.py', ['FSDP002']);
    const uri = editor.document.uri;
    await vscode.commands.executeCommand('workbench.action.closeActiveEditor');
    await eventually(
      () => fsdpDiagnostics(uri),
      (d) => d.length === 0,
      'diagnostics to clear on close',
      10_000,
    );
  });
});
