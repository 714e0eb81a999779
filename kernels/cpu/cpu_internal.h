/* Private to the cpu backend: its state and the GEMM entry point. */
#ifndef LMK_CPU_INTERNAL_H
#define LMK_CPU_INTERNAL_H

#include <string.h>

#include "../backend.h"
#include "../halfprec.h"

/* Element i of x of dtype dt (LMK_F32, LMK_BF16, LMK_F16) as float: exact. */
static inline float cpu_ld(const void *x, lmk_dtype dt, size_t i)
{
    if (dt == LMK_F32)
        return ((const float *)x)[i];
    uint16_t h = ((const uint16_t *)x)[i];
    return dt == LMK_BF16 ? lmk_bf16_to_float(h) : lmk_fp16_to_float(h);
}

/* Stores v into element i of x of dtype dt, rounded to nearest even. */
static inline void cpu_st(void *x, lmk_dtype dt, size_t i, float v)
{
    if (dt == LMK_F32) {
        ((float *)x)[i] = v;
    } else if (dt == LMK_BF16) {
        float r = lmk_round_value(v, LMK_ROUND_BF16);
        uint32_t u;
        memcpy(&u, &r, sizeof u);
        ((uint16_t *)x)[i] = (uint16_t)(u >> 16);
    } else {
        ((uint16_t *)x)[i] = lmk_fp16_from_double(v);
    }
}

/* dt is a dtype the elementwise ops take. */
static inline int cpu_dt_ok(lmk_dtype dt)
{
    return dt == LMK_F32 || dt == LMK_BF16 || dt == LMK_F16;
}

/* GEMM blocking: micro-tile MR×NR, cache blocks MB×KB (A) and KB×NB (B). */
enum { CPU_MR = 4, CPU_NR = 16, CPU_MB = 64, CPU_NB = 256, CPU_KB = 256 };

/* One thread's packing and accumulation buffers: backend-private, allocated
 * once by lmk_backend_cpu_create (about 384 KiB per thread), so a GEMM never
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
