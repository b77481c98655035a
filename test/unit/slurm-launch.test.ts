import assert from 'node:assert/strict';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { expandedCommands, sbatchVariables, shellArithmetic } from '../../src/core/parsing/commandLine';
import { cli, projectDir, writeFiles } from './helpers';

describe('shell commands as the shell runs them', () => {
  it('$((...)) of known names and numbers; anything else left as written', () => {
    const vars = new Map([
      ['SLURM_NNODES', '4'],
      ['GPUS_PER_NODE', '8'],
    ]);
    assert.equal(shellArithmetic('--n $((SLURM_NNODES * GPUS_PER_NODE))', vars), '--n 32');
    assert.equal(shellArithmetic('$(( $SLURM_NNODES * 8 + 1 ))', vars), '33');
    assert.equal(shellArithmetic('$((NODES * 8))', vars), '$((NODES * 8))');
    assert.equal(shellArithmetic('$((8 / 2))', vars), '$((8 / 2))');
  });

  it("SLURM's node count from the batch header", () => {
    assert.equal(sbatchVariables('#SBATCH --nodes=4   # nodes\n').get('SLURM_NNODES'), '4');
    assert.equal(sbatchVariables('#SBATCH -N 2\n').get('SLURM_JOB_NUM_NODES'), '2');
    assert.equal(sbatchVariables('# SBATCH --nodes=4\n').size, 0);
  });

  it('a command kept in variables and run as `srun $CMD` is the command it expands to', () => {
    const text = [
      '#SBATCH --nodes=2',
      'export PER_NODE=8',
      'export RUNNER="torchrun \\',
      '    --nnodes $SLURM_NNODES \\',
      '    --nproc_per_node $PER_NODE"',
      'export CMD="$RUNNER train.py --steps $((SLURM_NNODES * PER_NODE))"',
      'srun $CMD',
      '',
    ].join('\n');
    const cmds = expandedCommands(text);
    assert.equal(cmds.length, 1, 'assignments and the header are not commands');
    assert.equal(cmds[0]!.line, 6);
    assert.ok(cmds[0]!.expanded);
    assert.match(cmds[0]!.cmd, /^srun torchrun\s+--nnodes 2\s+--nproc_per_node 8 train\.py --steps 16$/);
  });
});

describe('an Accelerate config launched from a SLURM script', () => {
  // The pattern of Accelerate's multi-node example: the launcher kept in a variable, the config under a directory
  // the environment gives, the process count computed from SLURM's node count.
  const files = {
    'jobs/slurm/fsdp.yaml': [
      'distributed_type: FSDP',
      'num_processes: 8',
      'mixed_precision: bf16',
      'fsdp_config:',
      '  fsdp_version: 2',
      '  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP',
      '',
    ],
    'jobs/slurm/submit.sh': [
      '#!/bin/bash',
      '#SBATCH --nodes=4',
      '#SBATCH --gres=gpu:4',
      'export GPUS_PER_NODE=4',
      'export REPO="${REPO:-/opt/repo}"',
      'export LAUNCHER="accelerate launch \\',
      '    --config_file ${REPO}/jobs/slurm/fsdp.yaml \\',
      '    --num_processes $((SLURM_NNODES * GPUS_PER_NODE)) \\',
      '    --num_machines $SLURM_NNODES \\',
      '    "',
      'export CMD="$LAUNCHER ${REPO}/train.py --model_name_or_path meta-llama/Llama-3.1-8B"',
      'srun $CMD',
      '',
    ],
  };

  it("the launcher's --num_processes over the config's: 4 nodes of 4, not the config's 8", async () => {
    const dir = projectDir('fsdp-lens-slurm-');
    writeFiles(dir, files);
    const r = await cli('estimate', path.join(dir, 'jobs/slurm/fsdp.yaml'), '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as {
      mesh: { worldSize: number };
      assumptions: { key: string; value: string; source: { kind: string; detail?: string } }[];
    };
    assert.equal(j.mesh.worldSize, 16);
    const a = (k: string) => j.assumptions.find((x) => x.key === k)!;
    assert.equal(a('gpusPerNode').value, '4');
    assert.match(
      a('worldSize').source.detail!,
      /--num_processes at submit\.sh:12 \(as the shell expands it\)/,
    );
  });

  it('the SLURM script itself shows the same job', async () => {
    const dir = projectDir('fsdp-lens-slurm-');
    writeFiles(dir, files);
    const r = await cli('estimate', path.join(dir, 'jobs/slurm/submit.sh'), '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as { mesh: { worldSize: number }; model: { id?: string }; notes: string[] };
    assert.equal(j.mesh.worldSize, 16);
    assert.equal(j.model.id, 'meta-llama/Llama-3.1-8B');
    assert.ok(j.notes.some((n) => /with the Accelerate config fsdp\.yaml/.test(n)));
  });
});
