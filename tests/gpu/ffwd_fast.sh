#!/bin/bash
# One device call for the wgmma forward's speed work (helper fwdfast): A/B
# timing of the carried builds (test_flash bench: the attention job's timing,
# lmk_attn_bench_cuda), builds alternating, REPS rounds, beside PyTorch SDPA on
# the same points (ffwd_sdpa.py); then the checks of the builds in CHECK
# (test_flash only bfloat16 / float16, flash_vs_torch.py --only bf16,fp16;
# QCHECK: ffwd_check.py --quick), SASS instruction counts and, with NCU
# builds named, one ncu of each one's forward at the leaderboard shape
# (clocks left alone). Every step under its own time limit. Logs land in OUT
# as one archive (logs.tgz) plus table.md and run.log.
# usage: tests/gpu/ffwd_fast.sh CARRY OUT   (DEADLINE: seconds for the whole script, default 270)
# env: BUILDS "base new ..." (folders of CARRY/bins.tar.xz)  CHECK "new"
#      QCHECK "..."  NCU "base new"  REPS 2  POINTS "dtype:B:H:T:d:causal ..."
#      JOB "build" (lmperfd attention job at the leaderboard shape beside torch_attn.py)
#      SASS "build ..." (instruction counts of the bf16 d 64 unsplit kernel)
set -u
CARRY=$1
OUT=$2
BUILDS=${BUILDS:-base new}
POINTS=${POINTS:-bf16:1:16:16384:64:1 bf16:8:1:16384:64:1}
. "$(dirname "$0")/ab_common.sh"
finish() {
    python3 "$ROOT/tests/gpu/ab_table.py" "$OUT/l/ab.log" "$OUT/l/sdpa.log" | tee "$OUT/table.md"
    tar czf "$OUT/logs.tgz" -C "$OUT" l && rm -rf "$OUT/l"
}
trap finish EXIT
ab_env

for rep in $(seq 1 "${REPS:-2}"); do
    for b in $BUILDS; do
        # shellcheck disable=SC2046
        timeout $(lim 40) "$X/$b/test_flash" bench $(bench_args) 2>>"$OUT/l/bench.err" | sed "s/^/$b /" >>"$OUT/l/ab.log"
        log "bench $b rep $rep rc=${PIPESTATUS[0]}"
    done
done
# shellcheck disable=SC2086
timeout $(lim 60) python3 "$ROOT/tests/gpu/ffwd_sdpa.py" $POINTS >"$OUT/l/sdpa.log" 2>&1
log "sdpa rc=$?"

for b in ${CHECK:-}; do
    for dt in bfloat16 float16; do
        timeout $(lim 40) "$X/$b/test_flash" only $dt >"$OUT/l/test_flash_${b}_$dt.log" 2>&1
        log "test_flash $b only $dt rc=$?: $(tail -1 "$OUT/l/test_flash_${b}_$dt.log")"
        grep FAIL "$OUT/l/test_flash_${b}_$dt.log" | head -5
    done
    timeout $(lim 100) python3 "$ROOT/tests/gpu/flash_vs_torch.py" "$X/$b/flash_dump" --only bf16,fp16 \
        --out "$OUT/l/flash_vs_torch_$b.txt" >"$OUT/l/flash_vs_torch_$b.log" 2>&1
    log "flash_vs_torch $b rc=$?: $(tail -1 "$OUT/l/flash_vs_torch_$b.log")"
    grep -E 'FAIL|Error' "$OUT/l/flash_vs_torch_$b.log" | head -8
done
for b in ${QCHECK:-}; do
    timeout $(lim 30) python3 "$ROOT/tests/gpu/ffwd_check.py" "$X/$b/flash_dump" --quick \
        --out "$OUT/l/ffwd_check_$b.txt" >"$OUT/l/ffwd_check_$b.log" 2>&1
    log "ffwd_check --quick $b rc=$?: $(tail -1 "$OUT/l/ffwd_check_$b.log")"
    grep -E 'FAIL|Error' "$OUT/l/ffwd_check_$b.log" | head -4
done

for b in ${JOB:-}; do
    [ -x "$X/$b/lmperfd" ] || continue
    echo '{"kind": "attention", "impl": "flash", "dtype": "bfloat16", "batch": 1, "heads": 16, "seq_len": [16384], "d_head": [64], "causal": true, "passes": 20, "warmup": 3}' >"$OUT/l/spec_lb.json"
    timeout $(lim 40) "$X/$b/lmperfd" run "$OUT/l/spec_lb.json" >"$OUT/l/lmperf_lb_$b.json" 2>>"$OUT/l/lmperfd.err"
    log "lmperf job lb $b rc=$?: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["runs"][0]; print("fwd %.3f bwd %.3f fwd+bwd %.3f ms" % (r["fwd_ms"], r["bwd_ms"], r["fwd_bwd_ms"]))' "$OUT/l/lmperf_lb_$b.json" 2>&1 | tail -1)"
    timeout $(lim 40) python3 "$X/torch_attn.py" --impls sdpa --dtype bf16 --batch 1 --heads 16 --seq 16384 --d 64 --n 20 --out "$OUT/l/torch.jsonl" >>"$OUT/l/torch.log" 2>&1
    log "torch_attn lb bf16 rc=$?: $(tail -1 "$OUT/l/torch.jsonl")"
done

for b in ${SASS:-}; do
    command -v cuobjdump >/dev/null || break
    cuobjdump -sass "$X/$b/test_flash" 2>/dev/null | awk '/Function : .*flash_fwd_wgmma_kernelI13__nv_bfloat16Li64ELi3ELb0ELb0/{f=1; print; next} /Function : /{f=0} f' >"$OUT/l/sass_$b.txt"
    log "sass $b (bf16 d64 unsplit): $(grep -oE 'HGMMA\.[0-9A-Zx]+|MUFU\.EX2|FFMA|FMNMX|FADD|FMUL|VOTE[.A-Z]*|BAR\.[A-Z]+|SYNCS\.[A-Z.]+|LDL|STL' "$OUT/l/sass_$b.txt" | sort | uniq -c | sort -rn | tr -s ' \n' ' ' | head -c 400)"
done

for b in ${NCU:-}; do
    command -v ncu >/dev/null || break
    timeout $(lim 60) ncu --clock-control none --kernel-name regex:flash_fwd_wgmma --launch-skip 2 --launch-count 1 \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats \
        --metrics 'regex:^sm__inst_executed_pipe_(xu|fma|alu|fmaheavy|fmalite)\.avg\.pct_of_peak_sustained_active$','regex:^sm__pipe_(tensor_op_gmma|fma|alu|xu|shared)_cycles_active\.avg\.pct_of_peak_sustained_active$' \
        "$X/$b/test_flash" bench flash bf16 1 16 16384 64 1 >"$OUT/l/ncu_$b.txt" 2>&1
    log "ncu $b rc=$?"
    grep -E 'Duration|SM Frequency|Compute \(SM\) Throughput|Issue Slots Busy|pipe_|No Eligible|Executed Ipc A|Warp Cycles Per Issued|ERR' "$OUT/l/ncu_$b.txt" | head -24
done
log "done"
