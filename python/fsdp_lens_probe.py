"""fsdp-lens probe: each rank's allocated and reserved peaks by phase of a training step, for `fsdp-lens calibrate`.

    from fsdp_lens_probe import Probe
    probe = Probe("run.json")                # one file per rank: run.rank0.json, run.rank1.json, ...
    with probe.phase("forward"):
        loss = model(**batch).loss
    with probe.phase("backward"):
        loss.backward()
    with probe.phase("optimizer"):
        optimizer.step()
        optimizer.zero_grad()
    probe.save(micro_batch=4, seq_len=4096)  # the run's settings, as you know them

Each phase resets CUDA's peak statistics when it starts and reads them when it ends: the bytes
`torch.cuda.max_memory_allocated()` and `memory_stats()["reserved_bytes.all.peak"]` report for that phase alone.
A phase entered again keeps the highest of its peaks. Without a CUDA device the peaks are null, and the file says so.

At each phase's end it also reads the device memory in use outside PyTorch's caching allocator:
`torch.cuda.mem_get_info()`'s total less free, less `torch.cuda.memory_reserved()`. That is the CUDA context, NCCL's
buffers and anything else on the GPU (another process too): `fsdp-lens calibrate --save` keeps it as the cluster's
context reserve.
"""

import json
import os
from contextlib import contextmanager

import torch

VERSION = 1


class Probe:
    def __init__(self, path="fsdp_lens_run.json"):
        self.path = path
        self.phases = {}
        self.cuda = torch.cuda.is_available()
        self.outside = None

    @contextmanager
    def phase(self, name):
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        try:
            yield
        finally:
            if self.cuda:
                torch.cuda.synchronize()
                allocated = torch.cuda.max_memory_allocated()
                reserved = torch.cuda.memory_stats().get("reserved_bytes.all.peak", 0)
                free, total = torch.cuda.mem_get_info()
                outside = (total - free) - torch.cuda.memory_reserved()
                self.outside = max(self.outside or 0, outside)
            else:
                allocated = reserved = None
            seen = self.phases.get(name)
            if seen and seen["allocated"] is not None and allocated is not None:
                allocated = max(allocated, seen["allocated"])
                reserved = max(reserved, seen["reserved"])
            self.phases[name] = {"allocated": allocated, "reserved": reserved}

    def save(self, **settings):
        rank = int(os.environ.get("RANK", "0"))
        world = int(os.environ.get("WORLD_SIZE", "1"))
        root, ext = os.path.splitext(self.path)
        path = f"{root}.rank{rank}{ext or '.json'}" if world > 1 else self.path
        record = {
            "fsdpLensProbe": VERSION,
            "rank": rank,
            "worldSize": world,
            "device": torch.cuda.get_device_name() if self.cuda else None,
            "torch": torch.__version__,
            "phases": self.phases,
            "settings": settings,
        }
        if self.outside is not None:
            record["outsideAllocatorBytes"] = self.outside
        if not self.cuda:
            record["note"] = "no CUDA device: no peaks were measured"
        with open(path, "w") as f:
            json.dump(record, f, indent=2)
        return path
