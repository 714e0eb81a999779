#!/bin/bash
# The train-step grid of the benchmark job (lmperfd run, cuda worker) side
# by side with the PyTorch peer (torch_lm.py, fp32 and --tf32) in one device
# call, then the table with ratios (grid_table.py). Groups run in order and
# are skipped once the time budget is spent, so a short lease still yields
# whole (size, precision) pairs. Every lmperfd run and torch row lands in
# $OUT; the table is printed last.
# usage: tests/gpu/bench_grid.sh CARRY_DIR OUT_DIR
# env:   GRID   "size[,size]:ctx[,ctx] ..." (default below)
#        PRECS    fp32,tf32      WARMUP 2   STEPS 5   BUDGET_S 420
#        GRAPHS   "size[,size]:ctx[,ctx]" graphs: true vs false (tf32; forward,
#                 forward_backward, train_step) "" = none
set -u
CARRY=$1
OUT=$2
GRID=${GRID:-"small,medium:128,256,512,1024 large:128,512,1024 xl:128,512 2.7B:128,512"}
PRECS=${PRECS:-fp32,tf32}
WARMUP=${WARMUP:-2}
STEPS=${STEPS:-5}
BUDGET_S=${BUDGET_S:-420}
GRAPHS=${GRAPHS-"small,medium:128,512"}
mkdir -p "$OUT"
# cuBLAS, NCCL, CUPTI of the image's PyTorch packages, then the carried libraries
. "$(dirname "$0")/device_env.sh"
device_env "$CARRY/lib"
start=$(date +%s)
left() { echo $((BUDGET_S - ($(date +%s) - start))); }
log() { echo "[$(($(date +%s) - start))s] $*" | tee -a "$OUT/grid.log"; }

# one lmperfd run: name, spec JSON; output $OUT/lmperf_NAME.json
lmperf() {
    local name=$1 spec=$2 t
    t=$(left)
    if [ "$t" -lt 20 ]; then log "skip lmperf $name (budget)"; return; fi
    echo "$spec" >"$OUT/spec_$name.json"
    timeout "$t" "$CARRY/lmperfd" run "$OUT/spec_$name.json" >"$OUT/lmperf_$name.json" 2>>"$OUT/lmperfd.err"
    log "lmperf $name rc=$?"
}

# torch_lm.py for sizes × ctx × one precision mode; rows appended to torch_PREC.jsonl
torch_peer() {
    local sizes=$1 ctx=$2 prec=$3 t extra=""
    t=$(left)
    if [ "$t" -lt 20 ]; then log "skip torch $sizes $prec (budget)"; return; fi
    [ "$prec" = tf32 ] && extra=--tf32
    timeout "$t" python3 "$CARRY/torch_lm.py" --sizes "$sizes" --ctx "$ctx" --precs fp32 $extra \
        --warmup "$WARMUP" --steps "$STEPS" --out "$OUT/torch_$prec.jsonl" >>"$OUT/torch.log" 2>&1
    log "torch $sizes $ctx $prec rc=$?"
}

for group in $GRID; do
    sizes=${group%%:*}
    ctx=${group#*:}
    for size in ${sizes//,/ }; do
        for prec in ${PRECS//,/ }; do
            lmperf "${size}_${prec}" "{\"kind\":\"benchmark\",\"model\":\"$size\",\"context_length\":[$ctx],\
\"batch_size\":4,\"precision\":\"$prec\",\"mode\":\"train_step\",\"warmup_steps\":$WARMUP,\"measure_steps\":$STEPS}"
        done
    done
    for prec in ${PRECS//,/ }; do
        torch_peer "$sizes" "$ctx" "$prec"
    done
    # graph variants after the first group (small, medium)
    if [ -n "$GRAPHS" ]; then
        gsizes=${GRAPHS%%:*}
        gctx=${GRAPHS#*:}
        for size in ${gsizes//,/ }; do
            for g in false true; do
                lmperf "${size}_graphs_$g" "{\"kind\":\"benchmark\",\"model\":\"$size\",\"context_length\":[$gctx],\
\"batch_size\":4,\"precision\":\"tf32\",\"mode\":[\"forward\",\"forward_backward\",\"train_step\"],\"warmup_steps\":$WARMUP,\
\"measure_steps\":$STEPS,\"graphs\":$g}"
            done
        done
        GRAPHS=""
    fi
done
log "grid done"
python3 "$(dirname "$0")/grid_table.py" "$OUT" | tee "$OUT/table.md"
