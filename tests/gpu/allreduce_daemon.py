#!/usr/bin/env python3
"""The allreduce job through the daemon: HTTP API, scheduler (GPU
reservation), worker, store and table view. Starts lmperfd on a free
loopback port with a fresh database, posts one allreduce job over `world`
ranks plus one over world+1 (a failed point on a machine with `world` GPUs),
then a numerics job that must wait for or run beside it, and prints the
markdown table. Exit 0 when the job succeeded with exact sums.

usage: allreduce_daemon.py LMPERFD OUTDIR BACKEND WORLD"""
import json
import os
import subprocess
import sys
import time
import urllib.request


def main():
    lmperfd, outdir, backend, world = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    port_file = os.path.join(outdir, 'port')
    db = os.path.join(outdir, 'lmperf.db')
    for f in (port_file, db):
        if os.path.exists(f):
            os.unlink(f)
    log = open(os.path.join(outdir, 'daemon.log'), 'w')
    d = subprocess.Popen([lmperfd, '--port', '0', '--port-file', port_file, '--db', db], stdout=log, stderr=log)
    try:
        for _ in range(300):
            if os.path.exists(port_file):
                break
            time.sleep(0.1)
        base = 'http://127.0.0.1:%s' % open(port_file).read().strip()

        def call(method, path, body=None):
            req = urllib.request.Request(base + path, method=method,
                                         data=json.dumps(body).encode() if body is not None else None,
                                         headers={'Content-Type': 'application/json'})
            with urllib.request.urlopen(req) as r:
                text = r.read().decode()
                return json.loads(text) if r.headers.get('Content-Type', '').startswith('application/json') else text

        sizes = ['1MiB', '1GiB'] if backend == 'nccl' else ['1MB', '10MB']
        job = call('POST', '/v1/jobs', {'kind': 'allreduce', 'backend': backend, 'sizes': sizes,
                                        'world_sizes': [world, world + 1], 'iterations': 10,
                                        'label': 'daemon check'})
        other = call('POST', '/v1/jobs', {'kind': 'numerics'})
        deadline = time.time() + 240
        while time.time() < deadline:
            j = call('GET', '/v1/jobs/%d' % job['id'])
            if j['status'] not in ('queued', 'running'):
                break
            time.sleep(0.5)
        print('job %d: %s %s' % (j['id'], j['status'], j.get('error') or ''))
        print(call('GET', '/v1/jobs/%d/table?format=md' % job['id']))
        runs = j.get('runs', [])
        good = [r for r in runs if r.get('world_size') == world]
        bad = [r for r in runs if r.get('world_size') == world + 1]
        ok = (j['status'] == 'succeeded' and len(good) == len(sizes) and
              all(r['status'] == 'succeeded' and r['correct'] for r in good))
        if backend == 'nccl':
            ok = ok and len(bad) == len(sizes) and all(r['status'] == 'failed' for r in bad)
        o = call('GET', '/v1/jobs/%d' % other['id'])
        print('numerics job beside it: %s' % o['status'])
        print('daemon check:', 'ok' if ok else 'FAILED')
        return 0 if ok else 1
    finally:
        d.terminate()
        d.wait(timeout=30)


if __name__ == '__main__':
    sys.exit(main())
