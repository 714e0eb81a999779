#!/bin/bash
# Fills a git-ignored carry folder (default .carry/ffwd) for
# tests/gpu/ffwd_bench.sh: bins.tar.xz holding one folder per build
# (test_flash, flash_dump, and lmperfd where DIR holds one at its top),
# named NAME=DIR pairs (DIR from ffwd_variant.sh or a build folder), the shared libraries the device image may lack, the
# commit, and torch_attn.py (its dtype table gains fp16, as flash_carry.sh).
# usage: tests/gpu/ffwd_carry.sh CARRY_DIR NAME=DIR...
set -eu
CARRY=$1
shift
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$CARRY" "$STAGE/lib"
rm -f "$CARRY/bins.tar.xz"
for nd in "$@"; do
    name=${nd%%=*} dir=${nd#*=}
    mkdir -p "$STAGE/$name"
    for b in test_flash flash_dump lmperfd tests/attention/test_flash tests/gpu/flash_dump; do
        if [ -f "$dir/$b" ]; then cp "$dir/$b" "$STAGE/$name/"; fi
    done
done
"$(dirname "$0")"/copy_libs.sh "$STAGE/lib" "$STAGE"/*/*
find "$STAGE" -type f -perm -u+x ! -name '*.so*' -exec strip {} +
tar cJf "$CARRY/bins.tar.xz" -C "$STAGE" .
sed 's/"bf16": torch.bfloat16}/"bf16": torch.bfloat16, "fp16": torch.float16}/' \
    /work/shared/anchors/torch_attn.py >"$CARRY/torch_attn.py"
git rev-parse --short HEAD >"$CARRY/COMMIT"
if ! git diff --quiet HEAD -- kernels/cuda/flash_wgmma.cu; then echo "+dirty flash_wgmma.cu" >>"$CARRY/COMMIT"; fi
du -sh "$CARRY"
