#!/bin/bash
# A/B of two lmperfd builds on the benchmark job's train step, in
# alternating rounds (A, B, A, B, ...; eager and graphs), beside the
# PyTorch peer (torch_lm.py) run once in the same call; then the table
# (ab_table.py): A, B, B / A, PyTorch, PyTorch / B.
# usage: tests/gpu/ab_grid.sh LMPERFD_A LMPERFD_B TORCH_LM_PY OUT_DIR
# env:   SIZES small,medium   CTX 128,256,512,1024   PREC tf32 (fp32, tf32,
#        bf16, fp16)   ATTENTION naive   GRAPHS "false true"   ROUNDS 2
#        WARMUP 2   STEPS 5   BUDGET_S 420   TORCH 1 (0: no peer)
# Run with the device's environment set (device_env.sh).
set -u
A=$1
B=$2
TORCH_LM=$3
OUT=$4
SIZES=${SIZES:-small,medium}
CTX=${CTX:-128,256,512,1024}
PREC=${PREC:-tf32}
ATTENTION=${ATTENTION:-naive}
GRAPHS=${GRAPHS:-false true}
ROUNDS=${ROUNDS:-2}
WARMUP=${WARMUP:-2}
STEPS=${STEPS:-5}
BUDGET_S=${BUDGET_S:-420}
mkdir -p "$OUT"
start=$(date +%s)
left() { echo $((BUDGET_S - ($(date +%s) - start))); }
log() { echo "[$(($(date +%s) - start))s] $*" | tee -a "$OUT/ab.log"; }
models=$(echo "$SIZES" | sed 's/[^,][^,]*/"&"/g')
for r in $(seq 1 "$ROUNDS"); do
    for build in A B; do
        bin=$A
        [ "$build" = B ] && bin=$B
        for g in $GRAPHS; do
            name="${build}_g${g}_r$r"
            t=$(left)
            if [ "$t" -lt 20 ]; then log "skip $name (budget)"; continue; fi
            echo "{\"kind\":\"benchmark\",\"model\":[$models],\"context_length\":[$CTX],\"batch_size\":4,\
\"precision\":\"$PREC\",\"attention\":\"$ATTENTION\",\"mode\":\"train_step\",\"graphs\":$g,\
\"warmup_steps\":$WARMUP,\"measure_steps\":$STEPS}" >"$OUT/spec_$name.json"
            timeout "$t" "$bin" run "$OUT/spec_$name.json" >"$OUT/$name.json" 2>>"$OUT/lmperfd.err"
            log "$name rc=$?"
        done
    done
done
if [ "${TORCH:-1}" = 1 ]; then
    t=$(left)
    if [ "$t" -ge 20 ]; then
        case $PREC in
        fp32) flags="--precs fp32" ;;
        tf32) flags="--precs fp32 --tf32" ;;
        *) flags="--precs $PREC" ;;
        esac
        timeout "$t" python3 "$TORCH_LM" --sizes "$SIZES" --ctx "$CTX" $flags --warmup "$WARMUP" --steps "$STEPS" \
            --out "$OUT/torch.jsonl" >>"$OUT/torch.log" 2>&1
        log "torch rc=$?"
    else
        log "skip torch (budget)"
    fi
fi
python3 "$(dirname "$0")/ab_table.py" "$OUT" | tee "$OUT/table.md"
