/*
 * resume.c - llamachat-resume: the time from start to the first new token of a reopened chat,
 * with its KV state file and without it, through the real engine (engine.h), for bench/resume.sh.
 *
 *   llamachat-resume MODEL TOKENS ROUNDS [THREADS]
 *
 * Preparation: a conversation of about TOKENS tokens (turns of a fixed English text, counted
 * with the model's tokenizer) whose last reply the model writes itself (32 tokens, greedy),
 * then the KV state saved as a chat would (lc_engine_save_state) to $TMPDIR/llamachat-resume.kv.
 * Then ROUNDS rounds, each timing both ways in turn (alternating, for a shared machine): a new
 * engine is started (the model's pages are in the page cache after the first), given the
 * conversation (and the state file), a short user message is sent, and the clock stops at the
 * first token of the reply (-n 1).  One line per run: seconds from start to the first token,
 * of which loading the model, reading the state, and the reply; prompt tokens evaluated.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../src/chat.h"
#include "../src/engine.h"
#include "../src/llm/model.h"
#include "../src/llm/tokenizer.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct done {
    int reason, n_gen, n_eval;
    char *text;   /* reply text (malloc'd) */
    size_t len;
};

/* Events until DONE (or LOADED); false on an error or after 20 minutes. */
static bool wait_for(struct lc_engine *e, bool loaded, struct done *d)
{
    memset(d, 0, sizeof(*d));
    bool note_more = false;
    for (int spins = 0; spins < 12000;) {
        struct lc_event ev;
        if (!lc_engine_poll(e, &ev)) {
            struct pollfd p = { lc_engine_fd(e), POLLIN, 0 };
            if (poll(&p, 1, 100) == 0)
                spins++;
            continue;
        }
        if (ev.type == LC_EV_LOADED && loaded && !ev.more)
            return true;
        if (ev.type == LC_EV_ERROR) {
            fprintf(stderr, "engine: %.*s\n", (int)ev.len, ev.text);
            if (loaded)
                return false;
        }
        if (ev.type == LC_EV_NOTE) {   /* a long note comes in several records */
            fprintf(stderr, "%s%.*s%s", note_more ? "" : "note: ", (int)ev.len, ev.text,
                    ev.more ? "" : "\n");
            note_more = ev.more;
        }
        if (ev.type == LC_EV_TEXT) {
            char *t = realloc(d->text, d->len + ev.len + 1);
            if (t) {
                memcpy(t + d->len, ev.text, ev.len);
                d->text = t;
                d->len += ev.len;
                t[d->len] = '\0';
            }
        }
        if (ev.type == LC_EV_DONE) {
            d->reason = ev.a;
            d->n_gen = ev.b;
            d->n_eval = (int)ev.x;
            return true;
        }
    }
    return false;
}

static struct lc_engine *start(const char *model, int n_predict, int threads)
{
    struct lc_engine_config cfg = { .model_path = model, .n_ctx = 4096, .n_threads = threads,
                                    .n_batch = 512, .n_predict = n_predict };
    cfg.sampling = lc_sampler_default_params();
    cfg.sampling.temp = 0;
    char *err = NULL;
    struct lc_engine *e = lc_engine_start(&cfg, &err);
    struct done d;
    if (!e || !wait_for(e, true, &d)) {
        fprintf(stderr, "llamachat-resume: cannot start: %s\n", err ? err : "see above");
        exit(1);
    }
    return e;
}

static const char *text =
    "The old lighthouse keeper climbed the stairs every evening, counting the steps as his "
    "father had taught him, and wrote the weather in a book that nobody else would ever read. ";

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: llamachat-resume MODEL TOKENS ROUNDS [THREADS]\n");
        return 2;
    }
    const char *model = argv[1];
    const int target = atoi(argv[2]), rounds = atoi(argv[3]), threads = argc > 4 ? atoi(argv[4]) : 2;
    char *err = NULL;
    struct lc_model *vm = lc_model_load(model, true, &err);
    if (!vm) {
        fprintf(stderr, "llamachat-resume: %s\n", err ? err : "cannot load");
        return 1;
    }
    int32_t toks[1024];
    const int per = lc_tokenize(vm->vocab, text, strlen(text), false, false, toks, 1024);
    lc_model_free(vm);
    /* turns: user asks (one text), assistant answers (three texts) */
    struct lc_chat *conv = lc_chat_new();
    int n = 0;
    char buf[4096];
    for (int turn = 0; n < target - 64; turn++) {
        snprintf(buf, sizeof(buf), "Question %d: %s", turn + 1, text);
        lc_chat_add(conv, LC_ROLE_USER, buf, strlen(buf));
        n += per + 8;
        if (n >= target - 64)
            break;
        snprintf(buf, sizeof(buf), "%s%s%s", text, text, text);
        lc_chat_add(conv, LC_ROLE_ASSISTANT, buf, strlen(buf));
        n += 3 * per + 4;
    }
    if (conv->msgs[conv->n - 1].role == LC_ROLE_ASSISTANT)
        lc_chat_truncate(conv, conv->n - 1);

    char path[512];
    snprintf(path, sizeof(path), "%s/llamachat-resume.%d.kv", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    /* the last reply written by the model, and the state saved after it */
    struct lc_engine *e = start(model, 32, threads);
    lc_engine_set_conversation(e, conv);
    lc_engine_regen(e);
    struct done d;
    double t0 = now_s();
    if (!wait_for(e, false, &d)) {
        fprintf(stderr, "llamachat-resume: the preparation failed\n");
        return 1;
    }
    printf("preparation: %d prompt tokens evaluated in %.1f s, reply of %d tokens\n", d.n_eval,
           now_s() - t0, d.n_gen);
    lc_chat_add(conv, LC_ROLE_ASSISTANT, d.text ? d.text : "", d.len);
    free(d.text);
    lc_engine_save_state(e, path);
    lc_engine_free(e);   /* the queued save is written first */
    const char *msg = "And what did he write on the last page?";
    lc_chat_add(conv, LC_ROLE_USER, msg, strlen(msg));

    printf("%-8s %8s %8s %8s %8s %8s\n", "run", "first_s", "load_s", "state_s", "reply_s", "n_eval");
    double sum[2] = { 0, 0 };
    for (int r = 0; r < rounds; r++)
        for (int with = 1; with >= 0; with--) {
            double a = now_s();
            e = start(model, 1, threads);
            double b = now_s();
            lc_engine_set_conversation(e, conv);
            if (with) {
                lc_engine_load_state(e, path);
                wait_for(e, false, &d);
                free(d.text);
            }
            double c = now_s();
            lc_engine_regen(e);   /* the last message is the user's: the reply to it */
            if (!wait_for(e, false, &d))
                return 1;
            double z = now_s();
            free(d.text);
            printf("%-8s %8.2f %8.2f %8.2f %8.2f %8d\n", with ? "with" : "without", z - a, b - a,
                   c - b, z - c, d.n_eval);
            fflush(stdout);
            sum[with] += z - a;
            lc_engine_free(e);
        }
    printf("mean start to first token: with the state file %.2f s, without %.2f s (%d rounds)\n",
           sum[1] / rounds, sum[0] / rounds, rounds);
    unlink(path);
    lc_chat_free(conv);
    return 0;
}
