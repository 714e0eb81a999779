#!/bin/bash
# One device call for the wgmma forward's lazy row max (helper fwd7,
# LMK_FLASH_WGMMA_LAZY_MAX): A/B timing of the carried builds (test_flash bench,
# builds alternating, REPS rounds) beside PyTorch SDPA on the same points
# (ffwd_sdpa.py), then the checks in the order given, then the attention job
# beside torch_attn.py's SDPA, then SASS instruction counts; nvidia-smi logs the
# SM clock, power and throttle reasons every 250 ms through the whole call.
# Every step under its own time limit inside DEADLINE. Logs come back as one
# archive (logs.tgz) plus table.md and run.log.
# usage: tests/gpu/fwd7_ab.sh CARRY OUT
# env: BUILDS "def l1 l2" (folders of CARRY/bins.tar.xz)  REPS 3  POINTS "dtype:B:H:T:d:causal ..."
#      TF "b..." (test_flash only bfloat16 / float16 of each)  FVT "b..." (flash_vs_torch.py
#      --only bf16,fp16 of each)  JOB "b..." (lmperfd attention job, B1 H16 T16384 causal at
#      each of JOB_POINTS "bf16:128 fp16:128" (dtype:d), each beside torch_attn.py sdpa)  SASS "b..."
#      DEADLINE 270
set -u
CARRY=$1
OUT=$2
BUILDS=${BUILDS:-def l1 l2}
POINTS=${POINTS:-bf16:1:16:16384:128:1 fp16:1:16:16384:128:1 bf16:1:16:16384:64:1}
. "$(dirname "$0")/ab_common.sh"
finish() {
    [ -n "${smi:-}" ] && kill "$smi" 2>/dev/null
    python3 "$ROOT/tests/gpu/ab_table.py" "$OUT/l/ab.log" "$OUT/l/sdpa.log" >"$OUT/table.md"
    tar czf "$OUT/logs.tgz" -C "$OUT" l && rm -rf "$OUT/l"
}
trap finish EXIT
ab_env
smi_start
for rep in $(seq 1 "${REPS:-3}"); do
    for b in $BUILDS; do
        n0=$(wc -l <"$OUT/l/smi.log")
        # shellcheck disable=SC2046
        timeout $(lim 40) "$X/$b/test_flash" bench $(bench_args) 2>>"$OUT/l/bench.err" | sed "s/^/$b /" >>"$OUT/l/ab.log"
        log "bench $b rep $rep rc=${PIPESTATUS[0]} $(smi_since "$n0")"
    done
done
n0=$(wc -l <"$OUT/l/smi.log")
# shellcheck disable=SC2086
timeout $(lim 60) python3 "$ROOT/tests/gpu/ffwd_sdpa.py" $POINTS >"$OUT/l/sdpa.log" 2>&1
log "sdpa rc=$? $(smi_since "$n0")"
python3 "$ROOT/tests/gpu/ab_table.py" "$OUT/l/ab.log" "$OUT/l/sdpa.log"

for b in ${TF:-}; do
    for dt in bfloat16 float16; do
        timeout $(lim 40) "$X/$b/test_flash" only $dt >"$OUT/l/test_flash_${b}_$dt.log" 2>&1
        log "test_flash $b only $dt rc=$?: $(tail -1 "$OUT/l/test_flash_${b}_$dt.log")"
        grep FAIL "$OUT/l/test_flash_${b}_$dt.log" | head -5
    done
done
for b in ${FVT:-}; do
    timeout $(lim 110) python3 "$ROOT/tests/gpu/flash_vs_torch.py" "$X/$b/flash_dump" --only bf16,fp16 \
        --out "$OUT/l/flash_vs_torch_$b.txt" >"$OUT/l/flash_vs_torch_$b.log" 2>&1
    log "flash_vs_torch $b rc=$?: $(tail -1 "$OUT/l/flash_vs_torch_$b.log")"
    grep -E 'FAIL|Error' "$OUT/l/flash_vs_torch_$b.log" | head -8
done
for b in ${JOB:-}; do
    for jp in ${JOB_POINTS:-bf16:128 fp16:128}; do
        d=${jp#*:}
        dt=${jp%%:*}
        dt=$dt:$([ "$dt" = bf16 ] && echo bfloat16 || echo float16)
        echo "{\"kind\": \"attention\", \"impl\": \"flash\", \"dtype\": \"${dt#*:}\", \"batch\": 1, \"heads\": 16, \"seq_len\": [16384], \"d_head\": [$d], \"causal\": true, \"passes\": 20, \"warmup\": 3}" >"$OUT/l/spec_${dt%%:*}_$d.json"
        n0=$(wc -l <"$OUT/l/smi.log")
        timeout $(lim 40) "$X/$b/lmperfd" run "$OUT/l/spec_${dt%%:*}_$d.json" >"$OUT/l/lmperf_${dt%%:*}_${d}_$b.json" 2>>"$OUT/l/lmperfd.err"
        log "lmperf job d$d ${dt%%:*} $b rc=$?: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["runs"][0]; print("fwd %.3f bwd %.3f fwd+bwd %.3f ms, NVML SM MHz min %s mean %.0f" % (r["fwd_ms"], r["bwd_ms"], r["fwd_bwd_ms"], r.get("sm_clock_mhz_min"), r.get("sm_clock_mhz_mean") or 0))' "$OUT/l/lmperf_${dt%%:*}_${d}_$b.json" 2>&1 | tail -1) | $(smi_since "$n0")"
        n0=$(wc -l <"$OUT/l/smi.log")
        timeout $(lim 40) python3 "$X/torch_attn.py" --impls sdpa --dtype "${dt%%:*}" --batch 1 --heads 16 --seq 16384 --d "$d" --n 20 --out "$OUT/l/torch_$b.jsonl" >>"$OUT/l/torch.log" 2>&1
        log "torch_attn sdpa d$d ${dt%%:*} rc=$?: $(tail -1 "$OUT/l/torch_$b.jsonl") | $(smi_since "$n0")"
    done
done
for b in ${SASS:-}; do
    command -v cuobjdump >/dev/null || break
    cuobjdump -sass "$X/$b/test_flash" 2>/dev/null | awk '/Function : .*flash_fwd_wgmma_kernelI13__nv_bfloat16Li128ELi2ELb1ELb0/{f=1; print; next} /Function : /{f=0} f' >"$OUT/l/sass_$b.txt"
    log "sass $b (bf16 d128 unsplit): $(grep -oE 'HGMMA\.[0-9A-Zx]+|MUFU\.EX2|FFMA|FMNMX|FADD|FMUL|F2FP[.A-Z0-9]*|VOTE[.A-Z]*|BAR\.[A-Z]+|SHFL[.A-Z]*|LDL|STL|STG[.A-Z0-9]*' "$OUT/l/sass_$b.txt" | sort | uniq -c | sort -rn | tr -s ' \n' ' ' | head -c 600)"
done
for b in ${TF_LAST:-}; do # more test_flash runs, last (cut first by the deadline)
    for dt in bfloat16 float16; do
        timeout $(lim 40) "$X/$b/test_flash" only $dt >"$OUT/l/test_flash_${b}_$dt.log" 2>&1
        log "test_flash $b only $dt rc=$?: $(tail -1 "$OUT/l/test_flash_${b}_$dt.log")"
    done
done
log "done"
