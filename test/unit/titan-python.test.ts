// torchtitan jobs configured in Python: a model folder's config_registry.py of functions returning
// Trainer.Config(...), selected by name (--plan, or torchtitan's own --module/--config), read as torchtitan builds
// the job (TrainingConfig's token budget, the policy of activation checkpointing, command-line overrides).
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { assumed, cli, projectDir, writeFiles } from './helpers';
import { launchLayer, readLaunchFile } from '../../src/core/project/settings';

/** A torchtitan-shaped project: its config manager, trainer, a Llama 3 registry and the entry. */
function project(): string {
  const dir = projectDir('fsdp-lens-titan-py-');
  const write = (file: string, lines: string[]) => writeFiles(dir, { [file]: lines });
  write('torchtitan/__init__.py', ['']);
  write('torchtitan/config/__init__.py', [
    'from torchtitan.config.manager import ConfigManager',
    'from torchtitan.config.configs import TrainingConfig, ParallelismConfig',
  ]);
  write('torchtitan/config/manager.py', [
    'class ConfigManager:',
    '    def parse_args(self, args=None):',
    '        ...',
  ]);
  write('torchtitan/config/configs.py', [
    'from dataclasses import dataclass',
    '',
    '@dataclass',
    'class TrainingConfig:',
    '    num_tokens_per_microbatch_per_dp_rank: int = 16384',
    '    max_context_length: int = 2048',
    '',
    '@dataclass',
    'class ParallelismConfig:',
    '    data_parallel_shard_degree: int = -1',
  ]);
  write('torchtitan/trainer.py', ['class Trainer:', '    class Config:', '        pass']);
  write('torchtitan/models/__init__.py', ['']);
  write('torchtitan/models/llama3/__init__.py', ['def model_registry(flavor):', '    ...']);
  write('torchtitan/models/llama3/config_registry.py', [
    'from torchtitan.config import ParallelismConfig, TrainingConfig',
    'from torchtitan.distributed.activation_checkpoint import FullAC',
    'from torchtitan.trainer import Trainer',
    'from . import model_registry',
    '',
    'def llama3_8b() -> Trainer.Config:',
    '    spec = model_registry("8B")',
    '    return Trainer.Config(',
    '        model_spec=spec,',
    '        training=TrainingConfig(',
    '            num_tokens_per_microbatch_per_dp_rank=2 * 8192,',
    '            max_context_length=8192,',
    '        ),',
    '        parallelism=ParallelismConfig(data_parallel_shard_degree=8),',
    '        activation_checkpoint=FullAC.Config(),',
    '    )',
    '',
    'def llama3_8b_tp() -> Trainer.Config:',
    '    config = llama3_8b()',
    '    config.parallelism.tensor_parallel_degree = 2',
    '    return config',
    '',
    'def llama3_8b_short() -> Trainer.Config:',
    '    config = llama3_8b()',
    '    config.training.max_context_length = 4096',
    '    config.activation_checkpoint = None',
    '    return config',
  ]);
  write('torchtitan/train.py', [
    'from torchtitan.config import ConfigManager',
    '',
    'def main():',
    '    config = ConfigManager().parse_args()',
    '    trainer = config.build()',
    '    trainer.train()',
    '',
    'if __name__ == "__main__":',
    '    main()',
  ]);
  return dir;
}

// torchtitan's Llama 3 8B flavor: dim 4096, 32 layers, 32 heads of which 8 KV heads, FFN 14336, vocabulary 128256,
// untied: 32 x (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 14336 + 2 x 4096) + 2 x 128256 x 4096 + 4096.
const PARAMS =
  32 * (2 * 4096 ** 2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096) + 2 * 128256 * 4096 + 4096;

describe('torchtitan config_registry.py', () => {
  it('names its job configs and asks which one runs', async () => {
    const r = await cli('estimate', path.join(project(), 'torchtitan/models/llama3/config_registry.py'));
    assert.equal(r.code, 3, r.out + r.err);
    assert.match(r.err, /defines 3 torchtitan job configs \(llama3_8b, llama3_8b_tp, llama3_8b_short\)/);
    assert.match(r.err, /--plan llama3_8b/);
  });

  it('estimates the one --plan names, as TrainingConfig counts its micro-batch', async () => {
    const file = path.join(project(), 'torchtitan/models/llama3/config_registry.py');
    const r = await cli('estimate', file, '--plan', 'llama3_8b', '--json');
    assert.equal(r.code, 0, r.err);
    const data = JSON.parse(r.out);
    assert.equal(data.model.params, PARAMS);
    // 2 x 8192 tokens per micro-batch of 8192-token sequences: 2 sequences.
    assert.equal(assumed(data, 'microBatch').value, '2');
    assert.equal(assumed(data, 'seqLen').value, '8192');
    assert.equal(assumed(data, 'checkpointing').value, 'full');
    assert.equal(assumed(data, 'worldSize').value, '8');
    // Units: tok_embeddings, each of the 32 blocks, [norm, output] together, and the root.
    assert.equal(data.units.length, 35);
  });

  it('takes the config a "# fsdp: plan=" comment names, as the editor writes it', async () => {
    const file = path.join(project(), 'torchtitan/models/llama3/config_registry.py');
    fs.writeFileSync(file, '# fsdp: plan=llama3_8b_short\n' + fs.readFileSync(file, 'utf8'));
    const r = await cli('estimate', file, '--json');
    assert.equal(r.code, 0, r.err);
    assert.equal(assumed(JSON.parse(r.out), 'seqLen').value, '4096');
  });

  it('reads a config derived from another by assignments', async () => {
    const file = path.join(project(), 'torchtitan/models/llama3/config_registry.py');
    const r = await cli('estimate', file, '--plan', 'llama3_8b_short', '--json');
    assert.equal(r.code, 0, r.err);
    const data = JSON.parse(r.out);
    // The same 16384 tokens in 4096-token sequences: 4; checkpointing turned off by `= None`.
    assert.equal(assumed(data, 'microBatch').value, '4');
    assert.equal(assumed(data, 'seqLen').value, '4096');
    assert.equal(assumed(data, 'checkpointing').value, 'none');
  });
});

describe('tensor parallelism in a registry job', () => {
  it('is modelled as torchtitan shards the decoder: each GPU holds half of every projection, FSDP shards that', async () => {
    const file = path.join(project(), 'torchtitan/models/llama3/config_registry.py');
    const r = await cli('estimate', file, '--plan', 'llama3_8b_tp', '--json');
    assert.equal(r.code, 0, r.err);
    const data = JSON.parse(r.out);
    assert.deepEqual(data.unmodelled, []);
    // dp_shard 8 x tp 2: 16 GPUs (`ParallelDims`), FSDP over the 8 data-parallel ranks.
    assert.deepEqual([data.mesh.worldSize, data.mesh.shardGroup, data.mesh.tp], [16, 8, 2]);
    assert.equal(data.model.params, PARAMS);
    // Column-wise q, k, v, gate, up and row-wise o, down split 2 ways, the embedding and head by vocabulary; the
    // norms (32 x 2 x 4,096 + 4,096 = 266,240 weights) stay whole: (8,030,261,248 - 266,240) / 2 + 266,240.
    const local = (PARAMS - 266_240) / 2 + 266_240;
    assert.equal(local, 4_015_263_744);
    const term = (name: string) =>
      data.perGpu.persistent.terms.find((t: { name: string }) => t.name === name).bytes as number;
    // Every dim 0 divides by 8: no padding; fp32 parameters.
    assert.equal(term('sharded parameters'), (local * 4) / 8);
    // TP's collectives per step: 8 per block, 4 more per recomputed block (full checkpointing), 4 for the
    // embedding and the head: 32 x 12 + 4.
    const tp = data.comms.links.find((l: { role: string }) => l.role === 'tensor parallel');
    assert.equal(tp.collectives, 32 * 12 + 4);
    // Each moves (T-1)/T of b·s·h bf16 elements: 2 sequences of 8,192 tokens, 4,096 wide.
    assert.equal(tp.bytes, 388 * (1 / 2) * 2 * 8192 * 4096 * 2);
    assert.notEqual(data.targetFit.verdict, 'undecided');
  });
});

describe('tensor parallelism in a script', () => {
  it('a parallelize_module plan that splits part of the model leaves the fit undecided, saying what', async () => {
    const dir = projectDir('fsdp-lens-tp-');
    fs.writeFileSync(
      path.join(dir, 'train.py'),
      [
        'from torch.distributed.device_mesh import init_device_mesh',
        'from torch.distributed.fsdp import fully_shard',
        'from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module',
        'from transformers import AutoModelForCausalLM',
        'mesh = init_device_mesh("cuda", (4, 2), mesh_dim_names=("dp", "tp"))',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")',
        'for block in model.model.layers:',
        '    parallelize_module(block, mesh["tp"], {"mlp.up_proj": ColwiseParallel()})',
        '    fully_shard(block, mesh=mesh["dp"])',
        'fully_shard(model, mesh=mesh["dp"])',
      ].join('\n'),
    );
    const r = await cli('estimate', path.join(dir, 'train.py'), '--json');
    assert.equal(r.code, 0, r.err);
    const data = JSON.parse(r.out);
    // The plan splits one projection per block: the embedding, the other projections and the head stay whole.
    assert.match(
      data.unmodelled.join('; '),
      /tensor parallelism \(parallelize_module at train\.py:8\): the plan leaves model\.embed_tokens \(Embedding\) whole/,
    );
    assert.equal(data.targetFit.verdict, 'undecided');
  });
});

describe("torchtitan's entry", () => {
  it('without --module and --config says where the job is chosen', async () => {
    const r = await cli('estimate', path.join(project(), 'torchtitan/train.py'));
    assert.equal(r.code, 3, r.out + r.err);
    assert.match(r.err, /torchtitan reads the job from --module and --config on the command line/);
    assert.match(r.err, /-- --module llama3 --config llama3_8b/);
  });

  it('estimates the config its command line selects, with overrides', async () => {
    const r = await cli(
      'estimate',
      path.join(project(), 'torchtitan/train.py'),
      '--json',
      '--',
      '--module',
      'llama3',
      '--config',
      'llama3_8b',
      '--training.max_context_length',
      '4096',
    );
    assert.equal(r.code, 0, r.err);
    const data = JSON.parse(r.out);
    assert.equal(data.model.params, PARAMS);
    assert.equal(assumed(data, 'seqLen').value, '4096');
    assert.equal(assumed(data, 'microBatch').value, '4');
    assert.ok(
      data.notes.some((n: string) => /the job is llama3_8b\(\) of llama3\/config_registry\.py/.test(n)),
    );
    assert.ok(
      !data.notes.some((n: string) => /none of the script's arguments/.test(n)),
      data.notes.join('\n'),
    );
  });

  it('names a module the project does not have', async () => {
    const r = await cli(
      'estimate',
      path.join(project(), 'torchtitan/train.py'),
      '--',
      '--module',
      'nope',
      '--config',
      'x',
    );
    assert.equal(r.code, 3);
    assert.match(r.err, /--module nope: no config_registry of that module is in the project/);
  });
});

describe("torchtitan's entry of the TOML era", () => {
  /** torchtitan before its job registries: ConfigManager reads `--job.config_file` and `--section.key` overrides. */
  function tomlProject(): string {
    const dir = projectDir('fsdp-lens-titan-toml-');
    writeFiles(dir, {
      'torchtitan/__init__.py': [''],
      'torchtitan/config/__init__.py': ['from torchtitan.config.manager import ConfigManager'],
      'torchtitan/config/manager.py': [
        'class ConfigManager:',
        '    def parse_args(self, args=None):',
        '        valid_keys = {"--job.config-file", "--job.config_file"}',
        '        ...',
      ],
      'torchtitan/train.py': [
        'from torchtitan.config import ConfigManager',
        '',
        'if __name__ == "__main__":',
        '    config = ConfigManager().parse_args()',
      ],
      'torchtitan/models/llama3/train_configs/llama3_8b.toml': [
        '[model]',
        'name = "llama3"',
        'flavor = "8B"',
        '[training]',
        'local_batch_size = 2',
        'seq_len = 8192',
        '[parallelism]',
        'data_parallel_shard_degree = -1',
        '[activation_checkpoint]',
        'mode = "full"',
      ],
      'run_train.sh': [
        '#!/usr/bin/bash',
        'NGPU=${NGPU:-"4"}',
        'CONFIG_FILE=${CONFIG_FILE:-"./torchtitan/models/llama3/train_configs/llama3_8b.toml"}',
        'torchrun --nproc_per_node=${NGPU} -m torchtitan.train --job.config_file ${CONFIG_FILE} --training.seq_len 4096 "$@"',
      ],
    });
    return dir;
  }

  it('estimates the TOML that the launch script names, with its overrides and GPU count', async () => {
    const dir = tomlProject();
    const peaks = new Set<number>();
    for (const file of [
      'run_train.sh',
      'torchtitan/train.py',
      'torchtitan/models/llama3/train_configs/llama3_8b.toml',
    ]) {
      const r = await cli('estimate', path.join(dir, file), '--json');
      assert.equal(r.code, 0, r.err);
      const data = JSON.parse(r.out);
      peaks.add(data.perGpu.peakBytes);
      assert.equal(data.model.params, PARAMS, file);
      // NGPU's shell default, 4 processes on one node; the TOML's 2 sequences; 8192 overridden to 4096.
      assert.equal(data.mesh.worldSize, 4, file);
      assert.equal(assumed(data, 'microBatch').value, '2');
      assert.equal(assumed(data, 'seqLen').value, '4096');
      assert.match(assumed(data, 'checkpointing').value, /^full/);
      // The TOML itself, opened: the same job, as the launch command that names it runs it.
      const said = file.endsWith('.toml')
        ? /read with the overrides of the launch command at run_train\.sh:4: --training\.seq_len 4096/
        : /the job is torchtitan\/models\/llama3\/train_configs\/llama3_8b\.toml, which the command line's --job\.config_file names/;
      assert.ok(
        data.notes.some((n: string) => said.test(n)),
        data.notes.join('\n'),
      );
    }
    assert.equal(peaks.size, 1, 'one job, one peak, in every file of it');
  });

  it("shows the launch's job in the parallelize file that the package's train spec names", async () => {
    const dir = tomlProject();
    writeFiles(dir, {
      'torchtitan/models/llama3/__init__.py': [
        'from torchtitan.protocols.train_spec import TrainSpec',
        'from .infra.parallelize import parallelize_llama',
        '',
        'def get_train_spec():',
        '    return TrainSpec(model_cls=None, parallelize_fn=parallelize_llama)',
      ],
      'torchtitan/models/llama3/infra/parallelize.py': [
        'from torch.distributed.fsdp import fully_shard',
        '',
        'def parallelize_llama(model, parallel_dims, job_config):',
        '    apply_fsdp(model)',
        '    return model',
        '',
        'def apply_fsdp(model):',
        '    for block in model.layers.values():',
        '        fully_shard(block)',
        '    fully_shard(model)',
      ],
      'run_big.sh': [
        '#!/usr/bin/bash',
        'torchrun --nproc_per_node=8 --nnodes=2 -m torchtitan.train --job.config_file ./torchtitan/models/llama3/train_configs/llama3_8b.toml',
      ],
    });
    const helper = path.join(dir, 'torchtitan/models/llama3/infra/parallelize.py');
    const [launch, mine] = await Promise.all(
      [path.join(dir, 'run_big.sh'), helper].map(async (f) => {
        const r = await cli('estimate', f, '--json');
        assert.equal(r.code, 0, r.err);
        return JSON.parse(r.out);
      }),
    );
    // The first launch file by name (run_big.sh, 2 nodes of 8), and its peak and verdict, word for word.
    assert.equal(mine.mesh.worldSize, 16);
    assert.equal(mine.perGpu.peakBytes, launch.perGpu.peakBytes);
    assert.deepEqual(mine.targetFit, launch.targetFit);
    assert.match(
      mine.notes[0],
      /^the job is \.\.\/\.\.\/\.\.\/\.\.\/run_big\.sh's: torchtitan runs parallelize_llama\(\) of this file on the llama3 model it trains \(parallelize_fn at llama3\/__init__\.py:5\); another launch file runs torchtitan too \(run_train\.sh\)/,
    );
    // `# fsdp: caller=` picks the other launch file: NGPU's default of 4.
    fs.writeFileSync(helper, `# fsdp: caller=run_train.sh\n${fs.readFileSync(helper, 'utf8')}`);
    const r = await cli('estimate', helper, '--json');
    assert.equal(r.code, 0, r.err);
    assert.equal(JSON.parse(r.out).mesh.worldSize, 4);
  });

  it('without --job.config_file says so, in the words of that version', async () => {
    const dir = tomlProject();
    fs.rmSync(path.join(dir, 'run_train.sh'));
    const r = await cli('estimate', path.join(dir, 'torchtitan/train.py'));
    assert.equal(r.code, 3, r.out + r.err);
    assert.match(r.err, /torchtitan reads the job from the TOML that --job\.config_file names/);
    assert.match(r.err, /-- --job\.config_file path\/to\/job\.toml/);
  });
});

describe('launch scripts with shell variables', () => {
  it('that disagree on the GPUs of one script: the first is taken, and the others named', () => {
    const facts = [
      ...readLaunchFile('/p/multi.slurm', 'srun torchrun --nnodes 4 --nproc_per_node 8 -m torchtitan.train'),
      ...readLaunchFile(
        '/p/run.sh',
        'NGPU=${NGPU:-"8"}\ntorchrun --nproc_per_node=${NGPU} -m torchtitan.train',
      ),
    ];
    const l = launchLayer(facts, '/p', '/p/torchtitan/train.py');
    assert.equal(l?.layer.values.worldSize, 32);
    assert.deepEqual(l?.problems, [
      '2 launch commands run this script on different numbers of GPUs (32 at multi.slurm:1, 8 at run.sh:2): the first is taken (--world-size N for another)',
    ]);
  });

  it('expand the defaults the script sets, and say so', () => {
    const text = [
      'NGPU=${NGPU:-"4"}',
      'CONFIG=${CONFIG:-"llama3_8b"}',
      'torchrun --nproc_per_node=${NGPU} -m torchtitan.train --module llama3 --config ${CONFIG} "$@"',
    ].join('\n');
    const [f] = readLaunchFile('/p/run.sh', text);
    assert.equal(f?.nprocPerNode, 4);
    assert.deepEqual(f?.shellDefaults, ['NGPU=${NGPU:-"4"}']);
    assert.deepEqual(f?.scriptArgs, ['--module', 'llama3', '--config', 'llama3_8b']);
    assert.deepEqual(f?.argDefaults, ['CONFIG=${CONFIG:-"llama3_8b"}']);
    assert.equal(f?.program, 'torchtitan/train.py');
  });
});

describe('torch.compile in a registry job', () => {
  it('a CompileConfig assigned to a derived config replaces the base one', async () => {
    const file = path.join(project(), 'torchtitan/models/llama3/config_registry.py');
    fs.appendFileSync(
      file,
      [
        '',
        'from torchtitan.config import CompileConfig',
        '',
        'def llama3_8b_compiled() -> Trainer.Config:',
        '    config = llama3_8b()',
        '    config.compile = CompileConfig(enable=True, components=["model"])',
        '    return config',
        '',
        'def llama3_8b_both() -> Trainer.Config:',
        '    config = llama3_8b_compiled()',
        '    config.compile = CompileConfig(enable=True)',
        '    return config',
        '',
      ].join('\n'),
    );
    const compiled = async (plan: string) => {
      const r = await cli('estimate', file, '--plan', plan, '--json');
      assert.equal(r.code, 0, r.err);
      return assumed(JSON.parse(r.out), 'compile');
    };
    const model = await compiled('llama3_8b_compiled');
    assert.match(model.value, /^the model \(/);
    assert.match(model.source.detail ?? '', /config_registry\.py:\d+/);
    // A new CompileConfig without components: torchtitan's default, the model and the loss.
    assert.match((await compiled('llama3_8b_both')).value, /^the model and the loss/);
    // Without one, nothing is compiled (and the default is not listed).
    const r = await cli('estimate', file, '--plan', 'llama3_8b', '--json');
    assert.ok(!JSON.parse(r.out).assumptions.some((a: { key: string }) => a.key === 'compile'));
  });
});

describe('fused q, k and v in a registry job', () => {
  it("counts the model package's fuse_qkv under selective checkpointing: k's output kept in every block", async () => {
    const job = [
      'from torchtitan.config import TrainingConfig',
      'from torchtitan.trainer import Trainer',
      'from . import model_registry',
      '',
      'def llama3_8b_sac() -> Trainer.Config:',
      '    return Trainer.Config(',
      '        model_spec=model_registry("8B"),',
      '        training=TrainingConfig(num_tokens_per_microbatch_per_dp_rank=2 * 8192, max_context_length=8192),',
      '    )',
    ];
    const run = async (init: string[]) => {
      const dir = project();
      writeFiles(dir, {
        'torchtitan/models/llama3/__init__.py': init,
        'torchtitan/models/llama3/config_registry.py': job,
      });
      const r = await cli(
        'estimate',
        path.join(dir, 'torchtitan/models/llama3/config_registry.py'),
        '--json',
      );
      assert.equal(r.code, 0, r.err);
      return JSON.parse(r.out) as { perGpu: { activationBytes: number }; notes: string[] };
    };
    // torchtitan/models/llama3/__init__.py since June 2026: every flavor builds a FusedQKVLinear.
    const fused = await run(['def _8b(attn_backend, fuse_qkv: bool = True):', '    ...']);
    const separate = await run(['def model_registry(flavor):', '    ...']);
    // SelectiveAC keeps the 1st, 3rd, 5th... matmul of a block: wq and wv of three, wqkv (q, k and v) of one. The
    // difference is k: 32 blocks x 2 sequences x 8192 tokens x 8 KV heads x 128 x 2 B (bf16).
    assert.equal(fused.perGpu.activationBytes - separate.perGpu.activationBytes, 32 * 2 * 8192 * 8 * 128 * 2);
    assert.ok(!fused.notes.some((n) => /fuse_qkv/.test(n)));
  });
});

describe('the loss of a registry job', () => {
  it("ChunkedLossWrapper is read, a derived MTPLoss replaces it, and DeepSeek-V3's extras are named", async () => {
    const dir = project();
    writeFiles(dir, {
      'torchtitan/models/deepseek_v3/__init__.py': ['def model_registry(flavor, **kw):', '    ...'],
      'torchtitan/models/deepseek_v3/config_registry.py': [
        'from torchtitan.components.loss import ChunkedLossWrapper, CrossEntropyLoss',
        'from torchtitan.config import ParallelismConfig, TrainingConfig',
        'from torchtitan.trainer import Trainer',
        'from . import model_registry',
        '',
        'def dsv3_16b() -> Trainer.Config:',
        '    return Trainer.Config(',
        '        loss=ChunkedLossWrapper.Config(loss_fn=CrossEntropyLoss.Config()),',
        '        model_spec=model_registry("16B"),',
        '        training=TrainingConfig(num_tokens_per_microbatch_per_dp_rank=4 * 4096, max_context_length=4096),',
        '        parallelism=ParallelismConfig(expert_parallel_degree=8),',
        '    )',
        '',
        'def dsv3_16b_mtp() -> Trainer.Config:',
        '    config = dsv3_16b()',
        '    config.model_spec = model_registry("16B", num_mtp_layers=1)',
        '    config.loss = MTPLoss.Config()',
        '    return config',
        '',
        'def dsv3_16b_deepep() -> Trainer.Config:',
        '    config = dsv3_16b()',
        '    config.model_spec = model_registry("16B", moe_comm_backend="deepep")',
        '    return config',
      ],
    });
    const file = path.join(dir, 'torchtitan/models/deepseek_v3/config_registry.py');
    const run = async (plan: string) => {
      const r = await cli('estimate', file, '--plan', plan, '--json');
      assert.equal(r.code, 0, r.err);
      return JSON.parse(r.out) as Parameters<typeof assumed>[0] & {
        model: { params: number };
        unmodelled: string[];
      };
    };
    const chunked = await run('dsv3_16b');
    assert.match(assumed(chunked, 'loss').value, /ChunkedLossWrapper/);
    assert.equal(chunked.model.params, 15_706_484_224);
    assert.deepEqual(chunked.unmodelled, []);
    const mtp = await run('dsv3_16b_mtp');
    assert.doesNotMatch(assumed(mtp, 'loss').value, /ChunkedLossWrapper/);
    assert.match(mtp.unmodelled.join(' '), /multi-token prediction \(1 layer, config_registry\.py:16\)/);
    assert.match((await run('dsv3_16b_deepep')).unmodelled.join(' '), /the deepep all-to-all backend/);
  });
});
