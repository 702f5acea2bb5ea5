/*
 * chat-turns.c - llamachat-chat-turns: the latency of chat turns as the context fills, through
 * the real engine (engine.h), for bench/chat-turns.sh.
 *
 *   llamachat-chat-turns MODEL N_CTX TURNS N_PREDICT [THREADS]
 *
 * Each turn submits the same short user message and waits for the reply (greedy, N_PREDICT
 * tokens).  One line per turn: wall time from submit to done, prompt tokens evaluated, tokens in
 * the KV cache after it, and "full" once the context has been full.  The summary compares the
 * median turn while the cache is at most half full with the median turn after it first filled:
 * with a context shift a full-context turn evaluates only its own tokens; without one it
 * re-reads the kept history every time (LLAMACHAT_NO_SHIFT=1 for the comparison).
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/engine.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    if (n == 0)
        return 0;
    qsort(v, (size_t)n, sizeof(*v), cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Wait for DONE (or LOADED); returns the DONE reason, -1 on error/timeout. */
static int wait_done(struct lc_engine *e, bool loaded, int *n_eval, int *n_past, bool *note)
{
    for (int spins = 0; spins < 6000;) {
        struct lc_event ev;
        if (!lc_engine_poll(e, &ev)) {
            struct pollfd p = { lc_engine_fd(e), POLLIN, 0 };
            if (poll(&p, 1, 100) == 0)
                spins++;
            continue;
        }
        if (ev.type == LC_EV_LOADED && loaded && !ev.more)
            return 0;
        if (ev.type == LC_EV_ERROR) {
            fprintf(stderr, "engine: %.*s\n", (int)ev.len, ev.text);
            if (loaded)
                return -1;
        }
        if (ev.type == LC_EV_NOTE && note)
            *note = true;
        if (ev.type == LC_EV_STATS && n_past)
            *n_past = ev.a;
        if (ev.type == LC_EV_DONE) {
            if (n_eval)
                *n_eval = (int)ev.x;
            return ev.a;
        }
    }
    return -1;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL N_CTX TURNS N_PREDICT [THREADS]\n", argv[0]);
        return 2;
    }
    int n_ctx = atoi(argv[2]), turns = atoi(argv[3]), n_predict = atoi(argv[4]);
    struct lc_engine_config cfg = { .model_path = argv[1], .n_ctx = n_ctx,
                                    .n_threads = argc > 5 ? atoi(argv[5]) : 0, .n_batch = 512,
                                    .n_predict = n_predict };
    cfg.sampling = lc_sampler_default_params();
    cfg.sampling.temp = 0;
    char *err = NULL;
    struct lc_engine *e = lc_engine_start(&cfg, &err);
    if (!e || wait_done(e, true, NULL, NULL, NULL) != 0) {
        fprintf(stderr, "cannot start: %s\n", err ? err : "see above");
        return 1;
    }
    double *half = calloc((size_t)turns, sizeof(double)), *full = calloc((size_t)turns, sizeof(double));
    int n_half = 0, n_full = 0, eval_half = 0, eval_full = 0;
    bool was_full = false;
    printf("turn    ms  evaluated  n_past\n");
    for (int t = 0; t < turns; t++) {
        int n_eval = 0, n_past = 0;
        bool note = false;
        double t0 = now_s();
        lc_engine_submit(e, " Then Lily went to the park with her mom and saw a big dog.");
        if (wait_done(e, false, &n_eval, &n_past, &note) < 0)
            break;
        double ms = (now_s() - t0) * 1e3;
        was_full |= note;
        printf("%4d %6.1f %10d %7d%s\n", t + 1, ms, n_eval, n_past, note ? "  full: old turns dropped" : "");
        if (!was_full && n_past <= n_ctx / 2) {
            half[n_half++] = ms;
            eval_half += n_eval;
        } else if (was_full) {
            full[n_full++] = ms;
            eval_full += n_eval;
        }
    }
    double sum_h = 0, sum_f = 0, max_h = 0, max_f = 0;
    for (int i = 0; i < n_half; i++) {
        sum_h += half[i];
        max_h = half[i] > max_h ? half[i] : max_h;
    }
    for (int i = 0; i < n_full; i++) {
        sum_f += full[i];
        max_f = full[i] > max_f ? full[i] : max_f;
    }
    printf("at most half full: %d turns, %.1f tokens evaluated per turn, median %.1f ms, mean %.1f, "
           "max %.1f\n", n_half, n_half ? (double)eval_half / n_half : 0.0, median(half, n_half),
           n_half ? sum_h / n_half : 0.0, max_h);
    printf("once full:         %d turns, %.1f tokens evaluated per turn, median %.1f ms, mean %.1f, "
           "max %.1f\n", n_full, n_full ? (double)eval_full / n_full : 0.0, median(full, n_full),
           n_full ? sum_f / n_full : 0.0, max_f);
    lc_engine_free(e);
    free(half);
    free(full);
    return 0;
}
