"""The profile job on a GPU against CUDA-event timings (issue 6, "trustworthy
numbers"). Runs `lmperfd run` one-shot: per point (model@context) and per
execution (graphs: CUDA-graph replays, the default; eager) one profile job
over precision × mode (forward, train_step), and the same points as
benchmark jobs (CUDA events, the same graphs setting) in the same call. Per
profile run it asserts:

  * CUPTI saw everything: no dropped records, no kernel outside a range, every
    kernel joined to its launching API call; NVTX was injected by lmperfd itself
    (NVTX_INJECTION64_PATH is removed from the environment here);
  * graphs: the run says it ran as replays (graphs_scope: forward, or the whole
    train step) and every replayed kernel found the node it was captured as
    (graph_ops_unmapped 0): the same range tables as eager;
  * warm-up steps are out of the summary: the step / forward / backward /
    optimizer ranges occur profile_steps times, the '(all)' rows add up to
    kernel_count and kernel_time_ns, and every kernel lies inside a 'step';
  * per phase, kernel time inside the range <= the range on the GPU (first
    kernel start to last end) <= the CUDA-event time of the phase (same traced
    steps), each within EVENT_SLACK; on GPU-bound points (--bound, default
    large) run as graph replays, forward and step kernel time >= MIN_BUSY of
    the event time (eager, the launch gaps between kernels are the engine's,
    shown, not asserted: large bf16 eager had 84% in call 2 of PERF.md's
    "CUDA-graph replays traced" section);
  * the job's forward event time untraced agrees with the benchmark job's
    forward_gpu mean within BENCH_TOL (both: synchronise, event, launch the
    forward, event) for graph replays and eager points whose kernels fill
    at least BENCH_BOUND of the untraced step (graph replays: plus the
    launch exposure the run measured, plain minus gated events) (eager
    steps with more launch gaps differ between processes by host noise:
    printed); on GPU-bound points the whole step too;
  * the overhead: overhead_pct is what step_ms_profiled/unprofiled say, the
    untraced baseline was measured before CUPTI was attached;
    graph replays: the gated figure (gpu_gated: each phase's replay enqueued
    behind a blocking kernel, so its CUDA events hold the GPU's execution
    and not the host's launch work, where CUPTI adds ~1 µs per node) exists
    (no timeout of the blocking kernel), is within MAX_OVERHEAD % per step and
    per phase at every point, small@128 bf16 included; the gated phase is at
    most the plain event time and at least the kernels in it (EVENT_SLACK);
    the wall-clock and plain CUDA-event overheads are printed beside it;
    eager: no gated figure ("not gated: eager"), and the wall-clock and the
    CUDA-event overhead are within MAX_OVERHEAD % where that is achievable:
    the step is not launch-bound (kernels >= GPU_BOUND of the untraced
    step) and its kernels average at least MIN_KERNEL_US (CUPTI's
    concurrent-kernel records cost about 1 µs per kernel: tests/profile/
    profile_launch_cost.cu); elsewhere printed, not asserted;
  * the spread over the steps: step_ms_unprofiled_std, step_ms_profiled_std
    and each phase's event_ns_*_std (and gated_ns_*_std where gated) exist
    and are >= 0 (0 when profile_steps is 1);
  * the tables exist: kernel summary, answers (top forward kernel, GEMM shares,
    softmax vs matmuls), roofline; the Chrome trace is Trace Event Format
    (the rules of tests/profile/test_profile_store.c) with one kernel event per
    traced kernel and paired flow arrows.

Prints Markdown tables for kernels/PERF.md (and the per-phase overhead).
Writes the runs without their traces to OUT/profile_*.json and
OUT/bench_*.json.

usage: profile_check.py LMPERFD OUT [--points small:128:5,large:512:3]
       [--precisions fp32,bf16] [--bound large] [--graphs both|on|off]
exit 0 all passed, 1 a failure, 77 no GPU."""
import argparse
import json
import os
import shutil
import subprocess
import sys

EVENT_SLACK = (0.02, 5000.0)  # kernel/span may exceed the event time by 2% + 5 µs (two clocks)
MIN_BUSY = 0.85               # GPU-bound points: kernels fill >= 85% of forward / step event time
BENCH_TOL = 0.10              # profile's untraced forward events vs the benchmark job's
MAX_OVERHEAD = 10.0           # % (issue 6: profiled step within 10% of the unprofiled one)
GPU_BOUND = 0.5               # ... asserted where kernels fill >= 50% of the untraced step's event time
MIN_KERNEL_US = 10.0          # ... and kernels average >= 10 µs (CUPTI's ~1 µs per kernel is then <= 10%)
# eager forward events against the benchmark job's (another process) asserted where kernels fill >= 75% of the
# untraced step: small@128 bf16 eager, 62-70% busy, measured 1.62 vs 1.80 ms (session 10) and 1.57 vs 1.94, 1.22 vs
# 1.44 (session 11, H200) with the same binary: the host's launch gaps, a third of the time there, differ by process
BENCH_BOUND = 0.75

ap = argparse.ArgumentParser()
ap.add_argument("lmperfd")
ap.add_argument("out")
ap.add_argument("--points", default="small:128:5,large:512:3")
ap.add_argument("--precisions", default="fp32,bf16")
ap.add_argument("--bound", default="large", help="models whose steps are GPU-bound (MIN_BUSY asserted)")
ap.add_argument("--graphs", default="both", choices=["both", "on", "off"])
# a GPU-bound point (a --bound model): at medium@256 bf16 the eager traced step is partly launch-bound and its
# tracing overhead followed the host's speed: +2.0%, +2.6% and +31.3% in three calls (H200, session 15)
ap.add_argument("--oib", default="large:512:3", help="model:context:steps of the bf16 train step profiled with "
                "optimizer_in_backward, beside the same point without it (empty: none)")
ap.add_argument("--torch", default=None, help="path of the PyTorch anchor torch_lm.py: the peer's own in-process "
                "tracer (torch.profiler, CUPTI) on the same points, traced vs untraced step time")
args = ap.parse_args()
os.makedirs(args.out, exist_ok=True)
if shutil.which("nvidia-smi") is None or subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode:
    print("no GPU: skipped")
    sys.exit(77)

env = dict(os.environ)
env.pop("NVTX_INJECTION64_PATH", None)  # lmperfd must set it itself
fails = []


def check(cond, msg):
    if not cond:
        fails.append(msg)
        print("FAIL:", msg, flush=True)
    return cond


def run(name, spec):
    path = f"{args.out}/{name}.spec.json"
    with open(path, "w") as f:
        json.dump(spec, f)
    p = subprocess.run([args.lmperfd, "run", path], capture_output=True, text=True, timeout=400, env=env)
    with open(f"{args.out}/{name}.err", "w") as f:
        f.write(p.stderr)
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError:
        check(False, f"{name}: no JSON (rc {p.returncode}): {p.stderr[-500:]}")
        return []
    runs = doc.get("runs") or []
    traces = [r.pop("trace", None) for r in runs]
    with open(f"{args.out}/{name}.json", "w") as f:
        json.dump(doc, f, indent=1)
    check(doc.get("status") == "succeeded", f"{name}: job {doc.get('status')}: {doc.get('error')}")
    for r, t in zip(runs, traces):
        r["_trace"] = t
    return runs


def check_trace(tag, trace, kernel_count):
    """Trace Event Format, as tests/profile/test_profile_store.c checks it."""
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not check(isinstance(events, list) and events, f"{tag}: trace has no traceEvents"):
        return
    bad, kernels, starts, ends, ranges = 0, 0, {}, {}, set()
    for e in events:
        ph = e.get("ph")
        ok = isinstance(ph, str) and isinstance(e.get("name"), str) and isinstance(e.get("pid"), int)
        if ok and ph != "M":
            ok = isinstance(e.get("tid"), int) and isinstance(e.get("ts"), (int, float)) and e["ts"] >= 0
        if ok and ph == "X":
            ok = isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0
            kernels += e.get("cat") == "kernel"
            if e.get("cat") == "nvtx":
                ranges.add(e["name"])
        if ok and ph in ("s", "f"):
            ok = isinstance(e.get("id"), int) and (ph == "s" or e.get("bp") == "e")
            (starts if ph == "s" else ends)[e.get("id")] = e
        bad += not ok
    check(bad == 0, f"{tag}: {bad} trace events break Trace Event Format")
    check(kernels == kernel_count, f"{tag}: trace has {kernels} kernel events, run says {kernel_count}")
    check(starts.keys() == ends.keys() and starts, f"{tag}: flow starts {len(starts)} / ends {len(ends)} unpaired")
    check({"step", "forward"} <= ranges, f"{tag}: trace lacks the step/forward ranges ({sorted(ranges)[:6]})")
    json.dumps(trace, allow_nan=False)  # plain JSON (no NaN) as Perfetto reads it


def within(a, b, tol):
    return a is not None and b is not None and abs(a - b) <= tol * b


profiles, benches = [], {}
precs = args.precisions.split(",")
bound = set(args.bound.split(",")) if args.bound else set()
executions = {"both": [True, False], "on": [True], "off": [False]}[args.graphs]
# (point, precisions, modes, optimizer_in_backward): the main points, then the optimizer in backward (bf16 train
# steps) beside the same runs without it
jobs = [(point, precs, ["forward", "train_step"], False) for point in args.points.split(",")]
if args.oib:
    jobs += [(args.oib, ["bf16"], ["train_step"], oib) for oib in (False, True)]
for point, job_precs, modes, oib in jobs:
    model, ctx, steps = point.split(":")
    common = {"model": model, "context_length": int(ctx), "precision": job_precs, "mode": modes}
    if oib:
        common["optimizer_in_backward"] = True
    for graphs in executions:
        g = ("graphs" if graphs else "eager") + ("_oib" if oib else "")
        profiles += [(int(steps), graphs, r) for r in run(f"profile_{model}_{ctx}_{g}",
                                                          dict(common, kind="profile", warmup_steps=2,
                                                               profile_steps=int(steps), graphs=graphs))]
        for b in run(f"bench_{model}_{ctx}_{g}", dict(common, kind="benchmark", warmup_steps=2, measure_steps=5,
                                                      graphs=graphs)):
            benches[(b["model"], b["context_length"], b["precision"], b["mode"], graphs,
                     bool(b.get("optimizer_in_backward")))] = b

table = []
for steps, graphs, r in profiles:
    oib = bool(r.get("optimizer_in_backward"))
    tag = f"{r.get('model')}@{r.get('context_length')} {r.get('precision')} {r.get('mode')} " + \
        ("graphs" if graphs else "eager") + (" oib" if oib else "")
    if not check(r.get("status") == "succeeded", f"{tag}: {r.get('error')}"):
        continue
    training = r["mode"] == "train_step"
    check(r.get("optimizer_in_backward") is (training and oib), f"{tag}: optimizer_in_backward "
          f"{r.get('optimizer_in_backward')!r}")
    if graphs:
        want_scope = "forward+backward+optimizer" if training else "forward"
        check(r.get("graphs") is True and r.get("graphs_scope") == want_scope,
              f"{tag}: graphs {r.get('graphs')} scope {r.get('graphs_scope')!r}: {r.get('graphs_note')}")
        check(r.get("graph_ops_unmapped") == 0 and (r.get("replayed_range_count") or 0) > 0,
              f"{tag}: {r.get('graph_ops_unmapped')} replayed ops without their node, "
              f"{r.get('replayed_range_count')} replayed ranges, {r.get('graph_nodes')} nodes")
    else:
        check(r.get("graphs") is False and r.get("graphs_scope") == "none" and r.get("replayed_range_count") == 0,
              f"{tag}: eager run says graphs {r.get('graphs')} / {r.get('graphs_scope')}")
    check(r["dropped_records"] == 0, f"{tag}: {r['dropped_records']} CUPTI records dropped")
    check(r["unattributed_kernels"] == 0, f"{tag}: {r['unattributed_kernels']} kernels outside every range")
    check(r.get("kernels_without_launch") == 0, f"{tag}: {r.get('kernels_without_launch')} kernels without launch")
    check("libcupti" in (r.get("nvtx_injection") or ""), f"{tag}: NVTX injection {r.get('nvtx_injection')!r}")

    ks = r["kernel_summary"]
    inst = {k["range"]: k["range_instances"] for k in ks}
    want = ["step", "forward"] + (["backward", "optimizer"] if training else [])
    for name in want:
        check(inst.get(name) == steps, f"{tag}: range {name} x{inst.get(name)}, want {steps} (warm-up leaked?)")
    # the updates inside backward: one range per layer and one for the final norm + LM head, each inside the
    # backward (every kernel counted there too); none without the option
    want_oib = steps * (r["num_layers"] + 1) if oib else None
    check(inst.get("optimizer in backward") == want_oib,
          f"{tag}: range 'optimizer in backward' x{inst.get('optimizer in backward')}, want {want_oib}")
    if oib:
        cell = {(k["range"], k["kernel"]): k["instances"] for k in ks}
        inner = [(kn, n) for (rn, kn), n in cell.items() if rn == "optimizer in backward"]
        check(inner and all(cell.get(("backward", kn), 0) >= n for kn, n in inner),
              f"{tag}: kernels of 'optimizer in backward' not all inside 'backward': {inner[:3]}")
    all_rows = [k for k in ks if k["range"] == "(all)"]
    check(sum(k["instances"] for k in all_rows) == r["kernel_count"], f"{tag}: (all) instances != kernel_count")
    check(sum(k["total_ns"] for k in all_rows) == r["kernel_time_ns"], f"{tag}: (all) total != kernel_time_ns")
    check(sum(k["instances"] for k in ks if k["range"] == "step") == r["kernel_count"],
          f"{tag}: kernels outside the traced steps")

    for key in ("step_ms_unprofiled_std", "step_ms_profiled_std"):
        sd = r.get(key)
        check(isinstance(sd, (int, float)) and sd >= 0 and (steps > 1 or sd == 0),
              f"{tag}: {key} {sd!r} (want a number >= 0; 0 for one step)")
    ph = {p["phase"]: p for p in r["phases"]}
    check(sorted(ph) == sorted(want), f"{tag}: phases {sorted(ph)}")
    for name, p in ph.items():
        check(p["instances"] == steps, f"{tag} {name}: {p['instances']} instances")
        ev, ev0 = p.get("event_ns_profiled"), p.get("event_ns_unprofiled")
        if not check(ev and ev0, f"{tag} {name}: no CUDA-event times"):
            continue
        # each mean per step with its spread over the steps (sample std; 0 for one step); gated: where gated
        stds = ["event_ns_profiled_std", "event_ns_unprofiled_std"]
        stds += ["gated_ns_profiled_std", "gated_ns_unprofiled_std"] if p.get("gated_ns_profiled") is not None else []
        for key in stds:
            sd = p.get(key)
            check(isinstance(sd, (int, float)) and sd >= 0 and (steps > 1 or sd == 0),
                  f"{tag} {name}: {key} {sd!r} (want a number >= 0; 0 for one step)")
        slack = ev * (1 + EVENT_SLACK[0]) + EVENT_SLACK[1]
        # busy: the union of the kernels' intervals; the summed kernel_ns may exceed it (and the span) when an
        # eager backward's overlap GEMMs run on the second stream, never fall below it
        kb = p.get("kernel_busy_ns")
        if not check(kb is not None, f"{tag} {name}: no kernel_busy_ns"):
            continue
        check(kb <= p["gpu_span_ns"] + 1000, f"{tag} {name}: kernels busy {kb:.0f} ns > GPU span "
              f"{p['gpu_span_ns']:.0f} ns")
        check(kb <= p["kernel_ns"] + 1000, f"{tag} {name}: kernels busy {kb:.0f} ns > summed {p['kernel_ns']:.0f} ns")
        check(graphs or name != "forward" or abs(kb - p["kernel_ns"]) <= 1000,
              f"{tag} {name}: the one-stream forward's busy {kb:.0f} ns != summed {p['kernel_ns']:.0f} ns")
        check(abs(p["kernel_pct_of_event"] - 100 * kb / ev) < 1e-6, f"{tag} {name}: kernel_pct_of_event not of busy")
        # the span split by what ran (0030): GEMM running + other kernels only = busy; busy + idle = span; the GEMM
        # union no more than the GEMM kernels' summed time of the range, and equal to it on the one-stream forward
        gb, oo, idle = p.get("gemm_busy_ns"), p.get("other_only_ns"), p.get("gpu_idle_ns")
        if check(all(isinstance(v, (int, float)) and v >= 0 for v in (gb, oo, idle)),
                 f"{tag} {name}: GPU split {gb!r} / {oo!r} / {idle!r} (want numbers >= 0)"):
            check(abs(gb + oo - kb) <= 1e-6 * kb + 1, f"{tag} {name}: GEMM {gb:.0f} + other {oo:.0f} != busy {kb:.0f} ns")
            check(abs(kb + idle - p["gpu_span_ns"]) <= 1e-6 * kb + 1,
                  f"{tag} {name}: busy {kb:.0f} + idle {idle:.0f} != span {p['gpu_span_ns']:.0f} ns")
            gsum = sum(k["total_ns"] / max(1, k["range_instances"]) for k in r["kernel_summary"]
                       if k["range"] == name and k["is_gemm"])
            check(gb <= gsum + 1000, f"{tag} {name}: GEMM running {gb:.0f} ns > the GEMMs' summed {gsum:.0f} ns")
            check(graphs or name != "forward" or abs(gb - gsum) <= 1000,
                  f"{tag} {name}: the one-stream forward's GEMM running {gb:.0f} ns != summed {gsum:.0f} ns")
            check(name == "optimizer" or gb > 0, f"{tag} {name}: no GEMM time in a phase with linear layers")
        check(p["gpu_span_ns"] <= slack, f"{tag} {name}: GPU span {p['gpu_span_ns']:.0f} ns > events {ev:.0f} ns")
        check(kb <= slack, f"{tag} {name}: kernels busy {kb:.0f} ns > events {ev:.0f} ns")
        if r["model"] in bound and name in ("forward", "step") and graphs:
            check(kb >= MIN_BUSY * ev, f"{tag} {name}: kernels only {100 * kb / ev:.1f}% "
                  f"of the event time (want >= {100 * MIN_BUSY:.0f}%)")
        elif r["model"] in bound and name in ("forward", "step") and kb < MIN_BUSY * ev:
            print(f"note: {tag} {name}: eager, kernels {100 * kb / ev:.1f}% of the event time "
                  f"(launch gaps), not asserted")
    if "forward" in ph:
        check(r.get("forward_gpu_span_ns") == int(ph["forward"]["gpu_span_ns"]) or
              abs(r["forward_gpu_span_ns"] - ph["forward"]["gpu_span_ns"]) <= 1,
              f"{tag}: forward_gpu_span_ns {r.get('forward_gpu_span_ns')} vs phase {ph['forward']['gpu_span_ns']}")

    w0, w1 = r["step_ms_unprofiled"], r["step_ms_profiled"]
    check(abs(r["overhead_pct"] - 100 * (w1 - w0) / w0) < 1e-6, f"{tag}: overhead_pct not from the step times")
    check(r.get("baseline_after_tracing") is False, f"{tag}: baseline measured after CUPTI was attached")
    check(r.get("overhead_gpu_pct") is not None, f"{tag}: no CUDA-event overhead")
    busy = (ph["step"].get("kernel_busy_ns") or 0) / ph["step"]["event_ns_unprofiled"] \
        if ph["step"].get("event_ns_unprofiled") else 0
    mean_kernel_us = r["kernel_time_ns"] / r["kernel_count"] / 1e3
    note = r.get("gpu_gated_note") or ""
    if graphs:
        # the blocking kernel gave up: say so loudly (profile_gate.sh greps this line)
        check("timed out" not in note, f"{tag}: GATE TIMEOUT: the blocking kernel timed out: {note}")
        g0, g1, go = (r.get("step_gpu_gated_ms_unprofiled"), r.get("step_gpu_gated_ms_profiled"),
                      r.get("overhead_gpu_gated_pct"))
        if check(g0 and g1 and go is not None, f"{tag}: no gpu_gated figures ({note})"):
            check(abs(go - 100 * (g1 - g0) / g0) < 1e-6, f"{tag}: overhead_gpu_gated_pct not from the gated times")
            check(go <= MAX_OVERHEAD, f"{tag}: gated overhead {go:.1f}% per step (> {MAX_OVERHEAD:.0f}%)")
        for name, p in ph.items():
            q0, q1 = p.get("gated_ns_unprofiled"), p.get("gated_ns_profiled")
            if not check(q0 and q1, f"{tag} {name}: no gated phase times"):
                continue
            check(100 * (q1 - q0) / q0 <= MAX_OVERHEAD,
                  f"{tag} {name}: gated overhead {100 * (q1 - q0) / q0:.1f}% (> {MAX_OVERHEAD:.0f}%)")
            # the gate removes the host's launch work, nothing of the GPU's: at most the plain events, at least
            # the kernels (same traced / untraced pass)
            for q, ev, which in ((q1, p.get("event_ns_profiled"), "traced"), (q0, p.get("event_ns_unprofiled"), "untraced")):
                if ev:
                    check(q <= ev * (1 + EVENT_SLACK[0]) + EVENT_SLACK[1],
                          f"{tag} {name}: gated {which} {q:.0f} ns > plain events {ev:.0f} ns")
            # busy, not summed: the optimizer in backward's lane runs beside the backward inside a graph too
            check(p["kernel_busy_ns"] <= q1 * (1 + EVENT_SLACK[0]) + EVENT_SLACK[1],
                  f"{tag} {name}: kernels busy {p['kernel_busy_ns']:.0f} ns > gated traced {q1:.0f} ns")
        if r["overhead_pct"] > MAX_OVERHEAD or (r.get("overhead_gpu_pct") or 0) > MAX_OVERHEAD:
            print(f"note: {tag}: overhead {r['overhead_pct']:.1f}% wall / {r['overhead_gpu_pct']:.1f}% plain events "
                  f"(host launch work exposed by synchronised phases) vs {go if go is None else f'{go:.1f}'}% gated: "
                  f"the bound is asserted on the gated figure")
    else:
        check(r.get("overhead_gpu_gated_pct") is None and note.startswith("not gated: eager"),
              f"{tag}: eager run has gated figures / note {note!r}")
    if not graphs and busy >= GPU_BOUND and mean_kernel_us >= MIN_KERNEL_US:
        check(r["overhead_pct"] <= MAX_OVERHEAD, f"{tag}: wall-clock overhead {r['overhead_pct']:.1f}%")
        check((r.get("overhead_gpu_pct") or 0) <= MAX_OVERHEAD, f"{tag}: CUDA-event overhead {r['overhead_gpu_pct']:.1f}%")
    elif not graphs:
        print(f"note: {tag}: kernels {100 * busy:.0f}% of the untraced step, {mean_kernel_us:.1f} µs on average: "
              f"overhead {r['overhead_pct']:.1f}% wall / {r['overhead_gpu_pct']:.1f}% events, CUPTI's per-launch and "
              f"per-kernel cost, not asserted")

    b = benches.get((r["model"], r["context_length"], r["precision"], r["mode"], graphs, oib))
    bf = bt = None
    if check(b and b.get("status") == "succeeded" and b.get("stats_gpu"), f"{tag}: no benchmark run beside it"):
        bf, bt = b["stats_gpu"]["forward"]["mean_ms"], b["stats_gpu"]["total"]["mean_ms"]
        pf = ph["forward"]["event_ns_unprofiled"] / 1e6
        # graph replays: plain events around a synchronised replay also hold the host's launch work, which varies
        # between processes where the GPU work is short (small@128 bf16: 0.86-1.22 ms plain against 0.78 gated in
        # three calls); the launch exposure this run measured (plain - gated) widens the bound by that much
        gq = ph["forward"].get("gated_ns_unprofiled") if graphs else None
        exposed = max(0.0, pf - gq / 1e6) if gq else 0.0
        if graphs or busy >= BENCH_BOUND:
            check(abs(pf - bf) <= BENCH_TOL * bf + exposed,
                  f"{tag}: untraced forward events {pf:.3f} ms vs benchmark {bf:.3f} ms "
                  f"(launch exposure {exposed:.3f} ms)")
        elif not within(pf, bf, BENCH_TOL):
            print(f"note: {tag}: launch-bound eager forward untraced {pf:.3f} ms vs the benchmark job's {bf:.3f} ms "
                  f"(another process: host launch noise), not asserted")
        if r["model"] in bound:
            ps = ph["step"]["event_ns_unprofiled"] / 1e6
            check(within(ps, bt, BENCH_TOL), f"{tag}: untraced step events {ps:.3f} ms vs benchmark {bt:.3f} ms")

    a = r.get("answers") or {}
    check(a.get("top_forward_kernel") and a.get("top_forward_calls_per_forward", 0) > 0, f"{tag}: no top kernel")
    check(0 < (a.get("gemm_share_forward_pct") or 0) <= 100, f"{tag}: GEMM share of forward")
    if training:
        check(0 < (a.get("gemm_share_step_pct") or 0) <= 100 and a.get("top_fwd_bwd_kernel"),
              f"{tag}: train-step answers")
    att = a.get("attention") or {}
    check(att.get("softmax_ns", 0) > 0 and att.get("matmul_ns", 0) > 0, f"{tag}: softmax/matmul times {att}")
    check(len(r.get("roofline") or []) >= 3 and all(x["time_ns"] > 0 for x in r["roofline"]), f"{tag}: roofline")
    if r.get("_trace") is not None or check(False, f"{tag}: no trace"):
        check_trace(tag, r["_trace"], r["kernel_count"])
    table.append((r, ph, a, bf, bt, graphs))

# graphs vs eager: the same kernels in the same ranges (the tables are the same tables)
by_point = {}
for r, ph, a, bf, bt, graphs in table:
    by_point.setdefault((r["model"], r["context_length"], r["precision"], r["mode"],
                         bool(r.get("optimizer_in_backward"))), {})[graphs] = r
for key, pair in by_point.items():
    if len(pair) < 2:
        continue
    g, e = pair[True], pair[False]
    tag = "%s@%s %s %s oib %s graphs vs eager" % key
    per = lambda r: r["kernel_count"] / r["profile_steps"]
    check(per(g) == per(e), f"{tag}: {per(g)} vs {per(e)} kernels per step")
    cells = lambda r: {(k["range"], k["kernel"]): k["instances"] / k["range_instances"] for k in r["kernel_summary"]}
    cg, ce = cells(g), cells(e)
    check(cg.keys() == ce.keys() and all(abs(cg[k] - ce[k]) < 1e-9 for k in cg),
          f"{tag}: kernel summary cells differ: {sorted(set(cg) ^ set(ce))[:4]}")

# the optimizer in backward against the same point without it (same execution): the same kernels per step; the
# optimizer range keeps only the token embeddings' update (a fifth of the plain step's optimizer kernel time at
# most: the embeddings are far below a fifth of the parameters at the --oib point); kernel_ns is per step
oib_rows = []
for key, pair in by_point.items():
    if not key[4]:
        continue
    plain_pair = by_point.get(key[:4] + (False,), {})
    for graphs, r in pair.items():
        p = plain_pair.get(graphs)
        tag = "%s@%s %s %s " % key[:4] + ("graphs" if graphs else "eager") + " oib vs plain"
        if not check(p is not None, f"{tag}: no plain run beside it"):
            continue
        # the same kernels outside the optimizer's ranges (the multi-tensor AdamW takes more launches when split
        # by layer)
        rest = lambda x: sum(k["instances"] for k in x["kernel_summary"] if k["range"] == "step") - \
            sum(k["instances"] for k in x["kernel_summary"] if k["range"] in ("optimizer", "optimizer in backward"))
        check(rest(r) / r["profile_steps"] == rest(p) / p["profile_steps"],
              f"{tag}: {rest(r) / r['profile_steps']} vs {rest(p) / p['profile_steps']} kernels per step outside "
              f"the optimizer")
        opt_ns = lambda x: next((q["kernel_ns"] for q in x["phases"] if q["phase"] == "optimizer"), None)
        ko, kp = opt_ns(r), opt_ns(p)
        check(ko is not None and kp and ko <= 0.2 * kp, f"{tag}: optimizer range kernels {ko} ns vs plain {kp} ns")
        oib_ns = sum(k["total_ns"] for k in r["kernel_summary"] if k["range"] == "optimizer in backward")
        oib_rows.append((tag, p, r, kp, ko, oib_ns))

ms = lambda ns: f"{ns / 1e6:.3f}" if ns is not None else "—"
pct1 = lambda v: "—" if v is None else f"{v:.1f}"
print("\n| model | T | prec | mode | exec | kernels/step | step ms untraced / traced (wall) | overhead % wall / events |"
      " gated step ms untraced / traced | overhead % gpu_gated |"
      " fwd kernels / span / events ms | kernel % of events fwd / bwd / opt / step | fwd events untraced vs benchmark ms |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r, ph, a, bf, bt, graphs in table:
    steps = ph["step"]["instances"]
    pct = " / ".join(f"{ph[n]['kernel_pct_of_event']:.1f}" if n in ph else "—"
                     for n in ("forward", "backward", "optimizer", "step"))
    f = ph["forward"]
    print(f"| {r['model']} | {r['context_length']} | {r['precision']} | {r['mode']} | "
          f"{'graphs' if graphs else 'eager'}{' oib' if r.get('optimizer_in_backward') else ''} | {r['kernel_count'] // steps} | "
          f"{r['step_ms_unprofiled']:.2f} / {r['step_ms_profiled']:.2f} | {r['overhead_pct']:.1f} / "
          f"{r['overhead_gpu_pct']:.1f} | {ms(None if r.get('step_gpu_gated_ms_unprofiled') is None else 1e6 * r['step_gpu_gated_ms_unprofiled'])}"
          f" / {ms(None if r.get('step_gpu_gated_ms_profiled') is None else 1e6 * r['step_gpu_gated_ms_profiled'])} | "
          f"{pct1(r.get('overhead_gpu_gated_pct'))} | {ms(f['kernel_ns'])} / {ms(f['gpu_span_ns'])} / {ms(f['event_ns_profiled'])}"
          f" | {pct} | {ms(f['event_ns_unprofiled'])} vs {bf if bf is None else f'{bf:.3f}'} |")
for key, title in (("event_ns", "plain CUDA events"), ("gated_ns", "gpu_gated: replays behind a blocking kernel")):
    print(f"\nPer-phase overhead ({title}, ms per instance, untraced → traced, +%):")
    print("| model | T | prec | mode | exec | step | forward | backward | optimizer |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r, ph, a, bf, bt, graphs in table:
        def cell(n):
            if n not in ph or not ph[n].get(key + "_unprofiled"):
                return "not gated: eager" if key == "gated_ns" and not graphs else "—"
            u, t = ph[n][key + "_unprofiled"], ph[n][key + "_profiled"]
            return f"{u / 1e6:.3f} → {t / 1e6:.3f} ({100 * (t - u) / u:+.1f}%)"
        print(f"| {r['model']} | {r['context_length']} | {r['precision']} | {r['mode']} | "
              f"{'graphs' if graphs else 'eager'}{' oib' if r.get('optimizer_in_backward') else ''} | " + " | ".join(cell(n) for n in ("step", "forward", "backward", "optimizer")) + " |")
print("\n| model | T | prec | mode | top kernel in forward | calls/fwd | share % | also top fwd+bwd | GEMM % fwd |"
      " GEMM % step | softmax / QK+PV µs per layer (time ×; FLOP ×) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r, ph, a, bf, bt, graphs in table:
    att = a["attention"]
    gs = a.get("gemm_share_step_pct")
    print(f"| {r['model']} | {r['context_length']} | {r['precision']} | {r['mode']} | `{a['top_forward_kernel'][:60]}` | "
          f"{a['top_forward_calls_per_forward']:.0f} | {a['top_forward_share_pct']:.1f} | "
          f"{a.get('top_forward_also_top_fwd_bwd', '–')} | {a['gemm_share_forward_pct']:.1f} | "
          f"{'–' if gs is None else f'{gs:.1f}'} | {att['softmax_ns'] / 1e3:.1f} / {att['matmul_ns'] / 1e3:.1f} "
          f"(×{att['time_ratio_matmul_to_softmax']:.1f}; ×{att['flop_ratio_matmul_to_softmax']:.0f}) |")
print()
for r, ph, a, bf, bt, graphs in table:
    top = sorted((k for k in r["kernel_summary"] if k["range"] == "step"), key=lambda k: -k["total_ns"])[:4]
    print(f"{r['model']}@{r['context_length']} {r['precision']} {r['mode']} top kernels of the step: " +
          "; ".join(f"{k['kernel'][:50]} {k['share_pct']:.1f}%" for k in top))
    print("   non-GEMM > 2%: " + ", ".join(f"{n['kernel'][:40]} {n['share_pct']:.1f}" for n in a["non_gemm_above_2pct"]))
    print("   roofline: " + "; ".join(f"{x['op']} {x['tflops']:.1f} TFLOP/s {x['gbps']:.0f} GB/s ({x['bound']})"
                                      for x in r["roofline"]))


def torch_peer(anchor, points, precs):
    """torch.profiler's overhead on the same points (PyTorch eager, autocast
    for bf16): mean synchronised step time of STEPS steps untraced, then of
    STEPS steps traced (CPU + CUDA activities; one traced step discarded by
    the schedule's warm-up), after 2 warm-up steps. Printed, not asserted."""
    import importlib.util
    import time
    spec = importlib.util.spec_from_file_location("torch_lm", anchor)
    tl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tl)
    torch, F = tl.torch, tl.F
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, schedule
    print("\nPyTorch peer (eager, torch.profiler CPU+CUDA), ms per step untraced → traced:")
    print("| model | T | prec | mode | untraced | traced | overhead % | kernels/step |")
    print("|---|---|---|---|---|---|---|---|")
    for point in points.split(","):
        model, ctx, steps = point.split(":")
        ctx, steps = int(ctx), int(steps)
        for prec in precs:
            for mode in ("forward", "train_step"):
                torch.manual_seed(0)
                m = tl.LM(10000, **tl.SIZES[model]).cuda()
                opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.01)
                x = torch.randint(0, 10000, (4, ctx), device="cuda")
                y = torch.randint(0, 10000, (4, ctx), device="cuda")
                dtype = torch.bfloat16 if prec == "bf16" else None

                def step():
                    with torch.autocast("cuda", dtype=dtype, enabled=dtype is not None):
                        if mode == "forward":
                            with torch.no_grad():
                                m(x)
                            return
                        loss = F.cross_entropy(m(x).float().view(-1, 10000), y.view(-1))
                    loss.backward()
                    opt.step()
                    opt.zero_grad(set_to_none=True)

                def timed(n, each=None):
                    total = 0.0
                    for _ in range(n):
                        torch.cuda.synchronize()
                        t0 = time.perf_counter()
                        step()
                        torch.cuda.synchronize()
                        total += time.perf_counter() - t0
                        if each:
                            each()
                    return 1e3 * total / n

                timed(2)
                plain = timed(steps)
                seen = []
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                             schedule=schedule(wait=0, warmup=1, active=steps),
                             on_trace_ready=lambda p: seen.append(
                                 sum(1 for e in p.events() if e.device_type == DeviceType.CUDA))) as prof:
                    step()
                    torch.cuda.synchronize()
                    prof.step()
                    traced = timed(steps, prof.step)
                kernels = (seen[0] if seen else 0) / steps
                print(f"| {model} | {ctx} | {prec} | {mode} | {plain:.2f} | {traced:.2f} | "
                      f"{100 * (traced - plain) / plain:.1f} | {kernels:.0f} |", flush=True)
                del m, opt
                torch.cuda.empty_cache()


if oib_rows:
    print("\n| point | plain: step events ms / optimizer kernels ms | oib: step events ms / optimizer kernels ms /"
          " 'optimizer in backward' kernels ms (per step) |")
    print("|---|---|---|")
    for tag, p, r, kp, ko, oib_ns in oib_rows:
        ev = lambda x: next(q["event_ns_unprofiled"] for q in x["phases"] if q["phase"] == "step")
        n = r["profile_steps"]
        print(f"| {tag} | {ms(ev(p))} / {ms(kp)} | {ms(ev(r))} / {ms(ko)} / {ms(oib_ns / n)} |")

if args.torch:
    try:
        torch_peer(args.torch, args.points, precs)
    except Exception as e:  # the peer is informative: its failure is printed, not a check failure
        print(f"PyTorch peer failed: {e!r}")
print("\nprofile_check:", "ok" if not fails else f"{len(fails)} failure(s)")
sys.exit(1 if fails else 0)
