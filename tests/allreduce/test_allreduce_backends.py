#!/usr/bin/env python3
"""allreduce job, "backend" as a list (seed 002's NCCL vs CPU comparison in
one job), black-box against a real lmperfd without a GPU (--cpu-only): a list
naming nccl is refused at submit naming "backend", as the scalar is; a
repeated, empty or unknown entry is refused naming it; ["mpi"] runs the same
points as "mpi" and its table reads the same. The runs of the mpi part need
mpirun (exit 77 after the submit checks when it is missing).

usage: test_allreduce_backends.py LMPERFD [WEB_ROOT]"""
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "api"))
import test_api as t  # noqa: E402  (reads LMPERFD from argv, as this script does)

SKIP = 77
POINT = {"kind": "allreduce", "sizes": [1024, "4KB"], "world_sizes": [1, 2], "warmup": 0, "iterations": 2}


def test_refused(d):
    total = d.get("/v1/jobs")[2]["total"]
    # nccl needs a GPU: in a list as alone, whatever the order
    for backend in (["nccl", "mpi"], ["mpi", "nccl"], ["nccl"]):
        spec = dict(POINT, backend=backend)
        t.expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "backend", body=spec)
        message = d.request("POST", "/v1/jobs", spec)[2].get("error", {}).get("message", "")
        t.check("there is no GPU here" in message and "mpi" in message, f"backend {backend}: says why: {message}")
    # a value listed twice, an empty list, an unknown backend: named like every sweep list's
    for backend, field in ((["mpi", "mpi"], "backend[1]"), ([], "backend"), (["mpi", "gloo"], "backend[1]"),
                           ("gloo", "backend"), ([1], "backend[0]")):
        t.expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", field, body=dict(POINT, backend=backend))
    t.check(d.get("/v1/jobs")[2]["total"] == total, "refused jobs are not stored")


def comparable(run):
    return {k: run.get(k) for k in ("backend", "dtype", "world_size", "size_bytes", "size", "warmup", "iterations",
                                    "status", "correct", "oversubscribed")}


def test_mpi_list_equals_scalar(d):
    scalar = d.submit(dict(POINT, backend="mpi"))
    listed = d.submit(dict(POINT, backend=["mpi"]))
    t.check(listed["spec"]["backend"] == ["mpi"], f"the stored spec keeps the list: {listed['spec'].get('backend')}")
    a = d.wait_status(scalar["id"], ("succeeded", "failed"), timeout=120)
    b = d.wait_status(listed["id"], ("succeeded", "failed"), timeout=120)
    t.check(a["status"] == b["status"] == "succeeded", f"scalar {a['status']} ({a.get('error')}), "
                                                        f"list {b['status']} ({b.get('error')})")
    t.check([comparable(r) for r in a["runs"]] == [comparable(r) for r in b["runs"]] and len(b["runs"]) == 4,
            f"[\"mpi\"] runs the points of \"mpi\": {[comparable(r) for r in b['runs']]}")
    t.check(a["result"]["backend"] == "mpi" and b["result"]["backend"] == ["mpi"]
            and a["result"]["points"] == b["result"]["points"] == 4, f"results: {a['result']} / {b['result']}")
    tables = [d.get(f"/v1/jobs/{j['id']}/table")[2] for j in (a, b)]
    same = ("backend", "size", "world", "correct", "oversubscribed", "status")
    t.check(tables[0]["columns"] == tables[1]["columns"]
            and all(t.table_column(tables[0], c) == t.table_column(tables[1], c) for c in same),
            f"tables: {tables}")
    for fmt in ("md", "csv"):
        status, _, text = d.get(f"/v1/jobs/{b['id']}/table?format={fmt}")
        t.check(status == 200 and text.count("mpi") == 4, f"{fmt} table of the list job: {status} {text[:300]}")


def main():
    d = t.Daemon("backends")
    try:
        print("-- test_refused", flush=True)
        test_refused(d)
        if not shutil.which("mpirun"):
            print("skip: mpirun is not on PATH (the submit checks ran)")
            return 1 if t.failures else SKIP
        print("-- test_mpi_list_equals_scalar", flush=True)
        test_mpi_list_equals_scalar(d)
    finally:
        d.stop()
    return t.verdict("all allreduce backend-list tests passed")


if __name__ == "__main__":
    sys.exit(main())
