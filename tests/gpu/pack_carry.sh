#!/bin/bash
# Packs everything the device scripts need into ONE git-ignored archive,
# .carry/g.tar.xz (≈ 58 MB, under the device's 64 MiB carry): carry.sh's
# folder as cg/ (stripped binaries, shared libraries, torch_lm.py, COMMIT)
# and flash_carry.sh's as fl/, plus .carry/torch_allreduce.py. Then pass
# carry [".carry"] and run tests/gpu/device_go.sh WHICH on the device.
# Run from the repository root after ninja (≈ 1.5 min on 2 cores).
# usage: tests/gpu/pack_carry.sh [BUILD_DIR]
# env: FLASH_CARRY=0  leave fl/ empty
#      VARIANT_DIR    a tests/gpu/obj_variant.sh output: its lmperfd, test_cuda_ops, test_graph_step and
#                     dump_model take the place of BUILD's in cg/ (so every check runs on the variant), and
#                     BUILD's lmperfd goes to .carry/lmperfd_base.xz (device_go.sh ab: variant against it)
set -eu
BUILD=${1:-build}
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
tests/gpu/carry.sh "$BUILD" "$STAGE/cg" >/dev/null
if [ "${FLASH_CARRY:-1}" = 1 ]; then
    tests/gpu/flash_carry.sh "$BUILD" "$STAGE/fl" >/dev/null
else
    mkdir -p "$STAGE/fl" # FLASH_CARRY=0: no flash binaries (room for another file; run checks with FLASH=0)
fi
mkdir -p .carry
if [ -n "${VARIANT_DIR:-}" ]; then
    strip -o "$STAGE/lmperfd_base" "$STAGE/cg/lmperfd"
    xz -T2 -6 -c "$STAGE/lmperfd_base" >.carry/lmperfd_base.xz
    for b in lmperfd test_cuda_ops test_graph_step dump_model; do
        cp "$VARIANT_DIR/$b" "$STAGE/cg/$b"
    done
    echo "variant: $VARIANT_DIR" >>"$STAGE/cg/COMMIT"
fi
find "$STAGE/cg" -maxdepth 1 -type f -perm -u+x -exec strip {} +
tar cJf .carry/g.tar.xz -C "$STAGE" cg fl
cp /work/shared/anchors/torch_allreduce.py .carry/ 2>/dev/null || echo "pack_carry: no torch_allreduce.py (../shared/anchors)" >&2
ls -l .carry/g.tar.xz
