# The plan test/gpu/calibrate.py measures under FSDP2: one unit per decoder layer, then the root.
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def shard(model, mesh):
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16)
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
