#!/usr/bin/env python3
"""The tables of tests/gpu/memory_gpu.sh's output folder: the 2.7B memory
grid, ours (lmperfd run memory: tracked peak, the pool's used peak with the
backend scratch, the estimate) beside PyTorch's max_memory_allocated
(memory_torch_peer.py) from the same device call, with ratios; then the
flash points and the benchmark smoke (naive vs flash).

  memory_table.py OUT_DIR"""
import json
import os
import sys

MIB = 2**20


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def torch_rows(path):
    rows = {}
    try:
        for line in open(path):
            line = line.strip()
            if line.startswith("{"):
                r = json.loads(line)
                rows[(r["ctx"], r["mode"], r["prec"])] = r
    except OSError:
        pass
    return rows


def fmt(x, nd=1):
    return "–" if x is None else f"{x:.{nd}f}"


def main():
    out = sys.argv[1]
    torch = torch_rows(os.path.join(out, "torch.jsonl"))
    print("| ctx | mode | prec | attention | ours peak MiB | pool used MiB | reserved MiB | estimate MiB | peak in "
          "| copies at peak | grads at peak | PyTorch MiB | ours / PyTorch | pool used / PyTorch |")
    print("|---:|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    above = 0
    for name in ("mem_naive.json", "mem_flash.json"):
        job = load(os.path.join(out, name))
        if not job:
            print(f"| {name}: no result |")
            continue
        for r in job.get("runs", []):
            key = (r["context_length"], r["mode"], r["precision"])
            t = torch.get(key, {}).get("peak_mib")
            if r["status"] != "succeeded":
                print(f"| {key[0]} | {key[1]} | {key[2]} | {r['attention']} | failed: {r.get('error')} |")
                continue
            peak = r["peak_allocated_bytes"] / MIB
            used = (r.get("pool_used_peak_bytes") or 0) / MIB or None
            res = (r.get("reserved_peak_bytes") or 0) / MIB or None
            m, e = r["measured"], r["estimate"]
            ratio = peak / t if t else None
            if ratio and ratio > 1:
                above += 1
            print(f"| {key[0]} | {key[1]} | {key[2]} | {r['attention']} | {peak:.1f} | {fmt(used)} | {fmt(res)} | "
                  f"{e['total'] / MIB:.1f} | {r['peak_phase']} | {m['parameter_copies_at_peak'] / MIB:.1f} | "
                  f"{m['gradients_at_peak'] / MIB:.1f} | {fmt(t)} | "
                  f"{'**' + fmt(ratio, 3) + '**' if ratio and ratio <= 1 else fmt(ratio, 3)} | "
                  f"{fmt(used / t if used and t else None, 3)} |")
    print(f"\npoints above PyTorch (tracked peak): {above}")
    print("\n| benchmark | T | prec | graphs | fwd ms | bwd ms | opt ms | step ms | final loss | peak MiB |")
    print("|---|---:|---|---|---:|---:|---:|---:|---:|---:|")
    for att in ("naive", "flash"):
        job = load(os.path.join(out, f"bench_{att}.json"))
        if not job:
            print(f"| {att}: no result |")
            continue
        for r in job.get("runs", []):
            if r["status"] != "succeeded":
                print(f"| {att} | {r['context_length']} | {r['precision']} | failed: {r.get('error')} |")
                continue
            st = r.get("stats_gpu") or r["stats"]
            med = lambda k: st.get(k, {}).get("median_ms")
            print(f"| {att} | {r['context_length']} | {r['precision']} | {r['graphs_scope']} | {fmt(med('forward'), 2)} | "
                  f"{fmt(med('backward'), 2)} | {fmt(med('optimizer'), 2)} | {fmt(med('total'), 2)} | "
                  f"{r['final_loss']:.5f} | {r['peak_memory_bytes'] / MIB:.1f} |")
    prof = load(os.path.join(out, "profile_flash.json"))
    if prof:
        runs = prof.get("runs", [])
        print(f"\nprofile flash: {prof.get('status')} {prof.get('error') or ''}".rstrip() + "; runs: "
              + ", ".join(f"{r['status']} {r.get('error') or ''}".rstrip() for r in runs))


if __name__ == "__main__":
    main()
