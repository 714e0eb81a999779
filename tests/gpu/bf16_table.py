"""Tables of a bf16_grid.sh output folder: our bf16 train step (benchmark job,
medians of the synchronised per-phase wall clock) beside torch_lm.py eager
(--precs bf16) and compiled (--compile --sdpa) medians, speed-ups = torch /
ours, MFU of forward+backward = 3 × forward FLOPs (naive count of
shared/MODEL.md) / (fwd + bwd) against the dense bf16 peak PEAK_TFLOPS; then
bf16 vs fp32 (ours) per size × context; then compile beside our naive and
flash attention (lmperf_*_bf16flash.json) where either was run.
usage: bf16_table.py OUT_DIR [PEAK_TFLOPS (default 989.4, H100/H200 SXM dense bf16)]"""
import glob
import json
import os
import sys

SIZES = {"tiny": (512, 1344, 4), "small": (768, 3072, 12), "medium": (1024, 4096, 24),
         "large": (1280, 5120, 36), "xl": (1600, 6400, 48), "2.7B": (2560, 10240, 32)}
V, B = 10000, 4


def fwd_flops(size, T):
    d, ff, L = SIZES[size]
    return L * (2.0 * B * T * (4 * d * d + 3 * d * ff) + 4.0 * B * T * T * d) + 2.0 * B * T * d * V


def ours(out, prec):
    res = {}
    for f in sorted(glob.glob(os.path.join(out, f"lmperf_*_{prec}.json"))):
        try:
            doc = json.load(open(f))
        except (OSError, ValueError):
            continue
        for r in doc.get("runs") or []:
            if r.get("status") != "succeeded":
                res[(r["model"], r["context_length"])] = {"error": str(r.get("error"))[:60]}
                continue
            s = r["stats"]
            res[(r["model"], r["context_length"])] = {
                "fwd": s["forward"]["median_ms"], "bwd": s["backward"]["median_ms"],
                "opt": s["optimizer"]["median_ms"], "graphs": r.get("graphs_scope"),
                "peak_mib": r.get("peak_memory_bytes", 0) / 2**20, "mfu_job": r.get("mfu")}
    return res


def peer(out, name):
    res = {}
    try:
        for line in open(os.path.join(out, name)):
            row = json.loads(line)
            if "error" in row:
                res[(row["size"], row["ctx"])] = {"error": row["error"]}
            else:
                res[(row["size"], row["ctx"])] = {"fwd": row["fwd_med"], "bwd": row["bwd_med"],
                                                  "opt": row["opt_med"], "peak_mib": row["peak_mib"]}
    except OSError:
        pass
    return res


def main(out, peak):
    o, e, c, o32 = ours(out, "bf16"), peer(out, "torch_bf16.jsonl"), peer(out, "torch_bf16_compile.jsonl"), ours(out, "fp32")
    f = lambda v: f"{v:.2f}" if isinstance(v, float) else "–"
    order = lambda k: (list(SIZES).index(k[0]), k[1])
    print(f"bf16 train step, batch 4, naive attention (ours, eager) / SDPA flash (compile); ms, medians; "
          f"MFU fwd+bwd vs {peak} TFLOP/s; speed-up = torch / ours")
    print()
    print("| model | T | ours fwd | ours bwd | ours opt | ours fwd+bwd | MFU fwd+bwd | eager fwd+bwd | eager opt "
          "| × eager fwd+bwd | × eager step | compile fwd+bwd | compile opt | × compile fwd+bwd | × compile step | ours peak MiB | eager peak MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for k in sorted(set(o) | set(e) | set(c), key=order):
        r, t, tc = o.get(k, {}), e.get(k, {}), c.get(k, {})
        fb = r["fwd"] + r["bwd"] if "fwd" in r else None
        mfu = f"{100 * 3 * fwd_flops(*k) / (fb * 1e-3) / (peak * 1e12):.1f}%" if fb else r.get("error", "–")
        tfb = t["fwd"] + t["bwd"] if "fwd" in t else None
        cfb = tc["fwd"] + tc["bwd"] if "fwd" in tc else None
        x = lambda a, b: f"{a / b:.2f}×" if a and b else "–"
        st = lambda d: d["fwd"] + d["bwd"] + d["opt"] if "fwd" in d else None
        print(f"| {k[0]} | {k[1]} | {f(r.get('fwd'))} | {f(r.get('bwd'))} | {f(r.get('opt'))} | {f(fb)} | {mfu} "
              f"| {f(tfb) if tfb else t.get('error', '–')} | {f(t.get('opt'))} | {x(tfb, fb)} | {x(st(t), st(r))} "
              f"| {f(cfb) if cfb else tc.get('error', '–')} | {f(tc.get('opt'))} | {x(cfb, fb)} | {x(st(tc), st(r))} "
              f"| {f(r.get('peak_mib'))} | {f(t.get('peak_mib'))} |")
    print()
    print("bf16 vs fp32 (ours): speed-up = fp32 ms / bf16 ms")
    print()
    print("| model | T | fp32 fwd+bwd ms | bf16 fwd+bwd ms | bf16 speed-up fwd | bwd | fwd+bwd | step |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for k in sorted(o32, key=order):
        a, b = o32[k], o.get(k, {})
        if "fwd" not in a or "fwd" not in b:
            continue
        print(f"| {k[0]} | {k[1]} | {a['fwd'] + a['bwd']:.2f} | {b['fwd'] + b['bwd']:.2f} | {a['fwd'] / b['fwd']:.2f}× "
              f"| {a['bwd'] / b['bwd']:.2f}× | {(a['fwd'] + a['bwd']) / (b['fwd'] + b['bwd']):.2f}× "
              f"| {(a['fwd'] + a['bwd'] + a['opt']) / (b['fwd'] + b['bwd'] + b['opt']):.2f}× |")
    fl = ours(out, "bf16flash")
    if fl:
        print()
        print("torch.compile + SDPA (flash attention) vs ours with naive and with flash attention; × = compile / ours")
        print()
        print("| model | T | compile fwd+bwd | ours naive fwd+bwd | × | ours flash fwd+bwd | × | × step (flash) "
              "| MFU fwd+bwd (flash) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for k in sorted(set(fl) | set(c), key=order):
            r, a, tc = o.get(k, {}), fl.get(k, {}), c.get(k, {})
            fb = lambda d: d["fwd"] + d["bwd"] if "fwd" in d else None
            st = lambda d: d["fwd"] + d["bwd"] + d["opt"] if "fwd" in d else None
            x = lambda p, q: f"{p / q:.2f}×" if p and q else "–"
            mfu = f"{100 * 3 * fwd_flops(*k) / (fb(a) * 1e-3) / (peak * 1e12):.1f}%" if fb(a) else "–"
            print(f"| {k[0]} | {k[1]} | {f(fb(tc))} | {f(fb(r))} | {x(fb(tc), fb(r))} | {f(fb(a))} "
                  f"| {x(fb(tc), fb(a))} | {x(st(tc), st(a))} | {mfu} |")
    g = sorted({str(r.get("graphs")) for r in list(o.values()) + list(o32.values()) if "graphs" in r})
    print()
    print(f"(our runs' graphs_scope: {', '.join(g)})")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".", float(sys.argv[2]) if len(sys.argv) > 2 else 989.4)
