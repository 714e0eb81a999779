#!/bin/bash
# A variant build of test_flash and flash_dump (and lmperfd) whose
# flash_wgmma_bwd.o (the wgmma flash backward) is compiled with extra flags,
# e.g. -DLMK_FLASH_WGMMA_BWD=0 (the mma.sync single pass) or
# -DLMK_FLASH_WGMMA_BWD_D64_BM=64: tests/gpu/ffwd_variant.sh with that object
# swapped. For flash_bench.sh's VARIANTS: carry OUT_DIR with flash_carry.sh's
# EXTRA.
# usage: tests/gpu/fbwd_variant.sh BUILD_DIR OUT_DIR "FLAGS"   (after ninja)
OBJ=flash_wgmma_bwd exec "$(dirname "$0")"/ffwd_variant.sh "$@"
