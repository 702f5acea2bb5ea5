/*
 * bench-kernels.c - throughput of the dot-product kernels per ISA, single thread.
 *
 *   make bench/bench-kernels && bench/bench-kernels [MiB of weights, default 48]
 *
 * vec_dot: one activation row against every weight row (a decode step): GB/s of weight bytes
 * read, on one thread and split across all CPUs with the thread pool.  gemm: the same weights against 16 activation rows (a prompt batch): weights x columns
 * per second, shown as the equivalent "GB/s" (bytes x columns / time) next to vec_dot's to show
 * what the tiling gains.  Weights are random blocks; results are printed, not checked.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llm/arch/kernels.h"
#include "llm/quant.h"
#include "llm/threadpool.h"

/* one decode step over all rows, split across the pool's threads */
struct job {
    const struct lc_kernels *k;
    int type, n, rows;
    size_t row;
    const uint8_t *w, *a;
    float *out;
};

static void rows_task(void *p, int ith, int nth)
{
    const struct job *j = p;
    int lo, hi;
    lc_split_range(j->rows, ith, nth, &lo, &hi);
    for (int r = lo; r < hi; r++)
        j->k->vec_dot[j->type](j->n, j->out + r, j->w + (size_t)r * j->row, j->a);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    const int mib = argc > 1 ? atoi(argv[1]) : 48;
    const int n = 4096, ncols = 16;
    static const int types[] = {LC_TYPE_Q4_1, LC_TYPE_Q4_0, LC_TYPE_Q8_0};
    static const char *const isas[] = {"scalar", "avx2", "avx512", "neon"};
    lc_quant_init();
    float *x = malloc((size_t)n * ncols * sizeof(float));
    for (int i = 0; i < n * ncols; i++)
        x[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
    const int nt = lc_n_cpus();
    struct lc_threadpool *tp = lc_threadpool_new(nt, NULL);
    printf("%-7s %-5s %10s %12s %12s %14s\n", "isa", "type", "rows", "vec_dot GB/s", "x threads", "gemm16 GB/s*");
    for (int ti = 0; ti < 3; ti++) {
        const int type = types[ti];
        const struct lc_type_traits *tt = lc_type_traits(type);
        const size_t row = lc_row_size(type, n);
        const int rows = (int)(((size_t)mib << 20) / row);
        uint8_t *w = malloc(row * (size_t)rows);
        for (size_t i = 0; i < row * (size_t)rows; i++)
            w[i] = (uint8_t)(i * 2654435761u >> 13);
        /* sane fp16 scales: overwrite d (and m) of every block */
        for (size_t b = 0; b < row * (size_t)rows / tt->type_size; b++) {
            lc_fp16 *d = (lc_fp16 *)(void *)(w + b * tt->type_size);
            d[0] = 0x2000;
            if (type == LC_TYPE_Q4_1)
                d[1] = 0xa000;
        }
        const size_t arow = lc_row_size(tt->vec_dot_type, n);
        uint8_t *a = malloc(arow * ncols);
        float *out = malloc((size_t)rows * ncols * sizeof(float));
        for (int ii = 0; ii < 4; ii++) {
            if (!lc_kernels_isa_available(isas[ii]) || lc_kernels_select(isas[ii], NULL) != 0)
                continue;
            const struct lc_kernels *k = lc_kernels();
            for (int c = 0; c < ncols; c++)
                k->quantize_row[tt->vec_dot_type](x + (size_t)c * n, a + c * arow, n);
            double best = 1e9;
            for (int rep = 0; rep < 3; rep++) {
                const double t0 = now();
                for (int r = 0; r < rows; r++)
                    k->vec_dot[type](n, out + r, w + (size_t)r * row, a);
                const double t = now() - t0;
                best = t < best ? t : best;
            }
            const double gbs = (double)row * rows / best / 1e9;
            struct job jb = {k, type, n, rows, row, w, a, out};
            double bt = 1e9;
            for (int rep = 0; rep < 3 && tp; rep++) {
                const double t0 = now();
                lc_threadpool_run(tp, rows_task, &jb);
                const double t = now() - t0;
                bt = t < bt ? t : bt;
            }
            const double gbs_mt = (double)row * rows / bt / 1e9;
            double gbs_gemm = 0;
            if (k->gemm[type]) {
                double bg = 1e9;
                for (int rep = 0; rep < 5; rep++) {
                    const double t0 = now();
                    k->gemm[type](n, out, (size_t)rows, w, row, rows, a, arow, ncols);
                    const double t = now() - t0;
                    bg = t < bg ? t : bg;
                }
                gbs_gemm = (double)row * rows * ncols / bg / 1e9;
            }
            printf("%-7s %-5s %10d %12.2f %12.2f %14.2f\n", isas[ii], tt->name, rows, gbs, gbs_mt,
                   gbs_gemm);
        }
        free(w);
        free(a);
        free(out);
    }
    printf("x threads: the same decode step split across %d threads (lc_threadpool)\n", nt);
    printf("* gemm16: weight bytes x 16 columns / time (0 = no gemm kernel: vec_dot per column)\n");
    lc_threadpool_free(tp);
    free(x);
    return 0;
}
