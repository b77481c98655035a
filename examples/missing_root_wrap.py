"""A common mistake: every block is wrapped, the model itself is not (see rule FSDP001)."""
import torch
from torch.distributed.fsdp import fully_shard
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-7B")
for block in model.model.layers:
    fully_shard(block)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
