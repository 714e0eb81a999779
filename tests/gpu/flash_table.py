"""Markdown table of flash_bench.sh's results: lmperf (lmperfd run, attention
job, flash) beside PyTorch SDPA (torch_attn.py) per point, with fwd+bwd ratio.
usage: flash_table.py OUT_DIR"""
import glob, json, os, sys

out = sys.argv[1]
short = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
ours = {}
for f in sorted(glob.glob(os.path.join(out, "lmperf_*.json"))):
    try:
        j = json.load(open(f))
    except ValueError:
        print(f"(unreadable {f})")
        continue
    for r in j.get("runs", []):
        key = (short.get(r.get("dtype"), r.get("dtype")), r["batch"], r["heads"], r["seq_len"], r["d_head"])
        ours[key] = r
peer = {}
tj = os.path.join(out, "torch.jsonl")
if os.path.exists(tj):
    for line in open(tj):
        r = json.loads(line)
        key = (r["dtype"], r["batch"], max(r["heads"], 1), r["seq"], r["d"])
        peer[key] = r


def ms(r, k):
    v = r.get(k) if r else None
    return f"{v:.3f}" if isinstance(v, (int, float)) else "—"


def clock(r):
    """ours: lowest / mean SM clock (MHz) NVML saw in the timed loops, * = a power cap or slowdown reason"""
    if not r or r.get("sm_clock_mhz_min") is None:
        return "—"
    return f"{r['sm_clock_mhz_min']} / {r['sm_clock_mhz_mean']:.0f}{' *' if r.get('clock_slowdown') else ''}"


print("| dtype | B | H | seq | d | lmperf fwd / bwd / fwd+bwd ms | SDPA fwd / bwd / fwd+bwd ms | fwd ÷ SDPA | fwd+bwd ÷ SDPA |"
      " lmperf SM MHz min / mean |")
print("|---|---|---|---|---|---|---|---|---|---|")
for key in sorted(set(ours) | set(peer), key=lambda k: (k[1] * k[2] < 8, k[0], k[4], k[1], k[2], k[3])):
    a, b = ours.get(key), peer.get(key)
    if a and a.get("status") not in (None, "succeeded"):
        a = dict(a, fwd_ms=None, bwd_ms=None, fwd_bwd_ms=None)
    ratio = fr = "—"
    try:
        ratio = f"{a['fwd_bwd_ms'] / b['fwd_bwd_ms']:.2f}"
        fr = f"{a['fwd_ms'] / b['fwd_ms']:.2f}"
    except (TypeError, KeyError, ZeroDivisionError):
        pass
    print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {key[4]} | "
          f"{ms(a, 'fwd_ms')} / {ms(a, 'bwd_ms')} / {ms(a, 'fwd_bwd_ms')} | "
          f"{ms(b, 'fwd_ms')} / {ms(b, 'bwd_ms')} / {ms(b, 'fwd_bwd_ms')} | {fr} | {ratio} | {clock(a)} |")
