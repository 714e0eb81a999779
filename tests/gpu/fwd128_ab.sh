#!/bin/bash
# One device call for the wgmma forward's speed at head dim 128 (helper fwd128): A/B
# timing of the carried builds (test_flash bench: the attention job's timing,
# lmk_attn_bench_cuda), builds alternating, REPS rounds, beside PyTorch SDPA on the
# same points (ffwd_sdpa.py); then the checks (test_flash only bfloat16 / float16,
# flash_vs_torch.py --only bf16,fp16) of the builds in CHECK and of the AUTO builds
# that were fastest at the first point (AUTO: how many; the builds in NOAUTO never);
# the attention job (lmperfd) at d 128, 16 heads, T 16384, bf16 and fp16, for the
# builds in JOB beside torch_attn.py's SDPA; SASS of the bf16 d 128 unsplit kernel
# (SASS builds: instruction counts, the listing in the archive); ncu --set full of
# NCU's forward at the first point and a short ncu of SDPA's forward kernel there
# (clocks left alone). Every step under its own time limit. Logs land in OUT as one
# archive (logs.tgz) plus table.md and run.log.
# usage: tests/gpu/fwd128_ab.sh CARRY OUT   (DEADLINE: seconds for the whole script, default 280)
# env: BUILDS "base def ..." (folders of CARRY/bins.tar.xz)  REPS 2  POINTS "dtype:B:H:T:d:causal ..."
#      CHECK ""  AUTO 0 (the first checked right after the timing, the others last)
#      AUTO_LAST 0 (1: every AUTO build checked last)  NOAUTO "base def"
#      JOB ""  SASS ""  NCU ""  NCU_SDPA 0
set -u
CARRY=$1
OUT=$2
BUILDS=${BUILDS:-base def}
POINTS=${POINTS:-bf16:1:16:16384:128:1 fp16:1:16:16384:128:1 bf16:1:16:16384:64:1}
FIRST=${POINTS%% *}
AB_DEADLINE=280
. "$(dirname "$0")/ab_common.sh"
finish() {
    [ -n "${smi:-}" ] && kill "$smi" 2>/dev/null
    python3 "$ROOT/tests/gpu/ab_table.py" "$OUT/l/ab.log" "$OUT/l/sdpa.log" | tee "$OUT/table.md"
    tar czf "$OUT/logs.tgz" -C "$OUT" l && rm -rf "$OUT/l"
}
trap finish EXIT
ab_env

# clocks, power and throttle reasons every 250 ms through the whole call
smi_start
for rep in $(seq 1 "${REPS:-2}"); do
    for b in $BUILDS; do
        n0=$(wc -l <"$OUT/l/smi.log")
        # shellcheck disable=SC2046
        timeout $(lim 40) "$X/$b/test_flash" bench $(bench_args) 2>>"$OUT/l/bench.err" | sed "s/^/$b /" >>"$OUT/l/ab.log"
        log "bench $b rep $rep rc=${PIPESTATUS[0]} $(smi_since "$n0")"
    done
done
# shellcheck disable=SC2086
timeout $(lim 60) python3 "$ROOT/tests/gpu/ffwd_sdpa.py" $POINTS >"$OUT/l/sdpa.log" 2>&1
log "sdpa rc=$?"
python3 "$ROOT/tests/gpu/ab_table.py" "$OUT/l/ab.log" "$OUT/l/sdpa.log" | head -12

# the AUTO builds with the lowest mean forward at the first point (NOAUTO excluded)
auto=$(python3 - "$OUT/l/ab.log" "$FIRST" "${AUTO:-0}" "${NOAUTO:-base def}" <<'EOF'
import collections, json, sys
log, first, n, skip = sys.argv[1], sys.argv[2].split(":"), int(sys.argv[3]), sys.argv[4].split()
want = (first[0],) + tuple(int(x) for x in first[1:])
t = collections.defaultdict(list)
for line in open(log):
    b, _, js = line.partition(" ")
    try:
        r = json.loads(js)
        key = (r["dtype"], r["batch"], max(r["heads"], 1), r["seq"], r["d"], int(r["causal"]))
    except (ValueError, KeyError, TypeError):
        continue
    if key == want and b not in skip and r.get("fwd_ms"):
        t[b].append(r["fwd_ms"])
print(" ".join(sorted(t, key=lambda b: sum(t[b]) / len(t[b]))[:n]))
EOF
)
log "auto-checked builds: ${auto:-none}"
check() { # test_flash only bfloat16 / float16 and flash_vs_torch.py of build $1
    local b=$1 dt
    for dt in bfloat16 float16; do
        timeout $(lim 40) "$X/$b/test_flash" only $dt >"$OUT/l/test_flash_${b}_$dt.log" 2>&1
        log "test_flash $b only $dt rc=$?: $(tail -1 "$OUT/l/test_flash_${b}_$dt.log")"
        grep FAIL "$OUT/l/test_flash_${b}_$dt.log" | head -5
    done
    timeout $(lim 100) python3 "$ROOT/tests/gpu/flash_vs_torch.py" "$X/$b/flash_dump" --only bf16,fp16 \
        --out "$OUT/l/flash_vs_torch_$b.txt" >"$OUT/l/flash_vs_torch_$b.log" 2>&1
    log "flash_vs_torch $b rc=$?: $(tail -1 "$OUT/l/flash_vs_torch_$b.log")"
    grep -E 'FAIL|Error' "$OUT/l/flash_vs_torch_$b.log" | head -8
}
# the explicit builds and the fastest one now; the other AUTO builds after the profiles
first_auto=${auto%% *}
[ "${AUTO_LAST:-0}" = 1 ] && first_auto=""
for b in ${CHECK:-} $first_auto; do check "$b"; done

for b in ${JOB:-}; do
    [ -x "$X/$b/lmperfd" ] || { log "job $b: no lmperfd"; continue; }
    for dt in bf16:bfloat16 fp16:float16; do
        echo "{\"kind\": \"attention\", \"impl\": \"flash\", \"dtype\": \"${dt#*:}\", \"batch\": 1, \"heads\": 16, \"seq_len\": [16384], \"d_head\": [128], \"causal\": true, \"passes\": 20, \"warmup\": 3}" >"$OUT/l/spec_${dt%%:*}.json"
        timeout $(lim 40) "$X/$b/lmperfd" run "$OUT/l/spec_${dt%%:*}.json" >"$OUT/l/lmperf_${dt%%:*}_$b.json" 2>>"$OUT/l/lmperfd.err"
        log "lmperf job d128 ${dt%%:*} $b rc=$?: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["runs"][0]; print("fwd %.3f bwd %.3f fwd+bwd %.3f ms" % (r["fwd_ms"], r["bwd_ms"], r["fwd_bwd_ms"]))' "$OUT/l/lmperf_${dt%%:*}_$b.json" 2>&1 | tail -1)"
        timeout $(lim 40) python3 "$X/torch_attn.py" --impls sdpa --dtype "${dt%%:*}" --batch 1 --heads 16 --seq 16384 --d 128 --n 20 --out "$OUT/l/torch_$b.jsonl" >>"$OUT/l/torch.log" 2>&1
        log "torch_attn sdpa d128 ${dt%%:*} rc=$?: $(tail -1 "$OUT/l/torch_$b.jsonl")"
    done
done

for b in ${SASS:-}; do
    command -v cuobjdump >/dev/null || break
    cuobjdump -sass "$X/$b/test_flash" 2>/dev/null | awk '/Function : .*flash_fwd_wgmma_kernelI13__nv_bfloat16Li128ELi2ELb[01]ELb0/{f=1; print; next} /Function : /{f=0} f' >"$OUT/l/sass_$b.txt"
    log "sass $b (bf16 d128 unsplit): $(grep -oE 'HGMMA\.[0-9A-Zx]+|MUFU\.EX2|FFMA|FMNMX|FADD|FMUL|F2FP[.A-Z0-9]*|VOTE[.A-Z]*|BAR\.[A-Z]+|SYNCS\.[A-Z.]+|WARPGROUP\.[A-Z]+|LDL|STL|STG[.A-Z0-9]*|UTMA[A-Z.0-9]*' "$OUT/l/sass_$b.txt" | sort | uniq -c | sort -rn | tr -s ' \n' ' ' | head -c 700)"
done

pt=${FIRST//:/ }
for b in ${NCU:-}; do
    command -v ncu >/dev/null || break
    # shellcheck disable=SC2086
    timeout $(lim 90) ncu --clock-control none --set full --kernel-name regex:flash_fwd_wgmma --launch-skip 2 --launch-count 1 \
        -o "$OUT/l/ncu_$b" "$X/$b/test_flash" bench flash $pt >"$OUT/l/ncu_$b.log" 2>&1
    log "ncu full $b rc=$?"
    ncu --import "$OUT/l/ncu_$b.ncu-rep" --page details >"$OUT/l/ncu_$b.txt" 2>&1
    ncu --import "$OUT/l/ncu_$b.ncu-rep" --page raw --csv \
        --metrics 'regex:^sm__pipe_.*_cycles_active\.avg\.pct_of_peak_sustained_active$','regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$','regex:^sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active$' \
        >"$OUT/l/ncu_${b}_raw.csv" 2>&1
    grep -E 'Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|L2 Hit|Issue Slots Busy|No Eligible|Executed Ipc A|Warp Cycles Per Issued|Registers Per|Achieved Occ|Shared Memory Configuration Size|ERR' "$OUT/l/ncu_$b.txt" | head -24
done
if [ "${NCU_SDPA:-0}" = 1 ] && command -v ncu >/dev/null; then
    IFS=: read -r dt B H T d causal <<<"$FIRST"
    cat >"$OUT/l/sdpa_once.py" <<EOF
import torch, torch.nn.functional as F
dt = {"bf16": torch.bfloat16, "fp16": torch.float16}["$dt"]
q, k, v = (torch.randn($B, $H, $T, $d, device="cuda", dtype=dt) for _ in range(3))
for _ in range(3):
    F.scaled_dot_product_attention(q, k, v, is_causal=bool($causal))
torch.cuda.synchronize()
EOF
    timeout $(lim 60) ncu --clock-control none --section LaunchStats --section Occupancy --section SpeedOfLight \
        --section WarpStateStats --metrics sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active \
        --kernel-name regex:'[Ff]lash|fmha|sdpa|fprop' --launch-skip 2 --launch-count 1 \
        python3 "$OUT/l/sdpa_once.py" >"$OUT/l/ncu_sdpa.txt" 2>&1
    log "ncu sdpa rc=$?"
    grep -E '^  [a-z_A-Z].*\(|Duration|SM Frequency|Compute \(SM\)|Block Size|Grid Size|Registers Per|Shared Memory Per Block|Dynamic Shared|Threads|Waves Per SM|tensor_op_gmma|Warp Cycles Per Issued' "$OUT/l/ncu_sdpa.txt" | head -24
fi
for b in ${auto#"$first_auto"}; do check "$b"; done # (all of them with AUTO_LAST=1)
log "done"
