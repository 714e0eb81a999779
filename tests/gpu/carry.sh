#!/bin/bash
# Fills .carry/ (git-ignored) with what tests/gpu/run_all.sh needs on the
# device machine: the gpu test binaries from build-gpu, libgomp, the commit
# and the PyTorch peer script. Run from the repository root after
# `meson setup build-gpu && ninja -C build-gpu`.
set -eu
mkdir -p .carry/lib
cp build-gpu/tests/gpu/test_cuda_ops build-gpu/tests/gpu/bench_train_step .carry/
cp /usr/lib/x86_64-linux-gnu/libgomp.so.1 .carry/lib/
cp /work/shared/anchors/torch_lm.py .carry/
git rev-parse --short HEAD >.carry/COMMIT
if ! git diff --quiet HEAD -- kernels/cuda tests/gpu; then echo "+dirty" >>.carry/COMMIT; fi
du -sh .carry
