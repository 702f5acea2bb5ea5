/*
 * test-spec.c - speculative decoding (src/llm/spec.h):
 *   - lc_spec_lookup: exact drafts for hand-made histories (longest n-gram first, most recent
 *     occurrence, at most max_draft, none without a match);
 *   - lc_context_verify: with every ISA built and the CPU has, on models of every weight-kernel
 *     kind (Q4_1 x16 / gemm, Q4_0, Q8_0, F16, F32, IQ4_NL, K-quants with a Q6_K output) and both KV
 *     types, row i of a verified batch has the same bits as a one-token decode after tokens
 *     0 .. i-1 -- also after a rejected tail was verified and is overwritten;
 *   - greedy generation with speculation gives exactly the tokens of plain greedy decoding, on
 *     a repetitive and an ordinary prompt, for several lengths and a context that fills up,
 *     and the repetitive prompt really accepts drafts;
 *   - the engine (chat) gives the same greedy reply with and without speculation.
 */
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "llm/arch/kernels.h"
#include "llm/context.h"
#include "llm/model.h"
#include "llm/sampler.h"
#include "llm/spec.h"
#include "llm/tokenizer.h"
#include "testutil.h"

static const char *const REPETITIVE =
    "One two three four five six. One two three four five six. One two three four five six. "
    "One two three four five six. One two three four five six. One two three";
static const char *const ORDINARY = "Once upon a time, there was a little girl named Lily.";

static void test_lookup(void)
{
    int32_t out[16];
    /* 1 2 3 4 9 1 2 3 | tok 4: the 4-gram 1 2 3 4 occurred at 0, followed by 9 1 2 3 4 */
    const int32_t h1[] = {1, 2, 3, 4, 9, 1, 2, 3};
    int32_t n = lc_spec_lookup(h1, 8, 4, 8, out);
    CHECK(n == 5 && out[0] == 9 && out[1] == 1 && out[2] == 2 && out[3] == 3 && out[4] == 4,
          "lookup 4-gram: %d drafted, first %d", n, n > 0 ? out[0] : -1);
    n = lc_spec_lookup(h1, 8, 4, 2, out);
    CHECK(n == 2 && out[0] == 9 && out[1] == 1, "lookup max_draft 2: %d", n);
    CHECK(lc_spec_lookup(h1, 8, 4, 0, out) == 0, "lookup max_draft 0");
    /* the most recent occurrence wins: 5 6 7 | 5 6 8 | 5 | tok 6 -> 8 5 6 */
    const int32_t h2[] = {5, 6, 7, 5, 6, 8, 5};
    n = lc_spec_lookup(h2, 7, 6, 8, out);
    CHECK(n == 3 && out[0] == 8 && out[1] == 5 && out[2] == 6, "lookup most recent: %d, %d", n,
          n > 0 ? out[0] : -1);
    /* a longer n-gram first: 1 2 3 X 2 3 Y 1 2 | tok 3: the 3-gram 1 2 3 -> X, not 2 3 -> Y */
    const int32_t h3[] = {1, 2, 3, 40, 2, 3, 50, 1, 2};
    n = lc_spec_lookup(h3, 9, 3, 1, out);
    CHECK(n == 1 && out[0] == 40, "lookup longest n-gram first: %d, %d", n, n > 0 ? out[0] : -1);
    /* single-token matches are not used (n-grams of 2 at least) */
    const int32_t h4[] = {7, 1, 8, 2};
    CHECK(lc_spec_lookup(h4, 4, 7, 8, out) == 0, "lookup 1-gram");
    CHECK(lc_spec_lookup(NULL, 0, 7, 8, out) == 0, "lookup empty history");
    /* the n-gram at the very end is not its own match: 3 3 | tok 3 -> 3 (from 3 3 3) */
    const int32_t h5[] = {3, 3};
    n = lc_spec_lookup(h5, 2, 3, 8, out);
    CHECK(n == 1 && out[0] == 3, "lookup overlapping: %d", n);
}

static int32_t tokenize(const struct lc_model *m, const char *text, int32_t *toks, int32_t cap)
{
    return lc_tokenize(m->vocab, text, strlen(text), lc_vocab_add_bos(m->vocab), false, toks, cap);
}

static struct lc_context *new_ctx(const struct lc_model *m, int n_ctx, enum lc_type kv, int nt)
{
    struct lc_context_params cp = lc_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = nt;
    cp.kv_type = kv;
    char *err = NULL;
    struct lc_context *c = lc_context_new(m, &cp, &err);
    CHECK(c != NULL, "context: %s", err ? err : "?");
    free(err);
    return c;
}

/* verified rows against one-token decodes, bit for bit */
static void test_verify_bits(const struct lc_model *m, const char *name, enum lc_type kv)
{
    const int32_t V = m->hp.n_vocab;
    struct lc_context *a = new_ctx(m, 128, kv, 2), *b = new_ctx(m, 128, kv, 2);
    if (!a || !b)
        goto out;
    int32_t t[256];
    int32_t n = tokenize(m, REPETITIVE, t, 256);
    CHECK(n > 30, "%s: %d tokens", name, n);
    const int32_t np = 12, nv = 9; /* prompt, then batches of 9 */
    char *err = NULL;
    CHECK(lc_context_decode(a, t, np, 0, false, &err) == 0, "%s: prompt a", name);
    CHECK(lc_context_decode(b, t, np, 0, false, &err) == 0, "%s: prompt b", name);
    /* a wrong tail first, then overwritten by the right one at the same positions */
    int32_t wrong[9];
    for (int i = 0; i < nv; i++)
        wrong[i] = (t[np + i] + 7) % V;
    CHECK(lc_context_verify(a, wrong, nv, np, &err) == 0, "%s: verify wrong", name);
    CHECK(lc_context_n_past(a) == np + nv, "%s: n_past %d", name, lc_context_n_past(a));
    int32_t pos = np;
    for (int round = 0; round < 2; round++) {
        CHECK(lc_context_verify(a, t + pos, nv, pos, &err) == 0, "%s: verify", name);
        for (int i = 0; i < nv; i++) {
            CHECK(lc_context_decode(b, t + pos + i, 1, pos + i, false, &err) == 0, "%s: decode",
                  name);
            const float *la = lc_context_logits(a, i), *lb = lc_context_logits(b, -1);
            CHECK(la && lb && memcmp(la, lb, (size_t)V * sizeof(float)) == 0,
                  "%s (%s KV, %s): row %d of the batch at %d differs from a one-token decode",
                  name, kv == LC_TYPE_F16 ? "f16" : "f32", lc_kernels()->isa, i, pos);
        }
        pos += nv;
    }
    /* too many tokens for the batch: a clear error, nothing evaluated */
    CHECK(lc_context_verify(a, t, 513, 0, &err) == -1 && err && strstr(err, "exceed the batch"),
          "%s: oversize verify: %s", name, err ? err : "(null)");
    free(err);
out:
    lc_context_free(a);
    lc_context_free(b);
}

/*
 * Greedy generation as the CLI does it, with (draft > 0) or without speculation: the ids into
 * out, the count returned.  Stops at n_predict, end of text or a full context.
 */
static int generate(const struct lc_model *m, const char *text, int n_predict, int n_ctx,
                    int draft, int32_t *out, struct lc_spec *stats)
{
    struct lc_context *c = new_ctx(m, n_ctx, LC_TYPE_F16, 2);
    struct lc_sampler_params sp = lc_sampler_default_params();
    sp.temp = 0;
    struct lc_sampler *s = lc_sampler_new(&sp, m->hp.n_vocab);
    struct lc_spec spec;
    int32_t *hist = calloc((size_t)n_ctx, sizeof(int32_t));
    int n_gen = 0;
    char *err = NULL;
    if (!c || !s || !hist || lc_spec_init(&spec, draft) != 0)
        goto out;
    int32_t n = tokenize(m, text, hist, n_ctx);
    const bool ok = n > 0 && lc_context_decode(c, hist, n, 0, false, &err) == 0;
    CHECK(ok, "prompt: %d tokens, %s", n, err ? err : "(null)");
    if (!ok) {
        lc_spec_free(&spec);
        goto out;
    }
    for (int32_t i = 0; i < n; i++)
        lc_sampler_accept(s, hist[i]);
    int32_t pos = n;
    while (n_gen < n_predict) {
        int32_t tok = lc_spec_sample(&spec, c, s);
        if (lc_vocab_is_eog(m->vocab, tok))
            break;
        lc_sampler_accept(s, tok);
        out[n_gen++] = tok;
        if (n_gen >= n_predict || pos >= n_ctx)
            break;
        hist[pos] = tok;
        int r = lc_spec_step(&spec, c, s, hist, tok, pos, n_predict - n_gen, &err);
        CHECK(r == 0, "spec step at %d: %s", pos, err ? err : "(null)");
        if (r != 0)
            break;
        pos++;
    }
    if (stats)
        *stats = spec;
    else
        lc_spec_free(&spec);
out:
    free(err);
    free(hist);
    lc_sampler_free(s);
    lc_context_free(c);
    return n_gen;
}

static void test_generate(const struct lc_model *m, const char *name)
{
    static int32_t plain[512], fast[512];
    static const int lengths[] = {1, 2, 3, 9, 40, 300};
    const char *texts[] = {REPETITIVE, ORDINARY};
    for (int ti = 0; ti < 2; ti++)
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
            const int len = lengths[li];
            struct lc_spec st;
            const int np = generate(m, texts[ti], len, 512, 0, plain, NULL);
            const int nf = generate(m, texts[ti], len, 512, 8, fast, &st);
            CHECK(np == nf && memcmp(plain, fast, (size_t)np * sizeof(int32_t)) == 0,
                  "%s (%s): %s prompt, %d tokens: speculation changed the tokens (%d vs %d)",
                  name, lc_kernels()->isa, ti ? "ordinary" : "repetitive", len, np, nf);
            if (ti == 0 && len == 300)
                CHECK(st.n_accepted >= 20 && st.n_batches > 0,
                      "%s: repetitive prompt: %lld of %lld drafts accepted", name,
                      (long long)st.n_accepted, (long long)st.n_drafted);
            lc_spec_free(&st);
        }
    /* a context that fills up during the reply: drafts never go past n_ctx */
    const int np = generate(m, ORDINARY, 500, 80, 0, plain, NULL);
    const int nf = generate(m, ORDINARY, 500, 80, 8, fast, NULL);
    CHECK(np == nf && np > 0 && memcmp(plain, fast, (size_t)np * sizeof(int32_t)) == 0,
          "%s: full context: %d vs %d tokens", name, np, nf);
}

/* ---------------------------------------------------------------- the engine */

static bool collect(struct lc_engine *e, char *text, size_t cap, bool want_loaded)
{
    size_t len = 0;
    text[0] = '\0';
    for (int spins = 0; spins < 600;) {
        struct lc_event ev;
        if (!lc_engine_poll(e, &ev)) {
            struct pollfd p = { lc_engine_fd(e), POLLIN, 0 };
            if (poll(&p, 1, 100) == 0)
                spins++;
            continue;
        }
        if (ev.type == LC_EV_LOADED && want_loaded && !ev.more)
            return true;
        if (ev.type == LC_EV_ERROR && want_loaded)
            return false;
        if (ev.type == LC_EV_TEXT && len + ev.len < cap) {
            memcpy(text + len, ev.text, ev.len);
            len += ev.len;
            text[len] = '\0';
        }
        if (ev.type == LC_EV_DONE)
            return true;
    }
    return false;
}

static void engine_replies(const char *path, int draft, char out[2][4096])
{
    struct lc_engine_config cfg = { .model_path = path, .n_ctx = 512, .n_threads = 2,
                                    .n_batch = 512, .n_predict = 120, .spec_draft = draft };
    cfg.sampling = lc_sampler_default_params();
    cfg.sampling.temp = 0;
    char *err = NULL;
    struct lc_engine *e = lc_engine_start(&cfg, &err);
    CHECK(e != NULL, "engine: %s", err ? err : "(null)");
    free(err);
    if (!e)
        return;
    char tmp[64];
    CHECK(collect(e, tmp, sizeof tmp, true), "engine: no LOADED");
    lc_engine_submit(e, REPETITIVE);
    CHECK(collect(e, out[0], 4096, false), "engine: first reply");
    lc_engine_submit(e, "One two three four five six. One two");
    CHECK(collect(e, out[1], 4096, false), "engine: second reply");
    lc_engine_free(e);
}

int main(void)
{
    test_lookup();
    char path[512];
    tu_shared("models/stories260K-ff192-q4_1.gguf", path, sizeof(path));
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "SKIP: %s missing\n", path);
        return tu_finish("test-spec");
    }
    static const char *const models[] = {
        "stories260K-ff192-q4_1.gguf", "stories260K-ff192-q4_0.gguf", "stories260K-ff192-q8_0.gguf",
        "stories260K-ff192-f16.gguf",  "stories260K.gguf",            "synth-small-q4_1.gguf",
        "synth-small-q4_k_m.gguf",     "tinystories-656k/TinyStories-656K-IQ4_NL.gguf",
    };
    static const char *const isas[] = {"scalar", "avx2", "avx512", "neon"};
    for (int i = 0; i < 4; i++) {
        if (!lc_kernels_isa_available(isas[i]))
            continue;
        CHECK(lc_kernels_select(isas[i], NULL) == 0, "select %s", isas[i]);
        for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
            char mp[512], rel[256];
            snprintf(rel, sizeof rel, "models/%s", models[k]);
            tu_shared(rel, mp, sizeof mp);
            char *err = NULL;
            struct lc_model *m = lc_model_load(mp, false, &err);
            CHECK(m != NULL, "load %s: %s", models[k], err ? err : "(null)");
            free(err);
            if (!m)
                continue;
            test_verify_bits(m, models[k], LC_TYPE_F16);
            test_verify_bits(m, models[k], LC_TYPE_F32);
            /* whole generations: the default model with every ISA, the others with the best */
            if (k == 0 || i == 2 || (i == 1 && !lc_kernels_isa_available("avx512")) || i == 3)
                test_generate(m, models[k]);
            lc_model_free(m);
        }
        fprintf(stderr, "test-spec: %s: %zu models\n", isas[i], sizeof models / sizeof models[0]);
    }
    CHECK(lc_kernels_select("auto", NULL) == 0, "select auto");
    static char plain[2][4096], fast[2][4096];
    engine_replies(path, 0, plain);
    engine_replies(path, 8, fast);
    CHECK(plain[0][0] && strcmp(plain[0], fast[0]) == 0,
          "engine: first reply with speculation differs:\n[%s]\n[%s]", plain[0], fast[0]);
    CHECK(plain[1][0] && strcmp(plain[1], fast[1]) == 0,
          "engine: second reply with speculation differs:\n[%s]\n[%s]", plain[1], fast[1]);
    return tu_finish("test-spec");
}
