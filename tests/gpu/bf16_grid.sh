#!/bin/bash
# Issue 5's speed run in one device call: the correctness checks of
# run_all.sh (OPS, GRAPH, MODEL: every op cuda vs cpu incl. 16-bit tensors,
# graphs = eager, the model against PyTorch autocast), then the bf16
# train-step grid (benchmark job through lmperfd run, naive attention, batch
# 4) beside torch_lm.py --precs bf16 (eager), our fp32 at 128 and 1024 (the
# bf16-vs-fp32 table), and torch_lm.py --compile --sdpa on a subset. Steps
# after the correctness checks are skipped once BUDGET_S is spent; the
# tables (bf16_table.py) are printed last.
# usage: tests/gpu/bf16_grid.sh CARRY_DIR OUT_DIR
# env:   SIZES small,medium,large,xl   CTX 128,256,512,1024   WARMUP 2   STEPS 5
#        COMPILE "small:1024 large:1024" (before our fp32)  COMPILE2 "small:512 large:512" (after; "" = none)
#        BUDGET_S 540   CHECKS 1   EAGER 1 (torch eager peer)   FP32_SIZES $SIZES   FP32_CTX 128,1024
#        FLASH "small:512,1024 large:512,1024" (ours with attention flash, after COMPILE; "" = none)
#        ATTENTION naive (the grid's attention: naive or naive_fused)   GRAPHS false (true: the grid's runs as CUDA graphs)
set -u
CARRY=$1
OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
SIZES=${SIZES:-small,medium,large,xl}
CTX=${CTX:-128,256,512,1024}
WARMUP=${WARMUP:-2}
STEPS=${STEPS:-5}
COMPILE=${COMPILE-"small:1024 large:1024"}
COMPILE2=${COMPILE2-"small:512 large:512"}
BUDGET_S=${BUDGET_S:-540}
CHECKS=${CHECKS:-1}
EAGER=${EAGER:-1}
FP32_SIZES=${FP32_SIZES:-$SIZES}
FP32_CTX=${FP32_CTX:-128,1024}
FLASH=${FLASH-"small:512,1024 large:512,1024"}
ATTENTION=${ATTENTION:-naive}
GRAPHS=${GRAPHS:-false}
mkdir -p "$OUT"
start=$(date +%s)
left() { echo $((BUDGET_S - ($(date +%s) - start))); }
log() { echo "[$(($(date +%s) - start))s] $*" | tee -a "$OUT/grid.log"; }
log "start $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(cat "$CARRY/COMMIT" | tr '\n' ' ')"

if [ "$CHECKS" = 1 ]; then
    CARRY=$CARRY OUT=$OUT/checks OPS=1 GRAPH=1 MODEL=1 DAEMON=0 BENCH=0 TORCH=0 OPS_TIMEOUT=200 \
        bash "$HERE/run_all.sh" >"$OUT/run_all.log" 2>&1
    log "run_all rc=$?"
fi
. "$(dirname "$0")/device_env.sh"
device_env "$CARRY/lib"
if [ "$CHECKS" = 1 ] && [ -x "$CARRY/test_model_flash" ]; then
    timeout 120 "$CARRY/test_model_flash" >"$OUT/test_model_flash.log" 2>&1
    log "test_model_flash rc=$?"
fi

lmperf() { # name, spec JSON → $OUT/lmperf_NAME.json
    local name=$1 spec=$2 t
    t=$(left)
    if [ "$t" -lt 15 ]; then log "skip lmperf $name (budget)"; return; fi
    echo "$spec" >"$OUT/spec_$name.json"
    timeout "$t" "$CARRY/lmperfd" run "$OUT/spec_$name.json" >"$OUT/lmperf_$name.json" 2>>"$OUT/lmperfd.err"
    log "lmperf $name rc=$?"
}
torch_peer() { # sizes ctx out extra-args...
    local sizes=$1 ctx=$2 out=$3 t
    shift 3
    t=$(left)
    if [ "$t" -lt 15 ]; then log "skip torch $sizes $ctx $* (budget)"; return; fi
    timeout "$t" python3 "$CARRY/torch_lm.py" --sizes "$sizes" --ctx "$ctx" --precs bf16 \
        --warmup "$WARMUP" --steps "$STEPS" --out "$OUT/$out" "$@" >>"$OUT/torch.log" 2>&1
    log "torch $sizes $ctx $* rc=$?"
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$OUT/device.txt" 2>&1
for size in ${SIZES//,/ }; do
    lmperf "${size}_bf16" "{\"kind\":\"benchmark\",\"model\":\"$size\",\"context_length\":[$CTX],\
\"batch_size\":4,\"precision\":\"bf16\",\"mode\":\"train_step\",\"attention\":\"$ATTENTION\",\
\"warmup_steps\":$WARMUP,\"measure_steps\":$STEPS,\"graphs\":$GRAPHS}"
done
[ "$EAGER" = 1 ] && torch_peer "$SIZES" "$CTX" torch_bf16.jsonl
for point in $COMPILE; do
    torch_peer "${point%%:*}" "${point#*:}" torch_bf16_compile.jsonl --compile --sdpa
done
for point in $FLASH; do # our flash attention, the path comparable with compile's SDPA
    lmperf "${point%%:*}_bf16flash" "{\"kind\":\"benchmark\",\"model\":\"${point%%:*}\",\"context_length\":[${point#*:}],\
\"batch_size\":4,\"precision\":\"bf16\",\"mode\":\"train_step\",\"attention\":\"flash\",\
\"warmup_steps\":$WARMUP,\"measure_steps\":$STEPS}"
done
for size in ${FP32_SIZES//,/ }; do
    lmperf "${size}_fp32" "{\"kind\":\"benchmark\",\"model\":\"$size\",\"context_length\":[$FP32_CTX],\
\"batch_size\":4,\"precision\":\"fp32\",\"mode\":\"train_step\",\"attention\":\"naive\",\
\"warmup_steps\":1,\"measure_steps\":3}"
done
for point in $COMPILE2; do
    torch_peer "${point%%:*}" "${point#*:}" torch_bf16_compile.jsonl --compile --sdpa
done
log "done"
python3 "$HERE/bf16_table.py" "$OUT" | tee "$OUT/table.md"
