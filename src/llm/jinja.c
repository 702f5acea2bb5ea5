/*
 * jinja.c - lexer, parser and tree-walking evaluator for the chat-template subset of Jinja.
 *
 * The model.  lc_jinja_parse turns the source into tokens (whitespace control and
 * trim_blocks/lstrip_blocks are applied to the text tokens here, exactly as jinja2's lexer
 * does), then into a tree of nodes held in the template's arena.  lc_jinja_render_chat walks
 * the tree with a scope chain of frames; every value it creates lives in a per-render arena
 * freed at the end, so evaluation code never frees anything and an error anywhere unwinds
 * with longjmp to the one place that frees the arena and reports the message.
 *
 * Strings are (bytes, length, per-byte origins or NULL): NULL means all template text, which
 * keeps the common case cheap; only strings that hold message bytes carry origins.
 *
 * Scoping follows jinja2: a for-loop body gets a fresh frame on every iteration (a `set`
 * inside it does not outlive the iteration, which is why templates use namespace()), `if`
 * has no frame, a macro call gets a frame whose parent is the template's top frame.
 */
#include "jinja.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_DEPTH 200              /* nesting of expressions / macro calls */
#define MAX_OUTPUT (256u << 20)    /* bytes of one rendering */
#define MAX_ARENA ((size_t)1 << 30) /* bytes a parse or a rendering may allocate */
#define MAX_STEPS 20000000L        /* statements and loop iterations of one rendering */

/* ---------------------------------------------------------------- arena and errors */

struct ablock {
    struct ablock *next;
    size_t used, cap;
    max_align_t data[];
};

struct arena {
    struct ablock *head;
};

/* Error context: where to unwind, and the message. */
struct ectx {
    struct arena *ar;
    jmp_buf jb;
    char *err;
    bool oom;
    size_t allocated;   /* bytes of arena blocks, against MAX_ARENA */
    long steps;         /* work done, against MAX_STEPS */
};

static void arena_free(struct arena *a)
{
    struct ablock *b = a->head;
    while (b) {
        struct ablock *n = b->next;
        free(b);
        b = n;
    }
    a->head = NULL;
}

/* Unwind with a formatted message ("line L, column C: ..." when line > 0). */
__attribute__((format(printf, 4, 5), noreturn))
static void fail(struct ectx *e, int line, int col, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    free(e->err);
    size_t need = strlen(buf) + 64;
    e->err = malloc(need);
    if (e->err) {
        if (line > 0)
            snprintf(e->err, need, "line %d, column %d: %s", line, col, buf);
        else
            snprintf(e->err, need, "%s", buf);
    }
    longjmp(e->jb, 1);
}

__attribute__((noreturn))
static void fail_oom(struct ectx *e)
{
    e->oom = true;
    fail(e, 0, 0, "out of memory");
}

/* n bytes from the arena, aligned for any type; never returns NULL (unwinds instead). */
static void *aalloc(struct ectx *e, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (n == 0)
        n = sizeof(max_align_t);
    struct ablock *b = e->ar->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        if (n > MAX_ARENA || e->allocated + cap > MAX_ARENA)
            fail(e, 0, 0, "the template needs more than %zu MiB", MAX_ARENA >> 20);
        e->allocated += cap;
        b = malloc(sizeof(*b) + cap);
        if (!b)
            fail_oom(e);
        b->next = e->ar->head;
        b->used = 0;
        b->cap = cap;
        e->ar->head = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    return p;
}

/* Multiply with overflow check, for array sizes. */
static size_t mulsz(struct ectx *e, size_t a, size_t b)
{
    if (b && a > SIZE_MAX / b)
        fail_oom(e);
    return a * b;
}

static void *acalloc(struct ectx *e, size_t n, size_t sz)
{
    size_t t = mulsz(e, n, sz);
    void *p = aalloc(e, t);
    memset(p, 0, t);
    return p;
}

/* A copy of n bytes, NUL-terminated, in the arena. */
static char *astrndup(struct ectx *e, const char *s, size_t n)
{
    char *p = aalloc(e, n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

/* ---------------------------------------------------------------- values */

enum vtype {
    V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_NS, V_FUNC, V_MACRO
};

typedef struct lc_jinja_origin orig_t;

/* A string: n bytes at p (NUL-terminated), with per-byte origins o (NULL: template text). */
struct str {
    const char *p;
    size_t n;
    const orig_t *o;
};

struct list;
struct dict;
struct node;

struct val {
    enum vtype t;
    union {
        bool b;
        long long i;
        double f;
        struct str s;
        struct list *l;
        struct dict *d;        /* V_DICT, V_NS */
        int fn;                /* V_FUNC: enum builtin */
        const struct node *mac;
        const char *uname;     /* V_UNDEF: the name, for messages (may be NULL) */
    } u;
};

struct list {
    struct val *v;
    size_t n, cap;
};

struct dict {
    struct str *k;
    struct val *v;
    size_t n, cap;
};

enum builtin { F_RAISE, F_RANGE, F_NAMESPACE, F_DICT, F_STRFTIME };

static const struct val UNDEF = { .t = V_UNDEF };

static struct val mk_int(long long i)
{
    struct val v = { .t = V_INT };
    v.u.i = i;
    return v;
}

static struct val mk_bool(bool b)
{
    struct val v = { .t = V_BOOL };
    v.u.b = b;
    return v;
}

static struct val mk_float(double f)
{
    struct val v = { .t = V_FLOAT };
    v.u.f = f;
    return v;
}

static struct val mk_str(struct str s)
{
    struct val v = { .t = V_STR };
    v.u.s = s;
    return v;
}

static struct str cstr(const char *s)
{
    return (struct str){ s, strlen(s), NULL };
}

static struct val mk_cstr(const char *s)
{
    return mk_str(cstr(s));
}

static struct list *list_new(struct ectx *e, size_t cap)
{
    struct list *l = aalloc(e, sizeof(*l));
    l->n = 0;
    l->cap = cap ? cap : 4;
    l->v = aalloc(e, mulsz(e, l->cap, sizeof(struct val)));
    return l;
}

static void list_push(struct ectx *e, struct list *l, struct val v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap * 2;
        struct val *nv = aalloc(e, mulsz(e, cap, sizeof(*nv)));
        memcpy(nv, l->v, l->n * sizeof(*nv));
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

static struct val mk_list(struct list *l)
{
    struct val v = { .t = V_LIST };
    v.u.l = l;
    return v;
}

static struct dict *dict_new(struct ectx *e)
{
    struct dict *d = aalloc(e, sizeof(*d));
    d->n = 0;
    d->cap = 4;
    d->k = aalloc(e, d->cap * sizeof(*d->k));
    d->v = aalloc(e, d->cap * sizeof(*d->v));
    return d;
}

static bool str_eq(struct str a, struct str b)
{
    return a.n == b.n && memcmp(a.p, b.p, a.n) == 0;
}

static struct val *dict_find(const struct dict *d, struct str k)
{
    for (size_t i = 0; i < d->n; i++)
        if (str_eq(d->k[i], k))
            return &d->v[i];
    return NULL;
}

static void dict_set(struct ectx *e, struct dict *d, struct str k, struct val v)
{
    struct val *p = dict_find(d, k);
    if (p) {
        *p = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap * 2;
        struct str *nk = aalloc(e, mulsz(e, cap, sizeof(*nk)));
        struct val *nv = aalloc(e, mulsz(e, cap, sizeof(*nv)));
        memcpy(nk, d->k, d->n * sizeof(*nk));
        memcpy(nv, d->v, d->n * sizeof(*nv));
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    k.o = NULL;   /* keys are names; their provenance does not matter */
    d->k[d->n] = k;
    d->v[d->n++] = v;
}

/* ---------------------------------------------------------------- string builder */

/* A growing string with origins (o allocated as soon as one byte has a non-zero origin). */
struct sb {
    char *p;
    orig_t *o;
    size_t n, cap;
};

static void sb_grow(struct ectx *e, struct sb *b, size_t add)
{
    if (b->n + add < b->cap)
        return;
    if (b->n + add > MAX_OUTPUT)
        fail(e, 0, 0, "the rendering is larger than %u bytes", MAX_OUTPUT);
    size_t cap = b->cap ? b->cap : 64;
    while (cap <= b->n + add)
        cap *= 2;
    char *np = aalloc(e, cap);
    if (b->n)
        memcpy(np, b->p, b->n);
    b->p = np;
    if (b->o) {
        orig_t *no = aalloc(e, mulsz(e, cap, sizeof(*no)));
        memcpy(no, b->o, b->n * sizeof(*no));
        b->o = no;
    }
    b->cap = cap;
}

static void sb_need_o(struct ectx *e, struct sb *b)
{
    if (b->o)
        return;
    b->o = acalloc(e, b->cap ? b->cap : 1, sizeof(*b->o));
}

/* Append n bytes with origins o (NULL: template text). */
static void sb_add(struct ectx *e, struct sb *b, const char *p, size_t n, const orig_t *o)
{
    if (n == 0)
        return;
    sb_grow(e, b, n);
    memcpy(b->p + b->n, p, n);
    if (o) {
        sb_need_o(e, b);
        memcpy(b->o + b->n, o, n * sizeof(*o));
    } else if (b->o) {
        memset(b->o + b->n, 0, n * sizeof(*o));
    }
    b->n += n;
}

static void sb_adds(struct ectx *e, struct sb *b, struct str s)
{
    sb_add(e, b, s.p, s.n, s.o);
}

static void sb_addc(struct ectx *e, struct sb *b, const char *s)
{
    sb_add(e, b, s, strlen(s), NULL);
}

/* Append bytes computed from a byte whose origin is o (derived from the same message). */
static void sb_add_derived(struct ectx *e, struct sb *b, const char *p, size_t n, orig_t o)
{
    size_t at = b->n;
    sb_add(e, b, p, n, NULL);
    if (o.msg) {
        sb_need_o(e, b);
        for (size_t i = 0; i < n; i++)
            b->o[at + i] = (orig_t){ o.msg, LC_JINJA_DERIVED };
    }
}

static struct str sb_str(struct ectx *e, struct sb *b)
{
    sb_grow(e, b, 1);
    b->p[b->n] = 0;
    return (struct str){ b->p, b->n, b->o };
}

/* Bytes [off, off+n) of s, as a new string value (shares nothing mutable). */
static struct str str_sub(struct ectx *e, struct str s, size_t off, size_t n)
{
    struct str r;
    r.p = astrndup(e, s.p + off, n);
    r.n = n;
    r.o = s.o ? s.o + off : NULL;
    return r;
}

static struct str str_cat(struct ectx *e, struct str a, struct str b)
{
    struct sb o = { 0 };
    sb_adds(e, &o, a);
    sb_adds(e, &o, b);
    return sb_str(e, &o);
}

/* ---------------------------------------------------------------- lexer */

enum tok {
    T_EOF, T_TEXT, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END,
    T_NAME, T_STRING, T_INT, T_FLOAT, T_OP
};

struct token {
    enum tok t;
    int line, col;
    const char *p;      /* text (T_TEXT, T_NAME, T_OP: source bytes; T_STRING: decoded) */
    size_t n;
    long long i;
    double f;
};

struct lexer {
    struct ectx *e;
    const char *src;
    size_t len, pos;
    struct token *v;
    size_t n, cap;
};

static void lx_push(struct lexer *L, struct token t)
{
    if (L->n == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        struct token *nv = aalloc(L->e, mulsz(L->e, cap, sizeof(*nv)));
        if (L->n)
            memcpy(nv, L->v, L->n * sizeof(*nv));
        L->v = nv;
        L->cap = cap;
    }
    L->v[L->n++] = t;
}

/* Line and column (1-based, columns in bytes) of byte offset off. */
static void lx_where(const struct lexer *L, size_t off, int *line, int *col)
{
    int l = 1, c = 1;
    for (size_t i = 0; i < off && i < L->len; i++) {
        if (L->src[i] == '\n') {
            l++;
            c = 1;
        } else {
            c++;
        }
    }
    *line = l;
    *col = c;
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static void put_utf8(struct sb *b, struct ectx *e, unsigned long cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    sb_add(e, b, u, n, NULL);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decode a string literal body with Python's unicode-escape rules (as jinja2 does). */
static struct str lx_unescape(struct ectx *e, const char *p, size_t n)
{
    struct sb b = { 0 };
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '\\' || i + 1 >= n) {
            sb_add(e, &b, p + i, 1, NULL);
            continue;
        }
        char c = p[++i];
        const char *rep = NULL;
        switch (c) {
        case 'n': rep = "\n"; break;
        case 't': rep = "\t"; break;
        case 'r': rep = "\r"; break;
        case '\\': rep = "\\"; break;
        case '\'': rep = "'"; break;
        case '"': rep = "\""; break;
        case 'a': rep = "\a"; break;
        case 'b': rep = "\b"; break;
        case 'f': rep = "\f"; break;
        case 'v': rep = "\v"; break;
        case '\n': rep = ""; break;
        default: break;
        }
        if (rep) {
            sb_add(e, &b, rep, strlen(rep), NULL);
            continue;
        }
        int nd = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
        if (nd && i + (size_t)nd < n) {
            unsigned long cp = 0;
            bool ok = true;
            for (int k = 1; k <= nd; k++) {
                int h = hexval(p[i + (size_t)k]);
                if (h < 0)
                    ok = false;
                cp = cp * 16 + (unsigned long)(h < 0 ? 0 : h);
            }
            if (ok && cp <= 0x10FFFF) {
                put_utf8(&b, e, cp);
                i += (size_t)nd;
                continue;
            }
        }
        if (c >= '0' && c <= '7') {
            unsigned long cp = 0;
            int k = 0;
            while (k < 3 && i < n && p[i] >= '0' && p[i] <= '7') {
                cp = cp * 8 + (unsigned long)(p[i] - '0');
                i++;
                k++;
            }
            i--;
            put_utf8(&b, e, cp);
            continue;
        }
        sb_add(e, &b, p + i - 1, 2, NULL);   /* unknown escape: kept as written */
    }
    return sb_str(e, &b);
}

static const char *const OPS[] = {
    "//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "=", ".",
    ",", ":", "|", "(", ")", "[", "]", "{", "}", NULL
};

/* Lex the expression tokens of a tag until its end (`}}` or `%}`), which is consumed. */
static void lx_tag(struct lexer *L, bool block)
{
    int depth = 0;
    const char *s = L->src;
    for (;;) {
        while (L->pos < L->len && is_ws(s[L->pos]))
            L->pos++;
        int line, col;
        lx_where(L, L->pos, &line, &col);
        if (L->pos >= L->len)
            fail(L->e, line, col, "unexpected end of template, expected '%s'", block ? "%}" : "}}");
        const char *c = s + L->pos;
        size_t rest = L->len - L->pos;
        const char *end = block ? "%}" : "}}";
        if (depth == 0) {
            bool minus = rest >= 3 && c[0] == '-' && memcmp(c + 1, end, 2) == 0;
            bool plus = block && rest >= 3 && c[0] == '+' && memcmp(c + 1, end, 2) == 0;
            if (minus || plus || (rest >= 2 && memcmp(c, end, 2) == 0)) {
                L->pos += (minus || plus) ? 3 : 2;
                if (minus) {
                    while (L->pos < L->len && is_ws(s[L->pos]))
                        L->pos++;
                } else if (block && !plus && L->pos < L->len && s[L->pos] == '\n') {
                    L->pos++;   /* trim_blocks */
                }
                lx_push(L, (struct token){ .t = block ? T_BLOCK_END : T_VAR_END, .line = line,
                                           .col = col });
                return;
            }
        }
        struct token t = { .line = line, .col = col };
        if (isalpha((unsigned char)*c) || *c == '_') {
            size_t n = 1;
            while (n < rest && (isalnum((unsigned char)c[n]) || c[n] == '_'))
                n++;
            t.t = T_NAME;
            t.p = c;
            t.n = n;
            L->pos += n;
        } else if (isdigit((unsigned char)*c)) {
            size_t n = 0;
            while (n < rest && (isdigit((unsigned char)c[n]) || c[n] == '_'))
                n++;
            bool isf = false;
            if (n + 1 < rest && c[n] == '.' && isdigit((unsigned char)c[n + 1])) {
                isf = true;
                n++;
                while (n < rest && (isdigit((unsigned char)c[n]) || c[n] == '_'))
                    n++;
            }
            if (n < rest && (c[n] == 'e' || c[n] == 'E')) {
                size_t m = n + 1;
                if (m < rest && (c[m] == '+' || c[m] == '-'))
                    m++;
                if (m < rest && isdigit((unsigned char)c[m])) {
                    isf = true;
                    n = m;
                    while (n < rest && isdigit((unsigned char)c[n]))
                        n++;
                }
            }
            char buf[64];
            size_t k = 0;
            for (size_t j = 0; j < n && k + 1 < sizeof(buf); j++)
                if (c[j] != '_')
                    buf[k++] = c[j];
            buf[k] = 0;
            if (isf) {
                t.t = T_FLOAT;
                t.f = strtod(buf, NULL);
            } else {
                errno = 0;
                t.t = T_INT;
                t.i = strtoll(buf, NULL, 10);
                if (errno)
                    fail(L->e, line, col, "integer literal out of range");
            }
            L->pos += n;
        } else if (*c == '\'' || *c == '"') {
            size_t n = 1;
            while (n < rest && c[n] != *c) {
                if (c[n] == '\\' && n + 1 < rest)
                    n++;
                n++;
            }
            if (n >= rest)
                fail(L->e, line, col, "unterminated string");
            struct str v = lx_unescape(L->e, c + 1, n - 1);
            t.t = T_STRING;
            t.p = v.p;
            t.n = v.n;
            L->pos += n + 1;
        } else {
            size_t n = 0;
            for (int k = 0; OPS[k]; k++) {
                size_t on = strlen(OPS[k]);
                if (on <= rest && memcmp(c, OPS[k], on) == 0) {
                    n = on;
                    break;
                }
            }
            if (n == 0) {
                int u = 1;     /* the whole UTF-8 character, for a readable message */
                while ((size_t)u < rest && u < 4 && ((unsigned char)c[u] & 0xC0) == 0x80)
                    u++;
                fail(L->e, line, col, "unexpected character '%.*s'", u, c);
            }
            if (*c == '(' || *c == '[' || *c == '{')
                depth++;
            else if ((*c == ')' || *c == ']' || *c == '}') && depth > 0)
                depth--;
            t.t = T_OP;
            t.p = c;
            t.n = n;
            L->pos += n;
        }
        lx_push(L, t);
    }
}

/* Whole template into tokens; text tokens already have whitespace control applied. */
static void lx_run(struct lexer *L)
{
    const char *s = L->src;
    bool line_starting = true;
    while (L->pos < L->len) {
        /* next tag opener */
        size_t q = L->pos;
        char kind = 0;
        for (; q + 1 < L->len; q++) {
            if (s[q] == '{' && (s[q + 1] == '{' || s[q + 1] == '%' || s[q + 1] == '#')) {
                kind = s[q + 1];
                break;
            }
        }
        if (!kind) {
            int line, col;
            lx_where(L, L->pos, &line, &col);
            lx_push(L, (struct token){ .t = T_TEXT, .p = s + L->pos, .n = L->len - L->pos,
                                       .line = line, .col = col });
            break;
        }
        char sign = q + 2 < L->len && (s[q + 2] == '-' || s[q + 2] == '+') ? s[q + 2] : 0;
        size_t tlen = q - L->pos;
        const char *text = s + L->pos;
        if (sign == '-') {
            while (tlen > 0 && is_ws(text[tlen - 1]))
                tlen--;
        } else if (sign != '+' && kind != '{') {
            /* lstrip_blocks: only whitespace between the line start and the tag */
            size_t lp = tlen;
            while (lp > 0 && text[lp - 1] != '\n')
                lp--;
            if (lp > 0 || line_starting) {
                bool allws = lp < tlen;
                for (size_t k = lp; k < tlen; k++)
                    if (!is_ws(text[k]))
                        allws = false;
                if (allws)
                    tlen = lp;
            }
        }
        if (tlen > 0) {
            int line, col;
            lx_where(L, L->pos, &line, &col);
            lx_push(L, (struct token){ .t = T_TEXT, .p = text, .n = tlen, .line = line,
                                       .col = col });
        }
        L->pos = q + 2 + (sign ? 1 : 0);
        if (kind == '#') {
            /* comment: up to #}, with -#} eating the whitespace after, else trim_blocks */
            size_t k = L->pos;
            while (k + 1 < L->len && !(s[k] == '#' && s[k + 1] == '}'))
                k++;
            if (k + 1 >= L->len) {
                int line, col;
                lx_where(L, q, &line, &col);
                fail(L->e, line, col, "missing end of comment tag");
            }
            bool minus = k > L->pos && s[k - 1] == '-';
            bool plus = k > L->pos && s[k - 1] == '+';
            L->pos = k + 2;
            if (minus) {
                while (L->pos < L->len && is_ws(s[L->pos]))
                    L->pos++;
            } else if (!plus && L->pos < L->len && s[L->pos] == '\n') {
                L->pos++;
            }
        } else {
            int line, col;
            lx_where(L, q, &line, &col);
            lx_push(L, (struct token){ .t = kind == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN,
                                       .line = line, .col = col });
            lx_tag(L, kind == '%');
        }
        line_starting = L->pos > 0 && s[L->pos - 1] == '\n';
    }
    int line, col;
    lx_where(L, L->len, &line, &col);
    lx_push(L, (struct token){ .t = T_EOF, .line = line, .col = col });
}

/* ---------------------------------------------------------------- tree */

enum nkind {
    /* statements */
    N_TEXT, N_OUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_BREAK, N_CONTINUE, N_FILTERBLOCK,
    N_GENERATION,
    /* expressions */
    E_LIT, E_NAME, E_ATTR, E_ITEM, E_SLICE, E_CALL, E_FILTER, E_TEST, E_NOT, E_NEG, E_POS,
    E_BIN, E_AND, E_OR, E_COND, E_LIST, E_DICT
};

enum binop { B_ADD, B_SUB, B_MUL, B_DIV, B_FDIV, B_MOD, B_POW, B_CAT, B_EQ, B_NE, B_LT, B_LE,
             B_GT, B_GE, B_IN, B_NOTIN };

struct body {
    struct node **v;
    size_t n;
};

struct node {
    enum nkind k;
    int line, col;
    int op;                 /* E_BIN: enum binop; E_TEST: negated */
    struct val lit;         /* E_LIT, N_TEXT (a string) */
    const char *name;       /* E_NAME, E_ATTR, E_FILTER, E_TEST, N_MACRO, N_SET attr */
    struct node *a, *b, *c; /* operands: E_SLICE a[b:c], with d as step */
    struct node *d;
    struct node **args;     /* E_CALL/E_FILTER/E_TEST arguments, E_LIST items, E_DICT k,v,k,v */
    const char **kw;        /* keyword names per argument (NULL: positional) */
    size_t nargs;
    const char **targets;   /* N_FOR, N_SET: assigned names; N_MACRO: parameter names */
    size_t ntargets;
    struct body body, els;
};

struct lc_jinja {
    struct arena ar;
    struct body root;
};

struct parser {
    struct ectx *e;
    struct token *t;
    size_t i, n;
    int depth;
    const struct token *opened;   /* the statement whose body is being parsed */
};

static struct token *pk(struct parser *P)
{
    return &P->t[P->i];
}

static bool tok_is(const struct token *t, enum tok k, const char *s)
{
    if (t->t != k)
        return false;
    return !s || (t->n == strlen(s) && memcmp(t->p, s, t->n) == 0);
}

static bool is_op(struct parser *P, const char *s)
{
    return tok_is(pk(P), T_OP, s);
}

static bool is_name(struct parser *P, const char *s)
{
    return tok_is(pk(P), T_NAME, s);
}

static const char *tok_desc(struct parser *P, const struct token *t)
{
    switch (t->t) {
    case T_EOF: return "end of template";
    case T_TEXT: return "template text";
    case T_VAR_BEGIN: return "'{{'";
    case T_VAR_END: return "'}}'";
    case T_BLOCK_BEGIN: return "'{%'";
    case T_BLOCK_END: return "'%}'";
    case T_STRING: return "a string";
    case T_INT:
    case T_FLOAT: return "a number";
    default: {
        char *b = aalloc(P->e, t->n + 3);
        snprintf(b, t->n + 3, "'%.*s'", (int)t->n, t->p);
        return b;
    }
    }
}

__attribute__((noreturn))
static void expected(struct parser *P, const char *what)
{
    struct token *t = pk(P);
    fail(P->e, t->line, t->col, "expected %s, got %s", what, tok_desc(P, t));
}

static void expect_op(struct parser *P, const char *s)
{
    if (!is_op(P, s)) {
        char b[16];
        snprintf(b, sizeof(b), "'%s'", s);
        expected(P, b);
    }
    P->i++;
}

static const char *expect_name(struct parser *P)
{
    if (pk(P)->t != T_NAME)
        expected(P, "a name");
    struct token *t = &P->t[P->i++];
    return astrndup(P->e, t->p, t->n);
}

static struct node *nnew(struct parser *P, enum nkind k, const struct token *at)
{
    struct node *n = acalloc(P->e, 1, sizeof(*n));
    n->k = k;
    n->line = at->line;
    n->col = at->col;
    return n;
}

/* Growable array of node pointers for argument lists and bodies. */
struct nvec {
    struct node **v;
    const char **kw;
    size_t n, cap;
};

static void nv_push(struct ectx *e, struct nvec *v, struct node *n, const char *kw)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        struct node **nv = aalloc(e, mulsz(e, cap, sizeof(*nv)));
        const char **nk = aalloc(e, mulsz(e, cap, sizeof(*nk)));
        if (v->n) {
            memcpy(nv, v->v, v->n * sizeof(*nv));
            memcpy(nk, v->kw, v->n * sizeof(*nk));
        }
        v->v = nv;
        v->kw = nk;
        v->cap = cap;
    }
    v->v[v->n] = n;
    v->kw[v->n++] = kw;
}

static struct node *p_expr(struct parser *P);
static struct node *p_or(struct parser *P);
static struct node *p_unary(struct parser *P);

/* ( args ) after the '(' has been seen: positional and name=value arguments. */
static void p_args(struct parser *P, struct node *n)
{
    struct nvec v = { 0 };
    expect_op(P, "(");
    while (!is_op(P, ")")) {
        if (v.n)
            expect_op(P, ",");
        if (is_op(P, ")"))
            break;
        const char *kw = NULL;
        if (pk(P)->t == T_NAME && P->i + 1 < P->n && tok_is(&P->t[P->i + 1], T_OP, "=")) {
            kw = expect_name(P);
            P->i++;
        }
        nv_push(P->e, &v, p_expr(P), kw);
    }
    P->i++;
    n->args = v.v;
    n->kw = v.kw;
    n->nargs = v.n;
}

static struct node *p_primary(struct parser *P)
{
    struct token *t = pk(P);
    struct node *n;
    if (t->t == T_NAME) {
        P->i++;
        const char *s = astrndup(P->e, t->p, t->n);
        n = nnew(P, E_LIT, t);
        if (!strcmp(s, "true") || !strcmp(s, "True"))
            n->lit = mk_bool(true);
        else if (!strcmp(s, "false") || !strcmp(s, "False"))
            n->lit = mk_bool(false);
        else if (!strcmp(s, "none") || !strcmp(s, "None"))
            n->lit = (struct val){ .t = V_NONE };
        else {
            n->k = E_NAME;
            n->name = s;
        }
        return n;
    }
    if (t->t == T_STRING) {
        /* adjacent literals concatenate */
        struct sb b = { 0 };
        n = nnew(P, E_LIT, t);
        while (pk(P)->t == T_STRING) {
            sb_add(P->e, &b, pk(P)->p, pk(P)->n, NULL);
            P->i++;
        }
        n->lit = mk_str(sb_str(P->e, &b));
        return n;
    }
    if (t->t == T_INT || t->t == T_FLOAT) {
        P->i++;
        n = nnew(P, E_LIT, t);
        n->lit = t->t == T_INT ? mk_int(t->i) : mk_float(t->f);
        return n;
    }
    if (is_op(P, "(")) {
        P->i++;
        if (is_op(P, ")")) {          /* empty tuple */
            P->i++;
            return nnew(P, E_LIST, t);
        }
        struct node *first = p_expr(P);
        if (is_op(P, ")")) {
            P->i++;
            return first;
        }
        struct nvec v = { 0 };
        nv_push(P->e, &v, first, NULL);
        while (is_op(P, ",")) {
            P->i++;
            if (is_op(P, ")"))
                break;
            nv_push(P->e, &v, p_expr(P), NULL);
        }
        expect_op(P, ")");
        n = nnew(P, E_LIST, t);
        n->args = v.v;
        n->nargs = v.n;
        return n;
    }
    if (is_op(P, "[")) {
        P->i++;
        struct nvec v = { 0 };
        while (!is_op(P, "]")) {
            if (v.n)
                expect_op(P, ",");
            if (is_op(P, "]"))
                break;
            nv_push(P->e, &v, p_expr(P), NULL);
        }
        P->i++;
        n = nnew(P, E_LIST, t);
        n->args = v.v;
        n->nargs = v.n;
        return n;
    }
    if (is_op(P, "{")) {
        P->i++;
        struct nvec v = { 0 };
        while (!is_op(P, "}")) {
            if (v.n)
                expect_op(P, ",");
            if (is_op(P, "}"))
                break;
            nv_push(P->e, &v, p_expr(P), NULL);
            expect_op(P, ":");
            nv_push(P->e, &v, p_expr(P), NULL);
        }
        P->i++;
        n = nnew(P, E_DICT, t);
        n->args = v.v;
        n->nargs = v.n;
        return n;
    }
    expected(P, "an expression");
}

static struct node *p_postfix(struct parser *P, struct node *n)
{
    for (;;) {
        struct token *t = pk(P);
        if (is_op(P, ".")) {
            P->i++;
            struct node *a = nnew(P, E_ATTR, t);
            a->a = n;
            if (pk(P)->t == T_INT) {        /* x.0 means x[0] */
                a->k = E_ITEM;
                a->b = nnew(P, E_LIT, pk(P));
                a->b->lit = mk_int(pk(P)->i);
                P->i++;
            } else {
                a->name = expect_name(P);
            }
            n = a;
        } else if (is_op(P, "[")) {
            P->i++;
            struct node *lo = NULL, *hi = NULL, *st = NULL;
            bool slice = false;
            if (!is_op(P, ":"))
                lo = p_expr(P);
            if (is_op(P, ":")) {
                slice = true;
                P->i++;
                if (!is_op(P, "]") && !is_op(P, ":"))
                    hi = p_expr(P);
                if (is_op(P, ":")) {
                    P->i++;
                    if (!is_op(P, "]"))
                        st = p_expr(P);
                }
            }
            expect_op(P, "]");
            struct node *a = nnew(P, slice ? E_SLICE : E_ITEM, t);
            a->a = n;
            if (slice) {
                a->b = lo;
                a->c = hi;
                a->d = st;
            } else {
                a->b = lo;
            }
            n = a;
        } else if (is_op(P, "(")) {
            struct node *c = nnew(P, E_CALL, t);
            c->line = n->line;     /* errors of a call point at the callee */
            c->col = n->col;
            c->a = n;
            p_args(P, c);
            n = c;
        } else {
            return n;
        }
    }
}

/* filters (x | f | g(1)) and tests (x is [not] t, x is t(arg), x is t arg) */
static struct node *p_filters(struct parser *P, struct node *n)
{
    for (;;) {
        struct token *t = pk(P);
        if (is_op(P, "|")) {
            P->i++;
            struct node *f = nnew(P, E_FILTER, pk(P));
            f->a = n;
            f->name = expect_name(P);
            while (is_op(P, ".")) {            /* dotted filter names are not supported */
                expected(P, "a filter argument list");
            }
            if (is_op(P, "("))
                p_args(P, f);
            n = f;
        } else if (is_name(P, "is")) {
            P->i++;
            struct node *f = nnew(P, E_TEST, t);
            f->a = n;
            if (is_name(P, "not")) {
                P->i++;
                f->op = 1;
            }
            f->name = expect_name(P);
            if (is_op(P, "(")) {
                p_args(P, f);
            } else {
                struct token *a = pk(P);
                bool arg = a->t == T_STRING || a->t == T_INT || a->t == T_FLOAT ||
                           (a->t == T_NAME && !tok_is(a, T_NAME, "else") &&
                            !tok_is(a, T_NAME, "and") && !tok_is(a, T_NAME, "or") &&
                            !tok_is(a, T_NAME, "if") && !tok_is(a, T_NAME, "in") &&
                            !tok_is(a, T_NAME, "is") && !tok_is(a, T_NAME, "not"));
                if (arg) {
                    struct nvec v = { 0 };
                    nv_push(P->e, &v, p_postfix(P, p_primary(P)), NULL);
                    f->args = v.v;
                    f->kw = v.kw;
                    f->nargs = 1;
                }
            }
            n = f;
        } else {
            return n;
        }
    }
}

static struct node *p_unary(struct parser *P)
{
    struct token *t = pk(P);
    if (++P->depth > MAX_DEPTH)
        fail(P->e, t->line, t->col, "expression nested too deeply");
    struct node *n;
    if (is_op(P, "-") || is_op(P, "+")) {
        P->i++;
        n = nnew(P, t->p[0] == '-' ? E_NEG : E_POS, t);
        n->a = p_unary(P);
    } else {
        n = p_filters(P, p_postfix(P, p_primary(P)));
    }
    P->depth--;
    return n;
}

static struct node *mk_bin(struct parser *P, const struct token *t, int op, struct node *a,
                           struct node *b)
{
    struct node *n = nnew(P, E_BIN, t);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static struct node *p_pow(struct parser *P)
{
    struct node *n = p_unary(P);
    while (is_op(P, "**")) {
        struct token *t = pk(P);
        P->i++;
        n = mk_bin(P, t, B_POW, n, p_unary(P));
    }
    return n;
}

static struct node *p_math2(struct parser *P)
{
    struct node *n = p_pow(P);
    for (;;) {
        struct token *t = pk(P);
        int op = is_op(P, "*") ? B_MUL : is_op(P, "/") ? B_DIV : is_op(P, "//") ? B_FDIV
               : is_op(P, "%") ? B_MOD : -1;
        if (op < 0)
            return n;
        P->i++;
        n = mk_bin(P, t, op, n, p_pow(P));
    }
}

static struct node *p_concat(struct parser *P)
{
    struct node *n = p_math2(P);
    while (is_op(P, "~")) {
        struct token *t = pk(P);
        P->i++;
        n = mk_bin(P, t, B_CAT, n, p_math2(P));
    }
    return n;
}

static struct node *p_math1(struct parser *P)
{
    struct node *n = p_concat(P);
    for (;;) {
        struct token *t = pk(P);
        int op = is_op(P, "+") ? B_ADD : is_op(P, "-") ? B_SUB : -1;
        if (op < 0)
            return n;
        P->i++;
        n = mk_bin(P, t, op, n, p_concat(P));
    }
}

static struct node *p_compare(struct parser *P)
{
    struct node *n = p_math1(P);
    for (;;) {
        struct token *t = pk(P);
        int op = is_op(P, "==") ? B_EQ : is_op(P, "!=") ? B_NE : is_op(P, "<") ? B_LT
               : is_op(P, "<=") ? B_LE : is_op(P, ">") ? B_GT : is_op(P, ">=") ? B_GE
               : is_name(P, "in") ? B_IN : -1;
        if (op < 0 && is_name(P, "not") && P->i + 1 < P->n &&
            tok_is(&P->t[P->i + 1], T_NAME, "in")) {
            P->i++;
            op = B_NOTIN;
        }
        if (op < 0)
            return n;
        P->i++;
        n = mk_bin(P, t, op, n, p_math1(P));
    }
}

static struct node *p_not(struct parser *P)
{
    if (is_name(P, "not")) {
        struct token *t = pk(P);
        P->i++;
        struct node *n = nnew(P, E_NOT, t);
        n->a = p_not(P);
        return n;
    }
    return p_compare(P);
}

static struct node *p_and(struct parser *P)
{
    struct node *n = p_not(P);
    while (is_name(P, "and")) {
        struct token *t = pk(P);
        P->i++;
        struct node *a = nnew(P, E_AND, t);
        a->a = n;
        a->b = p_not(P);
        n = a;
    }
    return n;
}

static struct node *p_or(struct parser *P)
{
    struct node *n = p_and(P);
    while (is_name(P, "or")) {
        struct token *t = pk(P);
        P->i++;
        struct node *a = nnew(P, E_OR, t);
        a->a = n;
        a->b = p_and(P);
        n = a;
    }
    return n;
}

/* x if cond [else y] */
static struct node *p_expr(struct parser *P)
{
    struct node *n = p_or(P);
    while (is_name(P, "if")) {
        struct token *t = pk(P);
        P->i++;
        struct node *c = nnew(P, E_COND, t);
        c->a = n;
        c->b = p_or(P);
        if (is_name(P, "else")) {
            P->i++;
            c->c = p_expr(P);
        }
        n = c;
    }
    return n;
}

/* An expression or an unparenthesized tuple (a, b) as in `set a, b = ...` / for targets. */
static struct node *p_tuple(struct parser *P)
{
    struct token *t = pk(P);
    struct node *first = p_expr(P);
    if (!is_op(P, ","))
        return first;
    struct nvec v = { 0 };
    nv_push(P->e, &v, first, NULL);
    while (is_op(P, ",")) {
        P->i++;
        if (pk(P)->t == T_BLOCK_END || pk(P)->t == T_VAR_END)
            break;
        nv_push(P->e, &v, p_expr(P), NULL);
    }
    struct node *n = nnew(P, E_LIST, t);
    n->args = v.v;
    n->nargs = v.n;
    return n;
}

static void expect_block_end(struct parser *P)
{
    if (pk(P)->t != T_BLOCK_END)
        expected(P, "'%}'");
    P->i++;
}

/* Names separated by commas (for/set targets). */
static void p_targets(struct parser *P, struct node *n)
{
    struct nvec v = { 0 };
    bool paren = is_op(P, "(");
    if (paren)
        P->i++;
    do {
        if (v.n)
            P->i++;
        struct node *x = nnew(P, E_NAME, pk(P));
        x->name = expect_name(P);
        nv_push(P->e, &v, x, NULL);
    } while (is_op(P, ","));
    if (paren)
        expect_op(P, ")");
    n->targets = aalloc(P->e, v.n * sizeof(*n->targets));
    for (size_t i = 0; i < v.n; i++)
        n->targets[i] = v.v[i]->name;
    n->ntargets = v.n;
}

static struct body p_body(struct parser *P, const char *const *ends, const char **got);

static struct node *p_stmt(struct parser *P, const struct token *open)
{
    struct token *t = pk(P);
    if (t->t != T_NAME)
        expected(P, "a statement name");
    const char *kw = astrndup(P->e, t->p, t->n);
    P->i++;
    if (P->depth > MAX_DEPTH)
        fail(P->e, t->line, t->col, "blocks nested too deeply");
    if (!strcmp(kw, "if")) {
        struct node *n = nnew(P, N_IF, open);
        n->a = p_expr(P);
        expect_block_end(P);
        static const char *const ends[] = { "elif", "else", "endif", NULL };
        const char *got;
        n->body = p_body(P, ends, &got);
        struct node *cur = n;
        while (!strcmp(got, "elif")) {
            struct node *e = nnew(P, N_IF, pk(P));
            e->a = p_expr(P);
            expect_block_end(P);
            e->body = p_body(P, ends, &got);
            cur->els.v = aalloc(P->e, sizeof(struct node *));
            cur->els.v[0] = e;
            cur->els.n = 1;
            cur = e;
        }
        if (!strcmp(got, "else")) {
            expect_block_end(P);
            static const char *const ends2[] = { "endif", NULL };
            cur->els = p_body(P, ends2, &got);
        }
        expect_block_end(P);
        return n;
    }
    if (!strcmp(kw, "for")) {
        struct node *n = nnew(P, N_FOR, open);
        p_targets(P, n);
        if (!is_name(P, "in"))
            expected(P, "'in'");
        P->i++;
        n->a = p_or(P);     /* the iterable; `if` that follows is the loop filter */
        if (is_name(P, "if")) {
            P->i++;
            n->b = p_expr(P);
        }
        if (is_name(P, "recursive"))
            fail(P->e, pk(P)->line, pk(P)->col, "recursive loops are not supported");
        expect_block_end(P);
        static const char *const ends[] = { "else", "endfor", NULL };
        const char *got;
        n->body = p_body(P, ends, &got);
        if (!strcmp(got, "else")) {
            expect_block_end(P);
            static const char *const ends2[] = { "endfor", NULL };
            n->els = p_body(P, ends2, &got);
        }
        expect_block_end(P);
        return n;
    }
    if (!strcmp(kw, "set")) {
        struct node *n = nnew(P, N_SET, open);
        if (pk(P)->t == T_NAME && P->i + 1 < P->n && tok_is(&P->t[P->i + 1], T_OP, ".")) {
            /* ns.attr = value */
            const char *ns = expect_name(P);
            P->i++;
            n->name = expect_name(P);
            n->targets = aalloc(P->e, sizeof(*n->targets));
            n->targets[0] = ns;
            n->ntargets = 1;
            n->op = 1;
        } else {
            p_targets(P, n);
        }
        if (pk(P)->t == T_BLOCK_END && !n->op && n->ntargets == 1) {
            /* {% set x %}...{% endset %} */
            P->i++;
            n->k = N_SETBLOCK;
            static const char *const ends[] = { "endset", NULL };
            const char *got;
            n->body = p_body(P, ends, &got);
            expect_block_end(P);
            return n;
        }
        expect_op(P, "=");
        n->a = p_tuple(P);
        expect_block_end(P);
        return n;
    }
    if (!strcmp(kw, "macro")) {
        struct node *n = nnew(P, N_MACRO, open);
        n->name = expect_name(P);
        struct nvec v = { 0 };
        expect_op(P, "(");
        while (!is_op(P, ")")) {
            if (v.n)
                expect_op(P, ",");
            struct node *prm = nnew(P, E_NAME, pk(P));
            prm->name = expect_name(P);
            if (is_op(P, "=")) {
                P->i++;
                prm->a = p_expr(P);
            }
            nv_push(P->e, &v, prm, NULL);
        }
        P->i++;
        n->args = v.v;
        n->nargs = v.n;
        expect_block_end(P);
        static const char *const ends[] = { "endmacro", NULL };
        const char *got;
        n->body = p_body(P, ends, &got);
        if (pk(P)->t == T_NAME)     /* {% endmacro name %} */
            P->i++;
        expect_block_end(P);
        return n;
    }
    if (!strcmp(kw, "filter")) {
        /* {% filter name(args) %}...{% endfilter %}: the body's output through the filter */
        struct node *n = nnew(P, N_FILTERBLOCK, open);
        n->name = expect_name(P);
        if (is_op(P, "("))
            p_args(P, n);
        expect_block_end(P);
        static const char *const ends[] = { "endfilter", NULL };
        const char *got;
        n->body = p_body(P, ends, &got);
        expect_block_end(P);
        return n;
    }
    if (!strcmp(kw, "generation")) {
        /* transformers' extension marking the assistant's text: renders its body */
        struct node *n = nnew(P, N_GENERATION, open);
        expect_block_end(P);
        static const char *const ends[] = { "endgeneration", NULL };
        const char *got;
        n->body = p_body(P, ends, &got);
        expect_block_end(P);
        return n;
    }
    if (!strcmp(kw, "break") || !strcmp(kw, "continue")) {
        struct node *n = nnew(P, kw[0] == 'b' ? N_BREAK : N_CONTINUE, open);
        expect_block_end(P);
        return n;
    }
    fail(P->e, t->line, t->col, "unknown statement '%s'", kw);
}

/* Statements until one of ends (NULL: until the end of the template); *got = which. */
static struct body p_body(struct parser *P, const char *const *ends, const char **got)
{
    struct nvec v = { 0 };
    const struct token *start = P->opened;
    for (;;) {
        struct token *t = pk(P);
        if (t->t == T_EOF) {
            if (ends) {
                int k = 0;
                while (ends[k + 1])
                    k++;
                fail(P->e, t->line, t->col, "unexpected end of template: expected '%s' to close "
                     "the block at line %d, column %d", ends[k], start ? start->line : 0,
                     start ? start->col : 0);
            }
            break;
        }
        if (t->t == T_TEXT) {
            struct node *n = nnew(P, N_TEXT, t);
            n->lit = mk_str((struct str){ t->p, t->n, NULL });
            nv_push(P->e, &v, n, NULL);
            P->i++;
        } else if (t->t == T_VAR_BEGIN) {
            P->i++;
            struct node *n = nnew(P, N_OUT, t);
            n->a = p_tuple(P);
            if (pk(P)->t != T_VAR_END)
                expected(P, "'}}'");
            P->i++;
            nv_push(P->e, &v, n, NULL);
        } else if (t->t == T_BLOCK_BEGIN) {
            struct token *kw = &P->t[P->i + 1];
            if (kw->t == T_NAME && ends) {
                bool hit = false;
                for (int k = 0; ends[k]; k++)
                    if (tok_is(kw, T_NAME, ends[k])) {
                        *got = ends[k];
                        hit = true;
                    }
                if (hit) {
                    P->i += 2;
                    break;
                }
            }
            if (kw->t == T_NAME && (tok_is(kw, T_NAME, "endif") || tok_is(kw, T_NAME, "endfor") ||
                                    tok_is(kw, T_NAME, "else") || tok_is(kw, T_NAME, "elif") ||
                                    tok_is(kw, T_NAME, "endmacro") ||
                                    tok_is(kw, T_NAME, "endset") ||
                                    tok_is(kw, T_NAME, "endfilter") ||
                                    tok_is(kw, T_NAME, "endgeneration"))) {
                fail(P->e, kw->line, kw->col, "unexpected '%.*s'%s%s%s", (int)kw->n, kw->p,
                     ends ? " (expected '" : "", ends ? ends[0] : "", ends ? "')" : "");
            }
            P->i++;
            const struct token *saved = P->opened;
            P->opened = t;
            P->depth++;
            nv_push(P->e, &v, p_stmt(P, t), NULL);
            P->depth--;
            P->opened = saved;
        } else {
            expected(P, "template text or a tag");
        }
    }
    return (struct body){ v.v, v.n };
}

struct lc_jinja *lc_jinja_parse(const char *src, char **err)
{
    if (err)
        *err = NULL;
    struct lc_jinja *volatile t = calloc(1, sizeof(*t));
    struct ectx *volatile e = calloc(1, sizeof(*e));
    if (!t || !e || !src) {
        free(t);
        free(e);
        if (err)
            *err = strdup(src ? "out of memory" : "no template");
        return NULL;
    }
    e->ar = &t->ar;
    if (setjmp(e->jb)) {
        if (err)
            *err = e->err;
        else
            free(e->err);
        arena_free(&t->ar);
        free(t);
        free(e);
        return NULL;
    }
    /* newlines normalized to \n; one trailing newline dropped (keep_trailing_newline=False) */
    size_t n = strlen(src);
    char *s = aalloc(e, n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') {
            s[k++] = '\n';
            if (i + 1 < n && src[i + 1] == '\n')
                i++;
        } else {
            s[k++] = src[i];
        }
    }
    if (k > 0 && s[k - 1] == '\n')
        k--;
    s[k] = 0;
    struct lexer L = { .e = e, .src = s, .len = k };
    lx_run(&L);
    struct parser P = { .e = e, .t = L.v, .n = L.n };
    const char *got = NULL;
    t->root = p_body(&P, NULL, &got);
    free(e);
    return t;
}

void lc_jinja_free(struct lc_jinja *t)
{
    if (!t)
        return;
    arena_free(&t->ar);
    free(t);
}

/* ---------------------------------------------------------------- evaluation */

struct frame {
    struct frame *parent;
    struct dict *vars;
};

struct rctx {
    struct ectx *e;
    struct frame *root;    /* the template's frame (a macro call's frame hangs from it) */
    struct frame *cur;     /* the frame of the statement being executed */
    struct sb *out;        /* where output goes (a macro call or block set captures it) */
    int depth;
};

enum flow { FL_NORMAL, FL_BREAK, FL_CONTINUE };

static struct val eval(struct rctx *r, const struct node *n);
static enum flow exec_body(struct rctx *r, struct frame *f, const struct body *b);
static struct str to_str(struct rctx *r, struct val v);

__attribute__((format(printf, 3, 4), noreturn))
static void rfail(struct rctx *r, const struct node *n, const char *fmt, ...)
{
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    fail(r->e, n ? n->line : 0, n ? n->col : 0, "%s", buf);
}

static const char *type_name(struct val v)
{
    static const char *const names[] = { "undefined", "none", "bool", "int", "float", "string",
                                         "list", "dict", "namespace", "function", "macro" };
    return names[v.t];
}

__attribute__((noreturn))
static void undefined_error(struct rctx *r, const struct node *n, struct val v)
{
    if (v.u.uname)
        rfail(r, n, "'%s' is undefined", v.u.uname);
    rfail(r, n, "an undefined value was used");
}

static struct val lookup(struct frame *f, struct str name)
{
    for (; f; f = f->parent) {
        struct val *v = dict_find(f->vars, name);
        if (v)
            return *v;
    }
    struct val u = UNDEF;
    u.u.uname = name.p;
    return u;
}

static bool truthy(struct val v)
{
    switch (v.t) {
    case V_UNDEF:
    case V_NONE: return false;
    case V_BOOL: return v.u.b;
    case V_INT: return v.u.i != 0;
    case V_FLOAT: return v.u.f != 0.0;
    case V_STR: return v.u.s.n > 0;
    case V_LIST: return v.u.l->n > 0;
    case V_DICT: return v.u.d->n > 0;
    default: return true;
    }
}

static bool is_num(struct val v)
{
    return v.t == V_INT || v.t == V_FLOAT || v.t == V_BOOL;
}

static double num(struct val v)
{
    return v.t == V_FLOAT ? v.u.f : v.t == V_INT ? (double)v.u.i : v.u.b ? 1.0 : 0.0;
}

static long long inum(struct val v)
{
    return v.t == V_INT ? v.u.i : v.u.b;
}

static bool vequal(struct val a, struct val b)
{
    if (is_num(a) && is_num(b)) {
        if (a.t != V_FLOAT && b.t != V_FLOAT)
            return inum(a) == inum(b);
        return num(a) == num(b);
    }
    if (a.t != b.t)
        return false;
    switch (a.t) {
    case V_UNDEF:
    case V_NONE: return true;
    case V_STR: return str_eq(a.u.s, b.u.s);
    case V_LIST:
        if (a.u.l->n != b.u.l->n)
            return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!vequal(a.u.l->v[i], b.u.l->v[i]))
                return false;
        return true;
    case V_DICT:
        if (a.u.d->n != b.u.d->n)
            return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            struct val *o = dict_find(b.u.d, a.u.d->k[i]);
            if (!o || !vequal(a.u.d->v[i], *o))
                return false;
        }
        return true;
    case V_NS: return a.u.d == b.u.d;
    case V_FUNC: return a.u.fn == b.u.fn;
    case V_MACRO: return a.u.mac == b.u.mac;
    default: return false;
    }
}

/* Python's repr() of a float: the shortest text that reads back the same. */
static void fmt_float(char *buf, size_t cap, double f)
{
    if (isnan(f)) {
        snprintf(buf, cap, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(buf, cap, f < 0 ? "-inf" : "inf");
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, cap, "%.*g", p, f);
        if (strtod(buf, NULL) == f)
            break;
    }
    char *ex = strchr(buf, 'e');
    if (ex) {
        /* Python writes 1e+16 as 1e+16 and 1e-05 as 1e-05: same as C; keep */
        return;
    }
    if (!strchr(buf, '.') && strlen(buf) + 3 < cap)
        strcat(buf, ".0");
}

static void repr_into(struct rctx *r, struct sb *b, struct val v);

/* Python's repr of a string, into b; escaped bytes from a message stay marked as derived. */
static void repr_str(struct rctx *r, struct sb *b, struct str s)
{
    bool sq = memchr(s.p, '\'', s.n) != NULL, dq = memchr(s.p, '"', s.n) != NULL;
    char q = sq && !dq ? '"' : '\'';
    sb_add(r->e, b, &q, 1, NULL);
    for (size_t i = 0; i < s.n; i++) {
        unsigned char c = (unsigned char)s.p[i];
        orig_t o = s.o ? s.o[i] : (orig_t){ 0, 0 };
        char esc[8] = { 0 };
        if (c == '\\')
            strcpy(esc, "\\\\");
        else if (c == (unsigned char)q)
            snprintf(esc, sizeof(esc), "\\%c", q);
        else if (c == '\n')
            strcpy(esc, "\\n");
        else if (c == '\r')
            strcpy(esc, "\\r");
        else if (c == '\t')
            strcpy(esc, "\\t");
        else if (c < 0x20 || c == 0x7f)
            snprintf(esc, sizeof(esc), "\\x%02x", c);
        if (esc[0])
            sb_add_derived(r->e, b, esc, strlen(esc), o);
        else
            sb_add(r->e, b, s.p + i, 1, s.o ? s.o + i : NULL);
    }
    sb_add(r->e, b, &q, 1, NULL);
}

static void repr_into(struct rctx *r, struct sb *b, struct val v)
{
    struct ectx *e = r->e;
    switch (v.t) {
    case V_STR:
        repr_str(r, b, v.u.s);
        break;
    case V_LIST:
        sb_addc(e, b, "[");
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i)
                sb_addc(e, b, ", ");
            repr_into(r, b, v.u.l->v[i]);
        }
        sb_addc(e, b, "]");
        break;
    case V_DICT:
        sb_addc(e, b, "{");
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i)
                sb_addc(e, b, ", ");
            repr_str(r, b, v.u.d->k[i]);
            sb_addc(e, b, ": ");
            repr_into(r, b, v.u.d->v[i]);
        }
        sb_addc(e, b, "}");
        break;
    default:
        sb_adds(e, b, to_str(r, v));
    }
}

/* str(v) as jinja2 prints it. */
static struct str to_str(struct rctx *r, struct val v)
{
    char buf[64];
    switch (v.t) {
    case V_UNDEF: return cstr("");
    case V_NONE: return cstr("None");
    case V_BOOL: return cstr(v.u.b ? "True" : "False");
    case V_INT:
        snprintf(buf, sizeof(buf), "%lld", v.u.i);
        return (struct str){ astrndup(r->e, buf, strlen(buf)), strlen(buf), NULL };
    case V_FLOAT:
        fmt_float(buf, sizeof(buf), v.u.f);
        return (struct str){ astrndup(r->e, buf, strlen(buf)), strlen(buf), NULL };
    case V_STR: return v.u.s;
    case V_LIST:
    case V_DICT: {
        struct sb b = { 0 };
        repr_into(r, &b, v);
        return sb_str(r->e, &b);
    }
    case V_NS: return cstr("<Namespace>");
    default: return cstr("<function>");
    }
}

/* ---- JSON (transformers' tojson: json.dumps(x, ensure_ascii=False, indent=...)) */

static void json_into(struct rctx *r, const struct node *at, struct sb *b, struct val v,
                      int indent, int level, bool sort_keys);

static void json_nl(struct rctx *r, struct sb *b, int indent, int level)
{
    sb_addc(r->e, b, "\n");
    for (int i = 0; i < indent * level; i++)
        sb_addc(r->e, b, " ");
}

static void json_str(struct rctx *r, struct sb *b, struct str s)
{
    sb_addc(r->e, b, "\"");
    for (size_t i = 0; i < s.n; i++) {
        unsigned char c = (unsigned char)s.p[i];
        orig_t o = s.o ? s.o[i] : (orig_t){ 0, 0 };
        char esc[8] = { 0 };
        switch (c) {
        case '"': strcpy(esc, "\\\""); break;
        case '\\': strcpy(esc, "\\\\"); break;
        case '\n': strcpy(esc, "\\n"); break;
        case '\r': strcpy(esc, "\\r"); break;
        case '\t': strcpy(esc, "\\t"); break;
        case '\b': strcpy(esc, "\\b"); break;
        case '\f': strcpy(esc, "\\f"); break;
        default:
            if (c < 0x20)
                snprintf(esc, sizeof(esc), "\\u%04x", c);
        }
        if (esc[0])
            sb_add_derived(r->e, b, esc, strlen(esc), o);
        else
            sb_add(r->e, b, s.p + i, 1, s.o ? s.o + i : NULL);
    }
    sb_addc(r->e, b, "\"");
}

static int cmp_keys(const void *a, const void *b)
{
    const struct str *x = *(const struct str *const *)a, *y = *(const struct str *const *)b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->p, y->p, n);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

static void json_into(struct rctx *r, const struct node *at, struct sb *b, struct val v,
                      int indent, int level, bool sort_keys)
{
    struct ectx *e = r->e;
    if (level > MAX_DEPTH)
        rfail(r, at, "tojson: value nested too deeply");
    switch (v.t) {
    case V_NONE: sb_addc(e, b, "null"); break;
    case V_BOOL: sb_addc(e, b, v.u.b ? "true" : "false"); break;
    case V_INT:
    case V_FLOAT: {
        if (v.t == V_FLOAT && isnan(v.u.f))
            sb_addc(e, b, "NaN");
        else if (v.t == V_FLOAT && isinf(v.u.f))
            sb_addc(e, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else
            sb_adds(e, b, to_str(r, v));
        break;
    }
    case V_STR: json_str(r, b, v.u.s); break;
    case V_LIST:
        if (v.u.l->n == 0) {
            sb_addc(e, b, "[]");
            break;
        }
        sb_addc(e, b, "[");
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i)
                sb_addc(e, b, indent >= 0 ? "," : ", ");
            if (indent >= 0)
                json_nl(r, b, indent, level + 1);
            json_into(r, at, b, v.u.l->v[i], indent, level + 1, sort_keys);
        }
        if (indent >= 0)
            json_nl(r, b, indent, level);
        sb_addc(e, b, "]");
        break;
    case V_DICT:
    case V_NS: {
        const struct dict *d = v.u.d;
        if (d->n == 0) {
            sb_addc(e, b, "{}");
            break;
        }
        const struct str **keys = aalloc(e, mulsz(e, d->n, sizeof(*keys)));
        for (size_t i = 0; i < d->n; i++)
            keys[i] = &d->k[i];
        if (sort_keys)
            qsort(keys, d->n, sizeof(*keys), cmp_keys);
        sb_addc(e, b, "{");
        for (size_t i = 0; i < d->n; i++) {
            if (i)
                sb_addc(e, b, indent >= 0 ? "," : ", ");
            if (indent >= 0)
                json_nl(r, b, indent, level + 1);
            json_str(r, b, *keys[i]);
            sb_addc(e, b, ": ");
            json_into(r, at, b, *dict_find(d, *keys[i]), indent, level + 1, sort_keys);
        }
        if (indent >= 0)
            json_nl(r, b, indent, level);
        sb_addc(e, b, "}");
        break;
    }
    default:
        rfail(r, at, "tojson: a %s is not JSON serializable", type_name(v));
    }
}

/* ---- strings */

static bool in_set(char c, struct str chars, bool ws)
{
    return ws ? is_ws(c) : memchr(chars.p, c, chars.n) != NULL;
}

/* Python str.strip/lstrip/rstrip (chars: NULL = whitespace). */
static struct str str_strip(struct rctx *r, struct str s, const struct str *chars, bool l,
                            bool rt)
{
    struct str none = { "", 0, NULL };
    const struct str cs = chars ? *chars : none;
    size_t a = 0, z = s.n;
    if (l)
        while (a < z && in_set(s.p[a], cs, !chars))
            a++;
    if (rt)
        while (z > a && in_set(s.p[z - 1], cs, !chars))
            z--;
    return str_sub(r->e, s, a, z - a);
}

static const char *memfind(const char *h, size_t hn, const char *n, size_t nn)
{
    if (nn == 0)
        return h;
    if (nn > hn)
        return NULL;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == n[0] && memcmp(h + i, n, nn) == 0)
            return h + i;
    return NULL;
}

static struct val str_split(struct rctx *r, const struct node *at, struct str s,
                            const struct str *sep, long long maxsplit)
{
    struct list *l = list_new(r->e, 4);
    if (!sep) {
        size_t i = 0;
        long long done = 0;
        for (;;) {
            while (i < s.n && is_ws(s.p[i]))
                i++;
            if (i >= s.n)
                break;
            size_t j = i;
            if (maxsplit >= 0 && done >= maxsplit) {
                size_t z = s.n;
                while (z > i && is_ws(s.p[z - 1]))
                    z--;
                list_push(r->e, l, mk_str(str_sub(r->e, s, i, z - i)));
                break;
            }
            while (j < s.n && !is_ws(s.p[j]))
                j++;
            list_push(r->e, l, mk_str(str_sub(r->e, s, i, j - i)));
            done++;
            i = j;
        }
        return mk_list(l);
    }
    if (sep->n == 0)
        rfail(r, at, "split: empty separator");
    size_t i = 0;
    long long done = 0;
    for (;;) {
        const char *f = maxsplit >= 0 && done >= maxsplit ? NULL
                      : memfind(s.p + i, s.n - i, sep->p, sep->n);
        if (!f) {
            list_push(r->e, l, mk_str(str_sub(r->e, s, i, s.n - i)));
            break;
        }
        size_t j = (size_t)(f - s.p);
        list_push(r->e, l, mk_str(str_sub(r->e, s, i, j - i)));
        i = j + sep->n;
        done++;
    }
    return mk_list(l);
}

static struct str str_replace(struct rctx *r, struct str s, struct str from, struct str to,
                              long long count)
{
    struct sb b = { 0 };
    size_t i = 0;
    long long done = 0;
    if (from.n == 0) {
        /* Python inserts `to` between every character (and at both ends) */
        for (; i <= s.n; i++) {
            if (count < 0 || done < count) {
                sb_adds(r->e, &b, to);
                done++;
            }
            if (i < s.n)
                sb_add(r->e, &b, s.p + i, 1, s.o ? s.o + i : NULL);
        }
        return sb_str(r->e, &b);
    }
    while (i < s.n) {
        const char *f = count >= 0 && done >= count ? NULL
                      : memfind(s.p + i, s.n - i, from.p, from.n);
        if (!f)
            break;
        size_t j = (size_t)(f - s.p);
        sb_add(r->e, &b, s.p + i, j - i, s.o ? s.o + i : NULL);
        sb_adds(r->e, &b, to);
        i = j + from.n;
        done++;
    }
    sb_add(r->e, &b, s.p + i, s.n - i, s.o ? s.o + i : NULL);
    return sb_str(r->e, &b);
}

/* ASCII case mapping (upper, lower, title, capitalize); changed bytes become derived. */
static struct str str_case(struct rctx *r, struct str s, int mode)
{
    struct sb b = { 0 };
    bool prev_alpha = false;
    for (size_t i = 0; i < s.n; i++) {
        char c = s.p[i], d = c;
        bool alpha = isalpha((unsigned char)c);
        switch (mode) {
        case 0: d = (char)toupper((unsigned char)c); break;
        case 1: d = (char)tolower((unsigned char)c); break;
        case 2: d = (char)(prev_alpha ? tolower((unsigned char)c) : toupper((unsigned char)c)); break;
        case 3: d = (char)(i == 0 ? toupper((unsigned char)c) : tolower((unsigned char)c)); break;
        }
        if ((unsigned char)c >= 0x80)
            d = c;
        prev_alpha = alpha || ((unsigned char)c >= 0x80 && prev_alpha);
        if (d == c)
            sb_add(r->e, &b, s.p + i, 1, s.o ? s.o + i : NULL);
        else
            sb_add_derived(r->e, &b, &d, 1, s.o ? s.o[i] : (orig_t){ 0, 0 });
    }
    return sb_str(r->e, &b);
}

/* ---- arguments */

struct args {
    struct val *v;
    const char **kw;
    size_t n;
};

static struct args eval_args(struct rctx *r, const struct node *n)
{
    struct args a = { NULL, n->kw, n->nargs };
    a.v = aalloc(r->e, (n->nargs ? n->nargs : 1) * sizeof(*a.v));
    for (size_t i = 0; i < n->nargs; i++)
        a.v[i] = eval(r, n->args[i]);
    return a;
}

/* Argument pos (positional) or named name, or UNDEF when absent. */
static struct val arg(const struct args *a, size_t pos, const char *name)
{
    size_t k = 0;
    for (size_t i = 0; i < a->n; i++) {
        if (a->kw && a->kw[i]) {
            if (name && !strcmp(a->kw[i], name))
                return a->v[i];
        } else if (k++ == pos) {
            return a->v[i];
        }
    }
    return UNDEF;
}

static struct str want_str(struct rctx *r, const struct node *at, struct val v, const char *what)
{
    if (v.t != V_STR)
        rfail(r, at, "%s: expected a string, got %s", what, type_name(v));
    return v.u.s;
}

/* ---- item access, slices */

static struct val get_item(struct rctx *r, const struct node *at, struct val o, struct val k)
{
    if (o.t == V_UNDEF)
        undefined_error(r, at, o);
    if (o.t == V_LIST || o.t == V_STR) {
        if (k.t != V_INT && k.t != V_BOOL)
            return UNDEF;
        long long n = o.t == V_LIST ? (long long)o.u.l->n : (long long)o.u.s.n;
        long long i = inum(k);
        if (i < 0)
            i += n;
        if (i < 0 || i >= n)
            return UNDEF;
        if (o.t == V_LIST)
            return o.u.l->v[i];
        /* one UTF-8 character: whole sequence, so that "é"[0] is "é" as in Python */
        const unsigned char *p = (const unsigned char *)o.u.s.p;
        size_t cnt = 0, b = 0;
        for (; b < o.u.s.n; b++) {
            if ((p[b] & 0xC0) != 0x80) {
                if ((long long)cnt == i)
                    break;
                cnt++;
            }
        }
        size_t z = b + 1;
        while (z < o.u.s.n && (p[z] & 0xC0) == 0x80)
            z++;
        if (b >= o.u.s.n)
            return UNDEF;
        return mk_str(str_sub(r->e, o.u.s, b, z - b));
    }
    if ((o.t == V_DICT || o.t == V_NS) && k.t == V_STR) {
        struct val *v = dict_find(o.u.d, k.u.s);
        if (v)
            return *v;
    }
    struct val u = UNDEF;
    u.u.uname = k.t == V_STR ? k.u.s.p : NULL;
    return u;
}

/* Number of characters (code points) of a UTF-8 string: Python's len(). */
static long long utf8_len(struct str s)
{
    long long n = 0;
    for (size_t i = 0; i < s.n; i++)
        if (((unsigned char)s.p[i] & 0xC0) != 0x80)
            n++;
    return n;
}

static long long slice_idx(struct rctx *r, const struct node *at, const struct node *x)
{
    struct val v = eval(r, x);
    if (v.t != V_INT && v.t != V_BOOL)
        rfail(r, at, "slice indices must be integers or none");
    return inum(v);
}

static struct val do_slice(struct rctx *r, const struct node *n)
{
    struct val o = eval(r, n->a);
    if (o.t == V_UNDEF)
        undefined_error(r, n, o);
    long long step = 1;
    if (n->d) {
        struct val s = eval(r, n->d);
        if (s.t != V_NONE) {
            if (s.t != V_INT)
                rfail(r, n, "slice step must be an integer");
            step = s.u.i;
        }
    }
    if (step == 0)
        rfail(r, n, "slice step cannot be zero");
    bool is_s = o.t == V_STR;
    if (o.t != V_LIST && !is_s)
        rfail(r, n, "cannot slice a %s", type_name(o));
    /* strings are sliced by character: map to byte offsets of each character */
    long long len = is_s ? utf8_len(o.u.s) : (long long)o.u.l->n;
    long long lo, hi;
    bool has_lo = n->b && eval(r, n->b).t != V_NONE, has_hi = n->c && eval(r, n->c).t != V_NONE;
    lo = has_lo ? slice_idx(r, n, n->b) : (step > 0 ? 0 : len - 1);
    hi = has_hi ? slice_idx(r, n, n->c) : (step > 0 ? len : -len - 1);
    if (has_lo && lo < 0)
        lo += len;
    if (has_hi && hi < 0)
        hi += len;
    if (step > 0) {
        if (lo < 0) lo = 0;
        if (hi > len) hi = len;
    } else {
        if (lo >= len) lo = len - 1;
        if (hi < -1) hi = -1;
    }
    size_t *cs = NULL;
    if (is_s) {
        cs = aalloc(r->e, (size_t)(len + 1) * sizeof(*cs));
        long long c = 0;
        for (size_t i = 0; i < o.u.s.n; i++)
            if (((unsigned char)o.u.s.p[i] & 0xC0) != 0x80)
                cs[c++] = i;
        cs[len] = o.u.s.n;
    }
    struct list *l = is_s ? NULL : list_new(r->e, 4);
    struct sb b = { 0 };
    for (long long i = lo; step > 0 ? i < hi : i > hi; i += step) {
        if (is_s)
            sb_add(r->e, &b, o.u.s.p + cs[i], cs[i + 1] - cs[i], o.u.s.o ? o.u.s.o + cs[i] : NULL);
        else
            list_push(r->e, l, o.u.l->v[i]);
    }
    if (is_s)
        return mk_str(sb_str(r->e, &b));
    return mk_list(l);
}

/* ---- tests (x is name) */

static bool apply_test(struct rctx *r, const struct node *at, const char *name, struct val v,
                       const struct args *a)
{
    if (!strcmp(name, "defined"))
        return v.t != V_UNDEF;
    if (!strcmp(name, "undefined"))
        return v.t == V_UNDEF;
    if (!strcmp(name, "none"))
        return v.t == V_NONE;
    if (!strcmp(name, "string"))
        return v.t == V_STR;
    if (!strcmp(name, "mapping"))
        return v.t == V_DICT;
    if (!strcmp(name, "iterable"))
        return v.t == V_STR || v.t == V_LIST || v.t == V_DICT || v.t == V_UNDEF;
    if (!strcmp(name, "sequence"))
        return v.t == V_STR || v.t == V_LIST || v.t == V_DICT || v.t == V_UNDEF;
    if (!strcmp(name, "number"))
        return is_num(v);
    if (!strcmp(name, "integer"))
        return v.t == V_INT;
    if (!strcmp(name, "float"))
        return v.t == V_FLOAT;
    if (!strcmp(name, "boolean"))
        return v.t == V_BOOL;
    if (!strcmp(name, "true"))
        return v.t == V_BOOL && v.u.b;
    if (!strcmp(name, "false"))
        return v.t == V_BOOL && !v.u.b;
    if (!strcmp(name, "callable"))
        return v.t == V_FUNC || v.t == V_MACRO;
    if (!strcmp(name, "even") || !strcmp(name, "odd")) {
        if (v.t != V_INT)
            rfail(r, at, "test '%s' needs an integer", name);
        return (v.u.i % 2 == 0) == (name[0] == 'e');
    }
    if (!strcmp(name, "divisibleby")) {
        struct val d = arg(a, 0, "num");
        if (v.t != V_INT || d.t != V_INT || d.u.i == 0)
            rfail(r, at, "test 'divisibleby' needs non-zero integers");
        return v.u.i % d.u.i == 0;
    }
    if (!strcmp(name, "equalto") || !strcmp(name, "eq") || !strcmp(name, "=="))
        return vequal(v, arg(a, 0, "other"));
    if (!strcmp(name, "ne") || !strcmp(name, "!="))
        return !vequal(v, arg(a, 0, "other"));
    if (!strcmp(name, "sameas")) {
        struct val o = arg(a, 0, "other");
        if (v.t != o.t)
            return false;
        if (v.t == V_NONE || v.t == V_UNDEF)
            return true;
        if (v.t == V_BOOL)
            return v.u.b == o.u.b;
        return vequal(v, o) && (v.t == V_INT);
    }
    if (!strcmp(name, "in")) {
        struct val c = arg(a, 0, "seq");
        if (c.t == V_STR && v.t == V_STR)
            return memfind(c.u.s.p, c.u.s.n, v.u.s.p, v.u.s.n) != NULL;
        if (c.t == V_LIST) {
            for (size_t i = 0; i < c.u.l->n; i++)
                if (vequal(c.u.l->v[i], v))
                    return true;
            return false;
        }
        if (c.t == V_DICT && v.t == V_STR)
            return dict_find(c.u.d, v.u.s) != NULL;
        return false;
    }
    if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        struct str s = to_str(r, v);
        bool up = name[0] == 'u';
        for (size_t i = 0; i < s.n; i++)
            if (up ? islower((unsigned char)s.p[i]) : isupper((unsigned char)s.p[i]))
                return false;
        return true;
    }
    rfail(r, at, "unknown test '%s'", name);
}

/* ---- iteration */

/* The items a for loop or a filter walks: list items, string characters, dict keys. */
static struct list *iter_items(struct rctx *r, const struct node *at, struct val v)
{
    switch (v.t) {
    case V_UNDEF: return list_new(r->e, 1);
    case V_LIST: return v.u.l;
    case V_DICT: {
        struct list *l = list_new(r->e, v.u.d->n);
        for (size_t i = 0; i < v.u.d->n; i++)
            list_push(r->e, l, mk_str(v.u.d->k[i]));
        return l;
    }
    case V_STR: {
        struct list *l = list_new(r->e, v.u.s.n);
        const unsigned char *p = (const unsigned char *)v.u.s.p;
        for (size_t i = 0; i < v.u.s.n;) {
            size_t z = i + 1;
            while (z < v.u.s.n && (p[z] & 0xC0) == 0x80)
                z++;
            list_push(r->e, l, mk_str(str_sub(r->e, v.u.s, i, z - i)));
            i = z;
        }
        return l;
    }
    default:
        rfail(r, at, "a %s is not iterable", type_name(v));
    }
}

static struct val dict_items(struct rctx *r, const struct dict *d)
{
    struct list *l = list_new(r->e, d->n);
    for (size_t i = 0; i < d->n; i++) {
        struct list *p = list_new(r->e, 2);
        list_push(r->e, p, mk_str(d->k[i]));
        list_push(r->e, p, d->v[i]);
        list_push(r->e, l, mk_list(p));
    }
    return mk_list(l);
}

/* Attribute (or, failing that, item) name of v; jinja2's environment.getattr. */
static struct val get_attr(struct rctx *r, const struct node *at, struct val v, const char *name)
{
    if (v.t == V_UNDEF)
        undefined_error(r, at, v);
    if (v.t == V_DICT || v.t == V_NS) {
        struct val *p = dict_find(v.u.d, cstr(name));
        if (p)
            return *p;
    }
    struct val u = UNDEF;
    u.u.uname = name;
    return u;
}

/* attribute path "a.b" of a value, for map/selectattr/sort(attribute=) */
static struct val get_path(struct rctx *r, const struct node *at, struct val v, struct str path)
{
    size_t i = 0;
    while (i <= path.n) {
        const char *dot = memchr(path.p + i, '.', path.n - i);
        size_t j = dot ? (size_t)(dot - path.p) : path.n;
        char *part = astrndup(r->e, path.p + i, j - i);
        char *end;
        long long idx = strtoll(part, &end, 10);
        if (v.t == V_UNDEF)
            return v;
        if (*part && !*end && v.t == V_LIST)
            v = get_item(r, at, v, mk_int(idx));
        else
            v = get_attr(r, at, v, part);
        i = j + 1;
    }
    return v;
}

/* ---- filters */

static struct val call_macro(struct rctx *r, const struct node *at, const struct node *mac,
                             const struct args *a);

static struct val select_items(struct rctx *r, const struct node *at, struct val seq,
                               const struct args *a, bool by_attr, bool keep)
{
    struct list *in = iter_items(r, at, seq), *out = list_new(r->e, in->n);
    size_t base = by_attr ? 1 : 0;
    struct val an = by_attr ? arg(a, 0, NULL) : UNDEF;
    struct val tn = arg(a, base, NULL);
    struct args rest = { a->v + base + 1, a->kw ? a->kw + base + 1 : NULL,
                         a->n > base + 1 ? a->n - base - 1 : 0 };
    for (size_t i = 0; i < in->n; i++) {
        struct val x = in->v[i];
        if (by_attr)
            x = get_path(r, at, x, want_str(r, at, an, "selectattr"));
        bool ok = tn.t == V_UNDEF ? truthy(x)
                : apply_test(r, at, want_str(r, at, tn, "select").p, x, &rest);
        if (ok == keep)
            list_push(r->e, out, in->v[i]);
    }
    return mk_list(out);
}

static struct val apply_filter(struct rctx *r, const struct node *at, const char *f,
                               struct val v, const struct args *a)
{
    struct ectx *e = r->e;
    if (!strcmp(f, "trim")) {
        struct val c = arg(a, 0, "chars");
        struct str cs = c.t == V_STR ? c.u.s : cstr("");
        return mk_str(str_strip(r, to_str(r, v), c.t == V_STR ? &cs : NULL, true, true));
    }
    if (!strcmp(f, "tojson")) {
        struct val ind = arg(a, 0, "indent");
        struct val sk = arg(a, 2, "sort_keys");
        struct sb b = { 0 };
        if (v.t == V_UNDEF)
            undefined_error(r, at, v);
        json_into(r, at, &b, v, ind.t == V_INT ? (int)ind.u.i : -1, 0, truthy(sk));
        return mk_str(sb_str(e, &b));
    }
    if (!strcmp(f, "length") || !strcmp(f, "count")) {
        switch (v.t) {
        case V_UNDEF: return mk_int(0);
        case V_STR: return mk_int(utf8_len(v.u.s));
        case V_LIST: return mk_int((long long)v.u.l->n);
        case V_DICT: return mk_int((long long)v.u.d->n);
        default: rfail(r, at, "a %s has no length", type_name(v));
        }
    }
    if (!strcmp(f, "items")) {
        if (v.t == V_UNDEF)
            return mk_list(list_new(e, 1));
        if (v.t != V_DICT)
            rfail(r, at, "items: expected a mapping, got %s", type_name(v));
        return dict_items(r, v.u.d);
    }
    if (!strcmp(f, "dictsort")) {
        if (v.t != V_DICT)
            rfail(r, at, "dictsort: expected a mapping, got %s", type_name(v));
        struct val it = dict_items(r, v.u.d);
        /* insertion sort by key (dicts here are small) */
        struct list *l = it.u.l;
        for (size_t i = 1; i < l->n; i++) {
            struct val x = l->v[i];
            size_t j = i;
            while (j > 0) {
                const struct str *ka = &l->v[j - 1].u.l->v[0].u.s, *kb = &x.u.l->v[0].u.s;
                if (cmp_keys(&ka, &kb) <= 0)
                    break;
                l->v[j] = l->v[j - 1];
                j--;
            }
            l->v[j] = x;
        }
        return it;
    }
    if (!strcmp(f, "default") || !strcmp(f, "d")) {
        struct val dv = arg(a, 0, "default_value");
        bool boolean = truthy(arg(a, 1, "boolean"));
        if (v.t == V_UNDEF || (boolean && !truthy(v)))
            return dv.t == V_UNDEF ? mk_cstr("") : dv;
        return v;
    }
    if (!strcmp(f, "upper") || !strcmp(f, "lower") || !strcmp(f, "title") ||
        !strcmp(f, "capitalize")) {
        int mode = f[0] == 'u' ? 0 : f[0] == 'l' ? 1 : f[0] == 't' ? 2 : 3;
        return mk_str(str_case(r, to_str(r, v), mode));
    }
    if (!strcmp(f, "replace")) {
        struct val c = arg(a, 2, "count");
        return mk_str(str_replace(r, to_str(r, v), to_str(r, arg(a, 0, "old")),
                                  to_str(r, arg(a, 1, "new")), c.t == V_INT ? c.u.i : -1));
    }
    if (!strcmp(f, "first") || !strcmp(f, "last")) {
        struct list *l = iter_items(r, at, v);
        if (l->n == 0)
            return UNDEF;
        return f[0] == 'f' ? l->v[0] : l->v[l->n - 1];
    }
    if (!strcmp(f, "join")) {
        struct val sep = arg(a, 0, "d");
        struct val attr = arg(a, 1, "attribute");
        struct list *l = iter_items(r, at, v);
        struct sb b = { 0 };
        for (size_t i = 0; i < l->n; i++) {
            if (i && sep.t != V_UNDEF)
                sb_adds(e, &b, to_str(r, sep));
            struct val x = l->v[i];
            if (attr.t == V_STR)
                x = get_path(r, at, x, attr.u.s);
            sb_adds(e, &b, to_str(r, x));
        }
        return mk_str(sb_str(e, &b));
    }
    if (!strcmp(f, "string") || !strcmp(f, "safe") || !strcmp(f, "e") || !strcmp(f, "escape")) {
        if (f[0] == 'e' && v.t == V_STR) {
            for (size_t i = 0; i < v.u.s.n; i++)
                if (strchr("<>&'\"", v.u.s.p[i]))
                    rfail(r, at, "filter 'escape' is not supported");
        }
        if (f[1] == 'a' && v.t != V_STR)
            return v;
        return mk_str(to_str(r, v));
    }
    if (!strcmp(f, "int")) {
        struct val dv = arg(a, 0, "default");
        if (v.t == V_INT)
            return v;
        if (v.t == V_BOOL)
            return mk_int(v.u.b);
        if (v.t == V_FLOAT && isfinite(v.u.f))
            return mk_int((long long)v.u.f);
        if (v.t == V_STR) {
            char *s = astrndup(e, v.u.s.p, v.u.s.n), *end;
            while (is_ws(*s))
                s++;
            long long i = strtoll(s, &end, 10);
            while (is_ws(*end))
                end++;
            if (end != s && !*end)
                return mk_int(i);
            double d = strtod(s, &end);
            while (is_ws(*end))
                end++;
            if (end != s && !*end && isfinite(d))
                return mk_int((long long)d);
        }
        return dv.t == V_UNDEF ? mk_int(0) : dv;
    }
    if (!strcmp(f, "float")) {
        if (is_num(v))
            return mk_float(num(v));
        if (v.t == V_STR) {
            char *s = astrndup(e, v.u.s.p, v.u.s.n), *end;
            double d = strtod(s, &end);
            if (end != s)
                return mk_float(d);
        }
        struct val dv = arg(a, 0, "default");
        return dv.t == V_UNDEF ? mk_float(0.0) : dv;
    }
    if (!strcmp(f, "abs")) {
        if (v.t == V_INT)
            return mk_int(v.u.i < 0 ? -v.u.i : v.u.i);
        if (v.t == V_FLOAT)
            return mk_float(fabs(v.u.f));
        rfail(r, at, "abs: expected a number, got %s", type_name(v));
    }
    if (!strcmp(f, "list"))
        return mk_list(iter_items(r, at, v));
    if (!strcmp(f, "reverse")) {
        if (v.t == V_STR) {
            struct list *l = iter_items(r, at, v);
            struct sb b = { 0 };
            for (size_t i = l->n; i-- > 0;)
                sb_adds(e, &b, l->v[i].u.s);
            return mk_str(sb_str(e, &b));
        }
        struct list *l = iter_items(r, at, v), *o = list_new(e, l->n);
        for (size_t i = l->n; i-- > 0;)
            list_push(e, o, l->v[i]);
        return mk_list(o);
    }
    if (!strcmp(f, "unique")) {
        struct list *l = iter_items(r, at, v), *o = list_new(e, l->n);
        for (size_t i = 0; i < l->n; i++) {
            bool seen = false;
            for (size_t j = 0; j < o->n && !seen; j++)
                seen = vequal(o->v[j], l->v[i]);
            if (!seen)
                list_push(e, o, l->v[i]);
        }
        return mk_list(o);
    }
    if (!strcmp(f, "select") || !strcmp(f, "reject"))
        return select_items(r, at, v, a, false, f[0] == 's');
    if (!strcmp(f, "selectattr") || !strcmp(f, "rejectattr"))
        return select_items(r, at, v, a, true, f[0] == 's');
    if (!strcmp(f, "map")) {
        struct val attr = arg(a, 99, "attribute");
        struct val fname = arg(a, 0, NULL);
        struct val dflt = arg(a, 99, "default");
        struct list *l = iter_items(r, at, v), *o = list_new(e, l->n);
        struct args rest = { a->v + 1, a->kw ? a->kw + 1 : NULL, a->n > 0 ? a->n - 1 : 0 };
        for (size_t i = 0; i < l->n; i++) {
            struct val x;
            if (attr.t == V_STR) {
                x = get_path(r, at, l->v[i], attr.u.s);
                if (x.t == V_UNDEF && dflt.t != V_UNDEF)
                    x = dflt;
            } else {
                x = apply_filter(r, at, want_str(r, at, fname, "map").p, l->v[i], &rest);
            }
            list_push(e, o, x);
        }
        return mk_list(o);
    }
    if (!strcmp(f, "indent")) {
        struct val w = arg(a, 0, "width");
        bool first = truthy(arg(a, 1, "first")), blank = truthy(arg(a, 2, "blank"));
        struct str pad = w.t == V_STR ? w.u.s : cstr("    ");
        if (w.t == V_INT) {
            char *p = aalloc(e, (size_t)(w.u.i > 0 ? w.u.i : 0) + 1);
            memset(p, ' ', (size_t)(w.u.i > 0 ? w.u.i : 0));
            pad = (struct str){ p, (size_t)(w.u.i > 0 ? w.u.i : 0), NULL };
        }
        struct str s = to_str(r, v);
        struct sb b = { 0 };
        size_t i = 0;
        bool line0 = true;
        while (i <= s.n) {
            const char *nl = memchr(s.p + i, '\n', s.n - i);
            size_t j = nl ? (size_t)(nl - s.p) : s.n;
            bool empty = j == i;
            if ((line0 ? first : true) && (blank || !empty))
                sb_adds(e, &b, pad);
            sb_add(e, &b, s.p + i, j - i + (nl ? 1 : 0), s.o ? s.o + i : NULL);
            line0 = false;
            if (!nl)
                break;
            i = j + 1;
        }
        return mk_str(sb_str(e, &b));
    }
    if (!strcmp(f, "wordcount")) {
        struct val l = str_split(r, at, to_str(r, v), NULL, -1);
        return mk_int((long long)l.u.l->n);
    }
    rfail(r, at, "unknown filter '%s'", f);
}

/* ---- methods: x.name(args) on strings, dicts and lists */

static bool call_method(struct rctx *r, const struct node *at, struct val o, const char *m,
                        const struct args *a, struct val *res)
{
    struct ectx *e = r->e;
    if (o.t == V_STR) {
        struct str s = o.u.s;
        if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
            struct val c = arg(a, 0, "chars");
            struct str cs = c.t == V_STR ? c.u.s : cstr("");
            *res = mk_str(str_strip(r, s, c.t == V_STR ? &cs : NULL, m[0] != 'r', m[0] != 'l'));
            return true;
        }
        if (!strcmp(m, "split")) {
            struct val sep = arg(a, 0, "sep"), mx = arg(a, 1, "maxsplit");
            struct str ss = sep.t == V_STR ? sep.u.s : cstr("");
            *res = str_split(r, at, s, sep.t == V_STR ? &ss : NULL, mx.t == V_INT ? mx.u.i : -1);
            return true;
        }
        if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
            struct val p = arg(a, 0, NULL);
            struct list one = { &p, 1, 1 };
            struct list *l = p.t == V_LIST ? p.u.l : &one;
            bool hit = false;
            for (size_t i = 0; i < l->n && !hit; i++) {
                struct str x = want_str(r, at, l->v[i], m);
                hit = x.n <= s.n && memcmp(m[0] == 's' ? s.p : s.p + s.n - x.n, x.p, x.n) == 0;
            }
            *res = mk_bool(hit);
            return true;
        }
        if (!strcmp(m, "upper") || !strcmp(m, "lower") || !strcmp(m, "title") ||
            !strcmp(m, "capitalize") || !strcmp(m, "replace")) {
            *res = apply_filter(r, at, m, o, a);
            return true;
        }
        if (!strcmp(m, "find") || !strcmp(m, "count")) {
            struct str x = want_str(r, at, arg(a, 0, NULL), m);
            if (m[0] == 'f') {
                const char *p = memfind(s.p, s.n, x.p, x.n);
                *res = mk_int(p ? utf8_len((struct str){ s.p, (size_t)(p - s.p), NULL }) : -1);
            } else {
                long long c = 0;
                for (size_t i = 0; x.n && i + x.n <= s.n;) {
                    const char *p = memfind(s.p + i, s.n - i, x.p, x.n);
                    if (!p)
                        break;
                    c++;
                    i = (size_t)(p - s.p) + x.n;
                }
                *res = mk_int(x.n ? c : utf8_len(s) + 1);
            }
            return true;
        }
        return false;
    }
    if (o.t == V_DICT) {
        if (!strcmp(m, "items")) {
            *res = dict_items(r, o.u.d);
            return true;
        }
        if (!strcmp(m, "keys") || !strcmp(m, "values")) {
            struct list *l = list_new(e, o.u.d->n);
            for (size_t i = 0; i < o.u.d->n; i++)
                list_push(e, l, m[0] == 'k' ? mk_str(o.u.d->k[i]) : o.u.d->v[i]);
            *res = mk_list(l);
            return true;
        }
        if (!strcmp(m, "get")) {
            struct val k = arg(a, 0, NULL);
            struct val *p = k.t == V_STR ? dict_find(o.u.d, k.u.s) : NULL;
            struct val dv = arg(a, 1, NULL);
            *res = p ? *p : dv.t == V_UNDEF ? (struct val){ .t = V_NONE } : dv;
            return true;
        }
        return false;
    }
    if (o.t == V_LIST && (!strcmp(m, "append") || !strcmp(m, "pop") || !strcmp(m, "insert") ||
                          !strcmp(m, "extend")))
        rfail(r, at, "access to attribute '%s' of 'list' object is unsafe", m);
    return false;
}

/* ---- calls */

static struct val call_builtin(struct rctx *r, const struct node *at, int fn, const struct args *a)
{
    struct ectx *e = r->e;
    switch (fn) {
    case F_RAISE: {
        struct str s = to_str(r, arg(a, 0, NULL));
        rfail(r, at, "raise_exception: %.*s", (int)(s.n > 300 ? 300 : s.n), s.p);
    }
    case F_RANGE: {
        long long lo = 0, hi, st = 1;
        struct val x = arg(a, 0, NULL), y = arg(a, 1, NULL), z = arg(a, 2, NULL);
        if (x.t != V_INT || (y.t != V_UNDEF && y.t != V_INT) || (z.t != V_UNDEF && z.t != V_INT))
            rfail(r, at, "range: expected integers");
        if (y.t == V_UNDEF) {
            hi = x.u.i;
        } else {
            lo = x.u.i;
            hi = y.u.i;
        }
        if (z.t == V_INT)
            st = z.u.i;
        if (st == 0)
            rfail(r, at, "range: step cannot be zero");
        long long cnt = st > 0 ? (hi > lo ? (hi - lo + st - 1) / st : 0)
                               : (lo > hi ? (lo - hi - st - 1) / -st : 0);
        if (cnt > 100000)
            rfail(r, at, "range: too many items");
        struct list *l = list_new(e, (size_t)cnt);
        for (long long i = 0; i < cnt; i++)
            list_push(e, l, mk_int(lo + i * st));
        return mk_list(l);
    }
    case F_NAMESPACE:
    case F_DICT: {
        struct dict *d = dict_new(e);
        for (size_t i = 0; i < a->n; i++) {
            if (a->kw && a->kw[i]) {
                dict_set(e, d, cstr(a->kw[i]), a->v[i]);
            } else if (a->v[i].t == V_DICT || a->v[i].t == V_NS) {
                for (size_t k = 0; k < a->v[i].u.d->n; k++)
                    dict_set(e, d, a->v[i].u.d->k[k], a->v[i].u.d->v[k]);
            } else {
                rfail(r, at, "%s: expected keyword arguments", fn == F_DICT ? "dict" : "namespace");
            }
        }
        struct val v = { .t = fn == F_DICT ? V_DICT : V_NS };
        v.u.d = d;
        return v;
    }
    case F_STRFTIME: {
        struct str f = want_str(r, at, arg(a, 0, NULL), "strftime_now");
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        char buf[256];
        char *fmt = astrndup(e, f.p, f.n);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        size_t n = strftime(buf, sizeof(buf), fmt, &tm);   /* the template's own format */
#pragma GCC diagnostic pop
        return mk_str((struct str){ astrndup(e, buf, n), n, NULL });
    }
    default:
        rfail(r, at, "not callable");
    }
}

static struct val eval_call(struct rctx *r, const struct node *n)
{
    struct args a = eval_args(r, n);
    if (n->a->k == E_ATTR) {
        struct val o = eval(r, n->a->a);
        struct val res;
        if (o.t != V_UNDEF && call_method(r, n, o, n->a->name, &a, &res))
            return res;
        struct val f = get_attr(r, n->a, o, n->a->name);
        if (f.t == V_MACRO)
            return call_macro(r, n, f.u.mac, &a);
        if (f.t == V_FUNC)
            return call_builtin(r, n, f.u.fn, &a);
        if (f.t == V_UNDEF)
            rfail(r, n, "'%s' has no method '%s'", type_name(o), n->a->name);
        rfail(r, n, "'%s' is not callable", n->a->name);
    }
    struct val f = eval(r, n->a);
    if (f.t == V_FUNC)
        return call_builtin(r, n, f.u.fn, &a);
    if (f.t == V_MACRO)
        return call_macro(r, n, f.u.mac, &a);
    if (f.t == V_UNDEF)
        undefined_error(r, n, f);
    rfail(r, n, "a %s is not callable", type_name(f));
}

static struct val call_macro(struct rctx *r, const struct node *at, const struct node *mac,
                             const struct args *a)
{
    struct ectx *e = r->e;
    if (++r->depth > MAX_DEPTH)
        rfail(r, at, "macro calls nested too deeply");
    struct frame f = { r->root, dict_new(e) };
    size_t pos = 0;
    for (size_t i = 0; i < a->n; i++)
        if (!a->kw || !a->kw[i])
            pos++;
    if (pos > mac->nargs)
        rfail(r, at, "macro '%s' takes %zu arguments, %zu given", mac->name, mac->nargs, pos);
    for (size_t i = 0; i < mac->nargs; i++) {
        const struct node *p = mac->args[i];
        struct val v = arg(a, i, p->name);
        if (v.t == V_UNDEF && p->a)
            v = eval(r, p->a);
        dict_set(e, f.vars, cstr(p->name), v);
    }
    struct sb out = { 0 }, *saved = r->out;
    r->out = &out;
    exec_body(r, &f, &mac->body);
    r->out = saved;
    r->depth--;
    return mk_str(sb_str(e, &out));
}

/* ---- expressions */

static struct val binop(struct rctx *r, const struct node *n, int op, struct val a, struct val b)
{
    struct ectx *e = r->e;
    if (op == B_EQ)
        return mk_bool(vequal(a, b));
    if (op == B_NE)
        return mk_bool(!vequal(a, b));
    if (op == B_IN || op == B_NOTIN) {
        bool hit;
        if (b.t == V_UNDEF) {
            hit = false;
        } else if (b.t == V_STR) {
            if (a.t != V_STR)
                rfail(r, n, "'in <string>' requires a string as left operand, not %s",
                      type_name(a));
            hit = memfind(b.u.s.p, b.u.s.n, a.u.s.p, a.u.s.n) != NULL;
        } else if (b.t == V_LIST) {
            hit = false;
            for (size_t i = 0; i < b.u.l->n && !hit; i++)
                hit = vequal(b.u.l->v[i], a);
        } else if (b.t == V_DICT || b.t == V_NS) {
            hit = a.t == V_STR && dict_find(b.u.d, a.u.s) != NULL;
        } else {
            rfail(r, n, "argument of type '%s' is not iterable", type_name(b));
        }
        return mk_bool(op == B_IN ? hit : !hit);
    }
    if (op == B_CAT)
        return mk_str(str_cat(e, to_str(r, a), to_str(r, b)));
    if (a.t == V_UNDEF)
        undefined_error(r, n, a);
    if (b.t == V_UNDEF)
        undefined_error(r, n, b);
    if (op == B_LT || op == B_LE || op == B_GT || op == B_GE) {
        int c;
        if (is_num(a) && is_num(b)) {
            double x = num(a), y = num(b);
            c = (x > y) - (x < y);
        } else if (a.t == V_STR && b.t == V_STR) {
            const struct str *pa = &a.u.s, *pb = &b.u.s;
            c = cmp_keys(&pa, &pb);
        } else {
            rfail(r, n, "cannot compare %s with %s", type_name(a), type_name(b));
        }
        return mk_bool(op == B_LT ? c < 0 : op == B_LE ? c <= 0 : op == B_GT ? c > 0 : c >= 0);
    }
    if (op == B_ADD && a.t == V_STR && b.t == V_STR)
        return mk_str(str_cat(e, a.u.s, b.u.s));
    if (op == B_ADD && a.t == V_LIST && b.t == V_LIST) {
        struct list *l = list_new(e, a.u.l->n + b.u.l->n);
        for (size_t i = 0; i < a.u.l->n; i++)
            list_push(e, l, a.u.l->v[i]);
        for (size_t i = 0; i < b.u.l->n; i++)
            list_push(e, l, b.u.l->v[i]);
        return mk_list(l);
    }
    if (op == B_MUL && ((a.t == V_STR && b.t == V_INT) || (a.t == V_INT && b.t == V_STR))) {
        struct str s = a.t == V_STR ? a.u.s : b.u.s;
        long long k = a.t == V_INT ? a.u.i : b.u.i;
        if (k > 0 && s.n * (unsigned long long)k > MAX_OUTPUT)
            rfail(r, n, "string repetition too large");
        struct sb o = { 0 };
        for (long long i = 0; i < k; i++)
            sb_adds(e, &o, s);
        return mk_str(sb_str(e, &o));
    }
    if (!is_num(a) || !is_num(b))
        rfail(r, n, "unsupported operand types for arithmetic: %s and %s", type_name(a),
              type_name(b));
    bool ints = a.t != V_FLOAT && b.t != V_FLOAT;
    long long x = inum(a), y = inum(b);
    double fx = num(a), fy = num(b);
    switch (op) {
    case B_ADD: return ints ? mk_int(x + y) : mk_float(fx + fy);
    case B_SUB: return ints ? mk_int(x - y) : mk_float(fx - fy);
    case B_MUL: return ints ? mk_int(x * y) : mk_float(fx * fy);
    case B_DIV:
        if (fy == 0.0)
            rfail(r, n, "division by zero");
        return mk_float(fx / fy);
    case B_FDIV:
    case B_MOD:
        if (fy == 0.0)
            rfail(r, n, "integer division or modulo by zero");
        if (ints) {
            long long q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) {
                q--;
                m += y;
            }
            return mk_int(op == B_FDIV ? q : m);
        } else {
            double q = floor(fx / fy), m = fx - q * fy;
            return mk_float(op == B_FDIV ? q : m);
        }
    case B_POW:
        if (ints && y >= 0) {
            long long p = 1;
            for (long long i = 0; i < y && i < 64; i++)
                p *= x;
            return mk_int(p);
        }
        return mk_float(pow(fx, fy));
    default:
        rfail(r, n, "bad operator");
    }
}

static struct val eval(struct rctx *r, const struct node *n)
{
    struct ectx *e = r->e;
    if (++r->depth > MAX_DEPTH * 4)
        rfail(r, n, "expression nested too deeply");
    struct val res;
    switch (n->k) {
    case E_LIT:
        res = n->lit;
        break;
    case E_NAME:
        res = lookup(r->cur, cstr(n->name));
        break;
    case E_ATTR: {
        struct val o = eval(r, n->a);
        if (o.t == V_UNDEF)
            undefined_error(r, n, o);
        res = get_attr(r, n, o, n->name);
        break;
    }
    case E_ITEM: {
        struct val o = eval(r, n->a);
        struct val k = eval(r, n->b);
        res = get_item(r, n, o, k);
        break;
    }
    case E_SLICE:
        res = do_slice(r, n);
        break;
    case E_CALL:
        res = eval_call(r, n);
        break;
    case E_FILTER: {
        struct val v = eval(r, n->a);
        struct args a = eval_args(r, n);
        res = apply_filter(r, n, n->name, v, &a);
        break;
    }
    case E_TEST: {
        struct val v = eval(r, n->a);
        struct args a = eval_args(r, n);
        bool t = apply_test(r, n, n->name, v, &a);
        res = mk_bool(n->op ? !t : t);
        break;
    }
    case E_NOT:
        res = mk_bool(!truthy(eval(r, n->a)));
        break;
    case E_NEG:
    case E_POS: {
        struct val v = eval(r, n->a);
        if (v.t == V_UNDEF)
            undefined_error(r, n, v);
        if (!is_num(v))
            rfail(r, n, "bad operand type for unary %c: %s", n->k == E_NEG ? '-' : '+',
                  type_name(v));
        if (n->k == E_POS)
            res = v.t == V_BOOL ? mk_int(v.u.b) : v;
        else
            res = v.t == V_FLOAT ? mk_float(-v.u.f) : mk_int(-inum(v));
        break;
    }
    case E_BIN:
        res = binop(r, n, n->op, eval(r, n->a), eval(r, n->b));
        break;
    case E_AND: {
        struct val a = eval(r, n->a);
        res = truthy(a) ? eval(r, n->b) : a;
        break;
    }
    case E_OR: {
        struct val a = eval(r, n->a);
        res = truthy(a) ? a : eval(r, n->b);
        break;
    }
    case E_COND:
        if (truthy(eval(r, n->b)))
            res = eval(r, n->a);
        else
            res = n->c ? eval(r, n->c) : UNDEF;
        break;
    case E_LIST: {
        struct list *l = list_new(e, n->nargs);
        for (size_t i = 0; i < n->nargs; i++)
            list_push(e, l, eval(r, n->args[i]));
        res = mk_list(l);
        break;
    }
    case E_DICT: {
        struct dict *d = dict_new(e);
        for (size_t i = 0; i + 1 < n->nargs; i += 2) {
            struct val k = eval(r, n->args[i]);
            if (k.t != V_STR)
                rfail(r, n, "dict keys must be strings here");
            dict_set(e, d, k.u.s, eval(r, n->args[i + 1]));
        }
        res.t = V_DICT;
        res.u.d = d;
        break;
    }
    default:
        rfail(r, n, "not an expression");
    }
    r->depth--;
    return res;
}

/* ---- statements */

static void assign(struct rctx *r, const struct node *at, struct frame *f, const char **names,
                   size_t n, struct val v)
{
    if (n == 1) {
        dict_set(r->e, f->vars, cstr(names[0]), v);
        return;
    }
    struct list *l = iter_items(r, at, v);
    if (l->n != n)
        rfail(r, at, "cannot unpack %zu values into %zu names", l->n, n);
    for (size_t i = 0; i < n; i++)
        dict_set(r->e, f->vars, cstr(names[i]), l->v[i]);
}

static enum flow exec_for(struct rctx *r, struct frame *f, const struct node *n)
{
    struct ectx *e = r->e;
    struct list *items = iter_items(r, n, eval(r, n->a));
    if (n->b) {
        /* the loop filter: evaluated with the targets bound, before loop.* exist */
        struct list *kept = list_new(e, items->n);
        for (size_t i = 0; i < items->n; i++) {
            struct frame g = { f, dict_new(e) };
            assign(r, n, &g, n->targets, n->ntargets, items->v[i]);
            r->cur = &g;
            bool ok = truthy(eval(r, n->b));
            r->cur = f;
            if (ok)
                list_push(e, kept, items->v[i]);
        }
        items = kept;
    }
    size_t len = items->n;
    for (size_t i = 0; i < len; i++) {
        struct frame g = { f, dict_new(e) };
        struct dict *loop = dict_new(e);
        dict_set(e, loop, cstr("index"), mk_int((long long)i + 1));
        dict_set(e, loop, cstr("index0"), mk_int((long long)i));
        dict_set(e, loop, cstr("revindex"), mk_int((long long)(len - i)));
        dict_set(e, loop, cstr("revindex0"), mk_int((long long)(len - i - 1)));
        dict_set(e, loop, cstr("first"), mk_bool(i == 0));
        dict_set(e, loop, cstr("last"), mk_bool(i + 1 == len));
        dict_set(e, loop, cstr("length"), mk_int((long long)len));
        dict_set(e, loop, cstr("depth"), mk_int(1));
        dict_set(e, loop, cstr("depth0"), mk_int(0));
        dict_set(e, loop, cstr("previtem"), i > 0 ? items->v[i - 1] : UNDEF);
        dict_set(e, loop, cstr("nextitem"), i + 1 < len ? items->v[i + 1] : UNDEF);
        struct val lv = { .t = V_DICT };
        lv.u.d = loop;
        dict_set(e, g.vars, cstr("loop"), lv);
        assign(r, n, &g, n->targets, n->ntargets, items->v[i]);
        enum flow fl = exec_body(r, &g, &n->body);
        if (fl == FL_BREAK)
            break;
    }
    if (len == 0)
        return exec_body(r, f, &n->els);
    return FL_NORMAL;
}

static void emit(struct rctx *r, struct str s)
{
    sb_adds(r->e, r->out, s);
}

static enum flow exec_body(struct rctx *r, struct frame *f, const struct body *b)
{
    struct ectx *e = r->e;
    struct frame *saved = r->cur;
    enum flow fl = FL_NORMAL;
    for (size_t i = 0; i < b->n && fl == FL_NORMAL; i++) {
        const struct node *n = b->v[i];
        r->cur = f;
        if (++e->steps > MAX_STEPS)
            rfail(r, n, "the template runs too long (more than %ld steps)", MAX_STEPS);
        switch (n->k) {
        case N_TEXT:
            emit(r, n->lit.u.s);
            break;
        case N_OUT:
            emit(r, to_str(r, eval(r, n->a)));
            break;
        case N_IF:     /* elif is an if alone in the else body */
            fl = exec_body(r, f, truthy(eval(r, n->a)) ? &n->body : &n->els);
            break;
        case N_FOR:
            fl = exec_for(r, f, n);
            break;
        case N_SET: {
            struct val v = eval(r, n->a);
            if (n->op) {
                struct val ns = lookup(f, cstr(n->targets[0]));
                if (ns.t != V_NS)
                    rfail(r, n, "cannot assign attribute on a %s (use namespace())",
                          type_name(ns));
                dict_set(e, ns.u.d, cstr(n->name), v);
            } else {
                assign(r, n, f, n->targets, n->ntargets, v);
            }
            break;
        }
        case N_SETBLOCK: {
            struct sb out = { 0 }, *so = r->out;
            r->out = &out;
            exec_body(r, f, &n->body);
            r->out = so;
            dict_set(e, f->vars, cstr(n->targets[0]), mk_str(sb_str(e, &out)));
            break;
        }
        case N_FILTERBLOCK: {
            struct sb out = { 0 }, *so = r->out;
            r->out = &out;
            exec_body(r, f, &n->body);
            r->out = so;
            struct args a = eval_args(r, n);
            emit(r, to_str(r, apply_filter(r, n, n->name, mk_str(sb_str(e, &out)), &a)));
            break;
        }
        case N_GENERATION:
            fl = exec_body(r, f, &n->body);
            break;
        case N_MACRO: {
            struct val m = { .t = V_MACRO };
            m.u.mac = n;
            dict_set(e, f->vars, cstr(n->name), m);
            break;
        }
        case N_BREAK:
            fl = FL_BREAK;
            break;
        case N_CONTINUE:
            fl = FL_CONTINUE;
            break;
        default:
            rfail(r, n, "not a statement");
        }
    }
    r->cur = saved;
    return fl;
}

char *lc_jinja_render_chat(const struct lc_jinja *t, const struct lc_jinja_chat *vars,
                           struct lc_jinja_origin **origin, char **err)
{
    if (err)
        *err = NULL;
    if (origin)
        *origin = NULL;
    struct arena ar = { NULL };
    struct ectx *e = calloc(1, sizeof(*e));
    if (!e || !t || !vars || (vars->n_msgs && !vars->msgs)) {
        free(e);
        if (err)
            *err = strdup(e ? "bad arguments" : "out of memory");
        return NULL;
    }
    e->ar = &ar;
    char *volatile text = NULL;
    if (setjmp(e->jb)) {
        free(text);
        if (err)
            *err = e->err;
        else
            free(e->err);
        arena_free(&ar);
        free(e);
        return NULL;
    }
    struct frame globals = { NULL, dict_new(e) };
    struct frame top = { &globals, dict_new(e) };
    struct list *ml = list_new(e, vars->n_msgs);
    for (size_t i = 0; i < vars->n_msgs; i++) {
        const char *c = vars->msgs[i].content, *role = vars->msgs[i].role;
        if (!c || !role)
            fail(e, 0, 0, "message %zu has no role or content", i);
        size_t cn = strlen(c);
        if (cn >= LC_JINJA_DERIVED || i + 1 >= UINT32_MAX)
            fail(e, 0, 0, "message %zu is too long", i);
        orig_t *o = aalloc(e, mulsz(e, cn ? cn : 1, sizeof(*o)));
        for (size_t k = 0; k < cn; k++)
            o[k] = (orig_t){ (uint32_t)i + 1, (uint32_t)k };
        struct dict *d = dict_new(e);
        dict_set(e, d, cstr("role"), mk_cstr(role));
        dict_set(e, d, cstr("content"), mk_str((struct str){ c, cn, cn ? o : NULL }));
        struct val dv = { .t = V_DICT };
        dv.u.d = d;
        list_push(e, ml, dv);
    }
    struct dict *g = globals.vars;
    dict_set(e, g, cstr("messages"), mk_list(ml));
    dict_set(e, g, cstr("add_generation_prompt"), mk_bool(vars->add_generation_prompt));
    dict_set(e, g, cstr("bos_token"), mk_cstr(vars->bos_token ? vars->bos_token : ""));
    dict_set(e, g, cstr("eos_token"), mk_cstr(vars->eos_token ? vars->eos_token : ""));
    dict_set(e, g, cstr("tools"), (struct val){ .t = V_NONE });
    dict_set(e, g, cstr("documents"), (struct val){ .t = V_NONE });
    static const char *const fnames[] = { "raise_exception", "range", "namespace", "dict",
                                          "strftime_now" };
    for (int i = 0; i < 5; i++) {
        struct val f = { .t = V_FUNC };
        f.u.fn = i;
        dict_set(e, g, cstr(fnames[i]), f);
    }
    for (const char *const *x = vars->extra_true; x && *x; x++)
        dict_set(e, g, cstr(*x), mk_bool(true));
    struct sb out = { 0 };
    struct rctx r = { e, &top, &top, &out, 0 };
    exec_body(&r, &top, &t->root);
    text = malloc(out.n + 1);
    if (!text)
        fail_oom(e);
    if (out.n)
        memcpy(text, out.p, out.n);
    text[out.n] = 0;
    if (origin && out.n) {
        *origin = malloc(out.n * sizeof(**origin));
        if (!*origin)
            fail_oom(e);
        if (out.o)
            memcpy(*origin, out.o, out.n * sizeof(**origin));
        else
            memset(*origin, 0, out.n * sizeof(**origin));
    }
    arena_free(&ar);
    free(e);
    return text;
}
