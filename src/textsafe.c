/* textsafe.c - the visible form of untrusted text (the model is in textsafe.h). */
#include "textsafe.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Decode UTF-8 by hand: the locale need not be UTF-8, and the rules must be strict. */
size_t lc_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    /* C0/C1 leads would be overlong 2-byte forms; F5..FF would exceed U+10FFFF */
    int len = s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 && s[0] < 0xE0 ? 2 : 0;
    if (len == 0 || s[0] > 0xF4)
        return LC_UTF8_INVALID;
    if (n < (size_t)len) {
        for (size_t i = 1; i < n; i++)
            if ((s[i] & 0xC0) != 0x80)
                return LC_UTF8_INVALID;
        return LC_UTF8_INCOMPLETE;
    }
    uint32_t c = s[0] & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return LC_UTF8_INVALID;
        c = (c << 6) | (s[i] & 0x3F);
    }
    /* overlong forms, surrogates, > U+10FFFF */
    if ((len == 3 && c < 0x800) || (len == 4 && (c < 0x10000 || c > 0x10FFFF)) ||
        (c >= 0xD800 && c <= 0xDFFF))
        return LC_UTF8_INVALID;
    *cp = c;
    return (size_t)len;
}

size_t lc_utf8_encode(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

bool lc_utf8_valid(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t r = lc_utf8_decode(u + i, n - i, &cp);
        if (r == LC_UTF8_INVALID || r == LC_UTF8_INCOMPLETE)
            return false;
        i += r;
    }
    return true;
}

size_t lc_text_visible(const char *s, size_t n, bool final, uint32_t *shown)
{
    const unsigned char *u = (const unsigned char *)s;
    const unsigned char b = u[0];
    if (b == '\n' || b == '\t') {
        *shown = b;
        return 1;
    }
    if (b < 0x20 || b == 0x7F) {
        /* control pictures: U+2400 + code (U+241B for ESC), U+2421 for DEL */
        *shown = b == 0x7F ? 0x2421 : 0x2400u + b;
        return 1;
    }
    uint32_t cp;
    size_t r = lc_utf8_decode(u, n, &cp);
    if (r == LC_UTF8_INCOMPLETE && !final)
        return 0;
    if (r == LC_UTF8_INVALID || r == LC_UTF8_INCOMPLETE) {
        *shown = 0xFFFD;   /* one per byte: the next call looks at the following byte */
        return 1;
    }
    /* C1 controls (CSI U+009B, OSC U+009D, DCS U+0090, ...) act like ESC sequences on
     * terminals that honour 8-bit controls */
    *shown = cp >= 0x80 && cp <= 0x9F ? 0xFFFD : cp;
    return r;
}

size_t lc_text_sanitize(struct lc_strbuf *b, const char *s, size_t n, bool final)
{
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t r = lc_text_visible(s + i, n - i, final, &cp);
        if (r == 0)
            break;
        /* a kept character encodes back to the same bytes (decoding was strict) */
        char enc[4];
        lc_strbuf_putn(b, enc, lc_utf8_encode(cp, enc));
        i += r;
    }
    return i;
}

char *lc_text_safe(const char *s)
{
    if (!s)
        return NULL;
    struct lc_strbuf b = { 0 };
    lc_strbuf_putn(&b, "", 0);
    lc_text_sanitize(&b, s, strlen(s), true);
    if (b.oom || !b.p) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

int lc_text_fprintf(FILE *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *raw = NULL;
    int n = vasprintf(&raw, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    char *safe = lc_text_safe(raw);
    free(raw);
    if (!safe)
        return -1;
    int w = fputs(safe, f) < 0 ? -1 : (int)strlen(safe);
    free(safe);
    return w;
}

void lc_text_stream_write(struct lc_text_stream *st, FILE *f, const char *s, size_t n)
{
    /* the held-back bytes (<= 3) go in front of the new piece */
    struct lc_strbuf in = { 0 }, out = { 0 };
    lc_strbuf_putn(&in, st->held, st->n_held);
    lc_strbuf_putn(&in, s, n);
    if (in.oom) {
        free(in.p);
        return;
    }
    size_t used = lc_text_sanitize(&out, in.p ? in.p : "", in.len, false);
    if (!out.oom && out.len)
        fwrite(out.p, 1, out.len, f);
    st->n_held = in.len - used;   /* < 4: only an incomplete character is left */
    memcpy(st->held, in.p + used, st->n_held);
    free(in.p);
    free(out.p);
}

void lc_text_stream_flush(struct lc_text_stream *st, FILE *f)
{
    struct lc_strbuf out = { 0 };
    lc_text_sanitize(&out, st->held, st->n_held, true);
    if (!out.oom && out.len)
        fwrite(out.p, 1, out.len, f);
    free(out.p);
    st->n_held = 0;
}
