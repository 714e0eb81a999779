#!/usr/bin/env python3
"""Odd custom shapes through the benchmark job on a cuda worker (lmperfd run): d_head 80 (d 160, 2 heads), 25
heads of 64 (d 1600), d_head 6 and 2, d_ff 257, 3 and 1, V 10007, batch 3, T 1 / 100 / 257; every precision with
attention naive and naive_fused, flash where the head dimension allows, forward_backward, and the optimizer in
backward with CUDA graphs. Every run must succeed with a finite loss and its memory estimate equal to the
allocator's peak. Prints one line per job and each failure; exit 1 on any.
usage: edge_shapes.py LMPERFD OUTDIR   (run_all.sh runs it with DAEMON=1)"""
import json, math, os, subprocess, sys
lm, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
M = [{"name": "dh80", "d_model": 160, "d_ff": 432, "num_layers": 2, "num_heads": 2},
     {"name": "h25", "d_model": 1600, "d_ff": 6400, "num_layers": 2, "num_heads": 25},
     {"name": "dh6", "d_model": 96, "d_ff": 257, "num_layers": 2, "num_heads": 16},
     {"name": "dh2", "d_model": 50, "d_ff": 3, "num_layers": 1, "num_heads": 25},
     {"name": "ff1", "d_model": 64, "d_ff": 1, "num_layers": 2, "num_heads": 4}]
jobs = {
    "naive": dict(model=M, attention="naive", precision=["fp32", "tf32", "bf16", "fp16"]),
    "naive_fused": dict(model=M, attention="naive_fused", precision=["fp32", "tf32", "bf16", "fp16"]),
    "flash": dict(model=M[:2] + M[4:], attention="flash", precision=["fp32", "tf32", "bf16", "fp16"]),
    "fb": dict(model=M, attention="naive", precision=["tf32", "bf16"], mode="forward_backward"),
    "oib_graphs": dict(model=M, attention="naive_fused", precision=["fp32", "tf32", "bf16"], optimizer_in_backward=True,
                       graphs=True),
}
bad = 0
for name, extra in jobs.items():
    extra = dict(extra)
    spec = dict(kind="benchmark", context_length=[1, 100, 257], batch_size=3, vocab_size=10007,
                mode=extra.pop("mode", "train_step"), warmup_steps=1, measure_steps=2, **extra)
    p = os.path.join(out, f"spec_{name}.json"); json.dump(spec, open(p, "w"))
    r = subprocess.run(["timeout", "240", lm, "run", p], capture_output=True, text=True)
    open(os.path.join(out, f"out_{name}.json"), "w").write(r.stdout)
    try:
        runs = json.loads(r.stdout).get("runs") or []
    except ValueError:
        runs = []
    ok = [x for x in runs if x.get("status") == "succeeded" and math.isfinite(x.get("final_loss") or float("nan"))
          and x.get("estimated_memory_bytes") == x.get("peak_memory_bytes")]
    print(f"{name}: rc {r.returncode}, {len(runs)} runs, {len(ok)} succeeded with a finite loss and estimate = peak")
    for x in runs:
        if x not in ok:
            bad += 1
            print("  FAIL", x.get("model"), x.get("context_length"), x.get("precision"), x.get("error"), x.get("final_loss"),
                  "estimate", x.get("estimated_memory_bytes"), "peak", x.get("peak_memory_bytes"))
    if r.returncode != 0 or not runs:
        bad += 1
        print("  stderr:", r.stderr[-500:])
print("edge shapes:", "all passed" if bad == 0 else f"{bad} failures")
sys.exit(1 if bad else 0)
