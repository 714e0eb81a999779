#!/bin/bash
# Copies into DEST every shared library the given binaries load that the
# device image may lack: all but the C runtime's and CUDA's own (libcuda,
# cuBLAS, cudart, NCCL come from the image and its PyTorch packages).
# usage: [ALSO_SKIP='libcupti|…'] tests/gpu/copy_libs.sh DEST BIN...
set -eu
DEST=$1
shift
SKIP='libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux[^/]*|libcuda|libcublas[^/]*|libcudart|libnccl'
[ -n "${ALSO_SKIP:-}" ] && SKIP="$SKIP|$ALSO_SKIP"
mkdir -p "$DEST"
for bin in "$@"; do
    ldd "$bin" | awk '/=> \//{print $3}'
done | sort -u | grep -vE "/($SKIP)\.so" | xargs -r -I{} cp -L {} "$DEST/"
