#!/usr/bin/env python3
"""Fuzzing of every route's path ids, query arguments and methods against a
live lmperfd holding finished jobs of each kind that runs on a CPU, a running
one and a cancelled one. The routes are read from api/http.c's route table at
run time, so a new route is fuzzed without an edit here.

Each request: a job id or kind that is real, or malicious (huge, negative,
%00, percent-encoding edge cases, long); query arguments each route reads,
with valid, malicious and repeated values, and arguments none reads; every
method on every path. Every answer must be a 200 or a 4xx JSON error whose
field is one the request named (an argument sent, or "id"); a wrong method
a 405 with Allow; static pages never outside the web root; no 5xx, no dropped
connection, no hang; /healthz 200 and SIGTERM exit 0 at the end.

usage: fuzz_routes.py LMPERFD [--seed N] [--cases M]"""
import os
import random
import re
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuzzlib  # noqa: E402

ARGS = fuzzlib.parse_args(__doc__.splitlines()[0], default_cases=1500)
test_api = fuzzlib.import_test_api(ARGS.lmperfd)
check = test_api.check

# The query arguments each handler reads, by route name: its route.args in api/http.c (read_routes).
ROUTE_ARGS = {}
VALID_VALUES = {
    "status": ["queued", "running", "succeeded", "failed", "cancelled", "interrupted"],
    "kind": ["numerics", "benchmark", "memory", "attention", "allreduce", "profile"],
    "limit": ["0", "1", "50", "1000"], "offset": ["0", "1", "5"],
    "format": ["json", "md", "csv"], "experiment": ["accumulation", "precision_report"],
    "run": ["0", "1", "2"], "range": ["forward", "(all)", "layer%203", "step", "layer+3"],
    "jobs": ["1,2", "2,3", "3,7", "7,3"], "baseline": ["2", "3", "7"], "pivot": ["precision"],
}
NASTY_VALUES = [
    "", "%00", "1%00", "%2500", "%", "%G0", "%0", "%%", "%FF", "%C3%28", "%ED%A0%80", "%F4%90%80%80", "%C0%AF",
    "+", "%20", "%20%201", "1%20", "-1", "-0", "0", "1", "2", "2147483647", "2147483648", "4294967296",
    "9223372036854775807", "9223372036854775808", "18446744073709551616", "99999999999999999999999999",
    "1e3", "0x10", "010", "+1", "1.0", "1.5", "%D9%A1", "%EF%BC%91", "NaN", "inf", "null", "true", "[]", "{}",
    "%0A", "%0D%0A", "%09", "%7F", "a%2Cb", "1,2", "1,,2", ",", ",1", "1,", "1,1", "1,2,3,4", "1;2", "%3B",
    "%E2%80%AE", "%F0%9F%98%80", "..%2F..%2Fetc%2Fpasswd", "%27%20OR%201%3D1", "%25s%25n", "x" * 4000,
    "%C3%A9" * 500, "1," * 64 + "1", ",".join(str(i) for i in range(1, 66)), ",".join(["1"] * 64),
    ",".join(str(i) for i in range(1, 65)), "2,3" + ",3" * 10,
]
NASTY_IDS = [
    "0", "-1", "-0", "+1", "01", "1.0", "1e2", "0x1", "%00", "1%00", "1%00x", "%31", "1%2F2", "%2e%2e", "..", ".",
    "1;2", "1%3F", "%20", "1%20", "%201", "9223372036854775807", "9223372036854775808", "99999999999999999999",
    "18446744073709551617", "%D9%A1", "%EF%BC%91", "%FF", "%C3%28", "%", "%G1", "abc", "x" * 63, "x" * 64,
    "1" * 63, "1" * 64, "9" * 200, "%F0%9F%98%80", "numerics", "teleport", "NUMERICS", "benchmark%00",
]
EXTRA_ARGS = ["x", "", "status", "id", "jobs", "a" * 200, "%00", "format%00", "run%5B%5D", "%FF"]
METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "FOO", "get"]
STATIC_PATHS = ["/", "/index.html", "/../README.md", "/%2e%2e/README.md", "/..%2FREADME.md", "/web/../../etc/passwd",
                "/index.html%00", "/index.html%00.png", "/%00", "//etc/passwd", "/./index.html", "/.git/config",
                "/nonexistent", "/" + "a" * 3000, "/%FF", "/v1", "/v1/", "/v1//jobs", "/v2/jobs", "/healthz/",
                "/healthz//", "/V1/JOBS", "/metrics?x=%00"]


def read_routes():
    """[(method, pattern, name)] from api/http.c's route table; ROUTE_ARGS from its routes' args lists."""
    with open(os.path.join(fuzzlib.SOURCE_ROOT, "api", "http.c")) as f:
        text = f.read()
    lists = {name: re.findall(r'"(\w+)"', items)
             for name, items in re.findall(r'static const char \*const (\w+)\[\] = \{([^}]*)\};', text)}
    table = text[text.index("static const route routes[]"):]
    table = table[:table.index("};")]
    rows = re.findall(r'\{"([A-Z]+)", "([^"]+)", \w+, \d, "(\w+)", (\w+)\}', table)
    check(len(rows) >= 10, f"api/http.c's route table read as {rows}")
    for _, _, name, args in rows:
        if args != "NULL":
            check(args in lists, f"route {name}'s args {args} not found in api/http.c")
            ROUTE_ARGS[name] = lists.get(args, [])
    check(ROUTE_ARGS.get("job_table") and ROUTE_ARGS.get("jobs_list"), f"routes' args read as {ROUTE_ARGS}")
    return [(method, pattern, name) for method, pattern, name, _ in rows]


def setup_jobs(d):
    """Finished jobs of each kind that runs on a CPU (two benchmark jobs, for
    a comparison), a cancelled one, then one running for ever. Returns
    {name: id}."""
    specs = {
        "numerics": {"kind": "numerics", "count": 10, "experiments": ["accumulation", "precision_report"]},
        "benchmark": {"kind": "benchmark", "model": "tiny", "context_length": 8, "batch_size": 1,
                      "warmup_steps": 0, "measure_steps": 1, "mode": "forward"},
        "benchmark2": {"kind": "benchmark", "model": "tiny", "context_length": [8, 16], "batch_size": 1,
                       "warmup_steps": 0, "measure_steps": 1, "mode": "forward", "precision": ["fp32", "bf16"]},
        "memory": {"kind": "memory", "model": "tiny", "context_length": 8, "batch_size": 1, "steps": 1,
                   "mode": ["inference", "train_step"]},
        "attention": {"kind": "attention", "impl": "naive", "seq_len": [8, 16], "d_head": 16, "passes": 1,
                      "warmup": 0, "batch": 1},
        "allreduce": {"kind": "allreduce", "backend": "mpi", "sizes": ["4KB"], "world_sizes": [1],
                      "iterations": 1, "warmup": 0},
    }
    ids = {name: d.submit(spec)["id"] for name, spec in specs.items()}
    for name, job_id in ids.items():
        d.wait_status(job_id, ("succeeded", "failed"), timeout=120)
    ids["running"] = d.submit({"kind": "numerics", "count": test_api.LONG_COUNT, "label": "fuzz blocker"})["id"]
    d.wait_status(ids["running"], ("running",))
    ids["cancelled"] = d.submit({"kind": "numerics", "count": 10})["id"]
    d.request("DELETE", f"/v1/jobs/{ids['cancelled']}")
    ids["queued"] = d.submit({"kind": "numerics", "count": 10})["id"]
    return ids


def random_query(rng, names, ids):
    """A query string of the arguments names (some left out, some twice, some
    not read by anyone), values valid or malicious; and the argument names sent."""
    parts, sent = [], set()
    for name in names:
        r = rng.random()
        if r < 0.3:
            continue
        for _ in range(2 if rng.random() < 0.08 else 1):
            if rng.random() < 0.5:
                value = rng.choice(VALID_VALUES.get(name, ["1"]))
            elif rng.random() < 0.2:
                value = ",".join(str(rng.choice(list(ids.values()))) for _ in range(rng.randint(1, 4)))
            else:
                value = rng.choice(NASTY_VALUES)
            parts.append(f"{name}={value}" if rng.random() < 0.95 else name)
            sent.add(name)
    if rng.random() < 0.15:
        extra = rng.choice(EXTRA_ARGS)
        parts.append(f"{extra}={rng.choice(NASTY_VALUES)}")
        sent.add(urllib.parse.unquote(extra, errors="replace"))
    rng.shuffle(parts)
    sep = rng.choice(["&"] * 8 + ["&&", ";"])
    # the names as the daemon reads them (an unknown one is refused naming it): "&"-separated, so that with ";"
    # "run;run=1" is one name; percent-decoded but for %00, which it keeps as it is
    for chunk in sep.join(parts).split("&"):
        name = chunk.split("=", 1)[0]
        sent |= {urllib.parse.unquote(name, errors="replace"),
                 urllib.parse.unquote(name.replace("%00", "%2500"), errors="replace")}
    return ("?" + sep.join(parts)) if parts or rng.random() < 0.1 else "", sent


def check_answer(ans, method, path, allowed, fields):
    """ans must be one of allowed statuses; a 4xx the JSON error naming one
    of fields (or none)."""
    where = f"{method} {path[:200]}{'...' if len(path) > 200 else ''}"
    if method == "HEAD":  # no body to judge
        check(ans.problem is None and ans.status in allowed, f"{where}: {ans.status} {ans.problem}")
        return
    problems = fuzzlib.error_problems(ans, allowed)
    for p in problems:
        check(False, f"{where}: {p}")
    if not problems and ans.status < 400 and ans.ctype.startswith("application/json"):
        check(ans.json_error is None, f"{where}: a {ans.status} whose JSON does not parse: {ans.json_error}")
    if problems or ans.status < 400:
        return
    field = ans.json["error"]["field"]
    check(field is None or field in fields, f"{where}: {ans.status} names field {field!r}, not one of {sorted(fields)}")
    if ans.status == 405:
        check(ans.json["error"]["code"] == "method_not_allowed", f"{where}: 405 code {ans.json['error']['code']}")


def main():
    rng = random.Random(ARGS.seed)
    routes = read_routes()
    d = test_api.Daemon("fuzz-routes")
    t0 = time.time()
    ids = {}
    try:
        ids = setup_jobs(d)
        print(f"jobs {ids} ready in {time.time() - t0:.1f} s", flush=True)
        real_ids = [str(i) for i in ids.values()] + ["999999"]
        paths = sorted({p for _, p, _ in routes})
        statuses = {}
        for i in range(ARGS.cases):
            method, pattern, name = rng.choice(routes)
            if method != "GET":  # POST and DELETE have their own fuzzers; wrong methods here
                method = "GET"
            r = rng.random()
            if r < 0.12:
                method = rng.choice([m for m in METHODS if m not in ("GET", "HEAD")])
            elif r < 0.17:
                method = "HEAD"
            if "{id}" in pattern:
                if name == "schema":
                    ident = rng.choice(VALID_VALUES["kind"] + NASTY_IDS) if rng.random() < 0.6 else rng.choice(NASTY_IDS)
                else:
                    ident = rng.choice(real_ids) if rng.random() < 0.6 else rng.choice(NASTY_IDS)
                path = pattern.replace("{id}", ident)
            else:
                path = pattern
            if rng.random() < 0.05:
                path += "/"
            query, sent = random_query(rng, ROUTE_ARGS.get(name, []) + (["x"] if rng.random() < 0.1 else []), ids)
            if method in ("DELETE", "POST") and "{id}" in pattern and name != "schema":
                # never cancel the fixtures: a malformed id only
                path = pattern.replace("{id}", rng.choice(NASTY_IDS))
            allowed = {200, 400, 404, 409} if method in ("GET", "HEAD") else {400, 404, 405, 409, 415, 413, 200, 202}
            if method not in ("GET", "HEAD", "DELETE", "POST"):
                allowed = {404, 405}
            ans = fuzzlib.http_request(d.port, method, path + query,
                                       b"{}" if method in ("POST", "PUT", "PATCH") else None,
                                       {"Content-Type": "application/json"} if method == "POST" else None)
            statuses[ans.status] = statuses.get(ans.status, 0) + 1
            # a required or defaulted argument may be named unsent (compare's jobs; events' run 0)
            check_answer(ans, method, path + query, allowed, sent | set(ROUTE_ARGS.get(name, [])) | {"id", "kind"})
            if i % 100 == 99:
                h = fuzzlib.http_request(d.port, "GET", "/healthz")
                check(h.status == 200, f"/healthz after case {i}: {h.status} {h.problem}")
                if test_api.failures:
                    break
        # static files: never a file outside the web root
        for path in STATIC_PATHS:
            ans = fuzzlib.http_request(d.port, "GET", path)
            check(ans.problem is None and ans.status in (200, 404, 405, 400), f"GET {path[:80]}: {ans.status} {ans.problem}")
            check(b"root:" not in ans.raw and b"[core]" not in ans.raw and b"# lmperf" not in ans.raw,
                  f"GET {path[:80]}: a file outside the web root served")
            if ans.status >= 400:
                for p in fuzzlib.error_problems(ans, {400, 404, 405}):
                    check(False, f"GET {path[:80]}: {p}")
        # every path, every method once
        for path in paths:
            concrete = path.replace("{id}", str(ids["benchmark"]) if "jobs" in path else "numerics")
            for method in METHODS:
                if method == "DELETE" and "{id}" in path and path.count("/") == 3:
                    continue  # would cancel a fixture (finished: a 409, which test_api checks)
                ans = fuzzlib.http_request(d.port, method, concrete,
                                           b"{}" if method in ("POST", "PUT", "PATCH") else None)
                reads = {a for _, p, n in routes if p == path for a in ROUTE_ARGS.get(n, [])}
                check_answer(ans, method, concrete, {200, 202, 400, 404, 405, 409, 415}, reads | {"id", "kind"})
        print(f"{ARGS.cases} cases in {time.time() - t0:.1f} s: statuses {statuses}", flush=True)
        h = fuzzlib.http_request(d.port, "GET", "/healthz")
        check(h.status == 200, f"/healthz at the end: {h.status} {h.problem}")
        listed = d.get("/v1/jobs?limit=1000")[2]
        check(listed["total"] == len(ids), f"jobs stored: {listed['total']}, want {len(ids)} (the fixtures)")
    finally:
        fuzzlib.stop_daemon(d, check, blocker_id=ids.get("running"))
    return test_api.verdict(f"route fuzzing passed (seed {ARGS.seed}, {time.time() - t0:.1f} s)")


if __name__ == "__main__":
    sys.exit(main())
