/* The flash kernels' side of the PyTorch comparison (flash_vs_torch.py):
 * for each case, fresh Gaussian inputs q, k, v, dO in the case's dtype, one
 * forward and one backward of lmk_flash_attn_fwd/bwd (outputs poisoned with
 * NaN first, so an unwritten element fails the comparison), then raw files
 * DIR/N.{q,k,v,do,o,dq,dk,dv} (the dtype's bytes, (B, H, T, d) row-major)
 * and DIR/N.lse (float32, (B, H, T)), and one line per case on stdout:
 *   case N DTYPE B H T d causal MODE
 * MODE: the backward's way, "atomic" (atomic_dq 1, the attention job's
 * default: the single pass where it applies) or "det" (a case ending in
 * ":det": the deterministic two passes).
 * usage: flash_dump DIR SEED DTYPE:B:H:T:d:causal[:det]...
 * Exit 77 without a GPU, 1 on a failed launch or CUDA error. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "cuda/backend_cuda.h"
#include "dtype.h"
#include "halfprec.h"
#include "status.h"

static unsigned long long rng_state;

static double urand01(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return ((rng_state >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* Standard normal (Box–Muller). */
static double nrand(void)
{
    return sqrt(-2.0 * log(urand01())) * cos(6.283185307179586 * urand01());
}

static void fill(void *dst, size_t n, lmk_dtype dt)
{
    for (size_t i = 0; i < n; i++) {
        double x = nrand();
        if (dt == LMK_F32)
            ((float *)dst)[i] = (float)x;
        else if (dt == LMK_F16)
            ((lmk_fp16 *)dst)[i] = lmk_fp16_from_double(x);
        else
            ((lmk_bf16 *)dst)[i] = lmk_bf16_from_double(x);
    }
}

static int write_file(const char *dir, int id, const char *name, const void *p, size_t bytes)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%d.%s", dir, id, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(p, 1, bytes, f);
    return fclose(f) == 0 && w == bytes ? 0 : -1;
}

#define CK(x)                                                                   \
    do {                                                                        \
        cudaError_t e_ = (x);                                                   \
        if (e_ != cudaSuccess) {                                                \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,            \
                    cudaGetErrorString(e_));                                    \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

/* One case; returns 0 or 1 (launch or write failed). */
static int run_case(const char *dir, int id, lmk_attn_shape s)
{
    const size_t n = (size_t)s.B * s.H * s.T * s.d, rows = (size_t)s.B * s.H * s.T;
    const size_t bytes = n * lmk_dtype_size(s.dtype);
    /* q k v dout o dq dk dv on the device; lse, work float32 */
    static const char *names[8] = {"q", "k", "v", "do", "o", "dq", "dk", "dv"};
    void *dev[8], *host = malloc(bytes);
    float *lse, *work, *hlse = malloc(rows * 4);
    if (!host || !hlse) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    for (int i = 0; i < 8; i++)
        CK(cudaMalloc(&dev[i], bytes));
    CK(cudaMalloc((void **)&lse, rows * 4));
    CK(cudaMalloc((void **)&work, lmk_flash_attn_bwd_work_floats(&s) * 4));
    int rc = 0;
    for (int i = 0; i < 4 && !rc; i++) {
        fill(host, n, s.dtype);
        CK(cudaMemcpy(dev[i], host, bytes, cudaMemcpyHostToDevice));
        rc = write_file(dir, id, names[i], host, bytes);
    }
    for (int i = 4; i < 8; i++)
        CK(cudaMemset(dev[i], 0xff, bytes)); /* NaN in every dtype */
    CK(cudaMemset(lse, 0xff, rows * 4));
    if (!rc)
        rc = lmk_flash_attn_fwd(dev[4], lse, dev[0], dev[1], dev[2], &s, NULL);
    if (!rc)
        rc = lmk_flash_attn_bwd(dev[5], dev[6], dev[7], work, dev[3], dev[0], dev[1], dev[2],
                                dev[4], lse, &s, NULL);
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    for (int i = 4; i < 8 && !rc; i++) {
        CK(cudaMemcpy(host, dev[i], bytes, cudaMemcpyDeviceToHost));
        rc = write_file(dir, id, names[i], host, bytes);
    }
    if (!rc) {
        CK(cudaMemcpy(hlse, lse, rows * 4, cudaMemcpyDeviceToHost));
        rc = write_file(dir, id, "lse", hlse, rows * 4);
    }
    if (rc)
        fprintf(stderr, "case %d failed: %d\n", id, rc);
    else
        printf("case %d %s %d %d %d %d %d %s\n", id, lmk_dtype_name(s.dtype), s.B, s.H, s.T, s.d,
               s.causal, s.atomic_dq ? "atomic" : "det");
    fflush(stdout);
    for (int i = 0; i < 8; i++)
        cudaFree(dev[i]);
    cudaFree(lse);
    cudaFree(work);
    free(host);
    free(hlse);
    return rc != 0;
}

int main(int argc, char **argv)
{
    if (lmk_cuda_device_count() < 1) {
        printf("no GPU: skipped\n");
        return 77;
    }
    if (argc < 4) {
        fprintf(stderr, "usage: flash_dump DIR SEED DTYPE:B:H:T:d:causal[:det]...\n");
        return 2;
    }
    rng_state = strtoull(argv[2], NULL, 0) * 0x9E3779B97F4A7C15ull | 1;
    int fails = 0;
    for (int a = 3; a < argc; a++) {
        char dtn[16];
        lmk_attn_shape s;
        memset(&s, 0, sizeof s);
        char mode[8] = "";
        int nf = sscanf(argv[a], "%15[^:]:%d:%d:%d:%d:%d:%7s", dtn, &s.B, &s.H, &s.T, &s.d,
                        &s.causal, mode);
        s.atomic_dq = strcmp(mode, "det") != 0; /* the attention job's default */
        if (nf < 6 || (nf == 7 && strcmp(mode, "det") != 0) || lmk_dtype_parse(dtn, &s.dtype) != 0) {
            fprintf(stderr, "bad case %s\n", argv[a]);
            return 2;
        }
        fails += run_case(argv[1], a - 3, s);
    }
    return fails ? 1 : 0;
}
