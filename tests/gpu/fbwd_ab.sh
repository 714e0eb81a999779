#!/bin/bash
# The wgmma backward's variants in one device call: each variant build's
# test_flash checks (only bfloat16, only float16), flash_vs_torch for the
# variants named in VTORCH, test_flash bench A/B against the default build
# (alternating, ROUNDS rounds), PyTorch SDPA at the same points, ncu (--set
# full, one launch of the backward kernel at the leaderboard shape) of the
# builds named in NCU, and the SASS of the carried cubins. Binaries come as
# tests/gpu/flash_carry.sh packs them (bins.tar.xz; variant builds as folders
# holding test_flash, flash_dump and FLAGS, from tests/gpu/fbwd_variant.sh).
# Everything lands in OUT (one archive out.tar.xz); the summary is printed.
# usage: tests/gpu/fbwd_ab.sh CARRY OUT
# env: VARIANTS "v1 v2" VTESTS "v1" VTESTS2 "v2" VTORCH "v1" NCU "default v1" ROUNDS 2
#      JOB "v1" (the attention job, bf16 and fp16, at each of JOB_SHAPES
#      "B H T d;..." (causal; default the leaderboard shape 1 16 16384 64))
#      POINTS "flash bf16 1 16 16384 64 1 ..." (test_flash bench arguments)
#      SDPA "[dtype] B H T d;..." (causal; dtype bf16 unless named)
#      NCU_POINT "flash bf16 1 16 16384 64 1" (the profiled bench point)
#      NCU_EXPORT 1: also the report's raw metrics and per-SASS-instruction
#      samples as CSV (ncu_NAME_raw.csv, ncu_NAME_source.csv)
#      TORCH_FIRST 1: flash_vs_torch of VTORCH right after VTESTS' test_flash
#      BUDGET seconds (skip parts past it)
set -u
CARRY=$1
OUT=$2
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUDGET=${BUDGET:-270}
start=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - start))); }
log() { echo "[$(($(date +%s) - start))s] $*" | tee -a "$OUT/ab.log"; }
mkdir -p "$OUT"
X=$(mktemp -d)
tar xJf "$CARRY/bins.tar.xz" -C "$X" && cp "$CARRY"/COMMIT "$CARRY"/torch_attn.py "$X/"
cp "$CARRY"/*.cubin "$X/" 2>/dev/null
. "$(dirname "$0")/device_env.sh"
device_env "$X/lib"
{
    date -u +%Y-%m-%dT%H:%M:%SZ
    echo "commit: $(cat "$X/COMMIT")"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'
    for v in ${VARIANTS:-}; do echo "$v: $(cat "$X/$v/FLAGS")"; done
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

bin() { if [ "$1" = default ]; then echo "$X/$2"; else echo "$X/$1/$2"; fi; }

# order: test_flash of VTESTS, timing, the job, SDPA, ncu, flash_vs_torch of
# VTORCH (TORCH_FIRST: before the timing), test_flash of VTESTS2 (each part
# skipped when BUDGET runs short)
vtests() {
    for v in "$@"; do
        for dt in bfloat16 float16; do
            [ "$(left)" -gt 60 ] || { log "skip test_flash $v $dt (time)"; continue; }
            timeout 90 "$(bin "$v" test_flash)" only $dt >"$OUT/test_flash_${v}_$dt.log" 2>&1
            log "test_flash $v $dt rc=$?: $(tail -1 "$OUT/test_flash_${v}_$dt.log")"
            grep FAIL "$OUT/test_flash_${v}_$dt.log" | head -4
        done
    done
}
vtorch() {
    for v in ${VTORCH:-}; do
        [ "$(left)" -gt 90 ] || { log "skip flash_vs_torch $v (time)"; continue; }
        ok=1
        for f in "$OUT"/test_flash_"${v}"_*.log; do tail -1 "$f" 2>/dev/null | grep -q '^0 of' || ok=0; done
        [ $ok = 1 ] || { log "skip flash_vs_torch $v (test_flash did not pass)"; continue; }
        timeout 100 python3 "$ROOT/tests/gpu/flash_vs_torch.py" "$(bin "$v" flash_dump)" --only bf16,fp16 \
            --out "$OUT/flash_vs_torch_$v.txt" >"$OUT/flash_vs_torch_$v.log" 2>&1
        log "flash_vs_torch $v rc=$?: $(tail -1 "$OUT/flash_vs_torch_$v.log")"
        grep -E 'FAIL|Error' "$OUT/flash_vs_torch_$v.log" | head -5
    done
}
vtests ${VTESTS:-}
[ -z "${TORCH_FIRST:-}" ] || vtorch

# timing: default and each variant alternating
POINTS=${POINTS:-"flash bf16 1 16 16384 64 1"}
for r in $(seq 1 "${ROUNDS:-2}"); do
    for v in default ${VARIANTS:-}; do
        [ "$(left)" -gt 40 ] || { log "skip bench $v round $r (time)"; continue; }
        timeout 60 "$(bin "$v" test_flash)" bench $POINTS | sed "s/^/$v /" >>"$OUT/bench.log"
    done
done
log "bench done"

# the attention job (lmperfd run) of the builds named in JOB, leaderboard shape
IFS=';' read -ra jsh <<<"${JOB_SHAPES:-1 16 16384 64}"
for v in ${JOB:-}; do
    for p in "${jsh[@]}"; do
        set -- $p
        for dt in bfloat16 float16; do
            [ "$(left)" -gt 40 ] || { log "skip job $v $p $dt (time)"; continue; }
            f="${v}_${1}_${2}_${3}_${4}_$dt"
            echo "{\"kind\": \"attention\", \"impl\": \"flash\", \"dtype\": \"$dt\", \"batch\": $1, \"heads\": $2, \"seq_len\": [$3], \"d_head\": [$4], \"causal\": true, \"passes\": 20, \"warmup\": 3}" >"$OUT/spec_$f.json"
            timeout 60 "$(bin "$v" lmperfd)" run "$OUT/spec_$f.json" >"$OUT/job_$f.json" 2>>"$OUT/job.err"
            log "job $v $p $dt rc=$?: $(grep -oE '"(fwd|bwd|fwd_bwd)_ms": [0-9.]+' "$OUT/job_$f.json" | tr '\n' ' ')"
        done
    done
done

# PyTorch SDPA at the same shapes (causal; bf16 unless the entry names a dtype)
IFS=';' read -ra sh <<<"${SDPA:-1 16 16384 64}"
for p in "${sh[@]}"; do
    [ "$(left)" -gt 25 ] || { log "skip sdpa $p (time)"; continue; }
    set -- $p
    dt=bf16
    case $1 in bf16 | fp16) dt=$1 && shift ;; esac
    timeout 60 python3 "$X/torch_attn.py" --impls sdpa --dtype $dt --batch "$1" --heads "$2" \
        --seq "$3" --d "$4" --n 20 --out "$OUT/torch.jsonl" >>"$OUT/torch.log" 2>&1
done
log "sdpa done"

for v in ${NCU:-}; do
    [ "$(left)" -gt 35 ] || { log "skip ncu $v (time)"; continue; }
    timeout 60 ncu --clock-control none --set full -k regex:flash_bwd_wgmma_kernel -c 1 \
        ${NCU_EXPORT:+-o "$X/ncu_$v"} "$(bin "$v" test_flash)" bench ${NCU_POINT:-flash bf16 1 16 16384 64 1} \
        >"$OUT/ncu_$v.txt" 2>&1
    log "ncu $v rc=$?"
    if [ -n "${NCU_EXPORT:-}" ] && [ -f "$X/ncu_$v.ncu-rep" ]; then
        ncu -i "$X/ncu_$v.ncu-rep" --print-details all >>"$OUT/ncu_$v.txt" 2>&1
        ncu -i "$X/ncu_$v.ncu-rep" --page raw --csv >"$OUT/ncu_${v}_raw.csv" 2>&1
        ncu -i "$X/ncu_$v.ncu-rep" --page source --csv --print-source sass >"$OUT/ncu_${v}_source.csv" 2>&1
        log "ncu $v export: $(wc -c <"$OUT/ncu_${v}_source.csv") bytes of source samples"
    fi
done
[ -n "${TORCH_FIRST:-}" ] || vtorch
vtests ${VTESTS2:-}
for c in "$X"/*.cubin; do
    [ -f "$c" ] && cuobjdump -sass "$c" >"$OUT/$(basename "$c" .cubin).sass" 2>&1
done

python3 "$ROOT/tests/gpu/ab_table.py" "$OUT/bench.log" "$OUT/torch.jsonl" | tee "$OUT/table.md"
log "done"
T=$(mktemp -d) && tar cJf "$T/out.tar.xz" -C "$OUT" . && rm -rf "${OUT:?}"/* && mv "$T/out.tar.xz" "$OUT/"
