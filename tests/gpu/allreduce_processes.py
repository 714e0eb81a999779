#!/usr/bin/env python3
"""GPU check of the allreduce job's nccl_launch "processes" (one process per
GPU through mpirun, the NCCL id passed by MPI_Bcast) beside "threads" (one
thread per GPU in the worker), in one-shot mode on this machine's GPUs.

  * both launches: every point succeeded with an exact sum, each run says how
    it was launched, the processes' runs name "host:cuda:N" per rank;
  * a world larger than the machine's GPUs is a failed point naming the count;
  * two ranks handed one GPU (`__allreduce-rank --devices 0,0`, which NCCL
    refuses) end with an error line per size, not a hang;
  * prints a table of both launches' median times and their ratio.

usage: allreduce_processes.py LMPERFD OUTDIR
The library path (CUDA, NCCL, the carried libraries) must already be set
(tests/gpu/device_env.sh). Exit 77 without a GPU or without mpirun, 1 when a
check failed."""
import json
import os
import shutil
import subprocess
import sys

SIZES = ["1MiB", "10MiB", "100MiB", "1GiB"]


def gpu_count():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU"))


def run_job(lmperfd, outdir, name, spec):
    path = os.path.join(outdir, name + ".json")
    with open(path, "w") as f:
        json.dump(spec, f)
    p = subprocess.run([lmperfd, "run", path], capture_output=True, text=True, timeout=400)
    with open(os.path.join(outdir, name + ".out.json"), "w") as f:
        f.write(p.stdout)
    with open(os.path.join(outdir, name + ".log"), "w") as f:
        f.write(p.stderr)
    try:
        return p.returncode, json.loads(p.stdout)
    except json.JSONDecodeError:
        return p.returncode, {"runs": [], "error": p.stderr[-400:]}


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    lmperfd, outdir = os.path.abspath(sys.argv[1]), sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    ngpu = gpu_count()
    if ngpu < 1:
        print("skip: no GPU")
        return 77
    if not shutil.which("mpirun"):
        print("skip: no mpirun")
        return 77
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        if not ok:
            failures.append(what)

    worlds = sorted({1, ngpu})
    base = {"kind": "allreduce", "backend": "nccl", "sizes": SIZES, "world_sizes": worlds, "warmup": 5,
            "iterations": 20}
    results = {}
    for launch in ("threads", "processes"):
        rc, doc = run_job(lmperfd, outdir, launch, dict(base, nccl_launch=launch))
        runs = doc.get("runs") or []
        results[launch] = runs
        check(rc == 0 and len(runs) == len(SIZES) * len(worlds),
              f"{launch}: rc {rc}, {len(runs)} runs of {len(SIZES) * len(worlds)} ({doc.get('error')})")
        bad = [(r.get("world_size"), r.get("size"), r.get("error")) for r in runs
               if r.get("status") != "succeeded" or r.get("correct") is not True]
        check(not bad, f"{launch}: every point succeeded with an exact sum {bad}")
        check(all(r.get("launch") == launch for r in runs), f"{launch}: every run says launch {launch}")
        if launch == "processes":
            forms = [r.get("devices", "") for r in runs if r.get("status") == "succeeded"]
            shaped = all(len(d.split(",")) == r.get("world_size") and all(":cuda:" in x for x in d.split(","))
                         for d, r in zip(forms, runs))
            check(bool(forms) and shaped, f"processes: devices name host:cuda:N per rank {forms[:2]}")

    rc, doc = run_job(lmperfd, outdir, "too_many", dict(base, nccl_launch="processes", sizes=["1MiB"],
                                                         world_sizes=[ngpu + 1]))
    runs = doc.get("runs") or []
    check(rc != 0 and len(runs) == 1 and runs[0].get("status") == "failed"
          and f"needs {ngpu + 1} GPUs" in (runs[0].get("error") or ""),
          f"world {ngpu + 1}: a failed point naming the GPU count ({runs[0].get('error') if runs else doc})")

    # two ranks on one GPU: NCCL refuses the communicator; every size must get an error line
    cmd = ["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    cmd += [lmperfd, "__allreduce-rank", "--backend", "nccl", "--devices", "0,0", "--sizes", "1048576,4096",
            "--warmup", "1", "--iterations", "2"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
        with open(os.path.join(outdir, "duplicate_gpu.log"), "w") as f:
            f.write(p.stdout + "\n--- stderr\n" + p.stderr)
        check(len(lines) == 2 and all(x.get("error") for x in lines),
              f"two ranks on cuda:0: an error line per size {[x.get('error') for x in lines]}")
    except subprocess.TimeoutExpired:
        check(False, "two ranks on cuda:0: mpirun hung for 120 s")

    print("\n| world | size | threads median ms | processes median ms | processes / threads | busbw GB/s (threads, processes) |")
    print("|---:|---|---:|---:|---:|---|")
    by_key = {(r["world_size"], r["size"]): r for r in results.get("processes", [])}
    for t in results.get("threads", []):
        q = by_key.get((t["world_size"], t["size"]))
        if not q or t.get("median_ms") is None or q.get("median_ms") is None:
            continue
        print(f"| {t['world_size']} | {t['size']} | {t['median_ms']:.4f} | {q['median_ms']:.4f} | "
              f"{q['median_ms'] / t['median_ms']:.3f} | {t['busbw_gbps']:.1f}, {q['busbw_gbps']:.1f} |")
    print(f"\nallreduce_processes: {'ok' if not failures else str(len(failures)) + ' FAILED'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
