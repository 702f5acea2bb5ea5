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
#include "llm/model.h"
#include "llm/sampler.h"
#include "llm/tokenizer.h"
#include "ring.h"

enum cmd_type { CMD_SUBMIT, CMD_REGEN, CMD_CLEAR, CMD_SYSTEM, CMD_CONV, CMD_QUIT };

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
    char *model_path, *system_prompt, *template_name;
    struct lc_context_params cparams;
    struct lc_sampler_params params;
    int32_t n_predict;
    struct lc_model *model;
    struct lc_context *ctx;
    struct lc_sampler *smp;
    int tmpl;                 /* chat template id; LC_CHAT_TEMPLATE_NONE = plain continuation */
    const char *const *stops; /* stop strings of the template */
    struct lc_chat *conv;
    int32_t *cache;
    int32_t n_cache, cap_cache;
    double last_stats;        /* monotonic seconds of the last STATS event */
    int32_t n_eval;           /* prompt tokens evaluated for the current reply */
    bool noted_full;          /* the context-full note was shown for the current reply */
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

int lc_engine_set_params(struct lc_engine *e, const struct lc_sampler_params *p, int32_t n_predict)
{
    pthread_mutex_lock(&e->mu);
    e->new_params = *p;
    e->new_n_predict = n_predict;
    atomic_store(&e->params_changed, true);
    pthread_mutex_unlock(&e->mu);
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

/* Take new parameters if the UI changed them (between tokens). */
static void pick_up_params(struct lc_engine *e)
{
    if (!atomic_load_explicit(&e->params_changed, memory_order_acquire))
        return;
    pthread_mutex_lock(&e->mu);
    e->params = e->new_params;
    e->n_predict = e->new_n_predict;
    atomic_store(&e->params_changed, false);
    pthread_mutex_unlock(&e->mu);
    if (e->smp)
        lc_sampler_set_params(e->smp, &e->params);
}

/* ---------------------------------------------------------------- prompt rendering */

/* The text the model continues: the conversation rendered with the template, with the opening
 * of the assistant's turn, followed by the reply written so far (a trailing assistant message).
 * Plain continuation (base models) is the concatenation of the messages. */
static char *render(struct lc_engine *e, char **err)
{
    const struct lc_chat *c = e->conv;
    size_t n = c->n;
    const char *partial = "";
    if (n > 0 && c->msgs[n - 1].role == LC_ROLE_ASSISTANT) {
        partial = c->msgs[n - 1].text;
        n--;
    }
    struct lc_chat_msg *msgs = calloc(n ? n : 1, sizeof(*msgs));
    if (!msgs) {
        *err = xasprintf("out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        msgs[i] = (struct lc_chat_msg){ c->msgs[i].role, c->msgs[i].text };
    char *text = lc_chat_template_apply(e->tmpl, msgs, n, true, err);
    free(msgs);
    if (!text)
        return NULL;
    if (*partial) {
        size_t a = strlen(text), b = strlen(partial);
        char *t = realloc(text, a + b + 1);
        if (!t) {
            free(text);
            *err = xasprintf("out of memory");
            return NULL;
        }
        memcpy(t + a, partial, b + 1);
        text = t;
    }
    return text;
}

/* Tokenize into a malloc'd array; returns the count or -1. */
static int32_t tokenize(struct lc_engine *e, const char *text, int32_t **out)
{
    const struct lc_vocab *v = e->model->vocab;
    size_t len = strlen(text);
    bool special = e->tmpl != LC_CHAT_TEMPLATE_NONE;
    bool bos = lc_vocab_add_bos(v);
    int32_t cap = (int32_t)(len + 8);
    int32_t *t = malloc((size_t)cap * sizeof(*t));
    if (!t)
        return -1;
    int32_t n = lc_tokenize(v, text, len, bos, special, t, cap);
    if (n < 0 && n != INT32_MIN) {
        cap = -n;
        int32_t *t2 = realloc(t, (size_t)cap * sizeof(*t));
        if (!t2) {
            free(t);
            return -1;
        }
        t = t2;
        n = lc_tokenize(v, text, len, bos, special, t, cap);
    }
    if (n < 0) {
        free(t);
        return -1;
    }
    *out = t;
    return n;
}

/* Index of the first message that may be dropped (after the system prompt). */
static size_t first_droppable(const struct lc_chat *c)
{
    return c->n > 0 && c->msgs[0].role == LC_ROLE_SYSTEM ? 1 : 0;
}

/* Drop the oldest turn (a user message and the replies after it); false if only the message
 * being answered (and its partial reply) is left. */
static bool drop_oldest_turn(struct lc_chat *c)
{
    size_t f = first_droppable(c);
    /* the last user message must stay */
    size_t last_user = c->n;
    for (size_t i = c->n; i-- > f;)
        if (c->msgs[i].role == LC_ROLE_USER) {
            last_user = i;
            break;
        }
    if (last_user == c->n || last_user <= f)
        return false;
    size_t end = f + 1;
    while (end < last_user && c->msgs[end].role != LC_ROLE_USER)
        end++;
    for (size_t i = f; i < end; i++)
        free(c->msgs[i].text);
    memmove(c->msgs + f, c->msgs + end, (c->n - end) * sizeof(*c->msgs));
    c->n -= end - f;
    return true;
}

/* Cut the first half of message i's text at a UTF-8 boundary (the single-turn fallback). */
static void halve_message(struct lc_message *m)
{
    size_t cut = m->len / 2;
    while (cut < m->len && ((unsigned char)m->text[cut] & 0xC0) == 0x80)
        cut++;
    memmove(m->text, m->text + cut, m->len - cut + 1);
    m->len -= cut;
}

/*
 * Make the KV cache hold the rendered conversation, decoding only what is not cached yet.
 * reserve: room to keep free for the reply.  Returns 0, 1 when stopped, -1 on error (reported).
 */
static int sync_prompt(struct lc_engine *e, int32_t reserve)
{
    const int32_t n_ctx = lc_context_n_ctx(e->ctx);
    int32_t *toks = NULL, n = 0;
    int dropped = 0, halved = 0;
    char *err = NULL;
    for (;;) {
        char *text = render(e, &err);
        if (!text) {
            emit_str(e, LC_EV_ERROR, "cannot render the conversation: %s", err ? err : "?");
            free(err);
            return -1;
        }
        free(toks);
        toks = NULL;
        n = tokenize(e, text, &toks);
        free(text);
        if (n < 0) {
            emit_str(e, LC_EV_ERROR, "cannot tokenize the conversation");
            return -1;
        }
        if (n + reserve <= n_ctx && n > 0)
            break;
        if (n == 0) {
            free(toks);
            emit_str(e, LC_EV_ERROR, "nothing to evaluate (empty prompt and no BOS token)");
            return -1;
        }
        /* Too long: drop the oldest turns after the system prompt, then halve the last text. */
        if (drop_oldest_turn(e->conv)) {
            dropped++;
            continue;
        }
        size_t f = first_droppable(e->conv);
        size_t longest = e->conv->n;
        for (size_t i = f; i < e->conv->n; i++)
            if (longest == e->conv->n || e->conv->msgs[i].len > e->conv->msgs[longest].len)
                longest = i;
        if (longest == e->conv->n || e->conv->msgs[longest].len < 2 || halved > 64) {
            if (reserve > 1) {   /* last resort: generate with less room */
                reserve = 1;
                continue;
            }
            free(toks);
            emit_str(e, LC_EV_ERROR, "the system prompt alone does not fit the context (%d tokens)", n_ctx);
            return -1;
        }
        halve_message(&e->conv->msgs[longest]);
        halved++;
    }
    /* once per reply: a long reply overflows again every quarter of the context */
    if ((dropped || halved) && !e->noted_full) {
        e->noted_full = true;
        char what[96];
        if (dropped == 1)
            snprintf(what, sizeof what, "dropped the oldest message%s",
                     halved ? " and cut the start of a long one" : "");
        else if (dropped > 1)
            snprintf(what, sizeof what, "dropped the %d oldest messages%s", dropped,
                     halved ? " and cut the start of a long one" : "");
        else
            snprintf(what, sizeof what, "cut the start of a long message");
        emit_str(e, LC_EV_NOTE,
                 "context full (%d tokens): %s; the model re-reads the rest (the transcript "
                 "keeps everything)",
                 n_ctx, what);
    }

    /* Longest common prefix with what is cached; at least the last token is decoded again so
     * that its logits are fresh. */
    int32_t common = 0;
    while (common < n && common < e->n_cache && toks[common] == e->cache[common])
        common++;
    if (common >= n)
        common = n - 1;
    if (n > e->cap_cache) {
        int32_t cap = n + 1024;
        int32_t *c = realloc(e->cache, (size_t)cap * sizeof(*c));
        if (!c) {
            free(toks);
            emit_str(e, LC_EV_ERROR, "out of memory");
            return -1;
        }
        e->cache = c;
        e->cap_cache = cap;
    }
    lc_context_truncate(e->ctx, common);
    e->n_cache = common;
    int rc = 0;
    e->n_eval += n - common;
    if (n - common > 0) {
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

static bool on_progress(void *user, int32_t done, int32_t total)
{
    struct lc_engine *e = user;
    if (total > 1)
        emit(e, LC_EV_PROGRESS, done, total, 0, 0);
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

/* Generate a reply to the conversation (whose last message is the user's). */
static void reply(struct lc_engine *e)
{
    int32_t n_gen = 0;
    int reason = LC_DONE_ERROR;
    e->n_eval = 0;
    if (!e->ctx) {
        emit_str(e, LC_EV_ERROR, "no model is loaded");
        goto done_noconv;
    }
    const int32_t n_ctx = lc_context_n_ctx(e->ctx);
    pick_up_params(e);
    e->noted_full = false;
    int32_t reserve = n_ctx / 8;
    if (e->n_predict >= 0 && e->n_predict + 1 < reserve)
        reserve = e->n_predict + 1;
    if (reserve < 1)
        reserve = 1;
    int r = sync_prompt(e, reserve);
    if (r != 0) {
        reason = r == 1 ? LC_DONE_STOPPED : LC_DONE_ERROR;
        goto done_noconv;
    }
    int msg = lc_chat_add(e->conv, LC_ROLE_ASSISTANT, "", 0);
    if (msg < 0) {
        emit_str(e, LC_EV_ERROR, "out of memory");
        goto done_noconv;
    }
    struct holdback hb = { 0 };
    const struct lc_vocab *v = e->model->vocab;
    emit_stats(e);
    for (;;) {
        pick_up_params(e);
        if (atomic_load(&e->stop) || atomic_load(&e->quitting)) {
            reason = LC_DONE_STOPPED;
            break;
        }
        if (e->n_predict >= 0 && n_gen >= e->n_predict) {
            reason = LC_DONE_LIMIT;
            break;
        }
        int32_t tok = lc_sampler_sample(e->smp, lc_context_logits(e->ctx, -1));
        if (lc_vocab_is_eog(v, tok)) {
            reason = LC_DONE_EOG;
            break;
        }
        lc_sampler_accept(e->smp, tok);
        n_gen++;
        char piece[256];
        int32_t len = lc_token_to_piece(v, tok, piece, sizeof(piece), false);
        if (len > 0 && hb_add(e, &hb, piece, (size_t)len, (size_t)msg)) {
            reason = LC_DONE_EOG;
            break;
        }
        if (e->n_predict >= 0 && n_gen >= e->n_predict) {
            reason = LC_DONE_LIMIT;
            break;
        }
        if (e->n_cache >= n_ctx) {
            /* The context is full in the middle of a reply: make room and go on.  The text
             * held back is part of the reply; it goes into the rendering too. */
            lc_chat_append(e->conv, (size_t)msg, hb.buf ? hb.buf : "", hb.len);
            size_t held = hb.len;
            r = sync_prompt(e, n_ctx / 4 > 0 ? n_ctx / 4 : 1);
            /* the rendering may have dropped earlier messages: the reply is the last one */
            msg = (int)e->conv->n - 1;
            if (e->conv->msgs[msg].len >= held)
                e->conv->msgs[msg].len -= held;
            e->conv->msgs[msg].text[e->conv->msgs[msg].len] = '\0';
            if (r != 0) {
                reason = r == 1 ? LC_DONE_STOPPED : LC_DONE_ERROR;
                break;
            }
            continue;   /* logits of the re-read text's last token are ready */
        }
        char *err = NULL;
        int32_t pos = e->n_cache;
        int dr = lc_context_decode(e->ctx, &tok, 1, pos, false, &err);
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
    /* No text at all (stopped at once, or an immediate end of turn): no empty reply is kept,
     * as the UI adds a reply only when text arrives. */
    if ((size_t)msg == e->conv->n - 1 && e->conv->msgs[msg].len == 0)
        lc_chat_truncate(e->conv, (size_t)msg);
    emit_stats(e);
done_noconv:
    atomic_store(&e->stop, false);
    emit(e, LC_EV_DONE, reason, n_gen, e->n_eval, 0);
    atomic_fetch_sub(&e->busy, 1);
}

/* ---------------------------------------------------------------- the thread */

static bool load(struct lc_engine *e)
{
    char *err = NULL;
    e->model = lc_model_load(e->model_path, false, &err);
    if (!e->model) {
        emit_str(e, LC_EV_ERROR, "%s", err ? err : "cannot load the model");
        free(err);
        return false;
    }
    e->ctx = lc_context_new(e->model, &e->cparams, &err);
    if (!e->ctx) {
        emit_str(e, LC_EV_ERROR, "%s", err ? err : "cannot create a context");
        free(err);
        return false;
    }
    lc_context_set_progress(e->ctx, on_progress, e);
    if (e->model->x16_note[0])
        emit_str(e, LC_EV_NOTE, "%s", e->model->x16_note);
    e->smp = lc_sampler_new(&e->params, e->model->hp.n_vocab);
    if (!e->smp) {
        emit_str(e, LC_EV_ERROR, "out of memory");
        return false;
    }
    /* Chat template: --chat-template / [chat] template, else the model's, else plain. */
    const char *jinja = lc_gguf_get_str(e->model->gguf, "tokenizer.chat_template");
    int id = -1;
    if (e->template_name) {
        id = lc_chat_template_from_name(e->template_name);
        if (id < 0)
            emit_str(e, LC_EV_NOTE, "unknown chat template '%s'; using the model's", e->template_name);
    }
    if (id < 0 && jinja) {
        id = lc_chat_template_detect(jinja);
        if (id < 0)
            id = LC_CHAT_TEMPLATE_CHATML;   /* llama.cpp's fallback for unknown templates */
    }
    e->tmpl = id < 0 ? LC_CHAT_TEMPLATE_NONE : id;
    e->stops = lc_chat_template_stop_strings(e->tmpl);
    char desc[192];
    lc_model_desc(e->model, desc, sizeof(desc));
    emit_str(e, LC_EV_INFO, "isa=%s", lc_kernels()->isa);
    emit_str(e, LC_EV_INFO, "template=%s", lc_chat_template_name(e->tmpl));
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
    return true;
}

static void *engine_main(void *arg)
{
    struct lc_engine *e = arg;
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
            if (lc_chat_add(e->conv, LC_ROLE_USER, c->text, strlen(c->text)) < 0) {
                emit_str(e, LC_EV_ERROR, "out of memory");
                emit(e, LC_EV_DONE, LC_DONE_ERROR, 0, 0, 0);
                atomic_fetch_sub(&e->busy, 1);
                break;
            }
            reply(e);
            break;
        case CMD_REGEN:
            if (e->conv->n && e->conv->msgs[e->conv->n - 1].role == LC_ROLE_ASSISTANT)
                lc_chat_truncate(e->conv, e->conv->n - 1);
            if (e->conv->n && e->conv->msgs[e->conv->n - 1].role == LC_ROLE_USER) {
                reply(e);
            } else {
                emit_str(e, LC_EV_NOTE, "nothing to regenerate");
                emit(e, LC_EV_DONE, LC_DONE_ERROR, 0, 0, 0);
                atomic_fetch_sub(&e->busy, 1);
            }
            break;
        case CMD_CLEAR:
            lc_chat_truncate(e->conv, first_droppable(e->conv));
            break;
        case CMD_SYSTEM:
            lc_chat_set_system(e->conv, c->text);
            break;
        case CMD_CONV:
            lc_chat_free(e->conv);
            e->conv = c->conv;
            c->conv = NULL;
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
    e->system_prompt = dup_or_null(cfg->system_prompt);
    e->template_name = dup_or_null(cfg->chat_template);
    e->cparams = lc_context_default_params();
    e->cparams.n_ctx = cfg->n_ctx;
    e->cparams.n_threads = cfg->n_threads;
    if (cfg->n_batch > 0)
        e->cparams.n_batch = cfg->n_batch;
    e->cparams.kv_type = cfg->kv_f32 ? LC_TYPE_F32 : LC_TYPE_F16;
    e->params = cfg->sampling;
    e->n_predict = cfg->n_predict;
    e->conv = lc_chat_new();
    e->ring = lc_ring_new(sizeof(struct lc_event), 4096);
    if (!e->model_path || !e->conv || !e->ring) {
        *err = xasprintf("out of memory");
        goto fail;
    }
    if (e->system_prompt && *e->system_prompt)
        lc_chat_set_system(e->conv, e->system_prompt);
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
        /* QUIT goes first: pending commands are dropped. */
        struct cmd *q = calloc(1, sizeof(*q));
        pthread_mutex_lock(&e->mu);
        if (q) {
            q->type = CMD_QUIT;
            q->next = e->head;
            e->head = q;
            if (!e->tail)
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
    lc_sampler_free(e->smp);
    lc_context_free(e->ctx);
    lc_model_free(e->model);
    lc_chat_free(e->conv);
    lc_ring_free(e->ring);
    if (e->wake_rd >= 0)
        close(e->wake_rd);
    if (e->wake_wr >= 0 && e->wake_wr != e->wake_rd)
        close(e->wake_wr);
    free(e->cache);
    free(e->model_path);
    free(e->system_prompt);
    free(e->template_name);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}
