/*
 * strbuf.h - a growable NUL-terminated byte string for building text (chat templates,
 * transcripts).  An allocation failure sets oom and makes later appends no-ops, so a caller
 * builds the whole text and checks oom once at the end.  The caller owns p (free()).
 */
#ifndef LC_STRBUF_H
#define LC_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

struct lc_strbuf {
    char *p;      /* NULL until the first append */
    size_t len;   /* bytes, without the NUL */
    size_t cap;
    bool oom;     /* an append failed: the text is incomplete */
};

/* Append n bytes of s. */
void lc_strbuf_putn(struct lc_strbuf *b, const char *s, size_t n);
/* Append the NUL-terminated s. */
void lc_strbuf_put(struct lc_strbuf *b, const char *s);
/* Append printf-formatted text. */
void lc_strbuf_printf(struct lc_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
