/*
 * bench-gemm-x16.c - the prompt GEMM of the x16 layout alone, one thread, on the shapes of a
 * TinyLlama-1.1B pp512 batch as a thread sees them (a chunk of output rows x 512 tokens).
 *
 *   make bench/bench-gemm-x16 && bench/bench-gemm-x16 [TYPE q4_1|q4_0|q4_K|q5_K|q6_K|q8_0|q5_1, -fast: gemm_x16_fast] [REPS 5] [ISA auto] [COLUMNS 512]
 *
 * Prints GMAC/s (weights x columns / time / 1e9), best and median of REPS, per shape: to set
 * against llamachat-int8peak's figures (BENCH_CPU_TIME=1: per CPU second).  Random weights and activations; nothing is checked
 * (test-kernels does that).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llm/arch/kernels.h"
#include "llm/quant.h"
#include "llm/repack.h"

/* wall time, or with BENCH_CPU_TIME=1 in the environment the process's CPU time (steadier
 * on a machine shared with other work) */
static double now(void)
{
    static int cpu = -1;
    if (cpu < 0)
        cpu = getenv("BENCH_CPU_TIME") && atoi(getenv("BENCH_CPU_TIME")) != 0;
    struct timespec ts;
    clock_gettime(cpu ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    const char *targ = argc > 1 ? argv[1] : "q4_1";
    /* TYPE-fast: the opt-in gemm_x16_fast entry (kernels.h) */
    char tname[32];
    snprintf(tname, sizeof tname, "%s", targ);
    char *suffix = strstr(tname, "-fast");
    const int fast = suffix != NULL;
    if (suffix)
        *suffix = 0;
    const int reps = argc > 2 ? atoi(argv[2]) : 5;
    lc_quant_init();
    if (argc > 3) {
        char *err = NULL;
        if (lc_kernels_select(argv[3], &err) != 0) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
    }
    int type = -1;
    for (int t = 0; t < LC_TYPE_COUNT; t++)
        if (lc_type_name(t) && !strcmp(lc_type_name(t), tname))
            type = t;
    const struct lc_kernels *K = lc_kernels();
    const lc_gemm_fn gemm = type < 0 ? NULL : fast ? K->gemm_x16_fast[type] : K->gemm_x16[type];
    if (type < 0 || reps < 1 || !gemm) {
        fprintf(stderr, "usage: bench-gemm-x16 [TYPE] [REPS] [ISA]\n");
        return 2;
    }
    /* n x rows (a thread's chunk of a 2-thread pp512: a quarter of its half) x 512 columns */
    static const struct {
        const char *name;
        int n, nr;
    } shapes[] = {{"attn/gate 2048x256", 2048, 256}, {"down 5632x256", 5632, 256}};
    const int nc = argc > 4 ? atoi(argv[4]) : 512;
    const int at = lc_type_traits(type)->vec_dot_type;
    const int qk = lc_type_traits(type)->blck_size;
    printf("%s %s%s, %d columns, one thread\n", K->isa, tname, fast ? " (gemm_x16_fast)" : "", nc);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int n = shapes[s].n, nr = shapes[s].nr, nb = n / qk;
        const size_t row = (size_t)nb * lc_type_traits(type)->type_size;
        const size_t a_stride = (size_t)(n / lc_type_traits(at)->blck_size) *
                                lc_type_traits(at)->type_size;
        float *xf = malloc((size_t)n * sizeof *xf);
        uint8_t *W = malloc((size_t)nr * row), *X = malloc((size_t)nr * row);
        uint8_t *A = malloc((size_t)nc * a_stride);
        float *out = malloc((size_t)nc * (size_t)nr * sizeof *out);
        srand(1);
        for (int r = 0; r < nr; r++) {
            for (int j = 0; j < n; j++)
                xf[j] = (float)rand() / RAND_MAX - 0.5f;
            if (type == LC_TYPE_Q4_1)
                lc_quantize_row_q4_1_ref(xf, (lc_block_q4_1 *)(void *)(W + (size_t)r * row), n);
            else if (type == LC_TYPE_Q4_0)
                lc_quantize_row_q4_0_ref(xf, (lc_block_q4_0 *)(void *)(W + (size_t)r * row), n);
            else if (type == LC_TYPE_Q6_K)
                lc_quantize_row_q6_K_ref(xf, (lc_block_q6_K *)(void *)(W + (size_t)r * row), n);
            else if (type == LC_TYPE_Q4_K)
                lc_quantize_row_q4_K_ref(xf, (lc_block_q4_K *)(void *)(W + (size_t)r * row), n);
            else if (type == LC_TYPE_Q5_K)
                lc_quantize_row_q5_K_ref(xf, (lc_block_q5_K *)(void *)(W + (size_t)r * row), n);
            else if (type == LC_TYPE_Q8_0)
                lc_quantize_row_q8_0_ref(xf, (lc_block_q8_0 *)(void *)(W + (size_t)r * row), n);
            else if (type == LC_TYPE_Q5_1)
                lc_quantize_row_q5_1_ref(xf, (lc_block_q5_1 *)(void *)(W + (size_t)r * row), n);
            else {
                fprintf(stderr, "bench-gemm-x16: q4_0, q4_1, q4_K, q5_K, q6_K, q8_0 or q5_1\n");
                return 2;
            }
        }
        for (int c = 0; c < nc; c++) {
            for (int j = 0; j < n; j++)
                xf[j] = (float)rand() / RAND_MAX - 0.5f;
            K->quantize_row[at](xf, A + (size_t)c * a_stride, n);
        }
        lc_x16_repack(type, X, W, n, nr);
        double gm[64];
        const int R = reps < 64 ? reps : 64;
        gemm(n, out, (size_t)nr, X, row, nr, A, a_stride, nc); /* warm */
        for (int r = 0; r < R; r++) {
            const double t0 = now();
            gemm(n, out, (size_t)nr, X, row, nr, A, a_stride, nc);
            gm[r] = (double)n * nr * nc / (now() - t0) / 1e9;
        }
        qsort(gm, (size_t)R, sizeof *gm, cmp_d);
        printf("  %-20s best %6.1f  median %6.1f GMAC/s   (out[7] %g)\n", shapes[s].name,
               gm[R - 1], gm[R / 2], (double)out[7]);
        free(xf);
        free(W);
        free(X);
        free(A);
        free(out);
    }
    return 0;
}
