/*
 * test-tokenizer.c - the SentencePiece tokenizer against llama.cpp's outputs.
 *
 *  1. every case of reference/tokenizer/ggml-vocab-llama-spm.gguf.inp tokenizes (no BOS) to the
 *     ids of the matching .out line, and decodes back to the input;
 *  2. every `prompt:` of reference/greedy/{stories260K,synth-small}*.txt tokenizes (with BOS) to
 *     its `prompt_ids:`, using the vocab of the file named by `model:`;
 *  3. the gen_ids of stories260K-ff192-q4_1.p0 decode piece by piece to its gen_text;
 *  4. edge cases: empty input, spaces only, invalid UTF-8, special tokens, a 100 KB input, the
 *     -(needed) return of a too small output buffer, pieces of control/byte tokens.
 */
#include "gguf.h"
#include "testutil.h"
#include "tokenizer.h"

#include <glob.h>
#include <string.h>
#include <time.h>

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

/* 1. The llama.cpp vocab test vectors. */
static void test_vocab_vectors(void)
{
    struct lc_vocab *v = load_vocab("reference/tokenizer/ggml-vocab-llama-spm.gguf");
    if (!v)
        return;
    CHECK(lc_vocab_n_tokens(v) == 32000, "n_tokens %d", lc_vocab_n_tokens(v));
    CHECK(lc_vocab_bos(v) == 1 && lc_vocab_eos(v) == 2, "bos %d eos %d", lc_vocab_bos(v),
          lc_vocab_eos(v));
    char p1[1024], p2[1024];
    size_t ni = 0, no = 0;
    char *inp = read_file(tu_shared("reference/tokenizer/ggml-vocab-llama-spm.gguf.inp", p1,
                                    sizeof(p1)), &ni);
    char *out = read_file(tu_shared("reference/tokenizer/ggml-vocab-llama-spm.gguf.out", p2,
                                    sizeof(p2)), &no);
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
        const char *eol = memchr(op, '\n', (size_t)(oend - op));
        if (!eol)
            eol = oend;
        int nw = parse_ids(op, eol, want, MAXT);
        int ng = lc_tokenize(v, ip, len, false, false, got, MAXT);
        bool ok_ids = same_ids(got, ng, want, nw);
        char *dec = ng >= 0 ? lc_detokenize(v, got, ng, false, true) : NULL;
        bool ok_dec = dec && strlen(dec) == len && memcmp(dec, ip, len) == 0;
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
    fprintf(stderr, "llama-spm vocab vectors: %d/%d cases pass\n", n_pass, n_cases);
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
    n = tok(v, "\x80\x80 \xc3", false, false, t);
    CHECK(n > 0, "continuation bytes: %d", n);
    char *d = lc_detokenize(v, t, n, false, true);
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

/* The vocab loader rejects what it cannot use, with a message. */
static void test_load_errors(void)
{
    char path[1024], *err = NULL;
    struct lc_gguf *g = lc_gguf_open(tu_shared("reference/tokenizer/ggml-vocab-gpt-2.gguf", path,
                                               sizeof(path)), &err);
    CHECK(g != NULL, "open gpt-2 vocab: %s", err ? err : "");
    free(err);
    err = NULL;
    if (!g)
        return;
    struct lc_vocab *v = lc_vocab_load(g, &err);
    if (v) {
        CHECK(lc_vocab_n_tokens(v) == 50257, "gpt-2 n_tokens %d", lc_vocab_n_tokens(v));
        lc_vocab_free(v);
    } else {
        CHECK(err && strstr(err, "tokenizer.ggml.model") && strstr(err, "gpt2"), "error: %s",
              err ? err : "(none)");
    }
    free(err);
    lc_gguf_free(g);
    CHECK(lc_vocab_load(NULL, NULL) == NULL, "NULL gguf");
}

int main(void)
{
    test_vocab_vectors();
    test_greedy_prompts();
    test_edges();
    test_load_errors();
    return tu_finish("test-tokenizer");
}
