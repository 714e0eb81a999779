#!/usr/bin/env python3
"""The daemon under valgrind's memcheck through a job and a SIGTERM: no
invalid read or write and nothing definitely lost. It sees what the sanitized
build cannot: reads of freed memory inside libraries built without ASan
(jansson's, e.g. a freed worker device copied into the scheduler's last
view). Skips (77) without valgrind, or on a sanitized build (valgrind cannot
run it).

usage: test_memcheck.py LMPERFD SANITIZE   (SANITIZE: meson's b_sanitize)"""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_api  # noqa: E402  (reads LMPERFD from sys.argv)
from test_api import Daemon, check  # noqa: E402

MEMCHECK_ERROR_EXIT = 99  # valgrind's exit status when it found an error


def main():
    valgrind = shutil.which("valgrind")
    if not valgrind or sys.argv[2] != "none":
        print("skipped: " + ("no valgrind" if not valgrind else f"a sanitized build ({sys.argv[2]})"))
        return 77
    test_api.WEB_ROOT = None
    lmperfd = test_api.LMPERFD
    # the database made by the daemon itself first: its migrations under valgrind would outlast Daemon's start
    first = Daemon("memcheck")
    check(first.stop() == 0, "the daemon that made the database exits 0")
    wrapper = os.path.join(test_api.TMP, "lmperfd-memcheck")
    with open(wrapper, "w") as f:
        f.write(f'#!/bin/sh\nexec "{valgrind}" -q --error-exitcode={MEMCHECK_ERROR_EXIT} --leak-check=full '
                f'--errors-for-leak-kinds=definite --show-leak-kinds=definite "{lmperfd}" "$@"\n')
    os.chmod(wrapper, 0o755)
    test_api.LMPERFD = wrapper  # the daemon only: its workers are the real binary (/proc/self/exe)
    # a CUDA build's start-up under valgrind: the static CUDA runtime's registration, ≈ 30 s on a quiet 2-core host
    d = Daemon("memcheck", db=first.db, start_timeout=240)
    try:
        job = d.submit({"kind": "numerics", "label": "memcheck"})
        done = d.wait_status(job["id"], ("succeeded", "failed", "cancelled"), timeout=120)
        check(done["status"] == "succeeded", f"the job under memcheck: {done['status']} {done['error']}")
        for path in ("/v1/system", "/v1/jobs", f"/v1/jobs/{job['id']}/table?format=md", "/metrics"):
            status, _, _ = d.get(path)
            check(status == 200, f"GET {path} under memcheck: {status}")
    finally:
        code = d.stop(timeout=120)
    with open(d.log_path, errors="replace") as f:
        reports = [line for line in f if line.startswith("==")]
    check(code == 0, f"exit status under memcheck after SIGTERM: {code} "
                     f"({MEMCHECK_ERROR_EXIT}: memcheck found errors): {''.join(reports[:40])}")
    return test_api.verdict("memcheck found nothing")


if __name__ == "__main__":
    sys.exit(main())
