/*
 * int8peak.c - llamachat-int8peak: how many int8 multiply-adds per second can a core do?
 *
 * The quantized prompt GEMMs (x86-avx512.c) are bound by instruction throughput, not memory: a
 * 512-token batch reads each weight once for 512 tokens.  This probe gives their ceiling on the
 * machine at hand, per core, with the operands in registers (no loads):
 *
 *   dpbusd-zmm   vpdpbusd zmm (64 u8 x s8 products per instruction) into 16 independent
 *                accumulators: the int8 peak.
 *   dpbusd-ymm   the same with ymm (32 products), for comparison.
 *   exact-zmm    what a GEMM with ggml's q4_1 / q4_0 vec_dot bits must do per 64 products: the
 *                integer lanes of one block (vpdpbusd from zero), converted to float
 *                (vcvtdq2ps) and accumulated with one FMA per lane (acc = fma(float(lane), d,
 *                acc)): 3 instructions per 64 products, 8 independent chains.  The ceiling of
 *                every same-bits kernel, before any load, unpacking or scale.
 *
 * GMAC/s = products / elapsed / 1e9.  Each thread runs its own loop; the clock is per thread,
 * so -t 2 shows whether two threads on two cores each get the single-core figure.  The best of
 * the repetitions is reported (the machine), and the median (the noise of others sharing it).
 *
 * Usage: llamachat-int8peak [-t THREADS] [-r REPS] [--quiet]
 *   --quiet prints one line per test: "name best-GMAC/s-per-thread median".
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_PROBE 1
#else
#define HAVE_PROBE 0
#endif

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define ITERS 20000000L /* loop iterations per timed run */

#if HAVE_PROBE
/* 16 vpdpbusd zmm per iteration, 16 independent accumulators: 1024 products */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static uint64_t run_dpbusd_zmm(long iters)
{
    uint64_t out = 0;
    __asm__ volatile(
        "vpternlogd $0xff, %%zmm30, %%zmm30, %%zmm30\n\t"
        "vpabsb %%zmm30, %%zmm31\n\t"
        "vpxord %%zmm0, %%zmm0, %%zmm0\n\tvmovdqa64 %%zmm0, %%zmm1\n\tvmovdqa64 %%zmm0, %%zmm2\n\t"
        "vmovdqa64 %%zmm0, %%zmm3\n\tvmovdqa64 %%zmm0, %%zmm4\n\tvmovdqa64 %%zmm0, %%zmm5\n\t"
        "vmovdqa64 %%zmm0, %%zmm6\n\tvmovdqa64 %%zmm0, %%zmm7\n\tvmovdqa64 %%zmm0, %%zmm8\n\t"
        "vmovdqa64 %%zmm0, %%zmm9\n\tvmovdqa64 %%zmm0, %%zmm10\n\tvmovdqa64 %%zmm0, %%zmm11\n\t"
        "vmovdqa64 %%zmm0, %%zmm12\n\tvmovdqa64 %%zmm0, %%zmm13\n\tvmovdqa64 %%zmm0, %%zmm14\n\t"
        "vmovdqa64 %%zmm0, %%zmm15\n\t"
        "1:\n\t"
        "vpdpbusd %%zmm31, %%zmm30, %%zmm0\n\tvpdpbusd %%zmm31, %%zmm30, %%zmm1\n\t"
        "vpdpbusd %%zmm31, %%zmm30, %%zmm2\n\tvpdpbusd %%zmm31, %%zmm30, %%zmm3\n\t"
        "vpdpbusd %%zmm31, %%zmm30, %%zmm4\n\tvpdpbusd %%zmm31, %%zmm30, %%zmm5\n\t"
        "vpdpbusd %%zmm31, %%zmm30, %%zmm6\n\tvpdpbusd %%zmm31, %%zmm30, %%zmm7\n\t"
        "vpdpbusd %%zmm31, %%zmm30, %%zmm8\n\tvpdpbusd %%zmm31, %%zmm30, %%zmm9\n\t"
        "vpdpbusd %%zmm31, %%zmm30, %%zmm10\n\tvpdpbusd %%zmm31, %%zmm30, %%zmm11\n\t"
        "vpdpbusd %%zmm31, %%zmm30, %%zmm12\n\tvpdpbusd %%zmm31, %%zmm30, %%zmm13\n\t"
        "vpdpbusd %%zmm31, %%zmm30, %%zmm14\n\tvpdpbusd %%zmm31, %%zmm30, %%zmm15\n\t"
        "dec %1\n\tjnz 1b\n\t"
        "vpaddd %%zmm1, %%zmm0, %%zmm0\n\tvmovq %%xmm0, %0\n\t"
        "vzeroupper\n\t"
        : "=r"(out), "+r"(iters)
        :
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
          "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm30", "xmm31", "cc");
    return out;
}

/* 16 vpdpbusd ymm per iteration: 512 products */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static uint64_t run_dpbusd_ymm(long iters)
{
    uint64_t out = 0;
    __asm__ volatile(
        "vpcmpeqd %%ymm14, %%ymm14, %%ymm14\n\t"
        "vpabsb %%ymm14, %%ymm15\n\t"
        "vpxor %%ymm0, %%ymm0, %%ymm0\n\tvmovdqa %%ymm0, %%ymm1\n\tvmovdqa %%ymm0, %%ymm2\n\t"
        "vmovdqa %%ymm0, %%ymm3\n\tvmovdqa %%ymm0, %%ymm4\n\tvmovdqa %%ymm0, %%ymm5\n\t"
        "vmovdqa %%ymm0, %%ymm6\n\tvmovdqa %%ymm0, %%ymm7\n\tvmovdqa %%ymm0, %%ymm8\n\t"
        "vmovdqa %%ymm0, %%ymm9\n\tvmovdqa %%ymm0, %%ymm10\n\tvmovdqa %%ymm0, %%ymm11\n\t"
        "vmovdqa %%ymm0, %%ymm12\n\tvmovdqa %%ymm0, %%ymm13\n\t"
        "1:\n\t"
        "vpdpbusd %%ymm15, %%ymm14, %%ymm0\n\tvpdpbusd %%ymm15, %%ymm14, %%ymm1\n\t"
        "vpdpbusd %%ymm15, %%ymm14, %%ymm2\n\tvpdpbusd %%ymm15, %%ymm14, %%ymm3\n\t"
        "vpdpbusd %%ymm15, %%ymm14, %%ymm4\n\tvpdpbusd %%ymm15, %%ymm14, %%ymm5\n\t"
        "vpdpbusd %%ymm15, %%ymm14, %%ymm6\n\tvpdpbusd %%ymm15, %%ymm14, %%ymm7\n\t"
        "vpdpbusd %%ymm15, %%ymm14, %%ymm8\n\tvpdpbusd %%ymm15, %%ymm14, %%ymm9\n\t"
        "vpdpbusd %%ymm15, %%ymm14, %%ymm10\n\tvpdpbusd %%ymm15, %%ymm14, %%ymm11\n\t"
        "vpdpbusd %%ymm15, %%ymm14, %%ymm12\n\tvpdpbusd %%ymm15, %%ymm14, %%ymm13\n\t"
        "vpdpbusd %%ymm15, %%ymm14, %%ymm0\n\tvpdpbusd %%ymm15, %%ymm14, %%ymm1\n\t"
        "dec %1\n\tjnz 1b\n\t"
        "vpaddd %%ymm1, %%ymm0, %%ymm0\n\tvmovq %%xmm0, %0\n\t"
        "vzeroupper\n\t"
        : "=r"(out), "+r"(iters)
        :
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
          "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc");
    return out;
}

/* the same-bits pattern: per 64 products vpdpbusd from zero, vcvtdq2ps, vfmadd231ps into one
 * of 8 float accumulators; 8 per iteration: 512 products */
#define EXACT_STEP(T, A)                                                                          \
    "vpxord %%zmm" #T ", %%zmm" #T ", %%zmm" #T "\n\t"                                             \
    "vpdpbusd %%zmm31, %%zmm30, %%zmm" #T "\n\t"                                                   \
    "vcvtdq2ps %%zmm" #T ", %%zmm" #T "\n\t"                                                       \
    "vfmadd231ps %%zmm29, %%zmm" #T ", %%zmm" #A "\n\t"
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static uint64_t run_exact_zmm(long iters)
{
    uint64_t out = 0;
    __asm__ volatile(
        "vpternlogd $0xff, %%zmm30, %%zmm30, %%zmm30\n\t"
        "vpabsb %%zmm30, %%zmm31\n\t"
        "vxorps %%zmm29, %%zmm29, %%zmm29\n\t"
        "vxorps %%zmm0, %%zmm0, %%zmm0\n\tvmovaps %%zmm0, %%zmm1\n\tvmovaps %%zmm0, %%zmm2\n\t"
        "vmovaps %%zmm0, %%zmm3\n\tvmovaps %%zmm0, %%zmm4\n\tvmovaps %%zmm0, %%zmm5\n\t"
        "vmovaps %%zmm0, %%zmm6\n\tvmovaps %%zmm0, %%zmm7\n\t"
        "1:\n\t" EXACT_STEP(8, 0) EXACT_STEP(9, 1) EXACT_STEP(10, 2) EXACT_STEP(11, 3)
            EXACT_STEP(12, 4) EXACT_STEP(13, 5) EXACT_STEP(14, 6) EXACT_STEP(15, 7)
        "dec %1\n\tjnz 1b\n\t"
        "vaddps %%zmm1, %%zmm0, %%zmm0\n\tvmovq %%xmm0, %0\n\t"
        "vzeroupper\n\t"
        : "=r"(out), "+r"(iters)
        :
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
          "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm29", "xmm30", "xmm31", "cc");
    return out;
}
#endif

struct test {
    const char *name;
    uint64_t (*run)(long);
    double macs_per_iter;
    const char *isa; /* __builtin_cpu_supports feature */
};

#if HAVE_PROBE
static const struct test tests[] = {
    {"dpbusd-zmm", run_dpbusd_zmm, 16 * 64, "avx512vnni"},
    {"dpbusd-ymm", run_dpbusd_ymm, 16 * 32, "avx512vnni"},
    {"exact-zmm", run_exact_zmm, 8 * 64, "avx512vnni"},
};
#define N_TESTS (sizeof tests / sizeof tests[0])
#endif

struct thr {
    const struct test *t;
    pthread_barrier_t *bar;
    double gmacs;
    pthread_t tid;
    uint64_t sink;
};

static void *thread_main(void *arg)
{
    struct thr *th = arg;
    pthread_barrier_wait(th->bar);
    const double t0 = now_s();
    th->sink = th->t->run(ITERS);
    const double t1 = now_s();
    th->gmacs = th->t->macs_per_iter * (double)ITERS / (t1 - t0) / 1e9;
    return NULL;
}

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int nth = 1, reps = 5, quiet = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc)
            nth = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quiet"))
            quiet = 1;
        else {
            fprintf(stderr, "usage: llamachat-int8peak [-t THREADS] [-r REPS] [--quiet]\n");
            return 2;
        }
    }
    if (nth < 1 || nth > 256 || reps < 1 || reps > 1000) {
        fprintf(stderr, "llamachat-int8peak: bad -t or -r\n");
        return 2;
    }
#if !HAVE_PROBE
    fprintf(stderr, "llamachat-int8peak: x86-64 only\n");
    return 1;
#else
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512vnni")) {
        fprintf(stderr, "llamachat-int8peak: no AVX-512 VNNI on this CPU\n");
        return 1;
    }
    struct thr *th = calloc((size_t)nth, sizeof *th);
    double *per = calloc((size_t)reps, sizeof *per);
    if (!th || !per)
        return 1;
    if (!quiet)
        printf("%-12s %8s %16s %16s %14s\n", "test", "threads", "best GMAC/s/thr",
               "median GMAC/s/thr", "best total");
    for (size_t k = 0; k < N_TESTS; k++) {
        for (int r = 0; r < reps; r++) {
            pthread_barrier_t bar;
            pthread_barrier_init(&bar, NULL, (unsigned)nth);
            for (int i = 0; i < nth; i++) {
                th[i].t = &tests[k];
                th[i].bar = &bar;
                pthread_create(&th[i].tid, NULL, thread_main, &th[i]);
            }
            double sum = 0;
            for (int i = 0; i < nth; i++) {
                pthread_join(th[i].tid, NULL);
                sum += th[i].gmacs;
            }
            pthread_barrier_destroy(&bar);
            per[r] = sum / nth;
        }
        qsort(per, (size_t)reps, sizeof *per, cmp_d);
        const double best = per[reps - 1], med = per[reps / 2];
        if (quiet)
            printf("%s %.1f %.1f\n", tests[k].name, best, med);
        else
            printf("%-12s %8d %16.1f %16.1f %14.1f\n", tests[k].name, nth, best, med, best * nth);
    }
    free(th);
    free(per);
    return 0;
#endif
}
