#!/usr/bin/env python3
"""PyTorch's peak memory for the memory job's points, beside lmperf's.

  memory_torch_peer.py TORCH_LM_DIR [--size 2.7B] [--ctx 128,256,512] [--precs fp32,bf16]

train_step: torch_lm.bench() of ../shared/anchors/torch_lm.py unchanged
(forward + backward + AdamW, batch 4, vocab 10000; peak_mib =
torch.cuda.max_memory_allocated over 1 warm-up + 1 measured step), with the
default device set to cuda so that the 2.7B model is initialised on the GPU
(seconds instead of minutes on the host; the peak is reset after creation
either way). inference: the same LM, forward and loss under torch.no_grad()
(and autocast for bf16), peak reset after the model exists. One JSON line per
point: {"size","ctx","prec","mode","peak_mib","params"} or "error": "OOM"."""
import argparse
import json
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("torch_lm_dir")
    ap.add_argument("--size", default="2.7B")
    ap.add_argument("--ctx", default="128,256,512")
    ap.add_argument("--precs", default="fp32,bf16")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=10000)
    ap.add_argument("--modes", default="inference,train_step")
    a = ap.parse_args()
    sys.path.insert(0, a.torch_lm_dir)
    import torch
    import torch.nn.functional as F
    import torch_lm

    torch.set_default_device("cuda")
    ctxs = [int(c) for c in a.ctx.split(",")]
    modes = a.modes.split(",")
    for prec in a.precs.split(","):
        dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[prec]
        if "inference" in modes:
            torch.manual_seed(0)
            m = torch_lm.LM(a.vocab, **torch_lm.SIZES[a.size])
            nparam = sum(p.numel() for p in m.parameters())
            for ctx in ctxs:
                t0 = time.time()
                x = torch.randint(0, a.vocab, (a.batch, ctx))
                y = torch.randint(0, a.vocab, (a.batch, ctx))
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                try:
                    with torch.no_grad(), torch.autocast("cuda", dtype=dtype, enabled=dtype is not None):
                        logits = m(x)
                        loss = F.cross_entropy(logits.float().view(-1, a.vocab), y.view(-1))
                    torch.cuda.synchronize()
                    r = dict(size=a.size, ctx=ctx, prec=prec, mode="inference", params=nparam,
                             peak_mib=round(torch.cuda.max_memory_allocated() / 2**20, 1),
                             param_mib=round(4 * nparam / 2**20, 1), loss=float(loss), s=round(time.time() - t0, 2))
                    del logits, loss
                except torch.cuda.OutOfMemoryError:
                    r = dict(size=a.size, ctx=ctx, prec=prec, mode="inference", error="OOM")
                print(json.dumps(r), flush=True)
            del m
            torch.cuda.empty_cache()
        if "train_step" in modes:
            args = argparse.Namespace(vocab=a.vocab, batch=a.batch, warmup=1, steps=1, compile=False, sdpa=False)
            for ctx in ctxs:
                t0 = time.time()
                try:
                    r = torch_lm.bench(a.size, ctx, prec, args)
                    r = dict(size=a.size, ctx=ctx, prec=prec, mode="train_step", params=r["params"],
                             peak_mib=r["peak_mib"], loss=r["loss"], s=round(time.time() - t0, 2))
                except torch.cuda.OutOfMemoryError:
                    r = dict(size=a.size, ctx=ctx, prec=prec, mode="train_step", error="OOM")
                torch.cuda.empty_cache()
                print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
