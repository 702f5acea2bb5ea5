/*
 * bench-gemv.c - one decode GEMV (one activation row against a weight matrix), one thread,
 * per weight type and ISA: vec_dot row by row (ggml's layout), the ISA's gemv entry when it has
 * one, and gemv_x16 on the same rows repacked (repack.h) when the ISA has its own x16 kernels.
 *
 *   make bench/bench-gemv && bench/bench-gemv [KiB of weights, default 1024] [reps, default 20]
 *
 * First the int8 dot-product peak of one core (int8_peak).
 * With 1 MiB (in L2) this is the compute rate of the kernel, what a core could stream at most;
 * with 256 MiB and more, the rate from DRAM.  GB/s of weight bytes, the best of the repetitions
 * (a shared machine only ever slows a run down).  Under `valgrind --tool=callgrind` with reps 1
 * it gives instruction counts that the load of the machine does not move.  Rows of n = 2048
 * (TinyLlama's attention and ffn_up/gate inputs), quantized from random floats by the reference
 * quantizers; results are not checked here (test-kernels does).
 *
 * Environment: BENCH_ISA (e.g. avx512) and BENCH_TYPE (e.g. q4_K) keep one ISA / weight type;
 * BENCH_CPU=1 times by the thread's CPU clock instead of the wall clock (less moved by the
 * other tenants of a shared machine; a descheduled thread's wait is not counted);
 * BENCH_CHUNK=64 calls gemv_x16 on 64 rows at a time, as a decode step's matmul chunks do;
 * BENCH_X16=1 times gemv_x16 only.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "llm/arch/kernels.h"
#include "llm/quant.h"
#include "llm/repack.h"

static clockid_t clock_id = CLOCK_MONOTONIC;
static int chunk_rows; /* gemv_x16 calls of this many rows (0: all at once) */

static double now(void)
{
    struct timespec ts;
    clock_gettime(clock_id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

enum { N = 2048 };

/*
 * The int8 dot-product peak of one core: 12 independent chains of vpdpbusd (AVX-512 VNNI, 64
 * u8 x s8 products per instruction) or of vpmaddubsw + vpaddw (AVX2, 32 products, the add
 * keeping chains of the same length), in int8 multiply-adds per second.  What a prompt GEMM
 * could reach at best; the decode GEMVs need a small fraction of it.
 */
#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static double peak_vnni(long iters)
{
    __m512i acc[12];
    const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
    for (int k = 0; k < 12; k++)
        acc[k] = _mm512_set1_epi32(k);
    const double t0 = now();
    for (long i = 0; i < iters; i++)
        _Pragma("GCC unroll 12") for (int k = 0; k < 12; k++)
            acc[k] = _mm512_dpbusd_epi32(acc[k], a, b);
    const double t = now() - t0;
    int32_t out[16];
    __m512i sum = acc[0];
    for (int k = 1; k < 12; k++)
        sum = _mm512_add_epi32(sum, acc[k]);
    _mm512_storeu_si512(out, sum);
    if (out[0] == 42) /* keep the loop */
        printf(" ");
    return (double)iters * 12 * 64 / t / 1e9;
}

__attribute__((target("avx2"))) static double peak_avx2(long iters)
{
    __m256i acc[12];
    const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2);
    for (int k = 0; k < 12; k++)
        acc[k] = _mm256_set1_epi16((short)k);
    const double t0 = now();
    for (long i = 0; i < iters; i++)
        _Pragma("GCC unroll 12") for (int k = 0; k < 12; k++)
            acc[k] = _mm256_add_epi16(acc[k], _mm256_maddubs_epi16(a, b));
    const double t = now() - t0;
    int16_t out[16];
    __m256i sum = acc[0];
    for (int k = 1; k < 12; k++)
        sum = _mm256_add_epi16(sum, acc[k]);
    _mm256_storeu_si256((__m256i *)out, sum);
    if (out[0] == 42)
        printf(" ");
    return (double)iters * 12 * 32 / t / 1e9;
}

static void int8_peak(void)
{
    double v = 0, a = 0;
    for (int rep = 0; rep < 5; rep++) {
        if (__builtin_cpu_supports("avx512vnni")) {
            const double x = peak_vnni(2000000);
            v = x > v ? x : v;
        }
        if (__builtin_cpu_supports("avx2")) {
            const double x = peak_avx2(2000000);
            a = x > a ? x : a;
        }
    }
    printf("int8 multiply-add peak, one core (best of 5): vpdpbusd zmm %.1f G/s, vpmaddubsw ymm "
           "%.1f G/s\n\n", v, a);
}
#else
static void int8_peak(void)
{
}
#endif

/* best GB/s of reps calls of one of the three paths (0 vec_dot, 1 gemv, 2 gemv_x16) */
static double run(const struct lc_kernels *k, int type, int path, const uint8_t *w, size_t row,
                  int rows, const uint8_t *a, float *out, int reps)
{
    double best = 1e30;
    for (int rep = 0; rep < reps; rep++) {
        const double t0 = now();
        if (path == 0)
            for (int r = 0; r < rows; r++)
                k->vec_dot[type](N, out + r, w + (size_t)r * row, a);
        else if (path == 1)
            k->gemv[type](N, out, w, row, rows, a);
        else if (chunk_rows > 0)
            for (int r = 0; r < rows; r += chunk_rows)
                k->gemv_x16[type](N, out + r, w + (size_t)r * row, row,
                                  rows - r < chunk_rows ? rows - r : chunk_rows, a);
        else
            k->gemv_x16[type](N, out, w, row, rows, a);
        const double t = now() - t0;
        best = t < best ? t : best;
    }
    return (double)row * rows / best / 1e9;
}

int main(int argc, char **argv)
{
    const long kib = argc > 1 ? atol(argv[1]) : 1024;
    const int reps = argc > 2 ? atoi(argv[2]) : 20;
    static const int types[] = {LC_TYPE_Q4_0, LC_TYPE_Q4_1, LC_TYPE_Q5_1, LC_TYPE_Q8_0,
                                LC_TYPE_Q4_K, LC_TYPE_Q5_K, LC_TYPE_Q6_K, LC_TYPE_Q5_0,
                                LC_TYPE_IQ4_NL, LC_TYPE_Q2_K, LC_TYPE_Q3_K, LC_TYPE_IQ4_XS};
    static const char *const isas[] = {"avx512", "avx2", "neon", "scalar"};
    const char *want_isa = getenv("BENCH_ISA"), *want_type = getenv("BENCH_TYPE");
    const char *cpu = getenv("BENCH_CPU");
    if (cpu && *cpu && strcmp(cpu, "0") != 0)
        clock_id = CLOCK_THREAD_CPUTIME_ID;
    const bool x16_only = getenv("BENCH_X16") && strcmp(getenv("BENCH_X16"), "1") == 0;
    if (getenv("BENCH_CHUNK"))
        chunk_rows = (atoi(getenv("BENCH_CHUNK")) + 15) / 16 * 16;
    lc_quant_init();
    float *x = malloc(N * sizeof(float));
    srand(1);
    if (!want_isa && !want_type)
        int8_peak();
    printf("one thread, n = %d, %ld KiB of weights, best of %d; GB/s of weight bytes%s\n\n", N,
           kib, reps, clock_id == CLOCK_MONOTONIC ? "" : " (thread CPU time)");
    printf("| isa | type | rows | vec_dot per row | gemv | gemv_x16 (repacked) |\n");
    printf("| --- | --- | ---: | ---: | ---: | ---: |\n");
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const int type = types[ti];
        const struct lc_type_traits *tt = lc_type_traits(type);
        if (want_type && strcasecmp(want_type, tt->name) != 0)
            continue;
        const size_t row = lc_row_size(type, N);
        const int rows = (int)((size_t)kib * 1024 / row) & ~15;
        /* the x16 copy 64-byte aligned, as model.c's (malloc's 16 would split every load) */
        uint8_t *w = malloc(row * (size_t)rows);
        uint8_t *wx = aligned_alloc(64, (row * (size_t)rows + 63) & ~(size_t)63);
        /* 64 distinct rows, tiled */
        for (int r = 0; r < 64 && r < rows; r++) {
            for (int i = 0; i < N; i++)
                x[i] = (float)rand() / RAND_MAX * 0.04f - 0.02f;
            tt->from_float_ref(x, w + (size_t)r * row, N);
        }
        for (int r = 64; r < rows; r++)
            memcpy(w + (size_t)r * row, w + (size_t)(r % 64) * row, row);
        if (lc_x16_type(type))
            lc_x16_repack(type, wx, w, N, rows);
        const size_t arow = lc_row_size(tt->vec_dot_type, N);
        uint8_t *a = malloc(arow);
        float *out = malloc((size_t)rows * sizeof(float));
        for (int i = 0; i < N; i++)
            x[i] = (float)rand() / RAND_MAX * 2.0f - 1.0f;
        for (int ii = 0; ii < 4; ii++) {
            if (want_isa && strcmp(want_isa, isas[ii]) != 0)
                continue;
            if (!lc_kernels_isa_available(isas[ii]) || lc_kernels_select(isas[ii], NULL) != 0)
                continue;
            const struct lc_kernels *k = lc_kernels();
            k->quantize_row[tt->vec_dot_type](x, a, N);
            if (x16_only) {
                if (lc_x16_type(type) && (k->x16_native >> type & 1u))
                    printf("| %s | %s | %d | | | %.2f |\n", isas[ii], tt->name, rows,
                           run(k, type, 2, wx, row, rows, a, out, reps));
                continue;
            }
            printf("| %s | %s | %d | %.2f |", isas[ii], tt->name, rows,
                   run(k, type, 0, w, row, rows, a, out, reps));
            /* Q4_0's x16 kernels follow the Q4_0x8 order (gemv_q4_0x8 is its ggml-layout twin) */
            if (type == LC_TYPE_Q4_0 && k->gemv_q4_0x8) {
                struct lc_kernels kk = *k;
                kk.gemv[type] = k->gemv_q4_0x8;
                printf(" %.2f (q4_0x8) |", run(&kk, type, 1, w, row, rows, a, out, reps));
            } else if (k->gemv[type])
                printf(" %.2f |", run(k, type, 1, w, row, rows, a, out, reps));
            else
                printf(" |");
            if (lc_x16_type(type) && (k->x16_native >> type & 1u))
                printf(" %.2f |\n", run(k, type, 2, wx, row, rows, a, out, reps));
            else
                printf(" |\n");
        }
        free(w);
        free(wx);
        free(a);
        free(out);
    }
    free(x);
    return 0;
}
