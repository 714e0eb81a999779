"""PyTorch SDPA peer for tests/gpu/ffwd_bench.sh: forward and forward+backward
time of F.scaled_dot_product_attention on 4-D (B, H, T, d) inputs (its fused
flash / memory-efficient kernels), causal or not, timed as torch_attn.py does
(CUDA events, synchronised per pass, median). One JSON line per point.
usage: ffwd_sdpa.py [--n N] dtype:B:H:T:d:causal ..."""
import argparse, json, sys

import torch
import torch.nn.functional as F


def timeit(fn, n):
    st, en = torch.cuda.Event(True), torch.cuda.Event(True)
    ts = []
    for _ in range(n):
        st.record(); fn(); en.record(); torch.cuda.synchronize(); ts.append(st.elapsed_time(en))
    ts.sort()
    return ts[len(ts) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("points", nargs="+")
    a = ap.parse_args()
    dts = {"bf16": torch.bfloat16, "fp16": torch.float16}
    for p in a.points:
        dt, B, H, T, d, causal = p.split(":")
        B, H, T, d, causal = map(int, (B, H, T, d, causal))
        q, k, v = (torch.randn(B, H, T, d, device="cuda", dtype=dts[dt], requires_grad=True)
                   for _ in range(3))
        fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        r = dict(impl="sdpa", dtype=dt, batch=B, heads=H, seq=T, d=d, causal=causal)
        r["fwd_ms"] = round(timeit(fn, a.n), 4)
        o = fn()
        g = torch.randn_like(o)
        del o

        def fb():
            fn().backward(g)
        for _ in range(2):
            fb()
        r["fwd_bwd_ms"] = round(timeit(fb, max(10, a.n // 2)), 4)
        r["bwd_ms"] = round(r["fwd_bwd_ms"] - r["fwd_ms"], 4)
        print(json.dumps(r), flush=True)
        del q, k, v, g
    return 0


if __name__ == "__main__":
    sys.exit(main())
