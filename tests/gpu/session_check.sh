#!/bin/bash
# The whole tree's GPU checks in one device call, for the last call of a
# session: run_all.sh's correctness parts (every op cuda vs cpu, graphs =
# eager, the model vs PyTorch), flash_bench.sh (test_flash, flash_vs_torch,
# the attention job beside PyTorch SDPA at seq ≥ 4096), then
# profile_gate.sh (profile jobs with gated phase timing). The device returns
# at most 8 files, so every log is packed into OUT/session.tar.gz; a summary
# goes to stdout.
# usage: tests/gpu/session_check.sh CARRY FLASH_CARRY OUT
#   CARRY        filled by tests/gpu/carry.sh (lmperfd, test binaries, libs)
#   FLASH_CARRY  filled by tests/gpu/flash_carry.sh (bins.tar.xz, torch_attn.py)
# env: RUN_ALL=1 FLASH=1 PROFILE=1 (0 skips a part); DAEMON=1 adds run_all.sh's
#      benchmark-job check
set -u
CARRY=$(cd "$1" && pwd)
FLASH_CARRY=$(cd "$2" && pwd)
OUT=$3
HERE=$(cd "$(dirname "$0")" && pwd)
RUN_ALL=${RUN_ALL:-1} FLASH=${FLASH:-1} PROFILE=${PROFILE:-1}
LOGS=$(mktemp -d)
RC=0
start=$(date +%s)
say() { echo "[$(($(date +%s) - start))s] $*"; }
if [ "$RUN_ALL" = 1 ]; then
    OUT=$LOGS/run_all CARRY=$CARRY DAEMON=${DAEMON:-0} BENCH=0 TORCH=0 timeout 300 bash "$HERE/run_all.sh" \
        >"$LOGS/run_all.txt" 2>&1
    r=$?; say "run_all (OPS GRAPH MODEL) rc=$r"; [ $r = 0 ] || RC=1
    grep -E 'rc=|FAIL' "$LOGS/run_all/env.txt"
fi
if [ "$FLASH" = 1 ]; then
    SEQS=${SEQS:-4096,8192,16384} NCU=0 timeout 420 bash "$HERE/flash_bench.sh" "$FLASH_CARRY" "$LOGS/flash" \
        >"$LOGS/flash.txt" 2>&1
    r=$?; say "flash_bench rc=$r"; [ $r = 0 ] || RC=1
    grep -E '^\[|FAIL' "$LOGS/flash.txt" | head -30
    [ -f "$LOGS/flash/table.md" ] && cat "$LOGS/flash/table.md"
fi
if [ "$PROFILE" = 1 ] && [ -f "$HERE/profile_gate.sh" ]; then
    timeout 240 bash "$HERE/profile_gate.sh" "$CARRY" "$LOGS/profile" >"$LOGS/profile.txt" 2>&1
    r=$?; say "profile_gate rc=$r"; [ $r = 0 ] || RC=1
    tail -40 "$LOGS/profile.txt"
fi
mkdir -p "$OUT"
tar czf "$OUT/session.tar.gz" -C "$LOGS" .
say "done rc=$RC"
exit $RC
