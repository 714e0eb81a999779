#!/bin/bash
# Fills a git-ignored carry folder (default .carry/g) with what
# tests/gpu/run_all.sh, bench_grid.sh, memory_gpu.sh and profile_gate.sh
# need on the device machine: lmperfd and the gpu test binaries (test_gate
# and test_model_flash included) from a build folder, the shared libraries the
# device image may lack (all but the C runtime's and CUDA's: libgomp,
# libmicrohttpd, jansson, sqlite, MPI), the commit, the PyTorch peer script. Run from the repository root after ninja.
# usage: tests/gpu/carry.sh [BUILD_DIR [CARRY_DIR]]
set -eu
BUILD=${1:-build-g}
CARRY=${2:-.carry/g}
mkdir -p "$CARRY/lib"
cp "$BUILD"/tests/gpu/test_cuda_ops "$BUILD"/tests/gpu/bench_train_step "$BUILD"/tests/gpu/test_graph_step \
    "$BUILD"/tests/gpu/dump_model "$BUILD"/tests/gpu/gemm_probe "$BUILD"/tests/gpu/test_model_flash "$BUILD"/tests/profile/test_gate \
    "$BUILD"/daemon/lmperfd "$CARRY/"
# every shared library of lmperfd and the tests but the C runtime's and CUDA's own
# (NCCL and cuBLAS come from the device image's PyTorch packages)
"$(dirname "$0")"/copy_libs.sh "$CARRY/lib" "$CARRY"/lmperfd "$CARRY"/test_cuda_ops
cp /work/shared/anchors/torch_lm.py "$CARRY/"
git rev-parse --short HEAD >"$CARRY/COMMIT"
if ! git diff --quiet HEAD -- kernels daemon tests/gpu schema; then echo "+dirty" >>"$CARRY/COMMIT"; fi
du -sh "$CARRY"
