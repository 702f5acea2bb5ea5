/*
 * test-tokenizer.c - the SentencePiece and byte-level BPE tokenizers against llama.cpp's outputs.
 *
 *  1. every case of reference/tokenizer/ggml-vocab-{llama-spm,gpt-2}.gguf.inp tokenizes (no BOS)
 *     to the ids of the matching .out line, and decodes back to the input (gpt-2: up to
 *     llama.cpp's clean_spaces);
 *  2. every `prompt:` of reference/greedy/{stories260K,synth-small}*.txt tokenizes (with BOS) to
 *     its `prompt_ids:`, using the vocab of the file named by `model:`;
 *  3. the gen_ids of stories260K-ff192-q4_1.p0 decode piece by piece to its gen_text;
 *  4. edge cases: empty input, spaces only, invalid UTF-8, special tokens, a 100 KB input, the
 *     -(needed) return of a too small output buffer, pieces of control/byte tokens; random
 *     bytes through both tokenizers.
 */
#include "gguf.h"
#include "testutil.h"
#include "tokenizer.h"

#include <glob.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *p = realloc(buf, 2 * cap + 1);
            if (!p) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = p;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        *len = n;
    }
    return buf;
}

static struct lc_vocab *load_vocab(const char *rel)
{
    char path[1024], *err = NULL;
    tu_shared(rel, path, sizeof(path));
    struct lc_gguf *g = lc_gguf_open(path, &err);
    CHECK(g != NULL, "open %s: %s", path, err ? err : "?");
    free(err);
    err = NULL;
    if (!g)
        return NULL;
    struct lc_vocab *v = lc_vocab_load(g, &err);
    CHECK(v != NULL, "vocab %s: %s", path, err ? err : "?");
    free(err);
    lc_gguf_free(g); /* the vocab must not keep pointers into the file */
    return v;
}

/* Parse whitespace-separated ids from s (up to end or newline) into ids; returns the count. */
static int parse_ids(const char *s, const char *end, int32_t *ids, int max)
{
    int n = 0;
    while (s < end && *s != '\n') {
        if (*s == ' ') {
            s++;
            continue;
        }
        char *e;
        long x = strtol(s, &e, 10);
        if (e == s)
            break;
        if (n < max)
            ids[n] = (int32_t)x;
        n++;
        s = e;
    }
    return n;
}

static bool same_ids(const int32_t *a, int na, const int32_t *b, int nb)
{
    return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof(*a)) == 0);
}

static void print_ids(const char *what, const int32_t *ids, int n)
{
    fprintf(stderr, "  %s:", what);
    for (int i = 0; i < n; i++)
        fprintf(stderr, " %d", ids[i]);
    fputc('\n', stderr);
}

#define MAXT 4096

/* 1. The llama.cpp vocab test vectors of one vocab (name: "llama-spm", "gpt-2").  Decoding
 * must give back the input, except where llama.cpp's clean_spaces (on for gpt-2) rewrites it:
 * cleaned[] lists those cases with the one rewrite expected ("from" becomes "to"). */
struct cleaned {
    int case_no;
    const char *from, *to;
};

static void test_vocab_vectors(const char *name, const struct cleaned *cleaned)
{
    char rel[256];
    snprintf(rel, sizeof(rel), "reference/tokenizer/ggml-vocab-%s.gguf", name);
    struct lc_vocab *v = load_vocab(rel);
    if (!v)
        return;
    char p1[1024], p2[1024], r1[300], r2[300];
    size_t ni = 0, no = 0;
    snprintf(r1, sizeof(r1), "%s.inp", rel);
    snprintf(r2, sizeof(r2), "%s.out", rel);
    char *inp = read_file(tu_shared(r1, p1, sizeof(p1)), &ni);
    char *out = read_file(tu_shared(r2, p2, sizeof(p2)), &no);
    CHECK(inp && out, "reading %s / %s", p1, p2);
    if (!inp || !out) {
        free(inp);
        free(out);
        lc_vocab_free(v);
        return;
    }
    /* A case is the text up to "\n__ggml_vocab_test__\n" (its own last newline is not part of
     * it); the .out file has one line per case. */
    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sl = sizeof(sep) - 1;
    int n_cases = 0, n_pass = 0;
    const char *ip = inp, *iend = inp + ni, *op = out, *oend = out + no;
    static int32_t want[MAXT], got[MAXT];
    while (ip < iend) {
        const char *m = memmem(ip, (size_t)(iend - ip), sep, sl);
        CHECK(m != NULL, "case %d: no separator after it", n_cases + 1);
        if (!m)
            break;
        size_t len = (size_t)(m - ip);
        CHECK(op < oend, "case %d: no .out line", n_cases + 1);
        const char *eol = op < oend ? memchr(op, '\n', (size_t)(oend - op)) : NULL;
        if (!eol)
            eol = oend;
        int nw = parse_ids(op, eol, want, MAXT);
        int ng = lc_tokenize(v, ip, len, false, false, got, MAXT);
        bool ok_ids = same_ids(got, ng, want, nw);
        char *dec = ng >= 0 ? lc_detokenize(v, got, ng, false, true) : NULL;
        char wd[4096];
        size_t wl = len < sizeof(wd) ? len : 0;
        memcpy(wd, ip, wl);
        for (const struct cleaned *c = cleaned; c && c->from; c++) {
            char *at = c->case_no == n_cases + 1 ? memmem(wd, wl, c->from, strlen(c->from)) : NULL;
            CHECK(c->case_no != n_cases + 1 || at, "case %d: no '%s' in it", c->case_no, c->from);
            if (at) {
                size_t fl = strlen(c->from), tl = strlen(c->to);
                memmove(at + tl, at + fl, wl - (size_t)(at - wd) - fl);
                memcpy(at, c->to, tl);
                wl = wl - fl + tl;
            }
        }
        bool ok_dec = dec && strlen(dec) == wl && memcmp(dec, wd, wl) == 0;
        n_cases++;
        n_pass += ok_ids && ok_dec;
        CHECK(ok_ids, "case %d '%.*s': ids differ", n_cases, (int)len, ip);
        CHECK(ok_dec, "case %d '%.*s': decodes to '%s'", n_cases, (int)len, ip, dec ? dec : "");
        if (!ok_ids) {
            print_ids("want", want, nw);
            print_ids("got ", got, ng);
        }
        free(dec);
        ip = m + sl;
        op = eol < oend ? eol + 1 : oend;
    }
    CHECK(n_cases == 46, "%d cases", n_cases);
    CHECK(op == oend, ".out has lines left over");
    fprintf(stderr, "%s vocab vectors: %d/%d cases pass\n", name, n_pass, n_cases);
    free(inp);
    free(out);
    lc_vocab_free(v);
}

/* 2 and 3. Prompts of the greedy references, and decoding of gen_ids. */
static void test_greedy_prompts(void)
{
    char pat[1024];
    glob_t gl;
    int n_files = 0, n_pass = 0, n_decoded = 0;
    static const char *const pats[] = {"reference/greedy/stories260K*.txt",
                                       "reference/greedy/synth-small*.txt"};
    for (int pi = 0; pi < 2; pi++) {
        tu_shared(pats[pi], pat, sizeof(pat));
        if (glob(pat, 0, NULL, &gl) != 0)
            continue;
        for (size_t k = 0; k < gl.gl_pathc; k++) {
            size_t n = 0;
            char *s = read_file(gl.gl_pathv[k], &n);
            CHECK(s != NULL, "read %s", gl.gl_pathv[k]);
            if (!s)
                continue;
            char *model = strstr(s, "model: "), *prompt = strstr(s, "\nprompt: ");
            char *pids = strstr(s, "\nprompt_ids: "), *gids = strstr(s, "\ngen_ids: ");
            char *gtext = strstr(s, "\ngen_text: ");
            CHECK(model == s && prompt && pids && gids && gtext, "%s: format", gl.gl_pathv[k]);
            if (!(model == s && prompt && pids && gids && gtext)) {
                free(s);
                continue;
            }
            char rel[512];
            snprintf(rel, sizeof(rel), "models/%.*s", (int)strcspn(model + 7, "\n"), model + 7);
            struct lc_vocab *v = load_vocab(rel);
            if (!v) {
                free(s);
                continue;
            }
            n_files++;
            prompt += 9;
            size_t plen = strcspn(prompt, "\n");
            static int32_t want[MAXT], got[MAXT];
            int nw = parse_ids(pids + 13, s + n, want, MAXT);
            CHECK(lc_vocab_add_bos(v), "%s: add_bos", rel);
            int ng = lc_tokenize(v, prompt, plen, lc_vocab_add_bos(v), false, got, MAXT);
            bool ok = same_ids(got, ng, want, nw);
            n_pass += ok;
            CHECK(ok, "%s: prompt '%.*s' ids differ", gl.gl_pathv[k], (int)plen, prompt);
            if (!ok) {
                print_ids("want", want, nw);
                print_ids("got ", got, ng);
            }
            /* Decode gen_ids piece by piece; gen_text runs to the end of the file.  The file
             * writer ends it with one '\n' of its own (the last generated piece is a word, see
             * the check below), so the expected text is gen_text without that newline. */
            int ngen = parse_ids(gids + 10, s + n, want, MAXT);
            const char *gt = gtext + 11;
            size_t gtlen = (size_t)(s + n - gt);
            CHECK(gtlen > 0 && gt[gtlen - 1] == '\n', "%s: gen_text ends with a newline", rel);
            gtlen--;
            char *dec = malloc(64 * (size_t)ngen + 1);
            size_t dl = 0;
            for (int i = 0; i < ngen && dec; i++) {
                int32_t r = lc_token_to_piece(v, want[i], dec + dl, 64, false);
                CHECK(r >= 0, "piece of %d", want[i]);
                if (r > 0)
                    dl += (size_t)r;
            }
            bool dok = dec && dl == gtlen && memcmp(dec, gt, gtlen) == 0;
            CHECK(dok, "%s: decoded gen_ids differ from gen_text:\n[%.*s]\n[%.*s]",
                  gl.gl_pathv[k], (int)dl, dec ? dec : "", (int)gtlen, gt);
            n_decoded += dok;
            free(dec);
            lc_vocab_free(v);
            free(s);
        }
        globfree(&gl);
    }
    CHECK(n_files >= 30, "only %d greedy reference files", n_files);
    fprintf(stderr, "greedy prompts: %d/%d match, gen_text decoded: %d/%d\n", n_pass, n_files,
            n_decoded, n_files);
}

static int tok(const struct lc_vocab *v, const char *s, bool bos, bool special, int32_t *out)
{
    return lc_tokenize(v, s, strlen(s), bos, special, out, MAXT);
}

/* 4. Edge cases on the 32000-token llama vocab. */
static void test_edges(void)
{
    struct lc_vocab *v = load_vocab("reference/tokenizer/ggml-vocab-llama-spm.gguf");
    if (!v)
        return;
    static int32_t t[MAXT];
    int n;

    /* Empty input: nothing, or just BOS. */
    CHECK(lc_tokenize(v, "", 0, false, false, t, MAXT) == 0, "empty");
    n = lc_tokenize(v, "", 0, true, false, t, MAXT);
    CHECK(n == 1 && t[0] == 1, "empty + bos: %d", n);
    CHECK(lc_tokenize(v, NULL, 0, false, false, NULL, 0) == 0, "NULL empty");

    /* Spaces only: the prefix space plus the input's, as one piece. */
    n = tok(v, " ", true, false, t);
    CHECK(n == 2 && t[0] == 1 && t[1] == 259, "' ' + bos: %d %d", n, t[1]);

    /* -(needed) when the buffer is too small, and nothing written past n_max. */
    n = tok(v, "Hello world", false, false, t);
    CHECK(n == 2 && t[0] == 15043 && t[1] == 3186, "Hello world: %d", n);
    int32_t small[1] = {-7};
    CHECK(lc_tokenize(v, "Hello world", 11, false, false, small, 1) == -2, "n_max 1");
    CHECK(small[0] == -7, "wrote into a too small buffer");
    CHECK(lc_tokenize(v, "Hello world", 11, true, false, NULL, 0) == -3, "n_max 0 + bos");

    /* Invalid UTF-8: lead bytes take their nominal length, truncated at the end; pieces that
     * are not tokens come out as byte tokens (<0xNN> = NN + 3 in this vocab). */
    n = tok(v, "\xff", false, false, t);
    CHECK(n == 2 && t[0] == 29871 && t[1] == 0xff + 3, "\\xff: %d %d %d", n, t[0], t[1]);
    /* "a\xf0b": the 4-byte lead swallows 'b', so 'b' is emitted as a byte token too. */
    int32_t a_ = lc_vocab_find(v, "\xe2\x96\x81" "a");
    CHECK(a_ == 263, "'_a' = %d", a_);
    n = tok(v, "a\xf0" "b", false, false, t);
    CHECK(n == 3 && t[0] == 263 && t[1] == 0xf0 + 3 && t[2] == 'b' + 3, "a\\xf0b: %d", n);
    char *d;
    /* A truncated sequence before a space swallows the first bytes of its U+2581: they come
     * out as byte tokens and decode as bytes, not as a space (llama.cpp does the same). */
    n = tok(v, "\xe2\x96 ", false, false, t);
    CHECK(n == 6 && t[0] == 29871 && t[1] == 0xe2 + 3 && t[2] == 0x96 + 3 && t[3] == 0xe2 + 3 &&
              t[4] == 0x96 + 3 && t[5] == 0x81 + 3,
          "\\xe2\\x96 + space: %d", n);
    d = lc_detokenize(v, t, n, false, true);
    CHECK(d && strcmp(d, "\xe2\x96\xe2\x96\x81") == 0, "decodes as bytes");
    free(d);
    n = tok(v, "\x80\x80 \xc3", false, false, t);
    CHECK(n > 0, "continuation bytes: %d", n);
    d = lc_detokenize(v, t, n, false, true);
    CHECK(d && strcmp(d, "\x80\x80 \xc3") == 0, "continuation bytes round trip");
    free(d);

    /* Special tokens only with parse_special; each special token restarts the space prefix. */
    n = tok(v, "<s>Hello</s> world", false, true, t);
    CHECK(n >= 4 && t[0] == 1 && t[1] == 15043 && t[2] == 2, "special: %d", n);
    /* " world" after </s> gets the prefix too: "__world", like " Hello" in the vectors. */
    CHECK(n == 5 && t[3] == 29871 && t[4] == 3186, "after </s>: %d %d", t[3], t[4]);
    n = tok(v, "<s>Hello", false, false, t);
    CHECK(n > 2, "not special: %d", n);
    for (int i = 0; i < n && n > 0; i++)
        CHECK(t[i] != 1, "BOS from text without parse_special");
    d = lc_detokenize(v, t, n, false, true);
    CHECK(d && strcmp(d, "<s>Hello") == 0, "'<s>' as text round trip: %s", d ? d : "");
    free(d);

    /* Pieces. */
    char buf[16];
    CHECK(lc_token_to_piece(v, 1, buf, 16, false) == 0, "BOS not special");
    CHECK(lc_token_to_piece(v, 1, buf, 16, true) == 3 && memcmp(buf, "<s>", 3) == 0,
          "BOS special");
    CHECK(lc_token_to_piece(v, 13, buf, 16, false) == 1 && buf[0] == '\n', "<0x0A>");
    CHECK(lc_token_to_piece(v, 15043, buf, 16, false) == 6 && memcmp(buf, " Hello", 6) == 0,
          "_Hello");
    CHECK(lc_token_to_piece(v, 15043, buf, 5, false) == -6, "_Hello in 5 bytes");
    CHECK(lc_token_to_piece(v, 0, buf, 16, false) == 0, "<unk> not special");
    CHECK(lc_token_to_piece(v, -1, buf, 16, true) == 0 && lc_token_to_piece(v, 32000, buf, 16,
                                                                                true) == 0,
          "out of range");
    CHECK(lc_vocab_is_control(v, 1) && lc_vocab_is_control(v, 2) && !lc_vocab_is_control(v, 13),
          "control");
    CHECK(lc_vocab_is_eog(v, 2) && !lc_vocab_is_eog(v, 1), "eog");
    CHECK(lc_vocab_eot(v) == -1, "eot %d", lc_vocab_eot(v));
    CHECK(strcmp(lc_vocab_text(v, 15043), "\xe2\x96\x81Hello") == 0, "text");
    CHECK(lc_vocab_text(v, 32000) == NULL, "text out of range");

    /* Decoding with BOS: the prefix space sits on the token after BOS. */
    n = tok(v, "Hello world", true, false, t);
    d = lc_detokenize(v, t, n, false, true);
    CHECK(d && strcmp(d, "Hello world") == 0, "detok after BOS: '%s'", d ? d : "");
    free(d);
    d = lc_detokenize(v, t, n, true, false);
    CHECK(d && strcmp(d, "<s> Hello world") == 0, "detok special: '%s'", d ? d : "");
    free(d);

    /* 100 KB of varied text: fast, and a lossless round trip. */
    static const char *const words[] = {"the ", "quick ", "Brown ", "fox, ", "jumps\n", "über ",
                                        "\xe6\x97\xa5\xe6\x9c\xac ", "  ", "42 ", "\t", "🦙 "};
    size_t cap = 100 * 1024, len = 0;
    char *big = malloc(cap + 16);
    unsigned seed = 12345;
    while (big && len < cap) {
        seed = seed * 1103515245u + 12345u;
        const char *w = words[(seed >> 16) % (sizeof(words) / sizeof(words[0]))];
        size_t wl = strlen(w);
        memcpy(big + len, w, wl);
        len += wl;
    }
    if (big) {
        int32_t *bt = malloc(sizeof(int32_t) * (len + 2));
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        n = lc_tokenize(v, big, len, true, false, bt, (int32_t)len + 2);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        CHECK(n > 10000 && n < (int)len, "100 KB: %d tokens", n);
        CHECK(ms < 1000.0, "100 KB took %.1f ms", ms);
        fprintf(stderr, "100 KB input: %d tokens in %.1f ms\n", n, ms);
        CHECK(lc_tokenize(v, big, len, true, false, NULL, 0) == -n, "100 KB needed");
        d = n > 0 ? lc_detokenize(v, bt, n, false, true) : NULL;
        CHECK(d && strlen(d) == len && memcmp(d, big, len) == 0, "100 KB round trip");
        free(d);
        free(bt);
    }
    free(big);
    lc_vocab_free(v);
}

/* Byte-level BPE edge cases on the gpt-2 vocab. */
static void test_gpt2_edges(void)
{
    struct lc_vocab *v = load_vocab("reference/tokenizer/ggml-vocab-gpt-2.gguf");
    if (!v)
        return;
    static int32_t t[MAXT];
    int n;
    CHECK(lc_vocab_n_tokens(v) == 50257, "n_tokens %d", lc_vocab_n_tokens(v));
    CHECK(lc_vocab_bos(v) == 50256 && lc_vocab_eos(v) == 50256, "bos/eos");
    CHECK(!lc_vocab_add_bos(v), "gpt-2 adds no BOS");
    /* "<|endoftext|>" is CONTROL and, by its text, also EOT and end-of-generation. */
    CHECK(lc_vocab_eot(v) == 50256 && lc_vocab_is_eog(v, 50256), "eot %d", lc_vocab_eot(v));
    CHECK(lc_tokenize(v, "", 0, false, false, t, MAXT) == 0, "empty");

    n = tok(v, "Hello<|endoftext|> world", false, true, t);
    CHECK(n == 3 && t[0] == 15496 && t[1] == 50256 && t[2] == 995, "special: %d", n);
    n = tok(v, "Hello<|endoftext|> world", false, false, t);
    CHECK(n > 3, "not special: %d", n);
    for (int i = 0; i < n && n > 0; i++)
        CHECK(t[i] != 50256, "<|endoftext|> from text without parse_special");
    char *d = lc_detokenize(v, t, n, false, false);
    CHECK(d && strcmp(d, "Hello<|endoftext|> world") == 0, "round trip: '%s'", d ? d : "");
    free(d);

    /* Pieces: byte-level code points back to bytes; control text only when special. */
    char buf[32];
    CHECK(lc_token_to_piece(v, 995, buf, 32, false) == 6 && memcmp(buf, " world", 6) == 0,
          "piece 995");
    CHECK(lc_token_to_piece(v, 50256, buf, 32, false) == 0, "control not special");
    CHECK(lc_token_to_piece(v, 50256, buf, 32, true) == 13 &&
              memcmp(buf, "<|endoftext|>", 13) == 0,
          "control special");
    CHECK(lc_token_to_piece(v, 198, buf, 32, false) == 1 && buf[0] == '\n', "piece 198");

    /* Invalid UTF-8 becomes U+FFFD before byte-level encoding (llama.cpp's
     * unicode_cpts_from_utf8), so it decodes as EF BF BD. */
    n = tok(v, "a\xff", false, false, t);
    d = lc_detokenize(v, t, n, false, false);
    CHECK(n >= 2 && t[0] == 64 && d && strcmp(d, "a\xef\xbf\xbd") == 0, "a\\xff: %d '%s'", n,
          d ? d : "");
    free(d);
    /* An overlong NUL (C0 80) is accepted as U+0000 and re-encoded as one byte. */
    n = tok(v, "\xc0\x80", false, false, t);
    CHECK(n == 1 && t[0] == 188, "overlong NUL: %d %d", n, t[0]);

    /* clean_spaces on decode: " ," " ." " 's" lose their space, " 't" keeps it. */
    n = tok(v, "Hello , world . It 's ok , don 't", false, false, t);
    d = lc_detokenize(v, t, n, false, false);
    CHECK(d && strcmp(d, "Hello, world. It's ok, don 't") == 0, "clean_spaces: '%s'",
          d ? d : "");
    free(d);

    /* 100 KB: fast and lossless (no clean-up patterns in it). */
    static const char *const words[] = {"the ", "quick ", "Brown ", "fox ", "jumps\n", "über ",
                                        "\xe6\x97\xa5\xe6\x9c\xac ", "  ", "42 ", "\t",
                                        "🦙 ", "it's "};
    size_t cap = 100 * 1024, len = 0;
    char *big = malloc(cap + 16);
    unsigned seed = 777;
    while (big && len < cap) {
        seed = seed * 1103515245u + 12345u;
        const char *w = words[(seed >> 16) % (sizeof(words) / sizeof(words[0]))];
        memcpy(big + len, w, strlen(w));
        len += strlen(w);
    }
    if (big) {
        int32_t *bt = malloc(sizeof(int32_t) * (len + 2));
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        n = lc_tokenize(v, big, len, false, false, bt, (int32_t)len + 2);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        CHECK(n > 10000 && n < (int)len, "100 KB: %d tokens", n);
        CHECK(ms < 1000.0, "100 KB took %.1f ms", ms);
        fprintf(stderr, "gpt-2 100 KB input: %d tokens in %.1f ms\n", n, ms);
        d = n > 0 ? lc_detokenize(v, bt, n, false, false) : NULL;
        CHECK(d && strlen(d) == len && memcmp(d, big, len) == 0, "100 KB round trip");
        free(d);
        free(bt);
    }
    free(big);
    lc_vocab_free(v);
}

/* Strict enough UTF-8 check: lead bytes followed by the right number of continuation bytes. */
static bool valid_utf8(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t l = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (l == 0 || i + l > n)
            return false;
        for (size_t j = 1; j < l; j++)
            if (((unsigned char)s[i + j] & 0xc0) != 0x80)
                return false;
        i += l;
    }
    return true;
}

/* Random bytes (with special-token texts mixed in) never crash either tokenizer, and the
 * SentencePiece one is lossless on the valid UTF-8 ones thanks to byte fallback.  (On invalid
 * UTF-8 it is not: a truncated lead byte swallows the bytes of a following U+2581, which then
 * come back as byte tokens, not as a space; see test_edges.) */
static void test_random_bytes(void)
{
    struct lc_vocab *spm = load_vocab("reference/tokenizer/ggml-vocab-llama-spm.gguf");
    struct lc_vocab *bpe = load_vocab("reference/tokenizer/ggml-vocab-gpt-2.gguf");
    if (!spm || !bpe) {
        lc_vocab_free(spm);
        lc_vocab_free(bpe);
        return;
    }
    static const char *const bits[] = {"<s>", "</s>", "<unk>", "<|endoftext|>", " ", "  ", "\n",
                                       "\xe2\x96", "\xf0\x9f\x98", "'s", "\xc0\x80"};
    static int32_t t[MAXT];
    unsigned seed = 4242;
    int lossless = 0, runs = 400;
    for (int r = 0; r < runs; r++) {
        char s[96];
        size_t len = 0;
        seed = seed * 1103515245u + 12345u;
        size_t target = (seed >> 16) % 64;
        while (len < target) {
            seed = seed * 1103515245u + 12345u;
            unsigned x = seed >> 16;
            if (x % 4 == 0) {
                const char *b = bits[(x >> 2) % (sizeof(bits) / sizeof(bits[0]))];
                memcpy(s + len, b, strlen(b));
                len += strlen(b);
            } else {
                s[len++] = (char)((x >> 3) % 255 + 1); /* no NUL: decoded text is a C string */
            }
        }
        for (int special = 0; special < 2; special++) {
            int n = lc_tokenize(spm, s, len, true, special, t, MAXT);
            CHECK(n >= 1 && n <= 2 * (int)len + 2, "spm run %d: %d tokens", r, n);
            if (!special && n >= 1 && !memmem(s, len, "\xe2\x96\x81", 3)) {
                /* (a literal U+2581 decodes as a space, by design) */
                char *d = lc_detokenize(spm, t, n, false, true);
                bool ok = d && strlen(d) == len && memcmp(d, s, len) == 0;
                CHECK(ok || !valid_utf8(s, len), "spm run %d: not lossless", r);
                lossless += ok;
                free(d);
            }
            n = lc_tokenize(bpe, s, len, false, special, t, MAXT);
            CHECK(n >= 0 && n <= 3 * (int)len, "bpe run %d: %d tokens", r, n);
            char *d = n >= 0 ? lc_detokenize(bpe, t, n, special, false) : NULL;
            CHECK(d != NULL, "bpe run %d: detokenize", r);
            free(d);
        }
    }
    fprintf(stderr, "random bytes: %d runs, %d spm round trips\n", runs, lossless);
    lc_vocab_free(spm);
    lc_vocab_free(bpe);
}

/* ---- vocab files written for the test (lc_gguf_writer) ---- */

static char tmpdir[64];

/* Write a GGUF with the KVs of src (a file under ../shared, or none) changed by edit(), load
 * its vocab; *err gets the loader's message.  The file is removed again. */
static struct lc_vocab *load_variant(const char *src, void (*edit)(struct lc_gguf_writer *),
                                     char **err)
{
    char path[1024], out[128];
    *err = NULL;
    struct lc_gguf_writer *w = lc_gguf_writer_new();
    struct lc_gguf *g = src ? lc_gguf_open(tu_shared(src, path, sizeof(path)), err) : NULL;
    CHECK(w && (!src || g), "writer / open %s", src ? src : "");
    if (!w || (src && !g)) {
        lc_gguf_writer_free(w);
        lc_gguf_free(g);
        return NULL;
    }
    if (g)
        CHECK(lc_gguf_writer_copy_kvs(w, g) == 0, "copy_kvs");
    lc_gguf_free(g);
    edit(w);
    snprintf(out, sizeof(out), "%s/v.gguf", tmpdir);
    char *e = NULL;
    int rc = lc_gguf_writer_begin(w, out, &e);
    if (rc == 0)
        rc = lc_gguf_writer_end(w, &e);
    CHECK(rc == 0, "write %s: %s", out, e ? e : "");
    free(e);
    lc_gguf_writer_free(w);
    if (rc != 0)
        return NULL;
    struct lc_vocab *v = NULL;
    g = lc_gguf_open(out, err);
    CHECK(g != NULL, "reopen: %s", *err ? *err : "");
    if (g)
        v = lc_vocab_load(g, err);
    lc_gguf_free(g);
    unlink(out);
    return v;
}

static void ed_no_model(struct lc_gguf_writer *w) { lc_gguf_writer_remove_key(w, "tokenizer.ggml.model"); }
static void ed_bert(struct lc_gguf_writer *w) { lc_gguf_writer_set_str(w, "tokenizer.ggml.model", "bert"); }
static void ed_no_tokens(struct lc_gguf_writer *w) { lc_gguf_writer_remove_key(w, "tokenizer.ggml.tokens"); }
static void ed_short_scores(struct lc_gguf_writer *w)
{
    float sc[5] = {0};
    lc_gguf_writer_set_arr(w, "tokenizer.ggml.scores", LC_GGUF_FLOAT32, sc, 5);
}
static void ed_float_types(struct lc_gguf_writer *w)
{
    static float ty[32000];
    lc_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", LC_GGUF_FLOAT32, ty, 32000);
}
static void ed_bad_bos(struct lc_gguf_writer *w)
{
    lc_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 99999);
    lc_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false);
}
static void ed_phi3(struct lc_gguf_writer *w) { lc_gguf_writer_set_str(w, "general.name", "Phi-3 mini"); }
static void ed_tekken(struct lc_gguf_writer *w) { lc_gguf_writer_set_str(w, "tokenizer.ggml.pre", "tekken"); }
static void ed_no_merges(struct lc_gguf_writer *w) { lc_gguf_writer_remove_key(w, "tokenizer.ggml.merges"); }
static void ed_llama3_pre(struct lc_gguf_writer *w) { lc_gguf_writer_set_str(w, "tokenizer.ggml.pre", "llama-bpe"); }

/* A 12-token spm vocab whose scores make the merge order visible. */
static const char *const tiny_tokens[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b",
                                          "\xe2\x96\x81" "a", "ab", "<0x0A>", "<|im_end|>",
                                          "<0x62>", "\xe2\x96\x81" "ab"};
static void tiny_common(struct lc_gguf_writer *w, int n)
{
    static const float sc[] = {0, 0, 0, -1, -2, -2, -1, -0.5f, 0, 0, 0, -3};
    static const int32_t ty[] = {2, 3, 3, 1, 1, 1, 1, 1, 6, 1, 6, 1};
    lc_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    lc_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tiny_tokens, (uint64_t)n);
    lc_gguf_writer_set_arr(w, "tokenizer.ggml.scores", LC_GGUF_FLOAT32, sc, (uint64_t)n);
    lc_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", LC_GGUF_INT32, ty, (uint64_t)n);
}
static void ed_tiny(struct lc_gguf_writer *w) { tiny_common(w, 11); }
static void ed_tiny_ab(struct lc_gguf_writer *w) { tiny_common(w, 12); }
static void ed_tiny_dup(struct lc_gguf_writer *w)
{
    tiny_common(w, 11);
    static const char *const dup[] = {"<unk>", "<s>", "</s>", "a", "a"};
    lc_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", dup, 5);
    lc_gguf_writer_remove_key(w, "tokenizer.ggml.scores");
    lc_gguf_writer_remove_key(w, "tokenizer.ggml.token_type");
}

/* The loader: its errors name the file and field; llama.cpp's defaults and by-text rules. */
static void test_load_variants(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/lc-tok-test.XXXXXX");
    if (!mkdtemp(tmpdir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    static const char spm[] = "reference/tokenizer/ggml-vocab-llama-spm.gguf";
    static const char gpt2[] = "reference/tokenizer/ggml-vocab-gpt-2.gguf";
    static const struct {
        const char *src;
        void (*edit)(struct lc_gguf_writer *);
        const char *msg;
    } bad[] = {
        {spm, ed_no_model, "tokenizer.ggml.model: missing"},
        {spm, ed_bert, "tokenizer.ggml.model: unsupported tokenizer 'bert'"},
        {spm, ed_no_tokens, "tokenizer.ggml.tokens: missing"},
        {spm, ed_short_scores, "tokenizer.ggml.scores: 5 elements, expected 32000"},
        {spm, ed_float_types, "tokenizer.ggml.token_type: expected an array of int32"},
        {gpt2, ed_tekken, "tokenizer.ggml.pre: unsupported pre-tokenizer 'tekken'"},
        {gpt2, ed_no_merges, "tokenizer.ggml.merges: missing"},
        {NULL, ed_tiny_dup, "tokenizer.ggml.tokens: tokens 3 and 4 have the same text 'a'"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *err = NULL;
        struct lc_vocab *v = load_variant(bad[i].src, bad[i].edit, &err);
        CHECK(!v && err && strstr(err, "/v.gguf: ") && strstr(err, bad[i].msg),
              "variant %zu: want '%s', got '%s'", i, bad[i].msg, err ? err : "(none)");
        lc_vocab_free(v);
        free(err);
    }
    static int32_t t[64];
    char *err = NULL;

    /* An out-of-range BOS id keeps the default (llama.cpp warns); add_bos_token is read. */
    struct lc_vocab *v = load_variant(spm, ed_bad_bos, &err);
    CHECK(v && lc_vocab_bos(v) == 1 && !lc_vocab_add_bos(v), "bad bos: %s", err ? err : "");
    lc_vocab_free(v);
    free(err);

    /* Phi-3 (by general.name): special tokens strip the whitespace after them, except <s>. */
    v = load_variant(spm, ed_phi3, &err);
    CHECK(v != NULL, "phi3: %s", err ? err : "");
    if (v) {
        int n = tok(v, "</s>  Hello", false, true, t);
        CHECK(n == 2 && t[0] == 2 && t[1] == 15043, "phi3 </s> rstrip: %d", n);
        n = tok(v, "<s> Hello", false, true, t);
        CHECK(n == 3 && t[0] == 1 && t[1] == 29871 && t[2] == 15043, "phi3 <s> no rstrip: %d", n);
        lc_vocab_free(v);
    }
    free(err);

    /* A llama3 pre-tokenizer on the gpt-2 vocab: digits in groups of three, merges skipped for
     * whole-token words (ignore_merges), BOS on by default. */
    v = load_variant(gpt2, ed_llama3_pre, &err);
    CHECK(v != NULL, "llama-bpe: %s", err ? err : "");
    if (v) {
        CHECK(lc_vocab_add_bos(v), "llama3 adds BOS");
        int n = tok(v, "1234567", false, false, t);
        char p0[8] = "", p1[8] = "", p2[8] = "";
        if (n == 3) {
            p0[lc_token_to_piece(v, t[0], p0, 7, false)] = 0;
            p1[lc_token_to_piece(v, t[1], p1, 7, false)] = 0;
            p2[lc_token_to_piece(v, t[2], p2, 7, false)] = 0;
        }
        CHECK(n == 3 && !strcmp(p0, "123") && !strcmp(p1, "456") && !strcmp(p2, "7"),
              "llama3 digits: %d '%s' '%s' '%s'", n, p0, p1, p2);
        lc_vocab_free(v);
    }
    free(err);

    /* The tiny vocab: "ab" (score -0.5) merges before "_a" (-1), so " ab" is "_" "ab"; with
     * "_ab" in the vocab it then merges on.  "\n" falls back to <0x0A>; "<|im_end|>" is found by
     * its text as EOT, made CONTROL and end-of-generation. */
    v = load_variant(NULL, ed_tiny, &err);
    CHECK(v != NULL, "tiny: %s", err ? err : "");
    if (v) {
        int n = tok(v, "ab", false, false, t);
        CHECK(n == 2 && t[0] == 3 && t[1] == 7, "tiny 'ab': %d %d %d", n, t[0], t[1]);
        n = tok(v, "a\n", false, false, t);
        CHECK(n == 2 && t[0] == 6 && t[1] == 8, "tiny 'a\\n': %d", n);
        /* 'c' has neither a piece nor a byte token: llama.cpp throws, we give UNK. */
        n = tok(v, "c", false, false, t);
        CHECK(n == 2 && t[0] == 3 && t[1] == 0, "tiny 'c': %d", n);
        CHECK(lc_vocab_eot(v) == 9 && lc_vocab_is_control(v, 9) && lc_vocab_is_eog(v, 9) &&
                  lc_vocab_is_eog(v, 2),
              "tiny eot %d", lc_vocab_eot(v));
        n = tok(v, "a<|im_end|>", false, true, t);
        CHECK(n == 2 && t[0] == 6 && t[1] == 9, "tiny im_end: %d", n);
        char buf[16];
        CHECK(lc_token_to_piece(v, 10, buf, 16, false) == 1 && buf[0] == 'b', "<0x62>");
        lc_vocab_free(v);
    }
    free(err);
    v = load_variant(NULL, ed_tiny_ab, &err);
    if (v) {
        int n = tok(v, "ab", false, false, t);
        CHECK(n == 1 && t[0] == 11, "tiny '_ab': %d %d", n, t[0]);
        lc_vocab_free(v);
    }
    free(err);
    rmdir(tmpdir);
    CHECK(lc_vocab_load(NULL, NULL) == NULL, "NULL gguf");
}

int main(void)
{
    test_vocab_vectors("llama-spm", NULL);
    /* gpt-2 decoding drops the space of " ?" (cases 33 and 46, after an emoji). */
    static const struct cleaned gpt2_cleaned[] = {{33, "\xf0\x9f\x98\x81 ?", "\xf0\x9f\x98\x81?"},
                                                  {46, "\xf0\x9f\x98\x81 ?", "\xf0\x9f\x98\x81?"},
                                                  {0, NULL, NULL}};
    test_vocab_vectors("gpt-2", gpt2_cleaned);
    test_greedy_prompts();
    test_edges();
    test_gpt2_edges();
    test_random_bytes();
    test_load_variants();
    return tu_finish("test-tokenizer");
}
