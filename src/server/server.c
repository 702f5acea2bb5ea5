/*
 * server.c - llamachat-server: the engine served as an OpenAI-compatible HTTP API.
 *
 *   POST /v1/chat/completions   messages -> the model's chat template -> a reply (SSE or JSON)
 *   POST /v1/completions        prompt -> plain continuation (no template)
 *   GET  /v1/models, GET /health
 *
 * Model: libmicrohttpd with a thread per connection.  The server owns --parallel slots; a slot
 * is one lc_engine (engine.h: its own thread, KV cache and sampler) started at launch for chat,
 * plus one with the "plain" template started on the first /v1/completions.  A request takes a
 * free slot (or waits for one: the queue), hands the engine its conversation
 * (lc_engine_set_conversation) and asks for a reply (lc_engine_regen), then turns the engine's
 * events into chunks.  The engine keeps the tokens of its last prompt in its KV cache, so a
 * client that continues its conversation on the same slot pays only for the new turn.
 *
 * Disconnects: while it waits for a slot or for tokens, the connection's thread polls the
 * client's socket for a hang-up (POLLRDHUP) along with the engine's event descriptor; on one,
 * the reply is stopped (lc_engine_stop) and the slot freed at once.
 *
 * Request fields mapped to the sampler: temperature, top_p, top_k, min_p, repeat_penalty,
 * seed, max_tokens (or max_completion_tokens / n_predict); frequency_penalty and
 * presence_penalty are not the engine's kind of penalty (llama.cpp's multiplicative
 * repeat_penalty): a positive frequency_penalty without repeat_penalty becomes
 * repeat_penalty = 1 + frequency_penalty, presence_penalty is ignored.  Everything else
 * ("model", "n", "stop", tools...) is accepted and ignored.
 */
#include "lcconfig.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <strings.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <json-c/json.h>
#include <microhttpd.h>

#include "chat.h"
#include "engine.h"

#define MAX_BODY (8u << 20)   /* request bodies larger than this are refused (413) */

struct slot {
    struct lc_engine *chat, *plain;
    bool busy;
};

static struct {
    const char *model_path;
    char *model_id;               /* basename of the model file */
    int32_t n_ctx, n_threads;     /* -c (0: the model's own, up to 4096) and -t */
    atomic_int ctx_size;          /* the context each slot has (its engine's), for GET /props */
    const char *chat_template;
    char *api_key;                /* from --api-key-env's variable, or NULL */
    struct slot *slots;
    int n_slots;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int waiting;                  /* requests queued for a slot */
    atomic_long next_id;
    bool verbose;
} S;

enum kind { K_CHAT, K_COMPLETION };

/* One request, from the first call of the access handler to the completion notice. */
struct req {
    char *body;
    size_t len;
    bool too_big;
    /* while a reply runs */
    struct slot *slot;
    struct lc_engine *e;
    int client_fd;
    enum kind kind;
    bool stream, include_usage;
    long id;
    time_t created;
    int phase;                    /* streaming: 0 head, 1 tokens, 2 done */
    char *out;                    /* pending response bytes */
    size_t out_len, out_off, out_cap;
    char utf8[12];                /* an incomplete UTF-8 sequence held for the next event
                                     (room for 3 bytes of U+FFFD per byte at the end) */
    size_t utf8_len;
    int32_t n_prompt, n_gen;
    bool got_stats;
};

/* ---------------------------------------------------------------- small helpers */

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
    if (!S.verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("llamachat-server: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static bool out_add(struct req *r, const char *s, size_t n)
{
    if (r->out_len + n + 1 > r->out_cap) {
        size_t cap = r->out_cap ? r->out_cap * 2 : 4096;
        while (cap < r->out_len + n + 1)
            cap *= 2;
        char *p = realloc(r->out, cap);
        if (!p)
            return false;
        r->out = p;
        r->out_cap = cap;
    }
    memcpy(r->out + r->out_len, s, n);
    r->out_len += n;
    r->out[r->out_len] = '\0';
    return true;
}

/* "data: JSON\n\n" for a json-c object (consumed). */
static void out_event(struct req *r, json_object *o)
{
    const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
    out_add(r, "data: ", 6);
    out_add(r, s, strlen(s));
    out_add(r, "\n\n", 2);
    json_object_put(o);
}

/* Bytes of s[0..n) that end on a UTF-8 character boundary (an incomplete tail is held). */
static size_t utf8_complete(const char *s, size_t n)
{
    size_t i = n, k = 0;
    while (i > 0 && k < 4 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) {
        i--;
        k++;
    }
    if (i == 0)
        return n;
    unsigned char c = (unsigned char)s[i - 1];
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > k + 1 ? i - 1 : n;
}

/* Append s[0..n) to out as valid UTF-8: each byte that does not start a well-formed sequence
 * becomes U+FFFD (JSON clients decode every chunk; a random model writes any bytes).
 * out must hold 3 * n bytes.  Returns the bytes written. */
static size_t utf8_clean(const char *s, size_t n, char *out)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                     : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        bool ok = len > 0 && i + len <= n;
        for (size_t k = 1; ok && k < len; k++)
            ok = (u[i + k] & 0xC0) == 0x80;
        if (ok && len == 3)   /* no overlongs, no surrogates */
            ok = !(c == 0xE0 && u[i + 1] < 0xA0) && !(c == 0xED && u[i + 1] > 0x9F);
        if (ok && len == 4)
            ok = !(c == 0xF0 && u[i + 1] < 0x90) && !(c == 0xF4 && u[i + 1] > 0x8F);
        if (!ok) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
            continue;
        }
        memcpy(out + o, s + i, len);
        o += len;
        i += len;
    }
    return o;
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_object *o)
{
    const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(s), (void *)s,
                                                                MHD_RESPMEM_MUST_COPY);
    json_object_put(o);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* OpenAI's error shape: {"error": {"message", "type", "code"}}. */
static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *type,
                                  const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *type,
                                  const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_object *o = json_object_new_object(), *e = json_object_new_object();
    json_object_object_add(e, "message", json_object_new_string(msg));
    json_object_object_add(e, "type", json_object_new_string(type));
    json_object_object_add(e, "code", json_object_new_int((int)status));
    json_object_object_add(o, "error", e);
    return send_json(c, status, o);
}

/* The client closed its end (or the socket failed). */
static bool client_gone(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd p = { fd, POLLRDHUP, 0 };
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* ---------------------------------------------------------------- slots */

static bool wait_loaded(struct lc_engine *e, char **err)
{
    bool loaded = false;
    for (;;) {
        struct lc_event ev;
        if (!lc_engine_poll(e, &ev)) {
            struct pollfd p = { lc_engine_fd(e), POLLIN, 0 };
            poll(&p, 1, 1000);
            continue;
        }
        if (ev.type == LC_EV_LOADED && !ev.more)
            loaded = true;
        if (loaded && ev.type == LC_EV_STATS) {   /* right after LOADED: the context's size */
            if (ev.b > 0)
                atomic_store(&S.ctx_size, ev.b);
            return true;
        }
        if (ev.type == LC_EV_ERROR) {
            if (asprintf(err, "%.*s", (int)ev.len, ev.text) < 0)
                *err = NULL;
            return false;
        }
    }
}

/* Drain the events a slot's engine emitted before a request (seed notes, stats). */
static void drain(struct lc_engine *e)
{
    struct lc_event ev;
    while (lc_engine_poll(e, &ev))
        ;
}

static struct lc_engine *start_engine(const char *tmpl, char **err)
{
    struct lc_engine_config cfg = {
        .model_path = S.model_path,
        .n_ctx = S.n_ctx,
        .n_threads = S.n_threads,
        .sampling = lc_sampler_default_params(),
        .n_predict = -1,
        .chat_template = tmpl,
    };
    struct lc_engine *e = lc_engine_start(&cfg, err);
    if (e && !wait_loaded(e, err)) {
        lc_engine_free(e);
        return NULL;
    }
    if (e)
        drain(e);
    return e;
}

/* Take a free slot, waiting in the queue; NULL when the client hung up meanwhile. */
static struct slot *slot_take(int client_fd)
{
    pthread_mutex_lock(&S.mu);
    S.waiting++;
    struct slot *got = NULL;
    for (;;) {
        for (int i = 0; i < S.n_slots && !got; i++)
            if (!S.slots[i].busy)
                got = &S.slots[i];
        if (got || client_gone(client_fd))
            break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&S.cv, &S.mu, &ts);
    }
    S.waiting--;
    if (got)
        got->busy = true;
    pthread_mutex_unlock(&S.mu);
    return got;
}

/* Stop the slot's reply if it runs, wait for its end, and free the slot. */
static void slot_release(struct req *r)
{
    if (!r->slot)
        return;
    if (r->e && r->phase < 2) {
        lc_engine_stop(r->e);
        struct lc_event ev;
        for (;;) {   /* stop is seen between tokens: the DONE comes quickly */
            if (!lc_engine_poll(r->e, &ev)) {
                struct pollfd p = { lc_engine_fd(r->e), POLLIN, 0 };
                poll(&p, 1, 100);
                continue;
            }
            if (ev.type == LC_EV_DONE)
                break;
        }
        logf_("request %ld: stopped (client gone)", r->id);
    }
    pthread_mutex_lock(&S.mu);
    r->slot->busy = false;
    pthread_cond_broadcast(&S.cv);
    pthread_mutex_unlock(&S.mu);
    r->slot = NULL;
    r->e = NULL;
}

/* ---------------------------------------------------------------- requests */

static const char *content_text(json_object *c, char **owned)
{
    *owned = NULL;
    if (json_object_is_type(c, json_type_string))
        return json_object_get_string(c);
    if (json_object_is_type(c, json_type_null))
        return "";
    if (!json_object_is_type(c, json_type_array))
        return NULL;
    /* [{"type": "text", "text": "..."}, ...]: the text parts, concatenated */
    size_t total = 0;
    for (size_t i = 0; i < json_object_array_length(c); i++) {
        json_object *t;
        if (json_object_object_get_ex(json_object_array_get_idx(c, i), "text", &t))
            total += (size_t)json_object_get_string_len(t);
    }
    char *s = malloc(total + 1);
    if (!s)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < json_object_array_length(c); i++) {
        json_object *t;
        if (json_object_object_get_ex(json_object_array_get_idx(c, i), "text", &t)) {
            memcpy(s + n, json_object_get_string(t), (size_t)json_object_get_string_len(t));
            n += (size_t)json_object_get_string_len(t);
        }
    }
    s[n] = '\0';
    *owned = s;
    return s;
}

static bool get_num(json_object *o, const char *k, double lo, double hi, double *out,
                    char *why, size_t wn)
{
    json_object *v;
    if (!json_object_object_get_ex(o, k, &v) || json_object_is_type(v, json_type_null))
        return true;
    if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int)) {
        snprintf(why, wn, "'%s' must be a number", k);
        return false;
    }
    double d = json_object_get_double(v);
    if (!(d >= lo && d <= hi)) {
        snprintf(why, wn, "'%s' must be between %g and %g", k, lo, hi);
        return false;
    }
    *out = d;
    return true;
}

/* Parse the body into a conversation and parameters.  false with a message in why. */
static bool parse_request(struct req *r, json_object *o, struct lc_chat *conv,
                          struct lc_sampler_params *p, int32_t *n_predict, char *why, size_t wn)
{
    json_object *v;
    if (r->kind == K_CHAT) {
        json_object *msgs;
        if (!json_object_object_get_ex(o, "messages", &msgs) ||
            !json_object_is_type(msgs, json_type_array) || json_object_array_length(msgs) == 0) {
            snprintf(why, wn, "'messages' must be a non-empty array");
            return false;
        }
        for (size_t i = 0; i < json_object_array_length(msgs); i++) {
            json_object *m = json_object_array_get_idx(msgs, i), *role, *content;
            if (!json_object_object_get_ex(m, "role", &role) ||
                !json_object_object_get_ex(m, "content", &content)) {
                snprintf(why, wn, "messages[%zu] needs 'role' and 'content'", i);
                return false;
            }
            const char *rn = json_object_get_string(role);
            int ro = !strcmp(rn, "developer") ? (int)LC_ROLE_SYSTEM : lc_role_from_name(rn);
            if (ro < 0) {
                snprintf(why, wn, "messages[%zu]: role '%.40s' is not system, user or assistant", i, rn);
                return false;
            }
            char *owned;
            const char *text = content_text(content, &owned);
            if (!text) {
                snprintf(why, wn, "messages[%zu]: 'content' must be a string or text parts", i);
                return false;
            }
            int rc = lc_chat_add(conv, (enum lc_chat_role)ro, text, strlen(text));
            free(owned);
            if (rc < 0) {
                snprintf(why, wn, "out of memory");
                return false;
            }
        }
        if (conv->msgs[conv->n - 1].role != LC_ROLE_USER) {
            snprintf(why, wn, "the last message must be the user's");
            return false;
        }
    } else {
        json_object *prompt;
        if (!json_object_object_get_ex(o, "prompt", &prompt)) {
            snprintf(why, wn, "'prompt' is required");
            return false;
        }
        if (json_object_is_type(prompt, json_type_array) && json_object_array_length(prompt) == 1)
            prompt = json_object_array_get_idx(prompt, 0);
        if (!json_object_is_type(prompt, json_type_string)) {
            snprintf(why, wn, "'prompt' must be a string");
            return false;
        }
        if (lc_chat_add(conv, LC_ROLE_USER, json_object_get_string(prompt),
                        (size_t)json_object_get_string_len(prompt)) < 0) {
            snprintf(why, wn, "out of memory");
            return false;
        }
    }
    *p = lc_sampler_default_params();
    double d;
    d = p->temp;
    if (!get_num(o, "temperature", 0, 100, &d, why, wn)) return false;
    p->temp = (float)d;
    d = p->top_p;
    if (!get_num(o, "top_p", 0, 1, &d, why, wn)) return false;
    p->top_p = (float)d;
    d = p->top_k;
    if (!get_num(o, "top_k", 0, INT32_MAX, &d, why, wn)) return false;
    p->top_k = (int32_t)d;
    d = p->min_p;
    if (!get_num(o, "min_p", 0, 1, &d, why, wn)) return false;
    p->min_p = (float)d;
    double fp = 0;
    if (!get_num(o, "frequency_penalty", -2, 2, &fp, why, wn)) return false;
    d = fp > 0 ? 1.0 + fp : (double)p->repeat_penalty;
    if (!get_num(o, "repeat_penalty", 0.01, 100, &d, why, wn)) return false;
    p->repeat_penalty = (float)d;
    d = -1;
    if (!get_num(o, "seed", -1, 9007199254740992.0, &d, why, wn)) return false;
    p->seed = d < 0 ? LC_SEED_RANDOM : (uint64_t)d;
    d = -1;
    const char *mt = json_object_object_get_ex(o, "max_completion_tokens", &v) ? "max_completion_tokens"
                     : json_object_object_get_ex(o, "n_predict", &v) ? "n_predict" : "max_tokens";
    if (!get_num(o, mt, -1, INT32_MAX, &d, why, wn)) return false;
    *n_predict = (int32_t)d;
    r->stream = json_object_object_get_ex(o, "stream", &v) && json_object_get_boolean(v);
    json_object *so, *iu;
    r->include_usage = json_object_object_get_ex(o, "stream_options", &so) &&
                       json_object_object_get_ex(so, "include_usage", &iu) &&
                       json_object_get_boolean(iu);
    return true;
}

static const char *finish_name(int reason)
{
    return reason == LC_DONE_LIMIT || reason == LC_DONE_CONTEXT ? "length" : "stop";
}

/* A chunk or completion skeleton: id, object, created, model. */
static json_object *skeleton(const struct req *r, const char *object)
{
    json_object *o = json_object_new_object();
    char id[48];
    snprintf(id, sizeof(id), "%s-%ld", r->kind == K_CHAT ? "chatcmpl" : "cmpl", r->id);
    json_object_object_add(o, "id", json_object_new_string(id));
    json_object_object_add(o, "object", json_object_new_string(object));
    json_object_object_add(o, "created", json_object_new_int64((int64_t)r->created));
    json_object_object_add(o, "model", json_object_new_string(S.model_id));
    return o;
}

static json_object *usage_obj(const struct req *r)
{
    json_object *u = json_object_new_object();
    json_object_object_add(u, "prompt_tokens", json_object_new_int(r->n_prompt));
    json_object_object_add(u, "completion_tokens", json_object_new_int(r->n_gen));
    json_object_object_add(u, "total_tokens", json_object_new_int(r->n_prompt + r->n_gen));
    return u;
}

/* One streamed chunk: delta (chat) or text (completion). */
static void out_chunk(struct req *r, const char *role, const char *text, size_t len,
                      const char *finish)
{
    json_object *o = skeleton(r, r->kind == K_CHAT ? "chat.completion.chunk" : "text_completion");
    json_object *choices = json_object_new_array(), *ch = json_object_new_object();
    json_object_object_add(ch, "index", json_object_new_int(0));
    if (r->kind == K_CHAT) {
        json_object *d = json_object_new_object();
        if (role)
            json_object_object_add(d, "role", json_object_new_string(role));
        if (text)
            json_object_object_add(d, "content", json_object_new_string_len(text, (int)len));
        json_object_object_add(ch, "delta", d);
    } else {
        json_object_object_add(ch, "text", json_object_new_string_len(text ? text : "", (int)len));
    }
    json_object_object_add(ch, "finish_reason", finish ? json_object_new_string(finish) : NULL);
    json_object_array_add(choices, ch);
    json_object_object_add(o, "choices", choices);
    out_event(r, o);
}

/*
 * Wait for the next events of the reply and handle them with on_text / on_done.  Returns 1 when
 * the reply is done (*reason set), 0 when some events were handled, -1 when the client is gone.
 * text is collected into *acc when acc is not NULL, else streamed as chunks.
 */
static int pump(struct req *r, char **acc, size_t *acc_len, int *reason, char **error)
{
    struct lc_event ev;
    bool any = false;
    while (!any) {
        if (!lc_engine_poll(r->e, &ev)) {
            struct pollfd p[2] = { { lc_engine_fd(r->e), POLLIN, 0 }, { r->client_fd, POLLRDHUP, 0 } };
            poll(p, r->client_fd >= 0 ? 2 : 1, 1000);
            if (client_gone(r->client_fd))
                return -1;
            continue;
        }
        any = true;
        switch (ev.type) {
        case LC_EV_TEXT: {
            char raw[LC_EVENT_TEXT + 4], buf[3 * (LC_EVENT_TEXT + 4)];
            size_t n = r->utf8_len;
            memcpy(raw, r->utf8, n);
            memcpy(raw + n, ev.text, ev.len);
            n += ev.len;
            size_t keep = utf8_complete(raw, n);
            r->utf8_len = n - keep;
            memcpy(r->utf8, raw + keep, r->utf8_len);
            size_t ok = utf8_clean(raw, keep, buf);
            if (ok == 0)
                break;
            if (acc) {
                char *a = realloc(*acc, *acc_len + ok + 1);
                if (a) {
                    memcpy(a + *acc_len, buf, ok);
                    *acc_len += ok;
                    a[*acc_len] = '\0';
                    *acc = a;
                }
            } else {
                out_chunk(r, NULL, buf, ok, NULL);
            }
            break;
        }
        case LC_EV_STATS:
            if (!r->got_stats) {   /* the first, after the prompt: its tokens */
                r->n_prompt = ev.a;
                r->got_stats = true;
            }
            break;
        case LC_EV_ERROR:
            if (!*error && asprintf(error, "%.*s", (int)ev.len, ev.text) < 0)
                *error = NULL;
            break;
        case LC_EV_DONE:
            *reason = ev.a;
            r->n_gen = ev.b;
            if (r->utf8_len) {   /* a reply that ends inside a character: U+FFFD for it */
                char tail[12];
                r->utf8_len = utf8_clean(r->utf8, r->utf8_len, tail);
                memcpy(r->utf8, tail, r->utf8_len);
                if (acc) {
                    char *a = realloc(*acc, *acc_len + r->utf8_len + 1);
                    if (a) {
                        memcpy(a + *acc_len, r->utf8, r->utf8_len);
                        *acc_len += r->utf8_len;
                        a[*acc_len] = '\0';
                        *acc = a;
                    }
                } else {
                    out_chunk(r, NULL, r->utf8, r->utf8_len, NULL);
                }
                r->utf8_len = 0;
            }
            return 1;
        default:
            break;
        }
    }
    return 0;
}

/* The streaming body: MHD calls this for more bytes, from the connection's thread. */
static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct req *r = cls;
    (void)pos;
    while (r->out_off == r->out_len) {
        r->out_off = r->out_len = 0;
        if (r->phase == 2)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (r->phase == 0) {
            if (r->kind == K_CHAT)
                out_chunk(r, "assistant", "", 0, NULL);
            r->phase = 1;
            continue;
        }
        int reason = LC_DONE_ERROR;
        char *error = NULL;
        int st = pump(r, NULL, NULL, &reason, &error);
        if (st < 0) {
            slot_release(r);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (st == 1) {
            r->phase = 2;
            if (error || reason == LC_DONE_ERROR || reason == LC_DONE_TOO_LONG) {
                json_object *o = json_object_new_object(), *e = json_object_new_object();
                json_object_object_add(e, "message", json_object_new_string(error ? error : "generation failed"));
                json_object_object_add(e, "type", json_object_new_string(
                    reason == LC_DONE_TOO_LONG ? "exceed_context_size_error" : "server_error"));
                json_object_object_add(o, "error", e);
                out_event(r, o);
            } else {
                out_chunk(r, NULL, NULL, 0, finish_name(reason));
                if (r->include_usage) {
                    json_object *o = skeleton(r, r->kind == K_CHAT ? "chat.completion.chunk" : "text_completion");
                    json_object_object_add(o, "choices", json_object_new_array());
                    json_object_object_add(o, "usage", usage_obj(r));
                    out_event(r, o);
                }
            }
            free(error);
            out_add(r, "data: [DONE]\n\n", 14);
            logf_("request %ld: %d prompt + %d generated tokens, %s", r->id, r->n_prompt, r->n_gen,
                  finish_name(reason));
            slot_release(r);
        }
    }
    size_t n = r->out_len - r->out_off;
    if (n > max)
        n = max;
    memcpy(buf, r->out + r->out_off, n);
    r->out_off += n;
    return (ssize_t)n;
}

static void stream_free(void *cls)
{
    (void)cls;   /* the req is freed by the completion notice */
}

static bool authorized(struct MHD_Connection *c)
{
    if (!S.api_key)
        return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return false;
    h += 7;
    size_t a = strlen(h), b = strlen(S.api_key);
    unsigned diff = a != b;
    for (size_t i = 0; i < a; i++)   /* time independent of where they differ */
        diff |= (unsigned)(h[i] ^ S.api_key[i % (b ? b : 1)]);
    return diff == 0;
}

static enum MHD_Result generate(struct MHD_Connection *c, struct req *r)
{
    json_tokener *tok = json_tokener_new();
    json_object *o = tok ? json_tokener_parse_ex(tok, r->body ? r->body : "", (int)r->len) : NULL;
    bool ok = o && json_tokener_get_error(tok) == json_tokener_success &&
              json_object_is_type(o, json_type_object);
    json_tokener_free(tok);
    if (!ok) {
        if (o)
            json_object_put(o);
        return send_error(c, 400, "invalid_request_error", "the body is not a JSON object");
    }
    struct lc_chat *conv = lc_chat_new();
    struct lc_sampler_params p;
    int32_t n_predict = -1;
    char why[256] = "";
    if (!conv || !parse_request(r, o, conv, &p, &n_predict, why, sizeof(why))) {
        json_object_put(o);
        lc_chat_free(conv);
        return send_error(c, 400, "invalid_request_error", "%s", why[0] ? why : "out of memory");
    }
    json_object_put(o);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    r->client_fd = ci ? ci->connect_fd : -1;
    r->slot = slot_take(r->client_fd);
    if (!r->slot) {
        lc_chat_free(conv);
        return MHD_NO;   /* the client is gone: close */
    }
    if (r->kind == K_COMPLETION && !r->slot->plain) {
        char *err = NULL;
        r->slot->plain = start_engine("plain", &err);
        if (!r->slot->plain) {
            slot_release(r);
            lc_chat_free(conv);
            enum MHD_Result ret = send_error(c, 500, "server_error", "%s", err ? err : "cannot start");
            free(err);
            return ret;
        }
    }
    r->e = r->kind == K_CHAT ? r->slot->chat : r->slot->plain;
    r->id = atomic_fetch_add(&S.next_id, 1);
    r->created = time(NULL);
    drain(r->e);
    lc_engine_set_params(r->e, &p, n_predict);
    int rc = lc_engine_set_conversation(r->e, conv);
    lc_chat_free(conv);
    if (rc != 0 || lc_engine_regen(r->e) != 0) {
        r->e = NULL;
        slot_release(r);
        return send_error(c, 500, "server_error", "out of memory");
    }
    logf_("request %ld on slot %d: %s%s, temperature %.2f top_k %d top_p %.2f min_p %.2f "
          "repeat_penalty %.2f max_tokens %d", r->id, (int)(r->slot - S.slots),
          r->kind == K_CHAT ? "chat" : "completion", r->stream ? ", streamed" : "",
          (double)p.temp, p.top_k, (double)p.top_p, (double)p.min_p, (double)p.repeat_penalty,
          n_predict);
    if (r->stream) {
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384,
                                                                      stream_reader, r, stream_free);
        if (!resp) {
            slot_release(r);
            return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        enum MHD_Result ret = MHD_queue_response(c, 200, resp);
        MHD_destroy_response(resp);
        return ret;
    }
    /* not streamed: the whole reply, then one JSON answer */
    char *text = NULL, *error = NULL;
    size_t len = 0;
    int reason = LC_DONE_ERROR, st;
    while ((st = pump(r, &text, &len, &reason, &error)) == 0)
        ;
    if (st < 0) {
        slot_release(r);
        free(text);
        free(error);
        return MHD_NO;
    }
    r->phase = 2;
    slot_release(r);
    enum MHD_Result ret;
    if (error || reason == LC_DONE_ERROR || reason == LC_DONE_TOO_LONG) {
        ret = send_error(c, reason == LC_DONE_TOO_LONG ? 400 : 500,
                         reason == LC_DONE_TOO_LONG ? "exceed_context_size_error" : "server_error",
                         "%s", error ? error : "generation failed");
    } else {
        json_object *a = skeleton(r, r->kind == K_CHAT ? "chat.completion" : "text_completion");
        json_object *choices = json_object_new_array(), *ch = json_object_new_object();
        json_object_object_add(ch, "index", json_object_new_int(0));
        if (r->kind == K_CHAT) {
            json_object *m = json_object_new_object();
            json_object_object_add(m, "role", json_object_new_string("assistant"));
            json_object_object_add(m, "content", json_object_new_string_len(text ? text : "", (int)len));
            json_object_object_add(ch, "message", m);
        } else {
            json_object_object_add(ch, "text", json_object_new_string_len(text ? text : "", (int)len));
        }
        json_object_object_add(ch, "finish_reason", json_object_new_string(finish_name(reason)));
        json_object_array_add(choices, ch);
        json_object_object_add(a, "choices", choices);
        json_object_object_add(a, "usage", usage_obj(r));
        ret = send_json(c, 200, a);
    }
    free(text);
    free(error);
    return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **con_cls)
{
    (void)cls;
    (void)version;
    struct req *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof(*r));
        if (!r)
            return MHD_NO;
        r->client_fd = -1;
        *con_cls = r;
        return MHD_YES;
    }
    if (*upload_size) {
        if (r->len + *upload_size > MAX_BODY) {
            r->too_big = true;
        } else if (!r->too_big) {
            char *b = realloc(r->body, r->len + *upload_size + 1);
            if (!b)
                return MHD_NO;
            memcpy(b + r->len, upload, *upload_size);
            r->len += *upload_size;
            b[r->len] = '\0';
            r->body = b;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (!strcmp(url, "/health")) {
        json_object *o = json_object_new_object();
        int busy = 0;
        pthread_mutex_lock(&S.mu);
        for (int i = 0; i < S.n_slots; i++)
            busy += S.slots[i].busy;
        int waiting = S.waiting;
        pthread_mutex_unlock(&S.mu);
        json_object_object_add(o, "status", json_object_new_string("ok"));
        json_object_object_add(o, "slots_idle", json_object_new_int(S.n_slots - busy));
        json_object_object_add(o, "slots_processing", json_object_new_int(busy));
        json_object_object_add(o, "queued", json_object_new_int(waiting));
        return send_json(c, 200, o);
    }
    if (!authorized(c))
        return send_error(c, 401, "authentication_error", "invalid or missing API key");
    if (!strcmp(url, "/v1/models") || !strcmp(url, "/models")) {
        if (strcmp(method, "GET") != 0)
            return send_error(c, 405, "invalid_request_error", "use GET for %s", url);
        json_object *o = json_object_new_object(), *data = json_object_new_array(),
                    *m = json_object_new_object();
        json_object_object_add(m, "id", json_object_new_string(S.model_id));
        json_object_object_add(m, "object", json_object_new_string("model"));
        json_object_object_add(m, "created", json_object_new_int64(0));
        json_object_object_add(m, "owned_by", json_object_new_string("llamachat"));
        json_object_array_add(data, m);
        json_object_object_add(o, "object", json_object_new_string("list"));
        json_object_object_add(o, "data", data);
        return send_json(c, 200, o);
    }
    if (!strcmp(url, "/props")) {   /* as llama.cpp's llama-server: what clients size by */
        if (strcmp(method, "GET") != 0)
            return send_error(c, 405, "invalid_request_error", "use GET for %s", url);
        json_object *o = json_object_new_object(), *gen = json_object_new_object();
        json_object_object_add(gen, "n_ctx", json_object_new_int(atomic_load(&S.ctx_size)));
        json_object_object_add(o, "default_generation_settings", gen);
        json_object_object_add(o, "total_slots", json_object_new_int(S.n_slots));
        json_object_object_add(o, "model_alias", json_object_new_string(S.model_id));
        return send_json(c, 200, o);
    }
    bool chat = !strcmp(url, "/v1/chat/completions") || !strcmp(url, "/chat/completions");
    bool cmpl = !strcmp(url, "/v1/completions") || !strcmp(url, "/completions");
    if (!chat && !cmpl)
        return send_error(c, 404, "not_found_error", "no such endpoint: %s %s", method, url);
    if (strcmp(method, "POST") != 0)
        return send_error(c, 405, "invalid_request_error", "use POST for %s", url);
    if (r->too_big)
        return send_error(c, 413, "invalid_request_error", "the body is larger than %u bytes", MAX_BODY);
    r->kind = chat ? K_CHAT : K_COMPLETION;
    return generate(c, r);
}

/* The request is over (answered, or the connection closed): stop its reply and free it. */
static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    struct req *r = *con_cls;
    if (!r)
        return;
    slot_release(r);
    free(r->body);
    free(r->out);
    free(r);
    *con_cls = NULL;
}

/* ---------------------------------------------------------------- main */

static volatile sig_atomic_t quit_sig;
static void on_signal(int s)
{
    quit_sig = s;
}

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: llamachat-server [-m MODEL] [options]\n"
            "Serves the model as an OpenAI-compatible API: POST /v1/chat/completions,\n"
            "POST /v1/completions, GET /v1/models, GET /health.\n"
            "  -m, --model FILE        GGUF model (default: %s)\n"
            "      --host ADDR         address to listen on (default 127.0.0.1; 0.0.0.0 = all)\n"
            "      --port N            TCP port (default 8080; 0 = any free port, printed)\n"
            "  -c, --ctx-size N        context per slot (default: model's, at most 4096)\n"
            "  -t, --threads N         threads per slot (default 0: all cores)\n"
            "      --parallel N        slots: replies computed at once (default 1)\n"
            "      --chat-template NAME  override the model's chat template\n"
            "      --api-key-env NAME  require \"Authorization: Bearer $NAME\" on /v1/\n"
            "  -v, --verbose           one line per request on stderr\n"
            "  -h, --help\n", LC_DEFAULT_MODEL);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "model", required_argument, NULL, 'm' }, { "host", required_argument, NULL, 'H' },
        { "port", required_argument, NULL, 'P' }, { "ctx-size", required_argument, NULL, 'c' },
        { "threads", required_argument, NULL, 't' }, { "parallel", required_argument, NULL, 'N' },
        { "api-key-env", required_argument, NULL, 'K' },
        { "chat-template", required_argument, NULL, 'T' },
        { "verbose", no_argument, NULL, 'v' }, { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *host = "127.0.0.1", *key_env = NULL;
    long port = 8080;
    S.model_path = LC_DEFAULT_MODEL;
    S.n_slots = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "m:c:t:vh", opts, NULL)) != -1) {
        char *end = NULL;
        long v = optarg ? strtol(optarg, &end, 10) : 0;
        bool num_ok = optarg && *optarg && end && !*end;
        switch (ch) {
        case 'm': S.model_path = optarg; break;
        case 'H': host = optarg; break;
        case 'P':
            if (!num_ok || v < 0 || v > 65535) {
                fprintf(stderr, "llamachat-server: --port: '%s' is not a port number\n", optarg);
                return 2;
            }
            port = v;
            break;
        case 'c': case 't': case 'N':
            if (!num_ok || v < (ch == 'N') || v > (ch == 'c' ? 1 << 24 : 1024)) {
                fprintf(stderr, "llamachat-server: -%c: bad value '%s'\n", ch == 'N' ? 'N' : ch, optarg);
                return 2;
            }
            if (ch == 'c') S.n_ctx = (int32_t)v;
            else if (ch == 't') S.n_threads = (int32_t)v;
            else S.n_slots = (int)v;
            break;
        case 'K': key_env = optarg; break;
        case 'T': S.chat_template = optarg; break;
        case 'v': S.verbose = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "llamachat-server: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (key_env) {
        const char *k = getenv(key_env);
        if (!k || !*k) {
            fprintf(stderr, "llamachat-server: --api-key-env %s: the variable is not set\n", key_env);
            return 2;
        }
        S.api_key = strdup(k);
    }
    const char *base = strrchr(S.model_path, '/');
    S.model_id = strdup(base ? base + 1 : S.model_path);
    pthread_mutex_init(&S.mu, NULL);
    pthread_cond_init(&S.cv, NULL);
    atomic_init(&S.next_id, 1);
    /* engine threads must not take the signals: block them while starting the slots */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    /* caught from the start (blocked until the model is loaded, then taken by sigsuspend) */
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    S.slots = calloc((size_t)S.n_slots, sizeof(*S.slots));
    int status = 1;
    struct MHD_Daemon *d = NULL;
    for (int i = 0; i < S.n_slots; i++) {
        char *err = NULL;
        S.slots[i].chat = start_engine(S.chat_template, &err);
        if (!S.slots[i].chat) {
            fprintf(stderr, "llamachat-server: %s: %s\n", S.model_path, err ? err : "cannot load");
            free(err);
            goto out;
        }
    }
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    socklen_t sl;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_ERROR_LOG;
    if (strchr(host, ':')) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, host, &a6->sin6_addr) != 1)
            goto badhost;
        sl = sizeof(*a6);
        flags |= MHD_USE_IPv6;
    } else {
        struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
            goto badhost;
        sl = sizeof(*a4);
    }
    (void)sl;
    d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, handler, NULL,
                         MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                         MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600,
                         MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "llamachat-server: cannot listen on %s:%ld: %s\n", host, port, strerror(errno));
        goto out;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    printf("llamachat-server: %s on http://%s%s%s:%u/ (%d slot%s)\n", S.model_id,
           strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "",
           di ? di->port : (unsigned)port, S.n_slots, S.n_slots == 1 ? "" : "s");
    fflush(stdout);
    sigset_t waitset = old;
    sigdelset(&waitset, SIGINT);
    sigdelset(&waitset, SIGTERM);
    while (!quit_sig)
        sigsuspend(&waitset);
    fprintf(stderr, "llamachat-server: stopping\n");
    status = 0;
    goto out;
badhost:
    fprintf(stderr, "llamachat-server: --host: '%s' is not an IPv4 or IPv6 address\n", host);
    status = 2;
out:
    if (d) {
        for (int i = 0; i < S.n_slots; i++) {   /* replies in flight end now */
            if (S.slots[i].chat)
                lc_engine_stop(S.slots[i].chat);
            if (S.slots[i].plain)
                lc_engine_stop(S.slots[i].plain);
        }
        MHD_stop_daemon(d);
    }
    for (int i = 0; S.slots && i < S.n_slots; i++) {
        lc_engine_free(S.slots[i].chat);
        lc_engine_free(S.slots[i].plain);
    }
    free(S.slots);
    free(S.model_id);
    if (S.api_key) {
        memset(S.api_key, 0, strlen(S.api_key));
        free(S.api_key);
    }
    return status;
}
