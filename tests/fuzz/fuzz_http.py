#!/usr/bin/env python3
"""Raw-socket HTTP fuzzing of a live lmperfd: malformed request lines, bad and
repeated headers, chunked bodies with wrong sizes, slow and partial sends,
connections dropped mid-request, pipelining, and random byte mutations of a
valid request.

libmicrohttpd answers some of these itself, with HTML (a bad request line, an
over-long URL or header 414/431, a bad Content-Length, HTTP/9.9): that is a
known limitation and not judged here. What is judged: an answer from
lmperfd's own handlers (JSON) is the API's JSON error or a success; the daemon
never answers 5xx; after each case a normal request on a new connection is
answered at once (/healthz 200); slow clients do not hold up others; a body
cut short never becomes a job; at the end GET /v1/jobs lists exactly the jobs
accepted, and SIGTERM ends the daemon with status 0.

usage: fuzz_http.py LMPERFD [--seed N] [--cases M]"""
import json
import os
import random
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuzzlib  # noqa: E402

ARGS = fuzzlib.parse_args(__doc__.splitlines()[0], default_cases=300)
test_api = fuzzlib.import_test_api(ARGS.lmperfd)
check = test_api.check

SPEC = b'{"kind": "numerics", "count": 10}'
HOST = b"Host: 127.0.0.1\r\n"


def post(body=SPEC, extra=b"", length=None):
    """A POST /v1/jobs request with Connection: close."""
    n = len(body) if length is None else length
    return (b"POST /v1/jobs HTTP/1.1\r\n" + HOST + b"Content-Type: application/json\r\nConnection: close\r\n" + extra +
            (b"Content-Length: %d\r\n" % n if n is not False else b"") + b"\r\n" + body)


def chunked(chunks, extra=b"", final=b"0\r\n\r\n"):
    return (b"POST /v1/jobs HTTP/1.1\r\n" + HOST + b"Content-Type: application/json\r\nConnection: close\r\n" + extra +
            b"Transfer-Encoding: chunked\r\n\r\n" + b"".join(chunks) + final)


def get(path=b"/healthz", extra=b"", version=b"HTTP/1.1"):
    return b"GET " + path + b" " + version + b"\r\n" + HOST + b"Connection: close\r\n" + extra + b"\r\n"


def chunk(data, size=None):
    return b"%x\r\n" % (len(data) if size is None else size) + data + b"\r\n"


# (name, what to send: bytes, or a list of (bytes, seconds to wait after), expectation)
# expectation: "json" (lmperfd's handlers answer: JSON, no 5xx), "accept" (a 202: a job),
# "any" (libmicrohttpd may answer itself, or close, or wait: only the daemon's health is judged)
FIXED = [
    ("valid post", post(), "accept"),
    ("valid get", get(), "json"),
    ("request line only", b"GET /healthz HTTP/1.1\r\n\r\n", "any"),
    ("no version", b"GET /healthz\r\n\r\n", "any"),
    ("HTTP/9.9", get(version=b"HTTP/9.9"), "any"),
    ("HTTP/1.0 no host", b"GET /healthz HTTP/1.0\r\n\r\n", "json"),
    ("lowercase version", get(version=b"http/1.1"), "any"),
    ("extra token", b"GET /healthz HTTP/1.1 x\r\n" + HOST + b"\r\n", "any"),
    ("leading spaces", b"  GET /healthz HTTP/1.1\r\n" + HOST + b"Connection: close\r\n\r\n", "any"),
    ("leading CRLF", b"\r\n\r\n" + get(), "any"),
    ("bare LF", b"GET /healthz HTTP/1.1\n" + b"Host: x\nConnection: close\n\n", "any"),
    ("no slash", get(b"healthz"), "any"),
    ("absolute URI", get(b"http://127.0.0.1/healthz"), "any"),
    ("asterisk", b"OPTIONS * HTTP/1.1\r\n" + HOST + b"Connection: close\r\n\r\n", "any"),
    ("long method", b"G" * 5000 + b" /healthz HTTP/1.1\r\n" + HOST + b"Connection: close\r\n\r\n", "any"),
    ("binary", bytes(range(256)) * 4, "any"),
    ("TLS hello", bytes.fromhex("16030100a5010000a10303") + b"\x00" * 160, "any"),
    ("NUL in URL", get(b"/v1/jobs/1\x00x"), "any"),
    ("space in URL", get(b"/v1/jobs/1 2"), "any"),
    ("high bytes in URL", get(b"/v1/jobs/\xff\xfe"), "any"),
    ("high bytes in query", get(b"/v1/jobs?kind=\xc3\x28&status=\xff"), "any"),
    ("long URL", get(b"/v1/jobs?x=" + b"a" * 300000), "any"),
    ("long header", get(extra=b"X-Long: " + b"a" * 300000 + b"\r\n"), "any"),
    ("many headers", get(extra=b"".join(b"X-%d: %d\r\n" % (i, i) for i in range(3000))), "any"),
    ("header without colon", get(extra=b"NoColon\r\n"), "any"),
    ("space before colon", get(extra=b"X-A : b\r\n"), "any"),
    ("folded header", get(extra=b"X-A: b\r\n  folded\r\n"), "any"),
    ("NUL in header", get(extra=b"X-A: b\x00c\r\n"), "any"),
    ("high bytes in header", get(extra=b"X-A: \xff\xfe\r\n"), "json"),
    ("two content types", post(extra=b"Content-Type: text/plain\r\n"), "any"),
    ("content type text first",
     b"POST /v1/jobs HTTP/1.1\r\n" + HOST + b"Content-Type: text/plain\r\nContent-Type: application/json\r\n"
     b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(SPEC) + SPEC, "json"),
    ("two equal lengths", post(extra=b"Content-Length: %d\r\n" % len(SPEC)), "any"),
    ("two lengths", post(extra=b"Content-Length: 3\r\n"), "any"),
    ("negative length", post(extra=b"Content-Length: -1\r\n", length=False), "any"),
    ("length not a number", post(extra=b"Content-Length: abc\r\n", length=False), "any"),
    ("length 1, 1", post(extra=b"Content-Length: 1, 1\r\n", length=False), "any"),
    ("huge length", post(extra=b"Content-Length: 99999999999999999999999\r\n", length=False), "any"),
    ("length 2^64-1", post(extra=b"Content-Length: 18446744073709551615\r\n", length=False), "any"),
    ("length over the limit", post(b"{}", length=(1 << 20) + 1), "json"),
    ("length short", post(SPEC, length=5), "any"),
    ("no length, body", post(SPEC, length=False), "any"),
    ("Expect 100 over the limit", post(b"", extra=b"Expect: 100-continue\r\n", length=(1 << 20) + 1), "json"),
    ("Expect 100", [(post(b"", extra=b"Expect: 100-continue\r\n", length=len(SPEC)), 0.2), (SPEC, 0)], "any"),
    ("chunked valid", chunked([chunk(SPEC[:10]), chunk(SPEC[10:])]), "accept"),
    ("chunked extension", chunked([chunk(SPEC).replace(b"\r\n", b";x=y\r\n", 1)]), "any"),
    ("chunked trailer", chunked([chunk(SPEC)], final=b"0\r\nX-Trailer: 1\r\n\r\n"), "any"),
    ("chunk size larger", chunked([chunk(SPEC, len(SPEC) + 10)]), "any"),
    ("chunk size smaller", chunked([chunk(SPEC, 5)]), "any"),
    ("chunk size negative", chunked([b"-5\r\n" + SPEC + b"\r\n"]), "any"),
    ("chunk size overflow", chunked([b"ffffffffffffffffffff\r\n" + SPEC + b"\r\n"]), "any"),
    ("chunk size not hex", chunked([b"zz\r\n" + SPEC + b"\r\n"]), "any"),
    ("chunk size spaces", chunked([b" %x \r\n" % len(SPEC) + SPEC + b"\r\n"]), "any"),
    ("no final chunk", chunked([chunk(SPEC)], final=b""), "any"),
    ("chunked and length", chunked([chunk(SPEC)], extra=b"Content-Length: 3\r\n"), "any"),
    ("chunked over the limit", chunked([chunk(b" " * 65536)] * 17 + [chunk(b"{}")]), "json"),
    ("transfer-encoding gzip", post(extra=b"Transfer-Encoding: gzip\r\n", length=False), "any"),
    ("transfer-encoding identity", post(extra=b"Transfer-Encoding: identity\r\n"), "any"),
    ("pipelined", get() .replace(b"Connection: close\r\n", b"") + get(b"/v1/system"), "json"),
    ("pipelined post then get", post().replace(b"Connection: close\r\n", b"") + get(), "accept"),
    ("drop after headers", [(post(b"", length=1000), 0.1)], "none"),
    ("drop mid body", [(post(SPEC[:10], length=len(SPEC)), 0.1)], "none"),
    ("drop mid header", [(b"POST /v1/jobs HTTP/1.1\r\nContent-Le", 0.1)], "none"),
    ("drop mid chunk", [(chunked([chunk(SPEC, 100)[:20]], final=b""), 0.1)], "none"),
    ("slow request", [(bytes([b]), 0.002) for b in post()], "accept"),
    ("slow headers then body", [(post(b"", length=len(SPEC)), 0.3), (SPEC[:5], 0.3), (SPEC[5:], 0)], "accept"),
]


def exchange(parts, read_timeout=3.0, close_early=False, enough=1):
    """Sends parts on a new connection and reads until the server closes,
    enough final responses have come, or read_timeout passes. Returns (bytes
    received, whether the server closed)."""
    sock = socket.create_connection(("127.0.0.1", PORT), timeout=5)
    got, closed = b"", False
    try:
        for data, wait in parts:
            try:
                sock.sendall(data)
            except (BrokenPipeError, ConnectionResetError):
                break
            if wait:
                time.sleep(wait)
        if close_early:
            return b"", False
        sock.settimeout(read_timeout)
        deadline = time.time() + read_timeout
        while time.time() < deadline:
            try:
                chunk_ = sock.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                closed = True
                break
            if not chunk_:
                closed = True
                break
            got += chunk_
            if len([r for r in responses(got) if r[0] != 100]) >= enough:
                break
    finally:
        sock.close()
    return got, closed


def responses(raw):
    """[(status, content type, body)] of the HTTP/1.1 responses in raw
    (Content-Length framed, as libmicrohttpd answers here)."""
    out = []
    while raw.startswith(b"HTTP/"):
        head, sep, rest = raw.partition(b"\r\n\r\n")
        if not sep:
            break
        lines = head.split(b"\r\n")
        try:
            status = int(lines[0].split()[1])
        except (IndexError, ValueError):
            break
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(b":")
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get(b"content-length", b"0") or 0)
        if status == 100:
            n = 0
        if len(rest) < n:
            break  # not all here yet
        out.append((status, headers.get(b"content-type", b"").decode("latin-1"), rest[:n]))
        raw = rest[n:]
    return out


def judge(name, parts, expect, accepted):
    got, _ = exchange(parts, read_timeout=0.5 if expect in ("none", "any") else 5.0, close_early=expect == "none",
                      enough=2 if name.startswith("pipelined") else 1)
    answers = [r for r in responses(got) if r[0] != 100]
    for status, ctype, body in answers:
        if ctype.startswith("application/json"):
            ans = fuzzlib.Answer(status, ctype, body)
            for p in fuzzlib.error_problems(ans, {200, 202, 400, 401, 404, 405, 409, 413, 415}):
                check(False, f"[{name}] {p}")
            if status == 202 and isinstance(ans.json, dict) and isinstance(ans.json.get("id"), int):
                accepted.append(ans.json["id"])
        else:
            check(status < 500 or status == 505, f"[{name}] libmicrohttpd answered {status}: {body[:200]!r}")
    if expect in ("json", "accept"):
        check(answers and all(c.startswith("application/json") for _, c, _ in answers),
              f"[{name}] no JSON answer from lmperfd: {got[:300]!r}")
    if expect == "accept":
        check(any(s == 202 for s, _, _ in answers), f"[{name}] not accepted: {got[:300]!r}")
    h = fuzzlib.http_request(PORT, "GET", "/healthz", timeout=10)
    check(h.status == 200, f"[{name}] /healthz afterwards: {h.status} {h.problem}")


def mutate(rng, base):
    """A valid request with a few random byte edits."""
    data = bytearray(base)
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        pos = rng.randrange(len(data) + 1)
        if op < 0.4 and data:
            data[min(pos, len(data) - 1)] = rng.randrange(256)
        elif op < 0.7:
            data[pos:pos] = rng.choice([b"\r\n", b"\x00", b" ", b":", b"\xff", b"%", b"\r\n\r\n", b"0" * 50])
        elif data:
            del data[pos:pos + rng.randint(1, 8)]
    return bytes(data)


def slow_clients_do_not_block():
    """Thirty connections trickling their headers; meanwhile normal requests
    are answered within a second each."""
    socks = []
    try:
        for _ in range(30):
            s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
            s.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n")
            socks.append(s)
        for _ in range(5):
            t0 = time.time()
            h = fuzzlib.http_request(PORT, "GET", "/healthz", timeout=10)
            check(h.status == 200 and time.time() - t0 < 1.0 * TIME_SCALE,
                  f"/healthz beside 30 slow clients: {h.status} {h.problem} in {time.time() - t0:.2f} s")
            for s in socks:
                s.sendall(b"X: y\r\n")
    finally:
        for s in socks:
            s.close()


def concurrent_garbage(rng):
    """Eight threads sending mutated requests at once, with normal requests between."""
    seeds = [rng.randrange(1 << 30) for _ in range(8)]
    errors = []

    def worker(seed):
        r = random.Random(seed)
        for _ in range(10):
            try:
                exchange([(mutate(r, r.choice([get(b"/v1/jobs?limit=1"), get(b"/v1/system")])), 0)], read_timeout=0.3)
            except OSError as e:
                errors.append(str(e))
    threads = [threading.Thread(target=worker, args=(s,)) for s in seeds]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    check(not errors, f"concurrent garbage: {errors[:3]}")


PORT = None
TIME_SCALE = float(os.environ.get("LMPERF_FUZZ_TIME_SCALE", "1"))


def main():
    global PORT
    rng = random.Random(ARGS.seed)
    d = test_api.Daemon("fuzz-http")
    PORT = d.port
    t0 = time.time()
    accepted = []
    blocker = None
    try:
        blocker = d.submit({"kind": "numerics", "count": test_api.LONG_COUNT, "label": "fuzz blocker"})["id"]
        d.wait_status(blocker, ("running",))
        accepted.append(blocker)
        for name, data, expect in FIXED:
            parts = data if isinstance(data, list) else [(data, 0)]
            judge(name, parts, expect, accepted)
        slow_clients_do_not_block()
        bases = [post(), get(b"/v1/jobs?limit=1&status=queued"), get(b"/v1/jobs/1/table?format=md"),
                 chunked([chunk(SPEC)]), get(b"/v1/compare?jobs=1,2")]
        for i in range(ARGS.cases):
            data = mutate(rng, rng.choice(bases))
            judge(f"mutation {i}: {data[:120]!r}", [(data, 0)], "any", accepted)
            if test_api.failures:
                break
        concurrent_garbage(rng)
        print(f"{len(FIXED)} fixed and {ARGS.cases} mutated requests in {time.time() - t0:.1f} s", flush=True)
        # the end: the accepted jobs cancelled, listed, nothing else stored
        for job_id in accepted[1:]:
            fuzzlib.http_request(PORT, "DELETE", f"/v1/jobs/{job_id}")
        fuzzlib.http_request(PORT, "DELETE", f"/v1/jobs/{blocker}")
        d.wait_status(blocker, ("cancelled",), timeout=60)
        listed = {j["id"]: j["status"] for j in d.get("/v1/jobs?limit=1000")[2]["jobs"]}
        check(sorted(listed) == sorted(accepted), f"jobs listed {sorted(listed)}, accepted {sorted(accepted)}")
        check(all(s in ("cancelled", "succeeded", "failed") for s in listed.values()),
              f"jobs not finished: {listed}")
        for job_id in listed:
            spec = d.job(job_id)["spec"]
            check(job_id == blocker or {k: spec.get(k) for k in ("kind", "count")} == json.loads(SPEC),
                  f"job {job_id}: a spec other than the one sent: {spec}")
    finally:
        fuzzlib.stop_daemon(d, check, blocker_id=blocker)
    return test_api.verdict(f"HTTP fuzzing passed (seed {ARGS.seed}, {time.time() - t0:.1f} s)")


if __name__ == "__main__":
    sys.exit(main())
