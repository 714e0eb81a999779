#!/usr/bin/env bash
# GPU test of the allreduce job: the nccl backend on all GPUs of the machine,
# 1 MiB .. 1 GiB, beside the PyTorch peer (torch_allreduce.py, same sizes in
# MiB, same machine, same NCCL library), then the mpi CPU baseline beside
# gloo when mpirun exists, then one job through the daemon, then nccl_launch
# "processes" beside "threads" (allreduce_processes.py). Prints a markdown table with the ratios and leaves
# the raw JSON in OUTDIR. Exit 77 without a GPU, 1 when a point failed.
#
# usage: tests/gpu/allreduce.sh [LMPERFD] [TORCH_ALLREDUCE_PY] [OUTDIR]
#   LMPERFD defaults to build/daemon/lmperfd; libraries it cannot find on
#   this machine are looked up in $(dirname LMPERFD)/lib last (carry them
#   there), NCCL and CUDA in the machine's PyTorch (the same NCCL as torch).
set -uo pipefail
# NVLink multicast stays off on shared machines (it can take the host's GPUs down)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
LMPERFD=${1:-build/daemon/lmperfd}
TORCH_PY=${2:-}
OUTDIR=${3:-/tmp/lmperf-allreduce-gpu}
mkdir -p "$OUTDIR"
here=$(cd "$(dirname "$0")" && pwd)

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${ngpu:-0}" -lt 1 ]; then echo "skip: no GPU"; exit 77; fi
nvidia-smi -L
nvidia-smi topo -m 2>/dev/null | head -$((ngpu + 2))

# NCCL/CUDA from the machine's python packages (torch's own), then the carried libs
pylibs=$(python3 -c 'import glob, os, nvidia
print(":".join(sorted({d for p in nvidia.__path__ for d in glob.glob(os.path.join(p, "*", "lib"))})))' 2>/dev/null)
export LMPERF_LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64:${pylibs}:$(cd "$(dirname "$LMPERFD")" && pwd)/lib"
lmperfd() { LD_LIBRARY_PATH="$LMPERF_LD_LIBRARY_PATH" "$LMPERFD" "$@"; }
if LD_LIBRARY_PATH="$LMPERF_LD_LIBRARY_PATH" ldd "$LMPERFD" | grep 'not found'; then
  echo "lmperfd: missing libraries (above)"; exit 1
fi
LD_LIBRARY_PATH="$LMPERF_LD_LIBRARY_PATH" ldd "$LMPERFD" | grep -E 'nccl|cudart|libmpi\.' 

worlds=$( (echo 2; echo "$ngpu") | sort -nu | awk -v n="$ngpu" '$1 <= n' | paste -sd, )
cat > "$OUTDIR/nccl.json" <<SPEC
{"kind": "allreduce", "backend": "nccl", "sizes": ["1MiB", "10MiB", "100MiB", "1GiB"],
 "world_sizes": [$worlds], "warmup": 5, "iterations": 20, "label": "gpu test: nccl vs torch"}
SPEC
status=0
echo "== lmperf nccl (1st pass)"
lmperfd run "$OUTDIR/nccl.json" > "$OUTDIR/lmperf_nccl_1.json" 2> "$OUTDIR/lmperf_nccl_1.log" || status=1
tail -3 "$OUTDIR/lmperf_nccl_1.log"
if [ -n "$TORCH_PY" ]; then
  echo "== torch_allreduce.py"
  rm -f "$OUTDIR/torch.jsonl"
  PYTHONUNBUFFERED=1 python3 "$TORCH_PY" "$OUTDIR/torch.jsonl" > "$OUTDIR/torch.log" 2>&1 || { tail -20 "$OUTDIR/torch.log"; status=1; }
fi
echo "== lmperf nccl (2nd pass)"
lmperfd run "$OUTDIR/nccl.json" > "$OUTDIR/lmperf_nccl_2.json" 2> "$OUTDIR/lmperf_nccl_2.log" || status=1
if command -v mpirun > /dev/null; then
  echo "== lmperf mpi (CPU baseline)"
  echo '{"kind": "allreduce", "backend": "mpi", "sizes": ["1MiB", "10MiB", "100MiB"], "world_sizes": ['"$worlds"'], "warmup": 5, "iterations": 10}' > "$OUTDIR/mpi.json"
  lmperfd run "$OUTDIR/mpi.json" > "$OUTDIR/lmperf_mpi.json" 2> "$OUTDIR/lmperf_mpi.log" || status=1
else
  echo "== no mpirun on this machine: mpi baseline not run"
fi
echo "== the same job through the daemon (HTTP API, scheduler reserving $ngpu GPUs)"
LD_LIBRARY_PATH="$LMPERF_LD_LIBRARY_PATH" timeout 300 python3 "$here/allreduce_daemon.py" "$LMPERFD" "$OUTDIR" nccl "$ngpu" || status=1
python3 "$here/allreduce_compare.py" "$OUTDIR" || status=1
if command -v mpirun > /dev/null; then
  echo "== nccl_launch processes beside threads (allreduce_processes.py)"
  LD_LIBRARY_PATH="$LMPERF_LD_LIBRARY_PATH" timeout 500 python3 "$here/allreduce_processes.py" "$LMPERFD" \
    "$OUTDIR/processes" || status=1
fi
exit $status
