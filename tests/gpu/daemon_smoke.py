#!/usr/bin/env python3
"""The daemon on a GPU machine, end to end, in one device call: lmperfd with
its GPU worker(s), the numerics job on the GPU (real half arithmetic), a
benchmark sweep and a memory job on the CUDA backend, every result read back
through the API and sqlite3. Prints a summary; exit 1 on any failed check.

usage: daemon_smoke.py LMPERFD OUT_DIR"""
import json
import os
import sqlite3
import subprocess
import sys
import time
import urllib.request

LMPERFD, OUT = sys.argv[1], sys.argv[2]
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg, flush=True)
    return cond


def call(port, method, path, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def wait(port, job_id, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        _, job = call(port, "GET", f"/v1/jobs/{job_id}")
        if job["status"] not in ("queued", "running"):
            return job
        time.sleep(0.5)
    return job


def main():
    db = os.path.join(OUT, "smoke.db")
    port_file = os.path.join(OUT, "port")
    log = open(os.path.join(OUT, "daemon.log"), "w")
    proc = subprocess.Popen([LMPERFD, "--port", "0", "--port-file", port_file, "--db", db], stdout=log, stderr=log)
    try:
        for _ in range(200):
            if os.path.exists(port_file):
                break
            time.sleep(0.1)
        port = int(open(port_file).read())
        for _ in range(300):
            _, system = call(port, "GET", "/v1/system")
            if system["workers"] and all(w["state"] == "idle" for w in system["workers"]):
                break
            time.sleep(0.1)
        print("devices:", [d["name"] for d in system["devices"]], "gpu_count", system["gpu_count"])
        check(system["gpu_count"] >= 1 and system["devices"][0]["gpu_index"] == 0, "a GPU worker")

        _, job = call(port, "POST", "/v1/jobs", {"kind": "numerics"})
        job = wait(port, job["id"], 60)
        rows = job["runs"][0]["rows"] if job["runs"] else []
        res = {(r["accumulator"], r["summand_dtype"], r["cast"]): r["result"] for r in rows}
        print("numerics on", job["runs"][0]["computed_on"] if job["runs"] else None, json.dumps({"/".join(k): v for k, v in res.items()}))
        check(job["status"] == "succeeded" and job["runs"][0]["computed_on"] == "cuda:0", "numerics ran on the GPU")
        for key, want in ((("float32", "float32", "none"), 10.0001), (("float16", "float16", "none"), 9.9531),
                          (("float32", "float16", "implicit"), 10.0021), (("float32", "float16", "explicit"), 10.0021)):
            check(round(res.get(key, 0), 4) == want, f"numerics {key}: {res.get(key)} want {want}")
        _, cpu = call(port, "POST", "/v1/jobs", {"kind": "numerics", "device": "cpu"})
        cpu = wait(port, cpu["id"], 60)
        cpu_res = {(r["accumulator"], r["summand_dtype"], r["cast"]): r["result"] for r in cpu["runs"][0]["rows"]}
        check(cpu_res == res, f"GPU and exact CPU emulation agree bit for bit: {cpu_res}")

        spec = {"kind": "benchmark", "model": ["small"], "context_length": [128, 512], "precision": ["fp32", "tf32"],
                "mode": "train_step", "warmup_steps": 3, "measure_steps": 5}
        _, job = call(port, "POST", "/v1/jobs", spec)
        job = wait(port, job["id"], 300)
        check(job["status"] == "succeeded", f"benchmark job: {job['status']} {job['error']}")
        for r in job["runs"]:
            s = r.get("stats") or {}
            print("benchmark", r["model"], r["context_length"], r["precision"], r["status"], r.get("error"),
                  "fwd %.2f bwd %.2f opt %.2f ms" % (s["forward"]["mean_ms"], s["backward"]["mean_ms"],
                                                       s["optimizer"]["mean_ms"]) if s else "",
                  "mfu", r.get("mfu"), "peak MiB", (r.get("peak_memory_bytes") or 0) / 2**20)
            check(r["status"] == "succeeded", f"benchmark run {r['context_length']} {r['precision']}: {r.get('error')}")
        _, table = call(port, "GET", f"/v1/jobs/{job['id']}/table")
        print("table rows:", len(table.get("rows", [])))

        spec = {"kind": "memory", "model": "small", "context_length": [128, 256], "mode": ["inference", "train_step"],
                "record_events": False}
        _, job = call(port, "POST", "/v1/jobs", spec)
        job = wait(port, job["id"], 300)
        check(job["status"] == "succeeded", f"memory job: {job['status']} {job['error']}")
        for r in job["runs"]:
            print("memory", r["context_length"], r["mode"], r["status"], r.get("error"),
                  "peak MiB %.1f" % ((r.get("peak_allocated_bytes") or 0) / 2**20), "phase", r.get("peak_phase"),
                  "reserved", r.get("reserved_peak_bytes"))
            check(r["status"] == "succeeded", f"memory run: {r.get('error')}")
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        print("sqlite benchmark_summary:", con.execute("SELECT count(*) FROM benchmark_summary").fetchone()[0],
              "memory_summary:", con.execute("SELECT count(*) FROM memory_summary").fetchone()[0])
        con.close()
    finally:
        proc.terminate()
        proc.wait(60)
        log.close()
    print("daemon smoke:", "FAILED" if failures else "ok", len(failures), "failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
