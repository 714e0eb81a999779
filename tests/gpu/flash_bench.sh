#!/bin/bash
# Flash attention in one device call: correctness first (test_flash: ours vs
# the CPU reference and the naive path; flash_vs_torch.py: ours vs float64
# PyTorch and SDPA), then the attention job (lmperfd run) side by side with
# PyTorch SDPA (torch_attn.py) at the CS336 leaderboard shape, the flash grid
# and the CS336 fp32 point, then ncu per-kernel times at the leaderboard
# shape. Binaries come built from the development machine in CARRY
# (tests/gpu/flash_carry.sh fills it; bins.tar.xz is unpacked here); a
# variant build carried as CARRY/<name>/test_flash (folders named in
# VARIANTS) gets test_flash and timing points beside the default build's.
# Everything lands in OUT.
# usage: tests/gpu/flash_bench.sh CARRY OUT
# env:   TESTS=1 BENCH=1 TORCH=1 NCU=1 VTESTS=1 (0 skips a part; VTESTS: the
#        variants' test_flash)   SEQS "1024,2048,4096,8192,16384"   DS "64,128"
#        PASSES 20   POINTS: the variants' timing points (test_flash bench
#        arguments; impl flash_det is the deterministic backward)
set -u
CARRY=$1
OUT=$2
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TESTS=${TESTS:-1} BENCH=${BENCH:-1} TORCH=${TORCH:-1} NCU=${NCU:-1}
SEQS=${SEQS:-1024,2048,4096,8192,16384}
DS=${DS:-64,128}
PASSES=${PASSES:-20}
mkdir -p "$OUT"
if [ -f "$CARRY/bins.tar.xz" ]; then
    X=$(mktemp -d)
    tar xJf "$CARRY/bins.tar.xz" -C "$X" && cp "$CARRY"/COMMIT "$CARRY"/torch_attn.py "$X/"
    CARRY=$X
fi
VARIANTS=${VARIANTS:-}
. "$(dirname "$0")/device_env.sh"
device_env "$CARRY/lib"
RC=0
start=$(date +%s)
log() { echo "[$(($(date +%s) - start))s] $*" | tee -a "$OUT/flash.log"; }
{
    date -u +%Y-%m-%dT%H:%M:%SZ
    echo "commit: $(cat "$CARRY/COMMIT" 2>/dev/null || echo unknown)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

if [ "$TESTS" = 1 ]; then
    timeout 300 "$CARRY/test_flash" >"$OUT/test_flash.log" 2>&1
    r=$?; log "test_flash rc=$r: $(tail -1 "$OUT/test_flash.log")"; [ $r = 0 ] || RC=1
    grep FAIL "$OUT/test_flash.log" | head -20
    timeout 400 python3 "$ROOT/tests/gpu/flash_vs_torch.py" "$CARRY/flash_dump" \
        --out "$OUT/flash_vs_torch.txt" >"$OUT/flash_vs_torch.log" 2>&1
    r=$?; log "flash_vs_torch rc=$r: $(tail -1 "$OUT/flash_vs_torch.log")"; [ $r = 0 ] || RC=1
    grep -E 'FAIL|Error|error' "$OUT/flash_vs_torch.log" | head -20
fi

# variants: correctness, then the same timing points as the default build
POINTS=${POINTS:-"flash bf16 1 16 16384 64 1 flash bf16 1 1 8192 128 1 flash fp16 1 1 16384 128 1 flash bf16 2 3 3000 80 0 flash bf16 2 16 8192 32 1 flash bf16 1 16 16384 128 1 flash fp16 1 16 8192 64 0 flash bf16 1 1 16384 64 1 flash bf16 1 1 4096 128 1"}
for vname in $VARIANTS; do
    if [ "${VTESTS:-1}" = 1 ]; then
        timeout 300 "$CARRY/$vname/test_flash" >"$OUT/test_flash_$vname.log" 2>&1
        r=$?; log "test_flash $vname rc=$r: $(tail -1 "$OUT/test_flash_$vname.log")"
        grep FAIL "$OUT/test_flash_$vname.log" | head -5
    fi
    for b in default "$vname" default "$vname"; do
        bin="$CARRY/test_flash"; [ "$b" = default ] || bin="$CARRY/$b/test_flash"
        timeout 120 "$bin" bench $POINTS | sed "s/^/$b /" | tee -a "$OUT/variants.log"
    done
done

# one lmperfd run: name, spec JSON → $OUT/lmperf_NAME.json
lmperf() {
    echo "$2" >"$OUT/spec_$1.json"
    timeout 300 "$CARRY/lmperfd" run "$OUT/spec_$1.json" >"$OUT/lmperf_$1.json" 2>>"$OUT/lmperfd.err"
    log "lmperf $1 rc=$?"
}
if [ "$BENCH" = 1 ]; then
    for dt in bfloat16 float16; do
        lmperf "lb_$dt" "{\"kind\": \"attention\", \"impl\": \"flash\", \"dtype\": \"$dt\", \"batch\": 1, \"heads\": 16, \"seq_len\": [16384], \"d_head\": [64], \"causal\": true, \"passes\": $PASSES, \"warmup\": 3}"
    done
    lmperf grid "{\"kind\": \"attention\", \"impl\": \"flash\", \"dtype\": [\"bfloat16\", \"float16\", \"float32\"], \"batch\": 1, \"heads\": 1, \"seq_len\": [$SEQS], \"d_head\": [$DS], \"causal\": true, \"passes\": $PASSES, \"warmup\": 3}"
    lmperf cs336 "{\"kind\": \"attention\", \"impl\": \"flash\", \"dtype\": \"float32\", \"batch\": 8, \"heads\": 1, \"seq_len\": [16384], \"d_head\": [64], \"causal\": true, \"passes\": 10, \"warmup\": 2}"
fi
if [ "$TORCH" = 1 ]; then
    TA="$CARRY/torch_attn.py"
    : >"$OUT/torch.jsonl"
    timeout 120 python3 "$TA" --impls sdpa --dtype bf16 --batch 1 --heads 16 --seq 16384 --d 64 --n 20 --out "$OUT/torch.jsonl" >>"$OUT/torch.log" 2>&1
    log "torch lb bf16 rc=$?"
    timeout 120 python3 "$TA" --impls sdpa --dtype fp16 --batch 1 --heads 16 --seq 16384 --d 64 --n 20 --out "$OUT/torch.jsonl" >>"$OUT/torch.log" 2>&1
    log "torch lb fp16 rc=$?"
    for dt in bf16 fp16 fp32; do
        timeout 200 python3 "$TA" --impls sdpa --dtype $dt --batch 1 --heads 0 --seq "$SEQS" --d "$DS" --n 20 --out "$OUT/torch.jsonl" >>"$OUT/torch.log" 2>&1
        log "torch grid $dt rc=$?"
    done
    timeout 120 python3 "$TA" --impls sdpa --dtype fp32 --batch 8 --heads 0 --seq 16384 --d 64 --n 10 --out "$OUT/torch.jsonl" >>"$OUT/torch.log" 2>&1
    log "torch cs336 rc=$?"
fi
if [ "$NCU" = 1 ] && command -v ncu >/dev/null; then
    # the second warm-up pass: fwd, D = rowsum(dO∘O), dK/dV, dQ (the first is skipped)
    timeout 200 ncu --kernel-name regex:flash --launch-skip 4 --launch-count 4 \
        --metrics gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_registers \
        "$CARRY/test_flash" bench flash bf16 1 16 16384 64 1 >"$OUT/ncu_lb.log" 2>&1
    log "ncu rc=$?"
    grep -E 'flash_|gpu__time_duration|warps_active|registers' "$OUT/ncu_lb.log" | head -60
fi
if [ "$BENCH" = 1 ]; then
    # every timed GPU point carries the SM clock NVML saw (daemon/gpu_power.c)
    python3 - "$OUT" <<'PY'
import glob, json, os, sys
bad = rows = 0
for f in glob.glob(os.path.join(sys.argv[1], "lmperf_*.json")):
    for r in json.load(open(f)).get("runs", []):
        # loops of a few ms may fall between the 5 ms readings (idle ones are left out)
        if r.get("status") != "succeeded" or r.get("oom") or r.get("fwd_ms", 0) * r.get("passes", 0) < 20:
            continue
        rows += 1
        ok = (r.get("sm_clock_mhz_min") or 0) > 0 and r.get("sm_clock_mhz_mean", 0) >= r["sm_clock_mhz_min"] \
            and (r.get("power_w_max") or 0) > 0 and r.get("settle_ms", -1) >= 0 and isinstance(r.get("clock_slowdown"), bool)
        if not ok:
            bad += 1
            print(f"FAIL clock readings {os.path.basename(f)} d {r.get('d_head')} T {r.get('seq_len')}: "
                  f"{ {k: r.get(k) for k in ('sm_clock_mhz_min', 'sm_clock_mhz_mean', 'power_w_max', 'clock_slowdown', 'settle_ms')} }")
print(f"clock readings: {rows - bad} of {rows} timed points (forward loops >= 20 ms)")
sys.exit(1 if bad or not rows else 0)
PY
    r=$?; log "clock readings rc=$r"; [ $r = 0 ] || RC=1
fi
python3 "$ROOT/tests/gpu/flash_table.py" "$OUT" | tee "$OUT/table.md"
log "done rc=$RC"
exit $RC
