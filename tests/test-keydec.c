/* test-keydec.c - the terminal input decoder (src/tui/keydec.c): UTF-8 with U+FFFD per maximal
 * subpart, valid bytes after invalid ones kept, Esc vs Alt vs sequences, bracketed paste. */
#include <string.h>

#include "../src/tui/keydec.h"
#include "testutil.h"

/* Keys rendered as text: chars as UTF-8, Esc as <E>, Alt-x as <A:x>, a code as <K:n>,
 * a sequence as <S:bytes after ESC>, a paste as <P:text>. */
static char out[4096];
static size_t out_len;

static void put(const char *s, size_t n)
{
    if (out_len + n < sizeof(out)) {
        memcpy(out + out_len, s, n);
        out_len += n;
        out[out_len] = '\0';
    }
}

static size_t enc(uint32_t c, char *o)
{
    if (c < 0x80) { o[0] = (char)c; return 1; }
    if (c < 0x800) { o[0] = (char)(0xC0 | (c >> 6)); o[1] = (char)(0x80 | (c & 0x3F)); return 2; }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12)); o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F)); return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18)); o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F)); o[3] = (char)(0x80 | (c & 0x3F)); return 4;
}

static void on_key(void *ud, const struct lc_key *k)
{
    (void)ud;
    char b[64];
    size_t n;
    switch (k->type) {
    case LC_KEY_CHAR: n = enc(k->ch, b); put(b, n); break;
    case LC_KEY_ESC: put("<E>", 3); break;
    case LC_KEY_ALT: put("<A:", 3); n = enc(k->ch, b); put(b, n); put(">", 1); break;
    case LC_KEY_CODE: n = (size_t)snprintf(b, sizeof b, "<K:%u>", (unsigned)k->ch); put(b, n); break;
    case LC_KEY_SEQ: put("<S:", 3); put(k->text + 1, k->len - 1); put(">", 1); break;
    case LC_KEY_PASTE: put("<P:", 3); put(k->text, k->len); put(">", 1); break;
    }
}

/* Feed bytes (then flush, utf8 included, when flush) and compare what came out. */
static void run(const char *name, const char *in, size_t n, bool flush, const char *want, size_t want_invalid)
{
    struct lc_keydec d;
    lc_keydec_init(&d, on_key, NULL);
    out_len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        lc_keydec_feed(&d, (unsigned char)in[i]);
    if (flush)
        lc_keydec_flush(&d, true);
    CHECK(strcmp(out, want) == 0, "%s: got '%s', want '%s'", name, out, want);
    CHECK(d.n_invalid == want_invalid, "%s: %zu invalid, want %zu", name, d.n_invalid, want_invalid);
    lc_keydec_free(&d);
}
#define RUN(name, in, flush, want, inv) run(name, in, sizeof(in) - 1, flush, want, inv)

int main(void)
{
    /* plain and valid multi-byte text */
    RUN("ascii", "abc", true, "abc", 0);
    RUN("utf8", "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80", true, "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80", 0);
    /* a Latin-1 byte: one U+FFFD, nothing lost around it */
    RUN("latin1", "caf\xe9!", true, "caf\xef\xbf\xbd!", 1);
    /* a lead byte then a valid ASCII byte: the ASCII byte is kept (tmux send-keys -H c3 28) */
    RUN("c3 28", "\xc3\x28", true, "\xef\xbf\xbd(", 1);
    /* a burst of invalid bytes keeps the text after it */
    RUN("burst", "\xff\xfe\x80\x80\xc0\xafok", true,
        "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdok", 6);
    /* maximal subparts (Unicode 3.9, table 3-8): E1 80 then 41 is one U+FFFD; ED A0 80 (a
     * surrogate) is three; F4 90 is two; F0 9F 98 cut short then 'x' is one */
    RUN("e1 80 41", "\xe1\x80\x41", true, "\xef\xbf\xbd" "A", 1);
    RUN("surrogate", "\xed\xa0\x80", true, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 3);
    RUN("above 10FFFF", "\xf4\x90", true, "\xef\xbf\xbd\xef\xbf\xbd", 2);
    RUN("cut short", "\xf0\x9f\x98x", true, "\xef\xbf\xbdx", 1);
    /* an incomplete sequence waits (no flush) and is U+FFFD once flushed */
    RUN("pending", "a\xe6\x97", false, "a", 0);
    RUN("pending flushed", "a\xe6\x97", true, "a\xef\xbf\xbd", 1);
    /* Esc: alone, repeated (never Alt-Esc), Alt-key, sequences curses did not decode */
    RUN("esc alone", "conf\033", true, "conf<E>", 0);
    RUN("esc x4", "conf\033\033\033\033", true, "conf<E><E><E><E>", 0);
    RUN("alt-b", "\033b", true, "<A:b>", 0);
    RUN("alt-enter", "x\033\r", true, "x<A:\r>", 0);
    RUN("alt-utf8", "\033\xc3\xa9", true, "<A:\xc3\xa9>", 0);
    RUN("csi", "\033[1;5C", true, "<S:[1;5C>", 0);
    /* Alt-Left / Alt-Right where terminfo has no kLFT3 / kRIT3 (tui.c flips the reply's versions) */
    RUN("alt-left", "\033[1;3D\033[1;3C", true, "<S:[1;3D><S:[1;3C>", 0);
    RUN("ss3", "\033OH", true, "<S:OH>", 0);
    RUN("invalid then esc", "\xc3\033", true, "\xef\xbf\xbd<E>", 1);
    /* bracketed paste: one text, CR and CRLF made LF, bad bytes U+FFFD, text after kept */
    RUN("paste", "\033[200~one\rtwo\r\nthree\033[201~x", true, "<P:one\ntwo\nthree>x", 0);
    RUN("paste latin1", "\033[200~caf\xe9\033[201~", true, "<P:caf\xef\xbf\xbd>", 1);
    RUN("paste with esc", "\033[200~a\033[2b\033[201~", true, "<P:a\033[2b>", 0);
    RUN("paste open", "\033[200~abc", true, "", 0);
    {   /* a paste whose end marker never comes is closed by the caller after a pause */
        struct lc_keydec d;
        lc_keydec_init(&d, on_key, NULL);
        out_len = 0;
        out[0] = '\0';
        const char *in = "\033[200~ab\033[20";
        for (size_t i = 0; in[i]; i++)
            lc_keydec_feed(&d, (unsigned char)in[i]);
        CHECK(lc_keydec_in_paste(&d) && out[0] == '\0', "lost end: still open, nothing out");
        lc_keydec_end_paste(&d);
        lc_keydec_feed(&d, 'x');
        lc_keydec_flush(&d, true);
        CHECK(!lc_keydec_in_paste(&d) && strcmp(out, "<P:ab\033[20>x") == 0,
              "lost end: got '%s'", out);
        lc_keydec_free(&d);
    }
    RUN("stray paste end", "\033[201~ok", true, "ok", 0);

    /* a curses key code between bytes: a pending character is invalid, the code is kept */
    struct lc_keydec d;
    lc_keydec_init(&d, on_key, NULL);
    out_len = 0;
    lc_keydec_feed(&d, 0xc3);
    lc_keydec_feed(&d, 0404);   /* KEY_LEFT */
    lc_keydec_feed(&d, 'a');
    CHECK(strcmp(out, "\xef\xbf\xbd<K:260>a") == 0, "code: '%s'", out);
    lc_keydec_free(&d);
    return tu_finish("test-keydec");
}
