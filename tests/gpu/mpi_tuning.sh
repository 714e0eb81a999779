#!/usr/bin/env bash
# Experiment: which Open MPI settings make the mpi CPU all-reduce baseline
# fastest on this host, beside gloo (the PyTorch CPU peer) in the same call.
# Runs `lmperfd __allreduce-rank` directly under mpirun with each setting
# (MCA parameters through OMPI_MCA_* environment variables, binding on the
# command line), then torch_allreduce.py's gloo worker for the same world
# sizes and sizes. Prints one JSON line per (setting, world, size) to stdout.
# Needs no GPU.
#
# usage: tests/gpu/mpi_tuning.sh LMPERFD TORCH_ALLREDUCE_PY [WORLDS] [OUTDIR]
set -uo pipefail
LMPERFD=$1
TORCH_PY=$2
WORLDS=${3:-2,4}
OUTDIR=${4:-/tmp/mpi-tuning}
mkdir -p "$OUTDIR"
SIZES=1048576,10485760,104857600
root=(); [ "$(id -u)" = 0 ] && root=(--allow-run-as-root)

echo "== host"; nproc; lscpu | grep -E 'Model name|Socket|NUMA node|Thread' ; mpirun --version | head -1
ompi_info 2>/dev/null | grep -E 'MCA (btl|coll|smsc)' | sed 's/,.*//' | tr -s ' ' | paste -sd' ' 

# name|environment assignments|binding arguments
settings=(
  "default||--bind-to none"
  "bind-core||--bind-to core"
  "segring|OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=5|--bind-to none"
  "reduce-bcast|OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=2|--bind-to none"
  "nocma|OMPI_MCA_btl_vader_single_copy_mechanism=none|--bind-to none"
  "han|OMPI_MCA_coll_han_priority=100|--bind-to none"
  "han-bind|OMPI_MCA_coll_han_priority=100|--bind-to core"
  "nocma-bind|OMPI_MCA_btl_vader_single_copy_mechanism=none|--bind-to core"
)
for s in "${settings[@]}"; do
  IFS='|' read -r name envs bind <<<"$s"
  for w in ${WORLDS//,/ }; do
    # shellcheck disable=SC2086
    out=$(env $envs timeout 120 mpirun "${root[@]}" --oversubscribe $bind -np "$w" "$LMPERFD" __allreduce-rank \
          --sizes "$SIZES" --warmup 5 --iterations 10 2>"$OUTDIR/$name-$w.err")
    rc=$?
    [ $rc = 0 ] || { echo "{\"setting\":\"$name\",\"world\":$w,\"error\":\"rc $rc: $(tail -c 300 "$OUTDIR/$name-$w.err" | tr '\n"' ' ')\"}"; continue; }
    echo "$out" | python3 -c '
import json, statistics, sys
name = sys.argv[1]
for line in sys.stdin:
    r = json.loads(line)
    t = r.get("times_ms") or []
    print(json.dumps(dict(setting=name, world=r["world"], mb=r["bytes"] / 2**20,
                          median_ms=round(statistics.median(t), 4) if t else None,
                          min_ms=round(min(t), 4) if t else None, mismatches=r.get("mismatches"), error=r.get("error"))))
' "$name"
  done
done

echo "== gloo (torch_allreduce.py worker)"
cp "$TORCH_PY" "$OUTDIR/torch_allreduce.py"
cat > "$OUTDIR/gloo_run.py" <<'PY'
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch.multiprocessing as mp
import torch_allreduce
if __name__ == "__main__":
    for w in [int(x) for x in sys.argv[1].split(",")]:
        mp.spawn(torch_allreduce.worker, args=(w, "gloo", [1, 10, 100], sys.argv[2]), nprocs=w, join=True)
PY
rm -f "$OUTDIR/gloo.jsonl"
python3 "$OUTDIR/gloo_run.py" "$WORLDS" "$OUTDIR/gloo.jsonl" >/dev/null 2>"$OUTDIR/gloo.err" || tail -5 "$OUTDIR/gloo.err"
cat "$OUTDIR/gloo.jsonl"
