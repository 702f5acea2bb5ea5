/*
 * keydec.h - turn the terminal's input (bytes and curses key codes, as wgetch returns them)
 * into keys, without ever waiting for more input.
 *
 * The decoder is a small state machine fed one wgetch() result at a time.  It decodes UTF-8
 * itself (an invalid or truncated sequence becomes one U+FFFD per maximal subpart, as Unicode
 * section 3.9 and the WHATWG decoder do, and the byte that broke it is decoded afresh), splits
 * Esc from Alt-key and from escape sequences curses did not recognise, and collects a bracketed
 * paste (ESC [ 200 ~ ... ESC [ 201 ~) into one text.  It has no curses and no readline, so it
 * is unit-tested on its own (tests/test-keydec.c).
 */
#ifndef LC_TUI_KEYDEC_H
#define LC_TUI_KEYDEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Incremental UTF-8 decoder state (all zero = ground). */
struct lc_utf8 {
    uint32_t cp;            /* bits gathered so far */
    int need;               /* continuation bytes still expected */
    unsigned char lo, hi;   /* accepted range of the next continuation byte */
};

/*
 * Decode one byte.  out receives 0, 1 or 2 code points: an invalid byte or a byte that ends a
 * sequence too early gives U+FFFD (and, in the latter case, the byte is decoded again as the
 * start of what follows).  Returns the number of code points stored; *n_invalid (if not NULL)
 * is increased by the number of U+FFFD produced for bad input.
 */
int lc_utf8_step(struct lc_utf8 *u, unsigned char b, uint32_t out[2], size_t *n_invalid);
/* End of input: a sequence left incomplete gives one U+FFFD (returns 1) and is forgotten. */
int lc_utf8_flush(struct lc_utf8 *u, uint32_t out[1], size_t *n_invalid);

enum lc_key_type {
    LC_KEY_CHAR,    /* ch: a code point (U+FFFD for bad input) */
    LC_KEY_CODE,    /* ch: a curses key code (KEY_LEFT, KEY_MOUSE, ...) */
    LC_KEY_ESC,     /* Esc pressed alone */
    LC_KEY_ALT,     /* Alt (Esc prefix) + ch, a code point */
    LC_KEY_SEQ,     /* an escape sequence curses did not decode: text, len (starts with ESC) */
    LC_KEY_PASTE,   /* a bracketed paste: text, len of valid UTF-8, CR/CRLF made LF, no NUL */
};

struct lc_key {
    enum lc_key_type type;
    uint32_t ch;
    const char *text;       /* SEQ, PASTE: owned by the decoder, valid during the callback */
    size_t len;
    size_t dropped;         /* PASTE: bytes left out beyond LC_KEYDEC_PASTE_MAX */
};

/* A paste keeps at most this many bytes of text (1 MiB); the rest is counted in `dropped`. */
#define LC_KEYDEC_PASTE_MAX ((size_t)1 << 20)

typedef void (*lc_key_fn)(void *ud, const struct lc_key *k);

struct lc_keydec {
    lc_key_fn fn;
    void *ud;
    enum { KD_GROUND, KD_ESC, KD_CSI, KD_SS3 } state;
    struct lc_utf8 u;
    bool alt;               /* the code point being decoded follows an Esc */
    char seq[32];
    size_t seq_len;
    /* bracketed paste */
    bool in_paste;
    struct lc_utf8 pu;
    int end_match;          /* bytes of ESC [ 2 0 1 ~ matched */
    bool prev_cr;
    char *paste;
    size_t paste_len, paste_cap, paste_dropped;
    size_t n_invalid;       /* U+FFFD produced for bad bytes since init (for a note) */
};

/* Start a decoder that reports keys to fn(ud, key). */
void lc_keydec_init(struct lc_keydec *d, lc_key_fn fn, void *ud);
/* Free the paste buffer. */
void lc_keydec_free(struct lc_keydec *d);
/*
 * Feed one wgetch() result: a byte 0..255, or a curses key code (>= 256).  Keys complete with
 * it are reported before this returns.
 */
void lc_keydec_feed(struct lc_keydec *d, int c);
/*
 * No more input is available now.  A pending Esc is reported as Esc (curses has already waited
 * ESCDELAY for a sequence to follow), an unfinished escape sequence as it is; with utf8 true an
 * incomplete UTF-8 sequence becomes U+FFFD too (call it so once input has paused, e.g. 50 ms:
 * a terminal may split a character between two reads).  An open paste stays open.
 */
void lc_keydec_flush(struct lc_keydec *d, bool utf8);
/* True while a bracketed paste is open (its end marker not seen yet). */
bool lc_keydec_in_paste(const struct lc_keydec *d);
/* Close an open paste as if its end marker had come (the terminal lost it): the text so far
 * goes out as one LC_KEY_PASTE.  The caller does this after a pause in the input, so that a
 * missing ESC [ 201 ~ cannot swallow every later key. */
void lc_keydec_end_paste(struct lc_keydec *d);

/* True when an incomplete UTF-8 sequence waits for its next byte (outside a paste). */
bool lc_keydec_utf8_pending(const struct lc_keydec *d);

#endif
