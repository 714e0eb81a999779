#!/usr/bin/env python3
"""Structure-aware fuzzing of POST /v1/jobs against a live lmperfd (--cpu-only,
random loopback port, its own database). Valid specs of every kind are built
from schema/jobs/*.json (read at run time) and mutated: wrong types, null,
huge / negative / fractional / subnormal numbers, empty, huge and repeated
lists, lists for scalars and scalars for lists, unknown fields, deep nesting,
long strings, unicode and control characters, NUL escapes in strings and keys,
duplicate keys, other top-level values, truncated and invalid JSON, wrong
Content-Type, empty and oversized bodies.

Every answer must be a 202 with the job as sent (each field equal, defaults
added), or a 4xx JSON error; a 400 about a spec names a field that is a path
of the spec sent (or a field of its kind's schema); a spec that breaks its
schema (this script's own validator, fuzzlib.schema_invalid) is never
accepted. No 5xx, no dropped connection, no hang. A numerics job that runs for
ever holds the CPU worker, so accepted jobs stay queued and are cancelled at
once; at the end every accepted job is cancelled, GET /v1/jobs lists exactly
them, /healthz is 200 and SIGTERM ends the daemon with status 0.

usage: fuzz_specs.py LMPERFD [--seed N] [--cases M]"""
import json
import math
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuzzlib  # noqa: E402

sys.setrecursionlimit(20000)  # the deeply nested values below
ARGS = fuzzlib.parse_args(__doc__.splitlines()[0], default_cases=1500)
test_api = fuzzlib.import_test_api(ARGS.lmperfd)
check = test_api.check

SPEC_ERROR_STATUSES = {400, 413, 415}
LONG_COUNT = test_api.LONG_COUNT

# --- nasty values ------------------------------------------------------------------

NASTY_SCALARS = [
    None, True, False, 0, -1, 1, 2, 3, 0.5, 1.0, -0.0, 1e308, -1e308, 1e-320, 5e-324, 2.5e-308,
    2**31 - 1, 2**31, -2**31 - 1, 2**32, 2**53, 2**53 + 1, 2**63 - 1, -2**63, 2**63, 2**64, -2**64,
    10**30, "", " ", "0", "1", "-1", "1e3", "NaN", "Infinity", "-Infinity", "null", "true",
    "fp32", "FP32", "fp32 ", " fp32", "tiny", "Tiny", "2.7B", "1MB", "1 MB", "1mb", "0MB", "-1MB", "1e400MB",
    "nanMB", "infGB", "0x10B", "4.0000001B", "16GiB", "17GiB", "0.1MB", "1.5B",
    "naive", "flash", "both", "nccl", "mpi", "train_step", "inference", "accumulation",
    "\u00e9\u00df\u2713", "\U0001F600" * 3, "a\u0301" * 5, "\u202eRTL", "\ufeffBOM", "\uffff\ufffe", "\U0010FFFF",
    "\u2028\u2029", "\t\n\r\x01\x1f\x7f", "a\u0000b", "\u0000", "%s%n%x", "'; DROP TABLE jobs; --",
    "/etc/passwd", "/dev/zero", "/proc/self/mem", "../../../etc/hosts", "/nonexistent",
]


def nasty_value(rng, schema=None):
    """One value likely to break a field: from the list above, a bound of
    the field's own schema off by one or a half, a long string, a list or
    an object of such values."""
    r = rng.random()
    if schema and r < 0.25:
        schema = fuzzlib.resolve(SCHEMAS_ROOT_FOR_VALUES[0], schema)
        bounds = []
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if key in schema:
                b = schema[key]
                bounds += [b, b - 1, b + 1, b - 0.5, b + 0.5, float(b), -b]
        for key in ("minLength", "maxLength"):
            if key in schema:
                n = schema[key]
                bounds += ["x" * max(n - 1, 0), "x" * n, "x" * (n + 1), "\U0001F600" * n, "\U0001F600" * (n + 1),
                           "é" * (n + 1)]
        for key in ("minItems", "maxItems"):
            if key in schema:
                n = schema[key]
                bounds += [[1] * max(n - 1, 0), list(range(1, n + 2)), list(range(1, n + 1))]
        if bounds:
            return rng.choice(bounds)
    if r < 0.7:
        return rng.choice(NASTY_SCALARS)
    if r < 0.8:
        return rng.choice(["x" * rng.choice([200, 201, 4096, 4097, 70000]), "é" * 300, "\U0001F600" * 129,
                           "\u0000" * 10, "%" * 300, "." * 300])
    if r < 0.9:
        n = rng.choice([0, 1, 2, 257, 1000, 20000])
        return [rng.choice(NASTY_SCALARS[:30]) for _ in range(n)] if rng.random() < 0.5 else list(range(n))
    return {rng.choice(["", "a", "kind", "d_model", "é", "\u0000"]): rng.choice(NASTY_SCALARS) for _ in range(3)}


def nested(depth, leaf=1, obj=False):
    v = leaf
    for _ in range(depth):
        v = {"a": v} if obj else [v]
    return v


UNKNOWN_KEYS = ["", " ", "Kind", "KIND", "kind ", "extra", "model.name", "sizes[0]", "a.b[2].c", "é" * 50,
                "\U0001F600", "x" * 127, "x" * 128, "é" * 64, "é" * 200, "\u0000", "a\u0000b", "\x01", "\ufeff",
                "__proto__", "constructor", "$ref", "$defs", "oneOf", "\"\"", "%s", "timeout", "label "]


# --- the spec and its paths --------------------------------------------------------

def paths_of(value, prefix=""):
    """Every path of value in the daemon's notation (a.b[2].c; the empty key
    written ""), with the value there: [(path, parent, key, value)]."""
    out = []
    if isinstance(value, dict):
        for k, v in value.items():
            p = prefix + ("." if prefix else "") + (k if k else '""')
            out.append((p, value, k, v))
            out += paths_of(v, p)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            p = f"{prefix}[{i}]"
            out.append((p, value, i, v))
            if len(out) > 2000:
                break
            out += paths_of(v, p)
    return out


def property_names(root, schema=None, seen=None):
    """Every property name anywhere in a kind's schema."""
    schema = root if schema is None else schema
    seen = set() if seen is None else seen
    if isinstance(schema, dict):
        for k, v in schema.get("properties", {}).items():
            seen.add(k)
            property_names(root, v, seen)
        for v in schema.values():
            if isinstance(v, (dict, list)):
                property_names(root, v, seen)
    elif isinstance(schema, list):
        for v in schema:
            property_names(root, v, seen)
    return seen


def field_problem(field, spec, root):
    """Why field (an error's "field") is not a plausible place in spec (the
    spec sent, a dict) for its kind's schema root, or None. Plausible: a path
    of the spec; a path's parent and a property of the schema (a required
    field left out); a top-level property (a default the kind checks); a
    path cut at the daemon's 127-byte limit (its last character may have
    become '?')."""
    if not isinstance(field, str) or not field:
        return f"no field named ({field!r})"
    paths = [p for p, _, _, _ in paths_of(spec)]
    if field in paths:
        return None
    names = property_names(root) | {"kind"}
    if field in names:
        return None
    head, _, last = field.rpartition(".")
    if last in names and (head == "" or head in paths):
        return None
    if len(field.encode()) >= 120:
        cut = field.rstrip("?")
        if any(p.startswith(cut) for p in paths):
            return None
    return f"field {field!r} is not a path of the spec sent"


# --- mutations ---------------------------------------------------------------------

class Case:
    """One request: the body bytes, headers, the spec as Python sees it
    (None when the body is not one JSON object), and what was done."""

    def __init__(self, body, spec, what, headers=None):
        self.body = body
        self.spec = spec
        self.what = what
        self.headers = {"Content-Type": "application/json"} if headers is None else headers


def mutate_value(rng, spec, root):
    """Structural mutations of a copy of spec (a dict); returns (spec, what)."""
    spec = json.loads(json.dumps(spec))
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        places = paths_of(spec)
        op = rng.random()
        if not places or op < 0.08:
            key = rng.choice(UNKNOWN_KEYS + ["k%d" % rng.randint(0, 9)])
            target = spec
            objs = [v for _, _, _, v in places if isinstance(v, dict)]
            if objs and rng.random() < 0.3:
                target = rng.choice(objs)
            target[key] = nasty_value(rng)
            what = f"unknown key {key[:20]!r}"
            continue
        path, parent, key, value = rng.choice(places)
        sub = root["properties"].get(path.split(".")[0].split("[")[0]) if isinstance(parent, dict) else None
        if op < 0.5:
            parent[key] = nasty_value(rng, sub)
            what = f"{path}: nasty value"
        elif op < 0.58 and isinstance(parent, dict):
            del parent[key]
            what = f"{path}: removed"
        elif op < 0.66:
            parent[key] = [value] if not isinstance(value, list) else (value[0] if value else None)
            what = f"{path}: list <-> scalar"
        elif op < 0.74:
            n = rng.choice([0, 2, 3, 255, 256, 257, 513, 5000])
            if len(fuzzlib.dump(value)) > 200:  # a body past the size limit says nothing new
                n = min(n, 3)
            parent[key] = [value] * n
            what = f"{path}: {n} copies"
        elif op < 0.8:
            parent[key] = nested(rng.choice([2, 10, 64, 500, 2000]), value, rng.random() < 0.5)
            what = f"{path}: nested"
        elif op < 0.88 and isinstance(value, (int, float)) and not isinstance(value, bool):
            parent[key] = rng.choice(arithmetic(value))
            what = f"{path}: arithmetic"
        elif op < 0.94 and isinstance(value, str):
            parent[key] = rng.choice([value.upper(), value + " ", value + "\u0000", value * 50, value[:-1],
                                      "\u200b" + value, value + "é"])
            what = f"{path}: string edit"
        else:
            parent[key] = nasty_value(rng, sub)
            what = f"{path}: nasty value"
    return spec, what


def arithmetic(value):
    """value one arithmetic step away, each way that stays a JSON number: a float
    past 1.8e308 is inf, which is not JSON (dump refuses it), an int past it has no float."""
    steps = (lambda v: v + 1, lambda v: v - 1, lambda v: -v, lambda v: v * 1000, lambda v: v + 0.5, float,
             lambda v: v * 2**40)
    out = []
    for step in steps:
        try:
            changed = step(value)
        except OverflowError:
            continue
        if not isinstance(changed, float) or math.isfinite(changed):
            out.append(changed)
    return out or [value]


NON_OBJECT_BODIES = [b"null", b"true", b"0", b"-0", b"1e308", b'"kind"', b"[]", b'[{"kind":"numerics"}]', b"{}",
                     b'{"kind":"numerics"} {"kind":"numerics"}', b'{"kind":"numerics"}x', b'{"kind":"numerics",}',
                     b"{'kind':'numerics'}", b'{"kind":"numerics"} // c', b'/* c */{"kind":"numerics"}',
                     b"\x00", b"\xff\xfe{}", b" " * 100, b"\n", b"{", b"}", b'{"kind"', b'{"kind":}',
                     b'{"kind":"numerics","count":1e400}', b'{"kind":"numerics","count":-1e400}',
                     b'{"kind":"numerics","summand":1e-400}', b'{"kind":"numerics","count":99999999999999999999}',
                     b'{"kind":"numerics","count":NaN}', b'{"kind":"numerics","count":Infinity}',
                     b'{"kind":"numerics","count":0x10}', b'{"kind":"numerics","count":+1}',
                     b'{"kind":"numerics","count":01}', b'{"kind":"numerics","count":1.}',
                     b'{"kind":"numerics","label":"\\ud800"}', b'{"kind":"numerics","label":"\\udc00\\ud800"}',
                     b'{"kind":"numerics","label":"\\u00"}', b'{"kind":"numerics","label":"\\x41"}',
                     b'{"kind":"numerics","label":"a\x00b"}', b'{"kind":"numerics","label":"\xc3\x28"}',
                     b'{"kind":"numerics","label":"\xed\xa0\x80"}', b'{"kind":"numerics","label":"\xf4\x90\x80\x80"}',
                     b'{"kind":"numerics","label":"\xc0\xaf"}', b'{"kind":"numerics","label":"tab\there"}',
                     b'{"kind":"numerics","\\u0000":1}', b'{"\\u0000kind":"numerics"}',
                     b'{"kind":"numerics","label":"\\u0000"}', b'{"kind":"numerics\\u0000"}',
                     b'{"kind":"numerics","kind":"numerics"}', b'{"kind":"numerics","count":1,"count":2}',
                     b'\xef\xbb\xbf{"kind":"numerics"}', b'\xef\xbb\xbf\xef\xbb\xbf{"kind":"numerics"}',
                     b'\xef\xbb{"kind":"numerics"}']


def text_case(rng, spec):
    """Mutations of the JSON text of spec; returns a Case whose spec is what
    Python reads from the body (None: not one JSON object for Python)."""
    text = fuzzlib.dump(spec)
    r = rng.random()
    if r < 0.15:
        body = rng.choice(NON_OBJECT_BODIES)
        what = f"body {body[:40]!r}"
    elif r < 0.3:
        cut = rng.randint(0, max(len(text) - 1, 0))
        body = text[:cut].encode()
        what = f"truncated at {cut}"
    elif r < 0.45 and len(spec) > 0:
        key = rng.choice(list(spec))
        dup = f"{json.dumps(key)}: {fuzzlib.dump(spec[key] if rng.random() < 0.5 else None)}, "
        body = ("{" + dup + text[1:]).encode()
        what = f"duplicate key {key!r}"
    elif r < 0.6:
        pos = rng.randint(0, len(text))
        junk = rng.choice([b"\x00", b"\xff", b"\xc3", b"\x80", b"\\", b'"', b"\\u0000", b"\\ud83d", b"\x1f", b",",
                           b"]", b"}", b"{", b"\xef\xbb\xbf", b"\\uDFFF\\uD800", b"\t"])
        raw = text.encode()
        body = raw[:pos] + junk + raw[pos:]
        what = f"{junk!r} inserted at {pos}"
    elif r < 0.75:
        # deep nesting: past jansson's depth limit, or just under it, in a field or as the body
        depth = rng.choice([100, 2047, 2048, 2049, 5000, 100000])
        inner = "[" * depth + "]" * depth
        field = rng.choice(list(spec) + ["extra"])
        body = ("{" + json.dumps(field) + ":" + inner + "," + text[1:]).encode() if rng.random() < 0.7 \
            else inner.encode()
        what = f"depth {depth} at {field!r}"
    elif r < 0.85:
        body = text.encode()
        headers = rng.choice([{"Content-Type": "text/plain"}, {"Content-Type": "application/jsonx"},
                              {"Content-Type": "APPLICATION/JSON; charset=utf-8"}, {},
                              {"Content-Type": "application/x-www-form-urlencoded"},
                              {"Content-Type": "application/json;charset=latin1"}, {"Content-Type": ""},
                              {"Content-Type": "multipart/form-data; boundary=x"},
                              {"Content-Type": "application/json" + "x" * 3000}])
        return Case(body, spec, f"Content-Type {headers}", headers)
    else:
        body = text.encode()
        what = "as is"
        if rng.random() < 0.2:
            body = (" \t\r\n" * rng.randint(1, 50)).encode() + body + b"\n" * rng.randint(1, 50)
            what = "whitespace around"
    try:
        parsed = json.loads(body.decode("utf-8").removeprefix("\ufeff"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        parsed = None
    return Case(body, parsed if isinstance(parsed, dict) else None, what)


# Fixed cases first, each a defect the fuzzing found (exact answer: status, code, field).
REGRESSIONS = [
    # jansson skips a NUL byte that follows a number or a literal: these read as count 10 and [2, 4]
    (b'{"kind": "numerics", "count": 10\x00}', 400, "malformed_json", None),
    (b'{"kind": "memory", "model": "tiny", "context_length": [2\x00, 4]}', 400, "malformed_json", None),
    (b'{"kind": "numerics", "device": "cpu", "label": null\x00}', 400, "malformed_json", None),
]


def check_regressions(d):
    for body, status, code, field in REGRESSIONS:
        ans = fuzzlib.http_request(d.port, "POST", "/v1/jobs", body, {"Content-Type": "application/json"})
        err = (ans.json or {}).get("error") or {} if isinstance(ans.json, dict) else {}
        check(ans.status == status and err.get("code") == code and err.get("field") == field,
              f"regression {body!r}: {ans.status} {ans.problem or ans.raw[:300]!r}, want {status} {code} {field}")


# --- the run -----------------------------------------------------------------------

SCHEMAS_ROOT_FOR_VALUES = [None]  # the kind schema nasty_value resolves $refs against


def verify_answer(d, case, kind_roots, accepted):
    """Checks one answer; appends an accepted job's id to accepted."""
    t0 = time.time()
    ans = fuzzlib.http_request(d.port, "POST", "/v1/jobs", case.body, case.headers)
    if time.time() - t0 > 1:
        print(f"slow: {time.time() - t0:.1f} s [{case.what}] {(case.body or b'')[:200]!r}", flush=True)
    shown = case.body or b""
    where = f"[{case.what}] body {shown[:160]!r}{'...' if len(shown) > 160 else ''}"
    problems = fuzzlib.error_problems(ans, {202} | SPEC_ERROR_STATUSES)
    for p in problems:
        check(False, f"POST /v1/jobs {where}: {p}")
    if problems:
        return ans
    spec = case.spec
    if ans.status == 202:
        job = ans.json or {}
        check(isinstance(job.get("id"), int), f"{where}: 202 without a job id: {ans.raw[:200]!r}")
        if not isinstance(job.get("id"), int):
            return ans
        accepted.append(job["id"])
        kind = spec.get("kind") if spec else None
        root = kind_roots.get(kind) if isinstance(kind, str) else None
        why = fuzzlib.schema_invalid(root, root, spec) if root else "not a spec of a known kind"
        check(why is None, f"{where}: accepted (job {job['id']}) though the spec is invalid: {why}")
        stored = job.get("spec", {})
        for k, v in (spec or {}).items():
            check(k in stored and fuzzlib.json_equal(stored[k], v),
                  f"{where}: job {job['id']} stored {k} as {json.dumps(stored.get(k))[:100]}, sent "
                  f"{json.dumps(v)[:100]}")
        check(job.get("status") == "queued" and job.get("kind") == kind and job.get("label") == spec.get("label"),
              f"{where}: the 202's job: {json.dumps(job)[:300]}")
        cancel = fuzzlib.http_request(d.port, "DELETE", f"/v1/jobs/{job['id']}")
        check(cancel.status == 200 and (cancel.json or {}).get("status") == "cancelled",
              f"cancel job {job['id']} while queued: {cancel.status} {cancel.problem or cancel.raw[:200]!r}")
        return ans
    err = ans.json["error"]
    if ans.status == 413:
        check(err["code"] == "payload_too_large", f"{where}: 413 code {err['code']}")
    elif ans.status == 415:
        check(err["code"] == "unsupported_media_type", f"{where}: 415 code {err['code']}")
    elif err["code"] == "invalid_spec" and isinstance(spec, dict):
        kind = spec.get("kind")
        root = kind_roots.get(kind) if isinstance(kind, str) else None
        if root is None:
            check(err["field"] == "kind", f"{where}: a spec of no known kind refused naming {err['field']!r}")
        else:
            why = field_problem(err["field"], spec, root)
            check(why is None, f"{where}: {why}; error {err}")
    elif err["code"] not in ("invalid_spec", "malformed_json"):
        check(False, f"{where}: a 400 with code {err['code']!r}")
    return ans


def main():
    rng = random.Random(ARGS.seed)
    schemas = fuzzlib.load_schemas()
    d = test_api.Daemon("fuzz-specs")
    accepted = []
    t0 = time.time()
    try:
        presets = [m["name"] for m in d.get("/v1/models")[2]["models"]]
        hostfile = os.path.join(test_api.TMP, "hosts")
        with open(hostfile, "w") as f:
            f.write("localhost slots=2\n")
        maker = fuzzlib.ValueMaker(rng, {"model": presets, "hostfile": [hostfile],
                                         "sizes": ["4B", "1KB", "1MB", "1MiB", "0.5KB", "16GiB", "1GB"]})
        # one job that runs for ever holds the CPU worker: the fuzzed jobs stay queued
        blocker = d.submit({"kind": "numerics", "count": LONG_COUNT, "label": "fuzz blocker"})
        d.wait_status(blocker["id"], ("running",))
        accepted.append(blocker["id"])
        check_regressions(d)
        kinds = sorted(schemas)
        statuses = {}
        for i in range(ARGS.cases):
            kind = kinds[i % len(kinds)]
            root = schemas[kind]
            SCHEMAS_ROOT_FOR_VALUES[0] = root
            spec = maker.spec(kind, root)
            r = rng.random()
            if r < 0.1:
                case = Case(fuzzlib.dump(spec).encode(), spec, "generated")
            elif r < 0.7:
                mutated, what = mutate_value(rng, spec, root)
                case = Case(fuzzlib.dump(mutated).encode(), mutated, what)
            else:
                case = text_case(rng, spec)
            ans = verify_answer(d, case, schemas, accepted)
            statuses[ans.status] = statuses.get(ans.status, 0) + 1
            if i % 100 == 99:
                h = fuzzlib.http_request(d.port, "GET", "/healthz")
                check(h.status == 200, f"/healthz after case {i}: {h.status} {h.problem}")
                if test_api.failures:
                    break
        # bodies at and past the limit (--max-body, 1 MiB by default), and none at all
        limit = 1 << 20
        pad = '{"kind": "numerics", "label": "x"' + " " * (limit - 40) + "}"
        for body, what in ((pad.encode()[:limit - 1] + b"}", "1 MiB - 0"), (b"{" + b" " * limit + b"}", "1 MiB + 2"),
                           (b"[" * (limit + 10), "over the limit, not JSON"), (b"", "empty"), (None, "no body")):
            verify_answer(d, Case(body, None, what,
                                  {"Content-Type": "application/json"}), schemas, accepted)
        print(f"{ARGS.cases} cases in {time.time() - t0:.1f} s: statuses {statuses}, {len(accepted) - 1} accepted",
              flush=True)
        # the end: every accepted job cancelled, listed, nothing else stored
        cancel = fuzzlib.http_request(d.port, "DELETE", f"/v1/jobs/{blocker['id']}")
        check(cancel.status == 202, f"cancel the running blocker: {cancel.status} {cancel.raw[:200]!r}")
        d.wait_status(blocker["id"], ("cancelled",), timeout=60)
        listed = {}
        offset = 0
        while True:
            page = d.get(f"/v1/jobs?limit=1000&offset={offset}")[2]
            for job in page["jobs"]:
                listed[job["id"]] = job["status"]
            offset += len(page["jobs"])
            if not page["jobs"] or offset >= page["total"]:
                break
        check(sorted(listed) == sorted(accepted),
              f"GET /v1/jobs lists {len(listed)} jobs, {len(accepted)} were accepted: "
              f"{sorted(set(listed) ^ set(accepted))[:20]}")
        not_done = {i: s for i, s in listed.items() if s not in ("cancelled", "succeeded", "failed")}
        check(not not_done, f"jobs not in a terminal state: {list(not_done.items())[:10]}")
        h = fuzzlib.http_request(d.port, "GET", "/healthz")
        check(h.status == 200, f"/healthz at the end: {h.status} {h.problem}")
    finally:
        fuzzlib.stop_daemon(d, check, blocker_id=accepted[0] if accepted else None)
    return test_api.verdict(f"spec fuzzing passed (seed {ARGS.seed}, {time.time() - t0:.1f} s)")


if __name__ == "__main__":
    sys.exit(main())
