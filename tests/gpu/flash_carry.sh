#!/bin/bash
# Fills a git-ignored carry folder (default .carry/fl) with what
# tests/gpu/flash_bench.sh needs on the device machine: bins.tar.xz holding
# lmperfd, test_flash, flash_dump from a build folder (stripped), the shared
# libraries the device image may lack (libmicrohttpd, libgomp, jansson,
# sqlite, MPI, CUPTI: all but the C runtime's and CUDA's) and any extra
# folders given in EXTRA (variant builds, e.g. EXTRA=/tmp/v1); the commit;
# the PyTorch peer torch_attn.py (its dtype table gains fp16; nothing else
# changes). Each binary holds ~9 MB of device code, hence the archive.
# Run from the repository root after ninja.
# usage: [EXTRA="dir..."] tests/gpu/flash_carry.sh [BUILD_DIR [CARRY_DIR]]
set -eu
BUILD=${1:-build-fl}
CARRY=${2:-.carry/fl}
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$CARRY" "$STAGE/lib"
rm -f "$CARRY/bins.tar.xz"
cp "$BUILD"/daemon/lmperfd "$BUILD"/tests/attention/test_flash "$BUILD"/tests/gpu/flash_dump "$STAGE/"
for e in ${EXTRA:-}; do cp -r "$e" "$STAGE/"; done
"$(dirname "$0")"/copy_libs.sh "$STAGE/lib" "$STAGE"/lmperfd "$STAGE"/test_flash
find "$STAGE" -type f -perm -u+x ! -name '*.so*' -exec strip {} +
tar cJf "$CARRY/bins.tar.xz" -C "$STAGE" .
sed 's/"bf16": torch.bfloat16}/"bf16": torch.bfloat16, "fp16": torch.float16}/' \
    /work/shared/anchors/torch_attn.py >"$CARRY/torch_attn.py"
git rev-parse --short HEAD >"$CARRY/COMMIT"
if ! git diff --quiet HEAD -- kernels/cuda/flash_attn.cu tests/gpu; then echo "+dirty" >>"$CARRY/COMMIT"; fi
du -sh "$CARRY"
