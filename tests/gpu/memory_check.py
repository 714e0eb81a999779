#!/usr/bin/env python3
"""The memory job's pool figures and out-of-memory runs, through a real
lmperfd (HTTP API and its sqlite database).

  memory_check.py LMPERFD            cpu worker only (CI): pool figures null
                                     with a reason; a point past
                                     memory_limit_bytes is a failed run with
                                     requested/free bytes and the partial
                                     timeline and its event list stored;
                                     the sweep goes on; the 0010 columns
                                     exist (NULL); attention "flash": no T²
                                     allocation, estimate = peak, below
                                     naive; unsupported head dim → 400.
  memory_check.py LMPERFD --gpu      also a GPU worker: reserved and device
                                     figures filled and consistent; a real
                                     device out-of-memory (preflight off) is a
                                     failed run with numbers; the next point
                                     still succeeds.
Exit 0 when every check passes, 1 otherwise."""
import json
import os
import sqlite3
import sys
import tempfile
import time

from daemon_client import call, started_daemon

LMPERFD = sys.argv[1]
GPU = "--gpu" in sys.argv[2:]
failures = []
MINI = {"d_model": 64, "d_ff": 128, "num_layers": 2, "num_heads": 4, "name": "mini"}


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg, flush=True)
    return cond


def run_job(port, spec, timeout=240):
    status, job = call(port, "POST", "/v1/jobs", spec)
    if not check(status in (200, 201, 202), f"submit {spec}: {status} {job}"):
        return None
    deadline = time.time() + timeout
    while time.time() < deadline:
        _, job = call(port, "GET", f"/v1/jobs/{job['id']}")
        if job["status"] not in ("queued", "running"):
            return job
        time.sleep(0.2)
    check(False, f"job {job['id']} did not finish in {timeout} s")
    return job


def cpu_checks(port, db):
    # limit 2.5 MB: inference at 16 and 64 and the train step at 16 fit, the train step at 64 (peak ~3.2 MB) does not
    spec = {"kind": "memory", "model": MINI, "vocab_size": 256, "context_length": [16, 64],
            "batch_size": 2, "mode": ["inference", "train_step"], "steps": 1, "timeline_points": 50,
            "memory_limit_bytes": 2500000}
    job = run_job(port, spec)
    if not job:
        return
    runs = {(r["context_length"], r["mode"]): r for r in job["runs"]}
    check(len(runs) == 4, f"the sweep went on past the failed point: {len(runs)} runs")
    for key, r in runs.items():
        if key == (64, "train_step"):
            continue
        check(r["status"] == "succeeded", f"{key} fits under the limit: {r.get('error')}")
        if GPU:  # the job ran on the GPU worker
            check(r["reserved_peak_bytes"] is not None and r["device_memory"], f"{key}: pool figures on the GPU")
            continue
        check(r["reserved_peak_bytes"] is None and r["device_memory"] is None and "cpu" in r["pool_note"],
              f"{key}: pool figures null with a reason on the cpu")
        check(all(p["reserved_peak_bytes"] is None for p in r["phases"]), f"{key}: per-phase reserved null")
    bad = runs.get((64, "train_step"), {})
    oom = bad.get("oom") or {}
    check(bad.get("status") == "failed" and "out of memory" in (bad.get("error") or ""),
          f"the point past the limit failed as out of memory: {bad.get('status')} {bad.get('error')}")
    check(oom.get("stage") == "run" and oom.get("phase") == "forward" and oom.get("requested_bytes", 0) > 0,
          f"oom names the phase and the request: {oom}")
    check(oom.get("free_bytes") == 2500000 - oom.get("live_bytes", -1) and oom["requested_bytes"] > oom["free_bytes"],
          f"free = limit - live, requested > free: {oom}")
    names = [p["name"] for p in bad.get("phases", [])]
    check(names == ["init", "forward"], f"partial phases up to the failure: {names}")
    pts = bad.get("timeline", {}).get("points", [])
    check(len(pts) > 0 and max(sum(p[2:]) for p in pts) == bad.get("peak_allocated_bytes"),
          "the partial timeline keeps the peak before the failure")
    check(bad.get("peak_allocated_bytes", 0) <= 2500000, "nothing past the limit was allocated")
    # the failed run's partial event list is stored and downloadable like a succeeded one's
    status, events = call(port, "GET", f"/v1/jobs/{job['id']}/events?run={bad.get('index')}")
    rows = events.get("rows", []) if status == 200 else []
    check(status == 200 and len(rows) == bad.get("event_count"),
          f"failed run's events downloadable: {status}, {len(rows)} rows of {bad.get('event_count')}")
    live = peak = 0
    for row in rows:
        live += row[2] if row[1] == "alloc" else -row[2]
        peak = max(peak, live)
    check(peak == bad.get("peak_allocated_bytes"), f"replaying the failed run's events gives its peak: {peak}")
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = con.execute("SELECT reserved_init_bytes, reserved_forward_bytes, pool_used_peak_bytes, "
                       "device_total_bytes, device_free_before_bytes FROM memory_runs WHERE job_id = ?",
                       (job["id"],)).fetchall()
    check(len(rows) == 4 and (GPU or all(all(v is None for v in row) for row in rows)),
          f"0010 columns present and NULL on the cpu (the failed point a row too): {rows}")
    failed = con.execute("SELECT context_length, mode, error FROM memory_runs WHERE job_id = ? AND status = 'failed'",
                         (job["id"],)).fetchall()
    check(failed == [(64, "train_step", bad.get("error"))], f"the failed point is a row with its reason: {failed}")
    cols = [c[1] for c in con.execute("PRAGMA table_info(memory_summary)")]
    check("train_step_reserved_mib" in cols, f"memory_summary has the reserved columns: {cols}")
    con.close()
    _, table = call(port, "GET", f"/v1/jobs/{job['id']}/table")
    check(len(table.get("columns", [])) == 11 and table["columns"][-2] == "train step reserved (MiB)"
          and table["columns"][-1] == "failed", f"table columns: {table.get('columns')}")
    # the parameters' memory beside the residual stream: the runs' measured parameters (one model, one value)
    cols = table.get("columns", [])
    params = [row[cols.index("parameters (MiB)")] for row in table.get("rows", [])] if "parameters (MiB)" in cols else []
    want = {round(r["measured"]["parameters"] / 2**20, 1) for r in job["runs"]
            if (r.get("measured") or {}).get("parameters")}
    check(len(want) == 1 and len(params) == 2 and set(params) == want,
          f"parameters (MiB) {params} against the runs' measured parameters {want}")


def attention_checks(port):
    """attention: flash in the memory job: no T² allocation, the estimate equals the measured peak, less memory
    than naive at a long context; naive_fused: its own allocation order's estimate equals its peak, the T²
    tensors as naive's; a head dimension the kernels lack is a 400 naming attention."""
    peaks = {}
    for attention in ("naive", "flash", "naive_fused"):
        spec = {"kind": "memory", "model": MINI, "vocab_size": 256, "context_length": 256, "batch_size": 2,
                "mode": ["inference", "train_step"], "precision": ["fp32", "bf16"], "steps": 1,
                "timeline_points": 50, "attention": attention}
        job = run_job(port, spec)
        if not job:
            return
        for r in job["runs"]:
            key = (attention, r["mode"], r["precision"])
            if not check(r["status"] == "succeeded" and r["attention"] == attention, f"{key}: {r.get('error')}"):
                continue
            peaks[key] = r["peak_allocated_bytes"]
            check(r["estimate"]["total"] == r["peak_allocated_bytes"],
                  f"{key}: estimate {r['estimate']['total']} == measured peak {r['peak_allocated_bytes']}")
            scores = [a for a in r["largest_allocations"] if "scores" in a["name"]]
            check(bool(scores) == (attention != "flash"), f"{key}: T² allocations {scores}")
            if r["mode"] == "train_step":
                check(r["measured"]["gradients"] == 4 * r["parameters"], f"{key}: gradients {r['measured']}")
    for mode in ("inference", "train_step"):
        for prec in ("fp32", "bf16"):
            n, f = peaks.get(("naive", mode, prec)), peaks.get(("flash", mode, prec))
            check(n and f and f < n, f"flash peak below naive at T 256 ({mode}, {prec}): {f} vs {n}")
    status, body = call(port, "POST", "/v1/jobs", {"kind": "memory", "context_length": 64, "attention": "flash",
                                                    "model": {"d_model": 48, "d_ff": 64, "num_layers": 1,
                                                              "num_heads": 2}})
    err = body.get("error", {})
    check(status == 400 and err.get("field") == "attention" and "24" in err.get("message", ""),
          f"flash with head dim 24: {status} {body}")
    status, body = call(port, "POST", "/v1/jobs", {"kind": "benchmark", "model": "2.7B", "context_length": 64,
                                                    "attention": "flash", "measure_steps": 1})
    check(status in (200, 201, 202), f"flash with head dim 80 accepted: {status} {body}")
    if status in (200, 201, 202):
        call(port, "DELETE", f"/v1/jobs/{body['id']}")


def optimizer_in_backward_checks(port):
    """optimizer_in_backward in the memory job: each layer's gradients released once applied, so a short context
    (gradients outweigh activations) peaks lower; the estimate still equals the measured peak; fp16 is a 400."""
    peaks = {}
    for oib in (False, True):
        spec = {"kind": "memory", "model": MINI, "vocab_size": 256, "context_length": 16, "batch_size": 2,
                "mode": "train_step", "precision": ["fp32", "bf16"], "steps": 2, "timeline_points": 50,
                "optimizer_in_backward": oib}
        job = run_job(port, spec)
        if not job:
            return
        for r in job["runs"]:
            key = (oib, r["precision"])
            if not check(r["status"] == "succeeded" and r.get("optimizer_in_backward") is oib, f"{key}: {r.get('error')}"):
                continue
            peaks[key] = r["peak_allocated_bytes"]
            check(r["estimate"]["total"] == r["peak_allocated_bytes"],
                  f"optimizer_in_backward {key}: estimate {r['estimate']['total']} == peak {r['peak_allocated_bytes']}")
    for prec in ("fp32", "bf16"):
        off, on = peaks.get((False, prec)), peaks.get((True, prec))
        check(off and on and on < off, f"optimizer_in_backward lowers the peak at T 16 ({prec}): {on} vs {off}")
    status, body = call(port, "POST", "/v1/jobs", {"kind": "memory", "model": MINI, "context_length": 16,
                                                    "precision": "fp16", "optimizer_in_backward": True})
    check(status == 400 and body.get("error", {}).get("field") == "optimizer_in_backward",
          f"memory optimizer_in_backward with fp16: {status} {body}")


def gpu_checks(port, db):
    spec = {"kind": "memory", "model": "small", "context_length": [128, 256], "mode": ["inference", "train_step"],
            "steps": 2, "record_events": False}
    job = run_job(port, spec)
    if not job:
        return
    for r in job["runs"]:
        key = (r["context_length"], r["mode"])
        if not check(r["status"] == "succeeded", f"gpu {key}: {r.get('error')}"):
            continue
        dm = r["device_memory"] or {}
        print("gpu", key, "peak %.1f MiB, pool used %.1f, reserved %.1f; device used before %.1f after %.1f MiB" % (
            r["peak_allocated_bytes"] / 2**20, (r["pool_used_peak_bytes"] or 0) / 2**20,
            (r["reserved_peak_bytes"] or 0) / 2**20, dm.get("used_before_bytes", 0) / 2**20,
            dm.get("used_after_bytes", 0) / 2**20), r["reserved_peak_by_phase"], flush=True)
        check(r["reserved_peak_bytes"] >= r["pool_used_peak_bytes"] >= r["peak_allocated_bytes"],
              f"{key}: reserved >= pool used >= tracked peak")
        check(r["pool_used_peak_bytes"] - r["peak_allocated_bytes"] < 256 * 2**20,
              f"{key}: the pool's used peak is the tracked peak plus scratch")
        check(set(r["reserved_peak_by_phase"]) == set(r["peak_by_phase"]), f"{key}: reserved per phase")
        check(dm.get("used_after_bytes", 0) > dm.get("used_before_bytes", 0) and dm.get("total_bytes", 0) > 0,
              f"{key}: device used grows over the run: {dm}")
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = con.execute("SELECT reserved_forward_bytes, device_free_before_bytes FROM memory_runs WHERE job_id = ?",
                       (job["id"],)).fetchall()
    check(len(rows) == 4 and all(v is not None for row in rows for v in row), f"0010 columns filled: {rows}")
    con.close()

    # a real device out-of-memory: a train step keeps each layer's 103 GB attention scores (B 24 x H 4 x 16384^2
    # float32) for backward, so layer 1's cannot be allocated on a 141 GB H200 (layer 0's already not on an H100);
    # then a point that fits
    spec = {"kind": "memory", "model": MINI, "vocab_size": 256, "context_length": [16384, 64], "batch_size": 24,
            "mode": "train_step", "steps": 1, "record_events": False, "preflight": False}
    job = run_job(port, spec)
    if not job:
        return
    big, small = job["runs"][0], job["runs"][-1]
    oom = big.get("oom") or {}
    print("gpu oom:", big.get("error"), json.dumps(oom), flush=True)
    check(big["status"] == "failed" and oom.get("requested_bytes", 0) > oom.get("free_bytes", 1 << 62),
          f"device out of memory is a failed run with requested > free: {oom}")
    check(big.get("timeline", {}).get("points"), "the failed run keeps its partial timeline")
    check(small["status"] == "succeeded", f"the sweep goes on after the out-of-memory: {small.get('error')}")


def main():
    tmp = tempfile.mkdtemp(prefix="lmperf-memory-")
    with started_daemon(LMPERFD, tmp, "m", [] if GPU else ["--cpu-only"]) as (port, db):
        cpu_checks(port, db)
        attention_checks(port)
        optimizer_in_backward_checks(port)
        if GPU:
            gpu_checks(port, db)
    if failures:
        print(f"{len(failures)} check(s) failed; daemon log: {os.path.join(tmp, 'm.log')}")
        return 1
    print("memory checks ok")
    return 0

if __name__ == "__main__":
    sys.exit(main())
