"""Markdown table of an engine A/B (tests/gpu/engine_ab.sh): the benchmark
job's results, one file per build, point and round, named
NAME__MODEL_T_PRECISION_GRAPHS__rROUND.json (lmperfd run's output).

Per point: each build's forward+backward milliseconds (the medians of the
phases, summed) of every round in order, their mean, the mean of the whole
step (stats.total.mean_ms), and each variant's mean forward+backward over the
base's. A file that is missing, unreadable or holds a failed run shows as
"–" or its error; the table is still written.
usage: engine_ab_table.py RUNS_DIR NAME...   (the first NAME is the base)"""
import glob
import json
import os
import re
import sys

FILE = re.compile(r"^(?P<name>.+?)__(?P<point>.+)__r(?P<round>\d+)\.json$")


def fwd_bwd_and_step(path):
    """(fwd+bwd ms, step ms) of the file's first run, or an error string."""
    try:
        run = json.load(open(path))["runs"][0]
    except (OSError, ValueError, KeyError, IndexError) as e:
        return f"unreadable ({type(e).__name__})"
    if run.get("status") != "succeeded":
        return f"{run.get('status')}: {run.get('error')}"
    stats = run["stats"]
    return (stats["forward"]["median_ms"] + stats["backward"]["median_ms"], stats["total"]["mean_ms"])


def label(point):
    """"large_1024_bf16_true" → "large 1024 bf16 graphs" (graphs false: left out)."""
    model, ctx, prec, graphs = point.rsplit("_", 3)
    return f"{model} {ctx} {prec}" + (" graphs" if graphs == "true" else "")


def table(runs_dir, names):
    cells = {}  # (point, name) -> [(round, value)]
    points = []
    for path in sorted(glob.glob(os.path.join(runs_dir, "*.json"))):
        m = FILE.match(os.path.basename(path))
        if not m or m["name"] not in names:
            continue
        if m["point"] not in points:
            points.append(m["point"])
        cells.setdefault((m["point"], m["name"]), []).append((int(m["round"]), fwd_bwd_and_step(path)))
    lines = ["| point | build | fwd+bwd ms per round | mean fwd+bwd | mean step | ÷ base |", "|---|---|---|---:|---:|---:|"]
    for point in points:
        base_mean = None
        for name in names:
            results = [v for _, v in sorted(cells.get((point, name), []))]
            good = [v for v in results if isinstance(v, tuple)]
            rounds = " / ".join(f"{v[0]:.2f}" if isinstance(v, tuple) else v for v in results) or "–"
            mean = sum(v[0] for v in good) / len(good) if good else None
            step = sum(v[1] for v in good) / len(good) if good else None
            if name == names[0]:
                base_mean = mean
            ratio = f"{mean / base_mean:.3f}" if mean and base_mean and name != names[0] else ""
            lines.append(f"| {label(point)} | {name} | {rounds} | "
                         f"{'–' if mean is None else f'{mean:.2f}'} | {'–' if step is None else f'{step:.2f}'} | {ratio} |")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    print(table(sys.argv[1], sys.argv[2:]))
