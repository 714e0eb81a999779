"""A lmperfd started for one test script, and its HTTP API, for the scripts
that drive the daemon end to end (seed_jobs_check.py on a GPU machine,
memory_check.py in the CPU suite and with --gpu)."""
import contextlib
import json
import os
import subprocess
import time
import urllib.error
import urllib.request


def call(port, method, path, body=None, raw=False):
    """One request to the daemon on 127.0.0.1:port; body: a JSON value or None.
    Returns (HTTP status, the JSON answer), or (status, text) when raw (md, csv);
    an error answer is always JSON."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            text = r.read().decode()
            return r.status, text if raw else json.loads(text)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def wait_job(port, job_id, timeout_s):
    """The job once it is no longer queued or running, or as it is after timeout_s."""
    deadline = time.time() + timeout_s
    while True:
        _, job = call(port, "GET", f"/v1/jobs/{job_id}")
        if job["status"] not in ("queued", "running") or time.time() > deadline:
            return job
        time.sleep(0.5)


@contextlib.contextmanager
def started_daemon(lmperfd, folder, name, extra_args=()):
    """lmperfd on a free loopback port, its database folder/NAME.db and its log
    folder/NAME.log; yields (port, database path) once every worker is idle, and
    stops the daemon (SIGTERM) afterwards."""
    os.makedirs(folder, exist_ok=True)
    db = os.path.join(folder, f"{name}.db")
    port_file = os.path.join(folder, f"{name}.port")
    if os.path.exists(port_file):  # an earlier run's: the port is read once the new daemon writes it
        os.unlink(port_file)
    log = open(os.path.join(folder, f"{name}.log"), "w")
    proc = subprocess.Popen([lmperfd, "--port", "0", "--port-file", port_file, "--db", db, *extra_args],
                            stdout=log, stderr=log)
    try:
        for _ in range(300):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            if proc.poll() is not None:
                raise RuntimeError(f"lmperfd exited with {proc.returncode}; see {log.name}")
            time.sleep(0.1)
        port = int(open(port_file).read())
        for _ in range(300):
            _, system = call(port, "GET", "/v1/system")
            if system["workers"] and all(w["state"] == "idle" for w in system["workers"]):
                break
            time.sleep(0.1)
        yield port, db
    finally:
        proc.terminate()
        proc.wait(60)
        log.close()
