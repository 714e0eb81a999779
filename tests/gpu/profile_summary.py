"""Prints a profile job's kernels per traced step, from `lmperfd run`'s JSON.

usage: profile_summary.py PROFILE_JOB.json [TOP]
Counts only the rows of the "step" range: the ranges nest (step ⊃ forward ⊃
layer ⊃ attention), so summing every range counts a kernel several times.
"""
import json
import sys


def main():
    job = json.load(open(sys.argv[1]))
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    for run in job.get("runs", []):
        if run.get("status") != "succeeded":
            print("run", run.get("status"), run.get("error"))
            continue
        steps = run.get("profile_steps") or 1
        print(f"{run.get('model')}/{run.get('context_length')} {run.get('precision')} {run.get('attention')}: "
              f"{steps} traced step(s)")
        for ph in run.get("phases", []):
            print(f"  {ph['phase']:<10} events {ph['event_ns_unprofiled'] / 1e6 / ph['instances']:9.3f} ms  "
                  f"kernels {ph['kernel_ns'] / 1e6:9.3f}  GEMM busy {ph['gemm_busy_ns'] / 1e6:9.3f}  "
                  f"idle {ph['gpu_idle_ns'] / 1e6:7.3f}")
        rows = [r for r in run.get("kernel_summary", []) if r["range"] == "step"]
        total = sum(r["total_ns"] for r in rows)
        print(f"  kernels in the step range: {total / steps / 1e6:.3f} ms per step")
        for r in sorted(rows, key=lambda r: -r["total_ns"])[:top]:
            print(f"  {r['total_ns'] / steps / 1e6:9.3f} ms {r['instances'] // steps:5d} × {r['avg_ns'] / 1e3:8.1f} µs "
                  f"{'G' if r['is_gemm'] else ' '} {r['kernel'][:100]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
