/*
 * sse.c - server-sent events framing and OpenAI chunk decoding (sse.h).
 *
 * The parser keeps two buffers: the current line (bytes since the last line end) and the
 * current event's data.  A CR may be the first half of a CRLF split across two feeds, so a CR
 * ends the line at once and sets skip_lf: a LF that follows is then not a second (empty) line.
 */
#include "remote/sse.h"

#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

struct buf {
    char *p;
    size_t len, cap;
};

struct lc_sse {
    struct buf line, data;
    bool has_data;       /* a data: line was seen in this event */
    bool skip_lf;        /* the previous byte was a CR */
    size_t max_line;
    uint64_t comments;
};

static int buf_add(struct buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

struct lc_sse *lc_sse_new(size_t max_line)
{
    struct lc_sse *s = calloc(1, sizeof(*s));
    if (s)
        s->max_line = max_line ? max_line : (size_t)4 << 20;
    return s;
}

void lc_sse_free(struct lc_sse *s)
{
    if (!s)
        return;
    free(s->line.p);
    free(s->data.p);
    free(s);
}

uint64_t lc_sse_comments(const struct lc_sse *s)
{
    return s->comments;
}

bool lc_sse_pending(const struct lc_sse *s)
{
    return s->line.len > 0 || s->has_data;
}

/* One complete line (without its end).  Returns as lc_sse_feed. */
static int line_done(struct lc_sse *s, lc_sse_cb cb, void *ud)
{
    const char *l = s->line.p ? s->line.p : "";
    size_t n = s->line.len;
    int r = 0;
    if (n == 0) {                               /* end of the event */
        if (s->has_data) {
            if (s->data.len > 0)                /* the last data line's newline */
                s->data.p[--s->data.len] = '\0';
            r = cb(ud, s->data.p ? s->data.p : "", s->data.len);
        }
        s->data.len = 0;
        s->has_data = false;
    } else if (l[0] == ':') {
        s->comments++;
    } else if (n >= 5 && !memcmp(l, "data", 4) && l[4] == ':') {
        size_t off = 5 + (n > 5 && l[5] == ' ');
        if (buf_add(&s->data, l + off, n - off) != 0 || buf_add(&s->data, "\n", 1) != 0)
            r = -1;
        s->has_data = true;
    } else if (n == 4 && !memcmp(l, "data", 4)) {  /* "data" alone: an empty data line */
        if (buf_add(&s->data, "\n", 1) != 0)
            r = -1;
        s->has_data = true;
    }                                           /* event:, id:, retry:, others: ignored */
    s->line.len = 0;
    return r;
}

int lc_sse_feed(struct lc_sse *s, const char *buf, size_t n, lc_sse_cb cb, void *ud)
{
    size_t i = 0;
    while (i < n) {
        if (s->skip_lf) {
            s->skip_lf = false;
            if (buf[i] == '\n') {
                i++;
                continue;
            }
        }
        const char *end = NULL;
        for (size_t k = i; k < n; k++)
            if (buf[k] == '\n' || buf[k] == '\r') {
                end = buf + k;
                break;
            }
        size_t take = (end ? (size_t)(end - buf) : n) - i;
        if (s->line.len + take > s->max_line)
            return -1;
        if (take && buf_add(&s->line, buf + i, take) != 0)
            return -1;
        i += take;
        if (!end)
            break;
        s->skip_lf = *end == '\r';
        i++;
        int r = line_done(s, cb, ud);
        if (r != 0)
            return r;
    }
    return 0;
}

/* ---------------------------------------------------------------- chunks */

static const char *get_str(json_object *o, const char *key, size_t *len)
{
    json_object *v;
    if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
        return NULL;
    if (len)
        *len = (size_t)json_object_get_string_len(v);
    return json_object_get_string(v);
}

void lc_chunk_clear(struct lc_chunk *c)
{
    if (c->json)
        json_object_put(c->json);
    memset(c, 0, sizeof(*c));
}

int lc_chunk_parse(struct lc_chunk *c, const char *data, size_t len)
{
    memset(c, 0, sizeof(*c));
    if (len == 6 && !memcmp(data, "[DONE]", 6)) {
        c->done = true;
        return 0;
    }
    json_tokener *tok = json_tokener_new();
    if (!tok)
        return -1;
    json_object *o = json_tokener_parse_ex(tok, data, (int)len);
    bool ok = o && json_tokener_get_error(tok) == json_tokener_success &&
              json_object_is_type(o, json_type_object);
    json_tokener_free(tok);
    if (!ok) {
        if (o)
            json_object_put(o);
        return -1;
    }
    c->json = o;
    c->model = get_str(o, "model", NULL);
    json_object *v;
    if (json_object_object_get_ex(o, "error", &v)) {
        c->error = json_object_is_type(v, json_type_string) ? json_object_get_string(v)
                                                             : get_str(v, "message", NULL);
        if (!c->error)
            c->error = "the server reported an error";
    }
    json_object *choices;
    if (json_object_object_get_ex(o, "choices", &choices) &&
        json_object_is_type(choices, json_type_array) && json_object_array_length(choices) > 0) {
        json_object *ch = json_object_array_get_idx(choices, 0), *d = NULL;
        if (!json_object_object_get_ex(ch, "delta", &d))
            json_object_object_get_ex(ch, "message", &d);
        if (d && json_object_is_type(d, json_type_object)) {
            c->role = get_str(d, "role", NULL);
            c->content = get_str(d, "content", &c->content_len);
            c->reasoning = get_str(d, "reasoning_content", &c->reasoning_len);
            if (!c->reasoning)
                c->reasoning = get_str(d, "reasoning", &c->reasoning_len);
        } else {   /* /v1/completions: choices[0].text */
            c->content = get_str(ch, "text", &c->content_len);
        }
        c->finish_reason = get_str(ch, "finish_reason", NULL);
    }
    json_object *u, *pt, *ct;
    if (json_object_object_get_ex(o, "usage", &u) && json_object_is_type(u, json_type_object) &&
        json_object_object_get_ex(u, "prompt_tokens", &pt) &&
        json_object_object_get_ex(u, "completion_tokens", &ct)) {
        c->has_usage = true;
        c->prompt_tokens = json_object_get_int64(pt);
        c->completion_tokens = json_object_get_int64(ct);
    }
    return 0;
}
