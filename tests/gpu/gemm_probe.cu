/* How fast can cuBLAS run the linear layers' GEMMs of one train step, and by
 * which algorithm? For each shape of a model's linear layers (forward
 * y = x·Wᵀ, backward dx = dy·W and dW = dyᵀ·x, as kernels/model.c issues
 * them), this times:
 *   default : cublasGemmEx, its own algorithm choice (what the engine runs);
 *   heur    : every cuBLASLt heuristic candidate (up to 64);
 *   search  : every cuBLASLt algorithm id × tile × stages × split-K {1,2,3,4}
 *             × CTA swizzle {0,1} that cublasLtMatmulAlgoCheck accepts.
 * and prints TFLOP/s of the default and of the best found, one JSON line per
 * shape. Precision: tf32 (CUBLAS_COMPUTE_32F_FAST_TF32), fp32 (pure FP32) or
 * bf16 (16-bit inputs, float32 output, FP32 accumulation).
 * Operands are row-major as the engine holds them: C (m, n) = op(A) · op(B),
 * passed to cuBLAS column-major with A and B swapped.
 * Under bf16, y and dx are written as bf16 (as the engine's linear outputs) and
 * dW as float32. The summary line adds the linear layers of a whole step:
 * num_layers × the block's six shapes × 3 + the head's three.
 * usage: gemm_probe MODEL TOKENS PREC [REPS]   MODEL: a preset of kernels/model.c
 *        (its d_model, d_ff, layers and vocab). Exit 77 without a GPU. */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" { /* the kernels library is C */
#include "model.h"
#include "status.h"
}

#define CHECK_CUDA(x)                                                                          \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)
#define CHECK_BLAS(x)                                                             \
    do {                                                                          \
        cublasStatus_t s_ = (x);                                                  \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                        \
            fprintf(stderr, "%s:%d %s: status %d\n", __FILE__, __LINE__, #x, s_); \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

typedef struct probe_shape {
    const char *name;
    int trans_a, trans_b, m, n, k;
} probe_shape;

typedef struct probe_ctx {
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    void *a, *b, *c, *workspace;
    size_t workspace_bytes;
    cudaDataType_t in_type;
    cublasComputeType_t compute;
    cudaDataType_t out_type; /* of y and dx; dW is always float32 */
    cudaEvent_t t0, t1;
    int reps;
} probe_ctx;

/* The cuBLASLt description of shape s (column-major, swapped). */
typedef struct lt_problem {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc; /* cuBLASLt's A (our B), B (our A), C */
} lt_problem;

/* dW (the product over tokens, trans_a) is float32; y and dx p->out_type. */
static cudaDataType_t c_type(const probe_ctx *p, const probe_shape *s)
{
    return s->trans_a ? CUDA_R_32F : p->out_type;
}

static void lt_problem_make(probe_ctx *p, const probe_shape *s, lt_problem *q)
{
    cublasOperation_t op_first = s->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  /* our B, (n, k) as cuBLAS sees it */
    cublasOperation_t op_second = s->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N; /* our A, (k, m) */
    CHECK_BLAS(cublasLtMatmulDescCreate(&q->desc, p->compute, CUDA_R_32F));
    CHECK_BLAS(cublasLtMatmulDescSetAttribute(q->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first));
    CHECK_BLAS(cublasLtMatmulDescSetAttribute(q->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second));
    /* stored shapes, column-major: our row-major B (k, n) is (n, k) ld n; transposed (n, k) is (k, n) ld k */
    int b_rows = s->trans_b ? s->k : s->n, b_cols = s->trans_b ? s->n : s->k;
    int a_rows = s->trans_a ? s->m : s->k, a_cols = s->trans_a ? s->k : s->m;
    CHECK_BLAS(cublasLtMatrixLayoutCreate(&q->la, p->in_type, b_rows, b_cols, b_rows));
    CHECK_BLAS(cublasLtMatrixLayoutCreate(&q->lb, p->in_type, a_rows, a_cols, a_rows));
    CHECK_BLAS(cublasLtMatrixLayoutCreate(&q->lc, c_type(p, s), s->n, s->m, s->n));
}

static void lt_problem_free(lt_problem *q)
{
    cublasLtMatrixLayoutDestroy(q->lc);
    cublasLtMatrixLayoutDestroy(q->lb);
    cublasLtMatrixLayoutDestroy(q->la);
    cublasLtMatmulDescDestroy(q->desc);
}

static cublasStatus_t run_default(probe_ctx *p, const probe_shape *s)
{
    const float one = 1.0f, zero = 0.0f;
    int ldb = s->trans_b ? s->k : s->n, lda = s->trans_a ? s->m : s->k;
    return cublasGemmEx(p->blas, s->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, s->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, s->n,
                        s->m, s->k, &one, p->b, p->in_type, ldb, p->a, p->in_type, lda, &zero, p->c, c_type(p, s),
                        s->n, p->compute, CUBLAS_GEMM_DEFAULT);
}

static cublasStatus_t run_lt(probe_ctx *p, const lt_problem *q, const cublasLtMatmulAlgo_t *algo)
{
    const float one = 1.0f, zero = 0.0f;
    return cublasLtMatmul(p->lt, q->desc, &one, p->b, q->la, p->a, q->lb, &zero, p->c, q->lc, p->c, q->lc, algo,
                          p->workspace, p->workspace_bytes, 0);
}

/* ms per run over p->reps runs after two warm-ups; < 0 when a run failed. */
static float time_default(probe_ctx *p, const probe_shape *s)
{
    for (int i = 0; i < 2; i++)
        if (run_default(p, s) != CUBLAS_STATUS_SUCCESS)
            return -1.0f;
    CHECK_CUDA(cudaEventRecord(p->t0, 0));
    for (int i = 0; i < p->reps; i++)
        run_default(p, s);
    CHECK_CUDA(cudaEventRecord(p->t1, 0));
    CHECK_CUDA(cudaEventSynchronize(p->t1));
    float ms = 0.0f;
    CHECK_CUDA(cudaEventElapsedTime(&ms, p->t0, p->t1));
    return ms / p->reps;
}

static float time_lt(probe_ctx *p, const lt_problem *q, const cublasLtMatmulAlgo_t *algo, int reps)
{
    for (int i = 0; i < 2; i++)
        if (run_lt(p, q, algo) != CUBLAS_STATUS_SUCCESS) {
            (void)cudaGetLastError();
            return -1.0f;
        }
    CHECK_CUDA(cudaEventRecord(p->t0, 0));
    for (int i = 0; i < reps; i++)
        run_lt(p, q, algo);
    CHECK_CUDA(cudaEventRecord(p->t1, 0));
    if (cudaEventSynchronize(p->t1) != cudaSuccess)
        return -1.0f;
    float ms = 0.0f;
    CHECK_CUDA(cudaEventElapsedTime(&ms, p->t0, p->t1));
    return ms / reps;
}

typedef struct algo_found {
    float ms;
    int id, tile, stages, split_k, swizzle;
} algo_found;

static void algo_describe(const cublasLtMatmulAlgo_t *a, algo_found *f)
{
    size_t w;
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_ID, &f->id, sizeof f->id, &w);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_TILE_ID, &f->tile, sizeof f->tile, &w);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &f->stages, sizeof f->stages, &w);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &f->split_k, sizeof f->split_k, &w);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &f->swizzle, sizeof f->swizzle, &w);
}

/* The best heuristic candidate (of up to 64). */
static algo_found best_heuristic(probe_ctx *p, const lt_problem *q, int *count)
{
    algo_found best;
    memset(&best, 0, sizeof best);
    best.ms = -1.0f;
    cublasLtMatmulPreference_t pref;
    CHECK_BLAS(cublasLtMatmulPreferenceCreate(&pref));
    CHECK_BLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &p->workspace_bytes, sizeof p->workspace_bytes));
    cublasLtMatmulHeuristicResult_t res[64];
    int n = 0;
    if (cublasLtMatmulAlgoGetHeuristic(p->lt, q->desc, q->la, q->lb, q->lc, q->lc, pref, 64, res, &n) !=
        CUBLAS_STATUS_SUCCESS)
        n = 0;
    for (int i = 0; i < n; i++) {
        float ms = time_lt(p, q, &res[i].algo, p->reps);
        if (ms > 0 && (best.ms < 0 || ms < best.ms)) {
            algo_describe(&res[i].algo, &best);
            best.ms = ms;
        }
    }
    cublasLtMatmulPreferenceDestroy(pref);
    *count = n;
    return best;
}

/* Every configuration cublasLtMatmulAlgoCheck accepts, timed with few
 * repetitions; the best five timed again with p->reps. */
static algo_found best_search(probe_ctx *p, const lt_problem *q, cudaDataType_t ct, int *tried)
{
    enum { MAX_IDS = 128, MAX_TILES = 128, MAX_STAGES = 64, KEEP = 5 };
    int ids[MAX_IDS], nids = 0;
    *tried = 0;
    cudaDataType_t it = p->in_type;
    if (cublasLtMatmulAlgoGetIds(p->lt, p->compute, CUDA_R_32F, it, it, ct, ct, MAX_IDS, ids,
                                 &nids) != CUBLAS_STATUS_SUCCESS)
        nids = 0;
    cublasLtMatmulAlgo_t keep[KEEP];
    float keep_ms[KEEP];
    int nkeep = 0;
    for (int i = 0; i < nids; i++) {
        cublasLtMatmulAlgo_t algo;
        if (cublasLtMatmulAlgoInit(p->lt, p->compute, CUDA_R_32F, it, it, ct, ct, ids[i], &algo) !=
            CUBLAS_STATUS_SUCCESS)
            continue;
        int tiles[MAX_TILES], stages[MAX_STAGES];
        size_t bytes = 0;
        int ntiles = 0, nstages = 0, splitk_ok = 0, swizzle_ok = 0;
        if (cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, tiles, sizeof tiles, &bytes) ==
            CUBLAS_STATUS_SUCCESS)
            ntiles = (int)(bytes / sizeof(int));
        if (cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS, stages, sizeof stages, &bytes) ==
            CUBLAS_STATUS_SUCCESS)
            nstages = (int)(bytes / sizeof(int));
        cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &splitk_ok, sizeof splitk_ok,
                                          &bytes);
        cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT, &swizzle_ok,
                                          sizeof swizzle_ok, &bytes);
        if (ntiles == 0) {
            tiles[0] = 0;
            ntiles = 1;
        }
        if (nstages == 0) {
            stages[0] = 0;
            nstages = 1;
        }
        for (int t = 0; t < ntiles && t < MAX_TILES; t++)
            for (int g = 0; g < nstages && g < MAX_STAGES; g++)
                for (int sk = 1; sk <= (splitk_ok ? 4 : 1); sk++)
                    for (int sw = 0; sw <= (swizzle_ok ? 1 : 0); sw++) {
                        cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tiles[t],
                                                             sizeof tiles[t]);
                        cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages[g],
                                                             sizeof stages[g]);
                        cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &sk, sizeof sk);
                        cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &sw,
                                                             sizeof sw);
                        cublasLtMatmulHeuristicResult_t check;
                        if (cublasLtMatmulAlgoCheck(p->lt, q->desc, q->la, q->lb, q->lc, q->lc, &algo, &check) !=
                                CUBLAS_STATUS_SUCCESS ||
                            check.workspaceSize > p->workspace_bytes)
                            continue;
                        ++*tried;
                        float ms = time_lt(p, q, &algo, 3);
                        if (ms <= 0)
                            continue;
                        int slot = nkeep < KEEP ? nkeep++ : -1;
                        if (slot < 0) {
                            int worst = 0;
                            for (int w = 1; w < KEEP; w++)
                                if (keep_ms[w] > keep_ms[worst])
                                    worst = w;
                            if (ms < keep_ms[worst])
                                slot = worst;
                        }
                        if (slot >= 0) {
                            keep[slot] = algo;
                            keep_ms[slot] = ms;
                        }
                    }
    }
    algo_found best;
    memset(&best, 0, sizeof best);
    best.ms = -1.0f;
    for (int i = 0; i < nkeep; i++) {
        float ms = time_lt(p, q, &keep[i], p->reps);
        if (ms > 0 && (best.ms < 0 || ms < best.ms)) {
            algo_describe(&keep[i], &best);
            best.ms = ms;
        }
    }
    return best;
}

static void fill(void *dst, size_t n, size_t elem_bytes)
{
    /* bytes 0..63: every element finite and small, in float32 and in bf16 */
    unsigned char *h = (unsigned char *)malloc(n * elem_bytes);
    for (size_t i = 0; i < n * elem_bytes; i++)
        h[i] = (unsigned char)((i * 2654435761u) >> 24) & 0x3f;
    CHECK_CUDA(cudaMemcpy(dst, h, n * elem_bytes, cudaMemcpyHostToDevice));
    free(h);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s MODEL TOKENS PREC [REPS]\n", argv[0]);
        return 2;
    }
    /* the cuBLAS types of each precision the probe takes */
    static const struct {
        const char *name;
        cudaDataType_t in_type, out_type;
        cublasComputeType_t compute;
        size_t elem_bytes;
    } precs[] = {
        {"tf32", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4},
        {"fp32", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 4},
        {"bf16", CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2},
    };
    const char *model = argv[1], *prec = argv[3];
    int tokens = atoi(argv[2]);
    lmk_model_config cfg;
    if (lmk_model_preset(model, &cfg) != LMK_OK) {
        fprintf(stderr, "MODEL: a preset name (small, medium, large, xl, 2.7B, ...)\n");
        return 2;
    }
    if (tokens <= 0) {
        fprintf(stderr, "TOKENS: a positive count (batch × context)\n");
        return 2;
    }
    size_t pi = 0;
    while (pi < sizeof precs / sizeof precs[0] && strcmp(prec, precs[pi].name))
        pi++;
    if (pi == sizeof precs / sizeof precs[0]) {
        fprintf(stderr, "PREC: tf32, fp32 or bf16\n");
        return 2;
    }
    const int d = cfg.d_model, dff = cfg.d_ff, layers = cfg.num_layers, vocab = cfg.vocab_size;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        fprintf(stderr, "no GPU\n");
        return 77;
    }
    probe_ctx p;
    memset(&p, 0, sizeof p);
    p.reps = argc > 4 ? atoi(argv[4]) : 20;
    p.in_type = precs[pi].in_type;
    p.out_type = precs[pi].out_type;
    p.compute = precs[pi].compute;
    const size_t elem = precs[pi].elem_bytes;
    /* the linear layers of one block (q/k/v merged, w1/w3 merged) and the LM head */
    const probe_shape shapes[] = {
        {"qkv fwd", 0, 1, tokens, 3 * d, d},     {"qkv dx", 0, 0, tokens, d, 3 * d},
        {"qkv dW", 1, 0, 3 * d, d, tokens},      {"o fwd", 0, 1, tokens, d, d},
        {"o dx", 0, 0, tokens, d, d},            {"o dW", 1, 0, d, d, tokens},
        {"w13 fwd", 0, 1, tokens, 2 * dff, d},   {"w13 dx", 0, 0, tokens, d, 2 * dff},
        {"w13 dW", 1, 0, 2 * dff, d, tokens},    {"w2 fwd", 0, 1, tokens, d, dff},
        {"w2 dx", 0, 0, tokens, dff, d},         {"w2 dW", 1, 0, d, dff, tokens},
        {"head fwd", 0, 1, tokens, vocab, d},    {"head dx", 0, 0, tokens, d, vocab},
        {"head dW", 1, 0, vocab, d, tokens},
    };
    const size_t nshapes = sizeof shapes / sizeof shapes[0];
    size_t max_elems = 0; /* the largest operand of any shape: A (m, k), B (k, n) or C (m, n) */
    for (size_t i = 0; i < nshapes; i++) {
        const probe_shape *s = &shapes[i];
        size_t sizes[3] = {(size_t)s->m * s->k, (size_t)s->k * s->n, (size_t)s->m * s->n};
        for (int j = 0; j < 3; j++)
            if (sizes[j] > max_elems)
                max_elems = sizes[j];
    }
    CHECK_CUDA(cudaMalloc(&p.a, max_elems * elem));
    CHECK_CUDA(cudaMalloc(&p.b, max_elems * elem));
    CHECK_CUDA(cudaMalloc(&p.c, max_elems * 4));
    p.workspace_bytes = 32u << 20;
    CHECK_CUDA(cudaMalloc(&p.workspace, p.workspace_bytes));
    fill(p.a, max_elems, elem);
    fill(p.b, max_elems, elem);
    CHECK_BLAS(cublasCreate(&p.blas));
    CHECK_BLAS(cublasSetWorkspace(p.blas, p.workspace, p.workspace_bytes));
    CHECK_BLAS(cublasLtCreate(&p.lt));
    CHECK_CUDA(cudaEventCreate(&p.t0));
    CHECK_CUDA(cudaEventCreate(&p.t1));
    double sum_default = 0, sum_best = 0, step_default = 0, step_best = 0, step_gflop = 0;
    const size_t block_shapes = 12; /* shapes[0..11] repeat per layer; the head's three once */
    for (size_t i = 0; i < nshapes; i++) {
        const probe_shape *s = &shapes[i];
        double gflop = 2e-9 * s->m * s->n * s->k;
        float ms_default = time_default(&p, s);
        lt_problem q;
        lt_problem_make(&p, s, &q);
        int nheur = 0, ntried = 0;
        algo_found heur = best_heuristic(&p, &q, &nheur);
        algo_found found = best_search(&p, &q, c_type(&p, s), &ntried);
        lt_problem_free(&q);
        float best = ms_default;
        if (heur.ms > 0 && heur.ms < best)
            best = heur.ms;
        if (found.ms > 0 && found.ms < best)
            best = found.ms;
        sum_default += ms_default;
        sum_best += best;
        int times = i < block_shapes ? layers : 1;
        step_default += times * ms_default;
        step_best += times * best;
        step_gflop += times * gflop;
        printf("{\"model\":\"%s\",\"tokens\":%d,\"prec\":\"%s\",\"gemm\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,"
               "\"default_ms\":%.5f,\"default_tflops\":%.1f,\"heur_n\":%d,\"heur_ms\":%.5f,\"heur_tflops\":%.1f,"
               "\"search_tried\":%d,\"search_ms\":%.5f,\"search_tflops\":%.1f,"
               "\"search_algo\":{\"id\":%d,\"tile\":%d,\"stages\":%d,\"split_k\":%d,\"swizzle\":%d}}\n",
               model, tokens, prec, s->name, s->m, s->n, s->k, ms_default, gflop / ms_default, nheur, heur.ms,
               heur.ms > 0 ? gflop / heur.ms : 0.0, ntried, found.ms, found.ms > 0 ? gflop / found.ms : 0.0,
               found.id, found.tile, found.stages, found.split_k, found.swizzle);
        fflush(stdout);
    }
    printf("{\"model\":\"%s\",\"tokens\":%d,\"prec\":\"%s\",\"sum_default_ms\":%.4f,\"sum_best_ms\":%.4f,"
           "\"best_over_default\":%.3f,\"step_linear_gflop\":%.1f,\"step_linear_default_ms\":%.3f,"
           "\"step_linear_best_ms\":%.3f,\"step_default_tflops\":%.1f,\"step_best_tflops\":%.1f}\n",
           model, tokens, prec, sum_default, sum_best, sum_best / sum_default, step_gflop, step_default, step_best,
           step_gflop / step_default, step_gflop / step_best);
    return 0;
}
