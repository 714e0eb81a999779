#!/bin/bash
# The memory job on the GPU beside PyTorch, and the flash path of the model,
# in one device call (issue 7 point 5, issue 9 point 2). Binaries are built
# on the development machine and carried in $CARRY (tests/gpu/carry_mem.sh or carry.sh);
# logs and results go to $OUT; the table is printed last (memory_table.py).
#   1. test_graph_step     CUDA graphs per phase vs eager (lazy gradients)
#   2. test_model_flash    flash vs naive / vs cpu in the whole model, graphs
#   3. the 2.7B memory grid: lmperfd run, context 128/256/512 × inference /
#      train_step × fp32 / bf16, batch 4, naive; flash at 512
#   4. memory_torch_peer.py, the same grid in PyTorch (max_memory_allocated)
#   5. memory_check.py --gpu   pool figures, a device OOM, flash in the job
#   6. benchmark and profile smoke with attention flash (graphs on)
# Switches (1 = run): GRAPH FLASH GRID TORCH CHECK SMOKE (all 1 by default).
# Exit status: 1 when a step that ran exited non-zero (its name on stderr),
# else memory_table.py's.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/tests/gpu"
CARRY=${CARRY:-$ROOT/.carry/mem}
OUT=${OUT:-/tmp/lmperf-mem-out}
GRAPH=${GRAPH:-1} FLASH=${FLASH:-1} GRID=${GRID:-1} TORCH=${TORCH:-1} CHECK=${CHECK:-1} SMOKE=${SMOKE:-1}
mkdir -p "$OUT"
. "$(dirname "$0")/device_env.sh"
device_env "$CARRY/lib"
start=$(date +%s)
log() { echo "[$(($(date +%s) - start))s] $*" | tee -a "$OUT/steps.log"; }
FAILED="" # the steps that exited non-zero (a missing binary included: 127)
logrc() { # name rc
    log "$1 rc=$2"
    [ "$2" = 0 ] || FAILED="$FAILED $1"
}
{
    date -u +%Y-%m-%dT%H:%M:%SZ
    echo "commit: $(cat "$CARRY/COMMIT" 2>/dev/null || echo unknown)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    ldd "$CARRY/lmperfd" | grep -E 'not found' || true
    python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'
} >"$OUT/env.txt" 2>&1
run() { # name timeout command...
    local name=$1 t=$2
    shift 2
    timeout "$t" "$@" >"$OUT/$name.log" 2>&1
    logrc "$name" $?
}
[ "$GRAPH" = 1 ] && run test_graph_step 120 "$CARRY/test_graph_step"
[ "$FLASH" = 1 ] && run test_model_flash 120 "$CARRY/test_model_flash"
if [ "$GRID" = 1 ]; then
    echo '{"kind": "memory", "model": "2.7B", "context_length": [128, 256, 512], "batch_size": 4,
           "precision": ["fp32", "bf16"], "mode": ["inference", "train_step"], "steps": 1,
           "record_events": false}' >"$OUT/spec_naive.json"
    timeout 240 "$CARRY/lmperfd" run "$OUT/spec_naive.json" >"$OUT/mem_naive.json" 2>"$OUT/mem_naive.err"
    logrc "grid naive" $?
    echo '{"kind": "memory", "model": "2.7B", "context_length": 512, "batch_size": 4, "attention": "flash",
           "precision": ["fp32", "bf16"], "mode": ["inference", "train_step"], "steps": 1,
           "record_events": false}' >"$OUT/spec_flash.json"
    timeout 120 "$CARRY/lmperfd" run "$OUT/spec_flash.json" >"$OUT/mem_flash.json" 2>"$OUT/mem_flash.err"
    logrc "grid flash" $?
fi
if [ "$TORCH" = 1 ]; then
    timeout 120 python3 "$HERE/memory_torch_peer.py" "$CARRY" >"$OUT/torch.jsonl" 2>"$OUT/torch.err"
    logrc "torch" $?
fi
[ "$CHECK" = 1 ] && run memory_check 150 python3 "$HERE/memory_check.py" "$CARRY/lmperfd" --gpu
if [ "$SMOKE" = 1 ]; then
    for att in naive flash; do
        echo "{\"kind\": \"benchmark\", \"model\": \"small\", \"context_length\": [512, 1024], \"batch_size\": 4,
               \"precision\": [\"fp32\", \"bf16\"], \"mode\": \"train_step\", \"attention\": \"$att\",
               \"graphs\": true, \"warmup_steps\": 2, \"measure_steps\": 5}" >"$OUT/spec_bench_$att.json"
        timeout 90 "$CARRY/lmperfd" run "$OUT/spec_bench_$att.json" >"$OUT/bench_$att.json" 2>"$OUT/bench_$att.err"
        logrc "benchmark $att" $?
    done
    echo '{"kind": "profile", "model": "small", "context_length": 256, "precision": "bf16", "mode": "train_step",
           "attention": "flash"}' >"$OUT/spec_profile_flash.json"
    timeout 90 "$CARRY/lmperfd" run "$OUT/spec_profile_flash.json" >"$OUT/profile_flash.json" 2>"$OUT/profile_flash.err"
    logrc "profile flash" $?
fi
python3 "$HERE/memory_table.py" "$OUT" | tee "$OUT/table.md"
table_rc=${PIPESTATUS[0]}
if [ -n "$FAILED" ]; then
    echo "memory_gpu: failed steps:$FAILED" >&2
    exit 1
fi
exit "$table_rc"
