// FSDP1 auto-wrap policies written as code: `_or_policy` of a lambda test and a class policy, tests written as
// lambdas and as functions, helpers of other files that build the policy, and tests the analysis cannot decide.
import * as assert from 'node:assert/strict';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { cli, projectDir, writeFiles } from './helpers';

interface Json {
  plan: { units: number; notes: string[] };
  units: { classNames: string[]; params: number; trainableParams: number }[];
}

async function estimate(files: Record<string, string[]>, ...args: string[]): Promise<Json> {
  const dir = projectDir('fsdp-lens-policies-');
  writeFiles(dir, files);
  const r = await cli('estimate', path.join(dir, 'train.py'), '--json', ...args);
  assert.equal(r.code, 0, r.err);
  return JSON.parse(r.out) as Json;
}

const HEAD = [
  'import functools',
  'import torch',
  'from peft import LoraConfig, get_peft_model',
  'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP',
  'from transformers import AutoModelForCausalLM',
  'from transformers.models.llama.modeling_llama import LlamaDecoderLayer',
  'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf", torch_dtype=torch.bfloat16)',
];
const LORA = ['model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))'];

// The helper llama-recipes writes (and PEFT's fsdp_auto_wrap_policy): `_or_policy` of a lambda policy that wraps
// each leaf module whose weight requires grad, and the transformer policy of the decoder layer.
const HELPER = [
  'def fsdp_auto_wrap_policy(model, transformer_layer_names):',
  '    from torch.distributed.fsdp.wrap import _or_policy, lambda_auto_wrap_policy, transformer_auto_wrap_policy',
  '',
  '    def lambda_policy_fn(module):',
  '        if (',
  '            len(list(module.named_children())) == 0',
  '            and getattr(module, "weight", None) is not None',
  '            and module.weight.requires_grad',
  '        ):',
  '            return True',
  '        return False',
  '',
  '    lambda_policy = functools.partial(lambda_auto_wrap_policy, lambda_fn=lambda_policy_fn)',
  '    transformer_wrap_policy = functools.partial(',
  '        transformer_auto_wrap_policy, transformer_layer_cls=set(transformer_layer_names)',
  '    )',
  '    return functools.partial(_or_policy, policies=[lambda_policy, transformer_wrap_policy])',
];

// Llama 2 7B: 32 decoder layers, hidden size 4096. Rank-8 LoRA on q_proj and v_proj adds lora_A (8 x 4096) and
// lora_B (4096 x 8) to each: 4 leaf Linear modules per layer, 32,768 parameters each, 4,194,304 in all (the count
// PEFT's print_trainable_parameters reports for this configuration).
const LAYERS = 32;
const LORA_LEAF = 8 * 4096;

describe('FSDP1 wrap policies written as code', () => {
  it("reads a helper of another file that builds an _or_policy, and evaluates its lambda's test per module", async () => {
    const j = await estimate({
      'utils/__init__.py': ['from utils.fsdp_utils import *'],
      'utils/fsdp_utils.py': ['import functools', ...HELPER],
      'train.py': [
        ...HEAD,
        'from utils import fsdp_auto_wrap_policy',
        ...LORA,
        'policy = fsdp_auto_wrap_policy(model, [LlamaDecoderLayer])',
        'model = FSDP(model, auto_wrap_policy=policy, use_orig_params=True)',
      ],
    });
    // torch/distributed/fsdp/wrap.py: `_or_policy` wraps where any policy does; `lambda_auto_wrap_policy` wraps
    // where `lambda_fn(module)` holds; `_recursive_wrap` wraps children before their parent. So each LoRA matrix,
    // then each decoder layer (holding the frozen base), then the root.
    assert.equal(j.plan.units, LAYERS * 4 + LAYERS + 1);
    const lora = j.units.filter((u) => u.trainableParams > 0);
    assert.equal(lora.length, LAYERS * 4);
    assert.ok(lora.every((u) => u.params === LORA_LEAF && u.trainableParams === LORA_LEAF));
    assert.equal(
      lora.reduce((s, u) => s + u.params, 0),
      4_194_304,
    );
    assert.doesNotMatch(j.plan.notes.join('\n'), /not read statically|not evaluated|assumed to wrap/);
  });

  it('reads a policy unpacked from a helper that returns a tuple, through a package star import', async () => {
    const j = await estimate({
      'policies/__init__.py': ['from policies.wrapping import *'],
      'policies/wrapping.py': [
        'import functools',
        'from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy',
        'from transformers.models.llama.modeling_llama import LlamaDecoderLayer',
        'def get_llama_wrapper():',
        '    return functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={LlamaDecoderLayer})',
      ],
      'utils.py': [
        'from policies import get_llama_wrapper',
        'def get_policies(cfg, rank):',
        '    """Mixed precision and wrapping."""',
        '    mixed = None',
        '    if rank == 0:',
        '        print("policies")',
        '    wrapping = get_llama_wrapper()',
        '    return mixed, wrapping',
      ],
      'train.py': [
        ...HEAD,
        'from utils import get_policies',
        'mixed_precision_policy, wrapping_policy = get_policies(None, 0)',
        'model = FSDP(model, auto_wrap_policy=wrapping_policy)',
      ],
    });
    assert.equal(j.plan.units, LAYERS + 1);
    assert.deepEqual(j.units[0]!.classNames, ['LlamaDecoderLayer']);
    assert.doesNotMatch(j.plan.notes.join('\n'), /not read statically|assumed to wrap/);
  });

  it('evaluates a test written as a function with early returns, and CustomPolicy lambdas', async () => {
    const byFunction = await estimate({
      'train.py': [
        ...HEAD,
        'from torch.distributed.fsdp.wrap import lambda_auto_wrap_policy',
        'def is_block(m):',
        '    """Decoder layers only."""',
        '    if isinstance(m, LlamaDecoderLayer):',
        '        return True',
        '    return False',
        'model = FSDP(model, auto_wrap_policy=functools.partial(lambda_auto_wrap_policy, lambda_fn=is_block))',
      ],
    });
    assert.equal(byFunction.plan.units, LAYERS + 1);
    assert.doesNotMatch(byFunction.plan.notes.join('\n'), /assumed to wrap|read as wrapping/);
    const custom = await estimate({
      'train.py': [
        ...HEAD,
        'from torch.distributed.fsdp.wrap import CustomPolicy',
        'model = FSDP(model, auto_wrap_policy=CustomPolicy(lambda m: type(m).__name__ == "LlamaDecoderLayer"))',
      ],
    });
    assert.equal(custom.plan.units, LAYERS + 1);
    assert.doesNotMatch(custom.plan.notes.join('\n'), /assumed to wrap|read as wrapping/);
  });

  it('says so, and assumes the block class, where the test is not one it reads or not decided', async () => {
    const unread = await estimate({
      'train.py': [
        ...HEAD,
        'from torch.distributed.fsdp.wrap import lambda_auto_wrap_policy',
        'p = functools.partial(lambda_auto_wrap_policy, lambda_fn=lambda m: m.numel_hint > 3)',
        'model = FSDP(model, auto_wrap_policy=p)',
      ],
    });
    assert.match(unread.plan.notes.join('\n'), /m\.numel_hint > 3 is not a test the analysis reads/);
    assert.match(unread.plan.notes.join('\n'), /assumed to wrap each LlamaDecoderLayer/);
    // `m.weight.requires_grad` of a module without a weight raises in Python: unguarded, it is not decided.
    const unguarded = await estimate({
      'train.py': [
        ...HEAD,
        'from torch.distributed.fsdp.wrap import lambda_auto_wrap_policy',
        'p = functools.partial(lambda_auto_wrap_policy, lambda_fn=lambda m: m.weight.requires_grad)',
        'model = FSDP(model, auto_wrap_policy=p)',
      ],
    });
    assert.match(unguarded.plan.notes.join('\n'), /test is not decided for the root \(LlamaForCausalLM\)/);
    // A test defined under a condition the analysis does not know.
    const conditional = await estimate({
      'train.py': [
        ...HEAD,
        'import sys',
        'from torch.distributed.fsdp.wrap import lambda_auto_wrap_policy',
        'if len(sys.argv) > 2:',
        '    def fn(m):',
        '        return isinstance(m, torch.nn.Linear)',
        'else:',
        '    def fn(m):',
        '        return isinstance(m, LlamaDecoderLayer)',
        'model = FSDP(model, auto_wrap_policy=functools.partial(lambda_auto_wrap_policy, lambda_fn=fn))',
      ],
    });
    assert.match(conditional.plan.notes.join('\n'), /assumed to wrap each LlamaDecoderLayer/);
  });

  it('says when a requires_grad test meets a model with nothing frozen', async () => {
    const j = await estimate({
      'train.py': [
        ...HEAD,
        ...HELPER,
        'model = FSDP(model, auto_wrap_policy=fsdp_auto_wrap_policy(model, [LlamaDecoderLayer]))',
      ],
    });
    // Every leaf with a weight: 7 Linear and 2 RMSNorm per layer, the embedding, the final norm and the head.
    assert.equal(j.plan.units, LAYERS * 9 + 3 + LAYERS + 1);
    assert.match(j.plan.notes.join('\n'), /reads requires_grad, and no parameter of this model is frozen/);
  });
});
