#!/usr/bin/env python3
"""The README's "Using the API" block, as a reader on a machine without a GPU
follows it: each curl command in order against a real CPU-only lmperfd (its
port for localhost:8080), each submitted job waited for before the next
command, as a person typing them would. Every command must answer as the
README's comments say there: submissions 202, except the profile jobs (a
GPU's: 400 naming "kind"); every view of a job the block submitted 200, and
of the profile jobs (never created here) 404; the cancel of job 2, by then
finished, 409. So the job ids the README names (job 4 the memory job, job 6
the numerics job of both experiments, ...) are the ones a newcomer gets.
The GPU attention grid is the one command skipped: the README says to submit
the CPU variant after it instead.

usage: test_readme.py LMPERFD [WEB_ROOT]"""
import http.client
import json
import os
import re
import shlex
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_api  # noqa: E402  (reads LMPERFD and WEB_ROOT from sys.argv)
from test_api import Daemon, check  # noqa: E402

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")
GPU_GRID = '"seq_len": [256, 1024, 4096, 8192, 16384]'  # the attention grid the CPU variant replaces
JOB_TIMEOUT = 240  # s: the README's CPU jobs (the small model's memory job the longest) on a 2-core machine


def api_block():
    """The commands of the first sh block after "## Using the API": lines ending in a backslash, and a quoted
    body's lines, joined; comments kept for shlex to drop."""
    text = open(README, encoding="utf-8").read()
    start = text.index("## Using the API")
    block = re.search(r"```sh\n(.*?)```", text[start:], re.S).group(1)
    commands, current = [], ""
    for line in block.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        continued = line.endswith("\\")
        current += (line[:-1] + " ") if continued else line + "\n"
        if not continued and current.count("'") % 2 == 0:  # a quoted -d body goes on over its lines
            commands.append(current.strip())
            current = ""
    return commands


def parse_curl(command):
    """(method, path with query, body or None) of a README curl command."""
    words = shlex.split(command, comments=True)
    check(words[0] == "curl", f"not a curl command: {command}")
    method, url, body, i = "GET", None, None, 1
    while i < len(words):
        w = words[i]
        if w == "-X":
            method, i = words[i + 1], i + 2
        elif w in ("-H",):
            i += 2
        elif w == "-d":
            body, i = words[i + 1], i + 2
            method = "POST" if method == "GET" else method
        elif w.startswith("localhost:8080"):
            url, i = w[len("localhost:8080"):], i + 1
        else:  # -s, "> trace.json"
            i += 2 if w == ">" else 1
    return method, url, body


def expected(method, path, body):
    """The status the README promises on a CPU-only daemon, and the field of a refusal."""
    if method == "POST" and json.loads(body).get("kind") == "profile":
        return 400, "kind"  # a GPU's job: refused without one, the ids after it unchanged
    if method == "POST":
        return 202, None
    if method == "DELETE":
        return 409, "id"  # job 2 has finished by then
    if re.search(r"/v1/jobs/[78]/|jobs=7,8", path):
        return 404, None  # the profile jobs, never created here
    return 200, None


def main():
    d = Daemon("readme")
    submitted = []
    try:
        commands = api_block()
        check(len(commands) >= 25, f"the README's API block: {len(commands)} commands")
        for command in commands:
            if GPU_GRID in command:
                continue  # a GPU's grid; the CPU variant right after it is submitted instead
            method, path, body = parse_curl(command)
            want, field = expected(method, path, body)
            conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=60)
            conn.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
            resp = conn.getresponse()
            data = resp.read()
            conn.close()
            doc = json.loads(data) if resp.getheader("Content-Type", "").startswith("application/json") and data else None
            error = doc.get("error") if isinstance(doc, dict) else None
            got_field = error.get("field") if isinstance(error, dict) else None
            check(resp.status == want and (field is None or got_field == field),
                  f"{method} {path}: {resp.status} (field {got_field}), the README promises {want} (field {field}): "
                  f"{data[:300]!r}")
            if method == "POST" and resp.status == 202:
                submitted.append((doc["id"], doc["kind"]))
                done = d.wait_status(doc["id"], ("succeeded", "failed", "cancelled"), timeout=JOB_TIMEOUT)
                check(done["status"] == "succeeded", f"job {doc['id']} ({doc['kind']}): {done['status']} {done['error']}")
        # the ids the README's comments name
        kinds = dict(submitted)
        check(kinds.get(1) == "numerics" and kinds.get(2) == "benchmark" and kinds.get(3) == "benchmark"
              and kinds.get(4) == "memory" and kinds.get(5) == "attention" and kinds.get(6) == "numerics"
              and len(submitted) == 6, f"the jobs a CPU reader submits: {submitted}")
    finally:
        d.stop()
    return test_api.verdict("the README's API block answers as its comments say")


if __name__ == "__main__":
    sys.exit(main())
