#!/usr/bin/env python3
"""Black-box tests of GET /v1/compare?jobs=... against a real lmperfd on a
random loopback port: several jobs' tables as one (a Job column, the columns
aligned by name), benchmark jobs' speedup against a baseline job in json, md
and csv, numerics jobs without one, and every refusal with its status and
field. The helpers (Daemon, check, expect_error) are test_api.py's.

usage: test_compare.py LMPERFD [WEB_ROOT]"""
import csv
import gzip
import io
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_api  # noqa: E402  (reads LMPERFD and WEB_ROOT from sys.argv)
from test_api import LONG_COUNT, Daemon, check, expect_error  # noqa: E402

MODEL = {"name": "m", "d_model": 16, "d_ff": 32, "num_layers": 1, "num_heads": 1}
BENCH = {"kind": "benchmark", "model": MODEL, "vocab_size": 50, "batch_size": 1, "mode": "forward",
         "warmup_steps": 1, "measure_steps": 3}


def finished(d, spec):
    job = d.submit(spec)
    done = d.wait_status(job["id"], ("succeeded", "failed"), timeout=120)
    check(done["status"] == "succeeded", f"job {spec}: {done['status']} {done.get('error')}")
    return done


def column(table, name):
    """The cells of column name, or None when the table has no such column."""
    cols = table.get("columns", []) if isinstance(table, dict) else []
    return [row[cols.index(name)] for row in table.get("rows", [])] if name in cols else None


def total_ms(job):
    """{(context_length, precision): the run's stats.total.mean_ms} of a finished benchmark job."""
    return {(r["context_length"], r["precision"]): r["stats"]["total"]["mean_ms"] for r in job["runs"]}


def settled_decimals(values, most):
    """The decimals api_table_settle_decimals gives a column of values whose producer keeps most: 2 from 1 up,
    3 from 0.1, else 4, at most `most`, unless the smallest would then keep under 2 significant digits (a slow
    run's 0.0034): then as many as give it 2, at most 8."""
    small = min((abs(v) for v in values if isinstance(v, (int, float)) and v), default=0)
    keep = min(2 if small == 0 or small >= 1 else 3 if small >= 0.1 else 4, most)
    if 0 < small < 10 ** (1 - keep):
        keep = min(max(keep, 1 - math.floor(math.log10(small))), 8)
    return keep


PHASES = {"Fwd Pass (ms)": "forward", "Bwd Pass (ms)": "backward", "Opt Step (ms)": "optimizer", "Total (ms)": "total"}


def mean_sd_cells(jobs):
    """{phase column: its "mean ± sd" cells over the runs of jobs (finished benchmark jobs, in order)}: every cell of
    a column with one count of decimals, from its smallest non-zero mean over all the jobs' runs (3 significant
    digits, 2 to 4: api_table_mean_sd_decimals), "-" where a run has no such phase."""
    out = {}
    for name, phase in PHASES.items():
        stats = [(r.get("stats") or {}).get(phase) for j in jobs for r in j["runs"]]
        small = min((abs(s["mean_ms"]) for s in stats if s and s["mean_ms"]), default=0)
        digits = 2 if small == 0 else min(max(2 - math.floor(math.log10(small)), 2), 4)
        out[name] = [f"{s['mean_ms']:.{digits}f} ± {s['std_ms']:.{digits}f}" if s else "-" for s in stats]
    return out


def rows_as_own(merged, own, job_id, skip=()):
    """job_id's rows of the merged table, cut back to the job's own table's columns less those in skip."""
    cols = merged["columns"]
    return [[row[cols.index(c)] for c in own["columns"] if c not in skip] for row in merged["rows"] if row[0] == job_id]


def own_rows(own, skip=()):
    """A job's own table's rows less the columns in skip."""
    keep = [i for i, c in enumerate(own["columns"]) if c not in skip]
    return [[row[i] for i in keep] for row in own["rows"]]


def test_benchmark(d):
    """An fp32 job (contexts 8, 16) against one of fp32 and bf16 (contexts 8, 32), the first one the baseline
    by default: its rows read 1; the second's at context 8 its time over theirs (the first job runs fp32 only,
    so both precisions are against its fp32); context 16 and 32 have no peer, null."""
    fp32 = finished(d, dict(BENCH, context_length=[8, 16]))
    mixed = finished(d, dict(BENCH, context_length=[8, 32], precision=["fp32", "bf16"], measure_steps=4))
    a, b = fp32["id"], mixed["id"]
    t_a, t_b = total_ms(fp32), total_ms(mixed)
    own = {j: d.get(f"/v1/jobs/{j}/table")[2] for j in (a, b)}

    status, _, table = d.get(f"/v1/compare?jobs={a},{b}")
    speedup_name = f"Speedup vs job {a} (×)"
    check(status == 200, f"compare {a},{b}: {status} {table}")
    if status != 200:
        return
    cols = table["columns"]
    check(cols[0] == "Job" and column(table, "Job") == [a, a, b, b, b, b],
          f"Job column, rows in the order of the jobs: {column(table, 'Job')}")
    check(speedup_name in cols and cols.index(speedup_name) == cols.index("Total (ms)") + 1,
          f"the speedup column after Total: {cols}")
    got = column(table, speedup_name)
    digits = settled_decimals(got, 2)  # 2, as the seeds print a speedup, unless one is under 0.1 (a slow run)
    check(len(table["decimals"]) == len(cols) and table["decimals"][cols.index(speedup_name)] == digits,
          f"decimals: {table['decimals']}, want {digits} for {got}")
    # aligned by name: each job's own table is in its rows, its columns where their names are; the fp32-only job
    # has no "Speedup vs fp32 (×)" column of its own, null there
    for j in (a, b):
        check(rows_as_own(table, own[j], j, PHASES) == own_rows(own[j], PHASES), f"job {j}'s rows as its own table has them")
    # the phase times: one count of decimals per column over both jobs' rows (a job's own table has its own count)
    want = mean_sd_cells([fp32, mixed])
    for name in PHASES:
        check(column(table, name) == want[name], f"the comparison's {name}: {column(table, name)}, want {want[name]}")
    check("Speedup vs fp32 (×)" not in own[a]["columns"] and "Speedup vs fp32 (×)" in own[b]["columns"]
          and column(table, "Speedup vs fp32 (×)")[:2] == [None, None]
          and all(isinstance(x, float) for x in column(table, "Speedup vs fp32 (×)")[2:]),
          f"a column one job lacks: {column(table, 'Speedup vs fp32 (×)')}")
    # the job's one warm-up count (its own table leaves the column out, its runs agree) is in the comparison
    check("Warm-up Steps" not in own[a]["columns"] and column(table, "Warm-up Steps") == [1] * 6,
          f"every job's warm-up steps in the comparison: {column(table, 'Warm-up Steps')}")
    # one column per name: Job, each name of either job's table once (one job may have "Host Busy (%)", when a busy
    # machine disturbed its runs, and the other not), Warm-up Steps, the speedup
    names = dict.fromkeys(own[a]["columns"] + own[b]["columns"])
    check(len(cols) == 1 + len(names) + ("Warm-up Steps" not in names) + 1 and len(set(cols)) == len(cols),
          f"one column per name: {cols}")

    # the model's shape right after Model, as on the job page's summary and in each job's own table: every run's
    shape = ["d_model", "d_ff", "Layers", "Heads"]
    at = cols.index("Model")
    runs = [r for j in (fp32, mixed) for r in j["runs"]]
    check(cols[at + 1:at + 5] == shape and cols[at + 5] == "Context Length"
          and all(c[c.index("Model") + 1:c.index("Model") + 5] == shape for c in (own[a]["columns"], own[b]["columns"])),
          f"the shape after Model: {cols}")
    check([row[at + 1:at + 5] for row in table["rows"]] ==
          [[r["d_model"], r["d_ff"], r["num_layers"], r["num_heads"]] for r in runs]
          and all(row[at + 1:at + 5] == [16, 32, 1, 1] for row in table["rows"]),
          f"each row's shape is its run's: {[row[at + 1:at + 5] for row in table['rows']]}")

    keys = list(zip(column(table, "Context Length"), column(table, "Precision")))
    want = [1.0, 1.0, t_a[(8, "fp32")] / t_b[(8, "fp32")], t_a[(8, "fp32")] / t_b[(8, "bf16")], None, None]
    check(keys == [(8, "fp32"), (16, "fp32"), (8, "fp32"), (8, "bf16"), (32, "fp32"), (32, "bf16")],
          f"rows: {keys}")
    check(got[:2] == [1.0, 1.0] and got[4:] == [None, None]
          and all(isinstance(g, float) and abs(g - w) <= 1e-9 * w for g, w in zip(got[2:4], want[2:4])),
          f"speedups against job {a}: {got}, want {want}")

    # md: the same rows, the speedup with its decimals (the baseline's 1.00), an unmatched row empty
    status, resp, md = d.get(f"/v1/compare?jobs={a},{b}&format=md")
    lines = md.splitlines() if status == 200 else []
    header = [c.strip() for c in lines[0].strip("|").split("|")] if lines else []
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    at = header.index(speedup_name) if speedup_name in header else -1
    want_md = [f"{x:.{digits}f}" if x is not None else "" for x in got]
    check(status == 200 and resp.getheader("Content-Type", "").startswith("text/markdown") and len(lines) == 8
          and header[:7] == ["Job", "Model", "d_model", "d_ff", "Layers", "Heads", "Context Length"] and at >= 0 and [c[at] for c in cells] == want_md
          and [c[0] for c in cells] == [str(a)] * 2 + [str(b)] * 4, f"md comparison: {md}")
    # csv: "mean ± sd" columns are two fields, the speedup one
    status, resp, text = d.get(f"/v1/compare?jobs={a},{b}&format=csv")
    records = list(csv.reader(io.StringIO(text))) if status == 200 else []
    header = records[0] if records else []
    at = header.index(speedup_name) if speedup_name in header else -1
    check(status == 200 and resp.getheader("Content-Type", "").startswith("text/csv") and len(records) == 7
          and header[:7] == ["Job", "Model", "d_model", "d_ff", "Layers", "Heads", "Context Length"]
          and "Total (ms) sd" in header and at >= 0
          and [r[at] for r in records[1:]] == want_md and [r[0] for r in records[1:]] == [str(a)] * 2 + [str(b)] * 4,
          f"csv comparison: {text}")

    # the other job as the baseline (baseline=, or listed first): its runs differ in precision, so the fp32
    # job's context 8 is against its fp32 run; the fp32 job's context 16 has no peer
    for query in (f"jobs={a},{b}&baseline={b}", f"jobs={b},{a}"):
        status, _, table = d.get(f"/v1/compare?{query}")
        name = f"Speedup vs job {b} (×)"
        got = column(table, name) if status == 200 else None
        jobs = column(table, "Job") if status == 200 else None
        first_b = query.startswith(f"jobs={b}")
        want_jobs = [b] * 4 + [a] * 2 if first_b else [a] * 2 + [b] * 4
        ratio = t_b[(8, "fp32")] / t_a[(8, "fp32")]
        want_cells = [1.0] * 4 + [ratio, None] if first_b else [ratio, None] + [1.0] * 4
        check(got is not None and jobs == want_jobs and f"Speedup vs job {a} (×)" not in table["columns"]
              and all(g == w if w in (None, 1.0) else abs(g - w) <= 1e-9 * w for g, w in zip(got, want_cells)),
              f"compare {query}: {jobs} {got}, want {want_cells}")

    expect_error(d, "GET", f"/v1/compare?jobs={a},{b}&baseline=999999", 400, "bad_request", "baseline")
    expect_error(d, "GET", f"/v1/compare?jobs={a},{b}&baseline=first", 400, "bad_request", "baseline")
    expect_error(d, "GET", f"/v1/compare?jobs={a},{b}&baseline={a}&baseline={b}", 400, "bad_request", "baseline")
    expect_error(d, "GET", f"/v1/compare?jobs={a},{b}&format=xml", 400, "bad_request", "format")
    return a


def test_numerics(d, benchmark_job):
    """Numerics jobs have no speedup: their tables side by side, a column the other job's table lacks null."""
    acc = [finished(d, {"kind": "numerics", "count": n})["id"] for n in (10, 100)]
    prec = finished(d, {"kind": "numerics", "experiments": ["precision_report"]})["id"]
    own = {j: d.get(f"/v1/jobs/{j}/table")[2] for j in acc + [prec]}

    status, _, table = d.get(f"/v1/compare?jobs={acc[0]},{acc[1]}")
    check(status == 200 and table["columns"] == ["Job"] + own[acc[0]]["columns"]
          and table["rows"] == [[j] + row for j in acc for row in own[j]["rows"]],
          f"two accumulation jobs: {status} {table.get('columns')}")
    # no column in common: the second job's columns after the first's, each row null in the other's
    status, _, table = d.get(f"/v1/compare?jobs={acc[0]},{prec}")
    width = len(own[acc[0]]["columns"])
    check(status == 200 and table["columns"] == ["Job"] + own[acc[0]]["columns"] + own[prec]["columns"]
          and len(table["rows"]) == len(own[acc[0]]["rows"]) + len(own[prec]["rows"])
          and all(row[1 + width:] == [None] * len(own[prec]["columns"]) for row in table["rows"] if row[0] == acc[0])
          and all(row[1:1 + width] == [None] * width for row in table["rows"] if row[0] == prec)
          and not any(c.startswith("Speedup") for c in table["columns"]),
          f"accumulation vs precision report: {status} {table.get('columns')}")
    status, _, md = d.get(f"/v1/compare?jobs={acc[0]},{acc[1]}&format=md")
    check(status == 200 and md.startswith("| Job | accumulator |") and len(md.splitlines()) == 2 + 14,
          f"numerics md comparison: {md[:300]}")
    expect_error(d, "GET", f"/v1/compare?jobs={acc[0]},{acc[1]}&baseline={acc[0]}", 400, "bad_request", "baseline")
    # experiment= narrows each job's table as /table?experiment= does: the precision reports side by side
    both = finished(d, {"kind": "numerics", "experiments": ["accumulation", "precision_report"]})["id"]
    selected = d.get(f"/v1/jobs/{both}/table?experiment=precision_report")[2]
    status, _, table = d.get(f"/v1/compare?jobs={both},{prec}&experiment=precision_report")
    check(status == 200 and selected["columns"] == own[prec]["columns"]
          and table["columns"] == ["Job"] + selected["columns"]
          and table["rows"] == [[both] + row for row in selected["rows"]] + [[prec] + row for row in own[prec]["rows"]],
          f"precision reports compared by experiment=: {status} {table.get('columns')}")
    # a job without that experiment: 404 naming experiment and the job; a name no job has: 400
    status, _, body = d.get(f"/v1/compare?jobs={both},{acc[0]}&experiment=precision_report")
    check(status == 404 and body["error"]["field"] == "experiment" and f"job {acc[0]}" in body["error"]["message"],
          f"experiment= a job did not run: {status} {body}")
    expect_error(d, "GET", f"/v1/compare?jobs={both},{prec}&experiment=nope", 400, "bad_request", "experiment")
    for selector in ("run=0", "range=forward"):  # profile's selectors on numerics jobs
        expect_error(d, "GET", f"/v1/compare?jobs={both},{prec}&{selector}", 400, "bad_request", selector.split("=")[0])
    # jobs of two kinds: the message says which are which
    status, _, body = d.get(f"/v1/compare?jobs={benchmark_job},{acc[0]}")
    message = body.get("error", {}).get("message", "") if isinstance(body, dict) else ""
    check(status == 400 and body["error"]["field"] == "jobs" and "benchmark" in message and "numerics" in message,
          f"jobs of two kinds: {status} {body}")
    return acc


def test_profile_fixture():
    """run= and range= narrow each profile job's kernel summary, as /table?run=&range= does, on the saved
    H200 database of tests/web/fixtures (profile jobs 1, two runs, and 4, three runs; the daemon only reads
    them back)."""
    fixture = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "web", "fixtures", "gpu-h200.db.gz")
    db = os.path.join(test_api.TMP, "compare-fixture.db")
    with gzip.open(fixture) as src, open(db, "wb") as dst:
        dst.write(src.read())
    d = Daemon("compare-fixture", db=db)
    try:
        for selectors in ("range=forward", "run=1", "run=1&range=layer%203"):
            own = {j: d.get(f"/v1/jobs/{j}/table?{selectors}")[2] for j in (1, 4)}
            status, _, table = d.get(f"/v1/compare?jobs=1,4&{selectors}")
            check(status == 200 and all(own[j].get("rows") for j in (1, 4))
                  and table["columns"] == ["Job"] + own[1]["columns"]
                  and table["rows"] == [[j] + row for j in (1, 4) for row in own[j]["rows"]],
                  f"profile jobs compared by {selectors}: {status} {str(table)[:300]}")
        status, _, whole = d.get("/v1/compare?jobs=1,4")
        status_r, _, narrowed = d.get("/v1/compare?jobs=1,4&range=forward")
        check(status == 200 and status_r == 200 and len(narrowed["rows"]) < len(whole["rows"]),
              f"range= narrows the comparison: {len(narrowed.get('rows', []))} of {len(whole.get('rows', []))} rows")
        # job 1 has no run 2; no job has a range named nope: 404 naming the selector and the job
        status, _, body = d.get("/v1/compare?jobs=4,1&run=2")
        check(status == 404 and body["error"]["field"] == "run" and "job 1" in body["error"]["message"],
              f"a run one job lacks: {status} {body}")
        status, _, body = d.get("/v1/compare?jobs=1,4&range=nope")
        check(status == 404 and body["error"]["field"] == "range" and "nope" in body["error"]["message"],
              f"a range no job has: {status} {body}")
        expect_error(d, "GET", "/v1/compare?jobs=1,4&experiment=accumulation", 400, "bad_request", "experiment")
        expect_error(d, "GET", "/v1/compare?jobs=1,4&run=x", 400, "bad_request", "run")
        expect_error(d, "GET", "/v1/compare?jobs=1,4&range=forward&range=backward", 400, "bad_request", "range")
    finally:
        d.stop()


def test_refusals(d, done):
    a, b = done
    for query in ("", "jobs=", f"jobs={a}", f"jobs={a},{a}", f"jobs={a},,{b}", f"jobs={a},{b},",
                  f"jobs={a},x", f"jobs={a},-{b}", f"jobs={a},+{b}", f"jobs={a},{b}.0", f"jobs={a},%20{b}",
                  "jobs=" + ",".join(str(i) for i in range(1, 66)), f"jobs={a}&jobs={b}"):
        expect_error(d, "GET", f"/v1/compare?{query}", 400, "bad_request", "jobs")
    status, _, body = d.get(f"/v1/compare?jobs={a},999999")
    check(status == 404 and body["error"]["field"] == "jobs" and "999999" in body["error"]["message"],
          f"a job that does not exist: {status} {body}")
    expect_error(d, "POST", f"/v1/compare?jobs={a},{b}", 405, "method_not_allowed")
    # a job not finished (running, or queued behind it on the one CPU worker): 409 naming it
    running = d.submit({"kind": "numerics", "count": LONG_COUNT})
    d.wait_status(running["id"], ("running",))
    queued = d.submit({"kind": "numerics", "count": LONG_COUNT})
    for job, state in ((running, "running"), (queued, "queued")):
        status, _, body = d.get(f"/v1/compare?jobs={a},{job['id']}")
        check(status == 409 and body["error"]["field"] == "jobs" and f"job {job['id']} is {state}" in body["error"]["message"],
              f"a {state} job: {status} {body}")
    for job in (queued, running):
        d.request("DELETE", f"/v1/jobs/{job['id']}")
    d.wait_status(running["id"], ("cancelled", "failed"), timeout=60)
    # a cancelled job has finished: its rows (here none) are compared
    status, _, table = d.get(f"/v1/compare?jobs={a},{running['id']}")
    check(status == 200 and column(table, "Job") and set(column(table, "Job")) == {a},
          f"a cancelled job compared: {status} {table}")


def main():
    d = Daemon("compare")
    try:
        print("-- test_benchmark", flush=True)
        benchmark_job = test_benchmark(d)
        print("-- test_numerics", flush=True)
        numerics = test_numerics(d, benchmark_job)
        print("-- test_refusals", flush=True)
        test_refusals(d, numerics)
        print("-- experiment= on a benchmark job", flush=True)
        expect_error(d, "GET", f"/v1/compare?jobs={benchmark_job},{benchmark_job + 1}&experiment=accumulation", 400,
                     "bad_request", "experiment")
    finally:
        d.stop()
    print("-- test_profile_fixture", flush=True)
    test_profile_fixture()
    return test_api.verdict("all compare tests passed")


if __name__ == "__main__":
    sys.exit(main())
