#!/bin/bash
# One device call's driver, run from the repository root on the lent GPU
# machine after tests/gpu/pack_carry.sh filled .carry/ here (carry
# [".carry"]). It unpacks the archive into /tmp (once per machine), records
# the device, runs part WHICH, and packs /tmp/logs into $OUT/logs_WHICH.tgz.
# usage: tests/gpu/device_go.sh WHICH
#   checks   session_check.sh: every correctness check, flash, profile gate
#   grid     bench_grid.sh (issue 4, fp32/tf32 beside torch_lm.py)
#            env GRID, PRECS, GRAPHS ("" = none), B (budget s, 540)
#   bf16     bf16_grid.sh with naive_fused beside torch_lm.py --precs bf16
#            env SIZES, CTX, COMPILE ("" = none), EAGER, B
#   compile  ours at SIZES (xl) × 1024 beside torch.compile + SDPA at COMPILE (xl:1024)
#   probe    gemm_probe at PROBE "model:tokens:prec ..." (each ≤ PT s, 100)
#   prof     profile jobs at PROF "model:ctx[:prec[:graphs]] ..." (prec bf16 by
#            default; naive_fused for bf16/fp16, naive otherwise; graphs true or
#            false, false by default; each ≤ PT s), summarised by profile_summary.py
#   ab       engine_ab.sh: this carry's lmperfd as base against the xz'd
#            lmperfd AB_BASE (.carry/lmperfd_base.xz) as "before" (env POINTS,
#            ROUNDS, ATTENTION; B budget s, 300; AB_TAG names its folder); then, with TORCH_SIZES set,
#            torch_lm.py at TORCH_SIZES × TORCH_CTX (--tf32 unless TORCH_TF32="")
#   allreduce  allreduce.sh beside torch_allreduce.py (world 2… on a multi-GPU kind)
set -u
WHICH=${1:?usage: tests/gpu/device_go.sh WHICH}
OUT=${OUT:?no \$OUT: run this on the device machine}
HERE=$(cd "$(dirname "$0")" && pwd)
CG=/tmp/cg
L=/tmp/logs
[ -x "$CG/lmperfd" ] || tar xJf .carry/g.tar.xz -C /tmp
mkdir -p "$L"
{
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit,temperature.gpu --format=csv
    uptime
    cat "$CG/COMMIT"
} >"$L/device_$WHICH.txt" 2>&1
. "$HERE/device_env.sh"
device_env "$CG/lib"
case $WHICH in
checks)
    mkdir -p "$L/checks" && bash "$HERE/session_check.sh" "$CG" /tmp/fl "$L/checks" ;;
grid)
    GRAPHS=${GRAPHS-""} BUDGET_S=${B:-540} bash "$HERE/bench_grid.sh" "$CG" "$L/grid" ;;
bf16)
    CHECKS=0 ATTENTION=naive_fused COMPILE2="" FLASH="" FP32_SIZES=" " BUDGET_S=${B:-540} \
        bash "$HERE/bf16_grid.sh" "$CG" "$L/bf16" ;;
compile)
    CHECKS=0 ATTENTION=naive_fused EAGER=0 SIZES=${SIZES:-xl} CTX=1024 COMPILE="${COMPILE-xl:1024}" COMPILE2="" \
        FLASH="" FP32_SIZES=" " BUDGET_S=${B:-540} bash "$HERE/bf16_grid.sh" "$CG" "$L/compile" ;;
probe)
    for pt in ${PROBE:-small:2048:tf32 medium:1024:tf32}; do
        IFS=: read -r model tokens prec <<<"$pt"
        timeout "${PT:-100}" "$CG/gemm_probe" "$model" "$tokens" "$prec" 20 >"$L/probe_${model}_${tokens}_$prec.jsonl" 2>&1
        echo "probe $pt rc=$?" | tee -a "$L/probe.log"
    done ;;
prof)
    for pt in ${PROF:-2.7B:256}; do
        IFS=: read -r model ctx prec graphs <<<"$pt"
        prec=${prec:-bf16}
        graphs=${graphs:-false}
        attn=naive
        case $prec in bf16 | fp16) attn=naive_fused ;; esac
        name="${model}_${ctx}_${prec}_g${graphs}"
        echo "{\"kind\":\"profile\",\"model\":\"$model\",\"context_length\":[$ctx],\"batch_size\":4,\
\"precision\":\"$prec\",\"mode\":\"train_step\",\"attention\":\"$attn\",\"graphs\":$graphs}" >"$L/spec_prof_$name.json"
        timeout "${PT:-120}" "$CG/lmperfd" run "$L/spec_prof_$name.json" >"$L/prof_$name.json" 2>"$L/prof_$name.err"
        echo "prof $pt rc=$?" | tee -a "$L/prof.log"
        python3 "$HERE/profile_summary.py" "$L/prof_$name.json" | tee "$L/prof_$name.txt"
    done ;;
ab)
    mkdir -p /tmp/ab_before && xz -dc "${AB_BASE:-.carry/lmperfd_base.xz}" >/tmp/ab_before/lmperfd &&
        chmod +x /tmp/ab_before/lmperfd &&
        CHECKS=0 BUDGET_S=${B:-300} bash "$HERE/engine_ab.sh" "$CG" "$L/ab${AB_TAG:-}" before=/tmp/ab_before
    if [ -n "${TORCH_SIZES:-}" ]; then
        timeout "${TT:-120}" python3 "$CG/torch_lm.py" --sizes "$TORCH_SIZES" --ctx "${TORCH_CTX:-128,256,512,1024}" \
            --precs fp32 ${TORCH_TF32---tf32} --warmup 2 --steps 5 --out "$L/torch_ab.jsonl" >"$L/torch_ab.log" 2>&1
        echo "torch rc=$?"
        cat "$L/torch_ab.jsonl"
    fi ;;
allreduce)
    bash "$HERE/allreduce.sh" "$CG/lmperfd" .carry/torch_allreduce.py "$L/allreduce" ;;
*)
    echo "device_go: unknown part '$WHICH'" >&2
    exit 2 ;;
esac
rc=$?
tar czf "$OUT/logs_$WHICH.tgz" -C /tmp logs
exit $rc
