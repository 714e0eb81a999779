#!/bin/bash
# A variant build of test_flash, flash_dump and lmperfd next to an existing
# build (BUILD) with flash_f32tc.o compiled from SRC (default: this tree's
# kernels/cuda/flash_f32tc.cu) with extra FLAGS, and optionally flash_attn.cu's
# object replaced by a prebuilt one (FA_OBJ): tests/gpu/ffwd_variant.sh with
# that object.
# usage: [SRC=flash_f32tc.cu] [FA_OBJ=cuda_flash_attn.cu.o] tests/gpu/f32tc_variant.sh BUILD OUT_DIR "FLAGS"
SRC=${SRC:-$(dirname "$0")/../../kernels/cuda/flash_f32tc.cu} OBJ=flash_f32tc exec "$(dirname "$0")"/ffwd_variant.sh "$@"
