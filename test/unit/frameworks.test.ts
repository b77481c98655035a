import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import type { Estimate } from '../../src/core/estimator/types';
import { readConfigText } from '../../src/core/frameworks/configDoc';
import type { EstimateResult } from '../../src/core/resolve/analyze';
import { lightningPrecision } from '../../src/core/frameworks/lightning';
import { titanFfnHidden } from '../../src/core/frameworks/llamaNative';
import { countParams } from '../../src/core/model/tree';
import { readFrameworkConfig } from '../../src/core/frameworks/read';
import { DEFAULTS, renderDefaultsDoc } from '../../src/core/frameworks/defaults';
import { launchCommands } from '../../src/core/frameworks/shell';
import { analyzeConfigText, analyzeFacts } from '../../src/core/entry/analyze';
import { Project } from '../../src/core/project/project';
import { isProjectInput } from '../../src/core/vocabulary/files';
import { readLaunchFile } from '../../src/core/project/settings';
import { DEFAULT_LINT_OPTIONS } from '../../src/core/lint/types';
import { cli, FIXTURES, grammar, projectDir, scanSource, tempDir, writeFiles } from './helpers';
import { diskFS, nodeHost } from '../../src/host/disk';

const FW = path.join(FIXTURES, 'frameworks');
const read = (rel: string) => fs.readFileSync(path.join(FW, rel), 'utf8');

// Llama 3.1 8B (config.json): 32 layers of 218,112,000 parameters, embedding and untied head of 128,256 x 4,096
// = 525,336,576 each, final norm 4,096: 8,030,261,248 in all. Llama 3.2 1B: 16 layers of 60,817,408, a tied
// embedding of 128,256 x 2,048 = 262,668,288, norm 2,048: 1,235,814,400.
const P8B = 8_030_261_248;
const P1B = 1_235_814_400;

async function configAnalysis(rel: string, text = read(rel), projectRoot = path.dirname(path.join(FW, rel))) {
  const project = new Project([projectRoot], await grammar(), diskFS);
  const a = analyzeConfigText(path.join(FW, rel), text, {
    lint: DEFAULT_LINT_OPTIONS,
    estimate: { project },
  });
  return a;
}

function ok(a: { estimate?: EstimateResult }): Estimate {
  const r = a.estimate;
  assert.ok(r?.ok, JSON.stringify(r && !r.ok ? r : 'no estimate'));
  return r.estimate;
}

describe('Accelerate', () => {
  it('an FSDP2 YAML beside a Transformers script: 35 units for Llama 3.1 8B on 8 GPUs', async () => {
    const a = await configAnalysis('accelerate/accelerate_fsdp2.yaml');
    const e = ok(a);
    // Accelerate's FSDP2 path: each LlamaDecoderLayer (32), the input embedding, [final norm, lm_head] together,
    // and the root.
    assert.equal(e.units.length, 35);
    const tail = e.units.find((u) => u.modules.join(',') === 'model.norm,lm_head')!;
    assert.equal(tail.params, 4096 + 128256 * 4096);
    assert.equal(tail.residency.kind, 'keep', 'the tail is kept gathered after forward');
    assert.equal(e.units.find((u) => u.modules[0] === 'model.embed_tokens')!.params, 128256 * 4096);
    // num_processes 8; mixed_precision bf16 gathers and reduces in bf16 with fp32 master weights.
    assert.equal(e.mesh.worldSize, 8);
    assert.equal(e.comms.gatherDtype, 'bfloat16');
    assert.equal(e.comms.reduceDtype, 'bfloat16');
    assert.equal(e.perGpu.persistentBytes, (P8B * 16) / 8 + 256);
    // The model and the batch come from the companion script's from_pretrained and TrainingArguments.
    assert.equal(e.model.params, P8B);
    assert.equal(e.setup.microBatch, 1);
    assert.equal(e.setup.gradAccum, 4);
    assert.equal(e.setup.syncEveryMicroBatch, false);
    assert.equal(a.companion, path.join(FW, 'accelerate', 'train_sft.py'));
  });

  it('the script itself takes the YAML beside it', async () => {
    const text = read('accelerate/train_sft.py');
    const facts = await scanSource(text, path.join(FW, 'accelerate', 'train_sft.py'));
    const project = new Project([path.join(FW, 'accelerate')], await grammar(), diskFS);
    const r = analyzeFacts(facts, text, { lint: DEFAULT_LINT_OPTIONS, estimate: { project } });
    assert.ok(r.estimate?.ok);
    assert.equal(r.estimate.framework?.framework, 'Accelerate');
    assert.equal(r.estimate.estimate.units.length, 35);
  });

  it('a config without mixed_precision runs without it, as accelerate launch fills it; a legacy fp16: true is fp16', async () => {
    const yaml = (extra: string[]) =>
      [
        'distributed_type: FSDP',
        ...extra,
        'num_processes: 8',
        'fsdp_config:',
        '  fsdp_version: 2',
        '  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP',
        '# fsdp: model=meta-llama/Llama-3.2-1B',
        '',
      ].join('\n');
    // accelerate/commands/config/config_args.py `from_yaml_file` leaves it None (fp16 for `fp16: true`), and
    // commands/launch.py `_validate_launch_command` turns None into "no": gathers in the parameters' dtype.
    const none = ok(await configAnalysis('accelerate/no-precision.yaml', yaml([])));
    assert.equal(none.comms.gatherDtype, 'float32');
    const detail = none.assumptions.find((x) => x.key === 'paramDtype')?.source;
    assert.match(JSON.stringify(detail), /accelerate launch's default/);
    const fp16 = ok(await configAnalysis('accelerate/legacy-fp16.yaml', yaml(['fp16: true'])));
    assert.equal(fp16.comms.gatherDtype, 'float16');
  });

  it('the FSDP1 trap: a strategy under fsdp_reshard_after_forward runs as FULL_SHARD', async () => {
    const yaml = [
      'distributed_type: FSDP',
      'mixed_precision: bf16',
      'num_processes: 8',
      'fsdp_config:',
      '  fsdp_version: 1',
      '  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP',
      '  fsdp_reshard_after_forward: SHARD_GRAD_OP',
      '# fsdp: model=meta-llama/Llama-3.2-1B',
      '',
    ].join('\n');
    const a = await configAnalysis('accelerate/trap.yaml', yaml);
    const e = ok(a);
    assert.equal(e.plan.strategy, 'FULL_SHARD');
    const f = a.findings.filter((x) => x.rule === 'FSDP016');
    assert.equal(f.length, 1);
    assert.equal(f[0]!.range.start.line, 6);
    assert.match(f[0]!.message, /Set fsdp_sharding_strategy: SHARD_GRAD_OP/);
    // Written as Accelerate reads it, the strategy applies and nothing is reported.
    const good = await configAnalysis(
      'accelerate/good.yaml',
      yaml.replace('fsdp_reshard_after_forward', 'fsdp_sharding_strategy'),
    );
    assert.equal(ok(good).plan.strategy, 'SHARD_GRAD_OP');
    assert.deepEqual(
      good.findings.filter((x) => x.rule === 'FSDP016'),
      [],
    );
    // FSDP1 with the transformer policy: 16 LlamaDecoderLayer units and the root.
    assert.equal(ok(good).units.length, 17);
  });

  it('reports the trap of a config that names no model, found by lint in a folder', async () => {
    const dir = tempDir('fsdp-lens-lint-configs-');
    fs.mkdirSync(path.join(dir, 'configs'));
    // No model: the estimate cannot be made, but the setting is ignored whatever model the job trains.
    fs.writeFileSync(
      path.join(dir, 'configs', 'accelerate.yaml'),
      [
        'distributed_type: FSDP',
        'fsdp_config:',
        '  fsdp_version: 1',
        '  fsdp_reshard_after_forward: SHARD_GRAD_OP',
        '',
      ].join('\n'),
    );
    // Found in the folder and read by no framework: passed over, not an error.
    fs.writeFileSync(path.join(dir, 'configs', 'notes.yaml'), 'fsdp_notes: [1, 2]\n');
    const r = await cli('lint', dir);
    assert.equal(r.code, 1, r.err);
    assert.match(r.out, /configs\/accelerate\.yaml:4:1: FSDP016 /);
    assert.doesNotMatch(r.err, /notes\.yaml/);
  });

  it('load and save keys: rank-0 loading and sharded checkpoints change the host memory per node', async () => {
    const host = (e: Estimate, name: string) => e.hostPerNode.terms.find((t) => t.name === name)?.bytes;
    // train_sft.py loads Llama 3.1 8B with from_pretrained's default fp32; the accelerate_fsdp2.yaml beside it
    // says fsdp_cpu_ram_efficient_loading true and SHARDED_STATE_DICT, 8 processes on one node.
    const text = read('accelerate/train_sft.py');
    const facts = await scanSource(text, path.join(FW, 'accelerate', 'train_sft.py'));
    const project = new Project([path.join(FW, 'accelerate')], await grammar(), diskFS);
    const r = analyzeFacts(facts, text, { lint: null, estimate: { project } });
    const e = ok(r);
    // Only local rank 0 materialises the weights: one copy of 4 B per parameter, not eight.
    assert.equal(host(e, 'loading (from_pretrained on local rank 0 only)'), P8B * 4);
    assert.equal(host(e, 'loading (from_pretrained on every rank)'), undefined);
    // Each of the 8 processes copies its 1/8 fp32 shard to host memory (8,030,261,248 / 8 is whole); nothing is
    // gathered on rank 0.
    assert.equal(host(e, 'saving a sharded state dict'), (P8B / 8) * 4 * 8);
    assert.equal(host(e, 'saving a full state dict on rank 0'), undefined);

    const yaml = (extra: string[]) =>
      [
        'distributed_type: FSDP',
        'num_processes: 8',
        'fsdp_config:',
        '  fsdp_version: 1',
        '  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP',
        ...extra.map((l) => `  ${l}`),
        '# fsdp: model=meta-llama/Llama-3.2-1B',
        '',
      ].join('\n');
    const notesOf = (r: ReturnType<typeof readFrameworkConfig>) => (r.kind === 'plan' ? r.plan.notes : []);
    // FSDP1 defaults: Accelerate's NO_PREFETCH, a full state dict, accelerate launch's rank-0 loading.
    const d = readFrameworkConfig('d.yaml', yaml([]));
    assert.ok(d.kind === 'plan');
    assert.ok(notesOf(d).some((n) => /default is NO_PREFETCH/.test(n)));
    assert.equal(d.plan.host?.stateDict?.kind, 'full');
    assert.match(d.plan.host?.rank0Loading ?? '', /accelerate launch's default/);
    const set = readFrameworkConfig(
      's.yaml',
      yaml([
        'fsdp_backward_prefetch: BACKWARD_PRE',
        'fsdp_forward_prefetch: false',
        'fsdp_use_orig_params: true',
        'fsdp_sync_module_states: true',
        'fsdp_cpu_ram_efficient_loading: false',
        'fsdp_state_dict_type: SHARDED_STATE_DICT',
        'fsdp_made_up_key: 3',
      ]),
    );
    assert.ok(set.kind === 'plan');
    assert.ok(!notesOf(set).some((n) => /PREFETCH/.test(n)), notesOf(set).join(' | '));
    const noEffect = notesOf(set).find((n) => n.startsWith('read, with no effect on memory'))!;
    for (const k of ['fsdp_forward_prefetch', 'fsdp_use_orig_params', 'fsdp_sync_module_states'])
      assert.ok(noEffect.includes(k), k);
    assert.ok(notesOf(set).some((n) => /^fsdp_made_up_key: not keys Accelerate reads/.test(n)));
    assert.equal(set.plan.host?.rank0Loading, undefined);
    assert.equal(set.plan.host?.stateDict?.kind, 'sharded');
    // FSDP1 with forward prefetch: the next unit gathered ahead in forward.
    const ahead = readFrameworkConfig('f.yaml', yaml(['fsdp_forward_prefetch: true']));
    assert.ok(ahead.kind === 'plan');
    assert.equal(ahead.plan.values.forwardPrefetch, true);
    assert.equal(set.plan.values.forwardPrefetch, undefined);
    // FSDP2 defaults to sharded checkpoints. FullyShardedDataParallelPlugin.__post_init__ reads
    // FSDP_FORWARD_PREFETCH only under fsdp_version 1: from a config, forward prefetch is ignored (a trap), and
    // nothing is gathered ahead.
    const v2 = readFrameworkConfig(
      'v2.yaml',
      yaml(['fsdp_forward_prefetch: true']).replace('fsdp_version: 1', 'fsdp_version: 2'),
    );
    assert.ok(v2.kind === 'plan');
    assert.equal(v2.plan.host?.stateDict?.kind, 'sharded');
    assert.equal(v2.plan.values.forwardPrefetch, undefined);
    assert.deepEqual(
      v2.plan.traps.map((t) => t.rule),
      ['FSDP016'],
    );
    assert.match(v2.plan.traps[0]!.message, /read only under fsdp_version 1/);
  });

  it('NO_WRAP (the default) makes the whole model one unit under FSDP1', async () => {
    const a = await configAnalysis(
      'accelerate/nowrap.yaml',
      'distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  fsdp_version: 1\n# fsdp: model=meta-llama/Llama-3.2-1B\n',
    );
    const e = ok(a);
    assert.equal(e.units.length, 1);
    assert.equal(e.units[0]!.params, P1B);
  });

  it('a pinned Accelerate before 1.14 leaves the embedding, norm and head in the root', async () => {
    const dir = tempDir('fsdp-lens-acc-');
    fs.writeFileSync(
      path.join(dir, 'requirements.txt'),
      'torch>=2.6\naccelerate==1.13.0\ntransformers==4.57.6\n',
    );
    const yaml = read('accelerate/accelerate_fsdp2.yaml') + '# fsdp: model=meta-llama/Llama-3.1-8B\n';
    fs.writeFileSync(path.join(dir, 'accelerate.yaml'), yaml);
    const project = new Project([dir], await grammar(), diskFS);
    const a = analyzeConfigText(path.join(dir, 'accelerate.yaml'), yaml, {
      lint: null,
      estimate: { project },
    });
    const e = ok(a);
    assert.equal(e.units.length, 33);
    assert.ok(
      e.plan.notes.some((n) =>
        /Accelerate 1\.13\.0: the embedding, final norm and head stay in the root/.test(n),
      ),
    );
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('accelerate launch flags in a shell script', async () => {
    const a = await configAnalysis('accelerate/launch_fsdp.sh');
    const e = ok(a);
    assert.equal(e.plan.api, 'fsdp1');
    assert.equal(e.plan.strategy, 'SHARD_GRAD_OP');
    // --num_processes 16 over --num_machines 2.
    assert.equal(e.mesh.worldSize, 16);
    assert.equal(e.mesh.gpusPerNode, 8);
    assert.equal(e.units.length, 33);
  });
});

describe('Accelerate in Python', () => {
  async function estimatePlugin(lines: string[]) {
    const text = [
      'import torch',
      'from accelerate import Accelerator, FullyShardedDataParallelPlugin',
      'from torch.distributed.fsdp import MixedPrecision, MixedPrecisionPolicy',
      'from transformers import AutoModelForCausalLM',
      'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
      ...lines,
      '',
    ].join('\n');
    const facts = await scanSource(text, 'acc.py');
    const r = analyzeFacts(facts, text, { lint: null, estimate: {} });
    assert.ok(r.estimate?.ok, JSON.stringify(r.estimate));
    return r.estimate;
  }

  it('an Accelerator alone, with no model and no FSDP plugin, is not estimated', async () => {
    const text = 'from accelerate import Accelerator\naccelerator = Accelerator(mixed_precision="bf16")\n';
    const facts = await scanSource(text, 'plain.py');
    assert.equal(facts.frameworkCalls[0]?.kind, 'Accelerator');
    assert.equal(analyzeFacts(facts, text, { lint: null, estimate: {} }).estimate, undefined);
  });

  it('a MixedPrecisionPolicy on the plugin: its param_dtype gathers, its reduce_dtype reduces', async () => {
    const r = await estimatePlugin([
      'mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)',
      'plugin = FullyShardedDataParallelPlugin(fsdp_version=2, mixed_precision_policy=mp)',
      'accelerator = Accelerator(fsdp_plugin=plugin)',
    ]);
    assert.equal(r.estimate.comms.gatherDtype, 'bfloat16');
    assert.equal(r.estimate.comms.reduceDtype, 'float32');
  });

  it('a string policy sets both dtypes; a dict or FSDP1 MixedPrecision without reduce_dtype reduces in param_dtype', async () => {
    // dataclasses.py set_mixed_precision: "fp16" -> MixedPrecision(param_dtype=float16, reduce_dtype=float16).
    const s = await estimatePlugin([
      'plugin = FullyShardedDataParallelPlugin(mixed_precision_policy="fp16")',
    ]);
    assert.equal(s.estimate.comms.gatherDtype, 'float16');
    assert.equal(s.estimate.comms.reduceDtype, 'float16');
    const d = await estimatePlugin([
      'plugin = FullyShardedDataParallelPlugin(mixed_precision_policy={"param_dtype": torch.bfloat16, "reduce_dtype": torch.float32, "buffer_dtype": torch.bfloat16})',
    ]);
    assert.equal(d.estimate.comms.gatherDtype, 'bfloat16');
    assert.equal(d.estimate.comms.reduceDtype, 'float32');
    // torch's MixedPrecision: reduce_dtype None takes param_dtype's value.
    const m = await estimatePlugin([
      'plugin = FullyShardedDataParallelPlugin(mixed_precision_policy=MixedPrecision(param_dtype=torch.float16))',
      'accelerator = Accelerator(fsdp_plugin=plugin, mixed_precision="bf16")',
    ]);
    // The plugin's own policy wins over the Accelerator's mixed_precision (set_mixed_precision without override).
    assert.equal(m.estimate.comms.gatherDtype, 'float16');
    assert.equal(m.estimate.comms.reduceDtype, 'float16');
  });

  it('Accelerator(mixed_precision="bf16") with a plugin of no policy: bf16 gathers and reduces, fp32 masters', async () => {
    const r = await estimatePlugin([
      'plugin = FullyShardedDataParallelPlugin(fsdp_version=2, auto_wrap_policy="transformer_based_wrap")',
      'accelerator = Accelerator(fsdp_plugin=plugin, mixed_precision="bf16")',
    ]);
    assert.equal(r.estimate.comms.gatherDtype, 'bfloat16');
    assert.equal(r.estimate.comms.reduceDtype, 'bfloat16');
    assert.equal(r.estimate.setup.masterDtype, 'float32');
    const none = await estimatePlugin([
      'plugin = FullyShardedDataParallelPlugin(fsdp_version=2)',
      'accelerator = Accelerator(fsdp_plugin=plugin, mixed_precision="no")',
    ]);
    // No mixed precision: gathers in the parameters' own dtype (fp32 from from_pretrained's default).
    assert.equal(none.estimate.comms.gatherDtype, 'float32');
  });
});

describe('Transformers and TRL', () => {
  const script = (args: string, pin?: string) =>
    [
      '# fsdp: world_size=8',
      'from transformers import AutoModelForCausalLM, TrainingArguments',
      'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
      `args = TrainingArguments(output_dir="out", ${args})`,
      pin ? `# ${pin}` : '',
    ].join('\n');

  async function estimateIn(text: string, requirements?: string) {
    const dir = tempDir('fsdp-lens-hf-');
    if (requirements) fs.writeFileSync(path.join(dir, 'requirements.txt'), requirements);
    fs.writeFileSync(path.join(dir, 'train.py'), text);
    const facts = await scanSource(text, path.join(dir, 'train.py'));
    const project = new Project([dir], await grammar(), diskFS);
    const r = analyzeFacts(facts, text, { lint: DEFAULT_LINT_OPTIONS, estimate: { project } });
    fs.rmSync(dir, { recursive: true, force: true });
    assert.ok(r.estimate?.ok, JSON.stringify(r.estimate));
    return r;
  }

  it('Transformers 4: fsdp="full_shard auto_wrap" is FSDP1 with a unit per block', async () => {
    const r = await estimateIn(script('fsdp="full_shard auto_wrap", bf16=True'), 'transformers==4.57.6\n');
    const e = r.estimate!.ok ? r.estimate!.estimate : undefined!;
    assert.equal(e.plan.api, 'fsdp1');
    assert.equal(e.plan.strategy, 'FULL_SHARD');
    assert.equal(e.units.length, 17);
    assert.equal(e.comms.reduceDtype, 'bfloat16');
  });

  it('Transformers 4 without auto_wrap: the whole model is one unit', async () => {
    const r = await estimateIn(script('fsdp="full_shard"'), 'transformers==4.57.6\n');
    assert.equal(r.estimate!.ok && r.estimate!.estimate.units.length, 1);
  });

  it("Transformers 5: fsdp=True is FSDP2, transformer-based wrapping, plus Accelerate's extra units", async () => {
    const r = await estimateIn(script('fsdp=True, bf16=True'), 'transformers==5.18.0\naccelerate==1.15.0\n');
    const e = r.estimate!.ok ? r.estimate!.estimate : undefined!;
    assert.equal(e.plan.api, 'fsdp2');
    // Llama 3.2 1B ties its head to the embedding: 16 blocks, [norm, embedding] together, and the root.
    assert.equal(e.units.length, 18);
    assert.ok(e.units.some((u) => u.modules.join(',') === 'model.norm,model.embed_tokens'));
  });

  it('Transformers 5 with version 1 and shard_grad_op: the same trap, reported', async () => {
    const r = await estimateIn(
      script('fsdp="shard_grad_op auto_wrap", fsdp_config={"version": 1}'),
      'transformers==5.18.0\n',
    );
    const e = r.estimate!.ok ? r.estimate!.estimate : undefined!;
    assert.equal(e.plan.strategy, 'FULL_SHARD');
    assert.ok(r.findings.some((f) => f.rule === 'FSDP016'));
  });

  it('TRL SFTConfig: bf16 and gradient checkpointing on by default; the batch and accumulation read', async () => {
    const text = [
      'from trl import SFTConfig',
      'from transformers import AutoModelForCausalLM',
      'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
      'cfg = SFTConfig(output_dir="o", fsdp=True, per_device_train_batch_size=2, gradient_accumulation_steps=8, max_length=2048)',
    ].join('\n');
    const r = await estimateIn(text, 'transformers==5.18.0\n');
    const e = r.estimate!.ok ? r.estimate!.estimate : undefined!;
    assert.equal(e.setup.checkpointing, 'full');
    assert.equal(e.comms.gatherDtype, 'bfloat16');
    assert.equal(e.setup.microBatch, 2);
    assert.equal(e.setup.gradAccum, 8);
    assert.equal(e.setup.seqLen, 2048);
  });

  it('a standalone Transformers 4 fsdp_config JSON that names the block class: a unit per block', async () => {
    const dir = tempDir('fsdp-lens-hfjson-');
    try {
      fs.writeFileSync(path.join(dir, 'requirements.txt'), 'transformers==4.57.6\n');
      fs.writeFileSync(
        path.join(dir, 'train.py'),
        'from transformers import AutoModelForCausalLM\nmodel = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")\n',
      );
      const json = JSON.stringify({ fsdp_transformer_layer_cls_to_wrap: ['LlamaDecoderLayer'] });
      fs.writeFileSync(path.join(dir, 'fsdp.json'), json);
      const project = new Project([dir], await grammar(), diskFS);
      const a = analyzeConfigText(path.join(dir, 'fsdp.json'), json, {
        lint: null,
        estimate: { project },
      });
      const e = ok(a);
      // FSDP1 (Transformers 4) with the transformer policy on Llama 3.2 1B: 16 LlamaDecoderLayer units and the root,
      // as the script form fsdp="full_shard auto_wrap" gives.
      assert.equal(e.plan.api, 'fsdp1');
      assert.equal(e.units.length, 17);
      assert.ok(e.plan.notes.some((n) => /assumed run with fsdp="full_shard auto_wrap"/.test(n)));
      // Without a wrapping key, Transformers 4 wraps nothing of its own: one unit.
      const bare = JSON.stringify({ fsdp_backward_prefetch: 'backward_pre' });
      const b = ok(
        analyzeConfigText(path.join(dir, 'bare.json'), bare, { lint: null, estimate: { project } }),
      );
      assert.equal(b.units.length, 1);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('TRL trainers given a model id load it themselves: SFTTrainer(model="Qwen/Qwen2.5-7B")', async () => {
    // Qwen2.5-7B: 7,615,616,512 parameters (28 layers of 233,057,792 with q/k/v biases, untied 152,064 x 3,584
    // embedding and head, final norm), the count its model card publishes.
    for (const call of [
      'SFTTrainer(model="Qwen/Qwen2.5-7B", args=cfg, train_dataset=ds)',
      'SFTTrainer("Qwen/Qwen2.5-7B", args=cfg, train_dataset=ds)',
      'trl.GRPOTrainer(model=MODEL, reward_funcs=[], args=cfg)',
    ]) {
      const text = [
        'import trl',
        'from trl import SFTConfig, SFTTrainer',
        'MODEL = "Qwen/Qwen2.5-7B"',
        'cfg = SFTConfig(output_dir="o", fsdp=True)',
        `trainer = ${call}`,
      ].join('\n');
      const r = await estimateIn(text, 'transformers==5.18.0\n');
      const e = r.estimate!.ok ? r.estimate!.estimate : undefined!;
      assert.equal(e.model.params, 7_615_616_512, call);
      assert.match(e.model.source.detail ?? '', /Trainer\(model=\.\.\.\)/, call);
    }
  });

  it('a command line with --fsdp_config FILE reads the file, from the script folder or the project root', async () => {
    const dir = tempDir('fsdp-lens-hfcfg-');
    fs.mkdirSync(path.join(dir, 'scripts'));
    fs.mkdirSync(path.join(dir, 'configs'));
    fs.writeFileSync(path.join(dir, 'requirements.txt'), 'transformers==4.46.0\n');
    // Transformers 4's fsdp_config keys, some with the fsdp_ prefix (TrainingArguments strips it).
    fs.writeFileSync(
      path.join(dir, 'configs', 'fsdp.json'),
      JSON.stringify({
        fsdp_transformer_layer_cls_to_wrap: ['LlamaDecoderLayer'],
        activation_checkpointing: true,
      }),
    );
    const sh = [
      'torchrun --nproc_per_node 4 train.py \\',
      '  --model_name_or_path meta-llama/Llama-3.2-1B \\',
      '  --fsdp "full_shard auto_wrap" \\',
      '  --fsdp_config configs/fsdp.json \\',
      '  --per_device_train_batch_size 2',
      '',
    ].join('\n');
    fs.writeFileSync(path.join(dir, 'scripts', 'run.sh'), sh);
    const project = new Project([dir], await grammar(), diskFS);
    const opts = { lint: DEFAULT_LINT_OPTIONS, estimate: { project } };
    const e = ok(analyzeConfigText(path.join(dir, 'scripts', 'run.sh'), sh, opts));
    // FSDP1 (4.46 pinned) with the file's layer class: 16 LlamaDecoderLayer units of Llama 3.2 1B and the root;
    // the file's activation_checkpointing on; 4 GPUs from torchrun.
    assert.equal(e.plan.api, 'fsdp1');
    assert.equal(e.units.length, 17);
    assert.equal(e.setup.checkpointing, 'full');
    assert.equal(e.mesh.worldSize, 4);
    const ac = e.assumptions.find((x) => x.key === 'checkpointing');
    assert.match(JSON.stringify(ac?.source), /fsdp\.json/);
    // A file that is not there: said, and Transformers' defaults kept (FSDP1 without a layer class wraps the
    // model's _no_split_modules under auto_wrap).
    const missing = sh.replace('configs/fsdp.json', 'configs/none.json');
    const m = ok(analyzeConfigText(path.join(dir, 'scripts', 'run.sh'), missing, opts));
    assert.match(m.plan.notes.join('\n'), /--fsdp_config configs\/none\.json .* is not found or not read/);
    assert.equal(m.setup.checkpointing, 'none');
  });

  it('accelerate launch with --multi_gpu beside --use_fsdp: refused by the launcher (FSDP016)', () => {
    // accelerate/commands/launch.py _validate_launch_command raises for more than one of these flags.
    const [bad] = launchCommands(
      'run.sh',
      'accelerate launch --multi_gpu --use_fsdp --num_processes 8 train.py\n',
    );
    assert.equal(bad!.plan.traps.length, 1);
    assert.match(bad!.plan.traps[0]!.message, /raises ValueError before the job starts/);
    const [good] = launchCommands(
      'run.sh',
      'accelerate launch --use_fsdp --num_processes 8 train.py --multi_gpu\n',
    );
    // A --multi_gpu after the script is the script's own argument.
    assert.equal(good!.plan.traps.length, 0);
  });

  it("Transformers 4's deprecated --fsdp_transformer_layer_cls_to_wrap joins the fsdp_config's classes", async () => {
    const [c] = launchCommands(
      'run.sh',
      'python train.py --fsdp "full_shard auto_wrap" --fsdp_transformer_layer_cls_to_wrap LlamaDecoderLayer --fsdp_min_num_params 0\n',
    );
    // TrainingArguments.__post_init__ appends it to transformer_layer_cls_to_wrap; 5's parser refuses the flag.
    assert.match(
      c!.plan.notes[0]!,
      /Transformers 4 \(fsdp_transformer_layer_cls_to_wrap, which 5 refuses\): FSDP1/,
    );
    assert.deepEqual(c!.plan.wrap, { kind: 'policy', classes: ['LlamaDecoderLayer'] });
  });

  it('the command-line form of Transformers 4 in a shell script', async () => {
    const a = await configAnalysis('accelerate/hf_cli.sh');
    const e = ok(a);
    assert.equal(e.plan.api, 'fsdp1');
    assert.equal(e.units.length, 17);
    assert.equal(e.model.params, P1B);
    assert.equal(e.setup.microBatch, 4);
  });
});

describe('axolotl', () => {
  it('a QLoRA config: FSDP1 through the Trainer, PEFT policy units, its batch, sequence and checkpointing', async () => {
    const a = await configAnalysis('axolotl/qlora-fsdp1.yaml');
    const e = ok(a);
    // axolotl passes fsdp and fsdp_config to TrainingArguments (its trainer builder) and pins FSDP1 when
    // fsdp_version is unset (check_fsdp_version_in_fsdp_config); the Trainer puts a LoRA model under PEFT's
    // policy: each LoRA matrix a unit (16 layers x 7 linear x 2 matrices), the 16 decoder layers, the root.
    assert.equal(e.plan.api, 'fsdp1');
    assert.equal(e.units.length, 16 * 7 * 2 + 16 + 1);
    assert.equal(e.model.params > P1B, true);
    assert.equal(e.setup.microBatch, 2);
    assert.equal(e.setup.gradAccum, 4);
    assert.equal(e.setup.seqLen, 2048);
    assert.equal(e.setup.checkpointing, 'full');
    assert.equal(e.comms.gatherDtype, 'bfloat16');
    assert.match(e.plan.notes.join('\n'), /axolotl's default, fsdp_version 1/);
    // NousResearch's copy of Llama 3.2 1B is read with Meta's architecture.
    assert.match(e.model.name, /NousResearch\/Llama-3\.2-1B/);
  });

  it("an FSDP2 config with unprefixed keys: offload and checkpointing read, tensor parallelism as Transformers' plan", async () => {
    const e = ok(await configAnalysis('axolotl/full-fsdp2.yaml'));
    assert.equal(e.plan.api, 'fsdp2');
    assert.equal(e.units.length, 33);
    assert.equal(e.setup.checkpointing, 'full');
    assert.ok(e.units.every((u) => u.offload));
    // tensor_parallel_size 2: the model loaded with tp_plan="auto", FSDP over the 4 ranks left of 8.
    assert.deepEqual([e.setup.tensorParallel, e.setup.tpPlan, e.mesh.shardGroup], [2, 'transformers', 4]);
    assert.deepEqual(e.unmodelled, []);
    // A decoder layer of Llama 3.1 8B: (218,112,000 - 2 x 4,096 norm weights) / 2 + 8,192 per GPU.
    assert.equal(e.units[0]!.params, (218_112_000 - 8192) / 2 + 8192);
    // Full checkpointing: 4 all-reduces per layer, 2 more per recomputed layer, the head's, and the logits'
    // all-gather.
    const tp = e.comms.links.find((l) => l.role === 'tensor parallel')!;
    assert.equal(tp.collectives, 4 * 32 + 2 * 32 + 1 + 1);
  });
});

describe('llm-foundry', () => {
  it('an hf_causal_lm LoRA config: FSDP1 through Composer, blocks and LoRA matrices as units, variables read', async () => {
    const e = ok(await configAnalysis('llm-foundry/llama3-8b-lora.yaml'));
    // `prepare_hf_causal_lm_model_for_fsdp`: every decoder block (fsdp_wrap_fn) and, for a PEFT model, every LoRA
    // matrix (`_fsdp_wrap`), then the root: 32 + 32 x 2 projections x 2 matrices + 1.
    assert.equal(e.plan.api, 'fsdp1');
    assert.equal(e.units.length, 32 + 32 * 2 * 2 + 1);
    // `${variables.seq}` and `${variables.base}` are followed.
    assert.equal(e.setup.seqLen, 4096);
    assert.match(e.model.name, /Meta-Llama-3-8B/);
    assert.equal(e.setup.microBatch, 4);
    // mixed_precision DEFAULT with amp_bf16: gathered in bf16, reduced in fp32 (`get_mixed_precision`); weights
    // loaded in fp32.
    assert.equal(e.comms.gatherDtype, 'bfloat16');
    assert.equal(e.comms.reduceDtype, 'float32');
    assert.equal(e.setup.masterDtype, 'float32');
    assert.equal(e.setup.checkpointing, 'full');
    assert.equal(e.setup.syncEveryMicroBatch, true);
  });

  it('other models and configs without fsdp_config are said, not misread', () => {
    const mpt = readFrameworkConfig(
      'mpt.yaml',
      'model:\n  name: mpt_causal_lm\n  d_model: 4096\nmax_duration: 1ep\nfsdp_config:\n  sharding_strategy: FULL_SHARD\n',
    );
    assert.ok(mpt.kind === 'problem');
    assert.match(mpt.problem.message, /llm-foundry's own MPT architecture/);
    const ddp = readFrameworkConfig(
      'ddp.yaml',
      'model:\n  name: hf_causal_lm\n  pretrained_model_name_or_path: gpt2\nmax_duration: 1ep\n',
    );
    assert.ok(ddp.kind === 'problem');
    assert.match(ddp.problem.message, /no fsdp_config: Composer trains this config with DDP/);
  });
});

describe("Liger's fused linear cross-entropy from configs", () => {
  it("axolotl's liger_fused_linear_cross_entropy; its other kernels said to keep less", async () => {
    const base = read('axolotl/qlora-fsdp1.yaml');
    const liger = await configAnalysis(
      'axolotl/liger.yaml',
      `${base}\nplugins:\n  - axolotl.integrations.liger.LigerPlugin\nliger_fused_linear_cross_entropy: true\nliger_rms_norm: true\n`,
    );
    const e = ok(liger);
    assert.equal(e.setup.loss, 'fused');
    assert.match(
      e.assumptions.find((a) => a.key === 'loss')!.source.detail ?? '',
      /liger_fused_linear_cross_entropy at/,
    );
    // Liger's RMSNorm keeps less for backward than the eager norm counted: a fit that holds still holds, one that
    // fails would be undecided.
    assert.match(JSON.stringify(e.overcounted), /Liger's RMSNorm \(liger_rms_norm at/);
    assert.equal(e.targetFit.verdict, 'fits');
    // cut_cross_entropy without the plugin that reads it is said not to apply.
    const unread = ok(await configAnalysis('axolotl/cut.yaml', `${base}\ncut_cross_entropy: true\n`));
    assert.equal(unread.setup.loss, 'upcast');
    assert.match(unread.notes.join('\n'), /without axolotl's CutCrossEntropyPlugin in plugins: not applied/);
  });

  it("axolotl's CutCrossEntropyPlugin: the logits never formed, whether or not cut_cross_entropy is written", async () => {
    const base = read('axolotl/qlora-fsdp1.yaml');
    const plugin = `${base}\nplugins:\n  - axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin\n`;
    const byDefault = ok(await configAnalysis('axolotl/cce.yaml', plugin));
    const plain = ok(await configAnalysis('axolotl/plain.yaml', base));
    assert.equal(byDefault.setup.loss, 'cut');
    assert.match(
      byDefault.assumptions.find((a) => a.key === 'loss')!.source.detail ?? '',
      /CutCrossEntropyPlugin at .* \(cut_cross_entropy defaults to true\)/,
    );
    assert.equal(
      ok(await configAnalysis('axolotl/off.yaml', `${plugin}cut_cross_entropy: false\n`)).setup.loss,
      'upcast',
    );
    assert.ok(byDefault.perGpu.peakBytes < plain.perGpu.peakBytes);
  });

  it('YAML read as PyYAML reads it (YAML 1.1): `32_768` is an integer, `yes` a boolean', async () => {
    // axolotl loads its config with `yaml.safe_load`; PyYAML's int resolver accepts `_` between digits and its bool
    // resolver yes/no/on/off. Under YAML 1.2 both would be strings and the sequence the 4096 default.
    const yaml = [
      'base_model: meta-llama/Llama-3.1-8B',
      'sequence_len: 32_768',
      'micro_batch_size: 1',
      'bf16: true',
      'gradient_checkpointing: yes',
      'fsdp_version: 2',
      'fsdp_config:',
      '  auto_wrap_policy: TRANSFORMER_BASED_WRAP',
      '  transformer_layer_cls_to_wrap: LlamaDecoderLayer',
      '',
    ].join('\n');
    const e = ok(await configAnalysis('axolotl/long.yaml', yaml));
    assert.equal(e.setup.seqLen, 32768);
    assert.equal(e.setup.checkpointing, 'full');
  });

  it('gradient_checkpointing_kwargs reach the Trainer; tiled_mlp keeps less than counted', async () => {
    const yaml = [
      'base_model: meta-llama/Llama-3.1-8B',
      'gradient_checkpointing: true',
      'gradient_checkpointing_kwargs:',
      '  use_reentrant: true',
      'tiled_mlp: true',
      'fsdp_config:',
      '  auto_wrap_policy: TRANSFORMER_BASED_WRAP',
      '',
    ].join('\n');
    const e = ok(await configAnalysis('axolotl/kwargs.yaml', yaml));
    // axolotl passes the kwargs to TrainingArguments, which passes them to gradient_checkpointing_enable.
    assert.equal(e.setup.reentrantCheckpoint, true);
    assert.ok(e.overcounted.some((o) => /tiled MLP \(tiled_mlp at kwargs\.yaml:5\)/.test(o)));
  });

  it("optimizer: adamw_torch_fused is Trainer's AdamW with fused=True", async () => {
    const yaml = [
      'base_model: meta-llama/Llama-3.1-8B',
      'optimizer: adamw_torch_fused',
      'fsdp_version: 2',
      'fsdp_config:',
      '  auto_wrap_policy: TRANSFORMER_BASED_WRAP',
      '',
    ].join('\n');
    const e = ok(await configAnalysis('axolotl/fused.yaml', yaml));
    assert.equal(e.setup.optimizerImpl, 'fused');
    assert.match(e.assumptions.find((a) => a.key === 'optimizerImpl')!.source.detail ?? '', /fused\.yaml:2/);
  });

  it('FSDP015 on a config that does not fit: the default world size and the kernels said, the verdict kept', async () => {
    // A 72B full fine-tune: fp32 parameters, gradients and AdamW (16 B per parameter) over the default 8 GPUs are
    // 145 GB each, more than an H100's 80 GB whatever Liger's kernels save of the activations.
    const yaml = [
      'base_model: Qwen/Qwen2.5-72B',
      'sequence_len: 4096',
      'micro_batch_size: 1',
      'bf16: true',
      'liger_rms_norm: true',
      'liger_fused_linear_cross_entropy: true',
      'fsdp_version: 2',
      'fsdp_config:',
      '  auto_wrap_policy: TRANSFORMER_BASED_WRAP',
      '  transformer_layer_cls_to_wrap: Qwen2DecoderLayer',
      '  activation_checkpointing: true',
      '',
    ].join('\n');
    const a = await configAnalysis('axolotl/big.yaml', yaml);
    assert.equal(ok(a).targetFit.verdict, 'short');
    const f = a.findings.filter((x) => x.rule === 'FSDP015');
    assert.equal(f.length, 1);
    assert.match(f[0]!.message, /8 GPUs, a default: nothing in the project says how many/);
    assert.match(f[0]!.message, /counted above what the job keeps \(Liger's RMSNorm/);
  });

  it("TrainingArguments(use_liger_kernel=True): the Trainer's Liger patch, fused loss", async () => {
    const text = [
      'from transformers import AutoModelForCausalLM, Trainer, TrainingArguments',
      'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
      'args = TrainingArguments("out", fsdp="full_shard auto_wrap", bf16=True, use_liger_kernel=True)',
      'Trainer(model=model, args=args).train()',
      '',
    ].join('\n');
    const facts = await scanSource(text, 'sft.py');
    const r = analyzeFacts(facts, text, { lint: DEFAULT_LINT_OPTIONS, estimate: {} });
    assert.ok(r.estimate?.ok, JSON.stringify(r.estimate));
    assert.equal(r.estimate.estimate.setup.loss, 'fused');
  });
});

describe('Lightning', () => {
  it('FSDPStrategy with a block policy, bf16-mixed, 2 nodes of 8 and 4 accumulated batches', async () => {
    const text = read('lightning/train_lightning.py');
    const facts = await scanSource(text, path.join(FW, 'lightning', 'train_lightning.py'));
    const r = analyzeFacts(facts, text, { lint: DEFAULT_LINT_OPTIONS, estimate: {} });
    assert.ok(r.estimate?.ok);
    const e = r.estimate.estimate;
    assert.equal(e.plan.api, 'fsdp1');
    assert.equal(e.units.length, 17);
    assert.equal(e.mesh.worldSize, 16);
    // bf16-mixed: Lightning's FSDPPrecision.mixed_precision_config is MixedPrecision(param_dtype=float32,
    // reduce_dtype=buffer_dtype=bfloat16) and convert_module leaves the module fp32: fp32 gathers, bf16 reduces.
    assert.equal(e.setup.masterDtype, 'float32');
    assert.equal(e.comms.gatherDtype, 'float32');
    assert.equal(e.comms.reduceDtype, 'bfloat16');
    // FSDP1 FlatParameters padded to a multiple of 16 (each unit's numel divides by 16 here): 16 B per param / 16,
    // plus Llama 3.2 1B's rotary inv_freq buffer (32 x 4 B).
    assert.equal(e.perGpu.persistentBytes, P1B + 128);
    assert.equal(e.setup.checkpointing, 'full');
    assert.equal(e.setup.syncEveryMicroBatch, false);
  });

  it("precision flags as Lightning's FSDPPrecision turns them into FSDP MixedPrecision", () => {
    // lightning/fabric/plugins/precision/fsdp.py: "16-mixed" -> param_dtype float32, reduce/buffer float16;
    // "bf16-true" -> all bfloat16 and the module converted; the bare "16" is Lightning's alias of "16-mixed".
    assert.deepEqual(lightningPrecision('16-mixed'), {
      master: 'float32',
      param: 'float32',
      reduce: 'float16',
    });
    assert.deepEqual(lightningPrecision('16'), { master: 'float32', param: 'float32', reduce: 'float16' });
    assert.deepEqual(lightningPrecision('bf16'), { master: 'float32', param: 'float32', reduce: 'bfloat16' });
    assert.deepEqual(lightningPrecision('16-true'), {
      master: 'float16',
      param: 'float16',
      reduce: 'float16',
    });
    assert.deepEqual(lightningPrecision('32'), { master: 'float32', param: 'float32', reduce: 'float32' });
    assert.equal(lightningPrecision('64-true'), undefined);
  });

  it('Trainer(strategy="fsdp") without a policy wraps the whole model as one unit', async () => {
    const text = [
      'import lightning as L',
      'from transformers import AutoModelForCausalLM',
      'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
      'trainer = L.Trainer(strategy="fsdp", devices=4, precision="bf16-true")',
    ].join('\n');
    const facts = await scanSource(text, 'lit.py');
    const r = analyzeFacts(facts, text, { lint: null, estimate: {} });
    assert.ok(r.estimate?.ok);
    const e = r.estimate.estimate;
    assert.equal(e.units.length, 1);
    // bf16-true: the module itself in bf16, so parameters, gradients and Adam states are 2 B each.
    assert.equal(e.setup.masterDtype, 'bfloat16');
    // and MixedPrecision(param_dtype=reduce_dtype=bfloat16): gathers and reduce-scatters are bf16 too.
    assert.equal(e.comms.gatherDtype, 'bfloat16');
    assert.equal(e.comms.reduceDtype, 'bfloat16');
    assert.equal(e.mesh.worldSize, 4);
  });
});

describe('Lightning strategy arguments', () => {
  async function lightning(strategy: string) {
    const text = [
      'import lightning as L',
      'from lightning.pytorch.strategies import FSDPStrategy',
      'from torch.distributed.fsdp import CPUOffload, ShardingStrategy',
      'from transformers import AutoModelForCausalLM',
      'from transformers.models.llama.modeling_llama import LlamaDecoderLayer',
      'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
      `trainer = L.Trainer(strategy=${strategy}, devices=4, precision="32-true")`,
    ].join('\n');
    const facts = await scanSource(text, 'lit.py');
    const r = analyzeFacts(facts, text, { lint: null, estimate: {} });
    assert.ok(r.estimate?.ok, JSON.stringify(r.estimate));
    return r.estimate;
  }

  it('cpu_offload=CPUOffload(offload_params=True) offloads as cpu_offload=True does', async () => {
    // Lightning's _init_cpu_offload uses a CPUOffload as given. One FSDP1 unit of the whole model over 4 GPUs
    // (1,235,814,400 / 4 is whole: no padding): fp32 parameters, gradients and 2 AdamW states, 16 B per parameter,
    // a quarter of them in each process's host memory.
    for (const arg of ['CPUOffload(offload_params=True)', 'True']) {
      const r = await lightning(`FSDPStrategy(cpu_offload=${arg})`);
      assert.equal(r.framework?.offload, true, arg);
      assert.equal(r.estimate.perGpu.hostBytes, (P1B * 16) / 4, arg);
    }
    const off = await lightning('FSDPStrategy(cpu_offload=CPUOffload(offload_params=False))');
    assert.equal(off.framework?.offload, false);
    assert.equal(off.estimate.perGpu.hostBytes, 0);
  });

  it('_HYBRID_SHARD_ZERO2, by name or by the enum, as ShardingStrategy[name.upper()] reads it', async () => {
    for (const s of [
      '"_HYBRID_SHARD_ZERO2"',
      'ShardingStrategy._HYBRID_SHARD_ZERO2',
      '"_hybrid_shard_zero2"',
    ]) {
      const r = await lightning(`FSDPStrategy(sharding_strategy=${s}, auto_wrap_policy={LlamaDecoderLayer})`);
      assert.equal(r.estimate.plan.strategy, '_HYBRID_SHARD_ZERO2', s);
    }
    const bare = await lightning('FSDPStrategy(sharding_strategy="HYBRID_SHARD")');
    assert.ok(bare.framework!.notes.some((n) => /Lightning raises/.test(n)));
  });
});

describe('Lightning counts', () => {
  it('devices and num_nodes that are not whole numbers are noted, not multiplied', async () => {
    const text = [
      'import lightning as L',
      'from transformers import AutoModelForCausalLM',
      'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
      'trainer = L.Trainer(strategy="fsdp", devices=1e308, num_nodes=2.5, accumulate_grad_batches=-1)',
    ].join('\n');
    const facts = await scanSource(text, 'lit.py');
    const r = analyzeFacts(facts, text, { lint: null, estimate: {} });
    assert.ok(r.estimate?.ok);
    const e = r.estimate.estimate;
    // Nothing read: fsdp-lens's default world of 8 GPUs and one micro-batch per step.
    assert.equal(e.mesh.worldSize, 8);
    assert.equal(e.setup.gradAccum, 1);
    const notes = r.estimate.framework!.notes.join(' | ');
    for (const key of ['devices = 1e+308', 'num_nodes = 2.5', 'accumulate_grad_batches = -1'])
      assert.ok(notes.includes(key), `${key}: ${notes}`);
  });
});

describe('torchtune', () => {
  it("names its Llama 4 builders and their tensor parallelism as not read, and the catalog's release", async () => {
    const yaml = [
      'model:',
      '  _component_: torchtune.models.llama4.llama4_scout_17b_16e',
      'tensor_parallel_dim: 2',
      'tensor_parallel_plan:',
      '  _component_: torchtune.models.llama4.decoder_only_tp_plan',
      'batch_size: 1',
      '',
    ].join('\n');
    const a = await configAnalysis('torchtune/llama4_scout.yaml', yaml);
    assert.equal(a.reading?.kind, 'problem');
    const text = JSON.stringify(a.reading);
    assert.match(text, /torchtune's Llama 4, an early-fusion model/);
    assert.match(text, /tensor_parallel_dim 2, llama4_scout\.yaml:3/);
    assert.match(text, /meta-llama\/Llama-4-Scout-17B-16E \(--model\)/);
  });

  it('llama3_1/8B_full: tok_embeddings, 32 layers, output and the root; pure bf16', async () => {
    const a = await configAnalysis('torchtune/8B_full.yaml');
    const e = ok(a);
    assert.equal(e.units.length, 35);
    assert.deepEqual(e.units[0]!.modules, ['tok_embeddings']);
    assert.ok(e.units.some((u) => u.modules[0] === 'output'));
    // The root keeps the final norm alone.
    assert.equal(e.units.find((u) => u.isRoot)!.params, 4096);
    assert.equal(e.model.params, P8B);
    // No MixedPrecisionPolicy: bf16 parameters, gradients and AdamW states (2 + 2 + 2 x 2 B) over 8 GPUs.
    assert.equal(e.setup.masterDtype, 'bfloat16');
    assert.equal(e.comms.gatherDtype, 'bfloat16');
    assert.equal(e.perGpu.persistentBytes, (P8B * 8) / 8);
    assert.equal(e.setup.microBatch, 2);
    assert.equal(e.setup.seqLen, 4096);
    assert.equal(e.setup.checkpointing, 'full');
  });

  it('the loss component: CEWithChunkedOutputLoss chunks, LinearCrossEntropyLoss gathers the head again', async () => {
    // n = 2 x 4,096 tokens x 128,256 vocabulary = 1,050,673,152 logits, bf16.
    const n = 2 * 4096 * 128_256;
    const lossEvents = (e: ReturnType<typeof ok>) => e.timeline!.events.filter((ev) => ev.phase === 'loss');
    const chunked = ok(await configAnalysis('torchtune/8B_full.yaml'));
    assert.equal(chunked.setup.loss, 'chunked');
    // The bf16 chunks (2n), every chunk's fp32 log-softmax (4n), the last chunk's fp32 copy (4n / 8).
    assert.equal(lossEvents(chunked)[0]!.live.logits, 6 * n + n / 2);
    const linearAnalysis = await configAnalysis(
      'torchtune/linear.yaml',
      read('torchtune/8B_full.yaml')
        .replace('CEWithChunkedOutputLoss', 'LinearCrossEntropyLoss')
        .replace('compile: False', 'compile: True'),
    );
    const linear = ok(linearAnalysis);
    assert.equal(linear.setup.loss, 'linear-chunked');
    // 4n + (2 + 4)·n / 8, plus the selected hidden states (2 B x 8,192 tokens x 4,096).
    assert.equal(lossEvents(linear)[0]!.live.logits, 4 * n + (6 * n) / 8 + 2 * 8192 * 4096);
    // `output` is a unit of its own (custom_sharded_layers), resharded after forward: gathered again for the loss,
    // 128,256 x 4,096 x 2 B, beside the root (the final norm, kept).
    const gathered = (e: ReturnType<typeof ok>) => lossEvents(e)[0]!.live.gathered;
    assert.equal(gathered(linear) - gathered(chunked), 128_256 * 4096 * 2);
    // `compile: True` compiles each block and the loss (`training.compile_model`, `compile_loss`).
    assert.equal(linear.setup.compile, 'model+loss');
    assert.equal(chunked.setup.compile, 'off');
  });

  it("torchtune's own llama3/8B_full builder and Qwen2.5: the shapes of their _model_builders.py", async () => {
    // llama3_8b: vocab 128,256, 32 layers, 32 heads, 8 KV heads, dim 4,096, FFN 14,336: Llama 3.1 8B's shapes
    // (only rope scaling and max_seq_len differ, which hold no parameters).
    const llama3 = ok(
      await configAnalysis(
        'torchtune/llama3.yaml',
        read('torchtune/8B_full.yaml').replace(
          'torchtune.models.llama3_1.llama3_1_8b',
          'torchtune.models.llama3.llama3_8b',
        ),
      ),
    );
    assert.equal(llama3.model.params, P8B);
    // qwen2_5_7b_base: vocab 152,064, 28 layers, 28 heads, 4 KV heads (head_dim 128), dim 3,584, FFN 18,944, biases on
    // q, k and v, untied output. Per layer: q 3584x3584 + 3584, k and v 3584x512 + 512 each, o 3584x3584,
    // 3 x 3584 x 18944, two norms of 3584 = 233,057,792; x 28 = 6,525,618,176; embedding and output
    // 152,064 x 3,584 = 544,997,376 each; final norm 3,584: 7,615,616,512 (Qwen2.5-7B's published count).
    const perLayer = 3584 * 3584 + 3584 + 2 * (3584 * 512 + 512) + 3584 * 3584 + 3 * 3584 * 18944 + 2 * 3584;
    assert.equal(perLayer, 233_057_792);
    const qwenParams = 28 * perLayer + 2 * 152064 * 3584 + 3584;
    assert.equal(qwenParams, 7_615_616_512);
    const qwenYaml = read('torchtune/8B_full.yaml')
      .replace('torchtune.models.llama3_1.llama3_1_8b', 'torchtune.models.qwen2_5.qwen2_5_7b_base')
      .replace("custom_sharded_layers: ['tok_embeddings', 'output']", '');
    const qwen = ok(await configAnalysis('torchtune/qwen.yaml', qwenYaml));
    assert.equal(qwen.model.params, qwenParams);
    // A unit per layer and the root (no custom_sharded_layers).
    assert.equal(qwen.units.length, 29);
    const instruct = readFrameworkConfig(
      'q.yaml',
      'model:\n  _component_: torchtune.models.qwen2_5.qwen2_5_72b_instruct\n',
    );
    assert.ok(instruct.kind === 'plan');
    const unknown = readFrameworkConfig(
      'g.yaml',
      'model:\n  _component_: torchtune.models.llama3_2_vision.llama3_2_vision_11b\n',
    );
    assert.ok(unknown.kind === 'problem');
    assert.match(unknown.problem.message, /llama3_2_vision_11b is not one fsdp-lens knows/);
    // A name every object answers to is no builder.
    const inherited = readFrameworkConfig(
      't.yaml',
      'model:\n  _component_: torchtune.models.gemma.toString\n',
    );
    assert.ok(inherited.kind === 'problem');
  });

  it("Llama 2, Mistral and Qwen3 builders: the shapes of torchtune's _model_builders.py, counted by hand", async () => {
    const params = async (component: string) =>
      ok(
        await configAnalysis(
          'torchtune/other.yaml',
          read('torchtune/8B_full.yaml')
            .replace('torchtune.models.llama3_1.llama3_1_8b', component)
            .replace("custom_sharded_layers: ['tok_embeddings', 'output']", ''),
        ),
      );
    // Llama 2 7B: per layer 4 x 4096² + 3 x 4096 x 11,008 + 2 x 4096 = 202,383,360; x 32, plus the embedding and
    // output (32,000 x 4,096 each) and the final norm: 6,738,415,616, Meta's published count.
    assert.equal(32 * (4 * 4096 ** 2 + 3 * 4096 * 11008 + 2 * 4096) + 2 * 32000 * 4096 + 4096, 6_738_415_616);
    assert.equal((await params('torchtune.models.llama2.llama2_7b')).model.params, 6_738_415_616);
    // Mistral 7B: 8 KV heads, FFN 14,336: 7,241,732,096.
    const mistral =
      32 * (2 * 4096 ** 2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096) + 2 * 32000 * 4096 + 4096;
    assert.equal(mistral, 7_241_732_096);
    assert.equal((await params('torchtune.models.mistral.mistral_7b')).model.params, mistral);
    // Qwen3 8B: head_dim 128 (q 32 x 128, k and v 8 x 128), q_norm and k_norm of 128, FFN 12,288, vocabulary
    // 151,936, output untied: 36 x 192,946,432 + 2 x 151,936 x 4,096 + 4,096 = 8,190,735,360.
    const layer = 4096 * 4096 + 2 * 4096 * 1024 + 4096 * 4096 + 2 * 128 + 3 * 4096 * 12288 + 2 * 4096;
    assert.equal(layer, 192_946_432);
    const qwen3 = await params('torchtune.models.qwen3.qwen3_8b_instruct');
    assert.equal(qwen3.model.params, 36 * layer + 2 * 151936 * 4096 + 4096);
    // Phi-3 mini: 32 layers of 4 x 3072² + 3 x 3072 x 8192 + 2 x 3072, embedding and output of 32,064 x 3,072:
    // 3,821,079,552, the published count of microsoft/Phi-3-mini-4k-instruct.
    assert.equal((await params('torchtune.models.phi3.phi3_mini')).model.params, 3_821_079_552);
    // Phi-4: 40 layers, 10 KV heads of 128 (k and v 5120 x 1280), FFN 17,920, vocabulary 100,352.
    const phi4 =
      40 * (2 * 5120 ** 2 + 2 * 5120 * 1280 + 3 * 5120 * 17920 + 2 * 5120) + 2 * 100352 * 5120 + 5120;
    assert.equal((await params('torchtune.models.phi4.phi4_14b')).model.params, phi4);
    // Qwen3 0.6B ties its output to the embedding: one 151,936 x 1,024 matrix.
    const small = await params('torchtune.models.qwen3.qwen3_0_6b_instruct');
    const smallLayer = 1024 * 2048 + 2 * 1024 * 1024 + 2048 * 1024 + 2 * 128 + 3 * 1024 * 3072 + 2 * 1024;
    assert.equal(small.model.params, 28 * smallLayer + 151936 * 1024 + 1024);
  });

  it('tune run --nproc_per_node in a launch script sets the world size of the config it passes', async () => {
    assert.deepEqual(
      readLaunchFile(
        'run.sh',
        'tune run --nnodes 2 --nproc_per_node 4 lora_finetune_distributed --config llama3_1/8B_lora\n',
      ),
      [{ file: 'run.sh', line: 1, script: '8B_lora.yaml', nprocPerNode: 4, nnodes: 2 }],
    );
    const dir = tempDir('fsdp-lens-tune-');
    try {
      fs.mkdirSync(path.join(dir, 'configs'));
      const yaml = read('torchtune/8B_full.yaml');
      fs.writeFileSync(path.join(dir, 'configs', '8B_full.yaml'), yaml);
      fs.writeFileSync(
        path.join(dir, 'run.sh'),
        'tune run --nproc_per_node 4 \\\n  full_finetune_distributed --config configs/8B_full.yaml\n',
      );
      const e = ok(await configAnalysis('torchtune/8B_full.yaml', yaml, dir));
      assert.equal(e.mesh.worldSize, 4);
      assert.equal(e.assumptions.find((x) => x.key === 'worldSize')?.source.kind, 'launch');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("Gemma and Gemma 2 builders: torchtune's names, the published totals, Gemma 2's own attention", async () => {
    const body = read('torchtune/8B_full.yaml')
      .split('\n')
      .filter((l) => !l.startsWith('#'))
      .join('\n');
    const gemma = (builder: string, extra = '') =>
      configAnalysis(
        'torchtune/gemma.yaml',
        [
          '# To launch on 4 devices, run the following command from root:',
          '#   tune run --nnodes 1 --nproc_per_node 4 lora_finetune_distributed --config gemma2/9B_lora',
          body.replace('torchtune.models.llama3_1.llama3_1_8b', builder + extra),
        ].join('\n'),
      );
    // gemma_7b (torchtune/models/gemma/_model_builders.py): vocab 256,000 x 3,072 tied; 28 layers of q, k, v, o
    // each 3,072 x 4,096 (16 heads of 256), gate, up, down 3 x 3,072 x 24,576, two norms of 3,072:
    // 276,830,208 per layer; 786,432,000 + 28 x 276,830,208 + 3,072 = 8,537,680,896, google/gemma-7b's total.
    const g7 = ok(await gemma('torchtune.models.gemma.gemma_7b'));
    assert.equal(g7.model.params, 8_537_680_896);
    // custom_sharded_layers [tok_embeddings, output]: the embedding a unit, the tied output none; 28 layers, the root.
    assert.equal(g7.units.length, 1 + 28 + 1);
    assert.equal(g7.setup.attention, 'fused');
    // gemma2_9b: vocab 256,000 x 3,584 tied; 42 layers of q 3,584 x 4,096, k and v 3,584 x 2,048, o 4,096 x 3,584,
    // 3 x 3,584 x 14,336 and four norms: 917,504,000 + 42 x 198,180,864 + 3,584 = 9,241,705,984, google/gemma-2-9b's.
    const g9 = ok(await gemma('torchtune.models.gemma2.gemma2_9b'));
    assert.equal(g9.model.params, 9_241_705_984);
    // Gemma2Attention soft-caps the scores, computing them itself: eager attention.
    assert.equal(g9.setup.attention, 'eager');
    // The launch comment's `--nnodes 1 --nproc_per_node 4`: 4 GPUs.
    assert.equal(g9.mesh.worldSize, 4);
    // LoRA on the MLP names gemma_mlp's gate_proj, down_proj and up_proj; the output is tied, so no LoRA there.
    const lora = ok(
      await gemma(
        'torchtune.models.gemma2.lora_gemma2_9b',
        '\n  lora_attn_modules: [q_proj, v_proj]\n  apply_lora_to_mlp: True\n  apply_lora_to_output: True\n  lora_rank: 8',
      ),
    );
    // Rank 8 adapters: q 8 x (3,584 + 4,096), v 8 x (3,584 + 2,048), gate and up 8 x (3,584 + 14,336) each, down
    // 8 x (14,336 + 3,584): 61,440 + 45,056 + 3 x 143,360 = 536,576 per layer, x 42.
    assert.equal(lora.model.params - 9_241_705_984, 42 * 536_576);
  });

  it("the config's own launch comment: its --nproc_per_node, and single-device recipes said to use no FSDP", async () => {
    const body = read('torchtune/8B_full.yaml')
      .split('\n')
      .filter((l) => !l.startsWith('#'))
      .join('\n');
    const distributed = [
      '# To launch on 2 devices, run the following command from root:',
      '#   tune run --nproc_per_node 2 full_finetune_distributed --config llama3_1/8B_full',
      body,
    ].join('\n');
    const e = ok(await configAnalysis('torchtune/8B_full.yaml', distributed));
    // Below a launch file (the test above): here nothing else says, so the comment's 2 GPUs stand, and are named.
    assert.equal(e.mesh.worldSize, 2);
    assert.match(
      JSON.stringify(e.assumptions.find((x) => x.key === 'worldSize')?.source),
      /launch comment \(8B_full\.yaml:2\)/,
    );
    // full_finetune_single_device trains on one GPU with no FSDP (torchtune's recipes/full_finetune_single_device.py).
    const single = [
      '#   tune run full_finetune_single_device --config llama3_1/8B_full_single_device',
      body,
    ].join('\n');
    const one = ok(await configAnalysis('torchtune/8B_full_single_device.yaml', single));
    assert.equal(one.plan.api, 'none');
    assert.equal(one.units.length, 0);
    assert.equal(one.mesh.worldSize, 1);
    // The whole model in bf16 (torchtune's `dtype`), its bf16 gradients and AdamW's two bf16 states (the
    // optimizer keeps them in the parameters' dtype): 8 B x 8,030,261,248 parameters, nothing sharded.
    assert.equal(one.perGpu.persistentBytes, 8 * 8_030_261_248);
    // At the end of backward every gradient exists (2 B each), beside the parameters and the states (6 B each).
    const names = one.perGpu.peak.terms.map((t) => [t.name, t.bytes]);
    assert.deepEqual(names[0], ['parameters and optimizer state', 6 * 8_030_261_248]);
    assert.deepEqual(names.at(-1), ['gradients', 2 * 8_030_261_248]);
    assert.equal(one.comms.perStep.collectives.allGather + one.comms.perStep.collectives.reduceScatter, 0);
    // With optimizer_in_bwd each parameter is stepped as AccumulateGrad makes its gradient (the same
    // post-accumulate-grad hook): one gradient at a time, the largest the embedding's or the head's
    // (128,256 x 4,096 x 2 B), and none left for a step after backward.
    const inBwd = ok(
      await configAnalysis('torchtune/8B_full_single_device.yaml', `${single}\noptimizer_in_bwd: True\n`),
    );
    const most = Math.max(...inBwd.timeline!.events.map((ev) => ev.live.gradients));
    assert.equal(most, 128_256 * 4096 * 2);
    assert.equal(inBwd.timeline!.events.find((ev) => ev.phase === 'optimizer')!.live.gradients, 0);
    // A paged optimizer's state is the whole model's here (two 1-byte states per parameter for PagedAdamW8bit),
    // in CUDA unified memory: counted as what may leave the GPU.
    const paged = ok(
      await configAnalysis(
        'torchtune/8B_full_single_device.yaml',
        single
          .replace('torch.optim.AdamW', 'bitsandbytes.optim.PagedAdamW8bit')
          .replace('  fused: True\n', ''),
      ),
    );
    assert.equal(paged.perGpu.pagedOptimizerBytes, 2 * 8_030_261_248);
  });

  it('a LoRA recipe: rank-8 adapters on q_proj and v_proj of every layer', async () => {
    const yaml = read('torchtune/8B_full.yaml')
      .replace(
        'torchtune.models.llama3_1.llama3_1_8b',
        'torchtune.models.llama3_1.lora_llama3_1_8b\n  lora_attn_modules: [q_proj, v_proj]\n  lora_rank: 8',
      )
      .replace("custom_sharded_layers: ['tok_embeddings', 'output']", '');
    const e = ok(await configAnalysis('torchtune/lora.yaml', yaml));
    // 32 layers x 8 x ((4096 + 4096) + (4096 + 1024)).
    assert.equal(e.model.trainableParams, 32 * 8 * (4096 + 4096 + 4096 + 1024));
    assert.equal(e.model.trainableParams, 3_407_872);
  });
});

describe('torchtitan', () => {
  it("qwen3's dense flavors: the tied small ones keep [tok_embeddings, norm] as one unit", () => {
    const plan = (flavor: string) => {
      const r = readFrameworkConfig(
        'qwen3.toml',
        `[model]\nname = "qwen3"\nflavor = "${flavor}"\n[training]\nlocal_batch_size = 1\nseq_len = 4096\n[parallelism]\ndata_parallel_shard_degree = -1\n`,
      );
      assert.ok(r.kind === 'plan', JSON.stringify(r));
      return r.plan;
    };
    // `apply_fsdp_to_decoder` with `enable_weight_tying`: tok_embeddings, norm and the head one unit, kept.
    const small = plan('0.6B');
    assert.deepEqual(small.wrap, {
      kind: 'blocks',
      before: [],
      after: [['tok_embeddings', 'norm']],
      afterReshard: false,
    });
    // 0.6B: 28 blocks of 1024 x 2048 (q) + 2 x 1024 x 1024 (k, v) + 2048 x 1024 (o) + 2 x 128 (q, k norms)
    // + 3 x 1024 x 3072 + 2 x 1024, one tied 151,936 x 1,024 embedding, the final norm.
    const block = 1024 * 2048 + 2 * 1024 * 1024 + 2048 * 1024 + 2 * 128 + 3 * 1024 * 3072 + 2 * 1024;
    assert.equal(countParams(small.builtModel!.loaded.root), 28 * block + 151936 * 1024 + 1024);
    const big = plan('14B');
    assert.deepEqual(big.wrap, {
      kind: 'blocks',
      before: [['tok_embeddings']],
      after: [['norm', 'output']],
      afterReshard: false,
    });
    const moe = readFrameworkConfig(
      'moe.toml',
      '[model]\nname = "qwen3"\nflavor = "30B-A3B"\n[training]\nseq_len = 4096\n',
    );
    // The MoE flavors are read too (test/unit/expertParallel.test.ts counts them); an unknown flavor is named.
    assert.ok(moe.kind === 'plan');
    // The debug flavor with q, k and v unfused has the debug flavor's shapes.
    const unfused = readFrameworkConfig(
      'u.toml',
      '[model]\nname = "qwen3"\nflavor = "debugmodel_non_fused_qkv"\n[training]\nseq_len = 4096\n',
    );
    assert.ok(unfused.kind === 'plan');
    const unknown = readFrameworkConfig(
      'x.toml',
      '[model]\nname = "qwen3"\nflavor = "1T"\n[training]\nseq_len = 4096\n',
    );
    assert.ok(unknown.kind === 'problem');
    assert.match(unknown.problem.message, /flavor "1T" is not one of torchtitan's Qwen3 flavors/);
  });

  it('FFN hidden sizes of the flavors from ffn_dim_multiplier and multiple_of', () => {
    // int(2·4·dim/3), times the multiplier, rounded up to multiple_of.
    assert.equal(titanFfnHidden(4096, 1.3, 1024), 14336); // 10922 -> 14198 -> 14336
    assert.equal(titanFfnHidden(8192, 1.3, 4096), 28672); // 21845 -> 28398 -> 28672
    assert.equal(titanFfnHidden(16384, 1.2, 4096), 53248); // 43690 -> 52428 -> 53248
    assert.equal(titanFfnHidden(256, null, 256), 768); // 682 -> 768
  });

  it("llama3_8b.toml: 35 units, bf16 gathers, fp32 reduce-scatters, the job's batch and sequence", async () => {
    const e = ok(await configAnalysis('torchtitan/llama3_8b.toml'));
    assert.equal(e.model.params, P8B);
    assert.equal(e.units.length, 35);
    const tail = e.units.find((u) => u.modules.join(',') === 'norm,output')!;
    assert.equal(tail.residency.kind, 'keep');
    assert.equal(e.comms.gatherDtype, 'bfloat16');
    assert.equal(e.comms.reduceDtype, 'float32');
    assert.equal(e.setup.seqLen, 8192);
    assert.equal(e.setup.microBatch, 1);
    assert.equal(e.setup.checkpointing, 'selective');
    // fp32 state, 16 B per parameter over 8 GPUs, plus freqs_cis: 8192 x 64 complex64 (8 B).
    assert.equal(e.perGpu.persistentBytes, (P8B * 16) / 8 + 8192 * 64 * 8);
  });

  it('an older job config (parallelism under [training], batch_size): a unit per block and the root', async () => {
    const toml = [
      '[model]',
      'name = "llama3"',
      'flavor = "8B"',
      '[training]',
      'batch_size = 1',
      'seq_len = 8192',
      'data_parallel_shard_degree = 8',
      '',
    ].join('\n');
    const e = ok(await configAnalysis('torchtitan/old.toml', toml));
    assert.equal(e.units.length, 33);
    assert.equal(e.mesh.worldSize, 8);
    // The last block is kept gathered after forward ("default" before July 2025).
    const blocks = e.units.filter((u) => u.classNames[0] === 'TransformerBlock');
    assert.equal(blocks[blocks.length - 1]!.residency.kind, 'keep');
    assert.equal(blocks[0]!.residency.kind, 'reshard');
  });
});

describe('DeepSpeed', () => {
  it('an Accelerate DeepSpeed YAML: ZeRO-3 as FULL_SHARD over num_processes, bf16 over fp32 master weights', async () => {
    const yaml = [
      '# fsdp: model=meta-llama/Llama-3.1-8B',
      'compute_environment: LOCAL_MACHINE',
      'distributed_type: DEEPSPEED',
      'deepspeed_config:',
      '  offload_optimizer_device: none',
      '  offload_param_device: none',
      '  zero_stage: 3',
      'mixed_precision: bf16',
      'num_processes: 4',
      '',
    ].join('\n');
    const e = ok(await configAnalysis('deepspeed/accelerate_zero3.yaml', yaml));
    assert.equal(e.plan.strategy, 'FULL_SHARD');
    assert.equal(e.mesh.worldSize, 4);
    assert.equal(e.comms.gatherDtype, 'bfloat16');
    // fp32 parameters, gradients and AdamW's two states, 16 B per parameter, over 4 GPUs (FlatParameters padded
    // to a multiple of 4: at most a few elements per unit).
    assert.ok(Math.abs(e.perGpu.persistentBytes - (P8B * 16) / 4) < 33 * 4 * 16 + 4096);
    // Settings in a DeepSpeed JSON: that file is named, not guessed.
    const a = await configAnalysis(
      'deepspeed/accelerate_file.yaml',
      'distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: ds/zero1.json\nnum_processes: 2\n',
    );
    assert.equal(a.reading?.kind, 'problem');
    assert.match(JSON.stringify(a.reading), /settings in ds\/zero1\.json .*--world-size 2/);
  });

  it('"enabled": "auto" precision is the Trainer\'s to fill: not read as off', () => {
    const r = readFrameworkConfig(
      'ds.json',
      '{"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 3}}',
    );
    assert.ok(r.kind === 'plan');
    // `HfTrainerDeepSpeedConfig.trainer_config_process` fills it from TrainingArguments' bf16.
    assert.equal(r.plan.values.paramDtype, undefined);
    assert.equal(r.plan.values.reduceDtype, undefined);
    assert.ok(r.plan.notes.some((n) => /bf16\.enabled: "auto"/.test(n)));
    const on = readFrameworkConfig(
      'ds.json',
      '{"bf16": {"enabled": true}, "zero_optimization": {"stage": 3}}',
    );
    assert.ok(on.kind === 'plan');
    assert.equal(on.plan.values.paramDtype, 'bfloat16');
  });

  it('ZeRO-3 shown as FULL_SHARD, ZeRO-2 as SHARD_GRAD_OP', async () => {
    const cfg = (stage: number) =>
      JSON.stringify({
        bf16: { enabled: true },
        zero_optimization: { stage },
        train_micro_batch_size_per_gpu: 2,
      });
    const r3 = readFrameworkConfig('ds.json', cfg(3));
    const r2 = readFrameworkConfig('ds.json', cfg(2));
    assert.ok(r3.kind === 'plan' && r2.kind === 'plan');
    assert.equal(r3.plan.strategy, 'FULL_SHARD');
    assert.equal(r2.plan.strategy, 'SHARD_GRAD_OP');
    assert.equal(r3.plan.values.microBatch, 2);
    const r = await cli(
      'estimate',
      path.join(FW, 'deepspeed', 'ds_zero3.json'),
      '--model',
      'meta-llama/Llama-3.2-1B',
      '--json',
    );
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as {
      framework: string;
      units: unknown[];
      perGpu: { persistentBytes: number };
    };
    assert.equal(j.framework, 'DeepSpeed');
    assert.equal(j.units.length, 17);
  });
});

describe('configuration files that are not what they seem', () => {
  it('syntax errors, wrong types and absurd values give a message or a default, never a throw', async () => {
    const cases: [string, string][] = [
      ['a.yaml', 'distributed_type: FSDP\nfsdp_config: [unclosed\n'],
      [
        'b.yaml',
        'distributed_type: FSDP\nnum_processes: .nan\nfsdp_config:\n  fsdp_version: -3\n  fsdp_min_num_params: 1e308\n',
      ],
      ['c.json', '{"zero_optimization": {"stage": "three"}, "train_micro_batch_size_per_gpu": -1}'],
      ['d.toml', '[model]\nflavor = 8\n[training]\nseq_len = "long"\nlocal_batch_size = 1e400\n'],
      [
        'e.yaml',
        'model:\n  _component_: torchtune.models.llama3_1.llama3_1_8b\nbatch_size: [1, 2]\ndtype: 7\n',
      ],
      ['f.yaml', '&a [*a]'],
      ['g.json', '[1, 2, 3]'],
    ];
    for (const [name, text] of cases) {
      const r = readFrameworkConfig(name, text);
      assert.ok(['plan', 'problem', 'none'].includes(r.kind), name);
      if (r.kind === 'plan') {
        for (const v of Object.values(r.plan.values))
          if (typeof v === 'number') assert.ok(Number.isFinite(v) && v > 0, `${name}: ${v}`);
      }
    }
    assert.equal(readFrameworkConfig('a.yaml', cases[0]![1]).kind, 'problem');
    assert.ok('error' in readConfigText('x.toml', 'a = = 1'));
  });

  it('counts that are not whole numbers are noted and left to the default, never multiplied out', () => {
    const toml = (shard: string) =>
      `[model]\nname = "llama3"\nflavor = "8B"\n[training]\nlocal_batch_size = 2\n[parallelism]\ndata_parallel_shard_degree = ${shard}\n`;
    for (const bad of ['1e308', '2.5', '0', '-4', 'nan', '"eight"']) {
      const r = readFrameworkConfig('t.toml', toml(bad));
      assert.ok(r.kind === 'plan', bad);
      // torchtitan's default dp_shard is -1 (the ranks the launcher starts): no world size from the file.
      assert.equal(r.plan.values.worldSize, undefined, bad);
      assert.ok(
        r.plan.notes.some(
          (n) => n.startsWith('parallelism.data_parallel_shard_degree = ') && /ignored/.test(n),
        ),
        `${bad}: ${r.plan.notes.join(' | ')}`,
      );
    }
    const good = readFrameworkConfig('t.toml', toml('16'));
    assert.ok(good.kind === 'plan');
    assert.equal(good.plan.values.worldSize, 16);
    const minus1 = readFrameworkConfig('t.toml', toml('-1'));
    assert.ok(minus1.kind === 'plan' && !minus1.plan.notes.some((n) => /ignored/.test(n)));
    const acc = readFrameworkConfig(
      'a.yaml',
      'distributed_type: FSDP\nnum_processes: 2.5\nnum_machines: 1e308\nfsdp_config:\n  fsdp_version: 2\n',
    );
    assert.ok(acc.kind === 'plan');
    assert.equal(acc.plan.values.worldSize, undefined);
    assert.ok(acc.plan.notes.some((n) => /^num_processes = 2.5 .*ignored/.test(n)));
    assert.ok(acc.plan.notes.some((n) => /^num_machines = 1e\+308 .*ignored/.test(n)));
    const pc = readFrameworkConfig(
      'p.yaml',
      'distributed_type: FSDP\nnum_processes: 8\nparallelism_config:\n  parallelism_config_dp_replicate_size: 1e308\n  parallelism_config_dp_shard_size: 4\n',
    );
    assert.ok(pc.kind === 'plan');
    assert.equal(pc.plan.values.replicas, undefined);
    assert.equal(
      pc.plan.notes.filter((n) => /^parallelism_config dp_replicate_size = 1e\+308 .*ignored/.test(n)).length,
      1,
    );
    // Context parallelism in Accelerate's config splits the sequence only inside the script's
    // `maybe_context_parallel`: no verdict rests on the full sequence.
    const cp = readFrameworkConfig(
      'cp.yaml',
      'distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  fsdp_version: 2\nparallelism_config:\n  parallelism_config_dp_shard_size: 4\n  parallelism_config_cp_size: 2\n',
    );
    assert.ok(cp.kind === 'plan');
    assert.deepEqual(cp.plan.unmodelled, ['context parallelism (cp_size 2)']);
    const tune = readFrameworkConfig(
      'tune.yaml',
      'model:\n  _component_: torchtune.models.llama3_1.llama3_1_8b\nbatch_size: -2\ndata_parallel_shard_dim: -1\n',
    );
    assert.ok(tune.kind === 'plan');
    assert.equal(tune.plan.values.microBatch, undefined);
    assert.deepEqual(
      tune.plan.notes.filter((n) => /ignored/.test(n)).map((n) => n.split(' ')[0]),
      ['batch_size'],
    );
  });

  it('estimates from mutated configurations keep every figure finite and non-negative', async () => {
    const BAD = {
      yaml: ['.nan', '-3', '1e308', '"many"', '2.5'],
      toml: ['nan', '-3', '1e308', '"many"', '2.5'],
    };
    const bases: [string, string, 'yaml' | 'toml'][] = [
      [
        'torchtitan/llama3_8b.toml',
        read('torchtitan/llama3_8b.toml').replace(
          'seq_len = 8192',
          'seq_len = 8192\nglobal_batch_size = 64\nenable_cpu_offload = false',
        ),
        'toml',
      ],
      [
        'torchtune/8B_full.yaml',
        read('torchtune/8B_full.yaml') + 'data_parallel_shard_dim: 8\ndata_parallel_replicate_dim: 1\n',
        'yaml',
      ],
      ['accelerate/accelerate_fsdp2.yaml', read('accelerate/accelerate_fsdp2.yaml'), 'yaml'],
    ];
    // Every figure of an estimate: byte counts, times, traffic, unit sizes. Signed by design: a GPU's headroom
    // (negative when the plan does not fit) and a timeline event's segment (-1 for the optimizer step).
    const SIGNED = new Set(['headroomBytes', 'segment']);
    const bad: string[] = [];
    const walk = (v: unknown, at: string, depth: number) => {
      if (depth > 12) return;
      if (typeof v === 'number') {
        if (!Number.isFinite(v) || v < 0) bad.push(`${at} = ${v}`);
      } else if (Array.isArray(v)) v.forEach((x, i) => walk(x, `${at}[${i}]`, depth + 1));
      else if (typeof v === 'object' && v !== null)
        for (const [k, x] of Object.entries(v))
          if (!(SIGNED.has(k) && typeof x === 'number' && Number.isFinite(x)))
            walk(x, `${at}.${k}`, depth + 1);
    };
    let estimated = 0;
    for (const [rel, text, format] of bases) {
      const lines = text.split('\n');
      const numeric = lines
        .map((l, i) => (format === 'toml' ? /^(\s*\w+\s*=\s*)-?[\d.]/ : /^(\s*\w+:\s+)-?[\d.]/).exec(l) && i)
        .filter((i): i is number => typeof i === 'number');
      assert.ok(numeric.length >= 4, `${rel}: ${numeric.length} numeric settings`);
      for (const i of numeric)
        for (const b of BAD[format]) {
          const mutated = [...lines];
          mutated[i] = lines[i]!.replace(
            format === 'toml' ? /=\s*.*$/ : /:\s+.*$/,
            format === 'toml' ? `= ${b}` : `: ${b}`,
          );
          const a = await configAnalysis(rel, mutated.join('\n'));
          const what = `${rel} line ${i + 1} -> ${b}`;
          if (!a.estimate?.ok) continue;
          estimated++;
          walk(a.estimate.estimate, what, 0);
        }
    }
    assert.deepEqual(bad.slice(0, 10), []);
    assert.ok(estimated > 50, `${estimated} estimates`);
  });

  it('launch commands without FSDP are not plans', () => {
    assert.deepEqual(launchCommands('run.sh', 'torchrun --nproc_per_node 8 train.py --lr 1e-4\n'), []);
  });

  it("a Transformers command line's flags as HfArgumentParser reads them, and torchrun's processes", () => {
    const [c] = launchCommands(
      'train.sh',
      [
        'torchrun --nproc_per_node=4 --nnodes 2 train.py \\',
        '  --model_name_or_path meta-llama/Llama-2-7b-hf --bf16 True \\',
        '  --per_device_train_batch_size 4 --gradient_accumulation_steps 8 \\',
        '  --gradient_checkpointing --model_max_length 512 \\',
        '  --fsdp "full_shard auto_wrap" --fsdp_transformer_layer_cls_to_wrap LlamaDecoderLayer',
      ].join('\n'),
    );
    assert.ok(c);
    const v = c.plan.values;
    assert.equal(v.worldSize, 8);
    assert.equal(v.gpusPerNode, 4);
    assert.equal(v.microBatch, 4);
    assert.equal(v.gradAccum, 8);
    // The Trainer syncs on the last micro-batch only (accelerator.no_sync); a bare bool flag is True.
    assert.equal(v.syncEveryMicroBatch, false);
    assert.equal(v.checkpointing, 'full');
    assert.equal(v.paramDtype, 'bfloat16');
    assert.equal(v.seqLen, 512);
    assert.match(
      c.plan.details.seqLen ?? '',
      /--model_max_length at train\.sh:1 \(the longest a sequence may be\)/,
    );
    // `--bf16 False` is no mixed precision.
    const [off] = launchCommands(
      'train.sh',
      'python train.py --bf16 False --fsdp "full_shard auto_wrap" --fsdp_transformer_layer_cls_to_wrap X\n',
    );
    assert.equal(off?.plan.values.paramDtype, null);
  });
});

describe('where a script finds its framework configuration', () => {
  const script = [
    'from accelerate import Accelerator',
    'from transformers import AutoModelForCausalLM',
    'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
    'accelerator = Accelerator()',
    'model = accelerator.prepare(model)',
    '',
  ].join('\n');
  const fsdp2 = (procs: number) =>
    `distributed_type: FSDP\nnum_processes: ${procs}\nmixed_precision: bf16\nfsdp_config:\n  fsdp_version: 2\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n`;

  async function analyzeScript(dir: string) {
    const text = script;
    fs.writeFileSync(path.join(dir, 'train.py'), text);
    const facts = await scanSource(text, path.join(dir, 'train.py'));
    const project = new Project([dir], await grammar(), diskFS);
    const r = analyzeFacts(facts, text, { lint: null, estimate: { project, host: nodeHost() } });
    assert.ok(r.estimate?.ok, JSON.stringify(r.estimate));
    return r.estimate;
  }

  it('the config a launch script passes with --config_file', async () => {
    const dir = tempDir('fsdp-lens-launch-');
    fs.mkdirSync(path.join(dir, 'configs'));
    fs.writeFileSync(path.join(dir, 'configs', 'fsdp16.yaml'), fsdp2(16));
    fs.writeFileSync(
      path.join(dir, 'run.sh'),
      'accelerate launch \\\n  --config_file configs/fsdp16.yaml \\\n  train.py --lr 1e-4\n',
    );
    const r = await analyzeScript(dir);
    assert.equal(r.estimate.mesh.worldSize, 16);
    assert.equal(r.framework?.framework, 'Accelerate');
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("the script's Accelerator(mixed_precision=...) over the config's mixed_precision", async () => {
    const dir = tempDir('fsdp-lens-accmp-');
    try {
      fs.writeFileSync(
        path.join(dir, 'accelerate.yaml'),
        fsdp2(8).replace('mixed_precision: bf16', 'mixed_precision: "no"'),
      );
      const text = script.replace('Accelerator()', 'Accelerator(mixed_precision="fp16")');
      fs.writeFileSync(path.join(dir, 'train.py'), text);
      const facts = await scanSource(text, path.join(dir, 'train.py'));
      const project = new Project([dir], await grammar(), diskFS);
      const r = analyzeFacts(facts, text, { lint: null, estimate: { project } });
      assert.ok(r.estimate?.ok, JSON.stringify(r.estimate));
      assert.equal(r.estimate.framework?.framework, 'Accelerate');
      assert.equal(r.estimate.estimate.comms.gatherDtype, 'float16');
      assert.equal(r.estimate.estimate.setup.masterDtype, 'float32');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('an edited config or version pin reaches the script once the editor reports the file changed', async () => {
    const dir = tempDir('fsdp-lens-watch-');
    try {
      const yaml = path.join(dir, 'accelerate.yaml');
      fs.writeFileSync(yaml, fsdp2(8));
      const text = [
        'from transformers import AutoModelForCausalLM, TrainingArguments',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        'args = TrainingArguments(output_dir="o", fsdp="full_shard auto_wrap")',
        'def helper():',
        '    pass',
        'helper()',
        '',
      ].join('\n');
      const script = path.join(dir, 'train.py');
      fs.writeFileSync(script, text);
      fs.writeFileSync(path.join(dir, 'requirements.txt'), 'transformers==4.57.6\n');
      const facts = await scanSource(text, script);
      const project = new Project([dir], await grammar(), diskFS);
      const run = () => {
        const r = analyzeFacts(facts, text, { lint: null, estimate: { project } });
        assert.ok(r.estimate?.ok, JSON.stringify(r.estimate));
        return r.estimate;
      };
      // Transformers 4 pinned: fsdp="full_shard auto_wrap" is FSDP1.
      assert.equal(run().estimate.plan.api, 'fsdp1');
      const callers = project.callersOf('helper');
      fs.writeFileSync(path.join(dir, 'requirements.txt'), 'transformers==5.18.0\n');
      project.invalidate(path.join(dir, 'requirements.txt'));
      // Transformers 5: fsdp=... is FSDP2.
      assert.equal(run().estimate.plan.api, 'fsdp2');
      // A pin or a config is not Python: the search for callers is kept.
      assert.equal(project.callersOf('helper'), callers);
      project.invalidate(script);
      assert.notEqual(project.callersOf('helper'), callers);

      // The nearby Accelerate config of a script that configures no FSDP itself.
      const accText = [
        'from accelerate import Accelerator',
        'from transformers import AutoModelForCausalLM',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
        'accelerator = Accelerator()',
        '',
      ].join('\n');
      const accScript = path.join(dir, 'acc.py');
      fs.writeFileSync(accScript, accText);
      const accFacts = await scanSource(accText, accScript);
      const world = () => {
        const r = analyzeFacts(accFacts, accText, { lint: null, estimate: { project } });
        assert.ok(r.estimate?.ok, JSON.stringify(r.estimate));
        return r.estimate.estimate.mesh.worldSize;
      };
      assert.equal(world(), 8);
      fs.writeFileSync(yaml, fsdp2(16));
      project.invalidate(yaml);
      assert.equal(world(), 16);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the files whose changes the editor reports: configurations, launch files and pins, not run output', () => {
    for (const f of [
      '/w/accelerate.yaml',
      '/w/configs/8B_full.yml',
      '/w/llama3_8b.toml',
      '/w/ds_zero3.json',
      '/w/run.sh',
      '/w/job.slurm',
      '/w/requirements-dev.txt',
      '/w/uv.lock',
      '/w/Makefile',
      '/w/train.py',
      'C:\\w\\requirements.txt',
    ])
      assert.ok(isProjectInput(f), f);
    for (const f of [
      '/w/README.md',
      '/w/node_modules/x/package.json',
      '/w/.venv/lib/a.py',
      '/w/wandb/run-1/files/config.yaml',
      '/w/out/checkpoint-500/trainer_state.json',
      '/w/data.csv',
    ])
      assert.ok(!isProjectInput(f), f);
  });

  it("Accelerate's default config under $HF_HOME when nothing nearer says", async () => {
    const dir = tempDir('fsdp-lens-default-');
    const home = tempDir('fsdp-lens-hfhome-');
    fs.mkdirSync(path.join(home, 'accelerate'));
    fs.writeFileSync(path.join(home, 'accelerate', 'default_config.yaml'), fsdp2(4));
    const saved = process.env.HF_HOME;
    process.env.HF_HOME = home;
    try {
      const r = await analyzeScript(dir);
      assert.equal(r.estimate.mesh.worldSize, 4);
      assert.equal(r.framework?.framework, 'Accelerate');
    } finally {
      if (saved === undefined) delete process.env.HF_HOME;
      else process.env.HF_HOME = saved;
      fs.rmSync(dir, { recursive: true, force: true });
      fs.rmSync(home, { recursive: true, force: true });
    }
  });

  it("Lightning's ModelParallelStrategy: the script's fully_shard over the data-parallel dimension", async () => {
    const text = [
      'import lightning as L',
      'from lightning.pytorch.strategies import ModelParallelStrategy',
      'from torch.distributed.fsdp import fully_shard',
      'from transformers import AutoModelForCausalLM',
      '',
      'class Lit(L.LightningModule):',
      '    def configure_model(self):',
      '        self.model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")',
      '        for layer in self.model.model.layers:',
      '            fully_shard(layer, mesh=self.device_mesh["data_parallel"])',
      '        fully_shard(self.model, mesh=self.device_mesh["data_parallel"])',
      '',
      'trainer = L.Trainer(strategy=ModelParallelStrategy(data_parallel_size=4, tensor_parallel_size=2), devices=8)',
      '',
    ].join('\n');
    const facts = await scanSource(text, 'lit_mp.py');
    const r = analyzeFacts(facts, text, { lint: null, estimate: {} });
    assert.ok(r.estimate?.ok);
    assert.equal(r.estimate.estimate.mesh.worldSize, 4);
    assert.deepEqual(r.estimate.estimate.unmodelled, ["ModelParallelStrategy's tensor parallelism (2 GPUs)"]);
    assert.equal(r.estimate.estimate.targetFit.verdict, 'undecided');
  });
});

describe('torch.compile as the frameworks turn it on', () => {
  const compileOf = async (rel: string, text: string) => ok(await configAnalysis(rel, text)).setup.compile;

  it("torchtitan's [compile] components, and the older [training] compile", async () => {
    const toml = read('torchtitan/llama3_8b.toml');
    // `CompileConfig.components` defaults to ["model", "loss"].
    assert.equal(await compileOf('torchtitan/c.toml', `${toml}\n[compile]\nenable = true\n`), 'model+loss');
    assert.equal(
      await compileOf('torchtitan/c.toml', `${toml}\n[compile]\nenable = true\ncomponents = ["loss"]\n`),
      'loss',
    );
    assert.equal(await compileOf('torchtitan/c.toml', `${toml}\n[compile]\nenable = false\n`), 'off');
    assert.equal(
      await compileOf('torchtitan/c.toml', toml.replace('[training]', '[training]\ncompile = true')),
      'model+loss',
    );
  });

  it("Accelerate's dynamo_config, and a mode that records CUDA graphs", async () => {
    const yaml = read('accelerate/accelerate_fsdp2.yaml');
    assert.equal(
      await compileOf('accelerate/d.yaml', `${yaml}dynamo_config:\n  dynamo_backend: INDUCTOR\n`),
      'model+loss',
    );
    assert.equal(
      await compileOf(
        'accelerate/d.yaml',
        `${yaml}dynamo_config:\n  dynamo_backend: INDUCTOR\n  dynamo_mode: reduce-overhead\n`,
      ),
      'cudagraphs',
    );
    assert.equal(
      await compileOf('accelerate/d.yaml', `${yaml}dynamo_config:\n  dynamo_backend: 'NO'\n`),
      'off',
    );
  });

  it("Transformers' --torch_compile and a torch_compile_mode, which turns it on", async () => {
    const sh = read('accelerate/hf_cli.sh');
    assert.equal(
      await compileOf('accelerate/c.sh', sh.replace('  --bf16 \\', '  --bf16 \\\n  --torch_compile True \\')),
      'model+loss',
    );
    // `TrainingArguments.__post_init__`: a mode or a backend sets torch_compile.
    assert.equal(
      await compileOf(
        'accelerate/c.sh',
        sh.replace('  --bf16 \\', '  --bf16 \\\n  --torch_compile_mode max-autotune \\'),
      ),
      'cudagraphs',
    );
    assert.equal(await compileOf('accelerate/c.sh', sh), 'off');
  });

  it("axolotl's torch_compile, its mode passed on only with it", async () => {
    const yaml = read('axolotl/full-fsdp2.yaml');
    assert.equal(await compileOf('axolotl/c.yaml', `${yaml}torch_compile: true\n`), 'model+loss');
    assert.equal(
      await compileOf('axolotl/c.yaml', `${yaml}torch_compile: true\ntorch_compile_mode: reduce-overhead\n`),
      'cudagraphs',
    );
    // Without torch_compile the trainer builder passes no mode: nothing is compiled.
    assert.equal(await compileOf('axolotl/c.yaml', `${yaml}torch_compile_mode: reduce-overhead\n`), 'off');
  });
});

describe("torchtune's optimizer_in_bwd", () => {
  it('steps each parameter in backward; with gradient accumulation torchtune refuses it, and a step is counted', async () => {
    const yaml = read('torchtune/8B_full.yaml');
    const on = ok(await configAnalysis('torchtune/o.yaml', `${yaml}\noptimizer_in_bwd: True\n`));
    assert.equal(on.setup.optimizerInBackward, true);
    const step = on.timeline!.events.find((ev) => ev.phase === 'optimizer')!;
    assert.equal(step.live.shardGrads + step.live.optimizer, 0);
    const accum = ok(
      await configAnalysis(
        'torchtune/o.yaml',
        yaml.replace('gradient_accumulation_steps: 1', 'gradient_accumulation_steps: 4') +
          '\noptimizer_in_bwd: True\n',
      ),
    );
    assert.ok(accum.timeline!.notes.some((n) => /does not run with gradient accumulation/.test(n)));
    assert.ok(accum.timeline!.events.find((ev) => ev.phase === 'optimizer')!.live.shardGrads > 0);
  });
});

describe('gradient accumulation from a global batch', () => {
  const estimateJson = async (rel: string, ...args: string[]) => {
    const r = await cli('estimate', path.join(FW, rel), ...args, '--json');
    assert.equal(r.code, 0, r.err);
    return JSON.parse(r.out) as {
      assumptions: { key: string; value: string; source: { detail?: string } }[];
    };
  };
  it("Composer's global_train_batch_size over the GPUs and the micro-batch", async () => {
    // 64 sequences per step / 8 GPUs = 8 per GPU, in micro-batches of 4: 2 micro-batches, each reduce-scattered.
    const j = await estimateJson('llm-foundry/llama3-8b-lora.yaml', '--world-size', '8');
    const a = j.assumptions.find((x) => x.key === 'gradAccum')!;
    assert.equal(a.value, '2');
    assert.match(a.source.detail!, /global batch 64 \/ \(micro-batch 4 x 8 data-parallel GPUs\)/);
    // On 16 GPUs, 4 per GPU: one micro-batch.
    const one = await estimateJson('llm-foundry/llama3-8b-lora.yaml', '--world-size', '16');
    assert.equal(one.assumptions.find((x) => x.key === 'gradAccum')!.value, '1');
    // A gradient accumulation given wins.
    const given = await estimateJson(
      'llm-foundry/llama3-8b-lora.yaml',
      '--world-size',
      '8',
      '--grad-accum',
      '3',
    );
    assert.equal(given.assumptions.find((x) => x.key === 'gradAccum')!.value, '3');
  });
  it("torchtitan's global_batch_size with dp_shard = -1, once the launcher's world is known", async () => {
    const dir = projectDir('fsdp-lens-global-');
    const file = path.join(dir, 'job.toml');
    fs.writeFileSync(
      file,
      read('torchtitan/llama3_8b.toml').replace(
        'local_batch_size = 1',
        'local_batch_size = 1\nglobal_batch_size = 32',
      ),
    );
    const r = await cli('estimate', file, '--world-size', '8', '--json');
    assert.equal(r.code, 0, r.err);
    // 32 / (1 x 8 data-parallel ranks) = 4 micro-batches.
    const j = JSON.parse(r.out) as { assumptions: { key: string; value: string }[] };
    assert.equal(j.assumptions.find((x) => x.key === 'gradAccum')!.value, '4');
  });
});

describe('axolotl configs without FSDP', () => {
  const body = [
    'base_model: meta-llama/Llama-3.2-1B',
    'datasets:',
    '  - path: mhenrichsen/alpaca_2k_test',
    '    type: alpaca',
    'sequence_len: 2048',
    'micro_batch_size: 2',
    'adapter: lora',
    'lora_r: 16',
  ];
  it('are said to be axolotl configs that do not shard, not read as another framework', async () => {
    const a = await configAnalysis('axolotl/lora-1b.yaml', body.join('\n') + '\n');
    assert.equal(a.estimate, undefined);
    assert.equal(a.reading?.kind, 'problem');
    assert.match(JSON.stringify(a.reading), /"framework":"axolotl".*an axolotl config without FSDP/);
  });
  it('with DeepSpeed: the JSON it names is what to estimate', async () => {
    const a = await configAnalysis(
      'axolotl/ds.yaml',
      [...body, 'deepspeed: deepspeed_configs/zero3_bf16.json'].join('\n') + '\n',
    );
    assert.match(
      JSON.stringify(a.reading),
      /trains with DeepSpeed \(deepspeed: deepspeed_configs\/zero3_bf16\.json at ds\.yaml:9\)/,
    );
  });
});

describe('Transformers and TRL argument files', () => {
  const recipe = [
    'model_name_or_path: meta-llama/Llama-3.2-1B',
    'torch_dtype: bfloat16',
    'dataset_name: trl-lib/Capybara',
    'bf16: true',
    'per_device_train_batch_size: 4',
    'gradient_accumulation_steps: 2',
    'gradient_checkpointing: true',
    'max_length: 2048',
    'learning_rate: 2.0e-05',
    'output_dir: out',
  ];
  it('without fsdp: said to take FSDP from the Accelerate config, with the flags that carry what it sets', async () => {
    const a = await configAnalysis(
      'trl/sft.yaml',
      [
        ...recipe,
        'use_peft: true',
        'lora_r: 32',
        'lora_target_modules: all-linear',
        'load_in_4bit: true',
      ].join('\n') + '\n',
    );
    assert.equal(a.estimate, undefined);
    assert.equal(a.reading?.kind, 'problem');
    const text = JSON.stringify(a.reading);
    assert.match(
      text,
      /a TRL argument file \(model meta-llama\/Llama-3\.2-1B, loaded in bfloat16\) that sets no FSDP/,
    );
    assert.match(
      text,
      /--model meta-llama\/Llama-3\.2-1B --batch 4 --seq 2048 --grad-accum 2 --ac full --lora-rank 32 --lora-targets all-linear --base-dtype nf4/,
    );
  });
  it("a trainer's default is not suggested as the file's; launch arguments in the file are named", async () => {
    // SFTConfig defaults gradient_checkpointing to True, but the job may run another TrainingArguments: only what
    // the file writes goes into the suggested flags.
    const plain = await configAnalysis(
      'trl/sft.yaml',
      recipe.filter((l) => !l.startsWith('gradient_checkpointing')).join('\n') + '\n',
    );
    assert.doesNotMatch(JSON.stringify(plain.reading), /--ac/);
    // fms-hf-tuning's job config: the launcher's `accelerate launch` arguments beside the training arguments.
    const job = await configAnalysis(
      'trl/job.json',
      JSON.stringify({
        accelerate_launch_args: { use_fsdp: true, config_file: 'fixtures/fsdp.yaml' },
        model_name_or_path: 'meta-llama/Llama-3.2-1B',
        per_device_train_batch_size: 4,
        output_dir: 'out',
      }),
    );
    assert.equal(job.reading?.kind, 'problem');
    assert.match(
      JSON.stringify(job.reading),
      /whose accelerate_launch_args at job\.json:1 launch it with FSDP and the Accelerate config fixtures\/fsdp\.yaml, which are not read here: estimate that config with --model meta-llama\/Llama-3\.2-1B --batch 4/,
    );
    assert.doesNotMatch(JSON.stringify(job.reading), /sets no FSDP/);
  });

  it("with fsdp: the Trainer's plan, the model from model_name_or_path", async () => {
    const e = ok(
      await configAnalysis(
        'trl/sft_fsdp.yaml',
        [
          ...recipe,
          'fsdp: full_shard auto_wrap',
          'fsdp_config:',
          '  transformer_layer_cls_to_wrap: LlamaDecoderLayer',
          '  version: 2',
        ].join('\n') + '\n',
      ),
    );
    // Llama 3.2 1B: its 16 decoder layers, the final norm with the head (tied to the embedding, so one unit with
    // it: Accelerate's FSDP2 carving), and the root.
    assert.equal(e.units.length, 18);
    assert.equal(e.units.at(-2)!.name, 'model.norm + model.embed_tokens');
    assert.equal(e.setup.microBatch, 4);
    assert.equal(e.setup.checkpointing, 'full');
  });
});

describe('an Accelerate config paired with the argument file its launch passes', () => {
  it('takes the model, batch, sequence, checkpointing and LoRA from the recipe the launch names', async () => {
    const dir = projectDir('fsdp-lens-recipe-');
    writeFiles(dir, {
      'configs/fsdp.yaml': [
        'distributed_type: FSDP',
        'mixed_precision: bf16',
        'num_machines: 1',
        'num_processes: 4',
        'fsdp_config:',
        '  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP',
        '  fsdp_sharding_strategy: FULL_SHARD',
      ],
      'recipes/sft.yaml': [
        'model_name_or_path: meta-llama/Llama-3.2-1B',
        'per_device_train_batch_size: 8',
        'gradient_accumulation_steps: 1',
        'gradient_checkpointing: true',
        'max_length: 1024',
        'learning_rate: 1.0e-04',
        'output_dir: out',
        'use_peft: true',
        'lora_r: 8',
        'lora_target_modules: [q_proj, v_proj]',
      ],
      'train.sh': [
        'accelerate launch --config_file configs/fsdp.yaml sft.py \\',
        '  --config recipes/sft.yaml',
      ],
      'sft.py': ['from trl import SFTTrainer, TrlParser'],
    });
    const r = await cli('estimate', path.join(dir, 'configs/fsdp.yaml'), '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as {
      model: { id?: string };
      assumptions: { key: string; value: string; source: { detail?: string } }[];
      plan: { notes: string[] };
      units: unknown[];
    };
    assert.equal(j.model.id, 'meta-llama/Llama-3.2-1B');
    const a = (k: string) => j.assumptions.find((x) => x.key === k)!;
    assert.equal(a('microBatch').value, '8');
    assert.equal(a('seqLen').value, '1024');
    assert.equal(a('checkpointing').value, 'full');
    assert.match(a('microBatch').source.detail!, /^sft\.yaml:2$/);
    assert.ok(j.plan.notes.some((n) => /launched by train\.sh:1 with sft\.yaml/.test(n)));
    // Through the Trainer a LoRA model takes PEFT's policy: 16 blocks, 2 x 16 x 2 LoRA matrices, the root.
    assert.equal(j.units.length, 16 + 64 + 1);
  });

  it("or the script's own flags on the launch line, as HfArgumentParser reads them", async () => {
    const dir = projectDir('fsdp-lens-launch-flags-');
    writeFiles(dir, {
      'fsdp.yaml': ['distributed_type: FSDP', 'num_processes: 8', 'fsdp_config:', '  fsdp_version: 2'],
      'run.sh': [
        'accelerate launch --config_file fsdp.yaml train.py \\',
        '  --model_name_or_path Qwen/Qwen2.5-7B --per_device_train_batch_size 2 \\',
        '  --gradient_checkpointing --max_length 4096',
      ],
      'train.py': ['from trl import SFTTrainer'],
    });
    const r = await cli('estimate', path.join(dir, 'fsdp.yaml'), '--json');
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out) as {
      model: { id?: string };
      assumptions: { key: string; value: string; source: { detail?: string } }[];
      plan: { notes: string[] };
    };
    assert.equal(j.model.id, 'Qwen/Qwen2.5-7B');
    const a = (k: string) => j.assumptions.find((x) => x.key === k)!;
    assert.equal(a('microBatch').value, '2');
    assert.equal(a('seqLen').value, '4096');
    assert.equal(a('checkpointing').value, 'full');
    assert.ok(j.plan.notes.some((n) => /launched by run\.sh:1, whose flags to the script are read/.test(n)));
  });

  it("a script's own adapter flags: the launch file estimated through its config, the kind of job undecided", async () => {
    // PEFT's SFT example pattern: train.py builds the model in a helper from its own dataclass
    // (`--use_peft_lora`, `--use_4bit_quantization`), which TrainingArguments does not have.
    const dir = projectDir('fsdp-lens-own-flags-');
    const run = (useLora: string) => [
      'accelerate launch --config_file configs/fsdp.yaml train.py \\',
      '  --model_name_or_path meta-llama/Llama-3.1-8B --per_device_train_batch_size 2 \\',
      `  --gradient_checkpointing True --use_peft_lora ${useLora} --lora_r 8 --lora_target_modules all-linear`,
    ];
    writeFiles(dir, {
      'configs/fsdp.yaml': [
        'distributed_type: FSDP',
        'num_processes: 8',
        'fsdp_config:',
        '  fsdp_version: 2',
      ],
      'run_lora.sh': run('True'),
      'run_full.sh': run('False'),
      'train.py': [
        'from transformers import HfArgumentParser, Trainer, TrainingArguments',
        'from utils import create_and_prepare_model',
        'model = create_and_prepare_model(parser_args)',
        'Trainer(model=model, args=training_args).train()',
      ],
    });
    const lora = await cli('estimate', path.join(dir, 'run_lora.sh'), '--json');
    assert.equal(lora.code, 0, lora.err);
    const j = JSON.parse(lora.out) as {
      model: { id?: string };
      undecided: string[];
      targetFit: { verdict: string };
      notes: string[];
    };
    assert.equal(j.model.id, 'meta-llama/Llama-3.1-8B');
    assert.equal(j.targetFit.verdict, 'undecided');
    assert.match(j.undecided[0]!, /its own flags --use_peft_lora True \(at run_lora\.sh:1\) are not read/);
    assert.ok(
      j.notes.some((n) => /launched at line 1 with the Accelerate config configs\/fsdp\.yaml/.test(n)),
    );
    // The switch written off: a full fine-tune, decided; this launch file's own command, not the other's.
    const full = JSON.parse((await cli('estimate', path.join(dir, 'run_full.sh'), '--json')).out) as {
      undecided: string[];
      targetFit: { verdict: string };
    };
    assert.deepEqual(full.undecided, []);
    assert.notEqual(full.targetFit.verdict, 'undecided');
  });
});

describe("the frameworks' defaults", () => {
  it('docs/defaults.md is generated from the table (run `npm run docs:defaults` after changing it)', () => {
    const doc = fs.readFileSync(path.join(FIXTURES, '..', '..', 'docs', 'defaults.md'), 'utf8');
    assert.equal(doc, renderDefaultsDoc());
  });

  it('the readers apply the table: an Accelerate config without fsdp_version or a wrap policy', async () => {
    const e = ok(
      await configAnalysis(
        'accelerate/bare.yaml',
        '# fsdp: model=meta-llama/Llama-3.2-1B\ndistributed_type: FSDP\nnum_processes: 2\nfsdp_config: {}\n',
      ),
    );
    // fsdp_version 1 and NO_WRAP: one FSDP1 unit, and no mixed precision ("no").
    assert.equal(DEFAULTS.Accelerate.fsdpVersion.value, 1);
    assert.equal(e.plan.api, 'fsdp1');
    assert.equal(e.units.length, 1);
    assert.equal(e.comms.gatherDtype, 'float32');
  });

  it('`fsdp-lens defaults FRAMEWORK` lists one framework; an unknown one is a usage error', async () => {
    const r = await cli('defaults', 'verl');
    assert.equal(r.code, 0);
    assert.match(r.out, /^verl\n {2}sizes {9}trainer\.n_gpus_per_node = 8/);
    assert.equal((await cli('defaults', 'nemo')).code, 2);
  });
});
