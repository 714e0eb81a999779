#!/bin/bash
# The profile job's overhead by gpu_gated on the GPU (issue 6): runs
# tests/gpu/profile_check.py with graph replays at small@128 (5 traced steps)
# and large@512 (3) × fp32/bf16 × forward/train_step, benchmark jobs beside
# them. It asserts the 10% bound on the gated figure (each phase's replay
# held behind a blocking kernel until the host had launched it) per step and
# per phase at every point, and prints the wall-clock and plain CUDA-event
# overheads beside it. First, when CARRY has it, test_gate (tests/profile/
# test_gate.c): the gate holds the stream and times out cleanly.
# CARRY holds lmperfd and lib/ (tests/gpu/carry.sh), test_gate copied in from
# BUILD/tests/profile/test_gate;
# every log goes into ONE archive, OUT/profile_gate.tar.gz; stdout gets a
# short summary.
# usage: tests/gpu/profile_gate.sh CARRY OUT
# exit: 0 passed; 1 a check failed; 2 usage / missing binary; 3 the blocking
# kernel timed out (gated figures not measured); 124 the whole check ran
# past GATE_TIMEOUT seconds (default 200); 77 no GPU.
set -u
if [ $# -ne 2 ]; then
    echo "usage: $0 CARRY OUT" >&2
    exit 2
fi
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CARRY=$(cd "$1" && pwd) || exit 2
OUT=$2
LOGS="$OUT/profile_gate"
mkdir -p "$LOGS"
if [ ! -x "$CARRY/lmperfd" ]; then
    echo "profile_gate: no lmperfd in $CARRY (run tests/gpu/carry.sh BUILD $1 first)" >&2
    exit 2
fi
# CUPTI and cuBLAS of the CUDA install and the image's PyTorch packages, then the carried libraries
. "$(dirname "$0")/device_env.sh"
device_env "$CARRY/lib"
{
    echo "commit: $(cat "$CARRY/COMMIT" 2>/dev/null || echo unknown)"
    date -u
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
    ldd "$CARRY/lmperfd" | grep -E 'not found|cupti|cublas'
} >"$LOGS/env.txt" 2>&1
GATE_RC=skipped
if [ -x "$CARRY/test_gate" ]; then
    timeout 30 "$CARRY/test_gate" >"$LOGS/test_gate.log" 2>&1
    GATE_RC=$?
fi
timeout "${GATE_TIMEOUT:-200}" python3 "$ROOT/tests/gpu/profile_check.py" "$CARRY/lmperfd" "$LOGS" \
    --points small:128:5,large:512:3 --precisions fp32,bf16 --graphs on --oib "" >"$LOGS/profile_check.log" 2>&1
RC=$?
tar -czf "$OUT/profile_gate.tar.gz" -C "$OUT" profile_gate && rm -rf "$LOGS"
TAR="$OUT/profile_gate.tar.gz"
LOG() { tar -xzOf "$TAR" profile_gate/profile_check.log; }
echo "== profile_gate: $(tar -xzOf "$TAR" profile_gate/env.txt | head -3 | tr '\n' ' ')"
echo "test_gate: rc $GATE_RC"
[ "$GATE_RC" != skipped ] && tar -xzOf "$TAR" profile_gate/test_gate.log | tail -6
# the run tables (the gated column beside the wall-clock and plain-event ones) and every failure
# (not the answers table: its rows quote kernel names in backticks)
LOG | grep -E '^(\||Per-phase|note:.*gated|profile_check:|no GPU)' | grep -vE '`|top kernel in forward|^(\|---){11}\|$' | cut -c1-330
LOG | grep -E '^FAIL' | head -25 | cut -c1-300
if [ $RC -eq 77 ]; then
    echo "profile_gate: skipped (no GPU)"
    exit 77
fi
if [ "$GATE_RC" != skipped ] && [ "$GATE_RC" != 0 ]; then
    echo "profile_gate: FAILED — test_gate (the blocking kernel itself) rc $GATE_RC"
    [ $RC -eq 0 ] && RC=1
fi
if LOG | grep -q 'GATE TIMEOUT'; then
    echo "profile_gate: FAILED — the blocking kernel timed out (1 s) before the host enqueued the replay behind it; gated figures not measured"
    exit 3
fi
if [ $RC -eq 124 ]; then
    echo "profile_gate: FAILED — ran past ${GATE_TIMEOUT:-200} s (logs so far in $TAR)"
    exit 124
fi
echo "profile_gate: $([ $RC -eq 0 ] && echo passed || echo "FAILED (rc $RC)") — logs in $TAR"
exit $RC
