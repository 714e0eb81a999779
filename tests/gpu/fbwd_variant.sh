#!/bin/bash
# A variant build of test_flash and flash_dump whose flash_wgmma_bwd.o (the wgmma flash
# backward) is compiled with extra flags, e.g. -DLMK_FLASH_WGMMA_BWD=1 (switch
# it on) or -DLMK_FLASH_WGMMA_BWD_D64_BM=64, next to an existing build: same
# objects and link line as BUILD, one object swapped (tests/gpu/ffwd_variant.sh
# does the same for the forward). For flash_bench.sh's VARIANTS: carry OUT_DIR
# with flash_carry.sh's EXTRA.
# usage: tests/gpu/fbwd_variant.sh BUILD_DIR OUT_DIR "FLAGS"   (after ninja)
set -eu
BUILD=$1
mkdir -p "$2"
OUT=$(cd "$2" && pwd)
FLAGS=$3
cd "$BUILD"
cc=$(ninja -t commands kernels/flash_wgmma_bwd.o | grep -F -- '-c ../kernels/cuda/flash_wgmma_bwd.cu' | tail -1)
eval "${cc/ -o kernels\/flash_wgmma_bwd.o/ -o $OUT/flash_wgmma_bwd.o} $FLAGS"
objs=$(ninja -t commands kernels/liblmperf_kernels.a | grep -F 'gcc-ar csrDT kernels/liblmperf_kernels.a' | tail -1 |
    sed 's/.*gcc-ar csrDT kernels\/liblmperf_kernels.a //; s/kernels\/flash_wgmma_bwd.o //')
rm -f "$OUT/libkernels.a"
gcc-ar csrD "$OUT/libkernels.a" "$OUT/flash_wgmma_bwd.o" $objs
for t in tests/attention/test_flash tests/gpu/flash_dump; do
    link=$(ninja -t commands "$t" | tail -1)
    link=${link/-Xlinker=kernels\/liblmperf_kernels.a/-Xlinker=$OUT/libkernels.a}
    eval "${link/ -o $t / -o $OUT/$(basename $t) }"
done
rm -f "$OUT/libkernels.a" "$OUT/flash_wgmma_bwd.o"
ls -la "$OUT"
