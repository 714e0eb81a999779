"""The benchmark job on a cuda worker (lmperfd run): the same sweep with
graphs: false and graphs: true (forward, forward_backward, train_step; tiny
and an odd shape), then checks

  * every run succeeded; graphs_scope is "forward" / "forward+backward" for
    those modes with graphs (train_step: what the run says, with its note);
    the last warm-up step and every step after it are marked graph replays;
  * the loss of the last forward is bitwise the same with and without
    graphs (same weights, batch and kernels);
  * CUDA-event times exist for every phase run, are positive and do not
    exceed the synchronised wall clock of the phase (+0.05 ms);
  * the same spec on the cpu backend (--cpu-only) says graphs were ignored.

usage: benchmark_gpu_check.py LMPERFD OUT_DIR   (exit 1 on any failure)"""
import json
import subprocess
import sys

LMPERFD, OUT = sys.argv[1], sys.argv[2]
fails = []


def check(cond, msg):
    if not cond:
        fails.append(msg)
        print("FAIL:", msg, flush=True)
    return cond


def run(name, spec, *args):
    path = f"{OUT}/bench_{name}.json"
    with open(f"{OUT}/bench_{name}.spec.json", "w") as f:
        json.dump(spec, f)
    p = subprocess.run([LMPERFD, "run", f"{OUT}/bench_{name}.spec.json", *args], capture_output=True, text=True,
                       timeout=240)
    open(path, "w").write(p.stdout)
    open(f"{OUT}/bench_{name}.err", "w").write(p.stderr)
    doc = json.loads(p.stdout)
    check(doc.get("status") == "succeeded", f"{name}: job {doc.get('status')}: {doc.get('error')}")
    return doc.get("runs") or []


base = {"kind": "benchmark", "model": ["tiny", {"name": "odd", "d_model": 160, "d_ff": 432, "num_layers": 2,
                                                 "num_heads": 2}],
        "vocab_size": 10007, "context_length": [100], "batch_size": 2, "precision": ["fp32", "tf32"],
        "mode": ["forward", "forward_backward", "train_step"], "warmup_steps": 2, "measure_steps": 4}
eager = run("eager", dict(base, graphs=False))
graph = run("graphs", dict(base, graphs=True))
check(len(eager) == len(graph) == 12, f"runs: {len(eager)} eager, {len(graph)} graphs (want 12 each)")
want_scope = {"forward": "forward", "forward_backward": "forward+backward"}
print("| model | prec | mode | scope | eager wall ms | eager GPU ms | graphs wall ms | graphs GPU ms | final loss eager / graphs |")
print("|---|---|---|---|---|---|---|---|---|")
for e, g in zip(eager, graph):
    tag = f"{e['model']} {e['precision']} {e['mode']}"
    if not (check(e["status"] == "succeeded", f"{tag} eager: {e.get('error')}") and
            check(g["status"] == "succeeded", f"{tag} graphs: {g.get('error')}")):
        continue
    scope = g.get("graphs_scope")
    if e["mode"] in want_scope:
        check(scope == want_scope[e["mode"]], f"{tag}: graphs_scope {scope}")
        # the capture is at the last warm-up step (its first replay, the graphs' upload, is not measured)
        first = max(base["warmup_steps"] - 1, 0)
        check(all(s["graph"] == (s["step"] >= first) for s in g["steps"]), f"{tag}: graph flags of the steps")
        check(e.get("final_loss") == g.get("final_loss"),
              f"{tag}: final loss eager {e.get('final_loss')!r} != graphs {g.get('final_loss')!r}")
    else:
        check(scope in ("none", "forward+backward+optimizer"), f"{tag}: graphs_scope {scope}")
        check(scope != "none" or bool(g.get("graphs_note")), f"{tag}: no graphs_note for scope none")
        if scope != "none":
            check(e.get("final_loss") == g.get("final_loss"),
                  f"{tag}: final loss eager {e.get('final_loss')!r} != graphs {g.get('final_loss')!r}")
    check(e.get("graphs_scope") == "none", f"{tag} eager: graphs_scope {e.get('graphs_scope')}")
    for r, kind in ((e, "eager"), (g, "graphs")):
        check(r.get("stats_gpu") is not None, f"{tag} {kind}: no stats_gpu")
        for s in r["steps"]:
            for ph in ("forward", "backward", "optimizer"):
                w, gp = s.get(f"{ph}_ms"), s.get(f"{ph}_gpu_ms")
                if w is None:
                    check(gp is None, f"{tag} {kind} step {s['step']}: {ph} GPU time without the phase")
                    continue
                check(gp is not None and 0 < gp <= w + 0.05,
                      f"{tag} {kind} step {s['step']}: {ph} GPU {gp} ms vs wall {w} ms")
    f = lambda r, k: f"{r[k]['total']['mean_ms']:.3f}" if r.get(k) else "—"
    print(f"| {e['model']} | {e['precision']} | {e['mode']} | {scope} | {f(e, 'stats')} | {f(e, 'stats_gpu')} | "
          f"{f(g, 'stats')} | {f(g, 'stats_gpu')} | {e.get('final_loss')} / {g.get('final_loss')} |")
    if e["mode"] == "train_step":
        print(f"  train_step graphs note: {g.get('graphs_note')}")

cpu = run("cpu", dict(base, model="tiny", context_length=[16], precision="fp32", mode="forward_backward",
                      graphs=True, warmup_steps=0, measure_steps=1), "--cpu-only")
for r in cpu:
    check(r.get("graphs_scope") == "none" and "ignored" in (r.get("graphs_note") or ""),
          f"cpu: graphs_scope {r.get('graphs_scope')}, note {r.get('graphs_note')}")
    check(r.get("stats_gpu") is None, "cpu: stats_gpu should be null")
print("benchmark_gpu_check:", "ok" if not fails else f"{len(fails)} failure(s)")
sys.exit(1 if fails else 0)
