#!/usr/bin/env python3
"""`lmperfd submit SPEC` against a real lmperfd (with a token) on a random
loopback port: the job followed to its end and its document or table printed
(equal to what the API serves), the exit status of a succeeded (0), failed (1)
and refused (2: the API's error document on stdout) job, the token (missing:
1, saying so; from LMPERF_TOKEN), --no-wait, the URL from LMPERF_PORT, bad
URLs, a daemon that is not there, Ctrl-C: the first cancels the job and
waits for its end, a second stops waiting (130), and answers that are not
well-formed HTTP (from a fake daemon): refused with the reason, at once.

usage: test_submit.py LMPERFD [WEB_ROOT]"""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_api  # noqa: E402  (reads LMPERFD and WEB_ROOT from sys.argv)
from test_api import LMPERFD, LONG_COUNT, TMP, Daemon, check  # noqa: E402

TOKEN = "submit-test-token"
BENCH = {"kind": "benchmark", "model": {"name": "m", "d_model": 16, "d_ff": 32, "num_layers": 1, "num_heads": 1},
         "vocab_size": 50, "batch_size": 1, "context_length": [8, 16], "mode": "forward", "warmup_steps": 1,
         "measure_steps": 3}


def spec_file(name, spec):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(spec if isinstance(spec, str) else json.dumps(spec))
    return path


def submit(d, *args, token=TOKEN, env=None, timeout=120):
    """lmperfd submit ARGS against d (--url unless env gives the way); (rc, stdout, stderr)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("LMPERF_")}
    if token:
        e["LMPERF_TOKEN"] = token
    e.update(env or {})
    url = [] if env and ("LMPERF_PORT" in env or "LMPERF_URL" in env) else ["--url", f"http://127.0.0.1:{d.port}"]
    p = subprocess.run([LMPERFD, "submit", *args, *url], capture_output=True, text=True, timeout=timeout, env=e)
    return p.returncode, p.stdout, p.stderr


def test_outcomes(d):
    rc, out, err = submit(d, spec_file("numerics.json", {"kind": "numerics", "count": 100}))
    job = json.loads(out) if rc == 0 else {}
    check(rc == 0 and job.get("status") == "succeeded" and job.get("runs"),
          f"a numerics job: rc {rc}, {out[:200]} {err}")
    if job:
        served = d.get(f"/v1/jobs/{job['id']}")[2]
        check(job == served, "the printed document is GET /v1/jobs/{id}'s")
        check(f"job {job['id']} succeeded" in err, f"the status lines on stderr: {err}")

    rc, out, err = submit(d, spec_file("bench.json", BENCH), "--table", "md", "--quiet")
    jobs = d.get("/v1/jobs?kind=benchmark")[2]["jobs"]
    check(rc == 0 and jobs and err == "", f"--table md: rc {rc}, stderr {err!r}")
    if jobs:
        table = d.get(f"/v1/jobs/{jobs[0]['id']}/table?format=md")[2]
        check(out == table if table.endswith("\n") else out == table + "\n",
              f"--table md is GET /table?format=md's:\n{out}\n---\n{table}")
        check(len(out.splitlines()) == 2 + 2, f"two contexts, two rows: {out}")
    rc, out, err = submit(d, spec_file("bench.json", BENCH), "--table", "md", "--pivot", "precision", "--quiet")
    jobs = d.get("/v1/jobs?kind=benchmark")[2]["jobs"]
    if jobs:
        table = d.get(f"/v1/jobs/{jobs[0]['id']}/table?format=md&pivot=precision")[2]
        check(rc == 0 and out.startswith("| Model |") and "FP32 Total (ms)" in out and
              (out == table if table.endswith("\n") else out == table + "\n"),
              f"--table md --pivot precision is GET /table?pivot=precision's: rc {rc}\n{out}\n---\n{table}")

    # a spec the daemon refuses: 2, its error document on stdout, the reason on stderr
    rc, out, err = submit(d, spec_file("bad.json", {"kind": "numerics", "count": "many"}))
    doc = json.loads(out) if out.strip().startswith("{") else {}
    check(rc == 2 and doc.get("error", {}).get("field") == "count" and "count" in err,
          f"a refused spec: rc {rc}, {out} {err}")
    rc, out, err = submit(d, spec_file("notjson.json", "{\"kind\": "))
    check(rc == 2 and "error" in out, f"not JSON: rc {rc}, {out} {err}")
    # a job that fails (past its timeout_s): 1, the reason on stderr, the document on stdout
    rc, out, err = submit(d, spec_file("slow.json", {"kind": "numerics", "count": LONG_COUNT, "timeout_s": 1}))
    check(rc == 1 and json.loads(out or "{}").get("status") == "failed" and "failed" in err,
          f"a failed job: rc {rc}, {out[:200]} {err}")


def test_refused_at_submit(d):
    """Specs that could only fail once run are refused when posted, by the API and by `lmperfd submit` alike
    (2, the API's error document on stdout, the field on stderr), and no job is made."""
    before = d.get("/v1/jobs")[2]["total"]
    for name, spec, field, needle in (
            ("mpi-worlds", {"kind": "allreduce", "backend": "mpi", "sizes": [1024], "world_sizes": [65, 128]},
             "world_sizes", "at most 64 ranks"),
            ("both-worlds", {"kind": "allreduce", "backend": ["nccl", "mpi"], "sizes": [1024], "world_sizes": [100]},
             "world_sizes", "give a hostfile")):
        got, _, body = d.request("POST", "/v1/jobs", spec, headers={"Authorization": f"Bearer {TOKEN}"})
        error = body.get("error", {}) if isinstance(body, dict) else {}
        check(got == 400 and error.get("field") == field and needle in error.get("message", ""),
              f"POST {name}: {got} {body}, want 400 naming {field}: {needle}")
        rc, out, err = submit(d, spec_file(name + ".json", spec))
        doc = json.loads(out) if out.strip().startswith("{") else {}
        check(rc == 2 and doc.get("error", {}).get("field") == field and f"(field {field})" in err
              and needle in err, f"submit {name}: rc {rc}, {out} {err}")
    # --pivot for a kind whose table has none: refused before the job is posted (not once it has run)
    for spec in ({"kind": "attention", "impl": "naive", "seq_len": 16, "d_head": 16, "passes": 1, "warmup": 0},
                 {"kind": "allreduce", "backend": "mpi", "sizes": [1024], "world_sizes": [1]},
                 {"kind": "numerics", "count": 10}):
        rc, out, err = submit(d, spec_file("nopivot.json", spec), "--table", "md", "--pivot", "precision")
        check(rc == 2 and not out and f"{spec['kind']} job's table takes no pivot" in err
              and "the job was not submitted" in err and "queued" not in err,
              f"submit --pivot precision of a {spec['kind']} job: rc {rc}, {out} {err}")
    # mpi world sizes up to 64 beside larger ones: the larger ones are failed points, the others run
    got, _, body = d.request("POST", "/v1/jobs", {"kind": "allreduce", "backend": "mpi", "sizes": [1024],
                                                  "world_sizes": [1, 65], "warmup": 0, "iterations": 1},
                             headers={"Authorization": f"Bearer {TOKEN}"})
    check(got == 202, f"world sizes 1 and 65 are accepted: {got} {body}")
    if got == 202:
        d.wait_status(body["id"], ("succeeded",), timeout=60)
    check(d.get("/v1/jobs")[2]["total"] == before + (got == 202), "no job made for a refused spec")


def test_access(d):
    path = spec_file("numerics.json", {"kind": "numerics", "count": 10})
    rc, out, err = submit(d, path, token=None)
    check(rc == 1 and "401" in err and "LMPERF_TOKEN" in err, f"no token: rc {rc}, {err}")
    rc, out, err = submit(d, path, "--token", "wrong", token=None)
    check(rc == 1 and "401" in err, f"a wrong token: rc {rc}, {err}")
    rc, out, err = submit(d, path, "--token", TOKEN, token=None)
    check(rc == 0, f"--token: rc {rc}, {err}")
    rc, out, err = submit(d, path, env={"LMPERF_PORT": str(d.port)})
    check(rc == 0, f"the URL from LMPERF_PORT: rc {rc}, {err}")
    rc, out, err = submit(d, path, env={"LMPERF_URL": f"http://localhost:{d.port}/"})
    check(rc == 0, f"LMPERF_URL with a trailing /: rc {rc}, {err}")
    for url in ("https://127.0.0.1:1", "127.0.0.1:8080", "http://127.0.0.1:0", "http://127.0.0.1:99999",
                "http://:80", "http://127.0.0.1:80?x=1", "http://[::1"):
        rc, out, err = submit(d, path, env={"LMPERF_URL": url})
        check(rc == 2 and "lmperfd submit:" in err, f"URL {url}: rc {rc}, {err}")
    # a URL with the API's own path in it (.../v1): the 404 says that its path goes before /v1/jobs
    for prefix in ("/v1", "/v1/jobs"):
        rc, out, err = submit(d, path, env={"LMPERF_URL": f"http://127.0.0.1:{d.port}{prefix}"})
        check(rc == 1 and "answered 404" in err and f"the path {prefix} of it is put before /v1/jobs" in err,
              f"LMPERF_URL ...{prefix}: rc {rc}, {err}")
    t0 = time.time()
    rc, out, err = submit(d, path, env={"LMPERF_URL": "http://127.0.0.1:1"})
    check(rc == 1 and "is lmperfd running" in err and time.time() - t0 < 10, f"no daemon there: rc {rc}, {err}")
    for args in ((), ("--table",), ("--table", "xml"), (path, "--no-wait", "--table", "md"), (path, "--bogus"),
                 (path, path), (path, "--pivot", "precision"), (path, "--table", "md", "--pivot", "model")):
        rc, out, err = submit(d, *args)
        check(rc == 2 and err, f"arguments {args}: rc {rc}, {err}")
    # the daemon's --port (or --host) given to submit: refused, pointing to --url; --help says so too
    for flag in ("--port", "--host"):
        rc, out, err = submit(d, path, flag, "8081")
        check(rc == 2 and f"{flag} is the daemon's option" in err and "--url http://HOST:PORT" in err,
              f"submit {flag}: rc {rc}, {err}")
    p = subprocess.run([LMPERFD, "--help"], capture_output=True, text=True, timeout=10)
    check("LMPERF_HOST and LMPERF_PORT" in p.stdout and "submit takes no" in p.stdout,
          f"--help: where submit finds the daemon: {p.stdout!r}")

    rc, out, err = submit(d, spec_file("long.json", {"kind": "numerics", "count": LONG_COUNT}), "--no-wait")
    job = json.loads(out) if rc == 0 else {}
    check(rc == 0 and job.get("status") in ("queued", "running"), f"--no-wait: rc {rc}, {out[:200]}")
    if job:
        d.request("DELETE", f"/v1/jobs/{job['id']}", headers={"Authorization": f"Bearer {TOKEN}"})
        d.wait_status(job["id"], ("cancelled",), timeout=60)


def interrupted(d, signals, freeze=False):
    """Ctrl-C (SIGINT) sent signals times to a submit of a long job once it runs (freeze: with the daemon
    stopped by SIGSTOP meanwhile, so that no request is answered); (rc, stderr, the job)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("LMPERF_")}
    e["LMPERF_TOKEN"] = TOKEN
    path = spec_file("long.json", {"kind": "numerics", "count": LONG_COUNT})
    p = subprocess.Popen([LMPERFD, "submit", path, "--url", f"http://127.0.0.1:{d.port}"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=e)
    deadline = time.time() + 30
    running = None
    while time.time() < deadline and not running:
        running = [j for j in d.get("/v1/jobs?status=running")[2]["jobs"]]
        time.sleep(0.1)
    if freeze:
        time.sleep(0.6)  # the submit is polling: its next request waits on the stopped daemon
        d.proc.send_signal(signal.SIGSTOP)
    try:
        for _ in range(signals):
            p.send_signal(signal.SIGINT)
            time.sleep(0.3)
        _, err = p.communicate(timeout=10 if freeze else 90)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        check(False, f"submit did not end after {signals} SIGINT: {err}")
    finally:
        if freeze:
            d.proc.send_signal(signal.SIGCONT)
    return p.returncode, err, running[0] if running else None


def test_interrupt(d):
    rc, err, job = interrupted(d, 1)
    check(job is not None, "the long job ran")
    if job:
        status = d.get(f"/v1/jobs/{job['id']}")[2]["status"]
        check(rc == 1 and status == "cancelled" and f"cancelling job {job['id']}" in err and "cancelled" in err,
              f"one Ctrl-C cancels the job and waits for its end: rc {rc}, job {status}, {err}")
    # a second Ctrl-C stops waiting at once, even when the daemon does not answer (stopped: SIGSTOP)
    rc, err, job = interrupted(d, 2, freeze=True)
    check(rc == 130 and "stopped waiting" in err, f"a second Ctrl-C stops waiting: rc {rc}, {err}")
    if job:
        d.request("DELETE", f"/v1/jobs/{job['id']}", headers={"Authorization": f"Bearer {TOKEN}"})
        done = d.wait_status(job["id"], ("cancelled",), timeout=60)
        check(done["status"] == "cancelled", f"the job is cancelled: {done['status']}")


class FakeDaemon:
    """A loopback server that answers each request with answers[method]
    (bytes), then closes the connection, or keeps it open hold_s seconds (as a
    server ignoring Connection: close would)."""

    def __init__(self, answers, hold_s=0.0):
        self.answers, self.hold_s = answers, hold_s
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.stopping = False
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while not self.stopping:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self.answer, args=(conn,), daemon=True).start()

    def answer(self, conn):
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                got = conn.recv(65536)
                if not got:
                    return
                data += got
            head, _, body = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(body) < length:
                got = conn.recv(65536)
                if not got:
                    return
                body += got
            conn.sendall(self.answers.get(head.split(b" ")[0].decode(), b"HTTP/1.1 500 Not scripted\r\n\r\n"))
            time.sleep(self.hold_s)

    def stop(self):
        self.stopping = True
        self.listener.close()


def test_malformed_answers(d):
    """Answers that are not well-formed HTTP, from a fake daemon, to the
    submit's POST: each refused with its reason and exit status 1 at once
    (none crashes the client, hangs it or is taken as an answer); a complete
    answer on a connection the server keeps open is used at once."""
    path = spec_file("fake.json", {"kind": "numerics", "count": 10})
    job = b'{"id": 7, "status": "queued"}'
    chunked = b"HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    cases = (
        ("a chunk size of 2^64 - 1", chunked + b"ffffffffffffffff\r\n" + job + b"\r\n0\r\n\r\n", "past the 1024 MiB limit"),
        ("a chunk size that wraps", chunked + b"10000000000000001\r\n" + job + b"\r\n0\r\n\r\n", "past the 1024 MiB limit"),
        ("a negative chunk size", chunked + b"-1\r\n" + job + b"\r\n0\r\n\r\n", "malformed chunk-size line"),
        ("no CRLF after a chunk", chunked + b"%x\r\n" % len(job) + job + b"XX0\r\n\r\n", "no CRLF after the chunk"),
        ("a chunked body cut short", chunked + b"%x\r\n" % (len(job) + 10) + job, "cut short"),
        ("no last chunk", chunked + b"%x\r\n" % len(job) + job + b"\r\n", "cut short"),
        ("Content-Length larger than the body",
         b"HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n" + job,
         "Content-Length 500"),
        ("a negative Content-Length", b"HTTP/1.1 202 Accepted\r\nContent-Length: -5\r\n\r\n" + job, "not a number of bytes"),
        ("a Content-Length that is not a number", b"HTTP/1.1 202 Accepted\r\nContent-Length: 12abc\r\n\r\n" + job,
         "not a number of bytes"),
        ("the head cut short", b"HTTP/1.1 202 Acc", "ends inside its head"),
        ("not HTTP", b"SSH-2.0-OpenSSH_9.2\r\n\r\n", "not an HTTP/1.x status line"),
        ("nothing", b"", "an empty answer"),
    )
    for name, answer, reason in cases:
        fake = FakeDaemon({"POST": answer})
        start = time.monotonic()
        try:
            rc, out, err = submit(fake, path, timeout=30)
        except subprocess.TimeoutExpired:
            rc, out, err = None, "", "(still running after 30 s)"
        finally:
            fake.stop()
        took = time.monotonic() - start
        check(rc == 1 and "malformed HTTP answer" in err and reason in err and took < 10,
              f"{name}: rc {rc} in {took:.1f} s, want 1 naming '{reason}': {err.strip()}")
    # complete answers (Content-Length; chunked) on connections kept open for 20 s: each used at once
    done = b'{"id": 7, "status": "succeeded", "runs": []}'
    fake = FakeDaemon({"POST": b"HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                               % len(job) + job,
                       "GET": chunked.replace(b"202 Accepted", b"200 OK") + b"%X\r\n" % len(done) + done + b"\r\n0\r\n\r\n"},
                      hold_s=20)
    start = time.monotonic()
    try:
        rc, out, err = submit(fake, path, "--quiet", timeout=60)
    except subprocess.TimeoutExpired:
        rc, out, err = None, "", "(still running after 60 s)"
    finally:
        fake.stop()
    took = time.monotonic() - start
    check(rc == 0 and json.loads(out or "{}").get("status") == "succeeded" and took < 10,
          f"complete answers on connections kept open: rc {rc} in {took:.1f} s: {out.strip()} {err.strip()}")


def main():
    d = Daemon("submit", args=["--token", TOKEN])
    try:
        for test in (test_outcomes, test_refused_at_submit, test_access, test_interrupt, test_malformed_answers):
            print(f"-- {test.__name__}", flush=True)
            test(d)
    finally:
        d.stop()
    return test_api.verdict("all submit tests passed")


if __name__ == "__main__":
    sys.exit(main())
