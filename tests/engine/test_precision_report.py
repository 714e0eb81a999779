#!/usr/bin/env python3
"""The numerics job's precision_report through `lmperfd run` (one-shot, cpu):
one run per precision, every op of the model with the formats the engine
actually used. Checks the autocast contract of shared/MODEL.md: fp32 master
weights, optimizer and gradient accumulation; 16-bit GEMM inputs with float32
accumulation under bf16/fp16 and 16-bit GEMM outputs written directly; RMSNorm
statistics, softmax and the loss computed in float32 (norm and softmax outputs
stored in 16 bits); the residual stream float32; the weight copies written by
AdamW (persistent, made once per step) and no other cast but of the float32
logits' gradient. usage: test_precision_report.py LMPERFD"""
import json
import subprocess
import sys
import tempfile

failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


def main():
    lmperfd = sys.argv[1]
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump({"kind": "numerics", "experiments": ["precision_report"]}, f)
        f.flush()
        out = subprocess.run([lmperfd, "run", f.name, "--cpu-only"], capture_output=True, text=True, timeout=60)
    check(out.returncode == 0, f"lmperfd run exit {out.returncode}: {out.stderr[-500:]}")
    doc = json.loads(out.stdout)
    check(doc["status"] == "succeeded", f"job status {doc['status']}")
    runs = {r["precision"]: r for r in doc["runs"] if r.get("experiment") == "precision_report"}
    check(sorted(runs) == ["bf16", "fp16", "fp32", "tf32"], f"one run per precision: {sorted(runs)}")
    half = {"bf16": "bfloat16", "fp16": "float16"}
    for prec, run in runs.items():
        rows = run["rows"]
        by = {(r["phase"], r["op"]): r for r in rows}
        gemms = [r for r in rows if r["op"].startswith(("attn.", "ffn.w", "lm_head")) and r["accumulate"].startswith("float32")
                 and ("proj" in r["op"] or "lm_head" in r["op"] or "ffn.w" in r["op"] or "=" in r["op"])
                 and "rope" not in r["op"] and "split" not in r["op"]]
        check(len(gemms) >= 15, f"{prec}: GEMM rows {len(gemms)}")  # fewer with the fused projections
        want_in = {"fp32": "float32", "tf32": "tf32"}.get(prec, half.get(prec))
        for g in gemms:
            check(g["inputs"] == f"{want_in}, {want_in}", f"{prec} {g['op']}: inputs {g['inputs']}")
            # the whole format, not a prefix: a tf32 GEMM reads "float32 (tf32 in)" (a cut "float32 (tf32 i" once was)
            want_acc = "float32 (tf32 in)" if prec == "tf32" else "float32"
            check(g["accumulate"] == want_acc, f"{prec} {g['op']}: accumulate {g['accumulate']!r}, want {want_acc!r}")
        # LMK_FUSED_QKV: q, k, v projected by one GEMM (and one dx GEMM over their gradients)
        qkv = "attn.qkv_proj" if ("forward", "attn.qkv_proj") in by else "attn.q_proj"
        # LMK_FUSED_W13: w1 and w3 likewise
        w13 = "ffn.w13" if ("forward", "ffn.w13") in by else "ffn.w1"
        fwd = by[("forward", qkv)]
        check(fwd["output"] == half.get(prec, "float32"), f"{prec}: linear output {fwd['output']}")
        # RMSNorm statistics and softmax in float32; under bf16/fp16 their outputs are stored in 16 bits
        # (what autocast's next op reads: the GEMMs' cast of the norm output, P·V's cast of P)
        want_act = half.get(prec, "float32")
        for op in ("ln1 (rmsnorm)", "ln2 (rmsnorm)", "ln_final (rmsnorm)"):
            r = by[("forward", op)]
            check(r["output"] == want_act and r["accumulate"] in ("float32", "float64"), f"{prec}: {op} {r}")
            check(r["inputs"] == "float32, float32", f"{prec}: {op} reads the float32 residual stream {r}")
        sm = by[("forward", "attn causal softmax")]
        check(sm["output"] == want_act and sm["accumulate"] == "float32" and sm["inputs"] == want_act,
              f"{prec}: softmax {sm}")
        smb = by[("backward", "attn causal softmax backward")]
        check(smb["output"] == want_act and smb["accumulate"] == "float32", f"{prec}: softmax backward {smb}")
        # the residual stream stays float32 (float32 embedding + 16-bit linear output promotes)
        for op in ("residual add (attention)", "residual add (ffn)"):
            r = by[("forward", op)]
            check(r["output"] == "float32" and r["inputs"] == f"float32, {want_act}", f"{prec}: {op} {r}")
        sw = by[("forward", "ffn silu(w1 x) * w3 x")]
        check(sw["output"] == want_act and sw["inputs"] == f"{want_act}, {want_act}", f"{prec}: swiglu {sw}")
        for op in ("attn.scores = q k^T", "attn.values = p v", w13, "ffn.w2", "attn.output_proj"):
            check(by[("forward", op)]["output"] == want_act, f"{prec}: {op} output {by[('forward', op)]}")
        loss = by[("forward", "cross-entropy loss + dlogits")]
        check(loss["output"] == "float32" and loss["inputs"].startswith(half.get(prec, "float32")),
              f"{prec}: loss {loss}")
        dw = ("backward", "attn.qkv_proj dW += dy^T x")  # LMK_FUSED_DW: one dW GEMM for q, k, v
        dw = dw if dw in by else ("backward", "attn.q_proj dW += dy^T x")
        check(by[dw]["output"] == "float32", f"{prec}: weight gradient float32")
        adamw = by[("optimizer", "AdamW (p, m, v master copies)")]
        check(adamw["inputs"] == "float32, float32, float32, float32" and adamw["output"] == "float32",
              f"{prec}: adamw {adamw}")
        copies = by.get(("optimizer", "weights (16-bit copies written by AdamW)"))
        if qkv == "attn.qkv_proj":
            check(not any(r["op"].startswith(("attn.q_proj", "attn.k_proj", "attn.v_proj")) and " dW " not in r["op"]
                          for r in rows), f"{prec}: fused q, k, v also ran separately")
        if w13 == "ffn.w13":
            check(not any(r["op"].startswith(("ffn.w1 ", "ffn.w3 ")) and " dW " not in r["op"] or r["op"] in ("ffn.w1", "ffn.w3")
                          for r in rows), f"{prec}: fused w1, w3 also ran separately")
        if prec in half:
            # every matrix but the embedding, once per step, by the AdamW step (persistent copies:
            # no cast in forward)
            check(copies is not None and copies["calls"] == 1 and copies["output"] == half[prec]
                  and "parameter_copy" in copies["storage"], f"{prec}: weight copies {copies}")
            check(not any(r["op"].startswith("weights (cast_half") for r in rows), f"{prec}: weights cast per step")
            check(by[("forward", qkv)]["storage"] == "16-bit tensor; 16-bit tensor; 16-bit output",
                  f"{prec}: {qkv} reads 16-bit tensors and writes a 16-bit one {by[('forward', qkv)]}")
            for op in ("attn.scores = q k^T", "attn.values = p v", "ffn.w2"):
                check(by[("forward", op)]["storage"] == "16-bit tensor; 16-bit tensor; 16-bit output",
                      f"{prec}: {op} 16-bit in and out {by[('forward', op)]}")
            for op in ("attn dp = dout v^T", "attn dq = ds k", "attn dk = ds^T q", "ffn.w2 dx = dy W",
                       "attn.output_proj dx = dy W"):
                check(by[("backward", op)]["storage"] == "16-bit tensor; 16-bit tensor; 16-bit output",
                      f"{prec}: backward {op} 16-bit in and out {by[('backward', op)]}")
            # gradients that several GEMMs accumulate (of the norm outputs) are float32, so is
            # the one GEMM over q, k, v's gradients when fused
            dx_ops = [f"{w13} dx = dy W"] if w13 == "ffn.w13" else ["ffn.w1 dx = dy W", "ffn.w3 dx = dy W"]
            dx_ops += [f"{qkv} dx = dy W"] if qkv == "attn.qkv_proj" else ["attn.q_proj dx = dy W", "attn.v_proj dx = dy W"]
            for op in dx_ops:
                r = by[("backward", op)]
                if op.startswith(("attn.qkv_proj", "ffn.w13")) and r["output"] == half[prec]:
                    # LMK_NORM_DX16: the one GEMM writes the norm output's gradient in 16 bits
                    check(r["storage"] == "16-bit tensor; 16-bit tensor; 16-bit output",
                          f"{prec}: backward {op} 16-bit output {r}")
                    continue
                check(r["output"] == "float32" and r["storage"] == "16-bit tensor; 16-bit tensor",
                      f"{prec}: backward {op} accumulates in float32 {r}")
            # no activation is cast in forward; backward casts only the float32 gradient of the logits
            # (the residual stream's gradient gets its 16-bit copy from the RMSNorm backward that writes it)
            casts = sorted(r["op"] for r in rows if r["op"].endswith("(cast_half)"))
            check(all(r["phase"] == "backward" for r in rows if r["op"] in casts), f"{prec}: casts in forward {casts}")
            check(casts == ["lm_head dy (cast_half)"], f"{prec}: activation casts {casts}")
        else:
            check(copies is None and all(r["storage"] == "" for r in rows), f"{prec}: no 16-bit copies")
        check((("optimizer", "gradient norm (sum of squares)") in by) == (prec == "fp16"),
              f"{prec}: gradient norm (loss-scale check) only under fp16")
    print("precision report:", "ok" if failures == 0 else f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
