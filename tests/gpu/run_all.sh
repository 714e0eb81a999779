#!/bin/bash
# Every GPU check of the cuda backend in one device call. Binaries are built
# on the development machine (meson setup build-g && ninja -C build-g) and
# carried in $CARRY (tests/gpu/carry.sh fills it); logs go to $OUT.
#   1. test_cuda_ops        every op and whole models against the cpu backend
#   2. test_graph_step      per-phase CUDA graphs replayed vs eager; event timer
#   3. dump_model + torch_reference.py   the whole model against PyTorch
#                           (tiny, dh 80 / V 10007, 25 heads / V 1003; fp32, tf32
#                           vs float64; bf16, fp16 vs PyTorch autocast, 20 steps)
#   4. benchmark_gpu_check.py   the benchmark job: graphs, CUDA-event times;
#      edge_shapes.py       odd shapes (d_head 80, 25 heads, d_ff 1, T 1, V 10007)
#                           through it: each precision and attention, estimate = peak;
#      seed_jobs_check.py   the daemon's seed-shaped sweeps: precision x warm-up,
#                           allreduce nccl + mpi, the profile table by run and range
#      cancel_check.py      DELETE of a running and a queued job on the GPU worker,
#                           then lmperfd submit --table md (the daemon's client)
#   5. bench_train_step     train-step timing (small, medium × T × fp32/tf32)
#   6. torch_lm.py          the PyTorch peer on the same grid (fp32, then --tf32)
# Switches (1 = run): OPS GRAPH MODEL DAEMON BENCH TORCH (all 1 by default).
# Exit status: 0 when every check that ran passed.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/tests/gpu"
CARRY=${CARRY:-$ROOT/.carry}
OUT=${OUT:-/tmp/lmperf-gpu-out}
SIZES=${SIZES:-small,medium}
CTX=${CTX:-128,256,512,1024}
PRECS=${PRECS:-fp32,tf32}
OPS=${OPS:-1} GRAPH=${GRAPH:-1} MODEL=${MODEL:-1} DAEMON=${DAEMON:-1} BENCH=${BENCH:-1} TORCH=${TORCH:-1}
mkdir -p "$OUT"
# cuBLAS, NCCL, CUPTI of the image's PyTorch packages, then the carried libraries
. "$(dirname "$0")/device_env.sh"
device_env "$CARRY/lib"
RC=0
note() { echo "$*" | tee -a "$OUT/env.txt"; }

{
    date -u +%Y-%m-%dT%H:%M:%SZ
    echo "commit: $(cat "$CARRY/COMMIT" 2>/dev/null || echo unknown)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    ldd "$CARRY/test_cuda_ops" | grep -E 'not found|cublas|cudart|gomp'
    ldd "$CARRY/lmperfd" | grep -E 'not found|nccl|cupti'
    python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'
} >"$OUT/env.txt" 2>&1

if [ "$OPS" = 1 ]; then
    timeout "${OPS_TIMEOUT:-270}" "$CARRY/test_cuda_ops" >"$OUT/test_cuda_ops.log" 2>&1
    r=$?; note "test_cuda_ops rc=$r"; [ $r = 0 ] || RC=1
fi
if [ "$GRAPH" = 1 ]; then
    timeout 120 "$CARRY/test_graph_step" >"$OUT/test_graph_step.log" 2>&1
    r=$?; note "test_graph_step rc=$r"; [ $r = 0 ] || RC=1
fi
if [ "$MODEL" = 1 ]; then
    : >"$OUT/model.log"
    # "+fused": attention naive_fused (the softmax inside the scores / dP GEMMs under bf16/fp16;
    # dh 64 at T 256 takes its wgmma kernels on the H100 / H200)
    set -- "tiny 4 128" "10007,160,432,2,2 2 100" "1003,200,328,1,25 3 100" "tiny+fused 4 128" \
        "10007,160,432,2,2+fused 2 128" "10007,128,344,2,2+fused 2 256"
    prefixes=()
    for shape in "$@"; do
        read -r m b t <<<"$shape"
        precs="fp32 tf32 bf16 fp16"
        case $m in *+fused) precs="bf16 fp16" ;; esac
        # fp32/tf32: 5 AdamW steps against float64; bf16/fp16 (autocast): a
        # 20-step loss curve against PyTorch autocast
        for prec in $precs; do
            p="$OUT/dump_${m//[,+]/_}_$prec"
            steps=5; case $prec in bf16|fp16) steps=20 ;; esac
            timeout 60 "$CARRY/dump_model" "$p" "$m" "$b" "$t" "$prec" 3 cuda $steps >>"$OUT/model.log" 2>&1 &&
                prefixes+=("$p")
        done
    done
    timeout 240 python3 "$HERE/torch_reference.py" "${prefixes[@]}" >>"$OUT/model.log" 2>&1
    r=$?; note "torch_reference rc=$r (${#prefixes[@]} of 18 dumps)"; [ $r = 0 ] && [ ${#prefixes[@]} = 18 ] || RC=1
    rm -f "$OUT"/dump_*.bin
fi
if [ "$DAEMON" = 1 ]; then
    timeout 300 python3 "$HERE/benchmark_gpu_check.py" "$CARRY/lmperfd" "$OUT" >"$OUT/benchmark_gpu_check.log" 2>&1
    r=$?; note "benchmark_gpu_check rc=$r"; [ $r = 0 ] || RC=1
    timeout 300 python3 "$HERE/edge_shapes.py" "$CARRY/lmperfd" "$OUT/edge" >"$OUT/edge_shapes.log" 2>&1
    r=$?; note "edge_shapes rc=$r"; [ $r = 0 ] || RC=1
    timeout 400 python3 "$HERE/seed_jobs_check.py" "$CARRY/lmperfd" "$OUT/seed" >"$OUT/seed_jobs_check.log" 2>&1
    r=$?; note "seed_jobs_check rc=$r"; [ $r = 0 ] || RC=1
    timeout 200 python3 "$HERE/cancel_check.py" "$CARRY/lmperfd" "$OUT/cancel" >"$OUT/cancel_check.log" 2>&1
    r=$?; note "cancel_check rc=$r"; [ $r = 0 ] || RC=1
fi
if [ "$BENCH" = 1 ]; then
    timeout 30 "$CARRY/bench_train_step" adamw 134217728 >"$OUT/bench.log" 2>&1
    timeout 150 "$CARRY/bench_train_step" 10 4 "$SIZES" "$CTX" "$PRECS" >>"$OUT/bench.log" 2>&1
    note "bench_train_step rc=$?"
fi
if [ "$TORCH" = 1 ]; then
    timeout 80 python3 "$CARRY/torch_lm.py" --sizes "$SIZES" --ctx "$CTX" --precs fp32 \
        --out "$OUT/torch_fp32.jsonl" >"$OUT/torch.log" 2>&1
    note "torch fp32 rc=$?"
    timeout 80 python3 "$CARRY/torch_lm.py" --sizes "$SIZES" --ctx "$CTX" --precs fp32 --tf32 \
        --out "$OUT/torch_tf32.jsonl" >>"$OUT/torch.log" 2>&1
    note "torch tf32 rc=$?"
fi

cat "$OUT/env.txt"
[ -f "$OUT/test_cuda_ops.log" ] && grep -E 'FAIL|check\(s\)|test_cuda_ops' "$OUT/test_cuda_ops.log" | tail -20 &&
    grep -c ' ok$' "$OUT/test_cuda_ops.log" | sed 's/^/test_cuda_ops checks ok: /'
[ -f "$OUT/test_graph_step.log" ] && tail -20 "$OUT/test_graph_step.log"
[ -f "$OUT/model.log" ] && grep -vE '^  after ( ?[1-4]|[ 1][1-46-9]) ' "$OUT/model.log"
[ -f "$OUT/benchmark_gpu_check.log" ] && cat "$OUT/benchmark_gpu_check.log"
[ -f "$OUT/bench.log" ] && cat "$OUT/bench.log"
exit $RC
