/* Tiny helpers shared by the engine tests: failure reporting, a seeded
 * generator, tolerance checks and central finite differences. */
#ifndef ENGINE_CHECK_H
#define ENGINE_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int check_failures;

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);             \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
            check_failures++;                                                \
        }                                                                    \
    } while (0)

/* Stops the test when a library call fails. */
#define MUST(x)                                                              \
    do {                                                                     \
        int must_rc_ = (x);                                                  \
        if (must_rc_ != 0) {                                                 \
            fprintf(stderr, "FAIL %s:%d: %s returned %d\n", __FILE__,        \
                    __LINE__, #x, must_rc_);                                 \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

static inline int check_report(const char *name)
{
    if (check_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, check_failures);
        return 1;
    }
    printf("%s: ok\n", name);
    return 0;
}

typedef struct test_rng {
    uint64_t s;
} test_rng;

static inline uint64_t test_next(test_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi). */
static inline float test_uniform(test_rng *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)((test_next(r) >> 40) * 0x1p-24);
}

static inline void test_fill(test_rng *r, float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = test_uniform(r, lo, hi);
}

static inline float *test_alloc(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof *p);
    if (!p) {
        fprintf(stderr, "FAIL: out of memory\n");
        exit(1);
    }
    return p;
}

static inline int test_close(double got, double want, double atol, double rtol)
{
    return fabs(got - want) <= atol + rtol * fabs(want);
}

/* Compares arrays; reports the worst element. Returns 1 when all close. */
static inline int test_allclose(const char *what, const float *got, const float *want, size_t n,
                                double atol, double rtol)
{
    size_t worst = 0;
    double worst_excess = -1.0;
    for (size_t i = 0; i < n; i++) {
        double excess = fabs((double)got[i] - want[i]) - (atol + rtol * fabs((double)want[i]));
        if (excess > worst_excess || isnan(got[i]) != isnan(want[i])) {
            worst_excess = isnan(got[i]) ? INFINITY : excess;
            worst = i;
        }
    }
    int ok = worst_excess <= 0.0;
    CHECK(ok, "%s: element %zu got %.7g want %.7g (atol %g rtol %g)", what, worst,
          (double)got[worst], (double)want[worst], atol, rtol);
    return ok;
}

/* Central difference of J at x[i] with step h (the step actually taken in
 * float is used as the denominator). */
static inline double test_fd(double (*J)(void *), void *ctx, float *x, size_t i, float h)
{
    float old = x[i];
    float up = old + h, down = old - h;
    x[i] = up;
    double jp = J(ctx);
    x[i] = down;
    double jm = J(ctx);
    x[i] = old;
    return (jp - jm) / ((double)up - (double)down);
}

/* Checks analytic (n) against finite differences on up to max_checks
 * elements (all when n ≤ max_checks, else an even spread). */
static inline void test_grad_check(const char *what, double (*J)(void *), void *ctx, float *x,
                                   const float *analytic, size_t n, size_t max_checks, float h,
                                   double atol, double rtol)
{
    size_t stride = n <= max_checks ? 1 : n / max_checks;
    int bad = 0;
    for (size_t i = 0; i < n && !bad; i += stride) {
        double num = test_fd(J, ctx, x, i, h);
        if (!test_close(analytic[i], num, atol, rtol)) {
            CHECK(0, "%s: d/dx[%zu] analytic %.7g numeric %.7g", what, i, (double)analytic[i], num);
            bad = 1;
        }
    }
}

#endif
