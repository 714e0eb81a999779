#!/usr/bin/env bash
# Builds the libFuzzer target fuzz_validator.c with clang (-fsanitize=fuzzer,
# address,undefined): the spec's reading and validation (api/jsonschema.c,
# api/errors.c, daemon/spec.c, daemon/jobkinds.c, the kinds' checks) compiled
# here with coverage, the rest linked from BUILD's own libraries; then runs it
# for RUNS inputs from the seed corpus (tests/fuzz/corpus: a valid spec of
# each kind) with a fixed seed. Exit 77 (skip) when clang or libFuzzer is not
# installed. Any finding is written to BUILD/tests/fuzz/validator-findings/.
#
# usage: run_fuzz_validator.sh SOURCE_ROOT BUILD [RUNS] [SEED]
set -euo pipefail
src=$1 build=$2 runs=${3:-150000} seed=${4:-1}
out=$build/tests/fuzz
mkdir -p "$out"
if ! command -v clang >/dev/null ||
   ! echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' |
     clang -x c -fsanitize=fuzzer - -o "$out/libfuzzer-probe" 2>/dev/null; then
  echo "clang with libFuzzer (-fsanitize=fuzzer) is not installed: skipped"
  exit 77
fi
rm -f "$out/libfuzzer-probe"
libs=("$build/daemon/liblmperf_daemon.a" "$build/kernels/liblmperf_kernels.a" "$build/schema/liblmperf_schema.a"
      "$build/api/liblmperf_api.a")
extra=()
if ar t "$build/kernels/liblmperf_kernels.a" | grep -q '\.cu\.o$'; then # built with CUDA
  extra+=(-L"${CUDA_HOME:-/usr/local/cuda}/lib64" -lcudart_static -lcublas -lcublasLt -lnccl -lcupti -lstdc++ -lrt)
fi
if ar t "$build/daemon/liblmperf_daemon.a" | grep -q allreduce_rank && pkg-config --exists ompi-c; then
  read -ra mpi <<<"$(pkg-config --libs ompi-c)"
  extra+=("${mpi[@]}")
fi
# shellcheck disable=SC2046
clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -w \
  -I"$src/api" -I"$src/daemon" -I"$src/kernels" -I"$src/schema" -I"$build/schema" \
  "$src/tests/fuzz/fuzz_validator.c" "$src/api/errors.c" "$src/api/jsonschema.c" "$src/daemon/spec.c" \
  "$src/daemon/jobkinds.c" "$src"/daemon/kind_*.c "$src/daemon/model_point.c" \
  "${libs[@]}" $(pkg-config --libs jansson sqlite3 libmicrohttpd) "${extra[@]}" -fopenmp -lm -ldl -lpthread \
  -o "$out/fuzz_validator"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out/validator-findings"
"$out/fuzz_validator" -seed="$seed" -runs="$runs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$out/validator-findings/" -print_final_stats=1 "$work" "$src/tests/fuzz/corpus"
