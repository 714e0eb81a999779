#!/usr/bin/env python3
"""Markdown table of the allreduce GPU test: lmperf's points beside
torch_allreduce.py's rows (same backend, world size and MiB size).
ratio = torch median / lmperf median (> 1: lmperf is faster). At one rank
there is no ratio: torch's in-place all_reduce of one rank does no work,
while lmperf's out-of-place one copies the buffer.
Exit 1 when an lmperf point failed or was wrong.

usage: allreduce_compare.py OUTDIR"""
import glob
import json
import os
import sys


def main():
    out = sys.argv[1]
    torch = {}
    path = os.path.join(out, 'torch.jsonl')
    if os.path.exists(path):
        for line in open(path):
            r = json.loads(line)
            torch[(r['backend'], r['world'], r['mb'] * 2**20)] = r
    ok = True
    print('| backend | pass | size | ranks | lmperf median ms (min-max) | busbw GB/s | torch ms | torch busbw | ratio | sum |')
    print('|---|---|---|---|---|---|---|---|---|---|')
    for f in sorted(glob.glob(os.path.join(out, 'lmperf_*.json'))):
        try:
            doc = json.load(open(f))
        except ValueError:
            print('| %s: no JSON |' % os.path.basename(f))
            ok = False
            continue
        tag = os.path.basename(f)[len('lmperf_'):-len('.json')]
        for r in doc.get('runs', []):
            peer = torch.get(('gloo' if r['backend'] == 'mpi' else r['backend'], r['world_size'], r['size_bytes']))
            if r['status'] != 'succeeded':
                ok = False
                print('| %s | %s | %s | %d | FAILED: %s |' % (r['backend'], tag, r['size'], r['world_size'], r['error']))
                continue
            if not peer:
                ratio = '—'
            elif r['world_size'] == 1:
                ratio = 'n/a (1 rank: torch in place, no work)'
            else:
                ratio = '%.2f' % (peer['ms'] / r['median_ms'])
            print('| %s | %s | %s | %d | %.4f (%.4f-%.4f) | %.1f | %s | %s | %s | %s |' % (
                r['backend'], tag, r['size'], r['world_size'], r['median_ms'], r['min_ms'], r['max_ms'],
                r['busbw_gbps'], '%.4f' % peer['ms'] if peer else '—', '%.1f' % peer['busbw_gbs'] if peer else '—',
                ratio, 'exact' if r['correct'] else 'WRONG'))
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
