/* Private to the cpu backend: its state and the GEMM entry point. */
#ifndef LMK_CPU_INTERNAL_H
#define LMK_CPU_INTERNAL_H

#include "../backend.h"

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
int cpu_gemm_half(lmk_backend *b, const lmk_gemm *g, float *c, const void *a, int a_half,
                  const void *bm, int b_half);

#endif
