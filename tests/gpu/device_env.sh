# Sourced by the tests/gpu scripts that run on the lent GPU machine:
# device_env LIBDIR puts CUDA's libraries, the device image's PyTorch wheels'
# NVIDIA libraries (cuBLAS, NCCL, CUPTI, ...) and LIBDIR (the carried
# libraries the image lacks: libmicrohttpd, jansson, ...) on the library path,
# and keeps NVLink multicast off for NCCL (the lent machines' KINDS.md).
device_env() {
    local pylib
    pylib=$(python3 -c 'import glob, os, nvidia
print(":".join(sorted({d for p in nvidia.__path__ for d in glob.glob(os.path.join(p, "*", "lib"))})))' 2>/dev/null || true)
    export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/lib${pylib:+:$pylib}:$1:${LD_LIBRARY_PATH:-}"
    export NCCL_NVLS_ENABLE=0
}
