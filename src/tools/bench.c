/*
 * bench.c - llamachat-bench: prompt-processing and generation speed, as llama-bench measures it.
 *
 *   pp<P>: evaluate one batch of P random tokens from an empty KV cache (compute-bound: the
 *          batched matrix products); t/s = P / time.
 *   tg<N>: from an empty cache, decode N tokens one at a time (memory-bound: every weight byte
 *          is read once per token); t/s = N / time.
 *
 * Each test runs once untimed on a short input (a warm-up that faults the mapped weights in and
 * wakes the thread pool: a batch of up to 32 tokens, or one token), then REPS timed repetitions; the table gives the median and the min-max of the
 * repetitions' t/s.  Random token ids come from a fixed seed, so runs are comparable: the
 * content of the tokens does not change the work done.
 *
 * With -d D (llama-bench's --n-depth, ik_llama.cpp's sweep-bench), each test starts from a
 * cache already holding D random tokens (filled untimed in prompt batches): tg128 @ d2048 is
 * the decode speed with 2048 to 2175 tokens of context, the cost of attention over a long chat.
 *
 * Usage: llamachat-bench -m MODEL [-p 512] [-n 128] [-d 0] [-t N] [-r REPS] [--isa NAME]
 *                        [-ctk TYPE] [-ctv TYPE] [-fa 0|1] [--fast-math] [--cpu-time]
 * Several -m, -p, -n, -d or -t values may be given as comma-separated lists, as in llama-bench;
 * each combination is a row.  -p 0 or -n 0 skips that test.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "llm/arch/kernels.h"
#include "llm/context.h"
#include "llm/model.h"
#include "llm/quant.h"
#include "util.h"

const char *const lc_tool_name = "llamachat-bench";

#define MAX_LIST 16

struct int_list {
    int n;
    long v[MAX_LIST];
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: llamachat-bench -m MODEL [options]\n"
            "  -m, --model FILES    GGUF model(s), comma-separated\n"
            "  -p, --n-prompt N     prompt tokens for the pp test (default 512, 0 = skip)\n"
            "  -n, --n-gen N        generated tokens for the tg test (default 128, 0 = skip)\n"
            "  -d, --n-depth N      tokens already in the KV cache when a test starts (default 0)\n"
            "  -t, --threads N      threads (default: all CPUs)\n"
            "  -r, --repetitions N  timed repetitions per test (default 5)\n"
            "      --isa NAME       force kernels: scalar, avx2, avx512, neon, auto\n"
            "      --kv-f32         keep the KV cache in f32 (default f16)\n"
            "      --cache-type TYPE\n"
            "  -ctk, --cache-type-k TYPE\n"
            "  -ctv, --cache-type-v TYPE\n"
            "                       KV cache type: f16 (default), f32, q8_0 (K and V alike:\n"
            "                       the last one given counts)\n"
            "  -fa, --flash-attn 0|1\n"
            "                       fused one-pass attention (default 0; q8_0 implies 1)\n"
            "      --fast-math      prompt batches in a faster float order where a kernel has one\n"
            "                       (AVX-512 Q4_1, Q8_0, Q5_0, IQ4_NL, Q4_K, Q5_K): not\n"
            "                       llama.cpp's bits\n"
            "      --cpu-time       add a column: process CPU time per token (median), ms; with\n"
            "                       -t 1 this is the cost of a token however busy the machine is\n"
            "  -h, --help           this help\n"
            "N may be a comma-separated list (-t 1,2); each combination is one row.\n");
}

/* Parse "a,b,c" of integers in [lo, hi] into l.  0 or -1 with a message. */
static int parse_list(const char *opt, const char *s, long lo, long hi, struct int_list *l)
{
    l->n = 0;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || (*end && *end != ',') || v < lo || v > hi || l->n == MAX_LIST) {
            fprintf(stderr, "llamachat-bench: %s: '%s' is not a list of integers in [%ld, %ld]\n",
                    opt, s, lo, hi);
            return -1;
        }
        l->v[l->n++] = v;
        if (!*end)
            return 0;
        p = end + 1;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of n sorted values. */
static double median(const double *v, long n)
{
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* xorshift64*: the random prompt tokens. */
static uint32_t rand_u32(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return (uint32_t)((x * 0x2545F4914F6CDD1Dull) >> 32);
}

/* CPU time of the whole process (all threads), seconds. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * One timed run of a test: pp (n_prompt tokens in one call) or tg (n_gen single-token calls),
 * from an empty cache.  Returns the elapsed seconds (and the process CPU seconds in *cpu), or a
 * negative value after printing the error.
 */
static double run_test(struct lc_context *ctx, int32_t *toks, int depth, int n_prompt, int n_gen,
                       int32_t n_vocab, uint64_t *rng, double *cpu)
{
    char *err = NULL;
    const int n = n_prompt ? n_prompt : n_gen;
    /* the depth: filled once per context (the cache keeps it), then truncated back to it */
    if (lc_context_n_past(ctx) < depth) {
        for (int i = 0; i < depth; i++)
            toks[i] = (int32_t)(rand_u32(rng) % (uint32_t)n_vocab);
        if (lc_context_decode(ctx, toks, depth, 0, false, &err))
            goto fail;
    }
    lc_context_truncate(ctx, depth);
    for (int i = 0; i < n; i++)
        toks[i] = (int32_t)(rand_u32(rng) % (uint32_t)n_vocab);
    double c0 = cpu_s(), t0 = now_s();
    if (n_prompt) {
        if (lc_context_decode(ctx, toks, n_prompt, depth, false, &err))
            goto fail;
    } else {
        for (int i = 0; i < n_gen; i++)
            if (lc_context_decode(ctx, &toks[i], 1, depth + i, false, &err))
                goto fail;
    }
    double dt = now_s() - t0;
    if (cpu)
        *cpu = cpu_s() - c0;
    return dt;
fail:
    fprintf(stderr, "llamachat-bench: decode: %s\n", err ? err : "failed");
    free(err);
    return -1.0;
}

/*
 * Bytes of weights one generated token reads: every tensor once, except the token embedding,
 * of which only the token's row is read -- unless the output projection is tied to it, in
 * which case all of it is read by the logits product.  This is what the memory bandwidth bound
 * of decoding divides by (bench/run.sh).
 */
static uint64_t bytes_per_token(const struct lc_model *m)
{
    uint64_t b = m->n_bytes;
    if (m->output.data != m->tok_embd.data)
        b -= (uint64_t)m->tok_embd.row_bytes * (uint64_t)m->tok_embd.ne[1] -
             (uint64_t)m->tok_embd.row_bytes;
    return b;
}

static void human_size(uint64_t bytes, char *buf, size_t len)
{
    if (bytes >= (1ull << 30))
        snprintf(buf, len, "%.2f GiB", (double)bytes / (double)(1ull << 30));
    else
        snprintf(buf, len, "%.2f MiB", (double)bytes / (double)(1ull << 20));
}

int main(int argc, char **argv)
{
    const char *models = NULL, *isa = NULL;
    struct int_list n_prompt = {1, {512}}, n_gen = {1, {128}}, threads = {0, {0}},
                    depths = {1, {0}};
    long reps = 5;
    bool cpu_time = false, flash_attn = false, fast_math = false;
    enum lc_type kv_type = LC_TYPE_F16;
    lc_check_stdout_at_exit();   /* results lost to a full disk: exit 1 */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--kv-f32")) {
            kv_type = LC_TYPE_F32;
            continue;
        }
        if (!strcmp(a, "--cpu-time")) {
            cpu_time = true;
            continue;
        }
        if (!strcmp(a, "--fast-math")) {
            fast_math = true;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "llamachat-bench: %s needs a value (see --help)\n", a);
            return 2;
        }
        const char *v = argv[++i];
        struct int_list one;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            models = v;
        } else if (!strcmp(a, "--isa")) {
            isa = v;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--n-prompt")) {
            if (parse_list(a, v, 0, 1 << 20, &n_prompt))
                return 2;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-gen")) {
            if (parse_list(a, v, 0, 1 << 20, &n_gen))
                return 2;
        } else if (!strcmp(a, "-d") || !strcmp(a, "--n-depth")) {
            if (parse_list(a, v, 0, 1 << 20, &depths))
                return 2;
        } else if (!strcmp(a, "-ctk") || !strcmp(a, "-ctv") || !strcmp(a, "--cache-type") ||
                   !strcmp(a, "--cache-type-k") || !strcmp(a, "--cache-type-v")) {
            if (!strcmp(v, "f16"))
                kv_type = LC_TYPE_F16;
            else if (!strcmp(v, "f32"))
                kv_type = LC_TYPE_F32;
            else if (!strcmp(v, "q8_0"))
                kv_type = LC_TYPE_Q8_0;
            else {
                fprintf(stderr, "llamachat-bench: %s: '%s' is not f16, f32 or q8_0\n", a, v);
                return 2;
            }
        } else if (!strcmp(a, "-fa") || !strcmp(a, "--flash-attn")) {
            if (parse_list(a, v, 0, 1, &one) || one.n != 1)
                return 2;
            flash_attn = one.v[0] != 0;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (parse_list(a, v, 1, 1024, &threads))
                return 2;
        } else if (!strcmp(a, "-r") || !strcmp(a, "--repetitions")) {
            if (parse_list(a, v, 1, 1000, &one) || one.n != 1)
                return 2;
            reps = one.v[0];
        } else {
            fprintf(stderr, "llamachat-bench: unknown option '%s' (see --help)\n", a);
            return 2;
        }
    }
    if (!models) {
        fprintf(stderr, "llamachat-bench: no model: -m MODEL (see --help)\n");
        return 2;
    }
    if (threads.n == 0) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        threads.n = 1, threads.v[0] = nc > 0 ? nc : 1;
    }
    /* --isa, else LLAMACHAT_ISA (a forced ISA the CPU lacks is an error, not a fallback). */
    const char *isa_req = isa ? isa : getenv("LLAMACHAT_ISA");
    if (isa_req && *isa_req) {
        char *err = NULL;
        if (lc_kernels_select(isa_req, &err)) {
            fprintf(stderr, "llamachat-bench: %s: %s\n", isa ? "--isa" : "LLAMACHAT_ISA", err);
            free(err);
            return 2;
        }
    }
    char isa_name[64];
    snprintf(isa_name, sizeof isa_name, "%s%s", lc_kernels()->isa, fast_math ? " fast-math" : "");

    printf("| model | size | type | threads | ISA | test | t/s (median) | t/s (min - max) |%s\n",
           cpu_time ? " CPU ms/token |" : "");
    printf("| --- | ---: | --- | ---: | --- | ---: | ---: | ---: |%s\n", cpu_time ? " ---: |" : "");
    fflush(stdout);

    char *list = strdup(models);
    int status = 0;
    for (char *save = NULL, *path = strtok_r(list, ",", &save); path;
         path = strtok_r(NULL, ",", &save)) {
        char *err = NULL;
        double t_load = now_s();
        struct lc_model *m = lc_model_load(path, false, &err);
        if (!m) {
            fprintf(stderr, "llamachat-bench: %s\n", err ? err : path);
            free(err);
            status = 1;
            continue;
        }
        t_load = now_s() - t_load;
        char size[32], name[160];
        human_size(m->n_bytes, size, sizeof(size));
        snprintf(name, sizeof(name), "%s", m->name);
        fprintf(stderr,
                "llamachat-bench: loaded %s in %.3f s: %llu bytes of tensors, %llu bytes of "
                "weights read per generated token\n",
                path, t_load, (unsigned long long)m->n_bytes,
                (unsigned long long)bytes_per_token(m));
        long max_p = 0, max_n = 0, max_d = 0;
        for (int i = 0; i < depths.n; i++)
            max_d = depths.v[i] > max_d ? depths.v[i] : max_d;
        for (int i = 0; i < n_prompt.n; i++)
            max_p = n_prompt.v[i] > max_p ? n_prompt.v[i] : max_p;
        for (int i = 0; i < n_gen.n; i++)
            max_n = n_gen.v[i] > max_n ? n_gen.v[i] : max_n;
        int32_t *toks = malloc((size_t)(max_p + max_n + max_d + 1) * sizeof(*toks));
        double *tps = malloc((size_t)reps * sizeof(*tps));
        double *cms = malloc((size_t)reps * sizeof(*cms));
        if (!toks || !tps || !cms) {
            fprintf(stderr, "llamachat-bench: out of memory\n");
            return 1;
        }
        for (int it = 0; it < threads.n; it++) {
            struct lc_context_params cp = lc_context_default_params();
            cp.n_threads = (int32_t)threads.v[it];
            cp.n_ctx = (int32_t)(max_d + (max_p > max_n ? max_p : max_n));
            if (cp.n_ctx < 16)
                cp.n_ctx = 16;
            cp.n_batch = (int32_t)(max_p > 0 ? max_p : 512);
            cp.kv_type = kv_type;
            cp.flash_attn = flash_attn;
            cp.fast_math = fast_math;
            struct lc_context *ctx = lc_context_new(m, &cp, &err);
            if (!ctx) {
                fprintf(stderr, "llamachat-bench: %s: %s\n", path, err ? err : "no context");
                free(err);
                status = 1;
                continue;
            }
            uint64_t rng = 0x853c49e6748fea9bull;
            /* Each (depth, test, size): pp rows first, then tg rows, as llama-bench orders them. */
            for (int id = 0; id < depths.n; id++)
            for (int kind = 0; kind < 2; kind++) {
                const int depth = (int)depths.v[id];
                lc_context_truncate(ctx, 0);
                const struct int_list *sizes = kind == 0 ? &n_prompt : &n_gen;
                for (int is = 0; is < sizes->n; is++) {
                    const int n = (int)sizes->v[is];
                    if (n == 0)
                        continue;
                    const int np = kind == 0 ? n : 0, ng = kind == 0 ? 0 : n;
                    /* Warm-up: a short batch or one token; either reads every weight once. */
                    if (run_test(ctx, toks, depth, np < 32 ? np : 32, kind == 0 ? 0 : 1,
                                 m->hp.n_vocab, &rng, NULL) < 0) {
                        status = 1;
                        break;
                    }
                    int ok = 1;
                    for (long r = 0; r < reps && ok; r++) {
                        double cpu = 0;
                        double dt = run_test(ctx, toks, depth, np, ng, m->hp.n_vocab, &rng, &cpu);
                        if (dt < 0)
                            ok = 0;
                        else
                            tps[r] = (double)n / dt, cms[r] = 1e3 * cpu / (double)n;
                    }
                    if (!ok) {
                        status = 1;
                        break;
                    }
                    qsort(tps, (size_t)reps, sizeof(*tps), cmp_double);
                    qsort(cms, (size_t)reps, sizeof(*cms), cmp_double);
                    char depth_s[32] = "";
                    if (depth)
                        snprintf(depth_s, sizeof(depth_s), " @ d%d", depth);
                    printf("| %s | %s | %s | %d | %s | %s%d%s | %.2f | %.2f - %.2f |", name, size,
                           lc_type_name(m->ftype), lc_context_n_threads(ctx), isa_name,
                           kind == 0 ? "pp" : "tg", n, depth_s, median(tps, reps), tps[0],
                           tps[reps - 1]);
                    if (cpu_time)
                        printf(" %.2f |", median(cms, reps));
                    printf("\n");
                    fflush(stdout);
                }
            }
            lc_context_free(ctx);
        }
        free(toks);
        free(tps);
        free(cms);
        lc_model_free(m);
    }
    free(list);
    return status;
}
