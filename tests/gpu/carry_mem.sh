#!/bin/bash
# Fills a git-ignored carry folder (default .carry/mem) with what
# tests/gpu/memory_gpu.sh needs on the device machine: lmperfd and the two
# gpu test binaries from a build folder, the shared libraries the device
# image lacks (as tests/gpu/carry.sh; CUPTI, cuBLAS, NCCL come from the
# image's PyTorch packages), the PyTorch peer script, the commit;
# binaries stripped (the carry must stay under 40 MiB).
# usage: tests/gpu/carry_mem.sh [BUILD_DIR [CARRY_DIR]]   (from the repository root, after ninja)
set -eu
BUILD=${1:-build-mem}
CARRY=${2:-.carry/mem}
mkdir -p "$CARRY/lib"
cp "$BUILD"/daemon/lmperfd "$BUILD"/tests/gpu/test_graph_step "$BUILD"/tests/gpu/test_model_flash "$CARRY/"
ALSO_SKIP=libcupti "$(dirname "$0")"/copy_libs.sh "$CARRY/lib" "$CARRY"/lmperfd
strip -s "$CARRY"/lmperfd "$CARRY"/test_graph_step "$CARRY"/test_model_flash
cp /work/shared/anchors/torch_lm.py "$CARRY/"
git rev-parse --short HEAD >"$CARRY/COMMIT"
if ! git diff --quiet HEAD -- kernels daemon tests/gpu schema; then echo "+dirty" >>"$CARRY/COMMIT"; fi
du -sh "$CARRY"
