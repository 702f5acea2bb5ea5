/* strbuf.c - see strbuf.h. */
#include "strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void lc_strbuf_putn(struct lc_strbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) {
            if (cap > ((size_t)-1) / 2) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void lc_strbuf_put(struct lc_strbuf *b, const char *s)
{
    lc_strbuf_putn(b, s, strlen(s));
}

void lc_strbuf_printf(struct lc_strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    const int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = true;
        return;
    }
    lc_strbuf_putn(b, s, (size_t)n);
    free(s);
}
