// Generated Python sources for the benchmarks and the robustness tests.

/** A training script of about `lines` lines: helpers, a model class, config plumbing, and the FSDP wrap at the end. */
export function generatedScript(lines: number): string {
  const head = [
    'import math',
    'import os',
    'import torch',
    'import torch.nn as nn',
    'from dataclasses import dataclass',
    'from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard',
    'from torch.distributed.device_mesh import init_device_mesh',
    'from transformers import AutoModelForCausalLM',
    '',
  ];
  const chunk = (i: number) => [
    `def helper_${i}(batch, scale=${i % 7}):`,
    `    """Step ${i} of the data pipeline."""`,
    `    total = 0`,
    `    for j, x in enumerate(batch):`,
    `        if j % ${(i % 5) + 2} == 0 and x is not None:`,
    `            total += math.sqrt(abs(x) * scale) / (j + 1)`,
    `        else:`,
    `            total -= x * ${i} // 3`,
    `    config = {"lr": 3e-4 * ${i}, "warmup": ${i * 10}, "name": "run-${i}"}`,
    `    return total, config`,
    '',
    `class Block${i}(nn.Module):`,
    `    def __init__(self, dim=${64 + (i % 8) * 32}):`,
    `        super().__init__()`,
    `        self.proj = nn.Linear(dim, dim * 4)`,
    `        self.out = nn.Linear(dim * 4, dim)`,
    `        self.norm = nn.LayerNorm(dim)`,
    '',
    `    def forward(self, x):`,
    `        return x + self.out(torch.relu(self.proj(self.norm(x))))`,
    '',
  ];
  const tail = [
    'def main():',
    '    mesh = init_device_mesh("cuda", (int(os.environ.get("WORLD_SIZE", 8)),))',
    '    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")',
    '    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)',
    '    for layer in model.model.layers:',
    '        fully_shard(layer, mesh=mesh, mp_policy=mp)',
    '    fully_shard(model, mesh=mesh, mp_policy=mp)',
    '    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)',
    '',
    'if __name__ == "__main__":',
    '    main()',
    '',
  ];
  const out = [...head];
  for (let i = 0; out.length + tail.length < lines; i++) out.push(...chunk(i));
  return [...out, ...tail].join('\n');
}
