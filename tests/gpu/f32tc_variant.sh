#!/bin/bash
# A variant build of test_flash, flash_dump and lmperfd next to an existing
# build (BUILD) with flash_f32tc.o compiled from SRC (default: this tree's
# kernels/cuda/flash_f32tc.cu) with extra FLAGS, and optionally flash_attn.cu's
# object replaced by a prebuilt one (FA_OBJ: e.g. compiled from a tree whose
# fp32 dispatch calls a changed flash_f32tc.h), so that a change to both files
# can be timed without rebuilding BUILD. Same link lines as BUILD, the
# objects swapped (as tests/gpu/ffwd_variant.sh does for one object).
# usage: [SRC=flash_f32tc.cu] [FA_OBJ=cuda_flash_attn.cu.o] tests/gpu/f32tc_variant.sh BUILD OUT_DIR "FLAGS"
set -eu
BUILD=$1
mkdir -p "$2"
OUT=$(cd "$2" && pwd)
FLAGS=$3
SRC=${SRC:-$(cd "$(dirname "$0")/../../kernels/cuda" && pwd)/flash_f32tc.cu}
SRC=$(cd "$(dirname "$SRC")" && pwd)/$(basename "$SRC")
FA=kernels/liblmperf_kernels.a.p/cuda_flash_attn.cu.o
if [ -n "${FA_OBJ:-}" ]; then FA_OBJ=$(cd "$(dirname "$FA_OBJ")" && pwd)/$(basename "$FA_OBJ"); fi
cd "$BUILD"
cc=$(ninja -t commands kernels/flash_f32tc.o | grep -F -- "-c ../kernels/cuda/flash_f32tc.cu" | tail -1)
cc="${cc/ -c ..\/kernels\/cuda\/flash_f32tc.cu/ -I$(dirname "$SRC") -c $SRC}"
eval "${cc/ -o kernels\/flash_f32tc.o/ -o $OUT/flash_f32tc.o} $FLAGS"
objs=$(ninja -t commands kernels/liblmperf_kernels.a | grep -F 'gcc-ar csrDT kernels/liblmperf_kernels.a' | tail -1 |
    sed "s/.*gcc-ar csrDT kernels\/liblmperf_kernels.a //; s/kernels\/flash_f32tc.o //")
if [ -n "${FA_OBJ:-}" ]; then objs=${objs/$FA/$FA_OBJ}; fi
rm -f "$OUT/libkernels.a"
gcc-ar csrD "$OUT/libkernels.a" "$OUT/flash_f32tc.o" $objs
for t in tests/attention/test_flash tests/gpu/flash_dump daemon/lmperfd; do
    link=$(ninja -t commands "$t" | tail -1)
    link=${link/-Xlinker=kernels\/liblmperf_kernels.a/-Xlinker=$OUT/libkernels.a}
    eval "${link/ -o $t / -o $OUT/$(basename $t) }"
done
rm -f "$OUT/libkernels.a" "$OUT/flash_f32tc.o"
ls -la "$OUT"
