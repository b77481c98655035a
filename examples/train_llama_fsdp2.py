"""Fine-tune Llama 3.1 8B with FSDP2 (fully_shard) on one node of 8 GPUs.

Launch: torchrun --nproc_per_node 8 train_llama_fsdp2.py
"""
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from transformers import AutoModelForCausalLM

MODEL_ID = "meta-llama/Llama-3.1-8B"
BATCH_SIZE = 1
SEQ_LEN = 4096


def build_model():
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_pretrained(MODEL_ID)
    return model


def shard_model(model, mesh):
    mp_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp_policy)
    fully_shard(model, mesh=mesh, mp_policy=mp_policy)
    return model


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    mesh = init_device_mesh("cuda", (dist.get_world_size(),), mesh_dim_names=("dp",))
    model = shard_model(build_model(), mesh)
    model.to_empty(device="cuda")
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.0)

    for step in range(100):
        input_ids = torch.randint(0, 128256, (BATCH_SIZE, SEQ_LEN), device="cuda")
        loss = model(input_ids=input_ids, labels=input_ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


if __name__ == "__main__":
    main()
