"""engine_ab_table.py on synthetic benchmark results (no GPU): a base and a
variant at two points over two rounds, one variant round failed, one file
unreadable, one missing; the per-round figures, the means, the ratio over the
base, the error shown in place. Exit 0 when every check passes, 1 otherwise."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
failures = []


def check(cond, message):
    if not cond:
        failures.append(message)
        print("FAIL:", message)


def write_run(folder, name, point, rnd, fwd, bwd, total, status="succeeded"):
    run = {"status": status, "error": None if status == "succeeded" else "out of memory: requested 1 GiB",
           "stats": {"forward": {"median_ms": fwd}, "backward": {"median_ms": bwd}, "total": {"mean_ms": total}}}
    with open(os.path.join(folder, f"{name}__{point}__r{rnd}.json"), "w") as f:
        json.dump({"runs": [run]}, f)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        write_run(tmp, "base", "large_1024_bf16_false", 1, 20.0, 40.0, 68.0)
        write_run(tmp, "base", "large_1024_bf16_false", 2, 21.0, 41.0, 70.0)
        write_run(tmp, "fused", "large_1024_bf16_false", 1, 19.0, 38.0, 64.0)
        write_run(tmp, "fused", "large_1024_bf16_false", 2, 19.0, 39.0, 66.0)
        write_run(tmp, "base", "xl_1024_bf16_true", 1, 40.0, 80.0, 130.0)
        write_run(tmp, "fused", "xl_1024_bf16_true", 1, 0, 0, 0, status="failed")
        with open(os.path.join(tmp, "fused__xl_1024_bf16_true__r2.json"), "w") as f:
            f.write("{not json")
        write_run(tmp, "other", "xl_1024_bf16_true", 1, 1.0, 1.0, 1.0)  # a build not asked for
        run = subprocess.run([sys.executable, os.path.join(HERE, "engine_ab_table.py"), tmp, "base", "fused"],
                             capture_output=True, text=True, timeout=60)
    out = run.stdout
    print(out)
    check(run.returncode == 0, f"exit status {run.returncode}: {run.stderr}")
    rows = {tuple(c.strip() for c in line.strip("|").split("|")[:2]): [c.strip() for c in line.strip("|").split("|")]
            for line in out.splitlines() if line.startswith("| ") and not line.startswith("| point")}
    base = rows.get(("large 1024 bf16", "base"))
    fused = rows.get(("large 1024 bf16", "fused"))
    check(base and base[2] == "60.00 / 62.00" and base[3] == "61.00" and base[4] == "69.00" and base[5] == "",
          f"base row: {base}")
    check(fused and fused[2] == "57.00 / 58.00" and fused[3] == "57.50" and fused[5] == f"{57.5 / 61.0:.3f}",
          f"variant row: {fused}")
    xl = rows.get(("xl 1024 bf16 graphs", "fused"))
    check(xl and "failed: out of memory" in xl[2] and "unreadable" in xl[2] and xl[3] == "–" and xl[5] == "",
          f"failed and unreadable rounds: {xl}")
    check(not any(k[1] == "other" for k in rows), "builds not named are left out")
    usage = subprocess.run([sys.executable, os.path.join(HERE, "engine_ab_table.py")], capture_output=True, text=True)
    check(usage.returncode == 2 and "usage" in usage.stderr, "usage on missing arguments")
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("engine_ab_table: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
