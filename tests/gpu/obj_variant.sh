#!/bin/bash
# A variant lmperfd (and test_cuda_ops, test_graph_step, dump_model) next to an existing build: the named
# objects of the kernels library recompiled with extra flags (e.g.
# -DLMK_CUBLAS_WS_MIB=0), the rest and the link lines as BUILD has them. For
# A/B runs of engine knobs in one device call; tests/gpu/ffwd_variant.sh does
# the same for the flash objects.
# usage: tests/gpu/obj_variant.sh BUILD_DIR OUT_DIR "FLAGS" SOURCE...   (after ninja)
#   SOURCE: a kernels source as the build names it, e.g. cuda/gemm_cuda.cu, model.c; or one compiled alone by a
#           custom target (kernels/meson.build: cuda/attn_mix_wgmma.cu, whose object is kernels/attn_mix_wgmma.o)
set -eu
BUILD=$1
mkdir -p "$2"
OUT=$(cd "$2" && pwd)
FLAGS=$3
shift 3
cd "$BUILD"
lib=kernels/liblmperf_kernels.a
objs=$(ninja -t commands $lib | grep -F "gcc-ar csrDT $lib" | tail -1 | sed "s|.*gcc-ar csrDT $lib ||")
for src in "$@"; do
    obj=kernels/liblmperf_kernels.a.p/$(echo "$src" | tr / _).o
    case "$objs" in *"$obj"*) ;; *) obj=kernels/$(basename "$src" .cu).o ;; esac
    cc="$(ninja -t commands "$obj" | tail -1) " # a space after the last argument, for the matches below
    case "$cc" in *"-o $obj "*) ;; *) echo "no compile line for $obj" >&2; exit 1 ;; esac
    mkdir -p "$OUT/obj"
    new=$OUT/obj/$(basename "$obj")
    eval "${cc/ -o $obj / -o $new } $FLAGS"
    objs=${objs/$obj/$new}
done
rm -f "$OUT/libkernels.a"
gcc-ar csrD "$OUT/libkernels.a" $objs
for t in daemon/lmperfd tests/gpu/test_cuda_ops tests/gpu/test_graph_step tests/gpu/dump_model; do
    link=$(ninja -t commands "$t" | tail -1)
    link=${link/-Xlinker=$lib/-Xlinker=$OUT/libkernels.a}
    link=${link//$lib /$OUT/libkernels.a }
    eval "${link/ -o $t / -o $OUT/$(basename $t) }"
done
rm -rf "$OUT/libkernels.a" "$OUT/obj"
ls -la "$OUT"
