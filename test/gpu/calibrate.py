"""Measures real per-rank FSDP peaks on one GPU, as rank 0 of a larger world, for docs/calibration.md.

Run on a machine with one CUDA GPU and PyTorch 2.6 or later (with Transformers for the model classes):

    python3 test/gpu/calibrate.py --out calibration-results.json

Each case runs in its own subprocess (a case that fails or runs out of memory does not stop the others) and its
result is written to the output file as soon as it ends. Rank 0 of a world of W runs on the fake process group
(`torch.testing._internal.distributed.fake_pg`): FSDP allocates its all-gather outputs, unsharded parameters,
reduce-scatter buffers and gradients for real, and only the data movement is skipped, so the figures are rank 0's
memory, with no NCCL buffers and no overlap. Outputs are garbage, which does not change memory for dense models.

The model is built on the meta device from its config, wrapped, then `to_empty` allocates only this rank's shards.
Steps 1 to WARMUP create the optimizer state; the peak statistics are reset after them and read over the next
steps. Recorded per case: `max_memory_allocated`, `memory_stats()["reserved_bytes.all.peak"]`, the memory after
the step (the persistent state), FSDPMemTracker's categories where it runs, and the settings, which
test/gpu/cases.json repeats as `fsdp-lens estimate` flags for the comparison.
"""

import argparse
import json
import os
import subprocess
import sys
import time
import traceback

WARMUP = 2
MEASURED = 2

# Llama 3.1 8B and Qwen2.5 7B, as their Hugging Face configs give them (no download on the GPU machine).
LLAMA_8B = dict(
    model_type="llama",
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    vocab_size=128256,
    rms_norm_eps=1e-5,
    rope_theta=500000.0,
    max_position_embeddings=131072,
    tie_word_embeddings=False,
)
QWEN_7B = dict(
    model_type="qwen2",
    hidden_size=3584,
    intermediate_size=18944,
    num_hidden_layers=28,
    num_attention_heads=28,
    num_key_value_heads=4,
    vocab_size=152064,
    rms_norm_eps=1e-6,
    rope_theta=1000000.0,
    max_position_embeddings=32768,
    tie_word_embeddings=False,
)


def case_file():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "cases.json")) as f:
        return json.load(f)["cases"]


def build(cfg):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(**cfg)
    config._attn_implementation = "sdpa"
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    return model


def add_lora(model, rank, targets):
    """LoRA written by hand (PEFT may be missing): frozen base, trainable A (rank x in) and B (out x rank)."""
    import torch
    import torch.nn as nn

    class LoraLinear(nn.Module):
        def __init__(self, base):
            super().__init__()
            self.base = base
            self.lora_A = nn.Linear(base.in_features, rank, bias=False, device="meta")
            self.lora_B = nn.Linear(rank, base.out_features, bias=False, device="meta")

        def forward(self, x):
            return self.base(x) + self.lora_B(self.lora_A(x))

    for p in model.parameters():
        p.requires_grad_(False)
    for name, module in list(model.named_modules()):
        for t in targets:
            child = getattr(module, t, None)
            if isinstance(child, nn.Linear):
                setattr(module, t, LoraLinear(child))
    for n, p in model.named_parameters():
        if "lora_" in n:
            p.requires_grad_(True)
    return model


def run_case(case):
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    torch.cuda.set_device(0)
    W = case["worldSize"]
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=W)
    cfg = {"llama-3.1-8b": LLAMA_8B, "qwen2.5-7b": QWEN_7B}[case["model"]]
    model = build(cfg)
    if case.get("lora"):
        model = add_lora(model, case["lora"]["rank"], case["lora"]["targets"])
    if case.get("checkpointing") == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    layers = model.model.layers
    bf16 = torch.bfloat16
    reduce = torch.float32 if case.get("reduceDtype") == "float32" else bf16

    if case["api"] == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        mesh = init_device_mesh("cuda", (W,))
        mp = MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=reduce)
        for layer in layers:
            fully_shard(layer, mesh=mesh, mp_policy=mp)
        fully_shard(model, mesh=mesh, mp_policy=mp)
        model.to_empty(device="cuda")
    else:
        import functools

        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp import MixedPrecision, ShardingStrategy
        from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

        block = type(layers[0])
        model = FSDP(
            model,
            auto_wrap_policy=functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={block}),
            sharding_strategy=ShardingStrategy.FULL_SHARD,
            mixed_precision=MixedPrecision(param_dtype=bf16, reduce_dtype=reduce, buffer_dtype=bf16),
            device_id=torch.cuda.current_device(),
            param_init_fn=lambda m: m.to_empty(device=torch.device("cuda"), recurse=False),
            use_orig_params=bool(case.get("lora")),
        )
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02)
    # Rotary inv_freq buffers were on meta: rebuild them on the GPU.
    for m in model.modules():
        if hasattr(m, "inv_freq") and getattr(m, "inv_freq").is_meta:
            m.register_buffer(
                "inv_freq",
                torch.empty(m.inv_freq.shape, device="cuda").uniform_(0, 1),
                persistent=False,
            )

    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=1e-5, foreach=True)
    b, s = case["microBatch"], case["seqLen"]
    vocab = cfg["vocab_size"]
    ids = torch.randint(0, vocab, (b, s), device="cuda")

    def step():
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(WARMUP):
        step()
    torch.cuda.synchronize()
    after_warmup = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.time()
    for _ in range(MEASURED):
        step()
    torch.cuda.synchronize()
    stats = torch.cuda.memory_stats()
    result = {
        "allocatedPeakBytes": torch.cuda.max_memory_allocated(),
        "reservedPeakBytes": stats.get("reserved_bytes.all.peak"),
        "allocatedBetweenStepsBytes": after_warmup,
        "secondsPerStep": (time.time() - t0) / MEASURED,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0),
    }
    # FSDP2's own tracker, where it runs: its categories at the peak.
    if case["api"] == "fsdp2" and case.get("tracker", True):
        try:
            from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker

            tracker = FSDPMemTracker(model, opt)
            tracker.track_inputs((ids,))
            with tracker:
                step()
            snap = tracker.get_tracker_snapshot("peak")
            dev = next(iter(snap.values())) if snap else {}
            result["tracker"] = {str(k): int(v) for k, v in dev.items()}
        except Exception as e:  # the tracker is private API: record why it did not run
            result["trackerError"] = f"{type(e).__name__}: {e}"
    if case.get("snapshot"):
        try:
            torch.cuda.memory._record_memory_history(max_entries=200000)
            step()
            torch.cuda.memory._dump_snapshot(case["snapshot"])
            torch.cuda.memory._record_memory_history(enabled=None)
            result["snapshot"] = case["snapshot"]
        except Exception as e:
            result["snapshotError"] = f"{type(e).__name__}: {e}"
    dist.destroy_process_group()
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="calibration-results.json")
    ap.add_argument("--case", help="run one case in this process (used by the driver)")
    ap.add_argument("--timeout", type=int, default=150, help="seconds per case")
    args = ap.parse_args()
    cases = case_file()
    if args.case:
        case = next(c for c in cases if c["id"] == args.case)
        try:
            print(json.dumps({"ok": True, **run_case(case)}))
        except Exception as e:
            print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-2000:]}))
        return
    results = {}
    for case in cases:
        t0 = time.time()
        try:
            p = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--case", case["id"]],
                capture_output=True,
                text=True,
                timeout=args.timeout,
            )
            line = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
            r = json.loads(line) if line.startswith("{") else {"ok": False, "error": p.stderr[-2000:]}
        except subprocess.TimeoutExpired:
            r = {"ok": False, "error": f"timed out after {args.timeout} s"}
        r["wallSeconds"] = round(time.time() - t0, 1)
        results[case["id"]] = {"case": case, "result": r}
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)
        print(case["id"], "ok" if r.get("ok") else "FAILED", r.get("allocatedPeakBytes") or r.get("error", "")[-300:], flush=True)


if __name__ == "__main__":
    main()
