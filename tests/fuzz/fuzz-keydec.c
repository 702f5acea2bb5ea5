/*
 * fuzz-keydec.c - libFuzzer harness for the terminal input decoder (not built by `make`;
 * tests/fuzz/run.sh).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
 *     -D_GNU_SOURCE -Isrc tests/fuzz/fuzz-keydec.c src/tui/keydec.c -o fuzz-keydec
 *   ./fuzz-keydec -max_len=4096 -max_total_time=60 corpus-copy/
 *
 * Byte 0 of the input is a mode: bit 0, 0xFE 0xNN stands for the curses key code 0x100 + NN
 * (as wgetch returns KEY_LEFT & co.) instead of the two bytes; bits 1-7 (k), a flush
 * (lc_keydec_flush, utf8 on every other time) after every k fed values, as when input pauses.
 * The rest is fed to lc_keydec_feed, then flushed.  Every key must be sound: CHAR and ALT carry
 * a Unicode scalar value (<= U+10FFFF, no surrogate), CODE a value >= 256, SEQ text starts with
 * ESC, PASTE text is valid UTF-8 without NUL or CR and at most LC_KEYDEC_PASTE_MAX bytes; and
 * after the last flush no UTF-8 sequence is left pending.
 */
#include "tui/keydec.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool scalar(uint32_t c)
{
    return c <= 0x10FFFF && !(c >= 0xD800 && c <= 0xDFFF);
}

static bool valid_utf8(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t k;
        uint32_t cp;
        if (c < 0x80) { i++; continue; }
        else if (c >= 0xC2 && c <= 0xDF) { k = 1; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { k = 2; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { k = 3; cp = c & 0x07; }
        else return false;
        if (i + k >= n)
            return false;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if ((k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += k + 1;
    }
    return true;
}

static void on_key(void *ud, const struct lc_key *k)
{
    (void)ud;
    switch (k->type) {
    case LC_KEY_CHAR:
    case LC_KEY_ALT:
        if (!scalar(k->ch))
            abort();
        break;
    case LC_KEY_CODE:
        if (k->ch < 256)
            abort();
        break;
    case LC_KEY_ESC:
        break;
    case LC_KEY_SEQ:
        if (!k->text || k->len < 1 || k->text[0] != '\x1b')
            abort();
        break;
    case LC_KEY_PASTE:
        if ((k->len && !k->text) || k->len > LC_KEYDEC_PASTE_MAX ||
            !valid_utf8((const unsigned char *)k->text, k->len) || memchr(k->text, '\0', k->len) ||
            memchr(k->text, '\r', k->len))
            abort();
        break;
    default:
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool codes = data[0] & 1;
    unsigned every = data[0] >> 1;
    struct lc_keydec d;
    lc_keydec_init(&d, on_key, NULL);
    unsigned fed = 0, flushes = 0;
    for (size_t i = 1; i < size; i++) {
        int c = data[i];
        if (codes && c == 0xFE && i + 1 < size)
            c = 0x100 + data[++i];
        lc_keydec_feed(&d, c);
        if (every && ++fed % every == 0)
            lc_keydec_flush(&d, ++flushes & 1);
    }
    lc_keydec_flush(&d, true);
    if (lc_keydec_utf8_pending(&d))
        abort();
    lc_keydec_free(&d);
    return 0;
}
