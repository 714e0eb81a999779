#!/usr/bin/env python3
"""allreduce job, "nccl_launch" (how the nccl backend starts its ranks:
"threads" in the worker, or "processes" through mpirun as torch.distributed
does), black-box against a real lmperfd without a GPU (--cpu-only):
  * "processes" with only the mpi backend is refused naming nccl_launch, an
    unknown value too, and a hostfile for nccl threads names hostfile;
  * every mpi point records launch "processes" in its run JSON and in the
    allreduce_summary view (migration 0031), beside its devices;
  * the rank program with --backend nccl on a machine without a usable GPU
    prints one error line per size naming the failing rank and exits 0, rather
    than hanging in the NCCL id exchange (on a GPU machine: correct sums).
The mpi parts need mpirun and an MPI build (exit 77 after the submit checks).

usage: test_allreduce_launch.py LMPERFD"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "api"))
import test_api as t  # noqa: E402  (reads LMPERFD from argv, as this script does)

SKIP = 77
POINT = {"kind": "allreduce", "sizes": [1024, "4KB"], "world_sizes": [1, 2], "warmup": 0, "iterations": 2}


def test_refused(d):
    total = d.get("/v1/jobs")[2]["total"]
    for extra, field, says in (
            ({"backend": "mpi", "nccl_launch": "processes"}, "nccl_launch", "for the nccl backend"),
            ({"backend": "mpi", "nccl_launch": "forks"}, "nccl_launch", "not one of"),
            ({"backend": "mpi", "nccl_launch": 1}, "nccl_launch", "not one of"),
            ({"backend": "mpi", "hostfile": "/nonexistent/hosts"}, "hostfile", "cannot read"),
            ({"backend": "nccl", "hostfile": "/etc/hostname"}, "hostfile", "nccl_launch \"processes\"")):
        spec = dict(POINT, **extra)
        t.expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", field, body=spec)
        message = d.request("POST", "/v1/jobs", spec)[2].get("error", {}).get("message", "")
        t.check(says in message, f"{extra}: says why ({says!r}): {message}")
    t.check(d.get("/v1/jobs")[2]["total"] == total, "refused jobs are not stored")


def test_mpi_launch_recorded(d):
    job = d.submit(dict(POINT, backend="mpi", label="launch column"))
    done = d.wait_status(job["id"], ("succeeded", "failed"), timeout=120)
    t.check(done["status"] == "succeeded", f"mpi job: {done['status']} {done.get('error')}")
    runs = done.get("runs") or []
    t.check(len(runs) == 4 and all(r.get("launch") == "processes" and r.get("status") == "succeeded"
                                   and r.get("correct") is True for r in runs),
            f"every mpi point ran as processes: {[(r.get('launch'), r.get('status')) for r in runs]}")
    status, _, table = d.get(f"/v1/jobs/{job['id']}/table")
    t.check(status == 200 and table["columns"][:2] == ["backend", "launch"]
            and t.table_column(table, "launch") == ["processes"] * 4, f"the table's launch column: {status} {table}")
    status, _, md = d.get(f"/v1/jobs/{job['id']}/table?format=md")
    t.check(status == 200 and md.splitlines()[0].split("|")[1:3] == [" backend ", " launch "]
            and md.count("| processes |") == 4, f"the md table names the launch: {md[:400]}")
    db = sqlite3.connect(f"file:{d.db}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT launch, backend, world_size, devices, correct FROM allreduce_summary "
                          "WHERE job_id = ? ORDER BY world_size, size_bytes", (job["id"],)).fetchall()
    finally:
        db.close()
    t.check(len(rows) == 4 and all(r[0] == "processes" and r[1] == "mpi" and r[4] == 1 for r in rows),
            f"allreduce_summary has launch: {rows}")
    t.check(all(r[3] and r[3].startswith(f"cpu x{r[2]} (mpirun") for r in rows),
            f"devices says where the ranks ran: {rows}")


def test_rank_nccl_no_gpu():
    sizes = [1024, 8192]
    cmd = ["mpirun", "-np", "2", "--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else []) + \
          [t.LMPERFD, "__allreduce-rank", "--backend", "nccl", "--sizes", ",".join(map(str, sizes)),
           "--warmup", "0", "--iterations", "2"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        t.check(False, "the nccl rank program hung (no answer in 120 s)")
        return
    t.check(p.returncode == 0, f"rank program rc {p.returncode}: {p.stderr[-1500:]}")
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    t.check([x.get("bytes") for x in lines] == sizes and all(x.get("world") == 2 for x in lines),
            f"one line per size from rank 0 only: {p.stdout[-1500:]}")
    for x in lines:
        if "error" in x:   # the usual case here: no GPU, or a driver older than the toolkit
            t.check(x["error"].startswith("rank ") and any(w in x["error"] for w in ("GPU", "CUDA", "NCCL")),
                    f"the error names the rank and the cause: {x}")
        else:              # a machine with GPUs: the sums are exact
            t.check(x.get("correct") is True, f"nccl rank line on a GPU: {x}")


def main():
    d = t.Daemon("launch")
    try:
        print("-- test_refused", flush=True)
        test_refused(d)
        if not shutil.which("mpirun"):
            print("skip: mpirun is not on PATH (the submit checks ran)")
            return 1 if t.failures else SKIP
        probe = subprocess.run([t.LMPERFD, "__allreduce-rank"], capture_output=True, text=True)
        if "no MPI" in probe.stderr:
            print("skip: this build has no MPI (the submit checks ran)")
            return 1 if t.failures else SKIP
        print("-- test_mpi_launch_recorded", flush=True)
        test_mpi_launch_recorded(d)
        print("-- test_rank_nccl_no_gpu", flush=True)
        test_rank_nccl_no_gpu()
    finally:
        d.stop()
    return t.verdict("all allreduce launch tests passed")


if __name__ == "__main__":
    sys.exit(main())
