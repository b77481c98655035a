// FSDP022: a launch command cut short by a comment or spaces after its line continuation, checked against bash.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { analyzeConfigText } from '../../src/core/entry/analyze';
import { applyEdits } from '../../src/core/lint/edits';
import { DEFAULT_LINT_OPTIONS } from '../../src/core/lint/types';
import { tempDir } from './helpers';

function findings(text: string, file = 'run.sh') {
  return analyzeConfigText(file, text, { lint: DEFAULT_LINT_OPTIONS, estimate: {} }).findings.filter(
    (f) => f.rule === 'FSDP022',
  );
}

/** The arguments bash passes to `torchrun` when it runs `text`, with torchrun a function that prints them. */
function argsBashPasses(text: string): string[] {
  const dir = tempDir('fsdp022-');
  const file = path.join(dir, 'run.sh');
  fs.writeFileSync(file, `torchrun() { printf '%s\\n' "$@"; }\n${text}`);
  // The lines cut off run as commands of their own and fail: the script's status is theirs, not torchrun's.
  const out = spawnSync('bash', [file], { encoding: 'utf8' }).stdout;
  return out.split('\n').filter(Boolean);
}

const CUT = [
  'set -x',
  'torchrun --nproc_per_node 8 train.py \\',
  '    --fsdp_version 2 \\  # FSDP2',
  '    --batch_size 4 \\',
  '    --seq_len 4096',
].join('\n');

describe('FSDP022 launch-command-cut', () => {
  it('finds a comment after the backslash, and bash agrees the command ends there', () => {
    const f = findings(CUT);
    assert.equal(f.length, 1);
    assert.equal(f[0]!.range.start.line, 2);
    assert.match(f[0]!.message, /command started at line 2 is cut/);
    assert.match(f[0]!.message, /from line 4 on \(`--batch_size 4`/);
    // What bash runs: the arguments up to the comment only (an escaped space is the last one).
    assert.deepEqual(argsBashPasses(CUT), ['--nproc_per_node', '8', 'train.py', '--fsdp_version', '2', ' ']);
    // The fix moves the comment above the command: bash then passes every argument.
    const fixed = applyEdits(CUT, f[0]!.fixes[0]!.edits);
    assert.match(fixed, /^# FSDP2\ntorchrun/m);
    assert.deepEqual(findings(fixed), []);
    assert.deepEqual(argsBashPasses(fixed), [
      '--nproc_per_node',
      '8',
      'train.py',
      '--fsdp_version',
      '2',
      '--batch_size',
      '4',
      '--seq_len',
      '4096',
    ]);
  });

  it('finds spaces after the backslash and a comment line inside the command', () => {
    const spaces = 'torchrun --nproc_per_node 8 train.py \\   \n    --batch_size 4\n';
    const s = findings(spaces);
    assert.equal(s.length, 1);
    assert.equal(s[0]!.fixes[0]!.title, 'Remove the spaces after the backslash');
    assert.deepEqual(argsBashPasses(applyEdits(spaces, s[0]!.fixes[0]!.edits)), [
      '--nproc_per_node',
      '8',
      'train.py',
      '--batch_size',
      '4',
    ]);
    const line = [
      'python3 -m verl.trainer.main_ppo \\',
      '    algorithm.adv_estimator=grpo \\',
      '    # the model',
      '    actor_rollout_ref.model.path=Qwen/Qwen3-8B \\',
      '    trainer.nnodes=1',
    ].join('\n');
    const l = findings(line);
    assert.equal(l.length, 1);
    assert.equal(l[0]!.range.start.line, 2);
    const fixed = applyEdits(line, l[0]!.fixes[0]!.edits);
    assert.match(fixed, /^# the model\npython3 -m verl/);
    assert.deepEqual(findings(fixed), []);
  });

  it('says nothing where bash continues or the command is not a launch', () => {
    // A comment inside a quoted block of overrides is text, not a comment.
    const quoted = [
      'ARGS="',
      '    a=1 \\',
      '    # not a comment here',
      '    b=2"',
      'torchrun train.py $ARGS',
    ].join('\n');
    assert.deepEqual(findings(quoted), []);
    // Commented-out arguments after a finished command.
    const after = ['torchrun train.py \\', '    --a 1', '', '    # --b 2 \\', '    # --c 3 \\'].join('\n');
    assert.deepEqual(findings(after), []);
    // Not a launch command; and a backslash-space whose next line is no argument.
    assert.deepEqual(findings('echo a \\  # b\n    --c\n'), []);
    assert.deepEqual(findings('torchrun train.py \\  # done\n\necho next\n'), []);
    // Not a shell file.
    assert.deepEqual(findings(CUT, 'notes.yaml'), []);
  });
});
