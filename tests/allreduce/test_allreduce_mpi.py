#!/usr/bin/env python3
"""allreduce job, mpi backend, 2 ranks, 1MB and 10MB through `lmperfd run`:
every point succeeded with the exact sum and positive, ordered timings; bad
specs are refused naming the field; a world size over the limit is a failed
point while the others go on.

usage: test_allreduce_mpi.py LMPERFD"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def run(lmperfd, spec, timeout=150):
    with tempfile.NamedTemporaryFile('w', suffix='.json', delete=False) as f:
        json.dump(spec, f)
        path = f.name
    try:
        p = subprocess.run([lmperfd, 'run', path, '--cpu-only'], capture_output=True, text=True, timeout=timeout)
    finally:
        os.unlink(path)
    return p.returncode, json.loads(p.stdout), p.stderr


def check(cond, what):
    if not cond:
        print('FAIL:', what)
        sys.exit(1)


def main():
    lmperfd = sys.argv[1]
    if not shutil.which('mpirun'):
        print('skip: mpirun is not on PATH')
        return SKIP
    probe = subprocess.run([lmperfd, '__allreduce-rank'], capture_output=True, text=True)
    if 'no MPI' in probe.stderr:
        print('skip: this build has no MPI')
        return SKIP

    spec = {'kind': 'allreduce', 'backend': 'mpi', 'sizes': ['1MB', '10MB'], 'world_sizes': [2],
            'warmup': 2, 'iterations': 5, 'label': 'ci mpi'}
    rc, doc, err = run(lmperfd, spec)
    check(rc == 0, 'exit status %d, stderr: %s' % (rc, err[-2000:]))
    check(doc['status'] == 'succeeded', 'job status %s: %s' % (doc['status'], doc.get('error')))
    runs = doc['runs']
    check([(r['world_size'], r['size_bytes']) for r in runs] == [(2, 10**6), (2, 10**7)],
          'points: %s' % [(r['world_size'], r['size']) for r in runs])
    for r in runs:
        where = '%s x%d' % (r['size'], r['world_size'])
        check(r['status'] == 'succeeded' and r['error'] is None, '%s: %s' % (where, r.get('error')))
        check(r['correct'] is True and r['mismatches'] == 0, '%s: wrong sum' % where)
        check(len(r['times_ms']) == 5 and all(t > 0 for t in r['times_ms']), '%s: times %s' % (where, r['times_ms']))
        check(0 < r['min_ms'] <= r['median_ms'] <= r['max_ms'], '%s: min/median/max order' % where)
        check(r['min_ms'] <= r['mean_ms'] <= r['max_ms'], '%s: mean out of range' % where)
        algbw = r['size_bytes'] / (r['median_ms'] * 1e-3) / 1e9
        check(abs(r['algbw_gbps'] - algbw) <= 1e-9 * max(1, algbw), '%s: algbw' % where)
        check(abs(r['busbw_gbps'] - algbw) <= 1e-9 * max(1, algbw), '%s: busbw at 2 ranks = algbw' % where)
        check(r['backend'] == 'mpi' and r['dtype'] == 'float32' and r['warmup'] == 2, '%s: config echo' % where)
    check(doc['result']['all_correct'] is True and doc['result']['failed'] == 0, 'result %s' % doc['result'])

    # a point past the limit fails with its reason, the rest goes on
    rc, doc, err = run(lmperfd, {'kind': 'allreduce', 'backend': 'mpi', 'sizes': [4096],
                                 'world_sizes': [65, 2], 'iterations': 2})
    check(rc == 0 and doc['status'] == 'succeeded', 'mixed job: %s' % doc.get('error'))
    bad, good = doc['runs']
    check(bad['status'] == 'failed' and 'at most 64 ranks' in bad['error'], 'world 65: %s' % bad)
    check(good['status'] == 'succeeded' and good['correct'], 'world 2 after a failed point: %s' % good)

    # refused specs name the field
    for spec, field in ((dict(sizes=['1XB']), 'sizes[0]'), (dict(sizes=[6]), 'sizes[0]'),
                        (dict(world_sizes=[0]), 'world_sizes[0]'), (dict(backend='gloo'), 'backend')):
        spec.update(kind='allreduce')
        rc, doc, err = run(lmperfd, spec)
        check(rc == 2 and doc['error']['field'] == field, 'spec %s: %s' % (spec, doc))
    print('ok')
    return 0


if __name__ == '__main__':
    sys.exit(main())
