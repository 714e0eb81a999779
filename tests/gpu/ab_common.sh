# The start shared by the one-call A/B scripts of the flash kernels
# (ffwd_fast.sh, fwd128_ab.sh, fwd7_ab.sh). Sourced after `set -u` with CARRY
# (a folder holding bins.tar.xz, COMMIT, torch_attn.py: flash_carry.sh's
# layout, one folder per build inside the archive) and OUT set. It unpacks
# the builds into X, finds ROOT (the checkout holding tests/gpu; the working
# directory when the script runs from a copy), puts X/lib on the library
# path, makes OUT/l for the logs, and defines:
#   log MSG      MSG after the seconds since the start, also into OUT/run.log
#   lim N        N seconds, or what is left before DEADLINE (seconds after
#                the start; default AB_DEADLINE, else 270) less 5, whichever
#                is smaller; 1 when nothing is left
#   ab_env       date, commit, GPU and torch into OUT/l/env.txt, and printed
#   smi_start    nvidia-smi's SM clock, power, temperature and throttle
#                reasons every 250 ms into OUT/l/smi.log (its pid in smi)
#   smi_since L  the samples after line L of smi.log: "SM MHz min M mean A,
#                W max P, reasons R" (R: the reasons other than idle / none)
#   bench_args   POINTS ("dtype:B:H:T:d:causal ...") as test_flash bench
#                arguments
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[ -f "$ROOT/tests/gpu/flash_vs_torch.py" ] || ROOT=$(pwd)
mkdir -p "$OUT/l"
X=$(mktemp -d)
tar xJf "$CARRY/bins.tar.xz" -C "$X"
cp "$CARRY"/COMMIT "$CARRY"/torch_attn.py "$X/" 2>/dev/null
. "$ROOT/tests/gpu/device_env.sh"
device_env "$X/lib"
export PYTHONUNBUFFERED=1
start=$(date +%s)
log() { echo "[$(($(date +%s) - start))s] $*" | tee -a "$OUT/run.log"; }
lim() {
    local l=$(( ${DEADLINE:-${AB_DEADLINE:-270}} - ($(date +%s) - start) - 5 ))
    [ "$l" -lt 1 ] && l=1
    [ "$1" -lt "$l" ] && l=$1
    echo "$l"
}
ab_env() {
    {
        date -u +%Y-%m-%dT%H:%M:%SZ
        echo "commit: $(cat "$X/COMMIT" 2>/dev/null || echo unknown)"
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.sm,temperature.gpu,power.draw,power.limit --format=csv
        python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'
    } >"$OUT/l/env.txt" 2>&1
    cat "$OUT/l/env.txt"
}
smi_start() {
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
        --format=csv -lms 250 >"$OUT/l/smi.log" 2>&1 &
    smi=$!
}
smi_since() {
    tail -n +$(($1 + 1)) "$OUT/l/smi.log" | awk -F', ' '$2+0 > 0 {c = $2 + 0; p = $3 + 0; if (!n || c < cmin) cmin = c; s += c; if (p > pmax) pmax = p; if ($5 != "0x0000000000000000" && $5 != "0x0000000000000001") seen[$5] = 1; n++} END {for (x in seen) r = r " " x; printf "SM MHz min %d mean %d, W max %.0f, reasons%s", cmin, n ? s / n : 0, pmax, r ? r : " none"}'
}
bench_args() { for p in $POINTS; do echo "flash ${p//:/ }"; done; }
