#!/bin/bash
# A variant build of test_flash, flash_dump (and lmperfd, where BUILD has one) whose flash_wgmma.o (the wgmma
# forward; OBJ=flash_wgmma_bwd: the wgmma backward's object instead, as tests/gpu/fbwd_variant.sh does) is
# compiled with extra flags, e.g. -DLMK_FLASH_WGMMA=0 (the
# mma.sync forward) or -DLMK_FLASH_WGMMA_PINGPONG=0, next to an existing
# build: same objects and link lines as BUILD, one object swapped. For A/B
# timing in one device call (tests/gpu/ffwd_bench.sh runs them).
# usage: [SRC=file.cu] tests/gpu/ffwd_variant.sh BUILD_DIR OUT_DIR "FLAGS"   (after ninja)
# SRC: another version of OBJ's source (flash_wgmma.cu) (e.g. a copy of an earlier commit's)
# compiled in its place, its includes found beside it, then through BUILD's kernels/cuda.
# FA_OBJ: a prebuilt object put in place of flash_attn.cu's (e.g. compiled from a tree whose
# dispatch calls a changed OBJ header), so that a change to both files is timed without
# rebuilding BUILD (tests/gpu/f32tc_variant.sh).
set -eu
BUILD=$1
mkdir -p "$2"
OUT=$(cd "$2" && pwd)
FLAGS=$3
OBJ=${OBJ:-flash_wgmma}
if [ -n "${SRC:-}" ]; then SRC=$(cd "$(dirname "$SRC")" && pwd)/$(basename "$SRC"); fi
FA=kernels/liblmperf_kernels.a.p/cuda_flash_attn.cu.o
if [ -n "${FA_OBJ:-}" ]; then FA_OBJ=$(cd "$(dirname "$FA_OBJ")" && pwd)/$(basename "$FA_OBJ"); fi
cd "$BUILD"
cc=$(ninja -t commands kernels/$OBJ.o | grep -F -- "-c ../kernels/cuda/$OBJ.cu" | tail -1)
if [ -n "${SRC:-}" ]; then
    cc="${cc/ -c ..\/kernels\/cuda\/$OBJ.cu/ -I$(dirname "$SRC") -I../kernels/cuda -c $SRC}"
fi
eval "${cc/ -o kernels\/$OBJ.o/ -o $OUT/$OBJ.o} $FLAGS"
objs=$(ninja -t commands kernels/liblmperf_kernels.a | grep -F 'gcc-ar csrDT kernels/liblmperf_kernels.a' | tail -1 |
    sed "s/.*gcc-ar csrDT kernels\/liblmperf_kernels.a //; s/kernels\/$OBJ.o //")
if [ -n "${FA_OBJ:-}" ]; then objs=${objs/$FA/$FA_OBJ}; fi
rm -f "$OUT/libkernels.a"
gcc-ar csrD "$OUT/libkernels.a" "$OUT/$OBJ.o" $objs
for t in tests/attention/test_flash tests/gpu/flash_dump daemon/lmperfd; do
    [ "$t" != daemon/lmperfd ] || [ -f daemon/lmperfd ] || continue
    link=$(ninja -t commands "$t" | tail -1)
    link=${link/-Xlinker=kernels\/liblmperf_kernels.a/-Xlinker=$OUT/libkernels.a}
    eval "${link/ -o $t / -o $OUT/$(basename $t) }"
done
rm -f "$OUT/libkernels.a" "$OUT/$OBJ.o"
ls -la "$OUT"
