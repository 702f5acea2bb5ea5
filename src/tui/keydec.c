/*
 * keydec.c - keys from the terminal's bytes, never blocking (keydec.h explains the model).
 *
 * Why not get_wch(): after a byte that is not UTF-8, ncurses' get_wch resynchronises by reading
 * more bytes, blocking when none come, and the old code then handed readline EOF in the middle
 * of its own bracketed-paste reader.  Here every byte is looked at once, decided at once or kept
 * in a small state, and a paste is collected by us, so readline only ever sees complete keys.
 */
#include "keydec.h"

#include <stdlib.h>
#include <string.h>

#define FFFD 0xFFFDu

int lc_utf8_step(struct lc_utf8 *u, unsigned char b, uint32_t out[2], size_t *n_invalid)
{
    int n = 0;
    if (u->need > 0) {
        if (b >= u->lo && b <= u->hi) {
            u->cp = (u->cp << 6) | (b & 0x3Fu);
            u->lo = 0x80;
            u->hi = 0xBF;
            if (--u->need == 0)
                out[n++] = u->cp;
            return n;
        }
        /* the maximal subpart so far is one U+FFFD; b starts afresh */
        out[n++] = FFFD;
        if (n_invalid)
            (*n_invalid)++;
        u->need = 0;
    }
    /* Lead bytes and the range of the first continuation byte (Unicode Table 3-7). */
    if (b < 0x80) {
        out[n++] = b;
    } else if (b >= 0xC2 && b <= 0xDF) {
        u->cp = b & 0x1Fu, u->need = 1, u->lo = 0x80, u->hi = 0xBF;
    } else if (b >= 0xE0 && b <= 0xEF) {
        u->cp = b & 0x0Fu, u->need = 2;
        u->lo = b == 0xE0 ? 0xA0 : 0x80;   /* no overlong forms */
        u->hi = b == 0xED ? 0x9F : 0xBF;   /* no surrogates */
    } else if (b >= 0xF0 && b <= 0xF4) {
        u->cp = b & 0x07u, u->need = 3;
        u->lo = b == 0xF0 ? 0x90 : 0x80;
        u->hi = b == 0xF4 ? 0x8F : 0xBF;   /* nothing above U+10FFFF */
    } else {   /* 80..C1, F5..FF: never valid */
        out[n++] = FFFD;
        if (n_invalid)
            (*n_invalid)++;
    }
    return n;
}

int lc_utf8_flush(struct lc_utf8 *u, uint32_t out[1], size_t *n_invalid)
{
    if (u->need == 0)
        return 0;
    u->need = 0;
    out[0] = FFFD;
    if (n_invalid)
        (*n_invalid)++;
    return 1;
}

void lc_keydec_init(struct lc_keydec *d, lc_key_fn fn, void *ud)
{
    memset(d, 0, sizeof(*d));
    d->fn = fn;
    d->ud = ud;
}

void lc_keydec_free(struct lc_keydec *d)
{
    free(d->paste);
    d->paste = NULL;
    d->paste_len = d->paste_cap = 0;
}

static void emit(struct lc_keydec *d, enum lc_key_type type, uint32_t ch, const char *text, size_t len)
{
    struct lc_key k = { type, ch, text, len, 0 };
    d->fn(d->ud, &k);
}

static size_t utf8_encode(uint32_t c, char *o)
{
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xC0 | (c >> 6));
        o[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12));
        o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18));
    o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* ---------------------------------------------------------------- paste */

static void paste_add_cp(struct lc_keydec *d, uint32_t cp)
{
    if (cp == '\n' && d->prev_cr) {   /* CR LF: the CR already gave the newline */
        d->prev_cr = false;
        return;
    }
    d->prev_cr = cp == '\r';
    if (cp == '\r')
        cp = '\n';
    if (cp == 0)
        return;
    char b[4];
    size_t n = utf8_encode(cp, b);
    if (d->paste_len + n + 1 > LC_KEYDEC_PASTE_MAX + 1) {
        d->paste_dropped += n;
        return;
    }
    if (d->paste_len + n + 1 > d->paste_cap) {
        size_t cap = d->paste_cap ? d->paste_cap * 2 : 256;
        while (cap < d->paste_len + n + 1)
            cap *= 2;
        char *p = realloc(d->paste, cap);
        if (!p) {
            d->paste_dropped += n;
            return;
        }
        d->paste = p;
        d->paste_cap = cap;
    }
    memcpy(d->paste + d->paste_len, b, n);
    d->paste_len += n;
    d->paste[d->paste_len] = '\0';
}

static void paste_add_byte(struct lc_keydec *d, unsigned char b)
{
    uint32_t cp[2];
    int n = lc_utf8_step(&d->pu, b, cp, &d->n_invalid);
    for (int i = 0; i < n; i++)
        paste_add_cp(d, cp[i]);
}

static const char paste_end[] = "\033[201~";

/* End the paste: the text collected so far goes out as one LC_KEY_PASTE. */
static void paste_close(struct lc_keydec *d)
{
    uint32_t cp[1];
    if (lc_utf8_flush(&d->pu, cp, &d->n_invalid))
        paste_add_cp(d, cp[0]);
    struct lc_key k = { LC_KEY_PASTE, 0, d->paste ? d->paste : "", d->paste_len, d->paste_dropped };
    d->in_paste = false;
    d->prev_cr = false;
    d->end_match = 0;
    d->fn(d->ud, &k);
    d->paste_len = 0;
    d->paste_dropped = 0;
    if (d->paste)
        d->paste[0] = '\0';
}

bool lc_keydec_in_paste(const struct lc_keydec *d)
{
    return d->in_paste;
}

void lc_keydec_end_paste(struct lc_keydec *d)
{
    if (!d->in_paste)
        return;
    /* what matched of the end marker so far is text */
    int m = d->end_match;
    d->end_match = 0;
    for (int i = 0; i < m; i++)
        paste_add_byte(d, (unsigned char)paste_end[i]);
    paste_close(d);
}

static void paste_feed(struct lc_keydec *d, int c)
{
    if (c >= 256) {   /* a key curses decoded inside the paste: only Enter means text */
        if (c == 0527 /* KEY_ENTER */)
            paste_add_byte(d, '\r');
        return;
    }
    unsigned char b = (unsigned char)c;
    if (b == (unsigned char)paste_end[d->end_match]) {
        if (++d->end_match < (int)sizeof(paste_end) - 1)
            return;
        d->end_match = 0;
        paste_close(d);
        return;
    }
    if (d->end_match > 0) {   /* not the end after all: what matched is text */
        int m = d->end_match;
        d->end_match = 0;
        for (int i = 0; i < m; i++)
            paste_add_byte(d, (unsigned char)paste_end[i]);
        paste_feed(d, c);
        return;
    }
    paste_add_byte(d, b);
}

/* ---------------------------------------------------------------- keys */

static void ground_cp(struct lc_keydec *d, uint32_t cp)
{
    if (cp == 0x1B) {
        if (d->alt)
            emit(d, LC_KEY_ESC, 0, NULL, 0);   /* Esc Esc: the first was alone */
        d->alt = false;
        d->state = KD_ESC;
        return;
    }
    emit(d, d->alt ? LC_KEY_ALT : LC_KEY_CHAR, cp, NULL, 0);
    d->alt = false;
}

static void ground_byte(struct lc_keydec *d, unsigned char b)
{
    uint32_t cp[2];
    int n = lc_utf8_step(&d->u, b, cp, &d->n_invalid);
    for (int i = 0; i < n; i++)
        ground_cp(d, cp[i]);
}

static void flush_utf8(struct lc_keydec *d)
{
    uint32_t cp[1];
    if (lc_utf8_flush(&d->u, cp, &d->n_invalid))
        ground_cp(d, cp[0]);
}

void lc_keydec_feed(struct lc_keydec *d, int c)
{
    if (c < 0)
        return;
    if (d->in_paste) {
        paste_feed(d, c);
        return;
    }
    switch (d->state) {
    case KD_GROUND:
        if (c >= 256) {
            flush_utf8(d);
            if (d->state == KD_ESC) {   /* the flush ended in nothing but an Esc */
                d->state = KD_GROUND;
                emit(d, LC_KEY_ESC, 0, NULL, 0);
            }
            if (d->alt) {
                d->alt = false;
                emit(d, LC_KEY_ESC, 0, NULL, 0);
            }
            emit(d, LC_KEY_CODE, (uint32_t)c, NULL, 0);
            return;
        }
        ground_byte(d, (unsigned char)c);
        return;
    case KD_ESC:
        if (c >= 256) {
            d->state = KD_GROUND;
            emit(d, LC_KEY_ESC, 0, NULL, 0);
            emit(d, LC_KEY_CODE, (uint32_t)c, NULL, 0);
        } else if (c == 0x1B) {
            emit(d, LC_KEY_ESC, 0, NULL, 0);   /* Esc Esc: two presses, never Alt-Esc */
        } else if (c == '[' || c == 'O') {
            d->state = c == '[' ? KD_CSI : KD_SS3;
            d->seq[0] = '\033';
            d->seq[1] = (char)c;
            d->seq_len = 2;
        } else {
            d->state = KD_GROUND;
            d->alt = true;
            ground_byte(d, (unsigned char)c);
        }
        return;
    case KD_CSI:
        if (c >= 0x20 && c <= 0x3F && d->seq_len < sizeof(d->seq) - 1) {
            d->seq[d->seq_len++] = (char)c;
            return;
        }
        if (c >= 0x40 && c <= 0x7E) {
            d->seq[d->seq_len++] = (char)c;
            d->state = KD_GROUND;
            if (d->seq_len == 6 && memcmp(d->seq, "\033[200~", 6) == 0) {
                d->in_paste = true;
                d->end_match = 0;
                d->prev_cr = false;
                memset(&d->pu, 0, sizeof(d->pu));
            } else if (!(d->seq_len == 6 && memcmp(d->seq, "\033[201~", 6) == 0)) {
                emit(d, LC_KEY_SEQ, 0, d->seq, d->seq_len);   /* a stray paste end is dropped */
            }
            return;
        }
        /* not a sequence after all: what we have goes as it is, c starts afresh */
        d->state = KD_GROUND;
        emit(d, LC_KEY_SEQ, 0, d->seq, d->seq_len);
        lc_keydec_feed(d, c);
        return;
    case KD_SS3:
        d->state = KD_GROUND;
        if (c >= 0x40 && c <= 0x7E) {
            d->seq[2] = (char)c;
            emit(d, LC_KEY_SEQ, 0, d->seq, 3);
            return;
        }
        emit(d, LC_KEY_ALT, 'O', NULL, 0);
        lc_keydec_feed(d, c);
        return;
    }
}

void lc_keydec_flush(struct lc_keydec *d, bool utf8)
{
    if (d->in_paste)
        return;
    switch (d->state) {
    case KD_ESC:
        d->state = KD_GROUND;
        emit(d, LC_KEY_ESC, 0, NULL, 0);
        break;
    case KD_CSI:
        d->state = KD_GROUND;
        emit(d, LC_KEY_SEQ, 0, d->seq, d->seq_len);
        break;
    case KD_SS3:
        d->state = KD_GROUND;
        emit(d, LC_KEY_ALT, 'O', NULL, 0);
        break;
    case KD_GROUND:
        break;
    }
    if (utf8 && d->u.need > 0) {
        flush_utf8(d);
        if (d->state == KD_ESC) {
            d->state = KD_GROUND;
            emit(d, LC_KEY_ESC, 0, NULL, 0);
        }
    }
}

bool lc_keydec_utf8_pending(const struct lc_keydec *d)
{
    return !d->in_paste && d->u.need > 0;
}
