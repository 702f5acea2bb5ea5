/*
 * engine.c - the inference thread (protocol and model in engine.h).
 *
 * Token bookkeeping: `cache` holds the token ids whose keys and values are in the KV cache, in
 * order (cache[i] is at position i).  A reply starts by rendering the conversation to text and
 * tokenizing it; the longest common prefix with `cache` is kept and only the rest is decoded at
 * pos = n_common (lc_context_decode truncates the cache there).  Sampled tokens are appended to
 * `cache` as they are decoded.  So the second turn of a chat costs only the new message's tokens,
 * and /regen, /clear, /system and /load need no special cache code: they change the text, and
 * the prefix comparison finds what is still valid.
 */
#include "engine.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/eventfd.h>
#endif

#include "llm/arch/kernels.h"
#include "llm/chat_template.h"
#include "llm/context.h"
#include "llm/gguf.h"
#include "llm/kvstate.h"
#include "llm/model.h"
#include "llm/sampler.h"
#include "llm/spec.h"
#include "llm/tokenizer.h"
#include "remote/remote.h"
#include "ring.h"

enum cmd_type { CMD_SUBMIT, CMD_REGEN, CMD_CLEAR, CMD_SYSTEM, CMD_CONV, CMD_MODELS, CMD_QUIT,
                CMD_UNDO, CMD_REPLY, CMD_LOAD, CMD_SHOW, CMD_KV_SAVE, CMD_KV_LOAD,
                CMD_KV_DELETE };

struct msg_toks;
struct kept_reply;

struct cmd {
    enum cmd_type type;
    char *text;
    struct lc_chat *conv;
    struct cmd *next;
};

struct lc_engine {
    pthread_t thread;
    bool started;
    /* command queue (UI -> engine) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct cmd *head, *tail;
    /* live parameters: written by the UI under mu, picked up between tokens */
    struct lc_sampler_params new_params;
    int32_t new_n_predict;
    atomic_bool params_changed;
    atomic_bool stop;
    atomic_int busy;          /* replies requested and not finished */
    atomic_bool quitting;
    /* events (engine -> UI) */
    struct lc_ring *ring;
    int wake_rd, wake_wr;     /* same descriptor for an eventfd */
    /* engine-thread state */
    char *model_path, *system_prompt, *template_name, *template_text;
    struct lc_context_params cparams;
    struct lc_sampler_params params;
    int32_t n_predict;
    struct lc_model *model;
    struct lc_context *ctx;
    struct lc_sampler *smp;
    struct lc_spec spec;      /* speculative decoding (spec.n_draft 0: off) */
    char *draft_path;         /* --draft: the draft model's file (NULL: prompt lookup) */
    struct lc_model *draft_model;   /* loaded with the first model, kept across switches */
    struct lc_context *draft_ctx;   /* as large as ctx */
    int tmpl;                 /* chat template id; LC_CHAT_TEMPLATE_NONE = plain continuation */
    struct lc_chat_tmpl *ct;  /* the template that renders: the model's Jinja or tmpl's family */
    char *tmpl_note;          /* the last note on a Jinja rendering that fell back (said once) */
    const char *const *stops; /* stop strings of the template */
    struct lc_chat *conv;
    int32_t *cache;
    int32_t n_cache, cap_cache;
    double last_stats;        /* monotonic seconds of the last STATS event */
    int32_t n_eval;           /* prompt tokens evaluated for the current reply */
    bool noted_full;          /* the context-full note was shown for the current reply */
    struct msg_toks *mt;      /* kept token ids per message of conv (mt_cap entries) */
    size_t mt_cap;
    struct kept_reply *kept;  /* earlier replies to the last user message (/regen), with their
                                 ids, for when the UI shows one of them again (CMD_REPLY) */
    size_t n_kept;
    uint64_t user_seed;       /* the seed asked for (LC_SEED_RANDOM: a fresh one per reply) */
    uint64_t reply_seed;      /* the seed the current reply was sampled with */
    bool seed_told;           /* reply_seed was reported (it is used: temp > 0) */
    FILE *log;                /* token log, or NULL */
    int32_t too_long;         /* tokens of a prompt that did not fit (sync_prompt -2) */
    int64_t n_shifted;        /* KV entries moved by context shifts instead of re-evaluated */
    bool no_shift;            /* LLAMACHAT_NO_SHIFT=1: re-evaluate instead (for benchmarks) */
    bool verbose_prompt;      /* NOTE the text of every prompt evaluation */
    size_t n_hidden;          /* messages after the system prompt that the model no longer
                                 reads (the context filled): conv->msgs[first_droppable,
                                 + n_hidden).  They stay in conv, so that conv is the UI's
                                 conversation message for message (/undo, /regen, /edit) */
    int slow_ms;              /* LLAMACHAT_TEST_SLOW_MS (tests): wait this long before each
                                 LC_EV_DONE and each model switch's load */
    int slow_save_ms;         /* LLAMACHAT_TEST_SLOW_SAVE_MS (tests): before each KV state write */
    int fail_after;           /* LLAMACHAT_TEST_FAIL_AFTER (tests): a reply's decode fails once it
                                 has this many tokens, as an error mid-reply (out of memory) */
    /* the last KV state written (lc_engine_save_state): not written again while the same */
    char *kv_saved_path;
    int32_t kv_saved_n;
    uint64_t kv_saved_hash;
    int64_t kv_saved_shifted;
    bool kv_save_failed;      /* a failure was reported; the next one is not */
    /* remote mode: replies from an OpenAI-compatible server (remote.h) */
    char *remote_url, *remote_model, *remote_key;
    int32_t remote_n_ctx;     /* the server's context per request (lc_remote_n_ctx), 0: not known */
    struct lc_remote *remote;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

/* ---------------------------------------------------------------- events */

static void wake(struct lc_engine *e)
{
#ifdef __linux__
    if (e->wake_rd == e->wake_wr) {
        uint64_t one = 1;
        ssize_t r = write(e->wake_wr, &one, sizeof(one));
        (void)r;   /* EAGAIN: the counter is saturated, the UI is awake anyway */
        return;
    }
#endif
    char c = 1;
    ssize_t r = write(e->wake_wr, &c, 1);
    (void)r;       /* EAGAIN: the pipe is full, the UI has wake-ups pending */
}

/* Push one record; when the ring is full, wait for the UI to drain it. */
static void push(struct lc_engine *e, const struct lc_event *ev)
{
    while (!lc_ring_push(e->ring, ev)) {
        wake(e);
        struct timespec ts = { 0, 500000 };
        nanosleep(&ts, NULL);
    }
}

static void emit(struct lc_engine *e, int type, int32_t a, int32_t b, double x, double y)
{
    struct lc_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = (uint8_t)type;
    ev.a = a;
    ev.b = b;
    ev.x = x;
    ev.y = y;
    push(e, &ev);
    wake(e);
}

static void emit_text(struct lc_engine *e, int type, const char *s, size_t len)
{
    struct lc_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = (uint8_t)type;
    do {
        size_t n = len < LC_EVENT_TEXT ? len : LC_EVENT_TEXT;
        memcpy(ev.text, s, n);
        ev.len = (uint8_t)n;
        ev.more = len > n;
        push(e, &ev);
        s += n;
        len -= n;
    } while (len > 0);
    wake(e);
}

static void emit_str(struct lc_engine *e, int type, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void emit_str(struct lc_engine *e, int type, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n >= 0)
        emit_text(e, type, s, (size_t)n);
    free(s);
}

static void emit_stats(struct lc_engine *e)
{
    struct lc_context_stats st;
    lc_context_stats(e->ctx, &st);
    e->last_stats = now_s();
    emit(e, LC_EV_STATS, e->n_cache, lc_context_n_ctx(e->ctx),
         st.t_prompt_s > 0 ? (double)st.n_prompt_tokens / st.t_prompt_s : 0.0,
         st.t_gen_s > 0 ? (double)st.n_gen_tokens / st.t_gen_s : 0.0);
}

/* LLAMACHAT_TEST_SLOW_MS: tests widen the windows in which the UI must count the engine as
 * busy (a model switch loading, a reply not reported done yet). */
static void test_slow(const struct lc_engine *e)
{
    if (e->slow_ms > 0) {
        struct timespec ts = { e->slow_ms / 1000, (long)(e->slow_ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
    }
}

/*
 * The end of a command that counts as busy (a reply, /regen, a model switch): the stop flag
 * cleared, the engine no longer busy, then LC_EV_DONE (a: reason, b: tokens generated, x: prompt
 * tokens evaluated, y: seconds), in that order, so that a UI that has seen DONE finds
 * lc_engine_busy false.
 */
static void finish(struct lc_engine *e, int reason, int32_t n_gen, double x, double y)
{
    test_slow(e);
    atomic_store(&e->stop, false);
    atomic_fetch_sub(&e->busy, 1);
    emit(e, LC_EV_DONE, reason, n_gen, x, y);
}

bool lc_engine_poll(struct lc_engine *e, struct lc_event *ev)
{
    if (lc_ring_pop(e->ring, ev))
        return true;
    /* Empty: clear the wake-up, then look again, so that a record pushed meanwhile is either
     * seen now or followed by a fresh wake-up (the producer pushes before it writes). */
    char buf[64];
    while (read(e->wake_rd, buf, sizeof(buf)) > 0)
        ;
    return lc_ring_pop(e->ring, ev);
}

int lc_engine_fd(const struct lc_engine *e)
{
    return e->wake_rd;
}

/* ---------------------------------------------------------------- commands */

static int enqueue(struct lc_engine *e, enum cmd_type t, const char *text, struct lc_chat *conv)
{
    struct cmd *c = calloc(1, sizeof(*c));
    if (!c)
        return -1;
    c->type = t;
    if (text && !(c->text = strdup(text))) {
        free(c);
        return -1;
    }
    c->conv = conv;
    pthread_mutex_lock(&e->mu);
    if (e->tail)
        e->tail->next = c;
    else
        e->head = c;
    e->tail = c;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return 0;
}

int lc_engine_submit(struct lc_engine *e, const char *text)
{
    atomic_store(&e->stop, false);   /* a stale Esc must not stop this reply */
    atomic_fetch_add(&e->busy, 1);
    if (enqueue(e, CMD_SUBMIT, text, NULL) != 0) {
        atomic_fetch_sub(&e->busy, 1);
        return -1;
    }
    return 0;
}

int lc_engine_regen(struct lc_engine *e)
{
    atomic_store(&e->stop, false);
    atomic_fetch_add(&e->busy, 1);
    if (enqueue(e, CMD_REGEN, NULL, NULL) != 0) {
        atomic_fetch_sub(&e->busy, 1);
        return -1;
    }
    return 0;
}

int lc_engine_clear(struct lc_engine *e)
{
    return enqueue(e, CMD_CLEAR, NULL, NULL);
}

int lc_engine_set_system(struct lc_engine *e, const char *text)
{
    return enqueue(e, CMD_SYSTEM, text && *text ? text : NULL, NULL);
}

int lc_engine_set_conversation(struct lc_engine *e, const struct lc_chat *c)
{
    struct lc_chat *copy = lc_chat_new();
    if (!copy)
        return -1;
    for (size_t i = 0; i < c->n; i++)
        if (lc_chat_add(copy, c->msgs[i].role, c->msgs[i].text, c->msgs[i].len) < 0) {
            lc_chat_free(copy);
            return -1;
        }
    if (enqueue(e, CMD_CONV, NULL, copy) != 0) {
        lc_chat_free(copy);
        return -1;
    }
    return 0;
}

int lc_engine_undo(struct lc_engine *e)
{
    return enqueue(e, CMD_UNDO, NULL, NULL);
}

int lc_engine_set_reply(struct lc_engine *e, const char *text)
{
    return enqueue(e, CMD_REPLY, text ? text : "", NULL);
}

int lc_engine_set_params(struct lc_engine *e, const struct lc_sampler_params *p, int32_t n_predict)
{
    pthread_mutex_lock(&e->mu);
    e->new_params = *p;
    e->new_n_predict = n_predict;
    atomic_store(&e->params_changed, true);
    pthread_mutex_unlock(&e->mu);
    return 0;
}

int lc_engine_models(struct lc_engine *e)
{
    return enqueue(e, CMD_MODELS, NULL, NULL);
}

int lc_engine_load_model(struct lc_engine *e, const char *path)
{
    atomic_store(&e->stop, false);
    atomic_fetch_add(&e->busy, 1);
    if (enqueue(e, CMD_LOAD, path, NULL) != 0) {
        atomic_fetch_sub(&e->busy, 1);
        return -1;
    }
    return 0;
}

int lc_engine_show(struct lc_engine *e)
{
    return enqueue(e, CMD_SHOW, NULL, NULL);
}

int lc_engine_save_state(struct lc_engine *e, const char *path)
{
    return enqueue(e, CMD_KV_SAVE, path, NULL);
}

int lc_engine_delete_state(struct lc_engine *e, const char *path)
{
    return enqueue(e, CMD_KV_DELETE, path, NULL);
}

int lc_engine_load_state(struct lc_engine *e, const char *path)
{
    atomic_store(&e->stop, false);
    atomic_fetch_add(&e->busy, 1);
    if (enqueue(e, CMD_KV_LOAD, path, NULL) != 0) {
        atomic_fetch_sub(&e->busy, 1);
        return -1;
    }
    return 0;
}

void lc_engine_stop(struct lc_engine *e)
{
    atomic_store(&e->stop, true);
}

bool lc_engine_busy(const struct lc_engine *e)
{
    return atomic_load(&e->busy) > 0;
}

/* LC_EV_INFO "seed=N" once the reply's seed is used: the first time it samples with a
 * temperature above 0.  Greedy (temp <= 0) draws nothing, so no seed is reported as used. */
static void report_seed(struct lc_engine *e)
{
    if (e->seed_told || e->params.temp <= 0.0f)
        return;
    e->seed_told = true;
    emit_str(e, LC_EV_INFO, "seed=%llu", (unsigned long long)e->reply_seed);
}

/* Take new parameters if the UI changed them; in_reply: between two tokens of a reply (its
 * sampler takes them at once), else before a reply's start_sampler (the last reply's sampler
 * is left alone: its seed is not this reply's, and reporting it would say so). */
static void pick_up_params(struct lc_engine *e, bool in_reply)
{
    if (!atomic_load_explicit(&e->params_changed, memory_order_acquire))
        return;
    pthread_mutex_lock(&e->mu);
    e->params = e->new_params;
    e->n_predict = e->new_n_predict;
    atomic_store(&e->params_changed, false);
    pthread_mutex_unlock(&e->mu);
    if (!e->smp || !in_reply)
        return;
    /* A seed given during a reply re-seeds at once; the same "random" keeps this reply's. */
    if (e->params.seed != e->user_seed) {
        e->user_seed = e->params.seed;
        e->reply_seed = e->params.seed == LC_SEED_RANDOM ? lc_sampler_random_seed() : e->params.seed;
        e->seed_told = false;
    }
    report_seed(e);   /* (a temperature raised from 0 during the reply starts using it) */
    struct lc_sampler_params p = e->params;
    p.seed = e->reply_seed;
    lc_sampler_set_params(e->smp, &p);
}

/* ---------------------------------------------------------------- the token log */

void lc_token_log(FILE *log, const struct lc_vocab *v, const char *what, const int32_t *t,
                  int32_t n, int32_t pos)
{
    if (!log)
        return;
    fprintf(log, "%s pos=%d n=%d:", what, pos, n);
    for (int32_t i = 0; i < n; i++)
        fprintf(log, " %d", t[i]);
    fprintf(log, "\n%s text: \"", what);
    for (int32_t i = 0; i < n; i++) {
        size_t len;
        const unsigned char *p = (const unsigned char *)lc_vocab_piece(v, t[i], true, &len);
        for (size_t k = 0; k < len; k++) {
            unsigned char ch = p[k];
            if (ch == '\n')
                fputs("\\n", log);
            else if (ch == '"' || ch == '\\')
                fprintf(log, "\\%c", ch);
            else if (ch < 0x20 || ch == 0x7F)
                fprintf(log, "\\x%02x", ch);
            else
                fputc(ch, log);
        }
    }
    fputs("\"\n", log);
    fflush(log);
}

/* With a log (LLAMACHAT_LOG or lc_engine_config.log_path), every decode is written
 * (lc_token_log), so that tests and users can see exactly what the model read (llama.cpp's
 * --verbose-prompt). */
static void log_tokens(struct lc_engine *e, const char *what, const int32_t *t, int32_t n,
                       int32_t pos)
{
    if (!e->log)
        return;
    errno = 0;
    lc_token_log(e->log, e->model->vocab, what, t, n, pos);
    if (ferror(e->log)) {   /* a full disk: said once, not a log that silently stops */
        int er = errno;
        emit_str(e, LC_EV_NOTE, "cannot write the token log%s%s; no more is logged",
                 er ? ": " : "", er ? strerror(er) : "");
        fclose(e->log);
        e->log = NULL;
    }
}

/* --verbose-prompt: the text the model is about to read (special tokens spelled out) as a
 * note; the UI shows its control characters as placeholders. */
static void note_prompt(struct lc_engine *e, const int32_t *t, int32_t n, int32_t pos)
{
    size_t total = 0, len;
    for (int32_t i = 0; i < n; i++) {
        lc_vocab_piece(e->model->vocab, t[i], true, &len);
        total += len;
    }
    char *s = malloc(total + 1), *p = s;
    if (!s)
        return;
    for (int32_t i = 0; i < n; i++) {
        const char *pc = lc_vocab_piece(e->model->vocab, t[i], true, &len);
        memcpy(p, pc, len);
        p += len;
    }
    *p = '\0';
    emit_str(e, LC_EV_NOTE, "prompt: %d token%s at %d: %s", n, n == 1 ? "" : "s", pos, s);
    free(s);
}

/* ---------------------------------------------------------------- message tokens */

/* The token ids a message was evaluated as, when they must be kept (the model's own replies):
 * ids[0..n) spell the first `bytes` bytes of the message text exactly. */
struct msg_toks {
    int32_t *ids;
    int32_t n, cap;
    size_t bytes;
};

/* Make room for conv->n entries of e->mt (new ones empty). */
static bool mt_fit(struct lc_engine *e)
{
    if (e->conv->n > e->mt_cap) {
        size_t cap = e->conv->n * 2 + 16;
        struct msg_toks *m = realloc(e->mt, cap * sizeof(*m));
        if (!m)
            return false;
        memset(m + e->mt_cap, 0, (cap - e->mt_cap) * sizeof(*m));
        e->mt = m;
        e->mt_cap = cap;
    }
    return true;
}

/* Forget the kept tokens of messages [from, to) and close the gap (the messages themselves are
 * removed by the caller). */
static void mt_remove(struct lc_engine *e, size_t from, size_t to)
{
    if (to > e->mt_cap)
        to = e->mt_cap;
    if (from >= to)
        return;
    for (size_t i = from; i < to; i++)
        free(e->mt[i].ids);
    memmove(e->mt + from, e->mt + to, (e->mt_cap - to) * sizeof(*e->mt));
    memset(e->mt + e->mt_cap - (to - from), 0, (to - from) * sizeof(*e->mt));
}

/* Remove messages [from, to) of the engine's conversation, with their kept tokens. */
static void conv_remove(struct lc_engine *e, size_t from, size_t to)
{
    struct lc_chat *c = e->conv;
    if (to > c->n)
        to = c->n;
    if (from >= to)
        return;
    mt_remove(e, from, to);
    for (size_t i = from; i < to; i++)
        free(c->msgs[i].text);
    memmove(c->msgs + from, c->msgs + to, (c->n - to) * sizeof(*c->msgs));
    c->n -= to - from;
}

/* Set or remove the system prompt (message 0), keeping e->mt aligned. */
static void conv_set_system(struct lc_engine *e, const char *text)
{
    struct lc_chat *c = e->conv;
    bool had = c->n > 0 && c->msgs[0].role == LC_ROLE_SYSTEM;
    if (!text) {
        if (had)
            conv_remove(e, 0, 1);
        return;
    }
    if (had) {
        lc_chat_set_system(c, text);
        return;
    }
    if (lc_chat_set_system(c, text) != 0 || !mt_fit(e))
        return;
    memmove(e->mt + 1, e->mt, (e->mt_cap - 1) * sizeof(*e->mt));
    memset(e->mt, 0, sizeof(*e->mt));
}

static bool mt_push(struct msg_toks *m, int32_t tok)
{
    if (m->n == m->cap) {
        int32_t cap = m->cap * 2 + 64;
        int32_t *p = realloc(m->ids, (size_t)cap * sizeof(*p));
        if (!p)
            return false;
        m->ids = p;
        m->cap = cap;
    }
    m->ids[m->n++] = tok;
    return true;
}

/* ---------------------------------------------------------------- earlier replies */

/* A reply taken out of the conversation by /regen, kept with the ids it was generated as, so
 * that showing it again (lc_engine_set_reply) gives the model the same tokens. */
struct kept_reply {
    char *text;
    size_t len;
    struct msg_toks toks;
};

static void kept_clear(struct lc_engine *e)
{
    for (size_t i = 0; i < e->n_kept; i++) {
        free(e->kept[i].text);
        free(e->kept[i].toks.ids);
    }
    free(e->kept);
    e->kept = NULL;
    e->n_kept = 0;
}

/* Move the last message, a reply, out of the conversation into e->kept (text and ids).  When
 * that cannot be done (not a reply, out of memory) a reply is simply removed. */
static void kept_take_last(struct lc_engine *e)
{
    struct lc_chat *c = e->conv;
    if (!c->n || c->msgs[c->n - 1].role != LC_ROLE_ASSISTANT)
        return;
    size_t i = c->n - 1;
    struct kept_reply *k = realloc(e->kept, (e->n_kept + 1) * sizeof(*k));
    if (!k || i >= e->mt_cap) {
        if (k)
            e->kept = k;
        conv_remove(e, i, i + 1);
        return;
    }
    e->kept = k;
    k[e->n_kept++] = (struct kept_reply){ c->msgs[i].text, c->msgs[i].len, e->mt[i] };
    memset(&e->mt[i], 0, sizeof(e->mt[i]));
    c->msgs[i].text = NULL;
    c->n--;
}

/* CMD_REPLY: the reply to the last user message is now `text` ("" = none): the one there goes to
 * e->kept, and text comes back from there with its ids when it was kept (same bytes), else it is
 * tokenized when read. */
static void set_reply(struct lc_engine *e, const char *text)
{
    kept_take_last(e);
    size_t len = strlen(text);
    if (!len)
        return;
    int i = lc_chat_add(e->conv, LC_ROLE_ASSISTANT, text, len);
    if (i < 0 || !mt_fit(e)) {
        emit_str(e, LC_EV_ERROR, "out of memory");
        return;
    }
    for (size_t k = 0; k < e->n_kept; k++)
        if (e->kept[k].len == len && memcmp(e->kept[k].text, text, len) == 0) {
            free(e->mt[i].ids);
            e->mt[i] = e->kept[k].toks;
            free(e->kept[k].text);
            memmove(e->kept + k, e->kept + k + 1, (e->n_kept - k - 1) * sizeof(*e->kept));
            e->n_kept--;
            break;
        }
}

/* ---------------------------------------------------------------- prompt building */

struct tokv {
    int32_t *v;
    int32_t n, cap;
    bool oom;
};

static void tokv_push_n(struct tokv *t, const int32_t *ids, int32_t n)
{
    if (t->oom || n <= 0)
        return;
    if (t->n + n > t->cap) {
        int32_t cap = (t->n + n) * 2 + 256;
        int32_t *p = realloc(t->v, (size_t)cap * sizeof(*p));
        if (!p) {
            t->oom = true;
            return;
        }
        t->v = p;
        t->cap = cap;
    }
    memcpy(t->v + t->n, ids, (size_t)n * sizeof(*ids));
    t->n += n;
}

/* Tokenize text[0..len) (plain[] marks user bytes) and append; false on failure. */
static bool tokenize_into(const struct lc_vocab *v, const char *text, size_t len,
                          const uint8_t *plain, bool special, bool space_prefix, struct tokv *t)
{
    if (len == 0)
        return true;
    int32_t cap = len < 4096 ? (int32_t)len + 8 : 4096;
    int32_t *buf = malloc((size_t)cap * sizeof(*buf));
    if (!buf)
        return false;
    int32_t n = lc_tokenize_mixed(v, text, len, plain, false, special, space_prefix, buf, cap);
    if (n < 0 && n != INT32_MIN) {
        cap = -n;
        int32_t *b2 = realloc(buf, (size_t)cap * sizeof(*b2));
        if (!b2) {
            free(buf);
            return false;
        }
        buf = b2;
        n = lc_tokenize_mixed(v, text, len, plain, false, special, space_prefix, buf, cap);
    }
    if (n >= 0)
        tokv_push_n(t, buf, n);
    free(buf);
    return n >= 0 && !t->oom;
}

/*
 * The tokens the model reads for the conversation: the template's rendering with the opening of
 * the assistant's turn, then the reply written so far (a trailing assistant message).
 *   - Message contents are plain text: a user typing "<|im_end|>" or "<s>" gets those
 *     characters; only the template's own text yields special tokens (lc_tokenize_mixed).
 *   - A reply of the model keeps the ids it was generated as (e->mt): its text is not
 *     tokenized again, so the KV cache stays valid across turns even where the model chose a
 *     spelling the tokenizer would not (" Hello" as "▁H" "ello").
 *   - Exactly one BOS: added when the vocab wants one and the rendering did not start with it.
 * turn_tok[i] (conv->n entries, may be NULL) receives the approximate index of the first token
 * of message i's content (for choosing where to cut when the context is full).
 * Returns 0 with *out (malloc'd) and *n_out, or -1 with a malloc'd *err.
 */
static int build_prompt(struct lc_engine *e, size_t skip_from, size_t skip_to, int32_t **out,
                        int32_t *n_out, int32_t *turn_tok, char **err)
{
    const struct lc_chat *c = e->conv;
    const struct lc_vocab *v = e->model->vocab;
    size_t n_all = c->n, partial_i = SIZE_MAX;
    if (n_all > 0 && c->msgs[n_all - 1].role == LC_ROLE_ASSISTANT)
        partial_i = --n_all;
    /* the messages rendered: all but [skip_from, skip_to); map[k] is the k-th one's index */
    struct lc_chat_msg *msgs = calloc(n_all ? n_all : 1, sizeof(*msgs));
    size_t *map = calloc(n_all ? n_all : 1, sizeof(*map));
    if (!msgs || !map) {
        free(msgs);
        free(map);
        *err = xasprintf("out of memory");
        return -1;
    }
    size_t n = 0;
    for (size_t i = 0; i < n_all; i++)
        if (i < skip_from || i >= skip_to) {
            map[n] = i;
            msgs[n++] = (struct lc_chat_msg){ c->msgs[i].role, c->msgs[i].text };
        }
    struct lc_chat_span *spans = NULL;
    size_t n_spans = 0;
    char *note = NULL;
    char *text = lc_chat_tmpl_render_note(e->ct, msgs, n, true, &spans, &n_spans, &note, err);
    free(msgs);
    if (note && (!e->tmpl_note || strcmp(note, e->tmpl_note) != 0)) {
        emit_str(e, LC_EV_NOTE, "%s", note);   /* what the model reads is not the template's */
        free(e->tmpl_note);
        e->tmpl_note = note;
        note = NULL;
    }
    free(note);
    for (size_t k = 0; text && k < n_spans; k++)
        spans[k].msg = map[spans[k].msg];   /* back to indices of the conversation */
    free(map);
    if (!text)
        return -1;
    size_t tlen = strlen(text);
    if (partial_i != SIZE_MAX && c->msgs[partial_i].len > 0) {
        size_t pl = c->msgs[partial_i].len;
        char *t2 = realloc(text, tlen + pl + 1);
        struct lc_chat_span *s2 = realloc(spans, (n_spans + 1) * sizeof(*s2));
        if (t2)
            text = t2;
        if (s2)
            spans = s2;
        if (!t2 || !s2) {
            free(text);
            free(spans);
            *err = xasprintf("out of memory");
            return -1;
        }
        memcpy(text + tlen, c->msgs[partial_i].text, pl + 1);
        spans[n_spans++] = (struct lc_chat_span){ tlen, pl, partial_i, 0 };
        tlen += pl;
    }
    uint8_t *plain = calloc(tlen ? tlen : 1, 1);
    if (!plain) {
        free(text);
        free(spans);
        *err = xasprintf("out of memory");
        return -1;
    }
    for (size_t k = 0; k < n_spans; k++)
        memset(plain + spans[k].off, 1, spans[k].len);
    const bool special = e->tmpl != LC_CHAT_TEMPLATE_NONE;
    struct tokv t = { 0 };
    int32_t bos = lc_vocab_bos(v);
    bool want_bos = lc_vocab_add_bos(v) && bos >= 0;
    if (want_bos)
        tokv_push_n(&t, &bos, 1);
    /* Walk the text: raw stretches are tokenized, kept replies are copied. */
    size_t cur = 0, k = 0;
    bool ok = true;
    for (;;) {
        /* next span with kept tokens that still spell its start */
        size_t use = 0;
        int32_t use_n = 0;
        for (; k < n_spans; k++) {
            const struct lc_chat_span *sp = &spans[k];
            const struct msg_toks *m = sp->msg < e->mt_cap ? &e->mt[sp->msg] : NULL;
            if (!m || m->n == 0 || sp->skip != 0)
                continue;
            /* the longest prefix of the kept ids that lies within the span and spells it */
            size_t covered = 0;
            int32_t j = 0;
            for (; j < m->n; j++) {
                size_t pl;
                const char *pc = lc_vocab_piece(v, m->ids[j], false, &pl);
                if (covered + pl > sp->len || covered + pl > m->bytes ||
                    memcmp(text + sp->off + covered, pc, pl) != 0)
                    break;
                covered += pl;
            }
            if (j == 0)
                continue;
            use = covered;
            use_n = j;
            break;
        }
        size_t end = k < n_spans ? spans[k].off : tlen;
        ok = tokenize_into(v, text + cur, end - cur, plain + cur, special, cur == 0, &t);
        if (!ok || k >= n_spans)
            break;
        tokv_push_n(&t, e->mt[spans[k].msg].ids, use_n);
        cur = end + use;
        k++;
    }
    if (turn_tok && ok && !t.oom) {
        /* token index where each content starts, from the byte length of the pieces (close
         * enough to choose a cut point: a space prefix or a stripped space shifts it by one) */
        for (size_t i = 0; i < c->n; i++)
            turn_tok[i] = -1;
        size_t bytes = 0, sk = 0;
        for (int32_t j = want_bos ? 1 : 0; j <= t.n && sk < n_spans; j++) {
            while (sk < n_spans && spans[sk].off <= bytes) {
                if (turn_tok[spans[sk].msg] < 0)
                    turn_tok[spans[sk].msg] = j;
                sk++;
            }
            if (j < t.n) {
                size_t pl;
                lc_vocab_piece(v, t.v[j], true, &pl);
                bytes += pl;
            }
        }
        for (; sk < n_spans; sk++)
            if (turn_tok[spans[sk].msg] < 0)
                turn_tok[spans[sk].msg] = t.n;
    }
    free(plain);
    free(text);
    free(spans);
    if (!ok || t.oom) {
        free(t.v);
        *err = xasprintf("cannot tokenize the conversation (out of memory)");
        return -1;
    }
    /* The template wrote BOS itself: keep one. */
    if (want_bos && t.n >= 2 && t.v[1] == bos) {
        memmove(t.v, t.v + 1, (size_t)(t.n - 1) * sizeof(*t.v));
        t.n--;
    }
    *out = t.v;
    *n_out = t.n;
    return 0;
}

/* Index of the first message that may be dropped (after the system prompt). */
static size_t first_droppable(const struct lc_chat *c)
{
    return c->n > 0 && c->msgs[0].role == LC_ROLE_SYSTEM ? 1 : 0;
}

/* Index of the first message the model reads after the system prompt: the ones before it, up
 * to first_droppable, are hidden (the context filled).  Clamps e->n_hidden to the
 * conversation, which /undo and /regen shorten. */
static size_t first_shown(struct lc_engine *e)
{
    size_t f = first_droppable(e->conv), n = e->conv->n;
    if (e->n_hidden > n - f)
        e->n_hidden = n - f;
    return f + e->n_hidden;
}

/* Index of the last user message (the one being answered), or c->n. */
static size_t last_user(const struct lc_chat *c)
{
    for (size_t i = c->n; i-- > first_droppable(c);)
        if (c->msgs[i].role == LC_ROLE_USER)
            return i;
    return c->n;
}

/* Index of the first user message at or after i, at most limit. */
static size_t next_turn(const struct lc_chat *c, size_t i, size_t limit)
{
    while (i < limit && c->msgs[i].role != LC_ROLE_USER)
        i++;
    return i;
}

static bool stop_requested(struct lc_engine *e)
{
    return atomic_load(&e->stop) || atomic_load(&e->quitting);
}

/*
 * Context shift: after old turns were dropped, the turns that stay are still in the KV cache, d
 * positions further on.  Find the d where the most of toks[common..) is cached (the cut point
 * is known only roughly in tokens, so every d is tried; a wrong d fails at its first token),
 * drop cache[common, common + d) and move the rest down with lc_context_shift (keys re-rotated,
 * nothing recomputed).  Returns the new common prefix length (common if nothing was moved).
 */
static int32_t shift_kept(struct lc_engine *e, const int32_t *toks, int32_t n, int32_t common)
{
    int32_t best_d = 0, best_m = 0;
    for (int32_t d = 1; common + d < e->n_cache; d++) {
        if (e->cache[common + d] != toks[common])
            continue;
        int32_t m = 0;
        while (common + m < n && common + d + m < e->n_cache &&
               toks[common + m] == e->cache[common + d + m])
            m++;
        if (m > best_m) {
            best_m = m;
            best_d = d;
        }
    }
    if (common + best_m >= n)
        best_m = n - 1 - common;   /* the last token is decoded again for its logits */
    if (best_m < 1)
        return common;
    lc_context_truncate(e->ctx, common + best_d + best_m);
    if (lc_context_shift(e->ctx, common, best_d) != 0)
        return common;
    memmove(e->cache + common, e->cache + common + best_d, (size_t)best_m * sizeof(*e->cache));
    e->n_cache = common + best_m;
    e->n_shifted += best_m;
    return common + best_m;
}

/*
 * Make the KV cache hold the conversation's tokens, decoding only what is not cached yet.
 * reserve: room to keep free for the reply.  When the conversation does not fit, whole oldest
 * turns are hidden from the model (the system prompt stays, no message is cut; e->n_hidden),
 * and so many at once that the rest fills about half the context: the next turns then fit
 * without hiding again.  Turns hidden once stay hidden (the KV cache holds the prompt without
 * them), except the turn being answered.  The cut point is found from token counts, not by
 * hiding a turn at a time (linear in the length of the conversation).  Returns 0, 1 when
 * stopped, -1 on error (reported), -2 when the turn being answered does not fit at all (not
 * reported; e->too_long holds its token count).
 */
static int sync_prompt(struct lc_engine *e, int32_t reserve)
{
    const int32_t n_ctx = lc_context_n_ctx(e->ctx);
    const struct lc_vocab *v = e->model->vocab;
    struct lc_chat *c = e->conv;
    int32_t *toks = NULL, n = 0;
    size_t dropped = 0;
    char *err = NULL;

    /* The cut: messages [f, cut) are left out of the prompt; nothing more is hidden until a
     * prompt that fits is found (a refused message must not cost the earlier turns).  A
     * message of B bytes holds at least B / (longest token text) tokens: older turns that
     * cannot fit by that bound alone go without being rendered or tokenized. */
    const size_t f = first_droppable(c), lu = last_user(c);
    size_t cut = f;
    {
        size_t maxp = lc_vocab_max_piece_len(v), budget = (size_t)n_ctx, need = 0;
        for (size_t i = 0; i < f; i++)
            need += c->msgs[i].len / maxp;
        for (size_t i = c->n; i-- > f;) {
            need += c->msgs[i].len / maxp + 1;
            if (need > budget) {
                cut = next_turn(c, i + 1, lu);
                break;
            }
        }
        if (cut > lu || lu >= c->n)
            cut = f;
    }
    size_t shown = first_shown(e);   /* hidden before: still hidden, but the turn answered */
    if (lu < c->n && shown > lu)
        shown = lu;
    if (cut < shown)
        cut = shown;
    for (int round = 0;; round++) {
        if (stop_requested(e)) {
            free(toks);
            return 1;
        }
        free(toks);
        toks = NULL;
        int32_t *turn_tok = calloc(c->n ? c->n : 1, sizeof(*turn_tok));
        if (!turn_tok || build_prompt(e, f, cut, &toks, &n, turn_tok, &err) != 0) {
            emit_str(e, LC_EV_ERROR, "cannot build the prompt: %s", err ? err : "out of memory");
            free(err);
            free(turn_tok);
            return -1;
        }
        if (n == 0) {
            free(turn_tok);
            free(toks);
            emit_str(e, LC_EV_ERROR, "nothing to evaluate (empty prompt and no BOS token)");
            return -1;
        }
        if (n + reserve <= n_ctx) {
            free(turn_tok);
            break;
        }
        /* Too long: cut before the earliest later turn that leaves about half the context, or
         * failing that the earliest that fits, or at least one more turn. */
        size_t from = cut > f ? cut : f;   /* first message in the prompt after the system */
        int32_t base = from < c->n && turn_tok[from] >= 0 ? turn_tok[from] : 0;
        int32_t half = n_ctx / 2 > reserve ? n_ctx / 2 : n_ctx - reserve;
        size_t to_half = SIZE_MAX, to_fit = SIZE_MAX;
        for (size_t i = from + 1; i < lu; i++) {
            if (c->msgs[i].role != LC_ROLE_USER || turn_tok[i] < 0)
                continue;
            int32_t rest = n - (turn_tok[i] - base) + reserve;
            if (to_fit == SIZE_MAX && rest <= n_ctx)
                to_fit = i;
            if (rest <= half) {
                to_half = i;
                break;
            }
        }
        free(turn_tok);
        size_t next = to_half != SIZE_MAX ? to_half : to_fit != SIZE_MAX ? to_fit
                                                     : next_turn(c, from + 1, lu);
        if (lu >= c->n || next > lu || next <= cut || round > 64) {
            /* only the turn being answered is left, and it does not fit */
            free(toks);
            e->too_long = n;
            return -2;
        }
        cut = next;
    }
    dropped = cut - shown;
    e->n_hidden = cut - f;
    if (dropped && !e->noted_full) {
        e->noted_full = true;
        emit_str(e, LC_EV_NOTE,
                 "context full (%d tokens): the model no longer sees the oldest %zu message%s "
                 "(the transcript keeps everything)",
                 n_ctx, e->n_hidden, e->n_hidden == 1 ? "" : "s");
    }

    /* Longest common prefix with what is cached; at least the last token is decoded again so
     * that its logits are fresh. */
    int32_t common = 0;
    while (common < n && common < e->n_cache && toks[common] == e->cache[common])
        common++;
    if (dropped && common < n - 1 && !e->no_shift)
        common = shift_kept(e, toks, n, common);
    if (common >= n)
        common = n - 1;
    if (n > e->cap_cache) {
        int32_t cap = n + 1024;
        int32_t *cc = realloc(e->cache, (size_t)cap * sizeof(*cc));
        if (!cc) {
            free(toks);
            emit_str(e, LC_EV_ERROR, "out of memory");
            return -1;
        }
        e->cache = cc;
        e->cap_cache = cap;
    }
    lc_context_truncate(e->ctx, common);
    e->n_cache = common;
    int rc = 0;
    e->n_eval += n - common;
    if (n - common > 0) {
        log_tokens(e, "prompt", toks + common, n - common, common);
        if (e->verbose_prompt)
            note_prompt(e, toks + common, n - common, common);
        int r = lc_context_decode(e->ctx, toks + common, n - common, common, false, &err);
        int32_t past = lc_context_n_past(e->ctx);
        if (r < 0) {
            emit_str(e, LC_EV_ERROR, "%s", err ? err : "decode failed");
            free(err);
            past = common;
            rc = -1;
        } else if (r == 1) {
            rc = 1;
        }
        if (past > n)
            past = n;
        memcpy(e->cache + common, toks + common, (size_t)(past - common) * sizeof(*toks));
        e->n_cache = past;
    }
    /* The penalty history is the whole text the model sees. */
    lc_sampler_reset(e->smp);
    for (int32_t i = 0; i < e->n_cache; i++)
        lc_sampler_accept(e->smp, e->cache[i]);
    free(toks);
    return rc;
}

/*
 * CMD_UNDO: remove the last exchange (the last user message and the reply after it) and roll the
 * KV cache back to the longest prefix of it that the rest of the conversation still reads:
 * nothing is recomputed, and the next turn decodes only its own tokens.  Turns the context
 * hid stay hidden (the cache holds the prompt without them).  The new n_past is reported
 * (LC_EV_STATS).
 */
static void undo(struct lc_engine *e)
{
    kept_clear(e);
    struct lc_chat *c = e->conv;
    size_t lu = last_user(c);
    if (lu < c->n)
        conv_remove(e, lu, c->n);
    if (!e->ctx || !e->model)
        return;   /* remote: no cache */
    int32_t *toks = NULL, n = 0, common = 0;
    char *err = NULL;
    size_t f = first_droppable(c);
    if (build_prompt(e, f, first_shown(e), &toks, &n, NULL, &err) == 0)
        while (common < n && common < e->n_cache && toks[common] == e->cache[common])
            common++;
    free(err);
    free(toks);
    if (common < e->n_cache) {
        lc_context_truncate(e->ctx, common);
        e->n_cache = common;
    }
    emit_stats(e);
}

static bool on_progress(void *user, int32_t done, int32_t total)
{
    struct lc_engine *e = user;
    if (total > 1)
        emit(e, LC_EV_PROGRESS, done, total, 0, 0);
    return atomic_load(&e->stop) || atomic_load(&e->quitting);
}

/* The draft model's reading of the text (spec.h): the stop flag only, no progress shown. */
static bool on_draft_progress(void *user, int32_t done, int32_t total)
{
    (void)done;
    (void)total;
    struct lc_engine *e = user;
    return atomic_load(&e->stop) || atomic_load(&e->quitting);
}

/* Append a decoded token to the cache bookkeeping. */
static int cache_push(struct lc_engine *e, int32_t tok)
{
    if (e->n_cache == e->cap_cache) {
        int32_t cap = e->cap_cache * 2 + 256;
        int32_t *c = realloc(e->cache, (size_t)cap * sizeof(*c));
        if (!c)
            return -1;
        e->cache = c;
        e->cap_cache = cap;
    }
    e->cache[e->n_cache++] = tok;
    return 0;
}

/*
 * Stop strings may arrive split over tokens, so reply text is held back while it could still be
 * the start of one.  Returns true when a stop string is complete (the text before it is sent).
 */
struct holdback {
    char *buf;
    size_t len, cap;
};

static bool hb_add(struct lc_engine *e, struct holdback *h, const char *s, size_t n, size_t msg)
{
    if (h->len + n + 1 > h->cap) {
        size_t cap = (h->len + n + 1) * 2;
        char *b = realloc(h->buf, cap);
        if (!b)
            return false;
        h->buf = b;
        h->cap = cap;
    }
    memcpy(h->buf + h->len, s, n);
    h->len += n;
    h->buf[h->len] = '\0';
    size_t emit_n = h->len;
    bool stop = false;
    for (const char *const *p = e->stops; p && *p; p++) {
        const char *hit = strstr(h->buf, *p);
        if (hit && (size_t)(hit - h->buf) <= emit_n) {
            emit_n = (size_t)(hit - h->buf);
            stop = true;
        }
    }
    if (!stop) {
        /* keep the longest tail that is a proper prefix of a stop string */
        for (const char *const *p = e->stops; p && *p; p++) {
            size_t sl = strlen(*p);
            for (size_t k = sl - 1; k > 0; k--)
                if (k <= h->len && memcmp(h->buf + h->len - k, *p, k) == 0) {
                    if (h->len - k < emit_n)
                        emit_n = h->len - k;
                    break;
                }
        }
    }
    if (emit_n > 0) {
        emit_text(e, LC_EV_TEXT, h->buf, emit_n);
        lc_chat_append(e->conv, msg, h->buf, emit_n);
        memmove(h->buf, h->buf + emit_n, h->len - emit_n + 1);
        h->len -= emit_n;
    }
    if (stop)
        h->len = 0;
    return stop;
}

static void hb_flush(struct lc_engine *e, struct holdback *h, size_t msg)
{
    if (h->len) {
        emit_text(e, LC_EV_TEXT, h->buf, h->len);
        lc_chat_append(e->conv, msg, h->buf, h->len);
    }
    free(h->buf);
}

/* A new sampler for a reply, seeded with the seed in force (a fresh one when it is random), so
 * that the same seed and the same conversation give the same reply, /regen included.  The seed
 * used is reported (LC_EV_INFO "seed=N"); a greedy reply reports "seed=none" (report_seed). */
static bool start_sampler(struct lc_engine *e)
{
    e->user_seed = e->params.seed;
    e->reply_seed = e->params.seed == LC_SEED_RANDOM ? lc_sampler_random_seed() : e->params.seed;
    struct lc_sampler_params p = e->params;
    p.seed = e->reply_seed;
    struct lc_sampler *s = lc_sampler_new(&p, e->model->hp.n_vocab);
    if (!s)
        return false;
    lc_sampler_free(e->smp);
    e->smp = s;
    e->seed_told = false;
    if (e->params.temp <= 0.0f)   /* greedy: this reply uses no seed (so far) */
        emit_str(e, LC_EV_INFO, "seed=none");
    report_seed(e);
    return true;
}

/* Generate a reply to the conversation (whose last message is the user's); regen: the
 * message was answered before (/regen), so a prompt too long for the context keeps it. */
static void reply_remote(struct lc_engine *e);

static void reply(struct lc_engine *e, bool regen)
{
    if (e->remote_url) {
        reply_remote(e);
        return;
    }
    int32_t n_gen = 0;
    int reason = LC_DONE_ERROR;
    e->n_eval = 0;
    double t_gen0 = 0;   /* the context's generation clock at the start of this reply */
    if (e->ctx) {
        struct lc_context_stats st0;
        lc_context_stats(e->ctx, &st0);
        t_gen0 = st0.t_gen_s;
    }
    if (!e->ctx) {
        emit_str(e, LC_EV_ERROR, "no model is loaded");
        goto done_noconv;
    }
    const int32_t n_ctx = lc_context_n_ctx(e->ctx);
    pick_up_params(e, false);
    if (!start_sampler(e)) {
        emit_str(e, LC_EV_ERROR, "out of memory");
        goto done_noconv;
    }
    e->noted_full = false;
    int32_t reserve = n_ctx / 8;
    if (e->n_predict >= 0 && e->n_predict + 1 < reserve)
        reserve = e->n_predict + 1;
    if (reserve < 1)
        reserve = 1;
    int r = sync_prompt(e, reserve);
    if (r == -2 && regen) {
        /* the message stays (it was answered before); the UI shows the reply before again */
        emit_str(e, LC_EV_ERROR,
                 "cannot write a new reply: the prompt is %d tokens, and %d more are kept for "
                 "the reply; the context holds %d (-c)", e->too_long, reserve, n_ctx);
        reason = LC_DONE_ERROR;
        goto done_noconv;
    }
    if (r == -2) {
        /* the message alone is too long: it is not part of the conversation */
        size_t lu = last_user(e->conv);
        conv_remove(e, lu, e->conv->n);
        emit_str(e, LC_EV_ERROR,
                 "message not sent: with it the prompt is %d tokens, and %d more are kept for the "
                 "reply; the context holds %d (-c); it is back in the input line",
                 e->too_long, reserve, n_ctx);
        reason = LC_DONE_TOO_LONG;
        goto done_noconv;
    }
    if (r != 0) {
        reason = r == 1 ? LC_DONE_STOPPED : LC_DONE_ERROR;
        goto done_noconv;
    }
    int msg = lc_chat_add(e->conv, LC_ROLE_ASSISTANT, "", 0);
    if (msg < 0 || !mt_fit(e)) {
        emit_str(e, LC_EV_ERROR, "out of memory");
        goto done_noconv;
    }
    struct holdback hb = { 0 };
    const struct lc_vocab *v = e->model->vocab;
    lc_spec_reset(&e->spec);   /* the logits are sync_prompt's */
    emit_stats(e);
    for (;;) {
        pick_up_params(e, true);
        if (stop_requested(e)) {
            reason = LC_DONE_STOPPED;
            break;
        }
        if (e->n_predict >= 0 && n_gen >= e->n_predict) {
            reason = LC_DONE_LIMIT;
            break;
        }
        int32_t tok = lc_spec_sample(&e->spec, e->ctx, e->smp);
        if (lc_vocab_is_eog(v, tok)) {
            reason = LC_DONE_EOG;
            break;
        }
        lc_sampler_accept(e->smp, tok);
        n_gen++;
        if (!mt_push(&e->mt[msg], tok)) {
            emit_str(e, LC_EV_ERROR, "out of memory");
            reason = LC_DONE_ERROR;
            break;
        }
        size_t len;
        const char *piece = lc_vocab_piece(v, tok, false, &len);
        if (len == 1 && piece[0] == '\0') {
            /* a NUL byte (the token <0x00>): messages are C strings, so it is kept as the
             * visible U+2400 rather than cutting the reply there */
            piece = "\xe2\x90\x80";
            len = 3;
        }
        if (len > 0 && hb_add(e, &hb, piece, len, (size_t)msg)) {
            reason = LC_DONE_EOG;
            break;
        }
        if (e->n_predict >= 0 && n_gen >= e->n_predict) {
            reason = LC_DONE_LIMIT;
            break;
        }
        if (e->n_cache >= n_ctx) {
            /* The context is full in the middle of a reply: drop old turns and go on.  The
             * text held back is part of the reply; it goes into the rendering too. */
            lc_chat_append(e->conv, (size_t)msg, hb.buf ? hb.buf : "", hb.len);
            size_t held = hb.len;
            e->mt[msg].bytes = e->conv->msgs[msg].len;
            r = sync_prompt(e, n_ctx / 4 > 0 ? n_ctx / 4 : 1);
            lc_spec_reset(&e->spec);
            /* earlier messages are hidden, not removed: the reply is still the last one */
            if (e->conv->msgs[msg].len >= held)
                e->conv->msgs[msg].len -= held;
            e->conv->msgs[msg].text[e->conv->msgs[msg].len] = '\0';
            if (r == -2) {
                emit_str(e, LC_EV_NOTE, "the context (%d tokens) is full with this turn alone: "
                         "the reply ends here", n_ctx);
                reason = LC_DONE_CONTEXT;
                break;
            }
            if (r != 0) {
                reason = r == 1 ? LC_DONE_STOPPED : LC_DONE_ERROR;
                break;
            }
            continue;   /* logits of the re-read text's last token are ready */
        }
        if (e->fail_after > 0 && n_gen >= e->fail_after) {   /* (tests) a decode that fails */
            emit_str(e, LC_EV_ERROR, "decode failed: a fault made by LLAMACHAT_TEST_FAIL_AFTER "
                     "after %d tokens", n_gen);
            reason = LC_DONE_ERROR;
            break;
        }
        char *err = NULL;
        int32_t pos = e->n_cache;
        log_tokens(e, "reply", &tok, 1, pos);
        /* one token, or (spec.h) tok with drafted ones in one batch, or nothing when tok was
         * drafted and verified already: the same tokens (greedy) or distribution either way */
        int dr = lc_spec_step(&e->spec, e->ctx, e->smp, e->cache, tok, pos,
                              e->n_predict >= 0 ? e->n_predict - n_gen : -1, &err);
        if (dr == 1) {   /* the progress callback saw the stop flag; the token is not cached */
            reason = LC_DONE_STOPPED;
            break;
        }
        if (dr != 0) {
            emit_str(e, LC_EV_ERROR, "%s", err ? err : "decode failed");
            free(err);
            reason = LC_DONE_ERROR;
            break;
        }
        cache_push(e, tok);
        if (now_s() - e->last_stats > 0.1)
            emit_stats(e);
    }
    hb_flush(e, &hb, (size_t)msg);
    /* drafted tokens verified but not chosen: out of the cache (n_cache is what it holds) */
    lc_context_truncate(e->ctx, e->n_cache);
    lc_spec_reset(&e->spec);
    e->mt[msg].bytes = e->conv->msgs[msg].len;
    /* No text at all (stopped at once, or an immediate end of turn): no empty reply is kept,
     * as the UI adds a reply only when text arrives. */
    if ((size_t)msg == e->conv->n - 1 && e->conv->msgs[msg].len == 0)
        conv_remove(e, (size_t)msg, (size_t)msg + 1);
    emit_stats(e);
done_noconv:
    {
        double t_gen = 0;
        if (e->ctx) {
            struct lc_context_stats st1;
            lc_context_stats(e->ctx, &st1);
            t_gen = st1.t_gen_s - t_gen0;
        }
        finish(e, reason, n_gen, e->n_eval, t_gen);
    }
}

/* ---------------------------------------------------------------- remote mode */

/* Connect to the server: its model list gives the model name (LC_EV_LOADED), or an error. */
static bool load_remote(struct lc_engine *e)
{
    char *err = NULL;
    e->remote = lc_remote_new(e->remote_url, e->remote_model, e->remote_key, &err);
    if (!e->remote) {
        emit_str(e, LC_EV_ERROR, "%s", err ? err : "out of memory");
        free(err);
        return false;
    }
    char *list = lc_remote_models(e->remote, &e->quitting, &err);
    if (!list) {
        emit_str(e, LC_EV_ERROR, "%s", err ? err : "out of memory");
        free(err);
        return false;
    }
    free(list);
    e->remote_n_ctx = lc_remote_n_ctx(e->remote, &e->quitting);
    const char *name = lc_remote_model(e->remote) ? lc_remote_model(e->remote) : "(server default)";
    emit_str(e, LC_EV_INFO, "isa=remote");
    emit_str(e, LC_EV_INFO, "template=server's");
    emit_str(e, LC_EV_INFO, "name=%s", name);
    emit_str(e, LC_EV_LOADED, "%s at %s", name, e->remote_url);
    emit(e, LC_EV_STATS, 0, e->remote_n_ctx, 0, 0);
    return true;
}

struct remote_reply {
    struct lc_engine *e;
    int msg;                  /* the reply's index in e->conv */
    int64_t n_prompt, n_gen;  /* usage, when the server gives it */
    double t0, t_first;
};

static void remote_text(void *ud, const char *s, size_t n)
{
    struct remote_reply *rr = ud;
    if (rr->t_first == 0)
        rr->t_first = now_s();
    lc_chat_append(rr->e->conv, (size_t)rr->msg, s, n);
    emit_text(rr->e, LC_EV_TEXT, s, n);
}

static void remote_usage(void *ud, int64_t prompt, int64_t gen)
{
    struct remote_reply *rr = ud;
    rr->n_prompt = prompt;
    rr->n_gen = gen;
}

/* One reply from the server: the conversation goes as messages, the reply streams back. */
static void reply_remote(struct lc_engine *e)
{
    int reason = LC_DONE_ERROR;
    int32_t n_chunks = 0;
    double gen_secs = 0;
    struct remote_reply rr = { .e = e, .n_prompt = -1, .n_gen = -1, .t0 = now_s() };
    pick_up_params(e, true);
    if (!e->remote) {
        emit_str(e, LC_EV_ERROR, "not connected to a server");
        goto done;
    }
    /* the request carries the conversation without the (empty) reply */
    struct lc_chat *conv = e->conv;
    rr.msg = lc_chat_add(conv, LC_ROLE_ASSISTANT, "", 0);
    if (rr.msg < 0 || !mt_fit(e)) {
        emit_str(e, LC_EV_ERROR, "out of memory");
        goto done;
    }
    struct lc_remote_callbacks cb = { remote_text, remote_usage, &rr };
    struct lc_sampler_params p = e->params;
    char *err = NULL;
    {
        /* a view of the conversation without the reply, which grows while it streams (only
         * its text is reallocated, not the message array) */
        struct lc_chat req = *conv;
        req.n = (size_t)rr.msg;
        int end = lc_remote_chat(e->remote, &req, &p, e->n_predict, &e->stop, &cb, &n_chunks, &err);
        reason = end == LC_REMOTE_END_STOP ? LC_DONE_EOG
                 : end == LC_REMOTE_END_LENGTH ? LC_DONE_LIMIT
                 : end == LC_REMOTE_END_CANCELLED ? LC_DONE_STOPPED : LC_DONE_ERROR;
    }
    if (err) {
        emit_str(e, LC_EV_ERROR, "%s", err);
        free(err);
    }
    if (conv->msgs[rr.msg].len == 0)
        conv_remove(e, (size_t)rr.msg, (size_t)rr.msg + 1);
    {
        double t1 = now_s();
        int32_t n_gen = rr.n_gen >= 0 ? (int32_t)rr.n_gen : n_chunks;
        /* "length" is all OpenAI's protocol says for max_tokens and for a full context alike:
         * with the server's context known and filled (its usage counts, give or take the
         * last token), the reply was cut by the context */
        if (reason == LC_DONE_LIMIT && e->remote_n_ctx > 0 && rr.n_prompt >= 0 &&
            rr.n_prompt + n_gen + 1 >= e->remote_n_ctx && (e->n_predict < 0 || n_gen < e->n_predict))
            reason = LC_DONE_CONTEXT;
        double gen_s = rr.t_first > 0 ? t1 - rr.t_first : 0;
        double pp_s = rr.t_first > 0 ? rr.t_first - rr.t0 : 0;
        /* the tokens the server counted (its usage); -1: it did not say (not 0, a count) */
        emit(e, LC_EV_STATS, rr.n_prompt >= 0 ? (int32_t)(rr.n_prompt + n_gen) : -1, e->remote_n_ctx,
             rr.n_prompt > 0 && pp_s > 0 ? (double)rr.n_prompt / pp_s : 0,
             n_gen > 1 && gen_s > 0 ? (double)(n_gen - 1) / gen_s : 0);
        n_chunks = n_gen;
        gen_secs = gen_s;
    }
done:
    /* y: the seconds from the first token to the last, as the local engine's decode time */
    finish(e, reason, n_chunks, rr.n_prompt > 0 ? (double)rr.n_prompt : 0, gen_secs);
}

/* The /models command: the server's list, or the local model. */
static void list_models(struct lc_engine *e)
{
    if (!e->remote) {
        emit_str(e, LC_EV_NOTE, "model: %s (local)", e->model ? e->model->name : "none loaded");
        return;
    }
    char *err = NULL, *list = lc_remote_models(e->remote, &e->quitting, &err);
    if (!list) {
        emit_str(e, LC_EV_ERROR, "%s", err ? err : "out of memory");
        free(err);
        return;
    }
    for (char *p = list; *p; p++)
        if (*p == '\n')
            *p = ' ';
    emit_str(e, LC_EV_NOTE, "models at %s: %s (using %s)", e->remote_url, *list ? list : "none",
             lc_remote_model(e->remote) ? lc_remote_model(e->remote) : "the server's default");
    free(list);
}

/* /model NAME in remote mode: the model the next requests ask the server for.  NAME must be
 * one of the server's /v1/models, or N the Nth of that list (from 1, as /models shows it);
 * otherwise an error lists them and the model stays.  Ends with LC_EV_DONE, as switch_model. */
static void switch_remote(struct lc_engine *e, const char *name)
{
    char *err = NULL, *list = lc_remote_models(e->remote, &e->quitting, &err);
    if (!list) {
        emit_str(e, LC_EV_ERROR, "%s", err ? err : "out of memory");
        free(err);
        finish(e, LC_DONE_ERROR, 0, 0, 0);
        return;
    }
    size_t nlen = strlen(name);
    long want = nlen && strspn(name, "0123456789") == nlen && nlen < 9 ? atol(name) : 0;
    const char *pick = NULL;
    size_t pick_len = 0;
    long idx = 0;
    for (const char *p = list; *p && !pick;) {
        size_t len = strcspn(p, "\n");
        idx++;
        if ((want > 0 && idx == want) || (len == nlen && !memcmp(p, name, len))) {
            pick = p;
            pick_len = len;
        }
        p += len + (p[len] == '\n');
    }
    char *m = pick ? strndup(pick, pick_len) : NULL;
    if (!m || lc_remote_set_model(e->remote, m) != 0) {
        for (char *p = list; *p; p++)
            if (*p == '\n')
                *p = ' ';
        if (pick)
            emit_str(e, LC_EV_ERROR, "out of memory");
        else
            emit_str(e, LC_EV_ERROR, "/model %s: not a model of %s (it has: %s); still using %s",
                     name, e->remote_url, *list ? list : "none",
                     lc_remote_model(e->remote) ? lc_remote_model(e->remote) : "the server's default");
        free(m);
        free(list);
        finish(e, LC_DONE_ERROR, 0, 0, 0);
        return;
    }
    free(list);
    e->remote_n_ctx = lc_remote_n_ctx(e->remote, &e->quitting);   /* the new model's */
    emit_str(e, LC_EV_INFO, "name=%s", m);
    emit_str(e, LC_EV_LOADED, "%s at %s", m, e->remote_url);
    emit(e, LC_EV_STATS, -1, e->remote_n_ctx, 0, 0);
    free(m);
    finish(e, LC_DONE_EOG, 0, 0, 0);
}

/* ---------------------------------------------------------------- KV state files */

/* CMD_KV_SAVE: the cache, its ids and the replies' ids to path (llm/kvstate.h), unless the
 * same cache was written there last. */
static void save_state(struct lc_engine *e, const char *path)
{
    if (!e->ctx || e->remote_url || e->n_cache <= 0)
        return;
    uint64_t hash = lc_fnv64(LC_FNV64_INIT, e->cache, (size_t)e->n_cache * sizeof(*e->cache));
    if (e->kv_saved_path && !strcmp(e->kv_saved_path, path) && e->kv_saved_n == e->n_cache &&
        e->kv_saved_hash == hash && e->kv_saved_shifted == e->n_shifted)
        return;
    /* the ids of the model's replies, keyed by the text they spell */
    const struct lc_chat *c = e->conv;
    struct lc_kvstate_kept *kept = calloc(c->n ? c->n : 1, sizeof(*kept));
    size_t n_kept = 0;
    int32_t kept_ids = 0;
    for (size_t i = 0; kept && i < c->n && i < e->mt_cap; i++) {
        const struct msg_toks *m = &e->mt[i];
        if (c->msgs[i].role != LC_ROLE_ASSISTANT || m->n <= 0 || m->bytes > c->msgs[i].len ||
            kept_ids + m->n > e->n_cache)
            continue;
        kept[n_kept++] = (struct lc_kvstate_kept){ lc_fnv64(LC_FNV64_INIT, c->msgs[i].text, m->bytes),
                                                   m->bytes, m->n, m->ids };
        kept_ids += m->n;
    }
    char *err = NULL;
    if (!kept)
        err = xasprintf("out of memory");
    else if (e->slow_save_ms > 0)
        nanosleep(&(struct timespec){ e->slow_save_ms / 1000, (long)(e->slow_save_ms % 1000) * 1000000L },
                  NULL);
    if (kept && lc_kvstate_save(path, e->ctx, e->cache, e->n_cache, kept, n_kept, &err) == 0) {
        free(kept);
        free(e->kv_saved_path);
        e->kv_saved_path = strdup(path);
        e->kv_saved_n = e->n_cache;
        e->kv_saved_hash = hash;
        e->kv_saved_shifted = e->n_shifted;
        e->kv_save_failed = false;
        return;
    }
    free(kept);
    if (!e->kv_save_failed)
        emit_str(e, LC_EV_ERROR, "the KV state %s was not saved: %s; the transcript is kept "
                 "(resuming it reads the conversation again)", path, err ? err : "out of memory");
    e->kv_save_failed = true;
    free(err);
}

/*
 * CMD_KV_LOAD: the cache from the state file at path for the conversation just set (after
 * CMD_CONV).  The replies get back the ids they were generated as (those whose text matches),
 * so that the conversation renders to the tokens the file holds; the cells of the common prefix
 * are read; the next reply decodes only the rest (sync_prompt).  Ends with LC_EV_DONE.
 */
static void load_state(struct lc_engine *e, const char *path)
{
    const double t0 = now_s();
    int32_t restored = 0, n_toks = 0, common = 0;
    int32_t *toks = NULL;
    size_t *given = NULL, n_given = 0;
    int why = 0;
    char *err = NULL;
    struct lc_kvstate *s = NULL;
    if (!e->ctx || e->remote_url)
        goto done;
    test_slow(e);   /* a slow disk: the window in which a stop must be seen */
    s = lc_kvstate_open(path, e->ctx, &why, &err);
    if (!s) {
        if (why != LC_KVSTATE_MISSING)
            emit_str(e, LC_EV_NOTE, "KV state %s not used: %s; the conversation is read again "
                     "with the next message", path, err ? err : "out of memory");
        goto done;
    }
    const struct lc_chat *c = e->conv;
    given = calloc(c->n ? c->n : 1, sizeof(*given));
    if (!given || !mt_fit(e)) {
        emit_str(e, LC_EV_ERROR, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < c->n; i++) {
        if (c->msgs[i].role != LC_ROLE_ASSISTANT || e->mt[i].n > 0)
            continue;
        for (size_t k = 0; k < lc_kvstate_n_kept(s); k++) {
            const struct lc_kvstate_kept *kp = lc_kvstate_kept(s, k);
            if (kp->bytes > c->msgs[i].len ||
                lc_fnv64(LC_FNV64_INIT, c->msgs[i].text, kp->bytes) != kp->hash)
                continue;
            struct msg_toks m = { malloc((size_t)kp->n * sizeof(int32_t)), kp->n, kp->n, kp->bytes };
            if (m.ids) {
                memcpy(m.ids, kp->ids, (size_t)kp->n * sizeof(int32_t));
                e->mt[i] = m;
                given[n_given++] = i;
            }
            break;
        }
    }
    if (build_prompt(e, 0, 0, &toks, &n_toks, NULL, &err) != 0) {
        emit_str(e, LC_EV_ERROR, "cannot build the prompt: %s", err ? err : "out of memory");
        goto undo;
    }
    const int32_t n_saved = lc_kvstate_n_tokens(s);
    const int32_t *saved = lc_kvstate_tokens(s);
    while (common < n_saved && common < n_toks && saved[common] == toks[common])
        common++;
    if (common == 0) {
        emit_str(e, LC_EV_NOTE, "KV state %s not used: the saved tokens differ from the "
                 "conversation's from the first; the conversation is read again with the next "
                 "message", path);
        goto undo;
    }
    if (n_saved > e->cap_cache) {
        int32_t *cc = realloc(e->cache, (size_t)n_saved * sizeof(*cc));
        if (!cc) {
            emit_str(e, LC_EV_ERROR, "out of memory");
            goto undo;
        }
        e->cache = cc;
        e->cap_cache = n_saved;
    }
    e->n_cache = 0;
    int r = lc_kvstate_load(s, e->ctx, common, on_progress, e, &why, &err);
    if (r != 0) {
        if (r == 1)
            emit_str(e, LC_EV_NOTE, "KV state %s: reading it was stopped; the conversation is "
                     "read again with the next message", path);
        else
            emit_str(e, LC_EV_NOTE, "KV state %s not used: %s; the conversation is read again "
                     "with the next message", path, err ? err : "out of memory");
        goto undo;
    }
    memcpy(e->cache, saved, (size_t)common * sizeof(*saved));
    e->n_cache = restored = common;
    if (common == n_saved) {   /* the file holds this cache: no need to write it again */
        free(e->kv_saved_path);
        e->kv_saved_path = strdup(path);
        e->kv_saved_n = e->n_cache;
        e->kv_saved_hash = lc_fnv64(LC_FNV64_INIT, e->cache, (size_t)e->n_cache * sizeof(*e->cache));
        e->kv_saved_shifted = e->n_shifted;
    }
    if (common < n_saved)
        emit_str(e, LC_EV_NOTE, "KV state %s: %d of its %d tokens restored in %.2f s; the saved "
                 "tokens differ from the conversation's from token %d", path, common, n_saved,
                 now_s() - t0, common);
    else
        emit_str(e, LC_EV_NOTE, "KV state %s: %d tokens restored in %.2f s", path, common,
                 now_s() - t0);
    emit_stats(e);
    goto done;
undo:
    for (size_t k = 0; k < n_given; k++) {   /* read as without the file */
        free(e->mt[given[k]].ids);
        memset(&e->mt[given[k]], 0, sizeof(e->mt[given[k]]));
    }
done:
    free(err);
    free(toks);
    free(given);
    lc_kvstate_close(s);
    atomic_store(&e->stop, false);
    emit(e, LC_EV_DONE, LC_DONE_STATE, restored, 0, 0);
    atomic_fetch_sub(&e->busy, 1);
}

/* ---------------------------------------------------------------- the thread */

/*
 * --draft: the draft model (loaded once, with the first model) must have the vocabulary of
 * e->model; its context is made as large as e->ctx and given to e->spec.  A model of another
 * vocabulary is refused with a message (type fail_as) naming both files.  false on failure.
 */
static bool load_draft_as(struct lc_engine *e, enum lc_event_type fail_as)
{
    char *err = NULL;
    if (!e->draft_model) {
        e->draft_model = lc_model_load(e->draft_path, false, &err);
        if (!e->draft_model) {
            emit_str(e, fail_as, "draft model: %s", err ? err : "cannot load it");
            free(err);
            return false;
        }
    }
    if (lc_spec_check_vocab(e->model, e->model_path, e->draft_model, e->draft_path, &err) != 0) {
        emit_str(e, fail_as, "%s", err ? err : "out of memory");
        free(err);
        return false;
    }
    const int32_t n_ctx = lc_context_n_ctx(e->ctx);
    if (e->draft_ctx && lc_context_n_ctx(e->draft_ctx) == n_ctx &&
        lc_context_same_threads(e->draft_ctx, e->ctx))
        return true;
    /* a new context beside the old one: on failure the old model keeps its draft.  It computes
     * with the target context's workers (the two take turns on this thread), so that one set of
     * workers spins between jobs rather than two competing for the cores. */
    struct lc_context_params dp = lc_context_default_params();
    dp.n_ctx = n_ctx;
    dp.threads_from = e->ctx;
    dp.n_batch = e->cparams.n_batch;
    struct lc_context *dc = lc_context_new(e->draft_model, &dp, &err);
    if (!dc) {
        emit_str(e, fail_as, "draft model: %s", err ? err : "cannot create a context");
        free(err);
        return false;
    }
    lc_context_set_progress(dc, on_draft_progress, e);
    if (lc_spec_set_draft(&e->spec, dc) != 0) {
        lc_context_free(dc);
        if (e->draft_ctx && lc_spec_set_draft(&e->spec, e->draft_ctx) != 0)
            lc_spec_set_draft(&e->spec, NULL);
        emit_str(e, fail_as, "out of memory");
        return false;
    }
    lc_context_free(e->draft_ctx);
    e->draft_ctx = dc;
    return true;
}

/* load_draft_as with its failures as errors (the user asked for the draft or the switch) */
static bool load_draft(struct lc_engine *e)
{
    return load_draft_as(e, LC_EV_ERROR);
}

/* Open e->model_path: model, context, sampler and chat template into e (what is made stays in
 * e on failure, for the caller to free).  Notes and the error go to the UI.  false on failure. */
static bool load_parts(struct lc_engine *e)
{
    char *err = NULL;
    e->model = lc_model_load(e->model_path, false, &err);
    if (!e->model) {
        emit_str(e, LC_EV_ERROR, "%s", err ? err : "cannot load the model");
        free(err);
        return false;
    }
    if (stop_requested(e))
        return false;   /* a switch cancelled (Esc) or quit: no context made for nothing */
    e->ctx = lc_context_new(e->model, &e->cparams, &err);
    if (!e->ctx) {
        emit_str(e, LC_EV_ERROR, "%s", err ? err : "cannot create a context");
        free(err);
        return false;
    }
    lc_context_set_progress(e->ctx, on_progress, e);
    if (lc_context_n_ctx(e->ctx) > e->model->hp.n_ctx_train)   /* accepted, as llama.cpp does */
        emit_str(e, LC_EV_NOTE, "the context (%d tokens) is larger than the %d the model was trained "
                 "with: text past %d tokens may be poor", lc_context_n_ctx(e->ctx),
                 e->model->hp.n_ctx_train, e->model->hp.n_ctx_train);
    if (e->model->x16_note[0])
        emit_str(e, LC_EV_NOTE, "%s", e->model->x16_note);
    if (e->draft_path && !load_draft(e))
        return false;
    e->smp = lc_sampler_new(&e->params, e->model->hp.n_vocab);
    if (!e->smp) {
        emit_str(e, LC_EV_ERROR, "out of memory");
        return false;
    }
    /* Chat template: --chat-template / [chat] template, else the model's, else plain. */
    const char *jinja = e->template_text ? e->template_text
                                         : lc_gguf_get_str(e->model->gguf, "tokenizer.chat_template");
    int id = -1;
    if (e->template_name) {
        id = lc_chat_template_from_name(e->template_name);
        if (id < 0)
            emit_str(e, LC_EV_NOTE, "unknown chat template '%s'; using the model's", e->template_name);
    }
    /* the model's Jinja run by the interpreter, its family (else ChatML) as the fallback */
    {
        const struct lc_vocab *v = e->model->vocab;
        size_t bl = 0, el = 0;
        const char *b = lc_vocab_bos(v) >= 0 ? lc_vocab_piece(v, lc_vocab_bos(v), true, &bl) : "";
        const char *s = lc_vocab_eos(v) >= 0 ? lc_vocab_piece(v, lc_vocab_eos(v), true, &el) : "";
        char *bos = strndup(b, bl), *eos = strndup(s, el), *note = NULL;
        free(e->tmpl_note);   /* a new template: its fallbacks are said again */
        e->tmpl_note = NULL;
        e->ct = bos && eos ? lc_chat_tmpl_new(id >= 0 ? lc_chat_template_name(id) : jinja, bos,
                                              eos, &note) : NULL;
        free(bos);
        free(eos);
        if (!e->ct) {
            emit_str(e, LC_EV_ERROR, "out of memory");
            return false;
        }
        if (note)
            emit_str(e, LC_EV_NOTE, "%s", note);
        free(note);
    }
    e->tmpl = lc_chat_tmpl_family(e->ct);
    e->stops = lc_chat_tmpl_stop_strings(e->ct);
    return true;
}

/* Tell the UI about the model in place (LC_EV_INFO facts, LC_EV_LOADED, n_ctx and threads). */
static void announce(struct lc_engine *e)
{
    char desc[192];
    lc_model_desc(e->model, desc, sizeof(desc));
    emit_str(e, LC_EV_INFO, "isa=%s", lc_kernels()->isa);
    emit_str(e, LC_EV_INFO, "template=%s", lc_chat_tmpl_name(e->ct));
    emit_str(e, LC_EV_INFO, "name=%s", e->model->name);
    emit_text(e, LC_EV_LOADED, desc, strlen(desc));
    /* a: n_ctx, b: threads, in a separate record after the text */
    emit(e, LC_EV_STATS, 0, lc_context_n_ctx(e->ctx), 0, 0);
    struct lc_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = LC_EV_INFO;
    int n = snprintf(ev.text, sizeof(ev.text), "threads=%d", lc_context_n_threads(e->ctx));
    ev.len = (uint8_t)(n > 0 ? n : 0);
    push(e, &ev);
    wake(e);
}

static bool load(struct lc_engine *e)
{
    if (!load_parts(e))
        return false;
    announce(e);
    return true;
}

/* The parts of a loaded model that a switch replaces as one. */
struct loaded {
    char *path, *template_name, *template_text;
    struct lc_model *model;
    struct lc_context *ctx;
    struct lc_sampler *smp;
    struct lc_chat_tmpl *ct;
};

static void loaded_take(struct lc_engine *e, struct loaded *l)
{
    *l = (struct loaded){ e->model_path, e->template_name, e->template_text, e->model, e->ctx,
                          e->smp, e->ct };
    e->model_path = e->template_name = e->template_text = NULL;
    e->model = NULL;
    e->ctx = NULL;
    e->smp = NULL;
    e->ct = NULL;
}

static void loaded_put(struct lc_engine *e, struct loaded *l)
{
    e->model_path = l->path;
    e->template_name = l->template_name;
    e->template_text = l->template_text;
    e->model = l->model;
    e->ctx = l->ctx;
    e->smp = l->smp;
    e->ct = l->ct;
    e->tmpl = e->ct ? lc_chat_tmpl_family(e->ct) : LC_CHAT_TEMPLATE_NONE;
    e->stops = e->ct ? lc_chat_tmpl_stop_strings(e->ct) : NULL;
}

static void loaded_free(struct loaded *l)
{
    lc_chat_tmpl_free(l->ct);
    lc_sampler_free(l->smp);
    lc_context_free(l->ctx);
    lc_model_free(l->model);
    free(l->path);
    free(l->template_name);
    free(l->template_text);
}

/*
 * /model PATH: open the model at path beside the current one; when it is ready it replaces it
 * (with its own chat template: --chat-template and --chat-template-file were for the first
 * model), the conversation is kept and every token is read again with the next reply (the KV
 * cache and the kept tokens belong to the old vocabulary).  A failure, Esc (stop) or quit during
 * the load leaves the current model in place.  Ends with LC_EV_DONE: LC_DONE_EOG (switched,
 * after LC_EV_LOADED), LC_DONE_STOPPED or LC_DONE_ERROR.
 */
static void switch_model(struct lc_engine *e, const char *path)
{
    struct loaded old, failed;
    loaded_take(e, &old);
    e->model_path = strdup(path);
    int reason = LC_DONE_ERROR;
    test_slow(e);
    if (!e->model_path) {
        emit_str(e, LC_EV_ERROR, "out of memory");
    } else if (stop_requested(e)) {
        reason = LC_DONE_STOPPED;   /* Esc before the load began: nothing read */
    } else if (load_parts(e)) {
        reason = stop_requested(e) ? LC_DONE_STOPPED : LC_DONE_EOG;
    } else if (stop_requested(e)) {
        reason = LC_DONE_STOPPED;   /* Esc between the model and its context */
    }
    if (reason != LC_DONE_EOG) {
        loaded_take(e, &failed);
        loaded_free(&failed);
        loaded_put(e, &old);
        /* the draft context may have been made for the failed one (its size, its workers):
         * made again for the kept one; if that fails the draft keeps the context it has (its
         * pool is reference-counted), which works, only slower */
        if (e->draft_path && e->draft_ctx && e->ctx)
            load_draft_as(e, LC_EV_NOTE);
        emit_str(e, LC_EV_NOTE, "%s: still using %s", reason == LC_DONE_STOPPED
                 ? "model switch cancelled" : "the model was not changed",
                 e->model ? e->model->name : "no model");
    } else {
        loaded_free(&old);
        mt_remove(e, 0, e->mt_cap);   /* token ids of the old vocabulary */
        kept_clear(e);                /* and those of /regen's earlier replies */
        e->n_cache = 0;
        e->n_hidden = 0;              /* the new context reads all it can again */
        e->noted_full = false;
        announce(e);
    }
    finish(e, reason, 0, 0, 0);
}

/* Where the chat template in use came from, for /show. */
static const char *template_source(const struct lc_engine *e)
{
    if (e->template_text)
        return "--chat-template-file";
    if (e->template_name && lc_chat_template_from_name(e->template_name) >= 0)
        return "--chat-template";
    if (lc_gguf_get_str(e->model->gguf, "tokenizer.chat_template"))
        return "the model's tokenizer.chat_template";
    return "none in the model";
}

/* "name 2 '</s>'" or "name none" for /show. */
static void token_fact(const struct lc_vocab *v, const char *what, int32_t id, char *buf, size_t len)
{
    size_t n = 0;
    const char *p = id >= 0 ? lc_vocab_piece(v, id, true, &n) : NULL;
    if (!p)
        snprintf(buf, len, "%s none", what);
    else
        snprintf(buf, len, "%s %d '%.*s'", what, id, (int)(n < 40 ? n : 40), p);
}

/* /show: the facts of the model in use as one NOTE (file, architecture, parameters, tensor
 * types, context, chat template, special tokens); remote mode: the server and model. */
static void show_model(struct lc_engine *e)
{
    if (e->remote) {
        emit_str(e, LC_EV_NOTE, "model %s at %s (remote: no local facts)",
                 lc_remote_model(e->remote) ? lc_remote_model(e->remote) : "(the server's default)",
                 e->remote_url);
        return;
    }
    if (!e->model) {
        emit_str(e, LC_EV_NOTE, "no model is loaded");
        return;
    }
    const struct lc_model *m = e->model;
    int64_t count[LC_TYPE_COUNT] = { 0 };
    int64_t n_tensors = 0;
    for (int p = 0; p < (m->n_parts > 0 ? m->n_parts : 1); p++) {
        const struct lc_gguf *g = m->n_parts > 0 ? m->parts[p] : m->gguf;
        for (int64_t i = 0; i < lc_gguf_n_tensors(g); i++, n_tensors++)
            count[lc_gguf_tensor(g, i)->type]++;
    }
    char types[512];
    size_t n = 0;
    types[0] = '\0';
    for (int t = 0; t < LC_TYPE_COUNT && n < sizeof(types); t++)
        if (count[t])
            n += (size_t)snprintf(types + n, sizeof(types) - n, "%s%s %lld", n ? ", " : "",
                                  lc_type_name(t), (long long)count[t]);
    char desc[192], bos[64], eos[64], eot[64];
    lc_model_desc(m, desc, sizeof(desc));
    token_fact(m->vocab, "bos", lc_vocab_bos(m->vocab), bos, sizeof(bos));
    token_fact(m->vocab, "eos", lc_vocab_eos(m->vocab), eos, sizeof(eos));
    token_fact(m->vocab, "eot", lc_vocab_eot(m->vocab), eot, sizeof(eot));
    const char *arch = lc_gguf_get_str(m->gguf, "general.architecture");
    emit_str(e, LC_EV_NOTE,
             "model: %s (%s)\nfile: %s (%.1f MiB)\narchitecture: %s, %llu parameters, %d layers, "
             "embedding %d, vocabulary %d\ntensors: %lld (%s)\ncontext: %d tokens in use, %d "
             "trained\ntemplate: %s (from %s)\nspecial tokens: %s, %s, %s",
             m->name, desc, e->model_path, (double)m->n_bytes / (1024.0 * 1024.0),
             arch ? arch : (m->hp.arch ? m->hp.arch->name : "?"), (unsigned long long)m->n_params,
             m->hp.n_layer, m->hp.n_embd, m->hp.n_vocab, (long long)n_tensors, types,
             lc_context_n_ctx(e->ctx), m->hp.n_ctx_train, lc_chat_tmpl_name(e->ct),
             template_source(e), bos, eos, eot);
}

static void *engine_main(void *arg)
{
    struct lc_engine *e = arg;
    if (e->remote_url)
        load_remote(e);
    else
        load(e);
    for (;;) {
        pthread_mutex_lock(&e->mu);
        while (!e->head)
            pthread_cond_wait(&e->cv, &e->mu);
        struct cmd *c = e->head;
        e->head = c->next;
        if (!e->head)
            e->tail = NULL;
        pthread_mutex_unlock(&e->mu);
        bool quit = false;
        switch (c->type) {
        case CMD_SUBMIT:
            kept_clear(e);   /* a new turn: the earlier replies belonged to the last one */
            if (lc_chat_add(e->conv, LC_ROLE_USER, c->text, strlen(c->text)) < 0 || !mt_fit(e)) {
                emit_str(e, LC_EV_ERROR, "out of memory");
                finish(e, LC_DONE_ERROR, 0, 0, 0);
                break;
            }
            reply(e, false);
            break;
        case CMD_REGEN:
            kept_take_last(e);   /* kept with its ids: the UI may show it again */
            if (e->conv->n && e->conv->msgs[e->conv->n - 1].role == LC_ROLE_USER) {
                reply(e, true);
            } else {
                emit_str(e, LC_EV_NOTE, "nothing to regenerate");
                finish(e, LC_DONE_ERROR, 0, 0, 0);
            }
            break;
        case CMD_CLEAR:
            kept_clear(e);
            conv_remove(e, first_droppable(e->conv), e->conv->n);
            break;
        case CMD_UNDO:
            undo(e);
            break;
        case CMD_REPLY:
            set_reply(e, c->text);
            break;
        case CMD_SYSTEM:
            conv_set_system(e, c->text);
            break;
        case CMD_CONV:
            kept_clear(e);
            mt_remove(e, 0, e->mt_cap);
            lc_chat_free(e->conv);
            e->conv = c->conv;
            c->conv = NULL;
            e->n_hidden = 0;   /* read again from the start (hidden again if need be) */
            break;
        case CMD_MODELS:
            list_models(e);
            break;
        case CMD_LOAD:
            if (e->remote) {
                switch_remote(e, c->text);
            } else {
                switch_model(e, c->text);
            }
            break;
        case CMD_SHOW:
            show_model(e);
            break;
        case CMD_KV_SAVE:
            save_state(e, c->text);
            break;
        case CMD_KV_DELETE:
            /* after every save queued before it, so none can put the file back */
            if (unlink(c->text) != 0 && errno != ENOENT)
                emit_str(e, LC_EV_ERROR, "could not delete %s: %s", c->text, strerror(errno));
            if (e->kv_saved_path && !strcmp(e->kv_saved_path, c->text)) {
                free(e->kv_saved_path);
                e->kv_saved_path = NULL;
            }
            break;
        case CMD_KV_LOAD:
            load_state(e, c->text);
            break;
        case CMD_QUIT:
            quit = true;
            break;
        }
        free(c->text);
        lc_chat_free(c->conv);
        free(c);
        if (quit)
            break;
    }
    emit(e, LC_EV_QUIT, 0, 0, 0, 0);
    return NULL;
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

struct lc_engine *lc_engine_start(const struct lc_engine_config *cfg, char **err)
{
    *err = NULL;
    struct lc_engine *e = calloc(1, sizeof(*e));
    if (!e) {
        *err = xasprintf("out of memory");
        return NULL;
    }
    e->wake_rd = e->wake_wr = -1;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    atomic_init(&e->params_changed, false);
    atomic_init(&e->stop, false);
    atomic_init(&e->busy, 0);
    atomic_init(&e->quitting, false);
    e->model_path = dup_or_null(cfg->model_path);
    e->draft_path = cfg->spec_draft > 0 ? dup_or_null(cfg->draft_path) : NULL;
    e->system_prompt = dup_or_null(cfg->system_prompt);
    e->template_name = dup_or_null(cfg->chat_template);
    e->template_text = dup_or_null(cfg->chat_template_text);
    e->remote_url = cfg->remote_url && *cfg->remote_url ? strdup(cfg->remote_url) : NULL;
    e->remote_model = dup_or_null(cfg->remote_model);
    if (cfg->remote_api_key_env && *cfg->remote_api_key_env) {
        const char *key = getenv(cfg->remote_api_key_env);
        e->remote_key = key && *key ? strdup(key) : NULL;
    }
    e->cparams = lc_context_default_params();
    e->cparams.n_ctx = cfg->n_ctx;
    e->cparams.n_threads = cfg->n_threads;
    if (cfg->n_batch > 0)
        e->cparams.n_batch = cfg->n_batch;
    e->cparams.kv_type = cfg->kv_f32 ? LC_TYPE_F32 : cfg->kv_q8_0 ? LC_TYPE_Q8_0 : LC_TYPE_F16;
    e->cparams.flash_attn = cfg->flash_attn;
    e->cparams.fast_math = cfg->fast_math;
    if (lc_spec_init(&e->spec, cfg->spec_draft) != 0) {
        *err = xasprintf("out of memory");
        goto fail;
    }
    e->params = cfg->sampling;
    e->user_seed = cfg->sampling.seed;   /* pick_up_params re-seeds only on a change */
    e->n_predict = cfg->n_predict;
    e->verbose_prompt = cfg->verbose_prompt;
    e->conv = lc_chat_new();
    e->ring = lc_ring_new(sizeof(struct lc_event), 4096);
    if ((!e->model_path && !e->remote_url) || !e->conv || !e->ring) {
        *err = xasprintf("out of memory");
        goto fail;
    }
    if (e->system_prompt && *e->system_prompt)
        lc_chat_set_system(e->conv, e->system_prompt);
    {
        const char *ns = getenv("LLAMACHAT_NO_SHIFT");
        e->no_shift = ns && *ns && strcmp(ns, "0") != 0;
        const char *slow = getenv("LLAMACHAT_TEST_SLOW_MS");
        e->slow_ms = slow && *slow ? atoi(slow) : 0;
        const char *slow_save = getenv("LLAMACHAT_TEST_SLOW_SAVE_MS");
        e->slow_save_ms = slow_save && *slow_save ? atoi(slow_save) : 0;
        const char *fail = getenv("LLAMACHAT_TEST_FAIL_AFTER");
        e->fail_after = fail && *fail ? atoi(fail) : 0;
        const char *lp = cfg->log_path ? cfg->log_path : getenv("LLAMACHAT_LOG");
        if (lp && *lp && !(e->log = fopen(lp, "we"))) {
            *err = xasprintf("cannot open the token log %s: %s", lp, strerror(errno));
            goto fail;
        }
    }
#ifdef __linux__
    e->wake_rd = e->wake_wr = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
#endif
    if (e->wake_rd < 0) {
        int fds[2];
        if (pipe(fds) != 0) {
            *err = xasprintf("cannot create a wake-up pipe: %s", strerror(errno));
            goto fail;
        }
        for (int i = 0; i < 2; i++) {
            fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
            fcntl(fds[i], F_SETFD, FD_CLOEXEC);
        }
        e->wake_rd = fds[0];
        e->wake_wr = fds[1];
    }
    int rc = pthread_create(&e->thread, NULL, engine_main, e);
    if (rc != 0) {
        *err = xasprintf("cannot start the inference thread: %s", strerror(rc));
        goto fail;
    }
    e->started = true;
    return e;
fail:
    lc_engine_free(e);
    return NULL;
}

void lc_engine_free(struct lc_engine *e)
{
    if (!e)
        return;
    if (e->started) {
        atomic_store(&e->quitting, true);
        atomic_store(&e->stop, true);
        /* QUIT goes first: pending commands are dropped, but for KV state saves (a file
         * write each, which a reopened chat would miss) and deletions (in their order). */
        struct cmd *q = calloc(1, sizeof(*q));
        pthread_mutex_lock(&e->mu);
        struct cmd *keep = NULL, **kt = &keep;
        for (struct cmd *c = e->head, *n; c; c = n) {
            n = c->next;
            c->next = NULL;
            if (c->type == CMD_KV_SAVE || c->type == CMD_KV_DELETE) {
                *kt = c;
                kt = &c->next;
            } else {
                free(c->text);
                lc_chat_free(c->conv);
                free(c);
            }
        }
        e->head = e->tail = NULL;
        for (struct cmd *c = keep; c; c = c->next)
            e->tail = c;
        e->head = keep;
        if (q) {
            q->type = CMD_QUIT;
            if (e->tail)
                e->tail->next = q;
            else
                e->head = q;
            e->tail = q;
        }
        pthread_cond_signal(&e->cv);
        pthread_mutex_unlock(&e->mu);
        /* The engine may be waiting for ring space: keep draining until it is done. */
        struct lc_event ev;
        for (;;) {
            bool quit = false;
            while (lc_ring_pop(e->ring, &ev))
                quit |= ev.type == LC_EV_QUIT;
            if (quit)
                break;
            struct timespec ts = { 0, 1000000 };
            nanosleep(&ts, NULL);
        }
        pthread_join(e->thread, NULL);
    }
    for (struct cmd *c = e->head, *n; c; c = n) {
        n = c->next;
        free(c->text);
        lc_chat_free(c->conv);
        free(c);
    }
    lc_spec_free(&e->spec);
    lc_context_free(e->draft_ctx);
    lc_model_free(e->draft_model);
    free(e->draft_path);
    lc_sampler_free(e->smp);
    lc_context_free(e->ctx);
    lc_model_free(e->model);
    lc_chat_free(e->conv);
    lc_ring_free(e->ring);
    if (e->wake_rd >= 0)
        close(e->wake_rd);
    if (e->wake_wr >= 0 && e->wake_wr != e->wake_rd)
        close(e->wake_wr);
    if (e->mt)
        mt_remove(e, 0, e->mt_cap);
    kept_clear(e);
    free(e->mt);
    if (e->log)
        fclose(e->log);
    free(e->cache);
    free(e->kv_saved_path);
    free(e->model_path);
    free(e->system_prompt);
    free(e->template_name);
    free(e->template_text);
    lc_remote_free(e->remote);
    free(e->remote_url);
    free(e->remote_model);
    if (e->remote_key) {
        memset(e->remote_key, 0, strlen(e->remote_key));
        free(e->remote_key);
    }
    lc_chat_tmpl_free(e->ct);
    free(e->tmpl_note);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}
