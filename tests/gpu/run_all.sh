#!/bin/bash
# Every GPU check of the cuda backend in one device call. Binaries are built
# on the development machine (meson setup build-gpu && ninja -C build-gpu) and
# carried in .carry/ (tests/gpu/carry.sh fills it); logs go to $OUT.
#   1. test_cuda_ops     every op and whole models against the cpu backend
#   2. bench_train_step  train-step timing (small, medium × T × fp32/tf32)
#   3. torch_lm.py       the PyTorch peer on the same grid (fp32, then --tf32)
# Exit status: that of test_cuda_ops.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CARRY=${CARRY:-$ROOT/.carry}
OUT=${OUT:-/tmp/lmperf-gpu-out}
SIZES=${SIZES:-small,medium}
CTX=${CTX:-128,256,512,1024}
PRECS=${PRECS:-fp32,tf32}
TORCH=${TORCH:-1} # 0: skip the PyTorch peer
mkdir -p "$OUT"
PYLIB=$(python3 -c 'import os, nvidia.cublas as c; print(os.path.join(list(c.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$CARRY/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib${PYLIB:+:$PYLIB}:${LD_LIBRARY_PATH:-}"

{
    date -u +%Y-%m-%dT%H:%M:%SZ
    echo "commit: $(cat "$CARRY/COMMIT" 2>/dev/null || echo unknown)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    ldd "$CARRY/test_cuda_ops" | grep -E 'not found|cublas|cudart|gomp'
    python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'
} >"$OUT/env.txt" 2>&1

timeout 270 "$CARRY/test_cuda_ops" >"$OUT/test_cuda_ops.log" 2>&1
TEST_RC=$?
echo "test_cuda_ops rc=$TEST_RC" >>"$OUT/env.txt"

timeout 30 "$CARRY/bench_train_step" adamw 134217728 >"$OUT/bench.log" 2>&1
timeout 150 "$CARRY/bench_train_step" 10 4 "$SIZES" "$CTX" "$PRECS" >>"$OUT/bench.log" 2>&1
echo "bench_train_step rc=$?" >>"$OUT/env.txt"

if [ "$TORCH" = 1 ]; then
    timeout 80 python3 "$CARRY/torch_lm.py" --sizes "$SIZES" --ctx "$CTX" --precs fp32 \
        --out "$OUT/torch_fp32.jsonl" >"$OUT/torch.log" 2>&1
    echo "torch fp32 rc=$?" >>"$OUT/env.txt"
    timeout 80 python3 "$CARRY/torch_lm.py" --sizes "$SIZES" --ctx "$CTX" --precs fp32 --tf32 \
        --out "$OUT/torch_tf32.jsonl" >>"$OUT/torch.log" 2>&1
    echo "torch tf32 rc=$?" >>"$OUT/env.txt"
fi

cat "$OUT/env.txt"
grep -E 'FAIL|: ok|check\(s\)|graph' "$OUT/test_cuda_ops.log" | tail -40
grep -c ' ok$' "$OUT/test_cuda_ops.log" | sed 's/^/checks ok: /'
cat "$OUT/bench.log"
exit $TEST_RC
