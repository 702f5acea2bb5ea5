/*
 * bandwidth.c - llamachat-bandwidth: how fast can this machine read memory?
 *
 * Decoding one token reads every weight byte once, so the memory read bandwidth bounds the
 * decode speed: tokens/s <= bandwidth / bytes of weights.  This probe measures that bandwidth
 * the way the decoder sees it: a buffer much larger than the last-level cache (default 1 GiB)
 * is split into one contiguous slice per thread, and every thread sums the 64-bit words of its
 * slice with eight independent accumulators (so the adds never wait for each other and the
 * loads are the only limit).  The sums are combined and printed, so the compiler cannot drop
 * the loop.  Plain loads are enough: the loop is bound by DRAM, not by instruction throughput.
 *
 * Each repetition starts all threads at a barrier and stops the clock when the last one has
 * finished; GB/s = buffer bytes / elapsed / 1e9.  The best and the median over the
 * repetitions are reported (the best is the machine, the median shows the noise from others
 * sharing it).
 *
 * Usage: llamachat-bandwidth [-t THREADS] [--size MIB] [-r REPS] [--quiet]
 *   --quiet prints only "best median" in GB/s (for scripts).
 *
 * Built without sanitizer instrumentation (see Makefile.am): ASan would check every load.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct bw_shared {
    uint64_t *buf;
    size_t n_words;
    int n_threads;
    int reps;
    pthread_barrier_t start, done;
};

struct bw_thread {
    struct bw_shared *sh;
    int ith;
    pthread_t tid;
    uint64_t sum; /* written after each pass so the loads have an observable effect */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void slice(size_t n, int ith, int nth, size_t *lo, size_t *hi)
{
    /* Slices of whole 64-byte lines (8 words) so no two threads share a cache line. */
    size_t lines = n / 8, per = lines / (size_t)nth, rem = lines % (size_t)nth;
    size_t i = (size_t)ith;
    *lo = 8 * (i * per + (i < rem ? i : rem));
    *hi = *lo + 8 * (per + (i < rem ? 1 : 0));
}

/* Sum of words [lo, hi), hi - lo a multiple of 8: eight accumulators, one per word of a line. */
static uint64_t sum_words(const uint64_t *p, size_t lo, size_t hi)
{
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    for (size_t i = lo; i < hi; i += 8) {
        a0 += p[i + 0];
        a1 += p[i + 1];
        a2 += p[i + 2];
        a3 += p[i + 3];
        a4 += p[i + 4];
        a5 += p[i + 5];
        a6 += p[i + 6];
        a7 += p[i + 7];
    }
    return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
}

static void *bw_worker(void *arg)
{
    struct bw_thread *t = arg;
    struct bw_shared *sh = t->sh;
    size_t lo, hi;
    slice(sh->n_words, t->ith, sh->n_threads, &lo, &hi);
    /* First touch by the reading thread: the pages land on its NUMA node. */
    for (size_t i = lo; i < hi; i++)
        sh->buf[i] = (uint64_t)i * 0x9E3779B97F4A7C15ull;
    for (int r = 0; r < sh->reps + 1; r++) {   /* +1: a warm-up pass */
        pthread_barrier_wait(&sh->start);
        uint64_t s = sum_words(sh->buf, lo, hi);
        __atomic_store_n(&t->sum, t->sum + s, __ATOMIC_RELAXED);
        pthread_barrier_wait(&sh->done);
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: llamachat-bandwidth [-t THREADS] [--size MIB] [-r REPS] [--quiet]\n"
               "  reads a buffer of MIB MiB (default 1024) with THREADS threads (default: all\n"
               "  CPUs), REPS times (default 10); prints the best and median read GB/s.\n");
}

int main(int argc, char **argv)
{
    long n_threads = sysconf(_SC_NPROCESSORS_ONLN);
    long size_mib = 1024, reps = 10;
    int quiet = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long *dst = NULL;
        if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            dst = &n_threads;
        else if (!strcmp(a, "-s") || !strcmp(a, "--size"))
            dst = &size_mib;
        else if (!strcmp(a, "-r") || !strcmp(a, "--reps"))
            dst = &reps;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = 1;
            continue;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "llamachat-bandwidth: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "llamachat-bandwidth: %s needs a value\n", a);
            return 2;
        }
        char *end;
        errno = 0;
        *dst = strtol(argv[++i], &end, 10);
        if (errno || *end || *dst < 1) {
            fprintf(stderr, "llamachat-bandwidth: %s: '%s' is not a positive integer\n", a, argv[i]);
            return 2;
        }
    }
    if (n_threads < 1)
        n_threads = 1;
    if (n_threads > 1024 || size_mib > (1L << 20) || reps > 100000) {
        fprintf(stderr, "llamachat-bandwidth: value out of range\n");
        return 2;
    }

    struct bw_shared sh = {0};
    size_t bytes = (size_t)size_mib << 20;
    sh.n_words = bytes / 8;
    sh.n_threads = (int)n_threads;
    sh.reps = (int)reps;
    /* mmap rather than malloc: page-aligned, and no copy of a huge zeroed area. */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "llamachat-bandwidth: cannot map %ld MiB: %s\n", size_mib, strerror(errno));
        return 1;
    }
    sh.buf = p;
    pthread_barrier_init(&sh.start, NULL, (unsigned)n_threads + 1);
    pthread_barrier_init(&sh.done, NULL, (unsigned)n_threads + 1);
    struct bw_thread *th = calloc((size_t)n_threads, sizeof *th);
    double *gbs = calloc((size_t)reps + 1, sizeof *gbs);
    if (!th || !gbs) {
        fprintf(stderr, "llamachat-bandwidth: out of memory\n");
        return 1;
    }
    for (int i = 0; i < n_threads; i++) {
        th[i].sh = &sh;
        th[i].ith = i;
        int rc = pthread_create(&th[i].tid, NULL, bw_worker, &th[i]);
        if (rc) {
            fprintf(stderr, "llamachat-bandwidth: pthread_create: %s\n", strerror(rc));
            return 1;
        }
    }
    size_t lo, hi, read_bytes = 0;
    for (int i = 0; i < n_threads; i++) {
        slice(sh.n_words, i, (int)n_threads, &lo, &hi);
        read_bytes += (hi - lo) * 8;
    }
    for (int r = 0; r < reps + 1; r++) {
        pthread_barrier_wait(&sh.start);
        double t0 = now_s();
        pthread_barrier_wait(&sh.done);
        double dt = now_s() - t0;
        gbs[r] = (double)read_bytes / dt * 1e-9;
    }
    uint64_t total = 0;
    for (int i = 0; i < n_threads; i++) {
        pthread_join(th[i].tid, NULL);
        total += th[i].sum;
    }
    /* gbs[0] is the warm-up pass. */
    qsort(gbs + 1, (size_t)reps, sizeof *gbs, cmp_double);
    double best = gbs[reps], median = reps % 2 ? gbs[1 + reps / 2]
                                               : 0.5 * (gbs[reps / 2] + gbs[reps / 2 + 1]);
    if (quiet) {
        printf("%.2f %.2f\n", best, median);
    } else {
        printf("read bandwidth: %ld thread%s, %ld MiB buffer, %ld reps: best %.2f GB/s, "
               "median %.2f GB/s, worst %.2f GB/s\n",
               n_threads, n_threads == 1 ? "" : "s", size_mib, reps, best, median, gbs[1]);
        printf("(checksum %016llx)\n", (unsigned long long)total);
    }
    free(gbs);
    free(th);
    pthread_barrier_destroy(&sh.start);
    pthread_barrier_destroy(&sh.done);
    munmap(p, bytes);
    return 0;
}
