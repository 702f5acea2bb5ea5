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
 * With Intel AMX (AMX-TILE + AMX-INT8, Sapphire Rapids and later; skipped elsewhere):
 *
 *   amx-dp       tdpbusd, 16 x 64 bytes by 16 x 64 into 16 x 16 int32, four C tiles
 *                accumulating (the way AMX is meant to be used: one store per output tile).
 *   amx-dp-store the same per Q4_1 block (K = 32: 8192 products per tdpbusd) with the C tile
 *                zeroed, loaded operands and stored after every block, in 2 x 2 tiles: what
 *                any order with per-block float scales (llama.cpp's and --fast-math's) must do.
 *   amx-scaled   amx-dp-store with the stored integer sums read back, converted and
 *                accumulated with an FMA per row (16 x 16 per tile): a per-block-scaled GEMM
 *                with nothing else.  vec_dot's bits need 8 float lanes per block, so a
 *                same-bits AMX kernel gets an eighth of these products (bench/BENCHMARKS.md,
 *                "AMX", 2026-12-03).
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

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11 &&            \
    defined(__linux__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define HAVE_AMX_PROBE 1
#else
#define HAVE_AMX_PROBE 0
#endif

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

#if HAVE_AMX_PROBE
/* AMX usable: cpuid 7.0 EDX bits 24, 25; XCR0 bits 17, 18; the tile data state granted by
 * Linux (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA = 18) */
static int amx_available(void)
{
    unsigned a, b, c, d;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0), "c"(0));
    if (a < 7) /* no leaf 7 */
        return 0;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
    if (!((c >> 27) & 1))
        return 0;
    unsigned xlo, xhi;
    __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
    if (!((d >> 24) & 1) || !((d >> 25) & 1) || (xlo & 0x60000) != 0x60000)
        return 0;
    return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
}

struct amx_tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

/* tmm0-3: C (16 x 64 bytes); tmm4, 5: A (16 x K bytes); tmm6, 7: B (K / 4 x 64 bytes) */
__attribute__((target("amx-tile,amx-int8,avx512f"))) static void amx_config(int k)
{
    struct amx_tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 4; t++)
        c.colsb[t] = 64, c.rows[t] = 16;
    for (int t = 4; t < 6; t++)
        c.colsb[t] = (uint16_t)k, c.rows[t] = 16;
    for (int t = 6; t < 8; t++)
        c.colsb[t] = 64, c.rows[t] = (uint8_t)(k / 4);
    /* as an asm with the struct as its operand: GCC 12 drops the stores to c before
     * _tile_loadconfig (the builtin is not seen to read them) */
    __asm__ volatile("ldtilecfg %0" : : "m"(c));
}

static uint8_t amx_a[2][1024] __attribute__((aligned(64))), amx_b[2][1024] __attribute__((aligned(64)));

__attribute__((target("amx-tile,amx-int8,avx512f"))) static uint64_t run_amx_dp(long iters)
{
    amx_config(64);
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    _tile_loadd(4, amx_a[0], 64); _tile_loadd(5, amx_a[1], 64);
    _tile_loadd(6, amx_b[0], 64); _tile_loadd(7, amx_b[1], 64);
    for (long i = 0; i < iters; i++) {
        _tile_dpbusd(0, 4, 6); _tile_dpbusd(1, 4, 7); _tile_dpbusd(2, 5, 6); _tile_dpbusd(3, 5, 7);
    }
    int32_t out[256] __attribute__((aligned(64)));
    _tile_stored(0, out, 64);
    _tile_release();
    return (uint64_t)out[0];
}

/* 2 x 2 tiles of one block (K = 32) from loaded operands, each C tile stored; with post, the
 * previous block's four tiles read back: acc = fma(float(row), d, acc), 64 rows */
__attribute__((target("amx-tile,amx-int8,avx512f"))) static uint64_t amx_blocks(long iters, int post)
{
    static int32_t cb[2][4][256] __attribute__((aligned(64)));
    amx_config(32);
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    const __m512 d = _mm512_set1_ps(1.0f);
    for (long i = 0; i < iters; i++) {
        const int s = (int)(i & 1);
        _tile_loadd(4, amx_a[0], 32); _tile_loadd(5, amx_a[1], 32);
        _tile_loadd(6, amx_b[0], 64); _tile_loadd(7, amx_b[1], 64);
        _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
        _tile_dpbusd(0, 4, 6); _tile_dpbusd(1, 4, 7); _tile_dpbusd(2, 5, 6); _tile_dpbusd(3, 5, 7);
        _tile_stored(0, cb[s][0], 64); _tile_stored(1, cb[s][1], 64);
        _tile_stored(2, cb[s][2], 64); _tile_stored(3, cb[s][3], 64);
        if (post && i > 0)
            for (int t = 0; t < 4; t++)
                for (int r = 0; r < 16; r += 2) {
                    const int32_t *row = cb[s ^ 1][t] + 16 * r;
                    acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(row)), d, acc0);
                    acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(row + 16)), d, acc1);
                }
    }
    _tile_release();
    float o[16];
    _mm512_storeu_ps(o, _mm512_add_ps(acc0, acc1));
    return (uint64_t)o[0] + (uint64_t)cb[0][0][0];
}

static uint64_t run_amx_dp_store(long iters) { return amx_blocks(iters, 0); }
static uint64_t run_amx_scaled(long iters) { return amx_blocks(iters, 1); }
#endif

struct test {
    const char *name;
    uint64_t (*run)(long);
    double macs_per_iter;
    long iters; /* loop iterations per timed run */
    int amx;    /* needs AMX (skipped without it) */
};

#if HAVE_PROBE
static const struct test tests[] = {
    {"dpbusd-zmm", run_dpbusd_zmm, 16 * 64, ITERS, 0},
    {"dpbusd-ymm", run_dpbusd_ymm, 16 * 32, ITERS, 0},
    {"exact-zmm", run_exact_zmm, 8 * 64, ITERS, 0},
#if HAVE_AMX_PROBE
    {"amx-dp", run_amx_dp, 4 * 16 * 16 * 64, ITERS / 16, 1},
    {"amx-dp-store", run_amx_dp_store, 4 * 16 * 16 * 32, ITERS / 32, 1},
    {"amx-scaled", run_amx_scaled, 4 * 16 * 16 * 32, ITERS / 32, 1},
#endif
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
    th->sink = th->t->run(th->t->iters);
    const double t1 = now_s();
    th->gmacs = th->t->macs_per_iter * (double)th->t->iters / (t1 - t0) / 1e9;
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
#if HAVE_AMX_PROBE
    const int amx = amx_available();
#else
    const int amx = 0;
#endif
    for (size_t k = 0; k < N_TESTS; k++) {
        if (tests[k].amx && !amx) {
            if (!quiet)
                printf("%-12s   (no AMX-INT8 usable here: skipped)\n", tests[k].name);
            continue;
        }
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
