/*
 * fuzz-tokenizer.c - libFuzzer harness for the tokenizers (not built by `make`; tests/fuzz/run.sh).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
 *     -D_GNU_SOURCE -Isrc/llm tests/fuzz/fuzz-tokenizer.c src/llm/tokenizer.c src/llm/gguf.c \
 *     src/llm/strbuf.c src/llm/quant.c src/llm/quant_k.c $(pkg-config --cflags --libs libpcre2-8) \
 *     -lm -o fuzz-tokenizer
 *   LC_SHARED=../shared ./fuzz-tokenizer -max_len=512 -max_total_time=60 corpus-copy/
 *
 * The vocabs (reference/tokenizer/ggml-vocab-llama-spm.gguf, SentencePiece, and
 * ggml-vocab-gpt-2.gguf, byte-level BPE; from $LC_SHARED, default ../shared) are loaded once.
 * The first input byte holds flags (add_bos, parse_special, space_prefix), the rest is the text;
 * the text's bytes double as the plain mask of lc_tokenize_mixed (bit 0 of each byte).  For both
 * vocabs and both tokenizers:
 *   - a result is >= 0 and every id is in 0 .. n_vocab-1;
 *   - with no room (n_max 0) the result is -(needed) or 0 when nothing is needed, n_max
 *     needed-1 gives -(needed) again, and n_max needed gives the same ids as a large buffer;
 *   - lc_detokenize and lc_vocab_piece answer for every id (and for ids out of range);
 * and for the SentencePiece vocab, a text of valid UTF-8 with no NUL and no U+2581 tokenized
 * without special tokens detokenizes back to itself (gpt-2's decoder cleans spaces as llama.cpp, so no round
 * trip there).
 */
#include "gguf.h"
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct lc_vocab *spm, *bpe;
static size_t max_piece[2];   /* lc_vocab_max_piece_len of each (a scan of the whole vocab) */

static struct lc_vocab *load(const char *name)
{
    const char *dir = getenv("LC_SHARED");
    char path[4096];
    snprintf(path, sizeof(path), "%s/reference/tokenizer/%s", dir && *dir ? dir : "../shared",
             name);
    char *err = NULL;
    struct lc_gguf *g = lc_gguf_open(path, &err);
    struct lc_vocab *v = g ? lc_vocab_load(g, &err) : NULL;
    if (!v) {
        fprintf(stderr, "fuzz-tokenizer: %s: %s\n", path, err ? err : "?");
        exit(2);
    }
    lc_gguf_free(g);   /* the vocab keeps its own copy of the metadata */
    return v;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    spm = load("ggml-vocab-llama-spm.gguf");
    bpe = load("ggml-vocab-gpt-2.gguf");
    max_piece[0] = lc_vocab_max_piece_len(spm);
    max_piece[1] = lc_vocab_max_piece_len(bpe);
    return 0;
}

static bool valid_utf8(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
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

#define MAXT 8192

/* Tokenize (mixed when plain != NULL) into out, checking the -(needed) protocol and the ids.
 * Returns the token count. */
static int32_t tok(const struct lc_vocab *v, const char *text, size_t len, const uint8_t *plain,
                   bool mixed, bool bos, bool special, bool space, int32_t *out)
{
    static int32_t again[MAXT];
    int32_t n_vocab = lc_vocab_n_tokens(v);
#define TOK(o, nmax) (mixed ? lc_tokenize_mixed(v, text, len, plain, bos, special, space, o, nmax) \
                            : lc_tokenize(v, text, len, bos, special, o, nmax))
    int32_t n = TOK(out, MAXT);
    if (n < 0 || n > MAXT)   /* inputs are short: MAXT tokens is always room enough */
        abort();
    for (int32_t i = 0; i < n; i++)
        if (out[i] < 0 || out[i] >= n_vocab)
            abort();
    int32_t r0 = TOK(again, 0);
    if (n == 0 ? r0 != 0 : r0 != -n)
        abort();
    if (n > 0) {
        if (n > 1 && TOK(again, n - 1) != -n)
            abort();
        if (TOK(again, n) != n || memcmp(again, out, (size_t)n * sizeof(*out)) != 0)
            abort();
    }
#undef TOK
    return n;
}

static void pieces(const struct lc_vocab *v, size_t maxp, const int32_t *ids, int32_t n)
{
    size_t sum = 0;
    for (int32_t i = 0; i < n; i++) {
        for (int s = 0; s < 2; s++) {
            size_t len = 12345;
            const char *p = lc_vocab_piece(v, ids[i], s, &len);
            if (!p || len > maxp + 4)
                abort();
            if (len)
                sum += (uint8_t)p[0] + (uint8_t)p[len - 1];
            char buf[8];
            int32_t r = lc_token_to_piece(v, ids[i], buf, sizeof(buf), s);
            if (r < -(int32_t)maxp - 4 || r > (int32_t)sizeof(buf))
                abort();
        }
    }
    if (sum == 1)   /* keeps the reads */
        fputc(' ', stderr);
    /* ids out of range give "" */
    const int32_t bad[] = { -1, lc_vocab_n_tokens(v), INT32_MIN, INT32_MAX };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t len = 7;
        const char *p = lc_vocab_piece(v, bad[i], true, &len);
        if (!p || len != 0)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int32_t ids[MAXT];
    if (size < 1 || size > 2048)
        return 0;
    uint8_t flags = data[0];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    bool bos = flags & 1, special = flags & 2, space = flags & 4;
    uint8_t *plain = malloc(len + 1);
    if (!plain)
        return 0;
    for (size_t i = 0; i < len; i++)
        plain[i] = (uint8_t)text[i] & 1;

    const struct lc_vocab *vs[2] = { spm, bpe };
    for (int k = 0; k < 2; k++) {
        const struct lc_vocab *v = vs[k];
        for (int mixed = 0; mixed < 2; mixed++) {
            int32_t n = tok(v, text, len, plain, mixed, bos, special, space, ids);
            pieces(v, max_piece[k], ids, n);
            for (int s = 0; s < 2; s++) {
                char *d = lc_detokenize(v, ids, n, s, s);
                if (!d)
                    abort();
                free(d);
            }
        }
        /* the plain mask all set: no special token can come out of the text */
        memset(plain, 1, len);
        int32_t n = tok(v, text, len, plain, true, bos, true, space, ids);
        for (int32_t i = 0; i < n; i++)
            if (lc_vocab_is_control(v, ids[i]) && !(bos && i == 0 && ids[i] == lc_vocab_bos(v)))
                abort();
    }

    /* SentencePiece round trip: valid UTF-8 text without NUL (lc_detokenize's string ends at
     * the first NUL) and without U+2581 (the space marker: it decodes to ' ', as in llama.cpp),
     * no special tokens. */
    if (valid_utf8((const uint8_t *)text, len) && !memchr(text, '\0', len) &&
        !memmem(text, len, "\xe2\x96\x81", 3)) {
        int32_t n = lc_tokenize(spm, text, len, true, false, ids, MAXT);
        char *d = lc_detokenize(spm, ids, n, false, true);
        if (!d || strlen(d) != len || memcmp(d, text, len) != 0) {
            fprintf(stderr, "round trip: %zu bytes in, '%s' out\n", len, d ? d : "(null)");
            abort();
        }
        free(d);
    }
    free(plain);
    return 0;
}
