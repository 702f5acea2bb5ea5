/*
 * remote.c - the OpenAI-compatible client (remote.h) on libcurl's multi interface.
 *
 * One easy handle per request, driven by curl_multi_poll with a 50 ms timeout so that the
 * caller's stop flag and the idle timer are looked at between waits.  The write callback feeds
 * the SSE parser while the status is 200 and keeps the first 8 KiB of the body otherwise, to
 * quote the server's error message.  Every message passes through redact() before it leaves
 * this file: the API key never appears in one.
 */
#include "remote/remote.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include "remote/sse.h"

struct lc_remote {
    char *base;      /* url without a trailing "/" or "/v1" */
    char *model;
    char *api_key;
    long connect_timeout, idle_timeout;   /* seconds */
    int32_t models_n_ctx;   /* the model's context in GET /v1/models (vLLM's max_model_len), or 0 */
};

/* One request's state, shared with the callbacks. */
struct xfer {
    struct lc_remote *r;
    CURL *h;
    struct lc_sse *sse;
    const struct lc_remote_callbacks *cb;
    long status;
    bool is_sse;           /* Content-Type: text/event-stream */
    char *body;            /* non-SSE body (errors, a JSON answer), first 64 KiB */
    size_t body_len;
    char retry_after[64];
    double last_byte;      /* monotonic seconds of the last byte received */
    bool got_done, got_finish, got_any;
    int think;             /* the reply's <think> part: 0 none, 1 open, 2 closed (on_event) */
    const char *finish;    /* "stop" / "length" (static strings) */
    char *stream_error;    /* an error event inside the stream */
    int32_t n_chunks;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long env_seconds(const char *name, long dflt)
{
    const char *s = getenv(name);
    char *end;
    long v = s && *s ? strtol(s, &end, 10) : dflt;
    return s && *s && (*end || v <= 0) ? dflt : v;
}

/* Replace every occurrence of the key in s by "***" (in place when it fits: it always does,
 * the key being at least as long as 3 bytes; a shorter key is left alone). */
static void redact(const struct lc_remote *r, char *s)
{
    if (!s || !r->api_key || strlen(r->api_key) < 4)
        return;
    size_t kl = strlen(r->api_key);
    char *p;
    while ((p = strstr(s, r->api_key))) {
        memcpy(p, "***", 3);
        memmove(p + 3, p + kl, strlen(p + kl) + 1);
    }
}

static char *fmt_err(const struct lc_remote *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *fmt_err(const struct lc_remote *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    if (s) {   /* one line: control characters of a server's message become spaces */
        for (char *p = s; *p; p++)
            if ((unsigned char)*p < 0x20)
                *p = ' ';
        redact(r, s);
    }
    return s;
}

struct lc_remote *lc_remote_new(const char *url, const char *model, const char *api_key,
                                char **err)
{
    *err = NULL;
    static bool global_done;
    if (!global_done) {   /* the engine thread is the only caller before any request */
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
            *err = strdup("cannot initialise libcurl");
            return NULL;
        }
        global_done = true;
    }
    if (!url || (strncasecmp(url, "http://", 7) != 0 && strncasecmp(url, "https://", 8) != 0)) {
        if (asprintf(err, "remote URL '%s' must start with http:// or https://", url ? url : "") < 0)
            *err = NULL;
        return NULL;
    }
    const char *host = url + (url[4] == ':' ? 7 : 8);   /* "http://" lost its host to curl as "v1" */
    if (!*host || strchr("/?#", *host)) {
        if (asprintf(err, "remote URL '%s' has no host (e.g. http://127.0.0.1:8080)", url) < 0)
            *err = NULL;
        return NULL;
    }
    struct lc_remote *r = calloc(1, sizeof(*r));
    if (!r || !(r->base = strdup(url)) || (model && *model && !(r->model = strdup(model))) ||
        (api_key && *api_key && !(r->api_key = strdup(api_key)))) {
        lc_remote_free(r);
        *err = strdup("out of memory");
        return NULL;
    }
    size_t n = strlen(r->base);
    while (n > 0 && r->base[n - 1] == '/')
        r->base[--n] = '\0';
    if (n >= 3 && !strcmp(r->base + n - 3, "/v1"))
        r->base[n - 3] = '\0';
    r->connect_timeout = env_seconds("LLAMACHAT_REMOTE_CONNECT_TIMEOUT", 10);
    r->idle_timeout = env_seconds("LLAMACHAT_REMOTE_IDLE_TIMEOUT", 120);
    return r;
}

void lc_remote_free(struct lc_remote *r)
{
    if (!r)
        return;
    free(r->base);
    free(r->model);
    if (r->api_key) {   /* the key does not stay in freed memory */
        volatile char *k = r->api_key;
        while (*k)
            *k++ = 0;
    }
    free(r->api_key);
    free(r);
}

const char *lc_remote_model(const struct lc_remote *r)
{
    return r->model;
}

int lc_remote_set_model(struct lc_remote *r, const char *model)
{
    char *m = strdup(model);
    if (!m)
        return -1;
    free(r->model);
    r->model = m;
    r->models_n_ctx = 0;   /* the last model list's figure was another model's */
    return 0;
}

/* ---------------------------------------------------------------- transfer callbacks */

static size_t on_header(char *buf, size_t size, size_t n, void *ud)
{
    struct xfer *x = ud;
    size_t len = size * n;
    x->last_byte = now_s();
    if (len > 12 && !strncasecmp(buf, "Retry-After:", 12)) {
        const char *v = buf + 12;
        while (*v == ' ' && v < buf + len)
            v++;
        size_t k = 0;
        while (v + k < buf + len && v[k] != '\r' && v[k] != '\n' && k + 1 < sizeof(x->retry_after))
            k++;
        memcpy(x->retry_after, v, k);
        x->retry_after[k] = '\0';
    } else if (len > 13 && !strncasecmp(buf, "Content-Type:", 13)) {
        x->is_sse = memmem(buf, len, "text/event-stream", 17) != NULL;
    } else if (len > 5 && !strncmp(buf, "HTTP/", 5)) {
        x->is_sse = false;       /* a new response (after a 100 Continue or a redirect) */
        x->retry_after[0] = '\0';
    }
    return len;
}

/* Reply text to the caller. */
static void deliver(struct xfer *x, const char *s, size_t n)
{
    if (n > 0 && x->cb && x->cb->on_text)
        x->cb->on_text(x->cb->ud, s, n);
}

static const char think_open[] = "<think>\n", think_close[] = "\n</think>\n\n";

/* The thinking a server sent apart (reasoning_content) ends: close the <think> part. */
static void think_end(struct xfer *x)
{
    if (x->think == 1)
        deliver(x, think_close, sizeof(think_close) - 1);
    x->think = 2;
}

/* One SSE event: a chunk of the reply.  The thinking of a reasoning model, which servers send
 * in its own field, becomes the reply's <think>...</think> part, as a local model writes it
 * (the chat shows it folded; the next request leaves it out: request_json); thinking after the
 * answer has begun has no place in it and is left out. */
static int on_event(void *ud, const char *data, size_t len)
{
    struct xfer *x = ud;
    struct lc_chunk c;
    if (lc_chunk_parse(&c, data, len) != 0)
        return 0;   /* not JSON: servers' own notes; skipped */
    if (c.done) {
        x->got_done = true;
    } else if (c.error) {
        free(x->stream_error);
        x->stream_error = strdup(c.error);
    } else {
        if (c.reasoning && c.reasoning_len > 0 && x->think < 2) {
            if (x->think == 0)
                deliver(x, think_open, sizeof(think_open) - 1);
            x->think = 1;
            x->got_any = true;
            x->n_chunks++;
            deliver(x, c.reasoning, c.reasoning_len);
        }
        if (c.content && c.content_len > 0) {
            think_end(x);
            x->got_any = true;
            x->n_chunks++;
            deliver(x, c.content, c.content_len);
        }
        if (c.finish_reason) {
            x->got_finish = true;
            x->finish = !strcmp(c.finish_reason, "length") ? "length" : "stop";
        }
        if (c.has_usage && x->cb && x->cb->on_usage)
            x->cb->on_usage(x->cb->ud, c.prompt_tokens, c.completion_tokens);
    }
    lc_chunk_clear(&c);
    return 0;
}

static size_t on_body(char *buf, size_t size, size_t n, void *ud)
{
    struct xfer *x = ud;
    size_t len = size * n;
    x->last_byte = now_s();
    if (!x->status)
        curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &x->status);
    if (x->status == 200 && x->is_sse && x->sse) {
        if (lc_sse_feed(x->sse, buf, len, on_event, x) < 0)
            return 0;   /* a line over 4 MiB: abort (CURLE_WRITE_ERROR) */
        return len;
    }
    size_t keep = x->body_len < 65536 ? 65536 - x->body_len : 0;
    if (keep > len)
        keep = len;
    if (keep) {
        char *b = realloc(x->body, x->body_len + keep + 1);
        if (!b)
            return 0;
        x->body = b;
        memcpy(b + x->body_len, buf, keep);
        x->body_len += keep;
        b[x->body_len] = '\0';
    }
    return len;
}

/* ---------------------------------------------------------------- requests */

enum run_result { RUN_OK, RUN_CANCELLED, RUN_IDLE, RUN_CURL };

/* Drive one transfer to its end; *cc receives curl's result for RUN_OK / RUN_CURL. */
static int run(struct xfer *x, const atomic_bool *stop, CURLcode *cc)
{
    CURLM *m = curl_multi_init();
    if (!m) {
        *cc = CURLE_OUT_OF_MEMORY;
        return RUN_CURL;
    }
    curl_multi_add_handle(m, x->h);
    int running = 1, res = RUN_OK;
    *cc = CURLE_OK;
    x->last_byte = now_s();
    while (running) {
        if (curl_multi_perform(m, &running) != CURLM_OK) {
            *cc = CURLE_FAILED_INIT;
            res = RUN_CURL;
            break;
        }
        if (!running)
            break;
        if (stop && atomic_load(stop)) {
            res = RUN_CANCELLED;
            break;
        }
        /* the connect phase has its own, shorter timeout (CURLOPT_CONNECTTIMEOUT) */
        if (now_s() - x->last_byte > (double)x->r->idle_timeout) {
            res = RUN_IDLE;
            break;
        }
        curl_multi_poll(m, NULL, 0, 50, NULL);
    }
    if (res == RUN_OK) {
        int q;
        CURLMsg *msg;
        while ((msg = curl_multi_info_read(m, &q)))
            if (msg->msg == CURLMSG_DONE)
                *cc = msg->data.result;
        if (*cc != CURLE_OK)
            res = RUN_CURL;
    }
    curl_multi_remove_handle(m, x->h);
    curl_multi_cleanup(m);
    return res;
}

/* The server's own message in an error body ({"error": {"message": ...}} or
 * {"error": "..."} or {"detail": ...} or plain text), malloc'd, at most ~200 bytes. */
static char *server_message(const struct xfer *x)
{
    if (!x->body || !x->body_len)
        return NULL;
    char *msg = NULL;
    json_object *o = json_tokener_parse(x->body), *v;
    if (o && json_object_is_type(o, json_type_object)) {
        const char *s = NULL;
        if (json_object_object_get_ex(o, "error", &v)) {
            json_object *mm;
            if (json_object_is_type(v, json_type_string))
                s = json_object_get_string(v);
            else if (json_object_object_get_ex(v, "message", &mm))
                s = json_object_get_string(mm);
        } else if (json_object_object_get_ex(o, "detail", &v)) {
            s = json_object_get_string(v);
        } else if (json_object_object_get_ex(o, "message", &v)) {
            s = json_object_get_string(v);
        }
        if (s)
            msg = strndup(s, 200);
    }
    if (o)
        json_object_put(o);
    if (!msg && x->body[0] != '<')   /* not an HTML error page */
        msg = strndup(x->body, 200);
    return msg;
}

/* A one-line message for a failed transfer. */
static char *describe(struct xfer *x, int res, CURLcode cc, const char *errbuf, const char *what)
{
    struct lc_remote *r = x->r;
    if (res == RUN_IDLE)
        return fmt_err(r, "%s: no data from the server for %ld s (idle timeout); request abandoned",
                       r->base, r->idle_timeout);
    if (res == RUN_CURL) {
        const char *detail = errbuf && *errbuf ? errbuf : curl_easy_strerror(cc);
        switch (cc) {
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
            return fmt_err(r, "%s: cannot resolve the host name (DNS): %s", r->base, detail);
        case CURLE_COULDNT_CONNECT:
            return fmt_err(r, "%s: cannot connect: %s", r->base, detail);
        case CURLE_OPERATION_TIMEDOUT:
            return fmt_err(r, "%s: timed out connecting (%ld s): %s", r->base, r->connect_timeout,
                           detail);
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_CIPHER:
        case CURLE_SSL_CACERT_BADFILE:
            return fmt_err(r, "%s: TLS error: %s", r->base, detail);
        default:
            return fmt_err(r, "%s: %s failed: %s", r->base, what, detail);
        }
    }
    long st = x->status;
    char *sm = server_message(x);
    const char *sep = sm ? ": " : "";
    const char *sms = sm ? sm : "";
    char *out;
    if (st == 401 || st == 403)
        out = fmt_err(r, "%s: HTTP %ld: the server refused the request (%s)%s%s", r->base, st,
                      r->api_key ? "check the API key in [remote] api_key_env's variable"
                                 : "it may need an API key: set [remote] api_key_env",
                      sep, sms);
    else if (st == 404)
        out = fmt_err(r, "%s: HTTP 404 for %s%s%s%s%s", r->base, what,
                      r->model ? " (model '" : "", r->model ? r->model : "",
                      r->model ? "' unknown?)" : "", *sms ? sep : "");
    else if (st == 429)
        out = fmt_err(r, "%s: HTTP 429: too many requests%s%s%s%s%s", r->base,
                      x->retry_after[0] ? "; retry after " : "", x->retry_after,
                      x->retry_after[0] && strspn(x->retry_after, "0123456789") == strlen(x->retry_after) ? " s" : "",
                      sep, sms);
    else if (st >= 500)
        out = fmt_err(r, "%s: HTTP %ld: server error%s%s", r->base, st, sep, sms);
    else
        out = fmt_err(r, "%s: HTTP %ld for %s%s%s", r->base, st, what, sep, sms);
    if (st == 404 && sm && out) {   /* the server's words after the guess */
        char *o2 = fmt_err(r, "%s%s", out, sms);
        free(out);
        out = o2;
    }
    free(sm);
    return out;
}

static CURL *new_handle(struct lc_remote *r, struct xfer *x, const char *path,
                        struct curl_slist **hdrs, char *errbuf)
{
    CURL *h = curl_easy_init();
    if (!h)
        return NULL;
    char *url = NULL;
    if (asprintf(&url, "%s%s", r->base, path) < 0) {
        curl_easy_cleanup(h);
        return NULL;
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    free(url);   /* libcurl copies option strings */
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, r->connect_timeout);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "llamachat/" "0.1");
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    *hdrs = curl_slist_append(*hdrs, "Accept: text/event-stream, application/json");
    if (r->api_key) {
        char *auth = NULL;
        if (asprintf(&auth, "Authorization: Bearer %s", r->api_key) >= 0) {
            *hdrs = curl_slist_append(*hdrs, auth);
            memset(auth, 0, strlen(auth));
            free(auth);
        }
    }
    return h;
}

/* GET {base}{path}: the parsed JSON body of a 200 answer (the caller puts it), or NULL with a
 * malloc'd one-line *err ("cancelled" when stop was set). */
static json_object *get_json(struct lc_remote *r, const char *path, const atomic_bool *stop,
                             char **err)
{
    *err = NULL;
    struct xfer x = { .r = r };
    struct curl_slist *hdrs = NULL;
    char errbuf[CURL_ERROR_SIZE] = "";
    x.h = new_handle(r, &x, path, &hdrs, errbuf);
    if (!x.h) {
        *err = strdup("out of memory");
        return NULL;
    }
    curl_easy_setopt(x.h, CURLOPT_HTTPHEADER, hdrs);
    CURLcode cc;
    int res = run(&x, stop, &cc);
    curl_easy_getinfo(x.h, CURLINFO_RESPONSE_CODE, &x.status);
    json_object *o = NULL;
    if (res == RUN_CANCELLED) {
        *err = strdup("cancelled");
    } else if (res != RUN_OK || x.status != 200) {
        char what[128];
        snprintf(what, sizeof(what), "GET %s", path);
        *err = describe(&x, res, cc, errbuf, what);
    } else if (!(o = json_tokener_parse(x.body ? x.body : ""))) {
        *err = fmt_err(r, "%s: GET %s: the answer is not JSON", r->base, path);
    }
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(x.h);
    free(x.body);
    return o;
}

/* o's member key as a positive int32 (a JSON integer), else 0. */
static int32_t positive_int(json_object *o, const char *key)
{
    json_object *v;
    if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
        return 0;
    int64_t n = json_object_get_int64(v);
    return n > 0 && n <= INT32_MAX ? (int32_t)n : 0;
}

char *lc_remote_models(struct lc_remote *r, const atomic_bool *stop, char **err)
{
    json_object *o = get_json(r, "/v1/models", stop, err), *data;
    if (!o)
        return NULL;
    char *list = NULL;
    if (!json_object_object_get_ex(o, "data", &data) || !json_object_is_type(data, json_type_array)) {
        *err = fmt_err(r, "%s: GET /v1/models: not an OpenAI model list", r->base);
        json_object_put(o);
        return NULL;
    }
    size_t cap = 1, len = 0;
    for (size_t i = 0; i < json_object_array_length(data); i++) {
        json_object *id;
        if (json_object_object_get_ex(json_object_array_get_idx(data, i), "id", &id))
            cap += strlen(json_object_get_string(id)) + 1;
    }
    list = malloc(cap);
    if (!list) {
        *err = strdup("out of memory");
        json_object_put(o);
        return NULL;
    }
    list[0] = '\0';
    r->models_n_ctx = 0;
    for (size_t i = 0; i < json_object_array_length(data); i++) {
        json_object *m = json_object_array_get_idx(data, i), *id;
        if (!json_object_object_get_ex(m, "id", &id))
            continue;
        const char *s = json_object_get_string(id);
        len += (size_t)sprintf(list + len, "%s%s", len ? "\n" : "", s);
        if (!r->model)
            r->model = strdup(s);
        if (r->model && !strcmp(r->model, s))   /* vLLM says each model's context */
            r->models_n_ctx = positive_int(m, "max_model_len");
    }
    json_object_put(o);
    return list;
}

int32_t lc_remote_n_ctx(struct lc_remote *r, const atomic_bool *stop)
{
    char *err = NULL;
    json_object *o = get_json(r, "/props", stop, &err), *gen;
    free(err);   /* not every server has /props: then the model list's figure, or none */
    int32_t n = 0;
    if (o && json_object_object_get_ex(o, "default_generation_settings", &gen))
        n = positive_int(gen, "n_ctx");
    if (o)
        json_object_put(o);
    return n > 0 ? n : r->models_n_ctx;
}

/* The offset in a reply's text after its <think>...</think> part and the white space that
 * follows, or 0 when it has none (or it is not closed). */
static size_t after_think(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    if (n - i < 7 || memcmp(s + i, "<think>", 7) != 0)
        return 0;
    const char *e = memmem(s + i + 7, n - i - 7, "</think>", 8);
    if (!e)
        return 0;
    i = (size_t)(e - s) + 8;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

/* A sampling parameter (a float) as JSON: the shortest decimal that reads back as the same
 * float (0.8f is "0.8"), the value the user set; the float widened to a double printed in full
 * was "0.80000001192092896". */
static json_object *json_float(float f)
{
    if (!isfinite(f))
        return json_object_new_double((double)f);
    char buf[32], out[32];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof(buf), "%.*g", prec, (double)f);
        if (strtof(buf, NULL) == f)
            break;
    }
    double d = strtod(buf, NULL);
    /* the locale's decimal point (LC_NUMERIC: "0,8") is JSON's '.' */
    size_t n = 0;
    for (const char *c = buf; *c && n + 1 < sizeof(out); c++) {
        if (strchr("0123456789+-eE", *c))
            out[n++] = *c;
        else if (!n || out[n - 1] != '.')
            out[n++] = '.';
    }
    out[n] = '\0';
    return json_object_new_double_s(d, out);
}

/* The request body: model, messages, sampling fields, stream.  An earlier reply goes without
 * its thinking part: OpenAI-compatible servers are not sent reasoning back, and the templates
 * of reasoning models (Qwen3, DeepSeek-R1) drop it from earlier turns. */
static char *request_json(const struct lc_remote *r, const struct lc_chat *conv,
                          const struct lc_sampler_params *p, int32_t n_predict)
{
    json_object *o = json_object_new_object(), *msgs = json_object_new_array();
    if (r->model)
        json_object_object_add(o, "model", json_object_new_string(r->model));
    for (size_t i = 0; i < conv->n; i++) {
        json_object *m = json_object_new_object();
        const char *text = conv->msgs[i].text;
        size_t len = conv->msgs[i].len;
        if (conv->msgs[i].role == LC_ROLE_ASSISTANT) {
            size_t skip = after_think(text, len);
            text += skip;
            len -= skip;
        }
        json_object_object_add(m, "role", json_object_new_string(lc_role_name(conv->msgs[i].role)));
        json_object_object_add(m, "content", json_object_new_string_len(text, (int)len));
        json_object_array_add(msgs, m);
    }
    json_object_object_add(o, "messages", msgs);
    json_object_object_add(o, "stream", json_object_new_boolean(1));
    json_object *so = json_object_new_object();
    json_object_object_add(so, "include_usage", json_object_new_boolean(1));
    json_object_object_add(o, "stream_options", so);
    json_object_object_add(o, "temperature", json_float(p->temp));
    json_object_object_add(o, "top_p", json_float(p->top_p));
    json_object_object_add(o, "top_k", json_object_new_int(p->top_k));
    json_object_object_add(o, "min_p", json_float(p->min_p));
    json_object_object_add(o, "repeat_penalty", json_float(p->repeat_penalty));
    if (p->seed != LC_SEED_RANDOM)
        json_object_object_add(o, "seed", json_object_new_int64((int64_t)p->seed));
    if (n_predict >= 0)
        json_object_object_add(o, "max_tokens", json_object_new_int(n_predict));
    const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
    char *out = s ? strdup(s) : NULL;
    json_object_put(o);
    return out;
}

int lc_remote_chat(struct lc_remote *r, const struct lc_chat *conv,
                   const struct lc_sampler_params *p, int32_t n_predict, const atomic_bool *stop,
                   const struct lc_remote_callbacks *cb, int32_t *n_chunks, char **err)
{
    *err = NULL;
    if (n_chunks)
        *n_chunks = 0;
    struct xfer x = { .r = r, .cb = cb };
    struct curl_slist *hdrs = NULL;
    char errbuf[CURL_ERROR_SIZE] = "";
    char *body = request_json(r, conv, p, n_predict);
    x.sse = lc_sse_new(0);
    x.h = body && x.sse ? new_handle(r, &x, "/v1/chat/completions", &hdrs, errbuf) : NULL;
    if (!x.h) {
        free(body);
        lc_sse_free(x.sse);
        *err = strdup("out of memory");
        return LC_REMOTE_END_ERROR;
    }
    hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    curl_easy_setopt(x.h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(x.h, CURLOPT_POSTFIELDS, body);
    CURLcode cc;
    int res = run(&x, stop, &cc);
    curl_easy_getinfo(x.h, CURLINFO_RESPONSE_CODE, &x.status);
    int end;
    if (res == RUN_CANCELLED) {
        end = LC_REMOTE_END_CANCELLED;
    } else if (x.status == 200 && !x.is_sse && res == RUN_OK && x.body) {
        /* a server that answered stream: true with one JSON object */
        struct lc_chunk c;
        if (lc_chunk_parse(&c, x.body, x.body_len) == 0 && c.content && !c.error) {
            if (c.content_len && cb && cb->on_text)
                cb->on_text(cb->ud, c.content, c.content_len);
            x.n_chunks = c.content_len > 0;
            if (c.has_usage && cb && cb->on_usage)
                cb->on_usage(cb->ud, c.prompt_tokens, c.completion_tokens);
            end = c.finish_reason && !strcmp(c.finish_reason, "length") ? LC_REMOTE_END_LENGTH
                                                                          : LC_REMOTE_END_STOP;
        } else {
            *err = fmt_err(r, "%s: the answer is neither an event stream nor a chat completion",
                           r->base);
            end = LC_REMOTE_END_ERROR;
        }
        lc_chunk_clear(&c);
    } else if (x.stream_error) {
        *err = fmt_err(r, "%s: the server reported an error%s: %s", r->base,
                       x.got_any ? " in the middle of the reply (the partial reply is kept)" : "",
                       x.stream_error);
        end = LC_REMOTE_END_ERROR;
    } else if (x.status == 200 && x.is_sse && (x.got_done || x.got_finish) &&
               (res == RUN_OK || (res == RUN_CURL && x.got_done))) {
        end = x.finish && !strcmp(x.finish, "length") ? LC_REMOTE_END_LENGTH : LC_REMOTE_END_STOP;
    } else if (x.status == 200 && x.is_sse) {
        /* 200 and an event stream, but no [DONE] nor finish_reason: cut */
        char why[96];
        if (res == RUN_IDLE)
            snprintf(why, sizeof(why), "no data for %ld s: idle timeout", r->idle_timeout);
        else
            snprintf(why, sizeof(why), "%s", res == RUN_CURL ? curl_easy_strerror(cc)
                                                              : "closed by the server");
        *err = fmt_err(r, "%s: the stream ended in the middle of the reply (%s)%s", r->base, why,
                       x.got_any ? "; the partial reply is kept" : "");
        end = LC_REMOTE_END_CUT;
    } else {
        *err = describe(&x, res, cc, errbuf, "POST /v1/chat/completions");
        end = LC_REMOTE_END_ERROR;
    }
    if (n_chunks)
        *n_chunks = x.n_chunks;
    if (body) {
        memset(body, 0, strlen(body));
        free(body);
    }
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(x.h);
    lc_sse_free(x.sse);
    free(x.body);
    free(x.stream_error);
    return end;
}
