"""ab_table.py on synthetic logs (no GPU): two builds' `test_flash bench` lines
(two rounds each, one with rc 1) beside an ffwd_sdpa.py line and a torch_attn.py
line (causal only, bf16 name, heads 0); the best figures, the ratios, "rc!", and
a missing SDPA log. Exit 0 when every check passes, 1 otherwise."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def bench(build, dt, b, h, t, d, causal, fwd, bwd, rc=0):
    return build + " " + json.dumps(dict(impl="flash", dtype=dt, batch=b, heads=h, seq=t, d=d, causal=causal, rc=rc,
                                          fwd_ms=fwd, bwd_ms=bwd, fwd_bwd_ms=fwd + bwd)) + "\n"


def table(ab, sdpa):
    with tempfile.TemporaryDirectory() as tmp:
        pa = os.path.join(tmp, "ab.log")
        with open(pa, "w") as f:
            f.write(ab)
        args = [sys.executable, os.path.join(HERE, "ab_table.py"), pa]
        if sdpa is not None:
            ps = os.path.join(tmp, "sdpa.log")
            with open(ps, "w") as f:
                f.write(sdpa)
            args.append(ps)
        run = subprocess.run(args, capture_output=True, text=True, timeout=60)
        return run.returncode, run.stdout


fails = 0


def check(ok, what):
    global fails
    print(("ok   " if ok else "FAIL ") + what)
    fails += not ok


ab = (bench("def", "bf16", 1, 16, 16384, 64, 1, 1.30, 3.60) + bench("new", "bf16", 1, 16, 16384, 64, 1, 1.20, 2.60)
      + bench("def", "bf16", 1, 16, 16384, 64, 1, 1.32, 3.55) + bench("new", "bf16", 1, 16, 16384, 64, 1, 1.19, 2.70, 1)
      + "not json\n" + bench("def", "fp16", 8, 1, 4096, 80, 0, 0.10, 0.40))
sdpa = (json.dumps(dict(impl="sdpa", dtype="bf16", batch=1, heads=16, seq=16384, d=64, causal=1, fwd_ms=1.25,
                        bwd_ms=3.15, fwd_bwd_ms=4.40)) + "\n"
        + json.dumps(dict(impl="sdpa", dtype="fp16", batch=8, heads=0, seq=4096, d=80, fwd_ms=0.2, bwd_ms=0.4,
                          fwd_bwd_ms=0.6)) + "\n")
rc, out = table(ab, sdpa)
rows = [line for line in out.splitlines() if line.startswith("| bfloat16") or line.startswith("| float16")]
check(rc == 0 and len(rows) == 2, f"two points (rc {rc}, {len(rows)} rows)")
lb = next((r for r in rows if r.startswith("| bfloat16 1 16 16384 64 1 ")), "")
check("def: 1.300, 1.320 / 3.550 / 4.870" in lb, "def: both rounds' forward, best bwd and fwd+bwd")
check("new: 1.200, 1.190 / 2.600 / 3.800 rc!" in lb, "new: a round with rc 1 marked")
check("| 1.250 / 3.150 / 4.400 |" in lb, "SDPA's figures matched by point")
check("def 1.04, new 0.95" in lb and "def 1.11, new 0.86" in lb, "best fwd and fwd+bwd over SDPA's")
nc = next((r for r in rows if r.startswith("| float16 8 1 4096 80 0 ")), "")
check(nc.endswith("| - | def - | def - |"), "torch_attn.py's line (causal only) does not match a non-causal point")
rc, out = table(ab, None)
check(rc == 0 and out.count("| - |") == 2, "no SDPA log: the builds' figures, no ratios")
sys.exit(1 if fails else 0)
