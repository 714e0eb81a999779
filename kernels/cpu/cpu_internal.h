/* Private to the cpu backend: its state and the GEMM entry point. */
#ifndef LMK_CPU_INTERNAL_H
#define LMK_CPU_INTERNAL_H

#include <string.h>

#include "../backend.h"
#include "../halfprec.h"
#include "../round.h"

/* A hot loop's function built twice, for AVX2/FMA (x86-64-v3) and for
 * baseline x86-64; the loader picks (ifunc). An OpenMP loop's body must call
 * such a function: the outlined body itself is not cloned. Floating-point
 * contraction stays off (ISO C), so both clones compute the same values
 * unless a function asks otherwise (the GEMM micro-kernel). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CPU_CLONES
#endif
#define CPU_INLINE static inline __attribute__((always_inline))

/* Element i of x of dtype dt (LMK_F32, LMK_BF16, LMK_F16) as float: exact. */
static inline float cpu_ld(const void *x, lmk_dtype dt, size_t i)
{
    if (dt == LMK_F32)
        return ((const float *)x)[i];
    uint16_t h = ((const uint16_t *)x)[i];
    return dt == LMK_BF16 ? lmk_bf16_bits_to_float(h) : lmk_fp16_bits_to_float(h);
}

/* x rounded to r (lmk_round_value, inlined). */
static inline float cpu_round(float x, lmk_round r)
{
    switch (r) {
    case LMK_ROUND_TF32: return lmk_round_drop_bits(x, 13);
    case LMK_ROUND_BF16: return lmk_round_drop_bits(x, 16);
    case LMK_ROUND_FP16: return lmk_round_fp16f(x);
    case LMK_ROUND_NONE: break;
    }
    return x;
}

/* The raw bits of x rounded to nearest even in format fmt (LMK_ROUND_BF16:
 * the upper half of the rounded float; otherwise fp16). */
static inline uint16_t cpu_half_bits(float x, lmk_round fmt)
{
    if (fmt == LMK_ROUND_BF16)
        return (uint16_t)(lmk_bits_of(lmk_round_drop_bits(x, 16)) >> 16);
    return lmk_fp16_bits_from_float(x);
}

/* Stores v into element i of x of dtype dt, rounded to nearest even. */
static inline void cpu_st(void *x, lmk_dtype dt, size_t i, float v)
{
    if (dt == LMK_F32)
        ((float *)x)[i] = v;
    else
        ((uint16_t *)x)[i] = cpu_half_bits(v, dt == LMK_BF16 ? LMK_ROUND_BF16 : LMK_ROUND_FP16);
}

/* dt is a dtype the elementwise ops take. */
static inline int cpu_dt_ok(lmk_dtype dt)
{
    return dt == LMK_F32 || dt == LMK_BF16 || dt == LMK_F16;
}

/* GEMM blocking: micro-tile MR×NR, cache blocks MB×KB (A) and KB×NB (B);
 * MB a multiple of MR and NB of NR. A (KB, MR) panel of A (3 KiB) stays in
 * L1 while the B block (128 KiB) streams from L2; each B block is packed
 * once per MB rows of C (blocks measured on Zen 1: kernels/PERF.md). */
enum { CPU_MR = 6, CPU_NR = 16, CPU_MB = 192, CPU_NB = 256, CPU_KB = 128 };

/* One thread's packing and accumulation buffers: backend-private, allocated
 * once by lmk_backend_cpu_create (416 KiB per thread), so a GEMM never
 * allocates; not counted by the tracked allocator. */
typedef struct cpu_scratch {
    float *apack; /* (MB, KB) in MR-row panels */
    float *bpack; /* (KB, NB) in NR-column panels */
    float *cacc;  /* (MB, NB) */
} cpu_scratch;

typedef struct cpu_state {
    int threads;
    cpu_scratch *scratch; /* (threads) */
} cpu_state;

int cpu_gemm(lmk_backend *b, const lmk_gemm *g, float *c, const float *a, const float *bm);
int cpu_gemm_half(lmk_backend *b, const lmk_gemm *g, void *c, const void *a, int a_half,
                  const void *bm, int b_half);

#endif
