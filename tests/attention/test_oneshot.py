"""The attention job one-shot on the CPU (`lmperfd run SPEC --cpu-only`): a tiny
sweep succeeds with naive rows measured by the CPU reference and flash rows
failed ("flash needs a GPU"); the deterministic option is accepted; bad specs
fail naming the field."""
import json, subprocess, sys

lmperfd = sys.argv[1]
fails = 0

def run(spec):
    p = subprocess.run([lmperfd, "run", "-", "--cpu-only"], input=json.dumps(spec),
                       capture_output=True, text=True, timeout=120)
    try:
        return p.returncode, json.loads(p.stdout)
    except ValueError:
        return p.returncode, {"raw": p.stdout + p.stderr}

def expect(cond, what):
    global fails
    if not cond:
        fails += 1
        print("FAIL", what)

rc, out = run({"kind": "attention", "impl": "both", "batch": 2, "heads": 2, "seq_len": [37, 64],
               "d_head": [16, 80], "causal": True, "passes": 3, "warmup": 1})
expect(rc == 0 and out.get("status") == "succeeded", f"tiny job succeeds: rc {rc} {str(out)[:300]}")
runs = out.get("runs", [])
expect(len(runs) == 8, f"8 runs, got {len(runs)}")
for r in runs:
    if r["impl"] == "naive":
        expect(r["status"] == "succeeded" and not r["oom"], f"naive run ok: {r}")
        expect(r["fwd_ms"] > 0 and r["bwd_ms"] > 0 and r["fwd_bwd_ms"] > 0, "times > 0")
        # medians with the means beside them; 3 passes: the median is one of them, within [min, max]
        expect(all(r.get(k + "_mean_ms", 0) > 0 for k in ("fwd", "bwd", "fwd_bwd")), f"means present: {r}")
        expect(abs(r["fwd_bwd_ms"] - (r["fwd_ms"] + r["bwd_ms"])) < 1e-9 and
               abs(r["fwd_bwd_mean_ms"] - (r["fwd_mean_ms"] + r["bwd_mean_ms"])) < 1e-9,
               "cpu: forward+backward is the sum (synchronous reference)")
        expect(all(k not in r for k in ("sm_clock_mhz_min", "power_w_max", "settle_ms")),
               "no GPU clock readings on a CPU worker")
        B, H, T, d = r["batch"], r["heads"], r["seq_len"], r["d_head"]
        expect(r["fwd_flops"] == 4 * B * H * T * T * d / 2, "causal FLOPs count half")
        expect(r["mem_before_bwd_bytes"] == (5 * B * H * T * d + B * H * T) * 4, "memory before backward")
        expect("causal counts half" in r["flop_convention"], "FLOP convention stated")
    else:
        expect(r["status"] == "failed" and r["error"] == "flash needs a GPU", f"flash fails on cpu: {r}")
expect(out.get("result", {}).get("succeeded") == 4, "4 succeeded")

# the flash backward's deterministic option is part of the spec (a boolean)
rc, out = run({"kind": "attention", "impl": "naive", "seq_len": [17], "d_head": [16],
               "deterministic": True, "passes": 1, "warmup": 0})
expect(rc == 0 and out.get("status") == "succeeded", f"deterministic: true accepted: rc {rc} {str(out)[:300]}")

for spec, field in [
    ({"kind": "attention", "seq_len": [37], "d_head": [24]}, "d_head[0]"),  # the entry, as seq_len[0] below
    ({"kind": "attention", "seq_len": [37], "impl": "fast"}, "impl"),
    ({"kind": "attention", "seq_len": [37], "dtype": "float8"}, "dtype"),
    ({"kind": "attention", "seq_len": [0]}, "seq_len[0]"),
    ({"kind": "attention"}, "seq_len"),
    ({"kind": "attention", "seq_len": [37], "passes": 0}, "passes"),
    ({"kind": "attention", "seq_len": [37], "bogus": 1}, "bogus"),
    ({"kind": "attention", "seq_len": [37], "deterministic": 1}, "deterministic"),
]:
    rc, out = run(spec)
    err = out.get("error") or {}
    text = json.dumps(out)
    expect(rc != 0 and isinstance(err, dict) and err.get("field") == field, f"spec {spec} rejected naming {field}: rc {rc} {text[:300]}")

print("ok" if not fails else f"{fails} failures")
sys.exit(1 if fails else 0)
