#!/usr/bin/env python3
"""GET /v1/jobs/{id}/table?run=N&range=NAME on real profile jobs (the H200
database in tests/web/fixtures/gpu-h200.db.gz, served by a real lmperfd
without a GPU): the table narrowed to one run and / or one NVTX range is
exactly that part of the whole table, in json, md and csv; a run or range the
job does not have is a 404 naming it, a run that is not a non-negative
integer a 400 naming run, and run / range on a kind that does not take them a
400 naming the parameter.

usage: test_profile_table.py LMPERFD FIXTURE_DB_GZ"""
import gzip
import os
import sqlite3
import sys
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "api"))
import test_api as t  # noqa: E402  (reads LMPERFD from argv[1], as this script does)

FIXTURE = sys.argv[2]
t.WEB_ROOT = None  # test_api reads argv[2] as the web root: here it is the fixture


def table(d, job, query, fmt="json"):
    status, _, body = d.get(f"/v1/jobs/{job}/table?format={fmt}&" + urllib.parse.urlencode(query))
    t.check(status == 200, f"job {job} table {query} {fmt}: status {status}: {str(body)[:300]}")
    return body


def test_selected(d, job, db):
    whole = table(d, job, {})
    cols = whole["columns"]
    run_col, range_col = cols.index("run"), cols.index("NVTX Range")
    runs = sorted({row[run_col] for row in whole["rows"]})
    t.check(len(runs) >= 2, f"fixture profile job {job} has {len(runs)} runs with kernels")
    for query in ({"run": 0, "range": "forward"}, {"run": runs[-1], "range": "backward"}, {"range": "forward"},
                  {"run": runs[-1]}, {"run": 0, "range": "layer 3"}, {"range": "(all)"}):
        want = [row for row in whole["rows"] if row[run_col] == query.get("run", row[run_col])
                and row[range_col] == query.get("range", row[range_col])]
        got = table(d, job, query)
        t.check(got.get("columns") == cols and got.get("rows") == want and want,
                f"job {job} table {query}: {len(got.get('rows', []))} rows, want {len(want)} (of {len(whole['rows'])})")
        # the database agrees: one row per kernel of that run and range
        sql = ("SELECT count(*) FROM profile_kernels k JOIN runs r ON r.id = k.run_id WHERE r.job_id = ?"
               + (" AND r.run_index = ?" if "run" in query else "") + (" AND k.range_name = ?" if "range" in query else ""))
        args = [job] + ([query["run"]] if "run" in query else []) + ([query["range"]] if "range" in query else [])
        n = db.execute(sql, args).fetchone()[0]
        t.check(n == len(want), f"job {job} {query}: {n} kernel rows in SQLite, table {len(want)}")
        md = table(d, job, query, "md").strip().splitlines()
        t.check(len(md) == len(want) + 2 and all(f"| {query.get('range', '')}" in line for line in md[2:]),
                f"job {job} md table {query}: {len(md)} lines for {len(want)} rows")
        csv = table(d, job, query, "csv").strip().splitlines()
        t.check(len(csv) == len(want) + 1, f"job {job} csv table {query}: {len(csv)} lines for {len(want)} rows")
    # "range=" alone as the whole summary of run 0's forward pass: seeds' nsys table per range
    fwd = table(d, job, {"run": 0, "range": "forward"})
    t.check(len(fwd["rows"]) < len(whole["rows"]) / 10, f"run 0 forward is a small part: {len(fwd['rows'])}")


def test_refused(d, job, other_kind_job):
    base = f"/v1/jobs/{job}/table"
    for query, status, code, field in ((("run", "-1"),), 400, "bad_request", "run"), \
                                      ((("run", "x"),), 400, "bad_request", "run"), \
                                      ((("run", "1.5"),), 400, "bad_request", "run"), \
                                      ((("run", "99"),), 404, "not_found", "run"), \
                                      ((("run", "99"), ("range", "forward")), 404, "not_found", "run"), \
                                      ((("range", "nope"),), 404, "not_found", "range"), \
                                      ((("range", ""),), 404, "not_found", "range"), \
                                      ((("run", "0"), ("range", "Forward")), 404, "not_found", "range"), \
                                      ((("experiment", "accumulation"),), 400, "bad_request", "experiment"):
        path = base + "?" + urllib.parse.urlencode(query)
        t.expect_error(d, "GET", path, status, code, field)
    # a 404 says what there is
    _, _, body = d.get(base + "?run=0&range=nope")
    message = body.get("error", {}).get("message", "")
    t.check("run 0" in message and "forward" in message and "layer 3" in message, f"range 404 lists ranges: {message}")
    _, _, body = d.get(base + "?run=99")
    t.check("runs with one: 0, 1" in body.get("error", {}).get("message", ""), f"run 404 lists runs: {body}")
    # kinds that take neither
    for param in ("run=0", "range=forward"):
        name = param.split("=")[0]
        for kind_job in other_kind_job:
            t.expect_error(d, "GET", f"/v1/jobs/{kind_job}/table?{param}", 400, "bad_request", name)
            _, _, body = d.get(f"/v1/jobs/{kind_job}/table?{param}")
            t.check(f"{name} is for profile jobs" in body.get("error", {}).get("message", ""), f"says who takes {name}: {body}")


def main():
    db_path = os.path.join(t.TMP, "gpu-h200.db")
    with gzip.open(FIXTURE) as src, open(db_path, "wb") as dst:
        dst.write(src.read())
    d = t.Daemon("profile-table", db=db_path)
    try:
        jobs = d.get("/v1/jobs?kind=profile&status=succeeded")[2]["jobs"]
        t.check(len(jobs) >= 1, f"the fixture has profile jobs: {jobs}")
        attention = d.get("/v1/jobs?kind=attention")[2]["jobs"][0]["id"]
        numerics = d.submit({"kind": "numerics"})["id"]
        d.wait_status(numerics, ("succeeded", "failed"))
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        for job in jobs:
            print(f"-- profile job {job['id']}", flush=True)
            test_selected(d, job["id"], db)
        db.close()
        print("-- refused", flush=True)
        test_refused(d, jobs[0]["id"], (attention, numerics))
    finally:
        d.stop()
    return t.verdict("all profile table selector tests passed")


if __name__ == "__main__":
    sys.exit(main())
