"""Markdown tables of a bench_grid.sh output folder: lmperf's train step
(synchronised wall clock, mean of the measured steps, sum of the phases; and
the sum of the phases' CUDA-event times) beside torch_lm.py's (fwd_mean +
bwd_mean + opt_mean), ratio = torch / lmperf (> 1: lmperf faster); then the
graphs: true vs false runs.
usage: grid_table.py OUT_DIR"""
import glob
import json
import os
import sys

SIZES = ["tiny", "small", "medium", "large", "xl", "2.7B"]


def runs(path):
    try:
        doc = json.load(open(path))
    except (OSError, ValueError):
        return []
    return doc.get("runs") or []


def ms(run, key="stats"):
    s = run.get(key) or {}
    t = s.get("total") or {}
    return t.get("mean_ms")


def main(out):
    ours = {}
    for f in sorted(glob.glob(os.path.join(out, "lmperf_*.json"))):
        if "_graphs_" in f:
            continue
        for r in runs(f):
            ours[(r["model"], r["context_length"], r["precision"])] = r
    peer = {}
    for prec in ("fp32", "tf32"):
        try:
            for line in open(os.path.join(out, f"torch_{prec}.jsonl")):
                row = json.loads(line)
                peer[(row["size"], row["ctx"], prec)] = row
        except OSError:
            pass
    keys = sorted(set(ours) | set(peer), key=lambda k: (SIZES.index(k[0]) if k[0] in SIZES else 99, k[1], k[2]))
    print("| size | T | prec | lmperf ms (wall) | lmperf ms (GPU events) | torch ms | ratio torch/lmperf | lmperf fwd / bwd / opt ms | torch fwd / bwd / opt ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for k in keys:
        r, p = ours.get(k), peer.get(k)
        o = ms(r) if r and r.get("status") == "succeeded" else None
        og = ms(r, "stats_gpu") if r and r.get("status") == "succeeded" else None
        t = None
        if p and "error" not in p:
            t = p["fwd_mean"] + p["bwd_mean"] + p["opt_mean"]
        phases = "—"
        if o is not None:
            st = r["stats"]
            phases = " / ".join(f"{st[ph]['mean_ms']:.2f}" for ph in ("forward", "backward", "optimizer"))
        elif r:
            phases = "failed: " + str(r.get("error"))[:60]
        tp = f"{p['fwd_mean']:.2f} / {p['bwd_mean']:.2f} / {p['opt_mean']:.2f}" if t is not None else (
            p.get("error", "—") if p else "—")
        f = lambda v: f"{v:.2f}" if v is not None else "—"
        ratio = f"{t / o:.2f}" if o and t else "—"
        print(f"| {k[0]} | {k[1]} | {k[2]} | {f(o)} | {f(og)} | {f(t)} | {ratio} | {phases} | {tp} |")
    print()
    print("graphs (tf32; ms per step, wall clock / CUDA events; mean of the measured steps):")
    print()
    print("| size | T | mode | eager wall | eager GPU | graphs wall | graphs GPU | speed-up (wall) | scope | final loss eager = graphs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for size in SIZES:
        e = {(r["context_length"], r["mode"]): r for r in runs(os.path.join(out, f"lmperf_{size}_graphs_false.json"))}
        g = {(r["context_length"], r["mode"]): r for r in runs(os.path.join(out, f"lmperf_{size}_graphs_true.json"))}
        for key in sorted(set(e) | set(g)):
            re_, rg = e.get(key), g.get(key)
            ew, eg = (ms(re_), ms(re_, "stats_gpu")) if re_ else (None, None)
            gw, gg = (ms(rg), ms(rg, "stats_gpu")) if rg else (None, None)
            f = lambda v: f"{v:.3f}" if v is not None else "—"
            sp = f"{ew / gw:.2f}" if ew and gw else "—"
            scope = (rg or {}).get("graphs_scope", "—") if rg and rg.get("status") == "succeeded" else (
                "failed: " + str((rg or {}).get("error"))[:80])
            same = "—"
            if re_ and rg and "final_loss" in re_ and "final_loss" in rg:
                same = "yes" if re_["final_loss"] == rg["final_loss"] else f"NO ({re_['final_loss']} vs {rg['final_loss']})"
            print(f"| {size} | {key[0]} | {key[1]} | {f(ew)} | {f(eg)} | {f(gw)} | {f(gg)} | {sp} | {scope} | {same} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
