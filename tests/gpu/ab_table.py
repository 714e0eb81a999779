"""Markdown table of an A/B timing run on the device: builds' `test_flash bench`
JSON lines, each prefixed with the build's name ("NAME {json}"), beside
PyTorch SDPA's JSON lines (ffwd_sdpa.py's, or torch_attn.py's: causal only,
heads 0 = one head, dtype names bf16/fp16/fp32), per point (dtype B H T d
causal). Shared by ffwd_bench.sh, ffwd_fast.sh and fbwd_ab.sh.

Per point and build: the forward ms of every round in the order run, the best
backward and fwd+bwd ms ("rc!" when a round's rc was not 0); SDPA's fwd / bwd /
fwd+bwd ms; each build's best forward and best fwd+bwd over SDPA's. A missing
or unreadable log gives an empty table, never an error (the device call's
other results still come back).
usage: ab_table.py AB_LOG [SDPA_LOG]"""
import collections
import json
import os
import sys

DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def json_lines(path, prefixed):
    """(prefix, record) per parsable line of path; nothing when path is absent."""
    if not path or not os.path.exists(path):
        return
    for line in open(path):
        prefix, js = line.split(" ", 1) if prefixed and " " in line else ("", line)
        try:
            r = json.loads(js)
        except ValueError:
            continue
        if isinstance(r, dict) and "seq" in r and "d" in r:
            yield prefix, r


def point(r):
    return (DTYPE.get(r.get("dtype"), r.get("dtype")), r.get("batch"), max(r.get("heads") or 1, 1), r["seq"], r["d"],
            int(r.get("causal", 1)))


def best(rs, key):
    vals = [r[key] for r in rs if isinstance(r.get(key), (int, float))]
    return min(vals) if vals else None


def cell(x):
    return f"{x:.3f}" if x is not None else "-"


def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "-"


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    ours = collections.OrderedDict()
    for build, r in json_lines(argv[1], True):
        ours.setdefault(point(r), collections.OrderedDict()).setdefault(build, []).append(r)
    sdpa = {point(r): r for _, r in json_lines(argv[2] if len(argv) > 2 else None, False) if "error" not in r}
    print("| dtype B H T d causal | build: fwd ms per round / best bwd / best fwd+bwd | SDPA fwd / bwd / fwd+bwd "
          "| best fwd ÷ SDPA | best fwd+bwd ÷ SDPA |")
    print("|---|---|---|---|---|")
    for k, builds in ours.items():
        s = sdpa.get(k)
        cells, fwd_ratio, total_ratio = [], [], []
        for b, rs in builds.items():
            fwd, bwd, total = best(rs, "fwd_ms"), best(rs, "bwd_ms"), best(rs, "fwd_bwd_ms")
            rounds = ", ".join(cell(r.get("fwd_ms")) for r in rs)
            bad = "" if all(r.get("rc", 0) == 0 for r in rs) else " rc!"
            cells.append(f"{b}: {rounds} / {cell(bwd)} / {cell(total)}{bad}")
            fwd_ratio.append(f"{b} {ratio(fwd, s and s.get('fwd_ms'))}")
            total_ratio.append(f"{b} {ratio(total, s and s.get('fwd_bwd_ms'))}")
        sd = " / ".join(cell(s.get(c)) for c in ("fwd_ms", "bwd_ms", "fwd_bwd_ms")) if s else "-"
        print(f"| {' '.join(map(str, k))} | {'; '.join(cells)} | {sd} | {', '.join(fwd_ratio)} | "
              f"{', '.join(total_ratio)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
