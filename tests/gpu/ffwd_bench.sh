#!/bin/bash
# The wgmma flash forward in one device call: correctness first (ffwd_check.py:
# full-grid shapes that take the wgmma kernel, vs float64 PyTorch and SDPA),
# then A/B timing of the builds carried (test_flash bench: the attention
# job's timing, lmk_attn_bench_cuda), alternating builds, twice, beside
# PyTorch SDPA on the same shapes (ffwd_sdpa.py), then the full checks
# (flash_vs_torch.py, test_flash) on the first build, then the attention job
# at the CS336 leaderboard shape beside torch_attn.py when lmperfd is carried.
# Binaries: CARRY/bins.tar.xz from tests/gpu/ffwd_carry.sh. Logs land in OUT.
# usage: tests/gpu/ffwd_bench.sh CARRY OUT
# env:   BUILDS "new base" (folders in the archive; the first is the one checked)
#        QUICK=1 (flash_vs_torch --quick)   JOB=0 (no lmperfd job)
#        JOBS "name ..." (builds whose lmperfd runs the job; default the first)
#        NCU=1 (ncu sections of the first build's forward at the leaderboard shape,
#        clocks left alone)   CHECK2 "name ..." (ffwd_check on more builds)
#        POINTS (dtype:B:H:T:d:causal ...)
set -u
CARRY=$1
OUT=$2
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$OUT"
X=$(mktemp -d)
tar xJf "$CARRY/bins.tar.xz" -C "$X"
cp "$CARRY"/COMMIT "$CARRY"/torch_attn.py "$X/" 2>/dev/null
BUILDS=${BUILDS:-new base}
FIRST=${BUILDS%% *}
POINTS=${POINTS:-bf16:1:16:16384:64:1 fp16:1:16:16384:64:1 bf16:1:16:16384:128:1 bf16:1:16:8192:64:0 fp16:1:16:8192:128:0 bf16:4:16:4096:64:1 bf16:2:16:4096:128:1}
. "$(dirname "$0")/device_env.sh"
device_env "$X/lib"
table() {
    python3 "$ROOT/tests/gpu/ab_table.py" "$OUT/ab.log" "$OUT/sdpa.log" | tee "$OUT/table.md"
}
RC=0
start=$(date +%s)
log() { echo "[$(($(date +%s) - start))s] $*" | tee -a "$OUT/ffwd.log"; }
{
    date -u +%Y-%m-%dT%H:%M:%SZ
    echo "commit: $(cat "$X/COMMIT" 2>/dev/null || echo unknown)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

timeout 100 python3 "$ROOT/tests/gpu/ffwd_check.py" "$X/$FIRST/flash_dump" \
    --out "$OUT/ffwd_check.txt" >"$OUT/ffwd_check.log" 2>&1
r=$?; log "ffwd_check $FIRST rc=$r: $(tail -1 "$OUT/ffwd_check.log")"; [ $r = 0 ] || RC=1
grep -E 'FAIL|Error|error' "$OUT/ffwd_check.log" | head -12

for b in ${CHECK2:-}; do
    timeout 60 python3 "$ROOT/tests/gpu/ffwd_check.py" "$X/$b/flash_dump" \
        --out "$OUT/ffwd_check_$b.txt" >"$OUT/ffwd_check_$b.log" 2>&1
    r=$?; log "ffwd_check $b rc=$r: $(tail -1 "$OUT/ffwd_check_$b.log")"
done

bench_args() { for p in $POINTS; do echo "flash ${p//:/ }"; done | sed 's/:/ /g'; }
for rep in 1 2; do
    for b in $BUILDS; do
        # shellcheck disable=SC2046
        timeout 60 "$X/$b/test_flash" bench $(bench_args) | sed "s/^/$b /" >>"$OUT/ab.log"
        log "bench $b rep $rep rc=${PIPESTATUS[0]}"
    done
done
# shellcheck disable=SC2086
timeout 90 python3 "$ROOT/tests/gpu/ffwd_sdpa.py" $POINTS >"$OUT/sdpa.log" 2>&1
log "sdpa rc=$?"
table

if command -v cuobjdump >/dev/null; then
    cuobjdump -sass "$X/$FIRST/test_flash" 2>/dev/null | awk '/Function : .*flash_fwd_wgmma/{f=1} /Function : /&&!/flash_fwd_wgmma/{f=0} f' >"$OUT/wgmma.sass"
    grep -oE 'HGMMA\.[A-Z0-9x.]+|WARPGROUP\.[A-Z]+|WARPSYNC|UTMALDG[.A-Z0-9]*|SYNCS\.[A-Z.]+|MUFU\.EX2|BAR\.[A-Z]+|LDL|STL|USETMAXREG[.A-Z]*' "$OUT/wgmma.sass" | sort | uniq -c | sort -rn | head -30 >"$OUT/sass_counts.txt"
    log "sass: $(tr -s ' \n' ' ' <"$OUT/sass_counts.txt" | head -c 600)"
fi

if [ "${NCU:-0}" = 1 ] && command -v ncu >/dev/null; then
    timeout 90 ncu --clock-control none --kernel-name regex:flash_fwd_wgmma --launch-skip 2 --launch-count 1 \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section Occupancy \
        "$X/$FIRST/test_flash" bench flash bf16 1 16 16384 64 1 >"$OUT/ncu.txt" 2>&1
    log "ncu rc=$?"
    grep -E 'Duration|Throughput|Pipe|Issue|Stall|Warp Cycles|Active Warps|Registers|Executed Ipc' "$OUT/ncu.txt" | head -40
fi

Q=""; [ "${QUICK:-0}" = 1 ] && Q=--quick
timeout 150 python3 "$ROOT/tests/gpu/flash_vs_torch.py" "$X/$FIRST/flash_dump" $Q \
    --out "$OUT/flash_vs_torch.txt" >"$OUT/flash_vs_torch.log" 2>&1
r=$?; log "flash_vs_torch $FIRST $Q rc=$r: $(tail -1 "$OUT/flash_vs_torch.log")"; [ $r = 0 ] || RC=1
grep -E 'FAIL|Error|error' "$OUT/flash_vs_torch.log" | head -12
timeout 120 "$X/$FIRST/test_flash" >"$OUT/test_flash.log" 2>&1
r=$?; log "test_flash $FIRST rc=$r: $(tail -1 "$OUT/test_flash.log")"; [ $r = 0 ] || RC=1
grep FAIL "$OUT/test_flash.log" | head -12

if [ "${JOB:-1}" = 1 ]; then
    for b in ${JOBS:-$FIRST}; do
        [ -x "$X/$b/lmperfd" ] || continue
        for dt in bfloat16 float16; do
            echo "{\"kind\": \"attention\", \"impl\": \"flash\", \"dtype\": \"$dt\", \"batch\": 1, \"heads\": 16, \"seq_len\": [16384], \"d_head\": [64], \"causal\": true, \"passes\": 20, \"warmup\": 3}" >"$OUT/spec_lb_$dt.json"
            timeout 60 "$X/$b/lmperfd" run "$OUT/spec_lb_$dt.json" >"$OUT/lmperf_lb_${b}_$dt.json" 2>>"$OUT/lmperfd.err"
            log "lmperf job lb $b $dt rc=$?: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["runs"][0]; print("fwd %.3f bwd %.3f fwd+bwd %.3f ms" % (r["fwd_ms"], r["bwd_ms"], r["fwd_bwd_ms"]))' "$OUT/lmperf_lb_${b}_$dt.json" 2>&1 | tail -1)"
        done
    done
    for dt in bf16 fp16; do
        timeout 100 python3 "$X/torch_attn.py" --impls sdpa --dtype $dt --batch 1 --heads 16 --seq 16384 --d 64 --n 20 --out "$OUT/torch.jsonl" >>"$OUT/torch.log" 2>&1
        log "torch_attn lb $dt rc=$?: $(tail -1 "$OUT/torch.jsonl")"
    done
fi

table >/dev/null
log "done rc=$RC"
# at most 8 files come back: the logs go in one archive
tar czf /tmp/ffwd_logs.tgz -C "$OUT" --exclude=table.md --exclude=ffwd.log . &&
    find "$OUT" -type f ! -name table.md ! -name ffwd.log -delete && mv /tmp/ffwd_logs.tgz "$OUT/logs.tgz"
exit $RC
