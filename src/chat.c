/* chat.c - the conversation and its transcripts (layout in chat.h). */
#include "chat.h"
#include "fileutil.h"
#include "llm/strbuf.h"
#include "textsafe.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


static char *fmt_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *fmt_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

static const char *const role_names[] = { "system", "user", "assistant" };

static const char *const end_names[] = { NULL, "stopped", "length", "error", "partial",
                                          "incomplete", "context" };

const char *lc_end_name(enum lc_end e)
{
    return (unsigned)e < sizeof(end_names) / sizeof(end_names[0]) ? end_names[e] : "incomplete";
}

enum lc_end lc_end_from_name(const char *s)
{
    for (size_t k = 1; k < sizeof(end_names) / sizeof(end_names[0]); k++)
        if (!strcmp(s, end_names[k]))
            return (enum lc_end)k;
    return LC_END_INCOMPLETE;
}

const char *lc_end_note(enum lc_end e)
{
    switch (e) {
    case LC_END_COMPLETE: return NULL;
    case LC_END_STOPPED: return "(stopped by you)";
    case LC_END_LENGTH: return "(cut at the token limit)";
    case LC_END_CONTEXT: return "(cut off: the context is full)";
    case LC_END_ERROR: return "(cut off by an error)";
    case LC_END_PARTIAL: return "(cut off: this reply was still being written when the chat was saved)";
    case LC_END_INCOMPLETE: break;
    }
    return "(incomplete)";
}

const char *lc_role_name(enum lc_chat_role r)
{
    return (unsigned)r < 3 ? role_names[r] : "?";
}

int lc_role_from_name(const char *s)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(s, role_names[i]) == 0)
            return i;
    return -1;
}

struct lc_chat *lc_chat_new(void)
{
    struct lc_chat *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->params = lc_sampler_default_params();
    c->max_tokens = -1;
    c->seed_used = LC_SEED_RANDOM;
    return c;
}

void lc_chat_free(struct lc_chat *c)
{
    if (!c)
        return;
    lc_chat_truncate(c, 0);
    free(c->msgs);
    free(c->model);
    free(c->model_path);
    free(c->title);
    free(c);
}

int lc_chat_add(struct lc_chat *c, enum lc_chat_role role, const char *text, size_t len)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        struct lc_message *m = realloc(c->msgs, cap * sizeof(*m));
        if (!m)
            return -1;
        c->msgs = m;
        c->cap = cap;
    }
    char *t = malloc(len + 1);
    if (!t)
        return -1;
    if (len)
        memcpy(t, text, len);
    t[len] = '\0';
    c->msgs[c->n] = (struct lc_message){ .role = role, .text = t, .len = len, .time = time(NULL) };
    return (int)c->n++;
}

int lc_chat_append(struct lc_chat *c, size_t i, const char *text, size_t len)
{
    if (i >= c->n)
        return -1;
    struct lc_message *m = &c->msgs[i];
    char *t = realloc(m->text, m->len + len + 1);
    if (!t)
        return -1;
    memcpy(t + m->len, text, len);
    m->len += len;
    t[m->len] = '\0';
    m->text = t;
    return 0;
}

void lc_message_free(struct lc_message *m)
{
    free(m->text);
    for (size_t k = 0; k < m->n_alts; k++)
        free(m->alts[k].text);
    free(m->alts);
    memset(m, 0, sizeof(*m));
}

void lc_chat_truncate(struct lc_chat *c, size_t i)
{
    if (c->n > i)
        c->cuts++;
    while (c->n > i)
        lc_message_free(&c->msgs[--c->n]);
}

int lc_chat_pop(struct lc_chat *c, struct lc_message *out)
{
    if (c->n == 0)
        return -1;
    c->cuts++;
    *out = c->msgs[--c->n];
    return 0;
}

int lc_chat_push(struct lc_chat *c, struct lc_message *m)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        struct lc_message *a = realloc(c->msgs, cap * sizeof(*a));
        if (!a)
            return -1;
        c->msgs = a;
        c->cap = cap;
    }
    c->msgs[c->n] = *m;
    memset(m, 0, sizeof(*m));
    return (int)c->n++;
}

int lc_chat_add_versions(struct lc_chat *c, size_t i, struct lc_message *older)
{
    if (i >= c->n || older->role != c->msgs[i].role)
        return -1;
    struct lc_message *m = &c->msgs[i];
    size_t n_old = older->n_alts + 1, n = n_old + m->n_alts;
    struct lc_alt *a = malloc(n * sizeof(*a));
    if (!a)
        return -1;
    /* older's versions in order (its shown text in its place), then m's alternatives */
    for (size_t k = 0, j = 0; k < n_old; k++)
        a[k] = k == older->chosen ? (struct lc_alt){ older->text, older->len, older->time, older->end }
                                  : older->alts[j++];
    if (m->n_alts)
        memcpy(a + n_old, m->alts, m->n_alts * sizeof(*a));
    free(m->alts);
    m->alts = a;
    m->n_alts = n;
    m->chosen += n_old;
    free(older->alts);
    memset(older, 0, sizeof(*older));
    return 0;
}

int lc_chat_choose(struct lc_chat *c, size_t i, size_t k)
{
    if (i >= c->n || k > c->msgs[i].n_alts)
        return -1;
    struct lc_message *m = &c->msgs[i];
    if (k == m->chosen)
        return 0;
    c->cuts++;
    size_t src = k < m->chosen ? k : k - 1;          /* version k in alts */
    size_t dst = m->chosen > k ? m->chosen - 1 : m->chosen;  /* the shown one, once k is out */
    struct lc_alt pick = m->alts[src];
    memmove(m->alts + src, m->alts + src + 1, (m->n_alts - src - 1) * sizeof(*m->alts));
    memmove(m->alts + dst + 1, m->alts + dst, (m->n_alts - 1 - dst) * sizeof(*m->alts));
    m->alts[dst] = (struct lc_alt){ m->text, m->len, m->time, m->end };
    m->text = pick.text;
    m->len = pick.len;
    m->time = pick.time;
    m->end = pick.end;
    m->chosen = k;
    return 0;
}

int lc_chat_set_system(struct lc_chat *c, const char *text)
{
    bool has = c->n > 0 && c->msgs[0].role == LC_ROLE_SYSTEM;
    c->cuts++;
    if (!text) {
        if (has) {
            lc_message_free(&c->msgs[0]);   /* with any versions a transcript gave it */
            memmove(c->msgs, c->msgs + 1, (c->n - 1) * sizeof(*c->msgs));
            c->n--;
        }
        return 0;
    }
    if (has) {
        char *t = strdup(text);
        if (!t)
            return -1;
        lc_message_free(&c->msgs[0]);   /* a new prompt: no versions of the old one kept */
        c->msgs[0] = (struct lc_message){ .role = LC_ROLE_SYSTEM, .text = t, .len = strlen(t),
                                          .time = time(NULL) };
        return 0;
    }
    if (lc_chat_add(c, LC_ROLE_SYSTEM, text, strlen(text)) < 0)
        return -1;
    /* rotate the new last message to the front */
    struct lc_message m = c->msgs[c->n - 1];
    memmove(c->msgs + 1, c->msgs, (c->n - 1) * sizeof(*c->msgs));
    c->msgs[0] = m;
    return 0;
}

/* Whether a and b (either may be NULL) differ. */
static bool str_differ(const char *a, const char *b)
{
    return (a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0);
}

void lc_chat_set_model(struct lc_chat *c, const char *name)
{
    c->cuts += str_differ(c->model, name);
    free(c->model);
    c->model = name ? strdup(name) : NULL;
}

void lc_chat_set_model_path(struct lc_chat *c, const char *path)
{
    c->cuts += str_differ(c->model_path, path && *path ? path : NULL);
    free(c->model_path);
    c->model_path = path && *path ? strdup(path) : NULL;
}

void lc_chat_set_title(struct lc_chat *c, const char *title)
{
    c->cuts += str_differ(c->title, title && *title ? title : NULL);
    free(c->title);
    c->title = title && *title ? strdup(title) : NULL;
}

/* ---------------------------------------------------------------- JSON */

static void iso_time(time_t t, char *buf, size_t len)
{
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(buf, len, "1970-01-01T00:00:00Z");
}

/* Parse "YYYY-MM-DDTHH:MM:SSZ" (UTC).  -1 if malformed. */
static int parse_iso_time(const char *s, time_t *out)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *e = strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (!e || *e)
        return -1;
    *out = timegm(&tm);
    return 0;
}

/* A float as the shortest decimal that reads back as the same float (0.8f -> "0.8"; -0 as 0). */
static json_object *json_float(float f)
{
    char buf[32];
    if (f == 0.0f)   /* -0 would be written "-0", which reads back as the integer 0 */
        f = 0.0f;
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof(buf), "%.*g", prec, (double)f);
        if (strtof(buf, NULL) == f)
            break;
    }
    return json_object_new_double_s((double)f, buf);
}

/* With seed "random", the seed the sampler picked for the replies (saved as "seed_used", for
 * reproducing them; loading keeps the seed random), or LC_SEED_RANDOM if not known. */
static uint64_t seed_drawn(const struct lc_chat *c)
{
    return c->params.seed == LC_SEED_RANDOM ? c->seed_used : LC_SEED_RANDOM;
}

/* Append s[0..n) with each byte that is not valid UTF-8 replaced by U+FFFD (JSON strings must
 * be UTF-8; control characters are left for the JSON writer to escape). */
static void utf8_lossy(struct lc_strbuf *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t r = lc_utf8_decode(u + i, n - i, &cp);
        if (r == LC_UTF8_INVALID || r == LC_UTF8_INCOMPLETE) {
            lc_strbuf_putn(b, "\xEF\xBF\xBD", 3);
            i++;
        } else {
            lc_strbuf_putn(b, s + i, r);
            i += r;
        }
    }
}

/* A JSON string of s[0..n) made valid UTF-8 as above; NULL on allocation failure. */
static json_object *json_lossy_string(const char *s, size_t n)
{
    if (lc_utf8_valid(s, n))
        return json_object_new_string_len(s, (int)n);
    struct lc_strbuf b = { 0 };
    lc_strbuf_putn(&b, "", 0);
    utf8_lossy(&b, s, n);
    json_object *o = b.oom ? NULL : json_object_new_string_len(b.p, (int)b.len);
    free(b.p);
    return o;
}

static const char b64_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *lc_base64_encode(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)u[i] << 16 | (i + 1 < n ? (uint32_t)u[i + 1] << 8 : 0) |
                     (i + 2 < n ? u[i + 2] : 0);
        *o++ = b64_chars[v >> 18];
        *o++ = b64_chars[(v >> 12) & 63];
        *o++ = i + 1 < n ? b64_chars[(v >> 6) & 63] : '=';
        *o++ = i + 2 < n ? b64_chars[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

/* Decode strict base64 (length a multiple of 4, '=' only as padding at the end, no spaces).
 * Returns a malloc'd buffer (NUL-terminated) with its length in *len, or NULL. */
static char *base64_decode(const char *s, size_t n, size_t *len)
{
    if (n % 4 != 0)
        return NULL;
    char *out = malloc(n / 4 * 3 + 1);
    if (!out)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = 0;
        int pad = 0;
        for (int j = 0; j < 4; j++) {
            const char ch = s[i + j];
            const char *p = ch ? strchr(b64_chars, ch) : NULL;
            if (ch == '=' && i + 4 == n && j >= 2 && (j == 3 || s[i + 3] == '=')) {
                pad++;
                v <<= 6;
            } else if (p && !pad) {
                v = v << 6 | (uint32_t)(p - b64_chars);
            } else {
                free(out);
                return NULL;
            }
        }
        out[k++] = (char)(v >> 16);
        if (pad < 2)
            out[k++] = (char)(v >> 8);
        if (pad < 1)
            out[k++] = (char)v;
    }
    out[k] = '\0';
    *len = k;
    return out;
}

/* json-c writes U+007F and the C1 controls U+0080..U+009F raw; escape them (\u007f ...) so
 * that `cat t.json` cannot drive a terminal either.  Those bytes occur only inside strings (the
 * JSON structure is ASCII), where the escape means the same character.  Returns a malloc'd
 * copy with a trailing newline, or NULL. */
static char *json_escape_controls(const char *s)
{
    struct lc_strbuf b = { 0 };
    for (const unsigned char *u = (const unsigned char *)s; *u; u++) {
        if (*u == 0x7F) {
            lc_strbuf_put(&b, "\\u007f");
        } else if (u[0] == 0xC2 && u[1] >= 0x80 && u[1] <= 0x9F) {
            lc_strbuf_printf(&b, "\\u%04x", u[1]);
            u++;
        } else {
            lc_strbuf_putn(&b, (const char *)u, 1);
        }
    }
    lc_strbuf_putn(&b, "\n", 1);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* "content" (+ "content_base64" for bytes that are not UTF-8), "time" and "end" (unless
 * complete) of one version of a message into o.  false on allocation failure. */
static bool add_content(json_object *o, const char *text, size_t len, time_t time, enum lc_end end)
{
    bool ok = true;
    char ts[32];
    json_object_object_add(o, "content", json_lossy_string(text, len));
    if (!lc_utf8_valid(text, len)) {
        /* the exact bytes, for lc_chat_from_json (layout in chat.h) */
        char *b64 = lc_base64_encode(text, len);
        json_object_object_add(o, "content_base64", b64 ? json_object_new_string(b64) : NULL);
        ok = b64 != NULL;
        free(b64);
    }
    iso_time(time, ts, sizeof(ts));
    json_object_object_add(o, "time", json_object_new_string(ts));
    if (lc_end_name(end))
        json_object_object_add(o, "end", json_object_new_string(lc_end_name(end)));
    return ok;
}

char *lc_chat_to_json(const struct lc_chat *c)
{
    json_object *root = json_object_new_object();
    if (!root)
        return NULL;
    char ts[32];
    iso_time(time(NULL), ts, sizeof(ts));
    json_object_object_add(root, "format", json_object_new_string("llamachat-transcript"));
    json_object_object_add(root, "version", json_object_new_int(1));
    if (c->model)
        json_object_object_add(root, "model", json_lossy_string(c->model, strlen(c->model)));
    if (c->model_path)
        json_object_object_add(root, "model_path", json_lossy_string(c->model_path, strlen(c->model_path)));
    if (c->title)
        json_object_object_add(root, "title", json_lossy_string(c->title, strlen(c->title)));
    json_object_object_add(root, "saved", json_object_new_string(ts));
    json_object *p = json_object_new_object();
    json_object_object_add(p, "temp", json_float(c->params.temp));
    json_object_object_add(p, "top_k", json_object_new_int(c->params.top_k));
    json_object_object_add(p, "top_p", json_float(c->params.top_p));
    json_object_object_add(p, "min_p", json_float(c->params.min_p));
    json_object_object_add(p, "repeat_penalty", json_float(c->params.repeat_penalty));
    json_object_object_add(p, "repeat_last_n", json_object_new_int(c->params.repeat_last_n));
    json_object_object_add(p, "max_tokens", json_object_new_int(c->max_tokens));
    if (c->params.seed == LC_SEED_RANDOM)
        json_object_object_add(p, "seed", json_object_new_string("random"));
    else
        json_object_object_add(p, "seed", json_object_new_uint64(c->params.seed));
    if (seed_drawn(c) != LC_SEED_RANDOM)
        json_object_object_add(p, "seed_used", json_object_new_uint64(seed_drawn(c)));
    json_object_object_add(root, "parameters", p);
    json_object *msgs = json_object_new_array();
    bool ok = true;
    for (size_t i = 0; i < c->n; i++) {
        json_object *m = json_object_new_object();
        json_object_object_add(m, "role", json_object_new_string(lc_role_name(c->msgs[i].role)));
        const struct lc_message *msg = &c->msgs[i];
        ok = add_content(m, msg->text, msg->len, msg->time, msg->end) && ok;
        if (msg->n_alts) {   /* the other versions (/regen), layout in chat.h */
            json_object *alts = json_object_new_array();
            for (size_t k = 0; k < msg->n_alts; k++) {
                json_object *a = json_object_new_object();
                ok = add_content(a, msg->alts[k].text, msg->alts[k].len, msg->alts[k].time,
                                 msg->alts[k].end) && ok;
                json_object_array_add(alts, a);
            }
            json_object_object_add(m, "alternatives", alts);
            json_object_object_add(m, "chosen", json_object_new_int64((int64_t)msg->chosen + 1));
        }
        json_object_array_add(msgs, m);
    }
    json_object_object_add(root, "messages", msgs);
    const char *s = json_object_to_json_string_ext(
        root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
    char *out = s && ok ? json_escape_controls(s) : NULL;
    json_object_put(root);
    return out;
}

/* ---------------------------------------------------------------- Markdown */

static void b_float(struct lc_strbuf *b, const char *name, float f)
{
    json_object *o = json_float(f);
    lc_strbuf_printf(b, "%s %s", name, json_object_to_json_string(o));
    json_object_put(o);
}

char *lc_chat_to_markdown(const struct lc_chat *c)
{
    struct lc_strbuf b = { 0 };
    char ts[32];
    static const char *const heads[] = { "System", "User", "Assistant" };
    iso_time(time(NULL), ts, sizeof(ts));
    lc_strbuf_printf(&b, "# llamachat transcript\n\n");
    if (c->model) {
        lc_strbuf_put(&b, "- model: ");
        lc_text_sanitize(&b, c->model, strlen(c->model), true);
        lc_strbuf_putn(&b, "\n", 1);
    }
    lc_strbuf_printf(&b, "- saved: %s\n- parameters: ", ts);
    b_float(&b, "temp", c->params.temp);
    lc_strbuf_printf(&b, ", top_k %d, ", c->params.top_k);
    b_float(&b, "top_p", c->params.top_p);
    lc_strbuf_putn(&b, ", ", 2);
    b_float(&b, "min_p", c->params.min_p);
    lc_strbuf_putn(&b, ", ", 2);
    b_float(&b, "repeat_penalty", c->params.repeat_penalty);
    lc_strbuf_printf(&b, ", repeat_last_n %d, max_tokens %d, seed ", c->params.repeat_last_n,
             c->max_tokens);
    if (c->params.seed != LC_SEED_RANDOM)
        lc_strbuf_printf(&b, "%llu\n", (unsigned long long)c->params.seed);
    else if (seed_drawn(c) != LC_SEED_RANDOM)
        lc_strbuf_printf(&b, "random (drawn: %llu)\n", (unsigned long long)seed_drawn(c));
    else
        lc_strbuf_printf(&b, "random\n");
    for (size_t i = 0; i < c->n; i++) {
        const struct lc_message *m = &c->msgs[i];
        iso_time(m->time, ts, sizeof(ts));
        if (m->n_alts)   /* the version shown of several (/regen); the others are in the JSON */
            lc_strbuf_printf(&b, "\n## %s (%s, version %zu of %zu)\n\n", heads[m->role < 3 ? m->role : 0],
                             ts, m->chosen + 1, m->n_alts + 1);
        else
            lc_strbuf_printf(&b, "\n## %s (%s)\n\n", heads[m->role < 3 ? m->role : 0], ts);
        /* visible form (textsafe.h): `cat chat.md` must not drive the terminal */
        lc_text_sanitize(&b, m->text, m->len, true);
        if (m->len == 0 || m->text[m->len - 1] != '\n')
            lc_strbuf_putn(&b, "\n", 1);
        if (lc_end_note(m->end))   /* a reply the model did not end (chat.h "end") */
            lc_strbuf_printf(&b, "\n*%s*\n", lc_end_note(m->end));
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* ---------------------------------------------------------------- files */

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

size_t lc_chat_max_file(void)
{
    const char *v = getenv("LLAMACHAT_TEST_MAX_CHAT_FILE");
    if (v && *v >= '0' && *v <= '9') {
        unsigned long long n = strtoull(v, NULL, 10);
        if (n < LC_CHAT_MAX_FILE)
            return (size_t)n;
    }
    return LC_CHAT_MAX_FILE;
}

/* A size for people: "64 MiB", "70.2 MiB", "12.0 KiB", "900 bytes". */
static void size_text(char *buf, size_t n, size_t bytes)
{
    if (bytes >= (size_t)1 << 20 && bytes % ((size_t)1 << 20) == 0)
        snprintf(buf, n, "%zu MiB", bytes >> 20);
    else if (bytes >= (size_t)1 << 20)
        snprintf(buf, n, "%.1f MiB", (double)bytes / (1 << 20));
    else if (bytes >= 1024)
        snprintf(buf, n, "%.1f KiB", (double)bytes / 1024);
    else
        snprintf(buf, n, "%zu bytes", bytes);
}

/* The least the JSON of s[0..n) can take: each byte is written at least once (an invalid one as
 * U+FFFD, three), and the ASCII bytes json-c escapes ('"', '\\', C0 controls) or
 * json_escape_controls does (DEL) take two or more. */
static size_t json_min_str(const char *s, size_t n)
{
    size_t k = n;
    for (const unsigned char *u = (const unsigned char *)s, *e = u + n; u < e; u++)
        k += *u < 0x20 || *u == '"' || *u == '\\' || *u == 0x7F;
    return k;
}

size_t lc_chat_json_min_len(const struct lc_chat *c)
{
    /* the compact form of each message, {"role":"R","content":"C","time":"T"} with T 20
     * characters, and a comma; each other version {"content":"C","time":"T"}; the pretty
     * printing only adds to it */
    size_t k = 64;   /* {"format":"llamachat-transcript",...,"messages":[]} */
    for (size_t i = 0; i < c->n; i++) {
        const struct lc_message *m = &c->msgs[i];
        k += 54 + strlen(lc_role_name(m->role)) + json_min_str(m->text, m->len);
        if (m->n_alts)
            k += 29;   /* ,"alternatives":[],"chosen":N */
        for (size_t j = 0; j < m->n_alts; j++)
            k += 44 + json_min_str(m->alts[j].text, m->alts[j].len);
    }
    return k;
}

int lc_chat_json_fits(const struct lc_chat *c, size_t len, const char *path, char **err)
{
    *err = NULL;
    size_t max = lc_chat_max_file();
    if (len > max) {
        char have[32], lim[32];
        size_text(have, sizeof(have), len);
        size_text(lim, sizeof(lim), max);
        *err = fmt_err("%s: the transcript would be %s, more than the %s a saved chat can hold",
                       path, have, lim);
        return -1;
    }
    size_t most = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->msgs[i].n_alts > most)
            most = c->msgs[i].n_alts;
    if (c->n > LC_CHAT_MAX_MESSAGES || most > LC_CHAT_MAX_MESSAGES) {
        *err = fmt_err("%s: the transcript would have more than the %d %s a saved chat can hold",
                       path, LC_CHAT_MAX_MESSAGES,
                       c->n > LC_CHAT_MAX_MESSAGES ? "messages" : "versions of a reply");
        return -1;
    }
    return 0;
}

int lc_chat_save(const struct lc_chat *c, const char *path, enum lc_chat_format fmt, char **err)
{
    *err = NULL;
    if (fmt == LC_CHAT_AUTO)
        fmt = ends_with(path, ".json") ? LC_CHAT_JSON : LC_CHAT_MARKDOWN;
    char *text = fmt == LC_CHAT_JSON ? lc_chat_to_json(c) : lc_chat_to_markdown(c);
    if (!text) {
        *err = fmt_err("%s: out of memory", path);
        return -1;
    }
    if (fmt == LC_CHAT_JSON && lc_chat_json_fits(c, strlen(text), path, err) != 0) {
        free(text);
        return -1;
    }
    /* temp file + fsync + rename beside the real target; links followed, modes kept,
     * non-regular files refused (fileutil.h) */
    char *ferr = NULL;
    int rc = lc_file_replace(path, text, strlen(text), &ferr);
    if (rc != 0)
        *err = ferr ? ferr : fmt_err("%s: cannot save", path);
    free(text);
    return rc;
}

/* Field lookup with a type check; NULL + *err when present with the wrong type or required
 * and missing. */
static json_object *get_field(json_object *o, const char *key, json_type t, bool required,
                              const char *name, const char *where, char **err)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v) || v == NULL) {
        if (required)
            *err = fmt_err("%s: %s%s: missing", name, where, key);
        return NULL;
    }
    if (!json_object_is_type(v, t)) {
        static const char *const tn[] = { "null", "a boolean", "a number", "a number",
                                          "an object", "an array", "a string" };
        *err = fmt_err("%s: %s%s: expected %s", name, where, key, tn[t]);
        return NULL;
    }
    return v;
}

static int get_num(json_object *p, const char *key, double lo, double hi, const char *name,
                   double *out, char **err)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(p, key, &v) || !v)
        return 0;   /* absent: keep the default */
    if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int)) {
        *err = fmt_err("%s: parameters.%s: expected a number", name, key);
        return -1;
    }
    double d = json_object_get_double(v);
    if (!(d >= lo && d <= hi)) {
        *err = fmt_err("%s: parameters.%s: %.15g out of range [%.15g, %.15g]", name, key, d, lo, hi);
        return -1;
    }
    *out = d;
    return 1;
}

/* The "content" (checked against "content_base64" when present), "time" and "end" of one
 * version of a message (layout in chat.h): *text malloc'd, *time kept when there is no "time",
 * *end LC_END_COMPLETE when there is no "end".  0, or -1 with *err ("NAME: WHEREcontent:
 * contains a NUL character"). */
static int read_content(json_object *m, const char *name, const char *where, char **text,
                        size_t *len, time_t *when, enum lc_end *end, char **err)
{
    json_object *content = get_field(m, "content", json_type_string, true, name, where, err);
    if (!content)
        return -1;
    const char *t = json_object_get_string(content);
    size_t tl = (size_t)json_object_get_string_len(content);
    json_object *b64 = get_field(m, "content_base64", json_type_string, false, name, where, err);
    if (*err)
        return -1;
    char *bytes = NULL;
    if (b64) {
        /* content that is not valid UTF-8: the exact bytes; "content" must be their
         * U+FFFD-for-each-invalid-byte form (so an edit of one without the other is seen) */
        size_t bl = 0;
        bytes = base64_decode(json_object_get_string(b64),
                              (size_t)json_object_get_string_len(b64), &bl);
        if (!bytes) {
            *err = fmt_err("%s: %scontent_base64: not valid base64", name, where);
            return -1;
        }
        struct lc_strbuf lossy = { 0 };
        lc_strbuf_putn(&lossy, "", 0);
        utf8_lossy(&lossy, bytes, bl);
        const bool same = !lossy.oom && lossy.len == tl && memcmp(lossy.p, t, tl) == 0;
        free(lossy.p);
        if (!same) {
            *err = fmt_err("%s: %scontent_base64: does not match content", name, where);
            free(bytes);
            return -1;
        }
        t = bytes;
        tl = bl;
    }
    if (memchr(t, '\0', tl)) {
        *err = fmt_err("%s: %scontent: contains a NUL character", name, where);
        free(bytes);
        return -1;
    }
    if (!bytes && !(bytes = strndup(t, tl))) {
        *err = fmt_err("%s: out of memory", name);
        return -1;
    }
    json_object *tm = get_field(m, "time", json_type_string, false, name, where, err);
    if (*err || (tm && parse_iso_time(json_object_get_string(tm), when) != 0)) {
        if (!*err)
            *err = fmt_err("%s: %stime: '%s' is not YYYY-MM-DDTHH:MM:SSZ", name, where,
                           json_object_get_string(tm));
        free(bytes);
        return -1;
    }
    json_object *en = get_field(m, "end", json_type_string, false, name, where, err);
    if (*err) {
        free(bytes);
        return -1;
    }
    *end = en ? lc_end_from_name(json_object_get_string(en)) : LC_END_COMPLETE;
    *text = bytes;
    *len = tl;
    return 0;
}

/* "alternatives" and "chosen" of a message (optional; layout in chat.h) into m.  0, or -1
 * with *err. */
static int read_alternatives(json_object *o, struct lc_message *m, const char *name,
                             const char *where, char **err)
{
    json_object *alts = get_field(o, "alternatives", json_type_array, false, name, where, err);
    if (*err)
        return -1;
    size_t n = alts ? json_object_array_length(alts) : 0;
    json_object *ch = get_field(o, "chosen", json_type_int, false, name, where, err);
    if (*err)
        return -1;
    if (n == 0 && !ch)
        return 0;
    if (n > LC_CHAT_MAX_MESSAGES) {
        *err = fmt_err("%s: %salternatives: %zu versions is too many", name, where, n);
        return -1;
    }
    int64_t chosen = ch ? json_object_get_int64(ch) : (int64_t)n + 1;
    if (chosen < 1 || chosen > (int64_t)n + 1) {
        *err = fmt_err("%s: %schosen: %lld is not between 1 and %zu", name, where,
                       (long long)chosen, n + 1);
        return -1;
    }
    if (n == 0)
        return 0;
    m->alts = calloc(n, sizeof(*m->alts));
    if (!m->alts) {
        *err = fmt_err("%s: out of memory", name);
        return -1;
    }
    for (size_t k = 0; k < n; k++) {
        json_object *a = json_object_array_get_idx(alts, k);
        char w[96];
        snprintf(w, sizeof(w), "%salternatives[%zu].", where, k);
        if (!json_object_is_type(a, json_type_object)) {
            *err = fmt_err("%s: %.*s: expected an object", name, (int)strlen(w) - 1, w);
            return -1;
        }
        m->alts[k].time = m->time;
        if (read_content(a, name, w, &m->alts[k].text, &m->alts[k].len, &m->alts[k].time,
                         &m->alts[k].end, err) != 0)
            return -1;
        m->n_alts = k + 1;
    }
    m->chosen = (size_t)chosen - 1;
    return 0;
}

struct lc_chat *lc_chat_from_json(const char *text, size_t len, const char *name, char **err)
{
    *err = NULL;
    if (len > INT_MAX) {
        *err = fmt_err("%s: too large", name);
        return NULL;
    }
    json_tokener *tok = json_tokener_new();
    if (!tok) {
        *err = fmt_err("%s: out of memory", name);
        return NULL;
    }
    size_t lead = 0;
    while (lead < len && (text[lead] == ' ' || text[lead] == '\t' || text[lead] == '\n' ||
                          text[lead] == '\r'))
        lead++;
    if (lead < len && text[lead] == '#') { /* a Markdown transcript starts with its title */
        *err = fmt_err("%s: not a JSON transcript (Markdown transcripts are for reading; save "
                       "with a .json name to load the conversation again)", name);
        json_tokener_free(tok);
        return NULL;
    }
    if (lead == len) {
        *err = fmt_err("%s: empty file, not a transcript", name);
        json_tokener_free(tok);
        return NULL;
    }
    json_object *root = json_tokener_parse_ex(tok, text, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t parsed = json_tokener_get_parse_end(tok);
    if (!root && (jerr == json_tokener_continue || jerr == json_tokener_success)) {
        /* json-c wants more input ("continue"): the file stops inside the JSON */
        *err = fmt_err("%s: the JSON ends early, at byte %zu (the file is cut short)", name, len);
        json_tokener_free(tok);
        return NULL;
    }
    if (!root || jerr != json_tokener_success) {
        *err = fmt_err("%s: not valid JSON at byte %zu: %s", name, parsed, json_tokener_error_desc(jerr));
        json_tokener_free(tok);
        json_object_put(root);
        return NULL;
    }
    json_tokener_free(tok);
    while (parsed < len && (text[parsed] == ' ' || text[parsed] == '\t' || text[parsed] == '\n' ||
                            text[parsed] == '\r'))
        parsed++;
    if (parsed < len) {   /* a second transcript appended, or garbage: not silently left out */
        *err = fmt_err("%s: text after the end of the JSON, at byte %zu", name, parsed);
        json_object_put(root);
        return NULL;
    }
    struct lc_chat *c = NULL;
    if (!json_object_is_type(root, json_type_object)) {
        *err = fmt_err("%s: not a llamachat transcript (top level is not an object)", name);
        goto fail;
    }
    json_object *f = get_field(root, "format", json_type_string, true, name, "", err);
    if (!f)
        goto fail;
    if (strcmp(json_object_get_string(f), "llamachat-transcript") != 0) {
        *err = fmt_err("%s: format: '%s' is not llamachat-transcript", name, json_object_get_string(f));
        goto fail;
    }
    json_object *ver = get_field(root, "version", json_type_int, true, name, "", err);
    if (!ver)
        goto fail;
    if (json_object_get_int64(ver) != 1) {
        *err = fmt_err("%s: version %lld not supported (this llamachat reads version 1)", name,
                       (long long)json_object_get_int64(ver));
        goto fail;
    }
    c = lc_chat_new();
    if (!c) {
        *err = fmt_err("%s: out of memory", name);
        goto fail;
    }
    json_object *model = get_field(root, "model", json_type_string, false, name, "", err);
    if (*err)
        goto fail;
    if (model)
        lc_chat_set_model(c, json_object_get_string(model));
    json_object *mpath = get_field(root, "model_path", json_type_string, false, name, "", err);
    if (*err)
        goto fail;
    if (mpath)
        lc_chat_set_model_path(c, json_object_get_string(mpath));
    json_object *title = get_field(root, "title", json_type_string, false, name, "", err);
    if (*err)
        goto fail;
    if (title)
        lc_chat_set_title(c, json_object_get_string(title));
    json_object *p = get_field(root, "parameters", json_type_object, false, name, "", err);
    if (*err)
        goto fail;
    if (p) {
        c->has_params = true;
        double d;
        int r;
        if ((r = get_num(p, "temp", 0, 100, name, &d, err)) < 0) goto fail;
        if (r) c->params.temp = (float)d;
        /* the ranges of /set and the command line (config.c's table): what the chat
         * accepted and saved must open again */
        if ((r = get_num(p, "top_k", 0, INT32_MAX, name, &d, err)) < 0) goto fail;
        if (r) c->params.top_k = (int32_t)d;
        if ((r = get_num(p, "top_p", 0, 1, name, &d, err)) < 0) goto fail;
        if (r) c->params.top_p = (float)d;
        if ((r = get_num(p, "min_p", 0, 1, name, &d, err)) < 0) goto fail;
        if (r) c->params.min_p = (float)d;
        if ((r = get_num(p, "repeat_penalty", 0.01, 100, name, &d, err)) < 0) goto fail;
        if (r) c->params.repeat_penalty = (float)d;
        if ((r = get_num(p, "repeat_last_n", -1, INT32_MAX, name, &d, err)) < 0) goto fail;
        if (r) c->params.repeat_last_n = (int32_t)d;
        if ((r = get_num(p, "max_tokens", -1, INT32_MAX, name, &d, err)) < 0) goto fail;
        if (r) c->max_tokens = (int32_t)d;
        json_object *seed = NULL;
        if (json_object_object_get_ex(p, "seed", &seed) && seed) {
            if (json_object_is_type(seed, json_type_string) &&
                strcmp(json_object_get_string(seed), "random") == 0) {
                c->params.seed = LC_SEED_RANDOM;
            } else if (json_object_is_type(seed, json_type_int) &&
                       !(json_object_get_int64(seed) < 0)) {
                c->params.seed = json_object_get_uint64(seed);
            } else {
                *err = fmt_err("%s: parameters.seed: expected an integer from 0 to 18446744073709551614 or \"random\"", name);
                goto fail;
            }
        }
        /* the seed a random one drew (for reproducing the replies): kept as a record only */
        if (json_object_object_get_ex(p, "seed_used", &seed) && seed &&
            json_object_is_type(seed, json_type_int) && !(json_object_get_int64(seed) < 0) &&
            c->params.seed == LC_SEED_RANDOM)
            c->seed_used = json_object_get_uint64(seed);
    }
    json_object *msgs = get_field(root, "messages", json_type_array, true, name, "", err);
    if (!msgs)
        goto fail;
    size_t n = json_object_array_length(msgs);
    if (n > LC_CHAT_MAX_MESSAGES) {
        *err = fmt_err("%s: messages: %zu messages is too many", name, n);
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        json_object *m = json_object_array_get_idx(msgs, i);
        char where[48];
        snprintf(where, sizeof(where), "messages[%zu].", i);
        if (!json_object_is_type(m, json_type_object)) {
            *err = fmt_err("%s: messages[%zu]: expected an object", name, i);
            goto fail;
        }
        json_object *role = get_field(m, "role", json_type_string, true, name, where, err);
        if (!role)
            goto fail;
        int r = lc_role_from_name(json_object_get_string(role));
        if (r < 0) {
            *err = fmt_err("%s: %srole: unknown role '%s'", name, where, json_object_get_string(role));
            goto fail;
        }
        if (r == LC_ROLE_SYSTEM && i != 0) {
            *err = fmt_err("%s: %srole: a system message must come first", name, where);
            goto fail;
        }
        char *t = NULL;
        size_t tl = 0;
        time_t tm = time(NULL);
        enum lc_end end = LC_END_COMPLETE;
        if (read_content(m, name, where, &t, &tl, &tm, &end, err) != 0)
            goto fail;
        int idx = lc_chat_add(c, (enum lc_chat_role)r, t, tl);
        free(t);
        if (idx < 0) {
            *err = fmt_err("%s: out of memory", name);
            goto fail;
        }
        c->msgs[idx].time = tm;
        c->msgs[idx].end = end;
        if (read_alternatives(m, &c->msgs[idx], name, where, err) != 0)
            goto fail;
    }
    json_object_put(root);
    return c;
fail:
    if (!*err)
        *err = fmt_err("%s: out of memory", name);
    lc_chat_free(c);
    json_object_put(root);
    return NULL;
}

struct lc_chat *lc_chat_load(const char *path, char **err)
{
    *err = NULL;
    /* O_NONBLOCK and a regular file only: a FIFO or a device never hangs the chat; a file
     * over the limit (chat.h: the writer's too) is refused before it is read */
    const size_t max = lc_chat_max_file();
    char lim[32];
    size_text(lim, sizeof(lim), max);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *err = fmt_err("%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0)
        st.st_mode = 0;
    if (!S_ISREG(st.st_mode) || st.st_size > (off_t)max) {
        *err = !S_ISREG(st.st_mode) ? fmt_err("%s: not a regular file; not loaded", path)
                                    : fmt_err("%s: larger than %s, not a transcript", path, lim);
        close(fd);
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        *err = fmt_err("%s: cannot open: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    /* room for the size fstat gave, grown if the file grows meanwhile; at most max + 1 bytes
     * are read (one more than max: too large), so a file of exactly max bytes loads */
    char *text = NULL;
    size_t n = 0, cap = 0;
    const size_t room = max + 2;   /* max + 1 bytes and the NUL */
    for (;;) {
        if (n + 1 >= cap) {
            if (cap >= room) {
                *err = fmt_err("%s: larger than %s, not a transcript", path, lim);
                break;
            }
            size_t want = cap ? cap * 2 : (size_t)st.st_size + 65536;
            cap = want < room ? want : room;
            char *t = realloc(text, cap);
            if (!t) {
                *err = fmt_err("%s: out of memory", path);
                break;
            }
            text = t;
        }
        size_t r = fread(text + n, 1, cap - n - 1, f);
        n += r;
        if (n > max) {
            *err = fmt_err("%s: larger than %s, not a transcript", path, lim);
            break;
        }
        if (r == 0) {
            if (ferror(f))
                *err = fmt_err("%s: read error: %s", path, strerror(errno));
            break;
        }
    }
    fclose(f);
    struct lc_chat *c = NULL;
    if (!*err)
        c = lc_chat_from_json(text, n, path, err);
    free(text);
    return c;
}
