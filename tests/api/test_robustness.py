#!/usr/bin/env python3
"""Black-box robustness tests beyond test_api.py's: requests that are
ambiguous, cancels repeated over and over, and the daemon under conditions
outside the request (a database that refuses writes for a while), against a real lmperfd on a random
loopback port with its own database. The helpers (Daemon, check,
expect_error) are test_api.py's.

usage: test_robustness.py LMPERFD [WEB_ROOT]"""
import os
import sqlite3
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_api  # noqa: E402  (reads LMPERFD and WEB_ROOT from sys.argv)
from test_api import LONG_COUNT, Daemon, check, expect_error  # noqa: E402


def test_repeated_query_arguments(d):
    """A query argument an endpoint reads, given twice, is a 400 naming it
    (which value was meant is not known); one it does not read is a 400 naming it, where the route reads
    some (a misspelt one), and ignored where it reads none."""
    job = d.submit({"kind": "numerics", "count": 10})
    d.wait_status(job["id"], ("succeeded",))
    for path, field in (("/v1/jobs?status=failed&status=succeeded", "status"),
                        ("/v1/jobs?kind=numerics&kind=benchmark", "kind"),
                        ("/v1/jobs?limit=1&limit=5", "limit"),
                        ("/v1/jobs?offset=0&offset=1", "offset"),
                        (f"/v1/jobs/{job['id']}/table?format=md&format=csv", "format"),
                        (f"/v1/jobs/{job['id']}/table?experiment=accumulation&experiment=precision_report",
                         "experiment"),
                        (f"/v1/jobs/{job['id']}/events?run=0&run=1", "run")):
        expect_error(d, "GET", path, 400, "bad_request", field)
    expect_error(d, "GET", "/v1/jobs?status=succeeded&x=1&x=2", 400, "bad_request", "x")
    status, _, body = d.get("/v1/system?x=1&x=2")
    check(status == 200, f"an argument read by no one, twice, where none is read: {status}")


def test_attention_cpu_memory(d):
    """An attention point too large for the host on the CPU worker is an OOM
    row asking for the whole point's memory (its eight B x H x T x d float32
    tensors and the row statistics), refused before any of it is allocated:
    the worker is not left to the kernel's OOM killer, and the next point runs."""
    worker = d.get("/v1/system")[2]["workers"][0]
    B, H, T, D = 1024, 63, 1 << 20, 256
    job = d.submit({"kind": "attention", "impl": "naive", "dtype": "float32", "batch": B, "heads": H,
                    "seq_len": [T, 1], "d_head": D, "passes": 1, "warmup": 0})
    done = d.wait_status(job["id"], ("succeeded", "failed"), timeout=60)
    runs = {r.get("seq_len"): r for r in done.get("runs", [])}
    big = runs.get(T, {})
    want = (8 * B * H * T * D + B * H * T) * 4
    check(done["status"] == "succeeded" and big.get("oom") is True and big.get("oom_request_bytes") == want,
          f"the point too large for the host: {done['status']} {big.get('oom')} {big.get('oom_request_bytes')}, "
          f"want {want}")
    # (T 1: the point after it stays small, 0.5 GB, so that it runs in seconds under the sanitizers too)
    check(runs.get(1, {}).get("point_status") == "ok", f"the point after it: {runs.get(1)}")
    after = d.get("/v1/system")[2]["workers"][0]
    check(after["pid"] == worker["pid"] and after["restarts"] == worker["restarts"], f"worker untouched: {after}")


def log_says(d, text):
    with open(d.log_path, errors="replace") as f:
        return text in f.read()


def answers_while_scheduler_waits(d, ended_id, seconds=6, limit_s=1.0):
    """The scheduler thread retries the refused write (each try waits out the
    store's busy timeout, 10 s): meanwhile the answers that need no write of
    their own (the scheduler's view, the database's reads, a cancel of the job
    whose end waits) come at once, over and over."""
    probes = (("GET", "/v1/system", 200), ("GET", "/healthz", 200), ("GET", "/v1/jobs", 200),
              ("DELETE", f"/v1/jobs/{ended_id}", 409))
    slowest = {}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for method, path, want in probes:
            start = time.monotonic()
            status, _, _ = d.request(method, path)
            took = time.monotonic() - start
            slowest[path] = max(slowest.get(path, 0.0), took)
            if not check(status == want and took < limit_s,
                         f"{method} {path} while the scheduler waits on the database: {status} in {took:.2f} s"):
                return
        time.sleep(0.2)
    print("   slowest answers while the database refused writes:",
          ", ".join(f"{path} {took:.3f} s" for path, took in slowest.items()), flush=True)


def test_database_refuses_writes():
    """Another writer holds the database's lock past the busy timeout (a full
    disk reads the same to the daemon): a submission is a 503 naming the
    cause, and the scheduler keeps the end of the job that stopped meanwhile
    and the job queued behind it, recording both once the database takes
    writes again; neither is left running or queued there. Meanwhile the
    requests that write nothing answer at once, though the scheduler thread
    waits on the database."""
    d = Daemon("locked")
    try:
        timed_out = d.submit({"kind": "numerics", "count": LONG_COUNT, "timeout_s": 1})
        queued = d.submit({"kind": "numerics", "count": 10})
        d.wait_status(timed_out["id"], ("running",))
        holder = sqlite3.connect(d.db, isolation_level=None, timeout=30)
        holder.execute("BEGIN IMMEDIATE")
        try:
            expect_error(d, "POST", "/v1/jobs", 503, "unavailable", body={"kind": "numerics"})
            # the scheduler has ended the job (its write refused) once no worker holds it
            d.wait_for(lambda: all(w["job_id"] != timed_out["id"] for w in d.get("/v1/system")[2]["workers"]),
                       "the timed-out job to leave its worker", timeout=90)
            # its end being written (the store's busy timeout not out yet): a DELETE is told it has just ended,
            # not that the database cannot be written (nothing has refused the write yet)
            status, _, body = d.request("DELETE", f"/v1/jobs/{timed_out['id']}")
            if not log_says(d, "its end (failed) is kept"):
                check(status == 409 and "just ended" in body["error"]["message"],
                      f"DELETE of a job whose end is being written: {status} {body}")
            d.wait_for(lambda: log_says(d, "its end (failed) is kept"), "the database to refuse the job's end",
                       timeout=90)
            check(d.job(timed_out["id"])["status"] == "running" and d.job(queued["id"])["status"] == "queued",
                  "nothing written while the database refuses writes")
            # a cancel of the ended job: 409 saying its end waits to be recorded, not "already running"
            status, _, body = d.request("DELETE", f"/v1/jobs/{timed_out['id']}")
            check(status == 409 and "not recorded yet" in body["error"]["message"],
                  f"DELETE of a job whose end waits to be written: {status} {body}")
            answers_while_scheduler_waits(d, timed_out["id"])
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        done = d.wait_status(timed_out["id"], ("failed", "succeeded", "cancelled"), timeout=60)
        check(done["status"] == "failed" and "timed out" in (done["error"] or ""),
              f"the end kept while the database refused it: {done['status']} {done['error']}")
        after = d.wait_status(queued["id"], ("succeeded", "failed"), timeout=60)
        check(after["status"] == "succeeded", f"the job queued while the database refused writes: {after['status']}")
        check(d.get("/v1/jobs?limit=1")[2]["total"] == 2, "the refused submission stored nothing")
        check(log_says(d, "its end (failed) is recorded now"), "the late record is logged")
    finally:
        code = d.stop()
        check(code == 0, f"exit status after SIGTERM: {code}")  # a sanitizer's report: not 0


def delete_many(d, job_id, threads=4, each=25):
    """DELETE job_id threads x each times, from threads at once: the statuses."""
    statuses, lock = [], threading.Lock()

    def send():
        for _ in range(each):
            status, _, _ = d.request("DELETE", f"/v1/jobs/{job_id}")
            with lock:
                statuses.append(status)

    workers = [threading.Thread(target=send) for _ in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    return statuses


def test_repeated_cancels(d):
    """Cancels over and over, of running, queued and just-ending jobs: each
    DELETE is a 200 (queued), 202 (running) or 409 (ended), never another
    status nor a lost request; each job cancelled while running ends cancelled
    (by its worker at a safe point: no worker killed), one cancelled while
    queued never runs, one that ended first keeps its end, and none of it
    touches the jobs after them: they run to success. Afterwards the worker is
    idle, the queue empty, and nothing is left running or queued."""
    restarts = d.get("/v1/system")[2]["workers"][0]["restarts"]
    for round_ in range(6):
        running = d.submit({"kind": "numerics", "count": LONG_COUNT, "label": f"cancel round {round_}"})
        queued = d.submit({"kind": "numerics", "count": 10})
        after = d.submit({"kind": "numerics", "count": 10})
        d.wait_status(running["id"], ("running",))
        statuses = delete_many(d, queued["id"], threads=2, each=10)  # first: it runs once the other has stopped
        check(statuses.count(200) == 1 and set(statuses) <= {200, 409},
              f"round {round_}: DELETEs of a queued job: one 200, the rest 409: {statuses}")
        statuses = delete_many(d, running["id"])
        check(set(statuses) <= {202, 409} and 202 in statuses,
              f"round {round_}: 100 DELETEs of a running job: {sorted(set(statuses))}")
        done = d.wait_status(running["id"], ("cancelled", "failed", "succeeded"), timeout=60)
        check(done["status"] == "cancelled" and done.get("cancel_requested_at"),
              f"round {round_}: the running job after its cancels: {done['status']} {done.get('error')}")
        check(d.job(queued["id"])["status"] == "cancelled" and not d.job(queued["id"]).get("runs"),
              f"round {round_}: the job cancelled while queued: {d.job(queued['id'])['status']}")
        ended = d.wait_status(after["id"], ("succeeded", "failed", "cancelled"), timeout=60)
        check(ended["status"] == "succeeded" and not ended.get("cancel_requested_at"),
              f"round {round_}: the job after the cancelled ones: {ended['status']}")
    # short jobs cancelled as they start and end: whatever the moment, an answer of the three, and an end that
    # agrees with it (a 202 before its end: cancelled, or succeeded when it ended before the worker saw the request)
    for k in range(10):
        job = d.submit({"kind": "numerics", "count": 1000 * (k + 1)})
        statuses = delete_many(d, job["id"], threads=2, each=5)
        done = d.wait_status(job["id"], ("succeeded", "failed", "cancelled"), timeout=60)
        ok = set(statuses) <= {200, 202, 409} and (done["status"] == "cancelled" or
                                                    (done["status"] == "succeeded" and 200 not in statuses))
        check(ok, f"a short job cancelled as it runs: {sorted(set(statuses))}, ended {done['status']}")
    d.wait_for(lambda: d.workers_state() == ["idle"], "the worker to be idle")
    system = d.get("/v1/system")[2]
    worker = system["workers"][0]
    check(worker["job_id"] is None and worker["restarts"] == restarts,
          f"the worker after the cancels: job {worker['job_id']}, restarts {worker['restarts']} (before {restarts})")
    for status in ("running", "queued"):
        left = d.get(f"/v1/jobs?status={status}")[2]["total"]
        check(left == 0, f"{left} job(s) left {status}")
    # the daemon still takes and runs jobs, and a DELETE of an ended one is a 409
    last = d.submit({"kind": "numerics", "count": 10})
    check(d.wait_status(last["id"], ("succeeded", "failed"), timeout=60)["status"] == "succeeded",
          "a job after the cancels")
    expect_error(d, "DELETE", f"/v1/jobs/{last['id']}", 409, "conflict", "id")


def main():
    d = Daemon("robust")
    try:
        for test in (test_repeated_query_arguments, test_attention_cpu_memory, test_repeated_cancels):
            print("--", test.__name__, flush=True)
            test(d)
    finally:
        d.stop()
    for test in (test_database_refuses_writes,):
        print("--", test.__name__, flush=True)
        test()
    return test_api.verdict("all robustness tests passed")


if __name__ == "__main__":
    sys.exit(main())
