"""The table of an ab_grid.sh output folder: per point and graphs setting,
build A's and build B's train step (synchronised wall clock, mean of the
measured steps; the mean over rounds, with the rounds' spread), B / A, and
PyTorch's step (fwd_mean + bwd_mean + opt_mean of torch_lm.py, eager) with
PyTorch / B (> 1: B faster). Final losses: A's and B's first round.
usage: ab_table.py OUT_DIR"""
import glob
import json
import os
import re
import sys

SIZES = ["tiny", "small", "medium", "large", "xl", "2.7B"]


def main(out):
    step = {}  # (build, graphs, model, T) -> [ms per round]
    loss = {}
    for f in sorted(glob.glob(os.path.join(out, "[AB]_g*_r*.json"))):
        m = re.match(r"([AB])_g(true|false)_r(\d+)\.json", os.path.basename(f))
        try:
            doc = json.load(open(f))
        except (OSError, ValueError):
            continue
        for r in doc.get("runs") or []:
            key = (m.group(1), m.group(2), r.get("model"), r.get("context_length"))
            if r.get("status") != "succeeded":
                step.setdefault(key, []).append(None)
                continue
            step.setdefault(key, []).append(r["stats"]["total"]["mean_ms"])
            if m.group(3) == "1":
                loss[key] = r.get("final_loss")
    peer = {}
    try:
        for line in open(os.path.join(out, "torch.jsonl")):
            row = json.loads(line)
            if "error" not in row:
                peer[(row["size"], row["ctx"])] = row["fwd_mean"] + row["bwd_mean"] + row["opt_mean"]
    except OSError:
        pass
    points = sorted({(k[1], k[2], k[3]) for k in step},
                    key=lambda p: (p[0], SIZES.index(p[1]) if p[1] in SIZES else 99, p[2]))
    print("| size | T | graphs | A ms (rounds) | B ms (rounds) | B / A | PyTorch ms | PyTorch / B | final loss A / B |")
    print("|---|---:|---|---|---|---:|---:|---:|---|")
    mean = lambda v: sum(v) / len(v) if v and None not in v else None
    fmt = lambda v: " / ".join("failed" if x is None else f"{x:.2f}" for x in v) if v else "—"
    for g, model, T in points:
        a, b = step.get(("A", g, model, T)), step.get(("B", g, model, T))
        ma, mb, t = mean(a), mean(b), peer.get((model, T))
        ratio = f"{mb / ma:.3f}" if ma and mb else "—"
        vs = f"**{t / mb:.2f}**" if t and mb else "—"
        la, lb = loss.get(("A", g, model, T)), loss.get(("B", g, model, T))
        fl = f"{la:.5f} / {lb:.5f}" if la is not None and lb is not None else "—"
        ts = f"{t:.2f}" if t else "—"
        print(f"| {model} | {T} | {g} | {fmt(a)} | {fmt(b)} | {ratio} | {ts} | {vs} | {fl} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
