"""The whole model against PyTorch: loads what tests/gpu/dump_model wrote (the
cuda backend's initial parameters, gradients of the first forward + backward,
loss, and the losses after 1..5 AdamW steps), rebuilds the CS336
TransformerLM here from shared/MODEL.md (own code: interleaved-pair RoPE,
RMSNorm eps 1e-5 in fp32, SwiGLU, untied head, no biases, CS336 AdamW with
eps outside the bias-corrected sqrt and decoupled decay after the update),
loads the identical weights and compares

  * the logits (of a forward at the initial parameters), the loss, and every
    gradient by the relative error of the tensor
    ||ours - ref|| / ||ref||, against a float64 reference (PyTorch float32,
    or TF32 for a tf32 dump, is shown beside it for scale);
  * the losses after 1..STEPS AdamW steps on the same batch.

bf16 and fp16 dumps (the engine's autocast) are compared with PyTorch autocast
(torch.autocast, FP32 master weights, the same model code, on the GPU; fp16
with dynamic loss scaling as torch.cuda.amp.GradScaler does it: scale 65536,
halve and skip the step on inf/nan): the loss, every gradient, and the loss
curve over the AdamW steps; the float64 reference is printed beside both.

usage: torch_reference.py PREFIX [PREFIX...]   (exit 1 on any mismatch)
Tolerances (relative): fp32 gradients 1e-4, losses 1e-5; tf32 3e-2 and 2e-3;
against PyTorch autocast: bf16 gradients 3e-2, the first loss 1e-2; fp16 1e-2
and 5e-3; the loss curve within 1e-2 of the initial loss at every step. A
tensor or loss that misses its tolerance still passes when ours is at least as
close to float64 as PyTorch autocast's (PyTorch being the less exact one)."""
import json
import math
import sys

import numpy as np
import torch

TOL = {"fp32": dict(grad=1e-4, loss=1e-5), "tf32": dict(grad=3e-2, loss=2e-3),
       "bf16": dict(grad=3e-2, loss=1e-2), "fp16": dict(grad=1e-2, loss=5e-3)}
AMP = {"bf16": torch.bfloat16, "fp16": torch.float16}


def rmsnorm(x, w, eps=1e-5):
    dt = x.dtype
    xf = x.float() if dt != torch.float64 else x
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w).to(dt)


def rope(x, theta):
    """x (B, H, T, dh): rotate adjacent pairs (2k, 2k+1) of position t by
    t * theta^(-2k/dh)."""
    T, dh = x.shape[-2], x.shape[-1]
    k = torch.arange(0, dh, 2, dtype=torch.float64, device=x.device)
    ang = torch.arange(T, dtype=torch.float64, device=x.device)[:, None] * theta ** (-k / dh)[None, :]
    c, s = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)


def forward(P, cfg, inputs, targets, want_logits=False):
    """P: name -> tensor (cs336_basics names). Returns the mean cross-entropy
    (and the (B·T, V) logits when want_logits)."""
    B, T = inputs.shape
    d, H = cfg["d_model"], cfg["num_heads"]
    dh = d // H
    x = P["token_embeddings.weight"][inputs]
    mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
    for l in range(cfg["num_layers"]):
        w = lambda n: P[f"layers.{l}.{n}"]
        h = rmsnorm(x, w("ln1.weight"))
        sp = lambda t: t.view(B, T, H, dh).transpose(1, 2)
        q = rope(sp(h @ w("attn.q_proj.weight").T), cfg["rope_theta"])
        k = rope(sp(h @ w("attn.k_proj.weight").T), cfg["rope_theta"])
        v = sp(h @ w("attn.v_proj.weight").T)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(dh)
        s = s.masked_fill(~mask, float("-inf"))
        s = s - s.amax(-1, keepdim=True)
        p = torch.softmax(s, dim=-1)
        y = (p @ v).transpose(1, 2).reshape(B, T, d)
        x = x + y @ w("attn.output_proj.weight").T
        h = rmsnorm(x, w("ln2.weight"))
        a = h @ w("ffn.w1.weight").T
        g = h @ w("ffn.w3.weight").T
        x = x + ((a * torch.sigmoid(a)) * g) @ w("ffn.w2.weight").T
    logits = rmsnorm(x, P["ln_final.weight"]) @ P["lm_head.weight"].T
    logits = logits.reshape(B * T, -1)
    raw = logits
    logits = logits - logits.amax(-1, keepdim=True)
    logp = logits - torch.logsumexp(logits, -1, keepdim=True)
    loss = -logp.gather(1, targets.reshape(-1, 1)).mean()
    return (loss, raw.detach()) if want_logits else loss


def shapes(cfg):
    V, d, ff = cfg["vocab_size"], cfg["d_model"], cfg["d_ff"]
    out = {"token_embeddings.weight": (V, d)}
    for l in range(cfg["num_layers"]):
        for n, s in (("ln1.weight", (d,)), ("attn.q_proj.weight", (d, d)), ("attn.k_proj.weight", (d, d)),
                     ("attn.v_proj.weight", (d, d)), ("attn.output_proj.weight", (d, d)), ("ln2.weight", (d,)),
                     ("ffn.w1.weight", (ff, d)), ("ffn.w2.weight", (d, ff)), ("ffn.w3.weight", (ff, d))):
            out[f"layers.{l}.{n}"] = s
    out["ln_final.weight"] = (d,)
    out["lm_head.weight"] = (V, d)
    return out


def adamw_step(P, G, state, t, hp):
    """CS336 AdamW, in place on P (dict of leaf tensors without grad)."""
    b1, b2 = hp["beta1"], hp["beta2"]
    alpha = hp["lr"] * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    for n, p in P.items():
        g = G[n]
        m, v = state.setdefault(n, (torch.zeros_like(p), torch.zeros_like(p)))
        m.mul_(b1).add_(g, alpha=1 - b1)
        v.mul_(b2).addcmul_(g, g, value=1 - b2)
        p.sub_(alpha * m / (v.sqrt() + hp["eps"]))
        p.sub_(hp["lr"] * hp["weight_decay"] * p)


def run(P0, cfg, inputs, targets, dtype, steps, tf32):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    P = {n: t.to(dtype).clone().requires_grad_(True) for n, t in P0.items()}
    losses, grads0, state = [], None, {}
    for k in range(steps + 1):
        for p in P.values():
            p.grad = None
        loss = forward(P, cfg, inputs, targets)
        loss.backward()
        losses.append(float(loss))
        G = {n: p.grad.detach() for n, p in P.items()}
        if k == 0:
            grads0 = {n: g.clone() for n, g in G.items()}
        if k < steps:
            with torch.no_grad():
                adamw_step({n: p.data for n, p in P.items()}, G, state, k + 1, cfg["adamw"])
    torch.backends.cuda.matmul.allow_tf32 = False
    return losses, grads0


def run_autocast(P0, cfg, inputs, targets, amp_dtype, steps):
    """PyTorch autocast on FP32 master weights; fp16 with GradScaler-style
    dynamic loss scaling. Returns the losses, the first step's (unscaled)
    gradients and the number of skipped steps."""
    dev = inputs.device.type
    P = {n: t.float().clone().requires_grad_(True) for n, t in P0.items()}
    scale = 65536.0 if amp_dtype == torch.float16 else 1.0
    losses, grads0, state, taken, skipped = [], None, {}, 0, 0
    for k in range(steps + 1):
        for p in P.values():
            p.grad = None
        with torch.autocast(dev, dtype=amp_dtype):
            loss = forward(P, cfg, inputs, targets)
        (loss.float() * scale).backward()
        losses.append(float(loss))
        G = {n: p.grad.detach() / scale for n, p in P.items()}
        if k == 0:
            grads0 = {n: g.clone() for n, g in G.items()}
        if k < steps:
            if not all(torch.isfinite(g).all() for g in G.values()):
                skipped += 1
                scale = max(scale * 0.5, 1.0)
                continue
            taken += 1
            with torch.no_grad():
                adamw_step({n: p.data for n, p in P.items()}, G, state, taken, cfg["adamw"])
    return losses, grads0, skipped


def reference_logits(P0, cfg, inputs, targets, dtype=None, amp_dtype=None, tf32=False):
    """Logits of one forward at the initial parameters: in `dtype`, or under
    autocast to `amp_dtype` on FP32 weights."""
    torch.backends.cuda.matmul.allow_tf32 = tf32
    with torch.no_grad():
        if amp_dtype is not None:
            with torch.autocast(inputs.device.type, dtype=amp_dtype):
                _, z = forward({n: t.float() for n, t in P0.items()}, cfg, inputs, targets, True)
        else:
            _, z = forward({n: t.to(dtype) for n, t in P0.items()}, cfg, inputs, targets, True)
    torch.backends.cuda.matmul.allow_tf32 = False
    return z.float()


def load_logits(prefix, cfg, device):
    B, T, V = cfg["batch"], cfg["T"], cfg["vocab_size"]
    raw = np.fromfile(prefix + ".logits.bin", dtype="<f4")
    assert raw.size == B * T * V, f"{prefix}.logits.bin: {raw.size} floats, expected {B * T * V}"
    return torch.from_numpy(raw).view(B * T, V).to(device)


def dump_label(cfg):
    """The dumped model, batch and precision in one line."""
    return f"{cfg['model']} V{cfg['vocab_size']} d{cfg['d_model']} H{cfg['num_heads']} " \
           f"(dh {cfg['d_model'] // cfg['num_heads']}) ff{cfg['d_ff']} L{cfg['num_layers']} " \
           f"B{cfg['batch']} T{cfg['T']} {cfg['precision']}"


def rel(a, b):
    a, b = a.double(), b.double()
    nb = b.norm().item()
    return (a - b).norm().item() / nb if nb > 0 else (a - b).norm().item()


def check(prefix):
    cfg = json.load(open(prefix + ".json"))
    prec = cfg["precision"]
    tol = TOL[prec]
    raw = np.fromfile(prefix + ".bin", dtype="<f4")
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    sh = shapes(cfg)
    P0, ours = {}, {}
    for t in cfg["tensors"]:
        n, k = t["name"], t["numel"]
        assert n in sh and math.prod(sh[n]) == k, f"{n}: {k} elements, expected shape {sh.get(n)}"
        P0[n] = torch.from_numpy(raw[t["param_offset"]:t["param_offset"] + k].copy()).view(sh[n]).to(dev)
        ours[n] = torch.from_numpy(raw[t["grad_offset"]:t["grad_offset"] + k].copy()).view(sh[n]).to(dev)
    assert set(P0) == set(sh), "tensor names differ from the reference model's"
    B, T = cfg["batch"], cfg["T"]
    inputs = torch.tensor(cfg["inputs"], device=dev).view(B, T)
    targets = torch.tensor(cfg["targets"], device=dev).view(B, T)
    steps = len(cfg["losses"]) - 1
    if prec in AMP:
        return check_autocast(prefix, cfg, prec, tol, P0, ours, sh, inputs, targets, steps)
    l64, g64 = run(P0, cfg, inputs, targets, torch.float64, steps, False)
    l32, g32 = run(P0, cfg, inputs, targets, torch.float32, steps, prec == "tf32")
    name = dump_label(cfg)
    print(f"== {name}")
    fails = 0
    z_ours, z64 = load_logits(prefix, cfg, dev), reference_logits(P0, cfg, inputs, targets, torch.float64)
    z32 = reference_logits(P0, cfg, inputs, targets, torch.float32, tf32=prec == "tf32")
    e = rel(z_ours, z64)
    ok = e <= tol["grad"]
    fails += not ok
    print(f"  logits ({z_ours.shape[0]} x {z_ours.shape[1]}): rel err ours {e:.2e}, torch-{prec} {rel(z32, z64):.2e}  "
          f"{'ok' if ok else 'FAIL'}")
    le = abs(cfg["loss"] - l64[0]) / abs(l64[0])
    ok = le <= tol["loss"]
    fails += not ok
    print(f"  loss ours {cfg['loss']:.7f} float64 {l64[0]:.7f} torch-{prec} {l32[0]:.7f}  rel {le:.2e}  "
          f"{'ok' if ok else 'FAIL'}")
    worst, worst_t = (0.0, ""), 0.0
    for n in sh:
        e, et = rel(ours[n], g64[n]), rel(g32[n], g64[n])
        ok = e <= tol["grad"]
        fails += not ok
        if e > worst[0]:
            worst = (e, n)
        worst_t = max(worst_t, et)
        if not ok:
            print(f"  grad {n}: rel {e:.2e} (torch-{prec} {et:.2e})  FAIL")
    print(f"  grads: {len(sh)} tensors, worst rel err ours {worst[0]:.2e} ({worst[1]}), torch-{prec} "
          f"worst {worst_t:.2e}  {'ok' if worst[0] <= tol['grad'] else 'FAIL'}")
    for k in range(1, steps + 1):
        e = abs(cfg["losses"][k] - l64[k]) / abs(l64[k])
        ok = e <= tol["loss"]
        fails += not ok
        print(f"  after {k} AdamW step(s): ours {cfg['losses'][k]:.7f} float64 {l64[k]:.7f} "
              f"torch-{prec} {l32[k]:.7f}  rel {e:.2e}  {'ok' if ok else 'FAIL'}")
    return fails




def check_autocast(prefix, cfg, prec, tol, P0, ours, sh, inputs, targets, steps):
    """The engine's bf16/fp16 autocast against PyTorch autocast (and float64)."""
    scale = cfg.get("loss_scale", 1.0)
    ours = {n: g / scale for n, g in ours.items()}
    l64, g64 = run(P0, cfg, inputs, targets, torch.float64, steps, False)
    lac, gac, skipped = run_autocast(P0, cfg, inputs, targets, AMP[prec], steps)
    name = dump_label(cfg)
    print(f"== {name} (vs PyTorch autocast on {inputs.device.type})")
    fails = 0
    z_ours, z64 = load_logits(prefix, cfg, inputs.device), reference_logits(P0, cfg, inputs, targets, torch.float64)
    zac = reference_logits(P0, cfg, inputs, targets, amp_dtype=AMP[prec])
    e, e64, e64_t = rel(z_ours, zac), rel(z_ours, z64), rel(zac, z64)
    ok = e <= tol["grad"] or e64 <= e64_t
    fails += not ok
    print(f"  logits ({z_ours.shape[0]} x {z_ours.shape[1]}): rel err to torch-autocast {e:.2e}; vs float64 ours "
          f"{e64:.2e}, torch-autocast {e64_t:.2e}  {'ok' if ok else 'FAIL'}")
    le = abs(cfg["loss"] - lac[0]) / abs(lac[0])
    ok = le <= tol["loss"] or abs(cfg["loss"] - l64[0]) <= abs(lac[0] - l64[0])
    fails += not ok
    print(f"  loss ours {cfg['loss']:.7f} torch-autocast {lac[0]:.7f} float64 {l64[0]:.7f}  rel {le:.2e}  "
          f"{'ok' if ok else 'FAIL'}")
    worst, worst64, worst64_t = (0.0, ""), 0.0, 0.0
    for n in sh:
        e = rel(ours[n], gac[n])
        ok = e <= tol["grad"] or rel(ours[n], g64[n]) <= rel(gac[n], g64[n])
        fails += not ok
        if e > worst[0]:
            worst = (e, n)
        worst64 = max(worst64, rel(ours[n], g64[n]))
        worst64_t = max(worst64_t, rel(gac[n], g64[n]))
        if not ok:
            print(f"  grad {n}: rel to torch-autocast {e:.2e} (ours vs float64 {rel(ours[n], g64[n]):.2e}, "
                  f"torch-autocast vs float64 {rel(gac[n], g64[n]):.2e})  FAIL")
    print(f"  grads: {len(sh)} tensors, worst rel err to torch-autocast {worst[0]:.2e} ({worst[1]}; "
          f"tolerance {tol['grad']:.0e}); worst vs float64: ours {worst64:.2e}, torch-autocast {worst64_t:.2e}")
    worst_curve = 0.0
    for k in range(1, steps + 1):
        e = abs(cfg["losses"][k] - lac[k]) / abs(lac[0])  # relative to the initial loss
        ok = e <= 1e-2 or abs(cfg["losses"][k] - l64[k]) <= abs(lac[k] - l64[k])
        fails += not ok
        worst_curve = max(worst_curve, e)
        if not ok or k <= 5 or k == steps or k % 5 == 0:
            print(f"  after {k:2d} AdamW step(s): ours {cfg['losses'][k]:.5f} torch-autocast {lac[k]:.5f} "
                  f"float64 {l64[k]:.5f}  rel {e:.2e}  {'ok' if ok else 'FAIL'}")
    print(f"  loss curve over {steps} steps: worst |ours - torch-autocast| / initial loss {worst_curve:.2e}; skipped steps ours "
          f"{cfg.get('steps_skipped', 0)}, torch {skipped}")
    return fails


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    fails = sum(check(p) for p in sys.argv[1:])
    print(f"torch_reference: {fails} mismatch(es)" if fails else "torch_reference: ok")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
