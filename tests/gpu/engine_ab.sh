#!/bin/bash
# An A/B of engine builds in one device call: the base build and variant
# builds (tests/gpu/obj_variant.sh outputs: lmperfd, test_cuda_ops,
# test_graph_step), each variant's correctness checks first, then benchmark
# jobs (lmperfd run, batch 4, 2 warm-up + 5 measured steps) at every point,
# the builds alternating within each round, then the table (engine_ab_table.py).
# The device returns at most 8 files: everything is packed into
# OUT/engine_ab.tar.xz, the table is also OUT/table.md and printed.
# usage: tests/gpu/engine_ab.sh CARRY OUT [NAME=DIR ...]
#   CARRY   the base build (tests/gpu/carry.sh: lmperfd, test binaries, lib/)
#   NAME=DIR  a variant: DIR holds its lmperfd (and test_cuda_ops,
#           test_graph_step for the checks); the libraries are CARRY's
# env: POINTS "model:T:precision[:graphs] ..." (default "large:1024:bf16
#      xl:1024:bf16 medium:256:tf32"), ROUNDS 2, CHECKS 1, BUDGET_S 480,
#      ATTENTION naive (or naive_fused, flash)
#      (benchmarks are skipped once spent; the packing always runs)
set -u
CARRY=$(cd "$1" && pwd)
OUT=$2
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
POINTS=${POINTS:-"large:1024:bf16 xl:1024:bf16 medium:256:tf32"}
ROUNDS=${ROUNDS:-2}
CHECKS=${CHECKS:-1}
BUDGET_S=${BUDGET_S:-480}
ATTENTION=${ATTENTION:-naive}
mkdir -p "$OUT"
L=$(mktemp -d)
start=$(date +%s)
log() { echo "[$(($(date +%s) - start))s] $*" | tee -a "$L/run.log"; }
left() { echo $((BUDGET_S - ($(date +%s) - start))); }
. "$HERE/device_env.sh"
device_env "$CARRY/lib"

# the binaries of each build: the base's in CARRY, a variant's in its folder (the libraries are CARRY's)
names=(base)
declare -A bin=([base]="$CARRY")
for spec in "$@"; do
    name=${spec%%=*}
    names+=("$name")
    bin[$name]=$(cd "${spec#*=}" && pwd)
done
{
    date -u +%Y-%m-%dT%H:%M:%SZ
    echo "commit: $(cat "$CARRY/COMMIT" 2>/dev/null | tr '\n' ' ')"
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
} >"$L/env.txt" 2>&1

if [ "$CHECKS" = 1 ]; then
    for name in "${names[@]:1}"; do
        for t in test_cuda_ops test_graph_step; do
            [ -x "${bin[$name]}/$t" ] || continue
            timeout 200 "${bin[$name]}/$t" >"$L/${name}_$t.log" 2>&1
            log "$name $t rc=$?"
        done
    done
fi

for round in $(seq 1 "$ROUNDS"); do
    for point in $POINTS; do
        IFS=: read -r model ctx prec graphs <<<"$point"
        graphs=${graphs:-false}
        for name in "${names[@]}"; do
            t=$(left)
            if [ "$t" -lt 20 ]; then
                log "skip $name $point round $round (budget)"
                continue
            fi
            spec="$L/spec.json"
            echo "{\"kind\":\"benchmark\",\"model\":\"$model\",\"context_length\":[$ctx],\"batch_size\":4,\
\"precision\":\"$prec\",\"mode\":\"train_step\",\"attention\":\"$ATTENTION\",\"warmup_steps\":2,\"measure_steps\":5,\
\"graphs\":$graphs}" >"$spec"
            out="$L/runs/${name}__${model}_${ctx}_${prec}_${graphs}__r$round.json"
            mkdir -p "$L/runs"
            timeout "$t" "${bin[$name]}/lmperfd" run "$spec" >"$out" 2>>"$L/lmperfd.err"
            log "$name $point round $round rc=$?"
        done
    done
done

python3 "$HERE/engine_ab_table.py" "$L/runs" "${names[@]}" >"$L/table.md" 2>&1
cp "$L/table.md" "$OUT/table.md"
tar -cJf "$OUT/engine_ab.tar.xz" -C "$L" .
rm -rf "$L"
cat "$OUT/table.md"
