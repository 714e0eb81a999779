#!/usr/bin/env python3
"""The seed-shaped sweeps of one job each, on a daemon with its GPU worker
(one device call; a GPU-less daemon refuses or cannot run their GPU parts):

  * benchmark, precision ["fp32", "bf16"] x warmup_steps [0, 2] on the CUDA
    backend: four runs; /table has "Speedup vs fp32 (x)" (1.00 on fp32,
    the fp32 total over the bf16 total on bf16 (> 1 after warm-up), as benchmark_summary's
    speedup_vs_fp32), a "Warm-up Steps" column, numbers in Tokens/s, and
    the csv splits "mean ± sd" into two numeric fields;
  * allreduce, backend ["nccl", "mpi"]: nccl's points first, each point a
    run, world sizes beyond the GPUs failed points with their reason, the
    mpi points measured, the job succeeded;
  * profile, then /table?run=0&range=forward: only the forward range's
    kernels (in json, md and csv), a range the run lacks a 404 naming range;
  * numerics (mixed_precision_accumulation) on the GPU: the seed's four sums
    (10.0001, 9.9531, 10.0021, 10.0021), bit for bit those of the exact CPU
    emulation ("device": "cpu").

usage: seed_jobs_check.py LMPERFD OUT_DIR   (exit 1 on any failed check)"""
import csv
import io
import json
import sqlite3
import sys

from daemon_client import call, started_daemon, wait_job

LMPERFD, OUT = sys.argv[1], sys.argv[2]
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg, flush=True)
    return cond


def run_job(port, spec, timeout):
    status, job = call(port, "POST", "/v1/jobs", spec)
    if not check(status in (200, 201, 202), f"submit {spec['kind']}: {status} {job}"):
        return {}
    job = wait_job(port, job["id"], timeout)
    print(spec["kind"], "job", job["id"], job["status"], job.get("error") or "", flush=True)
    return job


def column(table, name):
    cols = table.get("columns", [])
    return [row[cols.index(name)] for row in table.get("rows", [])] if name in cols else None


def numerics_checks(port):
    """The seed's accumulation sums on the GPU, bit for bit the exact CPU emulation's."""
    sums = {}
    for device in ("gpu", "cpu"):
        job = run_job(port, {"kind": "numerics"} if device == "gpu" else {"kind": "numerics", "device": "cpu"}, 60)
        rows = job["runs"][0]["rows"] if job.get("runs") else []
        sums[device] = {(r["accumulator"], r["summand_dtype"], r["cast"]): r["result"] for r in rows}
        if device == "gpu":
            check(job.get("status") == "succeeded" and job["runs"][0].get("computed_on") == "cuda:0",
                  f"numerics ran on the GPU: {job.get('runs', [{}])[0].get('computed_on')}")
    print("numerics:", json.dumps({"/".join(k): v for k, v in sums["gpu"].items()}))
    for key, want in ((("float32", "float32", "none"), 10.0001), (("float16", "float16", "none"), 9.9531),
                      (("float32", "float16", "implicit"), 10.0021), (("float32", "float16", "explicit"), 10.0021)):
        check(round(sums["gpu"].get(key, 0), 4) == want, f"numerics {key}: {sums['gpu'].get(key)} want {want}")
    check(sums["gpu"] == sums["cpu"] and sums["gpu"], f"GPU and exact CPU emulation agree bit for bit: {sums}")


def main():
    with started_daemon(LMPERFD, OUT, "seed_jobs") as (port, db):
        _, system = call(port, "GET", "/v1/system")
        gpus = system["gpu_count"]
        check(gpus >= 1, "a GPU worker")

        # benchmark: precision x warm-up in one job
        job = run_job(port, {"kind": "benchmark", "model": "small", "context_length": 128, "batch_size": 4,
                             "precision": ["fp32", "bf16"], "warmup_steps": [0, 2], "measure_steps": 3,
                             "mode": "train_step"}, 300)
        check(job.get("status") == "succeeded" and len(job.get("runs", [])) == 4, "benchmark: 4 runs succeeded")
        _, table = call(port, "GET", f"/v1/jobs/{job.get('id')}/table")
        print(json.dumps(table)[:1500])
        speedups, warmups = column(table, "Speedup vs fp32 (×)"), column(table, "Warm-up Steps")
        precisions, tokens = column(table, "Precision"), column(table, "Tokens/s")
        check(speedups is not None and warmups is not None and tokens is not None, f"columns {table.get('columns')}")
        if speedups and warmups and tokens:
            check(sorted(warmups) == [0, 0, 2, 2], f"warm-up column {warmups}")
            for p, w, s in zip(precisions, warmups, speedups):
                # after warm-up bf16 is faster than fp32 on a GPU; without it the first step's set-up weighs in
                check(isinstance(s, float) and (s == 1.0 if p == "fp32" else s > (1.0 if w else 0.0)),
                      f"speedup {s} on {p} after {w} warm-up steps")
            check(all(isinstance(t, float) and t > 0 for t in tokens), f"tokens/s numbers {tokens}")
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        summary = con.execute("SELECT precision, warmup_steps, speedup_vs_fp32 FROM benchmark_summary "
                              "WHERE job_id = ? ORDER BY precision, warmup_steps", (job["id"],)).fetchall()
        con.close()
        check(len(summary) == 4 and all(s is not None for _, _, s in summary), f"benchmark_summary {summary}")
        status, text = call(port, "GET", f"/v1/jobs/{job.get('id')}/table?format=csv", raw=True)
        rows = list(csv.reader(io.StringIO(text))) if status == 200 else [[]]
        fwd = rows[0].index("Fwd Pass (ms)") if "Fwd Pass (ms)" in rows[0] else -1
        check(fwd >= 0 and rows[0][fwd + 1] == "Fwd Pass (ms) sd" and len(rows) == 5
              and all(float(r[fwd]) > 0 and float(r[fwd + 1]) >= 0 for r in rows[1:]), f"csv {rows[:2]}")

        # allreduce: nccl and mpi in one job
        job = run_job(port, {"kind": "allreduce", "backend": ["nccl", "mpi"], "world_sizes": [1, 2],
                             "sizes": ["1MB", "64MB"], "warmup": 2, "iterations": 5}, 240)
        runs = job.get("runs", [])
        for r in runs:
            print("allreduce", r.get("backend"), r.get("world_size"), r.get("size_label"), r.get("status"),
                  r.get("median_ms"), r.get("busbw_gbps"), r.get("error") or "")
        check(job.get("status") == "succeeded" and len(runs) == 8, f"allreduce: {job.get('status')}, {len(runs)} runs")
        check([r.get("backend") for r in runs] == ["nccl"] * 4 + ["mpi"] * 4, "nccl's points first")
        for r in runs:
            want = "failed" if r.get("backend") == "nccl" and r.get("world_size", 0) > gpus else "succeeded"
            check(r.get("status") == want, f"allreduce {r.get('backend')} world {r.get('world_size')}: "
                                           f"{r.get('status')} (want {want}) {r.get('error')}")
        status, md = call(port, "GET", f"/v1/jobs/{job.get('id')}/table?format=md", raw=True)
        md = md if status == 200 else ""
        print(md)
        check("| nccl" in md and "| mpi" in md and md.index("| nccl") < md.index("| mpi"), "allreduce table: nccl rows then mpi")
        _, system = call(port, "GET", "/v1/system")
        check(all(w["state"] == "idle" for w in system["workers"]), f"workers idle after: {system['workers']}")

        # profile: the kernel summary of one run and range
        job = run_job(port, {"kind": "profile", "model": "small", "context_length": 128, "precision": "bf16",
                             "mode": "train_step"}, 240)
        check(job.get("status") == "succeeded", "profile job")
        _, full = call(port, "GET", f"/v1/jobs/{job.get('id')}/table")
        status, part = call(port, "GET", f"/v1/jobs/{job.get('id')}/table?run=0&range=forward")
        ranges = column(full, "NVTX Range")
        names = column(part, "NVTX Range")
        check(status == 200 and names and set(names) == {"forward"} and len(names) < len(ranges),
              f"range=forward: {status}, {len(names or [])} of {len(ranges or [])} rows, {set(names or [])}")
        status, md = call(port, "GET", f"/v1/jobs/{job.get('id')}/table?run=0&range=forward&format=md", raw=True)
        md = md if status == 200 else ""
        print("\n".join(md.splitlines()[:8]))
        check(status == 200 and len(md.splitlines()) == len(names or []) + 2, "range=forward as md")
        status, err = call(port, "GET", f"/v1/jobs/{job.get('id')}/table?run=0&range=no%20such%20range")
        check(status == 404 and err.get("error", {}).get("field") == "range", f"unknown range: {status} {err}")

        numerics_checks(port)
    print("seed_jobs_check:", "FAILED" if failures else "ok", len(failures), "failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
