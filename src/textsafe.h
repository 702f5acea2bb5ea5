/*
 * textsafe.h - showing untrusted text on a terminal or in a file meant for people.
 *
 * Text from the model (generated pieces), from a GGUF file (general.name, the chat template,
 * tensor names in error messages) and from a loaded transcript is untrusted: written raw, an
 * ESC, CSI/OSC/DCS sequence, a C1 control or a DEL could move the cursor, clear the screen, set
 * the window title or the clipboard (OSC 52) of whoever reads it.  Every such path goes through
 * lc_text_visible(), the one place that decides what a character looks like:
 *
 *   newline, tab                    kept as they are
 *   C0 control 0x00..0x1F           U+2400 + byte, the control pictures (ESC -> U+241B)
 *   DEL 0x7F                        U+2421
 *   C1 control U+0080..U+009F       U+FFFD (encoded C2 80..C2 9F; there are no pictures for C1)
 *   a byte that is not valid UTF-8  U+FFFD, one per byte (a raw 0x9B is never a CSI)
 *   any other valid UTF-8           kept
 *
 * Once its ESC is shown as U+241B, the rest of an escape sequence is plain printable text.
 * The full-screen chat (tui/view.c) decodes with it, adding the terminal's wcwidth rules; the
 * one-shot mode (cli.c) uses it when stdout is a terminal; Markdown transcripts (chat.c) and
 * messages on stderr and in the status bar use it always.
 */
#ifndef LC_TEXTSAFE_H
#define LC_TEXTSAFE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "llm/strbuf.h"

#define LC_UTF8_INVALID ((size_t)-1)
#define LC_UTF8_INCOMPLETE ((size_t)-2)

/*
 * Decode one UTF-8 character from s[0..n), n >= 1, strictly (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF).  Returns its length 1..4 with the code point in *cp;
 * LC_UTF8_INVALID if s[0] does not start a valid character (the caller skips one byte); or
 * LC_UTF8_INCOMPLETE if s[0..n) is a valid beginning cut short (wait for more bytes).
 */
size_t lc_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
/* Encode cp (<= U+10FFFF, not a surrogate) into out; returns the length 1..4. */
size_t lc_utf8_encode(uint32_t cp, char out[4]);
/* True if s[0..n) is entirely valid UTF-8 (per lc_utf8_decode; NUL bytes count as valid). */
bool lc_utf8_valid(const char *s, size_t n);

/*
 * The visible form of the next character of s[0..n), n >= 1 (table above).  Returns the bytes
 * it takes (1..4) and the code point to show in *shown; or 0 when s is an incomplete UTF-8
 * sequence and !final (more bytes may come: keep them).  With final, an incomplete sequence
 * shows one U+FFFD per byte.
 */
size_t lc_text_visible(const char *s, size_t n, bool final, uint32_t *shown);

/*
 * Append the visible form of s[0..n) to b as UTF-8.  Returns the bytes of s consumed: n, or
 * less when !final and s ends in an incomplete UTF-8 sequence (at most 3 bytes left, to be
 * passed again with the next piece).  Allocation failure sets b->oom (strbuf.h).
 */
size_t lc_text_sanitize(struct lc_strbuf *b, const char *s, size_t n, bool final);

/* The visible form of the NUL-terminated s, malloc'd (caller frees); NULL on allocation
 * failure or when s is NULL. */
char *lc_text_safe(const char *s);

/*
 * printf into f with the whole formatted text made visible (newlines and tabs kept): for
 * messages that include model-derived strings (names, templates, file names, errors).
 * Returns the bytes written, or -1 on a formatting or allocation failure (nothing written).
 */
int lc_text_fprintf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Streaming to a terminal: pieces may split a UTF-8 character; up to 3 bytes are held back. */
struct lc_text_stream {
    char held[4];
    size_t n_held;
};
/* Write the visible form of s[0..n) to f, holding back an incomplete trailing sequence. */
void lc_text_stream_write(struct lc_text_stream *st, FILE *f, const char *s, size_t n);
/* Write what is held back (as U+FFFD per byte: the text ended inside a character). */
void lc_text_stream_flush(struct lc_text_stream *st, FILE *f);

#endif
