#!/usr/bin/env python3
"""Black-box API tests: start the real lmperfd on a random loopback port and
exercise every endpoint, every error status, cancellation, a worker killed
mid-job, a job timeout, the bearer token, a full queue, SIGTERM, a second SIGINT
while a job runs, and a daemon killed with SIGKILL and restarted.

usage: test_api.py LMPERFD [WEB_ROOT]"""
import csv as csv_module
import http.client
import io
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

LMPERFD = sys.argv[1]
WEB_ROOT = sys.argv[2] if len(sys.argv) > 2 else None
LONG_COUNT = 10_000_000_000  # numerics job running for minutes on the CPU
TMP = tempfile.mkdtemp(prefix="lmperf-api-")
failures = []


class Daemon:
    """A running lmperfd with its own database and a free port."""

    def __init__(self, name, db=None, args=(), start_timeout=20):
        self.db = db or os.path.join(TMP, name + ".db")
        self.port_file = os.path.join(TMP, name + ".port")
        self.log_path = os.path.join(TMP, name + ".log")
        if os.path.exists(self.port_file):
            os.unlink(self.port_file)
        cmd = [LMPERFD, "--port", "0", "--port-file", self.port_file, "--db", self.db, "--cpu-only"]
        if WEB_ROOT:
            cmd += ["--web-root", WEB_ROOT]
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd + list(args), stdout=self.log, stderr=self.log)
        deadline = time.time() + start_timeout
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("lmperfd did not start; log:\n" + open(self.log_path).read())
            time.sleep(0.05)
        self.port = int(open(self.port_file).read())
        self.wait_for(lambda: self.workers_state() == ["idle"], "the worker to be ready")

    def request(self, method, path, body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        hdrs = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
            hdrs.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        ctype = resp.getheader("Content-Type", "")
        parsed = json.loads(data) if ctype.startswith("application/json") else data.decode()
        return resp.status, resp, parsed

    def get(self, path):
        return self.request("GET", path)

    def submit(self, spec, expect=202, headers=None):
        status, _, body = self.request("POST", "/v1/jobs", spec, headers)
        check(status == expect, f"POST {spec}: status {status}, want {expect}: {body}")
        return body

    def job(self, job_id):
        return self.get(f"/v1/jobs/{job_id}")[2]

    def workers_state(self):
        status, _, body = self.get("/v1/system")
        return [w["state"] for w in body["workers"]] if status == 200 else []

    def wait_for(self, predicate, what, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if predicate():
                return True
            time.sleep(0.05)
        raise AssertionError("timed out waiting for " + what)

    def wait_status(self, job_id, statuses, timeout=30):
        self.wait_for(lambda: self.job(job_id)["status"] in statuses, f"job {job_id} to be {statuses}", timeout)
        return self.job(job_id)

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        finally:
            self.log.close()


SCHEMA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "schema")


def schema_errors(value, schema, where="$"):
    """The places where value breaks schema: the subset of JSON Schema the
    documents in schema/downloads use (type, const, enum, required,
    properties, additionalProperties false, items, prefixItems, minItems,
    maxItems, minimum)."""
    errors = []
    kinds = {"object": dict, "array": list, "string": str, "null": type(None)}
    types = schema.get("type")
    if types is not None:
        def is_type(t):
            if t == "integer":
                return isinstance(value, int) and not isinstance(value, bool)
            if t == "number":
                return isinstance(value, (int, float)) and not isinstance(value, bool)
            return isinstance(value, kinds[t])
        if not any(is_type(t) for t in (types if isinstance(types, list) else [types])):
            return [f"{where}: {value!r} is not {types}"]
    if "const" in schema and value != schema["const"]:
        errors.append(f"{where}: {value!r} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} not in {schema['enum']}")
    if isinstance(value, (int, float)) and "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{where}: {value} < {schema['minimum']}")
    if isinstance(value, dict):
        for k in schema.get("required", []):
            if k not in value:
                errors.append(f"{where}: missing {k}")
        props = schema.get("properties", {})
        for k, v in value.items():
            if k in props:
                errors += schema_errors(v, props[k], f"{where}.{k}")
            elif schema.get("additionalProperties") is False:
                errors.append(f"{where}: unexpected {k}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", len(value)):
            errors.append(f"{where}: {len(value)} items")
        prefix = schema.get("prefixItems", [])
        for i, v in enumerate(value):
            sub = prefix[i] if i < len(prefix) else schema.get("items")
            if sub is not None:
                errors += schema_errors(v, sub, f"{where}[{i}]")
    return errors


def check(cond, message):
    if not cond:
        failures.append(message)
        print("FAIL:", message, flush=True)
    return cond


def long_reals(d, path, digits=12):
    """The reals of GET path's raw JSON text printed with more than digits significant digits (jansson's default
    17 prints 0.000811 as 0.00081099999999999998)."""
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)
    conn.request("GET", path)
    raw = conn.getresponse().read().decode()
    conn.close()
    return [x for x in re.findall(r"[-+]?\d*\.\d+(?:[eE][-+]?\d+)?", raw)
            if len(re.sub(r"^[-+0.]*|[eE].*$|\.", "", x).lstrip("0")) > digits]


def expect_error(d, method, path, status, code, field=None, body=None, headers=None):
    got, resp, payload = d.request(method, path, body, headers)
    ok = check(got == status, f"{method} {path}: status {got}, want {status}: {payload}")
    if ok and check(isinstance(payload, dict) and "error" in payload, f"{method} {path}: JSON error body"):
        err = payload["error"]
        check(err["code"] == code, f"{method} {path}: code {err['code']}, want {code}")
        check(bool(err["message"]), f"{method} {path}: empty message")
        if field is not None:
            check(err["field"] == field, f"{method} {path}: field {err['field']}, want {field}")
    return resp


# --- tests ------------------------------------------------------------------------

def test_endpoints(d):
    status, _, health = d.get("/healthz")
    check(status == 200 and health["status"] == "ok", f"healthz: {status} {health}")
    # a JSON document ends with one newline (curl's output, then the prompt on its own line); errors too
    for path in ("/healthz", "/v1/system", "/v1/jobs/999999", "/v1/compare?jobs=1"):
        conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)
        conn.request("GET", path)
        raw = conn.getresponse().read()
        conn.close()
        check(raw.endswith(b"}\n") and not raw.endswith(b"\n\n"), f"{path}: the body ends {raw[-20:]!r}")
    status, _, system = d.get("/v1/system")
    check(status == 200 and "numerics" in system["kinds"], f"system kinds: {system}")
    check(system["devices"] and system["devices"][0]["gpu_index"] == -1, "CPU worker device listed")
    check(system["schema_version"] >= 1 and system["version"], "system versions")
    status, _, models = d.get("/v1/models")
    by_name = {m["name"]: m for m in models.get("models", [])}
    for name, params in (("small", 128_625_408), ("medium", 423_183_360), ("large", 969_411_840),
                         ("xl", 1_998_235_200), ("2.7B", 3_406_809_600)):
        check(status == 200 and by_name.get(name, {}).get("parameters") == params,
              f"model {name}: {by_name.get(name)}")
    check(by_name.get("2.7B", {}).get("d_head") == 80 and "tiny" in by_name, "presets tiny and 2.7B")
    for kind in system["kinds"]:
        status, _, schema = d.get(f"/v1/schemas/{kind}")
        check(status == 200 and "kind" in schema["properties"] and "timeout_s" in schema["properties"],
              f"schema of {kind}: {status}")
    expect_error(d, "GET", "/v1/schemas/teleport", 404, "not_found", "kind")
    if WEB_ROOT and os.path.exists(os.path.join(WEB_ROOT, "index.html")):
        status, resp, page = d.get("/")
        check(status == 200 and resp.getheader("Content-Type").startswith("text/html"), f"GET /: {status}")
        check("<html" in page.lower(), "GET / serves the web page")
        expect_error(d, "GET", "/does-not-exist.js", 404, "not_found")
        expect_error(d, "GET", "/../etc/passwd", 404, "not_found")

    # attention naive_fused: accepted; on a cpu worker it runs as naive, so the same loss to the bit
    losses = {}
    for att in ("naive", "naive_fused"):
        job = d.submit({"kind": "benchmark", "model": "tiny", "context_length": 64, "batch_size": 1,
                        "warmup_steps": 0, "measure_steps": 1, "attention": att, "mode": "train_step"})
        done = d.wait_status(job["id"], ("succeeded", "failed"))
        run = done["runs"][0] if done.get("runs") else {}
        check(done["status"] == "succeeded" and run.get("attention") == att, f"benchmark attention {att}: {done}")
        losses[att] = run.get("final_loss")
    check(isinstance(losses["naive"], float) and losses["naive"] == losses["naive_fused"],
          f"naive_fused loss on cpu: {losses}")

    # optimizer_in_backward: the same parameters after each step, so the same loss to the bit over 3 steps;
    # stored in its column; the optimizer phase keeps only the token embeddings' update
    runs = {}
    for oib in (False, True):
        job = d.submit({"kind": "benchmark", "model": "tiny", "context_length": 64, "batch_size": 1,
                        "precision": "bf16", "warmup_steps": 1, "measure_steps": 2, "optimizer_in_backward": oib})
        done = d.wait_status(job["id"], ("succeeded", "failed"))
        run = done["runs"][0] if done.get("runs") else {}
        check(done["status"] == "succeeded" and run.get("optimizer_in_backward") is oib,
              f"benchmark optimizer_in_backward {oib}: {done}")
        runs[oib] = (job["id"], run)
    check(isinstance(runs[False][1].get("final_loss"), float)
          and runs[False][1]["final_loss"] == runs[True][1].get("final_loss"),
          f"optimizer_in_backward changed the loss: {runs[False][1].get('final_loss')} vs {runs[True][1].get('final_loss')}")
    db = sqlite3.connect(f"file:{d.db}?mode=ro", uri=True)
    stored = [db.execute("SELECT optimizer_in_backward FROM benchmark_runs WHERE job_id = ?", (runs[k][0],)).fetchone()
              for k in (False, True)]
    db.close()
    check(stored == [(0,), (1,)], f"benchmark_runs.optimizer_in_backward: {stored}")
    # the benchmark's estimate is the peak over all its steps: a forward_backward model keeps its gradients
    # from one step into the next (no optimizer step releases them)
    job = d.submit({"kind": "benchmark", "model": {"d_model": 16, "d_ff": 32, "num_layers": 1, "num_heads": 1},
                    "vocab_size": 50, "context_length": 17, "batch_size": 3, "warmup_steps": 0, "measure_steps": 2,
                    "mode": ["forward", "forward_backward", "train_step"]})
    done = d.wait_status(job["id"], ("succeeded", "failed"))
    pairs = [(r.get("mode"), r.get("estimated_memory_bytes"), r.get("peak_memory_bytes")) for r in done.get("runs", [])]
    check(done["status"] == "succeeded" and len(pairs) == 3 and all(e == p and e > 0 for _, e, p in pairs),
          f"benchmark estimate vs peak over 2 steps (cpu): {pairs}")
    # its table's "mean ± std" cells: each phase column with the decimals of its smallest mean (2 from 1 ms up,
    # as the seeds print, 3 from 0.1, else 4: these sub-millisecond steps, as a GPU's optimizer step, keep their
    # figures, not 0.09 ± 0.00), as the job's page prints them (web/benchmark.js phaseDigits); "-" where a mode
    # has no such phase
    status, _, table = d.get(f"/v1/jobs/{job['id']}/table")
    phases = {"Fwd Pass (ms)": "forward", "Bwd Pass (ms)": "backward", "Opt Step (ms)": "optimizer", "Total (ms)": "total"}
    for column, phase in phases.items():
        cells = table_column(table, column) if status == 200 else None
        stats = [(r.get("stats") or {}).get(phase) for r in done.get("runs", [])]
        means = [abs(s["mean_ms"]) for s in stats if s and s["mean_ms"]]
        smallest = min(means) if means else 0
        digits = 2 if smallest == 0 or smallest >= 1 else 3 if smallest >= 0.1 else 4
        want = [f"{s['mean_ms']:.{digits}f} ± {s['std_ms']:.{digits}f}" if s else "-" for s in stats]
        check(cells == want, f"benchmark table {column}: {cells}, expected {want} ({digits} decimals)")
    # sqlite3 users read the same cells in benchmark_summary (NULL where the table has "-"): one count of decimals
    # per job and phase, not 2 everywhere (0027)
    db = sqlite3.connect(f"file:{d.db}?mode=ro", uri=True)
    summary = db.execute("SELECT fwd_ms, bwd_ms, opt_ms, tot_ms FROM benchmark_summary WHERE job_id = ? "
                         "ORDER BY run_id", (job["id"],)).fetchall()
    db.close()
    cells = [table_column(table, c) for c in phases] if status == 200 else []
    want = [tuple(None if cells[c][r] == "-" else cells[c][r] for c in range(len(phases)))
            for r in range(len(cells[0]) if cells else 0)]
    check(summary == want, f"benchmark_summary's phase cells {summary}, the table's {want}")
    # a point that does not fit is a row of the table and of benchmark_summary with its reason (the seeds'
    # OOM rows), beside the points that ran
    job = d.submit({"kind": "benchmark", "model": "tiny", "context_length": [8, 131072], "batch_size": 1,
                    "warmup_steps": 0, "measure_steps": 1, "mode": "forward"})
    done = d.wait_status(job["id"], ("succeeded", "failed"))
    status, _, table = d.get(f"/v1/jobs/{job['id']}/table")
    statuses = [row[-1] for row in table.get("rows", [])] if status == 200 else []
    check(done["status"] == "succeeded" and len(statuses) == 2 and statuses[0] == "succeeded"
          and statuses[1].startswith("failed: does not fit"), f"benchmark table with a failed point: {statuses}")
    # csv: each "mean ± sd" phase column is two numeric fields (the failed point's are empty)
    status, _, csv_text = d.get(f"/v1/jobs/{job['id']}/table?format=csv")
    lines = list(csv_module.reader(io.StringIO(csv_text))) if status == 200 else []
    header = lines[0] if lines else []
    fwd = header.index("Fwd Pass (ms)") if "Fwd Pass (ms)" in header else -1
    check(len(lines) == 3 and fwd >= 0 and header[fwd + 1] == "Fwd Pass (ms) sd"
          and float(lines[1][fwd]) > 0 and float(lines[1][fwd + 1]) >= 0 and lines[2][fwd:fwd + 2] == ["", ""]
          and not any("±" in cell for line in lines for cell in line), f"benchmark csv with mean and sd: {lines}")
    # a forward-only job has no backward or optimizer figure, yet those columns are mean ± sd too: two empty
    # fields each, as in a train_step job's csv (one layout for every job), never a "-" in a numeric column
    check(all(f"{name} sd" in header for name in ("Bwd Pass (ms)", "Opt Step (ms)", "Total (ms)"))
          and not any(cell == "-" for line in lines[1:] for cell in line),
          f"benchmark csv of a forward-only job, phases without figures split: {lines}")
    db = sqlite3.connect(f"file:{d.db}?mode=ro", uri=True)
    summary = db.execute("SELECT context_length, status FROM benchmark_summary WHERE job_id = ?",
                         (job["id"],)).fetchall()
    db.close()
    check(summary == [(8, "succeeded"), (131072, "failed")], f"benchmark_summary with a failed point: {summary}")
    # an attention point that failed (the cpu reference computes float32 only; flash needs a GPU) is a row of
    # the table and of attention_summary with its reason, beside the points that ran
    job = d.submit({"kind": "attention", "seq_len": [32], "d_head": 16, "batch": 1, "dtype": ["float32", "bfloat16"],
                    "impl": "both", "passes": 2})
    done = d.wait_status(job["id"], ("succeeded", "failed"))
    status, _, table = d.get(f"/v1/jobs/{job['id']}/table")
    rows = {r[0]: r for r in table.get("rows", [])} if status == 200 else {}
    check(done["status"] == "succeeded" and table.get("columns", [None])[-1] == "failed" and len(rows) == 2
          and isinstance(rows.get("float32", [None] * 4)[3], float) and rows["float32"][5:7] == ["failed", "failed"]
          and rows["float32"][-1] == "flash: flash needs a GPU"
          and rows.get("bfloat16", [None] * 4)[3:7] == ["failed"] * 4
          and "naive: the cpu reference computes float32 only" in rows["bfloat16"][-1],
          f"attention table with failed points: {table}")
    # forward + backward per impl (the flash benchmark's end-to-end column): the run's fwd_bwd_ms, rounded as
    # the other times; a failed impl reads "failed" there too
    naive_run = next((r for r in done.get("runs", []) if r.get("impl") == "naive" and r.get("dtype") == "float32"), {})
    naive_fb = table_column(table, "naive fwd+bwd (ms)") if status == 200 else None
    flash_fb = table_column(table, "flash fwd+bwd (ms)") if status == 200 else None
    check(naive_fb is not None and flash_fb is not None and isinstance(naive_run.get("fwd_bwd_ms"), float)
          and abs(naive_fb[[r[0] for r in table["rows"]].index("float32")] - naive_run["fwd_bwd_ms"]) <= 5e-5
          and set(flash_fb) == {"failed"},
          f"attention table fwd+bwd columns: naive {naive_fb}, flash {flash_fb}, run {naive_run.get('fwd_bwd_ms')}")
    # the json table's reals print as the md/csv cells do (8.3462), not with 17 digits (8.3461999999999996)
    longer = long_reals(d, f"/v1/jobs/{job['id']}/table?format=json")
    check(not longer, f"/table reals with more than 12 significant digits: {longer[:5]}")
    status, _, md = d.get(f"/v1/jobs/{job['id']}/table?format=md")
    check(status == 200 and len(md.splitlines()) == 4 and "| bfloat16 |" in md and "computes float32 only" in md,
          f"attention md table with failed points: {md}")
    status, _, csv = d.get(f"/v1/jobs/{job['id']}/table?format=csv")
    check(status == 200 and len(csv.splitlines()) == 3 and "flash: flash needs a GPU" in csv,
          f"attention csv table with failed points: {csv}")
    db = sqlite3.connect(f"file:{d.db}?mode=ro", uri=True)
    stored = db.execute("SELECT impl, dtype, status, error FROM attention_runs WHERE job_id = ? ORDER BY run_id",
                        (job["id"],)).fetchall()
    db.close()
    check(len(stored) == 4 and [s[2] for s in stored].count("failed") == 3
          and ("naive", "bfloat16", "failed", "the cpu reference computes float32 only") in stored,
          f"attention_runs with failed points: {stored}")
    expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "optimizer_in_backward",
                 body={"kind": "benchmark", "model": "tiny", "context_length": 16, "precision": "fp16",
                       "optimizer_in_backward": True})
    for kind in ("profile", "memory"):  # the same refusal in every kind that has the field
        expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "optimizer_in_backward",
                     body={"kind": kind, "model": "tiny", "context_length": 16, "precision": ["bf16", "fp16"],
                           "optimizer_in_backward": True})
    expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "optimizer_in_backward",
                 body={"kind": "profile", "model": "tiny", "context_length": 16, "optimizer_in_backward": 1})
    # optimizer_in_backward applies to train steps: refused when no point of the sweep is one, in every kind
    # that has it; a sweep with one applies it there and records false on the other points
    for kind, modes in (("benchmark", "forward"), ("benchmark", ["forward", "forward_backward"]),
                        ("memory", "inference"), ("profile", "forward")):
        expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "optimizer_in_backward",
                     body={"kind": kind, "model": "tiny", "context_length": 16, "mode": modes,
                           "optimizer_in_backward": True})
    job = d.submit({"kind": "benchmark", "model": "tiny", "context_length": 16, "warmup_steps": 0,
                    "measure_steps": 1, "mode": ["forward", "train_step"], "optimizer_in_backward": True})
    done = d.wait_status(job["id"], ("succeeded", "failed"))
    applied = {r.get("mode"): r.get("optimizer_in_backward") for r in done.get("runs", [])}
    check(done["status"] == "succeeded" and applied == {"forward": False, "train_step": True},
          f"optimizer_in_backward in a sweep with a train step: {applied}")

    job = d.submit({"kind": "numerics", "label": "accumulation"})
    check(job["status"] in ("queued", "running") and job["kind"] == "numerics", f"submitted job: {job}")
    check(job["spec"]["count"] == 1000 and job["spec"]["timeout_s"] == 3600, "defaults filled in the stored spec")
    done = d.wait_status(job["id"], ("succeeded", "failed"))
    check(done["status"] == "succeeded", f"numerics job: {done}")
    check(done["environment"]["device_kind"] == "cpu" and done["environment"]["hostname"], "environment recorded")
    check(done["started_at"] and done["finished_at"] and done["device"] == "cpu", "timestamps and device")
    rows = done["runs"][0]["rows"]
    results = {(r["accumulator"], r["summand_dtype"], r["cast"]): r["result"] for r in rows}
    check(round(results[("float32", "float32", "none")], 4) == 10.0001, f"fp32/fp32: {results}")
    check(round(results[("float16", "float16", "none")], 4) == 9.9531, "fp16/fp16")
    check(round(results[("float32", "float16", "implicit")], 4) == 10.0021, "fp32 += fp16 implicit")
    check(round(results[("float32", "float16", "explicit")], 4) == 10.0021, "fp32 += fp16 explicit")
    check(("bfloat16", "bfloat16", "none") in results, "bf16 row present")

    status, resp, md = d.get(f"/v1/jobs/{job['id']}/table?format=md")
    check(status == 200 and md.startswith("| accumulator |") and "9.953125" in md, f"md table: {md}")
    status, resp, csv = d.get(f"/v1/jobs/{job['id']}/table?format=csv")
    check(status == 200 and csv.splitlines()[0].startswith("accumulator,") and len(csv.splitlines()) == 8, "csv")
    status, _, table = d.get(f"/v1/jobs/{job['id']}/table")
    check(status == 200 and len(table["rows"]) == 7, "json table")
    expect_error(d, "GET", f"/v1/jobs/{job['id']}/table?format=xml", 400, "bad_request", "format")

    # the database is readable by others while the daemon runs (WAL)
    db = sqlite3.connect(f"file:{d.db}?mode=ro", uri=True)
    n = db.execute("SELECT count(*) FROM numerics_accumulation WHERE job_id = ?", (job["id"],)).fetchone()[0]
    check(n == 7, f"numerics_accumulation rows via a read-only connection: {n}")
    db.close()
    out = subprocess.run(["sqlite3", "-readonly", d.db, "SELECT status FROM jobs WHERE id = %d" % job["id"]],
                         capture_output=True, text=True)
    check(out.returncode == 0 and out.stdout.strip() == "succeeded", f"sqlite3 -readonly: {out}")

    # the precision report: one run per precision, stored in numerics_precision, its own table
    job = d.submit({"kind": "numerics", "experiments": ["precision_report"]})
    done = d.wait_status(job["id"], ("succeeded", "failed"))
    check(done["status"] == "succeeded" and len(done["runs"]) == 4, f"precision report job: {done['status']}")
    status, _, table = d.get(f"/v1/jobs/{job['id']}/table")
    check(status == 200 and table["columns"][:3] == ["precision", "phase", "op"] and len(table["rows"]) >= 160,
          f"precision table: {status} {table.get('columns')}")
    db = sqlite3.connect(f"file:{d.db}?mode=ro", uri=True)
    n = db.execute("SELECT count(*) FROM numerics_precision WHERE job_id = ? AND precision = 'bf16' "
                   "AND op IN ('attn.q_proj', 'attn.qkv_proj') AND inputs = 'bfloat16, bfloat16'",
                   (job["id"],)).fetchone()[0]
    db.close()
    check(n == 1, f"numerics_precision bf16 q_proj (or fused qkv_proj) row: {n}")
    expect_error(d, "GET", f"/v1/jobs/{job['id']}/table?experiment=accumulation", 404, "not_found", "experiment")

    # both experiments: the accumulation table by default, either one by ?experiment=, in every format
    both = d.submit({"kind": "numerics", "experiments": ["accumulation", "precision_report"]})
    done = d.wait_status(both["id"], ("succeeded", "failed"))
    check(done["status"] == "succeeded", f"numerics job of both experiments: {done['status']}")
    base = f"/v1/jobs/{both['id']}/table"
    status, _, default = d.get(base)
    status2, _, acc = d.get(base + "?experiment=accumulation")
    check(status == status2 == 200 and default == acc and acc["columns"][0] == "accumulator" and len(acc["rows"]) == 7,
          f"both experiments, accumulation table: {status} {status2} {acc.get('columns')}")
    status, _, prec = d.get(base + "?experiment=precision_report")
    check(status == 200 and prec == table, f"both experiments, precision table: {status} {prec.get('columns')}")
    status, _, md = d.get(base + "?experiment=precision_report&format=md")
    check(status == 200 and md.startswith("| precision | phase | op |") and len(md.splitlines()) == len(table["rows"]) + 2,
          f"both experiments, md precision table: {md[:200]}")
    status, _, csv = d.get(base + "?format=csv&experiment=precision_report")
    check(status == 200 and csv.startswith("precision,phase,op,") and len(csv.splitlines()) == len(table["rows"]) + 1,
          f"both experiments, csv precision table: {csv[:200]}")
    status, _, err = d.get(base + "?experiment=precision")
    check(status == 400 and err["error"]["field"] == "experiment" and "accumulation" in err["error"]["message"]
          and "precision_report" in err["error"]["message"], f"unknown experiment: {status} {err}")

    status, _, listing = d.get("/v1/jobs?kind=numerics&status=succeeded&limit=1")
    check(status == 200 and listing["total"] >= 1 and len(listing["jobs"]) == 1, f"list filter: {listing}")
    check("runs" not in listing["jobs"][0], "list items are summaries")
    status, _, listing = d.get("/v1/jobs?status=failed")
    check(status == 200 and all(j["status"] == "failed" for j in listing["jobs"]), "status filter")
    status, _, page2 = d.get("/v1/jobs?limit=1&offset=1")
    check(status == 200 and page2["offset"] == 1, "offset paging")

    status, _, metrics = d.get("/metrics")
    check(status == 200 and 'lmperf_jobs{status="succeeded"}' in metrics and "lmperf_queue_depth" in metrics
          and "lmperf_http_requests_total" in metrics, "metrics text")


def table_column(table, name):
    """The cells of the column named name in a /table JSON answer, or None when there is no such column."""
    columns = table.get("columns", []) if isinstance(table, dict) else []
    return [row[columns.index(name)] for row in table.get("rows", [])] if name in columns else None


def test_warmup_sweep(d):
    """Seed 001 (c): the statistics without warm-up and with 1 or 2 warm-up steps, from one job."""
    spec = {"kind": "benchmark", "model": {"name": "m", "d_model": 16, "d_ff": 32, "num_layers": 1, "num_heads": 1},
            "vocab_size": 50, "context_length": 8, "batch_size": 1, "mode": "forward", "measure_steps": 2,
            "warmup_steps": [0, 1, 2]}
    job = d.submit(spec)
    done = d.wait_status(job["id"], ("succeeded", "failed"))
    runs = done.get("runs", [])
    check(done["status"] == "succeeded" and [r.get("warmup_steps") for r in runs] == [0, 1, 2],
          f"warmup_steps sweep: one run per value: {[r.get('warmup_steps') for r in runs]}")
    flagged = [sum(1 for st in r.get("steps", []) if st.get("warmup")) for r in runs]
    measured = [sum(1 for st in r.get("steps", []) if not st.get("warmup")) for r in runs]
    check(flagged == [0, 1, 2] and measured == [2, 2, 2], f"warm-up steps flagged per run: {flagged}, measured {measured}")
    status, _, table = d.get(f"/v1/jobs/{job['id']}/table")
    check(status == 200 and table_column(table, "Warm-up Steps") == [0, 1, 2],
          f"table's Warm-up Steps column: {table_column(table, 'Warm-up Steps') if status == 200 else table}")
    # a job of one warm-up setting keeps the seeds' columns
    job = d.submit(dict(spec, warmup_steps=1))
    d.wait_status(job["id"], ("succeeded", "failed"))
    status, _, table = d.get(f"/v1/jobs/{job['id']}/table")
    check(status == 200 and table_column(table, "Warm-up Steps") is None, f"one warm-up setting: {table.get('columns')}")
    for bad, field in (([0, -1], "warmup_steps[1]"), ([1, 1], "warmup_steps[1]"), ("two", "warmup_steps")):
        expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", field, dict(spec, warmup_steps=bad))


def test_precision_pivot(d):
    """Seed 002's mixed-precision tables from one job: ?pivot=precision gives one row per point, the mean total per
    precision and each one's speedup over fp32, equal to the job's own rows; a point that does not fit reads N/A."""
    small = {"name": "m", "d_model": 16, "d_ff": 32, "num_layers": 1, "num_heads": 1}
    huge = {"name": "huge", "d_model": 8192, "d_ff": 32768, "num_layers": 64, "num_heads": 64}  # ~270 GB of fp32
    spec = {"kind": "benchmark", "model": [small, huge], "vocab_size": 50, "context_length": 8, "batch_size": 1,
            "mode": "forward", "warmup_steps": 0, "measure_steps": 2, "precision": ["fp32", "bf16"]}
    job = d.submit(spec)
    done = d.wait_status(job["id"], ("succeeded", "failed"), timeout=60)
    statuses = [(r.get("model"), r.get("precision"), r.get("status")) for r in done.get("runs", [])]
    check([s[2] for s in statuses] == ["succeeded", "succeeded", "failed", "failed"], f"pivot job's runs: {statuses}")
    status, _, pivot = d.get(f"/v1/jobs/{job['id']}/table?pivot=precision")
    check(status == 200, f"pivot=precision: {status} {pivot}")
    if status != 200:
        return
    want_columns = ["Model", "d_model", "d_ff", "Layers", "Heads", "Context Length", "Batch", "Mode",
                    "FP32 Total (ms)", "BF16 Total (ms)", "BF16 Speedup vs FP32 (×)"]
    check(pivot["columns"] == want_columns, f"pivot columns: {pivot['columns']}")
    check([r[0] for r in pivot["rows"]] == ["m", "huge"], f"one pivot row per point: {pivot['rows']}")
    db = sqlite3.connect(f"file:{d.db}?mode=ro", uri=True)
    totals = dict(db.execute("SELECT precision, total_mean_ms FROM benchmark_runs WHERE job_id = ? AND model = 'm'",
                             (job["id"],)).fetchall())
    db.close()
    _, _, own = d.get(f"/v1/jobs/{job['id']}/table")
    own_speedup = table_column(own, "Speedup vs fp32 (×)")[1]  # the bf16 run of m
    m, big = pivot["rows"]
    close = lambda a, b: isinstance(a, float) and abs(a - b) <= 1e-9 * abs(b)  # JSON reals carry 12 digits
    check(close(m[8], totals["fp32"]) and close(m[9], totals["bf16"]) and m[10] == own_speedup,
          f"pivot row m {m[8:]} against the runs' totals {totals} and the table's speedup {own_speedup}")
    check(close(m[10], totals["fp32"] / totals["bf16"]), f"speedup is fp32 over bf16: {m[10]}")
    check(big[8:] == ["N/A", "N/A", "N/A"], f"the point that does not fit: {big[8:]}")
    status, _, md = d.get(f"/v1/jobs/{job['id']}/table?pivot=precision&format=md")
    lines = md.strip().split("\n") if status == 200 else []
    check(len(lines) == 4 and lines[1].split("|")[9:12] == ["---:", "---:", "---:"],
          f"pivot md: header, rule and 2 rows, the figures right-aligned beside N/A: {lines[:2]}")
    # the same view in sqlite3
    db = sqlite3.connect(f"file:{d.db}?mode=ro", uri=True)
    view = db.execute("SELECT model, fp32_total_ms, bf16_total_ms, bf16_speedup_vs_fp32, fp16_total_ms "
                      "FROM benchmark_by_precision WHERE job_id = ? ORDER BY first_run_id", (job["id"],)).fetchall()
    db.close()
    check(len(view) == 2 and view[0][0] == "m" and all(close(m[8 + k], view[0][1 + k]) for k in range(3)) and
          view[0][4] is None and view[1] == ("huge", None, None, None, None), f"benchmark_by_precision: {view}")
    expect_error(d, "GET", f"/v1/jobs/{job['id']}/table?pivot=model", 400, "bad_request", "pivot")
    numerics = d.submit({"kind": "numerics"})
    d.wait_status(numerics["id"], ("succeeded", "failed"))
    expect_error(d, "GET", f"/v1/jobs/{numerics['id']}/table?pivot=precision", 400, "bad_request", "pivot")
    # a comparison of pivot tables: aligned, no baseline column (each row has its own speedups)
    other = d.submit(dict(spec, model=small))
    d.wait_status(other["id"], ("succeeded", "failed"), timeout=60)
    status, _, both = d.get(f"/v1/compare?jobs={job['id']},{other['id']}&pivot=precision")
    check(status == 200 and "BF16 Speedup vs FP32 (×)" in both.get("columns", []) and len(both.get("rows", [])) == 3,
          f"compare of pivot tables: {status} {both}")
    expect_error(d, "GET", f"/v1/compare?jobs={job['id']},{other['id']}&pivot=precision&baseline={job['id']}", 400,
                 "bad_request", "baseline")


def test_allreduce_oversubscribed(d):
    """An mpi point with more ranks than cores says so in the table (its time is the scheduler's as much as
    the collective's: seed 002's duration-vs-processes chart on a small machine)."""
    cores = os.cpu_count() or 0
    if not shutil.which("mpirun") or not 0 < cores < 64:
        print(f"mpirun missing or {cores} cores: the oversubscribed check did not run", flush=True)
        return
    job = d.submit({"kind": "allreduce", "backend": "mpi", "sizes": [1024], "world_sizes": [1, cores + 1],
                    "iterations": 1, "warmup": 0})
    done = d.wait_status(job["id"], ("succeeded", "failed"), timeout=120)
    status, _, table = d.get(f"/v1/jobs/{job['id']}/table")
    flags = table_column(table, "oversubscribed") if status == 200 else None
    worlds = table_column(table, "world") if status == 200 else None
    check(done["status"] == "succeeded" and worlds == [1, cores + 1] and flags == ["no", "yes"],
          f"allreduce table's oversubscribed column: worlds {worlds}, flags {flags}, job {done.get('error')}")


def test_memory(d):
    spec = {"kind": "memory", "model": {"d_model": 64, "d_ff": 128, "num_layers": 2, "num_heads": 4, "name": "mini"},
            "vocab_size": 256, "context_length": [16, 32], "batch_size": 2, "mode": ["inference", "train_step"],
            "timeline_points": 50}
    job = d.submit(spec)
    done = d.wait_status(job["id"], ("succeeded", "failed"), timeout=60)
    check(done["status"] == "succeeded" and len(done["runs"]) == 4, f"memory job: {done['status']} {done['error']}")
    runs = {(r["context_length"], r["mode"]): r for r in done["runs"]}
    params = done["runs"][0]["parameters"]
    for (ctx, mode), r in runs.items():
        check(r["status"] == "succeeded", f"memory run {ctx} {mode}: {r['error']}")
        check(sum(r["breakdown_at_peak"].values()) == r["peak_allocated_bytes"],
              f"breakdown at the peak adds up to the peak ({ctx}, {mode})")
        check(r["measured"]["parameters"] == 4 * params, f"parameter bytes exact: {r['measured']}")
        check(r["residual_stream_bytes"] == 2 * ctx * 64 * 4, "residual stream (B, T, d) float32")
        check("events" not in r, "the full event list is not inlined in the job")
        check(0 < len(r["timeline"]["points"]) <= 50, "timeline downsampled")
        check(max(sum(p[2:]) for p in r["timeline"]["points"]) == r["peak_allocated_bytes"], "timeline keeps the peak")
        check(r["largest_allocations"] and r["largest_allocations"][0]["bytes"] >= r["largest_allocations"][-1]["bytes"],
              "largest allocations sorted")
    for ctx in (16, 32):
        inf, train = runs[(ctx, "inference")], runs[(ctx, "train_step")]
        check(train["peak_allocated_bytes"] > inf["peak_allocated_bytes"], f"train step peaks higher at {ctx}")
        check(train["measured"]["optimizer_state"] == 8 * params and inf["measured"]["optimizer_state"] == 0,
              "optimizer state: two float32 moments per parameter in training only")
        check(set(train["peak_by_phase"]) == {"init", "forward", "backward", "optimizer"}, "phases of a train step")
    check(runs[(32, "train_step")]["peak_allocated_bytes"] > runs[(16, "train_step")]["peak_allocated_bytes"],
          "peak grows with context")
    status, _, table = d.get(f"/v1/jobs/{job['id']}/table")
    check(status == 200 and len(table["rows"]) == 2, f"memory table: {table}")
    row16 = [r for r in table["rows"] if r[2] == 16][0]
    check(abs(row16[5] - round(runs[(16, "train_step")]["peak_allocated_bytes"] / 2**20, 1)) < 1e-9,
          "table peak equals the run's peak")
    train_index = [r["index"] for r in done["runs"] if r["mode"] == "train_step"][0]
    status, _, events = d.get(f"/v1/jobs/{job['id']}/events?run={train_index}")
    run = [r for r in done["runs"] if r["index"] == train_index][0]
    check(status == 200 and len(events["rows"]) == run["event_count"], "full event list downloadable")
    live = 0
    peak = 0
    for row in events["rows"]:
        live += row[2] if row[1] == "alloc" else -row[2]
        peak = max(peak, live)
    check(peak == run["peak_allocated_bytes"], "replaying the events gives the peak")
    # times print with at most 12 significant digits (not 0.00081099999999999998), equal to the stored ones
    longer = long_reals(d, f"/v1/jobs/{job['id']}/events?run={train_index}")
    check(not longer, f"/events reals with more than 12 significant digits: {longer[:5]}")
    db = sqlite3.connect(f"file:{d.db}?mode=ro", uri=True)
    stored_t = [t for (t,) in db.execute("SELECT e.t_ms FROM memory_events e JOIN runs r ON r.id = e.run_id "
                                         "WHERE r.job_id = ? AND r.run_index = ? ORDER BY e.seq",
                                         (job["id"], train_index))]
    db.close()
    served_t = [row[0] for row in events["rows"]]
    check(len(stored_t) == len(served_t) and any(t != int(t) for t in stored_t)
          and all(abs(a - b) <= 1e-11 * max(abs(b), 1e-300) for a, b in zip(served_t, stored_t)),
          "/events t_ms equal the stored values to 11 significant digits")
    doc = json.load(open(os.path.join(SCHEMA_DIR, "downloads", "memory_events.json")))
    errs = schema_errors(events, doc)
    check(not errs, f"the event list follows schema/downloads/memory_events.json: {errs[:5]}")
    bad = dict(events, rows=[events["rows"][0][:6]])  # the validator itself must catch a short row
    check(schema_errors(bad, doc), "a row with a missing cell breaks the documented schema")
    expect_error(d, "GET", f"/v1/jobs/{job['id']}/events?run=99", 404, "not_found", "run")
    # a job run with record_events false says so, instead of "no recorded events"
    quiet = d.submit({"kind": "memory", "model": "tiny", "context_length": 16, "mode": "inference",
                      "record_events": False})
    check(d.wait_status(quiet["id"], ("succeeded", "failed"))["status"] == "succeeded", "record_events false job")
    expect_error(d, "GET", f"/v1/jobs/{quiet['id']}/events?run=0", 404, "not_found", "run")
    _, _, body = d.get(f"/v1/jobs/{quiet['id']}/events?run=0")
    check("ran with record_events false" in body.get("error", {}).get("message", ""),
          f"events of a record_events false job: {body}")
    _, _, body = d.get(f"/v1/jobs/{quiet['id']}/events?run=7")
    check(body.get("error", {}).get("message") == f"job {quiet['id']} has no run 7", f"events of no run: {body}")
    # the README asks for a memory job's events right after submitting it: a job still queued has no run yet,
    # and the 404 says so (not that the job lacks the run)
    long_job = d.submit({"kind": "numerics", "count": LONG_COUNT})
    waiting = d.submit({"kind": "memory", "model": "tiny", "context_length": 16, "mode": "inference"})
    expect_error(d, "GET", f"/v1/jobs/{waiting['id']}/events?run=0", 404, "not_found", "run")
    _, _, body = d.get(f"/v1/jobs/{waiting['id']}/events?run=0")
    check(body.get("error", {}).get("message", "").startswith(f"job {waiting['id']} has no run 0 yet (it is queued"),
          f"events of a queued job: {body}")
    for queued in (waiting, long_job):
        d.request("DELETE", f"/v1/jobs/{queued['id']}")
        d.wait_status(queued["id"], ("cancelled", "failed", "succeeded"), timeout=40)
    db = sqlite3.connect(f"file:{d.db}?mode=ro", uri=True)
    n = db.execute("SELECT count(*) FROM memory_summary WHERE job_id = ?", (job["id"],)).fetchone()[0]
    check(n == 2, "memory_summary view")
    db.close()
    # a point that ran out of memory is a row of the table and of memory_summary with its reason, beside the
    # point that ran; its partial event list stays downloadable
    job = d.submit({"kind": "memory", "model": "tiny", "context_length": [32, 4096], "batch_size": 1,
                    "mode": "inference", "memory_limit_bytes": 200_000_000})
    done = d.wait_status(job["id"], ("succeeded", "failed"), timeout=60)
    failed = [r for r in done.get("runs", []) if r["status"] == "failed"]
    check(done["status"] == "succeeded" and len(failed) == 1 and failed[0]["error"].startswith("out of memory in"),
          f"memory job with an OOM point: {done['status']} {[r['error'] for r in done.get('runs', [])]}")
    status, _, table = d.get(f"/v1/jobs/{job['id']}/table")
    rows = {r[2]: r for r in table.get("rows", [])} if status == 200 else {}
    check(table.get("columns", [None])[-1] == "failed" and len(rows) == 2 and isinstance(rows.get(32, [0] * 5)[4], float)
          and rows[32][-1] is None and rows.get(4096, [None] * 5)[4] == "OOM"
          and rows[4096][-1] == "inference: " + failed[0]["error"], f"memory table with an OOM point: {table}")
    status, _, md = d.get(f"/v1/jobs/{job['id']}/table?format=md")
    check(status == 200 and len(md.splitlines()) == 4 and "| OOM |" in md and "out of memory in" in md,
          f"memory md table with an OOM point: {md}")
    # a column of reals prints with one number of decimals (the residual stream's 0.0625 MiB at context 32 as 0.062,
    # 2 significant digits past the column's own 2 decimals, and 8.000 beside it, not 8), the one the json table's
    # "decimals" gives the page
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in md.splitlines()[2:]]
    for k, want in enumerate(table.get("decimals", [])):
        shown = {len(c.split(".")[1]) if "." in c else 0 for c in (row[k] for row in cells) if re.fullmatch(r"-?[\d.]+", c)}
        check(want is None or shown <= {want}, f"memory md column {k} prints {shown} decimals, the table says {want}: {md}")
    check(table.get("decimals", [None] * 7)[6] == 3, f"memory table decimals: {table.get('decimals')}")
    db = sqlite3.connect(f"file:{d.db}?mode=ro", uri=True)
    summary = db.execute("SELECT context_length, inference_peak_mib, failed IS NOT NULL FROM memory_summary "
                         "WHERE job_id = ?", (job["id"],)).fetchall()
    stored = db.execute("SELECT status, error FROM memory_runs WHERE job_id = ? ORDER BY run_id",
                        (job["id"],)).fetchall()
    db.close()
    check(len(summary) == 2 and summary[0][0] == 32 and summary[0][2] == 0 and summary[1] == (4096, "OOM", 1),
          f"memory_summary with an OOM point: {summary}")
    check(stored == [("succeeded", None), ("failed", failed[0]["error"])], f"memory_runs with an OOM point: {stored}")
    status, _, events = d.get(f"/v1/jobs/{job['id']}/events?run={failed[0]['index']}")
    check(status == 200 and len(events["rows"]) > 0, f"the OOM point's partial event list: {status}")


def test_readme_queries(d):
    """Every sqlite3 query the README shows runs against a real database."""
    readme = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")).read()
    # (the one-shot example's runs.db has the daemon's schema: its query runs here too)
    queries = re.findall(r'sqlite3 -readonly -box (?:lmperf|runs)\.db "(.*?)"', readme, re.S)
    check(len(queries) >= 5, f"README shows at least five sqlite3 queries ({len(queries)})")
    for q in queries:
        out = subprocess.run(["sqlite3", "-readonly", d.db, q], capture_output=True, text=True)
        check(out.returncode == 0 and not out.stderr, f"README query fails: {q[:60]}...: {out.stderr}")


def test_errors(d):
    expect_error(d, "POST", "/v1/jobs", 400, "malformed_json", body="{not json",
                 headers={"Content-Type": "application/json"})
    expect_error(d, "POST", "/v1/jobs", 400, "malformed_json", body="", headers={"Content-Type": "application/json"})
    expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", body=[1, 2])
    expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "kind", body={})
    expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "kind", body={"kind": "teleport"})
    expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "count", body={"kind": "numerics", "count": "lots"})
    expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "count", body={"kind": "numerics", "count": -3})
    expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "colour", body={"kind": "numerics", "colour": 1})
    expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "attention",
                 body={"kind": "benchmark", "model": "tiny", "context_length": 16, "attention": "naive_fast"})
    expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", '""', body={"kind": "numerics", "": 1})
    expect_error(d, "POST", "/v1/jobs", 400, "malformed_json", body='{"kind":"numerics","kind":"numerics"}',
                 headers={"Content-Type": "application/json"})
    job = d.submit(b'\xef\xbb\xbf{"kind": "numerics", "count": 10}', headers={"Content-Type": "application/json"})
    check(job.get("kind") == "numerics", f"a spec behind a UTF-8 byte order mark: {job}")  # as lmperfd run reads it
    expect_error(d, "POST", "/v1/jobs", 400, "malformed_json", body=b'\xef\xbb\xbf',
                 headers={"Content-Type": "application/json"})
    expect_error(d, "POST", "/v1/jobs", 415, "unsupported_media_type", body="kind=numerics",
                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    # ids and query numbers are plain digits: no sign, no space
    expect_error(d, "GET", "/v1/jobs/+1", 404, "not_found", "id")
    expect_error(d, "GET", "/v1/jobs/%201", 404, "not_found", "id")
    expect_error(d, "GET", "/v1/jobs?limit=%2B5", 400, "bad_request", "limit")
    expect_error(d, "GET", "/v1/jobs?limit=%205", 400, "bad_request", "limit")
    # a query argument the route does not read (a misspelt one) is refused naming it and what the route takes,
    # not answered as if it had not been given (?fromat=md: JSON; ?stauts=failed: every job)
    for path, name, takes in (("/v1/jobs?stauts=failed", "stauts", "GET /v1/jobs takes kind, status, limit, offset"),
                              (f"/v1/jobs/{job['id']}/table?fromat=md", "fromat",
                               "GET /v1/jobs/{id}/table takes format, experiment, run, range, pivot"),
                              (f"/v1/jobs/{job['id']}/events?runs=0", "runs", "GET /v1/jobs/{id}/events takes run"),
                              ("/v1/compare?jobs=1,2&basline=1", "basline", "GET /v1/compare takes jobs, baseline"),
                              ("/v1/jobs?kind=numerics&Kind=benchmark", "Kind", "GET /v1/jobs takes kind, status")):
        got, _, body = d.request("GET", path)
        error = body.get("error", {}) if isinstance(body, dict) else {}
        check(got == 400 and error.get("field") == name and
              error.get("message", "").startswith(f"unknown query argument '{name}': {takes}"),
              f"GET {path}: {got} {body}, want 400 naming {name}")
    # a value refused is quoted, beside the values taken
    kinds = "benchmark, numerics, memory, allreduce, attention, profile"
    for path, field, message in (
            ("/v1/jobs?status=done", "status",
             "status must be one of queued, running, succeeded, failed, cancelled, interrupted, not 'done'"),
            ("/v1/jobs?kind=bench", "kind", f"no job kind named 'bench' (the kinds: {kinds})"),
            ("/v1/schemas/bench", "kind", f"no job kind named 'bench' (the kinds: {kinds})"),
            ("/v1/jobs?limit=ten", "limit", "limit must be an integer from 0 to 1000, not 'ten'"),
            (f"/v1/jobs/{job['id']}/table?run=-1", "run", "run must be an integer from 0 to 2147483647, not '-1'")):
        got, _, body = d.request("GET", path)
        error = body.get("error", {}) if isinstance(body, dict) else {}
        check(got in (400, 404) and error.get("field") == field and error.get("message") == message,
              f"GET {path}: {got} {body}, want {field}: {message}")
    got, _, body = d.request("GET", "/v1/jobs?=x")
    check(got == 400 and body["error"]["field"] is None and "without a name" in body["error"]["message"],
          f"GET /v1/jobs?=x: {got} {body}")
    for path in ("/healthz?_=1", "/v1/system?x=1", f"/v1/jobs/{job['id']}?format=md"):  # routes that read none
        check(d.request("GET", path)[0] == 200, f"GET {path} ignores an argument it does not read")
    # a custom model name of 31 characters, each 2 bytes in UTF-8: the job runs and keeps the whole name
    name = "\u00e9" * 31
    job = d.submit({"kind": "benchmark", "model": {"name": name, "d_model": 8, "d_ff": 8, "num_layers": 1,
                    "num_heads": 2}, "context_length": 4, "batch_size": 1, "warmup_steps": 0, "measure_steps": 1,
                    "mode": "forward"})
    done = d.wait_status(job["id"], ("succeeded", "failed"))
    run = done["runs"][0] if done.get("runs") else {}
    check(done["status"] == "succeeded" and run.get("model") == name, f"31-character UTF-8 model name: {done}")
    # a declared oversized body is refused before it is read
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)
    conn.putrequest("POST", "/v1/jobs")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(2 << 20))
    conn.endheaders()
    try:
        conn.send(b"{" + b" " * 65536)
    except (BrokenPipeError, ConnectionResetError):
        pass
    resp = conn.getresponse()
    payload = json.loads(resp.read())
    check(resp.status == 413 and payload["error"]["code"] == "payload_too_large", f"413: {resp.status} {payload}")
    conn.close()
    # a chunked body without Content-Length is cut off too
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)
    conn.putrequest("POST", "/v1/jobs")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    chunk = b"x" * 65536
    try:
        for _ in range(24):
            conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        conn.send(b"0\r\n\r\n")
        resp = conn.getresponse()
        check(resp.status == 413, f"chunked oversized body: {resp.status}")
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server may close early; it must stay up (checked below)
    conn.close()
    expect_error(d, "GET", "/v1/nothing", 404, "not_found")
    expect_error(d, "GET", "/v1/jobs/999999", 404, "not_found", "id")
    expect_error(d, "GET", "/v1/jobs/abc", 404, "not_found", "id")
    expect_error(d, "GET", "/v1/jobs/%00", 404, "not_found", "id")  # not the job list
    expect_error(d, "DELETE", "/v1/jobs/999999", 404, "not_found", "id")
    resp = expect_error(d, "PUT", "/v1/jobs", 405, "method_not_allowed")
    check("POST" in (resp.getheader("Allow") or "") and "GET" in resp.getheader("Allow"), "Allow header")
    expect_error(d, "POST", "/healthz", 405, "method_not_allowed")
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)  # HEAD: GET without the body
    conn.request("HEAD", "/healthz")
    resp = conn.getresponse()
    body = resp.read()
    check(resp.status == 200 and body == b"" and int(resp.getheader("Content-Length", "0")) > 0,
          f"HEAD /healthz: {resp.status} {body!r}")
    conn.close()
    expect_error(d, "GET", "/v1/jobs?status=done", 400, "bad_request", "status")
    expect_error(d, "GET", "/v1/jobs?kind=teleport", 400, "bad_request", "kind")
    expect_error(d, "GET", "/v1/jobs?limit=-1", 400, "bad_request", "limit")
    expect_error(d, "GET", "/v1/jobs?limit=abc", 400, "bad_request", "limit")
    job = d.submit({"kind": "numerics"})
    d.wait_status(job["id"], ("succeeded",))
    expect_error(d, "DELETE", f"/v1/jobs/{job['id']}", 409, "conflict", "id")
    _, _, body = d.request("DELETE", f"/v1/jobs/{job['id']}")  # the README's DELETE of a finished job
    check(body.get("error", {}).get("message") ==
          f"job {job['id']} has already ended (succeeded): only a queued or running job can be cancelled",
          f"cancel of a finished job says it has ended: {body}")
    expect_error(d, "DELETE", f"/v1/jobs/{job['id']}%00zzz", 404, "not_found", "id")  # a NUL does not end the id
    check(d.get("/healthz")[0] == 200, "daemon alive after the error barrage")


def test_text_and_numbers(d):
    """Integers written as reals, exact bounds in messages, text that is not
    (or no longer) UTF-8, characters counted as characters, many query
    arguments, a worker error cut inside a character."""
    json_hdr = {"Content-Type": "application/json"}
    # 64.0 would read as 0 in the runner: refused, naming the field and saying how to write it
    attention = {"kind": "attention", "seq_len": 16, "impl": "naive", "passes": 64.0, "batch": 1, "d_head": 16}
    got, _, body = d.request("POST", "/v1/jobs", attention)
    check(got == 400 and body["error"]["field"] == "passes" and "64.0" in body["error"]["message"],
          f"passes 64.0: {got} {body}")
    expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "context_length[1]",
                 body={"kind": "benchmark", "model": "tiny", "context_length": [16, 32.0]})
    expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "count", body='{"kind": "numerics", "count": 1e3}',
                 headers=json_hdr)
    got, _, body = d.request("POST", "/v1/jobs", {"kind": "numerics", "count": 10000000001})
    check(got == 400 and "10000000000" in body["error"]["message"] and "10000000001" in body["error"]["message"],
          f"count bound printed exactly: {body}")
    expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "sizes[0]",
                 body={"kind": "allreduce", "backend": "mpi", "sizes": ["4.0000001B"], "world_sizes": [2]})
    expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "precision[1]",
                 body={"kind": "benchmark", "model": "tiny", "context_length": 16, "precision": ["fp32", "fp32"]})
    # a point named twice in any sweep list is refused, as in precision, mode and the attention lists
    for kind in ("benchmark", "memory", "profile"):
        expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "context_length[2]",
                     body={"kind": kind, "model": "tiny", "context_length": [16, 32, 16]})
        expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "batch_size[1]",
                     body={"kind": kind, "model": "tiny", "context_length": 16, "batch_size": [2, 2]})
        expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "model[1]",
                     body={"kind": kind, "model": ["tiny", "tiny"], "context_length": 16})
        # the same model written twice otherwise (a preset and its own shape under its name): one point twice,
        # which the tables and benchmark_summary could not tell apart (each row doubled)
        tiny = next(m for m in d.get("/v1/models")[2]["models"] if m["name"] == "tiny")
        shape = {k: tiny[k] for k in ("d_model", "d_ff", "num_layers", "num_heads")}
        expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "model[1]",
                     body={"kind": kind, "model": ["tiny", dict(shape, name="tiny")], "context_length": 16})
        expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "model[1]",
                     body={"kind": kind, "model": [shape, dict(shape, name="custom")], "context_length": 16})
    expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "world_sizes[1]",
                 body={"kind": "allreduce", "backend": "mpi", "sizes": [1024], "world_sizes": [2, 2]})
    expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "sizes[1]",
                 body={"kind": "allreduce", "backend": "mpi", "sizes": ["1MB", "1MB"], "world_sizes": [2]})
    # the message names the repeated value and where it was first, whatever the kind and the list
    for spec, field, needle in (
            ({"kind": "benchmark", "model": "tiny", "context_length": [128, 128]}, "context_length[1]",
             "context_length[1] repeats context_length[0] (128)"),
            ({"kind": "benchmark", "model": "tiny", "context_length": 16, "precision": ["fp32", "bf16", "fp32"]},
             "precision[2]", 'precision[2] repeats precision[0] ("fp32")'),
            ({"kind": "memory", "model": ["small", "small"], "context_length": 16}, "model[1]",
             'model[1] repeats model[0] ("small")'),
            ({"kind": "profile", "model": "tiny", "context_length": 16, "mode": ["forward", "forward"]}, "mode[1]",
             'mode[1] repeats mode[0] ("forward")'),
            ({"kind": "benchmark", "model": "tiny", "context_length": 16, "warmup_steps": [0, 5, 0]},
             "warmup_steps[2]", "warmup_steps[2] repeats warmup_steps[0] (0)"),
            ({"kind": "attention", "seq_len": [64, 64]}, "seq_len[1]", "seq_len[1] repeats seq_len[0] (64)"),
            ({"kind": "attention", "seq_len": 64, "d_head": [16, 32, 16]}, "d_head[2]",
             "d_head[2] repeats d_head[0] (16)"),
            ({"kind": "allreduce", "backend": ["mpi", "mpi"], "sizes": [1024]}, "backend[1]",
             'backend[1] repeats backend[0] ("mpi")'),
            ({"kind": "allreduce", "backend": "mpi", "sizes": [1024], "world_sizes": [2, 4, 2]}, "world_sizes[2]",
             "world_sizes[2] repeats world_sizes[0] (2)")):
        got, _, body = d.request("POST", "/v1/jobs", spec)
        error = body.get("error", {}) if isinstance(body, dict) else {}
        check(got == 400 and error.get("field") == field and needle in error.get("message", ""),
              f"{spec}: {got} {body}, want {field}: {needle}")
    # one size written twice otherwise (the same bytes): one point twice, refused naming both spellings
    for sizes, field, needle in ((["4KB", "1MB", "1000KB"], "sizes[2]",
                                  "sizes[2] (1000KB) is sizes[1] (1MB) again: both are 1000000 bytes"),
                                 (["1MiB", 1048576], "sizes[1]", "sizes[1] (1048576) is sizes[0] (1MiB) again"),
                                 (["1MB", "1 mb"], "sizes[1]", "sizes[1] (1 mb) is sizes[0] (1MB) again")):
        got, _, body = d.request("POST", "/v1/jobs", {"kind": "allreduce", "backend": "mpi", "sizes": sizes})
        error = body.get("error", {}) if isinstance(body, dict) else {}
        check(got == 400 and error.get("field") == field and needle in error.get("message", ""),
              f"sizes {sizes}: {got} {body}, want {field}: {needle}")
    # client text that is not UTF-8 (%ff), and UTF-8 cut by a fixed-size message buffer: JSON bodies
    for path in ("/v1/jobs/%ff", "/v1/jobs?kind=%ff", "/v1/schemas/%ff"):
        got, resp, body = d.request("GET", path)
        check(got in (400, 404) and isinstance(body, dict) and "error" in body, f"GET {path}: {got} {body!r}")
    long_impl = "a" + "\u00e9" * 60
    expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "impl",
                 body={"kind": "attention", "seq_len": 16, "impl": long_impl})
    # maxLength counts characters: 150 two-byte characters fit a 200-character label
    job = d.submit({"kind": "numerics", "count": 10, "label": "\u00e9" * 150})
    check(d.wait_status(job["id"], ("succeeded",))["label"] == "\u00e9" * 150, "a 150-character label kept")
    expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", "label", body={"kind": "numerics", "label": "\u00e9" * 201})
    # an accumulator that overflows (fp16 past 65504) is a row with non_finite "inf", not a row left out
    job = d.submit({"kind": "numerics", "summand": 1000, "count": 100})
    done = d.wait_status(job["id"], ("succeeded", "failed"))
    rows = done["runs"][0]["rows"] if done.get("runs") else []
    fp16 = [r for r in rows if r["accumulator"] == "float16"]
    check(len(rows) == 7 and len(fp16) == 1 and fp16[0]["non_finite"] == "inf" and fp16[0]["result"] is None
          and all(r["non_finite"] is None for r in rows if r["accumulator"] != "float16"),
          f"numerics rows with an overflow: {rows}")
    status, _, table = d.get(f"/v1/jobs/{job['id']}/table")
    check(status == 200 and len(table["rows"]) == 7 and table["rows"][1][5] == "inf",
          f"numerics table with an overflow: {table}")
    db = sqlite3.connect(f"file:{d.db}?mode=ro", uri=True)
    stored = db.execute("SELECT count(*), max(result) FROM numerics_accumulation WHERE job_id = ?",
                        (job["id"],)).fetchone()
    db.close()
    check(stored == (7, float("inf")), f"numerics_accumulation with an overflow: {stored}")
    # thousands of query arguments still get an answer
    got, _, _ = d.get("/healthz?" + "a=b&" * 2000)
    check(got == 200, f"2000 query arguments: {got}")
    # a worker error holding a character cut at a buffer's end (mpirun repeats the
    # hostfile path) is still reported: the job fails with its reason, it does not hang
    if shutil.which("mpirun"):
        where = os.path.join(TMP, "\u00e9" * 100)
        os.makedirs(where, exist_ok=True)
        hostfile = os.path.join(where, "\u00e9" * 100)
        with open(hostfile, "w") as f:
            f.write("no-such-host-for-lmperf slots=1\n")
        job = d.submit({"kind": "allreduce", "backend": "mpi", "sizes": [1024], "world_sizes": [2],
                        "iterations": 1, "warmup": 0, "hostfile": hostfile})
        done = d.wait_status(job["id"], ("failed", "succeeded"), timeout=60)
        check(done["status"] == "failed" and done.get("error"), f"mpi job with a cut error: {done}")
        # its failed point is a row of the allreduce table (allreduce_runs keeps failed points)
        status, _, tbl = d.get(f"/v1/jobs/{job['id']}/table?format=json")
        rows = tbl.get("rows") if isinstance(tbl, dict) else None
        check(status == 200 and rows and str(rows[0][-1]).startswith("failed"), f"failed allreduce point stored: {tbl}")
    else:
        print("mpirun not found: the cut-error check did not run", flush=True)
    check(d.get("/healthz")[0] == 200, "daemon alive after the text checks")


def test_cancel(d):
    long_job = d.submit({"kind": "numerics", "count": LONG_COUNT})
    queued = d.submit({"kind": "numerics"})
    d.wait_status(long_job["id"], ("running",))
    check(d.job(queued["id"])["status"] == "queued", "second job waits in the queue")
    status, _, body = d.request("DELETE", f"/v1/jobs/{queued['id']}")
    check(status == 200 and body["status"] == "cancelled" and body.get("cancel_requested_at", 0) is None,
          f"cancel queued: {status} {body}")
    status, _, body = d.request("DELETE", f"/v1/jobs/{long_job['id']}")
    # until the worker stops the job is running, and says a cancel is under way (the page: "cancelling…")
    check(status == 202 and isinstance(body.get("cancel_requested_at"), str), f"cancel running: {status} {body}")
    done = d.wait_status(long_job["id"], ("cancelled", "failed", "succeeded"), timeout=20)
    check(done["status"] == "cancelled" and done.get("cancel_requested_at") == body["cancel_requested_at"],
          f"running job cancelled: {done}")
    # a cancel right behind its job (often in the same socket read as the job)
    # is seen by the runner, not left to the kill-after-grace fallback
    for _ in range(5):
        job = d.submit({"kind": "numerics", "count": LONG_COUNT})
        status, _, body = d.request("DELETE", f"/v1/jobs/{job['id']}")
        check(status in (200, 202), f"immediate cancel: {status} {body}")
        done = d.wait_status(job["id"], ("cancelled", "failed", "succeeded"), timeout=10)
        check(done["status"] == "cancelled" and "did not stop" not in (done["error"] or ""),
              f"immediate cancel honoured by the runner: {done['status']} {done['error']}")
    after = d.submit({"kind": "numerics"})
    check(d.wait_status(after["id"], ("succeeded", "failed"))["status"] == "succeeded", "queue goes on")


def test_second_daemon(d):
    """A second lmperfd on the same database is refused before it touches
    the jobs: the first one's running job stays running, its queued job is
    not run twice."""
    long_job = d.submit({"kind": "numerics", "count": LONG_COUNT})
    queued = d.submit({"kind": "numerics"})
    d.wait_status(long_job["id"], ("running",))
    second = subprocess.run([LMPERFD, "--port", "0", "--db", d.db, "--cpu-only"], capture_output=True, text=True,
                            timeout=20)
    check(second.returncode != 0 and "in use by another lmperfd" in second.stderr,
          f"second daemon on {d.db}: rc {second.returncode}: {second.stderr[-300:]}")
    check(d.job(long_job["id"])["status"] == "running" and d.job(queued["id"])["status"] == "queued",
          "the second daemon left the first one's jobs alone")
    status, _, _ = d.request("DELETE", f"/v1/jobs/{long_job['id']}")
    check(status == 202, f"cancel the long job: {status}")
    d.wait_status(long_job["id"], ("cancelled",), timeout=20)
    check(d.wait_status(queued["id"], ("succeeded", "failed"))["status"] == "succeeded", "queue goes on")


def test_worker_killed(d):
    job = d.submit({"kind": "numerics", "count": LONG_COUNT})
    d.wait_status(job["id"], ("running",))
    system = d.get("/v1/system")[2]
    busy = [w for w in system["workers"] if w["state"] == "busy"]
    check(len(busy) == 1 and busy[0]["job_id"] == job["id"], f"busy worker: {system['workers']}")
    os.kill(busy[0]["pid"], signal.SIGKILL)
    done = d.wait_status(job["id"], ("failed", "succeeded", "cancelled"))
    check(done["status"] == "failed" and "worker crashed" in (done["error"] or "")
          and "signal 9" in done["error"], f"killed worker: {done['status']} {done['error']}")
    nxt = d.submit({"kind": "numerics"})
    check(d.wait_status(nxt["id"], ("succeeded", "failed"))["status"] == "succeeded", "next job after a crash")
    system = d.get("/v1/system")[2]
    check(system["workers"][0]["restarts"] >= 1 and system["workers"][0]["pid"] != busy[0]["pid"],
          "a fresh worker was started")


def test_gpu_only_refused(d):
    """On a daemon without a GPU worker (--cpu-only) a job that would certainly
    fail there is refused at submit, naming the field that asks for a GPU;
    nothing is queued and the worker is not touched. Specs with a point that
    runs on the CPU are accepted."""
    before = d.get("/v1/system")[2]["workers"][0]
    total = d.get("/v1/jobs")[2]["total"]
    for spec, field in (({"kind": "profile", "model": "tiny", "context_length": 32, "batch_size": 1}, "kind"),
                        ({"kind": "allreduce", "sizes": ["1MB"]}, "backend"),
                        ({"kind": "allreduce", "backend": "nccl", "sizes": [1024], "world_sizes": [1]}, "backend"),
                        ({"kind": "attention", "seq_len": 32, "impl": "flash"}, "impl"),
                        ({"kind": "attention", "seq_len": 32, "dtype": ["bfloat16", "float16"]}, "dtype")):
        expect_error(d, "POST", "/v1/jobs", 400, "invalid_spec", field, body=spec)
        _, _, body = d.request("POST", "/v1/jobs", spec)
        check("there is no GPU here" in body.get("error", {}).get("message", ""), f"{spec}: says why: {body}")
    check(d.get("/v1/jobs")[2]["total"] == total, "refused jobs are not stored")
    job = d.submit({"kind": "attention", "seq_len": 32, "d_head": 16, "impl": "both", "passes": 1, "warmup": 0})
    check(d.wait_status(job["id"], ("succeeded", "failed"))["status"] == "succeeded",
          "impl both runs its naive points on the cpu")
    after = d.get("/v1/system")[2]["workers"][0]
    check(after["pid"] == before["pid"] and after["restarts"] == before["restarts"], f"worker untouched: {after}")


def test_timeout(d):
    job = d.submit({"kind": "numerics", "count": LONG_COUNT, "timeout_s": 1})
    done = d.wait_status(job["id"], ("failed", "succeeded"), timeout=20)
    check(done["status"] == "failed" and "timed out" in (done["error"] or ""), f"timeout: {done['error']}")
    nxt = d.submit({"kind": "numerics"})
    check(d.wait_status(nxt["id"], ("succeeded", "failed"))["status"] == "succeeded", "next job after a timeout")


def test_token():
    d = Daemon("token", args=["--token", "s3cret"])
    try:
        expect_error(d, "POST", "/v1/jobs", 401, "unauthorized", body={"kind": "numerics"})
        expect_error(d, "POST", "/v1/jobs", 401, "unauthorized", body={"kind": "numerics"},
                     headers={"Authorization": "Bearer wrong"})
        job = d.submit({"kind": "numerics"}, headers={"Authorization": "Bearer s3cret"})
        check(d.get(f"/v1/jobs/{job['id']}")[0] == 200, "GET needs no token")
        d.submit({"kind": "numerics"}, headers={"Authorization": "bearer s3cret"})  # the scheme in any case
        expect_error(d, "DELETE", f"/v1/jobs/{job['id']}", 401, "unauthorized")
    finally:
        d.stop()


def test_queue_full():
    d = Daemon("full", args=["--max-queued", "1"])
    try:
        running = d.submit({"kind": "numerics", "count": LONG_COUNT})
        d.wait_status(running["id"], ("running",))
        d.submit({"kind": "numerics"})
        expect_error(d, "POST", "/v1/jobs", 503, "unavailable", body={"kind": "numerics"})
    finally:
        d.stop(signal.SIGKILL)
    # concurrent submissions do not slip past the limit between its check and the insert
    d = Daemon("full2", args=["--max-queued", "2"])
    try:
        running = d.submit({"kind": "numerics", "count": LONG_COUNT})
        d.wait_status(running["id"], ("running",))
        codes = []
        def post():
            codes.append(d.request("POST", "/v1/jobs", {"kind": "numerics"})[0])
        threads = [threading.Thread(target=post) for _ in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        depth = d.get("/healthz")[2]["queue_depth"]
        check(codes.count(202) == 2 and codes.count(503) == 38 and depth == 2,
              f"40 concurrent submissions at --max-queued 2: {codes.count(202)} accepted, queue depth {depth}")
    finally:
        d.stop(signal.SIGKILL)


def test_host_localhost():
    """--host localhost listens on 127.0.0.1; an address that is not IPv4 is
    refused (exit 2, naming --host) before the database is created."""
    d = Daemon("localhost", args=["--host", "localhost"])
    try:
        status, _, health = d.get("/healthz")
        check(status == 200 and health["status"] == "ok", f"--host localhost: {status} {health}")
        check("listening on http://127.0.0.1:" in open(d.log_path).read(), "--host localhost logged as 127.0.0.1")
    finally:
        d.stop()
    db = os.path.join(TMP, "badhost.db")
    for host in ("example.invalid", "::1", "256.0.0.1"):
        p = subprocess.run([LMPERFD, "--host", host, "--port", "0", "--db", db, "--cpu-only"], capture_output=True,
                           text=True, timeout=20)
        check(p.returncode == 2 and "--host" in p.stderr and host in p.stderr,
              f"--host {host}: rc {p.returncode}: {p.stderr[-300:]}")
    check(not os.path.exists(db), "a bad --host created the database")


def test_busy_port():
    """A start on a busy port fails before it touches the jobs: no recovery
    (a job left running by a killed daemon stays 'running'), no queued job
    run; the next start on a free port recovers and runs them."""
    import socket
    d = Daemon("busy")
    running = d.submit({"kind": "numerics", "count": LONG_COUNT})
    d.wait_status(running["id"], ("running",))
    queued = d.submit({"kind": "numerics"})
    d.stop(signal.SIGKILL)
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    try:
        p = subprocess.run([LMPERFD, "--port", str(holder.getsockname()[1]), "--db", d.db, "--cpu-only"],
                           capture_output=True, text=True, timeout=20)
    finally:
        holder.close()
    check(p.returncode != 0 and "cannot listen" in p.stderr and "recovered" not in p.stderr
          and "worker" not in p.stderr, f"start on a busy port: rc {p.returncode}: {p.stderr[-400:]}")
    check("start this one with --port N or LMPERF_PORT=N" in p.stderr,
          f"a busy port's message says how to pick another: {p.stderr[-400:]}")
    db = sqlite3.connect(f"file:{d.db}?mode=ro", uri=True)
    states = [db.execute("SELECT status FROM jobs WHERE id = ?", (j["id"],)).fetchone()[0] for j in (running, queued)]
    db.close()
    check(states == ["running", "queued"], f"jobs after a start on a busy port: {states}")
    d2 = Daemon("busy", db=d.db)
    try:
        check(d2.job(running["id"])["status"] == "interrupted", "the next start recovers the running job")
        check(d2.wait_status(queued["id"], ("succeeded", "failed"))["status"] == "succeeded",
              "the next start runs the queued job")
    finally:
        d2.stop()


def test_sigkill_restart():
    d = Daemon("crash")
    running = d.submit({"kind": "numerics", "count": LONG_COUNT})
    d.wait_status(running["id"], ("running",))
    queued = [d.submit({"kind": "numerics"}) for _ in range(2)]
    worker_pids = [w["pid"] for w in d.get("/v1/system")[2]["workers"]]
    d.stop(signal.SIGKILL)
    time.sleep(0.3)
    for pid in worker_pids:  # workers die with the daemon (PR_SET_PDEATHSIG)
        check(not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z",
              f"worker {pid} outlived the daemon")
    d2 = Daemon("crash", db=d.db)
    try:
        j = d2.job(running["id"])
        check(j["status"] == "interrupted" and j["error"], f"running job after SIGKILL: {j['status']}")
        for q in queued:
            check(d2.wait_status(q["id"], ("succeeded", "failed"))["status"] == "succeeded",
                  "queued job ran after the restart")
        db = sqlite3.connect(f"file:{d.db}?mode=ro", uri=True)
        check(db.execute("PRAGMA integrity_check").fetchone()[0] == "ok", "integrity_check after SIGKILL")
        db.close()
    finally:
        d2.stop()


def test_sigterm_graceful():
    d = Daemon("term")
    job = d.submit({"kind": "numerics", "count": 20_000_000})
    d.wait_status(job["id"], ("running",))
    code = d.stop(signal.SIGTERM)
    check(code == 0, f"exit status after SIGTERM: {code}")
    db = sqlite3.connect(f"file:{d.db}?mode=ro", uri=True)
    status = db.execute("SELECT status FROM jobs WHERE id = ?", (job["id"],)).fetchone()[0]
    check(status == "succeeded", f"running job finished before exit: {status}")
    db.close()
    log = open(d.log_path).read()
    check("waiting for running jobs" in log and "stopped" in log, "shutdown logged")


def test_sigterm_group():
    """A SIGTERM to the daemon's whole process group or cgroup (systemctl
    stop, timeout(1), kill -- -PGID), its workers' too, is the daemon's: the
    running job finishes as after a SIGTERM to the daemon alone, it is not
    failed by its worker's death."""
    d = Daemon("group")
    job = d.submit({"kind": "numerics", "count": 20_000_000})
    d.wait_status(job["id"], ("running",))
    workers = [w["pid"] for w in d.get("/v1/system")[2]["workers"]]
    d.proc.send_signal(signal.SIGTERM)
    for pid in workers:
        os.kill(pid, signal.SIGTERM)
    try:
        code = d.proc.wait(60)  # d.stop would send a second SIGTERM: the abort
    except subprocess.TimeoutExpired:
        code = "no exit within 60 s"
    d.stop()
    check(code == 0, f"exit status after a SIGTERM to the daemon and its workers: {code}")
    db = sqlite3.connect(f"file:{d.db}?mode=ro", uri=True)
    status, error = db.execute("SELECT status, error FROM jobs WHERE id = ?", (job["id"],)).fetchone()
    db.close()
    check(status == "succeeded", f"the running job after a SIGTERM to the whole group: {status} {error}")


def test_sigterm_worker_restarting():
    """A SIGTERM while a crashed worker waits out its restart backoff (it
    crashed soon after each start): the daemon exits 0, the empty slot holding
    nothing (a sanitizer's leak report is not 0)."""
    d = Daemon("restarting")
    pid = None
    for _ in range(4):  # each crash soon after its start doubles the backoff: 0.5, 1, 2, 4 s
        d.wait_for(lambda: [(w["state"], w["pid"] != pid) for w in d.get("/v1/system")[2]["workers"]]
                   == [("idle", True)], "a fresh idle worker", timeout=30)
        pid = d.get("/v1/system")[2]["workers"][0]["pid"]
        os.kill(pid, signal.SIGKILL)
    d.wait_for(lambda: d.workers_state() == ["empty"], "the crashed worker's slot to wait for its restart",
               timeout=10)
    code = d.stop()
    check(code == 0, f"exit status after SIGTERM while the worker waits for its restart: {code}")


def test_sigterm_while_polled():
    """SIGTERM while clients keep asking for /v1/system (the page polls it):
    the HTTP threads stop before the scheduler they read is freed, the daemon
    exits 0 (a use-after-free is a sanitizer's report, not 0)."""
    d = Daemon("polled")
    stop = threading.Event()

    def poll():
        while not stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", d.port), timeout=5) as s:
                    s.sendall(b"GET /v1/system HTTP/1.1\r\nHost: lmperf\r\n\r\n" * 20)
                    s.recv(1 << 20)  # then closed with answers still coming: many connections, many requests
            except OSError:
                pass  # refused or reset once the daemon has gone

    pollers = [threading.Thread(target=poll) for _ in range(6)]
    for t in pollers:
        t.start()
    time.sleep(0.5)
    try:
        code = d.stop(timeout=60)
    finally:
        stop.set()
        for t in pollers:
            t.join()
    check(code == 0, f"exit status after SIGTERM while /v1/system is polled: {code}")


def test_sigterm_drain():
    """While running jobs drain after SIGTERM the API still answers: healthz
    503 "stopping", submissions 503, and a cancel ends the wait."""
    d = Daemon("drain")
    job = d.submit({"kind": "numerics", "count": LONG_COUNT})
    d.wait_status(job["id"], ("running",))
    d.proc.send_signal(signal.SIGTERM)
    d.wait_for(lambda: d.get("/healthz")[0] == 503, "healthz 503 while draining", timeout=10)
    status, _, body = d.get("/healthz")
    check(body.get("status") == "stopping", f"healthz while draining: {status} {body}")
    expect_error(d, "POST", "/v1/jobs", 503, "unavailable", body={"kind": "numerics"})
    got, _, _ = d.request("DELETE", f"/v1/jobs/{job['id']}")
    check(got in (200, 202), f"cancel while draining: {got}")
    code = d.stop(signal.SIGTERM, timeout=30)
    check(code == 0, f"exit status after the drain: {code}")
    db = sqlite3.connect(f"file:{d.db}?mode=ro", uri=True)
    status = db.execute("SELECT status FROM jobs WHERE id = ?", (job["id"],)).fetchone()[0]
    check(status == "cancelled", f"the cancelled job: {status}")
    db.close()


def test_second_signal():
    """A second SIGINT while a job runs stops the daemon promptly: the
    running job is cancelled (its worker killed), the queued one stays
    queued and runs at the next start; the database is intact."""
    d = Daemon("second")
    running = d.submit({"kind": "numerics", "count": LONG_COUNT})
    d.wait_status(running["id"], ("running",))
    queued = d.submit({"kind": "numerics"})
    worker_pids = [w["pid"] for w in d.get("/v1/system")[2]["workers"]]
    d.proc.send_signal(signal.SIGINT)
    d.wait_for(lambda: d.get("/healthz")[0] == 503, "healthz 503 after the first SIGINT", timeout=10)
    check(d.job(running["id"])["status"] == "running", "the first SIGINT leaves the running job running")
    t0 = time.time()
    code = d.stop(signal.SIGINT, timeout=15)
    check(code == 0 and time.time() - t0 < 10, f"exit after the second SIGINT: {code} in {time.time() - t0:.1f} s")
    for pid in worker_pids:
        check(not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z",
              f"worker {pid} outlived the second SIGINT")
    db = sqlite3.connect(f"file:{d.db}?mode=ro", uri=True)
    jobs = {i: db.execute("SELECT status, error FROM jobs WHERE id = ?", (i,)).fetchone()
            for i in (running["id"], queued["id"])}
    check(db.execute("PRAGMA integrity_check").fetchone()[0] == "ok", "integrity_check after the second SIGINT")
    db.close()
    check(jobs[running["id"]][0] == "cancelled" and "second SIGINT/SIGTERM" in (jobs[running["id"]][1] or ""),
          f"the running job after the second SIGINT: {jobs[running['id']]}")
    check(jobs[queued["id"]][0] == "queued", f"the queued job after the second SIGINT: {jobs[queued['id']]}")
    log = open(d.log_path).read()
    check("again: cancelling the running jobs" in log, "the second signal is logged")
    d2 = Daemon("second", db=d.db)
    try:
        check(d2.wait_status(queued["id"], ("succeeded", "failed"))["status"] == "succeeded",
              "the queued job runs at the next start")
        check(d2.job(running["id"])["status"] == "cancelled", "the cancelled job stays cancelled")
    finally:
        d2.stop()


def verdict(passed):
    """A test script's exit status: 1 after printing how many checks failed and where the daemons' logs are,
    else 0 after printing passed."""
    if failures:
        print(f"{len(failures)} failure(s); daemon logs in {TMP}")
        return 1
    print(passed)
    return 0


def main():
    d = Daemon("main")
    try:
        for test in (test_endpoints, test_warmup_sweep, test_precision_pivot, test_allreduce_oversubscribed, test_memory, test_readme_queries, test_errors, test_text_and_numbers, test_cancel, test_second_daemon, test_worker_killed, test_gpu_only_refused, test_timeout):
            print("--", test.__name__, flush=True)
            test(d)
    finally:
        code = d.stop()
        check(code == 0, f"exit status after SIGTERM, after the jobs above: {code}")  # a sanitizer's report: not 0
    for test in (test_token, test_queue_full, test_host_localhost, test_busy_port, test_sigkill_restart, test_sigterm_graceful, test_sigterm_group, test_sigterm_worker_restarting,
                 test_sigterm_while_polled, test_sigterm_drain, test_second_signal):
        print("--", test.__name__, flush=True)
        test()
    return verdict("all API tests passed")


if __name__ == "__main__":
    sys.exit(main())
