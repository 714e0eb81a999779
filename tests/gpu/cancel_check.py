#!/usr/bin/env python3
"""Cancellation and `lmperfd submit` on a GPU worker, end to end.

1. A long benchmark job (medium, fp32, T 1024: ≈ 0.25 s per step, 400 steps)
   runs on the cuda worker; once running, 40 concurrent DELETEs: each answers
   202 or 409, never anything else; the job ends `cancelled` within the grace
   period, with its cancel time recorded.
2. A queued job cancelled before it starts ends cancelled with no runs.
3. The worker is idle again, never restarted, and a short job submitted with
   `lmperfd submit --table md` (the daemon's own HTTP client) succeeds on the
   GPU: exit 0 and a table row for the point.
usage: cancel_check.py LMPERFD OUT_DIR [--cpu]    exit 0 passed, 1 a check failed, 77 no GPU worker"""
import concurrent.futures
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon_client import call, started_daemon, wait_job  # noqa: E402

failures = 0


def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures += 1


def wait_running(port, job_id, timeout_s):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        _, job = call(port, "GET", f"/v1/jobs/{job_id}")
        if job["status"] != "queued":
            return job
        time.sleep(0.2)
    return job


def main():
    lmperfd, out = sys.argv[1], sys.argv[2]
    long_spec = {"kind": "benchmark", "model": "medium", "context_length": 1024, "batch_size": 4,
                 "precision": "fp32", "mode": "train_step", "warmup_steps": 1, "measure_steps": 400}
    with started_daemon(lmperfd, out, "cancel") as (port, _db):
        _, system = call(port, "GET", "/v1/system")
        workers = system["workers"]
        if not any((w.get("device") or {}).get("gpu_index", -1) >= 0 for w in workers) and "--cpu" not in sys.argv:
            print("no GPU worker (--cpu runs the same checks on a cpu worker):", workers)
            return 77
        restarts_before = [w.get("restarts", 0) for w in workers]

        st, running = call(port, "POST", "/v1/jobs", long_spec)
        check(st == 201 or st == 202, f"long job accepted ({st})")
        st, queued = call(port, "POST", "/v1/jobs", dict(long_spec, measure_steps=5))
        check(st == 201 or st == 202, f"second job accepted ({st})")
        job = wait_running(port, running["id"], 60)
        check(job["status"] == "running", f"long job running ({job['status']})")
        time.sleep(2.0)  # inside its measured steps

        st, _ = call(port, "DELETE", f"/v1/jobs/{queued['id']}")
        check(st == 200, f"queued job cancelled at once ({st})")
        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            codes = list(pool.map(lambda _: call(port, "DELETE", f"/v1/jobs/{running['id']}")[0], range(40)))
        check(set(codes) <= {202, 409} and 202 in codes, f"40 DELETEs of the running job: {sorted(set(codes))}")
        done = wait_job(port, running["id"], 60)
        took = time.time() - t0
        check(done["status"] == "cancelled" and bool(done.get("cancel_requested_at")),
              f"running job ended {done['status']} {took:.1f} s after the DELETEs")
        q = wait_job(port, queued["id"], 10)
        check(q["status"] == "cancelled" and not q.get("runs"), f"queued job {q['status']}, runs {q.get('runs')}")

        for _ in range(100):
            _, system = call(port, "GET", "/v1/system")
            if all(w["state"] == "idle" for w in system["workers"]):
                break
            time.sleep(0.1)
        check(all(w["state"] == "idle" for w in system["workers"]), "every worker idle")
        check([w.get("restarts", 0) for w in system["workers"]] == restarts_before, "no worker restarted")

        spec_path = os.path.join(out, "short.json")
        with open(spec_path, "w") as f:
            f.write('{"kind":"benchmark","model":"small","context_length":128,"batch_size":4,'
                    '"precision":"tf32","mode":"train_step","warmup_steps":1,"measure_steps":3}')
        p = subprocess.run([lmperfd, "submit", spec_path, "--table", "md", "--quiet",
                            "--url", f"http://127.0.0.1:{port}"], capture_output=True, text=True, timeout=120)
        rows = [ln for ln in p.stdout.splitlines() if ln.startswith("| small")]
        check(p.returncode == 0 and len(rows) == 1, f"lmperfd submit --table md: rc {p.returncode}, rows {rows}")
        if p.returncode != 0:
            print(p.stdout[-2000:], p.stderr[-2000:])
    print("cancel_check:", "ok" if failures == 0 else f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
