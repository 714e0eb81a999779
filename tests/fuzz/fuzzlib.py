"""Shared pieces of the fuzz suite: the command line (LMPERFD, --seed, --cases),
a daemon started by tests/api/test_api.py's Daemon, a raw HTTP client that
reports dropped connections and hangs instead of raising, the one assertion
every answer must pass (202/200, or a 4xx whose body is the API's JSON error),
and the job specs' JSON Schemas read from schema/jobs at run time with a
generator of valid values and an independent validator (the oracle a
mutated spec is judged by).

Every script prints its seed first; `SCRIPT LMPERFD --seed N --cases M`
replays a run exactly (the cases depend on the seed alone, never on time)."""
import argparse
import http.client
import json
import math
import os
import random
import select
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
SCHEMA_DIR = os.path.join(SOURCE_ROOT, "schema", "jobs")
REQUEST_TIMEOUT = 30.0  # s: an answer later than this is a hang (sanitized builds are ~5x slower)


def parse_args(description, default_cases):
    """The fuzzers' command line: LMPERFD [--seed N] [--cases M]. The seed is
    --seed, else LMPERF_FUZZ_SEED (a number, or "random": one drawn from the
    clock), else 1, so that a plain run (meson test) is the same every time;
    it is printed first with the command that replays the run."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("lmperfd")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--cases", type=int, default=default_cases)
    args = p.parse_args()
    if args.seed is None:
        env = os.environ.get("LMPERF_FUZZ_SEED", "1")
        args.seed = time.time_ns() % 1_000_000_007 if env == "random" else int(env)
    print(f"seed {args.seed}, {args.cases} cases (replay: {sys.argv[0]} LMPERFD "
          f"--seed {args.seed} --cases {args.cases})", flush=True)
    return args


def import_test_api(lmperfd):
    """tests/api/test_api.py as a module (its Daemon, check, verdict), reading
    lmperfd from sys.argv as that script does, without a web root."""
    saved = sys.argv
    sys.argv = [saved[0], lmperfd]
    sys.path.insert(0, os.path.join(SOURCE_ROOT, "tests", "api"))
    try:
        import test_api
    finally:
        sys.argv = saved
    test_api.WEB_ROOT = None
    return test_api


def stop_daemon(d, check, blocker_id=None):
    """SIGTERM, after cancelling the job that holds the worker (blocker_id;
    the drain would wait for it); the daemon must exit 0 within its time.
    One that does not is killed (and that is a failure)."""
    if blocker_id is not None and d.proc.poll() is None:
        http_request(d.port, "DELETE", f"/v1/jobs/{blocker_id}")
    try:
        code = d.stop(timeout=60)
    except subprocess.TimeoutExpired:
        d.proc.kill()
        d.proc.wait()
        code = "no exit within 60 s of SIGTERM"
    check(code == 0, f"exit status after SIGTERM: {code} (a sanitizer's report is not 0)")


# --- raw HTTP ----------------------------------------------------------------------

class Answer:
    """One exchange: status (None when the connection dropped or timed out),
    content type, raw body, the parsed JSON body (None if not JSON) and why
    there was no answer."""

    def __init__(self, status=None, ctype="", raw=b"", problem=None):
        self.status, self.ctype, self.raw, self.problem = status, ctype, raw, problem
        self.json = None
        self.json_error = None
        if ctype.startswith("application/json"):
            try:
                self.json = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as e:
                self.json_error = str(e)


def send_until_answered(sock, body, timeout):
    """Sends body, stopping early when the server answers meanwhile (as curl
    does: a 413 for a declared oversized body comes before the body is read,
    and the server then closes; a client that only writes would see a reset
    instead of the answer)."""
    view = memoryview(body)
    deadline = time.time() + timeout
    while view:
        readable, writable, _ = select.select([sock], [sock], [], max(deadline - time.time(), 0))
        if readable:
            return
        if not writable:
            raise socket.timeout()
        try:
            view = view[sock.send(view[:65536]):]
        except (BrokenPipeError, ConnectionResetError):
            return  # the answer, if any, is read next


def http_request(port, method, path, body=None, headers=None, timeout=REQUEST_TIMEOUT):
    """Sends one request on a fresh connection; never raises for what the
    server does (a reset, an early close, a timeout: Answer.problem)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        hdrs = dict(headers or {})
        if body is not None and "Content-Length" not in hdrs and "Transfer-Encoding" not in hdrs:
            hdrs["Content-Length"] = str(len(body))
        for k, v in hdrs.items():
            conn.putheader(k, v)
        conn.endheaders()
        if body is not None:
            send_until_answered(conn.sock, body, timeout)
        resp = conn.getresponse()
        raw = resp.read()
        return Answer(resp.status, resp.getheader("Content-Type", "") or "", raw)
    except socket.timeout:
        return Answer(problem=f"no answer within {timeout:.0f} s (a hang)")
    except (ConnectionError, http.client.HTTPException, OSError) as e:
        return Answer(problem=f"connection dropped: {type(e).__name__}: {e}")
    finally:
        conn.close()


def error_problems(ans, allowed_statuses):
    """Why ans is not a proper answer: its status outside allowed_statuses
    (a set of ints), or, for a 4xx, a body that is not the API's JSON error
    {"error": {"code": str, "message": non-empty str, "field": str|null}}.
    Returns a list of strings (empty: fine)."""
    if ans.problem:
        return [ans.problem]
    out = []
    if ans.status not in allowed_statuses:
        out.append(f"status {ans.status} (allowed {sorted(allowed_statuses)}): {ans.raw[:300]!r}")
    if ans.status >= 400:
        if not ans.ctype.startswith("application/json"):
            out.append(f"a {ans.status} with Content-Type {ans.ctype!r}, not JSON: {ans.raw[:200]!r}")
        elif ans.json_error:
            out.append(f"a {ans.status} whose body is not JSON ({ans.json_error}): {ans.raw[:200]!r}")
        else:
            err = ans.json.get("error") if isinstance(ans.json, dict) else None
            if not (isinstance(err, dict) and isinstance(err.get("code"), str) and
                    isinstance(err.get("message"), str) and err["message"] and
                    "field" in err and (err["field"] is None or isinstance(err["field"], str))):
                out.append(f"a {ans.status} without {{error: {{code, message, field}}}}: {ans.raw[:200]!r}")
    return out


def dump(value):
    """value as JSON text the way the daemon reads it (NaN is not JSON: never produced)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


# --- the job schemas -----------------------------------------------------------------

def load_schemas():
    """{kind: merged schema} for every schema/jobs/<kind>.json, common.json's
    properties, required and $defs merged in as the daemon's validator does."""
    with open(os.path.join(SCHEMA_DIR, "common.json")) as f:
        common = json.load(f)
    out = {}
    for name in sorted(os.listdir(SCHEMA_DIR)):
        if not name.endswith(".json") or name == "common.json":
            continue
        with open(os.path.join(SCHEMA_DIR, name)) as f:
            schema = json.load(f)
        props = schema.setdefault("properties", {})
        for k, v in common.get("properties", {}).items():
            props.setdefault(k, v)
        schema["required"] = schema.get("required", []) + common.get("required", [])
        defs = schema.setdefault("$defs", {})
        for k, v in common.get("$defs", {}).items():
            defs.setdefault(k, v)
        out[name[:-5]] = schema
    return out


def resolve(root, schema):
    """schema with its "$ref" (#/$defs/NAME) followed, merged over its own keywords."""
    while isinstance(schema, dict) and "$ref" in schema:
        target = root["$defs"][schema["$ref"].rsplit("/", 1)[1]]
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        schema = dict(target, **rest)
    return schema


def json_type(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def json_equal(a, b):
    """JSON equality as jansson's json_equal: types must agree (1 is not true,
    and an integer is not a real)."""
    if json_type(a) != json_type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return a == b


def schema_invalid(root, schema, value, path=""):
    """The first reason value breaks schema (the daemon's subset of JSON
    Schema, with its one stricter rule: an integer is a JSON integer, never a
    real such as 1.0), or None when it is valid."""
    schema = resolve(root, schema)
    if schema is True:
        return None
    t = schema.get("type")
    if t is not None:
        types = t if isinstance(t, list) else [t]
        vt = json_type(value)
        if not any(x == vt or (x == "number" and vt == "integer") for x in types):
            return f"{path}: {vt} is not {t}"
    if "const" in schema and not json_equal(schema["const"], value):
        return f"{path}: not the const"
    if "enum" in schema and not any(json_equal(o, value) for o in schema["enum"]):
        return f"{path}: not in the enum"
    if json_type(value) in ("integer", "number"):
        for key, bad in (("minimum", lambda x, b: x < b), ("maximum", lambda x, b: x > b),
                         ("exclusiveMinimum", lambda x, b: x <= b), ("exclusiveMaximum", lambda x, b: x >= b)):
            if key in schema and bad(value, schema[key]):
                return f"{path}: out of {key} {schema[key]}"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0) or len(value) > schema.get("maxLength", math.inf):
            return f"{path}: length {len(value)}"
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", math.inf):
            return f"{path}: {len(value)} items"
        for i, item in enumerate(value):
            if "items" in schema:
                why = schema_invalid(root, schema["items"], item, f"{path}[{i}]")
                if why:
                    return why
            if schema.get("uniqueItems") and any(json_equal(item, value[j]) for j in range(i)):
                return f"{path}[{i}]: repeated"
    if isinstance(value, dict):
        for k in schema.get("required", []):
            if k not in value:
                return f"{path}.{k}: required"
        props = schema.get("properties", {})
        for k, v in value.items():
            if k in props:
                why = schema_invalid(root, props[k], v, f"{path}.{k}")
                if why:
                    return why
            elif schema.get("additionalProperties") is False:
                return f"{path}.{k}: unknown"
    for key in ("oneOf", "anyOf"):
        if key in schema:
            ok = sum(schema_invalid(root, b, value, path) is None for b in schema[key])
            if ok == 0 or (key == "oneOf" and ok > 1):
                return f"{path}: {ok} {key} branches match"
    return None


class ValueMaker:
    """Valid values for a schema, small and cheap by preference (bounds,
    defaults, a few steps above the minimum), with string hints by field
    name for strings a schema cannot describe (a model preset, an all-reduce
    size, a readable hostfile)."""

    def __init__(self, rng, hints):
        self.rng = rng
        self.hints = hints  # {field name: [valid strings]}

    def make(self, root, schema, name=None, depth=0):
        rng = self.rng
        schema = resolve(root, schema)
        for key in ("oneOf", "anyOf"):
            if key in schema:
                branches = schema[key]
                if name in self.hints:  # prefer a string branch where hints exist
                    strings = [b for b in branches if resolve(root, b).get("type") == "string"]
                    if strings and rng.random() < 0.5:
                        return self.make(root, strings[0], name, depth)
                return self.make(root, rng.choice(branches), name, depth)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return rng.choice(schema["enum"])
        if "default" in schema and rng.random() < 0.3:
            return schema["default"]
        t = schema.get("type")
        if isinstance(t, list):
            t = rng.choice(t)
        if t == "boolean":
            return rng.random() < 0.5
        if t in ("integer", "number"):
            lo = schema.get("minimum", schema.get("exclusiveMinimum", 0) + (1 if t == "integer" else 0.5))
            hi = schema.get("maximum", lo + 1000)
            pick = rng.choice([lo, lo, lo + 1, lo + 2, hi, rng.randint(int(math.ceil(lo)), int(min(hi, lo + 64)))])
            pick = min(max(pick, lo), hi)
            if t == "integer":
                return int(pick)
            return float(pick) if rng.random() < 0.5 else pick
        if t == "string":
            if name in self.hints:
                return rng.choice(self.hints[name])
            lo, hi = schema.get("minLength", 0), min(schema.get("maxLength", 24), 24)
            return "".join(rng.choice("abcxyz_- éß✓") for _ in range(rng.randint(max(lo, 1), max(hi, lo, 1))))
        if t == "array":
            lo = schema.get("minItems", 0)
            hi = min(schema.get("maxItems", lo + 3), lo + 3)
            out = []
            for _ in range(rng.randint(max(lo, 1), max(hi, lo, 1)) * 3):
                if len(out) >= hi:
                    break
                item = self.make(root, schema.get("items", {"type": "integer"}), name, depth + 1)
                if not schema.get("uniqueItems") or not any(json_equal(item, x) for x in out):
                    out.append(item)
            return out
        if t == "object" or "properties" in schema:
            out = {}
            for k, sub in schema.get("properties", {}).items():
                if k in schema.get("required", []) or rng.random() < 0.3:
                    out[k] = self.make(root, sub, k, depth + 1)
            return out
        return None

    def spec(self, kind, root):
        """A spec of kind: "kind", the required fields and some optional ones."""
        spec = {"kind": kind}
        for k, sub in root["properties"].items():
            if k == "kind":
                continue
            if k in root.get("required", []) or self.rng.random() < 0.35:
                spec[k] = self.make(root, sub, k)
        return spec
