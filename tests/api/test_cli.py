"""`lmperfd run SPEC` (the one-shot runner) on bad input and its job outcomes,
cpu worker: a directory, a missing, an empty and an oversized file, a UTF-8
byte order mark, a spec error (the API's error document on stdout, one line
naming the field on stderr), timeout_s (the job fails, the process does not
hang), a sweep in which no point succeeds (the job fails, its runs are kept),
specs that need a GPU (refused naming the field, as the API refuses them);
--table (the job's summary table on stdout) and --db (the job recorded in a database).
usage: test_cli.py LMPERFD. Exit 0 when every check passes, 1 otherwise."""
import fcntl
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

LMPERFD = sys.argv[1]
failures = []


def check(cond, message):
    if not cond:
        failures.append(message)
        print("FAIL:", message, flush=True)
    return cond


def run(path, timeout=60):
    t0 = time.time()
    p = subprocess.run([LMPERFD, "run", path, "--cpu-only"], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr, time.time() - t0


def write(folder, name, text, mode="w"):
    path = os.path.join(folder, name)
    with open(path, mode) as f:
        f.write(text)
    return path


def run_args(*args, timeout=120):
    p = subprocess.run([LMPERFD, "run", "--cpu-only", *args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def check_table_and_db(tmp):
    """--table prints the job's summary table (as GET /v1/jobs/{id}/table) instead of the document; --db records
    the job in a database (appended, as the daemon's jobs) for sqlite3; both together do both."""
    spec = write(tmp, "sweep.json", json.dumps(
        {"kind": "benchmark", "model": {"d_model": 16, "d_ff": 32, "num_layers": 1, "num_heads": 1},
         "vocab_size": 50, "context_length": [8, 12], "batch_size": 2, "precision": ["fp32", "bf16"],
         "warmup_steps": 0, "measure_steps": 2}))
    rc, out, err = run_args(spec, "--table", "md")
    lines = out.splitlines()
    check(rc == 0 and len(lines) == 6 and lines[0].startswith("| Model |") and "Speedup vs fp32" in lines[0]
          and sum(" bf16 " in line for line in lines) == 2, f"--table md: {rc} {out!r} {err[-300:]!r}")
    check("migration" not in err, f"--table alone keeps its scratch database quiet: {err[-300:]!r}")
    # --pivot precision: seed 002's table by precision (GET /table?pivot=precision), one row per context
    rc, out, err = run_args(spec, "--table", "md", "--pivot", "precision")
    lines = out.splitlines()
    check(rc == 0 and len(lines) == 4 and "| FP32 Total (ms) | BF16 Total (ms) | BF16 Speedup vs FP32 (×) |" in lines[0],
          f"--table md --pivot precision: {rc} {out!r} {err[-300:]!r}")
    numerics = write(tmp, "numerics.json", json.dumps({"kind": "numerics"}))
    for args, needle in (((spec, "--table", "md", "--pivot", "model"), "pivots by precision"),
                         ((spec, "--pivot", "precision"), "give --table"),
                         ((numerics, "--table", "md", "--pivot", "precision"), "takes no pivot")):
        rc, out, err = run_args(*args)
        check(rc == 2 and needle in err and "0.0% " not in err,  # refused before the job ran
              f"run {args[1:]}: {rc} {err[-300:]!r}")
    rc, out, err = run_args(spec, "--table", "json")
    table = json.loads(out) if rc == 0 else {}
    check(len(table.get("rows", [])) == 4 and "Tokens/s" in table.get("columns", []), f"--table json: {rc} {out[:300]!r}")
    db = os.path.join(tmp, "runs.db")
    for n in (1, 2):
        rc, out, err = run_args(spec, "--db", db)
        check(rc == 0 and json.loads(out)["status"] == "succeeded" and f"recorded as job {n} in {db}" in err,
              f"--db, run {n}: {rc} {err[-300:]!r}")
    rc, out, err = run_args(spec, "--db", db, "--table", "csv")
    check(rc == 0 and out.startswith("Model,") and len(out.splitlines()) == 5, f"--db with --table csv: {rc} {out!r}")
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    jobs = con.execute("SELECT id, kind, status FROM jobs ORDER BY id").fetchall()
    rows = con.execute("SELECT job_id, precision, speedup_vs_fp32 IS NOT NULL FROM benchmark_summary "
                       "WHERE job_id = 3 ORDER BY run_id").fetchall()
    con.close()
    check(jobs == [(1, "benchmark", "succeeded"), (2, "benchmark", "succeeded"), (3, "benchmark", "succeeded")],
          f"--db appends jobs: {jobs}")
    check(len(rows) == 4 and all(has for _, _, has in rows), f"--db: benchmark_summary of job 3: {rows}")
    for args, needle in ((("--table", "xml"), "--table takes md, csv or json"), (("--db",), "--db needs a value"),
                         (("--table",), "--table needs a value"), (("--db", "--table", "md"), "--db needs a value")):
        rc, out, err = run_args(spec, *args)
        check(rc == 2 and needle in err and not out, f"run {args}: {rc} {err!r}")
    # a database another lmperfd holds (its flock, as a daemon's store takes it) is refused before the job runs,
    # not after it (the job's result would be lost): nothing on stdout, the reason on stderr, the database as it was
    with open(db, "rb+") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        for extra in ((), ("--table", "md")):
            rc, out, err = run_args(spec, "--db", db, *extra)
            check(rc == 1 and not out and "in use by another lmperfd" in err and "the job was not run" in err
                  and "0.0% " not in err,  # no progress line: the job did not start
                  f"--db {' '.join(extra)} on a held database: {rc} {out[:200]!r} {err[-300:]!r}")
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    check(con.execute("SELECT count(*) FROM jobs").fetchone() == (3,), "a held database is left as it was")
    con.close()
    check_unopenable_databases(tmp, spec)
    left = [n for n in os.listdir(os.environ.get("TMPDIR") or "/tmp") if n.startswith("lmperfd-run-")]
    check(not left, f"scratch databases left behind: {left}")


def check_unopenable_databases(tmp, spec):
    """A --db that cannot be a database (no such directory, a directory, a file that is not SQLite's, one newer
    than this lmperfd, one it may not write) is refused before the job runs, by lmperfd run and by the daemon at
    its start: "the database PATH cannot be opened: REASON", never SQLite's text alone."""
    os.mkdir(os.path.join(tmp, "a-directory"))
    newer = os.path.join(tmp, "newer.db")
    con = sqlite3.connect(newer)
    con.execute("PRAGMA user_version = 9999")
    con.close()
    cases = [(os.path.join(tmp, "missing", "x.db"), "its directory " + os.path.join(tmp, "missing") + " does not exist"),
             (os.path.join(tmp, "a-directory"), "it is a directory"),
             (write(tmp, "text.db", "not a database\n" * 100), "it is not an SQLite database"),
             (newer, "its schema version 9999 is newer than this lmperfd's")]
    if os.geteuid() != 0:  # root may write any file
        locked = write(tmp, "locked.db", "")
        os.chmod(locked, 0)
        cases.append((locked, "Permission denied"))
    if os.path.isdir("/sys"):  # where not even root may make a file
        cases.append(("/sys/lmperf-test.db", ""))  # the reason: EACCES, or EROFS where /sys is mounted read-only
    for path, reason in cases:
        want = f"the database {path} cannot be opened: {reason}"
        rc, out, err = run_args(spec, "--db", path)
        check(rc == 1 and not out and want in err and "the job was not run" in err and "0.0% " not in err,
              f"run --db {path}: {rc} {err[-300:]!r}, want {want!r}")
        p = subprocess.run([LMPERFD, "--port", "0", "--cpu-only", "--db", path], capture_output=True, text=True,
                           timeout=30)
        check(p.returncode == 1 and want in p.stderr, f"lmperfd --db {path}: {p.returncode} {p.stderr[-300:]!r}")


def main():
    # lmperfd run's scratch databases go to a TMPDIR of this test's own, so that the check that none is left
    # behind counts only this test's (another lmperfd run on the machine keeps one while it runs)
    os.environ["TMPDIR"] = tempfile.mkdtemp(prefix="lmperf-cli-tmp-")
    with tempfile.TemporaryDirectory() as tmp:
        rc, _, err, _ = run(tmp)
        check(rc == 2 and "is a directory" in err, f"a directory: {rc} {err!r}")
        rc, _, err, _ = run(os.path.join(tmp, "missing.json"))
        check(rc == 2 and "cannot open" in err and "No such file" in err, f"a missing file: {rc} {err!r}")
        rc, _, err, _ = run(write(tmp, "empty.json", ""))
        check(rc == 2 and "is empty" in err, f"an empty file: {rc} {err!r}")
        rc, _, err, _ = run(write(tmp, "big.json", b"{" + b" " * (17 << 20) + b"}", "wb"))
        check(rc == 2 and "larger than" in err, f"an oversized file: {rc} {err!r}")
        rc, out, err, _ = run(write(tmp, "bom.json", b'\xef\xbb\xbf{"kind": "numerics", "count": 10}', "wb"))
        check(rc == 0 and json.loads(out)["status"] == "succeeded", f"a byte order mark: {rc} {err[-300:]!r}")
        # a NUL byte is not JSON (jansson alone would skip it after a number: count 10)
        rc, out, err, _ = run(write(tmp, "nul.json", b'{"kind": "numerics", "count": 10\x00}', "wb"))
        check(rc == 2 and "is not valid JSON: a NUL byte at byte 32" in err, f"a NUL byte: {rc} {err!r}")
        rc, out, err, _ = run(write(tmp, "bad.json", '{"kind": "numerics", "count": "many"}'))
        doc = json.loads(out) if out.strip() else {}
        check(rc == 2 and doc.get("error", {}).get("field") == "count", f"a spec error on stdout: {rc} {out!r}")
        check("(field count)" in err and "must be an integer" in err, f"a spec error on stderr: {err!r}")
        rc, out, err, secs = run(write(tmp, "slow.json", json.dumps(
            {"kind": "benchmark", "model": "tiny", "context_length": 256, "warmup_steps": 0, "measure_steps": 10000,
             "timeout_s": 2})), timeout=120)
        doc = json.loads(out) if out.strip() else {}
        check(rc == 1 and doc.get("status") == "failed" and "timed out after 2 s" in (doc.get("error") or ""),
              f"timeout_s in one-shot mode: {rc} {doc.get('status')} {doc.get('error')}")
        check(secs < 45, f"timeout_s 2 ended the run in {secs:.0f} s")
        # a job that needs a GPU is refused on the CPU as POST /v1/jobs refuses it, naming the field
        for name, spec, field in (
                ("flash", {"kind": "attention", "impl": "flash", "seq_len": 32, "d_head": 16}, "impl"),
                ("bf16", {"kind": "attention", "dtype": "bfloat16", "impl": "naive", "seq_len": 32}, "dtype"),
                ("profile", {"kind": "profile", "model": "tiny", "context_length": 16}, "kind"),
                ("nccl", {"kind": "allreduce", "sizes": ["1MB"]}, "backend")):
            rc, out, err, _ = run(write(tmp, name + ".json", json.dumps(spec)))
            doc = json.loads(out) if out.strip() else {}
            check(rc == 2 and doc.get("error", {}).get("code") == "invalid_spec"
                  and doc["error"].get("field") == field and "there is no GPU here" in doc["error"].get("message", ""),
                  f"{name} refused on the cpu: {rc} {out!r}")
            check(f"(field {field})" in err, f"{name} refused on the cpu, stderr: {err!r}")
        rc, out, err, _ = run(write(tmp, "huge.json", json.dumps(
            {"kind": "benchmark", "model": "tiny", "context_length": 131072, "batch_size": 1, "warmup_steps": 0,
             "measure_steps": 1, "mode": "forward"})))
        doc = json.loads(out) if out.strip() else {}
        check(rc == 1 and doc.get("status") == "failed" and "no point succeeded" in (doc.get("error") or ""),
              f"no point succeeded: {rc} {doc.get('status')} {doc.get('error')}")
        check(len(doc.get("runs") or []) == 1 and doc["runs"][0].get("status") == "failed",
              f"the failed point is kept: {doc.get('runs')}")
        check("the job failed" in err, f"a failed job says so on stderr: {err[-300:]!r}")
        check_table_and_db(tmp)
    # the version, as `version` and as the usual --version; --help lists it
    for arg in ("version", "--version"):
        p = subprocess.run([LMPERFD, arg], capture_output=True, text=True, timeout=10)
        check(p.returncode == 0 and p.stdout.startswith("lmperfd "), f"lmperfd {arg}: {p.returncode} {p.stdout!r} {p.stderr!r}")
    p = subprocess.run([LMPERFD, "--help"], capture_output=True, text=True, timeout=10)
    check(p.returncode == 0 and "--version" in p.stdout, f"--help lists --version: {p.stdout!r}")
    check("default: \n" not in p.stdout and "default: 8080" in p.stdout, f"--help shows defaults, no empty ones: {p.stdout!r}")
    check(p.stdout.count("[--pivot precision]") == 2, f"--help lists run's and submit's --pivot precision: {p.stdout!r}")
    # a sub-command's --help is its usage on stdout (exit 0), not a spec file named --help
    for sub in ("run", "submit"):
        for flag in ("--help", "-h"):
            p = subprocess.run([LMPERFD, sub, flag], capture_output=True, text=True, timeout=10)
            check(p.returncode == 0 and p.stdout.startswith(f"usage: lmperfd {sub} SPEC.json")
                  and "--pivot precision" in p.stdout and not p.stderr, f"{sub} {flag}: {p.returncode} {p}")
        # a misspelt option is an unknown option (not the spec's path), with the usage
        p = subprocess.run([LMPERFD, sub, "--tabel", "md", "spec.json"], capture_output=True, text=True, timeout=10)
        check(p.returncode == 2 and f"lmperfd {sub}: unknown option --tabel\nusage:" in p.stderr,
              f"{sub} --tabel: {p.returncode} {p.stderr!r}")
    # a misspelt command is one (not an "unknown option"), a word after the options an unexpected argument
    for args, needle in ((("sumbit", "spec.json"), "lmperfd: unknown command sumbit: the commands are run, submit and "
                          "version"), (("--port", "0", "extra"), "lmperfd: unexpected argument extra")):
        p = subprocess.run([LMPERFD, *args], capture_output=True, text=True, timeout=10)
        check(p.returncode == 2 and p.stderr.startswith(needle), f"lmperfd {args}: {p.returncode} {p.stderr!r}")
    # a web root that is not a directory is refused at the start (the page would be a 404), but not by submit,
    # which serves nothing
    with tempfile.TemporaryDirectory() as tmp:
        for root, reason in ((os.path.join(tmp, "missing"), "No such file or directory"),
                             (write(tmp, "file", "x"), "not a directory")):
            p = subprocess.run([LMPERFD, "--port", "0", "--db", os.path.join(tmp, "d.db"), "--web-root", root],
                               capture_output=True, text=True, timeout=10)
            check(p.returncode == 2 and p.stderr.startswith(f"lmperfd: --web-root: {root}: {reason}")
                  and not os.path.exists(os.path.join(tmp, "d.db")), f"--web-root {root}: {p.returncode} {p.stderr!r}")
        p = subprocess.run([LMPERFD, "submit", "--url", "http://127.0.0.1:1", write(tmp, "n.json", "{}")],
                           capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, LMPERF_WEB_ROOT=os.path.join(tmp, "missing")))
        check(p.returncode == 1 and "cannot connect" in p.stderr, f"submit with LMPERF_WEB_ROOT missing: {p.stderr!r}")
    # a flag's environment variable reads as people write it, either way (parsed before --help)
    for value in ("false", "no", "off", "0", "true", "Yes", "on", "1"):
        p = subprocess.run([LMPERFD, "--help"], capture_output=True, text=True, timeout=10,
                           env=dict(os.environ, LMPERF_CPU_ONLY=value))
        check(p.returncode == 0, f"LMPERF_CPU_ONLY={value}: {p.returncode} {p.stderr!r}")
    p = subprocess.run([LMPERFD, "--help"], capture_output=True, text=True, timeout=10,
                       env=dict(os.environ, LMPERF_CPU_ONLY="maybe"))
    check(p.returncode == 2 and "LMPERF_CPU_ONLY (--cpu-only): 'maybe'" in p.stderr,
          f"LMPERF_CPU_ONLY=maybe: {p.returncode} {p.stderr!r}")  # the variable named, not only the flag
    for env, args, needle in (({"LMPERF_PORT": "abc"}, ["--help"], "LMPERF_PORT (--port): 'abc' is not an integer"),
                              ({"LMPERF_PORT": "abc"}, ["submit", "x.json"], "LMPERF_PORT (--port): 'abc'"),
                              ({}, ["--port", "abc"], "lmperfd: --port: 'abc' is not an integer")):
        p = subprocess.run([LMPERFD, *args], capture_output=True, text=True, timeout=10, env=dict(os.environ, **env))
        check(p.returncode == 2 and needle in p.stderr, f"{env} lmperfd {args}: {p.returncode} {p.stderr!r}")
    shutil.rmtree(os.environ["TMPDIR"], ignore_errors=True)
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("lmperfd run: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
